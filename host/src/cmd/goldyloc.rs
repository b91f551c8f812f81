//! `nmcp goldyloc tune | train | eval`: the offline GOLDYLOC flow and its evaluation
//! (`validate` is in [`super::goldyloc_validate`]).

use super::CmdResult;
use crate::goldyloc::cache::Cache;
use crate::goldyloc::energy::{goldyloc_energy, GoldylocEnergy};
use crate::goldyloc::eval::{EvalReport, CONFIGS, HETERO_CONFIGS};
use crate::goldyloc::pipeline::{self, Options};
use crate::goldyloc::train::DEFAULT_SEED;
use nmcp_isa::gemm_ext::{GemmDataType, GemmExt, CONCURRENCY_DEGREES};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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

#[derive(clap::Args, Debug, Clone)]
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
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
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

fn print_strict_rc(st: &crate::goldyloc::tune::StrictRcStudy) {
    stdoutln!(
        "stricter constraints GPU/8 and GPU/16 (7.6.3; offline, profiled times): {} of {} GEMMs get a new candidate",
        st.gemms_with_new_candidates, st.gemms
    );
    stdoutln!("  CD   GO speedup over serial: GPU,/2,/4   +/8,/16   gain   GEMMs won by /8,/16   max gain");
    for r in &st.rows {
        stdoutln!(
            "  {:>2} {:>34.3}x {:>8.3}x {:>+5.2} % {:>19.1} % {:>9.3}x",
            r.cd,
            r.speedup_base,
            r.speedup_strict,
            (r.speedup_strict / r.speedup_base - 1.0) * 100.0,
            r.strict_wins_share * 100.0,
            r.max_gain
        );
    }
    stdoutln!("  (dissertation 7.6.3: GPU/8 and GPU/16 \"gave little benefit\"; no figure)");
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

const PAPER_ACCURACY: [f64; 4] = [82.0, 70.0, 62.0, 47.0];
const PAPER_GOLDYLOC_OVER_DEFAULT: [f64; 4] = [5.0, 10.0, 11.0, 12.0];

/// Per scenario, Default's joules over each configuration's next to its time ratio.
fn print_energy(e: &GoldylocEnergy) {
    stdoutln!();
    stdoutln!(
        "energy per GEMM set (memory {}; geomean of Default's joules over the configuration's, time ratio in brackets; dissertation: not evaluated)",
        e.preset
    );
    for s in &e.scenarios {
        let cells: Vec<String> = e
            .configs
            .iter()
            .zip(s.default_over.iter().zip(&s.default_time_over))
            .map(|(c, (j, t))| format!("{c} {j:.3} ({t:.3})"))
            .collect();
        stdoutln!("  n={:<3} {}", s.n, cells.join(", "));
    }
}

fn print_accuracy(r: &EvalReport) {
    stdoutln!(
        "predictor accuracy per scenario: {}-fold cross-validation by GEMM size (each GEMM predicted by the fixed-point model of the fold that never saw its size), seeds {:?}",
        crate::goldyloc::train::FOLDS,
        r.cross_validation_seeds
    );
    stdoutln!("  available   GEMMs   accuracy (seeds: min-max)   majority class   near ties: predictor / majority   dissertation");
    for (s, paper) in r.scenarios.iter().zip(PAPER_ACCURACY) {
        let lo = s
            .predictor_accuracy_seeds
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = s
            .predictor_accuracy_seeds
            .iter()
            .copied()
            .fold(0.0, f64::max);
        stdoutln!(
            "  {:>9} {:>7} {:>9.1} % ({:>4.1}-{:>4.1} %) {:>15.1} % {:>16.1} % / {:>6.1} % {:>13.0} %",
            s.n,
            s.scored_gemms,
            s.accuracy * 100.0,
            lo * 100.0,
            hi * 100.0,
            s.majority_baseline_accuracy * 100.0,
            s.near_tie_accuracy * 100.0,
            s.majority_near_tie_accuracy * 100.0,
            paper
        );
    }
    stdoutln!(
        "fixed point vs f64 agreement: {:.2} % of the dataset ({} disagreements)",
        r.fixed_point_agreement_all * 100.0,
        r.disagreements.len()
    );
    for (g, a, b) in r.disagreements.iter().take(20) {
        stdoutln!("    {g}: f64 says CD {a}, fixed point CD {b}");
    }
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

fn print_scenarios(report: &EvalReport) {
    for s in &report.scenarios {
        stdoutln!(
            "\n== {} independent GEMMs: geomean speedup per app over Sequential ==",
            s.n
        );
        stdout!("{:<12}{:>6}", "app", "gemms");
        for name in CONFIGS {
            stdout!("{:>12}", short(name));
        }
        stdoutln!();
        for a in &s.apps {
            stdout!("{:<12}{:>6}", a.app, a.gemms);
            for v in &a.over_sequential {
                stdout!("{v:>12.3}");
            }
            stdoutln!();
        }
        stdout!("{:<12}{:>6}", "geomean", "");
        for v in &s.all_over_sequential {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        stdout!("{:<12}{:>6}", "max", "");
        for v in &s.max_over_sequential {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        stdout!("{:<12}{:>6}", "over Default", "");
        for v in &s.all_over_default {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        if let (Some(room), Some(taken)) = (
            s.best_constant_cd_over_go_kernels,
            s.goldyloc_over_best_constant_cd,
        ) {
            stdoutln!(
                "best constant CD per GEMM in the loop (--cd-sweep): {:+.2} % over GO-Kernels; GOLDYLOC reaches {:.2} % of its speed",
                (room - 1.0) * 100.0,
                taken * 100.0
            );
        }
        stdoutln!(
            "GOLDYLOC vs Default: improve {:.0} %, unchanged {:.0} %, degrade {:.0} % (dissertation, all scenarios: 64/29/7 %)",
            s.split[0] * 100.0,
            s.split[1] * 100.0,
            s.split[2] * 100.0
        );
        stdoutln!("confusion matrix (rows = best CD, columns = predicted CD), test set:");
        stdout!("        ");
        for cd in CONCURRENCY_DEGREES {
            stdout!("{cd:>6}");
        }
        stdoutln!();
        for (cd, row) in CONCURRENCY_DEGREES.iter().zip(&s.confusion) {
            stdout!("  {cd:>4}  ");
            for v in row {
                stdout!("{v:>6}");
            }
            stdoutln!();
        }
    }
}

fn print_end_to_end(report: &EvalReport) {
    if report.end_to_end.is_empty() {
        return;
    }
    stdoutln!("\n== End to end: iteration speedup over Default from the GEMM share (1 / (1 - f + f / s)) ==");
    for e in &report.end_to_end {
        stdoutln!(
            "  {:<5} {:>2} GEMMs: f = {:.2}, GEMMs {:.3}x -> iteration {:+.1} % (dissertation: {})",
            e.app,
            e.n,
            e.gemm_share,
            e.gemm_speedup,
            (e.speedup - 1.0) * 100.0,
            e.dissertation
        );
    }
    let mut sources: Vec<&str> = report
        .end_to_end
        .iter()
        .map(|e| e.share_source.as_str())
        .collect();
    sources.dedup();
    for s in sources {
        stdoutln!("  f: {s}");
    }
}

fn print_cp_charges(report: &EvalReport) {
    stdoutln!("\n== CP time per decision (firmware replay, steady state, board-calibrated CpCostModel at 1.5 GHz, 31-cycle memory) ==");
    stdoutln!("(the evaluation above runs the same firmware in the loop: its time delays a dispatch only where it lies on the critical path)");
    stdoutln!("dissertation: ~0.32 us to read/write 32 queues, 8 us per inspect+predict+write");
    for ch in &report.cp_charges {
        stdoutln!(
            "  {:>2} GEMMs at CD {:>2}: {:>7} cycles, {:>3} decisions, {:>5} memory accesses, {:>7.3} us busy, {:.3} us per decision",
            ch.n,
            ch.cd,
            ch.cycles,
            ch.decisions,
            ch.mem_accesses,
            ch.busy_ns / 1e3,
            ch.per_decision_ns / 1e3
        );
    }
}

fn print_hetero(report: &EvalReport) {
    stdoutln!("\n== heterogeneous mixes (n/2 + n/2 of two sizes), geomean over Default ==");
    stdout!("{:<8}{:>7}", "n", "pairs");
    for name in HETERO_CONFIGS {
        stdout!("{:>12}", short(name));
    }
    stdoutln!("{:>10}", "mixed");
    for h in &report.hetero {
        stdoutln!(
            "{:<8}{:>7}{:>12.3}{:>12.3}{:>12.3}{:>12.3}{:>9.0}%",
            h.n,
            h.pairs,
            h.over_default[0],
            h.over_default[1],
            h.over_default[2],
            h.over_default[3],
            h.mixed_share * 100.0
        );
    }
    stdoutln!("dissertation: GO-Kernels +3-10 %, GOLDYLOC +15 % over Default at 16");
}

fn print_vs_dissertation(report: &EvalReport) {
    stdoutln!("\n== next to the dissertation ==");
    stdoutln!("{:<44}{:>10}{:>14}", "", "model", "dissertation");
    for (s, paper) in report.scenarios.iter().zip(PAPER_GOLDYLOC_OVER_DEFAULT) {
        let def = s.all_over_sequential.get(1).copied().unwrap_or(1.0);
        let paper_def = match s.n {
            2 => "+10 %",
            16 => "+7 %",
            _ => "-",
        };
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("Default over Sequential, {} GEMMs", s.n),
            (def - 1.0) * 100.0,
            paper_def
        );
        let go = s.all_over_default.get(2).copied().unwrap_or(1.0);
        let paper_go = match s.n {
            2 => "+5 %",
            4 | 8 => "+9 %",
            _ => "+10 %",
        };
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("GO-Kernels over Default, {} GEMMs", s.n),
            (go - 1.0) * 100.0,
            paper_go
        );
        let oracle = s.all_over_default.get(4).copied().unwrap_or(1.0);
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("Oracle over Default, {} GEMMs", s.n),
            (oracle - 1.0) * 100.0,
            "-"
        );
        stdoutln!(
            "{:<44}{:>10}{:>14}",
            format!("improve/unchanged/degrade, {} GEMMs", s.n),
            format!(
                "{:.0}/{:.0}/{:.0} %",
                s.split[0] * 100.0,
                s.split[1] * 100.0,
                s.split[2] * 100.0
            ),
            "64/29/7 %"
        );
        let gl = s.all_over_default.get(3).copied().unwrap_or(1.0);
        stdoutln!(
            "{:<44}{:>+9.1}%{:>13}%",
            format!("GOLDYLOC over Default, {} GEMMs", s.n),
            (gl - 1.0) * 100.0,
            format!("+{paper}")
        );
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("GOLDYLOC over GO-Kernels, {} GEMMs", s.n),
            (gl / go - 1.0) * 100.0,
            "+3 % geomean"
        );
        stdoutln!(
            "{:<44}{:>10}{:>14}",
            format!("GEMMs whose size the predictor never saw, {}", s.n),
            format!(
                "{}/{}",
                s.held_out_gemms,
                s.apps.iter().map(|a| a.gemms).sum::<usize>()
            ),
            "-"
        );
    }
}

fn short(name: &str) -> &str {
    match name {
        "Sequential" => "Seq",
        "CU-Partition" => "CU-Part",
        "Resource-Partition" => "Res-Part",
        other => other,
    }
}

fn write_csv(dir: &Path, r: &EvalReport) -> CmdResult {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("goldyloc_gemms.csv");
    let mut w = csv::Writer::from_path(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = vec![
        "app".to_string(),
        "gemm".into(),
        "n".into(),
        "predicted_cd".into(),
        "oracle_cd".into(),
    ];
    header.extend(CONFIGS.iter().map(|c| format!("{c}_ns")));
    w.write_record(&header)?;
    for g in &r.gemms {
        let mut row = vec![
            g.app.clone(),
            g.gemm.clone(),
            g.n.to_string(),
            g.predicted_cd.to_string(),
            g.oracle_cd.to_string(),
        ];
        row.extend(g.time_ns.iter().map(|t| format!("{t:.1}")));
        w.write_record(&row)?;
    }
    w.flush()?;
    let path = dir.join("goldyloc_apps.csv");
    let mut w = csv::Writer::from_path(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = vec!["n".to_string(), "app".into(), "gemms".into()];
    header.extend(CONFIGS.iter().map(|c| format!("{c}_over_sequential")));
    w.write_record(&header)?;
    for s in &r.scenarios {
        for a in &s.apps {
            let mut row = vec![s.n.to_string(), a.app.clone(), a.gemms.to_string()];
            row.extend(a.over_sequential.iter().map(|v| format!("{v:.4}")));
            w.write_record(&row)?;
        }
    }
    w.flush()?;
    Ok(())
}

fn write_svg(dir: &Path, r: &EvalReport) -> CmdResult {
    use plotters::prelude::*;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let colours = [
        RGBColor(120, 120, 120),
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    for s in &r.scenarios {
        let path = dir.join(format!("goldyloc_{}gemms.svg", s.n));
        let root = SVGBackend::new(&path, (1100, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let apps = s.apps.len().max(1);
        let ymax = s
            .apps
            .iter()
            .flat_map(|a| a.over_sequential.iter().copied())
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{} independent GEMMs: geomean speedup over Sequential", s.n),
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..apps as f64, 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("speedup")
            .draw()?;
        // App names centred under their bar groups, in pixel coordinates.
        for (ai, a) in s.apps.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(ai as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                a.app.clone(),
                (px - 4 * a.app.len() as i32, py + 10),
                ("sans-serif", 14),
            ))?;
        }
        let bars = CONFIGS.len() as f64;
        for (ci, colour) in colours.iter().enumerate() {
            let series: Vec<Rectangle<(f64, f64)>> = s
                .apps
                .iter()
                .enumerate()
                .filter_map(|(ai, a)| {
                    let v = *a.over_sequential.get(ci)?;
                    let x0 = ai as f64 + 0.1 + 0.8 * ci as f64 / bars;
                    Some(Rectangle::new(
                        [(x0, 0.0), (x0 + 0.8 / bars, v)],
                        colour.filled(),
                    ))
                })
                .collect();
            chart
                .draw_series(series)?
                .label(CONFIGS.get(ci).copied().unwrap_or(""))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        root.present()?;
    }
    Ok(())
}
