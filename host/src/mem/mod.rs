//! One `nmcp mem` run as a library call: the request stream (a trace, streamed, or a
//! synthetic pattern), the user's simulation caps on it, checkpoints of the memory
//! system's mid-run state and their resumption, and the run itself (serial,
//! checkpointed or channel-parallel). [`MemOptions`] (`options.rs`) are the typed options
//! and build the [`MemRun`]; `cmd/mem.rs` prints the [`MemOutcome`].

mod checkpoint;
mod options;

pub(crate) use options::MemOptions;

use crate::checkpoint as session;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem, Request, RunReport, Stepping};
use nmcp_emulator::trace::{
    Pattern, Synthetic, TraceError, TraceFormat, TracePosition, TraceReader,
};

use self::checkpoint::{file_identity, MemCheckpoint, TraceMark, Tracked};

/// `--checkpoint-every` default for `nmcp mem`: accepted requests between checkpoints
/// (about a second of simulation in a release build).
pub const CHECKPOINT_EVERY: u32 = 1_000_000;

/// Progress bars appear only for runs longer than this.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// What one memory run is: the memory system and the request stream.
pub struct MemRun {
    pub preset: HbmPreset,
    pub mapping: AddressMapping,
    pub cfg: ControllerConfig,
    /// A trace file to stream (else the synthetic pattern).
    pub trace: Option<PathBuf>,
    /// The trace's format (detected from its first line when `None`).
    pub format: Option<TraceFormat>,
    pub pattern: Pattern,
    pub requests: u64,
    /// Request size, bytes (32 or 64).
    pub size: u32,
    pub write_ratio: f64,
    pub seed: u64,
    /// 1: serial; otherwise the channels stepped in parallel windows, this thread
    /// included (0: one per core); `Stepping::choose` runs serially where threads cannot
    /// pay off.
    pub threads: usize,
    /// Cycles per parallel window.
    pub window: u64,
    /// Log every issued command (for `--command-trace`).
    pub log_commands: bool,
}

/// A finished run: its report, the memory system as the run left it, and the wall time.
pub struct MemOutcome {
    pub report: RunReport,
    /// How the channels were stepped (serial, and why, or parallel on N threads).
    pub stepping: Stepping,
    pub system: MemorySystem,
    pub preset: HbmPreset,
    pub wall_seconds: f64,
}

/// Runs `r` (resuming from a checkpoint when `nmcp resume` asked for it), with the
/// process's simulation caps; an error says what stopped it and where.
pub fn run(r: MemRun) -> Result<MemOutcome, Box<dyn std::error::Error>> {
    let MemRun {
        preset,
        mapping,
        cfg,
        trace,
        format,
        pattern,
        requests,
        size,
        write_ratio,
        seed,
        threads,
        window,
        log_commands,
    } = r;
    // Checkpoints (--checkpoint-dir): the memory system's state and the stream position
    // every N accepted requests; a resumed run restores both and carries on.
    if session::requested() && threads != 1 {
        return Err(
            "--checkpoint-dir with --threads other than 1: `nmcp mem` checkpoints only the serial run (drop --threads)"
                .into(),
        );
    }
    let session = session::Session::start_every("mem", 0, CHECKPOINT_EVERY)?;
    let resumed: Option<MemCheckpoint> = match &session {
        Some(s) => s.lock().map_err(|_| "checkpoint lock poisoned")?.state()?,
        None => None,
    };
    let trace_id = match (&session, &trace) {
        (Some(_), Some(path)) => Some(file_identity(path)?),
        _ => None,
    };
    if let Some(ck) = &resumed {
        match (&ck.trace, trace_id, &trace) {
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
    let (source, total): (Box<dyn Iterator<Item = Request>>, u64) = match &trace {
        Some(path) => {
            let mut file = std::fs::File::open(path)
                .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
            crate::cmd::io::note_input(path);
            let at = resumed.as_ref().and_then(|c| c.trace).map(|m| m.position);
            if let Some(p) = at {
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(p.offset)).map_err(|e| {
                    format!("{}: cannot seek to byte {}: {e}", path.display(), p.offset)
                })?;
            }
            let input = std::io::BufReader::with_capacity(1 << 16, file);
            let reader = match at {
                Some(p) => TraceReader::resume(input, p, size),
                None => TraceReader::new(input, format, size),
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
            let mut gen = Synthetic::new(
                pattern,
                requests,
                size,
                preset.capacity_bytes(),
                write_ratio,
                seed,
            );
            // Resumed: the requests accepted before the checkpoint are generated again
            // and dropped (the generator is a pure function of its seed and index).
            for _ in 0..resumed_at.unwrap_or(0) {
                gen.next();
            }
            (Box::new(gen), requests)
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
    if log_commands {
        if threads != 1 || resumed.is_some() {
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
    let stepping = Stepping::choose(threads, cores, system.parallel_groups(), window);
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
        system.run_stepped(source, stepping, window, &mut on_progress)
    };
    let wall = start.elapsed().as_secs_f64();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some(e) = checkpoint_error.borrow_mut().take() {
        return Err(e);
    }
    if let (Some(e), Some(path)) = (trace_error.borrow_mut().take(), &trace) {
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
        let what = trace
            .as_ref()
            .map_or_else(|| "the run".to_string(), |p| p.display().to_string());
        return Err(
            format!("{what}: holds no requests (an empty trace); nothing to report").into(),
        );
    }
    Ok(MemOutcome {
        report,
        stepping,
        system,
        preset,
        wall_seconds: wall,
    })
}
