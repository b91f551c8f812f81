//! `nmcp goldyloc tune | train | eval`: the offline GOLDYLOC flow and its evaluation.

use super::CmdResult;
use crate::goldyloc::cache::Cache;
use crate::goldyloc::eval::{evaluate, EvalReport, CONFIGS, HETERO_CONFIGS};
use crate::goldyloc::train::{dataset, real_features, train, TrainedModel, DEFAULT_SEED};
use crate::goldyloc::tune::{tune_all, TunedGemm};
use crate::goldyloc::Context;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::workload::{
    dataset_gemms, evaluated_gemms, parse_gemm_csv, unique_shapes, DATASET_SEED, DATASET_SIZE,
};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// GEMMs per application kept by `--quick`.
const QUICK_PER_APP: usize = 3;
/// Every how many extra dataset GEMMs `--quick` keeps one.
const QUICK_EXTRA_STRIDE: usize = 25;
/// Every how many heterogeneous pairs (consecutive distinct GEMMs of an app) the full
/// evaluation simulates (each pair costs a few 16-kernel simulations per scenario).
const HETERO_STRIDE: usize = 6;

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
}

/// Runs `nmcp goldyloc`.
pub fn run(args: GoldylocArgs) -> CmdResult {
    match args.step {
        Step::Tune(c) => run_tune(&c),
        Step::Train(c) => run_train(&c),
        Step::Eval(c) => run_eval(&c),
    }
}

struct Prepared {
    ctx: Context,
    eval: Vec<(String, GemmShape)>,
    hetero: Vec<(String, GemmShape, GemmShape)>,
    shapes: Vec<GemmShape>,
}

fn prepare(c: &Common) -> Result<Prepared, Box<dyn std::error::Error>> {
    let gpu = GpuConfig::preset(&c.gpu)?;
    let cache = (!c.no_cache).then(Cache::default_location);
    let mut ctx = Context::new(gpu, cache, !c.json && std::io::stderr().is_terminal());
    ctx.knn = c.knn;
    let mut eval: Vec<(String, GemmShape)> = match &c.gemms {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let list = parse_gemm_csv(&text).map_err(|e| format!("{}: {e}", path.display()))?;
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
    let base = dataset_gemms(DATASET_SIZE, DATASET_SEED);
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

fn tuned(p: &Prepared) -> (Vec<TunedGemm>, f64) {
    let t0 = Instant::now();
    let t = tune_all(&p.ctx, &p.shapes);
    (t, t0.elapsed().as_secs_f64())
}

fn run_tune(c: &Common) -> CmdResult {
    let p = prepare(c)?;
    let (tuned, secs) = tuned(&p);
    let library: Vec<GemmExt> = tuned.iter().map(|t| t.to_ext(&p.ctx.catalog)).collect();
    if let Some(out) = &c.out {
        std::fs::write(out, serde_json::to_string_pretty(&library)?)
            .map_err(|e| format!("{}: {e}", out.display()))?;
    }
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
    let mut label_hist = [0usize; 5];
    for t in &tuned {
        if let Some(h) = label_hist.get_mut(t.best_cd_index(16)) {
            *h += 1;
        }
    }
    if c.json {
        let v = serde_json::json!({
            "gemms_tuned": tuned.len(),
            "evaluated_gemms": eval_tuned.len(),
            "catalog_kernels": p.ctx.catalog.len(),
            "distinct_isolated_kernels": distinct.len(),
            "go_kernel_differs_share": go_differs,
            "best_cd_histogram": label_hist,
            "seconds": secs,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "tuned {} GEMMs ({} evaluated) over {} catalog kernels in {secs:.2} s",
            tuned.len(),
            eval_tuned.len(),
            p.ctx.catalog.len()
        );
        println!(
            "distinct isolated kernels over the evaluated GEMMs: {} (dissertation: 291 of 410)",
            distinct.len()
        );
        for (cd, s) in CONCURRENCY_DEGREES.iter().skip(1).zip(&go_differs) {
            println!(
                "  CD {cd:>2}: GO kernel differs from the isolated kernel for {:.0} %",
                s * 100.0
            );
        }
        println!("best CD (16 available) histogram, CD 1/2/4/8/16: {label_hist:?}");
    }
    Ok(())
}

fn trained(p: &Prepared, tuned: &[TunedGemm], seed: u64) -> (TrainedModel, f64) {
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
    let key = crate::goldyloc::cache::key_of("train", &Key { data: &data, seed });
    if let Some(c) = &p.ctx.cache {
        if let Some(m) = c.get::<TrainedModel>("train", key) {
            return (m, t0.elapsed().as_secs_f64());
        }
    }
    let m = train(&data, seed);
    if let Some(c) = &p.ctx.cache {
        c.put("train", key, &m);
    }
    (m, t0.elapsed().as_secs_f64())
}

/// The predictor `nmcp goldyloc train` would produce for `gpu` (full dataset, default
/// seed), through the same cached steps: instant when cached, a full tune + train
/// otherwise (a note goes to stderr first).
pub fn default_predictor(
    gpu: &str,
) -> Result<crate::goldyloc::train::PredictorFile, Box<dyn std::error::Error>> {
    let c = Common {
        quick: false,
        no_cache: false,
        gpu: gpu.to_string(),
        gemms: None,
        knn: false,
        seed: DEFAULT_SEED,
        out: None,
        json: true,
        csv: None,
        svg: None,
    };
    let p = prepare(&c)?;
    eprintln!(
        "loading the trained predictor for {gpu} from the cache {} (tuning and training first if not cached)",
        p.ctx
            .cache
            .as_ref()
            .map_or_else(String::new, |c| c.dir().display().to_string())
    );
    let (tuned, _) = tuned(&p);
    let (model, _) = trained(&p, &tuned, DEFAULT_SEED);
    Ok(model.fixed)
}

/// The GO library (GEMM extension records) of one application's evaluated GEMMs on
/// `gpu`, tuned through the cached tuning step.
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

fn run_train(c: &Common) -> CmdResult {
    let p = prepare(c)?;
    let (tuned, tune_secs) = tuned(&p);
    let (model, train_secs) = trained(&p, &tuned, c.seed);
    let out = c
        .out
        .clone()
        .unwrap_or_else(|| Cache::default_location().dir().join("predictor.json"));
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&out, serde_json::to_string_pretty(&model.fixed)?)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let report = full_eval(&p, &tuned, &model, true);
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
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "dataset {} GEMMs, test {} (seed {}); tune {tune_secs:.2} s, train {train_secs:.2} s",
            tuned.len(),
            model.test.len(),
            c.seed
        );
        println!("training accuracy {:.1} %", model.train_accuracy * 100.0);
        print_accuracy(&report);
        println!("predictor written to {}", out.display());
    }
    Ok(())
}

/// Evaluation; `accuracy_only` skips the configurations' simulations.
fn full_eval(
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
    evaluate(&p.ctx, tuned, &feats, model, &eval, &hetero)
}

const PAPER_ACCURACY: [f64; 4] = [82.0, 70.0, 62.0, 47.0];
const PAPER_GOLDYLOC_OVER_DEFAULT: [f64; 4] = [5.0, 10.0, 11.0, 12.0];

fn print_accuracy(r: &EvalReport) {
    println!("predictor accuracy per scenario (test set)     model   dissertation");
    for (s, paper) in r.scenarios.iter().zip(PAPER_ACCURACY) {
        println!(
            "  {:>2} available GEMMs                        {:>6.1} %   {paper:>5.0} %",
            s.n,
            s.accuracy * 100.0
        );
    }
    println!(
        "fixed point vs f64 agreement: {:.2} % of the test set, {:.2} % of the dataset ({} disagreements)",
        r.fixed_point_agreement * 100.0,
        r.fixed_point_agreement_all * 100.0,
        r.disagreements.len()
    );
    for (g, a, b) in r.disagreements.iter().take(20) {
        println!("    {g}: f64 says CD {a}, fixed point CD {b}");
    }
}

fn run_eval(c: &Common) -> CmdResult {
    let p = prepare(c)?;
    let (tuned, tune_secs) = tuned(&p);
    let (model, train_secs) = trained(&p, &tuned, c.seed);
    let t0 = Instant::now();
    let report = full_eval(&p, &tuned, &model, false);
    let eval_secs = t0.elapsed().as_secs_f64();
    if let Some(dir) = &c.csv {
        write_csv(dir, &report)?;
    }
    if let Some(dir) = &c.svg {
        write_svg(dir, &report)?;
    }
    if c.json {
        println!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    println!(
        "GPU {}: {} evaluated GEMMs, dataset {} GEMMs; tune {tune_secs:.1} s, train {train_secs:.1} s, eval {eval_secs:.1} s",
        report.gpu, report.gemm_count, report.dataset_size
    );
    for s in &report.scenarios {
        println!(
            "\n== {} independent GEMMs: geomean speedup per app over Sequential ==",
            s.n
        );
        print!("{:<12}{:>6}", "app", "gemms");
        for name in CONFIGS {
            print!("{:>12}", short(name));
        }
        println!();
        for a in &s.apps {
            print!("{:<12}{:>6}", a.app, a.gemms);
            for v in &a.over_sequential {
                print!("{v:>12.3}");
            }
            println!();
        }
        print!("{:<12}{:>6}", "geomean", "");
        for v in &s.all_over_sequential {
            print!("{v:>12.3}");
        }
        println!();
        print!("{:<12}{:>6}", "max", "");
        for v in &s.max_over_sequential {
            print!("{v:>12.3}");
        }
        println!();
        print!("{:<12}{:>6}", "over Default", "");
        for v in &s.all_over_default {
            print!("{v:>12.3}");
        }
        println!();
        println!(
            "GOLDYLOC vs Default: improve {:.0} %, unchanged {:.0} %, degrade {:.0} % (dissertation, all scenarios: 64/29/7 %)",
            s.split[0] * 100.0,
            s.split[1] * 100.0,
            s.split[2] * 100.0
        );
        println!("confusion matrix (rows = best CD, columns = predicted CD), test set:");
        print!("        ");
        for cd in CONCURRENCY_DEGREES {
            print!("{cd:>6}");
        }
        println!();
        for (cd, row) in CONCURRENCY_DEGREES.iter().zip(&s.confusion) {
            print!("  {cd:>4}  ");
            for v in row {
                print!("{v:>6}");
            }
            println!();
        }
    }
    println!("\n== CP time charged to GOLDYLOC (firmware replay, CpCostModel 1.5 GHz, 31-cycle memory) ==");
    println!("dissertation: ~0.32 us to read/write 32 queues, 8 us per inspect+predict+write");
    for ch in &report.cp_charges {
        println!(
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
    println!("\n== heterogeneous mixes (n/2 + n/2 of two sizes), geomean over Default ==");
    print!("{:<8}{:>7}", "n", "pairs");
    for name in HETERO_CONFIGS {
        print!("{:>12}", short(name));
    }
    println!("{:>10}", "mixed");
    for h in &report.hetero {
        println!(
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
    println!("dissertation: GO-Kernels +3-10 %, GOLDYLOC +15 % over Default at 16");
    println!("\n== next to the dissertation ==");
    println!("{:<44}{:>10}{:>14}", "", "model", "dissertation");
    for (s, paper) in report.scenarios.iter().zip(PAPER_GOLDYLOC_OVER_DEFAULT) {
        let def = s.all_over_sequential.get(1).copied().unwrap_or(1.0);
        let paper_def = match s.n {
            2 => "+10 %",
            16 => "+7 %",
            _ => "-",
        };
        println!(
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
        println!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("GO-Kernels over Default, {} GEMMs", s.n),
            (go - 1.0) * 100.0,
            paper_go
        );
        let oracle = s.all_over_default.get(4).copied().unwrap_or(1.0);
        println!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("Oracle over Default, {} GEMMs", s.n),
            (oracle - 1.0) * 100.0,
            "-"
        );
        println!(
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
        println!(
            "{:<44}{:>+9.1}%{:>13}%",
            format!("GOLDYLOC over Default, {} GEMMs", s.n),
            (gl - 1.0) * 100.0,
            format!("+{paper}")
        );
    }
    print_accuracy(&report);
    Ok(())
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
