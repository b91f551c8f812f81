//! `nmcp asm` and `nmcp disasm`. (Filled in by issue 2.)

use super::CmdResult;

/// Arguments of `nmcp asm`.
#[derive(clap::Args, Debug)]
pub struct AsmArgs {}

/// Arguments of `nmcp disasm`.
#[derive(clap::Args, Debug)]
pub struct DisasmArgs {}

/// Runs `nmcp asm`.
pub fn run_asm(_args: AsmArgs) -> CmdResult {
    Err("not built yet".into())
}

/// Runs `nmcp disasm`.
pub fn run_disasm(_args: DisasmArgs) -> CmdResult {
    Err("not built yet".into())
}
