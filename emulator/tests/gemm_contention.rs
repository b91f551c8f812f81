//! The mechanisms by which running GEMMs together hurts (issue 39, item 1), each checked
//! on the GEMM model against the model without it: load-dependent latency and the
//! head-change CD semantics' rounds.

use nmcp_emulator::gpu::catalog::{Catalog, CatalogKernel};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape, LoadedLatency};
use nmcp_emulator::gpu::loaded_latency::LoadedLatencyCurve;
use nmcp_emulator::gpu::search::best_isolated_kernel;
use nmcp_emulator::gpu::sim::{concurrent_time, isolated_time, rounds_time};
use nmcp_isa::gemm_ext::{GemmDataType, GemmProblem};

fn shape(m: u32, n: u32, k: u32, dtype: GemmDataType) -> GemmShape {
    GemmProblem::new(m, n, k, false, false, dtype)
}

fn best(gpu: &GpuConfig, cal: &Calibration, s: &GemmShape) -> CatalogKernel {
    best_isolated_kernel(gpu, cal, &Catalog::standard(), s).expect("a kernel runs")
}

fn loaded(cal: &Calibration) -> Calibration {
    Calibration {
        loaded_latency: Some(LoadedLatency::for_memory_latency(cal.memory_latency_ns)),
        ..*cal
    }
}

/// The curve the option uses is the DRAM model's: latency rises with utilisation, and at
/// the highest measured load the queueing delay is a sizeable part of an access.
#[test]
fn the_standard_curve_rises_with_load() {
    let c = LoadedLatencyCurve::standard();
    assert!(c.points.len() >= 5);
    for w in c.points.windows(2) {
        assert!(w[1].mean_ns >= w[0].mean_ns, "{:?}", c.points);
    }
    let last = c.points.last().expect("points");
    let first = c.points.first().expect("points");
    assert!(
        last.queue_ns > 0.5 * first.mean_ns,
        "queueing at {} of saturation: {} ns over {} ns",
        last.utilisation,
        last.queue_ns,
        first.mean_ns
    );
}

/// Sixteen copies of a small FP16 GEMM whose main loop is latency-bound alone: with
/// latency that grows with the HBM's utilisation (and LLC hits that are faster than HBM
/// accesses), running them together costs more relative to one alone than with one fixed
/// latency — the contention the fixed floor could not show. (The effect is small on the
/// MI100: the DRAM model's queueing delay, ~40 ns at 90 % of saturation, is small beside a
/// 500 ns load-to-use latency; see docs/decisions/gemm.md.)
#[test]
fn loaded_latency_makes_concurrency_hurt_a_latency_bound_gemm_more() {
    let gpu = GpuConfig::mi100();
    let fixed = Calibration::default();
    let with = loaded(&fixed);
    let s = shape(512, 512, 512, GemmDataType::F16);
    let k = best(&gpu, &fixed, &s);
    let ratio = |cal: &Calibration| {
        let iso = isolated_time(&gpu, cal, &s, &k).expect("runs");
        let c16 = concurrent_time(&gpu, cal, &s, &k, 16).expect("runs");
        c16 / iso
    };
    let (r_fixed, r_loaded) = (ratio(&fixed), ratio(&with));
    assert!(
        r_loaded > r_fixed * 1.001,
        "16 copies / alone: fixed {r_fixed:.4}, loaded {r_loaded:.4}"
    );
}

/// Under the group barrier, rounds are back-to-back concurrent runs. Letting the next
/// round start when the current one has placed its workgroups overlaps a lone kernel's
/// tail with the next (CD 1 gains); at larger CDs the overlap can also crowd a round's
/// tail, so it is within 1 % of the barrier either way.
#[test]
fn rounds_under_both_cd_semantics() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = shape(1024, 1024, 1024, GemmDataType::F16);
    let k = best(&gpu, &cal, &s);
    for cd in [1u32, 2, 4, 8] {
        let barrier = rounds_time(&gpu, &cal, &s, &k, cd, 16, false).expect("runs");
        let groups = f64::from(16 / cd) * concurrent_time(&gpu, &cal, &s, &k, cd).expect("runs");
        assert!(
            (barrier - groups).abs() <= 1e-6 * groups,
            "CD {cd}: rounds {barrier} vs {groups}"
        );
        let head = rounds_time(&gpu, &cal, &s, &k, cd, 16, true).expect("runs");
        assert!(
            head <= barrier * 1.01,
            "CD {cd}: head-change {head} vs barrier {barrier}"
        );
        if cd == 1 {
            assert!(
                head < barrier,
                "CD 1: head-change {head} vs barrier {barrier}"
            );
        }
    }
}
