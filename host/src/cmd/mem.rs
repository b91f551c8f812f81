//! `nmcp mem`: run a memory trace or a synthetic pattern through the HBM model and print
//! achieved bandwidth next to the preset's peak, latency, row-buffer and command figures,
//! and the simulator's own speed. The printing; the options are
//! [`crate::mem::MemOptions`], the run [`crate::mem::run`].

use nmcp_emulator::energy::drampower::{self, TraceShape};
use nmcp_emulator::energy::{CommandEnergy, DramActivity, DramEnergy, EnergyReport};
use nmcp_emulator::memctrl::{LoggedCommand, RunReport, Stepping};

use super::CmdResult;
use crate::mem::{MemOptions, MemOutcome};

/// Runs `nmcp mem`.
pub fn run(args: MemOptions) -> CmdResult {
    let outcome = crate::mem::run(args.run_config()?)?;
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
