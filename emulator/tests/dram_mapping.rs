//! Address mapping: decode and encode are inverses (property-tested), and the
//! page-interleaved mapping lays out arrays allocated at 64 KiB boundaries identically in
//! every bank (dissertation 6.2.2).

use std::collections::HashSet;

use nmcp_emulator::hbm::mapping::{NMC_PAGE_BYTES, PAGE_INTERLEAVED_MAPPING, STREAM_MAPPING};
use nmcp_emulator::hbm::{AddressMapping, DramAddr, HbmPreset};
use proptest::prelude::*;

fn mappings() -> Vec<(HbmPreset, AddressMapping)> {
    let mut v = Vec::new();
    for preset in ["hbm2-2000", "t3-table-8.1"] {
        let p = HbmPreset::builtin(preset).unwrap();
        for name in [
            STREAM_MAPPING,
            PAGE_INTERLEAVED_MAPPING,
            "ro-ba-bg-co-st-pc-ch",
        ] {
            v.push((p.clone(), AddressMapping::named(name, &p).unwrap()));
        }
    }
    v
}

proptest! {
    #[test]
    fn encode_inverts_decode(addr in any::<u64>(), which in 0usize..6) {
        let (_, m) = &mappings()[which];
        let addr = addr & ((1u64 << m.address_bits()) - 1) & !(m.column_bytes() - 1);
        let d = m.decode(addr);
        prop_assert_eq!(m.encode(&d).unwrap(), addr);
    }

    #[test]
    fn decode_inverts_encode(
        raw in any::<(u32, u32, u32, u32, u32, u32, u32)>(),
        which in 0usize..6,
    ) {
        let (p, m) = &mappings()[which];
        let o = &p.organisation;
        let d = DramAddr {
            stack: raw.0 % o.stacks,
            channel: raw.1 % o.channels_per_stack,
            pc: raw.2 % o.pseudo_channels_per_channel,
            bank_group: raw.3 % o.bank_groups,
            bank: raw.4 % o.banks_per_group,
            row: raw.5 % o.rows,
            col: raw.6 % o.columns_per_row,
        };
        prop_assert_eq!(m.decode(m.encode(&d).unwrap()), d);
    }

    #[test]
    fn arrays_at_page_boundaries_share_bank_and_column_element_for_element(
        a_page in 0u64..16384,
        b_page in 0u64..16384,
        offsets in proptest::collection::vec(0u64..(8 * NMC_PAGE_BYTES), 64),
    ) {
        // Pages 0..16384 are the first GiB of hbm2-2000 (the high column bits sit at the
        // top of the address, see AddressMapping::page_interleaved).
        let p = HbmPreset::builtin("hbm2-2000").unwrap();
        let m = AddressMapping::named(PAGE_INTERLEAVED_MAPPING, &p).unwrap();
        let a = a_page * NMC_PAGE_BYTES;
        let b = b_page * NMC_PAGE_BYTES;
        for off in offsets {
            if a_page * NMC_PAGE_BYTES + off >= 1 << 30 || b_page * NMC_PAGE_BYTES + off >= 1 << 30 {
                continue;
            }
            let (x, y) = (m.decode(a + off), m.decode(b + off));
            prop_assert_eq!(
                (x.stack, x.channel, x.pc, x.bank_group, x.bank, x.col),
                (y.stack, y.channel, y.pc, y.bank_group, y.bank, y.col)
            );
        }
    }
}

#[test]
fn one_64k_page_covers_every_bank_with_one_row_and_a_run_of_columns() {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    let m = AddressMapping::named(PAGE_INTERLEAVED_MAPPING, &p).unwrap();
    assert_eq!(m.text(), "co:2-ro-ba-bg-st-pc-ch-co:3");
    let page = 5 * NMC_PAGE_BYTES;
    let mut banks = HashSet::new();
    let mut rows = HashSet::new();
    let mut cols = HashSet::new();
    for off in (0..NMC_PAGE_BYTES).step_by(32) {
        let d = m.decode(page + off);
        banks.insert((d.stack, d.channel, d.pc, d.bank_group, d.bank));
        rows.insert(d.row);
        cols.insert(d.col);
    }
    assert_eq!(banks.len(), 256, "16 pseudo-channels x 16 banks");
    assert_eq!(rows.len(), 1);
    assert_eq!(cols, (0..8).collect::<HashSet<u32>>());
}

#[test]
fn page_interleaving_needs_a_page_that_fits_the_bank_bits() {
    let p = HbmPreset::builtin("t3-table-8.1").unwrap();
    assert!(AddressMapping::page_interleaved(&p, NMC_PAGE_BYTES).is_ok());
    let e = AddressMapping::page_interleaved(&p, 8 * 1024).unwrap_err();
    assert!(e.to_string().contains("8192-byte page"), "{e}");
}
