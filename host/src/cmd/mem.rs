//! `nmcp mem`: run a memory trace or a synthetic pattern through the HBM model and print
//! achieved bandwidth next to the preset's peak, latency, row-buffer and command figures,
//! and the simulator's own speed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressStyle};
use nmcp_emulator::energy::drampower::{self, TraceShape};
use nmcp_emulator::energy::{CommandEnergy, DramActivity, DramEnergy, EnergyReport};
use nmcp_emulator::hbm::config::{CommandBus, PagePolicy, RefreshMode, DEFAULT_PRESET};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{
    ControllerConfig, LoggedCommand, MemoryState, MemorySystem, Request, RunReport, Stepping,
};
use nmcp_emulator::trace::{
    Pattern, Synthetic, TraceError, TraceFormat, TracePosition, TraceReader,
};
use serde::{Deserialize, Serialize};

use crate::checkpoint;

use super::CmdResult;

/// Default request count: about a second of wall time for a stream in a release build.
const DEFAULT_REQUESTS: u64 = 1_000_000;

/// `--checkpoint-every` default for `nmcp mem`: accepted requests between checkpoints
/// (about a second of simulation in a release build).
pub const CHECKPOINT_EVERY: u32 = 1_000_000;

/// What an `nmcp mem` checkpoint saves (postcard, inside the checkpoint file): the memory
/// system's state right after request `accepted` was accepted, and where the request
/// stream stands.
#[derive(Debug, Serialize, Deserialize)]
struct MemCheckpoint {
    /// Requests accepted so far (the synthetic generator skips as many on resume).
    accepted: u64,
    /// For a trace: which file it was and where its next unread line starts.
    trace: Option<TraceMark>,
    /// Controllers, queues, banks, refresh, buses, statistics.
    system: MemoryState,
}

/// A trace file's identity and the reader's position in it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct TraceMark {
    /// File size, bytes.
    len: u64,
    /// CRC-32 of the whole file.
    crc32: u32,
    /// The position after the last accepted request's line.
    position: TracePosition,
}

/// Size and CRC-32 of a file (read once, a buffer at a time).
/// A checkpointed trace is read twice (here, then streamed; again on resume), so it must
/// be a regular file: a pipe would be consumed here and is refused.
fn file_identity(path: &std::path::Path) -> Result<(u64, u32), String> {
    use std::io::Read;
    // Before opening: opening a pipe would wait for a writer.
    let regular = std::fs::metadata(path).is_ok_and(|m| m.is_file());
    if !regular && path.exists() {
        return Err(format!(
            "{}: not a regular file: a checkpointed run reads its trace again on resume (drop --checkpoint-dir to stream a pipe)",
            path.display()
        ));
    }
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut len = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        len += n as u64;
        h.update(&buf[..n]);
    }
    Ok((len, h.finalize()))
}

/// A trace reader that publishes its position after every line it yields (for the
/// checkpoint hook, which cannot reach into the boxed request stream).
struct Tracked<R> {
    reader: TraceReader<R>,
    position: std::rc::Rc<std::cell::Cell<TracePosition>>,
}

impl<R: std::io::BufRead> Iterator for Tracked<R> {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        let r = self.reader.next();
        self.position.set(self.reader.position());
        r
    }
}

/// Progress bars appear only for runs longer than this.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Trace file format.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum FormatArg {
    /// `ADDR R|W CYCLE` lines.
    Dramsim3,
    /// `LD|ST ADDR` lines.
    Ramulator,
}

/// Synthetic pattern.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum PatternArg {
    /// Consecutive addresses.
    Stream,
    /// Uniformly random addresses.
    Random,
}

/// Row-buffer policy.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum PageArg {
    /// Keep rows open.
    Open,
    /// Close rows no queued request hits.
    Closed,
}

/// Refresh mode.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub enum RefreshArg {
    /// REF to all banks every tREFI.
    AllBank,
    /// REFpb to one bank every tREFI / banks.
    PerBank,
    /// No refresh.
    Off,
}

/// Arguments of `nmcp mem`.
#[derive(clap::Args, Debug)]
pub struct MemArgs {
    /// Built-in preset (see `nmcp presets`).
    #[arg(long, default_value = DEFAULT_PRESET, conflicts_with = "preset_file")]
    preset: String,
    /// A preset TOML file (start from `nmcp presets --dump hbm2-2000`).
    #[arg(long, value_name = "FILE")]
    preset_file: Option<PathBuf>,
    /// Trace file to run instead of a synthetic pattern.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Trace format (detected from the first line when omitted).
    #[arg(long, value_enum, requires = "trace")]
    format: Option<FormatArg>,
    /// Synthetic pattern.
    #[arg(long, value_enum, default_value = "stream", conflicts_with = "trace")]
    pattern: PatternArg,
    /// Synthetic request count (at most 2^34: hours of simulation at 1 M requests/s).
    #[arg(long, default_value_t = DEFAULT_REQUESTS, conflicts_with = "trace",
          value_parser = parse_requests)]
    requests: u64,
    /// Request size in bytes: 32 or 64.
    #[arg(long, default_value_t = 64)]
    size: u32,
    /// Fraction of synthetic requests that are writes.
    #[arg(long, default_value_t = 0.0, conflicts_with = "trace",
          value_parser = super::numbers::fraction_f64)]
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
#[derive(ValueEnum, Clone, Copy, Debug)]
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

    // Checkpoints (--checkpoint-dir): the memory system's state and the stream position
    // every N accepted requests; a resumed run restores both and carries on.
    if checkpoint::requested() && args.threads != 1 {
        return Err(
            "--checkpoint-dir with --threads other than 1: `nmcp mem` checkpoints only the serial run (drop --threads)"
                .into(),
        );
    }
    let session = checkpoint::Session::start_every("mem", 0, CHECKPOINT_EVERY)?;
    let resumed: Option<MemCheckpoint> = match &session {
        Some(s) => s.lock().map_err(|_| "checkpoint lock poisoned")?.state()?,
        None => None,
    };
    let trace_id = match (&session, &args.trace) {
        (Some(_), Some(path)) => Some(file_identity(path)?),
        _ => None,
    };
    if let Some(ck) = &resumed {
        match (&ck.trace, trace_id, &args.trace) {
            (Some(m), Some((len, crc)), Some(path)) if m.len != len || m.crc32 != crc => {
                return Err(format!(
                    "{}: the trace changed since the checkpoint ({} bytes, CRC-32 {:08x}; the checkpoint was taken on {} bytes, CRC-32 {:08x}): run again from the start",
                    path.display(), len, crc, m.len, m.crc32
                )
                .into());
            }
            (None, None, None) | (Some(_), Some(_), Some(_)) => {}
            _ => {
                return Err(
                    "checkpoint: the saved run and this one differ in whether they read a trace"
                        .into(),
                )
            }
        }
    }
    let resumed_at = resumed.as_ref().map(|c| c.accepted);
    let trace_position: std::rc::Rc<std::cell::Cell<TracePosition>> =
        std::rc::Rc::new(std::cell::Cell::new(TracePosition {
            offset: 0,
            line: 0,
            last_cycle: 0,
            format: None,
        }));

    // A trace is streamed: memory stays constant in its length. A bad line stops the
    // stream; the error (with its line and column) is reported after the run.
    let trace_error: std::rc::Rc<std::cell::RefCell<Option<TraceError>>> = Default::default();
    let (source, total): (Box<dyn Iterator<Item = Request>>, u64) = match &args.trace {
        Some(path) => {
            let mut file = std::fs::File::open(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            super::io::note_input(path);
            let format = args.format.map(|f| match f {
                FormatArg::Dramsim3 => TraceFormat::DramSim3,
                FormatArg::Ramulator => TraceFormat::Ramulator,
            });
            let at = resumed.as_ref().and_then(|c| c.trace).map(|m| m.position);
            if let Some(p) = at {
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(p.offset)).map_err(|e| {
                    format!("{}: cannot seek to byte {}: {e}", path.display(), p.offset)
                })?;
            }
            let input = std::io::BufReader::with_capacity(1 << 16, file);
            let reader = match at {
                Some(p) => TraceReader::resume(input, p, args.size),
                None => TraceReader::new(input, format, args.size),
            };
            let slot = trace_error.clone();
            let unwrap = move |r: Result<Request, TraceError>| match r {
                Ok(req) => Some(req),
                Err(e) => {
                    *slot.borrow_mut() = Some(e);
                    None
                }
            };
            let reqs: Box<dyn Iterator<Item = Request>> = if session.is_some() {
                trace_position.set(reader.position());
                Box::new(
                    Tracked {
                        reader,
                        position: trace_position.clone(),
                    }
                    .map_while(unwrap),
                )
            } else {
                Box::new(reader.map_while(unwrap))
            };
            (reqs, 0)
        }
        None => {
            let pattern = match args.pattern {
                PatternArg::Stream => Pattern::Stream,
                PatternArg::Random => Pattern::Random,
            };
            let mut gen = Synthetic::new(
                pattern,
                args.requests,
                args.size,
                preset.capacity_bytes(),
                args.write_ratio,
                args.seed,
            );
            // Resumed: the requests accepted before the checkpoint are generated again
            // and dropped (the generator is a pure function of its seed and index).
            for _ in 0..resumed_at.unwrap_or(0) {
                gen.next();
            }
            (Box::new(gen), args.requests)
        }
    };

    // User caps (--max-events, --max-sim-time): the source stops at the first request
    // past either, and the run ends with an error saying what was reached. Events are the
    // requests admitted plus the refreshes an idle stretch before each arrival holds (one
    // per pseudo-channel every tREFI; the controller handles each), so that a trace with
    // a gap of 10^15 cycles is stopped by --max-events too, not simulated refresh by
    // refresh for days.
    let caps = crate::limits::sim_limits();
    let cap_hit: std::rc::Rc<std::cell::RefCell<Option<nmcp_emulator::sim::LimitReached>>> =
        Default::default();
    let source: Box<dyn Iterator<Item = Request>> = if caps == Default::default() {
        source
    } else {
        let slot = cap_hit.clone();
        let ps_per_cycle = (preset.organisation.tck_ns * 1000.0).round() as u64;
        let mut events = resumed_at.unwrap_or(0);
        let mut last_arrival = 0u64;
        let trefi = u64::from(preset.timing.trefi).max(1);
        let pcs = u64::from(preset.pseudo_channels());
        Box::new(source.map_while(move |r| {
            let idle_refreshes =
                (r.arrival.saturating_sub(last_arrival) / trefi).saturating_mul(pcs);
            last_arrival = last_arrival.max(r.arrival);
            events = events.saturating_add(1).saturating_add(idle_refreshes);
            match caps.check(r.arrival.saturating_mul(ps_per_cycle), events) {
                Ok(()) => Some(r),
                Err(e) => {
                    *slot.borrow_mut() = Some(e);
                    None
                }
            }
        }))
    };
    let mut system = MemorySystem::new(&preset, mapping, cfg);
    if args.command_trace.is_some() {
        if args.threads != 1 || resumed.is_some() {
            return Err(
                "--command-trace needs a serial run from the first request (--threads 1, not resumed)"
                    .into(),
            );
        }
        for c in system.controllers_mut() {
            c.set_logging(true);
        }
    }
    if let Some(ck) = resumed {
        system
            .restore(ck.system)
            .map_err(|e| format!("checkpoint: {e} (was it written by this command line?)"))?;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stepping = Stepping::choose(args.threads, cores, system.parallel_groups(), args.window);
    let start = Instant::now();
    let mut bar: Option<ProgressBar> = None;
    let mut on_progress = |accepted| {
        if bar.is_none() && start.elapsed() > PROGRESS_AFTER {
            let b = ProgressBar::new(total);
            let template = if total > 0 {
                "{bar:40} {pos}/{len} requests ({per_sec}, eta {eta})"
            } else {
                "{pos} requests ({per_sec})"
            };
            if let Ok(style) = ProgressStyle::with_template(template) {
                b.set_style(style);
            }
            bar = Some(b);
        }
        if let Some(b) = &bar {
            b.set_position(accepted);
        }
    };
    let checkpoint_error: std::cell::RefCell<Option<Box<dyn std::error::Error>>> =
        Default::default();
    let report = if let Some(session) = &session {
        let every = u64::from(
            session
                .lock()
                .map_err(|_| "checkpoint lock poisoned")?
                .every(),
        );
        let hook = |sys: &MemorySystem, accepted: u64| {
            if !accepted.is_multiple_of(every) {
                return true;
            }
            let saved = sys
                .state()
                .map_err(|e| format!("checkpoint: {e}").into())
                .and_then(|system| -> Result<(), Box<dyn std::error::Error>> {
                    let ck = MemCheckpoint {
                        accepted,
                        trace: trace_id.map(|(len, crc32)| TraceMark {
                            len,
                            crc32,
                            position: trace_position.get(),
                        }),
                        system,
                    };
                    session
                        .lock()
                        .map_err(|_| "checkpoint lock poisoned")?
                        .put_state(&ck)?;
                    Ok(())
                });
            match saved {
                Ok(()) => true,
                Err(e) => {
                    *checkpoint_error.borrow_mut() = Some(e);
                    false
                }
            }
        };
        system.run_checkpointed(source, &mut on_progress, resumed_at, hook)
    } else {
        system.run_stepped(source, stepping, args.window, &mut on_progress)
    };
    let wall = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(e) = checkpoint_error.borrow_mut().take() {
        return Err(e);
    }
    if let (Some(e), Some(path)) = (trace_error.borrow_mut().take(), &args.trace) {
        return Err(format!("{}:{e}", path.display()).into());
    }
    if let Some(e) = cap_hit.borrow_mut().take() {
        return Err(format!(
            "memory run stopped: {e} (requests and the refreshes of idle stretches counted as events, arrival cycles as time; {} requests finished)",
            report.requests
        )
        .into());
    }
    if report.requests == 0 {
        // Only an empty trace gets here (`--requests` is at least 1): a report of nothing
        // would look like a run.
        let what = args
            .trace
            .as_ref()
            .map_or_else(|| "the run".to_string(), |p| p.display().to_string());
        return Err(
            format!("{what}: holds no requests (an empty trace); nothing to report").into(),
        );
    }
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
