//! The offline GOLDYLOC pipeline as library calls: prepare the GEMM lists for a GPU, tune
//! (cached), train (cached), evaluate; plus the two products other commands need (the
//! default trained predictor of a GPU, the GO library of one application).

use std::path::PathBuf;
use std::time::Instant;

use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::workload::{
    dataset_gemms, evaluated_gemms, parse_gemm_csv, unique_shapes, DATASET_SEED, DATASET_SIZE,
};
use nmcp_isa::gemm_ext::{GemmDataType, GemmExt, CONCURRENCY_DEGREES};
use rayon::prelude::*;
use serde::Serialize;

use super::cache::{self, Cache};
use super::eval::{self, EvalReport};
use super::train::{self, dataset, real_features, PredictorFile, TrainedModel, DEFAULT_SEED};
use super::tune::{tune_all, tune_all_checkpointed, TunedGemm};
use super::Context;

/// GEMMs per application kept by `--quick`.
const QUICK_PER_APP: usize = 3;
/// Every how many extra dataset GEMMs `--quick` keeps one.
const QUICK_EXTRA_STRIDE: usize = 25;
/// Every how many heterogeneous pairs (consecutive distinct GEMMs of an app) the full
/// evaluation simulates (each pair costs a few 16-kernel simulations per scenario).
const HETERO_STRIDE: usize = 6;

/// What a pipeline run works on.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// GPU preset name.
    pub gpu: String,
    /// A small subset (a few GEMMs per app).
    pub quick: bool,
    /// Read and write cached step results.
    pub cache: bool,
    /// A user GEMM list (CSV) instead of the networks.
    pub gemms: Option<PathBuf>,
    /// Tune 20 % exhaustively, predict the rest from their nearest neighbours.
    pub knn: bool,
    /// Evaluation: the in-loop sweep of constant CDs ([`super::Context::cd_sweep`]).
    pub cd_sweep: bool,
    /// Show progress bars on stderr.
    pub progress: bool,
    /// Every GEMM (networks, dataset, user list) in this data type; `None`: the networks'
    /// and dataset's FP16, a user list's own.
    pub dtype: Option<GemmDataType>,
    /// The loaded-latency mechanism (`Calibration::loaded_latency`).
    pub loaded_latency: bool,
    /// Override of the GPU's inter-kernel gap of one stream, ns.
    pub inter_kernel_gap_ns: Option<f64>,
    /// Hardware queues the streams map onto ([`super::Context::hw_queues`]).
    pub hw_queues: Option<u32>,
    /// Head-change CD semantics ([`super::Context::release_on_dispatch`]).
    pub release_on_dispatch: bool,
}

impl Default for Options {
    /// The full flow on the MI100, cached, quietly.
    fn default() -> Self {
        Self {
            gpu: "mi100".into(),
            quick: false,
            cache: true,
            gemms: None,
            knn: false,
            cd_sweep: false,
            progress: false,
            dtype: None,
            loaded_latency: false,
            inter_kernel_gap_ns: None,
            hw_queues: None,
            release_on_dispatch: false,
        }
    }
}

/// The GEMM lists of one run on one GPU.
pub struct Prepared {
    /// GPU, calibration, catalog, cache.
    pub ctx: Context,
    /// The evaluated GEMMs, by application.
    pub eval: Vec<(String, GemmShape)>,
    /// Heterogeneous pairs (consecutive distinct GEMMs of an application).
    pub hetero: Vec<(String, GemmShape, GemmShape)>,
    /// Every shape to tune: the evaluated GEMMs and the dataset.
    pub shapes: Vec<GemmShape>,
}

/// Prepares a run: the GPU, the cache, the evaluated GEMMs (the networks' or a user CSV),
/// the dataset and the heterogeneous pairs.
///
/// # Errors
/// An unknown GPU, an unreadable or malformed GEMM CSV.
pub fn prepare(c: &Options) -> Result<Prepared, Box<dyn std::error::Error>> {
    let mut gpu = GpuConfig::preset(&c.gpu)?;
    if let Some(g) = c.inter_kernel_gap_ns {
        gpu.inter_kernel_gap_ns = g;
    }
    let cache = c.cache.then(Cache::default_location);
    let mut ctx = Context::new(gpu, cache, c.progress);
    if c.loaded_latency {
        ctx.cal.loaded_latency = Some(nmcp_emulator::gpu::gemm::LoadedLatency::for_memory_latency(
            ctx.cal.memory_latency_ns,
        ));
    }
    ctx.hw_queues = c.hw_queues;
    ctx.release_on_dispatch = c.release_on_dispatch;
    ctx.knn = c.knn;
    ctx.cd_sweep = c.cd_sweep;
    let mut eval: Vec<(String, GemmShape)> = match &c.gemms {
        Some(path) => {
            let text = crate::cmd::io::read_input_text(path)?;
            let list = parse_gemm_csv(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            // The evaluation scores each listed GEMM once (its speed-up does not depend on
            // how often the application runs it); say so rather than drop counts silently.
            let counted = list.iter().filter(|(_, n)| *n > 1).count();
            if counted > 0 {
                eprintln!(
                    "{}: note: {counted} GEMMs have a count above 1; the evaluation scores each listed GEMM once (list it again to weigh it more)",
                    path.display()
                );
            }
            list.into_iter()
                .map(|(s, _)| ("user".to_string(), s))
                .collect()
        }
        None => evaluated_gemms()
            .into_iter()
            .map(|g| (g.app, g.shape))
            .collect(),
    };
    if c.quick && c.gemms.is_none() {
        let mut per_app: std::collections::BTreeMap<String, usize> = Default::default();
        eval.retain(|(a, _)| {
            let n = per_app.entry(a.clone()).or_insert(0);
            *n += 1;
            *n <= QUICK_PER_APP
        });
    }
    let mut base = dataset_gemms(DATASET_SIZE, DATASET_SEED);
    if let Some(d) = c.dtype {
        // Same sizes, another element type: tuning, GO library, labels and the
        // evaluation all follow (the FP32 matrix rate, twice the bytes per element).
        for (_, s) in &mut eval {
            s.dtype = d;
        }
        for s in &mut base {
            s.dtype = d;
        }
    }
    let extra: Vec<GemmShape> = if c.quick {
        base.iter().step_by(QUICK_EXTRA_STRIDE).copied().collect()
    } else {
        base
    };
    let shapes = unique_shapes(eval.iter().map(|e| &e.1).chain(extra.iter()));
    let hetero: Vec<(String, GemmShape, GemmShape)> = eval
        .windows(2)
        .filter_map(|w| match w {
            [a, b] if a.0 == b.0 && a.1 != b.1 => Some((a.0.clone(), a.1, b.1)),
            _ => None,
        })
        .step_by(if c.quick { 1 } else { HETERO_STRIDE })
        .collect();
    Ok(Prepared {
        ctx,
        eval,
        hetero,
        shapes,
    })
}

/// The cached tuning step over every shape, checkpointed in chunks when the command line
/// asks (`--checkpoint-dir`, see [`tune_all_checkpointed`]); also its wall-clock seconds.
///
/// # Errors
/// The checkpoint cannot be written or does not fit this run.
pub fn tune(p: &Prepared) -> Result<(Vec<TunedGemm>, f64), crate::checkpoint::CheckpointError> {
    let t0 = Instant::now();
    let t = tune_all_checkpointed(&p.ctx, &p.shapes)?;
    Ok((t, t0.elapsed().as_secs_f64()))
}

/// The cached training step (split by `seed`); also its wall-clock seconds.
pub fn train(p: &Prepared, tuned: &[TunedGemm], seed: u64) -> (TrainedModel, f64) {
    let t0 = Instant::now();
    let res = p.ctx.gpu.cu_resources();
    let data: Vec<(Vec<f64>, usize)> = dataset(tuned, &p.ctx.catalog, &res)
        .into_iter()
        .map(|(x, y, _)| (x, y))
        .collect();
    #[derive(serde::Serialize)]
    struct Key<'a> {
        data: &'a [(Vec<f64>, usize)],
        seed: u64,
    }
    let key = cache::key_of("train", &Key { data: &data, seed });
    if let Some(c) = &p.ctx.cache {
        if let Some(m) = c.get::<TrainedModel>("train", key) {
            return (m, t0.elapsed().as_secs_f64());
        }
    }
    let m = train::train(&data, seed);
    if let Some(c) = &p.ctx.cache {
        c.put("train", key, &m);
    }
    (m, t0.elapsed().as_secs_f64())
}

/// The predictor `nmcp goldyloc train` would produce for `gpu` (full dataset, default
/// seed), through the same cached steps: instant when cached, a full tune + train
/// otherwise (a note goes to stderr first).
///
/// # Errors
/// An unknown GPU.
pub fn default_predictor(gpu: &str) -> Result<PredictorFile, Box<dyn std::error::Error>> {
    let p = prepare(&Options {
        gpu: gpu.to_string(),
        ..Options::default()
    })?;
    eprintln!(
        "loading the trained predictor for {gpu} from the cache {} (tuning and training first if not cached)",
        p.ctx
            .cache
            .as_ref()
            .map_or_else(String::new, |c| c.dir().display().to_string())
    );
    let (tuned, _) = tune(&p)?;
    let (model, _) = train(&p, &tuned, DEFAULT_SEED);
    Ok(model.fixed)
}

/// The GO library (GEMM extension records) of one application's evaluated GEMMs on
/// `gpu`, tuned through the cached tuning step.
///
/// # Errors
/// An unknown GPU or application.
pub fn app_library(gpu: &str, app: &str) -> Result<Vec<GemmExt>, Box<dyn std::error::Error>> {
    let g = GpuConfig::preset(gpu)?;
    let shapes: Vec<GemmShape> = unique_shapes(
        evaluated_gemms()
            .iter()
            .filter(|a| a.app == app)
            .map(|a| &a.shape),
    );
    if shapes.is_empty() {
        let mut apps: Vec<String> = evaluated_gemms().into_iter().map(|a| a.app).collect();
        apps.dedup();
        return Err(format!("no application `{app}` (one of: {})", apps.join(", ")).into());
    }
    let ctx = Context::new(g, Some(Cache::default_location()), false);
    let tuned = tune_all(&ctx, &shapes);
    Ok(tuned.iter().map(|t| t.to_ext(&ctx.catalog)).collect())
}

/// The evaluation of a trained model; `accuracy_only` skips the configurations'
/// simulations.
pub fn evaluate(
    p: &Prepared,
    tuned: &[TunedGemm],
    model: &TrainedModel,
    accuracy_only: bool,
) -> EvalReport {
    let res = p.ctx.gpu.cu_resources();
    let feats: Vec<_> = tuned
        .iter()
        .map(|t| real_features(t, &p.ctx.catalog, &res))
        .collect();
    let (eval, hetero) = if accuracy_only {
        (Vec::new(), Vec::new())
    } else {
        (p.eval.clone(), p.hetero.clone())
    };
    eval::evaluate(&p.ctx, tuned, &feats, model, &eval, &hetero)
}

/// An evaluation and how long its steps took.
#[derive(Debug, Clone, Serialize)]
pub struct EvalRun {
    /// The figures.
    pub report: EvalReport,
    /// Tuning seconds.
    pub tune_seconds: f64,
    /// Training seconds.
    pub train_seconds: f64,
    /// Evaluation seconds.
    pub eval_seconds: f64,
}

/// Prepare, tune, train (split by `seed`) and evaluate.
///
/// # Errors
/// As [`prepare`].
pub fn run_eval(o: &Options, seed: u64) -> Result<EvalRun, Box<dyn std::error::Error>> {
    let p = prepare(o)?;
    let (tuned, tune_seconds) = tune(&p)?;
    let (model, train_seconds) = train(&p, &tuned, seed);
    let t0 = Instant::now();
    let report = evaluate(&p, &tuned, &model, false);
    Ok(EvalRun {
        report,
        tune_seconds,
        train_seconds,
        eval_seconds: t0.elapsed().as_secs_f64(),
    })
}

/// What the tuning step found (the figures of `nmcp goldyloc tune`; fields in the
/// alphabetical order its JSON has always had).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuneSummary {
    /// Best CD (of 1/2/4/8/16, 16 available) over all tuned GEMMs.
    pub best_cd_histogram: [usize; 5],
    /// Kernels in the catalog.
    pub catalog_kernels: usize,
    /// Distinct isolated kernels over the evaluated GEMMs.
    pub distinct_isolated_kernels: usize,
    /// The jitter study: per run-to-run variation of a measured kernel time (the
    /// standard deviation, a fraction; [`JITTER_SIGMAS`]), the distinct isolated
    /// kernels a tuner would pick over the evaluated GEMMs if each kernel's time were
    /// measured once with that variation (seeded; the kernels within 4 standard
    /// deviations of the best compete). A study of the tuning *measurement*, not part
    /// of the pipeline: the GO library is built from the model's exact times.
    pub distinct_with_timing_jitter: Vec<(f64, usize)>,
    /// Of them, evaluated GEMMs.
    pub evaluated_gemms: usize,
    /// GEMMs tuned (evaluated and dataset).
    pub gemms_tuned: usize,
    /// Per CD above 1: share of evaluated GEMMs whose GO kernel differs from the isolated one.
    pub go_kernel_differs_share: Vec<f64>,
    /// Evaluated GEMMs whose isolated winner has a runner-up (another kernel, with a
    /// time not exactly equal) within [`crate::goldyloc::tune::NEAR_TIE_BAND`] of its
    /// time on the full GPU: where a tuner measuring hardware, with its run-to-run
    /// variation, could pick either.
    pub near_tie_gemms: usize,
    /// Tuning seconds.
    pub seconds: f64,
}

/// Run-to-run variations (standard deviation of a measured kernel time, a fraction)
/// the jitter study of [`TuneSummary::distinct_with_timing_jitter`] applies.
pub const JITTER_SIGMAS: [f64; 3] = [0.005, 0.01, 0.02];

/// The kernel a tuner picks from `ranked` (index, exact time) when it measures each
/// time once with a relative normal error of `sigma` (Box-Muller on a seeded
/// xoshiro stream), or `None` for an empty list.
fn jittered_pick(ranked: &[(u32, f64)], sigma: f64, seed: u64) -> Option<u32> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    ranked
        .iter()
        .map(|&(i, t)| {
            let u1: f64 = rng.random::<f64>().max(f64::MIN_POSITIVE);
            let u2: f64 = rng.random::<f64>();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (i, t * (1.0 + sigma * z))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
        .map(|(i, _)| i)
}

/// Summarises a tuning step that took `seconds`.
pub fn tune_summary(p: &Prepared, tuned: &[TunedGemm], seconds: f64) -> TuneSummary {
    let eval_labels: std::collections::BTreeSet<String> =
        p.eval.iter().map(|e| e.1.to_string()).collect();
    let eval_tuned: Vec<&TunedGemm> = tuned
        .iter()
        .filter(|t| eval_labels.contains(&t.shape.to_string()))
        .collect();
    let distinct: std::collections::BTreeSet<u32> = eval_tuned
        .iter()
        .filter_map(|t| t.candidates.first().copied())
        .collect();
    let go_differs: Vec<f64> = (1..CONCURRENCY_DEGREES.len())
        .map(|i| {
            eval_tuned
                .iter()
                .filter(|t| t.cd_choice.get(i).is_some_and(|&c| c != 0))
                .count() as f64
                / eval_tuned.len().max(1) as f64
        })
        .collect();
    let max_sigma = JITTER_SIGMAS.iter().copied().fold(0.0, f64::max);
    let ranked: Vec<Vec<(u32, f64)>> = eval_tuned
        .par_iter()
        .map(|t| {
            let mut r = crate::goldyloc::tune::ranked_isolated(
                &p.ctx.gpu,
                &p.ctx.cal,
                &p.ctx.catalog,
                &t.shape,
                4.0 * max_sigma,
            );
            // Kernels the model cannot tell apart (the same time to the last bit: the
            // StaggerU-mapping twins where nothing camps) count once, so the near ties and
            // the jitter study are between kernels that behave differently.
            r.dedup_by(|b, a| b.1 == a.1);
            r
        })
        .collect();
    let near_tie_gemms = ranked
        .iter()
        .filter(|r| {
            r.get(1)
                .zip(r.first())
                .is_some_and(|(b, a)| b.1 <= a.1 * (1.0 + crate::goldyloc::tune::NEAR_TIE_BAND))
        })
        .count();
    let distinct_with_timing_jitter = JITTER_SIGMAS
        .iter()
        .enumerate()
        .map(|(si, &sigma)| {
            let picks: std::collections::BTreeSet<u32> = ranked
                .iter()
                .enumerate()
                .filter_map(|(gi, r)| jittered_pick(r, sigma, (si as u64) << 32 | gi as u64))
                .collect();
            (sigma, picks.len())
        })
        .collect();
    let mut label_hist = [0usize; 5];
    for t in tuned {
        if let Some(h) = label_hist.get_mut(t.best_cd_index(16)) {
            *h += 1;
        }
    }
    TuneSummary {
        gemms_tuned: tuned.len(),
        evaluated_gemms: eval_tuned.len(),
        near_tie_gemms,
        catalog_kernels: p.ctx.catalog.len(),
        distinct_isolated_kernels: distinct.len(),
        distinct_with_timing_jitter,
        go_kernel_differs_share: go_differs,
        best_cd_histogram: label_hist,
        seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::jittered_pick;

    #[test]
    fn a_jittered_tuner_picks_the_exact_winner_without_noise_and_either_twin_with_it() {
        let ranked = [(7, 100.0), (3, 100.2), (9, 130.0)];
        assert_eq!(jittered_pick(&ranked, 0.0, 1), Some(7));
        assert_eq!(jittered_pick(&[], 0.01, 1), None);
        // Two kernels 0.2 % apart under 1 % noise: each wins some of the seeds; the one
        // 30 % slower never does. The same seed always picks the same.
        let picks: Vec<u32> = (0..200)
            .filter_map(|s| jittered_pick(&ranked, 0.01, s))
            .collect();
        let sevens = picks.iter().filter(|&&p| p == 7).count();
        let threes = picks.iter().filter(|&&p| p == 3).count();
        assert!(sevens > 40 && threes > 40, "{sevens} / {threes}");
        assert_eq!(sevens + threes, 200);
        assert_eq!(
            jittered_pick(&ranked, 0.01, 5),
            jittered_pick(&ranked, 0.01, 5)
        );
    }
}
