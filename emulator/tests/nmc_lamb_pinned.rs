//! Pins the DRAM-command model's cost of one small LAMB step, so a change to the timing
//! state or the NMC engine that alters any simulated figure (for example a speed-up of
//! the simulator that is not exact) fails here.
//!
//! The pinned numbers were produced by the DRAM-command model itself — they are not
//! figures from the dissertation, and a deliberate change to the model is expected to
//! re-pin them, with the reason in the commit message (`git log -p` on this file holds
//! each re-pin). What they stand on: stage 1 divides g by the clip divisor, whose
//! reciprocal is latched when r7 is written (`nmcp_isa::nmc::DIV_BY_SCALAR_OPS`: 2 column
//! slots per DIV by a scalar register, and a scalar write holds the column-triggered
//! stream 24 cycles for the latch); the sequencer looks four tensors ahead, so a tensor's
//! stage 1 and norms run while up to four earlier tensors wait for their trust ratio.
//! Free firmware: 576 800 column commands, 266 516 cycles, 1 088 refreshes.

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
/// re-activation). On this 14-tensor model the firmware is a third of the step: the CP
/// time is 118 459 cycles and the step 313 886 DRAM cycles (the templates kept encoded,
/// 355 instructions per command and 6 per word; completions nothing waited for returning
/// at once, 30 instructions instead of a full handler).
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
