//! A Tensile-style GEMM kernel catalog (SPEC Appendix A).
//!
//! Each entry is a point in Tensile's parameter space: macro tile MT0 x MT1, depth U,
//! workgroup threads, global split-U, prefetch of the next global tile (a second LDS
//! staging buffer) and LDS padding (avoids bank conflicts at the price of LDS). The
//! generator keeps only combinations a tuner would ship: a per-thread micro tile of
//! 8..128 accumulators (4 for tiny tiles, 256 for the 256x256 tile with AGPRs), tile
//! aspect ratio <= 4, and LDS within 64 KiB for f16; which values are combined is a
//! [`CatalogSpace`]. Resources follow from the parameters, so occupancy and waves are
//! computed, not stored.

use nmcp_isa::gemm_ext::{GemmDataType, KernelMeta};
use serde::{Deserialize, Serialize};

/// Kernel object of catalog entry 0; entry `i` is at `KERNEL_OBJECT_BASE + i * KERNEL_OBJECT_STRIDE`.
pub const KERNEL_OBJECT_BASE: u64 = 0x7000_0000_0000;
/// Distance between consecutive catalog kernel objects.
pub const KERNEL_OBJECT_STRIDE: u64 = 0x100;

/// LDS bytes a generated kernel may use (for f16), the MI100 per-CU LDS.
const LDS_LIMIT: u32 = 64 * 1024;
/// Elements each LDS row is padded by when padding is on.
const LDS_PAD_ELEMENTS: u32 = 8;
/// Registers every thread needs besides accumulators and staging (addresses, loop
/// counters, pointers).
const VGPR_OVERHEAD: u32 = 24;

/// One kernel of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CatalogKernel {
    /// Position in the catalog.
    pub index: u32,
    /// Macro tile rows.
    pub mt0: u16,
    /// Macro tile columns.
    pub mt1: u16,
    /// Depth U.
    pub depth_u: u16,
    /// Threads per workgroup.
    pub threads: u16,
    /// Global split-U.
    pub split_u: u8,
    /// Prefetches the next global tile into a second LDS buffer.
    pub prefetch: bool,
    /// Pads LDS rows against bank conflicts.
    pub lds_pad: bool,
    /// Tensile's `StaggerUMapping`: which workgroup index picks the K-loop start offset
    /// (StaggerU, see `gpu::llc_channel`): 0 the tile row, 1 the tile column.
    #[serde(default)]
    pub stagger_mapping: u8,
    /// Software-pipeline stages of the K loop (Triton's `num_stages`): that many LDS
    /// buffers, `stages - 1` tiles' loads in flight while one is computed on. 0 is
    /// Tensile's kernel, whose stages follow from `prefetch` (2 with it, 1 without).
    /// Left out of the serialised form when 0, so Tensile catalogs keep their cache keys.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stages: u8,
    /// How split-K slices combine (only with `split_u > 1`): `false` is Tensile's
    /// multiple-buffer reduction kernel after the main kernel; `true` is Triton's split-K,
    /// whose slices add their partial tiles into an FP32 output with atomic adds after a
    /// memset kernel zeroes it (see [`super::gemm::KernelCost::tail_ns`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub split_atomic: bool,
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

impl CatalogKernel {
    /// LDS buffers of the K loop's pipeline: `stages` when given, else 2 with prefetch
    /// and 1 without.
    pub fn pipeline_stages(&self) -> u32 {
        match self.stages {
            0 if self.prefetch => 2,
            0 => 1,
            s => u32::from(s),
        }
    }

    /// LDS bytes per workgroup: A and B slabs of U rows, one per pipeline stage, plus
    /// row padding.
    pub fn lds_bytes(&self, dtype: GemmDataType) -> u32 {
        let eb = dtype.bytes();
        let slab = (u32::from(self.mt0) + u32::from(self.mt1)) * u32::from(self.depth_u) * eb;
        let buffers = self.pipeline_stages();
        let pad = if self.lds_pad {
            2 * u32::from(self.depth_u) * LDS_PAD_ELEMENTS * eb * buffers
        } else {
            0
        };
        slab * buffers + pad
    }

    /// Accumulators per thread (f32 accumulation for every input type).
    pub fn accumulators(&self) -> u32 {
        (u32::from(self.mt0) * u32::from(self.mt1)).div_ceil(u32::from(self.threads))
    }

    /// 32-bit registers per thread: accumulators, the staging registers the global loads
    /// land in before the LDS write (twice with prefetch), and a fixed overhead.
    pub fn vgprs(&self, dtype: GemmDataType) -> u32 {
        let staged =
            (u32::from(self.mt0) + u32::from(self.mt1)) * u32::from(self.depth_u) * dtype.bytes();
        let staging = staged.div_ceil(4 * u32::from(self.threads));
        let staging = staging * self.pipeline_stages().clamp(1, 2);
        self.accumulators() + staging + VGPR_OVERHEAD
    }

    /// The kernel object this entry is published under.
    pub fn kernel_object(&self) -> u64 {
        KERNEL_OBJECT_BASE + u64::from(self.index) * KERNEL_OBJECT_STRIDE
    }

    /// The metadata the GEMM extension carries for this kernel.
    pub fn meta(&self, dtype: GemmDataType) -> KernelMeta {
        KernelMeta {
            kernel_object: self.kernel_object(),
            macro_tile_0: self.mt0,
            macro_tile_1: self.mt1,
            depth_u: self.depth_u,
            workgroup_size: self.threads,
            lds_bytes: self.lds_bytes(dtype),
            vgprs_per_thread: u16::try_from(self.vgprs(dtype)).unwrap_or(u16::MAX),
            split_k: self.split_u,
        }
    }

    /// The generator's parameters, in the name's order: (MT0, MT1, U, threads, split-U,
    /// prefetch, LDS padding, StaggerU mapping). Two catalog kernels never share them.
    pub fn parameters(&self) -> (u16, u16, u16, u16, u8, bool, bool, u8) {
        (
            self.mt0,
            self.mt1,
            self.depth_u,
            self.threads,
            self.split_u,
            self.prefetch,
            self.lds_pad,
            self.stagger_mapping,
        )
    }

    /// A Tensile-like name, e.g. `MT128x64_U16_T256_S1_PF_PAD` (`_SUM1` when the
    /// stagger follows the tile column, `_ST4` for explicit pipeline stages, `_ATOMIC`
    /// for split-K by atomic adds).
    pub fn name(&self) -> String {
        let mut name = format!(
            "MT{}x{}_U{}_T{}_S{}{}{}{}",
            self.mt0,
            self.mt1,
            self.depth_u,
            self.threads,
            self.split_u,
            if self.prefetch { "_PF" } else { "" },
            if self.lds_pad { "_PAD" } else { "" },
            if self.stagger_mapping == 1 {
                "_SUM1"
            } else {
                ""
            }
        );
        if self.stages != 0 {
            name.push_str(&format!("_ST{}", self.stages));
        }
        if self.split_atomic {
            name.push_str("_ATOMIC");
        }
        name
    }
}

/// The parameter space a catalog is generated from: the values the generator combines
/// and where split-U is allowed. The generator's rules (accumulators per thread, tile
/// aspect, LDS within the MI100's 64 KiB) apply to every space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogSpace {
    /// Macro-tile sizes (rows and columns).
    pub tile_sizes: &'static [u16],
    /// Depths U of the K loop.
    pub depths: &'static [u16],
    /// Workgroup sizes in threads.
    pub threads: &'static [u16],
    /// Global split-U factors.
    pub splits: &'static [u8],
    /// Largest tile area (MT0 x MT1) a split-U kernel is generated for.
    pub split_max_area: u32,
    /// Depths a split-U kernel is generated with.
    pub split_depths: &'static [u16],
    /// Whether split-U kernels also come with the prefetch and padding variants.
    pub split_variants: bool,
    /// StaggerU mappings every kernel comes with (0: by tile row, 1: by tile column).
    pub stagger_mappings: &'static [u8],
    /// Most accumulators per thread below the 256 x 256 tile (which always may hold 256).
    pub max_accumulators: u32,
}

impl CatalogSpace {
    /// The power-of-two space, kept for comparison with the standard one: power-of-two tiles 16..256, U
    /// 8/16/32, 64/128/256 threads, split-U 2 and 4 for tiles up to 64 x 64 at U = 16,
    /// no prefetch or padding variants with split-U (279 kernels).
    pub const POWER_OF_TWO: Self = Self {
        tile_sizes: &[16, 32, 64, 128, 256],
        depths: &[8, 16, 32],
        threads: &[64, 128, 256],
        splits: &[1, 2, 4],
        split_max_area: 64 * 64,
        split_depths: &[16],
        split_variants: false,
        stagger_mappings: &[0],
        max_accumulators: 128,
    };

    /// The built-in space (2,925 kernels): the macro tiles a matrix-core kernel can
    /// have with 16- and 32-wide MFMA blocks and 1-3 blocks per wave and dimension
    /// (16, 32, 48, 64, 96, 128, 192, 256), U 8/16/32, 64/128/256 threads, and
    /// Tensile's usual global split-U values (1, 2, 3, 4, 6, 8) for every tile at U 16
    /// and 32, with the prefetch and padding variants like any other kernel. Non-power-
    /// of-two tiles fit the sizes that are not multiples of 128 or 256 with less edge
    /// waste, and split-U fills the last wave of a grid that leaves CUs idle; both choose
    /// per size, which is what makes the tuned winners size-specific.
    pub const STANDARD: Self = Self {
        tile_sizes: &[16, 32, 48, 64, 96, 128, 192, 256],
        depths: &[8, 16, 32],
        threads: &[64, 128, 256],
        splits: &[1, 2, 3, 4, 6, 8],
        split_max_area: 256 * 256,
        split_depths: &[16, 32],
        split_variants: true,
        stagger_mappings: &[0, 1],
        max_accumulators: 128,
    };

    /// [`Self::STANDARD`] extended to what rocBLAS' MI100 library picks for the
    /// project's GEMMs (`nmcp goldyloc library`): DepthU 64 (also with split-U), the macro
    /// tiles 80, 144, 160 and 288 of its winners (MFMA blocks of 16 in 5, 9, 10 and 18),
    /// and up to 256 accumulators per thread, which its 128 x 288 and 256 x 160 tiles at
    /// 256 threads hold in the MI100's accumulation registers (AGPRs, 256 per lane).
    pub const LIBRARY: Self = Self {
        tile_sizes: &[16, 32, 48, 64, 80, 96, 128, 144, 160, 192, 256, 288],
        depths: &[8, 16, 32, 64],
        threads: &[64, 128, 256],
        splits: &[1, 2, 3, 4, 6, 8],
        split_max_area: 288 * 288,
        split_depths: &[16, 32, 64],
        split_variants: true,
        stagger_mappings: &[0, 1],
        max_accumulators: 256,
    };
}

/// The kernel list tuning searches.
#[derive(Debug, Clone)]
pub struct Catalog {
    kernels: Vec<CatalogKernel>,
}

impl Catalog {
    /// The built-in catalog (deterministic order, so kernel objects are stable).
    pub fn standard() -> Self {
        Self::generate(&CatalogSpace::STANDARD)
    }

    /// Every kernel of `space` the generator's rules keep, in a deterministic order
    /// (macro tile, depth, threads, split, variant), indexed from 0.
    pub fn generate(space: &CatalogSpace) -> Self {
        let mut kernels = Vec::new();
        for &mt0 in space.tile_sizes {
            for &mt1 in space.tile_sizes {
                if mt0.max(mt1) > 4 * mt0.min(mt1) {
                    continue;
                }
                let area = u32::from(mt0) * u32::from(mt1);
                let (acc_lo, acc_hi) = match area {
                    a if a <= 32 * 32 => (4, 128),
                    a if a >= 256 * 256 => (8, 256),
                    _ => (8, space.max_accumulators),
                };
                for &depth_u in space.depths {
                    for &threads in space.threads {
                        let acc = area / u32::from(threads);
                        if acc < acc_lo || acc > acc_hi {
                            continue;
                        }
                        for &split_u in space.splits {
                            if split_u > 1
                                && (area > space.split_max_area
                                    || !space.split_depths.contains(&depth_u))
                            {
                                continue;
                            }
                            for (prefetch, lds_pad) in [(false, false), (true, false), (true, true)]
                            {
                                let variant = prefetch || lds_pad;
                                if variant
                                    && (depth_u == 8
                                        || (split_u > 1 && !space.split_variants)
                                        || area <= 32 * 32)
                                {
                                    continue;
                                }
                                if prefetch && !lds_pad && depth_u == 32 {
                                    continue;
                                }
                                for &stagger_mapping in space.stagger_mappings {
                                    let k = CatalogKernel {
                                        index: 0,
                                        mt0,
                                        mt1,
                                        depth_u,
                                        threads,
                                        split_u,
                                        prefetch,
                                        lds_pad,
                                        stagger_mapping,
                                        stages: 0,
                                        split_atomic: false,
                                    };
                                    if k.lds_bytes(GemmDataType::F16) > LDS_LIMIT {
                                        continue;
                                    }
                                    kernels.push(k);
                                }
                            }
                        }
                    }
                }
            }
        }
        for (i, k) in kernels.iter_mut().enumerate() {
            k.index = u32::try_from(i).unwrap_or(u32::MAX);
        }
        Self { kernels }
    }

    /// A catalog of exactly these kernels, re-indexed from 0 in the given order (a
    /// vendor's or a compiler's own list, e.g. [`super::triton::h200_catalog`]).
    pub fn from_kernels(kernels: impl IntoIterator<Item = CatalogKernel>) -> Self {
        let mut kernels: Vec<CatalogKernel> = kernels.into_iter().collect();
        for (i, k) in kernels.iter_mut().enumerate() {
            k.index = u32::try_from(i).unwrap_or(u32::MAX);
        }
        Self { kernels }
    }

    /// All kernels.
    pub fn kernels(&self) -> &[CatalogKernel] {
        &self.kernels
    }

    /// Number of kernels.
    pub fn len(&self) -> usize {
        self.kernels.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.kernels.is_empty()
    }

    /// Entry `i`.
    pub fn get(&self, i: usize) -> Option<&CatalogKernel> {
        self.kernels.get(i)
    }

    /// The entry a kernel object names, if it is one of ours.
    pub fn by_kernel_object(&self, ko: u64) -> Option<&CatalogKernel> {
        let off = ko.checked_sub(KERNEL_OBJECT_BASE)?;
        if off % KERNEL_OBJECT_STRIDE != 0 {
            return None;
        }
        self.kernels
            .get(usize::try_from(off / KERNEL_OBJECT_STRIDE).ok()?)
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Self::standard()
    }
}
