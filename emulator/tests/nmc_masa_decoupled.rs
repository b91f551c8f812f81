//! The decoupled MASA row policy of the NMC engine (issue 10, `pipelined+masa-decoupled`):
//! buffer sizes from DRAM timing, activate-ahead of an array's next row in its other
//! subarray (gate by gate), refresh that keeps posted writes buffered, a random-program
//! property test replaying the command log through a fresh checked timing state,
//! bit-identical LAMB outputs, and the physical bound.

use nmcp_emulator::hbm::config::{RefreshMode, TimingCycles};
use nmcp_emulator::hbm::{HbmPreset, PseudoChannel};
use nmcp_emulator::lamb::experiment::{self, EngineSetup};
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::memctrl::LoggedCommand;
use nmcp_emulator::nmc::engine::{decoupled_buffer_columns, AluModel, RowMap, RowPolicy};
use nmcp_emulator::nmc::system::NmcSystemConfig;
use nmcp_firmware::nmc::Stage1Program;
use nmcp_isa::asm::parse_macro;
use proptest::prelude::*;

mod common;
use common::{kind, log_of, name, program, replay};
use common::{DECOUPLED, MASA};

/// Rows per subarray of `common::masa_hbm2(_, 16)` (16384 rows / 16).
const SA: u32 = 1024;

/// Logical rows `0..rows` spread over subarrays 1..=ways in turn (row j in subarray
/// `j % ways + 1`, at index `j / ways`): consecutive rows are in different subarrays.
fn alternating(rows: u32, ways: u32) -> RowMap {
    RowMap::new(
        (0..rows)
            .map(|j| (j, 1, (j % ways + 1) * SA + j / ways))
            .collect(),
    )
    .unwrap()
}

/// The buffers cover a refresh plus one row move at one column per tCCD_L: 95 columns on
/// hbm2-2000 ((350 + 14 + 14) / 4 rounded up), and they follow the timing they come from.
#[test]
fn decoupled_buffers_are_sized_from_trfc_and_a_row_move() {
    let p = HbmPreset::builtin("lamb-ch6-masa16").unwrap();
    let t = TimingCycles::from(&p.timing);
    assert_eq!((t.trfc, t.trp, t.trcdrd, t.tccd_l), (350, 14, 14, 4));
    assert_eq!(decoupled_buffer_columns(&t), 95);
    let mut longer = t;
    longer.trfc = 550;
    assert_eq!(
        decoupled_buffer_columns(&longer),
        (550 + 28usize).div_ceil(4)
    );
    let mut faster = t;
    faster.tccd_l = 2;
    assert_eq!(decoupled_buffer_columns(&faster), 189);
}

/// One array of three rows laid out in alternating subarrays: while the stream works in
/// row 0, row 1 is activated ahead in the other subarray (at a cycle its gates already
/// allow: the stream never waits for it), so moving to row 1 costs a select and no tRCD;
/// row 2 goes back to row 0's subarray only after row 0's posted writes are written
/// (CWL + BL + tWR before its precharge, tRP before the activate).
#[test]
fn activate_ahead_opens_the_next_row_before_the_stream_needs_it() {
    let p = common::masa_hbm2(RefreshMode::Off, 16);
    let t = *PseudoChannel::new(&p).timing();
    let (mut nmc, mut mem) = common::rig_with_map(
        &p,
        AluModel::PIPELINED,
        RowPolicy::MasaDecoupled,
        Some(alternating(3, 2)),
    );
    let cmd = parse_macro(
        ".macro channels=0+1 mode=all col_start=0 col_count=96 chunk=4\n\
         .phase row=0\n  add.f32 mem, mem, s0\n.end\n",
    )
    .unwrap();
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let find = |n: &str| log.iter().position(|l| name(l) == n).unwrap();
    let (r0, r1, r2) = (SA, 2 * SA, SA + 1);
    let act0 = find(&format!("AbSaAct {{ row: {r0} }}"));
    let act1 = find(&format!("AbSaAct {{ row: {r1} }}"));
    let act2 = find(&format!("AbSaAct {{ row: {r2} }}"));
    assert_eq!(act0, 0);
    // Row 1's activate comes while row 0 still streams: reads of row 0 follow it.
    let sel0 = act1 + 1;
    assert_eq!(name(&log[sel0]), format!("AbSaSel {{ row: {r0} }}"));
    assert_eq!(kind(&log[sel0 + 1]), "AB-RD");
    // It waited for no gate the stream did not: at the previous command's cycle or the
    // next free row-bus slot, and tFAW/tRC-wise no earlier than the checked state allows
    // (the replay below).
    assert!(log[act1].at <= log[act1 - 1].at + t.tccd_l);
    // The first read of row 1 needs only the select (and tCCD_L), no tRCD.
    let sel1 = find(&format!("AbSaSel {{ row: {r1} }}"));
    let first_rd1 = (sel1..log.len())
        .find(|&i| kind(&log[i]) == "AB-RD")
        .unwrap();
    assert!(
        log[first_rd1].at >= log[act1].at + t.trcdrd,
        "tRCDRD of the row opened ahead"
    );
    let prev_col = (0..sel1)
        .rev()
        .find(|&i| matches!(kind(&log[i]), "AB-RD" | "AB-WR"))
        .unwrap();
    let gap = if kind(&log[prev_col]) == "AB-RD" {
        t.tccd_l
    } else {
        t.wr_to_rd_l
    };
    assert!(
        log[first_rd1].at <= (log[sel1].at + 2).max(log[prev_col].at + gap),
        "row 1's first read waits for nothing but the select and the column gap: {} vs select {} / previous column {}",
        log[first_rd1].at,
        log[sel1].at,
        log[prev_col].at
    );
    // Row 2 reuses row 0's subarray: its precharge after row 0's last write + CWL + BL + tWR.
    let pre0 = find(&format!("AbSaPre {{ row: {r0} }}"));
    assert!(pre0 < act2 && act1 < pre0);
    let mut designated = 0;
    let mut last_wr0 = None;
    for (i, l) in log[..pre0].iter().enumerate() {
        match l.cmd {
            nmcp_emulator::hbm::Command::AbSaAct { row }
            | nmcp_emulator::hbm::Command::AbSaSel { row } => designated = row,
            nmcp_emulator::hbm::Command::AbWr { .. } if designated == r0 => last_wr0 = Some(i),
            _ => {}
        }
    }
    let w = last_wr0.expect("row 0 written before its precharge");
    assert!(log[pre0].at >= log[w].at + t.wr_to_pre, "CWL + BL + tWR");
    assert!(log[act2].at >= log[pre0].at + t.trp, "tRP");
    let count = |k: &str| log.iter().filter(|l| kind(l) == k).count();
    assert_eq!((count("AB-RD"), count("AB-WR")), (96, 96));
    assert_eq!(count("AB-ACT"), 0);
    assert_eq!(nmc.engines()[0].stats().rows_activated_ahead, 2);
    replay(&p, &log).unwrap();
}

/// Per REF, the reads and writes issued before it.
fn reads_writes_before_each_ref(log: &[LoggedCommand]) -> Vec<(usize, usize)> {
    let (mut r, mut w) = (0, 0);
    let mut out = Vec::new();
    for l in log {
        match kind(l) {
            "AB-RD" => r += 1,
            "AB-WR" => w += 1,
            "REF" => out.push((r, w)),
            _ => {}
        }
    }
    out
}

/// Refresh under the decoupled policy: PREA closes every subarray, REF waits tRP, the next
/// activate tRFC, one REF per tREFI; the posted writes stay buffered across it (fewer
/// writes than reads before some REF of a read-modify-write stream, where MASA drains
/// them all first); every column is written once.
#[test]
fn decoupled_refresh_keeps_posted_writes_buffered() {
    let p = common::masa_hbm2(RefreshMode::AllBank, 8);
    let t = *PseudoChannel::new(&p).timing();
    let src = ".macro channels=0+1 mode=all col_start=0 col_count=1024 chunk=4\n\
         .phase row=0\n  div.f32 ts1, mem, ts0\n  sqrt.f32 ts1, ts1\n  add.f32 mem, ts1, s0\n.end\n";
    let cmd = parse_macro(src).unwrap();
    let (mut nmc, mut mem) =
        common::rig_with_map(&p, AluModel::PIPELINED, RowPolicy::MasaDecoupled, None);
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let log = log_of(&nmc);
    let end = nmc.engines()[0].now();
    let refs: Vec<usize> = (0..log.len()).filter(|&i| kind(&log[i]) == "REF").collect();
    assert!(refs.len() >= 2);
    assert_eq!(refs.len() as u64, end / t.trefi, "one REF per tREFI");
    for &r in &refs {
        assert_eq!(
            kind(&log[r - 1]),
            "PREA",
            "every subarray closes before a REF"
        );
        assert!(log[r].at - log[r - 1].at >= t.trp, "tRP before REF");
        assert!(kind(&log[r + 1]).starts_with("AB-SA-ACT"));
        assert_eq!(log[r + 1].at - log[r].at, t.trfc, "tRFC");
    }
    let counts = reads_writes_before_each_ref(&log);
    assert!(
        counts.iter().any(|&(r, w)| w < r),
        "some writes stay buffered across a REF: {counts:?}"
    );
    let writes = log.iter().filter(|l| kind(l) == "AB-WR").count();
    assert_eq!(writes, 1024);
    replay(&p, &log).unwrap();

    // MASA drains before every REF (the contrast the assertion above relies on).
    let (mut nmc, mut mem) = common::rig_with_map(&p, AluModel::PIPELINED, RowPolicy::Masa, None);
    nmc.submit(0, &cmd, &mut mem).unwrap();
    let masa = reads_writes_before_each_ref(&log_of(&nmc));
    assert!(masa.iter().all(|&(r, w)| w == r), "{masa:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The decoupled policy never issues a command a gate forbids: random programs whose
    /// phases' rows alternate over 2..=4 subarrays (so rows are activated ahead, and
    /// phases share subarrays or not), chunk sizes, start columns that cross rows, ALU
    /// rates, refresh, several jobs, replayed through the checked timing state.
    #[test]
    fn decoupled_policy_never_violates_a_gate(
        chunk in 1u8..=8,
        cols in 1u32..=80,
        start in 0u32..40,
        phases in prop::collection::vec((0usize..common::BLOCKS.len(), 0u32..12), 1..=4),
        ways in 2u32..=4,
        ops_per_tck in 1u32..=4,
        refresh in any::<bool>(),
        jobs in 1usize..=3,
    ) {
        let p = common::masa_hbm2(if refresh { RefreshMode::AllBank } else { RefreshMode::Off }, 16);
        let (mut nmc, mut mem) = common::rig_with_map(
            &p,
            AluModel::Pipelined { ops_per_tck },
            RowPolicy::MasaDecoupled,
            Some(alternating(24, ways)),
        );
        let cmd = program(chunk, cols, start, &phases);
        let r = common::submit_and_replay(&p, &mut nmc, &mut mem, &cmd, jobs);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// The decoupled policy (and two jobs in flight) computes the same bits as
/// column-triggered program order, with MASA's layout (8 subarrays) and with the
/// activate-ahead layout (16).
#[test]
fn decoupled_outputs_are_identical_to_the_other_policies() {
    let p8 = common::masa_hbm2(RefreshMode::AllBank, 8);
    let (base, base_err, base_norm, _) =
        common::lamb_four_slot(&p8, EngineSetup::COLUMN_TRIGGERED, 3);
    assert!(base_err <= 1e-5, "column-triggered: {base_err}");
    for (p, setup) in [
        (p8.clone(), DECOUPLED),
        (common::masa_hbm2(RefreshMode::AllBank, 16), DECOUPLED),
        (
            common::masa_hbm2(RefreshMode::AllBank, 16),
            EngineSetup {
                alu_model: AluModel::Pipelined { ops_per_tck: 3 },
                row_policy: RowPolicy::MasaDecoupled,
            },
        ),
        // Two macro-commands in flight (nmc_masa_two_jobs.rs) on both layouts.
        (
            p8.clone(),
            EngineSetup {
                alu_model: AluModel::PIPELINED,
                row_policy: RowPolicy::MasaTwoJobs,
            },
        ),
        (
            common::masa_hbm2(RefreshMode::AllBank, 16),
            EngineSetup {
                alu_model: AluModel::PIPELINED,
                row_policy: RowPolicy::MasaTwoJobs,
            },
        ),
    ] {
        let (state, err, norm, _) = common::lamb_four_slot(&p, setup, 3);
        let name = format!("{} on {} subarrays", setup.name(), p.subarrays.per_bank);
        assert!(err <= 1e-5, "{name}: error {err} of the term scale");
        assert_eq!(norm.to_bits(), base_norm.to_bits(), "{name}: global norm");
        common::assert_same_bits(&name, &state, &base);
    }
}

/// Without subarrays the policy is refused with a reason; with fewer than 11 it runs on
/// MASA's layout (no row is activated ahead), with 16 on the alternating one.
#[test]
fn decoupled_layout_follows_the_subarrays() {
    let config = |functional| LambRunConfig {
        system: NmcSystemConfig {
            functional,
            parallel: false,
            alu_model: AluModel::PIPELINED,
            row_policy: RowPolicy::MasaDecoupled,
            ..NmcSystemConfig::default()
        },
        ..LambRunConfig::default()
    };
    let e = LambRun::new(
        HbmPreset::builtin("lamb-ch6").unwrap(),
        &[1000],
        config(false),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("masa") && e.contains("subarrays"), "{e}");
    let ahead = |preset: &str| {
        let mut r = LambRun::new(
            HbmPreset::builtin(preset).unwrap(),
            &[300_000, 4_000],
            config(false),
        )
        .unwrap();
        r.step().unwrap();
        r.totals().engines.rows_activated_ahead
    };
    assert_eq!(ahead("lamb-ch6-masa"), 0);
    assert!(ahead("lamb-ch6-masa16") > 0);
}

/// No setup, the decoupled one included, at any TS size, beats the bank-parallelism bound
/// (8x), its program bound or its job bound; it beats MASA on the 8-subarray preset; the
/// time split adds up to the step.
#[test]
fn decoupled_speedup_never_exceeds_the_physical_bound() {
    let model = ModelPreset::custom("small", 1, 256, 1024);
    for (preset, setups) in [
        ("lamb-ch6-masa", vec![MASA, DECOUPLED]),
        (
            "lamb-ch6-masa16",
            vec![
                DECOUPLED,
                EngineSetup {
                    alu_model: AluModel::Pipelined { ops_per_tck: 16 },
                    row_policy: RowPolicy::MasaDecoupled,
                },
            ],
        ),
    ] {
        let e = common::sweep_experiment(
            &model,
            HbmPreset::builtin(preset).unwrap(),
            setups,
            Stage1Program::FourSlot,
        );
        let r = experiment::run(&e, &mut || {}).unwrap().report;
        assert!((r.physical_bound - 8.0).abs() < 1e-12);
        for m in &r.alu_models {
            let n = format!("{} on {preset}", m.name);
            common::assert_setup_within_bounds(&n, m, r.physical_bound);
            if m.setup.row_policy == RowPolicy::MasaDecoupled {
                let job = m.job_bound.expect("decoupled reports its job bound");
                assert!(
                    m.speedup[0] <= job,
                    "{n}: {} vs job bound {job}",
                    m.speedup[0]
                );
                assert!(job <= m.program_bound * 1.0001, "{n}");
            } else {
                assert!(m.job_bound.is_none(), "{n}");
            }
        }
    }
}

/// Mirroring pseudo-channel 0 in timing-only runs gives exactly the full simulation's
/// cycles and counts under the decoupled policy too.
#[test]
fn decoupled_mirrored_timing_runs_equal_the_full_simulation() {
    let (full, mirrored) = common::full_and_mirrored("lamb-ch6-masa16", DECOUPLED);
    assert_eq!(full, mirrored);
}
