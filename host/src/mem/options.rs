//! The options of `nmcp mem` (typed: clap arguments and scenario keys from one struct,
//! with the relations between them) and their conversion into a [`MemRun`].

use std::path::PathBuf;

use clap::ValueEnum;
use nmcp_emulator::hbm::config::{CommandBus, PagePolicy, RefreshMode, DEFAULT_PRESET};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::ControllerConfig;
use nmcp_emulator::trace::{Pattern, TraceFormat};

use super::MemRun;
use crate::scenario::Relation;

/// Default request count: about a second of wall time for a stream in a release build.
const DEFAULT_REQUESTS: u64 = 1_000_000;

/// Trace file format.
#[derive(ValueEnum, Clone, Copy, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FormatArg {
    /// `ADDR R|W CYCLE` lines.
    Dramsim3,
    /// `LD|ST ADDR` lines.
    Ramulator,
}

/// Synthetic pattern.
#[derive(ValueEnum, Clone, Copy, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatternArg {
    /// Consecutive addresses.
    Stream,
    /// Uniformly random addresses.
    Random,
}

/// Row-buffer policy.
#[derive(ValueEnum, Clone, Copy, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PageArg {
    /// Keep rows open.
    Open,
    /// Close rows no queued request hits.
    Closed,
}

/// Refresh mode.
#[derive(ValueEnum, Clone, Copy, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefreshArg {
    /// REF to all banks every tREFI.
    AllBank,
    /// REFpb to one bank every tREFI / banks.
    PerBank,
    /// No refresh.
    Off,
}

crate::scenario::parsed!(mod requests = parse_requests => u64);

impl crate::scenario::Options for MemOptions {
    const RELATIONS: &'static [Relation] = &[
        Relation::Conflicts("preset", "preset-file"),
        Relation::Requires("format", "trace"),
        Relation::Conflicts("pattern", "trace"),
        Relation::Conflicts("requests", "trace"),
        Relation::Conflicts("write-ratio", "trace"),
    ];
}

/// The options of `nmcp mem`, a scenario's keys; [`MemOptions::run_config`] is the run.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MemOptions {
    /// Built-in preset (see `nmcp presets`).
    #[arg(long, default_value = DEFAULT_PRESET)]
    pub(crate) preset: String,
    /// A preset TOML file (start from `nmcp presets --dump hbm2-2000`).
    #[arg(long, value_name = "FILE")]
    pub(crate) preset_file: Option<PathBuf>,
    /// Trace file to run instead of a synthetic pattern.
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Trace format (detected from the first line when omitted).
    #[arg(long, value_enum)]
    pub(crate) format: Option<FormatArg>,
    /// Synthetic pattern.
    #[arg(long, value_enum, default_value = "stream")]
    pub(crate) pattern: PatternArg,
    /// Synthetic request count (at most 2^34: hours of simulation at 1 M requests/s).
    #[arg(long, default_value_t = DEFAULT_REQUESTS, value_parser = parse_requests)]
    #[serde(deserialize_with = "requests::one")]
    pub(crate) requests: u64,
    /// Request size in bytes: 32 or 64.
    #[arg(long, default_value_t = 64)]
    pub(crate) size: u32,
    /// Fraction of synthetic requests that are writes.
    #[arg(long, default_value_t = 0.0, value_parser = crate::cmd::numbers::fraction_f64)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::fraction_f64::one")]
    pub(crate) write_ratio: f64,
    /// Seed of the synthetic generator.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Read and write queue depth per pseudo-channel, 1..=65536 (default: the preset's).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub(crate) queue_depth: Option<usize>,
    /// Row-buffer policy (default: the preset's).
    #[arg(long, value_enum)]
    pub(crate) page: Option<PageArg>,
    /// Refresh mode (default: the preset's).
    #[arg(long, value_enum)]
    pub(crate) refresh: Option<RefreshArg>,
    /// Address mapping: `stream` (the preset's), `page-interleaved`, or a bit order such as
    /// `ro-ba-bg-co-pc-ch` (MSB to LSB; `co:1` takes one bit of a field).
    #[arg(long)]
    pub(crate) mapping: Option<String>,
    /// Command interface: `shared` (JEDEC HBM2: a channel's pseudo-channels share one row
    /// and one column command bus) or `per-pseudo-channel` (default: the preset's).
    #[arg(long, value_enum)]
    pub(crate) command_bus: Option<BusArg>,
    /// Look-ahead window: activated requests per bank held beyond the queue, 0 or 1
    /// (default: the preset's; 1 is Ramulator 2's active buffer).
    #[arg(long)]
    pub(crate) activated_per_bank: Option<u32>,
    /// Threads: 1 runs serially; N > 1 (0: one per core) steps the channels in parallel in
    /// windows, this thread included, at most one per core and channel; with one core or
    /// channel, or windows under 1024 cycles, the run is serial. The result is the serial
    /// run's either way (paced traces gain; saturating streams run serially anyway).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1024))]
    pub(crate) threads: usize,
    /// Cycles per parallel window (with --threads other than 1), 1..=2^32.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    pub(crate) window: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Write the issued DRAM commands to FILE in DRAMPower's command-trace format (CSV:
    /// cycle, command, pseudo-channel as rank, bank group, bank, row, column, data), for
    /// cross-checking the energy (docs/decisions/energy.md). Holds the commands in memory
    /// until the run ends; needs a serial run from the start (no --threads, no resume).
    #[arg(long, value_name = "FILE")]
    pub(crate) command_trace: Option<PathBuf>,
}

/// Command interface.
#[derive(ValueEnum, Clone, Copy, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BusArg {
    /// The pseudo-channels of a channel share one row and one column command bus.
    Shared,
    /// Each pseudo-channel has its own buses.
    PerPseudoChannel,
}

fn load_preset(args: &MemOptions) -> Result<HbmPreset, Box<dyn std::error::Error>> {
    match &args.preset_file {
        Some(path) => {
            let text = crate::cmd::io::read_input_text(path)?;
            HbmPreset::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()).into())
        }
        None => Ok(HbmPreset::builtin(&args.preset)?),
    }
}

impl MemOptions {
    /// The run these options ask for: the preset (built in or from a file) with the
    /// command bus, look-ahead, mapping, queue depth, page policy and refresh given.
    ///
    /// # Errors
    /// A size other than 32 or 64, a write ratio outside [0, 1], an unreadable or bad
    /// preset, a mapping or look-ahead the preset refuses, a zero queue depth.
    pub(crate) fn run_config(&self) -> Result<MemRun, Box<dyn std::error::Error>> {
        if self.size != 32 && self.size != 64 {
            return Err(format!("--size must be 32 or 64, not {}", self.size).into());
        }
        if !(0.0..=1.0).contains(&self.write_ratio) {
            return Err(
                format!("--write-ratio must be in [0, 1], not {}", self.write_ratio).into(),
            );
        }
        let mut preset = load_preset(self)?;
        if let Some(b) = self.command_bus {
            preset.organisation.command_bus = match b {
                BusArg::Shared => CommandBus::Shared,
                BusArg::PerPseudoChannel => CommandBus::PerPseudoChannel,
            };
        }
        if let Some(n) = self.activated_per_bank {
            preset.controller.activated_per_bank = n;
            preset
                .check()
                .map_err(|e| format!("--activated-per-bank {n}: {e}"))?;
        }
        let mapping_name = self.mapping.as_deref().unwrap_or(STREAM_MAPPING);
        let mapping = AddressMapping::named(mapping_name, &preset)
            .map_err(|e| format!("--mapping {mapping_name}: {e}"))?;
        let depth = self
            .queue_depth
            .unwrap_or(preset.controller.queue_depth as usize);
        if depth == 0 {
            return Err("--queue-depth must be at least 1".into());
        }
        let mut cfg = ControllerConfig::with_depth(&preset, depth);
        if let Some(p) = self.page {
            cfg.page_policy = match p {
                PageArg::Open => PagePolicy::Open,
                PageArg::Closed => PagePolicy::Closed,
            };
        }
        if let Some(r) = self.refresh {
            cfg.refresh = match r {
                RefreshArg::AllBank => RefreshMode::AllBank,
                RefreshArg::PerBank => RefreshMode::PerBank,
                RefreshArg::Off => RefreshMode::Off,
            };
        }

        Ok(MemRun {
            preset,
            mapping,
            cfg,
            trace: self.trace.clone(),
            format: self.format.map(|f| match f {
                FormatArg::Dramsim3 => TraceFormat::DramSim3,
                FormatArg::Ramulator => TraceFormat::Ramulator,
            }),
            pattern: match self.pattern {
                PatternArg::Stream => Pattern::Stream,
                PatternArg::Random => Pattern::Random,
            },
            requests: self.requests,
            size: self.size,
            write_ratio: self.write_ratio,
            seed: self.seed,
            threads: self.threads,
            window: self.window,
            log_commands: self.command_trace.is_some(),
        })
    }
}

/// `--requests`: a count from 1 up to 2^34.
fn parse_requests(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .replace('_', "")
        .parse()
        .map_err(|e| format!("{s:?}: {e}"))?;
    if n == 0 {
        return Err("0 requests: nothing to simulate".into());
    }
    if n > 1 << 34 {
        return Err(format!(
            "{n} requests: above 2^34 (about 5 hours at 1 M requests/s); use a trace file or split the run"
        ));
    }
    Ok(n)
}
