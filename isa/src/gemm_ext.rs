//! GEMM extension record: the dissertation's kernel-packet extension (ch. 7).
//!
//! A kernel-dispatch packet that launches a GEMM points at one of these records in device
//! memory. It carries the problem (M, N, K, transposes, data type) and a map of up to
//! [`MAX_KERNEL_OBJECTS`] kernel objects, one per resource-constraint configuration
//! (GPU, GPU/2, GPU/4), each with the metadata the command processor needs to compute
//! occupancy and waves without touching the code object, plus the tuned choice per
//! concurrency degree. Non-GEMM kernels carry no record.
//!
//! The types here are shared by the firmware CP and the host tools; the byte layout,
//! encoder, decoder and validation are filled in by the AQL/GEMM-extension work of issue 2.

use heapless::Vec;

/// Record magic, little-endian "GEXT".
pub const GEMM_EXT_MAGIC: u32 = u32::from_le_bytes(*b"GEXT");
/// The layout version this crate writes and reads.
pub const GEMM_EXT_VERSION: u16 = 1;
/// Kernel objects per record: GPU, GPU/2, GPU/4.
pub const MAX_KERNEL_OBJECTS: usize = 3;
/// Concurrency degrees the record holds a tuned choice for, in order.
pub const CONCURRENCY_DEGREES: [u8; 5] = [1, 2, 4, 8, 16];

/// Element type of a GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum GemmDataType {
    /// IEEE half.
    F16 = 0,
    /// bfloat16.
    Bf16 = 1,
    /// IEEE single.
    F32 = 2,
}

impl GemmDataType {
    /// Bytes per element.
    pub const fn bytes(self) -> u32 {
        match self {
            Self::F16 | Self::Bf16 => 2,
            Self::F32 => 4,
        }
    }
}

/// What the CP needs to know about one kernel object to place it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct KernelMeta {
    /// The kernel object (code descriptor address) to write into the packet.
    pub kernel_object: u64,
    /// Macro tile rows (MT0).
    pub macro_tile_0: u16,
    /// Macro tile columns (MT1).
    pub macro_tile_1: u16,
    /// Depth of the K loop per iteration (Tensile's DepthU).
    pub depth_u: u16,
    /// Threads per workgroup.
    pub workgroup_size: u16,
    /// LDS bytes per workgroup.
    pub lds_bytes: u32,
    /// Vector registers per thread (32-bit each).
    pub vgprs_per_thread: u16,
    /// Global split-U (split-K) factor, >= 1.
    pub split_k: u8,
}

/// The GEMM problem and its kernel-object map.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmExt {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// Dot-product depth.
    pub k: u32,
    /// Batch count (1 for a plain GEMM).
    pub batch: u32,
    /// A is transposed.
    pub trans_a: bool,
    /// B is transposed.
    pub trans_b: bool,
    /// Element type.
    pub dtype: GemmDataType,
    /// Kernel objects, index 0 = tuned on the full GPU (the isolated kernel), 1 = GPU/2,
    /// 2 = GPU/4. At least one.
    pub kernels: Vec<KernelMeta, MAX_KERNEL_OBJECTS>,
    /// For each entry of [`CONCURRENCY_DEGREES`], the index into `kernels` of the
    /// globally-optimized kernel for that CD.
    pub cd_choice: [u8; CONCURRENCY_DEGREES.len()],
}
