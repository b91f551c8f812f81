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

/// Number of features: log2 M, log2 N, log2 K, then (log2 #WGs, occupancy, log2 waves) for
/// CD 2, 4, 8, 16.
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

/// `log2(x)` in Q16.16 for `x >= 1`, linear between powers of two (the mantissa below the
/// leading one read as the fraction: at most 0.086 below the true logarithm, exact at
/// powers of two, monotonic); `x = 0` gives `log2(1) = 0`'s lower neighbour, `-1`.
///
/// Why logarithms: the predictor is a linear model over min-max normalised features, and
/// GEMM sizes and grids span four decades (M from 64 to 32K, 10 to 10^5 workgroups):
/// linearly scaled, every small GEMM sits in the first percent of the range and the
/// model cannot tell a 0.3-wave grid from a 3-wave one (issue 12, item 2). A leading-zero
/// count and a shift: cheap on RV32, no table, no division.
#[inline(never)]
pub fn log2_q16(x: u64) -> i64 {
    if x == 0 {
        return -(1 << FRAC_BITS);
    }
    // Most values fit 32 bits: a 32-bit leading-zero count is half the work on RV32.
    let e = match u32::try_from(x) {
        Ok(lo) => 31 - lo.leading_zeros(),
        Err(_) => 63 - x.leading_zeros(),
    };
    // The bits below the leading one, as a 16-bit fraction.
    let frac = if e >= FRAC_BITS {
        (x >> (e - FRAC_BITS)) & 0xFFFF
    } else {
        (x << (FRAC_BITS - e)) & 0xFFFF
    };
    (i64::from(e) << FRAC_BITS) | frac as i64
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
            *slot = log2_q16(u64::from(v));
        }
    }
    for cd_index in 1..CONCURRENCY_DEGREES.len() {
        let k = kernel_for(g, cd_index)?;
        let wgs = workgroups(g, k);
        let occ = occupancy(k, r);
        let waves = waves_q16(wgs, occ, r).ok_or(FeatureError::NotResident {
            cd_index: cd_index as u8,
        })?;
        // Waves are Q16.16: log2 of the fixed-point value minus 16 is log2 of the waves.
        let log_waves = log2_q16(waves.max(0) as u64) - (i64::from(FRAC_BITS) << FRAC_BITS);
        for v in [log2_q16(wgs), i64::from(occ) << FRAC_BITS, log_waves] {
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
        assert_eq!(f[0], 10 << 16);
        assert_eq!(f[2], 9 << 16);
        // CD 2 uses kernel 0: 64 WGs over 120 x 4 slots = 0.1333 waves, log2 = -2.91
        // (the linear-mantissa form: -3 + 0.0667 = -2.933).
        assert_eq!(f[3], 6 << 16);
        assert_eq!(f[5], log2_q16((64u64 << 16) / 480) - (16 << 16));
        assert!(
            (f[5] as f64 / 65536.0 + 2.933).abs() < 0.01,
            "{}",
            f[5] as f64 / 65536.0
        );
        // CD 4 uses kernel 1: 256 WGs, occupancy 8.
        assert_eq!(f[6], 8 << 16);
        assert_eq!(f[7], 8 << 16);
    }

    #[test]
    fn log2_is_exact_at_powers_of_two_monotonic_and_close_between() {
        for e in 0..63u32 {
            assert_eq!(log2_q16(1 << e), i64::from(e) << 16);
        }
        assert_eq!(log2_q16(0), -(1 << 16));
        let mut last = log2_q16(0);
        for x in (1..200_000u64).chain([u64::MAX - 1, u64::MAX]) {
            let l = log2_q16(x);
            assert!(l >= last, "not monotonic at {x}");
            last = l;
            let err = (x as f64).log2() - l as f64 / 65536.0;
            assert!((-1e-4..0.0861).contains(&err), "log2({x}) off by {err}");
        }
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
