//! `nmcp reproduce`: runs LAMB (ch. 6), GOLDYLOC (ch. 7) and T3 (ch. 8) on the
//! dissertation's setups and writes a report a reader can open: `index.html` and
//! `README.md` with each headline figure (the dissertation's number, ours, the ratio, the
//! configuration and the baseline or bound beside it) and the plots a paper would show.
//!
//! Each mechanism runs as its own subcommand in a child process (`nmcp lamb --json`, ...),
//! exactly as a user would run it; the report reads their JSON, which is also kept in
//! `data/` beside the report. So the report is a front-end over the same public interface,
//! never a second copy of a model. See `docs/decisions/reproduce.md`.

pub mod energy;
pub mod figures;
pub mod goldyloc_studies;
pub mod page;
pub mod plot;
pub mod scorecard;
pub mod validation;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use figures::Headline;

/// Chapter 6's section.
pub const LAMB_TITLE: &str = "ch. 6 NMC LAMB";
/// Chapter 7's section.
pub const GOLDYLOC_TITLE: &str = "ch. 7 GOLDYLOC";
/// Chapter 8's section.
pub const T3_TITLE: &str = "ch. 8 T3";
/// The section of the setups beyond the dissertation's (other ALU models, MASA, SARP).
pub const EXTENSIONS_TITLE: &str =
    "Extensions beyond the dissertation: other bank-ALU models, MASA, SARP";

/// How much of each study runs.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scale {
    /// The dissertation's setups: BERT-Large LAMB with the TS sweep; every network GEMM in
    /// FP32 (the main results) and FP16; T3 over Table 8.2's Mega-GPT-2 and T-NLG at their
    /// TP degrees with the dissertation's single-GPU shortcut.
    Full,
    /// For CI and a first look (a few minutes in a release build): the same LAMB run, a
    /// few GEMMs per application, two T3 sub-layers.
    Quick,
    /// For tests only (seconds): the pipeline end to end on the smallest runs; the
    /// figures are not meaningful.
    Smoke,
}

impl Scale {
    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Quick => "quick",
            Scale::Smoke => "smoke",
        }
    }
}

/// A mechanism of the report.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mechanism {
    /// NMC LAMB (ch. 6).
    Lamb,
    /// GOLDYLOC (ch. 7).
    Goldyloc,
    /// T3 (ch. 8).
    T3,
}

/// One child run: which subcommand, with which arguments, and where its JSON goes.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Short name (`lamb`, `goldyloc-f32`, ...): the JSON is `data/<name>.json`.
    pub name: &'static str,
    /// What the progress line says.
    pub what: &'static str,
    /// The arguments after `nmcp`.
    pub args: Vec<String>,
}

fn strings(xs: &[&str]) -> Vec<String> {
    xs.iter().map(|s| s.to_string()).collect()
}

/// The runs `scale` makes for `mechanisms`, writing plots under `out`.
pub fn stages(scale: Scale, mechanisms: &[Mechanism], out: &Path, jobs: u32) -> Vec<Stage> {
    let mut v = Vec::new();
    let dir = |d: &str| out.join(d).display().to_string();
    if mechanisms.contains(&Mechanism::Lamb) {
        v.push(Stage {
            name: "lamb",
            what: "LAMB: BERT-Large step on NMC, TS sweep, three ALU models",
            args: strings(&["lamb", "--ts-sweep", "--breakdown", "--json"]),
        });
        v.push(Stage {
            name: "lamb-masa",
            what: "LAMB: the same step with subarray-level parallelism (MASA), 1 and 2 ALU ops/tCK",
            args: strings(&[
                "lamb",
                "--preset",
                "lamb-ch6-masa",
                "--alu-models",
                "pipelined+masa,pipelined-2+masa",
                "--ts-sweep",
                "--json",
            ]),
        });
        v.push(Stage {
            name: "lamb-masa16",
            what: "LAMB: MASA with 16 subarrays per bank, row switches hidden (masa-decoupled), \
                   and two macro-commands in flight per engine (masa-2jobs)",
            args: strings(&[
                "lamb",
                "--preset",
                "lamb-ch6-masa16",
                "--alu-models",
                "pipelined+masa-decoupled,pipelined+masa-2jobs,pipelined-2+masa-2jobs",
                "--ts-sweep",
                "--json",
            ]),
        });
        v.push(Stage {
            name: "lamb-masa16-sarp",
            what: "LAMB: masa-2jobs with refresh-access parallelism (SARP: one subarray \
                   refreshed at a time), 1 and 2 ALU ops/tCK",
            args: strings(&[
                "lamb",
                "--preset",
                "lamb-ch6-masa16-sarp",
                "--alu-models",
                "pipelined+masa-2jobs,pipelined-2+masa-2jobs",
                "--ts-sweep",
                "--json",
            ]),
        });
    }
    if mechanisms.contains(&Mechanism::Goldyloc) {
        let dtypes: &[(&'static str, &str, &'static str)] = match scale {
            Scale::Smoke => &[("goldyloc-f16", "f16", "GOLDYLOC: FP16 evaluation")],
            _ => &[
                (
                    "goldyloc-f32",
                    "f32",
                    "GOLDYLOC: FP32 evaluation (main results)",
                ),
                ("goldyloc-f16", "f16", "GOLDYLOC: FP16 evaluation"),
            ],
        };
        for (name, dtype, what) in dtypes {
            let mut args = strings(&["goldyloc", "eval", "--json", "--dtype", dtype]);
            args.push("--svg".into());
            args.push(dir(name));
            if scale != Scale::Full {
                args.push("--quick".into());
            }
            v.push(Stage { name, what, args });
        }
        // Distinct winners and GPU scaling: not at smoke scale (tests).
        if scale != Scale::Smoke {
            v.extend(goldyloc_studies::stages(scale != Scale::Full));
        }
    }
    if mechanisms.contains(&Mechanism::T3) {
        let mut args = strings(&["t3", "--shortcut", "--json"]);
        match scale {
            Scale::Full => {}
            Scale::Quick => args.extend(strings(&[
                "--models",
                "mega-gpt-2",
                "--tp",
                "8",
                "--sublayers",
                "OP,FC-2",
            ])),
            Scale::Smoke => args.extend(strings(&[
                "--h",
                "1024",
                "--tokens",
                "512",
                "--tp",
                "4",
                "--sublayers",
                "OP,FC-2",
            ])),
        }
        args.extend(["--svg".into(), dir("t3"), "--jobs".into(), jobs.to_string()]);
        v.push(Stage {
            name: "t3",
            what: "T3: fused GEMM + reduce-scatter, Table 8.2 sub-layers",
            args,
        });
    }
    v
}

/// What one stage produced.
#[derive(Debug, Clone)]
pub struct StageResult {
    /// The stage.
    pub stage: Stage,
    /// Its JSON.
    pub json: Value,
    /// Wall time.
    pub seconds: f64,
}

/// Runs `stage` with the binary `exe`, keeping its JSON in `data/`.
///
/// # Errors
/// The child could not start, failed (its stderr is in the message), or printed no JSON.
pub fn run_stage(exe: &Path, stage: &Stage, out: &Path) -> Result<StageResult, String> {
    let started = Instant::now();
    let cmdline = format!("nmcp {}", stage.args.join(" "));
    let o = Command::new(exe)
        .args(&stage.args)
        .output()
        .map_err(|e| format!("{cmdline}: cannot start {}: {e}", exe.display()))?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let tail: Vec<&str> = err.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "{cmdline}: failed ({}):\n{}",
            o.status,
            tail.join("\n")
        ));
    }
    let json: Value = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("{cmdline}: output is not JSON: {e}"))?;
    let data = out.join("data");
    std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
    crate::cmd::io::write_file(&data.join(format!("{}.json", stage.name)), &o.stdout)?;
    Ok(StageResult {
        stage: stage.clone(),
        json,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// A figure file of the report with its caption.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Path relative to the report directory.
    pub file: String,
    /// What it shows.
    pub caption: String,
}

/// One chapter of the report: its headline figures and plots.
#[derive(Debug, Clone)]
pub struct Section {
    /// `ch. 6 LAMB`, ...
    pub title: &'static str,
    /// The command lines that produced it.
    pub commands: Vec<String>,
    /// Headline figures.
    pub headlines: Vec<Headline>,
    /// Plots.
    pub figures: Vec<Figure>,
}

/// Writes `svg` as `out/file` and returns it as a [`Figure`].
fn figure(out: &Path, file: &str, svg: &str, caption: String) -> Result<Figure, String> {
    crate::cmd::io::write_file(&out.join(file), svg.as_bytes())?;
    Ok(Figure {
        file: file.into(),
        caption,
    })
}

/// The plots the subcommands wrote themselves under `out/dir` (those that exist).
fn child_figures(out: &Path, dir: &str, files: &[(String, String)]) -> Vec<Figure> {
    files
        .iter()
        .filter(|(f, _)| out.join(dir).join(f).is_file())
        .map(|(f, c)| Figure {
            file: format!("{dir}/{f}"),
            caption: c.clone(),
        })
        .collect()
}

/// Builds the report's sections from the stages' results, writing the report's own plots.
///
/// # Errors
/// A mechanism's JSON lacks a key the report needs, or a plot cannot be written.
pub fn sections(results: &[StageResult], out: &Path) -> Result<Vec<Section>, String> {
    let cmd = |r: &StageResult| format!("nmcp {}", r.stage.args.join(" "));
    let mut v = Vec::new();
    let mut extensions = Section {
        title: EXTENSIONS_TITLE,
        commands: Vec::new(),
        headlines: Vec::new(),
        figures: Vec::new(),
    };
    if let Some(r) = results.iter().find(|r| r.stage.name == "lamb") {
        let mut figures = vec![figure(
            out,
            "lamb-ts.svg",
            &plot::lamb_ts(&r.json).map_err(|e| e.0)?,
            "LAMB speedup over the ideal GPU at peak against the TS size, per bank-ALU issue \
             model, with the physical bound and the dissertation's points"
                .into(),
        )?];
        figures.push(figure(
            out,
            "lamb-time.svg",
            &plot::lamb_time(&r.json).map_err(|e| e.0)?,
            "Where the NMC step's time goes per ALU model; the columns' share is the banks' \
             data-bus utilisation"
                .into(),
        )?);
        v.push(Section {
            title: LAMB_TITLE,
            commands: vec![cmd(r)],
            headlines: figures::lamb(&r.json).map_err(|e| e.0)?,
            figures,
        });
        // The run's other ALU models, then MASA and SARP: beyond the dissertation.
        extensions.commands.push(cmd(r));
        extensions
            .headlines
            .extend(figures::lamb_extensions(&r.json, true).map_err(|e| e.0)?);
    }
    for name in ["lamb-masa", "lamb-masa16", "lamb-masa16-sarp"] {
        if let Some(m) = results.iter().find(|r| r.stage.name == name) {
            extensions.commands.push(cmd(m));
            extensions
                .headlines
                .extend(figures::lamb_extensions(&m.json, false).map_err(|e| e.0)?);
        }
    }
    let gl: Vec<&StageResult> = results
        .iter()
        .filter(|r| r.stage.name == "goldyloc-f32" || r.stage.name == "goldyloc-f16")
        .collect();
    if !gl.is_empty() {
        let mut headlines = Vec::new();
        let mut figs = Vec::new();
        let mut acc_groups: Vec<plot::BarGroup> = Vec::new();
        let mut speed_groups: Vec<plot::BarGroup> = Vec::new();
        for r in &gl {
            let label = if r.stage.name.ends_with("f32") {
                "FP32"
            } else {
                "FP16"
            };
            let h = figures::goldyloc(&r.json, label).map_err(|e| e.0)?;
            for x in &h {
                let n = x
                    .figure
                    .split(", ")
                    .nth(1)
                    .unwrap_or("")
                    .trim_end_matches(" (held out by size)")
                    .to_string();
                let push =
                    |groups: &mut Vec<plot::BarGroup>, series: Vec<(String, f64)>| match groups
                        .iter_mut()
                        .find(|g| g.0 == n)
                    {
                        Some(g) => g.1.extend(series),
                        None => groups.push((n.clone(), series)),
                    };
                if x.figure.starts_with("predictor accuracy") {
                    let maj = x
                        .baseline
                        .trim_start_matches("majority class ")
                        .trim_end_matches(" %")
                        .parse::<f64>()
                        .unwrap_or(0.0)
                        / 100.0;
                    let mut s = vec![
                        (format!("ours {label}"), x.ours),
                        (format!("majority class {label}"), maj),
                    ];
                    if label == "FP32" || gl.len() == 1 {
                        s.push(("dissertation".into(), x.dissertation.unwrap_or(0.0)));
                    }
                    push(&mut acc_groups, s);
                }
                if x.figure.starts_with("GOLDYLOC over Default,") {
                    let mut s = vec![(format!("ours {label}"), x.ours)];
                    if label == "FP32" || gl.len() == 1 {
                        s.push(("dissertation".into(), x.dissertation.unwrap_or(0.0)));
                    }
                    push(&mut speed_groups, s);
                }
            }
            headlines.extend(h);
            let files: Vec<(String, String)> = [2, 4, 8, 16]
                .iter()
                .map(|n| {
                    (
                        format!("goldyloc_{n}gemms.svg"),
                        format!(
                            "{label}, {n} independent GEMMs: per-application geomean speedup \
                             over Sequential of every configuration"
                        ),
                    )
                })
                .collect();
            figs.extend(child_figures(out, r.stage.name, &files));
        }
        let mut figures = vec![
            figure(
                out,
                "goldyloc-over-default.svg",
                &plot::grouped(
                    "GOLDYLOC over Default (geomean) per number of independent GEMMs",
                    "speedup",
                    &speed_groups,
                )
                .map_err(|e| e.0)?,
                "GOLDYLOC's geomean speedup over Default per number of GEMMs, next to the \
                 dissertation's"
                    .into(),
            )?,
            figure(
                out,
                "goldyloc-accuracy.svg",
                &plot::grouped(
                    "Predictor accuracy on GEMM sizes held out of training",
                    "accuracy",
                    &acc_groups,
                )
                .map_err(|e| e.0)?,
                "Predictor accuracy (5-fold cross-validation by GEMM size) next to the \
                 majority class and the dissertation's"
                    .into(),
            )?,
        ];
        figures.extend(figs);
        let mut commands: Vec<String> = gl.iter().map(|r| cmd(r)).collect();
        headlines.extend(goldyloc_studies::cp_decision().map_err(|e| e.0)?);
        if let Some(t) = results
            .iter()
            .find(|r| r.stage.name == goldyloc_studies::TUNE_STAGE)
        {
            commands.push(cmd(t));
            headlines.push(goldyloc_studies::distinct_winners(&t.json).map_err(|e| e.0)?);
        }
        let scaled: Vec<(&str, &Value)> = results
            .iter()
            .filter(|r| {
                goldyloc_studies::SCALING
                    .iter()
                    .any(|(n, _, _)| *n == r.stage.name)
            })
            .map(|r| (r.stage.name, &r.json))
            .collect();
        commands.extend(
            results
                .iter()
                .filter(|r| scaled.iter().any(|(n, _)| *n == r.stage.name))
                .map(cmd),
        );
        let full = gl
            .iter()
            .find(|r| r.stage.name == "goldyloc-f32")
            .map(|r| &r.json);
        headlines.extend(goldyloc_studies::gpu_scaling(&scaled, full).map_err(|e| e.0)?);
        v.push(Section {
            title: GOLDYLOC_TITLE,
            commands,
            headlines,
            figures,
        });
    }
    if let Some(r) = results.iter().find(|r| r.stage.name == "t3") {
        let rows = r
            .json
            .as_array()
            .ok_or_else(|| "t3 JSON: not an array of rows".to_string())?;
        let files = [
            (
                "t3-speedup.svg".to_string(),
                "Speedup over Sequential per sub-layer and configuration, with the geomean"
                    .to_string(),
            ),
            (
                "t3-traffic.svg".to_string(),
                "DRAM traffic by kind per sub-layer for Sequential, T3 and T3-MCA".to_string(),
            ),
        ];
        v.push(Section {
            title: T3_TITLE,
            commands: vec![cmd(r)],
            headlines: figures::t3(rows).map_err(|e| e.0)?,
            figures: child_figures(out, "t3", &files),
        });
    }
    if !extensions.headlines.is_empty() {
        v.push(extensions);
    }
    let mut headlines = Vec::new();
    let mut commands = Vec::new();
    for r in results {
        let name = r.stage.name;
        let h = if name == "lamb" {
            energy::lamb(&r.json)
        } else if name == "t3" {
            let rows = r.json.as_array().map(Vec::as_slice).unwrap_or(&[]);
            energy::t3(rows)
        } else if name == "goldyloc-f32" || name == "goldyloc-f16" {
            energy::goldyloc(
                &r.json,
                if name.ends_with("f32") {
                    "FP32"
                } else {
                    "FP16"
                },
            )
        } else {
            continue;
        };
        headlines.extend(h.map_err(|e| e.0)?);
        commands.push(cmd(r));
    }
    if !headlines.is_empty() {
        v.push(Section {
            title: "Energy (not evaluated in the dissertation)",
            commands,
            headlines,
            figures: Vec::new(),
        });
    }
    Ok(v)
}

/// Arguments of a report run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Report directory.
    pub out: PathBuf,
    /// Scale.
    pub scale: Scale,
    /// Mechanisms.
    pub mechanisms: Vec<Mechanism>,
    /// T3 sub-layers run at once.
    pub jobs: u32,
    /// No progress bar.
    pub quiet: bool,
    /// rocBLAS' MI100 tuning data (`matched.csv`, `winners.json`): when given, the
    /// validation section compares the MI100 model with it.
    pub mi100_data: Option<PathBuf>,
    /// Concurrent-GEMM measurements of an H200 (`gemm-concurrency.json`): when given, the
    /// validation section compares the H200 preset with them.
    pub h200_data: Option<PathBuf>,
    /// The GPU model's contention options for the H200 comparison (`--latency loaded`, ...).
    pub h200_model_args: Vec<String>,
}

/// Runs every stage, writes the report, returns the sections (for the terminal summary).
///
/// # Errors
/// A stage failed (the message names its command line and carries its stderr), or the
/// report cannot be written.
pub fn run(o: &Options) -> Result<Vec<Section>, Box<dyn std::error::Error>> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the nmcp binary: {e}"))?;
    std::fs::create_dir_all(&o.out).map_err(|e| format!("{}: {e}", o.out.display()))?;
    let mut stages = stages(o.scale, &o.mechanisms, &o.out, o.jobs);
    if let Some(d) = &o.mi100_data {
        stages.push(validation::mi100_stage(d));
    }
    if let Some(d) = &o.h200_data {
        stages.push(validation::h200_stage(d, &o.h200_model_args));
    }
    let bar = indicatif::ProgressBar::new(stages.len() as u64);
    if o.quiet || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} ({elapsed})")
    {
        bar.set_style(style);
        bar.enable_steady_tick(Duration::from_millis(200));
    }
    let started = Instant::now();
    let mut results = Vec::new();
    for s in &stages {
        bar.set_message(s.what);
        let r = run_stage(&exe, s, &o.out);
        match r {
            Ok(r) => {
                bar.println(format!("  {} ({:.1} s)", s.what, r.seconds));
                results.push(r);
            }
            Err(e) => {
                bar.abandon();
                return Err(e.into());
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let mut sections = sections(&results, &o.out)?;
    validation::add_mi100(&mut sections, &results, &o.out)?;
    validation::add_h200(&mut sections, &results)?;
    let meta = page::Meta {
        scale: o.scale.name(),
        version: env!("CARGO_PKG_VERSION"),
        seconds: started.elapsed().as_secs_f64(),
    };
    crate::cmd::io::write_file(
        &o.out.join("index.html"),
        page::html(&sections, &meta).as_bytes(),
    )?;
    crate::cmd::io::write_file(
        &o.out.join("README.md"),
        page::markdown(&sections, &meta).as_bytes(),
    )?;
    let all: Vec<&Headline> = sections.iter().flat_map(|s| &s.headlines).collect();
    crate::cmd::io::write_file(
        &o.out.join("data").join("headlines.json"),
        (serde_json::to_string_pretty(&all)? + "\n").as_bytes(),
    )?;
    Ok(sections)
}
