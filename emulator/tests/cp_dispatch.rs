//! The firmware CP on the emulated system: CD = min(predicted, available), deferral of
//! the rest, the heterogeneous rule, baseline behaviour, barriers, and the CP's charge.

use nmcp_emulator::gpu::queue::sample;
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::node::{GpuNodeConfig, PacketOutcome};
use nmcp_emulator::system::System;
use nmcp_firmware::cp::features::FRAC_BITS;
use nmcp_firmware::cp::{CdPredictor, CpAction, CpCostModel, CLASS_COUNT};
use nmcp_isa::aql::{offset, AQL_PACKET_BYTES};
use nmcp_isa::gemm_ext::CONCURRENCY_DEGREES;

const KO_BASE: u64 = 0x1000_0000;
const EXT_BASE: u64 = 0x1100_0000;
const SIG_BASE: u64 = 0x1200_0000;

/// A predictor that always answers `cd`.
fn constant(cd: u8) -> CdPredictor {
    let class = CONCURRENCY_DEGREES.iter().position(|&d| d == cd).unwrap();
    let mut p = CdPredictor {
        bias_q16: [0; CLASS_COUNT],
        ..CdPredictor::default()
    };
    p.bias_q16[class] = 1 << FRAC_BITS;
    p
}

/// CD 16 from M >= 4096, CD 4 from M >= 1024, else 1 (feature 0 is log2 M, normalised
/// as `(log2 M - 9) / 8`: 0.125 at 1024, 0.25 at 2048, 0.375 at 4096, all exact; scores
/// CD 1: 1, CD 4: 8x, CD 16: 18x - 3).
fn by_m() -> CdPredictor {
    let mut p = CdPredictor {
        bias_q16: [1 << FRAC_BITS, 0, 0, -(1 << FRAC_BITS), -(3 << FRAC_BITS)],
        ..CdPredictor::default()
    };
    p.min_q16[0] = 9 << FRAC_BITS;
    p.inv_range_q32[0] = (1i64 << 32) / 8;
    p.weight_q16[2][0] = 8 << FRAC_BITS;
    p.weight_q16[4][0] = 18 << FRAC_BITS;
    p
}

fn system(queues: usize, predictor: CdPredictor) -> System<FixedTimeEngine> {
    let cfg = GpuNodeConfig {
        queues,
        ring_packets: 16,
        predictor,
        ..GpuNodeConfig::default()
    };
    System::single(cfg, FixedTimeEngine::new(8, 2, 1_000.0)).unwrap()
}

/// Enqueues one GEMM of size `m` x 512 x 512 on `queue`; returns its signal.
fn put_gemm(sys: &mut System<FixedTimeEngine>, queue: u8, m: u32, slot: u64) -> u64 {
    let ext = sample::gemm_ext(m, 512, 512, KO_BASE + u64::from(m));
    let addr = EXT_BASE + slot * 0x100;
    sys.node_mut(0)
        .memory_mut()
        .write(addr, &ext.encode())
        .unwrap();
    let sig = SIG_BASE + slot * 8;
    sys.enqueue(0, queue, &sample::gemm_dispatch(&ext, addr, sig), 0.0)
        .unwrap();
    sig
}

fn dispatched(o: &PacketOutcome) -> (u64, u8, bool) {
    match o.action {
        Some(CpAction::Dispatched {
            kernel_object,
            cd,
            swapped,
            ..
        }) => (kernel_object, cd, swapped),
        other => panic!(
            "packet {}/{} not dispatched: {other:?}",
            o.queue, o.dispatch_id
        ),
    }
}

fn assert_all_ran_once(sys: &System<FixedTimeEngine>) {
    for o in sys.node(0).outcomes().values() {
        assert_eq!(o.dispatches, 1, "{o:?}");
        assert_eq!(o.completions, 1, "{o:?}");
    }
}

/// Launched by the CP decision whose first launch was at `t0`: a decision's dispatches
/// reach the GPU one dispatch apart (`dispatch_stagger_ns`), at most 16 of them.
fn in_decision_at(o: &PacketOutcome, t0: f64) -> bool {
    let window = 16.0 * nmcp_emulator::gpu::sim::dispatch_stagger_ns();
    o.launched_at.is_some_and(|t| t >= t0 && t < t0 + window)
}

#[test]
fn dispatches_min_of_predicted_and_available_and_defers_the_rest() {
    let mut sys = system(6, constant(4));
    for q in 0..6u8 {
        put_gemm(&mut sys, q, 1024, u64::from(q));
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    sys.run(10_000);
    assert_all_ran_once(&sys);
    let mut first: Vec<_> = sys.node(0).outcomes().values().collect();
    first.sort_by(|a, b| a.launched_at.partial_cmp(&b.launched_at).unwrap());
    let t0 = first[0].launched_at.unwrap();
    let group: Vec<_> = first.iter().filter(|o| in_decision_at(o, t0)).collect();
    assert_eq!(group.len(), 4, "CD = min(predicted 4, available 6)");
    // CD 4 selects the GPU/2 kernel (second slot), swapped into the packet.
    let ko4 = KO_BASE + 1024 + sample::KO_STRIDE;
    for o in &group {
        assert_eq!(dispatched(o), (ko4, 4, true));
        let slot = sys.node(0).queues()[usize::from(o.queue)].packet_addr(o.dispatch_id);
        let mut b = [0u8; AQL_PACKET_BYTES];
        sys.node(0).memory().read(slot, &mut b).unwrap();
        let ko = u64::from_le_bytes(b[offset::KERNEL_OBJECT..][..8].try_into().unwrap());
        assert_eq!(ko, ko4, "KO written into the packet");
    }
    // The other two wait for a head change, then run as a group of min(4, 2) = 2.
    let first_head_change = group
        .iter()
        .map(|o| o.all_dispatched_at.unwrap())
        .fold(f64::INFINITY, f64::min);
    let rest: Vec<_> = first.iter().filter(|o| !in_decision_at(o, t0)).collect();
    assert_eq!(rest.len(), 2);
    for o in rest {
        assert!(o.launched_at.unwrap() >= first_head_change);
        let (ko, cd, _) = dispatched(o);
        assert_eq!(
            (ko, cd),
            (KO_BASE + 1024, 2),
            "CD 2 keeps the isolated kernel"
        );
    }
}

#[test]
fn heterogeneous_sizes_run_together_only_if_all_prefer_sixteen() {
    // 8 + 8 GEMMs that both prefer 16: all 16 at once.
    let mut sys = system(16, by_m());
    for q in 0..16u8 {
        put_gemm(&mut sys, q, if q < 8 { 8192 } else { 4096 }, u64::from(q));
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    sys.run(100_000);
    assert_all_ran_once(&sys);
    let t0 = sys
        .node(0)
        .outcomes()
        .values()
        .map(|o| o.launched_at.unwrap())
        .fold(f64::INFINITY, f64::min);
    let group: Vec<_> = sys
        .node(0)
        .outcomes()
        .values()
        .filter(|o| in_decision_at(o, t0))
        .collect();
    assert_eq!(group.len(), 16);
    assert!(group.iter().all(|o| dispatched(o).1 == 16));

    // 8 prefer 16, 8 prefer 4: decided as homogeneous groups, never mixed.
    let mut sys = system(16, by_m());
    for q in 0..16u8 {
        put_gemm(&mut sys, q, if q < 8 { 8192 } else { 2048 }, u64::from(q));
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    sys.run(100_000);
    assert_all_ran_once(&sys);
    let mut launches: Vec<(f64, u8, u8)> = sys
        .node(0)
        .outcomes()
        .values()
        .map(|o| (o.launched_at.unwrap(), o.queue, dispatched(o).1))
        .collect();
    launches.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let t0 = launches[0].0;
    let window = 16.0 * nmcp_emulator::gpu::sim::dispatch_stagger_ns();
    let group: Vec<_> = launches.iter().filter(|l| l.0 < t0 + window).collect();
    let first_is_big = group[0].1 < 8;
    let expected_cd = if first_is_big { 8 } else { 4 };
    assert_eq!(group.len(), usize::from(expected_cd));
    for &&(_, q, cd) in &group {
        assert_eq!(q < 8, first_is_big, "one size per group");
        assert_eq!(cd, expected_cd);
    }
}

#[test]
fn single_gemm_and_non_gemm_keep_their_kernel_objects() {
    let mut sys = system(2, constant(16));
    put_gemm(&mut sys, 0, 1024, 0);
    let p = nmcp_isa::aql::encode(&nmcp_isa::aql::AqlPacket::KernelDispatch(sample::dispatch(
        KO_BASE + 0x9000,
        4096,
        256,
        0,
        SIG_BASE + 64,
    )));
    sys.enqueue(0, 1, &p, 0.0).unwrap();
    sys.ring_doorbell(0, 0, 0.0).unwrap();
    sys.ring_doorbell(0, 1, 0.0).unwrap();
    sys.run(1_000);
    assert_all_ran_once(&sys);
    let g = &sys.node(0).outcomes()[&(0, 0)];
    assert_eq!(dispatched(g), (KO_BASE + 1024, 1, false));
    let n = &sys.node(0).outcomes()[&(1, 0)];
    assert_eq!(dispatched(n), (KO_BASE + 0x9000, 1, false));
    assert_eq!(sys.node(0).memory().read_signal(SIG_BASE + 64).unwrap(), 0);
}

#[test]
fn barrier_and_waits_for_its_dependency() {
    let mut sys = system(2, constant(1));
    let dep = put_gemm(&mut sys, 0, 4096, 0);
    let barrier_sig = SIG_BASE + 0x100;
    sys.enqueue(0, 1, &sample::barrier(true, &[dep], barrier_sig), 0.0)
        .unwrap();
    put_gemm(&mut sys, 1, 1024, 1);
    sys.ring_doorbell(0, 1, 0.0).unwrap();
    sys.ring_doorbell(0, 0, 0.0).unwrap();
    sys.run(1_000);
    let a = &sys.node(0).outcomes()[&(0, 0)];
    let barrier = &sys.node(0).outcomes()[&(1, 0)];
    let after = &sys.node(0).outcomes()[&(1, 1)];
    assert_eq!(barrier.action, Some(CpAction::BarrierResolved));
    assert_eq!(barrier.completion_value, Some(0));
    assert!(barrier.completed_at.unwrap() >= a.completed_at.unwrap());
    assert!(after.launched_at.unwrap() >= a.completed_at.unwrap());
    assert_eq!(sys.node(0).memory().read_signal(barrier_sig).unwrap(), 0);
}

#[test]
fn cp_time_follows_its_work() {
    let mut sys = system(4, constant(4));
    for q in 0..4u8 {
        put_gemm(&mut sys, q, 1024, u64::from(q));
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    let s = sys.run(10_000);
    let model = CpCostModel::default();
    let work = sys.node(0).cp_work();
    assert_eq!(s.cp_cycles, work.cycles(&model));
    // The documented formula (docs/calibration.md), term by term.
    let general = work.queue_visits - work.mapped_visits;
    assert_eq!(
        work.cycles(&model),
        30 * work.mem_accesses
            + 527 * work.handlers
            + 2 * work.decisions
            + 28 * work.mapped_visits
            + 406 * general
            + 60 * work.mapped_dispatches
            + 191 * (work.dispatches - work.mapped_dispatches)
            + 11_605 * work.predictions
            + 270 * (work.packets_decoded - work.predictions)
            + 191 * work.completions
    );
    assert!(work.handlers >= 1 && work.dispatches == 4);
    assert!(work.predictions >= 1 && work.decisions >= 1);
    // The first kernels launch when the handlers that saw them have been charged.
    let first_launch = sys
        .node(0)
        .outcomes()
        .values()
        .map(|o| o.launched_at.unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(first_launch > 0.0);
    // Each handler's busy time is its cycles at 1.5 GHz, rounded up to the picosecond of
    // the one time axis.
    let exact = s.cp_cycles as f64 / 1.5;
    assert!(s.cp_busy_ns >= exact - 1e-9 && s.cp_busy_ns <= exact + 1e-3 * s.events as f64);
}

/// HSA completion signals: a signal shared by three GEMMs (the producer set it to 3)
/// reaches 0 only with the last completion, so a barrier on it waits for all three.
#[test]
fn shared_completion_signal_resolves_on_the_last_completion() {
    let mut sys = system(4, constant(1));
    let shared = SIG_BASE + 0x200;
    sys.node_mut(0)
        .memory_mut()
        .write_signal(shared, 3)
        .unwrap();
    for q in 0..3u8 {
        let m = 1024 * (u32::from(q) + 1);
        let ext = sample::gemm_ext(m, 512, 512, KO_BASE + u64::from(m));
        let addr = EXT_BASE + u64::from(q) * 0x100;
        sys.node_mut(0)
            .memory_mut()
            .write(addr, &ext.encode())
            .unwrap();
        sys.enqueue(0, q, &sample::gemm_dispatch(&ext, addr, shared), 0.0)
            .unwrap();
    }
    let barrier_sig = SIG_BASE + 0x300;
    sys.enqueue(0, 3, &sample::barrier(true, &[shared], barrier_sig), 0.0)
        .unwrap();
    for q in 0..4u8 {
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    sys.run(100_000);
    let outcomes = sys.node(0).outcomes();
    let last = (0..3u8)
        .map(|q| outcomes[&(q, 0)].completed_at.unwrap())
        .fold(0.0f64, f64::max);
    let first = (0..3u8)
        .map(|q| outcomes[&(q, 0)].completed_at.unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!(last > first, "the three GEMMs finish at different times");
    let barrier = &outcomes[&(3, 0)];
    assert_eq!(barrier.action, Some(CpAction::BarrierResolved));
    assert!(barrier.completed_at.unwrap() >= last);
    assert_eq!(sys.node(0).memory().read_signal(shared).unwrap(), 0);
    assert_eq!(sys.node(0).memory().read_signal(barrier_sig).unwrap(), 0);
}

/// CD 1 serialises: with a predictor that answers 1, n copies of a GEMM run one after the
/// other — each starts only when the previous one has completed — so, with a CP that
/// costs nothing, the makespan is the sum of the isolated runs (Sequential's time).
#[test]
fn cd1_of_n_copies_takes_sequential_time() {
    let n = 6u8;
    let cfg = GpuNodeConfig {
        queues: usize::from(n),
        ring_packets: 16,
        predictor: constant(1),
        cost: nmcp_emulator::node::FirmwareCost::free(),
        ..GpuNodeConfig::default()
    };
    let mut sys = System::single(cfg, FixedTimeEngine::new(8, 2, 1_000.0)).unwrap();
    for q in 0..n {
        put_gemm(&mut sys, q, 1024, 0);
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    sys.run(100_000);
    assert_all_ran_once(&sys);
    let mut runs: Vec<(f64, f64)> = sys
        .node(0)
        .outcomes()
        .values()
        .map(|o| (o.launched_at.unwrap(), o.completed_at.unwrap()))
        .collect();
    runs.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
    for w in runs.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "next launch {} before completion {}",
            w[1].0,
            w[0].1
        );
    }
    let sequential: f64 = runs.iter().map(|(s, e)| e - s).sum();
    let makespan = runs.last().unwrap().1 - runs[0].0;
    assert!(
        (makespan - sequential).abs() < 1e-6,
        "{makespan} vs {sequential}"
    );
}

/// Fuzz reproducer (cp_stream, fuzz/corpus/cp_stream/regress_dispatch_refused): a later
/// packet of a known GEMM shape is classified without re-checking its reserved fields; a reserved bit set is then refused by the dispatcher. The CP rejects that packet
/// (its signal carries the `dispatch_refused` code) instead of failing its handler, and the
/// queue goes on to the next packet.
#[test]
fn a_packet_the_dispatcher_refuses_is_rejected_and_the_queue_goes_on() {
    use nmcp_firmware::cp::{RejectCode, RejectReason};
    let mut sys = system(2, constant(1));
    let ext = sample::gemm_ext(1024, 512, 512, KO_BASE + 1024);
    sys.node_mut(0)
        .memory_mut()
        .write(EXT_BASE, &ext.encode())
        .unwrap();
    let good = sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE);
    let mut bad = sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE + 8);
    // A bit in the reserved half-word after the workgroup size (bytes 10..12).
    bad[10] ^= 1;
    let after = sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE + 16);
    for (i, pkt) in [good, bad, after].iter().enumerate() {
        sys.node_mut(0)
            .memory_mut()
            .write_signal(SIG_BASE + 8 * i as u64, 1)
            .unwrap();
        sys.enqueue(0, 0, pkt, 0.0).unwrap();
    }
    sys.ring_doorbell(0, 0, 0.0).unwrap();
    let ran = sys.run(100_000);
    assert_eq!(ran.handler_errors, 0, "{:?}", sys.node(0).last_error());
    let o = sys.node(0).outcomes();
    assert!(matches!(
        o[&(0, 0)].action,
        Some(CpAction::Dispatched { .. })
    ));
    assert_eq!(
        o[&(0, 1)].action,
        Some(CpAction::Rejected(RejectReason::DispatchRefused))
    );
    assert_eq!(
        sys.node(0).memory().read_signal(SIG_BASE + 8).unwrap(),
        RejectCode::DispatchRefused.signal_value()
    );
    assert!(o[&(0, 2)].completed_at.is_some(), "the queue went on");
}

/// Fuzz finding (cp_stream, fuzz/known/cp_stream-q0-waits-after-6): a packet whose
/// completion signal points into another queue's ring would, on completion, decrement that
/// queue's next packet header into INVALID, and that queue would wait for ever. The CP
/// rejects such a packet (on the first sight of its shape and on the known-shape path
/// alike), and the other queue's packets all run.
#[test]
fn a_completion_signal_inside_a_queue_ring_is_rejected() {
    use nmcp_firmware::cp::RejectReason;
    use nmcp_isa::aql::AqlError;
    let mut sys = system(2, constant(1));
    let ext = sample::gemm_ext(1024, 512, 512, KO_BASE + 1024);
    sys.node_mut(0)
        .memory_mut()
        .write(EXT_BASE, &ext.encode())
        .unwrap();
    let q0 = sys.node(0).queues()[0];
    // Queue 1: a good packet (the shape becomes known), then one whose signal is queue 0's
    // second packet slot.
    let bad_signal = q0.packet_addr(1);
    sys.enqueue(
        0,
        1,
        &sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE + 64),
        0.0,
    )
    .unwrap();
    sys.enqueue(
        0,
        1,
        &sample::gemm_dispatch(&ext, EXT_BASE, bad_signal),
        0.0,
    )
    .unwrap();
    for i in 0..3u64 {
        sys.enqueue(
            0,
            0,
            &sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE + 8 * i),
            0.0,
        )
        .unwrap();
    }
    sys.ring_doorbell(0, 1, 0.0).unwrap();
    sys.ring_doorbell(0, 0, 0.0).unwrap();
    let ran = sys.run(100_000);
    assert_eq!(ran.handler_errors, 0);
    let o = sys.node(0).outcomes();
    assert!(matches!(
        o[&(1, 1)].action,
        Some(CpAction::Rejected(RejectReason::Packet(
            AqlError::AddressOutOfRange {
                field: "completion_signal",
                ..
            }
        )))
    ));
    for i in 0..3u64 {
        assert!(o[&(0, i)].completed_at.is_some(), "queue 0 packet {i}");
    }
}

/// One handler that rejects more packets than the old 16-entry reason queue held: every
/// rejection keeps its record and reason (a platform draining the log after each handler
/// loses nothing). Two queues of 16 garbage packets each, one doorbell each, one run.
#[test]
fn every_rejection_of_a_busy_handler_keeps_its_record() {
    let mut sys = system(2, constant(1));
    for q in 0..2u8 {
        for i in 0..16u8 {
            let mut pkt = [0u8; AQL_PACKET_BYTES];
            // A reserved packet type in the header: rejected on sight.
            pkt[0] = 6;
            pkt[1] = 0;
            pkt[8] = i;
            sys.enqueue(0, q, &pkt, 0.0).unwrap();
        }
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    let ran = sys.run(100_000);
    assert!(!ran.truncated);
    let outcomes = sys.node(0).outcomes();
    assert_eq!(outcomes.len(), 32);
    for ((q, id), o) in outcomes {
        assert!(
            matches!(o.action, Some(CpAction::Rejected(_))),
            "queue {q} packet {id}: {:?}",
            o.action
        );
        assert_eq!(o.completions, 1, "queue {q} packet {id}");
    }
    assert_eq!(sys.node(0).firmware().cp.records_dropped(), 0);
}

/// A group member the dispatcher refuses in the middle of a group (one
/// `KernelDispatcher::dispatch_group` call; the node's dispatcher is the trait's default,
/// one `dispatch` per request): that member is rejected (`DispatchRefused`), the members
/// after it are still dispatched with the group's CD and kernel objects.
#[test]
fn a_member_refused_mid_group_is_rejected_and_the_rest_of_the_group_dispatches() {
    use nmcp_firmware::cp::{RejectCode, RejectReason};
    let mut sys = system(4, constant(4));
    let ext = sample::gemm_ext(1024, 512, 512, KO_BASE + 1024);
    sys.node_mut(0)
        .memory_mut()
        .write(EXT_BASE, &ext.encode())
        .unwrap();
    for q in 0..4u8 {
        let sig = SIG_BASE + 8 * u64::from(q);
        let mut pkt = sample::gemm_dispatch(&ext, EXT_BASE, sig);
        if q == 1 {
            // A reserved bit (bytes 10..12): queue 0's packet taught the CP the shape,
            // so this one is classified by its header word and record only, and the
            // dispatcher is the first to decode it.
            pkt[10] ^= 1;
        }
        sys.node_mut(0).memory_mut().write_signal(sig, 1).unwrap();
        sys.enqueue(0, q, &pkt, 0.0).unwrap();
    }
    for q in 0..4u8 {
        sys.ring_doorbell(0, q, 0.0).unwrap();
    }
    let ran = sys.run(100_000);
    assert_eq!(ran.handler_errors, 0, "{:?}", sys.node(0).last_error());
    let o = sys.node(0).outcomes();
    assert_eq!(
        o[&(1, 0)].action,
        Some(CpAction::Rejected(RejectReason::DispatchRefused))
    );
    assert_eq!(
        sys.node(0).memory().read_signal(SIG_BASE + 8).unwrap(),
        RejectCode::DispatchRefused.signal_value()
    );
    for q in [0u8, 2, 3] {
        match o[&(q, 0)].action {
            Some(CpAction::Dispatched { cd, gemm, .. }) => {
                assert!(gemm);
                assert_eq!(cd, 4, "queue {q}: the group's CD");
            }
            ref a => panic!("queue {q}: {a:?}"),
        }
        assert!(o[&(q, 0)].completed_at.is_some());
    }
}
