//! The catalog and the search for a GEMM's best isolated kernel (issue 12, item 1: a
//! catalog irregular enough per size that tuning finds many distinct winners): the
//! generator's space, the cost-only lower bound the search prunes with, the pruned
//! search against the exhaustive one, and split-U's reduction after the main kernel.

use nmcp_emulator::gpu::catalog::{Catalog, CatalogSpace};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{kernel_cost, Calibration, GemmShape};
use nmcp_emulator::gpu::search::{
    best_isolated, best_isolated_exhaustive, isolated_time_lower_bound, ranked_isolated,
};
use nmcp_emulator::gpu::sim::isolated_time;
use nmcp_isa::gemm_ext::GemmDataType;
use std::collections::BTreeSet;

/// Sizes that stress every term of the bound: a one-wave grid, ragged edges, a small
/// grid with a large K (split-U's case), transposes, both data types, a batched
/// attention GEMM.
fn shapes() -> Vec<GemmShape> {
    let mut v = Vec::new();
    for dt in [GemmDataType::F16, GemmDataType::F32] {
        v.push(GemmShape::new(1600, 2048, 1600, false, false, dt));
        v.push(GemmShape::new(4096, 4096, 4096, false, false, dt));
        v.push(GemmShape::new(1024, 512, 4096, true, false, dt));
        v.push(GemmShape::new(29, 3200, 2048, false, true, dt));
        v.push(GemmShape::new(36549, 1024, 512, false, false, dt));
        v.push(GemmShape::new(192, 64, 20480, false, true, dt));
        let mut att = GemmShape::new(512, 512, 64, true, false, dt);
        att.batch = 64;
        v.push(att);
    }
    v
}

#[test]
fn the_standard_space_is_a_superset_of_the_power_of_two_one() {
    let old = Catalog::generate(&CatalogSpace::POWER_OF_TWO);
    let new = Catalog::standard();
    assert_eq!(old.len(), 279, "the catalog of stops 1-33");
    assert_eq!(
        new.len(),
        2 * 2925,
        "2,925 tile configurations x 2 StaggerU mappings"
    );
    let all: BTreeSet<_> = new.kernels().iter().map(|k| k.parameters()).collect();
    assert_eq!(all.len(), new.len(), "no kernel twice");
    assert!(old.kernels().iter().all(|k| k.stagger_mapping == 0));
    for k in old.kernels() {
        assert!(all.contains(&k.parameters()), "{} missing", k.name());
    }
    for (i, k) in new.kernels().iter().enumerate() {
        assert_eq!(k.index as usize, i);
        assert!(k.lds_bytes(GemmDataType::F16) <= 64 * 1024, "{}", k.name());
        assert!(k.mt0.max(k.mt1) <= 4 * k.mt0.min(k.mt1), "{}", k.name());
        assert_eq!(new.by_kernel_object(k.kernel_object()), Some(k));
    }
    // Non-power-of-two tiles and split-U beyond 4, on tiles beyond 64 x 64.
    assert!(new.kernels().iter().any(|k| k.mt0 == 96 && k.mt1 == 192));
    assert!(new
        .kernels()
        .iter()
        .any(|k| k.split_u == 6 && k.mt0 == 128 && k.prefetch));
}

#[test]
fn the_lower_bound_never_exceeds_the_simulated_time() {
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let gpu = GpuConfig::mi100();
    for g in [gpu.clone(), gpu.constrained(4)] {
        for s in shapes() {
            let mut checked = 0;
            for k in cat.kernels().iter().step_by(23) {
                let (Some(b), Some(t)) = (
                    isolated_time_lower_bound(&g, &cal, &s, k),
                    isolated_time(&g, &cal, &s, k),
                ) else {
                    continue;
                };
                assert!(b <= t * (1.0 + 1e-12), "{s} {}: bound {b} > {t}", k.name());
                checked += 1;
            }
            assert!(checked > 100, "{s}: only {checked} kernels checked");
        }
    }
}

#[test]
fn pruned_search_equals_the_exhaustive_search() {
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let gpu = GpuConfig::mi100();
    // Every shape on the GPU, every third on GPU/4 (the exhaustive side simulates all
    // 5,850 kernels per shape).
    for (g, every) in [(gpu.clone(), 1), (gpu.constrained(4), 3)] {
        for s in shapes().into_iter().step_by(every) {
            let pruned = best_isolated(&g, &cal, &cat, &s);
            assert!(pruned.is_some(), "{s}");
            assert_eq!(pruned, best_isolated_exhaustive(&g, &cal, &cat, &s), "{s}");
            // The band's list starts with the winner, is sorted, and stays in the band.
            let ranked = ranked_isolated(&g, &cal, &cat, &s, 0.01);
            assert_eq!(ranked.first().copied(), pruned, "{s}");
            let best_t = pruned.map_or(0.0, |p| p.1);
            assert!(ranked.windows(2).all(|w| w[0].1 <= w[1].1));
            assert!(ranked.iter().all(|r| r.1 <= best_t * 1.01));
        }
    }
}

/// Split-U's partial tiles are summed by a reduction after the main kernel: it pays on
/// a small grid with a large K (the grid alone leaves most CUs idle) and not on a grid
/// that fills the GPU for several waves, where the reduction is pure cost.
#[test]
fn split_u_pays_on_a_small_grid_and_not_on_a_full_one() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let kernel = |split: u8| {
        *cat.kernels()
            .iter()
            .find(|k| k.parameters() == (128, 256, 32, 256, split, true, true, 0))
            .expect("in the catalog")
    };
    let t = |s: &GemmShape, split: u8| isolated_time(&gpu, &cal, s, &kernel(split)).unwrap();
    let small = GemmShape::new(1024, 512, 4096, false, false, GemmDataType::F16);
    assert!(
        t(&small, 4) < 0.5 * t(&small, 1),
        "{} vs {}",
        t(&small, 4),
        t(&small, 1)
    );
    let full = GemmShape::new(4096, 4096, 4096, false, false, GemmDataType::F16);
    assert!(
        t(&full, 3) > t(&full, 1),
        "{} vs {}",
        t(&full, 3),
        t(&full, 1)
    );
    // The reduction: its launch plus every f32 partial read and the output written.
    let c = kernel_cost(&gpu, &cal, &full, &kernel(3)).unwrap();
    let bytes = 4096.0 * 4096.0 * (4.0 * 3.0 + 2.0);
    let expect = gpu.kernel_start_ns + bytes / gpu.hbm_sustained();
    assert!(
        (c.tail_ns - expect).abs() < 1e-6 * expect,
        "{} vs {expect}",
        c.tail_ns
    );
    assert_eq!(
        kernel_cost(&gpu, &cal, &full, &kernel(1)).unwrap().tail_ns,
        0.0
    );
    // The kernel completes no earlier than its tail after the last workgroup.
    assert!(t(&full, 3) >= c.tail_ns + c.alone_ns());
}

/// The winner follows the size: sizes that differ in their edges (M 1024 / 1600 / 3008),
/// in K, or in the grid's shape pick different kernels.
#[test]
fn winners_follow_the_size() {
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let mut winners = BTreeSet::new();
    for (m, n, k) in [
        (1024, 4096, 1024),
        (1600, 4096, 1024),
        (3008, 4096, 1024),
        (1024, 512, 4096),
        (1024, 512, 16384),
        (4096, 64, 1024),
        (36549, 512, 1024),
    ] {
        let s = GemmShape::new(m, n, k, false, false, GemmDataType::F16);
        winners.insert(best_isolated(&gpu, &cal, &cat, &s).unwrap().0);
    }
    assert!(
        winners.len() >= 5,
        "{} distinct winners of 7",
        winners.len()
    );
}
