//! A T3 sub-layer's energy per GPU under one configuration, from what its result row
//! records: DRAM bytes by kind (reads, writes, op-and-store updates) moved over the
//! configuration's time as an ideal stream (`DramActivity::streaming`: the runs keep no
//! per-configuration command counts in their rows), the GEMM's 2·M·N·K FLOPs at the
//! data type's rate, every DRAM byte once through the LLC, and static power over the
//! end-to-end time. The links are left out: every configuration moves the same bytes
//! over them. What differs between Sequential, T3 and T3-MCA is then the DRAM traffic T3
//! removes and the time its overlap saves.

use crate::energy::{
    CommandEnergy, DramActivity, DramEnergy, EnergyReport, GpuEnergy, GpuWork, StreamBytes,
};
use crate::hbm::HbmPreset;
use nmcp_isa::gemm_ext::GemmDataType;

use super::SubLayerResult;

/// The energy of `r` on one GPU with `preset`'s memory, its GEMM in `dtype`.
pub fn sublayer_energy(
    preset: &HbmPreset,
    r: &SubLayerResult,
    dtype: GemmDataType,
) -> EnergyReport {
    let b = &r.bytes;
    let cycles = (r.total_seconds / (preset.organisation.tck_ns * 1e-9)).ceil() as u64;
    let bytes = StreamBytes {
        read: b.gemm_reads + b.rs_reads + b.ag / 2,
        write: b.gemm_writes + b.rs_writes + b.ag - b.ag / 2,
        update: b.updates,
    };
    let stream = DramActivity::streaming(preset, bytes, cycles);
    let mut report = EnergyReport::dram(&DramEnergy::of(&stream, &CommandEnergy::of(preset)));
    let sl = &r.sublayer;
    let flops = 2.0 * f64::from(sl.m) * f64::from(sl.n) * f64::from(sl.k);
    let (f16, f32) = match dtype {
        GemmDataType::F32 => (0.0, flops),
        GemmDataType::F16 | GemmDataType::Bf16 => (flops, 0.0),
    };
    report.add_gpu(&GpuEnergy::of(
        &GpuWork {
            flops_f16: f16,
            flops_f32: f32,
            llc_bytes: b.total() as f64,
            seconds: r.total_seconds,
        },
        &preset.energy,
    ));
    report
}
