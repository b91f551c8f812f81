//! The options of `nmcp lamb` (typed: clap arguments and scenario keys from one struct)
//! and the LAMB experiment they describe.

use std::path::PathBuf;

use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::lamb::experiment::{EngineSetup, LambExperiment};
use nmcp_emulator::lamb::reference::LambHyper;
use nmcp_emulator::lamb::ModelPreset;
use nmcp_emulator::nmc::system::NmcSystemConfig;
use nmcp_firmware::nmc::Stage1Program;

use super::npy_io;

/// The options of `nmcp lamb`, a scenario's keys; [`experiment`] is the run they ask for.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LambOptions {
    /// Model preset: bert-large, bert-base, megatron-bert.
    #[arg(long, default_value = "bert-large")]
    pub(crate) model: String,
    /// Override the number of encoder layers.
    #[arg(long)]
    pub(crate) layers: Option<u32>,
    /// Override the hidden size (d_ff defaults to 4x).
    #[arg(long)]
    pub(crate) d_model: Option<u64>,
    /// Override the feed-forward size.
    #[arg(long)]
    pub(crate) d_ff: Option<u64>,
    /// HBM preset.
    #[arg(long, default_value = "lamb-ch6")]
    pub(crate) preset: String,
    /// TS entries (256-bit) per bank ALU.
    #[arg(long, default_value_t = DEFAULT_TS)]
    pub(crate) ts: usize,
    /// Also run a TS-size sweep (timing only).
    #[arg(long)]
    pub(crate) ts_sweep: bool,
    /// Also show where NMC time goes: the same step without refresh, without host round
    /// trips, with the largest TS, and the bounds (timing only).
    #[arg(long)]
    pub(crate) breakdown: bool,
    /// LAMB steps to run (1..=10000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) steps: u32,
    /// Step number the bias correction uses for the first step (1 = first update; 0
    /// would divide by 1 - beta^0 = 0); at most 2^24, so that step + steps never wraps.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    pub(crate) step: u32,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3, value_parser = crate::cmd::numbers::positive_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::positive_f32::one")]
    pub(crate) lr: f32,
    /// beta1.
    #[arg(long, default_value_t = 0.9, value_parser = crate::cmd::numbers::decay_rate_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::decay_rate_f32::one")]
    pub(crate) beta1: f32,
    /// beta2.
    #[arg(long, default_value_t = 0.999, value_parser = crate::cmd::numbers::decay_rate_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::decay_rate_f32::one")]
    pub(crate) beta2: f32,
    /// epsilon.
    #[arg(long, default_value_t = 1e-6, value_parser = crate::cmd::numbers::positive_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::positive_f32::one")]
    pub(crate) eps: f32,
    /// Weight decay.
    #[arg(long, default_value_t = 0.01, value_parser = crate::cmd::numbers::non_negative_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::non_negative_f32::one")]
    pub(crate) weight_decay: f32,
    /// Global-norm clipping threshold (0 disables clipping).
    #[arg(long, default_value_t = 1.0, value_parser = crate::cmd::numbers::non_negative_f32)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::non_negative_f32::one")]
    pub(crate) max_grad_norm: f32,
    /// Turn bias correction off.
    #[arg(long)]
    pub(crate) no_bias_correction: bool,
    /// Clamp the trust ratio to at most this value.
    #[arg(long, value_parser = crate::cmd::numbers::positive_f32)]
    #[serde(
        default,
        deserialize_with = "crate::cmd::numbers::de::positive_f32::option"
    )]
    pub(crate) trust_clamp: Option<f32>,
    /// LAMB's share of a training iteration, for the end-to-end estimate (percent,
    /// comma-separated).
    #[arg(long, default_value = "7,25", value_delimiter = ',', value_parser = crate::cmd::numbers::share_percent)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::share_percent::many")]
    pub(crate) lamb_share: Vec<f64>,
    /// Run the bank ALUs on data (random tensors from --seed unless --input) and compare
    /// with the FP32 reference. Needs memory for every array: use small models.
    #[arg(long)]
    pub(crate) functional: bool,
    /// Read tensors NAME.{w,g,m,v}.npy from this directory (implies --functional).
    #[arg(long)]
    pub(crate) input: Option<PathBuf>,
    /// Write the updated NAME.{w,m,v}.npy here.
    #[arg(long)]
    pub(crate) output: Option<PathBuf>,
    /// Seed of random tensors.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// GPU-host reduction round trip in ns (see docs/calibration.md).
    #[arg(long, default_value_t = NmcSystemConfig::default().host_reduction_ns, value_parser = crate::cmd::numbers::duration_ns)]
    #[serde(deserialize_with = "crate::cmd::numbers::de::duration_ns::one")]
    pub(crate) host_reduction_ns: f64,
    /// Engine setups to compare side by side, comma-separated: an ALU issue model
    /// (`column-triggered`, `pipelined` at its default rate, `pipelined-N` at N
    /// operations per tCK) optionally with `+staged`, `+masa` (MASA subarray row visits;
    /// needs a preset with subarrays, e.g. `--preset lamb-ch6-masa`), `+masa-decoupled`
    /// (MASA with decoupled access/execute buffers, activate-ahead on a preset with 11 or
    /// more subarrays, e.g. `--preset lamb-ch6-masa16`) or `+masa-2jobs` (masa-decoupled
    /// with two macro-commands in flight per engine) (docs/calibration.md). The
    /// first one runs the main (functional) step.
    #[arg(
        long,
        default_value = "column-triggered,pipelined,pipelined+staged",
        value_delimiter = ','
    )]
    pub(crate) alu_models: Vec<String>,
    /// The firmware's stage-1 program: `four-slot` (g', m, v, scratch: chunk = TS / 4) or
    /// `three-slot` (v reuses g''s slot: chunk = TS / 3); identical results
    /// (docs/decisions/nmc-alu-issue.md).
    #[arg(long, default_value = "four-slot")]
    pub(crate) program: String,
    /// Machine-readable output.
    #[arg(long)]
    pub(crate) json: bool,
    /// Timeline of the main run (the first engine setup's step(s)).
    #[command(flatten)]
    #[serde(flatten)]
    pub(crate) timeline: crate::timeline::TimelineArgs,
}

/// Baseline TS entries: the one calibrated knob of the LAMB model (docs/calibration.md).
pub const DEFAULT_TS: usize = 16;

/// Largest TS accepted on the command line.
pub(crate) const MAX_TS: usize = 1024;

fn model(a: &LambOptions) -> Result<ModelPreset, Box<dyn std::error::Error>> {
    let base = ModelPreset::builtin(&a.model)?;
    let d = a.d_model.unwrap_or(base.d_model);
    let f = a.d_ff.unwrap_or(if a.d_model.is_some() {
        4 * d
    } else {
        base.d_ff
    });
    Ok(ModelPreset::custom(
        &base.name,
        a.layers.unwrap_or(base.layers),
        d,
        f,
    ))
}

fn hyper(a: &LambOptions) -> LambHyper {
    LambHyper {
        lr: a.lr,
        beta1: a.beta1,
        beta2: a.beta2,
        eps: a.eps,
        weight_decay: a.weight_decay,
        max_grad_norm: (a.max_grad_norm > 0.0).then_some(a.max_grad_norm),
        bias_correction: !a.no_bias_correction,
        step: a.step.max(1),
        trust_clamp: a.trust_clamp,
    }
}

/// The `.npy` tensors of `--input`, if given.
pub(crate) type Named = Option<Vec<npy_io::NamedTensor>>;

/// The experiment the arguments describe, with the `.npy` tensors if `--input` is given.
pub(crate) fn experiment(
    a: &LambOptions,
) -> Result<(LambExperiment, Named), Box<dyn std::error::Error>> {
    let preset = HbmPreset::builtin(&a.preset)?;
    let named = match &a.input {
        Some(dir) => Some(npy_io::read_dir(dir)?),
        None => None,
    };
    let m = model(a)?;
    let setups = a
        .alu_models
        .iter()
        .map(|n| {
            EngineSetup::parse(n).ok_or_else(|| {
                format!(
                    "--alu-models {n}: expected column-triggered, pipelined or pipelined-N (N ops per tCK, 1..=16), optionally +staged, +masa, +masa-decoupled, +masa-2jobs or +masa-2jobs-split (masa*: a preset with subarrays, e.g. --preset lamb-ch6-masa; masa-decoupled and masa-2jobs* activate ahead on lamb-ch6-masa16)"
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let elements = match &named {
        Some(ts) => ts.iter().map(|t| t.state.w.len() as u64).collect(),
        None => m.tensors().iter().map(|t| t.elements()).collect(),
    };
    let e = LambExperiment {
        model: if named.is_some() {
            "npy input".into()
        } else {
            m.name.clone()
        },
        preset,
        elements,
        input: named
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.state.clone()).collect()),
        functional: a.functional,
        seed: a.seed,
        steps: a.steps,
        ts_entries: a.ts,
        hyper: hyper(a),
        host_reduction_ns: a.host_reduction_ns,
        lamb_share: a.lamb_share.clone(),
        breakdown: a.breakdown,
        ts_sweep: a.ts_sweep,
        setups,
        program: match a.program.as_str() {
            "four-slot" => Stage1Program::FourSlot,
            "three-slot" => Stage1Program::ThreeSlot,
            other => {
                return Err(format!("--program {other}: expected four-slot or three-slot").into())
            }
        },
        timeline: a.timeline.config(),
    };
    Ok((e, named))
}

impl crate::scenario::Options for LambOptions {}
