//! Unit tests of the board check: report comparison, console extraction, budgets, ELF sizes.

use super::budgets::*;
use super::report::*;
use super::*;

const REPORT: &str = "nmcp-board machine=virt\n\
    op_a instructions=100 cycles=100 cd=8\n\
    stack peak_bytes=4000\n";

#[test]
fn cp_decisions_must_equal_virts() {
    let virt = "nmcp-board machine=virt\n\
        cp_decision_32q_cold instructions=9 cd=8 dispatch_hash=0x1\n\
        cp_decision_32q instructions=9 cd=8 dispatch_hash=0x2\n";
    let same = "nmcp-board machine=sifive_e\n\
        cp_decision_32q_cold instructions=7 cd=8 dispatch_hash=0x1\n\
        cp_decision_32q instructions=5 cd=8 dispatch_hash=0x2\n";
    let mut f = Vec::new();
    compare_cp_decisions(virt, same, &mut f);
    assert!(f.is_empty(), "{f:?}");
    let other = same.replace("dispatch_hash=0x2", "dispatch_hash=0x3");
    compare_cp_decisions(virt, &other, &mut f);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("decides differently"), "{f:?}");
    let mut f = Vec::new();
    compare_cp_decisions(virt, "nmcp-board machine=sifive_e\n", &mut f);
    assert_eq!(f.len(), 2, "both required lines missing: {f:?}");
}

#[test]
fn functional_difference_fails_measurement_difference_notes() {
    let mut f = Vec::new();
    compare(REPORT, &REPORT.replace("=100", "=120"), false, &mut f);
    assert!(f.is_empty(), "{f:?}");
    compare(REPORT, &REPORT.replace("=100", "=120"), true, &mut f);
    assert_eq!(f.len(), 2, "{f:?}");
    f.clear();
    compare(REPORT, &REPORT.replace("cd=8", "cd=4"), false, &mut f);
    assert_eq!(f.len(), 1);
    assert!(f[0].contains("line 2"), "{f:?}");
}

#[test]
fn a_captured_console_yields_the_report_between_header_and_exit() {
    let console = "garbage\r\n> nmcp-board machine=sifive_e_revb core_clock_hz=16000000\r\n\
                   op_a instructions=100 cycles=130 cd=8\r\nexit status=0\r\nafter\r\n";
    assert_eq!(
        extract_report(console).as_deref(),
        Some(
            "nmcp-board machine=sifive_e_revb core_clock_hz=16000000\n\
             op_a instructions=100 cycles=130 cd=8\nexit status=0\n"
        )
    );
    assert_eq!(extract_report("no report here\n"), None);
}

/// The committed Rev B report, as a serial console shows it (`\r\n`, noise before
/// and after), passes `board check`; with one decision changed it fails.
#[test]
fn a_console_capture_of_the_committed_revb_report_checks() {
    let root = workspace_root(None);
    let path = root.join("firmware/board/expected/sifive_e_revb.txt");
    let committed = std::fs::read_to_string(path).unwrap();
    let console = format!("boot noise\r\n{}after\r\n", committed.replace('\n', "\r\n"));
    let report = extract_report(&console).unwrap();
    assert_eq!(report, committed);
    let m = Machine::SifiveERevb;
    assert!(check_report(&root, m, &report, true, false, None).is_ok());
    let bad = report.replacen(" cd=8 ", " cd=4 ", 1);
    assert!(check_report(&root, m, &bad, false, false, None).is_err());
}

#[test]
fn cycle_budgets_are_checked_like_instruction_budgets() {
    let b = Budgets::parse("[virt.cycles]\nop_a = 120\n", "virt").unwrap();
    let mut f = vec![];
    check_budgets(&b, REPORT, &Sizes::default(), &mut f);
    assert!(f.is_empty(), "{f:?}");
    let slow = REPORT.replace("cycles=100", "cycles=121");
    check_budgets(&b, &slow, &Sizes::default(), &mut f);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].contains("op_a cycles"), "{f:?}");
}

#[test]
fn budgets_fail_when_exceeded() {
    let b = Budgets::parse(
        "[virt.instructions]\nop_a = 99\n[virt.bytes]\nstack = 4000\nram = 10\n",
        "virt",
    )
    .unwrap();
    let mut f = Vec::new();
    check_budgets(&b, REPORT, &Sizes { flash: 0, ram: 11 }, &mut f);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(f.iter().any(|m| m.contains("op_a instructions = 100")));
    assert!(f.iter().any(|m| m.contains("ram bytes = 11")));
    assert!(Budgets::parse("[virt.bytes]\nheap = 1\n", "virt").is_err());
    // `ram_total`: static RAM plus the deeper of the run's and the start-up's stack.
    let b = Budgets::parse("[virt.bytes]\nram_total = 1500\n", "virt").unwrap();
    let report = "stack peak_bytes=10 high_water_bytes=900 startup_bytes=1200\n";
    let mut f = Vec::new();
    check_budgets(&b, report, &Sizes { flash: 0, ram: 300 }, &mut f);
    assert!(f.is_empty(), "{f:?}");
    check_budgets(&b, report, &Sizes { flash: 0, ram: 301 }, &mut f);
    assert!(
        f.iter().any(|m| m.contains("ram_total bytes = 1501")),
        "{f:?}"
    );
    let mut f = Vec::new();
    check_budgets(&b, REPORT, &Sizes { flash: 0, ram: 1 }, &mut f);
    assert_eq!(f.len(), 1, "no high-water in the report: {f:?}");
    assert!(Budgets::parse("[other]\n", "virt").is_err());
}

/// A minimal ELF32 with `.text` (PROGBITS, AX), `.data` (PROGBITS, WA), `.bss`
/// (NOBITS, WA), `.stack` (NOBITS, WA) and a non-alloc `.comment`.
fn synthetic_elf() -> Vec<u8> {
    let names = b"\0.text\0.data\0.bss\0.stack\0.comment\0.shstrtab\0";
    let name_at = |n: &str| {
        names
            .windows(n.len())
            .position(|w| w == n.as_bytes())
            .unwrap() as u32
    };
    let mut b = vec![0u8; 52];
    b[..6].copy_from_slice(b"\x7fELF\x01\x01");
    let strtab_off = b.len() as u32;
    b.extend_from_slice(names);
    let shoff = b.len() as u32;
    // (name, type, flags, size)
    let sections: [(u32, u32, u32, u32); 7] = [
        (0, 0, 0, 0),
        (name_at(".text"), SHT_PROGBITS, SHF_ALLOC | 0x4, 1000),
        (name_at(".data"), SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 16),
        (name_at(".bss"), SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 300),
        (name_at(".stack"), SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 9999),
        (name_at(".comment"), SHT_PROGBITS, 0, 77),
        (name_at(".shstrtab"), 3, 0, names.len() as u32),
    ];
    for (i, (name, ty, flags, size)) in sections.into_iter().enumerate() {
        let mut h = [0u8; 40];
        h[0..4].copy_from_slice(&name.to_le_bytes());
        h[4..8].copy_from_slice(&ty.to_le_bytes());
        h[8..12].copy_from_slice(&flags.to_le_bytes());
        let off = if i == 6 { strtab_off } else { 0 };
        h[0x10..0x14].copy_from_slice(&off.to_le_bytes());
        h[0x14..0x18].copy_from_slice(&size.to_le_bytes());
        b.extend_from_slice(&h);
    }
    b[0x20..0x24].copy_from_slice(&shoff.to_le_bytes());
    b[0x2E..0x30].copy_from_slice(&40u16.to_le_bytes());
    b[0x30..0x32].copy_from_slice(&7u16.to_le_bytes());
    b[0x32..0x34].copy_from_slice(&6u16.to_le_bytes());
    b
}

#[test]
fn elf_reader_sums_flash_and_ram_sections() {
    let sizes = section_sizes(&synthetic_elf()).unwrap();
    // Flash: .text + .data's image; RAM: .data + .bss, not the .stack placeholder.
    assert_eq!(
        sizes,
        Sizes {
            flash: 1016,
            ram: 316
        }
    );
    let truncated = &synthetic_elf()[..100];
    assert!(section_sizes(truncated).unwrap_err().contains("truncated"));
}

#[test]
fn elf_reader_rejects_non_elf() {
    assert!(section_sizes(b"not an elf").unwrap_err().contains("magic"));
    assert!(section_sizes(b"\x7fELF\x02\x01")
        .unwrap_err()
        .contains("32-bit"));
}
