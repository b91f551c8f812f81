//! The catalog's size-dependent Tensile parameters, each in isolation (issue 12, item 1:
//! "a catalog irregular enough per size"): WorkGroupMapping, the
//! `AssertFree0ElementMultiple` size assertion with guarded edge stores, and the guarded
//! loads of the K tail loop.

use nmcp_emulator::gpu::catalog::{Catalog, CatalogKernel, ASSERT_FREE0_MULTIPLE};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{
    edge_store_extra_ns, kernel_cost, tail_loop_extra_ns, wgm_changes_nothing, Calibration,
    GemmShape,
};
use nmcp_emulator::gpu::sim::isolated_time;
use nmcp_isa::gemm_ext::{GemmDataType, GemmProblem};

fn f16(m: u32, n: u32, k: u32) -> GemmShape {
    GemmProblem::new(m, n, k, false, false, GemmDataType::F16)
}

/// The catalog entry with these parameters (most threads, prefetch and padding).
fn variant(mt0: u16, mt1: u16, u: u16, wgm: u8, af0em: u8) -> CatalogKernel {
    Catalog::standard()
        .kernels()
        .iter()
        .filter(|k| {
            (k.mt0, k.mt1, k.depth_u, k.split_u, k.wgm, k.af0em) == (mt0, mt1, u, 1, wgm, af0em)
        })
        .max_by_key(|k| (k.threads, k.prefetch, k.lds_pad))
        .copied()
        .expect("kernel in catalog")
}

#[test]
fn every_kernel_comes_in_the_four_variants_in_index_order() {
    let cat = Catalog::standard();
    assert_eq!(cat.len() % 4, 0);
    for quad in cat.kernels().chunks(4) {
        let variants: Vec<(u8, u8)> = quad.iter().map(|k| (k.wgm, k.af0em)).collect();
        assert_eq!(
            variants,
            [
                (1, 1),
                (1, ASSERT_FREE0_MULTIPLE),
                (8, 1),
                (8, ASSERT_FREE0_MULTIPLE)
            ]
        );
        for k in quad {
            assert_eq!(k.base(), quad[0].base(), "{}", k.name());
            assert_eq!(
                k.meta(GemmDataType::F16).lds_bytes,
                quad[0].meta(GemmDataType::F16).lds_bytes
            );
        }
    }
}

#[test]
fn workgroup_mapping_changes_the_llc_working_set_only_where_the_grid_allows() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let (plain, boxed) = (variant(128, 128, 32, 1, 1), variant(128, 128, 32, 8, 1));
    // A 64 x 64 tile grid: 240 residents in hardware order span 64 tile rows and 4
    // columns (68 panels); in boxes of 8 columns, 30 rows and 8 columns (38 panels).
    let big = f16(8192, 8192, 8192);
    let (a, b) = (
        kernel_cost(&gpu, &cal, &big, &plain).expect("runs"),
        kernel_cost(&gpu, &cal, &big, &boxed).expect("runs"),
    );
    let r = 240.0;
    assert_eq!(a.span(r), (64.0, 4.0));
    assert_eq!(b.span(r), (30.0, 8.0));
    assert!(b.footprint(r) < 0.6 * a.footprint(r));
    assert!(b.first_touch_bytes(r) < a.first_touch_bytes(r));
    // With every panel evicted between waves the boxed order fetches less from HBM.
    assert!(b.hbm_bytes(r, 1.0) < a.hbm_bytes(r, 1.0));
    // Without misses the order does not matter: the same HBM bytes.
    assert_eq!(b.hbm_bytes(r, 0.0), a.hbm_bytes(r, 0.0));
    assert!(!wgm_changes_nothing(&gpu, &cal, &big, &boxed));
    // A small split-U tile is HBM-bound once its panels miss: the boxed order runs
    // faster.
    let named = |name: &str| {
        Catalog::standard()
            .kernels()
            .iter()
            .find(|k| k.name() == name)
            .copied()
            .expect("kernel in catalog")
    };
    let (small_plain, small_boxed) = (
        named("MT16x16_U16_T64_S4"),
        named("MT16x16_U16_T64_S4_WGM8"),
    );
    let t_plain = isolated_time(&gpu, &cal, &big, &small_plain).expect("runs");
    let t_boxed = isolated_time(&gpu, &cal, &big, &small_boxed).expect("runs");
    assert!(t_boxed < 0.9 * t_plain, "{t_boxed} vs {t_plain}");
    // One tile column: both orders walk the same tiles.
    let skinny = f16(8192, 128, 8192);
    let (a, b) = (
        kernel_cost(&gpu, &cal, &skinny, &plain).expect("runs"),
        kernel_cost(&gpu, &cal, &skinny, &boxed).expect("runs"),
    );
    assert_eq!(a.footprint(r), b.footprint(r));
    assert_eq!(a.first_touch_bytes(r), b.first_touch_bytes(r));
    assert!(wgm_changes_nothing(&gpu, &cal, &skinny, &boxed));
    // Panels that fit in the LLC: the isolated times are identical, as the tuner's
    // prune assumes.
    let small_k = f16(4096, 4096, 256);
    assert!(wgm_changes_nothing(&gpu, &cal, &small_k, &boxed));
    assert_eq!(
        isolated_time(&gpu, &cal, &small_k, &plain),
        isolated_time(&gpu, &cal, &small_k, &boxed)
    );
}

#[test]
fn a_size_assertion_kernel_is_eligible_only_for_sizes_that_satisfy_it() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let asserted = variant(128, 128, 32, 1, ASSERT_FREE0_MULTIPLE);
    let guarded = variant(128, 128, 32, 1, 1);
    let odd = f16(1001, 4096, 1024);
    assert!(!asserted.eligible(&odd));
    assert!(kernel_cost(&gpu, &cal, &odd, &asserted).is_none());
    assert!(isolated_time(&gpu, &cal, &odd, &asserted).is_none());
    assert!(isolated_time(&gpu, &cal, &odd, &guarded).is_some());
    let multiple = f16(1000, 4096, 1024);
    assert!(asserted.eligible(&multiple));
    assert!(isolated_time(&gpu, &cal, &multiple, &asserted).is_some());
}

#[test]
fn an_asserted_kernel_beats_its_guarded_twin_on_a_ragged_eligible_size_and_ties_elsewhere() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let asserted = variant(128, 128, 32, 1, ASSERT_FREE0_MULTIPLE);
    let guarded = variant(128, 128, 32, 1, 1);
    // 1000 = 7 x 128 + 104: the eighth tile row crosses M; 1000 is a multiple of 8.
    let ragged = f16(1000, 4096, 1024);
    let t_asserted = isolated_time(&gpu, &cal, &ragged, &asserted).expect("runs");
    let t_guarded = isolated_time(&gpu, &cal, &ragged, &guarded).expect("runs");
    assert!(t_asserted < t_guarded, "{t_asserted} vs {t_guarded}");
    // The guard cost from its instructions: 64 accumulators per thread stored as 64
    // guarded elements (3 instructions each) instead of 8 vectors; an asserted edge
    // tile stores 8 guarded vectors.
    let per_wg = |k: &CatalogKernel| edge_store_extra_ns(&gpu, &cal, k, 2.0);
    let cycle = 1.0 / gpu.clock_ghz;
    assert!((per_wg(&guarded) - (64.0 * 3.0 - 8.0) * 4.0 * cycle).abs() < 1e-9);
    assert!((per_wg(&asserted) - (8.0 * 3.0 - 8.0) * 4.0 * cycle).abs() < 1e-9);
    // No edge tiles: the two are the same kernel.
    let even = f16(1024, 4096, 1024);
    assert_eq!(
        isolated_time(&gpu, &cal, &even, &asserted),
        isolated_time(&gpu, &cal, &even, &guarded)
    );
    // Which twin tuning simulates: exactly one of each pair.
    for s in [ragged, even, f16(1001, 4096, 1024)] {
        assert!(
            asserted.tuning_candidate(&s) != guarded.tuning_candidate(&s),
            "{s}"
        );
    }
}

#[test]
fn the_k_tail_loop_costs_its_guarded_loads() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let k32 = variant(128, 128, 32, 1, 1);
    let k16 = variant(128, 128, 16, 1, 1);
    // K = 1040 = 32 x 32 + 16: a 16-deep tail for U = 32, none for U = 16.
    let ragged = f16(4096, 4096, 1040);
    let fixed =
        |k: &CatalogKernel, s: &GemmShape| kernel_cost(&gpu, &cal, s, k).expect("runs").wg_fixed_ns;
    let tail = tail_loop_extra_ns(&gpu, &cal, &k32, 1040.0, 2.0);
    // 256 x 16 elements over 256 threads: 16 guarded loads (48 instructions) instead of
    // 2 vectors.
    assert!((tail - (48.0 - 2.0) * 4.0 / gpu.clock_ghz).abs() < 1e-9);
    assert!((fixed(&k32, &ragged) - gpu.wg_fixed_ns - tail).abs() < 1e-9);
    assert_eq!(tail_loop_extra_ns(&gpu, &cal, &k16, 1040.0, 2.0), 0.0);
    assert_eq!(fixed(&k16, &ragged), gpu.wg_fixed_ns);
    assert_eq!(fixed(&k32, &f16(4096, 4096, 1024)), gpu.wg_fixed_ns);
}
