//! The options of `nmcp goldyloc tune | train | eval` (typed: clap arguments and scenario
//! keys from one struct) and the pipeline options they give.

use std::io::IsTerminal;
use std::path::PathBuf;

use nmcp_isa::gemm_ext::GemmDataType;

use super::pipeline::Options;
use super::train::DEFAULT_SEED;

#[derive(clap::Args, Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct FlowOptions {
    /// A small subset (a few GEMMs per app), for tests and a first look.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Neither read nor write cached step results.
    #[arg(long)]
    pub(crate) no_cache: bool,
    /// GPU preset: mi100, mi100-half (GPU-Half: 64 CUs, 4 MB LLC), mi100-quarter
    /// (GPU-Quarter: 32 CUs, 2 MB LLC) or t3-table-8.1. Tuning, training and evaluation
    /// all run on that GPU.
    #[arg(long, default_value = "mi100")]
    pub(crate) gpu: String,
    /// Evaluate a user GEMM list (CSV: M,N,K,transA,transB,dtype[,count]) instead of the networks.
    #[arg(long)]
    pub(crate) gemms: Option<PathBuf>,
    /// Tuning shortcut of 7.6.1: tune 20 % exhaustively, predict the preferred resource
    /// configuration of the rest from their 3 nearest neighbours.
    #[arg(long)]
    pub(crate) knn: bool,
    /// Seed of the train/test split.
    #[arg(long, default_value_t = DEFAULT_SEED)]
    pub(crate) seed: u64,
    /// Run every GEMM in this data type: f16, bf16 or f32 (default: the networks' FP16,
    /// a --gemms list's own types). The dissertation's main results are FP32.
    #[arg(long, value_parser = parse_dtype)]
    #[serde(default, deserialize_with = "dtype::option")]
    pub(crate) dtype: Option<GemmDataType>,
    /// Write the result (tune: GO library of GEMM extension records; train: predictor) as JSON here.
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// Write CSV files into this directory.
    #[arg(long)]
    pub(crate) csv: Option<PathBuf>,
    /// Write SVG bar charts into this directory.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// tune: also study the stricter resource constraints GPU/8 and GPU/16 of 7.6.3 (GO
    /// kernels chosen with their kernels as further candidates, offline).
    #[arg(long)]
    pub(crate) strict_rc: bool,
    /// eval: also run each GEMM at every constant CD below n through the firmware CP
    /// and report the best per GEMM over GO-Kernels: what a perfect CD choice could add
    /// in the loop (about a third more runs).
    #[arg(long)]
    pub(crate) cd_sweep: bool,
    /// The model's contention options.
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) model: crate::cmd::model_options::ModelOptions,
    /// Map the n software queues (streams) of every configuration but Sequential onto this
    /// many hardware queues, with the AQL barrier bit set on each (a HIP runtime's
    /// GPU_MAX_HW_QUEUES, 4 by default); default: one hardware queue per stream.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub(crate) hw_queues: Option<u32>,
    /// When a CD group lets the CP decide the next one: `completion` (a group barrier) or
    /// `dispatch` (when its members have placed all their workgroups: the CP re-decides on
    /// every queue-head change, dissertation 7.3.4). Labels are profiled the same way.
    #[arg(long, value_enum, default_value_t = CdRelease::Completion)]
    pub(crate) cd_release: CdRelease,
}

/// `--cd-release`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum CdRelease {
    /// The next group starts when the current one has completed.
    Completion,
    /// The next group starts when the current one has placed all its workgroups.
    Dispatch,
}

impl FlowOptions {
    /// The pipeline's options (progress shown on a terminal unless JSON is asked for).
    pub(crate) fn pipeline_options(&self) -> Options {
        Options {
            gpu: self.gpu.clone(),
            quick: self.quick,
            cache: !self.no_cache,
            gemms: self.gemms.clone(),
            knn: self.knn,
            cd_sweep: self.cd_sweep,
            progress: !self.json && std::io::stderr().is_terminal(),
            dtype: self.dtype,
            loaded_latency: self.model.latency == crate::cmd::model_options::LatencyModel::Loaded,
            inter_kernel_gap_ns: self.model.inter_kernel_gap_ns,
            hw_queues: self.hw_queues,
            release_on_dispatch: self.cd_release == CdRelease::Dispatch,
        }
    }
}

pub(crate) fn parse_dtype(s: &str) -> Result<GemmDataType, String> {
    match s.to_ascii_lowercase().as_str() {
        "f16" | "fp16" => Ok(GemmDataType::F16),
        "bf16" => Ok(GemmDataType::Bf16),
        "f32" | "fp32" => Ok(GemmDataType::F32),
        _ => Err(format!("`{s}` is not a data type (f16, bf16, f32)")),
    }
}

crate::scenario::parsed!(mod dtype = parse_dtype => GemmDataType);

impl crate::scenario::Options for FlowOptions {}
