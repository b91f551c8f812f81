//! End-to-end training-iteration and prompt-phase speedups from the sub-layer results,
//! by chapter 8's method (8.4.1.2): the baseline iteration's sliced-GEMM -> all-reduce
//! sub-layers are replaced by each configuration's simulated time, everything else stays.
//!
//! The baseline iteration of one Transformer layer is built from the same results:
//! - the all-reduce sub-layers: OP and FC-2 (forward), FC-1 and IP (backward activation
//!   gradients) in training, OP and FC-2 in the prompt phase: Sequential's simulated time;
//! - the layer's other GEMMs at the isolated producer GEMMs' rate per FLOP: in units of
//!   `2 H^2 T / TP` the four all-reduce GEMMs carry 12 in training (1 + 4 + 4 + 3) and
//!   the rest 24 (forward QKV 3 and FC-1 4, the other activation gradients 5, all four
//!   weight gradients 12); in the prompt phase 5 (OP 1, FC-2 4) against 7 (QKV, FC-1);
//! - the non-GEMM operations (attention, softmax, normalisation, element-wise): a share
//!   [`NON_GEMM_SHARE`] of the baseline iteration.
//!
//! Every layer is alike, so the layer count multiplies every term and the speedup does
//! not depend on it; the iteration times reported are per model (`layers` x one layer).

use nmcp_emulator::t3::Scenario;

/// Share of the baseline iteration in non-GEMM operations. The dissertation (8.5.3):
/// in the MLPerf v1.1 implementation its breakdowns come from, "the non-sliced attention
/// operations [are] a significant 40-45 % of execution time"; the middle of that range.
pub const NON_GEMM_SHARE: f64 = 0.425;

/// FLOP units (of `2 H^2 T / TP`) of a layer's all-reduce GEMMs and of its other GEMMs,
/// training and prompt phase.
const TRAIN_UNITS: (f64, f64) = (12.0, 24.0);
const PROMPT_UNITS: (f64, f64) = (5.0, 7.0);

/// Transformer layers of the Table 8.2 models ([D] Table 8.2 "L").
pub fn layers(model: &str) -> Option<u32> {
    match model {
        "mega-gpt-2" => Some(74),
        "t-nlg" => Some(78),
        "gpt-3" => Some(96),
        "palm" => Some(118),
        "mt-nlg" => Some(105),
        _ => None,
    }
}

/// One sub-layer's times under one configuration, as the end-to-end model needs them.
#[derive(Debug, Clone, PartialEq)]
pub struct SubLayerTime {
    /// Model name.
    pub model: String,
    /// `OP`, `FC-2`, `FC-1`, `IP`.
    pub sublayer: String,
    /// TP degree.
    pub tp: u32,
    /// Configuration.
    pub scenario: Scenario,
    /// End-to-end time of the sub-layer, s.
    pub total_seconds: f64,
    /// Its GEMM's time (Sequential: the isolated GEMM), s.
    pub gemm_seconds: f64,
}

/// Which part of the model's run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// A training iteration (forward and backward).
    Training,
    /// The prompt phase of inference (forward only).
    Prompt,
}

impl Phase {
    fn sublayers(self) -> &'static [&'static str] {
        match self {
            Phase::Training => &["OP", "FC-2", "FC-1", "IP"],
            Phase::Prompt => &["OP", "FC-2"],
        }
    }

    fn units(self) -> (f64, f64) {
        match self {
            Phase::Training => TRAIN_UNITS,
            Phase::Prompt => PROMPT_UNITS,
        }
    }

    /// Name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Training => "training",
            Phase::Prompt => "prompt",
        }
    }
}

/// One model x TP x phase x configuration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EndToEnd {
    /// Model name.
    pub model: String,
    /// TP degree.
    pub tp: u32,
    /// Training or prompt phase.
    pub phase: Phase,
    /// Configuration.
    pub scenario: Scenario,
    /// Time of the model's layers (layers x one layer), s.
    pub seconds: f64,
    /// Sequential's over this one's.
    pub speedup: f64,
    /// Share of the baseline iteration in the all-reduce sub-layers.
    pub sublayer_share: f64,
}

/// The end-to-end figures of every model x TP whose sub-layers of `phase` are all in
/// `rows` under Sequential and the configuration.
pub fn end_to_end(rows: &[SubLayerTime], phase: Phase) -> Vec<EndToEnd> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for r in rows {
        let k = (r.model.clone(), r.tp);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let find = |m: &str, tp: u32, sl: &str, s: Scenario| {
        rows.iter()
            .find(|r| r.model == m && r.tp == tp && r.sublayer == sl && r.scenario == s)
    };
    let mut out = Vec::new();
    for (model, tp) in keys {
        let Some(l) = layers(&model) else { continue };
        let seq: Option<Vec<&SubLayerTime>> = phase
            .sublayers()
            .iter()
            .map(|sl| find(&model, tp, sl, Scenario::Sequential))
            .collect();
        let Some(seq) = seq else { continue };
        let ar: f64 = seq.iter().map(|r| r.total_seconds).sum();
        let ar_gemm: f64 = seq.iter().map(|r| r.gemm_seconds).sum();
        let (ar_units, other_units) = phase.units();
        let other_gemm = ar_gemm * other_units / ar_units;
        let layer = (ar + other_gemm) / (1.0 - NON_GEMM_SHARE);
        for s in Scenario::ALL {
            let cfg: Option<f64> = phase
                .sublayers()
                .iter()
                .map(|sl| find(&model, tp, sl, s).map(|r| r.total_seconds))
                .sum();
            let Some(cfg) = cfg else { continue };
            let t = layer - ar + cfg;
            out.push(EndToEnd {
                model: model.clone(),
                tp,
                phase,
                scenario: s,
                seconds: t * f64::from(l),
                speedup: layer / t,
                sublayer_share: ar / layer,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sl: &str, s: Scenario, total: f64, gemm: f64) -> SubLayerTime {
        SubLayerTime {
            model: "t-nlg".into(),
            sublayer: sl.into(),
            tp: 8,
            scenario: s,
            total_seconds: total,
            gemm_seconds: gemm,
        }
    }

    #[test]
    fn a_sub_layer_speedup_is_diluted_by_the_rest_of_the_iteration() {
        let mut rows = Vec::new();
        for sl in ["OP", "FC-2", "FC-1", "IP"] {
            rows.push(row(sl, Scenario::Sequential, 3.0, 2.0));
            rows.push(row(sl, Scenario::T3, 2.0, 2.0));
        }
        let e = end_to_end(&rows, Phase::Training);
        let t3 = e.iter().find(|x| x.scenario == Scenario::T3).unwrap();
        // Layer: AR 12, other GEMMs 8 x 24 / 12 = 16, / (1 - 0.425) = 48.7; T3 saves 4.
        let layer = (12.0 + 16.0) / (1.0 - NON_GEMM_SHARE);
        assert!((t3.speedup - layer / (layer - 4.0)).abs() < 1e-12);
        assert!(t3.speedup > 1.0 && t3.speedup < 1.5);
        assert!((t3.seconds - (layer - 4.0) * 78.0).abs() < 1e-9);
        // The prompt phase has only OP and FC-2; a model missing a sub-layer is skipped.
        assert_eq!(end_to_end(&rows[..4], Phase::Training), vec![]);
        let p = end_to_end(&rows, Phase::Prompt);
        assert_eq!(p.len(), 2);
    }
}
