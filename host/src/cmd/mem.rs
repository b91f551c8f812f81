//! `nmcp mem`: run a memory trace or a synthetic pattern through the HBM model and print
//! achieved bandwidth next to the preset's peak, latency, row-buffer and command figures,
//! and the simulator's own speed. The options and the printing; the run is
//! [`crate::mem::run`].

use crate::scenario::Relation;
use std::path::PathBuf;

use clap::ValueEnum;
use nmcp_emulator::energy::drampower::{self, TraceShape};
use nmcp_emulator::energy::{CommandEnergy, DramActivity, DramEnergy, EnergyReport};
use nmcp_emulator::hbm::config::{CommandBus, PagePolicy, RefreshMode, DEFAULT_PRESET};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, LoggedCommand, RunReport, Stepping};
use nmcp_emulator::trace::{Pattern, TraceFormat};

use super::CmdResult;
use crate::mem::{MemOutcome, MemRun};

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

impl crate::scenario::Options for MemArgs {
    const RELATIONS: &'static [Relation] = &[
        Relation::Conflicts("preset", "preset-file"),
        Relation::Requires("format", "trace"),
        Relation::Conflicts("pattern", "trace"),
        Relation::Conflicts("requests", "trace"),
        Relation::Conflicts("write-ratio", "trace"),
    ];
}

/// Arguments of `nmcp mem`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct MemArgs {
    /// Built-in preset (see `nmcp presets`).
    #[arg(long, default_value = DEFAULT_PRESET)]
    preset: String,
    /// A preset TOML file (start from `nmcp presets --dump hbm2-2000`).
    #[arg(long, value_name = "FILE")]
    preset_file: Option<PathBuf>,
    /// Trace file to run instead of a synthetic pattern.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Trace format (detected from the first line when omitted).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Synthetic pattern.
    #[arg(long, value_enum, default_value = "stream")]
    pattern: PatternArg,
    /// Synthetic request count (at most 2^34: hours of simulation at 1 M requests/s).
    #[arg(long, default_value_t = DEFAULT_REQUESTS, value_parser = parse_requests)]
    #[serde(deserialize_with = "requests::one")]
    requests: u64,
    /// Request size in bytes: 32 or 64.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Fraction of synthetic requests that are writes.
    #[arg(long, default_value_t = 0.0, value_parser = super::numbers::fraction_f64)]
    #[serde(deserialize_with = "super::numbers::de::fraction_f64::one")]
    write_ratio: f64,
    /// Seed of the synthetic generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Read and write queue depth per pseudo-channel, 1..=65536 (default: the preset's).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    queue_depth: Option<usize>,
    /// Row-buffer policy (default: the preset's).
    #[arg(long, value_enum)]
    page: Option<PageArg>,
    /// Refresh mode (default: the preset's).
    #[arg(long, value_enum)]
    refresh: Option<RefreshArg>,
    /// Address mapping: `stream` (the preset's), `page-interleaved`, or a bit order such as
    /// `ro-ba-bg-co-pc-ch` (MSB to LSB; `co:1` takes one bit of a field).
    #[arg(long)]
    mapping: Option<String>,
    /// Command interface: `shared` (JEDEC HBM2: a channel's pseudo-channels share one row
    /// and one column command bus) or `per-pseudo-channel` (default: the preset's).
    #[arg(long, value_enum)]
    command_bus: Option<BusArg>,
    /// Look-ahead window: activated requests per bank held beyond the queue, 0 or 1
    /// (default: the preset's; 1 is Ramulator 2's active buffer).
    #[arg(long)]
    activated_per_bank: Option<u32>,
    /// Threads: 1 runs serially; N > 1 (0: one per core) steps the channels in parallel in
    /// windows, this thread included, at most one per core and channel; with one core or
    /// channel, or windows under 1024 cycles, the run is serial. The result is the serial
    /// run's either way (paced traces gain; saturating streams run serially anyway).
    #[arg(long, default_value_t = 1, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=1024))]
    threads: usize,
    /// Cycles per parallel window (with --threads other than 1), 1..=2^32.
    #[arg(long, default_value_t = 8192, value_parser = clap::value_parser!(u64).range(1..=1 << 32))]
    window: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Write the issued DRAM commands to FILE in DRAMPower's command-trace format (CSV:
    /// cycle, command, pseudo-channel as rank, bank group, bank, row, column, data), for
    /// cross-checking the energy (docs/decisions/energy.md). Holds the commands in memory
    /// until the run ends; needs a serial run from the start (no --threads, no resume).
    #[arg(long, value_name = "FILE")]
    command_trace: Option<PathBuf>,
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

fn load_preset(args: &MemArgs) -> Result<HbmPreset, Box<dyn std::error::Error>> {
    match &args.preset_file {
        Some(path) => {
            let text = super::io::read_input_text(path)?;
            HbmPreset::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()).into())
        }
        None => Ok(HbmPreset::builtin(&args.preset)?),
    }
}

/// Runs `nmcp mem`.
pub fn run(args: MemArgs) -> CmdResult {
    if args.size != 32 && args.size != 64 {
        return Err(format!("--size must be 32 or 64, not {}", args.size).into());
    }
    if !(0.0..=1.0).contains(&args.write_ratio) {
        return Err(format!("--write-ratio must be in [0, 1], not {}", args.write_ratio).into());
    }
    let mut preset = load_preset(&args)?;
    if let Some(b) = args.command_bus {
        preset.organisation.command_bus = match b {
            BusArg::Shared => CommandBus::Shared,
            BusArg::PerPseudoChannel => CommandBus::PerPseudoChannel,
        };
    }
    if let Some(n) = args.activated_per_bank {
        preset.controller.activated_per_bank = n;
        preset
            .check()
            .map_err(|e| format!("--activated-per-bank {n}: {e}"))?;
    }
    let mapping_name = args.mapping.as_deref().unwrap_or(STREAM_MAPPING);
    let mapping = AddressMapping::named(mapping_name, &preset)
        .map_err(|e| format!("--mapping {mapping_name}: {e}"))?;
    let depth = args
        .queue_depth
        .unwrap_or(preset.controller.queue_depth as usize);
    if depth == 0 {
        return Err("--queue-depth must be at least 1".into());
    }
    let mut cfg = ControllerConfig::with_depth(&preset, depth);
    if let Some(p) = args.page {
        cfg.page_policy = match p {
            PageArg::Open => PagePolicy::Open,
            PageArg::Closed => PagePolicy::Closed,
        };
    }
    if let Some(r) = args.refresh {
        cfg.refresh = match r {
            RefreshArg::AllBank => RefreshMode::AllBank,
            RefreshArg::PerBank => RefreshMode::PerBank,
            RefreshArg::Off => RefreshMode::Off,
        };
    }

    let outcome = crate::mem::run(MemRun {
        preset,
        mapping,
        cfg,
        trace: args.trace.clone(),
        format: args.format.map(|f| match f {
            FormatArg::Dramsim3 => TraceFormat::DramSim3,
            FormatArg::Ramulator => TraceFormat::Ramulator,
        }),
        pattern: match args.pattern {
            PatternArg::Stream => Pattern::Stream,
            PatternArg::Random => Pattern::Random,
        },
        requests: args.requests,
        size: args.size,
        write_ratio: args.write_ratio,
        seed: args.seed,
        threads: args.threads,
        window: args.window,
        log_commands: args.command_trace.is_some(),
    })?;
    let MemOutcome {
        report,
        stepping,
        system,
        preset,
        wall_seconds: wall,
    } = outcome;
    let speed = if wall > 0.0 {
        report.requests as f64 / wall
    } else {
        0.0
    };
    let energy = EnergyReport::dram(&DramEnergy::of(
        &DramActivity::from_controllers(system.controllers(), report.cycles),
        &CommandEnergy::of(&preset),
    ));
    if let Some(path) = &args.command_trace {
        let logs: Vec<&[LoggedCommand]> = system.controllers().iter().map(|c| c.log()).collect();
        let shape = TraceShape {
            banks_per_group: preset.organisation.banks_per_group,
            bytes_per_column: preset.organisation.bytes_per_column,
        };
        let text = drampower::trace_text(&logs, shape, report.cycles)
            .map_err(|e| format!("--command-trace: {e}"))?;
        super::io::write_file(path, text.as_bytes())?;
    }
    if args.json {
        let mut v = serde_json::to_value(&report)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("energy".into(), serde_json::to_value(&energy)?);
            o.insert("wall_seconds".into(), wall.into());
            o.insert("requests_per_second".into(), speed.into());
            o.insert("tck_ns".into(), preset.organisation.tck_ns.into());
            if args.threads != 1 {
                let (ran, redone) = system.parallel_windows();
                let (threads, why) = match stepping {
                    Stepping::Parallel(n) => (n, "parallel windows"),
                    Stepping::Serial(why) => (1, why),
                };
                o.insert("threads".into(), threads.into());
                o.insert("stepping".into(), why.into());
                o.insert("parallel_windows".into(), ran.into());
                o.insert("parallel_windows_redone".into(), redone.into());
            }
        }
        stdoutln!("{}", serde_json::to_string(&v)?);
    } else {
        print_table(&report, preset.organisation.tck_ns, wall, speed);
        stdoutln!("energy        {}", energy.line());
    }
    Ok(())
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

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn print_table(r: &RunReport, tck_ns: f64, wall: f64, speed: f64) {
    let entries = r.row_hits + r.row_misses + r.row_conflicts;
    stdoutln!(
        "preset        {} ({} pseudo-channels), mapping {}, {} page, {} refresh, queues {}",
        r.preset,
        r.pseudo_channels,
        r.mapping,
        r.page_policy,
        r.refresh,
        r.queue_depth
    );
    stdoutln!(
        "requests      {} ({} reads, {} writes), {} bytes in {} cycles ({:.1} us)",
        r.requests,
        r.reads,
        r.writes,
        r.bytes,
        r.cycles,
        r.simulated_ns / 1e3
    );
    stdoutln!(
        "bandwidth     {:.1} GB/s of {:.1} GB/s peak ({:.2} % of peak)",
        r.bandwidth_gbps,
        r.peak_gbps,
        r.percent_of_peak
    );
    stdoutln!(
        "read latency  mean {:.1} cycles ({:.1} ns), p99 {} cycles, min {}, max {}",
        r.read_latency_mean,
        r.read_latency_mean * tck_ns,
        r.read_latency_p99,
        r.read_latency_min,
        r.read_latency_max
    );
    stdoutln!(
        "row buffer    hits {} ({:.1} %), misses {} ({:.1} %), conflicts {} ({:.1} %)",
        r.row_hits,
        pct(r.row_hits, entries),
        r.row_misses,
        pct(r.row_misses, entries),
        r.row_conflicts,
        pct(r.row_conflicts, entries)
    );
    for (class, kinds) in &r.requests_by_class {
        if kinds.values().all(|&n| n == 0) {
            continue;
        }
        let bytes = r.bytes_by_class.get(class);
        let part = |kind: &str, plural: &str| {
            let n = kinds.get(kind).copied().unwrap_or(0);
            let b = bytes.and_then(|b| b.get(kind)).copied().unwrap_or(0);
            format!("{n} {plural} ({b} B)")
        };
        stdoutln!(
            "class         {class}: {}, {}, {}",
            part("read", "reads"),
            part("write", "writes"),
            part("update", "updates")
        );
    }
    let cmds: Vec<String> = r.commands.iter().map(|(k, v)| format!("{k} {v}")).collect();
    stdoutln!("commands      {}", cmds.join(", "));
    stdoutln!(
        "utilisation   data bus {:.1} %, banks with a row open {:.1} %, mean read queue {:.1} / {}",
        100.0 * r.data_bus_utilisation,
        100.0 * r.bank_utilisation,
        r.read_queue_mean,
        r.queue_depth
    );
    stdoutln!(
        "simulator     {} requests in {:.3} s = {:.2} M requests/s",
        r.requests,
        wall,
        speed / 1e6
    );
}
