//! What several of the host's CLI tests share: running the binary in a directory, and
//! the 104-point sweep grid of the sweep and Slurm tests.
#![allow(dead_code)] // each test binary uses its own part

use std::path::Path;
use std::process::Command;

/// The CLI under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_nmcp");

/// The offline cache a CLI test runs with: `$NMCP_TEST_CACHE` when set (`.ci/run` sets one
/// directory for the whole run, so every test and the report step tune each GEMM set
/// once), else `private`, the test's own.
pub fn test_cache(private: &Path) -> std::path::PathBuf {
    std::env::var_os("NMCP_TEST_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| private.to_path_buf())
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
