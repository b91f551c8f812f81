//! `nmcp goldyloc tune | train | eval`: the offline GOLDYLOC flow and its evaluation
//! (`validate` is in [`super::goldyloc_validate`]).

use super::goldyloc_print::{
    print_accuracy, print_cp_charges, print_end_to_end, print_energy, print_hetero,
    print_scenarios, print_strict_rc, print_vs_dissertation, write_csv, write_svg,
};
use super::CmdResult;
use crate::goldyloc::cache::Cache;
use crate::goldyloc::energy::goldyloc_energy;
use crate::goldyloc::eval::EvalReport;
use crate::goldyloc::pipeline::{self, Options};
use crate::goldyloc::train::DEFAULT_SEED;
use nmcp_isa::gemm_ext::{GemmDataType, GemmExt, CONCURRENCY_DEGREES};
use std::io::IsTerminal;
use std::path::PathBuf;

/// Arguments of `nmcp goldyloc`.
#[derive(clap::Args, Debug)]
pub struct GoldylocArgs {
    #[command(subcommand)]
    step: Step,
}

#[derive(clap::Subcommand, Debug)]
enum Step {
    /// Isolated, GPU/2 and GPU/4 tuning, GO kernels per CD and profiling.
    Tune(Common),
    /// Train the CD predictor and export it in the firmware's fixed point.
    Train(Common),
    /// Compare Sequential, Default, GO-Kernels, GOLDYLOC, Oracle, CU- and Resource-Partition.
    Eval(Common),
    /// The MI100 model's isolated tuning against rocBLAS' MI100 tuning (efficiency,
    /// tuner agreement, distinct winners).
    Library(super::goldyloc_library::LibraryArgs),
    /// Check the GPU model against concurrent-GEMM measurements of a real GPU.
    Validate(super::goldyloc_validate::ValidateArgs),
}

#[derive(clap::Args, Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Common {
    /// A small subset (a few GEMMs per app), for tests and a first look.
    #[arg(long)]
    quick: bool,
    /// Neither read nor write cached step results.
    #[arg(long)]
    no_cache: bool,
    /// GPU preset: mi100, mi100-half (GPU-Half: 64 CUs, 4 MB LLC), mi100-quarter
    /// (GPU-Quarter: 32 CUs, 2 MB LLC) or t3-table-8.1. Tuning, training and evaluation
    /// all run on that GPU.
    #[arg(long, default_value = "mi100")]
    gpu: String,
    /// Evaluate a user GEMM list (CSV: M,N,K,transA,transB,dtype[,count]) instead of the networks.
    #[arg(long)]
    gemms: Option<PathBuf>,
    /// Tuning shortcut of 7.6.1: tune 20 % exhaustively, predict the preferred resource
    /// configuration of the rest from their 3 nearest neighbours.
    #[arg(long)]
    knn: bool,
    /// Seed of the train/test split.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Run every GEMM in this data type: f16, bf16 or f32 (default: the networks' FP16,
    /// a --gemms list's own types). The dissertation's main results are FP32.
    #[arg(long, value_parser = parse_dtype)]
    #[serde(default, deserialize_with = "dtype::option")]
    dtype: Option<GemmDataType>,
    /// Write the result (tune: GO library of GEMM extension records; train: predictor) as JSON here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write CSV files into this directory.
    #[arg(long)]
    csv: Option<PathBuf>,
    /// Write SVG bar charts into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// tune: also study the stricter resource constraints GPU/8 and GPU/16 of 7.6.3 (GO
    /// kernels chosen with their kernels as further candidates, offline).
    #[arg(long)]
    strict_rc: bool,
    /// eval: also run each GEMM at every constant CD below n through the firmware CP
    /// and report the best per GEMM over GO-Kernels: what a perfect CD choice could add
    /// in the loop (about a third more runs).
    #[arg(long)]
    cd_sweep: bool,
    /// The model's contention options.
    #[command(flatten)]
    #[serde(flatten)]
    model: super::model_options::ModelOptions,
    /// Map the n software queues (streams) of every configuration but Sequential onto this
    /// many hardware queues, with the AQL barrier bit set on each (a HIP runtime's
    /// GPU_MAX_HW_QUEUES, 4 by default); default: one hardware queue per stream.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    hw_queues: Option<u32>,
    /// When a CD group lets the CP decide the next one: `completion` (a group barrier) or
    /// `dispatch` (when its members have placed all their workgroups: the CP re-decides on
    /// every queue-head change, dissertation 7.3.4). Labels are profiled the same way.
    #[arg(long, value_enum, default_value_t = CdRelease::Completion)]
    cd_release: CdRelease,
}

/// `--cd-release`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
enum CdRelease {
    /// The next group starts when the current one has completed.
    Completion,
    /// The next group starts when the current one has placed all its workgroups.
    Dispatch,
}

impl Common {
    fn options(&self) -> Options {
        Options {
            gpu: self.gpu.clone(),
            quick: self.quick,
            cache: !self.no_cache,
            gemms: self.gemms.clone(),
            knn: self.knn,
            cd_sweep: self.cd_sweep,
            progress: !self.json && std::io::stderr().is_terminal(),
            dtype: self.dtype,
            loaded_latency: self.model.latency == super::model_options::LatencyModel::Loaded,
            inter_kernel_gap_ns: self.model.inter_kernel_gap_ns,
            hw_queues: self.hw_queues,
            release_on_dispatch: self.cd_release == CdRelease::Dispatch,
        }
    }
}

fn parse_dtype(s: &str) -> Result<GemmDataType, String> {
    match s.to_ascii_lowercase().as_str() {
        "f16" | "fp16" => Ok(GemmDataType::F16),
        "bf16" => Ok(GemmDataType::Bf16),
        "f32" | "fp32" => Ok(GemmDataType::F32),
        _ => Err(format!("`{s}` is not a data type (f16, bf16, f32)")),
    }
}

/// Runs `nmcp goldyloc`.
pub fn run(args: GoldylocArgs) -> CmdResult {
    match args.step {
        Step::Tune(c) => run_tune(&c),
        Step::Train(c) => run_train(&c),
        Step::Eval(c) => run_eval(&c),
        Step::Library(a) => super::goldyloc_library::run(&a),
        Step::Validate(v) => super::goldyloc_validate::run(&v),
    }
}

fn run_tune(c: &Common) -> CmdResult {
    let p = pipeline::prepare(&c.options())?;
    let (tuned, secs) = pipeline::tune(&p)?;
    let library: Vec<GemmExt> = tuned.iter().map(|t| t.to_ext(&p.ctx.catalog)).collect();
    if let Some(out) = &c.out {
        super::io::write_file(out, serde_json::to_string_pretty(&library)?.as_bytes())?;
    }
    let t = pipeline::tune_summary(&p, &tuned, secs);
    let strict = c
        .strict_rc
        .then(|| crate::goldyloc::tune::strict_rc_study(&p.ctx, &tuned));
    if c.json {
        let mut v = serde_json::to_value(&t)?;
        if let (Some(st), Some(obj)) = (&strict, v.as_object_mut()) {
            obj.insert("strict_rc".into(), serde_json::to_value(st)?);
        }
        stdoutln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        stdoutln!(
            "tuned {} GEMMs ({} evaluated) over {} catalog kernels in {secs:.2} s",
            t.gemms_tuned,
            t.evaluated_gemms,
            t.catalog_kernels
        );
        stdoutln!(
            "distinct isolated kernels over the evaluated GEMMs: {} (dissertation: 291 of 410)",
            t.distinct_isolated_kernels
        );
        stdoutln!(
            "evaluated GEMMs whose winner has a runner-up within {:.0} %: {} of {} (a tuner \
             measuring hardware could pick either)",
            crate::goldyloc::tune::NEAR_TIE_BAND * 100.0,
            t.near_tie_gemms,
            t.evaluated_gemms
        );
        let jitter: Vec<String> = t
            .distinct_with_timing_jitter
            .iter()
            .map(|(s, d)| format!("{d} at {:.1} %", s * 100.0))
            .collect();
        stdoutln!(
            "  study: distinct winners if each kernel's time were measured once with a \
             run-to-run variation of sigma: {} (the pipeline uses the model's exact times)",
            jitter.join(", ")
        );
        for (cd, s) in CONCURRENCY_DEGREES
            .iter()
            .skip(1)
            .zip(&t.go_kernel_differs_share)
        {
            stdoutln!(
                "  CD {cd:>2}: GO kernel differs from the isolated kernel for {:.0} %",
                s * 100.0
            );
        }
        stdoutln!(
            "best CD (16 available) histogram, CD 1/2/4/8/16: {:?}",
            t.best_cd_histogram
        );
        if let Some(st) = &strict {
            print_strict_rc(st);
        }
    }
    Ok(())
}

fn run_train(c: &Common) -> CmdResult {
    let p = pipeline::prepare(&c.options())?;
    let (tuned, tune_secs) = pipeline::tune(&p)?;
    let (model, train_secs) = pipeline::train(&p, &tuned, c.seed);
    let out = c
        .out
        .clone()
        .unwrap_or_else(|| Cache::default_location().dir().join("predictor.json"));
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    super::io::write_file(&out, serde_json::to_string_pretty(&model.fixed)?.as_bytes())?;
    let report = pipeline::evaluate(&p, &tuned, &model, true);
    if c.json {
        let v = serde_json::json!({
            "dataset": tuned.len(),
            "test": model.test.len(),
            "train_accuracy": model.train_accuracy,
            "accuracy": report.scenarios.iter().map(|s| (s.n, s.accuracy)).collect::<Vec<_>>(),
            "fixed_point_agreement": report.fixed_point_agreement,
            "fixed_point_agreement_all": report.fixed_point_agreement_all,
            "predictor": out.display().to_string(),
            "tune_seconds": tune_secs,
            "train_seconds": train_secs,
        });
        stdoutln!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        stdoutln!(
            "dataset {} GEMMs, test {} (seed {}); tune {tune_secs:.2} s, train {train_secs:.2} s",
            tuned.len(),
            model.test.len(),
            c.seed
        );
        stdoutln!("training accuracy {:.1} %", model.train_accuracy * 100.0);
        print_accuracy(&report);
        stdoutln!("predictor written to {}", out.display());
    }
    Ok(())
}

fn run_eval(c: &Common) -> CmdResult {
    let run = pipeline::run_eval(&c.options(), c.seed)?;
    let (report, tune_secs, train_secs, eval_secs) = (
        &run.report,
        run.tune_seconds,
        run.train_seconds,
        run.eval_seconds,
    );
    if let Some(dir) = &c.csv {
        write_csv(dir, report)?;
    }
    if let Some(dir) = &c.svg {
        write_svg(dir, report)?;
    }
    let energy = goldyloc_energy(report)?;
    if c.json {
        let mut v = serde_json::to_value(report)?;
        if let Some(o) = v.as_object_mut() {
            o.insert("energy".into(), serde_json::to_value(&energy)?);
        }
        stdoutln!("{}", serde_json::to_string(&v)?);
        return loop_failures(report);
    }
    stdoutln!(
        "GPU {}: {} evaluated GEMMs, dataset {} GEMMs; tune {tune_secs:.1} s, train {train_secs:.1} s, eval {eval_secs:.1} s",
        report.gpu, report.gemm_count, report.dataset_size
    );
    print_scenarios(report);
    print_cp_charges(report);
    print_end_to_end(report);
    print_hetero(report);
    print_vs_dissertation(report);
    print_energy(&energy);
    print_accuracy(report);
    loop_failures(report)
}

/// A run through the firmware that did not dispatch and complete every GEMM exactly once
/// is a defect: the report above leaves those GEMMs out, and the command fails.
fn loop_failures(report: &EvalReport) -> CmdResult {
    if report.loop_failures.is_empty() {
        return Ok(());
    }
    for f in report.loop_failures.iter().take(10) {
        eprintln!("  {f}");
    }
    Err(format!(
        "{} configuration run(s) through the firmware CP failed (first ones above); their GEMMs are left out of the summaries",
        report.loop_failures.len()
    )
    .into())
}

crate::scenario::parsed!(mod dtype = parse_dtype => GemmDataType);

impl crate::scenario::Options for Common {}
impl crate::scenario::Options for super::goldyloc_library::LibraryArgs {}
impl crate::scenario::Options for super::goldyloc_validate::ValidateArgs {}

impl GoldylocArgs {
    /// The typed options of the command run.
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.step {
            Step::Tune(a) | Step::Train(a) | Step::Eval(a) => a,
            Step::Library(a) => a,
            Step::Validate(a) => a,
        }
    }
}
