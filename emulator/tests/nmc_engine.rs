//! The per-pseudo-channel NMC engine: functional results against a plain reference and
//! cycle counts derived by hand from the preset's timing.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::nmc::system::{NmcSystem, NmcSystemConfig};
use nmcp_firmware::platform::NmcController;
use nmcp_isa::asm::parse_macro;

/// Linear NMC layout: 32 B offset, then every bank-selecting field, then column, then
/// row (MSB first in the string).
const LINEAR: &str = "ro-co-ba-bg-st-pc-ch";

fn system(refresh: RefreshMode) -> NmcSystem {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    p.refresh.mode = refresh;
    let m = AddressMapping::parse(LINEAR, &p).unwrap();
    NmcSystem::new(
        p,
        m,
        NmcSystemConfig {
            parallel: false,
            ..NmcSystemConfig::default()
        },
    )
}

/// Address of (pc, flat bank, row, col) in the linear layout of hbm2-2000 (16 PCs x 16
/// banks; flat bank = bank group * 4 + bank).
fn addr(pc: u64, bank: u64, row: u64, col: u64) -> u64 {
    // LSB first: 5 offset bits, ch (3), pc (1), bg (2), ba (2), col (5), row.
    let (ch, pcb) = (pc / 2, pc % 2);
    let (bg, ba) = (bank / 4, bank % 4);
    let stripe = ch | (pcb << 3) | (bg << 4) | (ba << 6);
    ((row * 32 + col) << 13) | (stripe << 5)
}

/// One MiB in pseudo-channel 0: 64 rows x 32 columns x 16 banks x 32 B.
const ROWS: u64 = 64;

fn add_macro() -> nmcp_isa::nmc::MacroCommand {
    parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=2048 chunk=8\n\
         .phase row=0\n  add.f32 mem, mem, s0\n.end\n",
    )
    .unwrap()
}

fn fill(sys: &mut NmcSystem) -> Vec<(u64, f32)> {
    let mut out = Vec::new();
    let mut x = 0x9e37_79b9u32;
    for row in 0..ROWS {
        for col in 0..32 {
            for bank in 0..16 {
                let a = addr(0, bank, row, col);
                let mut vals = [0f32; 8];
                for v in &mut vals {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    *v = (x as f32 / u32::MAX as f32 - 0.5) * 1000.0;
                }
                sys.memory_mut().write_f32(a, &vals);
                for (i, v) in vals.iter().enumerate() {
                    out.push((a + 4 * i as u64, *v));
                }
            }
        }
    }
    out
}

#[test]
fn layout_helper_matches_the_mapping() {
    let sys = system(RefreshMode::Off);
    for (pc, bank, row, col) in [(0, 0, 0, 0), (3, 5, 7, 9), (0, 6, 3, 1), (15, 15, 63, 31)] {
        let d = sys.mapping().decode(addr(pc, bank, row, col));
        assert_eq!(sys.mapping().pseudo_channel_index(&d) as u64, pc);
        assert_eq!(sys.mapping().bank_index(&d) as u64, bank);
        assert_eq!((u64::from(d.row), u64::from(d.col)), (row, col));
    }
}

#[test]
fn all_bank_add_over_one_mib_is_bit_exact_and_takes_the_derived_cycles() {
    let mut sys = system(RefreshMode::Off);
    let before = fill(&mut sys);
    let s0 = 1.75f32;
    sys.write_scalar(
        nmcp_isa::nmc::ChannelRange { first: 0, count: 1 },
        0,
        s0.to_bits(),
    )
    .unwrap();
    let scalar_done = sys.engines()[0].now();
    let cmd = add_macro();
    sys.submit(&cmd).unwrap();
    let end = sys.engines()[0].now();

    // Bit-exact against plain f32 addition.
    for (a, v) in &before {
        let mut got = [0f32];
        sys.memory().read_f32(*a, &mut got);
        assert_eq!(got[0].to_bits(), (v + s0).to_bits(), "at {a:#x}");
    }
    // Other pseudo-channels untouched.
    let mut other = [1f32];
    sys.memory().read_f32(addr(1, 0, 0, 0), &mut other);
    assert_eq!(other[0], 0.0);

    // Derivation (hbm2-2000, refresh off), per row of the 64:
    //   AB-ACT -> first AB-RD         tRCDRD                        = 14
    //   per column: AB-RD -> AB-WR    tCCD_L (all-bank column spacing;
    //               an all-bank RD feeds the ALUs, not the data bus,
    //               so there is no read-to-write bus turnaround)    = 4
    //               AB-WR -> AB-RD    CWL + BL + tWTR_L             = 15 (every bank group)
    //   31 column periods of 19, then the last RD -> WR             = 31 * 19 + 4 = 593
    //   last AB-WR -> PREA            CWL + BL + tWR                = 23
    //   PREA -> next AB-ACT           tRP                           = 14
    // so a row costs 14 + 593 + 23 + 14 = 644 and the command ends at the last PREA.
    // Before it, the scalar write (tCCD_L) and the switch to all-bank mode (96 cycles).
    let row = 14 + (31 * 19 + 4) + 23 + 14;
    assert_eq!(row, 644);
    let expected = scalar_done + 96 + (ROWS - 1) * row + (row - 14);
    assert_eq!(
        end, expected,
        "engine finished at {end}, derivation says {expected}"
    );
    let st = sys.engines()[0].stats();
    assert_eq!(st.activations, ROWS);
    assert_eq!(st.column_commands, 2 * 2048);
}

#[test]
fn refresh_interrupts_the_stream_every_trefi() {
    let mut off = system(RefreshMode::Off);
    let mut on = system(RefreshMode::AllBank);
    let cmd = add_macro();
    off.submit(&cmd).unwrap();
    on.submit(&cmd).unwrap();
    let (t_off, t_on) = (off.engines()[0].now(), on.engines()[0].now());
    let refs = on.engines()[0].stats().refreshes;
    // One REF per tREFI of elapsed time.
    assert_eq!(refs, t_on / 3900, "{refs} refreshes in {t_on} cycles");
    // Each costs at least tRFC and at most tRFC plus a row re-open and a write recovery.
    let extra = t_on - t_off;
    assert!(
        extra >= refs * 350 && extra <= refs * (350 + 23 + 14 + 14 + 19),
        "{extra}"
    );
}

#[test]
fn ts_overflow_and_bad_channels_are_errors() {
    let mut sys = system(RefreshMode::Off);
    let big = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=64\n\
         .phase row=0\n  mov.f32 ts1, mem\n.end\n",
    )
    .unwrap();
    assert_eq!(
        sys.submit(&big),
        Err(nmcp_firmware::platform::NmcError::Unsupported)
    );
    let e = sys.take_error().unwrap().to_string();
    assert!(e.contains("TS entries"), "{e}");
    let far = parse_macro(
        ".macro channels=15+2 mode=all col_start=0 col_count=1 chunk=1\n\
         .phase row=0\n  mov.f32 ts0, mem\n.end\n",
    )
    .unwrap();
    assert_eq!(
        sys.submit(&far),
        Err(nmcp_firmware::platform::NmcError::OutOfRange)
    );
}

fn kinds(sys: &NmcSystem) -> Vec<(u64, String)> {
    sys.engines()[0]
        .log()
        .iter()
        .map(|(t, c)| (*t, format!("{c:?}")))
        .collect()
}

#[test]
fn all_bank_command_sequence_for_two_phases() {
    let mut sys = system(RefreshMode::Off);
    sys.engines_mut()[0].set_logging(true);
    let cmd = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=4 chunk=2\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row=8\n  add.f32 ts0, ts0, mem\n  mov.f32 mem, ts0\n.end\n",
    )
    .unwrap();
    sys.submit(&cmd).unwrap();
    let got: Vec<String> = kinds(&sys).into_iter().map(|(_, c)| c).collect();
    let mut want = Vec::new();
    for chunk in [0u32, 2] {
        want.push("AbAct { row: 0 }".to_string());
        for c in chunk..chunk + 2 {
            want.push(format!("AbRd {{ col: {c} }}"));
        }
        want.push("PreAll".to_string());
        want.push("AbAct { row: 8 }".to_string());
        for c in chunk..chunk + 2 {
            want.push(format!("AbRd {{ col: {c} }}"));
            want.push(format!("AbWr {{ col: {c} }}"));
        }
        want.push("PreAll".to_string());
    }
    assert_eq!(got, want);
    // Cycles of the first row visit, from hbm2-2000 (t0 = after the 96-cycle mode switch):
    // AB-ACT t0; AB-RD +tRCDRD = 14; AB-RD +tCCD_L = 18; PREA at max(ACT + tRAS = 34,
    // RD + tRTP = 23) = 34; AB-ACT at PREA + tRP = 48 (= tRC too).
    let t: Vec<u64> = kinds(&sys).into_iter().map(|(t, _)| t).collect();
    let t0 = t[0];
    assert_eq!(t0, 96);
    assert_eq!(&t[1..5], &[t0 + 14, t0 + 18, t0 + 34, t0 + 48]);
}

#[test]
fn single_bank_read_modify_write_is_an_op_and_store_update() {
    let mut sys = system(RefreshMode::Off);
    sys.engines_mut()[0].set_logging(true);
    // bank group 1, bank 2 = flat bank 6.
    let a = addr(0, 6, 3, 0);
    let vals: Vec<f32> = (0..32).map(|i| i as f32 * 0.5 - 3.0).collect();
    sys.memory_mut().write_f32(a, &vals[..8]);
    for c in 1..4 {
        sys.memory_mut()
            .write_f32(addr(0, 6, 3, c), &vals[8 * c as usize..8 * c as usize + 8]);
    }
    sys.write_scalar(
        nmcp_isa::nmc::ChannelRange { first: 0, count: 1 },
        0,
        2.5f32.to_bits(),
    )
    .unwrap();
    let cmd = parse_macro(
        ".macro channels=0+1 mode=single bank_group=1 bank=2 col_start=0 col_count=4 chunk=4\n\
         .phase row=3\n  add.f32 mem, mem, s0\n.end\n",
    )
    .unwrap();
    sys.submit(&cmd).unwrap();
    let log = kinds(&sys);
    let names: Vec<&str> = log
        .iter()
        .map(|(_, c)| c.split([' ', '{']).next().unwrap_or(""))
        .collect();
    assert_eq!(
        names,
        ["Act", "Update", "Update", "Update", "Update", "PreAll"]
    );
    // ACT at t0; the first UPDATE waits for both the read and the write gate after ACT
    // (max(tRCDRD, tRCDWR) = 14); each later UPDATE to the same bank group waits tCCDWL
    // (8 on hbm2-2000 = 2 x tCCD_L); the PRE waits CWL + BL + tWR = 23 after the last.
    let t: Vec<u64> = log.iter().map(|(t, _)| *t).collect();
    let t0 = t[0];
    assert_eq!(&t[1..], &[t0 + 14, t0 + 22, t0 + 30, t0 + 38, t0 + 38 + 23]);
    // The data: every element of the four columns gained 2.5; other banks untouched.
    for c in 0..4u64 {
        let mut got = [0f32; 8];
        sys.memory().read_f32(addr(0, 6, 3, c), &mut got);
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, vals[8 * c as usize + i] + 2.5);
        }
    }
    let mut other = [1f32; 8];
    sys.memory().read_f32(addr(0, 5, 3, 0), &mut other);
    assert_eq!(other, [0.0; 8]);
}
