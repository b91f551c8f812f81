//! `nmcp t3`: the Table 8.2 sub-layer study (no subcommand), `nmcp t3 check` (a fused
//! GEMM + reduce-scatter with real data, written as `.npy`), `nmcp t3 rs` (a plain ring
//! reduce-scatter timed alone).

use std::path::PathBuf;
use std::time::Instant;

use nmcp_emulator::t3::{self, CheckRun, Scenario, Simulate, SubLayer, TABLE_8_2};

use super::io::emit;
use super::{CmdResult, UsageError};
use crate::checkpoint;
use crate::scenario::Relation;
use crate::t3 as report;
use crate::t3::machine::{Dtype, MachineArgs};
use crate::t3::select::{
    known_models, parse_bytes, parse_check_config, parse_model, parse_ring_gpus, parse_study_gpus,
    parse_sublayer, parse_tp,
};
use crate::t3::study::t3_error;

/// Arguments of `nmcp t3`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct T3Args {
    #[command(subcommand)]
    command: Option<T3Command>,
    #[command(flatten)]
    study: StudyArgs,
}

#[derive(clap::Subcommand, Debug)]
enum T3Command {
    /// Fused (or sequential) GEMM + reduce-scatter with real data: every GPU's partial
    /// output and final block as .npy, checked against the element-wise sum.
    Check(CheckArgs),
    /// Time a plain ring reduce-scatter alone, next to the bandwidth-latency model.
    Rs(RsArgs),
    /// Dissertation 8.2.2 (Fig. 8.4): the GEMM and the ring reduce-scatter sharing the
    /// CUs (e.g. 72-8, 64-16), next to each alone and the ideal overlap.
    CuSplit(CuSplitArgs),
}

/// `nmcp t3 cu-split`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct CuSplitArgs {
    /// Model of Table 8.2.
    #[arg(long, default_value = "mega-gpt-2", value_parser = parse_model)]
    #[serde(deserialize_with = "model::one")]
    model: String,
    /// Tensor-parallel degree (= GPUs).
    #[arg(long, default_value_t = 8, value_parser = parse_tp)]
    #[serde(deserialize_with = "tp::one")]
    tp: u32,
    /// Sub-layer: OP, FC-2, FC-1 or IP.
    #[arg(long, default_value = "OP", value_parser = parse_sublayer)]
    #[serde(deserialize_with = "sublayer::one")]
    sublayer: SubLayerName,
    /// CU splits GEMM-RS, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "72-8,64-16", value_parser = parse_split)]
    #[serde(deserialize_with = "split::many")]
    split: Vec<(u32, u32)>,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    shortcut: bool,
    #[command(flatten)]
    #[serde(flatten)]
    machine: MachineArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

fn parse_split(s: &str) -> Result<(u32, u32), String> {
    let (a, b) = s
        .split_once('-')
        .ok_or_else(|| format!("split {s:?}: expected GEMM-RS CU counts like 72-8"))?;
    let p = |v: &str| {
        v.trim()
            .parse::<u32>()
            .map_err(|_| format!("split {s:?}: {v:?} is not a CU count"))
    };
    Ok((p(a)?, p(b)?))
}

/// The sub-layer study (`nmcp t3` with no subcommand).
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct StudyArgs {
    /// Table 8.2 models, comma-separated (`all` = all five at their TPs).
    #[arg(long, value_delimiter = ',', default_value = "mega-gpt-2,t-nlg", value_parser = parse_model)]
    #[serde(deserialize_with = "model::many")]
    models: Vec<String>,
    /// TP degrees, comma-separated (default: each model's TPs from Table 8.2; 8,16 for a
    /// custom model).
    #[arg(long, value_delimiter = ',', value_parser = parse_tp)]
    #[serde(default, deserialize_with = "tp::option_many")]
    tp: Option<Vec<u32>>,
    /// Sub-layers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "OP,FC-2,FC-1,IP", value_parser = parse_sublayer)]
    #[serde(deserialize_with = "sublayer::many")]
    sublayers: Vec<SubLayerName>,
    /// Hidden size of a custom model (instead of the table; needs --tokens; at most 131072,
    /// 10x GPT-3's, so that the sub-layers' GEMM sizes stay far inside 32 bits).
    #[arg(long, value_name = "H", value_parser = clap::value_parser!(u32).range(1..=131_072))]
    h: Option<u32>,
    /// Tokens of a custom model (sequence length x batch; needs --h; at most 2^20).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    tokens: Option<u32>,
    /// Name of the custom model in reports.
    #[arg(long, value_name = "NAME", default_value = "custom")]
    model_name: String,
    /// GPUs in the ring (0 = each sub-layer's TP).
    #[arg(long, default_value_t = 0, value_parser = parse_study_gpus)]
    #[serde(deserialize_with = "study_gpus::one")]
    gpus: u32,
    /// Simulate one GPU and inject its neighbours' traffic (the dissertation's shortcut)
    /// instead of all GPUs.
    #[arg(long)]
    shortcut: bool,
    /// Element type of the GEMM output and the reductions.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    #[command(flatten)]
    #[serde(flatten)]
    machine: MachineArgs,
    /// Machine-readable output: a JSON array with one row per sub-layer and configuration.
    #[arg(long)]
    json: bool,
    /// Write t3-speedup.svg and t3-traffic.svg into this directory.
    #[arg(long, value_name = "DIR")]
    svg: Option<PathBuf>,
    /// Simulations run at once (threads): each sub-layer's isolated GEMM, rings and fused
    /// runs are separate simulations, the longest expected first; output is the same for
    /// any value.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    jobs: u32,
    /// Timeline of the fused runs (t3 and t3-mca) of the one selected sub-layer.
    #[command(flatten)]
    #[serde(flatten)]
    timeline: crate::timeline::TimelineArgs,
}

/// `nmcp t3 check`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct CheckArgs {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 4, value_parser = parse_ring_gpus)]
    #[serde(deserialize_with = "ring_gpus::one")]
    gpus: u32,
    /// Output rows.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    m: u32,
    /// Output columns.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    n: u32,
    /// Reduction dimension per GPU.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    k: u32,
    /// Element type of the outputs and the reductions.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    /// Configuration: t3, t3-mca or sequential.
    #[arg(long, default_value = "t3", value_parser = parse_check_config)]
    #[serde(deserialize_with = "check_config::one")]
    config: Scenario,
    #[command(flatten)]
    #[serde(flatten)]
    machine: MachineArgs,
    /// Write partial_G.npy, reduced_G.npy and layout.json here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Machine-readable verdict.
    #[arg(long)]
    json: bool,
}

/// `nmcp t3 rs`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RsArgs {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 8, value_parser = parse_ring_gpus)]
    #[serde(deserialize_with = "ring_gpus::one")]
    gpus: u32,
    /// Bytes of the array reduced (each GPU's whole array; suffixes K, M, G = 2^10...).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    #[serde(deserialize_with = "bytes::one")]
    bytes: u64,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    shortcut: bool,
    /// Element type of the reduction.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    #[command(flatten)]
    #[serde(flatten)]
    machine: MachineArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

crate::scenario::parsed!(mod model = parse_model => String);
crate::scenario::parsed!(mod tp = parse_tp => u32);
/// A sub-layer name from the static table (an alias, so that serde's derive does not
/// take the `&'static str` for a string borrowed from the input).
type SubLayerName = &'static str;

crate::scenario::parsed!(mod sublayer = parse_sublayer => SubLayerName);
crate::scenario::parsed!(mod split = parse_split => (u32, u32));
crate::scenario::parsed!(mod study_gpus = parse_study_gpus => u32);
crate::scenario::parsed!(mod ring_gpus = parse_ring_gpus => u32);
crate::scenario::parsed!(mod check_config = parse_check_config => Scenario);
crate::scenario::parsed!(mod bytes = parse_bytes => u64);

impl crate::scenario::Options for StudyArgs {
    const RELATIONS: &'static [Relation] = &[
        Relation::Requires("h", "tokens"),
        Relation::Conflicts("h", "models"),
        Relation::Requires("tokens", "h"),
        Relation::Requires("model-name", "h"),
    ];
}
impl crate::scenario::Options for CheckArgs {}
impl crate::scenario::Options for RsArgs {}
impl crate::scenario::Options for CuSplitArgs {}

impl T3Args {
    /// The typed options of the command run (the study's, or the subcommand's).
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            None => &mut self.study,
            Some(T3Command::Check(a)) => a,
            Some(T3Command::Rs(a)) => a,
            Some(T3Command::CuSplit(a)) => a,
        }
    }
}

/// Runs `nmcp t3`.
pub fn run(a: T3Args) -> CmdResult {
    if let Some(c) = &a.command {
        let name = match c {
            T3Command::Check(_) => "t3 check",
            T3Command::Rs(_) => "t3 rs",
            T3Command::CuSplit(_) => "t3 cu-split",
        };
        checkpoint::unsupported(name)?;
    }
    match a.command {
        Some(T3Command::Check(c)) => run_check(&c),
        Some(T3Command::Rs(r)) => run_rs(&r),
        Some(T3Command::CuSplit(c)) => run_cu_split(&c),
        None => run_study(&a.study),
    }
}

/// The sub-layers the study arguments name, in order (model, TP, sub-layer).
fn study_sublayers(a: &StudyArgs) -> Result<Vec<SubLayer>, UsageError> {
    let custom =
        a.h.zip(a.tokens)
            .map(|(h, t)| (a.model_name.as_str(), h, t));
    crate::t3::select::study_sublayers(&a.models, a.tp.as_deref(), &a.sublayers, custom)
        .map_err(UsageError)
}

fn run_study(a: &StudyArgs) -> CmdResult {
    let simulate = if a.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let mut opts = a.machine.options(a.gpus, simulate, a.dtype);
    opts.threads = a.machine.threads_for(a.jobs);
    let sls = study_sublayers(a)?;
    if sls.is_empty() {
        return Err(UsageError("no sub-layers selected".into()).into());
    }
    let trace = a.timeline.config();
    if trace.is_some() && sls.len() != 1 {
        return Err(UsageError(format!(
            "--trace/--vcd record one sub-layer's runs, but {} are selected; pick one with --sublayers and --tp (or --models)",
            sls.len()
        ))
        .into());
    }
    let bar = report::study::progress(sls.len() as u64, a.json);
    let started = Instant::now();
    let (results, timeline) = report::study::run(&opts, &sls, a.jobs as usize, trace, &bar)?;
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    if let Some(dir) = &a.svg {
        report::plot::write_svgs(dir, &results)?;
    }
    crate::timeline::write_if_asked(&a.timeline, timeline.as_ref())?;
    if a.json {
        let rows = report::rows(&results, a.gpus, simulate, a.dtype.gemm());
        emit(&(serde_json::to_string_pretty(&rows)? + "\n"))
    } else {
        let ctx = report::ReportContext {
            gpus: a.gpus,
            simulate,
            gpu: opts.gpu.name.clone(),
            dtype: a.dtype.name(),
            gemm_dtype: a.dtype.gemm(),
            wall_seconds: wall,
        };
        let mut text = report::report(&results, &ctx);
        if let Some(dir) = &a.svg {
            text.push_str(&format!(
                "plots: {}, {}\n",
                dir.join("t3-speedup.svg").display(),
                dir.join("t3-traffic.svg").display()
            ));
        }
        emit(&text)
    }
}

fn run_check(c: &CheckArgs) -> CmdResult {
    let opts = c.machine.options(c.gpus, Simulate::AllGpus, c.dtype);
    let run = CheckRun {
        gpus: c.gpus,
        m: c.m,
        n: c.n,
        k: c.k,
        scenario: c.config,
    };
    let bar = super::io::spinner("t3 check: simulating", false);
    let out = t3::check(&opts, &run).map_err(|e| t3_error(e, "t3 check: "));
    bar.finish_and_clear();
    let out = out?;
    if let Some(dir) = &c.out {
        report::write_check_dir(dir, &run, c.dtype.gemm(), &out)?;
    }
    emit(&report::lines::check(
        c.json,
        &run,
        c.dtype.name(),
        c.out.as_deref(),
        &out,
    )?)?;
    if out.mismatches > 0 {
        return Err(format!(
            "t3 check failed: {} element(s) differ from the sum of the partials; first: {}",
            out.mismatches,
            out.first_mismatch.as_deref().unwrap_or("(not described)")
        )
        .into());
    }
    Ok(())
}

fn run_rs(r: &RsArgs) -> CmdResult {
    let simulate = if r.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let opts = r.machine.options(r.gpus, simulate, r.dtype);
    let bar = super::io::spinner("t3 rs: simulating the ring", r.json);
    let t = t3::time_reduce_scatter(&opts, r.bytes).map_err(|e| t3_error(e, "t3 rs: "));
    bar.finish_and_clear();
    let t = t?;
    emit(&report::lines::rs(r.json, r.gpus, r.bytes, simulate, &t)?)
}

fn run_cu_split(c: &CuSplitArgs) -> CmdResult {
    let simulate = if c.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let opts = c.machine.options(0, simulate, Dtype::F16);
    let Some(&(_, h, tokens, _)) = TABLE_8_2.iter().find(|m| m.0 == c.model) else {
        return Err(Box::new(UsageError(format!(
            "--model {}: cu-split takes one model of Table 8.2 ({})",
            c.model,
            known_models()
        ))));
    };
    let sl = t3::sublayers(&c.model, h, tokens, c.tp)
        .into_iter()
        .find(|s| s.name == c.sublayer)
        .ok_or_else(|| UsageError(format!("--sublayer {}: unknown", c.sublayer)))?;
    let mut rows = Vec::new();
    let bar = super::io::spinner("t3 cu-split", c.json);
    for &(g, r) in &c.split {
        bar.set_message(format!(
            "t3 cu-split {g}-{r}: GEMM alone, RS alone, both at once"
        ));
        let row = t3::run::cu_split(&opts, &sl, g, r).map_err(|e| t3_error(e, "t3 cu-split: "));
        if row.is_err() {
            bar.finish_and_clear();
        }
        rows.push(row?);
    }
    bar.finish_and_clear();
    emit(&report::lines::cu_split(
        c.json, &c.model, &sl, c.tp, &rows,
    )?)
}

#[cfg(test)]
#[path = "t3_tests.rs"]
mod tests;
