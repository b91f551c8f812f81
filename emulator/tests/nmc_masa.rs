//! The MASA row policy of the NMC engine (issue 10, subarray-level parallelism): a visit's
//! commands at the earliest cycle each gate allows, rows kept open across chunks with
//! subarray selects instead of PREA / AB-ACT, a random-program property test replaying
//! the command log through a fresh checked timing state, identical LAMB outputs, and the
//! physical bound.

use nmcp_emulator::hbm::config::RefreshMode;
use nmcp_emulator::hbm::{HbmPreset, PseudoChannel};
use nmcp_emulator::lamb::experiment::{self, EngineSetup};
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::engine::{AluModel, RowPolicy};
use nmcp_emulator::nmc::system::NmcSystemConfig;
use nmcp_firmware::nmc::Stage1Program;
use nmcp_isa::asm::parse_macro;
use proptest::prelude::*;

mod common;
use common::MASA;
use common::{kind, log_of, name, program, replay, rig, BLOCKS};
/// Rows per subarray of `common::masa_hbm2(_, 8)` (16384 rows / 8).
const SA: u32 = 2048;

/// Two arrays in two subarrays, two chunks: each row opens once (AB-SA-ACT), the second
/// chunk selects (AB-SA-SEL) instead of precharging and activating, reads go first and
/// the writes last, each command at the earliest cycle its gates allow.
#[test]
fn masa_visits_keep_rows_open_and_meet_each_gate_at_its_earliest_cycle() {
    let p = common::masa_hbm2(RefreshMode::Off, 8);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Masa);
    let cmd = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=8 chunk=4\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row={SA}\n  add.f32 ts0, ts0, mem\n  mov.f32 mem, ts0\n.end\n"
    ))
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let kinds: Vec<&str> = log.iter().map(kind).collect();
    let mut want = vec!["AB-SA-ACT"];
    want.extend(["AB-RD"; 4]);
    want.push("AB-SA-ACT");
    want.extend(["AB-RD"; 4]);
    want.push("AB-SA-SEL");
    want.extend(["AB-RD"; 4]);
    want.push("AB-SA-SEL");
    want.extend(["AB-RD"; 4]);
    want.extend(["AB-WR"; 8]);
    want.push("PREA");
    assert_eq!(kinds, want);
    let at = |i: usize| log[i].at;
    assert_eq!(name(&log[0]), "AbSaAct { row: 0 }");
    assert_eq!(name(&log[5]), format!("AbSaAct {{ row: {SA} }}"));
    assert_eq!(at(1) - at(0), t.trcdrd, "tRCDRD");
    for i in 2..5 {
        assert_eq!(at(i) - at(i - 1), t.tccd_l, "tCCD_L");
    }
    // The second subarray's ACT: an all-bank ACT counts four toward tFAW.
    assert_eq!(at(5), (at(0) + t.tfaw).max(at(4)), "tFAW");
    assert_eq!(at(6) - at(5), t.trcdrd, "tRCDRD of the second subarray");
    // Selects: the next read waits for SA_SEL or tCCD_L after the last read.
    for sel in [10, 15] {
        assert_eq!(name(&log[sel]).split(' ').next(), Some("AbSaSel"));
        assert_eq!(at(sel), at(sel - 1), "a select needs only the row bus");
        assert_eq!(
            at(sel + 1),
            (at(sel) + 2).max(at(sel - 1) + t.tccd_l),
            "SA_SEL / tCCD_L"
        );
    }
    let writes: Vec<usize> = (0..log.len()).filter(|&i| kinds[i] == "AB-WR").collect();
    for w in writes.windows(2) {
        assert!(at(w[1]) - at(w[0]) >= t.tccd_l, "tCCD_L between writes");
    }
    let last = log.len() - 1;
    assert_eq!(at(last), at(last - 1) + t.wr_to_pre, "CWL + BL + tWR");
    assert_eq!(nmc.engines()[0].stats().subarray_selects, 2);
    assert_eq!(nmc.engines()[0].stats().activations, 2);
    replay(&p, &log).unwrap();
}

/// An array crossing into its next row precharges and activates only its own subarray
/// (AB-SA-PRE, AB-SA-ACT, tRAS / tWR and tRP of that subarray); the other array's row
/// stays open.
#[test]
fn a_row_change_closes_only_its_subarray() {
    let p = common::masa_hbm2(RefreshMode::Off, 8);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Masa);
    let cmd = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row={SA}\n  add.f32 mem, mem, ts0\n.end\n"
    ))
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let count = |k: &str| log.iter().filter(|l| kind(l) == k).count();
    // Two rows per array: 4 subarray ACTs, 2 subarray PREs, one PREA at the end.
    assert_eq!(count("AB-SA-ACT"), 4);
    assert_eq!(count("AB-SA-PRE"), 2);
    assert_eq!(count("PREA"), 1);
    assert_eq!(count("AB-ACT"), 0);
    assert_eq!((count("AB-RD"), count("AB-WR")), (128, 64));
    for (i, l) in log
        .iter()
        .enumerate()
        .filter(|(_, l)| kind(l) == "AB-SA-PRE")
    {
        let next = &log[i + 1];
        assert_eq!(kind(next), "AB-SA-ACT");
        assert!(next.at - l.at >= t.trp, "tRP of the subarray");
    }
    replay(&p, &log).unwrap();
}

/// Refresh under MASA: posted writes drain, PREA closes every subarray, the REF waits tRP,
/// the next subarray ACT tRFC; every column the macro writes is written.
#[test]
fn masa_refresh_closes_every_subarray_and_drains_writes() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 8);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = rig(&p, AluModel::PIPELINED, RowPolicy::Masa);
    let cmd = parse_macro(&format!(
        ".macro channels=0+1 mode=all col_start=0 col_count=1024 chunk=4\n\
         .phase row=0\n  mov.f32 ts0, mem\n\
         .phase row={SA}\n  add.f32 mem, mem, ts0\n.end\n"
    ))
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let end = nmc.engines()[0].now();
    let refs: Vec<usize> = (0..log.len()).filter(|&i| kind(&log[i]) == "REF").collect();
    assert!(!refs.is_empty());
    assert_eq!(refs.len() as u64, end / t.trefi, "one REF per tREFI");
    for &r in &refs {
        assert_eq!(
            kind(&log[r - 1]),
            "PREA",
            "every subarray closes before a REF"
        );
        assert!(log[r].at - log[r - 1].at >= t.trp, "tRP before REF");
        assert_eq!(kind(&log[r + 1]), "AB-SA-ACT");
        assert_eq!(log[r + 1].at - log[r].at, t.trfc, "tRFC");
    }
    let writes = log.iter().filter(|l| kind(l) == "AB-WR").count();
    assert_eq!(writes, 1024);
    replay(&p, &log).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The MASA policy never issues a command a gate forbids: random programs whose phases
    /// share or do not share subarrays (and rows), chunk sizes, start columns that cross
    /// rows, ALU rates, refresh, several jobs, replayed through the checked timing state.
    #[test]
    fn masa_policy_never_violates_a_gate(
        chunk in 1u8..=8,
        cols in 1u32..=80,
        start in 0u32..40,
        phases in prop::collection::vec((0usize..BLOCKS.len(), 0u32..4, 0u32..3), 1..=4),
        ops_per_tck in 1u32..=4,
        refresh in any::<bool>(),
        jobs in 1usize..=3,
    ) {
        let p = common::masa_hbm2(if refresh { RefreshMode::AllBank } else { RefreshMode::Off }, 8);
        let (mut nmc, mut mem) = rig(&p, AluModel::Pipelined { ops_per_tck }, RowPolicy::Masa);
        let phases: Vec<(usize, u32)> =
            phases.iter().map(|&(b, sub, r)| (b, sub * SA + r * 3)).collect();
        let cmd = program(chunk, cols, start, &phases);
        let r = common::submit_and_replay(&p, &mut nmc, &mut mem, &cmd, jobs);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// MASA computes the same bits as every other setup (the policy and the subarray row map
/// are timing only) within the documented error bound, and faster than staged visits.
#[test]
fn masa_outputs_are_identical_to_the_other_policies() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 8);
    let (base, base_err, base_norm, _) =
        common::lamb_four_slot(&p, EngineSetup::COLUMN_TRIGGERED, 3);
    assert!(base_err <= 1e-5, "column-triggered: {base_err}");
    let staged = EngineSetup {
        alu_model: AluModel::PIPELINED,
        row_policy: RowPolicy::Staged,
    };
    let (_, _, _, staged_cycles) = common::lamb_four_slot(&p, staged, 3);
    for setup in [
        MASA,
        EngineSetup {
            alu_model: AluModel::Pipelined { ops_per_tck: 3 },
            row_policy: RowPolicy::Masa,
        },
    ] {
        let (state, err, norm, cycles) = common::lamb_four_slot(&p, setup, 3);
        let name = setup.name();
        assert!(err <= 1e-5, "{name}: error {err} of the term scale");
        assert_eq!(norm.to_bits(), base_norm.to_bits(), "{name}: global norm");
        common::assert_same_bits(&name, &state, &base);
        assert!(
            cycles < staged_cycles,
            "{name}: {cycles} vs staged {staged_cycles}"
        );
    }
}

/// On a preset with one subarray per bank the policy is refused with a reason.
#[test]
fn masa_needs_a_preset_with_subarrays() {
    let config = LambRunConfig {
        system: NmcSystemConfig {
            functional: false,
            alu_model: AluModel::PIPELINED,
            row_policy: RowPolicy::Masa,
            ..NmcSystemConfig::default()
        },
        ..LambRunConfig::default()
    };
    let e = LambRun::new(HbmPreset::builtin("lamb-ch6").unwrap(), &[1000], config)
        .unwrap_err()
        .to_string();
    assert!(e.contains("masa") && e.contains("subarrays"), "{e}");
}

/// No setup, MASA included, at any TS size, beats the bank-parallelism bound (8x on
/// `lamb-ch6-masa`) or its program bound; MASA beats staged visits; the time split adds
/// up to the step.
#[test]
fn masa_speedup_never_exceeds_the_physical_bound() {
    let model = ModelPreset::custom("small", 1, 256, 1024);
    let preset = HbmPreset::builtin("lamb-ch6-masa").unwrap();
    let mut setups = EngineSetup::defaults();
    setups.push(MASA);
    setups.push(EngineSetup {
        alu_model: AluModel::Pipelined { ops_per_tck: 16 },
        row_policy: RowPolicy::Masa,
    });
    let e = common::sweep_experiment(&model, preset.clone(), setups, Stage1Program::FourSlot);
    let r = experiment::run(&e, &mut || {}).unwrap().report;
    assert!(
        (r.physical_bound - 8.0).abs() < 1e-12,
        "{}",
        r.physical_bound
    );
    assert_eq!(r.alu_models.len(), 5);
    for m in &r.alu_models {
        // (On this small model the firmware's time, in "other", can be most of a fast
        // setup's step.)
        common::assert_setup_within_bounds(&m.name, m, r.physical_bound);
    }
    let by = |n: &str| r.alu_models.iter().find(|m| m.name == n).unwrap().speedup[0];
    assert!(by("pipelined+masa") > by("pipelined+staged"));
}

/// Mirroring pseudo-channel 0 in timing-only runs gives exactly the full simulation's
/// cycles and counts under MASA too (the row map is the same for every channel).
#[test]
fn masa_mirrored_timing_runs_equal_the_full_simulation() {
    let (full, mirrored) = common::full_and_mirrored("lamb-ch6-masa", MASA);
    assert_eq!(full, mirrored);
}
