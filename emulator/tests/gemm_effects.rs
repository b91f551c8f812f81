//! Chapter 7's effects, each in isolation on the GEMM model (issue 12, item 4): what the
//! concurrency configurations can show depends on them.

use nmcp_emulator::gpu::catalog::{Catalog, CatalogKernel};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
use nmcp_emulator::gpu::search::best_isolated_kernel;
use nmcp_emulator::gpu::sim::{concurrent_time, isolated_time, makespan, makespan_partitioned};
use nmcp_isa::gemm_ext::{GemmDataType, GemmProblem};

fn shape(m: u32, n: u32, k: u32) -> GemmShape {
    GemmProblem::new(m, n, k, false, false, GemmDataType::F16)
}

/// The best isolated catalog kernel for `s` on `gpu`.
fn best(gpu: &GpuConfig, cal: &Calibration, s: &GemmShape) -> CatalogKernel {
    best_isolated_kernel(gpu, cal, &Catalog::standard(), s).expect("a kernel runs")
}

/// Sixteen identical kernels whose bandwidth demand sums to the capacity up to rounding
/// once stalled every workgroup (the water-filling level was the rounding residue): the
/// run took 2.6e17 ns. Every CD from 2 to 16 now takes time in proportion.
#[test]
fn identical_kernels_at_saturation_do_not_stall() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = shape(256, 1024, 1024);
    let k = best(&gpu, &cal, &s);
    let iso = isolated_time(&gpu, &cal, &s, &k).expect("runs");
    for c in [2u32, 4, 8, 15, 16] {
        let t = concurrent_time(&gpu, &cal, &s, &k, c).expect("runs");
        assert!(
            t <= f64::from(c) * iso * 1.5,
            "{c} copies: {t} ns vs {iso} ns alone"
        );
    }
}

/// A GEMM of one partial wave (16 workgroups on 120 CUs) leaves most of the GPU idle:
/// a second copy runs beside it, so two take less than twice one.
#[test]
fn a_partial_wave_gemm_gains_from_concurrency() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = shape(512, 512, 512);
    let k = best(&gpu, &cal, &s);
    let iso = isolated_time(&gpu, &cal, &s, &k).expect("runs");
    let two = concurrent_time(&gpu, &cal, &s, &k, 2).expect("runs");
    assert!(two < 1.9 * iso, "two {two} vs one {iso}");
}

/// CU-Partition gives each of two kernels half the CUs for their whole run; Default lets
/// the small one finish and the large one take every CU. On a small + large pair the
/// partition leaves half the GPU idle once the small kernel is done.
#[test]
fn cu_partition_differs_from_default_on_a_mixed_pair() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let (a, b) = (shape(512, 512, 512), shape(4096, 4096, 4096));
    let runs = [(a, best(&gpu, &cal, &a)), (b, best(&gpu, &cal, &b))];
    let shared = makespan(&gpu, &cal, &runs).expect("runs").0;
    let split = makespan_partitioned(&gpu, &cal, &runs, 2).expect("runs").0;
    assert!(
        split > 1.5 * shared,
        "partitioned {split} vs shared {shared}"
    );
}

/// A large-K GEMM keeps long panels live: sixteen of them overflow the LLC and re-fetch
/// from HBM, so each runs slower than when two share the GPU (the ch. 7 thrash of gpt2 /
/// gpt3 / T-NLG at CD > 2). The kernel is the best one without split-U: a split kernel
/// walks only its slice of K, which shortens the live panels, and the tuner picks one for
/// this size since the catalog has split-U on every tile; that relief is
/// checked too.
#[test]
fn large_k_gemms_at_cd16_run_slower_per_gemm_than_at_cd2() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = shape(2048, 2048, 32768);
    let catalog = Catalog::standard();
    let best_of = |split: bool| {
        *catalog
            .kernels()
            .iter()
            .filter(|k| (k.split_u > 1) == split)
            .filter_map(|k| isolated_time(&gpu, &cal, &s, k).map(|t| (k, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("a kernel runs")
            .0
    };
    let per = |k: &CatalogKernel, c: u32| {
        concurrent_time(&gpu, &cal, &s, k, c).expect("runs") / f64::from(c)
    };
    let whole_k = best_of(false);
    let (two, sixteen) = (per(&whole_k, 2), per(&whole_k, 16));
    assert!(
        sixteen > 1.2 * two,
        "per GEMM: CD 16 {sixteen} vs CD 2 {two}"
    );
    let sliced = best_of(true);
    let (two_s, sixteen_s) = (per(&sliced, 2), per(&sliced, 16));
    assert!(
        sixteen_s / two_s < sixteen / two,
        "split-U's shorter panels: CD 16 / CD 2 {} vs {}",
        sixteen_s / two_s,
        sixteen / two
    );
}

/// LLC channel camping (issue 12's size-specific winners): a skinny GEMM whose B columns
/// alias onto two LLC channels (K = 2560 f32: 10 KiB apart, 2 KiB mod the 4 KiB channel
/// period) and has a single tile row runs slower than the same kernel on a GPU without
/// channels, StaggerU by tile row (one row: no spread) does not help, StaggerU by tile
/// column does.
#[test]
fn llc_channel_camping_slows_an_aliased_gemm_and_the_column_stagger_relieves_it() {
    let gpu = GpuConfig::mi100();
    let mut flat = gpu.clone();
    flat.llc_channel_interleave_bytes = 0;
    let cal = Calibration::default();
    let s = GemmProblem::new(35, 8457, 2560, true, false, GemmDataType::F32);
    let pick = |mapping: u8| {
        *Catalog::standard()
            .kernels()
            .iter()
            .find(|k| {
                (k.mt0, k.mt1, k.depth_u, k.split_u, k.stagger_mapping) == (64, 64, 16, 1, mapping)
                    && k.threads == 256
                    && k.prefetch
                    && k.lds_pad
            })
            .expect("kernel in catalog")
    };
    let (by_row, by_column) = (pick(0), pick(1));
    let t_row = isolated_time(&gpu, &cal, &s, &by_row).expect("runs");
    let t_column = isolated_time(&gpu, &cal, &s, &by_column).expect("runs");
    let t_flat = isolated_time(&flat, &cal, &s, &by_row).expect("runs");
    assert!(
        t_row > 1.5 * t_flat,
        "camping {t_row} ns vs no channels {t_flat} ns"
    );
    assert!(
        t_column < 0.8 * t_row,
        "column stagger {t_column} ns vs row {t_row} ns"
    );
    assert!(t_column >= t_flat * (1.0 - 1e-9), "{t_column} vs {t_flat}");
    // Two copies of the camping kernel: at independent phases (the default) each has
    // its own cap and the pair overlaps; in phase (`llc_copies_in_phase`) they camp on
    // the same channels under one cap, and the pair gains only what filling the lone
    // kernel's partial second wave gives (133 workgroups on 120 CUs).
    let pair = concurrent_time(&gpu, &cal, &s, &by_row, 2).expect("runs");
    assert!(
        pair < 0.6 * 2.0 * t_row,
        "two copies {pair} ns vs one {t_row} ns"
    );
    let in_phase = Calibration {
        llc_copies_in_phase: true,
        ..cal
    };
    assert_eq!(isolated_time(&gpu, &in_phase, &s, &by_row), Some(t_row));
    let pair_in_phase = concurrent_time(&gpu, &in_phase, &s, &by_row, 2).expect("runs");
    assert!(
        pair_in_phase > 1.6 * t_row,
        "two in-phase copies {pair_in_phase} ns vs one {t_row} ns"
    );
    // A different kernel (a 64 x 48 tile, also one tile row) camps at its own phase
    // either way: the pair overlaps.
    let other = *Catalog::standard()
        .kernels()
        .iter()
        .find(|k| {
            (
                k.mt0,
                k.mt1,
                k.depth_u,
                k.split_u,
                k.stagger_mapping,
                k.threads,
            ) == (64, 48, 16, 1, 0, 256)
                && k.prefetch
                && k.lds_pad
        })
        .expect("kernel in catalog");
    let t_other = isolated_time(&gpu, &cal, &s, &other).expect("runs");
    let (mixed, _) = makespan(&gpu, &cal, &[(s, by_row), (s, other)]).expect("runs");
    assert!(
        mixed < 0.8 * (t_row + t_other),
        "two kernels at their own phases {mixed} ns vs {t_row} + {t_other} ns"
    );
    // Off the channel period the mapping does not matter.
    let even = GemmProblem::new(4000, 4000, 4000, false, false, GemmDataType::F32);
    let a = isolated_time(&gpu, &cal, &even, &by_row).expect("runs");
    let b = isolated_time(&flat, &cal, &even, &by_row).expect("runs");
    assert!((a - b).abs() <= 0.02 * b, "{a} vs {b}");
}

/// Tensile's kernels divide K into whole main-loop iterations: global split-U hands them
/// out per slice (the first `L % split` slices take one more), and `K % U` runs in one
/// slice's unprefetched tail loop. So the longest slice of 4096 over 6 slices at U = 32
/// multiplies 704 elements (22 iterations), not 4096 / 6; at U = 16 it multiplies 688;
/// K = 4224 (132 iterations, 22 per slice) costs that slice no more than K = 4096; and a
/// K with a remainder waits one memory latency more.
#[test]
fn split_u_slices_take_whole_iterations_and_a_k_tail_waits_for_memory() {
    use nmcp_emulator::gpu::gemm::{kernel_cost, SliceKLoop};
    let lp = |iterations, tail| SliceKLoop { iterations, tail };
    assert_eq!(SliceKLoop::critical(4096, 32, 6), lp(22, 0));
    assert_eq!(SliceKLoop::critical(4096, 16, 6), lp(43, 0));
    assert_eq!(SliceKLoop::critical(4096, 32, 8), lp(16, 0));
    assert_eq!(SliceKLoop::critical(5140, 32, 1), lp(160, 20));
    assert_eq!(SliceKLoop::critical(29, 32, 1), lp(0, 29));
    // 3 iterations over 4 slices: three slices take one each, the fourth the tail.
    assert_eq!(SliceKLoop::critical(100, 32, 4), lp(1, 0));
    assert_eq!(SliceKLoop::critical(16, 32, 4), lp(0, 16));

    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let kernel = |u: u16, split: u8| {
        *cat.kernels()
            .iter()
            .find(|k| k.parameters() == (64, 64, u, 256, split, true, true, 0))
            .expect("in the catalog")
    };
    let cost = |k: u32, u: u16, split: u8| {
        kernel_cost(&gpu, &cal, &shape(1024, 512, k), &kernel(u, split)).expect("runs")
    };
    let tile_flops = 2.0 * 64.0 * 64.0;
    assert_eq!(cost(4096, 32, 6).wg_flops, tile_flops * 704.0);
    assert_eq!(cost(4096, 16, 6).wg_flops, tile_flops * 688.0);
    assert_eq!(cost(4224, 32, 6).wg_flops, cost(4096, 32, 6).wg_flops);
    let t = |k: u32, u: u16, split: u8| {
        isolated_time(&gpu, &cal, &shape(1024, 512, k), &kernel(u, split)).expect("runs")
    };
    let (t4096, t4224) = (t(4096, 32, 6), t(4224, 32, 6));
    assert!(
        t4224 < 1.01 * t4096,
        "K 4224: {t4224} ns, K 4096: {t4096} ns (3 % more FLOPs, same slice work)"
    );
    // The tail loop: 4 elements more than 4096 cost one exposed latency per workgroup.
    let (even, tail) = (cost(4096, 32, 1), cost(4100, 32, 1));
    assert_eq!(tail.wg_fixed_ns - even.wg_fixed_ns, cal.memory_latency_ns);
    assert_eq!(tail.wg_flops - even.wg_flops, tile_flops * 4.0);
    assert_eq!(tail.wg_latency_floor_ns, even.wg_latency_floor_ns);
}
