//! Replaying queue dumps with malformed packets through the firmware CP: each bad packet
//! completes with its error value, the rest run, nothing is dispatched twice, and every
//! packet completes exactly once (also as a property over random packet streams).

use nmcp_emulator::gpu::queue::demo::{self, Expect};
use nmcp_emulator::gpu::queue::{sample, QueueDump};
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::node::GpuNodeConfig;
use nmcp_emulator::system::System;
use nmcp_firmware::cp::features::FRAC_BITS;
use nmcp_firmware::cp::{CdPredictor, CpAction, RejectCode, CLASS_COUNT, MAX_CD};
use nmcp_isa::aql::{self, AQL_PACKET_BYTES};
use proptest::prelude::*;

fn cd4() -> CdPredictor {
    let mut p = CdPredictor {
        bias_q16: [0; CLASS_COUNT],
        ..CdPredictor::default()
    };
    p.bias_q16[2] = 1 << FRAC_BITS;
    p
}

fn replay(dump: &QueueDump, queues: usize, predictor: CdPredictor) -> System<FixedTimeEngine> {
    replay_on(dump, queues, predictor, FixedTimeEngine::new(8, 4, 500.0))
}

fn replay_on(
    dump: &QueueDump,
    queues: usize,
    predictor: CdPredictor,
    engine: FixedTimeEngine,
) -> System<FixedTimeEngine> {
    let cfg = GpuNodeConfig {
        queues,
        ring_packets: 64,
        predictor,
        ..GpuNodeConfig::default()
    };
    let mut sys = System::single(cfg, engine).unwrap();
    sys.load_dump(0, dump).unwrap();
    sys.run(100_000);
    sys
}

fn signal_of(bytes: &[u8; AQL_PACKET_BYTES]) -> u64 {
    u64::from_le_bytes(bytes[aql::offset::COMPLETION_SIGNAL..].try_into().unwrap())
}

#[test]
fn malformed_packets_complete_with_their_error_and_the_rest_run() {
    let (dump, expect) = demo::dump(3, 2, true);
    // Through the file format and back.
    let dump = QueueDump::parse(&dump.to_bytes()).unwrap();
    assert_eq!(dump.packets.len(), expect.len());
    let sys = replay(&dump, 3, cd4());
    let mut per_queue = [0u64; 3];
    let mut rejected = 0;
    for (p, e) in dump.packets.iter().zip(&expect) {
        let id = per_queue[usize::from(p.queue)];
        per_queue[usize::from(p.queue)] += 1;
        let o = &sys.node(0).outcomes()[&(p.queue, id)];
        assert_eq!(o.completions, 1, "completes exactly once: {o:?}");
        let signal = sys
            .node(0)
            .memory()
            .read_signal(signal_of(&p.bytes))
            .unwrap();
        match *e {
            Expect::Runs => {
                assert_eq!(o.dispatches, 1, "{o:?}");
                assert_eq!(signal, 0);
            }
            Expect::Resolves => {
                assert_eq!(o.action, Some(CpAction::BarrierResolved));
                assert_eq!(signal, 0);
            }
            Expect::Rejected(code) => {
                rejected += 1;
                assert_eq!(o.dispatches, 0, "{o:?}");
                assert_eq!(signal, code.signal_value(), "queue {} id {id}", p.queue);
                assert_eq!(RejectCode::from_signal_value(signal), Some(code));
                let Some(CpAction::Rejected(reason)) = o.action else {
                    panic!("{o:?}")
                };
                assert_eq!(reason.code(), code);
            }
        }
    }
    assert_eq!(rejected, 10, "one of every malformed kind");
    assert_eq!(sys.summary().handler_errors, 0);
}

#[test]
fn truncated_dump_names_the_offset() {
    let (dump, _) = demo::dump(1, 1, false);
    let mut bytes = dump.to_bytes();
    let len = bytes.len();
    bytes.extend_from_slice(&[0u8; 10]);
    let e = QueueDump::parse(&bytes).unwrap_err();
    assert!(e.to_string().contains(&format!("offset {len}")), "{e}");
}

#[test]
fn a_long_run_of_bad_packets_is_worked_off_in_bounded_handlers() {
    let mut dump = QueueDump {
        device: Some(demo::DEVICE),
        ..QueueDump::default()
    };
    for i in 0..100u64 {
        let p = aql::encode(&aql::AqlPacket::KernelDispatch(sample::dispatch(
            demo::NON_GEMM_KO,
            0,
            256,
            0,
            demo::SIGNAL_BASE + 8 * i,
        )));
        dump.packets.push(nmcp_emulator::gpu::queue::DumpPacket {
            offset: 0,
            queue: 0,
            bytes: p,
        });
    }
    let cfg = GpuNodeConfig {
        queues: 1,
        ring_packets: 128,
        ..GpuNodeConfig::default()
    };
    let mut sys = System::single(cfg, FixedTimeEngine::new(8, 4, 500.0)).unwrap();
    sys.load_dump(0, &dump).unwrap();
    let s = sys.run(10_000);
    assert!(sys.node(0).outcomes().values().all(|o| o.completions == 1
        && o.completion_value == Some(RejectCode::ZeroGridSize.signal_value())));
    // 100 packets at 32 per handler: the doorbell plus three timer continuations.
    assert_eq!(s.events, 4);
    assert_eq!(
        sys.node(0).cp_work().packets_inspected,
        100,
        "no packet is inspected twice"
    );
}

/// One packet of a random stream.
#[derive(Debug, Clone)]
enum Kind {
    Gemm(usize),
    NonGemm,
    /// Raw corruption of a GEMM packet: (byte, xor).
    CorruptPacket(usize, u8),
    /// Corruption of a GEMM packet's extension record: (byte, xor).
    CorruptExt(usize, u8),
    /// Barrier on earlier packets (indices into the stream, taken modulo its position).
    Barrier(bool, Vec<usize>),
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => (0usize..3).prop_map(Kind::Gemm),
        2 => Just(Kind::NonGemm),
        1 => (0usize..64, 1u8..).prop_map(|(b, x)| Kind::CorruptPacket(b, x)),
        1 => (0usize..104, 1u8..).prop_map(|(b, x)| Kind::CorruptExt(b, x)),
        1 => (any::<bool>(), prop::collection::vec(any::<usize>(), 0..4))
            .prop_map(|(a, d)| Kind::Barrier(a, d)),
    ]
}

/// Workgroups one kernel of a random stream may launch.
const MAX_TEST_WGS: u64 = 1 << 20;

fn build(stream: &[(u8, Kind)]) -> QueueDump {
    let mut dump = QueueDump {
        device: Some(demo::DEVICE),
        ..QueueDump::default()
    };
    let mut signals = Vec::new();
    for (i, (q, k)) in stream.iter().enumerate() {
        let sig = demo::SIGNAL_BASE + 8 * i as u64;
        let ext_addr = demo::EXT_BASE + 0x100 * i as u64;
        let gemm = |size: usize| {
            let (m, n, kk) = demo::SIZES[size];
            sample::gemm_ext(m, n, kk, demo::KO_BASE + 0x1000 * size as u64)
        };
        let mut ext_bytes = None;
        let bytes = match k {
            Kind::Gemm(s) => {
                let g = gemm(*s);
                ext_bytes = Some(g.encode().to_vec());
                sample::gemm_dispatch(&g, ext_addr, sig)
            }
            Kind::NonGemm => aql::encode(&aql::AqlPacket::KernelDispatch(sample::dispatch(
                demo::NON_GEMM_KO,
                16 * 256,
                256,
                0,
                sig,
            ))),
            Kind::CorruptPacket(b, x) => {
                let g = gemm(0);
                ext_bytes = Some(g.encode().to_vec());
                let mut p = sample::gemm_dispatch(&g, ext_addr, sig);
                // Keep the completion signal intact so the outcome can be checked, and
                // never forge an INVALID header (an unpublished slot waits forever).
                // Only the low byte of a grid size, so a corrupted grid stays small
                // enough to simulate workgroup by workgroup.
                let grid_high = (12..24).contains(b) && (b - 12) % 4 != 0;
                if *b < 56 && !grid_high {
                    p[*b] ^= x;
                }
                if p[0] == 1 {
                    p[0] = 9;
                }
                p
            }
            Kind::CorruptExt(b, x) => {
                let g = gemm(1);
                let mut e = g.encode().to_vec();
                e[*b] ^= x;
                // A corruption that still decodes but asks for more work than a test can
                // simulate (e.g. batch = 2^28) is replaced by the intact record.
                let too_big = nmcp_isa::gemm_ext::GemmExt::decode(&e).is_ok_and(|c| {
                    c.kernels
                        .iter()
                        .any(|k| nmcp_firmware::cp::features::workgroups(&c, k) > MAX_TEST_WGS)
                });
                if too_big {
                    e = g.encode().to_vec();
                }
                ext_bytes = Some(e);
                sample::gemm_dispatch(&g, ext_addr, sig)
            }
            Kind::Barrier(and, deps) => {
                let d: Vec<u64> = if i == 0 {
                    Vec::new()
                } else {
                    deps.iter().map(|&j| signals[j % i]).collect()
                };
                sample::barrier(*and, &d, sig)
            }
        };
        if let Some(e) = ext_bytes {
            dump.memory.push(nmcp_emulator::gpu::queue::MemSection {
                addr: ext_addr,
                bytes: e,
            });
        }
        signals.push(sig);
        dump.packets.push(nmcp_emulator::gpu::queue::DumpPacket {
            offset: 0,
            queue: *q,
            bytes,
        });
    }
    dump
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Barriers only depend on packets enqueued before them, so no stream can deadlock;
    /// then every packet must end exactly once, dispatched at most once, and no decision
    /// may exceed CD 16 or the GEMMs available.
    #[test]
    fn every_packet_completes_exactly_once(
        stream in prop::collection::vec((0u8..4, kind()), 1..40),
        cd_class in 0usize..CLASS_COUNT,
    ) {
        let dump = build(&stream);
        let mut predictor = CdPredictor {
            bias_q16: [0; CLASS_COUNT],
            ..CdPredictor::default()
        };
        predictor.bias_q16[cd_class] = 1 << FRAC_BITS;
        // A corrupted record can ask for billions of workgroups; a GPU with a million
        // slots places them in few batches, so the run stays short.
        let sys = replay_on(&dump, 4, predictor, FixedTimeEngine::new(1000, 1000, 500.0));
        prop_assert_eq!(sys.node(0).outcomes().len(), stream.len());
        for o in sys.node(0).outcomes().values() {
            prop_assert_eq!(o.completions, 1, "{:?}", o);
            prop_assert!(o.dispatches <= 1, "{:?}", o);
            match o.action {
                Some(CpAction::Dispatched { cd, .. }) => {
                    prop_assert_eq!(o.dispatches, 1);
                    prop_assert!(cd <= MAX_CD);
                }
                Some(_) => prop_assert_eq!(o.dispatches, 0),
                None => prop_assert!(false, "no action: {:?}", o),
            }
        }
        // One decision per handler: the GEMMs dispatched together are exactly CD many
        // (CD never exceeds the GEMMs available, nor 16).
        let mut by_handler: std::collections::BTreeMap<u64, Vec<u8>> = Default::default();
        for (t, rec) in sys.node(0).records() {
            if let CpAction::Dispatched { cd, gemm: true, .. } = rec.action {
                by_handler.entry(t.to_bits()).or_default().push(cd);
            }
        }
        for cds in by_handler.values() {
            prop_assert!(cds.iter().all(|&c| c == cds[0] && c <= MAX_CD));
            prop_assert_eq!(cds.len(), usize::from(cds[0]));
        }
        prop_assert_eq!(sys.summary().handler_errors, 0);
        prop_assert!(!sys.summary().truncated);
    }
}
