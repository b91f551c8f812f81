//! Whole-device runs: streaming reaches the pin bandwidth, refresh costs what it should,
//! random reads report plausible figures, mixed traffic drains, runs are deterministic.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem, RunReport};
use nmcp_emulator::trace::{Pattern, Synthetic};

fn run(
    preset: &HbmPreset,
    pattern: Pattern,
    n: u64,
    write_ratio: f64,
    refresh: RefreshMode,
) -> RunReport {
    let mapping = AddressMapping::named(STREAM_MAPPING, preset).unwrap();
    let mut cfg = ControllerConfig::from_preset(preset);
    cfg.refresh = refresh;
    let mut sys = MemorySystem::new(preset, mapping, cfg);
    let reqs = Synthetic::new(pattern, n, 64, preset.capacity_bytes(), write_ratio, 1);
    sys.run(reqs, |_| {})
}

fn hbm2() -> HbmPreset {
    HbmPreset::builtin("hbm2-2000").unwrap()
}

#[test]
fn streaming_reads_reach_97_percent_of_pin_bandwidth() {
    for preset in [hbm2(), HbmPreset::builtin("t3-table-8.1").unwrap()] {
        let r = run(&preset, Pattern::Stream, 200_000, 0.0, RefreshMode::PerBank);
        assert_eq!(r.reads, 200_000);
        assert_eq!(r.bytes, 200_000 * 64);
        // Peak is the pin bandwidth: pseudo-channels x 64 bit x 2 Gb/s.
        assert_eq!(r.peak_gbps, f64::from(preset.pseudo_channels()) * 16.0);
        assert!(r.percent_of_peak >= 97.0, "{}: {r:?}", preset.name);
        assert!(
            r.commands.get("REFpb").copied().unwrap_or(0) > 0,
            "refresh must run"
        );
    }
}

#[test]
fn all_bank_refresh_costs_about_trfc_over_trefi() {
    let p = hbm2();
    let r = run(&p, Pattern::Stream, 200_000, 0.0, RefreshMode::AllBank);
    let refs = r.commands["REF"];
    // One REF per tREFI per pseudo-channel.
    let expected = r.cycles / 3900 * 16;
    assert!(
        refs.abs_diff(expected) <= 16,
        "{refs} REFs, expected about {expected}"
    );
    // tRFC / tREFI = 9 % of the time is lost, plus the precharges before each REF.
    let loss = 100.0 - r.percent_of_peak;
    assert!(
        (8.0..12.0).contains(&loss),
        "all-bank refresh loss {loss} %"
    );
}

#[test]
fn random_reads_are_mostly_row_conflicts_at_plausible_bandwidth() {
    let r = run(&hbm2(), Pattern::Random, 50_000, 0.0, RefreshMode::PerBank);
    let entries = r.row_hits + r.row_misses + r.row_conflicts;
    assert_eq!(entries, 50_000, "every 64-byte request stays in one row");
    assert!(r.row_conflicts as f64 > 0.9 * entries as f64, "{r:?}");
    // Each request needs its own ACT: tRRD_S = 4 tCK per ACT caps one pseudo-channel at
    // 64 B / 4 ns = its pin rate, bank conflicts in the queue keep it well below.
    assert!(
        (40.0..95.0).contains(&r.percent_of_peak),
        "{}",
        r.percent_of_peak
    );
    // Every miss or conflict costs an ACT; a few more are re-opens after a per-bank
    // refresh closed a row before its request was served.
    let acts = r.commands["ACT"];
    let needed = r.row_misses + r.row_conflicts;
    assert!(
        acts >= needed && acts <= needed + needed / 100,
        "{acts} ACTs for {needed}"
    );
}

#[test]
fn mixed_traffic_drains_completely() {
    let r = run(&hbm2(), Pattern::Random, 20_000, 0.3, RefreshMode::PerBank);
    assert_eq!(r.requests, 20_000);
    assert!((5_000..7_000).contains(&r.writes), "{}", r.writes);
    assert_eq!(r.commands["WR"], 2 * r.writes);
    assert_eq!(r.commands["RD"], 2 * r.reads);
}

#[test]
fn runs_are_deterministic_for_a_seed() {
    let a = run(&hbm2(), Pattern::Random, 10_000, 0.2, RefreshMode::PerBank);
    let b = run(&hbm2(), Pattern::Random, 10_000, 0.2, RefreshMode::PerBank);
    assert_eq!(a, b);
}

#[test]
fn mixed_classes_and_updates_are_counted_by_kind_and_class() {
    use nmcp_emulator::memctrl::{Request, RoundRobin, Source, TrafficClass};
    use nmcp_isa::nmc::DType;

    let p = hbm2();
    let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
    let mut sys = MemorySystem::new(&p, mapping, ControllerConfig::from_preset(&p));
    sys.set_arbiter(|_| Box::new(RoundRobin::new()));
    let src = Source {
        gpu: 0,
        workgroup: 3,
        wavefront: 1,
    };
    // Per 64-byte slot i: compute reads everything; every 4th slot gets a compute
    // update (an output-tile store), every 3rd a communication read, every 5th a
    // communication update of 32 bytes, every 7th a host write of 32 bytes.
    let n = 6_000u64;
    let mut reqs = Vec::new();
    for i in 0..n {
        let a = i * 64;
        reqs.push(Request::read(a, 64, 0));
        if i % 4 == 0 {
            reqs.push(Request::update(a + (1 << 24), 64, DType::F16, 0).with_source(src));
        }
        if i % 3 == 0 {
            reqs.push(Request::read(a + (1 << 25), 64, 0).with_class(TrafficClass::Communication));
        }
        if i % 5 == 0 {
            reqs.push(
                Request::update(a + (1 << 26), 32, DType::F32, 0)
                    .with_class(TrafficClass::Communication),
            );
        }
        if i % 7 == 0 {
            reqs.push(Request::write(a + (1 << 27), 32, 0).with_class(TrafficClass::Host));
        }
    }
    let count = |m: u64| n.div_ceil(m);
    let r = sys.run(reqs.iter().copied(), |_| {});
    let b = &r.bytes_by_class;
    assert_eq!(b["compute"]["read"], n * 64);
    assert_eq!(b["compute"]["update"], count(4) * 64);
    assert_eq!(b["compute"]["write"], 0);
    assert_eq!(b["communication"]["read"], count(3) * 64);
    assert_eq!(b["communication"]["update"], count(5) * 32);
    assert_eq!(b["host"]["write"], count(7) * 32);
    assert_eq!(b["host"]["read"] + b["host"]["update"], 0);
    let q = &r.requests_by_class;
    assert_eq!(q["compute"]["read"], n);
    assert_eq!(q["compute"]["update"], count(4));
    assert_eq!(q["communication"]["read"], count(3));
    assert_eq!(q["communication"]["update"], count(5));
    assert_eq!(q["host"]["write"], count(7));
    // The old totals still add up.
    assert_eq!(r.reads, n + count(3));
    assert_eq!(r.writes, count(7));
    assert_eq!(r.updates, count(4) + count(5));
    assert_eq!(r.requests, reqs.len() as u64);
    let total: u64 = b.values().flat_map(|k| k.values()).sum();
    assert_eq!(r.bytes, total);
    // 64-byte updates are two UPDs, 32-byte ones one.
    assert_eq!(r.commands["UPD"], 2 * count(4) + count(5));
    assert_eq!(r.commands["WR"], count(7));
    assert_eq!(r.arbiter, "round-robin");
    // Per controller, the same counters sum to the report's.
    let per_pc: u64 = sys
        .controllers()
        .iter()
        .map(|c| c.stats().bytes_by.class_total(TrafficClass::Communication))
        .sum();
    assert_eq!(per_pc, count(3) * 64 + count(5) * 32);
}
