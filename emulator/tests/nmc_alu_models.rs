//! The ALU issue models and row-visit policies of the NMC engine (issue 10): numerics do
//! not depend on them, the staged policy's commands meet every DRAM gate (checked by
//! hand-derived earliest cycles in the Ramulator style and by replaying random programs'
//! command logs through the checked timing state), and no setup beats the physical bound.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::{HbmPreset, PseudoChannel};
use nmcp_emulator::lamb::experiment::{self, EngineSetup};
use nmcp_emulator::lamb::reference::TensorState;
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::engine::{AluModel, RowPolicy};
use nmcp_firmware::nmc::Stage1Program;
use nmcp_isa::asm::parse_macro;
use proptest::prelude::*;

mod common;
use common::{log_of, name, program, replay, rig, BLOCKS};

fn setups() -> Vec<EngineSetup> {
    let pipelined = |ops_per_tck, row_policy| EngineSetup {
        alu_model: AluModel::Pipelined { ops_per_tck },
        row_policy,
    };
    vec![
        EngineSetup::COLUMN_TRIGGERED,
        EngineSetup {
            alu_model: AluModel::ColumnTriggered,
            row_policy: RowPolicy::Staged,
        },
        pipelined(1, RowPolicy::ProgramOrder),
        pipelined(1, RowPolicy::Staged),
        pipelined(3, RowPolicy::Staged),
    ]
}

/// w, m, v after `steps` functional LAMB steps under `setup`, the worst error against the
/// FP32 reference (in term scales), the last global norm and the step cycles.
fn lamb_under(setup: EngineSetup, steps: usize) -> (Vec<TensorState>, f64, f32, u64) {
    lamb_with(setup, Stage1Program::FourSlot, steps)
}

/// [`lamb_under`] with the firmware's stage-1 program `program`.
fn lamb_with(
    setup: EngineSetup,
    program: Stage1Program,
    steps: usize,
) -> (Vec<TensorState>, f64, f32, u64) {
    let preset = HbmPreset::builtin("hbm2-2000").unwrap();
    common::lamb_functional(&preset, setup, program, steps)
}

/// Every model and policy computes the same bits (the issue model is timing only), and the
/// documented error bound against the FP32 reference holds for each.
#[test]
fn outputs_are_identical_across_models_and_policies() {
    let (base, base_err, base_norm, base_cycles) = lamb_under(EngineSetup::COLUMN_TRIGGERED, 3);
    assert!(base_err <= 1e-5, "column-triggered: {base_err}");
    for setup in setups().into_iter().skip(1) {
        let (state, err, norm, cycles) = lamb_under(setup, 3);
        let name = setup.name();
        assert!(err <= 1e-5, "{name}: error {err} of the term scale");
        assert_eq!(norm.to_bits(), base_norm.to_bits(), "{name}: global norm");
        common::assert_same_bits(&name, &state, &base);
        // The model does change the timing: the pipelined ALU frees the column stream.
        if matches!(setup.alu_model, AluModel::Pipelined { .. }) {
            assert!(cycles < base_cycles, "{name}: {cycles} vs {base_cycles}");
        } else {
            // The staged policy does not apply to column-triggered instructions.
            assert_eq!(cycles, base_cycles, "{name}");
        }
    }
}

/// Engine queues one command deep refuse most submissions; the sequencer then waits for a
/// completion (only a completion after a refusal runs its pipeline again, the others
/// return at once) and issues the same commands later: the same bits and global norm as
/// with the default queues, and the step still finishes.
#[test]
fn a_full_engine_queue_delays_commands_but_not_their_results() {
    let preset = HbmPreset::builtin("hbm2-2000").unwrap();
    let ts = nmcp_emulator::nmc::system::NmcSystemConfig::default().ts_entries;
    for setup in [EngineSetup::COLUMN_TRIGGERED, setups()[3]] {
        let run = |depth| {
            common::lamb_functional_queued(&preset, setup, Stage1Program::FourSlot, 2, ts, depth)
        };
        let (base, err, norm, _) = run(16);
        for depth in [1, 2] {
            let (state, e, n, _) = run(depth);
            let name = format!("{} at depth {depth}", setup.name());
            assert_eq!(e.to_bits(), err.to_bits(), "{name}");
            assert_eq!(n.to_bits(), norm.to_bits(), "{name}: global norm");
            common::assert_same_bits(&name, &state, &base);
        }
    }
}

/// The three-slot stage-1 program computes the same bits as the default four-slot one under
/// every engine setup (only the chunk, so the row visits and the timing, differ).
#[test]
fn outputs_are_identical_across_stage1_programs() {
    let (base, _, base_norm, _) = lamb_under(EngineSetup::COLUMN_TRIGGERED, 2);
    for setup in setups() {
        let (state, err, norm, _) = lamb_with(setup, Stage1Program::ThreeSlot, 2);
        let name = setup.name();
        assert!(
            err <= 1e-5,
            "three-slot {name}: error {err} of the term scale"
        );
        assert_eq!(
            norm.to_bits(),
            base_norm.to_bits(),
            "three-slot {name}: norm"
        );
        common::assert_same_bits(&format!("three-slot {name}"), &state, &base);
    }
}

/// No engine setup, at any TS size, beats the bank-parallelism bound (8x on `lamb-ch6`),
/// and none beats its own program bound; the time split adds up to the step.
#[test]
fn speedup_never_exceeds_the_physical_bound() {
    let model = ModelPreset::custom("small", 1, 256, 1024);
    let preset = HbmPreset::builtin("lamb-ch6").unwrap();
    let mut all = EngineSetup::defaults();
    all.push(EngineSetup {
        alu_model: AluModel::Pipelined { ops_per_tck: 16 },
        row_policy: RowPolicy::Staged,
    });
    for program in [Stage1Program::FourSlot, Stage1Program::ThreeSlot] {
        bounds_hold(&model, &preset, all.clone(), program);
    }
}

fn bounds_hold(
    model: &ModelPreset,
    preset: &HbmPreset,
    all: Vec<EngineSetup>,
    program: Stage1Program,
) {
    let e = common::sweep_experiment(model, preset.clone(), all, program);
    let r = experiment::run(&e, &mut || {}).unwrap().report;
    assert!(
        (r.physical_bound - 8.0).abs() < 1e-12,
        "{}",
        r.physical_bound
    );
    assert_eq!(r.alu_models.len(), 4);
    for m in &r.alu_models {
        assert!(m.program_bound <= r.physical_bound + 1e-9, "{}", m.name);
        assert!(
            m.speedup[0] <= m.program_bound,
            "{}: {} over its program bound {}",
            m.name,
            m.speedup[0],
            m.program_bound
        );
        // No schedule of a setup's row visits beats their row-cycle floor.
        assert!(
            m.speedup[0] <= m.row_cycle_bound,
            "{}: {} over its row-cycle bound {}",
            m.name,
            m.speedup[0],
            m.row_cycle_bound
        );
        assert!(m.row_cycle_bound <= r.physical_bound, "{}", m.name);
        for t in &m.ts_sweep {
            assert!(
                t.speedup_vs_ideal_100 <= r.physical_bound,
                "{} at TS {}: {}",
                m.name,
                t.ts_entries,
                t.speedup_vs_ideal_100
            );
        }
        let s = &m.time;
        let parts = s.columns + s.row_switches + s.refresh + s.alu_stalls;
        assert!(
            parts <= m.nmc_seconds * 1.0001 && parts >= 0.5 * m.nmc_seconds,
            "{}: {parts} of {}",
            m.name,
            m.nmc_seconds
        );
    }
    let by = |n: &str| r.alu_models.iter().find(|m| m.name == n).unwrap().speedup[0];
    assert!(by("pipelined") > by("column-triggered"));
    assert!(by("pipelined+staged") > by("pipelined"));
}

fn hbm2(refresh: RefreshMode) -> HbmPreset {
    let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
    p.refresh.mode = refresh;
    p
}

/// A staged row visit, command by command, at the earliest cycle each gate allows
/// (hbm2-2000): reads tRCD after the ACT and tCCD_L apart, then the writes tCCD_L apart
/// (no write-to-read turnaround inside the visit), the PRE at tWR after the last write (or tRAS / tRTP after the ACT
/// and the last read), the next ACT tRP later.
#[test]
fn staged_visit_meets_each_gate_at_its_earliest_cycle() {
    let p = hbm2(RefreshMode::Off);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Staged);
    let cmd = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=8\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row=8\n  add.f32 ts0, ts0, mem\n  mov.f32 mem, ts0\n.end\n",
    )
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let names: Vec<String> = log.iter().map(name).collect();
    let at = |i: usize| log[i].at;
    // Visit 1: AB-ACT, 8 AB-RD, PREA.
    assert_eq!(names[0], "AbAct { row: 0 }");
    assert!(
        names[1..9].iter().all(|n| n.starts_with("AbRd")),
        "{names:?}"
    );
    assert_eq!(at(1) - at(0), t.trcdrd, "tRCDRD");
    for i in 2..9 {
        assert_eq!(at(i) - at(i - 1), t.tccd_l, "tCCD_L between reads");
    }
    assert_eq!(names[9], "PreAll");
    assert_eq!(at(9), (at(0) + t.tras).max(at(8) + t.trtp), "tRAS / tRTP");
    // Visit 2: ACT tRP after the PRE (and tRC after the last ACT), 8 reads, then the 8
    // posted writes: the staging buffer holds 4, so 4 writes, then 4 more.
    assert_eq!(names[10], "AbAct { row: 8 }");
    assert_eq!(at(10), (at(9) + t.trp).max(at(0) + t.trc), "tRP / tRC");
    assert_eq!(at(11) - at(10), t.trcdrd);
    let reads: Vec<usize> = (11..names.len())
        .filter(|&i| names[i].starts_with("AbRd"))
        .collect();
    let writes: Vec<usize> = (11..names.len())
        .filter(|&i| names[i].starts_with("AbWr"))
        .collect();
    assert_eq!((reads.len(), writes.len()), (8, 8));
    assert!(
        reads.iter().max() < writes.iter().min(),
        "reads first, then writes"
    );
    let first_wr = writes[0];
    // An all-bank read occupies every bank for tCCD_L and its data stays in the banks,
    // so the first write follows the last read tCCD_L later (no bus turnaround); and no
    // read follows a write inside the visit, so no CWL + BL + tWTR_L is paid.
    assert_eq!(
        at(first_wr) - at(first_wr - 1),
        t.tccd_l,
        "all-bank RD -> WR"
    );
    for w in writes.windows(2) {
        assert_eq!(at(w[1]) - at(w[0]), t.tccd_l, "tCCD_L between writes");
    }
    let pre = *writes.last().unwrap() + 1;
    assert_eq!(names[pre], "PreAll");
    assert_eq!(at(pre) - at(pre - 1), t.wr_to_pre, "CWL + BL + tWR");
    replay(&p, &log).unwrap();
}

/// All-bank ACTs under the staged policy: an AB-ACT counts as four ACTs toward tFAW, so
/// with tFAW made the binding gate (raised above tRC) consecutive AB-ACTs of short visits
/// are exactly tFAW apart; with the preset's own timing they are tRC apart (tRC > tFAW >
/// tRRD).
#[test]
fn staged_all_bank_acts_respect_trc_tfaw_and_trrd() {
    let cmd = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=4 chunk=1\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row=8\n  add.f32 ts0, ts0, mem\n.end\n",
    )
    .unwrap();
    for tfaw in [None, Some(80)] {
        let mut p = hbm2(RefreshMode::Off);
        if let Some(f) = tfaw {
            p.timing.tfaw = f;
        }
        let t = *PseudoChannel::new(&p).timing();
        let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Staged);
        nmc.submit(0, &cmd, &mut mem).unwrap();
        let log = log_of(&nmc);
        let acts: Vec<u64> = log
            .iter()
            .filter(|l| name(l).starts_with("AbAct"))
            .map(|l| l.at)
            .collect();
        assert_eq!(acts.len(), 8);
        let want = t.trc.max(t.tfaw).max(t.trrd_s).max(t.trrd_l);
        for a in acts.windows(2) {
            assert_eq!(a[1] - a[0], want, "ACT spacing with tFAW {}", t.tfaw);
        }
        replay(&p, &log).unwrap();
    }
}

/// Refresh under the staged policy: posted writes drain before the row closes for a REF,
/// the REF waits tRP after the PRE, the next ACT exactly tRFC after the REF, and a REF
/// comes every tREFI of elapsed time.
#[test]
fn staged_refresh_drains_writes_and_waits_trfc() {
    let p = hbm2(RefreshMode::AllBank);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Staged);
    let cmd = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=2048 chunk=8\n\
         .phase row=0\n  add.f32 mem, mem, s0\n.end\n",
    )
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let end = nmc.engines()[0].now();
    let refs: Vec<usize> = (0..log.len()).filter(|&i| name(&log[i]) == "Ref").collect();
    assert_eq!(refs.len() as u64, end / t.trefi, "one REF per tREFI");
    for &r in &refs {
        assert_eq!(name(&log[r - 1]), "PreAll", "the rows close before a REF");
        assert!(log[r].at - log[r - 1].at >= t.trp, "tRP before REF");
        assert!(name(&log[r + 1]).starts_with("AbAct"));
        assert_eq!(log[r + 1].at - log[r].at, t.trfc, "tRFC");
    }
    // No write is left posted across a REF: every column the macro writes is written.
    let writes = log.iter().filter(|l| name(l).starts_with("AbWr")).count();
    assert_eq!(writes, 2048);
    replay(&p, &log).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The staged policy (and program order, under either ALU model) never issues a
    /// command a gate forbids: random programs, chunk sizes, start columns that cross
    /// rows, ALU rates and refresh, replayed through the checked timing state.
    #[test]
    fn staged_policy_never_violates_a_gate(
        chunk in 1u8..=8,
        cols in 1u32..=80,
        start in 0u32..40,
        phases in prop::collection::vec((0usize..BLOCKS.len(), 0u32..6), 1..=3),
        ops_per_tck in 1u32..=4,
        staged in any::<bool>(),
        refresh in any::<bool>(),
        jobs in 1usize..=3,
    ) {
        let p = hbm2(if refresh { RefreshMode::AllBank } else { RefreshMode::Off });
        let policy = if staged { RowPolicy::Staged } else { RowPolicy::ProgramOrder };
        let (mut nmc, mut mem) = rig(&p, AluModel::Pipelined { ops_per_tck }, policy);
        let phases: Vec<(usize, u32)> = phases.iter().map(|&(b, r)| (b, r * 3)).collect();
        let cmd = program(chunk, cols, start, &phases);
        let r = common::submit_and_replay(&p, &mut nmc, &mut mem, &cmd, jobs);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// Mirroring pseudo-channel 0 in timing-only runs (what `nmcp lamb` does) gives exactly
/// the cycles and counts of simulating every pseudo-channel, under every setup.
#[test]
fn mirrored_timing_runs_equal_the_full_simulation() {
    for setup in setups() {
        let (full, mirrored) = common::full_and_mirrored("lamb-ch6", setup);
        assert_eq!(full, mirrored, "{}", setup.name());
    }
}
