//! The options of `nmcp t3`'s study and of `t3 check`, `t3 rs` and `t3 cu-split`: typed
//! (clap arguments and scenario keys from one struct each, serde adapters calling the
//! value parsers in `select.rs`) with the relations between them.

use std::path::PathBuf;

use nmcp_emulator::t3::Scenario;

use super::machine::{Dtype, MachineArgs};
use super::select::{
    parse_bytes, parse_check_config, parse_model, parse_ring_gpus, parse_study_gpus,
    parse_sublayer, parse_tp,
};
use crate::scenario::Relation;

/// `nmcp t3 cu-split`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct CuSplitOptions {
    /// Model of Table 8.2.
    #[arg(long, default_value = "mega-gpt-2", value_parser = parse_model)]
    #[serde(deserialize_with = "model::one")]
    pub(crate) model: String,
    /// Tensor-parallel degree (= GPUs).
    #[arg(long, default_value_t = 8, value_parser = parse_tp)]
    #[serde(deserialize_with = "tp::one")]
    pub(crate) tp: u32,
    /// Sub-layer: OP, FC-2, FC-1 or IP.
    #[arg(long, default_value = "OP", value_parser = parse_sublayer)]
    #[serde(deserialize_with = "sublayer::one")]
    pub(crate) sublayer: SubLayerName,
    /// CU splits GEMM-RS, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "72-8,64-16", value_parser = parse_split)]
    #[serde(deserialize_with = "split::many")]
    pub(crate) split: Vec<(u32, u32)>,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    pub(crate) shortcut: bool,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) machine: MachineArgs,
    /// Machine-readable output.
    #[arg(long)]
    pub(crate) json: bool,
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
pub(crate) struct StudyOptions {
    /// Table 8.2 models, comma-separated (`all` = all five at their TPs).
    #[arg(long, value_delimiter = ',', default_value = "mega-gpt-2,t-nlg", value_parser = parse_model)]
    #[serde(deserialize_with = "model::many")]
    pub(crate) models: Vec<String>,
    /// TP degrees, comma-separated (default: each model's TPs from Table 8.2; 8,16 for a
    /// custom model).
    #[arg(long, value_delimiter = ',', value_parser = parse_tp)]
    #[serde(default, deserialize_with = "tp::option_many")]
    pub(crate) tp: Option<Vec<u32>>,
    /// Sub-layers, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "OP,FC-2,FC-1,IP", value_parser = parse_sublayer)]
    #[serde(deserialize_with = "sublayer::many")]
    pub(crate) sublayers: Vec<SubLayerName>,
    /// Hidden size of a custom model (instead of the table; needs --tokens; at most 131072,
    /// 10x GPT-3's, so that the sub-layers' GEMM sizes stay far inside 32 bits).
    #[arg(long, value_name = "H", value_parser = clap::value_parser!(u32).range(1..=131_072))]
    pub(crate) h: Option<u32>,
    /// Tokens of a custom model (sequence length x batch; needs --h; at most 2^20).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub(crate) tokens: Option<u32>,
    /// Name of the custom model in reports.
    #[arg(long, value_name = "NAME", default_value = "custom")]
    pub(crate) model_name: String,
    /// GPUs in the ring (0 = each sub-layer's TP).
    #[arg(long, default_value_t = 0, value_parser = parse_study_gpus)]
    #[serde(deserialize_with = "study_gpus::one")]
    pub(crate) gpus: u32,
    /// Simulate one GPU and inject its neighbours' traffic (the dissertation's shortcut)
    /// instead of all GPUs.
    #[arg(long)]
    pub(crate) shortcut: bool,
    /// Element type of the GEMM output and the reductions.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    pub(crate) dtype: Dtype,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) machine: MachineArgs,
    /// Machine-readable output: a JSON array with one row per sub-layer and configuration.
    #[arg(long)]
    pub(crate) json: bool,
    /// Write t3-speedup.svg and t3-traffic.svg into this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) svg: Option<PathBuf>,
    /// Simulations run at once (threads): each sub-layer's isolated GEMM, rings and fused
    /// runs are separate simulations, the longest expected first; output is the same for
    /// any value.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) jobs: u32,
    /// Timeline of the fused runs (t3 and t3-mca) of the one selected sub-layer.
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) timeline: crate::timeline::TimelineArgs,
}

/// `nmcp t3 check`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct CheckOptions {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 4, value_parser = parse_ring_gpus)]
    #[serde(deserialize_with = "ring_gpus::one")]
    pub(crate) gpus: u32,
    /// Output rows.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) m: u32,
    /// Output columns.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) n: u32,
    /// Reduction dimension per GPU.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) k: u32,
    /// Element type of the outputs and the reductions.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    pub(crate) dtype: Dtype,
    /// Configuration: t3, t3-mca or sequential.
    #[arg(long, default_value = "t3", value_parser = parse_check_config)]
    #[serde(deserialize_with = "check_config::one")]
    pub(crate) config: Scenario,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) machine: MachineArgs,
    /// Write partial_G.npy, reduced_G.npy and layout.json here.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// Machine-readable verdict.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `nmcp t3 rs`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) struct RsOptions {
    /// GPUs in the ring (at least 2).
    #[arg(long, default_value_t = 8, value_parser = parse_ring_gpus)]
    #[serde(deserialize_with = "ring_gpus::one")]
    pub(crate) gpus: u32,
    /// Bytes of the array reduced (each GPU's whole array; suffixes K, M, G = 2^10...).
    #[arg(long, default_value = "64M", value_parser = parse_bytes)]
    #[serde(deserialize_with = "bytes::one")]
    pub(crate) bytes: u64,
    /// Simulate one GPU and inject its neighbours' traffic.
    #[arg(long)]
    pub(crate) shortcut: bool,
    /// Element type of the reduction.
    #[arg(long, value_enum, default_value_t = Dtype::F16)]
    pub(crate) dtype: Dtype,
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) machine: MachineArgs,
    /// Machine-readable output.
    #[arg(long)]
    pub(crate) json: bool,
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

impl crate::scenario::Options for StudyOptions {
    const RELATIONS: &'static [Relation] = &[
        Relation::Requires("h", "tokens"),
        Relation::Conflicts("h", "models"),
        Relation::Requires("tokens", "h"),
        Relation::Requires("model-name", "h"),
    ];
}
impl crate::scenario::Options for CheckOptions {}
impl crate::scenario::Options for RsOptions {}
impl crate::scenario::Options for CuSplitOptions {}
