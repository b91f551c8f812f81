//! A Tensile-style GEMM kernel catalog (SPEC Appendix A).
//!
//! Each entry is a point in Tensile's parameter space: macro tile MT0 x MT1, depth U,
//! workgroup threads, global split-U, prefetch of the next global tile (a second LDS
//! staging buffer) and LDS padding (avoids bank conflicts at the price of LDS). The
//! generator keeps only combinations a tuner would ship: a per-thread micro tile of
//! 8..128 accumulators (4 for tiny tiles, 256 for the 256x256 tile with AGPRs), tile
//! aspect ratio <= 4, split-U only for tiles up to 64x64, and LDS within 64 KiB for f16.
//! Resources follow from the parameters, so occupancy and waves are computed, not stored.

use nmcp_isa::gemm_ext::{GemmDataType, KernelMeta};
use serde::{Deserialize, Serialize};

/// Kernel object of catalog entry 0; entry `i` is at `KERNEL_OBJECT_BASE + i * KERNEL_OBJECT_STRIDE`.
pub const KERNEL_OBJECT_BASE: u64 = 0x7000_0000_0000;
/// Distance between consecutive catalog kernel objects.
pub const KERNEL_OBJECT_STRIDE: u64 = 0x100;

/// Macro-tile sizes the generator combines.
const TILE_SIZES: [u16; 5] = [16, 32, 64, 128, 256];
/// Depths of the K loop.
const DEPTHS: [u16; 3] = [8, 16, 32];
/// Workgroup sizes in threads.
const THREADS: [u16; 3] = [64, 128, 256];
/// Global split-U factors.
const SPLITS: [u8; 3] = [1, 2, 4];
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
}

impl CatalogKernel {
    /// LDS bytes per workgroup: A and B slabs of U rows, doubled with prefetch, plus row
    /// padding.
    pub fn lds_bytes(&self, dtype: GemmDataType) -> u32 {
        let eb = dtype.bytes();
        let slab = (u32::from(self.mt0) + u32::from(self.mt1)) * u32::from(self.depth_u) * eb;
        let buffers = if self.prefetch { 2 } else { 1 };
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
        let staging = if self.prefetch { staging * 2 } else { staging };
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

    /// A Tensile-like name, e.g. `MT128x64_U16_T256_S1_PF_PAD`.
    pub fn name(&self) -> String {
        format!(
            "MT{}x{}_U{}_T{}_S{}{}{}",
            self.mt0,
            self.mt1,
            self.depth_u,
            self.threads,
            self.split_u,
            if self.prefetch { "_PF" } else { "" },
            if self.lds_pad { "_PAD" } else { "" }
        )
    }
}

/// The kernel list tuning searches.
#[derive(Debug, Clone)]
pub struct Catalog {
    kernels: Vec<CatalogKernel>,
}

impl Catalog {
    /// The built-in catalog (deterministic order, so kernel objects are stable).
    pub fn standard() -> Self {
        let mut kernels = Vec::new();
        for mt0 in TILE_SIZES {
            for mt1 in TILE_SIZES {
                if mt0.max(mt1) / mt0.min(mt1) > 4 {
                    continue;
                }
                let area = u32::from(mt0) * u32::from(mt1);
                let (acc_lo, acc_hi) = match area {
                    a if a <= 32 * 32 => (4, 128),
                    a if a >= 256 * 256 => (8, 256),
                    _ => (8, 128),
                };
                for depth_u in DEPTHS {
                    for threads in THREADS {
                        let acc = area / u32::from(threads);
                        if acc < acc_lo || acc > acc_hi {
                            continue;
                        }
                        for split_u in SPLITS {
                            if split_u > 1 && (area > 64 * 64 || depth_u != 16) {
                                continue;
                            }
                            for (prefetch, lds_pad) in [(false, false), (true, false), (true, true)]
                            {
                                let variant = prefetch || lds_pad;
                                if variant && (depth_u == 8 || split_u > 1 || area <= 32 * 32) {
                                    continue;
                                }
                                if prefetch && !lds_pad && depth_u == 32 {
                                    continue;
                                }
                                let k = CatalogKernel {
                                    index: 0,
                                    mt0,
                                    mt1,
                                    depth_u,
                                    threads,
                                    split_u,
                                    prefetch,
                                    lds_pad,
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
