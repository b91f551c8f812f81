//! The study run as parts (`t3::plan`): the same rows as one sub-layer at a time, for
//! any thread count, and failures reported for the first failing sub-layer in order.

use std::sync::Mutex;

use nmcp_emulator::sim::Limits;
use nmcp_emulator::t3::plan::{part_cost, run_study, Part, StudyFailure};
use nmcp_emulator::t3::{run_sublayer, sublayers, Simulate, T3Error, T3Options};

fn opts() -> T3Options {
    T3Options {
        gpus: 2,
        simulate: Simulate::AllGpus,
        ..T3Options::default()
    }
}

#[test]
fn parts_on_any_thread_count_give_the_one_by_one_rows() {
    let opts = opts();
    // OP, FC-2 and IP (FC-1 is FC-2's shape); three sub-layers sharing their rings.
    let sls: Vec<_> = sublayers("tiny", 256, 512, 2)
        .into_iter()
        .filter(|s| s.name != "FC-1")
        .collect();
    let want: Vec<String> = sls
        .iter()
        .map(|sl| format!("{:?}", run_sublayer(&opts, sl).unwrap()))
        .collect();
    let todo: Vec<usize> = (0..sls.len()).collect();
    for jobs in [1, 2, 3] {
        let seen = Mutex::new(Vec::new());
        let got = run_study(&opts, &sls, &todo, jobs, |i, rows| {
            seen.lock().unwrap().push((i, rows.len()));
            Ok::<(), ()>(())
        })
        .unwrap();
        let got: Vec<String> = got
            .iter()
            .map(|r| format!("{:?}", r.as_ref().unwrap()))
            .collect();
        assert_eq!(got, want, "--jobs {jobs}");
        // Each sub-layer reported once, with its five rows.
        let mut seen = seen.into_inner().unwrap();
        seen.sort_unstable();
        assert_eq!(seen, vec![(0, 5), (1, 5), (2, 5)], "--jobs {jobs}");
    }
    // Only the sub-layers asked for are run.
    let got = run_study(&opts, &sls, &[2], 2, |_, _| Ok::<(), ()>(())).unwrap();
    assert!(got[0].is_none() && got[1].is_none());
    assert_eq!(format!("{:?}", got[2].as_ref().unwrap()), want[2]);
}

#[test]
fn a_failure_names_the_first_failing_sub_layer_and_a_callback_error_stops_the_study() {
    let mut opts = opts();
    // Every simulation runs past 1 ns.
    opts.limits = Limits {
        max_sim_ps: Some(1_000),
        max_events: None,
    };
    let sls = sublayers("tiny", 256, 512, 2);
    for jobs in [1, 2] {
        match run_study(&opts, &sls, &[1, 3], jobs, |_, _| Ok::<(), ()>(())) {
            Err(StudyFailure::T3 {
                sublayer,
                error: T3Error::Limit(_),
            }) => assert_eq!(sublayer, 1, "--jobs {jobs}"),
            other => panic!("--jobs {jobs}: {other:?}"),
        }
    }
    let opts = self::opts();
    let r = run_study(&opts, &sls, &[0], 2, |i, _| Err(format!("store {i}")));
    match r {
        Err(StudyFailure::Callback(e)) => assert_eq!(e, "store 0"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn expected_costs_grow_with_k_and_gpus_and_the_shortcut_simulates_one_gpu() {
    let opts = T3Options::default();
    let tp8 = sublayers("m", 3072, 16384, 8);
    let tp16 = sublayers("m", 3072, 16384, 16);
    let (op, fc2) = (&tp8[0], &tp8[1]);
    for part in [Part::Gemm, Part::T3, Part::T3Mca] {
        assert!(
            part_cost(&opts, fc2, part) > part_cost(&opts, op, part),
            "{part:?}"
        );
    }
    assert!(part_cost(&opts, op, Part::T3) > part_cost(&opts, op, Part::Gemm));
    // TP 16: half the K per GPU but twice the GPUs simulated; the ring's link time is
    // the same, so its cost doubles.
    let ring = Part::Ring(nmcp_emulator::t3::system::RingKind::ReduceScatter);
    assert!(part_cost(&opts, &tp16[0], ring) > 1.9 * part_cost(&opts, op, ring));
    let shortcut = T3Options {
        simulate: Simulate::Shortcut,
        ..T3Options::default()
    };
    let ratio = part_cost(&opts, op, Part::T3) / part_cost(&shortcut, op, Part::T3);
    assert!((ratio - 8.0).abs() < 1e-9, "{ratio}");
}
