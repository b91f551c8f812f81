//! Whole queue dumps, the input of `nmcp aql decode` and `nmcp cp replay`: any bytes
//! parse or are refused with an offset; a parsed dump written out again parses to the
//! same device range, memory sections and per-queue packets; and its replay through the
//! firmware CP (fixed-time engine, a step cap) finishes, stops at the cap or is refused,
//! and every packet has at most one outcome.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_emulator::gpu::queue::QueueDump;
use nmcp_firmware::cp::CdPredictor;
use nmcp_host::cp_replay::{dispatch_ids, replay, ReplayEngine, ReplaySetup};

fuzz_target!(|data: &[u8]| {
    let Ok(dump) = QueueDump::parse(data) else {
        return;
    };
    let again = QueueDump::parse(&dump.to_bytes()).expect("a written dump parses");
    assert_eq!(again.device, dump.device);
    assert_eq!(again.memory, dump.memory);
    let packets = |d: &QueueDump| -> Vec<(u8, [u8; 64])> {
        d.packets.iter().map(|p| (p.queue, p.bytes)).collect()
    };
    assert_eq!(packets(&again), packets(&dump));
    assert_eq!(dispatch_ids(&dump).len(), dump.packets.len());
    let setup = ReplaySetup {
        device: None,
        engine: ReplayEngine::Fixed {
            cus: 4,
            slots: 2,
            wg_ns: 100.0,
        },
        predictor: CdPredictor::default(),
        max_steps: 20_000,
        timeline: None,
    };
    if let Ok(r) = replay(&dump, &setup) {
        assert_eq!(r.packets.len(), dump.packets.len());
    }
});
