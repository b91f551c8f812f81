//! What the reduce-scatter does to the producer's DRAM reads in a fused run, and what
//! the ingress order and MCA's admission change: communication takes controller-queue
//! slots a compute request then waits for (T3, arrival order), compute-first ingress
//! hides that, and MCA's occupancy threshold keeps communication out of busy queues.

use nmcp_emulator::t3::run::{run_fused, Collective};
use nmcp_emulator::t3::system::{Contention, LATENCY_BOUNDS_NS};
use nmcp_emulator::t3::{Simulate, SubLayer, T3Options};

/// A mid-sized sub-layer (1024 x 2048 x 256, TP 8), GPU 0 simulated.
fn sublayer() -> SubLayer {
    SubLayer {
        model: "test".into(),
        name: "mid",
        h: 1024,
        tokens: 2048,
        tp: 8,
        m: 1024,
        n: 2048,
        k: 256,
    }
}

fn fused(compute_first: bool, mca: Option<usize>) -> (f64, Contention) {
    let opts = T3Options {
        simulate: Simulate::Shortcut,
        compute_first_ingress: compute_first,
        ..T3Options::default()
    };
    let run = run_fused(&opts, &sublayer(), Collective::RingReduceScatter, mca, None).unwrap();
    (run.ns, run.system.totals()[0].contention)
}

#[test]
fn communication_holds_queue_slots_compute_waits_for_unless_kept_out() {
    let (t3_ns, t3) = fused(false, None);
    let (first_ns, first) = fused(true, None);
    let (mca_ns, mca) = fused(false, Some(5));
    for (name, c) in [("t3", &t3), ("compute-first", &first), ("mca", &mca)] {
        assert!(c.phases > 0, "{name}: {c:?}");
        assert_eq!(
            c.read_latency_histogram.iter().sum::<u64>(),
            c.phases,
            "{name}: every phase in one latency bucket ({LATENCY_BOUNDS_NS:?})"
        );
        assert!(c.stalled_phases <= c.phases, "{name}: {c:?}");
        assert!(
            c.read_queue_communication > 0.0 && c.compute_refusals > 0,
            "{name}: the reduce-scatter's reads share the queues: {c:?}"
        );
    }
    // Arrival order: full queues a compute request meets hold communication entries,
    // more of them than when compute enters first.
    assert!(
        t3.compute_refusals_with_communication > 0
            && t3.communication_entries_at_refusal > first.communication_entries_at_refusal,
        "arrival {t3:?}\ncompute first {first:?}"
    );
    // MCA's admission keeps communication out of queues at its threshold: fewer of its
    // entries wait in the read queues, and fewer fill a queue a compute request meets.
    assert!(
        mca.read_queue_communication < t3.read_queue_communication
            && mca.communication_entries_at_refusal < t3.communication_entries_at_refusal,
        "mca {mca:?}\nt3 {t3:?}"
    );
    eprintln!(
        "fused ns: t3 {t3_ns:.0}, compute-first {first_ns:.0}, mca {mca_ns:.0}\n\
         t3 {t3:?}\ncompute-first {first:?}\nmca {mca:?}"
    );
}
