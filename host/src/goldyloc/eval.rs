//! The configurations of dissertation 7.4.5 / SPEC 5.5 on `n` independent copies of each
//! evaluated GEMM, `n` in {2, 4, 8, 16}.
//!
//! With CD `c` < `n`, the CP dispatches `n / c` rounds of `c` concurrent GEMMs; each
//! round pays the queue read and write of the CP decision ([`CP_QUEUE_IO_NS`]); the
//! predictor's own latency is hidden behind the previous kernels (7.4.4.2).

use super::train::TrainedModel;
use super::tune::TunedGemm;
use super::{geomean, Context};
use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::sim::{isolated_time, makespan_partitioned};
use nmcp_firmware::cp::features::FEATURE_COUNT;
use nmcp_isa::gemm_ext::CONCURRENCY_DEGREES;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Queue read plus write per CP decision (7.4.4.2: ~0.32 us each).
pub const CP_QUEUE_IO_NS: f64 = 640.0;
/// Oracle runs sequentially unless a CD gains at least this much.
pub const ORACLE_MIN_GAIN: f64 = 1.05;
/// A speedup within this band of 1 counts as unchanged.
pub const UNCHANGED_BAND: f64 = 0.02;
/// The available-GEMM scenarios.
pub const SCENARIOS: [u32; 4] = [2, 4, 8, 16];
/// Configuration names, in report order.
pub const CONFIGS: [&str; 7] = [
    "Sequential",
    "Default",
    "GO-Kernels",
    "GOLDYLOC",
    "Oracle",
    "CU-Partition",
    "Resource-Partition",
];

/// One GEMM in one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GemmResult {
    /// Application.
    pub app: String,
    /// `M_N_K_T1T2` label.
    pub gemm: String,
    /// Available GEMMs.
    pub n: u32,
    /// Time per configuration (order of [`CONFIGS`]), ns.
    pub time_ns: Vec<f64>,
    /// CD the fixed-point predictor chose (before `min` with `n`).
    pub predicted_cd: u8,
    /// Oracle CD.
    pub oracle_cd: u8,
}

/// Per-app geomean speedups of one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AppSummary {
    /// Application.
    pub app: String,
    /// GEMMs.
    pub gemms: usize,
    /// Geomean speedup over Sequential per configuration.
    pub over_sequential: Vec<f64>,
    /// Geomean speedup over Default per configuration.
    pub over_default: Vec<f64>,
}

/// One available-GEMM scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioReport {
    /// Available GEMMs.
    pub n: u32,
    /// Per-app summaries.
    pub apps: Vec<AppSummary>,
    /// Geomean over all GEMMs, over Sequential.
    pub all_over_sequential: Vec<f64>,
    /// Geomean over all GEMMs, over Default.
    pub all_over_default: Vec<f64>,
    /// Max speedup over Sequential per configuration.
    pub max_over_sequential: Vec<f64>,
    /// GOLDYLOC vs Default: share improved, unchanged, degraded.
    pub split: [f64; 3],
    /// Predictor accuracy on the held-out test set in this scenario.
    pub accuracy: f64,
    /// Confusion matrix `[true class][predicted class]` over CDs 1..16 on the test set.
    pub confusion: Vec<Vec<u32>>,
}

/// The whole evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EvalReport {
    /// GPU name.
    pub gpu: String,
    /// Evaluated GEMMs (per app, unique within app).
    pub gemm_count: usize,
    /// Dataset size used for training.
    pub dataset_size: usize,
    /// Per scenario.
    pub scenarios: Vec<ScenarioReport>,
    /// Per-GEMM results.
    pub gemms: Vec<GemmResult>,
    /// Share of the test set where fixed point and f64 pick the same class.
    pub fixed_point_agreement: f64,
    /// Over the whole dataset.
    pub fixed_point_agreement_all: f64,
    /// GEMMs where they disagree: (label, f64 class CD, fixed class CD).
    pub disagreements: Vec<(String, u8, u8)>,
    /// Training accuracy.
    pub train_accuracy: f64,
}

fn cd_of(i: usize) -> u8 {
    CONCURRENCY_DEGREES.get(i).copied().unwrap_or(1)
}

fn cd_index(cd: u32) -> usize {
    CONCURRENCY_DEGREES
        .iter()
        .position(|&c| u32::from(c) == cd)
        .unwrap_or(0)
}

/// Runs the evaluation. `dataset` pairs each tuned GEMM with its features (real and
/// raw); `eval` are the (app, shape) pairs to evaluate; all eval shapes must be tuned.
pub fn evaluate(
    ctx: &Context,
    tuned: &[TunedGemm],
    features: &[Option<(Vec<f64>, [i64; FEATURE_COUNT])>],
    model: &TrainedModel,
    eval: &[(String, GemmShape)],
) -> EvalReport {
    let predictor = model.fixed.to_predictor();
    let by_shape: BTreeMap<String, usize> = tuned
        .iter()
        .enumerate()
        .map(|(i, t)| (t.shape.label(), i))
        .collect();
    let jobs: Vec<(usize, &(String, GemmShape), u32)> = eval
        .iter()
        .filter_map(|e| by_shape.get(&e.1.label()).map(|&i| (i, e)))
        .flat_map(|(i, e)| SCENARIOS.iter().map(move |&n| (i, e, n)))
        .collect();
    let pb = ctx.bar(jobs.len(), "evaluating");
    let gemms: Vec<GemmResult> = jobs
        .par_iter()
        .filter_map(|&(ti, (app, shape), n)| {
            let t = tuned.get(ti)?;
            let (_, raw) = features.get(ti)?.as_ref()?;
            let iso = ctx.catalog.get(t.candidates.first().copied()? as usize)?;
            let ni = cd_index(n);
            let nf = f64::from(n);
            let seq = nf * t.t_isolated;
            let default = t.default_time(ni);
            let go = t.go_time(ni);
            let pred = u32::from(predictor.predict_cd(raw));
            let c = pred.min(n).max(1);
            let rounds = nf / f64::from(c);
            let goldyloc = if c == 1 {
                seq + nf * CP_QUEUE_IO_NS
            } else {
                rounds * (t.go_time(cd_index(c)) + CP_QUEUE_IO_NS)
            };
            let best = t.best_cd_index(n);
            let oracle_cd = if t.speedup(best) >= ORACLE_MIN_GAIN {
                cd_of(best)
            } else {
                1
            };
            let oracle = if oracle_cd == 1 {
                seq
            } else {
                nf / f64::from(oracle_cd) * t.go_time(usize::from(best as u8))
            };
            let runs = vec![(*shape, *iso); n as usize];
            let cu_part =
                makespan_partitioned(&ctx.gpu, &ctx.cal, &runs, n).map_or(f64::INFINITY, |r| r.0);
            let res_part =
                isolated_time(&ctx.gpu.partition(n), &ctx.cal, shape, iso).unwrap_or(f64::INFINITY);
            pb.inc(1);
            Some(GemmResult {
                app: app.clone(),
                gemm: shape.label(),
                n,
                time_ns: vec![seq, default, go, goldyloc, oracle, cu_part, res_part],
                predicted_cd: u8::try_from(pred).unwrap_or(1),
                oracle_cd,
            })
        })
        .collect();
    pb.finish_and_clear();

    // Predictor accuracy per scenario on the test set.
    let mut scenarios = Vec::new();
    for &n in &SCENARIOS {
        let rows: Vec<&GemmResult> = gemms.iter().filter(|g| g.n == n).collect();
        let summarise = |sel: &[&GemmResult], base: usize| -> Vec<f64> {
            (0..CONFIGS.len())
                .map(|c| {
                    geomean(
                        sel.iter()
                            .filter_map(|g| Some(g.time_ns.get(base)? / g.time_ns.get(c)?)),
                    )
                })
                .collect()
        };
        let mut apps_seen: Vec<String> = Vec::new();
        for r in &rows {
            if !apps_seen.contains(&r.app) {
                apps_seen.push(r.app.clone());
            }
        }
        let apps = apps_seen
            .iter()
            .map(|a| {
                let sel: Vec<&GemmResult> = rows.iter().copied().filter(|g| &g.app == a).collect();
                AppSummary {
                    app: a.clone(),
                    gemms: sel.len(),
                    over_sequential: summarise(&sel, 0),
                    over_default: summarise(&sel, 1),
                }
            })
            .collect();
        let max_over_sequential = (0..CONFIGS.len())
            .map(|c| {
                rows.iter()
                    .filter_map(|g| Some(g.time_ns.first()? / g.time_ns.get(c)?))
                    .fold(0.0, f64::max)
            })
            .collect();
        let mut split = [0.0; 3];
        for g in &rows {
            let s =
                g.time_ns.get(1).copied().unwrap_or(1.0) / g.time_ns.get(3).copied().unwrap_or(1.0);
            let slot = if s > 1.0 + UNCHANGED_BAND {
                0
            } else if s < 1.0 - UNCHANGED_BAND {
                2
            } else {
                1
            };
            if let Some(x) = split.get_mut(slot) {
                *x += 1.0;
            }
        }
        let total = rows.len().max(1) as f64;
        for x in &mut split {
            *x /= total;
        }
        let mut confusion = vec![vec![0u32; CONCURRENCY_DEGREES.len()]; CONCURRENCY_DEGREES.len()];
        let mut correct = 0usize;
        let mut count = 0usize;
        for &i in &model.test {
            let (Some(t), Some(Some((_, raw)))) = (tuned.get(i), features.get(i)) else {
                continue;
            };
            let truth = t.best_cd_index(n);
            let pred = cd_index(u32::from(predictor.predict_cd(raw)).min(n));
            if let Some(cell) = confusion.get_mut(truth).and_then(|r| r.get_mut(pred)) {
                *cell += 1;
            }
            count += 1;
            if truth == pred {
                correct += 1;
            }
        }
        scenarios.push(ScenarioReport {
            n,
            apps,
            all_over_sequential: summarise(&rows, 0),
            all_over_default: summarise(&rows, 1),
            max_over_sequential,
            split,
            accuracy: correct as f64 / count.max(1) as f64,
            confusion,
        });
    }

    // Fixed point vs f64.
    let mut agree_test = (0usize, 0usize);
    let mut agree_all = (0usize, 0usize);
    let mut disagreements = Vec::new();
    for (i, (t, f)) in tuned.iter().zip(features).enumerate() {
        let Some((x, raw)) = f else { continue };
        let a = model.predict_class(x);
        let b = predictor.predict_class(raw);
        agree_all.1 += 1;
        if a == b {
            agree_all.0 += 1;
        } else {
            disagreements.push((t.shape.label(), cd_of(a), cd_of(b)));
        }
        if model.test.binary_search(&i).is_ok() {
            agree_test.1 += 1;
            if a == b {
                agree_test.0 += 1;
            }
        }
    }
    let mut uniq: Vec<&str> = eval.iter().map(|e| e.0.as_str()).collect();
    uniq.dedup();
    EvalReport {
        gpu: ctx.gpu.name.clone(),
        gemm_count: eval.len(),
        dataset_size: tuned.len(),
        scenarios,
        gemms,
        fixed_point_agreement: agree_test.0 as f64 / agree_test.1.max(1) as f64,
        fixed_point_agreement_all: agree_all.0 as f64 / agree_all.1.max(1) as f64,
        disagreements,
        train_accuracy: model.train_accuracy,
    }
}
