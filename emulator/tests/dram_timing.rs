//! Gate tests in the style of Ramulator 2's device-under-test harness: issue the first
//! command(s), assert the earliest cycle of the next equals the formula of its gate, that
//! issuing one cycle earlier is rejected naming that gate, and that issuing at the
//! earliest succeeds. Numbers are `hbm2-2000`'s unless a test changes one parameter to
//! make its gate the binding one.

use nmcp_emulator::hbm::config::Timing;
use nmcp_emulator::hbm::timing::RowState;
use nmcp_emulator::hbm::{BankId, Command, Cycle, Gate, HbmPreset, PseudoChannel, TimingError};

const B0: BankId = BankId::new(0, 0);
const B1: BankId = BankId::new(0, 1);
const G1: BankId = BankId::new(1, 0);
const G2: BankId = BankId::new(2, 0);
const G3: BankId = BankId::new(3, 0);

fn preset(change: impl FnOnce(&mut Timing)) -> HbmPreset {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    change(&mut p.timing);
    p.check().unwrap();
    p
}

fn t() -> Timing {
    preset(|_| {}).timing
}

fn act(bank: BankId, row: u32) -> Command {
    Command::Act { bank, row }
}
fn rd(bank: BankId) -> Command {
    Command::Rd {
        bank,
        row: 1,
        col: 0,
    }
}
fn wr(bank: BankId) -> Command {
    Command::Wr {
        bank,
        row: 1,
        col: 0,
    }
}
fn pre(bank: BankId) -> Command {
    Command::Pre { bank }
}

mod common;
use common::gate_with;

fn gate(setup: &[(Command, Cycle)], next: Command, want: Cycle, g: Gate) {
    gate_with(&preset(|_| {}), setup, next, want, g)
}

#[test]
fn act_to_act_same_bank_is_trc() {
    // tRC made longer than tRAS + tRP so that it, not tRP, binds.
    let p = preset(|t| t.trc = 52);
    gate_with(
        &p,
        &[(act(B0, 1), 100), (pre(B0), 134)],
        act(B0, 2),
        100 + 52,
        Gate::Trc,
    );
}

#[test]
fn pre_to_act_same_bank_is_trp() {
    let t = t();
    let pre_at = 100 + 40;
    gate(
        &[(act(B0, 1), 100), (pre(B0), pre_at)],
        act(B0, 2),
        pre_at + u64::from(t.trp),
        Gate::Trp,
    );
}

#[test]
fn act_to_act_other_group_is_trrd_s_and_same_group_trrd_l() {
    let t = t();
    gate(
        &[(act(B0, 1), 100)],
        act(G1, 1),
        100 + u64::from(t.trrd_s),
        Gate::TrrdS,
    );
    let p = preset(|t| t.trrd_l = 6);
    gate_with(&p, &[(act(B0, 1), 100)], act(B1, 1), 106, Gate::TrrdL);
}

#[test]
fn fifth_act_waits_for_tfaw() {
    // With hbm2-2000's tFAW 15 < 4 x tRRD_S 16 the window never binds; widen it.
    let p = preset(|t| t.tfaw = 20);
    let setup = [
        (act(B0, 1), 100),
        (act(G1, 1), 104),
        (act(G2, 1), 108),
        (act(G3, 1), 112),
    ];
    gate_with(&p, &setup, act(B1, 1), 120, Gate::Tfaw);
}

#[test]
fn act_to_column_is_trcd() {
    let t = t();
    gate(
        &[(act(B0, 1), 100)],
        rd(B0),
        100 + u64::from(t.trcdrd),
        Gate::TrcdRd,
    );
    gate(
        &[(act(B0, 1), 100)],
        wr(B0),
        100 + u64::from(t.trcdwr),
        Gate::TrcdWr,
    );
}

#[test]
fn act_to_pre_is_tras() {
    gate(
        &[(act(B0, 1), 100)],
        pre(B0),
        100 + u64::from(t().tras),
        Gate::Tras,
    );
}

#[test]
fn rd_to_pre_is_trtp() {
    let at = 130;
    gate(
        &[(act(B0, 1), 100), (rd(B0), at)],
        pre(B0),
        at + u64::from(t().trtp),
        Gate::Trtp,
    );
}

#[test]
fn wr_to_pre_is_cwl_bl_twr() {
    let t = t();
    let at = 112;
    let want = at + u64::from(t.cwl + t.bl + t.twr);
    gate(
        &[(act(B0, 1), 100), (wr(B0), at)],
        pre(B0),
        want,
        Gate::WriteRecovery,
    );
}

#[test]
fn column_to_column_is_tccd_s_or_l() {
    let t = t();
    let opened = [(act(B0, 1), 100), (act(G1, 1), 104), (act(B1, 1), 108)];
    let mut s = opened.to_vec();
    s.push((rd(B0), 122));
    gate(&s, rd(G1), 122 + u64::from(t.tccd_s), Gate::TccdS);
    gate(&s, rd(B1), 122 + u64::from(t.tccd_l), Gate::TccdL);
    gate(&s, rd(B0), 122 + u64::from(t.tccd_l), Gate::TccdL);
    let mut s = opened.to_vec();
    s.push((wr(B0), 122));
    gate(&s, wr(G1), 122 + u64::from(t.tccd_s), Gate::TccdS);
    gate(&s, wr(B1), 122 + u64::from(t.tccd_l), Gate::TccdL);
}

#[test]
fn wr_to_rd_is_cwl_bl_twtr() {
    let t = t();
    let s = [
        (act(B0, 1), 100),
        (act(G1, 1), 104),
        (act(B1, 1), 108),
        (wr(B0), 122),
    ];
    gate(
        &s,
        rd(G1),
        122 + u64::from(t.cwl + t.bl + t.twtr_s),
        Gate::WtrS,
    );
    gate(
        &s,
        rd(B1),
        122 + u64::from(t.cwl + t.bl + t.twtr_l),
        Gate::WtrL,
    );
}

#[test]
fn rd_to_wr_turnaround() {
    let t = t();
    let s = [(act(B0, 1), 100), (act(G1, 1), 104), (rd(B0), 122)];
    // Write data (WR + CWL) starts rtw_turnaround cycles after read data (RD + CL + BL) ends.
    let want = 122 + u64::from(t.cl + t.bl + t.rtw_turnaround - t.cwl);
    gate(&s, wr(G1), want, Gate::ReadToWrite);
    gate(&s, wr(B0), want, Gate::ReadToWrite);
}

#[test]
fn refresh_needs_precharged_banks_and_blocks_for_trfc() {
    let t = t();
    let mut pc = PseudoChannel::new(&preset(|_| {}));
    pc.issue(&act(B0, 1), 100).unwrap();
    match pc.issue(&Command::Ref, 500) {
        Err(TimingError::WrongState { bank, found, .. }) => {
            assert_eq!((bank, found), (B0, RowState::Open(1)))
        }
        other => panic!("REF with an open bank: {other:?}"),
    }
    gate(
        &[(act(B0, 1), 100), (pre(B0), 140)],
        Command::Ref,
        140 + u64::from(t.trp),
        Gate::Trp,
    );
    let r = 200;
    gate(
        &[(Command::Ref, r)],
        act(G2, 1),
        r + u64::from(t.trfc),
        Gate::Trfc,
    );
    gate(
        &[(Command::Ref, r)],
        Command::Ref,
        r + u64::from(t.trfc),
        Gate::Trfc,
    );
}

#[test]
fn per_bank_refresh_blocks_only_its_bank() {
    let t = t();
    let r = 100;
    let refpb = (Command::RefPb { bank: B0 }, r);
    gate(&[refpb], act(B0, 1), r + u64::from(t.trfcpb), Gate::TrfcPb);
    gate(&[refpb], act(B1, 1), r + 1, Gate::RowBus);
}

#[test]
fn all_bank_act_counts_as_four_acts_in_tfaw() {
    let p = preset(|t| t.tfaw = 60);
    // One earlier ACT inside the window delays the all-bank ACT to its tFAW expiry.
    let s = [(act(B0, 1), 100), (pre(B0), 134)];
    gate_with(&p, &s, Command::AbAct { row: 3 }, 160, Gate::Tfaw);
    // After an all-bank ACT, even one ACT must wait a whole window.
    let s = [(Command::AbAct { row: 3 }, 100), (Command::PreAll, 134)];
    gate_with(&p, &s, act(B0, 1), 160, Gate::Tfaw);
}

#[test]
fn all_bank_column_occupies_every_bank_for_tccd_l() {
    let t = t();
    let s = [
        (Command::AbAct { row: 1 }, 100),
        (Command::AbRd { col: 0 }, 114),
    ];
    gate(
        &s,
        Command::AbRd { col: 1 },
        114 + u64::from(t.tccd_l),
        Gate::AllBankColumn,
    );
    gate(&s, rd(G3), 114 + u64::from(t.tccd_l), Gate::AllBankColumn);
    let s = [
        (Command::AbAct { row: 1 }, 100),
        (Command::AbWr { col: 0 }, 114),
    ];
    gate(
        &s,
        Command::AbWr { col: 1 },
        114 + u64::from(t.tccd_l),
        Gate::AllBankColumn,
    );
}

#[test]
fn op_and_store_delays_next_column_in_its_group_by_tccdwl() {
    let t = t();
    let upd = |bank| Command::Update {
        bank,
        row: 1,
        col: 0,
    };
    let s = [
        (act(B0, 1), 100),
        (act(B1, 1), 104),
        (act(G1, 1), 108),
        (upd(B0), 122),
    ];
    gate(&s, upd(B1), 122 + u64::from(t.tccdwl), Gate::Tccdwl);
    gate(&s, wr(B0), 122 + u64::from(t.tccdwl), Gate::Tccdwl);
    // Other bank groups only see the data-bus spacing.
    gate(&s, upd(G1), 122 + u64::from(t.tccd_s), Gate::TccdS);
}

#[test]
fn commands_in_the_wrong_bank_state_are_rejected() {
    let mut pc = PseudoChannel::new(&preset(|_| {}));
    assert!(matches!(
        pc.issue(&rd(B0), 10),
        Err(TimingError::WrongState { .. })
    ));
    assert!(matches!(
        pc.issue(&pre(B0), 10),
        Err(TimingError::WrongState { .. })
    ));
    pc.issue(&act(B0, 1), 10).unwrap();
    assert!(matches!(
        pc.issue(&act(B0, 2), 100),
        Err(TimingError::WrongState { .. })
    ));
    let e = pc
        .issue(
            &Command::Rd {
                bank: B0,
                row: 2,
                col: 0,
            },
            100,
        )
        .unwrap_err();
    assert!(e.to_string().contains("open at row 1"), "{e}");
    assert!(matches!(
        pc.issue(&Command::AbRd { col: 0 }, 100),
        Err(TimingError::WrongState { .. })
    ));
    let bad = BankId::new(9, 0);
    assert!(matches!(
        pc.issue(&act(bad, 1), 100),
        Err(TimingError::NoSuchBank { .. })
    ));
}

// ---- The shared command interface of a channel (JEDEC HBM2 pseudo-channel mode) ----

use nmcp_emulator::hbm::config::CommandBus;
use nmcp_emulator::hbm::SharedChannel;

fn jedec() -> HbmPreset {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    assert_eq!(p.organisation.command_bus, CommandBus::Shared);
    assert_eq!(p.timing.act_bus_cycles, 2);
    p
}

/// Issues `setup` as (pseudo-channel, command, cycle) on one channel, then checks the
/// earliest cycle and gate of `next` on pseudo-channel `pc`, that one cycle earlier is
/// rejected naming that gate and that the earliest cycle is accepted.
fn channel_gate(
    p: &HbmPreset,
    setup: &[(usize, Command, Cycle)],
    (pc, next): (usize, Command),
    want: Cycle,
    gate: Gate,
) {
    let mut ch = SharedChannel::new(p);
    for (i, c, at) in setup {
        ch.issue(*i, c, *at)
            .unwrap_or_else(|e| panic!("setup pc{i} {c} at {at}: {e}"));
    }
    assert_eq!(
        ch.pseudo_channel(pc).earliest_with_gate(&next),
        (want, gate),
        "earliest of pc{pc} {next}"
    );
    if want > 0 {
        let mut early = ch.clone();
        match early.issue(pc, &next, want - 1) {
            Err(TimingError::TooEarly { gate: g, .. }) => assert_eq!(g, gate),
            other => panic!("pc{pc} {next} at {}: {other:?}", want - 1),
        }
    }
    ch.issue(pc, &next, want)
        .unwrap_or_else(|e| panic!("pc{pc} {next} at {want}: {e}"));
}

#[test]
fn an_act_holds_the_shared_row_bus_two_cycles() {
    let p = jedec();
    // ACT on one pseudo-channel: the other's ACT and PRE wait two cycles.
    channel_gate(
        &p,
        &[(0, act(B0, 1), 10)],
        (1, act(B0, 1)),
        12,
        Gate::RowBus,
    );
    channel_gate(
        &p,
        &[(1, act(B1, 1), 0), (0, act(B0, 1), 40)],
        (1, pre(B1)),
        42,
        Gate::RowBus,
    );
    // And so does the same pseudo-channel's next row command (PRE of another bank).
    channel_gate(
        &p,
        &[(0, act(B1, 1), 0), (0, act(G1, 1), 40)],
        (0, pre(B1)),
        42,
        Gate::RowBus,
    );
    // A PRE holds the row bus one cycle.
    channel_gate(
        &p,
        &[(1, act(B1, 1), 0), (1, pre(B1), 40)],
        (0, act(B0, 1)),
        41,
        Gate::RowBus,
    );
}

#[test]
fn column_commands_of_two_pseudo_channels_share_the_column_bus() {
    let p = jedec();
    let open = [(0, act(B0, 1), 0), (1, act(B0, 1), 2)];
    // RD on pc0 at 20: pc1's RD waits one cycle for the column bus (its own gates allow 16).
    let mut setup = open.to_vec();
    setup.push((0, rd(B0), 20));
    channel_gate(&p, &setup, (1, rd(B0)), 21, Gate::ColumnBus);
    // A WR on the other pseudo-channel too.
    channel_gate(&p, &setup, (1, wr(B0)), 21, Gate::ColumnBus);
}

#[test]
fn a_row_and_a_column_command_may_share_a_cycle() {
    let p = jedec();
    let mut ch = SharedChannel::new(&p);
    ch.issue(0, &act(B0, 1), 0).unwrap();
    ch.issue(0, &rd(B0), 20).unwrap();
    // pc1's ACT in the same cycle as pc0's RD: the row bus is free.
    assert_eq!(ch.earliest(1, &act(B0, 1)), 2);
    ch.issue(1, &act(B0, 1), 20).unwrap();
    // pc0's ACT to another bank in the same cycle as pc1's RD.
    ch.issue(1, &rd(B0), 34).unwrap();
    assert_eq!(ch.earliest(0, &act(G1, 1)), 22);
    ch.issue(0, &act(G1, 1), 34).unwrap();
}

#[test]
fn per_pseudo_channel_buses_are_one_setting_away() {
    let mut p = jedec();
    p.organisation.command_bus = CommandBus::PerPseudoChannel;
    p.timing.act_bus_cycles = 1;
    p.check().unwrap();
    // The memory system only shares buses for `shared`; with per-pseudo-channel buses the
    // two pseudo-channels are independent timing objects: pc1 may ACT in pc0's ACT cycle.
    let mut pc0 = PseudoChannel::new(&p);
    let pc1 = PseudoChannel::new(&p);
    pc0.issue(&act(B0, 1), 10).unwrap();
    assert_eq!(pc1.earliest(&act(B0, 1)), 0);
    // With one ACT cycle, the same pseudo-channel's next row command may follow at once.
    assert_eq!(pc0.earliest_with_gate(&pre(B1)), (11, Gate::RowBus));
    assert_eq!(pc0.earliest(&act(G1, 1)), 10 + u64::from(p.timing.trrd_s));
}

#[test]
fn act_bus_cycles_is_checked() {
    let mut p = jedec();
    p.timing.act_bus_cycles = 0;
    let e = p.check().unwrap_err().to_string();
    assert!(e.contains("timing.act_bus_cycles"), "{e}");
    p.timing.act_bus_cycles = p.timing.trrd_s + 1;
    assert!(p.check().is_err());
}
