//! `nmcp presets`: list the built-in HBM presets, check a user's preset file, or print a
//! preset's TOML as a starting point.

use std::path::PathBuf;

use nmcp_emulator::hbm::config::{builtin_toml, BUILTIN_PRESETS};
use nmcp_emulator::hbm::{HbmPreset, PresetError};

use super::CmdResult;

/// Arguments of `nmcp presets`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PresetsArgs {
    /// Check a preset TOML file; prints the first broken rule and the field it concerns.
    #[arg(long, value_name = "FILE")]
    check: Option<PathBuf>,
    /// Print a built-in preset's TOML.
    #[arg(long, value_name = "NAME")]
    dump: Option<String>,
}

/// Runs `nmcp presets`.
pub fn run(args: PresetsArgs) -> CmdResult {
    if let Some(path) = args.check {
        let text = super::io::read_input_text(&path)?;
        let p = HbmPreset::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        stdoutln!(
            "{}: ok: preset `{}`, {} pseudo-channels, peak {:.1} GB/s",
            path.display(),
            p.name,
            p.pseudo_channels(),
            p.peak_gbps()
        );
        return Ok(());
    }
    if let Some(name) = args.dump {
        let text = builtin_toml(&name).ok_or(PresetError::Unknown(name))?;
        stdout!("{text}");
        return Ok(());
    }
    stdoutln!(
        "{:<14} {:>4} {:>9} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>9}  description",
        "name",
        "PCs",
        "peak GB/s",
        "GiB",
        "tCK",
        "CL",
        "tRCD",
        "tRP",
        "tRAS",
        "tRFC",
        "tCCDWL",
        "refresh"
    );
    for (name, _) in BUILTIN_PRESETS {
        let p = HbmPreset::builtin(name)?;
        let t = &p.timing;
        stdoutln!(
            "{:<14} {:>4} {:>9.1} {:>8} {:>5} {:>5} {:>5} {:>5} {:>5} {:>5} {:>6} {:>9}  {}",
            p.name,
            p.pseudo_channels(),
            p.peak_gbps(),
            p.capacity_bytes() >> 30,
            format!("{}ns", p.organisation.tck_ns),
            t.cl,
            t.trcdrd,
            t.trp,
            t.tras,
            t.trfc,
            t.tccdwl,
            match p.refresh.mode {
                nmcp_emulator::hbm::config::RefreshMode::AllBank => "all-bank",
                nmcp_emulator::hbm::config::RefreshMode::PerBank => "per-bank",
                nmcp_emulator::hbm::config::RefreshMode::Off => "off",
            },
            p.description
        );
    }
    Ok(())
}

impl crate::scenario::Options for PresetsArgs {
    const RELATIONS: &'static [crate::scenario::Relation] =
        &[crate::scenario::Relation::Conflicts("check", "dump")];
}
