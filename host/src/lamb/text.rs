//! The text form of a LAMB report (`nmcp lamb` without `--json`): the step next to the
//! ideal GPU, the bounds and traffic, the TS sweep, the models and the breakdown.

use nmcp_emulator::lamb::experiment::LambReport;

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

pub fn print_report(r: &LambReport) {
    stdoutln!(
        "LAMB on near-memory compute: {} ({} tensors, {:.1} M parameters), {} step(s)",
        r.model,
        r.tensors,
        r.parameters as f64 / 1e6,
        r.steps
    );
    stdoutln!(
        "memory: {} ({:.0} GB/s peak), TS {} entries x 256 bit per bank, {} stage-1 program",
        r.preset,
        r.peak_gbps,
        r.ts_entries,
        r.program
    );
    stdoutln!();
    stdoutln!("{:<34} {:>12} {:>10}", "", "time", "NMC speedup");
    stdoutln!(
        "{:<34} {:>12} {:>10}",
        "NMC (DRAM-command level)",
        ms(r.nmc_seconds),
        ""
    );
    for (i, f) in [100, 90, 80].iter().enumerate() {
        stdoutln!(
            "{:<34} {:>12} {:>9.2}x",
            format!("ideal GPU at {f} % of peak"),
            ms(r.ideal_gpu_seconds[i]),
            r.speedup[i]
        );
    }
    print_bounds_and_traffic(r);
    print_models(r);
    print_sweep(r);
    print_breakdown(r);
    stdoutln!();
    stdoutln!(
        "{} DRAM commands of the main run in {:.2} s of wall time for everything above ({:.1} M commands/s; timing-only runs simulate pseudo-channel 0 for all)",
        r.dram_commands,
        r.wall_seconds,
        r.dram_commands_per_second / 1e6
    );
}

fn print_bounds_and_traffic(r: &LambReport) {
    stdoutln!();
    stdoutln!(
        "physical bound: {:.2}x  (per pseudo-channel, 16 banks move a 32 B column every tCCD_L",
        r.physical_bound
    );
    stdoutln!("                while the bus moves one every BL; no NMC program can beat it)");
    stdoutln!(
        "bound for these programs: {:.2}x  (13 array passes vs the column slots the LAMB",
        r.program_bound
    );
    stdoutln!("                programs execute, with no row switches at all)");
    stdoutln!();
    stdoutln!("DRAM: {} activations, {} column commands, {} commands in all, {} refreshes, {} host reductions", r.activations, r.column_commands, r.dram_commands, r.refreshes, r.reductions);
    stdoutln!("GPU<->HBM bytes: ideal GPU {:.2} GB; NMC {} B of data (partials, scalars) + {:.2} MB of commands", r.gpu_bytes as f64 / 1e9, r.nmc_data_bytes, r.nmc_command_bytes as f64 / 1e6);
    stdoutln!("data movement: {:.0}x less counting data only, {:.1}x less counting command words too (dissertation: ~13x)", r.data_movement_ratio, r.data_movement_ratio_with_commands);
    stdoutln!("energy NMC:       {}", r.energy.nmc.line());
    stdoutln!("energy ideal GPU: {}", r.energy.ideal_gpu.line());
    stdoutln!("energy: the ideal GPU spends {:.2}x NMC's joules ({:.1} ALU lane operations per parameter and step on both sides; dissertation: not evaluated)", r.energy.gpu_over_nmc, r.energy.lane_ops_per_parameter);
    for (share, s) in &r.end_to_end {
        stdoutln!(
            "end to end with LAMB at {share:.0} % of an iteration: {:.1} % faster",
            (s - 1.0) * 100.0
        );
    }
    if let (Some(e), Some(p)) = (r.max_error_vs_term_scale, r.max_plain_rel_error) {
        stdoutln!("error vs the FP32 reference (w, m, v): {e:.2e} of the term scale (bound 1e-5); plain relative {p:.2e}");
    }
}

fn print_sweep(r: &LambReport) {
    for m in r.alu_models.iter().filter(|m| !m.ts_sweep.is_empty()) {
        stdoutln!();
        stdoutln!("TS sweep, {}", m.name);
        stdoutln!(
            "{:>6} {:>12} {:>8} {:>8} {:>8}",
            "TS",
            "NMC time",
            "vs 100%",
            "vs 90%",
            "vs 80%"
        );
        for t in &m.ts_sweep {
            stdoutln!(
                "{:>6} {:>12} {:>7.2}x {:>7.2}x {:>7.2}x",
                t.ts_entries,
                ms(t.nmc_seconds),
                t.speedup_vs_ideal_100,
                t.speedup_vs_ideal_90,
                t.speedup_vs_ideal_80
            );
        }
    }
}

/// The dissertation's BERT-Large figures (6.4): baseline TS at 100 % and 80 % of peak,
/// 4x TS at 100 % (the two values it gives are 4.7x and 4.6x).
const DISSERTATION: &str = "dissertation (6.4): 3.8x at baseline TS, 4.7x / 4.6x with 4x TS, up to 5.8x / 5.7x vs 80 % of peak";

fn print_models(r: &LambReport) {
    if r.alu_models.is_empty() {
        return;
    }
    stdoutln!();
    stdoutln!(
        "ALU issue models side by side (TS {}; physical bound {:.2}x)",
        r.ts_entries,
        r.physical_bound
    );
    stdoutln!(
        "{:<36} {:>11} {:>7} {:>7} {:>7} {:>8} {:>9} {:>8}",
        "",
        "NMC time",
        "vs 100%",
        "vs 90%",
        "vs 80%",
        "program",
        "row cycle",
        "analytic"
    );
    for m in &r.alu_models {
        stdoutln!(
            "{:<36} {:>11} {:>6.2}x {:>6.2}x {:>6.2}x {:>7.2}x {:>8.2}x {:>7.2}x",
            m.name,
            ms(m.nmc_seconds),
            m.speedup[0],
            m.speedup[1],
            m.speedup[2],
            m.program_bound,
            m.row_cycle_bound,
            m.analytic_speedup
        );
    }
    // masa-decoupled and masa-2jobs only (other setups print as before).
    for m in &r.alu_models {
        match (m.job_bound, m.setup.row_policy) {
            (Some(b), p) if p.two_jobs() => stdoutln!(
                "{:<36} segment bound {b:.2}x (per run of overlapping jobs, from an idle engine or scalar write to the next: columns at tCCD_L or ALU work, whichever is longer; no row switches, refresh or host)",
                m.name
            ),
            (Some(b), _) => stdoutln!(
                "{:<36} job bound {b:.2}x (per job: columns at tCCD_L or ALU work, whichever is longer; no overlap across jobs, no row switches, refresh or host)",
                m.name
            ),
            (None, _) => {}
        }
    }
    stdoutln!("{DISSERTATION}");
    stdoutln!("program: bound with no row switches, refresh or host time; row cycle: the row visits' tRC/tRAS/tWR floors, no schedule of these visits beats it (no refresh, stalls, host); analytic: the same commands at tCCD_L per column and tRP + tRCD per row switch only");
    stdoutln!();
    stdoutln!(
        "{:<36} {:>9} {:>9} {:>9} {:>9} {:>11}",
        "where the time goes (ms per PC)",
        "columns",
        "row sw.",
        "refresh",
        "ALU stall",
        "reduct.+other"
    );
    for m in &r.alu_models {
        let t = &m.time;
        stdout!(
            "{:<36} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>11.3}",
            m.name,
            t.columns * 1e3,
            t.row_switches * 1e3,
            t.refresh * 1e3,
            t.alu_stalls * 1e3,
            t.reductions_and_other * 1e3
        );
        // MASA only: the subarray selects (other setups print as before).
        if t.subarray_selects > 0.0 {
            stdout!("  (+ SA_SEL {:.3})", t.subarray_selects * 1e3);
        }
        stdoutln!();
    }
    stdoutln!();
    stdoutln!("data movement, candidate definitions (ideal-GPU bytes over NMC bytes; dissertation: ~13x):");
    for d in &r.data_movement {
        stdoutln!("  {:>9.1}x  {} [{}]", d.ratio, d.definition, d.setup);
    }
    stdoutln!();
    stdoutln!(
        "LAMB firmware (sequencer) on the CP: {:.3} ms charged ({:.2} % of the NMC time), of which {:.3} ms ({:.2} %) the engines could not hide",
        r.firmware_seconds * 1e3,
        r.firmware_share * 100.0,
        r.firmware_exposed_seconds * 1e3,
        r.firmware_exposed_seconds / r.nmc_seconds * 100.0
    );
}

fn print_breakdown(r: &LambReport) {
    if !r.breakdown.is_empty() {
        stdoutln!();
        stdoutln!(
            "{:<64} {:>12} {:>8}",
            "where the time goes",
            "NMC time",
            "vs 100%"
        );
        for v in &r.breakdown {
            stdoutln!(
                "{:<64} {:>12} {:>7.2}x",
                v.what,
                ms(v.nmc_seconds),
                v.speedup_vs_ideal_100
            );
        }
    }
}
