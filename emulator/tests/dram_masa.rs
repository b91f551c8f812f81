//! Subarray-level parallelism (MASA, Kim et al. ISCA 2012) in the DRAM timing state, gate
//! by gate in the style of `dram_timing.rs`: issue the first command(s), assert the
//! earliest cycle and gate of the next, that one cycle earlier is rejected naming that
//! gate, and that the earliest is accepted. `hbm2-2000` with 8 subarrays per bank (2048
//! rows each) and SA_SEL = 2 tCK unless a test changes a parameter to make its gate bind.

use nmcp_emulator::hbm::config::Subarrays;
use nmcp_emulator::hbm::timing::RowState;
use nmcp_emulator::hbm::{Command, Cycle, Gate, HbmPreset, PseudoChannel, TimingError};

/// Rows in subarrays 0, 1 (two rows) and 2.
const R0: u32 = 0;
const R1: u32 = 2048;
const R1B: u32 = 2049;
const R2: u32 = 4096;

fn masa(change: impl FnOnce(&mut HbmPreset)) -> HbmPreset {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    p.subarrays = Subarrays {
        per_bank: 8,
        sa_sel: 2,
        ..Subarrays::default()
    };
    change(&mut p);
    p.check().unwrap();
    p
}

fn sa_act(row: u32) -> Command {
    Command::AbSaAct { row }
}
fn sa_sel(row: u32) -> Command {
    Command::AbSaSel { row }
}
fn sa_pre(row: u32) -> Command {
    Command::AbSaPre { row }
}
fn sa_ref(row: u32) -> Command {
    Command::AbSaRef { row }
}
const RD: Command = Command::AbRd { col: 0 };
const WR: Command = Command::AbWr { col: 0 };

mod common;
use common::{gate_with, state};

fn gate(setup: &[(Command, Cycle)], next: Command, want: Cycle, g: Gate) {
    gate_with(&masa(|_| {}), setup, next, want, g)
}

fn t() -> nmcp_emulator::hbm::config::TimingCycles {
    *PseudoChannel::new(&masa(|_| {})).timing()
}

#[test]
fn a_second_subarray_of_an_open_bank_activates_after_tfaw_not_trc() {
    let t = t();
    // An all-bank ACT counts four toward tFAW, so the next one (any subarray) waits tFAW;
    // the same bank's tRC does not apply across subarrays.
    gate(&[(sa_act(R0), 100)], sa_act(R1), 100 + t.tfaw, Gate::Tfaw);
    // The conventional all-bank ACT still needs the whole bank precharged.
    let mut pc = state(&masa(|_| {}), &[(sa_act(R0), 100)]);
    assert!(matches!(
        pc.issue(&Command::AbAct { row: R1 }, 1000),
        Err(TimingError::WrongState { .. })
    ));
    // Nor may the subarray that is open be activated again.
    match pc.issue(&sa_act(R0 + 1), 1000) {
        Err(TimingError::WrongState { found, .. }) => assert_eq!(found, RowState::Open(R0)),
        other => panic!("ACT to an open subarray: {other:?}"),
    }
}

#[test]
fn trrd_spaces_acts_across_subarrays() {
    // An all-bank ACT counts four toward tFAW and presets keep tFAW >= tRRD, so tRRD binds
    // only when it equals tFAW (the gate named first wins a tie).
    let p = masa(|p| {
        p.timing.trrd_l = 20;
        p.timing.trrd_s = 19;
        p.timing.tfaw = 20;
    });
    gate_with(&p, &[(sa_act(R0), 100)], sa_act(R1), 120, Gate::TrrdL);
}

#[test]
fn the_same_subarray_pays_tras_and_trp_like_a_bank() {
    let t = t();
    gate(&[(sa_act(R1), 100)], sa_pre(R1B), 100 + t.tras, Gate::Tras);
    gate(
        &[(sa_act(R1), 100), (sa_pre(R1), 140)],
        sa_act(R1B),
        140 + t.trp,
        Gate::Trp,
    );
    // Early PRE: tRC binds the next ACT of the subarray.
    gate(
        &[(sa_act(R1), 100), (sa_pre(R1), 100 + t.tras)],
        sa_act(R1B),
        100 + t.trc,
        Gate::Trc,
    );
}

#[test]
fn sa_sel_delays_the_next_column_by_its_latency() {
    let t = t();
    let base = [
        (sa_act(R0), 0),
        (sa_act(R1), t.tfaw),
        (RD, t.tfaw + t.trcdrd),
    ];
    // The select one tCCD_L after the read: its latency, not tCCD_L, binds the next read.
    let sel_at = t.tfaw + t.trcdrd + t.tccd_l;
    let mut setup = base.to_vec();
    setup.push((sa_sel(R0), sel_at));
    gate(&setup, RD, sel_at + 2, Gate::SaSel);
    // Back to R1 for a write, the select again one tCCD_L after the read.
    setup.push((RD, sel_at + 2));
    setup.push((sa_sel(R1), sel_at + 2 + t.tccd_l));
    gate(&setup, WR, sel_at + 4 + t.tccd_l, Gate::SaSel);
}

#[test]
fn a_selected_subarray_still_waits_its_trcd() {
    let t = t();
    // R1 opens at tFAW; selecting R0 and back to R1 right away: R1's tRCD binds.
    gate(
        &[
            (sa_act(R0), 0),
            (sa_act(R1), t.tfaw),
            (sa_sel(R0), t.tfaw + 2),
            (sa_sel(R1), t.tfaw + 3),
        ],
        RD,
        t.tfaw + t.trcdrd,
        Gate::TrcdRd,
    );
    // A select needs the row open in its subarray.
    let mut pc = state(&masa(|_| {}), &[(sa_act(R0), 0)]);
    assert!(matches!(
        pc.issue(&sa_sel(R2), 100),
        Err(TimingError::WrongState {
            found: RowState::Closed,
            ..
        })
    ));
}

#[test]
fn write_recovery_and_tras_are_per_subarray() {
    let t = t();
    let wr_at = t.tfaw + t.trcdwr;
    let setup = [(sa_act(R0), 0), (sa_act(R1), t.tfaw), (WR, wr_at)];
    // The write went to R1 (designated): R0 closes at its own tRAS.
    gate(&setup, sa_pre(R0), t.tras, Gate::Tras);
    // R1 waits for its write's recovery (later than its tRAS).
    assert!(wr_at + t.wr_to_pre > t.tfaw + t.tras);
    gate(&setup, sa_pre(R1), wr_at + t.wr_to_pre, Gate::WriteRecovery);
    // A read: tRTP, after R1's tRAS.
    let rd_at = t.tfaw + t.tras;
    gate(
        &[(sa_act(R0), 0), (sa_act(R1), t.tfaw), (RD, rd_at)],
        sa_pre(R1),
        rd_at + t.trtp,
        Gate::Trtp,
    );
}

#[test]
fn closing_one_subarray_leaves_the_others_streaming() {
    let t = t();
    let mut pc = state(
        &masa(|_| {}),
        &[(sa_act(R0), 0), (sa_act(R1), t.tfaw), (sa_sel(R0), 40)],
    );
    pc.issue(&sa_pre(R1), 60).unwrap();
    // R0 is designated and open: columns go on, and the subarray state says so.
    let at = pc.earliest(&RD);
    pc.issue(&RD, at).unwrap();
    assert_eq!(pc.subarray_open_row(0, 0), Some(R0));
    assert_eq!(pc.subarray_open_row(0, 1), None);
    // Precharging the designated subarray leaves no row for columns.
    pc.issue(&sa_pre(R0), 200).unwrap();
    assert!(matches!(
        pc.issue(&RD, 300),
        Err(TimingError::WrongState { .. })
    ));
}

#[test]
fn refresh_needs_every_subarray_closed_and_waits_trp_then_trfc() {
    let t = t();
    let open = [(sa_act(R0), 0), (sa_act(R1), t.tfaw)];
    let mut pc = state(&masa(|_| {}), &open);
    assert!(matches!(
        pc.issue(&Command::Ref, 1000),
        Err(TimingError::WrongState { .. })
    ));
    // PREA closes every subarray, after the latest tRAS.
    gate(&open, Command::PreAll, t.tfaw + t.tras, Gate::Tras);
    let mut closed = open.to_vec();
    closed.push((Command::PreAll, t.tfaw + t.tras));
    gate(&closed, Command::Ref, t.tfaw + t.tras + t.trp, Gate::Trp);
    // Subarray PREs: REF waits tRP after the last of them.
    let pres = [
        (sa_act(R0), 0),
        (sa_act(R1), t.tfaw),
        (sa_pre(R0), t.tras),
        (sa_pre(R1), 80),
    ];
    gate(&pres, Command::Ref, 80 + t.trp, Gate::Trp);
    // After the REF, an ACT in any subarray waits tRFC.
    let mut refreshed = pres.to_vec();
    refreshed.push((Command::Ref, 80 + t.trp));
    gate(&refreshed, sa_act(R2), 80 + t.trp + t.trfc, Gate::Trfc);
}

/// Refresh-access parallelism (SARP, Chang et al. HPCA 2014): AB-SA-REF refreshes one
/// subarray of every bank. Only that subarray waits tRFC; another subarray's row stays
/// open and streams, and another may be activated at the usual activate spacing (the
/// refresh counts as an all-bank activate toward tFAW). Refreshes never overlap.
#[test]
fn a_subarray_refresh_holds_only_its_subarray_for_trfc() {
    let t = t();
    let p = masa(|p| p.subarrays.refresh_parallel = true);
    let g = |setup: &[(Command, Cycle)], next: Command, want: Cycle, gate: Gate| {
        gate_with(&p, setup, next, want, gate)
    };
    // With R1 open, subarray 0 (closed) may be refreshed once the ACT's tFAW has passed.
    g(&[(sa_act(R1), 0)], sa_ref(R0), t.tfaw, Gate::Tfaw);
    let refreshed = [(sa_act(R1), 0), (sa_ref(R0), 100)];
    // The refreshed subarray: its ACT waits tRFC.
    g(&refreshed, sa_act(R0), 100 + t.trfc, Gate::Trfc);
    // Another subarray: only the activate spacing.
    g(&refreshed, sa_act(R2), 100 + t.tfaw, Gate::Tfaw);
    // The open subarray streams during tRFC.
    let mut pc = state(&p, &refreshed);
    assert!(pc.earliest(&RD) <= 101);
    pc.issue(&RD, 101).unwrap();
    pc.issue(&WR, 101 + t.rd_to_wr.max(t.tccd_l)).unwrap();
    // No second refresh during tRFC, in any subarray, nor an all-bank one.
    g(&refreshed, sa_ref(R2), 100 + t.trfc, Gate::Trfc);
    let mut closed = refreshed.to_vec();
    closed.push((sa_pre(R1), 200));
    g(&closed, Command::Ref, 100 + t.trfc, Gate::Trfc);
    // The subarray must be closed in every bank, and waits tRP after its PRE.
    let mut pc = state(&p, &[(sa_act(R0), 0)]);
    match pc.issue(&sa_ref(R0), 1000) {
        Err(TimingError::WrongState { found, .. }) => assert_eq!(found, RowState::Open(R0)),
        other => panic!("AB-SA-REF to an open subarray: {other:?}"),
    }
    g(
        &[(sa_act(R0), 0), (sa_pre(R0), 60)],
        sa_ref(R0),
        60 + t.trp,
        Gate::Trp,
    );
    // A preset without refresh-access parallelism refuses it, and one subarray cannot
    // have it.
    let mut plain = state(&masa(|_| {}), &[]);
    assert!(matches!(
        plain.issue(&sa_ref(R0), 10),
        Err(TimingError::NoSubarrays { .. })
    ));
    let mut one = HbmPreset::builtin("hbm2-2000").unwrap();
    one.subarrays.refresh_parallel = true;
    let e = one.check().unwrap_err();
    assert!(e.to_string().contains("subarrays.refresh_parallel"), "{e}");
}

#[test]
fn one_subarray_presets_refuse_subarray_commands_and_serialise_as_before() {
    let p = HbmPreset::builtin("hbm2-2000").unwrap();
    let mut pc = PseudoChannel::new(&p);
    assert_eq!(pc.subarrays_per_bank(), 1);
    let e = pc.issue(&sa_act(R0), 10).unwrap_err();
    assert!(matches!(e, TimingError::NoSubarrays { .. }), "{e}");
    assert!(e.to_string().contains("subarrays.per_bank"), "{e}");
    // The preset serialises without a subarray section (the file format omits it).
    let text = toml::to_string(&p).unwrap();
    assert!(!text.contains("subarrays"), "{text}");
    // And a MASA preset names its knob.
    let m = HbmPreset::builtin("lamb-ch6-masa").unwrap();
    assert_eq!(m.subarrays.per_bank, 8);
    let mut bad = m.clone();
    bad.subarrays.per_bank = 3;
    let e = bad.check().unwrap_err();
    assert!(e.to_string().contains("subarrays.per_bank"), "{e}");
}

#[test]
fn lamb_ch6_masa_is_lamb_ch6_but_for_its_subarrays() {
    let mut a = HbmPreset::builtin("lamb-ch6-masa").unwrap();
    let b = HbmPreset::builtin("lamb-ch6").unwrap();
    assert_eq!(a.timing, b.timing);
    assert_eq!(a.organisation, b.organisation);
    a.subarrays = Subarrays::default();
    a.name = b.name.clone();
    a.description = b.description.clone();
    assert_eq!(a, b);
}
