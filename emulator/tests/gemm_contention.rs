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

/// Split-K atomics are paced by the L2's atomic rate: on the H200 preset a split-K
/// configuration costs more than with atomics charged as plain writes, and a
/// configuration without split-K is untouched.
#[test]
fn the_l2_atomic_rate_slows_split_k_atomics_only() {
    use nmcp_emulator::gpu::h200::{h200_calibration, h200_catalog};
    let cat = h200_catalog();
    let cal = h200_calibration();
    let gpu = GpuConfig::h200();
    let plain = GpuConfig {
        llc_atomic_adds_per_ns: 0.0,
        ..GpuConfig::h200()
    };
    assert!(gpu.llc_atomic_byte_cost() > 1.0);
    assert!((plain.llc_atomic_byte_cost() - 1.0).abs() < 1e-12);
    let s = shape(2048, 2048, 2048, GemmDataType::F16);
    let split = *cat.get(11).expect("config 11");
    assert!(split.split_atomic && split.split_u > 1);
    let whole = *cat.get(0).expect("config 0");
    let t = |g: &GpuConfig, k: &CatalogKernel, n: u32| {
        concurrent_time(g, &cal, &s, k, n).expect("runs")
    };
    for n in [1, 16] {
        assert!(t(&gpu, &split, n) > 1.05 * t(&plain, &split, n), "n = {n}");
        assert_eq!(t(&gpu, &whole, n), t(&plain, &whole, n), "n = {n}");
    }
}

/// A persistent grid holds at most one wave of workgroups, covers every tile, and makes
/// a concurrent copy wait for free slots: two copies overlap less than with one
/// workgroup per tile, while a copy alone takes about the same time.
#[test]
fn a_persistent_grid_keeps_one_wave_and_serialises_concurrent_copies() {
    use nmcp_emulator::gpu::gemm::kernel_cost;
    use nmcp_emulator::gpu::h200::{h200_calibration, h200_catalog};
    let gpu = GpuConfig::h200();
    let tiled = h200_calibration();
    let persistent = Calibration {
        persistent_grid: true,
        ..tiled
    };
    let s = shape(8192, 8192, 2048, GemmDataType::F16);
    let k = *h200_catalog().get(2).expect("config 2");
    let cost = kernel_cost(&gpu, &tiled, &s, &k).expect("fits");
    let slots = u64::from(gpu.cus) * u64::from(cost.occupancy);
    assert!(cost.workgroups > slots);
    let p = cost.persistent(slots);
    assert!(p.workgroups <= slots);
    let tiles = p.workgroups as f64 * p.tiles_per_wg;
    assert!(tiles >= cost.workgroups as f64 && tiles < cost.workgroups as f64 + p.tiles_per_wg);
    assert!((p.wg_flops / p.tiles_per_wg - cost.wg_flops).abs() < 1e-6 * cost.wg_flops);
    let alone = |c: &Calibration| isolated_time(&gpu, c, &s, &k).expect("runs");
    let two = |c: &Calibration| concurrent_time(&gpu, c, &s, &k, 2).expect("runs");
    let (a_t, a_p) = (alone(&tiled), alone(&persistent));
    assert!(
        (a_p / a_t - 1.0).abs() < 0.1,
        "alone: tiled {a_t} persistent {a_p}"
    );
    assert!(two(&persistent) / a_p >= two(&tiled) / a_t - 1e-9);
    assert!(
        two(&persistent) > 1.8 * a_p,
        "two persistent copies barely overlap"
    );
}

/// Hopper's warpgroup matrix instruction is 64 rows by up to 256 columns and reads both
/// operands from shared memory, so a tile long in N moves fewer operand bytes per FLOP
/// than the same tile long in M: with the H200's option, 64 x 128 beats 128 x 64 and
/// 128 x 256 beats 256 x 128 (as they do on the device); without it they are equal, and
/// kernels that are not whole warpgroups (2 warps) keep their tile's figure.
#[test]
fn warpgroup_instructions_make_wide_tiles_cheaper_than_tall_ones() {
    use nmcp_emulator::gpu::h200::{h200_calibration, h200_catalog};
    let cat = h200_catalog();
    let with = h200_calibration();
    let without = Calibration {
        warpgroup_mma_rows: None,
        ..with
    };
    let eff = |c: &Calibration, i: usize| c.efficiency(cat.get(i).expect("config"), 1);
    // 0: 128x256 and 1: 256x128 on 8 warps; 4: 128x64 and 5: 64x128 on 4; 7: 64x32 and
    // 8: 32x64 on 2.
    assert!((eff(&without, 0) - eff(&without, 1)).abs() < 1e-12);
    assert!((eff(&without, 4) - eff(&without, 5)).abs() < 1e-12);
    assert!(eff(&with, 0) > eff(&with, 1));
    assert!(eff(&with, 5) > eff(&with, 4));
    // One m64n128 instruction is the 64 x 128 tile itself.
    assert!((eff(&with, 5) - eff(&without, 5)).abs() < 1e-12);
    assert!((eff(&with, 7) - eff(&without, 7)).abs() < 1e-12);
    assert!((eff(&with, 7) - eff(&with, 8)).abs() < 1e-12);
}

/// With one front end setting kernels up in launch order, sixteen copies of a short
/// kernel launched at once start `kernel_start_ns` apart, so they cannot finish before
/// sixteen start-ups have passed; with a front end per stream they start together and
/// finish far sooner. One copy alone takes the same time either way.
#[test]
fn one_front_end_sets_kernels_up_one_at_a_time() {
    use nmcp_emulator::gpu::h200::{h200_calibration, h200_catalog};
    let cal = h200_calibration();
    let serial = GpuConfig::h200();
    assert!(serial.serial_kernel_start);
    let parallel = GpuConfig {
        serial_kernel_start: false,
        ..GpuConfig::h200()
    };
    let s = shape(512, 512, 512, GemmDataType::F16);
    let k = *h200_catalog().get(2).expect("config 2");
    let alone = |g: &GpuConfig| isolated_time(g, &cal, &s, &k).expect("runs");
    let sixteen = |g: &GpuConfig| concurrent_time(g, &cal, &s, &k, 16).expect("runs");
    assert!((alone(&serial) - alone(&parallel)).abs() < 1e-6);
    assert!(sixteen(&serial) >= 16.0 * serial.kernel_start_ns);
    assert!(
        sixteen(&parallel) < 0.6 * sixteen(&serial),
        "parallel {} serial {}",
        sixteen(&parallel),
        sixteen(&serial)
    );
}
