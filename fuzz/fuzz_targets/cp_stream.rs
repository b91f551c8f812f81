//! The firmware CP inside the emulator, driven by an arbitrary stream of host actions on
//! 32 queues: enqueue valid GEMMs or corrupted packets, write packet bodies whose header
//! is still INVALID, ring doorbells out of order or never, wrap the rings, let the GPU run
//! for a while. After every action the invariants of SPEC 8 hold:
//! * no packet completes more often than it was dispatched, and none is both rejected
//!   and dispatched (an outcome is one action);
//! * a dispatch's CD is at most 16 (and at least 1);
//! * the firmware never panics (libFuzzer catches it) and never loops: each run of the
//!   event loop ends within its step bound;
//! * no handler error (a dispatch outside device memory would be one).
//!
//! At the end every doorbell is rung and the system runs dry: then every packet that
//! reached a queue head with a valid header has exactly one outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_emulator::gpu::fixture::sample;
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::node::GpuNodeConfig;
use nmcp_emulator::system::System;
use nmcp_firmware::cp::{CdPredictor, CpAction, CLASS_COUNT};
use nmcp_isa::aql::AQL_PACKET_BYTES;

const QUEUES: usize = 32;
const KO_BASE: u64 = 0x1000_0000;
const EXT_BASE: u64 = 0x1100_0000;
const SIG_BASE: u64 = 0x1200_0000;
/// Event-loop steps one "run" action may take: far above what 16 packets per queue need.
const RUN_STEPS: u64 = 200_000;

fn check(sys: &System<FixedTimeEngine>, ran: &nmcp_emulator::node::RunSummary) {
    assert!(!ran.truncated, "event loop did not settle within {RUN_STEPS} steps");
    assert_eq!(ran.handler_errors, 0, "a firmware handler failed: {:?}", sys.node(0).last_error());
    for ((q, id), o) in sys.node(0).outcomes() {
        assert!(
            o.completions <= o.dispatches.max(1),
            "queue {q} packet {id}: {} completions of {} dispatches",
            o.completions,
            o.dispatches
        );
        if let Some(CpAction::Dispatched { cd, .. }) = o.action {
            assert!((1..=16).contains(&cd), "queue {q} packet {id}: CD {cd}");
        }
        if matches!(o.action, Some(CpAction::Rejected(_))) {
            assert_eq!(o.dispatches, 0, "queue {q} packet {id}: rejected after a dispatch");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&p, actions)) = data.split_first() else {
        return;
    };
    // The predictor answers one CD class for everything (the class is fuzzed).
    let mut predictor = CdPredictor::default();
    predictor.bias_q16 = [0; CLASS_COUNT];
    predictor.bias_q16[usize::from(p) % CLASS_COUNT] = 1 << 16;
    let cfg = GpuNodeConfig {
        queues: QUEUES,
        ring_packets: 16,
        predictor,
        ..GpuNodeConfig::default()
    };
    let Ok(mut sys) = System::single(cfg, FixedTimeEngine::new(8, 2, 500.0)) else {
        return;
    };
    let mut slot = 0u64;
    let mut at = 0.0f64;
    // Per queue, the dispatch ids of packets enqueued, and whether each was a valid GEMM.
    let mut sent: Vec<Vec<(u64, bool)>> = vec![Vec::new(); QUEUES];
    for a in actions.chunks(3).take(200) {
        let (op, q, x) = (a[0], a.get(1).copied().unwrap_or(0), a.get(2).copied().unwrap_or(0));
        let queue = q % QUEUES as u8;
        match op % 8 {
            // A valid GEMM (one of 4 shapes), with its extension record.
            0 | 1 => {
                let m = 256u32 << (x % 4);
                let ext = sample::gemm_ext(m, 512, 256, KO_BASE + u64::from(m));
                let addr = EXT_BASE + (slot % 4096) * 0x100;
                let _ = sys.node_mut(0).memory_mut().write(addr, &ext.encode());
                let sig = SIG_BASE + (slot % 4096) * 8;
                let _ = sys.node_mut(0).memory_mut().write_signal(sig, 1);
                if let Ok(id) = sys.enqueue(0, queue, &sample::gemm_dispatch(&ext, addr, sig), at) {
                    sent[usize::from(queue)].push((id, true));
                }
                slot += 1;
            }
            // A corrupted packet: a valid one with one byte changed.
            2 => {
                let ext = sample::gemm_ext(512, 512, 256, KO_BASE + 512);
                let addr = EXT_BASE + (slot % 4096) * 0x100;
                let _ = sys.node_mut(0).memory_mut().write(addr, &ext.encode());
                let mut pkt = sample::gemm_dispatch(&ext, addr, SIG_BASE + (slot % 4096) * 8);
                pkt[usize::from(x) % AQL_PACKET_BYTES] ^= q | 1;
                if let Ok(id) = sys.enqueue(0, queue, &pkt, at) {
                    sent[usize::from(queue)].push((id, false));
                }
                slot += 1;
            }
            // Random bytes as a packet.
            3 => {
                let mut pkt = [0u8; AQL_PACKET_BYTES];
                for (i, b) in pkt.iter_mut().enumerate() {
                    *b = x.wrapping_mul(i as u8 + 1) ^ q;
                }
                if let Ok(id) = sys.enqueue(0, queue, &pkt, at) {
                    sent[usize::from(queue)].push((id, false));
                }
            }
            // A body written, header still INVALID (type 1 in the low byte).
            4 => {
                let ext = sample::gemm_ext(1024, 512, 256, KO_BASE + 1024);
                let mut pkt = sample::gemm_dispatch(&ext, EXT_BASE, SIG_BASE);
                pkt[0] = 1;
                pkt[1] = 0;
                if let Ok(id) = sys.enqueue(0, queue, &pkt, at) {
                    sent[usize::from(queue)].push((id, false));
                }
            }
            // A barrier on two signals.
            5 => {
                let deps = [SIG_BASE + u64::from(x) * 8, SIG_BASE + u64::from(q) * 8];
                if let Ok(id) = sys.enqueue(0, queue, &sample::barrier(x & 1 == 1, &deps, 0), at) {
                    sent[usize::from(queue)].push((id, false));
                }
            }
            // Doorbells, in any order, or never.
            6 => {
                let _ = sys.ring_doorbell(0, queue, at);
            }
            // Let the GPU and the CP run.
            _ => {
                let ran = sys.run(RUN_STEPS);
                check(&sys, &ran);
            }
        }
        at += f64::from(x) * 10.0;
    }
    for q in 0..QUEUES as u8 {
        let _ = sys.ring_doorbell(0, q, at);
    }
    let ran = sys.run(RUN_STEPS * 4);
    check(&sys, &ran);
    // Every valid GEMM ahead of anything that may block its queue (an INVALID header, a
    // barrier waiting on a signal nobody sets, a corrupted packet) was dispatched and
    // completed, or rejected: exactly one outcome.
    let outcomes = sys.node(0).outcomes();
    for (q, packets) in sent.iter().enumerate() {
        for &(id, valid) in packets {
            if !valid {
                break;
            }
            let o = outcomes
                .get(&(q as u8, id))
                .unwrap_or_else(|| panic!("queue {q} packet {id}: no outcome"));
            match o.action {
                Some(CpAction::Dispatched { .. }) => {
                    assert!(o.completed_at.is_some(), "queue {q} packet {id}: never completed");
                }
                Some(_) => {}
                None => panic!("queue {q} packet {id}: no action"),
            }
        }
    }
});
