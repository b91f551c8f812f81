//! NMC engine throughput: one timing-only LAMB step of BERT-Base (110 M parameters) on
//! `lamb-ch6` (64 pseudo-channels), engines run one after another on one thread so the
//! figure does not depend on how many cores are free. Criterion reports time per step;
//! DRAM commands per second (wall clock and, on Linux, per CPU-second) are printed as
//! well. Ten samples keep the whole benchmark to about a minute on a 2-core machine.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::reference::LambHyper;
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::system::NmcSystemConfig;

const MODEL: &str = "bert-base";
const PRESET: &str = "lamb-ch6";

/// Runs one step and returns the DRAM commands it issued.
fn step(preset: &HbmPreset, elements: &[u64]) -> u64 {
    let config = LambRunConfig {
        system: NmcSystemConfig {
            functional: false,
            parallel: false,
            ..NmcSystemConfig::default()
        },
        hyper: LambHyper::default(),
        ..LambRunConfig::default()
    };
    let mut run = LambRun::new(preset.clone(), elements, config).expect("model fits the preset");
    run.step().expect("LAMB step runs");
    run.totals().commands_total
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`), so the figure can be
/// read on a machine shared with other jobs; `None` elsewhere.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn nmc(c: &mut Criterion) {
    let preset = HbmPreset::builtin(PRESET).expect("built-in preset");
    let model = ModelPreset::builtin(MODEL).expect("built-in model");
    let elements: Vec<u64> = model.tensors().iter().map(|t| t.elements()).collect();

    let start = Instant::now();
    let cpu_start = thread_cpu_seconds();
    let commands = step(&preset, &elements);
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_start.and_then(|s| Some(thread_cpu_seconds()? - s));
    let cpu_note = match cpu {
        Some(c) => format!(", {:.1} M per CPU-second", commands as f64 / c / 1e6),
        None => String::new(),
    };
    println!(
        "{MODEL} LAMB step on {PRESET}, timing only, 1 thread: {commands} DRAM commands in \
         {secs:.3} s = {:.1} M commands/s{cpu_note}",
        commands as f64 / secs / 1e6
    );

    let mut g = c.benchmark_group("nmc");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(100));
    g.measurement_time(Duration::from_secs(20));
    g.throughput(Throughput::Elements(commands));
    g.bench_function(format!("lamb_step_{MODEL}_{PRESET}_timing_only"), |b| {
        b.iter(|| step(&preset, &elements))
    });
    g.finish();
}

criterion_group!(benches, nmc);
criterion_main!(benches);
