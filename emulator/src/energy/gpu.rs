//! GPU energy: dynamic energy per FLOP (FP16 and FP32 rates), per byte through the
//! last-level cache, and static power over the run's time. The GPU model is a timing
//! model, so what it did is summarised as a [`GpuWork`] by each mechanism's report.

use serde::Serialize;

use super::params::EnergyParams;

/// What the GPU did in a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GpuWork {
    /// FP16 FLOPs (multiply and add count two).
    pub flops_f16: f64,
    /// FP32 FLOPs.
    pub flops_f32: f64,
    /// Bytes read or written in the last-level cache.
    pub llc_bytes: f64,
    /// Time the GPU was powered for the run (s).
    pub seconds: f64,
}

/// GPU energy by component, in joules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct GpuEnergy {
    /// FLOPs.
    pub compute_j: f64,
    /// Last-level cache traffic.
    pub llc_j: f64,
    /// Static power over the run.
    pub static_j: f64,
}

impl GpuEnergy {
    /// The energy of `w` under `e`.
    pub fn of(w: &GpuWork, e: &EnergyParams) -> Self {
        Self {
            compute_j: (w.flops_f16 * e.gpu_pj_per_flop_f16 + w.flops_f32 * e.gpu_pj_per_flop_f32)
                * 1e-12,
            llc_j: w.llc_bytes * e.gpu_llc_pj_per_byte * 1e-12,
            static_j: w.seconds * e.gpu_static_w,
        }
    }

    /// All three.
    pub fn total_j(&self) -> f64 {
        self.compute_j + self.llc_j + self.static_j
    }
}
