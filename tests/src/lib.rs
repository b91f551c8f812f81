//! Helpers for the workspace-level integration tests in `tests/tests/`.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the CLI under test with `args`.
pub fn nmcp(args: &[&str]) -> Output {
    Command::new(nmcp_path())
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", nmcp_path().display()))
}

/// Path of the `nmcp-cli` binary cargo built for this package, next to the test
/// executable's `deps/` directory.
pub fn nmcp_path() -> PathBuf {
    let mut p = std::env::current_exe().unwrap_or_default();
    p.pop();
    if p.ends_with("deps") {
        p.pop();
    }
    p.join(format!("nmcp-cli{}", std::env::consts::EXE_SUFFIX))
}
