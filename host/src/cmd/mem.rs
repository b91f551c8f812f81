//! `nmcp mem`. (Filled in by issue 2.)

use super::CmdResult;

/// Arguments of `nmcp mem`.
#[derive(clap::Args, Debug)]
pub struct MemArgs {}

/// Runs `nmcp mem`.
pub fn run(_args: MemArgs) -> CmdResult {
    Err("not built yet".into())
}
