//! Trends of the GEMM timing model (SPEC 5.2): efficiency of BERT-size GEMMs, the tail
//! effect, LLC thrashing at high concurrency, occupancy and waves, determinism.

use nmcp_emulator::gpu::catalog::{Catalog, KERNEL_OBJECT_BASE, KERNEL_OBJECT_STRIDE};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{kernel_cost, Calibration, GemmShape};
use nmcp_emulator::gpu::search::best_isolated;
use nmcp_emulator::gpu::sim::{concurrent_time, isolated_time, GpuSim};
use nmcp_emulator::gpu::{GpuEvent, KernelEngine, KernelLaunch};
use nmcp_firmware::cp::features::{occupancy, waves_q16, workgroups};
use nmcp_isa::gemm_ext::GemmDataType;

fn f16(m: u32, n: u32, k: u32, ta: bool, tb: bool) -> GemmShape {
    GemmShape::new(m, n, k, ta, tb, GemmDataType::F16)
}

/// Best isolated kernel and its time.
/// The MI100 without LLC channels: for the tests that isolate one other effect on sizes
/// whose power-of-two leading dimensions would also camp on the LLC's channels (camping,
/// and its relief by concurrency, are tested on their own in `llc_channel` and
/// `gemm_effects`).
fn mi100_without_llc_channels() -> GpuConfig {
    let mut g = GpuConfig::mi100();
    g.llc_channel_interleave_bytes = 0;
    g
}

fn best(g: &GpuConfig, s: &GemmShape) -> (usize, f64) {
    let (i, t) = best_isolated(g, &Calibration::default(), &Catalog::standard(), s)
        .expect("some kernel runs");
    (i as usize, t)
}

#[test]
fn bert_size_gemms_reach_40_to_60_percent_of_peak() {
    let g = GpuConfig::mi100();
    for s in [
        f16(1024, 4096, 1024, false, false),
        f16(4096, 4096, 1024, false, false),
        f16(1024, 4096, 4096, true, false),
        f16(4096, 1024, 4096, false, true),
    ] {
        let (_, t) = best(&g, &s);
        let eff = s.flops() / t / g.peak_flops_per_ns(s.dtype);
        assert!((0.40..=0.60).contains(&eff), "{}: efficiency {eff:.3}", s);
    }
}

#[test]
fn concurrency_fills_the_tail_of_a_partial_wave_gemm() {
    // 1024 x 1024 x 256 with the isolated kernel: a fraction of a wave (88 workgroups
    // of 96 x 128 on 120 CUs), CUs idle alone. (Not 4096 x 256 x 1024: the 2,925-kernel
    // catalog has a 96-row tile that leaves that size only 28 % of its CUs idle.)
    let g = GpuConfig::mi100();
    let cal = Calibration::default();
    let s = f16(1024, 1024, 256, false, false);
    let (ki, t1) = best(&g, &s);
    let k = Catalog::standard().get(ki).copied().expect("kernel");
    let cost = kernel_cost(&g, &cal, &s, &k).expect("resident");
    let slots = u64::from(g.cus) * u64::from(cost.occupancy);
    assert!(cost.workgroups < slots, "expected a partial wave");
    let t2 = concurrent_time(&g, &cal, &s, &k, 2).expect("runs");
    let speedup = 2.0 * t1 / t2;
    assert!(
        speedup > 1.10,
        "2 concurrent copies speed up only {speedup:.3}x"
    );
}

#[test]
fn large_k_gemm_thrashes_the_llc_at_high_concurrency() {
    // A large-K weight-gradient GEMM: the panels of 16 copies cannot share the LLC.
    let g = mi100_without_llc_channels();
    let cal = Calibration::default();
    let s = f16(2048, 2048, 8192, false, true);
    let (ki, t1) = best(&g, &s);
    let k = Catalog::standard().get(ki).copied().expect("kernel");
    let s2 = 2.0 * t1 / concurrent_time(&g, &cal, &s, &k, 2).expect("runs");
    let s16 = 16.0 * t1 / concurrent_time(&g, &cal, &s, &k, 16).expect("runs");
    assert!(
        s16 < 1.0,
        "16 copies should be slower than serial, got {s16:.3}x"
    );
    assert!(
        s16 < s2,
        "speedup should fall with CD: 2 -> {s2:.3}, 16 -> {s16:.3}"
    );
    // With an LLC that holds everything, the same run does not degrade as much.
    let mut big = g.clone();
    big.llc_bytes *= 64;
    let b1 = isolated_time(&big, &cal, &s, &k).expect("runs");
    let b16 = 16.0 * b1 / concurrent_time(&big, &cal, &s, &k, 16).expect("runs");
    assert!(b16 > s16, "a larger LLC should help: {b16:.3} vs {s16:.3}");
}

#[test]
fn occupancy_and_waves_follow_the_resources() {
    let g = GpuConfig::mi100();
    let cat = Catalog::standard();
    let s = f16(4096, 4096, 1024, false, false);
    for k in cat.kernels().iter().step_by(17) {
        let meta = k.meta(s.dtype);
        let ext = s.to_ext();
        let res = g.cu_resources();
        let occ = occupancy(&meta, &res);
        let waves_per_wg = u32::from(k.threads).div_ceil(64);
        assert!(occ <= 40 / waves_per_wg && occ <= 16, "{}", k.name());
        if occ > 0 {
            assert!(occ <= 65536 / meta.lds_bytes, "{}: LDS bound", k.name());
            let wgs = workgroups(&ext, &meta);
            assert_eq!(
                wgs,
                u64::from(4096u32.div_ceil(u32::from(k.mt0)))
                    * u64::from(4096u32.div_ceil(u32::from(k.mt1)))
                    * u64::from(k.split_u)
            );
            let w = waves_q16(wgs, occ, &res).expect("resident");
            let expect = ((u128::from(wgs) << 16) / (120 * u128::from(occ))) as i64;
            assert_eq!(w, expect);
        }
    }
    // Catalog kernel objects resolve back to their entries.
    let k = cat.get(5).expect("entry 5");
    assert_eq!(
        k.kernel_object(),
        KERNEL_OBJECT_BASE + 5 * KERNEL_OBJECT_STRIDE
    );
    assert_eq!(cat.by_kernel_object(k.kernel_object()), Some(k));
    assert_eq!(cat.by_kernel_object(k.kernel_object() + 1), None);
}

#[test]
fn constrained_gpus_halve_cus_and_llc() {
    let g = GpuConfig::mi100();
    let h = g.constrained(2);
    let q = g.constrained(4);
    assert_eq!((h.cus, q.cus), (60, 30));
    assert_eq!((h.llc_bytes, q.llc_bytes), (4 << 20, 2 << 20));
    assert_eq!(h.hbm_bytes_per_ns, g.hbm_bytes_per_ns);
    let t3 = GpuConfig::t3_table_8_1();
    assert_eq!((t3.cus, t3.llc_bytes, t3.llc_banks), (80, 16 << 20, 64));
}

fn run_engine() -> Vec<GpuEvent> {
    let g = GpuConfig::mi100();
    let cat = Catalog::standard();
    let mut sim = GpuSim::new(g, Calibration::default());
    let s = f16(2048, 1024, 1024, false, false);
    let mut events = Vec::new();
    for (tag, ki) in [(1u64, 40usize), (2, 120), (3, 200)] {
        let k = cat.get(ki).expect("kernel");
        let mut ext = s.to_ext();
        let meta = k.meta(s.dtype);
        ext.kernels.push(meta).expect("room");
        let launch = KernelLaunch {
            gemm: Some((ext.clone(), meta)),
            workgroups: workgroups(&ext, &meta),
            workgroup_size: k.threads,
            workgroup_time: 0.0,
            barrier: false,
        };
        sim.launch(tag as f64 * 1000.0, tag, &launch);
    }
    sim.launch(
        500.0,
        9,
        &KernelLaunch {
            gemm: None,
            workgroups: 300,
            workgroup_size: 256,
            workgroup_time: 5000.0,
            barrier: false,
        },
    );
    while let Some(t) = sim.next_event() {
        sim.advance(t, &mut events);
    }
    events
}

#[test]
fn engine_reports_every_kernel_once_in_time_order_and_is_deterministic() {
    let a = run_engine();
    let b = run_engine();
    assert_eq!(a, b);
    let time = |e: &GpuEvent| match e {
        GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => *at,
    };
    assert!(a.windows(2).all(|w| time(&w[0]) <= time(&w[1])));
    for tag in [1u64, 2, 3, 9] {
        let done: Vec<&GpuEvent> = a
            .iter()
            .filter(|e| matches!(e, GpuEvent::Completed { tag: t, .. } if *t == tag))
            .collect();
        let disp: Vec<&GpuEvent> = a
            .iter()
            .filter(|e| matches!(e, GpuEvent::AllDispatched { tag: t, .. } if *t == tag))
            .collect();
        assert_eq!((done.len(), disp.len()), (1, 1), "tag {tag}");
        assert!(time(disp[0]) <= time(done[0]));
    }
}

/// The catalog kernel with these tiles, the most threads, no split, with prefetch.
fn kernel_with_tile(mt0: u16, mt1: u16) -> nmcp_emulator::gpu::catalog::CatalogKernel {
    Catalog::standard()
        .kernels()
        .iter()
        .filter(|k| k.mt0 == mt0 && k.mt1 == mt1 && k.split_u == 1 && k.stagger_mapping == 0)
        .max_by_key(|k| (k.threads, k.prefetch, k.depth_u))
        .copied()
        .expect("tile in catalog")
}

#[test]
fn hbm_row_locality_is_lost_as_more_kernels_stream() {
    let cal = Calibration::default();
    assert_eq!(cal.hbm_row_factor(1), 1.0);
    let mut last = 1.0;
    for s in 2..=16 {
        let f = cal.hbm_row_factor(s);
        assert!(f < last, "factor must fall with streams: {s} -> {f}");
        assert!(f > 1.0 / cal.hbm_row_miss_cost, "bounded by all-miss: {f}");
        last = f;
    }
    // A memory-bound GEMM: the penalty relative to perfect row locality grows with the
    // number of concurrent copies.
    let g = GpuConfig::mi100();
    let s = f16(8192, 128, 8192, false, false);
    let k = kernel_with_tile(64, 64);
    let no_rows = Calibration {
        hbm_row_miss_cost: 1.0,
        ..cal
    };
    let penalty = |copies: u32| {
        let with = concurrent_time(&g, &cal, &s, &k, copies).expect("runs");
        let without = concurrent_time(&g, &no_rows, &s, &k, copies).expect("runs");
        with / without
    };
    let (p1, p2, p8) = (penalty(1), penalty(2), penalty(8));
    assert!((p1 - 1.0).abs() < 1e-9, "one kernel is one stream: {p1}");
    assert!(p8 > p2 && p2 >= 1.0, "penalty 2: {p2}, 8: {p8}");
}

#[test]
fn cu_l1_bandwidth_limits_low_intensity_tiles_and_is_shared_by_residents() {
    let g = GpuConfig::mi100();
    let s = f16(4096, 4096, 1024, false, false);
    let small = kernel_with_tile(16, 16);
    let large = kernel_with_tile(128, 128);
    let with_l1 = |bytes: f64| Calibration {
        l1_bytes_per_cycle: bytes,
        ..Calibration::default()
    };
    let t = |cal: &Calibration, k| isolated_time(&g, cal, &s, k).expect("runs");
    // Less L1 bandwidth never helps; the small tile (more bytes per FLOP) feels it first.
    let (s_wide, s_def, s_narrow) = (
        t(&with_l1(1e9), &small),
        t(&with_l1(64.0), &small),
        t(&with_l1(16.0), &small),
    );
    assert!(
        s_wide <= s_def && s_def < s_narrow,
        "{s_wide} {s_def} {s_narrow}"
    );
    let slow_small = s_narrow / s_wide;
    let slow_large = t(&with_l1(16.0), &large) / t(&with_l1(1e9), &large);
    assert!(
        slow_small > slow_large,
        "small {slow_small} large {slow_large}"
    );
}

#[test]
fn dispatcher_launch_rate_costs_more_for_more_workgroups() {
    let g = GpuConfig::mi100();
    let s = f16(2048, 2048, 256, false, false);
    let rate = |w: f64| Calibration {
        waves_launched_per_cycle: w,
        ..Calibration::default()
    };
    let cost = |k| {
        let fast = isolated_time(&g, &rate(1e9), &s, k).expect("runs");
        let def = isolated_time(&g, &rate(4.0), &s, k).expect("runs");
        let slow = isolated_time(&g, &rate(1.0), &s, k).expect("runs");
        assert!(fast <= def && def < slow, "{fast} {def} {slow}");
        slow - fast
    };
    // 16x16 tiles launch 64 times the workgroups of 128x128 tiles.
    let (small, large) = (
        cost(&kernel_with_tile(16, 16)),
        cost(&kernel_with_tile(128, 128)),
    );
    assert!(
        small > large,
        "launch cost small tiles {small} ns, large {large} ns"
    );
}

#[test]
fn gpu_half_and_quarter_scale_cus_and_llc_but_not_hbm() {
    let full = GpuConfig::mi100();
    for (name, cus, llc_mb) in [("mi100-half", 64, 4u64), ("mi100-quarter", 32, 2)] {
        let g = GpuConfig::preset(name).expect("preset");
        assert_eq!((g.cus, g.llc_bytes), (cus, llc_mb << 20), "{name}");
        assert_eq!(g.hbm_bytes_per_ns, full.hbm_bytes_per_ns, "{name}");
        assert!(g.llc_banks < full.llc_banks && g.llc_banks >= 1, "{name}");
        // A GEMM that fills the full GPU for several waves runs slower on fewer CUs.
        let s = f16(4096, 4096, 1024, false, false);
        assert!(best(&g, &s).1 > best(&full, &s).1, "{name}");
    }
    let e = GpuConfig::preset("mi100-eighth").expect_err("no such preset");
    assert_eq!(
        e.to_string(),
        "unknown GPU preset `mi100-eighth` (mi100, mi100-half, mi100-quarter, t3-table-8.1, h200)"
    );
}

/// The catalog kernel with these tiles and depth, the most threads, no split, with or
/// without prefetch (padded LDS).
fn kernel_exact(
    mt0: u16,
    mt1: u16,
    u: u16,
    prefetch: bool,
) -> nmcp_emulator::gpu::catalog::CatalogKernel {
    Catalog::standard()
        .kernels()
        .iter()
        .filter(|k| {
            k.mt0 == mt0
                && k.mt1 == mt1
                && k.depth_u == u
                && k.split_u == 1
                && k.prefetch == prefetch
                && k.stagger_mapping == 0
        })
        .max_by_key(|k| (k.threads, k.lds_pad))
        .copied()
        .expect("kernel in catalog")
}

#[test]
fn partial_wave_gemm_gains_from_concurrency_because_of_memory_latency() {
    // 120 workgroups of a 64x64, U = 16 prefetch kernel: one per CU alone. In FP16 an
    // iteration computes in ~0.18 us, less than the 0.5 us load latency, so a lone
    // workgroup waits on memory; a second copy's workgroups on the same CUs compute
    // while it waits. Without the latency term the CU is already busy and a copy only
    // shares it.
    let g = mi100_without_llc_channels();
    let on = Calibration::default();
    let off = Calibration {
        memory_latency_ns: 0.0,
        ..on
    };
    let s = f16(640, 768, 4096, false, false);
    let k = kernel_exact(64, 64, 16, true);
    let cost = kernel_cost(&g, &on, &s, &k).expect("resident");
    assert_eq!(cost.workgroups, u64::from(g.cus), "one workgroup per CU");
    let gain = |cal: &Calibration| {
        let t1 = isolated_time(&g, cal, &s, &k).expect("runs");
        (
            t1,
            2.0 * t1 / concurrent_time(&g, cal, &s, &k, 2).expect("runs"),
        )
    };
    let ((t_on, g_on), (t_off, g_off)) = (gain(&on), gain(&off));
    assert!(
        t_on > 1.5 * t_off,
        "latency-bound alone: {t_on} vs {t_off} ns"
    );
    assert!(
        g_on > g_off + 0.5,
        "gain of 2 copies with latency {g_on:.3}, without {g_off:.3}"
    );
}

#[test]
fn compute_bound_gemm_is_unaffected_by_memory_latency() {
    // FP32, 128x128 tiles with prefetch: an iteration computes for ~2.5 us, far longer
    // than the load latency it overlaps.
    let g = GpuConfig::mi100();
    let on = Calibration::default();
    let off = Calibration {
        memory_latency_ns: 0.0,
        ..on
    };
    let s = GemmShape::new(4096, 4096, 1024, false, false, GemmDataType::F32);
    let k = kernel_exact(128, 128, 16, true);
    for copies in [1, 2, 4] {
        let a = concurrent_time(&g, &on, &s, &k, copies).expect("runs");
        let b = concurrent_time(&g, &off, &s, &k, copies).expect("runs");
        assert!((a - b).abs() <= 1e-9 * b, "{copies} copies: {a} vs {b} ns");
    }
}

/// Runs two copies of a GEMM back to back on one stream: the second launched `gap` ns
/// after the first completes, with or without the barrier bit. Returns (first
/// completion, second completion).
fn back_to_back(
    s: &GemmShape,
    k: &nmcp_emulator::gpu::catalog::CatalogKernel,
    barrier: bool,
    gap: f64,
) -> (f64, f64) {
    let g = GpuConfig::mi100();
    let mut sim = GpuSim::new(g, Calibration::default());
    let mut ext = s.to_ext();
    let meta = k.meta(s.dtype);
    ext.kernels.push(meta).expect("room");
    let launch = |barrier| KernelLaunch {
        gemm: Some((ext.clone(), meta)),
        workgroups: workgroups(&ext, &meta),
        workgroup_size: k.threads,
        workgroup_time: 0.0,
        barrier,
    };
    let mut events = Vec::new();
    let done = |events: &[GpuEvent], tag: u64| {
        events.iter().find_map(|e| match e {
            GpuEvent::Completed { tag: t, at } if *t == tag => Some(*at),
            _ => None,
        })
    };
    // The first kernel of the stream waited for nothing: the barrier bit changes nothing.
    sim.launch(0.0, 1, &launch(barrier));
    while done(&events, 1).is_none() {
        let t = sim.next_event().expect("running");
        sim.advance(t, &mut events);
    }
    let first = done(&events, 1).expect("completed");
    sim.launch(first + gap, 2, &launch(barrier));
    sim.run_to_idle(&mut events);
    let second = done(&events, 2);
    assert!(second.is_some(), "{events:?}");
    (first, second.unwrap_or(0.0))
}

#[test]
fn one_stream_overlaps_launch_processing_with_the_previous_kernel() {
    let g = GpuConfig::mi100();
    // One wave of workgroups: the next packet sits at the head for the whole run.
    let s = f16(1024, 1024, 1024, false, false);
    let k = kernel_with_tile(128, 128);
    let (first_b, second_b) = back_to_back(&s, &k, true, 300.0);
    let (first_n, second_n) = back_to_back(&s, &k, false, 300.0);
    assert_eq!(first_b, first_n, "a stream's first kernel overlaps nothing");
    let (dur_b, dur_n) = (second_b - first_b, second_n - first_n);
    // The whole start-up (kernel_start_ns) is hidden: the tail was longer than it.
    let saved = dur_n - dur_b;
    assert!(
        (saved - g.kernel_start_ns).abs() < 1.0,
        "saved {saved} ns of {} ns",
        g.kernel_start_ns
    );
    // What cannot overlap stays: the second kernel still starts after the first
    // completed (and the CP's gap), and runs as long as the first.
    assert!(dur_b > first_b - g.kernel_start_ns, "{dur_b} vs {first_b}");
    // A tiny GEMM's tail (from its last placement, at kernel_start_ns, to its
    // completion) plus the gap is shorter than the start-up: only that much is hidden.
    let tiny = f16(128, 128, 32, false, false);
    let small = kernel_with_tile(64, 64);
    let (first_b, second_b) = back_to_back(&tiny, &small, true, 100.0);
    let (first_n, second_n) = back_to_back(&tiny, &small, false, 100.0);
    let window = first_b + 100.0 - g.kernel_start_ns;
    assert!(window < g.kernel_start_ns, "window {window}");
    let saved = (second_n - first_n) - (second_b - first_b);
    assert!(
        (saved - window).abs() < 1.0,
        "saved {saved} of window {window}"
    );
}

#[test]
fn transposes_change_the_lines_a_panel_feeds_per_iteration() {
    // Same FLOPs, same tiles: B contiguous along K (NN) gives 16-element runs per
    // iteration with U = 16 (32 B of each 64 B L1 line in FP16), B contiguous along N
    // (NT) full lines. The LLC-bandwidth-bound 64x64 kernel pays for NN; with U = 32
    // the runs fill the lines and the layouts cost the same.
    let g = mi100_without_llc_channels();
    let cal = Calibration::default();
    let t = |ta: bool, tb: bool, u: u16| {
        let s = f16(4096, 4096, 1024, ta, tb);
        isolated_time(&g, &cal, &s, &kernel_exact(64, 64, u, true)).expect("runs")
    };
    let (nn, nt, tn) = (t(false, false, 16), t(false, true, 16), t(true, false, 16));
    assert!(nn > 1.05 * nt, "NN {nn} vs NT {nt} ns");
    // TN: both panels contiguous along K (A transposed, B not).
    assert!(tn > 1.05 * nn, "TN {tn} vs NN {nn} ns");
    let (nn32, nt32) = (t(false, false, 32), t(false, true, 32));
    assert!(
        (nn32 - nt32).abs() <= 1e-9 * nt32,
        "U = 32: {nn32} vs {nt32} ns"
    );
}
