//! GEMM features the CD predictor reads: problem size and, per concurrency degree, the
//! workgroup count, occupancy and waves of the kernel object tuned for that degree.
//!
//! This one implementation serves the firmware at run time and the host's training and
//! evaluation, so the two can never disagree on a feature.

use nmcp_isa::gemm_ext::{GemmExt, KernelMeta, CONCURRENCY_DEGREES};
// The workgroup and occupancy formulas are pure functions of the extension record, shared
// with the emulator's timing model; they live in the ISA crate and are re-exported here
// for the firmware's existing paths.
pub use nmcp_isa::gemm_ext::{occupancy, workgroups, CuResources};

/// Number of features: M, N, K, then (#WGs, occupancy, waves) for CD 2, 4, 8, 16.
pub const FEATURE_COUNT: usize = 3 + 3 * (CONCURRENCY_DEGREES.len() - 1);

/// Fractional bits of the fixed-point format used for features and weights (Q16.16
/// values carried in `i64` so products do not overflow).
pub const FRAC_BITS: u32 = 16;

/// Waves in Q16.16: WGs / (CUs x occupancy). Fractional, so a partial last wave shows
/// (the integer count is its ceiling). `None` when the kernel cannot be resident.
pub fn waves_q16(wgs: u64, occupancy: u32, r: &CuResources) -> Option<i64> {
    let slots = u64::from(r.cus).checked_mul(u64::from(occupancy))?;
    if slots == 0 {
        return None;
    }
    // A 128-bit division is a long library call on RV32; every real grid fits the 64-bit
    // path (fewer than 2^47 workgroups), which gives the same quotient.
    let q = match wgs.checked_shl(FRAC_BITS).filter(|v| v >> FRAC_BITS == wgs) {
        Some(shifted) => u128::from(shifted / slots),
        None => (u128::from(wgs) << FRAC_BITS) / u128::from(slots),
    };
    i64::try_from(q).ok()
}

/// Why features could not be computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FeatureError {
    /// `cd_choice` names a kernel the record does not carry.
    KernelIndex {
        /// Position in `cd_choice`.
        cd_index: u8,
    },
    /// The kernel cannot be resident on this GPU (zero occupancy).
    NotResident {
        /// Position in `cd_choice`.
        cd_index: u8,
    },
}

impl core::fmt::Display for FeatureError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::KernelIndex { cd_index } => {
                write!(f, "cd_choice[{cd_index}] names a missing kernel object")
            }
            Self::NotResident { cd_index } => {
                write!(f, "kernel for cd_choice[{cd_index}] cannot be resident")
            }
        }
    }
}

impl core::error::Error for FeatureError {}

/// The kernel the record tuned for `CONCURRENCY_DEGREES[cd_index]`.
pub fn kernel_for(g: &GemmExt, cd_index: usize) -> Result<&KernelMeta, FeatureError> {
    let idx = g.cd_choice.get(cd_index).copied().unwrap_or(u8::MAX);
    g.kernels
        .get(usize::from(idx))
        .ok_or(FeatureError::KernelIndex {
            cd_index: cd_index as u8,
        })
}

/// The raw feature vector in Q16.16.
///
/// # Errors
/// [`FeatureError`] if the record's kernel map is inconsistent or a kernel cannot run.
pub fn features(g: &GemmExt, r: &CuResources) -> Result<[i64; FEATURE_COUNT], FeatureError> {
    let mut f = [0i64; FEATURE_COUNT];
    let mut out = f.iter_mut();
    for v in [g.m, g.n, g.k] {
        if let Some(slot) = out.next() {
            *slot = i64::from(v) << FRAC_BITS;
        }
    }
    for cd_index in 1..CONCURRENCY_DEGREES.len() {
        let k = kernel_for(g, cd_index)?;
        let wgs = workgroups(g, k);
        let occ = occupancy(k, r);
        let waves = waves_q16(wgs, occ, r).ok_or(FeatureError::NotResident {
            cd_index: cd_index as u8,
        })?;
        let wgs_q = i64::try_from(wgs).unwrap_or(i64::MAX >> FRAC_BITS) << FRAC_BITS;
        for v in [wgs_q, i64::from(occ) << FRAC_BITS, waves] {
            if let Some(slot) = out.next() {
                *slot = v;
            }
        }
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_isa::gemm_ext::GemmDataType;

    fn meta(t0: u16, t1: u16, lds: u32, vgprs: u16, wg: u16) -> KernelMeta {
        KernelMeta {
            kernel_object: 0x1000,
            macro_tile_0: t0,
            macro_tile_1: t1,
            depth_u: 16,
            workgroup_size: wg,
            lds_bytes: lds,
            vgprs_per_thread: vgprs,
            split_k: 1,
        }
    }

    fn gemm(m: u32, n: u32, k: u32, kernels: &[KernelMeta]) -> GemmExt {
        GemmExt {
            m,
            n,
            k,
            batch: 1,
            trans_a: false,
            trans_b: false,
            dtype: GemmDataType::F16,
            kernels: heapless::Vec::from_slice(kernels).unwrap(),
            cd_choice: [0, 0, 1, 1, 1],
        }
    }

    #[test]
    fn waves_are_fractional_and_features_ordered() {
        let r = CuResources::MI100;
        let k0 = meta(128, 128, 16 * 1024, 64, 256); // occ 4 (LDS), 4 (regs: 131072/16384=8) -> 4
        let k1 = meta(64, 64, 8 * 1024, 32, 256); // occ min(8, 16, 10, 16) = 8
        let g = gemm(1024, 1024, 512, &[k0, k1]);
        assert_eq!(workgroups(&g, &k0), 64);
        assert_eq!(occupancy(&k0, &r), 4);
        let f = features(&g, &r).unwrap();
        assert_eq!(f[0], 1024 << 16);
        assert_eq!(f[2], 512 << 16);
        // CD 2 uses kernel 0: 64 WGs over 120 x 4 slots = 0.1333 waves.
        assert_eq!(f[3], 64 << 16);
        assert_eq!(f[5], (64i64 << 16) / 480);
        // CD 4 uses kernel 1: 256 WGs, occupancy 8.
        assert_eq!(f[6], 256 << 16);
        assert_eq!(f[7], 8 << 16);
    }

    #[test]
    fn bad_kernel_index_is_an_error() {
        let r = CuResources::MI100;
        let mut g = gemm(64, 64, 64, &[meta(64, 64, 1024, 8, 64)]);
        g.cd_choice = [0, 0, 2, 0, 0];
        assert_eq!(
            features(&g, &r),
            Err(FeatureError::KernelIndex { cd_index: 2 })
        );
    }
}
