//! `nmcp presets`. (Filled in by issue 2.)

use super::CmdResult;

/// Arguments of `nmcp presets`.
#[derive(clap::Args, Debug)]
pub struct PresetsArgs {}

/// Runs `nmcp presets`.
pub fn run(_args: PresetsArgs) -> CmdResult {
    Err("not built yet".into())
}
