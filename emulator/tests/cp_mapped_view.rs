//! The node's mapped view of its queues (the fast path the board's CP takes): the CP
//! decides exactly as on the general path, takes the steady lane for repeated shapes,
//! and is charged less for it.

use nmcp_emulator::gpu::queue::sample;
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::node::{FirmwareCost, GpuNodeConfig, RunSummary};
use nmcp_emulator::system::System;
use nmcp_firmware::cp::features::FRAC_BITS;
use nmcp_firmware::cp::{CdPredictor, CpWork};

const KO_BASE: u64 = 0x1000_0000;
const EXT_BASE: u64 = 0x1100_0000;
const SIG_BASE: u64 = 0x1200_0000;
const QUEUES: u8 = 8;

/// CD 16 from M >= 4096, CD 4 from M >= 1024, else 1 (as `cp_dispatch.rs`'s `by_m`).
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

/// Five iterations of a training loop on 8 queues, each enqueued when the one before is
/// done: M 4096 (CD 16: one group of all 8) on every queue (one record per shape, as a
/// framework reuses its records), so the heads of the fourth iteration are the shapes
/// the queues held last (a steady decision); in the second, queue 7's GEMM is a new
/// shape (M 512, CD 1) and queue 5's is followed by a non-GEMM kernel the CP dispatches
/// alone; in the fifth, queue 3 runs M 1024 (CD 4; a key that does not hold sends the
/// decision the general way).
fn run(mapped: bool, cost: FirmwareCost) -> (System<FixedTimeEngine>, RunSummary) {
    let cfg = GpuNodeConfig {
        queues: usize::from(QUEUES),
        ring_packets: 16,
        predictor: by_m(),
        cost,
        ..GpuNodeConfig::default()
    };
    let mut sys = System::single(cfg, FixedTimeEngine::new(8, 2, 1_000.0)).unwrap();
    sys.node_mut(0).set_mapped_view(mapped);
    let shapes = [1024u32, 4096, 512];
    for (i, &m) in shapes.iter().enumerate() {
        let ext = sample::gemm_ext(m, 512, 512, KO_BASE + u64::from(m));
        sys.node_mut(0)
            .memory_mut()
            .write(EXT_BASE + i as u64 * 0x100, &ext.encode())
            .unwrap();
    }
    let mut sig = 0u64;
    let mut at = 0.0;
    let mut total = RunSummary::default();
    // Each iteration enqueued when the previous one is done, as a training loop does.
    for it in 0..5u32 {
        for q in 0..QUEUES {
            let shape = match (it, q) {
                (1, 7) => 2,
                (4, 3) => 0,
                _ => 1,
            };
            let m = shapes[shape];
            let ext = sample::gemm_ext(m, 512, 512, KO_BASE + u64::from(m));
            let addr = EXT_BASE + shape as u64 * 0x100;
            let s = SIG_BASE + sig * 8;
            sig += 1;
            sys.enqueue(0, q, &sample::gemm_dispatch(&ext, addr, s), at)
                .unwrap();
            if it == 1 && q == 5 {
                let s = SIG_BASE + sig * 8;
                sig += 1;
                let k = sample::dispatch(0x1010_0000, 64, 64, 0, s);
                let packet = nmcp_isa::aql::encode(&nmcp_isa::aql::AqlPacket::KernelDispatch(k));
                sys.enqueue(0, q, &packet, at).unwrap();
            }
        }
        for q in 0..QUEUES {
            sys.ring_doorbell(0, q, at).unwrap();
        }
        let s = sys.run(100_000);
        at = s.end;
        total.merge(&s);
    }
    let s = total;
    (sys, s)
}

/// Every packet's fate: the CP's action, dispatches, completions, kernel object.
fn decisions(sys: &System<FixedTimeEngine>) -> Vec<String> {
    sys.node(0)
        .outcomes()
        .values()
        .map(|o| {
            format!(
                "{}/{} {:?} dispatches={} completions={} ko={:?} value={:?}",
                o.queue,
                o.dispatch_id,
                o.action,
                o.dispatches,
                o.completions,
                o.kernel_object,
                o.completion_value
            )
        })
        .collect()
}

#[test]
fn mapped_and_general_paths_decide_the_same() {
    // A CP that costs nothing: both runs see the same timeline, so any difference is the
    // path's.
    let (mapped, sm) = run(true, FirmwareCost::free());
    let (general, sg) = run(false, FirmwareCost::free());
    assert!(!sm.truncated && !sg.truncated);
    assert_eq!(sm.handler_errors + sg.handler_errors, 0);
    let (dm, dg) = (decisions(&mapped), decisions(&general));
    assert_eq!(dm.len(), 41, "{dm:#?}");
    assert_eq!(dm, dg);
    for o in mapped.node(0).outcomes().values() {
        assert_eq!((o.dispatches, o.completions), (1, 1), "{o:?}");
    }
    let (wm, wg): (CpWork, CpWork) = (mapped.node(0).cp_work(), general.node(0).cp_work());
    // The mapped run classified heads on the fast path and dispatched steady groups
    // through the dispatcher's FIFO; the general run did neither. Both learnt the same
    // shapes and made the same decisions.
    assert!(wm.mapped_visits > 0 && wm.mapped_dispatches > 0, "{wm:?}");
    assert_eq!((wg.mapped_visits, wg.mapped_dispatches), (0, 0), "{wg:?}");
    assert_eq!(wm.predictions, wg.predictions);
    assert_eq!(wm.dispatches, wg.dispatches);
}

#[test]
fn the_mapped_view_is_charged_less_than_the_general_path() {
    let (mapped, sm) = run(true, FirmwareCost::default());
    let (general, sg) = run(false, FirmwareCost::default());
    assert_eq!(decisions(&mapped).len(), decisions(&general).len());
    assert!(
        sm.cp_cycles < sg.cp_cycles,
        "mapped {} vs general {} CP cycles",
        sm.cp_cycles,
        sg.cp_cycles
    );
}
