//! The firmware's cost models (`CpCostModel`, `SequencerCostModel`, `T3CostModel`) against the
//! committed QEMU `virt` report's measured lines.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod common;

use nmcp_firmware::cp::{CpCostModel, CpWork};

/// Field `k` (`k=value`) of a report line.
fn field<T: std::str::FromStr>(line: &str, k: &str) -> T {
    line.split(' ')
        .find_map(|x| x.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .expect("field missing or not a number")
}

/// The CP cost model (`CpCostModel::default()`, per-kind instruction counts) against
/// every measured CP decision of the committed QEMU report: within 10 %. `nmcp board
/// run --bless` re-records the report; a firmware change that moves a decision's
/// cost by more than that fails here until the model is refitted.
#[test]
fn cost_model_matches_board_figures() {
    let model = CpCostModel::default();
    let qemu = include_str!("../expected/virt.txt");
    let mut n = 0;
    for line in qemu.lines().filter(|l| l.starts_with("cp_decision")) {
        let f = |k: &str| -> u64 { field(line, k) };
        let work = CpWork {
            handlers: 1,
            queue_visits: f("visits"),
            mapped_visits: f("mapped_visits"),
            packets_decoded: f("decoded"),
            predictions: f("predictions"),
            dispatches: f("dispatches"),
            mapped_dispatches: f("mapped_dispatches"),
            decisions: f("decisions"),
            ..CpWork::default()
        };
        let measured = f("instructions") as f64;
        let modelled = work.instructions(&model) as f64;
        let err = (modelled - measured).abs() / measured;
        assert!(err <= 0.10, "{line}: model {modelled} vs board {measured}");
        n += 1;
    }
    assert_eq!(
        n, 13,
        "every CP decision line checked, the follow-up and the general path's"
    );
}

/// The NMC sequencer's cost model (`SequencerCostModel::default()`) against every
/// measured LAMB step of the committed QEMU report (1, 4, 8 tensors; without weight
/// decay; three-slot program): within 10 %.
#[test]
fn sequencer_cost_model_matches_board_figures() {
    use nmcp_firmware::nmc::{SequencerCostModel, SequencerWork};
    let model = SequencerCostModel::default();
    let qemu = include_str!("../expected/virt.txt");
    let mut n = 0;
    for line in qemu
        .lines()
        .filter(|l| l.starts_with("lamb_") && l.contains(" events="))
    {
        let f = |k: &str| -> u32 { field(line, k) };
        let work = SequencerWork {
            steps: 1,
            handlers: f("events"),
            idle_handlers: f("idle_events"),
            macro_commands: f("macro_commands"),
            program_words: f("program_words"),
            scalar_writes: f("scalar_writes"),
            reductions: f("reductions"),
            bytes_read: f("descriptors") * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES as u32,
        };
        let measured = f64::from(f("instructions"));
        let modelled = work.instructions(&model) as f64;
        let err = (modelled - measured).abs() / measured;
        assert!(err <= 0.10, "{line}: model {modelled} vs board {measured}");
        n += 1;
    }
    assert_eq!(n, 5, "every LAMB step line checked");
}

/// The T3 programmer's cost model (`T3CostModel::default()`, instructions per record)
/// against the committed QEMU report's `t3_program_gemm` line: the model's instructions
/// for the line's records within 2 % of the measured whole job.
#[test]
fn t3_cost_model_matches_board_figures() {
    use nmcp_firmware::t3::{T3CostModel, T3Work};
    let qemu = include_str!("../expected/virt.txt");
    let line = qemu
        .lines()
        .find(|l| l.starts_with("t3_program_gemm "))
        .expect("the T3 line");
    let f = |k: &str| -> u64 { field(line, k) };
    let work = T3Work {
        records: f("records") as u32,
        events: f("events") as u32,
    };
    let measured = f("instructions") as f64;
    let modelled = work.instructions(&T3CostModel::default()) as f64;
    let err = (modelled - measured).abs() / measured;
    assert!(err <= 0.02, "{line}: model {modelled} vs board {measured}");
}
