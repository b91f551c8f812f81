//! The memory controller's unchecked issue path (release builds) issues exactly the
//! commands of the checked path (which re-derives every gate and bank state and panics on
//! a violation): whole workloads run both ways, every controller's command log and the
//! report compared, over presets, command interfaces, look-ahead, page policies, refresh
//! modes, request sizes and write mixes.

use nmcp_emulator::hbm::config::{CommandBus, PagePolicy, RefreshMode};
use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, LoggedCommand, MemorySystem, RunReport};
use nmcp_emulator::trace::{Pattern, Synthetic};

#[allow(clippy::too_many_arguments)]
fn run(
    preset: &HbmPreset,
    checked: bool,
    page: PagePolicy,
    refresh: RefreshMode,
    pattern: Pattern,
    size: u32,
    writes: f64,
    depth: usize,
) -> (RunReport, Vec<Vec<LoggedCommand>>) {
    let mapping = AddressMapping::named(STREAM_MAPPING, preset).unwrap();
    let mut cfg = ControllerConfig::with_depth(preset, depth);
    cfg.page_policy = page;
    cfg.refresh = refresh;
    cfg.checked_issue = checked;
    let mut sys = MemorySystem::new(preset, mapping, cfg);
    for i in 0..sys.controllers().len() {
        sys.controller_mut(i).unwrap().set_logging(true);
    }
    let reqs = Synthetic::new(pattern, 6_000, size, preset.capacity_bytes(), writes, 3);
    let r = sys.run(reqs, |_| {});
    let logs = sys.controllers().iter().map(|c| c.log().to_vec()).collect();
    (r, logs)
}

#[test]
fn unchecked_issue_equals_checked_issue() {
    let mut presets = Vec::new();
    for (bus, ab) in [
        (CommandBus::Shared, 1),
        (CommandBus::Shared, 0),
        (CommandBus::PerPseudoChannel, 0),
    ] {
        let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
        p.organisation.command_bus = bus;
        p.controller.activated_per_bank = ab;
        presets.push(p);
    }
    presets.push(HbmPreset::builtin("t3-table-8.1").unwrap());
    let mut runs = 0;
    for p in &presets {
        for page in [PagePolicy::Open, PagePolicy::Closed] {
            for refresh in [RefreshMode::PerBank, RefreshMode::AllBank] {
                for (pattern, size, writes, depth) in [
                    (Pattern::Stream, 64, 0.0, 32),
                    (Pattern::Random, 32, 0.2, 32),
                    (Pattern::Random, 64, 0.5, 8),
                ] {
                    let a = run(p, true, page, refresh, pattern, size, writes, depth);
                    let b = run(p, false, page, refresh, pattern, size, writes, depth);
                    assert!(a.1.iter().map(Vec::len).sum::<usize>() > 6_000);
                    assert_eq!(a.1, b.1, "{} {page:?} {refresh:?} {pattern:?}", p.name);
                    assert_eq!(a.0, b.0);
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 48);
}
