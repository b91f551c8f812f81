//! `MemorySystem::run_parallel` (channels stepped on threads in speculative windows)
//! gives exactly `run`'s report, on paced traces (where windows succeed), traces whose
//! queues sometimes fill (windows thrown away and redone serially) and saturating streams
//! (serial throughout), with shared and per-pseudo-channel command buses.

use nmcp_emulator::hbm::config::CommandBus;
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{
    ControllerConfig, MemorySystem, Request, RunReport, Stepping, MIN_PARALLEL_WINDOW,
};
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
    let parallel = system(p, depth).run_parallel(reqs.iter().copied(), window, 2, |_| {});
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

#[test]
fn the_automatic_choice_gives_the_forced_serial_report() {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    let groups = system(&p, 32).parallel_groups();
    assert_eq!(
        groups, 8,
        "hbm2-2000: 8 channels, two pseudo-channels sharing each bus"
    );
    // What the choice does with threads, cores, channels and window lengths.
    assert_eq!(Stepping::choose(2, 2, groups, 8192), Stepping::Parallel(2));
    assert_eq!(Stepping::choose(0, 4, groups, 8192), Stepping::Parallel(4));
    assert_eq!(
        Stepping::choose(16, 64, groups, 8192),
        Stepping::Parallel(8)
    );
    assert!(matches!(
        Stepping::choose(1, 8, groups, 8192),
        Stepping::Serial(_)
    ));
    assert!(matches!(
        Stepping::choose(4, 1, groups, 8192),
        Stepping::Serial(_)
    ));
    assert!(matches!(
        Stepping::choose(4, 4, 1, 8192),
        Stepping::Serial(_)
    ));
    let short = MIN_PARALLEL_WINDOW - 1;
    assert!(matches!(
        Stepping::choose(2, 2, groups, short),
        Stepping::Serial(_)
    ));
    // Whatever it picks, the report is the forced serial run's, bit for bit.
    let reqs = paced(&p, Pattern::Random, 20_000, 1, 0.2);
    let serial = system(&p, 32).run(reqs.iter().copied(), |_| {});
    for (threads, cores, window) in [(2, 2, 8192), (0, 3, 2048), (2, 1, 8192), (2, 2, 64)] {
        let stepping = Stepping::choose(threads, cores, groups, window);
        let mut s = system(&p, 32);
        let auto = s.run_stepped(reqs.iter().copied(), stepping, window, |_| {});
        assert_eq!(serial, auto, "{stepping:?} window {window}");
        if let Stepping::Parallel(_) = stepping {
            assert!(
                s.parallel_windows().0 > 0,
                "{stepping:?}: no window ran in parallel"
            );
        }
    }
}
