//! Pins the DRAM-command model's cost of one small LAMB step, so a change to the timing
//! state or the NMC engine that alters any simulated figure (for example a speed-up of
//! the simulator that is not exact) fails here.
//!
//! The pinned numbers were produced by the DRAM-command model itself — they are not
//! figures from the dissertation, and a deliberate change to the model is expected to
//! re-pin them. First pinned at commit aeb6b99 (and unchanged by the hot-path rework);
//! re-pinned when stage 1 began to divide g by the clip divisor unconditionally (+5
//! column slots per column of every tensor: DIV is 6 slots where a MOV was 1, and
//! 16 pseudo-channels x 1030 columns x 5 = 82 400 more column commands). Re-pinned when
//! the sequencer's look-ahead went from two tensors to four (issue 10): the same column
//! commands in another order (a tensor's stage 1 and norms now run while up to four
//! earlier tensors wait for their trust ratio), so the step is shorter and refreshes and
//! re-activations fall elsewhere: free firmware 288 057 -> 283 484 cycles, 28 272 ->
//! 28 304 activations, 1 168 -> 1 152 refreshes. Re-pinned when a DIV by a scalar register
//! began to cost its correction only (stop 29: the clip divisor's reciprocal is latched
//! when r7 is written, `nmcp_isa::nmc::DIV_BY_SCALAR_OPS`, so stage 1's `g / clip` is 2
//! column slots instead of 6; a scalar write holds the column-triggered stream 24 cycles
//! for the latch instead of 4): 16 x 1030 x 4 = 65 920 fewer column commands
//! (642 720 -> 576 800), free firmware 283 484 -> 266 516 cycles, 1 152 -> 1 088 refreshes.

use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::reference::LambHyper;
use nmcp_emulator::lamb::run::{LambRun, LambRunConfig};
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::system::{NmcSystemConfig, NmcTotals};
use nmcp_emulator::node::FirmwareCost;

/// One timing-only LAMB step of a one-layer, d_model = 64 transformer on hbm2-2000 (with
/// its default refresh), engines run one after another, the firmware's work charged
/// with `cost`.
fn small_step(cost: FirmwareCost) -> (u64, NmcTotals, u64) {
    let model = ModelPreset::custom("pinned", 1, 64, 256);
    let elements: Vec<u64> = model.tensors().iter().map(|t| t.elements()).collect();
    let preset = HbmPreset::builtin("hbm2-2000").expect("built-in preset");
    let config = LambRunConfig {
        system: NmcSystemConfig {
            functional: false,
            parallel: false,
            ..NmcSystemConfig::default()
        },
        hyper: LambHyper::default(),
        cost,
        ..LambRunConfig::default()
    };
    let mut run = LambRun::new(preset, &elements, config).expect("layout fits");
    let outcome = run.step().expect("step runs");
    (outcome.cycles, run.totals(), run.cp_cycles())
}

/// With the firmware's work free, the step is the one pinned before the node charged
/// it: the NMC engines issuing through the memory controllers (one timing state, one
/// refresh schedule) give the same commands on the same cycles.
#[test]
fn small_lamb_step_cycles_and_commands_are_pinned() {
    let (cycles, totals, cp) = small_step(FirmwareCost::free());
    assert_eq!(cp, 0);
    println!("cycles {cycles}, totals {totals:?}");
    assert_eq!(cycles, 266_516, "step cycles");
    assert_eq!(totals.commands_total, 634_496, "DRAM commands");
    assert_eq!(totals.engines.column_commands, 576_800, "column commands");
    assert_eq!(totals.engines.activations, 28_304, "activations");
    assert_eq!(totals.engines.refreshes, 1_088, "refreshes");
    // Summed over the engines, so it also pins each pseudo-channel's own finishing cycle.
    assert_eq!(totals.engines.busy_cycles, 4_175_600, "engine busy cycles");
}

/// With the firmware charged (the default: `SequencerCostModel`, instructions per
/// operation kind measured on the board plus 30 stall cycles per device access, at
/// 1.5 GHz), the program's column commands are the same and the step is longer only by CP
/// time the engines could not hide. Refreshes fall at other columns when the engines start
/// later, so activations and refreshes move a little (a refresh inside a row costs a
/// re-activation). Re-pinned when the sequencer's cost was calibrated from the board
/// (issue 10): the CP time went from 10 943 to 200 564 cycles and the step from 292 366 to
/// 384 482 DRAM cycles — on this 14-tensor model the firmware is a third of the step;
/// with the four-tensor look-ahead 377 363 (the CP's work is unchanged, more of it hides);
/// with the templates kept encoded (stop 28: 355 instructions per command and 6 per word
/// instead of 590 and 37) the CP time is 170 813 and the step 359 246; with completions
/// that nothing waited for returning at once (30 instructions instead of a full handler)
/// 118 459 and 330 854; with stage 1's `g / clip` at 2 column slots instead of 6 (stop 29)
/// the step is 313 886 (the CP time is unchanged).
#[test]
fn charging_the_sequencer_moves_only_time() {
    let (free_cycles, free, _) = small_step(FirmwareCost::free());
    let (cycles, totals, cp) = small_step(FirmwareCost::default());
    println!("charged: cycles {cycles}, CP cycles {cp}, totals {totals:?}");
    assert_eq!(totals.engines.column_commands, free.engines.column_commands);
    assert_eq!(totals.engines.macro_commands, free.engines.macro_commands);
    assert_eq!(totals.reductions, free.reductions);
    assert!(cp > 0);
    // The CP's time at 1.5 GHz in DRAM cycles (1 GHz) bounds what it can add.
    let cp_dram = cp.div_ceil(3) * 2;
    assert!(
        cycles >= free_cycles && cycles <= free_cycles + cp_dram,
        "{cycles} vs {free_cycles} + {cp_dram}"
    );
    assert_eq!(cycles, 313_886, "step cycles with the sequencer charged");
    assert_eq!(cp, 118_459, "CP cycles charged");
    assert_eq!(totals.engines.activations, 28_192, "activations");
    assert_eq!(totals.engines.refreshes, 1_248, "refreshes");
}
