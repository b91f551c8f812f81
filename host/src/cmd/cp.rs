//! `nmcp cp`: run queue dumps through the firmware command processor.

use std::path::PathBuf;

use clap::Subcommand;
use nmcp_emulator::gpu::fixture::go_dump;
use nmcp_emulator::gpu::queue::demo::{self, Expect};
use nmcp_firmware::cp::{CdPredictor, CpAction};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use serde_json::json;

use crate::cp_replay::{self, PacketRow, ReplayEngine, ReplayError, ReplayReport, ReplaySetup};
use crate::goldyloc::eval::constant_predictor;
use crate::goldyloc::pipeline;
use crate::goldyloc::train::PredictorFile;

use std::fmt::Write as _;

use super::io::{emit, outln, read_dump};
use super::CmdResult;

/// Arguments of `nmcp cp`.
#[derive(clap::Args, Debug)]
pub struct CpArgs {
    #[command(subcommand)]
    command: CpCommand,
}

#[derive(Subcommand, Debug)]
enum CpCommand {
    /// Write a sample queue dump: GEMMs with extension records and a non-GEMM kernel on
    /// every queue, a barrier, and optionally one malformed packet of every kind.
    GenDump(GenDumpArgs),
    /// Replay a queue dump through the firmware CP on the emulated GPU and print, per
    /// packet, the CP's decision (CD, kernel object) or the error it completed with, and
    /// the timing.
    Replay(ReplayArgs),
}

#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct GenDumpArgs {
    /// Output file.
    out: PathBuf,
    /// Queues (1..=32).
    #[arg(long, default_value_t = 4)]
    queues: u8,
    /// GEMMs per queue (1..=4096: with 32 queues the replay's rings, the top 16 MiB of
    /// device memory, hold 8192 packets a queue).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=4096))]
    gemms: u32,
    /// Add one malformed packet of every kind the CP rejects.
    #[arg(long)]
    malformed: bool,
    /// Real GEMMs from a GO library (the JSON list of GEMM extension records that
    /// `nmcp goldyloc tune --out FILE` writes): GEMM i of every queue is library entry
    /// `offset + i`, so each step is `--queues` independent instances of one size.
    #[arg(long)]
    library: Option<PathBuf>,
    /// Real GEMMs of one application of Table 7.3 (e.g. bert, gnmt), tuned through the
    /// cached GOLDYLOC tuning step on the MI100 (its GO library records).
    #[arg(long)]
    app: Option<String>,
    /// First library entry used (below the library's length).
    #[arg(long, default_value_t = 0)]
    offset: usize,
}

#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ReplayArgs {
    /// The dump file.
    file: PathBuf,
    /// One JSON object per packet, then a summary object.
    #[arg(long)]
    json: bool,
    /// Predict this concurrency degree for every GEMM (1, 2, 4, 8 or 16) instead of
    /// using a trained predictor.
    #[arg(long)]
    cd: Option<u8>,
    /// The trained predictor (JSON as `nmcp goldyloc train --out FILE` writes it).
    /// Default: the predictor `nmcp goldyloc train` produces for `--gpu`, from the
    /// GOLDYLOC cache (tuned and trained first if not cached).
    #[arg(long)]
    predictor: Option<PathBuf>,
    /// Timing model: `gpu` (the GEMM model, `GpuSim`) or `fixed` (every GEMM workgroup
    /// takes `--wg-ns` in one of `--cus x --slots` slots; a test double).
    #[arg(long, default_value = "gpu")]
    engine: String,
    /// GPU preset of the `gpu` engine (mi100, mi100-half, mi100-quarter, t3-table-8.1).
    #[arg(long, default_value = "mi100")]
    gpu: String,
    /// Compute units of the fixed engine.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u32).range(1..=4096))]
    cus: u32,
    /// Workgroup slots per CU of the fixed engine.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    slots: u32,
    /// Time of one GEMM workgroup in the fixed engine, ns.
    #[arg(long, default_value_t = 1000.0, value_parser = super::numbers::positive_duration_ns)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::positive_duration_ns::one")]
    wg_ns: f64,
    /// Device memory, `BASE:LEN`; default: the dump's DEVICE directive, else 256 MiB at
    /// 0x10000000. The top 16 MiB hold the replay's queue rings.
    #[arg(long, value_parser = super::io::parse_range)]
    #[serde(default, deserialize_with = "device_range::option")]
    device: Option<nmcp_isa::aql::DeviceRange>,
    /// Stop after this many simulation steps; a replay stopped with work left is an error
    /// (after its report).
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    max_steps: u64,
    /// Timeline of the replay: the CP's busy spans, its decisions and every kernel.
    #[command(flatten)]
    #[serde(flatten)]
    timeline: crate::timeline::TimelineArgs,
}

/// Runs `nmcp cp`.
pub fn run(args: CpArgs) -> CmdResult {
    match args.command {
        CpCommand::GenDump(a) => gen_dump(&a),
        CpCommand::Replay(a) => replay(&a),
    }
}

fn gen_dump(a: &GenDumpArgs) -> CmdResult {
    if !(1..=32).contains(&a.queues) {
        return Err(format!("--queues {} outside 1..=32", a.queues).into());
    }
    let library: Option<Vec<GemmExt>> = match (&a.library, &a.app) {
        (Some(path), _) => {
            let text = super::io::read_input_text(path)?;
            Some(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        (None, Some(app)) => Some(pipeline::app_library("mi100", app)?),
        (None, None) => None,
    };
    if let Some(lib) = library {
        if lib.is_empty() {
            return Err("the GO library is empty".into());
        }
        if a.malformed {
            return Err("--malformed applies to the sample dump only".into());
        }
        if a.offset >= lib.len() {
            return Err(format!(
                "--offset {}: the GO library has {} entries (0..{})",
                a.offset,
                lib.len(),
                lib.len()
            )
            .into());
        }
        let dump = go_dump(&lib, a.queues, a.gemms, a.offset);
        super::io::write_file(&a.out, &dump.to_bytes())?;
        let mut out = String::new();
        outln!(
            out,
            "wrote {} GEMM packets ({} sizes x {} queues) from the GO library to {}",
            dump.packets.len(),
            a.gemms,
            a.queues,
            a.out.display()
        );
        return emit(&out);
    }
    let (dump, expect) = demo::dump(a.queues, a.gemms, a.malformed);
    super::io::write_file(&a.out, &dump.to_bytes())?;
    let mut out = String::new();
    let bad = expect
        .iter()
        .filter(|e| matches!(e, Expect::Rejected(_)))
        .count();
    outln!(
        out,
        "wrote {} packets ({bad} malformed) on {} queues and {} memory sections to {}",
        dump.packets.len(),
        a.queues,
        dump.memory.len(),
        a.out.display()
    );
    emit(&out)
}

fn fixed_cd_predictor(cd: u8) -> Result<CdPredictor, String> {
    constant_predictor(cd)
        .ok_or_else(|| format!("--cd {cd}: must be one of {CONCURRENCY_DEGREES:?}"))
}

fn load_predictor(a: &ReplayArgs) -> Result<(CdPredictor, String), Box<dyn std::error::Error>> {
    if let Some(cd) = a.cd {
        return Ok((fixed_cd_predictor(cd)?, format!("constant CD {cd}")));
    }
    let (file, source) = match &a.predictor {
        Some(path) => {
            let text = super::io::read_input_text(path)?;
            let f: PredictorFile =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            (f, path.display().to_string())
        }
        None => (
            pipeline::default_predictor(&a.gpu)?,
            format!("trained for {} (cache)", a.gpu),
        ),
    };
    Ok((file.to_predictor(), source))
}

fn us(t: Option<f64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("{:.3}", t / 1e3))
}

fn describe(p: &PacketRow) -> (String, serde_json::Value) {
    if !p.loaded {
        return ("not loaded".into(), json!({"status": "not_loaded"}));
    }
    match p.action {
        Some(CpAction::Dispatched {
            kernel_object,
            gemm,
            cd,
            predicted_cd,
            swapped,
        }) => (
            format!(
                "{} ko {kernel_object:#x} cd {cd} (predicted {predicted_cd}){}",
                if gemm { "GEMM" } else { "kernel" },
                if swapped { " swapped" } else { "" }
            ),
            json!({"status": "dispatched", "gemm": gemm, "kernel_object": kernel_object,
                   "cd": cd, "predicted_cd": predicted_cd, "swapped": swapped}),
        ),
        Some(CpAction::Rejected(r)) => (
            format!("rejected {} ({}): {r}", r.code(), r.signal_value()),
            json!({"status": "rejected", "code": r.code().name(),
                   "signal_value": r.signal_value(), "reason": r.to_string()}),
        ),
        Some(CpAction::BarrierResolved) => (
            "barrier resolved".into(),
            json!({"status": "barrier_resolved"}),
        ),
        None => (
            "not processed (waiting)".into(),
            json!({"status": "pending"}),
        ),
    }
}

fn replay(a: &ReplayArgs) -> CmdResult {
    let dump = read_dump(&a.file)?;
    let (predictor, predictor_source) = load_predictor(a)?;
    let engine = match a.engine.as_str() {
        "gpu" => ReplayEngine::Gpu(a.gpu.clone()),
        "fixed" => ReplayEngine::Fixed {
            cus: a.cus,
            slots: a.slots,
            wg_ns: a.wg_ns,
        },
        other => return Err(format!("--engine {other}: must be gpu or fixed").into()),
    };
    let setup = ReplaySetup {
        device: a.device,
        engine,
        predictor,
        max_steps: a.max_steps,
        timeline: a.timeline.config(),
    };
    let bar = super::io::spinner(
        format!("replaying {} through the firmware CP", a.file.display()),
        a.json,
    );
    let r = cp_replay::replay(&dump, &setup);
    bar.finish_and_clear();
    let r = r.map_err(|e| -> Box<dyn std::error::Error> {
        match e {
            ReplayError::System(e) => format!("{}: {e}", a.file.display()).into(),
            e => e.into(),
        }
    })?;
    crate::timeline::write_if_asked(&a.timeline, r.timeline.as_ref())?;
    let mut out = String::new();
    let counts = packet_lines(a.json, &r, &mut out);
    summary_lines(a, &r, counts, &predictor_source, &mut out);
    emit(&out)?;
    if r.summary.truncated {
        // The report above is what ran; a replay cut short is not a finished one.
        return Err(format!(
            "{}: replay stopped at --max-steps {} with {} packets pending; raise --max-steps",
            a.file.display(),
            a.max_steps,
            counts.2
        )
        .into());
    }
    Ok(())
}

/// One line per packet; returns (dispatched, rejected, pending).
fn packet_lines(json: bool, r: &ReplayReport, out: &mut String) -> (u64, u64, u64) {
    if !json {
        outln!(
            out,
            "{:>2} {:>4} {:<15} {:>10} {:>10} {:>10}  decision",
            "q",
            "id",
            "type",
            "launch_us",
            "placed_us",
            "done_us"
        );
    }
    let (mut dispatched, mut rejected, mut pending) = (0, 0, 0);
    for p in &r.packets {
        let (text, mut value) = describe(p);
        match value["status"].as_str() {
            Some("dispatched") => dispatched += 1,
            Some("rejected") => rejected += 1,
            Some("pending") => pending += 1,
            _ => {}
        }
        if json {
            let m = value.as_object_mut().expect("describe returns an object");
            m.insert("queue".into(), json!(p.queue));
            m.insert("dispatch_id".into(), json!(p.dispatch_id));
            m.insert("offset".into(), json!(p.offset));
            m.insert("kind".into(), json!(p.kind));
            m.insert("launched_ns".into(), json!(p.launched_ns));
            m.insert("all_dispatched_ns".into(), json!(p.all_dispatched_ns));
            m.insert("completed_ns".into(), json!(p.completed_ns));
            outln!(out, "{value}");
        } else {
            outln!(
                out,
                "{:>2} {:>4} {:<15} {:>10} {:>10} {:>10}  {text}",
                p.queue,
                p.dispatch_id,
                p.kind,
                us(p.launched_ns),
                us(p.all_dispatched_ns),
                us(p.completed_ns)
            );
        }
    }
    (dispatched, rejected, pending)
}

fn summary_lines(
    a: &ReplayArgs,
    r: &ReplayReport,
    (dispatched, rejected, pending): (u64, u64, u64),
    predictor_source: &str,
    out: &mut String,
) {
    let s = &r.summary;
    let (engine_label, packets) = (&r.engine, r.packets.len());
    if a.json {
        outln!(
            out,
            "{}",
            json!({"summary": {
                "packets": packets, "dispatched": dispatched,
                "rejected": rejected, "pending": pending,
                "makespan_ns": s.makespan_ns, "cp_cycles": s.cp_cycles,
                "cp_busy_ns": s.cp_busy_ns, "events": s.events,
                "truncated": s.truncated,
                "max_handler_cycles": s.max_handler_cycles,
                "cp_mem_accesses": s.cp_mem_accesses,
                "cp_packets_inspected": s.cp_packets_inspected,
                "cp_predictions": s.cp_predictions, "cp_decisions": s.cp_decisions,
                "cp_ns_per_decision": s.cp_busy_ns / s.cp_decisions.max(1) as f64,
                "engine": engine_label, "predictor": predictor_source,
            }})
        );
        return;
    }
    outln!(
        out,
        "\nengine: {engine_label}; predictor: {predictor_source}"
    );
    outln!(out,
        "{packets} packets: {dispatched} dispatched, {rejected} rejected, {pending} pending; makespan {:.3} us",
        s.makespan_ns / 1e3
    );
    outln!(out,
        "CP: {} cycles ({:.3} us busy at {} GHz) over {} events (longest handler {} cycles); {} memory accesses, {} packets inspected, {} decisions, {} predictions",
        s.cp_cycles,
        s.cp_busy_ns / 1e3,
        s.cp_clock_hz as f64 / 1e9,
        s.events,
        s.max_handler_cycles,
        s.cp_mem_accesses,
        s.cp_packets_inspected,
        s.cp_decisions,
        s.cp_predictions
    );
    if s.truncated {
        outln!(
            out,
            "warning: stopped at --max-steps {} with work left",
            a.max_steps
        );
    }
}

crate::scenario::parsed!(mod device_range = crate::cmd::io::parse_range => nmcp_isa::aql::DeviceRange);

impl crate::scenario::Options for GenDumpArgs {
    const RELATIONS: &'static [crate::scenario::Relation] =
        &[crate::scenario::Relation::Conflicts("library", "app")];
}

impl crate::scenario::Options for ReplayArgs {
    const RELATIONS: &'static [crate::scenario::Relation] =
        &[crate::scenario::Relation::Conflicts("cd", "predictor")];
}

impl CpArgs {
    /// The typed options of the command run.
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            CpCommand::GenDump(a) => a,
            CpCommand::Replay(a) => a,
        }
    }
}
