//! What the CLI tests share: the binary under test (the package's `nmcp-cli`, the same
//! `nmcp_host::run_cli` as `nmcp`), running it (in a directory, with the offline cache),
//! scratch directories, JSON lines, and the 104-point grid of the sweep and Slurm tests.
#![allow(dead_code)] // each test binary uses its own part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The CLI under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_nmcp-cli");

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
pub fn test_cache(dir: &Path) -> PathBuf {
    std::env::var_os("NMCP_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("cache"))
}

/// Runs the CLI `bin` with its offline cache ([`test_cache`]) and asserts it succeeded.
pub fn nmcp_cached(bin: &str, dir: &Path, args: &[&str]) -> Output {
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

/// Runs nmcp in `dir`: exit code, stdout, stderr.
pub fn run(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("runs nmcp");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// 2 patterns x 2 sizes x 2 write ratios x 13 seeds = 104 points of a 400-request
/// `nmcp mem` run each.
pub const GRID: &str = r#"# A sweep over the HBM model's synthetic patterns.
command = "mem"
seeds = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]

[base]
requests = 400
page = "closed"

[grid]
pattern = ["stream", "random"]
size = [32, 64]
write-ratio = [0.0, 0.5]
"#;
