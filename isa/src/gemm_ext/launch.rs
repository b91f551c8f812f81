//! What a GEMM kernel launch asks of the GPU: how many workgroups it launches and how
//! many of them one compute unit holds at once.
//!
//! These are pure formulas of a [`GemmExt`] record's problem and one [`KernelMeta`], so
//! they live next to the record: the firmware's CD predictor, the emulator's GEMM timing
//! model and the host's training all call these same functions and can never disagree on
//! a workgroup count or an occupancy.

use super::{GemmExt, KernelMeta};

/// Per-CU resources of the GPU a kernel runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CuResources {
    /// Compute units.
    pub cus: u32,
    /// LDS bytes per CU.
    pub lds_bytes_per_cu: u32,
    /// 32-bit vector registers per CU (all SIMDs together).
    pub vgprs_per_cu: u32,
    /// Wavefront slots per CU.
    pub wave_slots_per_cu: u32,
    /// Hardware limit of resident workgroups per CU.
    pub max_wgs_per_cu: u32,
    /// Threads per wavefront.
    pub wave_size: u32,
}

impl CuResources {
    /// The MI100-like GPU of dissertation ch. 7: 120 CUs, 64 KiB LDS and 512 KiB of
    /// VGPRs per CU (4 SIMDs x 128 KiB), 40 wave slots (4 SIMDs x 10), 64-thread waves.
    pub const MI100: Self = Self {
        cus: 120,
        lds_bytes_per_cu: 64 * 1024,
        vgprs_per_cu: 4 * 512 * 64,
        wave_slots_per_cu: 40,
        max_wgs_per_cu: 16,
        wave_size: 64,
    };
}

/// Workgroups of a GEMM launch: one per `macro_tile_0 x macro_tile_1` output tile, times
/// split-K, times batch. Zero tiles, split-K and batch count as 1. Takes the fields one by
/// one so a caller that holds the problem and the tiling in other types (the emulator's
/// kernel catalog) computes the same count; [`workgroups`] is the record's form.
#[inline]
pub fn grid_workgroups(
    m: u32,
    n: u32,
    batch: u32,
    macro_tile_0: u16,
    macro_tile_1: u16,
    split_k: u8,
) -> u64 {
    let t0 = u64::from(macro_tile_0.max(1));
    let t1 = u64::from(macro_tile_1.max(1));
    u64::from(m).div_ceil(t0)
        * u64::from(n).div_ceil(t1)
        * u64::from(split_k.max(1))
        * u64::from(batch.max(1))
}

/// Workgroups kernel `k` launches for the GEMM of record `g` (see [`grid_workgroups`]).
#[inline]
pub fn workgroups(g: &GemmExt, k: &KernelMeta) -> u64 {
    grid_workgroups(g.m, g.n, g.batch, k.macro_tile_0, k.macro_tile_1, k.split_k)
}

/// [`workgroups`] without overflow: `None` when M, N, split-K and batch of a (malformed
/// or absurd) record multiply past `u64`. The CP uses this on records it has not
/// validated against any size bound.
#[inline]
pub fn checked_workgroups(g: &GemmExt, k: &KernelMeta) -> Option<u64> {
    u64::from(g.m)
        .div_ceil(u64::from(k.macro_tile_0.max(1)))
        .checked_mul(u64::from(g.n).div_ceil(u64::from(k.macro_tile_1.max(1))))?
        .checked_mul(u64::from(k.split_k.max(1)))?
        .checked_mul(u64::from(g.batch.max(1)))
}

/// Resident workgroups per CU: the tightest of LDS, registers, wave slots and the
/// hardware limit. Zero means the kernel cannot run on this GPU.
#[inline]
pub fn occupancy(k: &KernelMeta, r: &CuResources) -> u32 {
    let threads = u32::from(k.workgroup_size.max(1));
    let waves_per_wg = threads.div_ceil(r.wave_size.max(1));
    let by_lds = r
        .lds_bytes_per_cu
        .checked_div(k.lds_bytes)
        .unwrap_or(u32::MAX);
    let by_regs = r
        .vgprs_per_cu
        .checked_div(u32::from(k.vgprs_per_thread).saturating_mul(threads))
        .unwrap_or(u32::MAX);
    let by_waves = r.wave_slots_per_cu.checked_div(waves_per_wg).unwrap_or(0);
    by_lds.min(by_regs).min(by_waves).min(r.max_wgs_per_cu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gemm_ext::sample_record;

    fn meta(lds: u32, vgprs: u16, wg: u16) -> KernelMeta {
        KernelMeta {
            kernel_object: 0x1000,
            macro_tile_0: 128,
            macro_tile_1: 128,
            depth_u: 16,
            workgroup_size: wg,
            lds_bytes: lds,
            vgprs_per_thread: vgprs,
            split_k: 1,
        }
    }

    #[test]
    fn occupancy_takes_the_tightest_resource() {
        let r = CuResources::MI100;
        // LDS-bound: 64 KiB / 20 KiB = 3.
        assert_eq!(occupancy(&meta(20 * 1024, 64, 256), &r), 3);
        // Register-bound: 131072 / (128 * 256) = 4.
        assert_eq!(occupancy(&meta(1024, 128, 256), &r), 4);
        // Wave-slot-bound: 40 / 4 = 10, then the WG limit 16 does not bind.
        assert_eq!(occupancy(&meta(1024, 8, 256), &r), 10);
        // No LDS and no registers: the hardware limit.
        assert_eq!(occupancy(&meta(0, 0, 64), &r), 16);
    }

    #[test]
    fn workgroups_count_partial_tiles_split_k_and_batch() {
        let mut g = sample_record(1000, 300, 64, 0, 1);
        let [k0, k1, _] = [g.kernels[0], g.kernels[1], g.kernels[2]];
        // ceil(1000/128) = 8, ceil(300/128) = 3.
        assert_eq!(workgroups(&g, &k0), 24);
        // ceil(300/64) = 5.
        assert_eq!(workgroups(&g, &k1), 40);
        g.batch = 3;
        let split = KernelMeta { split_k: 2, ..k0 };
        assert_eq!(workgroups(&g, &split), 24 * 2 * 3);
        assert_eq!(checked_workgroups(&g, &split), Some(24 * 2 * 3));
        assert_eq!(grid_workgroups(1000, 300, 3, 128, 128, 2), 24 * 2 * 3);
    }

    #[test]
    fn checked_workgroups_reports_overflow() {
        let mut g = sample_record(u32::MAX, u32::MAX, 64, 0, 1);
        g.batch = u32::MAX;
        let tiny = KernelMeta {
            macro_tile_0: 1,
            macro_tile_1: 1,
            split_k: u8::MAX,
            ..g.kernels[0]
        };
        assert_eq!(checked_workgroups(&g, &tiny), None);
    }
}
