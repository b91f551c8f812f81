//! Stepping the GPUs of a window on worker threads (`T3Options::threads`) gives exactly
//! what the serial loop gives: every time, byte count, tracker figure, link total,
//! tracker firing and reduced value, for T3, T3-MCA, the direct reduce-scatter and the
//! ring kernels, with the GPUs split into shares of 2 and of 1-2 GPUs.

use nmcp_emulator::t3::run::{partial_outputs, run_fused, run_sublayer, Collective};
use nmcp_emulator::t3::{SubLayer, T3Options};
use nmcp_isa::gemm_ext::GemmDataType;

fn sublayer() -> SubLayer {
    SubLayer {
        model: "test".into(),
        name: "threads",
        h: 1024,
        tokens: 512,
        tp: 4,
        m: 1024,
        n: 512,
        k: 64,
    }
}

fn threads(n: u32) -> T3Options {
    T3Options {
        threads: n,
        ..T3Options::default()
    }
}

#[test]
fn threads_do_not_change_results() {
    let sl = sublayer();
    // Every row of the sub-layer: the isolated GEMM, the ring kernels (reduce-scatter
    // and all-gather) and the fused runs, all GPUs simulated.
    let serial = run_sublayer(&threads(1), &sl).unwrap();
    assert_eq!(serial.len(), 5);
    for n in [2, 3] {
        let par = run_sublayer(&threads(n), &sl).unwrap();
        assert_eq!(format!("{serial:?}"), format!("{par:?}"), "{n} threads");
    }
    let partials = partial_outputs(4, sl.m, sl.n, sl.k, GemmDataType::F16, 5);
    for (collective, mca) in [
        (Collective::RingReduceScatter, None),
        (Collective::RingReduceScatter, Some(4)),
        (Collective::DirectReduceScatter, None),
    ] {
        let runs = [1, 2, 3]
            .map(|n| run_fused(&threads(n), &sl, collective, mca, Some(&partials)).unwrap());
        let [x, rest @ ..] = &runs;
        let what = format!("{collective:?} MCA {mca:?}");
        assert!(
            x.system.totals().iter().all(|t| t.tracker.fired > 0),
            "{what}"
        );
        for y in rest {
            assert_eq!(x.ns, y.ns, "{what}");
            assert_eq!(
                format!("{:?}", x.system.totals()),
                format!("{:?}", y.system.totals()),
                "{what}"
            );
            assert_eq!(
                format!("{:?}", x.system.link_stats()),
                format!("{:?}", y.system.link_stats()),
                "{what}"
            );
            for g in 0..4 {
                assert_eq!(x.system.fire_log(g), y.system.fire_log(g), "{what} GPU {g}");
                let (a, b) = (x.system.out_values(g), y.system.out_values(g));
                assert!(
                    a.is_some_and(|v| v.iter().any(|&e| e != 0.0)),
                    "{what} GPU {g}"
                );
                assert_eq!(a, b, "{what} GPU {g}");
            }
        }
    }
}
