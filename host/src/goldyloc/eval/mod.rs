//! The configurations of dissertation 7.4.5 / SPEC 5.5 on `n` independent copies of each
//! evaluated GEMM, `n` in {2, 4, 8, 16}, and the heterogeneous mixes of 7.5.7.
//!
//! Every configuration runs through the shipped firmware CP in the one event loop of a
//! one-node system driving the GEMM model ([`super::in_loop`]): the GEMMs are enqueued
//! as AQL packets, and the CP's classification, prediction, kernel-object swap, grouping
//! (CD `c` < `n`: groups of `c`, the next when the last member completes) and its own
//! time (`CpCostModel`: board-calibrated instructions per operation kind at 1.5 GHz,
//! 31-cycle memory latency; docs/calibration.md) all come out of the run. Each run is two
//! iterations of the same GEMMs on the same queues (a training loop); the second, with
//! the shapes already known to the CP, is the one measured. [`cp_charge`] still replays
//! the firmware alone to tabulate its cost per decision.

use super::in_loop::{self, CpMode, GpuSplit, LoopRun, Workload};
use super::train::{cross_validate, train_rows, CrossValidation, TrainedModel};
use super::tune::TunedGemm;
use super::{geomean, Context};
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::queue::{demo, sample};
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::node::GpuNodeConfig;
use nmcp_firmware::cp::features::{CuResources, FEATURE_COUNT, FRAC_BITS};
use nmcp_firmware::cp::{CdPredictor, CpCostModel, GemmCandidate, CLASS_COUNT, MAX_CD};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod cp_charge;
mod end_to_end;
mod hetero;
mod report;

pub use cp_charge::{constant_predictor, cp_charge, CpCharge};
pub use end_to_end::{end_to_end, EndToEnd};
use hetero::evaluate_hetero;
pub use report::*;

/// Oracle runs sequentially unless a CD gains at least this much.
pub const ORACLE_MIN_GAIN: f64 = 1.05;
/// A speedup within this band of 1 counts as unchanged.
pub const UNCHANGED_BAND: f64 = 0.02;
/// The available-GEMM scenarios.
pub const SCENARIOS: [u32; 4] = [2, 4, 8, 16];
/// A predicted CD whose speedup (16 copies, GO kernels, over back to back) is within this
/// fraction of the best CD's counts as a near tie: the two are closer than a measurement's
/// run-to-run spread, so the label between them is a coin toss.
pub const NEAR_TIE_CD_BAND: f64 = 0.02;
/// Seeds of the cross-validation (the model's seed and the next ones): the accuracy's
/// spread.
pub const CV_SEEDS: u64 = 3;

/// The shape group of a GEMM for the cross-validation: its size (M, N, K, batch); the
/// transposed variants and data types of one size share a fold.
pub fn shape_group(s: &GemmShape) -> String {
    format!("{}x{}x{}x{}", s.m, s.n, s.k, s.batch)
}

/// Accuracy of one cross-validation in one scenario.
#[derive(Debug, Clone, Default)]
struct Accuracy {
    accuracy: f64,
    majority: f64,
    /// Share of predictions whose CD's speedup is within [`NEAR_TIE_CD_BAND`] of the
    /// best CD's (a near tie counts as right).
    near_tie: f64,
    /// The majority class scored the same way.
    majority_near_tie: f64,
    count: usize,
    confusion: Vec<Vec<u32>>,
}

/// Scores every dataset row with the fixed-point model of the fold that held it out
/// (the firmware's arithmetic), against its profiled best CD with `n` available; and the
/// majority-class baseline: each fold's most frequent best CD (at `n`) among its
/// training rows, predicted for every held-out row.
fn score(
    cv: &CrossValidation,
    tuned: &[TunedGemm],
    features: &[Option<(Vec<f64>, [i64; FEATURE_COUNT])>],
    n: u32,
) -> Accuracy {
    let classes = CONCURRENCY_DEGREES.len();
    let majority: Vec<usize> = (0..cv.models.len())
        .map(|f| {
            let mut counts = vec![0usize; classes];
            for r in cv.training_rows(f) {
                if let Some(c) = tuned
                    .get(r)
                    .and_then(|t| counts.get_mut(t.best_cd_index(n)))
                {
                    *c += 1;
                }
            }
            // The most frequent class; ties to the lower CD.
            let mut best = 0;
            for (c, &k) in counts.iter().enumerate() {
                if counts.get(best).is_some_and(|&b| k > b) {
                    best = c;
                }
            }
            best
        })
        .collect();
    let predictors: Vec<CdPredictor> = cv.models.iter().map(|m| m.fixed.to_predictor()).collect();
    let mut a = Accuracy {
        confusion: vec![vec![0; classes]; classes],
        ..Accuracy::default()
    };
    let (mut right, mut right_majority) = (0usize, 0usize);
    let (mut near, mut near_majority) = (0usize, 0usize);
    let speedup = |t: &TunedGemm, i: usize| t.speedup(i);
    for (i, (t, f)) in tuned.iter().zip(features).enumerate() {
        let (Some((_, raw)), Some(fold)) = (f, cv.fold_of.get(i).copied().flatten()) else {
            continue;
        };
        let Some(p) = predictors.get(fold) else {
            continue;
        };
        let truth = t.best_cd_index(n);
        let pred = cd_index(u32::from(p.predict_cd(raw)).min(n));
        if let Some(cell) = a.confusion.get_mut(truth).and_then(|r| r.get_mut(pred)) {
            *cell += 1;
        }
        a.count += 1;
        right += usize::from(truth == pred);
        right_majority += usize::from(majority.get(fold) == Some(&truth));
        let best = speedup(t, truth);
        let close = |i: usize| speedup(t, i) * (1.0 + NEAR_TIE_CD_BAND) >= best;
        near += usize::from(close(pred));
        near_majority += usize::from(majority.get(fold).is_some_and(|&m| close(m)));
    }
    a.accuracy = right as f64 / a.count.max(1) as f64;
    a.majority = right_majority as f64 / a.count.max(1) as f64;
    a.near_tie = near as f64 / a.count.max(1) as f64;
    a.majority_near_tie = near_majority as f64 / a.count.max(1) as f64;
    a
}

/// The GEMM extension record of the baseline library: only the isolated kernel, for
/// every CD (what a GPU without GOLDYLOC's GO library dispatches).
fn baseline_ext(t: &TunedGemm, catalog: &Catalog) -> Option<GemmExt> {
    let mut ext = t.shape.to_ext();
    let k = catalog.get(*t.candidates.first()? as usize)?;
    ext.kernels.push(k.meta(t.shape.dtype)).ok()?;
    ext.cd_choice = [0; CONCURRENCY_DEGREES.len()];
    Some(ext)
}

/// One run of a configuration through the firmware (see [`in_loop`]).
struct ConfigRun<'a> {
    name: &'static str,
    records: &'a [GemmExt],
    one_stream: bool,
    /// The CP: baseline, or GOLDYLOC with a constant CD or the trained predictor.
    cp: Cp,
    split: GpuSplit,
}

impl<'a> ConfigRun<'a> {
    fn new(name: &'static str, records: &'a [GemmExt], cp: Cp, split: GpuSplit) -> Self {
        Self {
            name,
            records,
            one_stream: false,
            cp,
            split,
        }
    }

    /// Every GEMM on one stream (Sequential).
    fn one_stream(self) -> Self {
        Self {
            one_stream: true,
            ..self
        }
    }
}

/// Sequential, Default, GO-Kernels and GOLDYLOC on the whole GPU, for the baseline
/// library `base` and the GO library `go` (one record per distinct GEMM).
fn shared_configs<'a>(base: &'a [GemmExt], go: &'a [GemmExt]) -> [ConfigRun<'a>; 4] {
    let shared = GpuSplit::Shared;
    [
        ConfigRun::new("Sequential", base, Cp::Baseline, shared).one_stream(),
        ConfigRun::new("Default", base, Cp::Baseline, shared),
        ConfigRun::new("GO-Kernels", go, Cp::Constant(MAX_CD), shared),
        ConfigRun::new("GOLDYLOC", go, Cp::Trained, shared),
    ]
}

/// [`CpMode`] without the predictor's lifetime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cp {
    Baseline,
    Constant(u8),
    Trained,
}

fn run_config(
    ctx: &Context,
    label: &str,
    predictor: &CdPredictor,
    packets: &[usize],
    c: &ConfigRun<'_>,
) -> Result<LoopRun, String> {
    let work = Workload {
        records: c.records,
        packets,
        one_stream: c.one_stream,
        hw_queues: ctx.hw_queues,
    };
    let mode = match c.cp {
        Cp::Baseline => CpMode::Baseline,
        Cp::Constant(cd) => CpMode::Constant(cd),
        Cp::Trained => CpMode::Predictor(predictor),
    };
    in_loop::run(ctx, c.split, mode, &work).map_err(|e| format!("{label}, {}: {e}", c.name))
}

/// Runs every configuration of one GEMM in one scenario through the firmware CP.
fn evaluate_one(
    ctx: &Context,
    t: &TunedGemm,
    app: &str,
    shape: &GemmShape,
    n: u32,
    predictor: &CdPredictor,
) -> Result<GemmResult, String> {
    let label = format!("{app} {shape} with {n} GEMMs");
    let base = [baseline_ext(t, &ctx.catalog)
        .ok_or_else(|| format!("{label}: no isolated kernel in the catalog"))?];
    let go = [t.to_ext(&ctx.catalog)];
    let best = t.best_cd_index(n);
    let oracle_cd = if t.speedup(best) >= ORACLE_MIN_GAIN {
        cd_of(best)
    } else {
        1
    };
    let [seq, default, go_kernels, goldyloc_run] = shared_configs(&base, &go);
    // A partition per kernel that can run at once: with streams on Q hardware queues at
    // most Q kernels run together, so the CUs (and LLC, HBM) split Q ways, not n.
    let parts = ctx.hw_queues.map_or(n, |q| n.min(q));
    let configs = [
        seq,
        default,
        go_kernels,
        goldyloc_run,
        ConfigRun::new("Oracle", &go, Cp::Constant(oracle_cd), GpuSplit::Shared),
        ConfigRun::new(
            "CU-Partition",
            &base,
            Cp::Baseline,
            GpuSplit::CuPartition(parts),
        ),
        ConfigRun::new(
            "Resource-Partition",
            &base,
            Cp::Baseline,
            GpuSplit::ResourcePartition(parts),
        ),
    ];
    let packets = vec![0usize; n as usize];
    let mut time_ns = Vec::with_capacity(configs.len());
    let mut cp_busy_ns = Vec::with_capacity(configs.len());
    let mut goldyloc = None;
    for c in &configs {
        let r = run_config(ctx, &label, predictor, &packets, c)?;
        time_ns.push(r.makespan_ns);
        cp_busy_ns.push(r.cp_busy_ns);
        if c.cp == Cp::Trained {
            goldyloc = Some(r);
        }
    }
    let gold = goldyloc.ok_or_else(|| format!("{label}: GOLDYLOC did not run"))?;
    let best_constant_cd = if ctx.cd_sweep {
        let go_kernels = CONFIGS.iter().position(|c| *c == "GO-Kernels");
        let top = go_kernels.and_then(|i| time_ns.get(i)).copied();
        let mut best = top.map(|t| (MAX_CD.min(u8::try_from(n).unwrap_or(MAX_CD)), t));
        for &cd in CONCURRENCY_DEGREES
            .iter()
            .filter(|&&c| u32::from(c) < n.min(u32::from(MAX_CD)))
        {
            let c = ConfigRun::new("constant CD", &go, Cp::Constant(cd), GpuSplit::Shared);
            let t = run_config(ctx, &label, predictor, &packets, &c)?.makespan_ns;
            if best.is_none_or(|(_, b)| t < b) {
                best = Some((cd, t));
            }
        }
        best
    } else {
        None
    };
    Ok(GemmResult {
        app: app.to_string(),
        gemm: shape.to_string(),
        n,
        time_ns,
        cp_busy_ns,
        predicted_cd: gold.dispatched.first().map_or(1, |d| d.1),
        dispatched_cd: gold.max_cd(),
        oracle_cd,
        best_constant_cd,
    })
}

/// Geomean over `rows` of configuration `config`'s time over the best constant CD's
/// (`GemmResult::best_constant_cd`); `None` when a row has no sweep.
fn sweep_ratio(rows: &[&GemmResult], config: usize) -> Option<f64> {
    let ratios: Option<Vec<f64>> = rows
        .iter()
        .map(|g| Some(g.time_ns.get(config)? / g.best_constant_cd?.1))
        .collect();
    ratios.filter(|r| !r.is_empty()).map(geomean)
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
    hetero: &[(String, GemmShape, GemmShape)],
) -> EvalReport {
    let res = ctx.gpu.cu_resources();
    // Cross-validation by shape group, for CV_SEEDS seeds from the model's: every GEMM is
    // predicted (in the firmware, in the loop) by the model of the fold that never saw
    // its size; the first seed's folds drive the configurations, all seeds the spread.
    let cv_data: Vec<Option<(Vec<f64>, usize)>> = tuned
        .iter()
        .zip(features)
        .map(|(t, f)| f.as_ref().map(|(x, _)| (x.clone(), t.best_cd_index(16))))
        .collect();
    let groups: Vec<String> = tuned.iter().map(|t| shape_group(&t.shape)).collect();
    let cvs: Vec<CrossValidation> = (0..CV_SEEDS)
        .into_par_iter()
        .map(|k| cross_validate(&cv_data, &groups, model.seed.wrapping_add(k)))
        .collect();
    let fallback;
    let cv = match cvs.first() {
        Some(c) => c,
        None => {
            fallback = cross_validate(&cv_data, &groups, model.seed);
            &fallback
        }
    };
    // The groups each fold model trained on: a GEMM counts as held out when its group
    // is not among them (true by construction; checked, not assumed).
    let trained_groups: Vec<std::collections::BTreeSet<&String>> = (0..cv.models.len())
        .map(|f| cv.training_rows(f).filter_map(|r| groups.get(r)).collect())
        .collect();
    let fold_predictors: Vec<CdPredictor> =
        cv.models.iter().map(|m| m.fixed.to_predictor()).collect();
    let held_out_predictor = |ti: usize| -> Option<&CdPredictor> {
        fold_predictors.get(cv.fold_of.get(ti).copied().flatten()?)
    };
    let cp_charges: Vec<CpCharge> = SCENARIOS
        .iter()
        .flat_map(|&n| {
            CONCURRENCY_DEGREES
                .iter()
                .filter(move |&&c| u32::from(c) <= n)
                .map(move |&c| (n, c))
        })
        .collect::<Vec<_>>()
        .par_iter()
        .map(|&(n, c)| cp_charge(n, c, &res))
        .collect();
    let by_shape: BTreeMap<String, usize> = tuned
        .iter()
        .enumerate()
        .map(|(i, t)| (t.shape.to_string(), i))
        .collect();
    let jobs: Vec<(usize, &(String, GemmShape), u32)> = eval
        .iter()
        .filter_map(|e| by_shape.get(&e.1.to_string()).map(|&i| (i, e)))
        .flat_map(|(i, e)| SCENARIOS.iter().map(move |&n| (i, e, n)))
        .collect();
    let pb = ctx.bar(jobs.len(), "evaluating");
    let outcomes: Vec<Result<GemmResult, String>> = jobs
        .par_iter()
        .filter_map(|&(ti, (app, shape), n)| {
            let t = tuned.get(ti)?;
            let r = match held_out_predictor(ti) {
                Some(p) => evaluate_one(ctx, t, app, shape, n, p),
                None => Err(format!("{app} {shape}: no features, no held-out predictor")),
            };
            pb.inc(1);
            Some(r)
        })
        .collect();
    pb.finish_and_clear();
    let mut gemms = Vec::with_capacity(outcomes.len());
    let mut loop_failures = Vec::new();
    for o in outcomes {
        match o {
            Ok(g) => gemms.push(g),
            Err(e) => loop_failures.push(e),
        }
    }

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
        let scored: Vec<Accuracy> = cvs.iter().map(|c| score(c, tuned, features, n)).collect();
        let first = scored.first().cloned().unwrap_or_default();
        let held_out_gemms = rows
            .iter()
            .filter(|g| {
                by_shape.get(&g.gemm).is_some_and(|&ti| {
                    let fold = cv.fold_of.get(ti).copied().flatten();
                    match (fold.and_then(|f| trained_groups.get(f)), groups.get(ti)) {
                        (Some(seen), Some(group)) => !seen.contains(group),
                        _ => false,
                    }
                })
            })
            .count();
        let over_default = summarise(&rows, 1);
        let over_sequential = summarise(&rows, 0);
        let at = |v: &[f64], i: usize| v.get(i).copied().unwrap_or(f64::NAN);
        scenarios.push(ScenarioReport {
            n,
            apps,
            all_over_sequential: over_sequential.clone(),
            all_over_default: over_default.clone(),
            max_over_sequential,
            split,
            accuracy: first.accuracy,
            confusion: first.confusion,
            gemms: n,
            speedup_over_default: OverDefault {
                go_kernels: at(&over_default, 2),
                goldyloc: at(&over_default, 3),
                oracle: at(&over_default, 4),
                cu_partition: at(&over_default, 5),
                resource_partition: at(&over_default, 6),
            },
            speedup_over_sequential: OverSequential {
                default: at(&over_sequential, 1),
            },
            predictor_accuracy: first.accuracy,
            predictor_accuracy_seeds: scored.iter().map(|a| a.accuracy).collect(),
            majority_baseline_accuracy: first.majority,
            majority_baseline_seeds: scored.iter().map(|a| a.majority).collect(),
            near_tie_accuracy: first.near_tie,
            majority_near_tie_accuracy: first.majority_near_tie,
            held_out_gemms,
            scored_gemms: first.count,
            best_constant_cd_over_go_kernels: sweep_ratio(&rows, 2),
            goldyloc_over_best_constant_cd: sweep_ratio(&rows, 3).map(|r| 1.0 / r),
        });
    }

    // Fixed point vs f64, each row under the model that held it out.
    let mut agree_all = (0usize, 0usize);
    let mut disagreements = Vec::new();
    for (i, (t, f)) in tuned.iter().zip(features).enumerate() {
        let (Some((x, raw)), Some(m)) = (f, cv.model_for(i)) else {
            continue;
        };
        let a = m.predict_class(x);
        let b = m.fixed.to_predictor().predict_class(raw);
        agree_all.1 += 1;
        if a == b {
            agree_all.0 += 1;
        } else {
            disagreements.push((t.shape.to_string(), cd_of(a), cd_of(b)));
        }
    }
    let pair_predictors = held_out_pair_predictors(cv, &cv_data, tuned, hetero);
    let (hetero, hetero_pairs, hetero_failures) =
        evaluate_hetero(ctx, tuned, cv, &pair_predictors, hetero);
    loop_failures.extend(hetero_failures);
    let all_fp32 = !tuned.is_empty()
        && tuned
            .iter()
            .all(|t| t.shape.dtype == nmcp_isa::gemm_ext::GemmDataType::F32);
    let e2e = end_to_end(&scenarios, all_fp32);
    EvalReport {
        gpu: ctx.gpu.name.clone(),
        gemm_count: eval.len(),
        dataset_size: tuned.len(),
        scenarios,
        gemms,
        fixed_point_agreement: agree_all.0 as f64 / agree_all.1.max(1) as f64,
        fixed_point_agreement_all: agree_all.0 as f64 / agree_all.1.max(1) as f64,
        disagreements,
        train_accuracy: model.train_accuracy,
        cross_validation_seeds: cvs.iter().map(|c| c.seed).collect(),
        cp_charges,
        hetero,
        hetero_pairs,
        loop_failures,
        end_to_end: e2e,
    }
}

/// Predictors for heterogeneous pairs whose two sizes lie in different folds: a model
/// trained on the folds holding neither (so neither size was seen), keyed by the two
/// folds in order.
fn held_out_pair_predictors(
    cv: &CrossValidation,
    data: &[Option<(Vec<f64>, usize)>],
    tuned: &[TunedGemm],
    pairs: &[(String, GemmShape, GemmShape)],
) -> BTreeMap<(usize, usize), CdPredictor> {
    let index: BTreeMap<String, usize> = tuned
        .iter()
        .enumerate()
        .map(|(i, t)| (t.shape.to_string(), i))
        .collect();
    let fold = |s: &GemmShape| {
        index
            .get(&s.to_string())
            .and_then(|&i| cv.fold_of.get(i).copied().flatten())
    };
    let mut needed: Vec<(usize, usize)> = pairs
        .iter()
        .filter_map(|(_, a, b)| {
            let (fa, fb) = (fold(a)?, fold(b)?);
            (fa != fb).then_some((fa.min(fb), fa.max(fb)))
        })
        .collect();
    needed.sort_unstable();
    needed.dedup();
    let rows: Vec<(Vec<f64>, usize)> = data
        .iter()
        .map(|d| d.clone().unwrap_or_else(|| (vec![0.0; FEATURE_COUNT], 0)))
        .collect();
    needed
        .par_iter()
        .map(|&(fa, fb)| {
            let idx: Vec<usize> = cv
                .fold_of
                .iter()
                .enumerate()
                .filter(|(_, f)| f.is_some_and(|f| f != fa && f != fb))
                .map(|(i, _)| i)
                .collect();
            ((fa, fb), train_rows(&rows, &idx).fixed.to_predictor())
        })
        .collect()
}
