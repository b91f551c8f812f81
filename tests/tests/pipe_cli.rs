//! Output into a pipe closed early (`nmcp ... | head -c 100`) ends the run quietly, as
//! Unix tools do, instead of a "failed printing to stdout" panic.

mod common;

use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_run_without_a_panic() {
    // Over a megabyte of JSON printed with `println!`: far more than a pipe buffers.
    let private = std::env::temp_dir().join(format!("nmcp-pipe-{}", std::process::id()));
    let cache = common::test_cache(&private);
    let args = ["goldyloc", "eval", "--quick", "--json"];
    let mut child = Command::new(env!("CARGO_BIN_EXE_nmcp-cli"))
        .args(args)
        .env("NMCP_CACHE", &cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut out = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    let mut first = [0u8; 100];
    out.read_exact(&mut first)
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    // The rest of the output goes into a closed pipe.
    drop(out);
    let o = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    let _ = std::fs::remove_dir_all(&private);
}
