//! The per-pseudo-channel NMC engine: functional results against a plain reference and
//! cycle counts derived by hand from the preset's timing.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};
use nmcp_emulator::memory::DeviceMemory;
use nmcp_emulator::nmc::system::{NmcBlock, NmcSystemConfig};
use nmcp_firmware::platform::NmcError;
use nmcp_isa::asm::parse_macro;
use nmcp_isa::nmc::{ChannelRange, MacroCommand};

/// Linear NMC layout: 32 B offset, then every bank-selecting field, then column, then
/// row (MSB first in the string).
const LINEAR: &str = "ro-co-ba-bg-st-pc-ch";

/// The NMC block of one node and the node's device memory, driven directly (no
/// firmware): every call happens at cycle 0 and queues behind earlier work.
struct Rig {
    nmc: NmcBlock,
    mem: DeviceMemory,
}

impl Rig {
    fn submit(&mut self, cmd: &MacroCommand) -> Result<u64, NmcError> {
        self.nmc.submit(0, cmd, &mut self.mem)
    }

    fn write_scalar(&mut self, reg: u8, v: f32) {
        let ch = ChannelRange { first: 0, count: 1 };
        self.nmc.write_scalar(0, ch, reg, v.to_bits()).unwrap();
    }

    fn engine_now(&self) -> u64 {
        self.nmc.engines()[0].now()
    }

    fn log_pc0(&mut self) {
        let c = self.nmc.memory_system_mut().controller_mut(0).unwrap();
        c.set_logging(true);
    }

    fn read_f32(&self, a: u64, out: &mut [f32]) {
        self.mem.read_f32(a, out).unwrap();
    }
}

fn system(refresh: RefreshMode) -> Rig {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    p.refresh.mode = refresh;
    let m = AddressMapping::parse(LINEAR, &p).unwrap();
    let mem = DeviceMemory::with_capacity(p.capacity_bytes());
    let nmc = NmcBlock::new(
        &p,
        m,
        NmcSystemConfig {
            parallel: false,
            ..NmcSystemConfig::default()
        },
    );
    Rig { nmc, mem }
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

fn fill(sys: &mut Rig) -> Vec<(u64, f32)> {
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
                sys.mem.write_f32(a, &vals).unwrap();
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
        let m = sys.nmc.mapping();
        let d = m.decode(addr(pc, bank, row, col));
        assert_eq!(m.pseudo_channel_index(&d) as u64, pc);
        assert_eq!(m.bank_index(&d) as u64, bank);
        assert_eq!((u64::from(d.row), u64::from(d.col)), (row, col));
    }
}

#[test]
fn all_bank_add_over_one_mib_is_bit_exact_and_takes_the_derived_cycles() {
    let mut sys = system(RefreshMode::Off);
    let before = fill(&mut sys);
    let s0 = 1.75f32;
    sys.write_scalar(0, s0);
    let scalar_done = sys.engine_now();
    let cmd = add_macro();
    let done = sys.submit(&cmd).unwrap();
    let end = sys.engine_now();
    assert_eq!(done, end);

    // Bit-exact against plain f32 addition.
    for (a, v) in &before {
        let mut got = [0f32];
        sys.read_f32(*a, &mut got);
        assert_eq!(got[0].to_bits(), (v + s0).to_bits(), "at {a:#x}");
    }
    // Other pseudo-channels untouched.
    let mut other = [1f32];
    sys.read_f32(addr(1, 0, 0, 0), &mut other);
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
    let st = sys.nmc.engines()[0].stats();
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
    let (t_off, t_on) = (off.engine_now(), on.engine_now());
    let refs = on.nmc.engines()[0].stats().refreshes;
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
    assert_eq!(sys.submit(&big), Err(NmcError::Unsupported));
    let e = sys.nmc.take_error().unwrap().to_string();
    assert!(e.contains("TS entries"), "{e}");
    let far = parse_macro(
        ".macro channels=15+2 mode=all col_start=0 col_count=1 chunk=1\n\
         .phase row=0\n  mov.f32 ts0, mem\n.end\n",
    )
    .unwrap();
    assert_eq!(sys.submit(&far), Err(NmcError::OutOfRange));
}

/// Pseudo-channel 0's command log (the controller's: the engine issues through it).
fn kinds(sys: &Rig) -> Vec<(u64, String)> {
    sys.nmc.memory_system().controllers()[0]
        .log()
        .iter()
        .map(|l| (l.at, format!("{:?}", l.cmd)))
        .collect()
}

#[test]
fn all_bank_command_sequence_for_two_phases() {
    let mut sys = system(RefreshMode::Off);
    sys.log_pc0();
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
    sys.log_pc0();
    // bank group 1, bank 2 = flat bank 6.
    let a = addr(0, 6, 3, 0);
    let vals: Vec<f32> = (0..32).map(|i| i as f32 * 0.5 - 3.0).collect();
    sys.mem.write_f32(a, &vals[..8]).unwrap();
    for c in 1..4 {
        sys.mem
            .write_f32(addr(0, 6, 3, c), &vals[8 * c as usize..8 * c as usize + 8])
            .unwrap();
    }
    sys.write_scalar(0, 2.5);
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
        sys.read_f32(addr(0, 6, 3, c), &mut got);
        for (i, g) in got.iter().enumerate() {
            assert_eq!(*g, vals[8 * c as usize + i] + 2.5);
        }
    }
    let mut other = [1f32; 8];
    sys.read_f32(addr(0, 5, 3, 0), &mut other);
    assert_eq!(other, [0.0; 8]);
}

/// Ordinary reads and an all-bank macro-command share pseudo-channel 0 in one run: reads
/// stream, the engine takes the channel at the command's start (queued reads wait), runs
/// it, hands the channel back because reads wait, and the reads finish. Replaying the
/// channel's whole command log through a fresh timing state with every gate checked
/// proves that no command of either user broke a gate set by the other (refresh too: the
/// preset refreshes per bank, the engine all banks).
#[test]
fn ordinary_reads_and_an_all_bank_command_share_a_channel() {
    use nmcp_emulator::hbm::PseudoChannel;
    use nmcp_emulator::memctrl::{MemCompletion, Request};

    let preset = HbmPreset::builtin("hbm2-2000").unwrap();
    let mut sys = system(preset.refresh.mode);
    sys.log_pc0();
    // 240 reads of pseudo-channel 0, rows 200.. (away from the command's rows), one every
    // 8 cycles from cycle 0 — before, during and after the macro-command.
    // A producer offers each read when it arrives and waits while the queue is full.
    let reads = 240u64;
    let start = 400;
    let mut done: Vec<MemCompletion> = Vec::new();
    let mut end = None;
    let mut before = 0;
    let mut i = 0;
    while i < reads {
        let arrival = 8 * i;
        if end.is_none() && arrival >= start {
            sys.nmc.advance_until(start, &mut done);
            before = done.len();
            end = Some(sys.nmc.submit(start, &add_macro(), &mut sys.mem).unwrap());
        }
        sys.nmc.advance_until(arrival, &mut done);
        let a = addr(0, i % 16, 200 + (i / 64), (i / 16) % 4);
        let now = sys.nmc.memory_system().now().max(arrival);
        match sys
            .nmc
            .memory_system_mut()
            .submit(&Request::read(a, 32, now))
        {
            Ok(_) => i += 1,
            Err(_) => {
                let w = sys.nmc.next_wake().expect("a full queue drains");
                sys.nmc.advance_until(w.max(now + 1), &mut done);
            }
        }
    }
    // Refresh keeps a memory system busy forever: step until the reads are done.
    while (done.len() as u64) < reads {
        let w = sys.nmc.next_wake().expect("reads outstanding");
        sys.nmc.advance_until(w, &mut done);
    }
    let end = end.unwrap();
    assert!(
        before > 0 && before < reads as usize,
        "{before} reads before the command"
    );
    assert_eq!(done.len() as u64, reads, "every read completed");
    assert!(
        done.iter().any(|c| c.finish > end),
        "reads resumed after the command"
    );
    let e = &sys.nmc.engines()[0];
    assert!(!e.owns_channel(), "the engine handed the channel back");
    assert_eq!(e.stats().mode_switches, 2, "into NMC mode and back");

    // The log interleaves: reads, then the engine's commands, then reads again.
    let log = sys.nmc.memory_system().controllers()[0].log().to_vec();
    let first_nmc = log
        .iter()
        .position(|l| format!("{:?}", l.cmd).starts_with("Ab"))
        .unwrap();
    let last_nmc = log
        .iter()
        .rposition(|l| format!("{:?}", l.cmd).starts_with("Ab"))
        .unwrap();
    let is_rd =
        |l: &nmcp_emulator::memctrl::LoggedCommand| format!("{:?}", l.cmd).starts_with("Rd");
    assert!(log[..first_nmc].iter().any(is_rd));
    assert!(log[last_nmc..].iter().any(is_rd));
    assert!(
        !log[first_nmc..last_nmc].iter().any(is_rd),
        "no read inside NMC mode"
    );
    assert!(
        log[first_nmc].at >= start + 96,
        "the mode switch precedes the first ACT"
    );

    // Every command, of either user, is legal at its cycle under the checked timing state.
    let mut pc = PseudoChannel::new(&preset);
    for l in &log {
        pc.issue(&l.cmd, l.at)
            .unwrap_or_else(|err| panic!("{:?} at {}: {err}", l.cmd, l.at));
    }
}
