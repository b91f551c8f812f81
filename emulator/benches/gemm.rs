//! GEMM model throughput: workgroups simulated per second, alone and 16-way concurrent.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
use nmcp_emulator::gpu::sim::makespan;
use nmcp_isa::gemm_ext::GemmDataType;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let shape = GemmShape::new(4096, 4096, 1024, false, true, GemmDataType::F16);
    let mut group = c.benchmark_group("gemm_sim");
    for (name, copies, kernel) in [("isolated_64x64", 1usize, 0usize), ("cd16_64x64", 16, 0)] {
        let k = cat
            .kernels()
            .iter()
            .filter(|k| (k.mt0, k.mt1, k.split_u) == (64, 64, 1))
            .nth(kernel)
            .copied()
            .unwrap_or_else(|| cat.kernels()[0]);
        let runs = vec![(shape, k); copies];
        let wgs = makespan(&gpu, &cal, &runs).map_or(1, |r| r.1);
        group.throughput(Throughput::Elements(wgs));
        group.bench_function(name, |b| {
            b.iter(|| makespan(black_box(&gpu), &cal, black_box(&runs)))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
