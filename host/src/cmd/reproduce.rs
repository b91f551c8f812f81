//! `nmcp reproduce`: the dissertation's figures regenerated into `report/` (see
//! [`crate::reproduce`]).

use std::path::PathBuf;

use super::io::emit;
use super::CmdResult;
use crate::reproduce::{self, Mechanism, Scale};

/// Arguments of `nmcp reproduce`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ReproduceArgs {
    /// Directory of the report (index.html, README.md, the plots, and each run's JSON in
    /// data/).
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Short runs for CI and a first look (same as --scale quick).
    #[arg(long)]
    quick: bool,
    /// How much of each study runs.
    #[arg(long, value_enum, default_value_t = Scale::Full)]
    scale: Scale,
    /// Mechanisms to run, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "lamb,goldyloc,t3"
    )]
    only: Vec<Mechanism>,
    /// T3 sub-layers simulated at once (default: the machine's cores).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: Option<u32>,
    /// No progress bar and no summary table (the report is still written).
    #[arg(long)]
    quiet: bool,
    /// rocBLAS' MI100 tuning data directory (e.g. ../shared/data/mi100-rocblas/): adds the
    /// MI100 model against it to the report's validation section.
    #[arg(long)]
    mi100_data: Option<PathBuf>,
    /// Concurrent-GEMM measurements of an H200 (e.g.
    /// ../shared/data/h200/gemm-concurrency.json): adds the H200 preset against them to
    /// the report's validation section (about 2-5 CPU-minutes).
    #[arg(long)]
    h200_data: Option<PathBuf>,
    /// The GPU model's contention options for the H200 comparison.
    #[command(flatten)]
    #[serde(flatten)]
    h200_model: super::model_options::ModelOptions,
}

/// Runs `nmcp reproduce`.
pub fn run(a: ReproduceArgs) -> CmdResult {
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(256) as u32)
    });
    let o = reproduce::Options {
        out: a.out.clone(),
        scale: if a.quick { Scale::Quick } else { a.scale },
        mechanisms: a.only,
        jobs,
        quiet: a.quiet,
        mi100_data: a.mi100_data.clone(),
        h200_data: a.h200_data.clone(),
        h200_model_args: a.h200_model.to_args(),
    };
    let sections = reproduce::run(&o)?;
    if a.quiet {
        return Ok(());
    }
    emit(&format!(
        "{}\nreport: {} and {}\n",
        reproduce::page::summary(&sections),
        a.out.join("index.html").display(),
        a.out.join("README.md").display()
    ))
}

impl crate::scenario::Options for ReproduceArgs {
    const RELATIONS: &'static [crate::scenario::Relation] =
        &[crate::scenario::Relation::Conflicts("quick", "scale")];
}
