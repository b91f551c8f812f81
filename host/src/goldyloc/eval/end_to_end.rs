//! End-to-end speedups of the networks from the per-GEMM results (dissertation 7.5.6).

use super::*;

/// An application's training-iteration speedup over Default from its GEMMs' speedup and
/// the share of the iteration its GEMMs take (Amdahl: `1 / (1 - f + f / s)`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndToEnd {
    /// Application.
    pub app: String,
    /// Independent GEMMs available (the scenario).
    pub n: u32,
    /// Share `f` of the iteration spent in the GEMMs.
    pub gemm_share: f64,
    /// Where `f` comes from.
    pub share_source: String,
    /// GOLDYLOC over Default on the app's GEMMs (geomean), `s`.
    pub gemm_speedup: f64,
    /// The iteration's speedup.
    pub speedup: f64,
    /// The dissertation's end-to-end figure for the app.
    pub dissertation: String,
}

/// The applications whose end-to-end speedup the evaluation reports, with the GEMM share
/// of their iteration as the dissertation's text gives it (inputs, not fitted): app, share
/// in FP32, share in mixed precision, source, the dissertation's end-to-end figure.
pub const END_TO_END_APPS: [(&str, f64, f64, &str, &str); 2] = [
    (
        "bert",
        0.55,
        0.36,
        "[D] 4.2.2: GEMMs are 55 % of a BERT iteration in FP32, 36 % in mixed precision",
        "5-12 %",
    ),
    (
        "gnmt",
        0.50,
        0.50,
        "[D] 7.5: GNMT spends more than half its time in GEMMs (lower bound 50 % used)",
        "~14 % / ~13 % at batch 128 / 256 (up to 8 parallel layer GEMMs)",
    ),
];

/// The end-to-end rows of `scenarios`: every listed app at every n; `fp32` picks the
/// share.
pub fn end_to_end(scenarios: &[ScenarioReport], fp32: bool) -> Vec<EndToEnd> {
    let gl = CONFIGS.iter().position(|c| *c == "GOLDYLOC").unwrap_or(3);
    let mut out = Vec::new();
    for (app, f32_share, mp_share, source, diss) in END_TO_END_APPS {
        let f = if fp32 { f32_share } else { mp_share };
        for s in scenarios {
            let Some(a) = s.apps.iter().find(|a| a.app == app) else {
                continue;
            };
            let Some(&g) = a.over_default.get(gl) else {
                continue;
            };
            if g.is_nan() || g <= 0.0 {
                continue;
            }
            out.push(EndToEnd {
                app: app.into(),
                n: s.n,
                gemm_share: f,
                share_source: source.into(),
                gemm_speedup: g,
                speedup: 1.0 / (1.0 - f + f / g),
                dissertation: diss.into(),
            });
        }
    }
    out
}

#[cfg(test)]
mod end_to_end_tests {
    use super::*;

    fn scenario(n: u32, app: &str, goldyloc: f64) -> ScenarioReport {
        let mut over_default = vec![1.0; CONFIGS.len()];
        over_default[3] = goldyloc;
        ScenarioReport {
            n,
            apps: vec![AppSummary {
                app: app.into(),
                gemms: 1,
                over_sequential: vec![1.0; CONFIGS.len()],
                over_default,
            }],
            all_over_sequential: vec![],
            all_over_default: vec![],
            max_over_sequential: vec![],
            split: [0.0; 3],
            accuracy: 0.0,
            confusion: vec![],
            gemms: n,
            best_constant_cd_over_go_kernels: None,
            goldyloc_over_best_constant_cd: None,
            speedup_over_default: OverDefault {
                go_kernels: 1.0,
                goldyloc,
                oracle: 1.0,
                cu_partition: 1.0,
                resource_partition: 1.0,
            },
            speedup_over_sequential: OverSequential { default: 1.0 },
            predictor_accuracy: 0.0,
            predictor_accuracy_seeds: vec![],
            majority_baseline_accuracy: 0.0,
            majority_baseline_seeds: vec![],
            near_tie_accuracy: 0.0,
            majority_near_tie_accuracy: 0.0,
            held_out_gemms: 0,
            scored_gemms: 0,
        }
    }

    #[test]
    fn amdahl_over_the_gemm_share_per_dtype() {
        let s = [scenario(8, "bert", 1.25), scenario(8, "gnmt", 2.0)];
        let e = end_to_end(&s, true);
        let bert = e
            .iter()
            .find(|e| e.app == "bert")
            .map_or(0.0, |e| e.speedup);
        // f = 0.55, s = 1.25: 1 / (0.45 + 0.44) = 1.1236
        assert!((bert - 1.0 / (0.45 + 0.55 / 1.25)).abs() < 1e-12, "{bert}");
        let gnmt = e
            .iter()
            .find(|e| e.app == "gnmt")
            .map_or(0.0, |e| e.speedup);
        assert!((gnmt - 1.0 / (0.5 + 0.25)).abs() < 1e-12, "{gnmt}");
        // Mixed precision: BERT's share is 36 %.
        let mp = end_to_end(&s, false);
        assert!(mp
            .iter()
            .any(|e| e.app == "bert" && (e.gemm_share - 0.36).abs() < 1e-12));
        // An app absent from the evaluation gets no row.
        assert!(end_to_end(&[scenario(2, "ds2", 1.1)], true).is_empty());
    }
}
