//! A LAMB step's energy on NMC against the ideal GPU (dissertation 6.4's baseline), from
//! the same `[energy]` parameters. NMC: the DRAM commands the engines issued (all-bank
//! reads and writes in every bank, no interface transfer), the bank ALUs' lane operations,
//! the host protocol's partials and scalars over the interface, and the GPU's static power
//! while it waits. Ideal GPU: the step's 13 array passes streamed through the DRAM at 100 %
//! of peak (`DramActivity::streaming`), every byte through the LLC once, the same lane
//! operations as FP32 FLOPs, and static power over its time.

use serde::Serialize;

use crate::energy::{
    CommandEnergy, DramActivity, DramEnergy, EnergyReport, GpuEnergy, GpuWork, StreamBytes,
};
use crate::hbm::HbmPreset;

use super::ideal_gpu::ARRAY_PASSES;

/// NMC and ideal-GPU energy of the main run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LambEnergy {
    /// LAMB on NMC.
    pub nmc: EnergyReport,
    /// The ideal GPU at 100 % of peak bandwidth.
    pub ideal_gpu: EnergyReport,
    /// Ideal-GPU joules over NMC joules.
    pub gpu_over_nmc: f64,
    /// NMC ALU lane operations per parameter and step (the work both sides do).
    pub lane_ops_per_parameter: f64,
}

/// What the NMC run did, for [`lamb_energy`].
#[derive(Debug, Clone, Copy)]
pub struct NmcSide {
    /// DRAM commands, state time and ALU lane operations.
    pub activity: DramActivity,
    /// Bytes of the host protocol (partials read, scalars written).
    pub host_bytes: u64,
    /// NMC time of all steps (s).
    pub seconds: f64,
}

/// The energy of `steps` LAMB steps over `params` FP32 parameters.
pub fn lamb_energy(
    preset: &HbmPreset,
    nmc: &NmcSide,
    params: u64,
    steps: u32,
    gpu_seconds: f64,
) -> LambEnergy {
    let ce = CommandEnergy::of(preset);
    let mut dram = DramEnergy::of(&nmc.activity, &ce);
    dram.add_interface_bits(nmc.host_bytes * 8, &ce);
    let mut nmc_report = EnergyReport::dram(&dram);
    // Only the host protocol's few bytes cross the interface: energy per such bit would
    // divide the whole in-memory step by them, a number with no meaning.
    nmc_report.dram_pj_per_interface_bit = None;
    nmc_report.add_gpu(&GpuEnergy::of(
        &GpuWork {
            seconds: nmc.seconds,
            ..Default::default()
        },
        &preset.energy,
    ));

    let passes = |write: bool| {
        ARRAY_PASSES
            .iter()
            .filter(|p| p.starts_with("write") == write)
            .count() as u64
    };
    let bytes = |n: u64| n * params * 4 * u64::from(steps);
    let (read_bytes, write_bytes) = (bytes(passes(false)), bytes(passes(true)));
    let cycles = (gpu_seconds / (preset.organisation.tck_ns * 1e-9)).ceil() as u64;
    let stream = DramActivity::streaming(
        preset,
        StreamBytes {
            read: read_bytes,
            write: write_bytes,
            update: 0,
        },
        cycles,
    );
    let mut gpu_report = EnergyReport::dram(&DramEnergy::of(&stream, &ce));
    gpu_report.add_gpu(&GpuEnergy::of(
        &GpuWork {
            flops_f32: nmc.activity.nmc_lane_ops as f64,
            llc_bytes: (read_bytes + write_bytes) as f64,
            seconds: gpu_seconds,
            ..Default::default()
        },
        &preset.energy,
    ));
    let work = (params * u64::from(steps)).max(1) as f64;
    LambEnergy {
        gpu_over_nmc: gpu_report.total_j / nmc_report.total_j.max(f64::MIN_POSITIVE),
        lane_ops_per_parameter: nmc.activity.nmc_lane_ops as f64 / work,
        nmc: nmc_report,
        ideal_gpu: gpu_report,
    }
}
