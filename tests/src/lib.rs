//! Helpers for the workspace-level integration tests in `tests/tests/`.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the `nmcp` binary that cargo built for this test run.
pub fn nmcp(args: &[&str]) -> Output {
    Command::new(nmcp_path())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nmcp: {e}"))
}

/// Path of the `nmcp` binary next to the test executable.
pub fn nmcp_path() -> PathBuf {
    if let Some(p) = option_env!("CARGO_BIN_EXE_nmcp") {
        return PathBuf::from(p);
    }
    let mut p = std::env::current_exe().unwrap_or_default();
    p.pop();
    if p.ends_with("deps") {
        p.pop();
    }
    p.join("nmcp")
}
