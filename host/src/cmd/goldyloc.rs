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
use crate::goldyloc::options::FlowOptions;
use crate::goldyloc::pipeline;
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};

/// Arguments of `nmcp goldyloc`.
#[derive(clap::Args, Debug)]
pub struct GoldylocArgs {
    #[command(subcommand)]
    step: Step,
}

#[derive(clap::Subcommand, Debug)]
enum Step {
    /// Isolated, GPU/2 and GPU/4 tuning, GO kernels per CD and profiling.
    Tune(FlowOptions),
    /// Train the CD predictor and export it in the firmware's fixed point.
    Train(FlowOptions),
    /// Compare Sequential, Default, GO-Kernels, GOLDYLOC, Oracle, CU- and Resource-Partition.
    Eval(FlowOptions),
    /// The MI100 model's isolated tuning against rocBLAS' MI100 tuning (efficiency,
    /// tuner agreement, distinct winners).
    Library(super::goldyloc_library::LibraryArgs),
    /// Check the GPU model against concurrent-GEMM measurements of a real GPU.
    Validate(super::goldyloc_validate::ValidateArgs),
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

fn run_tune(c: &FlowOptions) -> CmdResult {
    let p = pipeline::prepare(&c.pipeline_options())?;
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

fn run_train(c: &FlowOptions) -> CmdResult {
    let p = pipeline::prepare(&c.pipeline_options())?;
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

fn run_eval(c: &FlowOptions) -> CmdResult {
    let run = pipeline::run_eval(&c.pipeline_options(), c.seed)?;
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
