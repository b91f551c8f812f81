//! `nmcp cp`: run queue dumps through the firmware command processor.

use std::path::PathBuf;

use clap::Subcommand;
use nmcp_emulator::gpu::queue::demo::{self, Expect};
use nmcp_emulator::gpu::system::{
    CpSystem, CpSystemConfig, FixedTimeEngine, PacketOutcome, DEFAULT_DEVICE,
};
use nmcp_firmware::cp::features::FRAC_BITS;
use nmcp_firmware::cp::{CdPredictor, CpAction, CLASS_COUNT};
use nmcp_isa::aql::{self, AqlPacket};
use nmcp_isa::gemm_ext::CONCURRENCY_DEGREES;
use serde_json::json;

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
}

#[derive(clap::Args, Debug)]
struct ReplayArgs {
    /// The dump file.
    file: PathBuf,
    /// One JSON object per packet, then a summary object.
    #[arg(long)]
    json: bool,
    /// Predict this concurrency degree for every GEMM (1, 2, 4, 8 or 16). Without it
    /// the untrained predictor answers 1 (baseline behaviour).
    #[arg(long)]
    cd: Option<u8>,
    /// Compute units of the test GPU.
    #[arg(long, default_value_t = 120)]
    cus: u32,
    /// Workgroup slots per CU.
    #[arg(long, default_value_t = 8)]
    slots: u32,
    /// Time of one GEMM workgroup, ns.
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

fn gen_dump(a: &GenDumpArgs) -> CmdResult {
    if !(1..=32).contains(&a.queues) {
        return Err(format!("--queues {} outside 1..=32", a.queues).into());
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

fn constant_predictor(cd: u8) -> Result<CdPredictor, String> {
    let class = CONCURRENCY_DEGREES
        .iter()
        .position(|&d| d == cd)
        .ok_or_else(|| format!("--cd {cd}: must be one of {CONCURRENCY_DEGREES:?}"))?;
    let mut p = CdPredictor {
        bias_q16: [0; CLASS_COUNT],
        ..CdPredictor::default()
    };
    p.bias_q16[class] = 1 << FRAC_BITS;
    Ok(p)
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
    let predictor = match a.cd {
        Some(cd) => constant_predictor(cd)?,
        None => CdPredictor::default(),
    };
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
    let cfg = CpSystemConfig {
        device: a.device.or(dump.device).unwrap_or(DEFAULT_DEVICE),
        queues,
        ring_packets,
        predictor,
        ..CpSystemConfig::default()
    };
    let engine = FixedTimeEngine::new(a.cus, a.slots, a.wg_ns);
    let mut sys = CpSystem::new(cfg, engine).map_err(|e| format!("{}: {e}", a.file.display()))?;
    sys.load_dump(&dump)
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
            }})
        );
    } else {
        outln!(out,
            "\n{} packets: {dispatched} dispatched, {rejected} rejected, {pending} pending; makespan {:.3} us",
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
