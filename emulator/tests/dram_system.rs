//! Whole-device runs: streaming reaches the pin bandwidth, random reads report plausible
//! figures, and runs are deterministic.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem, RunReport};
use nmcp_emulator::trace::{Pattern, Synthetic};

fn run(preset: &HbmPreset, pattern: Pattern, n: u64, refresh: RefreshMode) -> RunReport {
    let mapping = AddressMapping::named(STREAM_MAPPING, preset).unwrap();
    let mut cfg = ControllerConfig::from_preset(preset);
    cfg.refresh = refresh;
    let mut sys = MemorySystem::new(preset, mapping, cfg);
    let reqs = Synthetic::new(pattern, n, 64, preset.capacity_bytes(), 0.0, 1);
    sys.run(reqs, |_| {})
}

#[test]
fn streaming_reads_reach_97_percent_of_pin_bandwidth() {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    let r = run(&p, Pattern::Stream, 200_000, RefreshMode::PerBank);
    eprintln!("{r:#?}");
    assert_eq!(r.reads, 200_000);
    assert!(r.percent_of_peak >= 97.0, "{}", r.percent_of_peak);
}
