//! Helpers for the workspace-level integration tests in `tests/tests/`.
//!
//! The CLI binary is the package's `nmcp-cli`; an integration test gets its path from
//! Cargo as `env!("CARGO_BIN_EXE_nmcp-cli")` and passes it in as `bin`.

use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the CLI `bin` (the path Cargo gives the test) with `args`.
pub fn nmcp(bin: &str, args: &[&str]) -> Output {
    Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"))
}

/// A scratch directory for one test binary (named after `tag` and the process).
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nmcp-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("temp dir {}: {e}", d.display()));
    d
}

/// The offline cache a CLI test runs with: `$NMCP_TEST_CACHE` when set (`.ci/run` sets one
/// directory for the whole run, so the tests, the report test and the report step tune
/// each GEMM set once), else `dir/cache`, private to the test binary.
pub fn test_cache(dir: &std::path::Path) -> PathBuf {
    std::env::var_os("NMCP_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("cache"))
}

/// Runs the CLI `bin` with its offline cache ([`test_cache`]) and asserts it succeeded.
pub fn nmcp_cached(bin: &str, dir: &std::path::Path, args: &[&str]) -> Output {
    let out = Command::new(bin)
        .args(args)
        .env("NMCP_CACHE", test_cache(dir))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin}: {e}"));
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
