//! `nmcp lamb`: LAMB optimizer steps on near-memory compute, next to an ideal GPU.

use std::path::PathBuf;

use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::reference::{self, LambHyper, TensorState, TermScales};
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::{IdealGpu, ModelPreset};
use nmcp_emulator::nmc::system::NmcSystemConfig;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use super::CmdResult;
use crate::lamb::npy_io::{self, NamedTensor};

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
    /// LAMB steps to run.
    #[arg(long, default_value_t = 1)]
    steps: u32,
    /// Step number the bias correction uses for the first step (1 = first update).
    #[arg(long, default_value_t = 1)]
    step: u32,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f32,
    /// beta1.
    #[arg(long, default_value_t = 0.9)]
    beta1: f32,
    /// beta2.
    #[arg(long, default_value_t = 0.999)]
    beta2: f32,
    /// epsilon.
    #[arg(long, default_value_t = 1e-6)]
    eps: f32,
    /// Weight decay.
    #[arg(long, default_value_t = 0.01)]
    weight_decay: f32,
    /// Global-norm clipping threshold (0 disables clipping).
    #[arg(long, default_value_t = 1.0)]
    max_grad_norm: f32,
    /// Turn bias correction off.
    #[arg(long)]
    no_bias_correction: bool,
    /// Clamp the trust ratio to at most this value.
    #[arg(long)]
    trust_clamp: Option<f32>,
    /// LAMB's share of a training iteration, for the end-to-end estimate (percent,
    /// comma-separated).
    #[arg(long, default_value = "7,25", value_delimiter = ',')]
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
    #[arg(long, default_value_t = NmcSystemConfig::default().host_reduction_ns)]
    host_reduction_ns: f64,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Baseline TS entries: the one calibrated knob of the LAMB model (docs/calibration.md).
pub const DEFAULT_TS: usize = 16;

/// Largest TS accepted on the command line.
const MAX_TS: usize = 1024;

/// TS sizes the sweep visits.
const SWEEP: [usize; 7] = [4, 8, 16, 32, 64, 128, 256];

#[derive(Debug, Serialize)]
struct Timing {
    ts_entries: usize,
    nmc_seconds: f64,
    speedup_vs_ideal_100: f64,
    speedup_vs_ideal_90: f64,
    speedup_vs_ideal_80: f64,
}

#[derive(Debug, Serialize)]
struct Variant {
    what: String,
    nmc_seconds: f64,
    speedup_vs_ideal_100: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    model: String,
    preset: String,
    tensors: usize,
    parameters: u64,
    steps: u32,
    ts_entries: usize,
    nmc_seconds: f64,
    nmc_cycles: u64,
    ideal_gpu_seconds: [f64; 3],
    speedup: [f64; 3],
    peak_gbps: f64,
    physical_bound: f64,
    program_bound: f64,
    activations: u64,
    column_commands: u64,
    dram_commands: u64,
    refreshes: u64,
    reductions: u64,
    gpu_bytes: u64,
    nmc_data_bytes: u64,
    nmc_command_bytes: u64,
    data_movement_ratio: f64,
    data_movement_ratio_with_commands: f64,
    end_to_end: Vec<(f64, f64)>,
    global_norm: f32,
    /// Worst |nmc - ref| / S over w, m, v (S: running term scale; the documented bound).
    max_error_vs_term_scale: Option<f64>,
    /// Worst plain |nmc - ref| / |ref| (large only where an element cancels).
    max_plain_rel_error: Option<f64>,
    ts_sweep: Vec<Timing>,
    breakdown: Vec<Variant>,
    wall_seconds: f64,
    dram_commands_per_second: f64,
}

/// Bytes one DRAM command occupies on the command pins (row and column command words of
/// HBM2 are two half-cycles of 8 and 6 pins; we count 4 bytes per command, a round upper
/// bound, so the data-movement ratio is not flattered).
const COMMAND_BYTES: u64 = 4;

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

fn random_tensors(elements: &[u64], seed: u64) -> Vec<TensorState> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    elements
        .iter()
        .map(|&n| {
            let w = (0..n).map(|_| rng.random_range(-0.1f32..0.1)).collect();
            let g = (0..n).map(|_| rng.random_range(-1e-3f32..1e-3)).collect();
            TensorState::new(w, g)
        })
        .collect()
}

/// Worst error relative to the running term scale (the documented bound, see
/// `TermScales`) and worst plain relative error, over w, m and v.
fn errors(got: &[TensorState], want: &[TensorState], scales: &[TermScales]) -> (f64, f64) {
    let (mut scaled, mut plain) = (0f64, 0f64);
    if scales.len() != want.len() || got.len() != want.len() {
        return (f64::INFINITY, f64::INFINITY);
    }
    for ((a, b), sc) in got.iter().zip(want).zip(scales) {
        for (x, y, s) in [
            (&a.w, &b.w, &sc.w),
            (&a.m, &b.m, &sc.m),
            (&a.v, &b.v, &sc.v),
        ] {
            for ((&x, &y), &s) in x.iter().zip(y).zip(s) {
                if x.is_nan() != y.is_nan() {
                    return (f64::INFINITY, f64::INFINITY);
                }
                let e = f64::from((x - y).abs());
                if !e.is_finite() {
                    continue;
                }
                let scale = s.max(f64::from(y.abs()));
                if scale > 0.0 {
                    scaled = scaled.max(e / scale);
                }
                if y != 0.0 {
                    plain = plain.max(e / f64::from(y.abs()));
                }
            }
        }
    }
    (scaled, plain)
}

/// Runs `nmcp lamb`.
pub fn run(a: LambArgs) -> CmdResult {
    let wall = std::time::Instant::now();
    if !(1..=MAX_TS).contains(&a.ts) {
        return Err(format!(
            "--ts {}: TS entries per bank ALU must be 1..={MAX_TS} (every bank holds them; 256 already saturates the LAMB programs)",
            a.ts
        )
        .into());
    }
    let preset = HbmPreset::builtin(&a.preset)?;
    let h = hyper(&a);
    // Tensors: from .npy files, or the model's shapes.
    let mut named: Option<Vec<NamedTensor>> = match &a.input {
        Some(dir) => Some(npy_io::read_dir(dir)?),
        None => None,
    };
    let m = model(&a)?;
    let (names, elements): (Vec<String>, Vec<u64>) = match &named {
        Some(ts) => ts
            .iter()
            .map(|t| (t.name.clone(), t.state.w.len() as u64))
            .unzip(),
        None => m
            .tensors()
            .into_iter()
            .map(|t| (t.name.clone(), t.elements()))
            .unzip(),
    };
    let functional = a.functional || named.is_some();
    let params: u64 = elements.iter().sum();
    let config = |ts: usize, functional: bool| LambRunConfig {
        system: NmcSystemConfig {
            ts_entries: ts,
            functional,
            parallel: !functional,
            host_reduction_ns: a.host_reduction_ns,
            ..NmcSystemConfig::default()
        },
        hyper: h,
        ..LambRunConfig::default()
    };
    let mut run = LambRun::new(preset.clone(), &elements, config(a.ts, functional))?;
    let mut expect = None;
    if functional {
        let state: Vec<TensorState> = match &named {
            Some(ts) => ts.iter().map(|t| t.state.clone()).collect(),
            None => random_tensors(&elements, a.seed),
        };
        run.write_state(&state)?;
        expect = Some(state);
    }
    let mut scales = Vec::new();
    let mut cycles = 0;
    let mut global_norm = 0.0;
    for s in 0..a.steps {
        if s > 0 && named.is_none() && functional {
            let grads = random_tensors(&elements, a.seed.wrapping_add(u64::from(s)));
            let g: Vec<Vec<f32>> = grads.into_iter().map(|t| t.g).collect();
            run.write_gradients(&g)?;
            if let Some(e) = expect.as_mut() {
                for (t, g) in e.iter_mut().zip(g) {
                    t.g = g;
                }
            }
        }
        if let Some(e) = expect.as_mut() {
            let hs = LambHyper {
                step: h.step + s,
                ..h
            };
            reference::step_tracking(e, &hs, &mut scales);
        }
        let out = run.step()?;
        cycles += out.cycles;
        global_norm = out.global_norm;
    }
    let mut max_err = None;
    if let Some(want) = &expect {
        let mut got = want.clone();
        run.read_state(&mut got)?;
        max_err = Some(errors(&got, want, &scales));
        if let Some(ts) = named.as_mut() {
            for (t, g) in ts.iter_mut().zip(got) {
                t.state.w = g.w;
                t.state.m = g.m;
                t.state.v = g.v;
            }
        }
    }
    let tck = preset.organisation.tck_ns * 1e-9;
    let nmc_s = cycles as f64 * tck;
    let steps = f64::from(a.steps);
    let gpu = IdealGpu {
        peak_bytes_per_s: preset.peak_gbps() * 1e9,
    };
    let fr = [1.0, 0.9, 0.8];
    let gpu_s = fr.map(|f| gpu.seconds(params, f) * steps);
    let speedup = gpu_s.map(|g| g / nmc_s);
    let totals = run.totals();
    let t = &preset.timing;
    let o = &preset.organisation;
    // Bank parallelism vs bus: all banks of a pseudo-channel move a column every tCCD_L,
    // the bus moves one column every BL.
    let physical_bound =
        f64::from(preset.banks_per_pseudo_channel()) * f64::from(t.bl) / f64::from(t.tccd_l);
    // The same bound for these programs: even with no row switches, NMC needs one
    // tCCD_L slot per executed instruction per column, the GPU one BL per array pass.
    let columns_per_pc = params as f64 * 4.0
        / f64::from(o.bytes_per_column)
        / f64::from(preset.banks_per_pseudo_channel())
        / f64::from(preset.pseudo_channels());
    let slots_per_column = totals.engines.column_commands as f64
        / f64::from(preset.pseudo_channels())
        / columns_per_pc
        / steps;
    let program_bound = physical_bound * 13.0 / slots_per_column.max(1e-9);
    let gpu_bytes = IdealGpu::bytes(params) * u64::from(a.steps);
    let nmc_data = totals.host_read_bytes + totals.host_write_bytes;
    let nmc_cmd = totals.commands_total * COMMAND_BYTES;
    let end_to_end = a
        .lamb_share
        .iter()
        .map(|&p| {
            let f = p / 100.0;
            (p, 1.0 / (1.0 - f + f / speedup[0]))
        })
        .collect();
    let mut breakdown = Vec::new();
    if a.breakdown {
        let mut timed = |label: &str,
                         p: &HbmPreset,
                         c: LambRunConfig|
         -> Result<(), Box<dyn std::error::Error>> {
            let mut r = LambRun::new(p.clone(), &elements, c)?;
            let cyc: u64 = (0..a.steps)
                .map(|_| r.step().map(|o| o.cycles))
                .sum::<Result<u64, _>>()?;
            let sec = cyc as f64 * tck;
            breakdown.push(Variant {
                what: label.to_string(),
                nmc_seconds: sec,
                speedup_vs_ideal_100: gpu_s[0] / sec,
            });
            Ok(())
        };
        let mut no_ref = preset.clone();
        no_ref.refresh.mode = nmcp_emulator::hbm::config::RefreshMode::Off;
        timed("as configured", &preset, config(a.ts, false))?;
        timed("without refresh", &no_ref, config(a.ts, false))?;
        let mut c = config(a.ts, false);
        c.system.host_reduction_ns = 0.0;
        timed("without host round-trip latency", &preset, c.clone())?;
        c.system.ts_entries = 256;
        timed(
            "  ... and TS 256 (chunks of a whole row), no refresh",
            &no_ref,
            c,
        )?;
        let bound_s = gpu_s[0] / program_bound;
        breakdown.push(Variant {
            what: "no row switches at all (program bound)".into(),
            nmc_seconds: bound_s,
            speedup_vs_ideal_100: program_bound,
        });
        breakdown.push(Variant {
            what: "only memory-touching instructions cost a slot (physical bound)".into(),
            nmc_seconds: gpu_s[0] / physical_bound,
            speedup_vs_ideal_100: physical_bound,
        });
    }
    let mut sweep = Vec::new();
    if a.ts_sweep {
        let bar = indicatif::ProgressBar::new(SWEEP.len() as u64);
        if a.json {
            bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        }
        for ts in SWEEP {
            let mut r = LambRun::new(preset.clone(), &elements, config(ts, false))?;
            let c: u64 = (0..a.steps)
                .map(|_| r.step().map(|o| o.cycles))
                .sum::<Result<u64, _>>()?;
            let s = c as f64 * tck;
            sweep.push(Timing {
                ts_entries: ts,
                nmc_seconds: s,
                speedup_vs_ideal_100: gpu_s[0] / s,
                speedup_vs_ideal_90: gpu_s[1] / s,
                speedup_vs_ideal_80: gpu_s[2] / s,
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
    }
    if let (Some(dir), Some(ts)) = (&a.output, &named) {
        npy_io::write_dir(dir, ts)?;
    } else if let Some(dir) = &a.output {
        return Err(format!("--output {} needs --input tensors to write", dir.display()).into());
    }
    let wall_s = wall.elapsed().as_secs_f64();
    let report = Report {
        model: if a.input.is_some() {
            "npy input".into()
        } else {
            m.name.clone()
        },
        preset: preset.name.clone(),
        tensors: names.len(),
        parameters: params,
        steps: a.steps,
        ts_entries: a.ts,
        nmc_seconds: nmc_s,
        nmc_cycles: cycles,
        ideal_gpu_seconds: gpu_s,
        speedup,
        peak_gbps: preset.peak_gbps(),
        physical_bound,
        program_bound,
        activations: totals.engines.activations,
        column_commands: totals.engines.column_commands,
        dram_commands: totals.commands_total,
        refreshes: totals.engines.refreshes,
        reductions: totals.reductions,
        gpu_bytes,
        nmc_data_bytes: nmc_data,
        nmc_command_bytes: nmc_cmd,
        data_movement_ratio: gpu_bytes as f64 / nmc_data.max(1) as f64,
        data_movement_ratio_with_commands: gpu_bytes as f64 / (nmc_data + nmc_cmd).max(1) as f64,
        end_to_end,
        global_norm,
        max_error_vs_term_scale: max_err.map(|e| e.0),
        max_plain_rel_error: max_err.map(|e| e.1),
        ts_sweep: sweep,
        breakdown,
        wall_seconds: wall_s,
        dram_commands_per_second: totals.commands_total as f64 / wall_s,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(())
}

fn ms(s: f64) -> String {
    format!("{:.3} ms", s * 1e3)
}

fn print_report(r: &Report) {
    println!(
        "LAMB on near-memory compute: {} ({} tensors, {:.1} M parameters), {} step(s)",
        r.model,
        r.tensors,
        r.parameters as f64 / 1e6,
        r.steps
    );
    println!(
        "memory: {} ({:.0} GB/s peak), TS {} entries x 256 bit per bank",
        r.preset, r.peak_gbps, r.ts_entries
    );
    println!();
    println!("{:<34} {:>12} {:>10}", "", "time", "NMC speedup");
    println!(
        "{:<34} {:>12} {:>10}",
        "NMC (DRAM-command level)",
        ms(r.nmc_seconds),
        ""
    );
    for (i, f) in [100, 90, 80].iter().enumerate() {
        println!(
            "{:<34} {:>12} {:>9.2}x",
            format!("ideal GPU at {f} % of peak"),
            ms(r.ideal_gpu_seconds[i]),
            r.speedup[i]
        );
    }
    println!();
    println!(
        "physical bound: {:.2}x  (per pseudo-channel, 16 banks move a 32 B column every tCCD_L",
        r.physical_bound
    );
    println!("                while the bus moves one every BL; no NMC program can beat it)");
    println!(
        "bound for these programs: {:.2}x  (13 array passes vs the column slots the LAMB",
        r.program_bound
    );
    println!("                programs execute, with no row switches at all)");
    println!();
    println!("DRAM: {} activations, {} column commands, {} commands in all, {} refreshes, {} host reductions", r.activations, r.column_commands, r.dram_commands, r.refreshes, r.reductions);
    println!("GPU<->HBM bytes: ideal GPU {:.2} GB; NMC {} B of data (partials, scalars) + {:.2} MB of commands", r.gpu_bytes as f64 / 1e9, r.nmc_data_bytes, r.nmc_command_bytes as f64 / 1e6);
    println!("data movement: {:.0}x less counting data only, {:.1}x less counting command words too (dissertation: ~13x)", r.data_movement_ratio, r.data_movement_ratio_with_commands);
    for (share, s) in &r.end_to_end {
        println!(
            "end to end with LAMB at {share:.0} % of an iteration: {:.1} % faster",
            (s - 1.0) * 100.0
        );
    }
    if let (Some(e), Some(p)) = (r.max_error_vs_term_scale, r.max_plain_rel_error) {
        println!("error vs the FP32 reference (w, m, v): {e:.2e} of the term scale (bound 1e-5); plain relative {p:.2e}");
    }
    if !r.ts_sweep.is_empty() {
        println!();
        println!(
            "{:>6} {:>12} {:>8} {:>8} {:>8}",
            "TS", "NMC time", "vs 100%", "vs 90%", "vs 80%"
        );
        for t in &r.ts_sweep {
            println!(
                "{:>6} {:>12} {:>7.2}x {:>7.2}x {:>7.2}x",
                t.ts_entries,
                ms(t.nmc_seconds),
                t.speedup_vs_ideal_100,
                t.speedup_vs_ideal_90,
                t.speedup_vs_ideal_80
            );
        }
    }
    if !r.breakdown.is_empty() {
        println!();
        println!(
            "{:<64} {:>12} {:>8}",
            "where the time goes", "NMC time", "vs 100%"
        );
        for v in &r.breakdown {
            println!(
                "{:<64} {:>12} {:>7.2}x",
                v.what,
                ms(v.nmc_seconds),
                v.speedup_vs_ideal_100
            );
        }
    }
    println!();
    println!(
        "simulated {} DRAM commands in {:.2} s ({:.1} M commands/s)",
        r.dram_commands,
        r.wall_seconds,
        r.dram_commands_per_second / 1e6
    );
}
