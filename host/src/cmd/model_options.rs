//! The GPU model's contention options shared by `nmcp goldyloc` (tune, train, eval) and
//! `nmcp goldyloc validate`: how memory latency behaves under load and what one stream's
//! back-to-back kernels cost between them. Each is a named mechanism of
//! `docs/calibration.md`; the defaults keep a preset as it is.

use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, LoadedLatency};

/// How a main-loop load's latency is modelled.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LatencyModel {
    /// One fixed HBM latency per load, whatever the load and the LLC hits.
    #[default]
    Fixed,
    /// LLC-hit latency for what the LLC serves; HBM latency plus the queueing delay the
    /// project's DRAM model measures at the current HBM utilisation for the rest.
    Loaded,
}

/// `--latency` and `--inter-kernel-gap-ns`.
#[derive(clap::Args, Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ModelOptions {
    /// Memory-latency model of the GEMM timing: fixed (one latency) or loaded (LLC-hit vs
    /// HBM latency, HBM queueing delay growing with utilisation).
    #[arg(long, value_enum, default_value_t = LatencyModel::Fixed)]
    pub latency: LatencyModel,
    /// Least time between two kernels of one stream (completion signal, packet
    /// processing, cache release/acquire), ns; default: the GPU preset's.
    #[arg(long, value_parser = crate::cmd::numbers::non_negative_f64)]
    #[serde(
        default,
        deserialize_with = "crate::cmd::numbers::de::non_negative_f64::option"
    )]
    pub inter_kernel_gap_ns: Option<f64>,
}

impl ModelOptions {
    /// Applies the options to a preset's GPU and calibration.
    pub fn apply(&self, gpu: &mut GpuConfig, cal: &mut Calibration) {
        cal.loaded_latency = match self.latency {
            LatencyModel::Fixed => None,
            LatencyModel::Loaded => Some(LoadedLatency::for_memory_latency(cal.memory_latency_ns)),
        };
        if let Some(g) = self.inter_kernel_gap_ns {
            gpu.inter_kernel_gap_ns = g;
        }
    }

    /// The options as command-line arguments (for a child `nmcp` run).
    pub fn to_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.latency == LatencyModel::Loaded {
            v.extend(["--latency".to_string(), "loaded".to_string()]);
        }
        if let Some(g) = self.inter_kernel_gap_ns {
            v.extend(["--inter-kernel-gap-ns".to_string(), g.to_string()]);
        }
        v
    }
}
