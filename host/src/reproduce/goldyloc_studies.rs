//! Chapter 7's figures that come from other runs than the main evaluation: the CP's cost
//! per decision (the board record committed with this build), the distinct isolated
//! winners (`nmcp goldyloc tune --json`) and GOLDYLOC's benefit as the GPU scales
//! (`nmcp goldyloc eval --json` on GPU-Quarter and GPU-Half next to the main run).

use serde_json::Value;

use super::figures::{arr, num, FigureError, Headline, Unit};
use super::Stage;
use nmcp_firmware::cp::work::CpCostModel;

const CH: &str = "ch. 7 GOLDYLOC";

/// The board record this build was made with (QEMU `virt`, `-icount shift=0`; CI re-measures
/// it with `nmcp board run`).
const BOARD_RECORD: &str = crate::board::VIRT_RECORD;

/// The value of `key=` on the board record's line `name`.
fn board_value(record: &str, name: &str, key: &str) -> Result<f64, FigureError> {
    crate::board::record_value(record, name, key).map_err(FigureError)
}

/// The CP's cost per decision against the dissertation's 8 µs (inspect, predict, write;
/// 7.4.4.2): the board-measured 32-queue decision, as the emulator charges it at the
/// dissertation's CP clock and memory latency. The first sight of the shapes (records
/// decoded, featurised, predicted) is the like-for-like point; the steady decision (shapes
/// seen before) is beside it.
///
/// # Errors
/// The board record lacks a line or a key.
pub fn cp_decision() -> Result<Vec<Headline>, FigureError> {
    cp_decision_from(BOARD_RECORD)
}

fn cp_decision_from(record: &str) -> Result<Vec<Headline>, FigureError> {
    let m = CpCostModel::default();
    let us = |cycles: f64| cycles * 1e6 / m.clock_hz.max(1) as f64;
    let mut out = Vec::new();
    for (line, figure, what) in [
        (
            "cp_decision_32q_cold",
            "CP cost of a decision with prediction, 32 queues",
            "first sight of the shapes: every record decoded, featurised, predicted",
        ),
        (
            "cp_decision_32q",
            "CP cost of a steady decision, 32 queues",
            "shapes seen before: the decision reused, members checked and patched",
        ),
    ] {
        let cycles = board_value(record, line, "model_cycles")?;
        let instructions = board_value(record, line, "instructions")?;
        let accesses = board_value(record, line, "mem_accesses")?;
        out.push(Headline {
            chapter: CH,
            figure: figure.into(),
            dissertation: Some(8.0),
            ours: us(cycles),
            unit: Unit::Micros,
            config: format!(
                "board line {line} ({what}): {instructions:.0} rv32imac instructions \
                 (QEMU virt -icount) and {accesses:.0} memory accesses, charged at {:.1} GHz \
                 and {} cycles per access",
                m.clock_hz as f64 / 1e9,
                m.mem_latency_cycles
            ),
            baseline: "the dissertation's 8 µs budget".into(),
        });
    }
    Ok(out)
}

/// Name of the tuning stage (its JSON is `data/goldyloc-tune.json`).
pub const TUNE_STAGE: &str = "goldyloc-tune";

/// The GPU-scaling stages: `(stage name, --gpu, the dissertation's name)`.
pub const SCALING: [(&str, &str, &str); 2] = [
    ("goldyloc-quarter", "mi100-quarter", "GPU-Quarter"),
    ("goldyloc-half", "mi100-half", "GPU-Half"),
];

/// The tuning stage and the GPU-scaling stages, FP32 like the main results; `quick` on
/// the quick GEMM set.
pub fn stages(quick: bool) -> Vec<Stage> {
    let tail = |mut v: Vec<String>| {
        if quick {
            v.push("--quick".into());
        }
        v
    };
    let s = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut v = vec![Stage {
        name: TUNE_STAGE,
        what: "GOLDYLOC: isolated tuning (distinct winners), FP32",
        args: tail(s(&["goldyloc", "tune", "--json", "--dtype", "f32"])),
    }];
    for (name, gpu, what) in SCALING {
        v.push(Stage {
            name,
            what: if what == "GPU-Quarter" {
                "GOLDYLOC: FP32 evaluation on GPU-Quarter (Fig. 7.17)"
            } else {
                "GOLDYLOC: FP32 evaluation on GPU-Half (Fig. 7.17)"
            },
            args: tail(s(&[
                "goldyloc", "eval", "--json", "--dtype", "f32", "--gpu", gpu,
            ])),
        });
    }
    v
}

/// Distinct isolated-tuned kernels over the evaluated GEMMs, as a share (the dissertation:
/// 291 of 410 GEMM sizes, 7.2).
///
/// # Errors
/// A key is missing from `nmcp goldyloc tune --json`.
pub fn distinct_winners(doc: &Value) -> Result<Headline, FigureError> {
    const W: &str = "goldyloc tune JSON";
    let distinct = num(doc, W, "distinct_isolated_kernels")?;
    let gemms = num(doc, W, "evaluated_gemms")?;
    Ok(Headline {
        chapter: CH,
        figure: "distinct isolated-tuned kernels per evaluated GEMM size".into(),
        dissertation: Some(291.0 / 410.0),
        ours: distinct / gemms.max(1.0),
        unit: Unit::Percent,
        config: format!(
            "{distinct:.0} kernels for {gemms:.0} GEMM sizes, FP32; dissertation 291 of 410"
        ),
        baseline: "every size its own kernel = 100 %".into(),
    })
}

/// GOLDYLOC over Default at 4 GEMMs (Fig. 7.17's CD=4P) of one `nmcp goldyloc eval --json`.
fn over_default_at_4(doc: &Value) -> Result<f64, FigureError> {
    const W: &str = "goldyloc JSON";
    for (i, _) in arr(doc, W, "scenarios")?.iter().enumerate() {
        if num(doc, W, &format!("scenarios.{i}.n"))? as u64 == 4 {
            return num(
                doc,
                W,
                &format!("scenarios.{i}.speedup_over_default.goldyloc"),
            );
        }
    }
    Err(FigureError(format!("{W}: no scenario with 4 GEMMs")))
}

/// GOLDYLOC's benefit at 4 GEMMs as the GPU scales (Fig. 7.17: 3 % on GPU-Quarter to
/// 12 % on the whole GPU): `scaled` holds the smaller GPUs' evaluations by the names of
/// [`SCALING`], `full` the main FP32 evaluation.
///
/// # Errors
/// A key is missing from an evaluation's JSON.
pub fn gpu_scaling(
    scaled: &[(&str, &Value)],
    full: Option<&Value>,
) -> Result<Vec<Headline>, FigureError> {
    let mut out = Vec::new();
    for (stage, _, what) in SCALING {
        let Some((_, doc)) = scaled.iter().find(|(n, _)| *n == stage) else {
            continue;
        };
        let gpu = doc["gpu"].as_str().unwrap_or("?");
        let gemms = doc["gemm_count"].as_u64().unwrap_or(0);
        out.push(Headline {
            chapter: CH,
            figure: format!("GOLDYLOC over Default, 4 GEMMs, {what}"),
            dissertation: (what == "GPU-Quarter").then_some(1.03),
            ours: over_default_at_4(doc)?,
            unit: Unit::Times,
            config: format!("{gpu}, FP32, {gemms} GEMMs, 4 at a time"),
            baseline: "Default = 1".into(),
        });
    }
    if let (Some(doc), false) = (full, out.is_empty()) {
        let gpu = doc["gpu"].as_str().unwrap_or("?");
        let gemms = doc["gemm_count"].as_u64().unwrap_or(0);
        out.push(Headline {
            chapter: CH,
            figure: "GOLDYLOC over Default, 4 GEMMs, whole GPU (Fig. 7.17)".into(),
            dissertation: Some(1.12),
            ours: over_default_at_4(doc)?,
            unit: Unit::Times,
            config: format!("{gpu}, FP32, {gemms} GEMMs, 4 at a time"),
            baseline: "Default = 1".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_committed_board_record_gives_both_decisions_at_the_model_clock() {
        let h = cp_decision().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(h.len(), 2);
        // model_cycles at 1.5 GHz: positive and the cold decision dearer than the steady one.
        assert!(h[0].ours > h[1].ours && h[1].ours > 0.0, "{h:?}");
        let rec = "cp_decision_32q_cold instructions=10 model_cycles=3000 mem_accesses=2\n\
                   cp_decision_32q instructions=5 model_cycles=1500 mem_accesses=1\n";
        let h = cp_decision_from(rec).unwrap_or_else(|e| panic!("{e}"));
        assert!((h[0].ours - 2.0).abs() < 1e-12 && (h[1].ours - 1.0).abs() < 1e-12);
        assert!(cp_decision_from("cp_decision_32q model_cycles=1").is_err());
    }

    #[test]
    fn scaling_rows_read_the_four_gemm_scenario_of_each_gpu() {
        let eval = |gpu: &str, g: f64| {
            json!({"gpu": gpu, "gemm_count": 30, "scenarios": [
                {"n": 2, "speedup_over_default": {"goldyloc": 9.0}},
                {"n": 4, "speedup_over_default": {"goldyloc": g}}]})
        };
        let (q, f) = (eval("mi100-quarter", 1.01), eval("mi100", 1.05));
        let h = gpu_scaling(&[("goldyloc-quarter", &q)], Some(&f)).unwrap_or_default();
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].ours, h[0].dissertation), (1.01, Some(1.03)));
        assert_eq!((h[1].ours, h[1].dissertation), (1.05, Some(1.12)));
        assert!(gpu_scaling(&[], Some(&f)).unwrap_or_default().is_empty());
        let d = distinct_winners(&json!({"distinct_isolated_kernels": 3, "evaluated_gemms": 4}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d.ours, 0.75);
    }
}
