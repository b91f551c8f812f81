//! End-to-end checks through the CLI.

mod common;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

#[test]
fn help_lists_subcommands() {
    let out = common::nmcp(NMCP, &["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in ["mem", "presets", "asm", "disasm"] {
        assert!(text.contains(sub), "--help does not list {sub}: {text}");
    }
}
