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

/// A scratch directory for one test binary (named after `tag` and the process).
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nmcp-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("temp dir {}: {e}", d.display()));
    d
}

/// Runs the CLI with its offline cache in `dir/cache` and asserts it succeeded.
pub fn nmcp_cached(dir: &std::path::Path, args: &[&str]) -> Output {
    let out = Command::new(nmcp_path())
        .args(args)
        .env("NMCP_CACHE", dir.join("cache"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", nmcp_path().display()));
    assert!(
        out.status.success(),
        "nmcp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// One JSON value per line of `stdout`.
pub fn json_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}
