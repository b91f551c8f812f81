//! Engine throughput: 1 M 64-byte reads, streaming and random, on hbm2-2000 (8 channels x
//! 2 pseudo-channels), single-threaded. Criterion reports time per run; requests per
//! wall-clock second are printed as well. Sample counts are kept small so the whole
//! benchmark finishes in a couple of minutes on a 2-core machine.

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem, RunReport};
use nmcp_emulator::trace::{Pattern, Synthetic};

const REQUESTS: u64 = 1_000_000;

fn run(preset: &HbmPreset, pattern: Pattern) -> RunReport {
    let mapping = AddressMapping::named(STREAM_MAPPING, preset).expect("built-in mapping");
    let mut sys = MemorySystem::new(preset, mapping, ControllerConfig::from_preset(preset));
    let reqs = Synthetic::new(pattern, REQUESTS, 64, preset.capacity_bytes(), 0.0, 42);
    sys.run(reqs, |_| {})
}

/// CPU time of this thread (Linux `/proc/thread-self/schedstat`), so the figure can be
/// read on a machine shared with other jobs; `None` elsewhere.
fn thread_cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn engine(c: &mut Criterion) {
    let preset = HbmPreset::builtin("hbm2-2000").expect("built-in preset");
    for (name, pattern) in [("stream", Pattern::Stream), ("random", Pattern::Random)] {
        let start = Instant::now();
        let cpu_start = thread_cpu_seconds();
        let r = run(&preset, pattern);
        let secs = start.elapsed().as_secs_f64();
        let cpu = cpu_start.and_then(|s| Some(thread_cpu_seconds()? - s));
        let cpu_note = match cpu {
            Some(c) => format!(
                ", {:.2} M requests per CPU-second",
                REQUESTS as f64 / c / 1e6
            ),
            None => String::new(),
        };
        println!(
            "{name}: {REQUESTS} x 64 B reads in {secs:.3} s = {:.2} M requests/s{cpu_note} \
             ({:.1} GB/s simulated, {:.1} % of peak, {} row conflicts)",
            REQUESTS as f64 / secs / 1e6,
            r.bandwidth_gbps,
            r.percent_of_peak,
            r.row_conflicts
        );
        let mut g = c.benchmark_group("engine");
        g.sample_size(10);
        g.warm_up_time(Duration::from_millis(100));
        g.measurement_time(Duration::from_secs(10));
        g.throughput(Throughput::Elements(REQUESTS));
        g.bench_function(format!("{name}_1M_64B_reads_hbm2-2000_8ch"), |b| {
            b.iter(|| run(&preset, pattern))
        });
        g.finish();
    }
}

criterion_group!(benches, engine);
criterion_main!(benches);
