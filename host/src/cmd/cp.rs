//! `nmcp cp`: run queue dumps through the firmware command processor.

use std::path::PathBuf;

use clap::Subcommand;
use nmcp_emulator::gpu::catalog::KERNEL_OBJECT_BASE;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::Calibration;
use nmcp_emulator::gpu::queue::demo::{self, Expect};
use nmcp_emulator::gpu::queue::{sample, DumpPacket, MemSection, QueueDump};
use nmcp_emulator::gpu::sim::GpuSim;
use nmcp_emulator::gpu::system::{
    CpSystem, CpSystemConfig, FixedTimeEngine, PacketOutcome, DEFAULT_DEVICE,
};
use nmcp_emulator::gpu::KernelEngine;
use nmcp_firmware::cp::features::{workgroups, CuResources};
use nmcp_firmware::cp::{CdPredictor, CpAction};
use nmcp_isa::aql::{self, AqlPacket, DeviceRange};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use serde_json::json;

use crate::goldyloc::eval::constant_predictor;
use crate::goldyloc::train::PredictorFile;

use std::fmt::Write as _;

use super::aql::{dispatch_ids, emit, outln, read_dump};
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

#[derive(clap::Args, Debug)]
struct GenDumpArgs {
    /// Output file.
    out: PathBuf,
    /// Queues (1..=32).
    #[arg(long, default_value_t = 4)]
    queues: u8,
    /// GEMMs per queue.
    #[arg(long, default_value_t = 2)]
    gemms: u32,
    /// Add one malformed packet of every kind the CP rejects.
    #[arg(long)]
    malformed: bool,
    /// Real GEMMs from a GO library (the JSON list of GEMM extension records that
    /// `nmcp goldyloc tune --out FILE` writes): GEMM i of every queue is library entry
    /// `offset + i`, so each step is `--queues` independent instances of one size.
    #[arg(long, conflicts_with = "app")]
    library: Option<PathBuf>,
    /// Real GEMMs of one application of Table 7.3 (e.g. bert, gnmt), tuned through the
    /// cached GOLDYLOC tuning step on the MI100 (its GO library records).
    #[arg(long)]
    app: Option<String>,
    /// First library entry used.
    #[arg(long, default_value_t = 0)]
    offset: usize,
}

#[derive(clap::Args, Debug)]
struct ReplayArgs {
    /// The dump file.
    file: PathBuf,
    /// One JSON object per packet, then a summary object.
    #[arg(long)]
    json: bool,
    /// Predict this concurrency degree for every GEMM (1, 2, 4, 8 or 16) instead of
    /// using a trained predictor.
    #[arg(long, conflicts_with = "predictor")]
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
    #[arg(long, default_value_t = 120)]
    cus: u32,
    /// Workgroup slots per CU of the fixed engine.
    #[arg(long, default_value_t = 8)]
    slots: u32,
    /// Time of one GEMM workgroup in the fixed engine, ns.
    #[arg(long, default_value_t = 1000.0)]
    wg_ns: f64,
    /// Device memory, `BASE:LEN`; default: the dump's DEVICE directive, else 256 MiB at
    /// 0x10000000. The top 16 MiB hold the replay's queue rings.
    #[arg(long, value_parser = super::aql::parse_range)]
    device: Option<nmcp_isa::aql::DeviceRange>,
    /// Stop after this many simulation steps.
    #[arg(long, default_value_t = 10_000_000)]
    max_steps: u64,
}

/// Runs `nmcp cp`.
pub fn run(args: CpArgs) -> CmdResult {
    match args.command {
        CpCommand::GenDump(a) => gen_dump(&a),
        CpCommand::Replay(a) => replay(&a),
    }
}

/// Device range of dumps with real GO-library GEMMs: starts at the catalog's kernel
/// objects, so the CP's "kernel object inside device memory" check holds for them.
pub const GO_DEVICE: DeviceRange = DeviceRange {
    base: KERNEL_OBJECT_BASE,
    len: 0x1000_0000,
};
/// Extension records of a GO dump (256 B apart).
const GO_EXT_BASE: u64 = KERNEL_OBJECT_BASE + 0x0100_0000;
/// Completion signals of a GO dump (8 B apart).
const GO_SIGNAL_BASE: u64 = KERNEL_OBJECT_BASE + 0x0200_0000;

/// A dump of real GEMMs: GEMM `i` on every queue is `library[offset + i]` (wrapping),
/// dispatched with its isolated kernel object and a grid of its isolated kernel's
/// workgroups (the CP derives the workgroups of the kernel it picks from the record).
fn go_dump(library: &[GemmExt], queues: u8, gemms: u32, offset: usize) -> QueueDump {
    let mut dump = QueueDump {
        device: Some(GO_DEVICE),
        ..QueueDump::default()
    };
    let mut next_signal = 0u64;
    for i in 0..gemms as usize {
        let Some(ext) = library.get((offset + i) % library.len().max(1)) else {
            break;
        };
        let ext_addr = GO_EXT_BASE + i as u64 * 0x100;
        dump.memory.push(MemSection {
            addr: ext_addr,
            bytes: ext.encode().to_vec(),
        });
        let Some(k) = ext.kernels.first() else {
            continue;
        };
        let wg = k.workgroup_size.max(1);
        let groups = workgroups(ext, k).min(u64::from(u32::MAX / u32::from(wg)));
        let grid = u32::try_from(groups).unwrap_or(1).max(1) * u32::from(wg);
        for q in 0..queues {
            let sig = GO_SIGNAL_BASE + next_signal * 8;
            next_signal += 1;
            let p = AqlPacket::KernelDispatch(sample::dispatch(
                k.kernel_object,
                grid,
                wg,
                ext_addr,
                sig,
            ));
            dump.packets.push(DumpPacket {
                offset: 0,
                queue: q,
                bytes: aql::encode(&p),
            });
        }
    }
    // Per-queue order, as a ring dump would be.
    dump.packets.sort_by_key(|p| p.queue);
    dump
}

fn gen_dump(a: &GenDumpArgs) -> CmdResult {
    if !(1..=32).contains(&a.queues) {
        return Err(format!("--queues {} outside 1..=32", a.queues).into());
    }
    let library: Option<Vec<GemmExt>> = match (&a.library, &a.app) {
        (Some(path), _) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?)
        }
        (None, Some(app)) => Some(super::goldyloc::app_library("mi100", app)?),
        (None, None) => None,
    };
    if let Some(lib) = library {
        if lib.is_empty() {
            return Err("the GO library is empty".into());
        }
        if a.malformed {
            return Err("--malformed applies to the sample dump only".into());
        }
        let dump = go_dump(&lib, a.queues, a.gemms, a.offset);
        std::fs::write(&a.out, dump.to_bytes()).map_err(|e| format!("{}: {e}", a.out.display()))?;
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
    std::fs::write(&a.out, dump.to_bytes()).map_err(|e| format!("{}: {e}", a.out.display()))?;
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
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let f: PredictorFile =
                serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            (f, path.display().to_string())
        }
        None => (
            super::goldyloc::default_predictor(&a.gpu)?,
            format!("trained for {} (cache)", a.gpu),
        ),
    };
    Ok((file.to_predictor(), source))
}

fn us(t: Option<f64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("{:.3}", t / 1e3))
}

fn describe(o: Option<&PacketOutcome>) -> (String, serde_json::Value) {
    let Some(o) = o else {
        return ("not loaded".into(), json!({"status": "not_loaded"}));
    };
    match o.action {
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
    let ids = dispatch_ids(&dump);
    let queues = dump
        .packets
        .iter()
        .map(|p| usize::from(p.queue) + 1)
        .max()
        .unwrap_or(1);
    let per_queue_max = ids.iter().map(|&i| i + 1).max().unwrap_or(1);
    let ring_packets = u32::try_from(per_queue_max.next_power_of_two().max(16))
        .map_err(|_| "too many packets on one queue")?;
    let device = a.device.or(dump.device).unwrap_or(DEFAULT_DEVICE);
    match a.engine.as_str() {
        "gpu" => {
            let gpu = GpuConfig::preset(&a.gpu)?;
            let res = gpu.cu_resources();
            let engine = GpuSim::new(gpu, Calibration::default());
            let label = format!("gpu {}", a.gpu);
            run_replay(
                a,
                &dump,
                (device, queues, ring_packets),
                res,
                predictor,
                engine,
                (&label, &predictor_source),
            )
        }
        "fixed" => {
            let engine = FixedTimeEngine::new(a.cus, a.slots, a.wg_ns);
            let label = format!("fixed {} CUs x {} slots, {} ns/WG", a.cus, a.slots, a.wg_ns);
            run_replay(
                a,
                &dump,
                (device, queues, ring_packets),
                CuResources::MI100,
                predictor,
                engine,
                (&label, &predictor_source),
            )
        }
        other => Err(format!("--engine {other}: must be gpu or fixed").into()),
    }
}

fn run_replay<E: KernelEngine>(
    a: &ReplayArgs,
    dump: &QueueDump,
    (device, queues, ring_packets): (DeviceRange, usize, u32),
    resources: CuResources,
    predictor: CdPredictor,
    engine: E,
    (engine_label, predictor_source): (&str, &str),
) -> CmdResult {
    let ids = dispatch_ids(dump);
    let cfg = CpSystemConfig {
        device,
        queues,
        ring_packets,
        predictor,
        resources,
        ..CpSystemConfig::default()
    };
    let mut sys = CpSystem::new(cfg, engine).map_err(|e| format!("{}: {e}", a.file.display()))?;
    sys.load_dump(dump)
        .map_err(|e| format!("{}: {e}", a.file.display()))?;
    let summary = sys.run(a.max_steps);

    let mut out = String::new();
    if !a.json {
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
    for (p, &id) in dump.packets.iter().zip(&ids) {
        let o = sys.outcomes().get(&(p.queue, id));
        let kind = match aql::decode(&p.bytes) {
            Ok(AqlPacket::KernelDispatch(k)) if k.gemm_ext_address != 0 => "gemm",
            Ok(pk) => pk.header().packet_type.name(),
            Err(_) => "malformed",
        };
        let (text, mut value) = describe(o);
        match value["status"].as_str() {
            Some("dispatched") => dispatched += 1,
            Some("rejected") => rejected += 1,
            Some("pending") => pending += 1,
            _ => {}
        }
        let (launch, placed, done) = o.map_or((None, None, None), |o| {
            (o.launched_at, o.all_dispatched_at, o.completed_at)
        });
        if a.json {
            let m = value.as_object_mut().expect("describe returns an object");
            m.insert("queue".into(), json!(p.queue));
            m.insert("dispatch_id".into(), json!(id));
            m.insert("offset".into(), json!(p.offset));
            m.insert("kind".into(), json!(kind));
            m.insert("launched_ns".into(), json!(launch));
            m.insert("all_dispatched_ns".into(), json!(placed));
            m.insert("completed_ns".into(), json!(done));
            outln!(out, "{value}");
        } else {
            outln!(
                out,
                "{:>2} {:>4} {:<15} {:>10} {:>10} {:>10}  {text}",
                p.queue,
                id,
                kind,
                us(launch),
                us(placed),
                us(done)
            );
        }
    }
    let work = sys.cp_work();
    if a.json {
        outln!(
            out,
            "{}",
            json!({"summary": {
                "packets": dump.packets.len(), "dispatched": dispatched,
                "rejected": rejected, "pending": pending,
                "makespan_ns": summary.end, "cp_cycles": summary.cp_cycles,
                "cp_busy_ns": summary.cp_busy_ns, "events": summary.events,
                "truncated": summary.truncated,
                "max_handler_cycles": summary.max_handler_cycles,
                "cp_mem_accesses": work.mem_accesses,
                "cp_packets_inspected": work.packets_inspected,
                "cp_predictions": work.predictions, "cp_decisions": work.decisions,
                "cp_ns_per_decision": summary.cp_busy_ns / work.decisions.max(1) as f64,
                "engine": engine_label, "predictor": predictor_source,
            }})
        );
    } else {
        outln!(
            out,
            "\nengine: {engine_label}; predictor: {predictor_source}"
        );
        outln!(out,
            "{} packets: {dispatched} dispatched, {rejected} rejected, {pending} pending; makespan {:.3} us",
            dump.packets.len(),
            summary.end / 1e3
        );
        outln!(out,
            "CP: {} cycles ({:.3} us busy at 1.5 GHz) over {} events (longest handler {} cycles); {} memory accesses, {} packets inspected, {} decisions, {} predictions",
            summary.cp_cycles,
            summary.cp_busy_ns / 1e3,
            summary.events,
            summary.max_handler_cycles,
            work.mem_accesses,
            work.packets_inspected,
            work.decisions,
            work.predictions
        );
        if summary.truncated {
            outln!(
                out,
                "warning: stopped at --max-steps {} with work left",
                a.max_steps
            );
        }
    }
    emit(&out)
}
