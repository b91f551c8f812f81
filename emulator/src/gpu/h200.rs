//! The NVIDIA H200 preset's kernel catalogue and calibration: the 12-configuration Triton
//! matmul catalogue of the concurrent-GEMM measurements in `../shared/data/h200/`, and the
//! model constants that hold for that GPU (set on that file, for every GEMM alike).
//!
//! The GPU itself (SMs, clocks, L2, HBM3e) is [`super::config::GpuConfig::h200`]; this
//! module holds what is specific to the kernels that ran on it.

use super::catalog::{Catalog, CatalogKernel};
use super::gemm::Calibration;

/// One Triton matmul configuration as the dataset lists it:
/// `[BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT_K]`.
pub type TritonConfig = [u32; 6];

/// The dataset's catalogue, in its order (configuration `i` is catalog entry `i`).
pub const H200_TRITON_CONFIGS: [TritonConfig; 12] = [
    [128, 256, 64, 8, 3, 1],
    [256, 128, 64, 8, 3, 1],
    [128, 128, 64, 8, 3, 1],
    [128, 128, 32, 4, 4, 1],
    [128, 64, 32, 4, 4, 1],
    [64, 128, 32, 4, 4, 1],
    [64, 64, 64, 4, 4, 1],
    [64, 32, 32, 2, 5, 1],
    [32, 64, 32, 2, 5, 1],
    [64, 64, 64, 4, 4, 4],
    [128, 128, 64, 8, 3, 4],
    [64, 128, 64, 4, 4, 8],
];

/// Threads per warp on NVIDIA GPUs.
const WARP_THREADS: u32 = 32;

/// A configuration that does not fit the catalog's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadTritonConfig {
    /// The configuration.
    pub config: TritonConfig,
    /// Which field is out of range.
    pub field: &'static str,
}

impl std::fmt::Display for BadTritonConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Triton configuration {:?}: {} out of range",
            self.config, self.field
        )
    }
}

impl std::error::Error for BadTritonConfig {}

/// The catalog kernel of one Triton configuration: the output tile is the macro tile,
/// `BLOCK_K` the K step, `num_warps x 32` threads, `num_stages` LDS (shared-memory)
/// buffers with `num_stages - 1` tiles in flight, split-K by FP32 atomic adds after a
/// memset. Triton's shared-memory layouts are swizzled, so there are no bank conflicts
/// (`lds_pad`); its loads are asynchronous copies into the next stage (`prefetch`).
///
/// # Errors
/// [`BadTritonConfig`] when a field is zero or does not fit (tiles and K step up to
/// 65,535, up to 255 stages and splits, at most 2,047 warps).
pub fn triton_kernel(c: TritonConfig) -> Result<CatalogKernel, BadTritonConfig> {
    let bad = |field| BadTritonConfig { config: c, field };
    let u16_of = |v: u32, field| {
        u16::try_from(v)
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| bad(field))
    };
    let u8_of = |v: u32, field| {
        u8::try_from(v)
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| bad(field))
    };
    let threads = c[3]
        .checked_mul(WARP_THREADS)
        .ok_or_else(|| bad("num_warps"))?;
    let split_u = u8_of(c[5], "SPLIT_K")?;
    Ok(CatalogKernel {
        index: 0,
        mt0: u16_of(c[0], "BLOCK_M")?,
        mt1: u16_of(c[1], "BLOCK_N")?,
        depth_u: u16_of(c[2], "BLOCK_K")?,
        threads: u16_of(threads, "num_warps")?,
        split_u,
        prefetch: true,
        lds_pad: true,
        stagger_mapping: 0,
        stages: u8_of(c[4], "num_stages")?,
        split_atomic: split_u > 1,
    })
}

/// A catalog of Triton configurations, in the given order.
///
/// # Errors
/// The first configuration that does not fit ([`triton_kernel`]).
pub fn triton_catalog(configs: &[TritonConfig]) -> Result<Catalog, BadTritonConfig> {
    let kernels = configs
        .iter()
        .map(|&c| triton_kernel(c))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Catalog::from_kernels(kernels))
}

/// The H200 preset's catalogue ([`H200_TRITON_CONFIGS`]).
pub fn h200_catalog() -> Catalog {
    // The built-in list fits by construction (checked by a test); an empty catalog
    // would only make every search report "no kernel".
    triton_catalog(&H200_TRITON_CONFIGS).unwrap_or_else(|_| Catalog::from_kernels([]))
}

/// The model calibration for the H200: the MI100's efficiency curve and reuse
/// parameters with the H200's memory latency (see `docs/calibration.md`, "H200").
pub fn h200_calibration() -> Calibration {
    Calibration {
        memory_latency_ns: H200_MEMORY_LATENCY_NS,
        warpgroup_mma_rows: Some(WGMMA_ROWS),
        ..Calibration::default()
    }
}

/// Rows of Hopper's warpgroup matrix instruction `wgmma.mma_async.m64nNk16` (PTX ISA).
pub const WGMMA_ROWS: u32 = 64;

/// Unloaded global-memory latency of Hopper, ns (see `docs/calibration.md`).
pub const H200_MEMORY_LATENCY_NS: f64 = 500.0;

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_isa::gemm_ext::GemmDataType;

    #[test]
    fn the_built_in_catalogue_is_the_datasets_twelve_configurations() {
        let cat = h200_catalog();
        assert_eq!(cat.len(), 12);
        let k0 = cat.get(0).copied().unwrap();
        assert_eq!(
            (k0.mt0, k0.mt1, k0.depth_u, k0.threads),
            (128, 256, 64, 256)
        );
        assert_eq!((k0.stages, k0.split_u, k0.split_atomic), (3, 1, false));
        let k11 = cat.get(11).copied().unwrap();
        assert_eq!((k11.split_u, k11.split_atomic, k11.index), (8, true, 11));
        // Three 128x256x64 FP16 stages: 144 KiB of shared memory.
        assert_eq!(
            k0.lds_bytes(GemmDataType::F16),
            3 * 384 * 64 * 2 + 3 * 2 * 64 * 8 * 2
        );
    }

    #[test]
    fn a_zero_field_is_named() {
        let e = triton_kernel([128, 0, 64, 8, 3, 1]).unwrap_err();
        assert_eq!(e.field, "BLOCK_N");
        assert!(triton_kernel([128, 128, 64, 8, 3, 300]).is_err());
    }
}
