//! The HBM preset validator against random presets: a built-in preset with one to three
//! fields set to arbitrary values (zero, powers of two, the type's largest, anything) is
//! either refused with a message naming a field, or valid; a valid one whose timings are
//! small enough to simulate quickly runs a short random trace to completion.

use nmcp_emulator::hbm::mapping::STREAM_MAPPING;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memctrl::{ControllerConfig, MemorySystem};
use nmcp_emulator::trace::{Pattern, Synthetic};
use proptest::prelude::*;

/// Sets field `which` of `p` to `v`.
fn set(p: &mut HbmPreset, which: usize, v: u32) {
    let o = &mut p.organisation;
    let t = &mut p.timing;
    let c = &mut p.controller;
    let field: &mut u32 = match which {
        0 => &mut o.stacks,
        1 => &mut o.channels_per_stack,
        2 => &mut o.pseudo_channels_per_channel,
        3 => &mut o.bank_groups,
        4 => &mut o.banks_per_group,
        5 => &mut o.rows,
        6 => &mut o.columns_per_row,
        7 => &mut o.bytes_per_column,
        8 => &mut o.bus_width_bits,
        9 => &mut o.channel_density_gbit,
        10 => &mut t.cl,
        11 => &mut t.trcdrd,
        12 => &mut t.trp,
        13 => &mut t.tras,
        14 => &mut t.trc,
        15 => &mut t.tccd_s,
        16 => &mut t.tccd_l,
        17 => &mut t.tfaw,
        18 => &mut t.trefi,
        19 => &mut t.trfc,
        20 => &mut t.trfcpb,
        21 => &mut t.bl,
        22 => &mut t.act_bus_cycles,
        23 => &mut c.queue_depth,
        _ => &mut p.subarrays.per_bank,
    };
    *field = v;
}

fn value() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..=8,
        (0u32..32).prop_map(|k| 1u32 << k),
        Just(u32::MAX),
        any::<u32>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_presets_validate_and_run_or_are_refused_with_a_field(
        base in prop_oneof![Just("hbm2-2000"), Just("t3-table-8.1"), Just("lamb-ch6-masa")],
        edits in proptest::collection::vec((0usize..25, value()), 1..=3),
    ) {
        let mut p = HbmPreset::builtin(base).unwrap();
        for &(which, v) in &edits {
            set(&mut p, which, v);
        }
        match p.check() {
            Err(e) => {
                let msg = e.to_string();
                prop_assert!(msg.contains('.') && msg.len() > 10, "unclear refusal: {msg}");
            }
            Ok(()) => {
                // Derived sizes the model uses do not wrap.
                prop_assert!(p.capacity_bytes() > 0);
                prop_assert!(p.pseudo_channels() > 0);
                let small = p.timing.trefi <= 1 << 14 && p.timing.trc <= 1 << 10;
                if let (true, Ok(mapping)) = (small, AddressMapping::named(STREAM_MAPPING, &p)) {
                    let cfg = ControllerConfig::from_preset(&p);
                    let mut sys = MemorySystem::new(&p, mapping, cfg);
                    let reqs = Synthetic::new(Pattern::Random, 64, 64, p.capacity_bytes(), 0.5, 1);
                    let r = sys.run(reqs, |_| {});
                    prop_assert_eq!(r.reads + r.writes, 64);
                }
            }
        }
    }
}
