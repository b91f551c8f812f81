//! T3 on a 4-GPU ring, small GEMM: the tracker's thresholds and firing order against
//! the schedule written out by hand, the data, and the symmetric shortcut.

use nmcp_emulator::t3::gemm::ProducerMemory;
use nmcp_emulator::t3::run::{partial_outputs, run_fused, Collective};
use nmcp_emulator::t3::{Simulate, SubLayer, T3Options};
use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::t3::TRACKER_NO_DMA;

/// 512 x 128 output, 128 x 128 tiles: 4 tiles in a column, so chunk c is workgroup c
/// (4 wavefronts of 32 x 128 = 4,096 elements each).
fn sublayer() -> SubLayer {
    SubLayer {
        model: "test".into(),
        name: "small",
        h: 512,
        tokens: 128,
        tp: 4,
        m: 512,
        n: 128,
        k: 64,
    }
}

/// Every GPU g holds chunk g (rows [128 g, 128 g + 128) of [`sublayer`]) equal to the
/// f32 sum of the partials (exact on their binary grid, in any order).
fn assert_exact_sums(run: &nmcp_emulator::t3::run::FusedRun, partials: &[Vec<f32>], sl: &SubLayer) {
    let n = sl.n as usize;
    for g in 0..4usize {
        let out = run.system.out_values(g).unwrap();
        for i in g * 128 * n..(g + 1) * 128 * n {
            let want: f32 = partials.iter().map(|p| p[i]).sum();
            assert_eq!(out[i], want, "GPU {g} element {i}");
        }
    }
}

#[test]
fn tracker_fires_follow_the_hand_written_ring_schedule() {
    let opts = T3Options {
        gpus: 4,
        ..T3Options::default()
    };
    let sl = sublayer();
    let partials = partial_outputs(4, sl.m, sl.n, sl.k, GemmDataType::F16, 7);
    let run = run_fused(
        &opts,
        &sl,
        Collective::RingReduceScatter,
        None,
        Some(&partials),
    )
    .unwrap();
    let sys = &run.system;
    // The schedule (docs/decisions/t3.md), GPU g, chunk = workgroup:
    //   stage 1: WG g+1, remote update to g-1, not tracked here;
    //   stage 2: WG g+2, tracked (local + g+1's stage-1 remote), DMA to g-1;
    //   stage 3: WG g+3, tracked (local + g+1's stage-2 DMA),    DMA to g-1;
    //   stage 4: WG g,   tracked (local + g+1's stage-3 DMA),    notify only.
    let mut when = std::collections::HashMap::new();
    for g in 0..4u32 {
        let log = sys.fire_log(g as usize);
        assert_eq!(
            log.len(),
            12,
            "GPU {g}: 3 tracked stages x 4 wavefronts: {log:?}"
        );
        let stage_of = |wg: u32| (wg + 4 - g) % 4; // 0 = stage 4
        for &(at, wg, wf, dma) in log {
            let stage = match stage_of(wg) {
                0 => 4,
                s => s,
            };
            assert!(stage >= 2, "GPU {g} tracked stage {stage} (WG {wg})");
            assert_eq!(
                dma == TRACKER_NO_DMA,
                stage == 4,
                "GPU {g} WG {wg}: DMA {dma:#x}"
            );
            when.insert((g, stage, wf), at);
        }
        // Each wavefront's stages fire in order.
        for wf in 0..4u8 {
            assert!(when[&(g, 2, wf)] < when[&(g, 3, wf)]);
            assert!(when[&(g, 3, wf)] < when[&(g, 4, wf)]);
        }
    }
    // Causality along the ring: GPU g's stage k >= 3 tile completes only after GPU g+1's
    // stage k-1 tile fired its DMA (plus at least the link latency).
    for g in 0..4u32 {
        for k in 3..=4 {
            for wf in 0..4u8 {
                let here = when[&(g, k, wf)];
                let up = when[&((g + 1) % 4, k - 1, wf)];
                assert!(
                    here >= up + 500,
                    "GPU {g} stage {k} WF {wf} at {here}, upstream at {up}"
                );
            }
        }
    }
    // Every entry fired exactly at its threshold (2 updates per element), none left.
    for t in sys.totals() {
        assert_eq!(t.tracker.overcounts, 0);
        assert_eq!(t.orphans, 0);
        assert_eq!(t.tracker.fired, 12);
    }
}

/// The shortcut (GPU 0 stands for every GPU) against all GPUs simulated, fused part.
/// With the producer's loads in coarse phases and flat panel streams the GPUs differ
/// only in which banks their chunks hit, and the shortcut is within 1 %. With the
/// default model (per-iteration loads in the operands' layout) a GPU's GEMM reads are
/// latency-bound, so that bank placement moves each GPU's time: the GPUs themselves
/// spread by about 3 % here (71.3-72.5 µs measured), and the shortcut must stay within
/// 2 % (measured 1.2-1.4 %).
#[test]
fn symmetric_shortcut_agrees_with_all_gpus() {
    let sl = SubLayer {
        model: "test".into(),
        name: "mid",
        h: 1024,
        tokens: 2048,
        tp: 8,
        m: 1024,
        n: 2048,
        k: 256,
    };
    let flat = ProducerMemory {
        per_iteration_loads: false,
        operand_layout: false,
    };
    for (mem, tolerance) in [(flat, 0.01), (ProducerMemory::default(), 0.02)] {
        let opts = T3Options {
            producer_memory: mem,
            ..T3Options::default()
        };
        let all = run_fused(&opts, &sl, Collective::RingReduceScatter, None, None).unwrap();
        let short = run_fused(
            &T3Options {
                simulate: Simulate::Shortcut,
                ..opts.clone()
            },
            &sl,
            Collective::RingReduceScatter,
            None,
            None,
        )
        .unwrap();
        let per_gpu: Vec<f64> = all
            .system
            .totals()
            .iter()
            .filter_map(|t| t.collective_done_ns)
            .collect();
        let diff = (all.ns - short.ns).abs() / all.ns;
        assert!(
            diff < tolerance,
            "{mem:?}: all GPUs {} ns (per GPU {per_gpu:?}), shortcut {} ns: {:.2} %",
            all.ns,
            short.ns,
            100.0 * diff
        );
    }
}

/// The other configurations the firmware plans: direct reduce-scatter over a fully
/// connected topology (f32 values on a 1/4096 grid: every partial sum is exact, so the
/// arrival order of the N updates does not matter), all-gather and all-to-all (timing:
/// every GPU's tracker sees exactly what its plan expects).
#[test]
fn direct_reduce_scatter_all_gather_and_all_to_all_complete() {
    let sl = sublayer();
    let opts = T3Options {
        gpus: 4,
        dtype: GemmDataType::F32,
        ..T3Options::default()
    };
    let partials = partial_outputs(4, sl.m, sl.n, 32, GemmDataType::F32, 11);
    let run = run_fused(
        &opts,
        &sl,
        Collective::DirectReduceScatter,
        None,
        Some(&partials),
    )
    .unwrap();
    assert_exact_sums(&run, &partials, &sl);
    for c in [Collective::AllGather, Collective::AllToAll] {
        let run = run_fused(&opts, &sl, c, None, None).unwrap();
        assert!(run.ns > 0.0);
        for t in run.system.totals() {
            assert_eq!((t.orphans, t.tracker.overcounts), (0, 0), "{c:?}");
            assert!(t.tracker.fired > 0, "{c:?}");
        }
    }
}

/// The sub-layer of the CU-split tests: 1024 x 2048 x 512 per GPU at TP 4.
fn cu_split_sublayer() -> SubLayer {
    SubLayer {
        model: "test".into(),
        name: "mid",
        h: 1024,
        tokens: 2048,
        tp: 4,
        m: 1024,
        n: 2048,
        k: 512,
    }
}

/// Dissertation 8.2.2: the GEMM on fewer CUs and the ring RS on the rest, at once. Each
/// is no faster than alone on the whole GPU, and the fewer CUs the RS gets, the slower.
#[test]
fn cu_split_slows_both_and_fewer_cus_slow_the_reduce_scatter_more() {
    let sl = cu_split_sublayer();
    let opts = T3Options {
        gpus: 4,
        simulate: Simulate::Shortcut,
        ..T3Options::default()
    };
    let a = nmcp_emulator::t3::run::cu_split(&opts, &sl, 72, 8).unwrap();
    let b = nmcp_emulator::t3::run::cu_split(&opts, &sl, 64, 16).unwrap();
    for r in [&a, &b] {
        assert!(r.gemm_seconds >= r.gemm_alone_seconds, "{r:?}");
        assert!(r.rs_seconds >= r.rs_alone_seconds * 0.999, "{r:?}");
        assert!(r.speedup <= r.ideal_speedup * 1.001, "{r:?}");
    }
    assert!(a.rs_seconds > b.rs_seconds, "{a:?} {b:?}");
    assert!(a.gemm_seconds < b.gemm_seconds, "{a:?} {b:?}");
    assert!(nmcp_emulator::t3::run::cu_split(&opts, &sl, 80, 8).is_err());
}

/// Split-K producers (8.6.7): two workgroups add to every tile under the tile's id; the
/// firmware expects 2s updates per element in stage 2 and s + 1 after. Values on a binary
/// grid in f32, so halves add up exactly: every GPU ends with exactly the sum.
#[test]
fn split_k_producers_reduce_exactly() {
    let sl = sublayer();
    let opts = T3Options {
        gpus: 4,
        dtype: GemmDataType::F32,
        split_k: 2,
        ..T3Options::default()
    };
    let partials = partial_outputs(4, sl.m, sl.n, 32, GemmDataType::F32, 5);
    let run = run_fused(
        &opts,
        &sl,
        Collective::RingReduceScatter,
        None,
        Some(&partials),
    )
    .unwrap();
    assert_exact_sums(&run, &partials, &sl);
    for t in run.system.totals() {
        assert_eq!(
            (t.orphans, t.tracker.overcounts, t.tracker.fired),
            (0, 0, 12)
        );
    }
}

/// Fuzz reproducer (t3_config, fuzz/corpus/t3_config/regress_odd_columns): a 292 x 361
/// f32 output, whose rows are not whole 64-byte requests, so requests straddle two
/// tiles or the end of one row and the start of the next. The tracker counts the
/// elements each column carries for its wavefront (not a fixed 32 B worth), so every
/// entry reaches its threshold exactly once and the sums are exact; the symmetric
/// shortcut, whose mirroring shifts whole requests, refuses such a layout.
#[test]
fn rows_that_are_not_whole_requests_reduce_exactly_and_the_shortcut_refuses_them() {
    for (m, n, split_k) in [(288, 352, 1), (292, 256, 1), (292, 361, 1), (292, 361, 2)] {
        let sl = SubLayer {
            model: "fuzz".into(),
            name: "odd",
            h: m,
            tokens: n,
            tp: 4,
            m,
            n,
            k: 2,
        };
        let opts = T3Options {
            gpus: 4,
            dtype: GemmDataType::F32,
            split_k,
            ..T3Options::default()
        };
        let partials = partial_outputs(4, sl.m, sl.n, sl.k, GemmDataType::F32, 3);
        for c in [
            Collective::DirectReduceScatter,
            Collective::RingReduceScatter,
        ] {
            let run = run_fused(&opts, &sl, c, None, Some(&partials)).unwrap();
            let n = sl.n as usize;
            for g in 0..4u32 {
                let out = run.system.out_values(g as usize).unwrap();
                let r = run.system.owned_rect(g);
                assert!(r.rows > 0 && r.cols > 0);
                for row in r.row0..r.row0 + r.rows {
                    for col in r.col0..r.col0 + r.cols {
                        let i = row as usize * n + col as usize;
                        let want: f32 = partials.iter().map(|p| p[i]).sum();
                        assert_eq!(
                            out[i], want,
                            "{m}x{n} {c:?} split {split_k} GPU {g} ({row}, {col})"
                        );
                    }
                }
            }
            for t in run.system.totals() {
                assert_eq!((t.orphans, t.tracker.overcounts), (0, 0), "{c:?}");
            }
        }
        let shortcut = T3Options {
            simulate: Simulate::Shortcut,
            ..opts
        };
        if n == 361 {
            let e =
                run_fused(&shortcut, &sl, Collective::RingReduceScatter, None, None).unwrap_err();
            assert!(e.to_string().contains("symmetric shortcut needs"), "{e}");
        }
    }
}

/// Fuzz reproducer (fuzz/corpus/t3_config/regress_partial_chunk): 382 rows on 2 GPUs give
/// both chunks 3 tile rows, but the second one's last tile is partial, so GPU 0's traffic
/// does not stand for GPU 1's: the shortcut refuses, and all GPUs run it.
#[test]
fn the_shortcut_refuses_chunks_of_different_shape() {
    let sl = SubLayer {
        model: "fuzz".into(),
        name: "partial",
        h: 382,
        tokens: 32,
        tp: 2,
        m: 382,
        n: 32,
        k: 1,
    };
    let all = T3Options {
        gpus: 2,
        dtype: GemmDataType::F32,
        ..T3Options::default()
    };
    let shortcut = T3Options {
        simulate: Simulate::Shortcut,
        ..all.clone()
    };
    let e = run_fused(&shortcut, &sl, Collective::RingReduceScatter, None, None).unwrap_err();
    assert!(e.to_string().contains("equal shape"), "{e}");
    let run = run_fused(&all, &sl, Collective::RingReduceScatter, None, None).unwrap();
    for t in run.system.totals() {
        assert_eq!((t.orphans, t.tracker.overcounts), (0, 0));
    }
}

/// The CU-split ring with every GPU simulated: the GEMM beside it makes the GPUs drift, so
/// a GPU's upstream can finish a step while the GPU's own blocks of that step still wait
/// for a free slot (the ring keeps few in flight on 8 of 80 CUs). Those blocks must still
/// be sent, tagged with their own step; the run stalled before (Mega-GPT-2 OP at TP 8,
/// `nmcp t3 cu-split`, "T3 simulation stuck").
#[test]
fn a_ring_on_few_cus_finishes_with_every_gpu_simulated() {
    let sl = cu_split_sublayer();
    let opts = T3Options {
        gpus: 4,
        simulate: Simulate::AllGpus,
        ..T3Options::default()
    };
    for (g, r) in [(72, 8), (78, 2)] {
        let x = nmcp_emulator::t3::run::cu_split(&opts, &sl, g, r)
            .unwrap_or_else(|e| panic!("{g}-{r}: {e}"));
        assert!(x.rs_seconds >= x.rs_alone_seconds * 0.999, "{x:?}");
        assert!(x.speedup <= x.ideal_speedup * 1.001, "{x:?}");
    }
}

/// The GPUs stepped one window at a time (each runs up to the link latency on its own
/// before the next GPU's turn) give exactly what every GPU one slice at a time gives:
/// every configuration's times and bytes, and a fused run's per-GPU totals (tracker
/// figures included) and reduced values, on the direct (fully connected) reduce-scatter
/// as well as the ring.
#[test]
fn stepping_window_does_not_change_results() {
    let sl = SubLayer {
        model: "test".into(),
        name: "window",
        h: 1024,
        tokens: 2048,
        tp: 8,
        m: 1024,
        n: 2048,
        k: 128,
    };
    let lockstep = T3Options {
        window_slices: 1,
        ..T3Options::default()
    };
    let windowed = T3Options::default();
    assert!(windowed.window_slices > 1);
    let a = nmcp_emulator::t3::run::run_sublayer(&lockstep, &sl).unwrap();
    let b = nmcp_emulator::t3::run::run_sublayer(&windowed, &sl).unwrap();
    assert_eq!(a.len(), 5);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    let partials = partial_outputs(8, sl.m, sl.n, sl.k, GemmDataType::F16, 3);
    for (collective, mca) in [
        (Collective::RingReduceScatter, Some(4)),
        (Collective::DirectReduceScatter, None),
    ] {
        let runs = [&lockstep, &windowed]
            .map(|o| run_fused(o, &sl, collective, mca, Some(&partials)).unwrap());
        let [x, y] = &runs;
        assert_eq!(x.ns, y.ns, "{collective:?}");
        assert_eq!(
            format!("{:?}", x.system.totals()),
            format!("{:?}", y.system.totals()),
            "{collective:?}"
        );
        for g in 0..8 {
            assert_eq!(x.system.out_values(g), y.system.out_values(g), "GPU {g}");
        }
    }
}
