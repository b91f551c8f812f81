//! `nmcp t3`: the Table 8.2 sub-layer study (no subcommand), `nmcp t3 check` (a fused
//! GEMM + reduce-scatter with real data, written as `.npy`), `nmcp t3 rs` (a plain ring
//! reduce-scatter timed alone).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use nmcp_emulator::t3::gemm::ProducerMemory;
use nmcp_emulator::t3::{
    self, CheckRun, LinkConfig, Scenario, Simulate, SubLayer, SubLayerResult, T3Error, T3Options,
    TABLE_8_2,
};
use nmcp_isa::gemm_ext::GemmDataType;

use super::io::emit;
use super::{CmdResult, UsageError};
use crate::checkpoint;
use crate::t3 as report;

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
#[derive(clap::Args, Debug)]
struct CuSplitArgs {
    /// Model of Table 8.2.
    #[arg(long, default_value = "mega-gpt-2", value_parser = parse_model)]
    model: String,
    /// Tensor-parallel degree (= GPUs).
    #[arg(long, default_value_t = 8, value_parser = parse_tp)]
    tp: u32,
    /// Sub-layer: OP, FC-2, FC-1 or IP.
    #[arg(long, default_value = "OP", value_parser = parse_sublayer)]
    sublayer: &'static str,
    /// CU splits GEMM-RS, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "72-8,64-16", value_parser = parse_split)]
    split: Vec<(u32, u32)>,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    shortcut: bool,
    #[command(flatten)]
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

/// Element type on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Dtype {
    F16,
    F32,
}

impl Dtype {
    fn gemm(self) -> GemmDataType {
        match self {
            Dtype::F16 => GemmDataType::F16,
            Dtype::F32 => GemmDataType::F32,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Dtype::F16 => "f16",
            Dtype::F32 => "f32",
        }
    }
}

/// What every T3 run is made on: the GPU and the links.
#[derive(clap::Args, Debug, Clone)]
struct MachineArgs {
    /// The future-hardware variant: Table 8.1's GPU with twice the CUs.
    #[arg(long)]
    gpu_2x_cu: bool,
    /// Link bandwidth per direction in GB/s (Table 8.1: 150 GB/s bidirectional).
    #[arg(long, value_name = "GBPS", default_value_t = LinkConfig::default().bytes_per_ns, value_parser = super::numbers::bandwidth_gbps)]
    link_gbps: f64,
    /// One-way link latency in ns.
    #[arg(long, value_name = "NS", default_value_t = LinkConfig::default().latency_ns, value_parser = super::numbers::duration_ns)]
    link_latency_ns: f64,
    /// MCA occupancy threshold in queue entries per pseudo-channel (default: picked from
    /// the producer's isolated first stage).
    #[arg(long, value_name = "N")]
    mca_threshold: Option<usize>,
    /// MCA anti-starvation limit in DRAM cycles.
    #[arg(long, value_name = "CYCLES", default_value_t = T3Options::default().mca_starvation_cycles)]
    mca_starvation_cycles: u64,
    /// Seed of the data values.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Split-K factor of the producer GEMM (8.6.7): workgroups adding to each output tile.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    split_k: u8,
    /// Most 16-cycle slices one GPU is simulated before the next GPU's turn (at most 31
    /// and what fits in the link latency; 1 = all GPUs in lockstep). A simulation speed
    /// setting: results do not depend on it.
    #[arg(long, value_name = "SLICES", default_value_t = T3Options::default().window_slices, value_parser = clap::value_parser!(u32).range(1..=31))]
    window_slices: u32,
    /// The producer GEMM's DRAM loads in phases of a quarter of its K loop instead of one
    /// main-loop iteration each (the kernel prefetches one iteration ahead), which hides
    /// the read latency the communication adds (docs/calibration.md).
    #[arg(long)]
    coarse_producer_loads: bool,
    /// Read the producer's input panels as contiguous streams instead of in the
    /// operands' memory layout (forward: weights along K; backward: along M).
    #[arg(long)]
    flat_operand_layout: bool,
}

impl MachineArgs {
    fn options(&self, gpus: u32, simulate: Simulate, dtype: Dtype) -> T3Options {
        let mut o = T3Options {
            gpus,
            simulate,
            link: LinkConfig {
                bytes_per_ns: self.link_gbps,
                latency_ns: self.link_latency_ns,
            },
            dtype: dtype.gemm(),
            mca_threshold: self.mca_threshold,
            mca_starvation_cycles: self.mca_starvation_cycles,
            seed: self.seed,
            split_k: self.split_k,
            window_slices: self.window_slices,
            producer_memory: ProducerMemory {
                per_iteration_loads: !self.coarse_producer_loads,
                operand_layout: !self.flat_operand_layout,
            },
            limits: crate::limits::sim_limits(),
            ..T3Options::default()
        };
        if self.gpu_2x_cu {
            o.gpu.cus *= 2;
            o.gpu.name = format!("{}-2x-cu", o.gpu.name);
        }
        o
    }
}

/// The sub-layer study (`nmcp t3` with no subcommand).
#[derive(clap::Args, Debug)]
struct StudyArgs {
    /// Table 8.2 models, comma-separated (`all` = all five at their TPs).
    #[arg(long, value_delimiter = ',', default_value = "mega-gpt-2,t-nlg", value_parser = parse_model)]
    models: Vec<String>,
    /// TP degrees, comma-separated (default: each model's TPs from Table 8.2; 8,16 for a
    /// custom model).
    #[arg(long, value_delimiter = ',', value_parser = parse_tp)]
    tp: Option<Vec<u32>>,
    /// Sub-layers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "OP,FC-2,FC-1,IP", value_parser = parse_sublayer)]
    sublayers: Vec<&'static str>,
    /// Hidden size of a custom model (instead of the table; needs --tokens; at most 131072,
    /// 10x GPT-3's, so that the sub-layers' GEMM sizes stay far inside 32 bits).
    #[arg(long, value_name = "H", requires = "tokens", conflicts_with = "models", value_parser = clap::value_parser!(u32).range(1..=131_072))]
    h: Option<u32>,
    /// Tokens of a custom model (sequence length x batch; needs --h; at most 2^20).
    #[arg(long, value_name = "T", requires = "h", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    tokens: Option<u32>,
    /// Name of the custom model in reports.
    #[arg(long, value_name = "NAME", requires = "h", default_value = "custom")]
    model_name: String,
    /// GPUs in the ring (0 = each sub-layer's TP).
    #[arg(long, default_value_t = 0, value_parser = parse_study_gpus)]
    gpus: u32,
    /// Simulate one GPU and inject its neighbours' traffic (the dissertation's shortcut)
    /// instead of all GPUs.
    #[arg(long)]
    shortcut: bool,
    /// Element type of the GEMM output and the reductions.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    #[command(flatten)]
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
    timeline: crate::timeline::TimelineArgs,
}

/// `nmcp t3 check`.
#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 4, value_parser = parse_ring_gpus)]
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
    config: Scenario,
    #[command(flatten)]
    machine: MachineArgs,
    /// Write partial_G.npy, reduced_G.npy and layout.json here.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Machine-readable verdict.
    #[arg(long)]
    json: bool,
}

/// `nmcp t3 rs`.
#[derive(clap::Args, Debug)]
struct RsArgs {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 8, value_parser = parse_ring_gpus)]
    gpus: u32,
    /// Bytes of the array reduced (each GPU's whole array; suffixes K, M, G = 2^10...).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    bytes: u64,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    shortcut: bool,
    /// Element type of the reduction.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    dtype: Dtype,
    #[command(flatten)]
    machine: MachineArgs,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// Known model names, for messages.
fn known_models() -> String {
    let mut names: Vec<&str> = TABLE_8_2.iter().map(|m| m.0).collect();
    names.push("all");
    names.join(", ")
}

fn parse_model(s: &str) -> Result<String, String> {
    let s = s.trim().to_ascii_lowercase();
    if s == "all" || TABLE_8_2.iter().any(|m| m.0 == s) {
        Ok(s)
    } else {
        Err(format!("unknown model {s:?} (known: {})", known_models()))
    }
}

fn parse_tp(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(t) if t >= 2 => Ok(t),
        Ok(t) => Err(format!(
            "TP {t}: a reduce-scatter needs a tensor-parallel degree of at least 2"
        )),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

const SUBLAYERS: [&str; 4] = ["OP", "FC-2", "FC-1", "IP"];

fn parse_sublayer(s: &str) -> Result<&'static str, String> {
    let norm = s.trim().to_ascii_uppercase().replace('_', "-");
    let norm = match norm.as_str() {
        "FC2" => "FC-2".to_string(),
        "FC1" => "FC-1".to_string(),
        _ => norm,
    };
    SUBLAYERS
        .into_iter()
        .find(|n| *n == norm)
        .ok_or_else(|| format!("unknown sub-layer {s:?} (known: {})", SUBLAYERS.join(", ")))
}

fn parse_ring_gpus(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(g) if g >= 2 => Ok(g),
        Ok(g) => Err(format!("{g} GPU(s): a ring needs at least 2 GPUs")),
        Err(e) => Err(format!("{s:?}: {e}")),
    }
}

fn parse_study_gpus(s: &str) -> Result<u32, String> {
    if s.trim() == "0" {
        return Ok(0);
    }
    parse_ring_gpus(s).map_err(|e| format!("{e} (or 0 = each sub-layer's TP)"))
}

fn parse_check_config(s: &str) -> Result<Scenario, String> {
    match Scenario::parse(s.trim()) {
        Some(c @ (Scenario::Sequential | Scenario::T3 | Scenario::T3Mca)) => Ok(c),
        _ => Err(format!(
            "unknown configuration {s:?} (known: t3, t3-mca, sequential)"
        )),
    }
}

/// `123`, `64K`, `16M`, `1G` (binary multiples).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1u64 << 10),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1 << 20),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .replace('_', "")
        .parse()
        .map_err(|e| format!("{s:?}: {e} (a byte count, optionally with K, M or G)"))?;
    match n.checked_mul(mult) {
        Some(0) => Err("0 bytes: nothing to reduce".into()),
        Some(b) => Ok(b),
        None => Err(format!("{s:?}: too large")),
    }
}

/// An emulator error as a command error: a bad configuration (an option or shape the
/// emulator refuses) is a usage error (exit code 2), anything else a failure.
fn t3_error(e: T3Error, context: &str) -> Box<dyn std::error::Error> {
    match e {
        T3Error::Config(_) => Box::new(UsageError(format!("{context}{e}"))),
        _ => format!("{context}{e}").into(),
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
    let pick = |all: Vec<SubLayer>| -> Vec<SubLayer> {
        a.sublayers
            .iter()
            .filter_map(|n| all.iter().find(|s| s.name == *n).cloned())
            .collect()
    };
    let mut out = Vec::new();
    if let (Some(h), Some(tokens)) = (a.h, a.tokens) {
        let name = a.model_name.trim();
        if name.is_empty() {
            return Err(UsageError("--model-name: must not be empty".into()));
        }
        for &tp in a.tp.as_deref().unwrap_or(&[8, 16]) {
            if tp > h {
                return Err(UsageError(format!(
                    "--tp {tp}: larger than --h {h} (each GPU needs at least one row of K)"
                )));
            }
            out.extend(pick(t3::sublayers(name, h, tokens, tp)));
        }
        return Ok(out);
    }
    let mut models: Vec<&(&str, u32, u32, &[u32])> = Vec::new();
    for m in &a.models {
        for row in &TABLE_8_2 {
            if (m == "all" || m == row.0) && !models.iter().any(|x| x.0 == row.0) {
                models.push(row);
            }
        }
    }
    for (name, h, tokens, tps) in models {
        for &tp in a.tp.as_deref().unwrap_or(tps) {
            out.extend(pick(t3::sublayers(name, *h, *tokens, tp)));
        }
    }
    Ok(out)
}

fn progress(len: u64, hidden: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    if hidden || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} sub-layers {elapsed} {msg}")
    {
        bar.set_style(style);
    }
    bar
}

fn run_study(a: &StudyArgs) -> CmdResult {
    let simulate = if a.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let opts = a.machine.options(a.gpus, simulate, a.dtype);
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
    let timeline = Mutex::new(None);
    let bar = progress(sls.len() as u64, a.json);
    let started = Instant::now();
    // Each sub-layer (its five configurations) is one unit of the checkpoint.
    let session = checkpoint::Session::start("t3", sls.len() as u32)?;
    if trace.is_some() && session.is_some() {
        return Err(UsageError(
            "--trace/--vcd record a run as it happens; they do not combine with --checkpoint-dir"
                .into(),
        )
        .into());
    }
    // A sub-layer with the shape and operand layout of an earlier one is not simulated
    // again: a run depends only on those and the options, so its results are the
    // earlier one's under its own name. (FC-1 and FC-2 share a shape, K = 4H/TP, but
    // not the layout, unless --flat-operand-layout.)
    let twin: Vec<Option<usize>> = sls
        .iter()
        .enumerate()
        .map(|(i, sl)| {
            sls.get(..i)?
                .iter()
                .position(|o| same_shape(o, sl, opts.producer_memory.operand_layout))
        })
        .collect();
    let mut per: Vec<Option<Vec<SubLayerResult>>> = vec![None; sls.len()];
    // Sub-layers to simulate: not a twin, not already in the checkpoint.
    let mut todo: Vec<usize> = Vec::new();
    for (i, sl) in sls.iter().enumerate() {
        if twin.get(i).is_some_and(Option::is_some) {
            continue;
        }
        let stored = match &session {
            Some(s) => lock(s).get::<Vec<StoredResult>>(i as u32)?,
            None => None,
        };
        match stored {
            Some(v) => {
                per[i] = Some(v.into_iter().map(|x| x.into_result(sl)).collect());
                bar.inc(1);
            }
            None => todo.push(i),
        }
    }
    let at = |sl: &SubLayer| format!("{} (M {} N {} K {}): ", report::label(sl), sl.m, sl.n, sl.k);
    if let (Some(c), Some(&i)) = (trace, todo.first()) {
        // One sub-layer (checked above), its fused runs recorded.
        let sl = &sls[i];
        let (r, t) = t3::run_sublayer_traced(&opts, sl, c).map_err(|e| t3_error(e, &at(sl)))?;
        *timeline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(t);
        per[i] = Some(r);
        bar.inc(1);
    } else {
        // `--jobs N` runs N simulations at once (each single-threaded): each sub-layer's
        // GEMM, rings and fused runs are separate parts, longest expected first
        // (`t3::plan`); a sub-layer's rows are checkpointed as soon as its parts are done.
        let done = |i: usize, rows: &[SubLayerResult]| -> Result<(), checkpoint::CheckpointError> {
            if let Some(s) = &session {
                let v: Vec<StoredResult> = rows.iter().map(StoredResult::from).collect();
                lock(s).put(i as u32, &v)?;
            }
            if let Some(sl) = sls.get(i) {
                bar.set_message(report::label(sl));
            }
            bar.inc(1);
            Ok(())
        };
        match t3::plan::run_study(&opts, &sls, &todo, a.jobs as usize, done) {
            Ok(ran) => {
                for (i, r) in ran.into_iter().enumerate() {
                    if let (Some(r), Some(p)) = (r, per.get_mut(i)) {
                        *p = Some(r);
                    }
                }
            }
            Err(t3::plan::StudyFailure::T3 { sublayer, error }) => {
                let where_ = sls.get(sublayer).map(at).unwrap_or_default();
                return Err(t3_error(error, &where_));
            }
            Err(t3::plan::StudyFailure::Callback(e)) => return Err(e.into()),
        }
    }
    for (i, sl) in sls.iter().enumerate() {
        if let Some(Some(j)) = twin.get(i) {
            let v: Vec<SubLayerResult> = per[*j]
                .iter()
                .flatten()
                .map(|r| SubLayerResult {
                    sublayer: sl.clone(),
                    ..r.clone()
                })
                .collect();
            if let Some(s) = &session {
                let stored: Vec<StoredResult> = v.iter().map(StoredResult::from).collect();
                lock(s).put(i as u32, &stored)?;
            }
            bar.inc(1);
            per[i] = Some(v);
        }
    }
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    let results: Vec<SubLayerResult> = per.into_iter().flatten().flatten().collect();
    if let Some(s) = &session {
        lock(s).write()?;
    }
    if let Some(dir) = &a.svg {
        report::plot::write_svgs(dir, &results)?;
    }
    let timeline = timeline
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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

/// Whether two sub-layers are the same simulation (shape and TP; the names may differ).
/// Whether two sub-layers run the same simulations: the same shape and, when the
/// producer reads in the operands' layout, the same layout.
fn same_shape(a: &SubLayer, b: &SubLayer, layout_matters: bool) -> bool {
    (a.h, a.tokens, a.tp, a.m, a.n, a.k) == (b.h, b.tokens, b.tp, b.m, b.n, b.k)
        && (!layout_matters || a.operand_layout() == b.operand_layout())
}

fn lock(s: &Mutex<checkpoint::Session>) -> std::sync::MutexGuard<'_, checkpoint::Session> {
    // A panic while holding the lock cannot leave a half-written unit map.
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One configuration's result as a checkpoint stores it: everything but the sub-layer,
/// which the resumed run's own list supplies.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredResult {
    scenario: Scenario,
    gemm_seconds: f64,
    rs_seconds: f64,
    ag_seconds: f64,
    total_seconds: f64,
    speedup_vs_sequential: f64,
    rs_alone_seconds: f64,
    bytes: t3::TrafficBytes,
    #[serde(default)]
    firmware_seconds: f64,
}

impl From<&SubLayerResult> for StoredResult {
    fn from(r: &SubLayerResult) -> Self {
        Self {
            scenario: r.scenario,
            gemm_seconds: r.gemm_seconds,
            rs_seconds: r.rs_seconds,
            ag_seconds: r.ag_seconds,
            total_seconds: r.total_seconds,
            speedup_vs_sequential: r.speedup_vs_sequential,
            rs_alone_seconds: r.rs_alone_seconds,
            bytes: r.bytes,
            firmware_seconds: r.firmware_seconds,
        }
    }
}

impl StoredResult {
    fn into_result(self, sl: &SubLayer) -> SubLayerResult {
        SubLayerResult {
            sublayer: sl.clone(),
            scenario: self.scenario,
            gemm_seconds: self.gemm_seconds,
            rs_seconds: self.rs_seconds,
            ag_seconds: self.ag_seconds,
            total_seconds: self.total_seconds,
            speedup_vs_sequential: self.speedup_vs_sequential,
            rs_alone_seconds: self.rs_alone_seconds,
            bytes: self.bytes,
            firmware_seconds: self.firmware_seconds,
        }
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
    let verdict = if out.mismatches == 0 { "ok" } else { "FAILED" };
    if c.json {
        let v = serde_json::json!({
            "gpus": c.gpus, "m": c.m, "n": c.n, "k": c.k,
            "dtype": c.dtype.name(), "config": c.config.name(),
            "mismatches": out.mismatches, "first_mismatch": out.first_mismatch,
            "seconds": out.seconds,
            "out": c.out.as_ref().map(|d| d.display().to_string()),
        });
        emit(&(serde_json::to_string_pretty(&v)? + "\n"))?;
    } else {
        let wrote = c
            .out
            .as_ref()
            .map_or(String::new(), |d| format!("; wrote {}", d.display()));
        emit(&format!(
            "t3 check {verdict}: {} on {} GPUs, {} x {} x {} {}: {} mismatches, {:.3} µs simulated{wrote}\n",
            c.config.name(),
            c.gpus,
            c.m,
            c.n,
            c.k,
            c.dtype.name(),
            out.mismatches,
            out.seconds * 1e6
        ))?;
    }
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
    if r.json {
        let v = serde_json::json!({
            "gpus": r.gpus,
            "bytes": r.bytes,
            "simulate": report::simulate_name(simulate),
            "rs_seconds": t.rs_seconds,
            "model_seconds": t.model_seconds,
            "steps": t.steps,
        });
        emit(&(serde_json::to_string_pretty(&v)? + "\n"))
    } else {
        let ratio = if t.model_seconds > 0.0 {
            format!("{:.3}x the model", t.rs_seconds / t.model_seconds)
        } else {
            "-".into()
        };
        emit(&format!(
            "ring reduce-scatter of {} bytes over {} GPUs ({} steps): {:.2} µs simulated, {:.2} µs bandwidth-latency model ({ratio})\n",
            r.bytes,
            r.gpus,
            t.steps,
            t.rs_seconds * 1e6,
            t.model_seconds * 1e6
        ))
    }
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
    if c.json {
        return emit(&(serde_json::to_string_pretty(&rows)? + "\n"));
    }
    let mut out = format!(
        "{} {} TP {}: GEMM alone {:.1} µs, reduce-scatter alone {:.1} µs, ideal overlap {:.2}x\n",
        c.model,
        sl.name,
        c.tp,
        rows.first().map_or(0.0, |r| r.gemm_alone_seconds * 1e6),
        rows.first().map_or(0.0, |r| r.rs_alone_seconds * 1e6),
        rows.first().map_or(0.0, |r| r.ideal_speedup),
    );
    for r in &rows {
        out += &format!(
            "  {}-{}: GEMM {:.1} µs ({:+.0} %), RS {:.1} µs ({:+.0} %), overlapped {:.2}x  (dissertation, Mega-GPT-2/T-NLG TP 8: 72-8 RS +41 % -> 1.2x; 64-16 RS +7 %, GEMM +21 % -> 1.5x; ideal 1.7x)\n",
            r.gemm_cus,
            r.rs_cus,
            r.gemm_seconds * 1e6,
            100.0 * (r.gemm_seconds / r.gemm_alone_seconds - 1.0),
            r.rs_seconds * 1e6,
            100.0 * (r.rs_seconds / r.rs_alone_seconds - 1.0),
            r.speedup
        );
    }
    emit(&out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Top {
        #[command(flatten)]
        t3: T3Args,
    }

    fn study(args: &[&str]) -> StudyArgs {
        let mut v = vec!["t3"];
        v.extend(args);
        Top::try_parse_from(v).unwrap().t3.study
    }

    #[test]
    fn default_study_is_two_models_at_their_tps() {
        let s = study_sublayers(&study(&[])).unwrap();
        assert_eq!(s.len(), 2 * 2 * 4);
        assert_eq!(report::label(&s[0]), "mega-gpt-2 OP TP8");
        assert_eq!(report::label(&s[4]), "mega-gpt-2 OP TP16");
        assert_eq!(report::label(&s[15]), "t-nlg IP TP16");
        let all = study_sublayers(&study(&["--models", "all"])).unwrap();
        assert_eq!(all.len(), 4 * (2 + 2 + 1 + 1 + 1));
        assert!(all.iter().filter(|s| s.model == "palm").all(|s| s.tp == 32));
    }

    #[test]
    fn custom_model_and_filters() {
        let a = study(&[
            "--h",
            "1024",
            "--tokens",
            "2048",
            "--model-name",
            "mine",
            "--tp",
            "4",
            "--sublayers",
            "op,fc2",
        ]);
        let s = study_sublayers(&a).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].model.as_str(), s[0].name, s[0].tp, s[0].k),
            ("mine", "OP", 4, 256)
        );
        assert_eq!(s[1].name, "FC-2");
    }

    #[test]
    fn bad_values_are_usage_errors_naming_the_option() {
        for (args, want) in [
            (
                vec!["t3", "--models", "nosuch"],
                "mega-gpt-2, t-nlg, gpt-3, palm, mt-nlg",
            ),
            (vec!["t3", "--tp", "0"], "--tp"),
            (vec!["t3", "--sublayers", "FC-3"], "unknown sub-layer"),
            (vec!["t3", "--gpus", "1"], "at least 2"),
            (vec!["t3", "--h", "100"], "--tokens"),
            (vec!["t3", "--link-gbps", "0"], "--link-gbps"),
            (vec!["t3", "check", "--gpus", "1"], "at least 2"),
            (vec!["t3", "check", "--config", "ideal-overlap"], "t3-mca"),
            (vec!["t3", "rs", "--bytes", "0"], "--bytes"),
        ] {
            let e = Top::try_parse_from(&args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let msg = e.to_string();
            assert!(msg.contains(want), "{args:?}: {msg}");
        }
    }

    #[test]
    fn byte_counts_and_machine_options() {
        assert_eq!(parse_bytes("64M"), Ok(64 << 20));
        assert_eq!(parse_bytes("1_000"), Ok(1000));
        assert_eq!(parse_bytes("2k"), Ok(2048));
        assert!(parse_bytes("x").is_err());
        let a = study(&["--gpu-2x-cu", "--link-gbps", "100", "--mca-threshold", "6"]);
        let o = a.machine.options(0, Simulate::AllGpus, Dtype::F32);
        let base = T3Options::default();
        assert_eq!(o.gpu.cus, 2 * base.gpu.cus);
        assert_eq!(o.gpu.name, format!("{}-2x-cu", base.gpu.name));
        assert_eq!(o.link.bytes_per_ns, 100.0);
        assert_eq!(o.link.latency_ns, base.link.latency_ns);
        assert_eq!(o.mca_threshold, Some(6));
        assert_eq!(o.dtype, GemmDataType::F32);
    }
}
