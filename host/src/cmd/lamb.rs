//! `nmcp lamb`: LAMB optimizer steps on near-memory compute, next to an ideal GPU.

use std::path::PathBuf;

use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::experiment::{EngineSetup, LambExperiment, LambReport, TS_SWEEP};
use nmcp_emulator::lamb::reference::LambHyper;
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::system::NmcSystemConfig;
use nmcp_firmware::nmc::Stage1Program;

use super::CmdResult;
use crate::lamb::npy_io;

/// Arguments of `nmcp lamb`.
#[derive(clap::Args, Debug)]
pub struct LambArgs {
    /// Model preset: bert-large, bert-base, megatron-bert.
    #[arg(long, default_value = "bert-large")]
    model: String,
    /// Override the number of encoder layers.
    #[arg(long)]
    layers: Option<u32>,
    /// Override the hidden size (d_ff defaults to 4x).
    #[arg(long)]
    d_model: Option<u64>,
    /// Override the feed-forward size.
    #[arg(long)]
    d_ff: Option<u64>,
    /// HBM preset.
    #[arg(long, default_value = "lamb-ch6")]
    preset: String,
    /// TS entries (256-bit) per bank ALU.
    #[arg(long, default_value_t = DEFAULT_TS)]
    ts: usize,
    /// Also run a TS-size sweep (timing only).
    #[arg(long)]
    ts_sweep: bool,
    /// Also show where NMC time goes: the same step without refresh, without host round
    /// trips, with the largest TS, and the bounds (timing only).
    #[arg(long)]
    breakdown: bool,
    /// LAMB steps to run (1..=10000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    steps: u32,
    /// Step number the bias correction uses for the first step (1 = first update; 0
    /// would divide by 1 - beta^0 = 0); at most 2^24, so that step + steps never wraps.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    step: u32,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3, value_parser = super::numbers::positive_f32)]
    lr: f32,
    /// beta1.
    #[arg(long, default_value_t = 0.9, value_parser = super::numbers::decay_rate_f32)]
    beta1: f32,
    /// beta2.
    #[arg(long, default_value_t = 0.999, value_parser = super::numbers::decay_rate_f32)]
    beta2: f32,
    /// epsilon.
    #[arg(long, default_value_t = 1e-6, value_parser = super::numbers::positive_f32)]
    eps: f32,
    /// Weight decay.
    #[arg(long, default_value_t = 0.01, value_parser = super::numbers::non_negative_f32)]
    weight_decay: f32,
    /// Global-norm clipping threshold (0 disables clipping).
    #[arg(long, default_value_t = 1.0, value_parser = super::numbers::non_negative_f32)]
    max_grad_norm: f32,
    /// Turn bias correction off.
    #[arg(long)]
    no_bias_correction: bool,
    /// Clamp the trust ratio to at most this value.
    #[arg(long, value_parser = super::numbers::positive_f32)]
    trust_clamp: Option<f32>,
    /// LAMB's share of a training iteration, for the end-to-end estimate (percent,
    /// comma-separated).
    #[arg(long, default_value = "7,25", value_delimiter = ',', value_parser = super::numbers::share_percent)]
    lamb_share: Vec<f64>,
    /// Run the bank ALUs on data (random tensors from --seed unless --input) and compare
    /// with the FP32 reference. Needs memory for every array: use small models.
    #[arg(long)]
    functional: bool,
    /// Read tensors NAME.{w,g,m,v}.npy from this directory (implies --functional).
    #[arg(long)]
    input: Option<PathBuf>,
    /// Write the updated NAME.{w,m,v}.npy here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Seed of random tensors.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// GPU-host reduction round trip in ns (see docs/calibration.md).
    #[arg(long, default_value_t = NmcSystemConfig::default().host_reduction_ns, value_parser = super::numbers::duration_ns)]
    host_reduction_ns: f64,
    /// Engine setups to compare side by side, comma-separated: an ALU issue model
    /// (`column-triggered`, `pipelined` at its default rate, `pipelined-N` at N
    /// operations per tCK) optionally with `+staged`, `+masa` (MASA subarray row visits;
    /// needs a preset with subarrays, e.g. `--preset lamb-ch6-masa`), `+masa-decoupled`
    /// (MASA with decoupled access/execute buffers, activate-ahead on a preset with 11 or
    /// more subarrays, e.g. `--preset lamb-ch6-masa16`) or `+masa-2jobs` (masa-decoupled
    /// with two macro-commands in flight per engine) (docs/calibration.md). The
    /// first one runs the main (functional) step.
    #[arg(
        long,
        default_value = "column-triggered,pipelined,pipelined+staged",
        value_delimiter = ','
    )]
    alu_models: Vec<String>,
    /// The firmware's stage-1 program: `four-slot` (g', m, v, scratch: chunk = TS / 4) or
    /// `three-slot` (v reuses g''s slot: chunk = TS / 3); identical results
    /// (docs/decisions/nmc-alu-issue.md).
    #[arg(long, default_value = "four-slot")]
    program: String,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// Timeline of the main run (the first engine setup's step(s)).
    #[command(flatten)]
    timeline: crate::timeline::TimelineArgs,
}

/// Baseline TS entries: the one calibrated knob of the LAMB model (docs/calibration.md).
pub const DEFAULT_TS: usize = 16;

/// Largest TS accepted on the command line.
const MAX_TS: usize = 1024;

fn model(a: &LambArgs) -> Result<ModelPreset, Box<dyn std::error::Error>> {
    let base = ModelPreset::builtin(&a.model)?;
    let d = a.d_model.unwrap_or(base.d_model);
    let f = a.d_ff.unwrap_or(if a.d_model.is_some() {
        4 * d
    } else {
        base.d_ff
    });
    Ok(ModelPreset::custom(
        &base.name,
        a.layers.unwrap_or(base.layers),
        d,
        f,
    ))
}

fn hyper(a: &LambArgs) -> LambHyper {
    LambHyper {
        lr: a.lr,
        beta1: a.beta1,
        beta2: a.beta2,
        eps: a.eps,
        weight_decay: a.weight_decay,
        max_grad_norm: (a.max_grad_norm > 0.0).then_some(a.max_grad_norm),
        bias_correction: !a.no_bias_correction,
        step: a.step.max(1),
        trust_clamp: a.trust_clamp,
    }
}

/// The `.npy` tensors of `--input`, if given.
type Named = Option<Vec<npy_io::NamedTensor>>;

/// The experiment the arguments describe, with the `.npy` tensors if `--input` is given.
fn experiment(a: &LambArgs) -> Result<(LambExperiment, Named), Box<dyn std::error::Error>> {
    let preset = HbmPreset::builtin(&a.preset)?;
    let named = match &a.input {
        Some(dir) => Some(npy_io::read_dir(dir)?),
        None => None,
    };
    let m = model(a)?;
    let setups = a
        .alu_models
        .iter()
        .map(|n| {
            EngineSetup::parse(n).ok_or_else(|| {
                format!(
                    "--alu-models {n}: expected column-triggered, pipelined or pipelined-N (N ops per tCK, 1..=16), optionally +staged, +masa, +masa-decoupled, +masa-2jobs or +masa-2jobs-split (masa*: a preset with subarrays, e.g. --preset lamb-ch6-masa; masa-decoupled and masa-2jobs* activate ahead on lamb-ch6-masa16)"
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let elements = match &named {
        Some(ts) => ts.iter().map(|t| t.state.w.len() as u64).collect(),
        None => m.tensors().iter().map(|t| t.elements()).collect(),
    };
    let e = LambExperiment {
        model: if named.is_some() {
            "npy input".into()
        } else {
            m.name.clone()
        },
        preset,
        elements,
        input: named
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.state.clone()).collect()),
        functional: a.functional,
        seed: a.seed,
        steps: a.steps,
        ts_entries: a.ts,
        hyper: hyper(a),
        host_reduction_ns: a.host_reduction_ns,
        lamb_share: a.lamb_share.clone(),
        breakdown: a.breakdown,
        ts_sweep: a.ts_sweep,
        setups,
        program: match a.program.as_str() {
            "four-slot" => Stage1Program::FourSlot,
            "three-slot" => Stage1Program::ThreeSlot,
            other => {
                return Err(format!("--program {other}: expected four-slot or three-slot").into())
            }
        },
        timeline: a.timeline.config(),
    };
    Ok((e, named))
}

/// Runs `nmcp lamb`.
pub fn run(a: LambArgs) -> CmdResult {
    if !(1..=MAX_TS).contains(&a.ts) {
        return Err(format!(
            "--ts {}: TS entries per bank ALU must be 1..={MAX_TS} (every bank holds them; 256 already saturates the LAMB programs)",
            a.ts
        )
        .into());
    }
    let (e, named) = experiment(&a)?;
    if let (Some(dir), None) = (&a.output, &named) {
        return Err(format!("--output {} needs --input tensors to write", dir.display()).into());
    }
    let bar = indicatif::ProgressBar::new((TS_SWEEP.len() * e.setups.len().max(1)) as u64);
    if a.json || !a.ts_sweep {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Checkpoint units (--checkpoint-dir): see lamb_checkpoint.rs.
    let out = super::lamb_checkpoint::run(&e, &mut || bar.inc(1))?;
    bar.finish_and_clear();
    crate::timeline::write_if_asked(&a.timeline, out.timeline.as_ref())?;
    if let Some(got) = &out.state {
        check_finite(got, named.as_deref())?;
    }
    if let (Some(dir), Some(mut ts), Some(got)) = (&a.output, named, out.state) {
        for (t, g) in ts.iter_mut().zip(got) {
            t.state.w = g.w;
            t.state.m = g.m;
            t.state.v = g.v;
        }
        npy_io::write_dir(dir, &ts)?;
    }
    if a.json {
        stdoutln!("{}", serde_json::to_string_pretty(&out.report)?);
    } else {
        print_report(&out.report);
    }
    Ok(())
}

/// A functional step whose result is not finite (a learning rate or tensor values so large
/// that f32 overflows) is an error naming the tensor, the array, the element and the
/// value, not a report of NaN weights.
fn check_finite(
    got: &[nmcp_emulator::lamb::TensorState],
    named: Option<&[npy_io::NamedTensor]>,
) -> Result<(), String> {
    for (t, s) in got.iter().enumerate() {
        for (kind, data) in [("w", &s.w), ("m", &s.m), ("v", &s.v)] {
            if let Some((i, x)) = data.iter().enumerate().find(|(_, x)| !x.is_finite()) {
                let name = named
                    .and_then(|n| n.get(t))
                    .map_or_else(|| format!("tensor {t}"), |n| format!("tensor `{}`", n.name));
                return Err(format!(
                    "the step's result is not finite: {name}, {kind}[{i}] = {x} (f32 overflowed: lower --lr or check the inputs' magnitudes)"
                ));
            }
        }
    }
    Ok(())
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

fn print_report(r: &LambReport) {
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
