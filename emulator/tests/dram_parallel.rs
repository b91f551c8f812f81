//! `MemorySystem::run_parallel` (channels stepped on threads in speculative windows)
//! gives exactly `run`'s report, on paced traces (where windows succeed), traces whose
//! queues sometimes fill (windows thrown away and redone serially) and saturating streams
//! (serial throughout), with shared and per-pseudo-channel command buses.

use nmcp_emulator::hbm::config::CommandBus;
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem, Request, RunReport};
use nmcp_emulator::trace::{Pattern, Synthetic};

fn system(p: &HbmPreset, depth: usize) -> MemorySystem {
    let mapping = AddressMapping::named(STREAM_MAPPING, p).unwrap();
    MemorySystem::new(p, mapping, ControllerConfig::with_depth(p, depth))
}

/// `n` requests of `pattern`, one every `gap` cycles (0: all at cycle 0).
fn paced(p: &HbmPreset, pattern: Pattern, n: u64, gap: u64, writes: f64) -> Vec<Request> {
    Synthetic::new(pattern, n, 64, p.capacity_bytes(), writes, 5)
        .enumerate()
        .map(|(i, mut r)| {
            r.arrival = i as u64 * gap;
            r
        })
        .collect()
}

fn both(p: &HbmPreset, depth: usize, reqs: &[Request], window: u64) -> (RunReport, RunReport) {
    let serial = system(p, depth).run(reqs.iter().copied(), |_| {});
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let parallel =
        pool.install(|| system(p, depth).run_parallel(reqs.iter().copied(), window, |_| {}));
    (serial, parallel)
}

#[test]
fn parallel_windows_give_the_serial_report() {
    let shared = HbmPreset::builtin("hbm2-2000").unwrap();
    let mut per_pc = shared.clone();
    per_pc.organisation.command_bus = CommandBus::PerPseudoChannel;
    per_pc.controller.activated_per_bank = 0;
    let t3 = HbmPreset::builtin("t3-table-8.1").unwrap();
    for p in [&shared, &per_pc, &t3] {
        for (pattern, gap, writes, depth) in [
            (Pattern::Stream, 1, 0.0, 32),
            (Pattern::Random, 1, 0.2, 32),
            (Pattern::Random, 3, 0.5, 32),
            (Pattern::Random, 1, 0.2, 2), // queues fill: windows are redone serially
            (Pattern::Random, 0, 0.2, 32), // saturating: serial throughout
        ] {
            let reqs = paced(p, pattern, 20_000, gap, writes);
            for window in [64, 1000] {
                let (a, b) = both(p, depth, &reqs, window);
                assert_eq!(a.requests, 20_000);
                assert_eq!(
                    a, b,
                    "{} {pattern:?} gap {gap} depth {depth} window {window}",
                    p.name
                );
            }
        }
    }
}
