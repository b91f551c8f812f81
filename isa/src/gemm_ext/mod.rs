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
//! encoder, decoder and validation follow the types; the layout is in [`offset`] and
//! `docs/decisions/cp.md`. A kernel-dispatch packet references its record through the
//! packet's `reserved2` field (u64 @48), see [`crate::aql`].

use heapless::Vec;

use crate::le::{LeReader, LeWriter, OutOfBounds};

mod launch;
mod sample;

pub use launch::{checked_workgroups, grid_workgroups, occupancy, workgroups, CuResources};
pub use sample::sample_record;

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

/// A GEMM problem without its kernel map: what makes two GEMMs "the same size" (the
/// CP's heterogeneous rule) and what the timing model simulates. Its `Display` is the
/// `M_N_K_T1T2` label of dissertation ch. 7, with `_bN` for a batch and a type suffix
/// for other than f16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmProblem {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// Dot-product depth.
    pub k: u32,
    /// Batch count (>= 1).
    pub batch: u32,
    /// A transposed.
    pub trans_a: bool,
    /// B transposed.
    pub trans_b: bool,
    /// Element type.
    pub dtype: GemmDataType,
}

impl GemmProblem {
    /// A plain (unbatched) GEMM.
    pub const fn new(
        m: u32,
        n: u32,
        k: u32,
        trans_a: bool,
        trans_b: bool,
        dtype: GemmDataType,
    ) -> Self {
        Self {
            m,
            n,
            k,
            batch: 1,
            trans_a,
            trans_b,
            dtype,
        }
    }

    /// The problem of an extension record (a zero batch counts as 1).
    pub fn from_ext(g: &GemmExt) -> Self {
        Self {
            m: g.m,
            n: g.n,
            k: g.k,
            batch: g.batch.max(1),
            trans_a: g.trans_a,
            trans_b: g.trans_b,
            dtype: g.dtype,
        }
    }

    /// A record for this problem with no kernels yet.
    pub fn to_ext(&self) -> GemmExt {
        GemmExt {
            m: self.m,
            n: self.n,
            k: self.k,
            batch: self.batch,
            trans_a: self.trans_a,
            trans_b: self.trans_b,
            dtype: self.dtype,
            kernels: Vec::new(),
            cd_choice: [0; CONCURRENCY_DEGREES.len()],
        }
    }

    /// Useful FLOPs (2 M N K per batch).
    pub fn flops(&self) -> f64 {
        2.0 * f64::from(self.m) * f64::from(self.n) * f64::from(self.k) * f64::from(self.batch)
    }
}

impl core::fmt::Display for GemmProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{}_{}_{}_{}{}",
            self.m,
            self.n,
            self.k,
            u8::from(self.trans_a),
            u8::from(self.trans_b)
        )?;
        if self.batch > 1 {
            write!(f, "_b{}", self.batch)?;
        }
        match self.dtype {
            GemmDataType::F16 => Ok(()),
            GemmDataType::Bf16 => f.write_str("_bf16"),
            GemmDataType::F32 => f.write_str("_f32"),
        }
    }
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

/// Bytes of the encoded record: a 32-byte problem header and [`MAX_KERNEL_OBJECTS`]
/// kernel slots of [`KERNEL_SLOT_BYTES`] each (unused slots are zero).
pub const GEMM_EXT_BYTES: usize = KERNELS_OFFSET + MAX_KERNEL_OBJECTS * KERNEL_SLOT_BYTES;
/// Bytes of one kernel slot.
pub const KERNEL_SLOT_BYTES: usize = 24;
/// Offset of the first kernel slot.
pub const KERNELS_OFFSET: usize = 32;

/// Byte offsets of the record's fields (little-endian).
pub mod offset {
    /// `magic` u32.
    pub const MAGIC: usize = 0;
    /// `version` u16.
    pub const VERSION: usize = 4;
    /// `kernel_count` u8.
    pub const KERNEL_COUNT: usize = 6;
    /// `flags` u8: bit 0 trans_a, bit 1 trans_b, bits 7:2 reserved.
    pub const FLAGS: usize = 7;
    /// `m` u32.
    pub const M: usize = 8;
    /// `n` u32.
    pub const N: usize = 12;
    /// `k` u32.
    pub const K: usize = 16;
    /// `batch` u32.
    pub const BATCH: usize = 20;
    /// `dtype` u8.
    pub const DTYPE: usize = 24;
    /// `cd_choice` [u8; 5].
    pub const CD_CHOICE: usize = 25;
    /// `reserved` u16.
    pub const RESERVED: usize = 30;
    /// Within a kernel slot: `kernel_object` u64.
    pub const SLOT_KERNEL_OBJECT: usize = 0;
    /// Within a kernel slot: `macro_tile_0` u16.
    pub const SLOT_MACRO_TILE_0: usize = 8;
    /// Within a kernel slot: `macro_tile_1` u16.
    pub const SLOT_MACRO_TILE_1: usize = 10;
    /// Within a kernel slot: `depth_u` u16.
    pub const SLOT_DEPTH_U: usize = 12;
    /// Within a kernel slot: `workgroup_size` u16.
    pub const SLOT_WORKGROUP_SIZE: usize = 14;
    /// Within a kernel slot: `lds_bytes` u32.
    pub const SLOT_LDS_BYTES: usize = 16;
    /// Within a kernel slot: `vgprs_per_thread` u16.
    pub const SLOT_VGPRS: usize = 20;
    /// Within a kernel slot: `split_k` u8.
    pub const SLOT_SPLIT_K: usize = 22;
    /// Within a kernel slot: reserved u8.
    pub const SLOT_RESERVED: usize = 23;
}

bitflags::bitflags! {
    /// The record's `flags` byte. Bits 7:2 are reserved: a record that sets them does not
    /// decode, so a later layout version can give them a meaning.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct GemmExtFlags: u8 {
        /// A is transposed.
        const TRANS_A = 1;
        /// B is transposed.
        const TRANS_B = 2;
    }
}

impl GemmDataType {
    /// The type for its encoded byte.
    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0 => Some(Self::F16),
            1 => Some(Self::Bf16),
            2 => Some(Self::F32),
            _ => None,
        }
    }

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
        }
    }
}

/// Why a GEMM extension record does not decode or validate. Every variant names the field
/// and its byte offset in the encoded record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum GemmExtError {
    /// Fewer than [`GEMM_EXT_BYTES`] bytes.
    Truncated {
        /// Bytes given.
        len: usize,
    },
    /// `magic` is not [`GEMM_EXT_MAGIC`].
    BadMagic {
        /// The value found.
        found: u32,
    },
    /// `version` is not [`GEMM_EXT_VERSION`].
    UnsupportedVersion {
        /// The value found.
        found: u16,
    },
    /// `kernel_count` is 0 or above [`MAX_KERNEL_OBJECTS`].
    KernelCount {
        /// The value found.
        found: u8,
    },
    /// `dtype` is not a [`GemmDataType`].
    BadDataType {
        /// The value found.
        found: u8,
    },
    /// `cd_choice[cd_index]` names a kernel slot beyond `kernel_count`.
    CdChoiceOutOfRange {
        /// Position in `cd_choice` (CD = `CONCURRENCY_DEGREES[cd_index]`).
        cd_index: u8,
        /// The kernel index found.
        value: u8,
        /// Kernels the record carries.
        kernel_count: u8,
    },
    /// A field that must be non-zero is zero.
    Zero {
        /// Field name.
        field: &'static str,
        /// Byte offset in the record.
        offset: u16,
    },
    /// Reserved bits or an unused kernel slot are not zero.
    ReservedNonZero {
        /// Field name.
        field: &'static str,
        /// Byte offset in the record.
        offset: u16,
    },
}

impl GemmExtError {
    /// Byte offset in the record of the field the error is about.
    pub const fn offset(&self) -> usize {
        match *self {
            Self::Truncated { len } => len,
            Self::BadMagic { .. } => offset::MAGIC,
            Self::UnsupportedVersion { .. } => offset::VERSION,
            Self::KernelCount { .. } => offset::KERNEL_COUNT,
            Self::BadDataType { .. } => offset::DTYPE,
            Self::CdChoiceOutOfRange { cd_index, .. } => offset::CD_CHOICE + cd_index as usize,
            Self::Zero { offset, .. } | Self::ReservedNonZero { offset, .. } => offset as usize,
        }
    }
}

impl core::fmt::Display for GemmExtError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let at = self.offset();
        match *self {
            Self::Truncated { len } => write!(
                f,
                "GEMM extension record truncated: {len} bytes, need {GEMM_EXT_BYTES}"
            ),
            Self::BadMagic { found } => write!(
                f,
                "GEMM extension magic at byte {at} = {found:#010x}, expected {GEMM_EXT_MAGIC:#010x} (\"GEXT\")"
            ),
            Self::UnsupportedVersion { found } => write!(
                f,
                "GEMM extension version at byte {at} = {found}, supported: {GEMM_EXT_VERSION}"
            ),
            Self::KernelCount { found } => write!(
                f,
                "GEMM extension kernel_count at byte {at} = {found}, must be 1..={MAX_KERNEL_OBJECTS}"
            ),
            Self::BadDataType { found } => {
                write!(f, "GEMM extension dtype at byte {at} = {found} is unknown")
            }
            Self::CdChoiceOutOfRange {
                cd_index,
                value,
                kernel_count,
            } => write!(
                f,
                "GEMM extension cd_choice[{cd_index}] at byte {at} = {value}, record has {kernel_count} kernel(s)"
            ),
            Self::Zero { field, .. } => {
                write!(f, "GEMM extension {field} at byte {at} is 0")
            }
            Self::ReservedNonZero { field, .. } => {
                write!(f, "GEMM extension {field} at byte {at} must be zero")
            }
        }
    }
}

impl core::error::Error for GemmExtError {}

/// A field read past the end of the buffer: the record is shorter than its layout.
impl From<OutOfBounds> for GemmExtError {
    fn from(e: OutOfBounds) -> Self {
        Self::Truncated { len: e.len }
    }
}

/// Field names of the kernel slots, so errors can name `kernels[i].<field>`.
const SLOT_FIELD_NAMES: [[&str; 6]; MAX_KERNEL_OBJECTS] = [
    [
        "kernels[0].kernel_object",
        "kernels[0].macro_tile_0",
        "kernels[0].macro_tile_1",
        "kernels[0].depth_u",
        "kernels[0].workgroup_size",
        "kernels[0].split_k",
    ],
    [
        "kernels[1].kernel_object",
        "kernels[1].macro_tile_0",
        "kernels[1].macro_tile_1",
        "kernels[1].depth_u",
        "kernels[1].workgroup_size",
        "kernels[1].split_k",
    ],
    [
        "kernels[2].kernel_object",
        "kernels[2].macro_tile_0",
        "kernels[2].macro_tile_1",
        "kernels[2].depth_u",
        "kernels[2].workgroup_size",
        "kernels[2].split_k",
    ],
];

fn slot_offset(i: usize, field: usize) -> u16 {
    (KERNELS_OFFSET + i * KERNEL_SLOT_BYTES + field) as u16
}

impl KernelMeta {
    /// The semantic checks of one kernel slot `i`.
    fn validate(&self, i: usize) -> Result<(), GemmExtError> {
        let names = SLOT_FIELD_NAMES.get(i).copied().unwrap_or([""; 6]);
        let checks = [
            (self.kernel_object == 0, offset::SLOT_KERNEL_OBJECT),
            (self.macro_tile_0 == 0, offset::SLOT_MACRO_TILE_0),
            (self.macro_tile_1 == 0, offset::SLOT_MACRO_TILE_1),
            (self.depth_u == 0, offset::SLOT_DEPTH_U),
            (self.workgroup_size == 0, offset::SLOT_WORKGROUP_SIZE),
            (self.split_k == 0, offset::SLOT_SPLIT_K),
        ];
        for ((zero, at), field) in checks.into_iter().zip(names) {
            if zero {
                return Err(GemmExtError::Zero {
                    field,
                    offset: slot_offset(i, at),
                });
            }
        }
        Ok(())
    }
}

impl GemmExt {
    /// The semantic checks the CP relies on: non-zero M, N, K and batch, 1..=3 kernels,
    /// every `cd_choice` naming a kernel the record carries, and non-zero kernel object,
    /// macro tiles, depth U, workgroup size and split-K in every kernel.
    ///
    /// # Errors
    /// [`GemmExtError::KernelCount`], [`GemmExtError::CdChoiceOutOfRange`],
    /// [`GemmExtError::Zero`].
    pub fn validate(&self) -> Result<(), GemmExtError> {
        for (v, field, at) in [
            (self.m, "m", offset::M),
            (self.n, "n", offset::N),
            (self.k, "k", offset::K),
            (self.batch, "batch", offset::BATCH),
        ] {
            if v == 0 {
                return Err(GemmExtError::Zero {
                    field,
                    offset: at as u16,
                });
            }
        }
        let count = self.kernels.len();
        if count == 0 || count > MAX_KERNEL_OBJECTS {
            return Err(GemmExtError::KernelCount { found: count as u8 });
        }
        for (cd_index, &value) in self.cd_choice.iter().enumerate() {
            if usize::from(value) >= count {
                return Err(GemmExtError::CdChoiceOutOfRange {
                    cd_index: cd_index as u8,
                    value,
                    kernel_count: count as u8,
                });
            }
        }
        for (i, k) in self.kernels.iter().enumerate() {
            k.validate(i)?;
        }
        Ok(())
    }

    /// The record's flags byte.
    pub fn flags(&self) -> GemmExtFlags {
        let mut flags = GemmExtFlags::empty();
        flags.set(GemmExtFlags::TRANS_A, self.trans_a);
        flags.set(GemmExtFlags::TRANS_B, self.trans_b);
        flags
    }

    /// Encodes the record in its fixed little-endian layout (see [`offset`]). Encoding
    /// does not validate: a test can encode a bad record on purpose.
    pub fn encode(&self) -> [u8; GEMM_EXT_BYTES] {
        let mut b = [0u8; GEMM_EXT_BYTES];
        // Every field lies inside GEMM_EXT_BYTES (a unit test checks this returns Ok), so
        // there is no error to report.
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    /// Writes every field at its offset; unused kernel slots are left as they are.
    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u32_at(offset::MAGIC, GEMM_EXT_MAGIC)?;
        w.put_u16_at(offset::VERSION, GEMM_EXT_VERSION)?;
        w.put_u8_at(offset::KERNEL_COUNT, self.kernels.len() as u8)?;
        w.put_u8_at(offset::FLAGS, self.flags().bits())?;
        w.put_u32_at(offset::M, self.m)?;
        w.put_u32_at(offset::N, self.n)?;
        w.put_u32_at(offset::K, self.k)?;
        w.put_u32_at(offset::BATCH, self.batch)?;
        w.put_u8_at(offset::DTYPE, self.dtype as u8)?;
        w.put_bytes_at(offset::CD_CHOICE, &self.cd_choice)?;
        for (i, k) in self.kernels.iter().enumerate() {
            let s = KERNELS_OFFSET + i * KERNEL_SLOT_BYTES;
            w.put_u64_at(s + offset::SLOT_KERNEL_OBJECT, k.kernel_object)?;
            w.put_u16_at(s + offset::SLOT_MACRO_TILE_0, k.macro_tile_0)?;
            w.put_u16_at(s + offset::SLOT_MACRO_TILE_1, k.macro_tile_1)?;
            w.put_u16_at(s + offset::SLOT_DEPTH_U, k.depth_u)?;
            w.put_u16_at(s + offset::SLOT_WORKGROUP_SIZE, k.workgroup_size)?;
            w.put_u32_at(s + offset::SLOT_LDS_BYTES, k.lds_bytes)?;
            w.put_u16_at(s + offset::SLOT_VGPRS, k.vgprs_per_thread)?;
            w.put_u8_at(s + offset::SLOT_SPLIT_K, k.split_k)?;
        }
        Ok(())
    }

    /// Decodes and validates a record from the first [`GEMM_EXT_BYTES`] bytes of `bytes`.
    /// Checks come in record order (magic, version, count, flags, ...), so the first
    /// problem found is the one reported.
    ///
    /// # Errors
    /// Any [`GemmExtError`].
    pub fn decode(bytes: &[u8]) -> Result<Self, GemmExtError> {
        if bytes.len() < GEMM_EXT_BYTES {
            return Err(GemmExtError::Truncated { len: bytes.len() });
        }
        let r = LeReader::new(bytes);
        let magic = r.u32_at(offset::MAGIC)?;
        if magic != GEMM_EXT_MAGIC {
            return Err(GemmExtError::BadMagic { found: magic });
        }
        let version = r.u16_at(offset::VERSION)?;
        if version != GEMM_EXT_VERSION {
            return Err(GemmExtError::UnsupportedVersion { found: version });
        }
        let count = r.u8_at(offset::KERNEL_COUNT)?;
        if count == 0 || usize::from(count) > MAX_KERNEL_OBJECTS {
            return Err(GemmExtError::KernelCount { found: count });
        }
        let flags = GemmExtFlags::from_bits(r.u8_at(offset::FLAGS)?).ok_or(
            GemmExtError::ReservedNonZero {
                field: "flags[7:2]",
                offset: offset::FLAGS as u16,
            },
        )?;
        let dt = r.u8_at(offset::DTYPE)?;
        let dtype = GemmDataType::from_u8(dt).ok_or(GemmExtError::BadDataType { found: dt })?;
        if r.u16_at(offset::RESERVED)? != 0 {
            return Err(GemmExtError::ReservedNonZero {
                field: "reserved",
                offset: offset::RESERVED as u16,
            });
        }
        let mut kernels = Vec::new();
        for i in 0..MAX_KERNEL_OBJECTS {
            let s = KERNELS_OFFSET + i * KERNEL_SLOT_BYTES;
            let slot_bytes: [u8; KERNEL_SLOT_BYTES] = r.array_at(s)?;
            if i >= usize::from(count) {
                if slot_bytes.iter().any(|&x| x != 0) {
                    return Err(GemmExtError::ReservedNonZero {
                        field: "unused kernel slot",
                        offset: s as u16,
                    });
                }
                continue;
            }
            let slot = LeReader::new(&slot_bytes);
            if slot.u8_at(offset::SLOT_RESERVED)? != 0 {
                return Err(GemmExtError::ReservedNonZero {
                    field: "kernel slot reserved byte",
                    offset: slot_offset(i, offset::SLOT_RESERVED),
                });
            }
            let meta = KernelMeta {
                kernel_object: slot.u64_at(offset::SLOT_KERNEL_OBJECT)?,
                macro_tile_0: slot.u16_at(offset::SLOT_MACRO_TILE_0)?,
                macro_tile_1: slot.u16_at(offset::SLOT_MACRO_TILE_1)?,
                depth_u: slot.u16_at(offset::SLOT_DEPTH_U)?,
                workgroup_size: slot.u16_at(offset::SLOT_WORKGROUP_SIZE)?,
                lds_bytes: slot.u32_at(offset::SLOT_LDS_BYTES)?,
                vgprs_per_thread: slot.u16_at(offset::SLOT_VGPRS)?,
                split_k: slot.u8_at(offset::SLOT_SPLIT_K)?,
            };
            // Capacity is MAX_KERNEL_OBJECTS and i < MAX_KERNEL_OBJECTS: push cannot fail.
            let _ = kernels.push(meta);
        }
        let ext = Self {
            m: r.u32_at(offset::M)?,
            n: r.u32_at(offset::N)?,
            k: r.u32_at(offset::K)?,
            batch: r.u32_at(offset::BATCH)?,
            trans_a: flags.contains(GemmExtFlags::TRANS_A),
            trans_b: flags.contains(GemmExtFlags::TRANS_B),
            dtype,
            kernels,
            cd_choice: r.array_at(offset::CD_CHOICE)?,
        };
        ext.validate()?;
        Ok(ext)
    }

    /// Index into [`CONCURRENCY_DEGREES`] of the tuned choice that serves a CD: the
    /// largest tabulated degree not above `cd` (a CD of 3 runs the CD-2 kernels).
    pub fn cd_index(cd: u8) -> usize {
        CONCURRENCY_DEGREES
            .iter()
            .rposition(|&d| d <= cd)
            .unwrap_or(0)
    }

    /// The kernel the record tuned for concurrency degree `cd` (see [`Self::cd_index`]).
    pub fn kernel_for_cd(&self, cd: u8) -> Option<&KernelMeta> {
        let idx = self.cd_choice.get(Self::cd_index(cd)).copied()?;
        self.kernels.get(usize::from(idx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_a_full_record_lies_inside_the_layout() {
        let g = sample_record(3072, 1024, 1024, 0x1000, 0x100);
        let mut b = [0u8; GEMM_EXT_BYTES];
        assert_eq!(g.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(b, g.encode());
        assert_eq!(GemmExt::decode(&b), Ok(g));
    }

    #[test]
    fn flags_byte_holds_the_transposes() {
        let mut g = sample_record(64, 64, 64, 0x1000, 0x100);
        g.trans_b = true;
        assert_eq!(g.flags(), GemmExtFlags::TRANS_B);
        assert_eq!(g.encode()[offset::FLAGS], 2);
        let mut b = g.encode();
        b[offset::FLAGS] = 4;
        assert_eq!(
            GemmExt::decode(&b),
            Err(GemmExtError::ReservedNonZero {
                field: "flags[7:2]",
                offset: offset::FLAGS as u16
            })
        );
    }

    #[test]
    fn sample_record_is_valid_and_places_kernel_objects_by_stride() {
        let g = sample_record(3072, 1024, 1024, 0x1000, 0x100);
        assert_eq!(g.validate(), Ok(()));
        let objects: [u64; 3] = core::array::from_fn(|i| g.kernels[i].kernel_object);
        assert_eq!(objects, [0x1000, 0x1100, 0x1200]);
        assert_eq!(g.kernel_for_cd(8).map(|k| k.macro_tile_1), Some(64));
    }
}
