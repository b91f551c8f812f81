//! T3 tracker entries and DMA descriptors (SPEC 6.2).
//!
//! The firmware turns a collective and a GEMM shape into these two records and programs
//! them into the tracker at the memory controller and into a DMA engine. A tracker entry
//! counts the stores/updates one wavefront's output tile receives; when the count reaches
//! its threshold it marks a DMA descriptor ready, and the DMA moves (or op-and-stores) the
//! finished tile to a peer. Both have a fixed little-endian layout so a board can place
//! them in MMIO tables and the emulator can checkpoint them. [`region`] holds the
//! per-stage record from which the hardware derives both per WF tile.

use core::fmt;

use crate::aql::DeviceRange;
use crate::gemm_ext::GemmDataType;
use crate::le::{LeReader, LeWriter, OutOfBounds};

pub mod region;

pub use region::{RegionAction, RegionDma, TrackRegion, REGION_SLOTS, TRACK_REGION_BYTES};

/// Tracker sets, indexed by the low 8 bits of the workgroup id.
pub const TRACKER_SETS: u32 = 256;
/// Wavefronts per workgroup the 3-bit WF id can name.
pub const MAX_WFS_PER_WG: u8 = 8;
/// Bytes of an encoded [`TrackerEntry`].
pub const TRACKER_ENTRY_BYTES: usize = 24;
/// Bytes of an encoded [`DmaDescriptor`].
pub const DMA_DESCRIPTOR_BYTES: usize = 48;
/// Bytes of an encoded [`OutputMap`].
pub const OUTPUT_MAP_BYTES: usize = 16;
/// Ways per tracker set.
pub const TRACKER_WAYS: u32 = 8;
/// A tracker entry's `dma_id` that starts no DMA: a notify-only entry (its firing only
/// tells the firmware). No DMA descriptor may use this id.
pub const TRACKER_NO_DMA: u16 = 0xFFFF;
/// Bit position of the peer aperture in a device address: bits 63..56 hold `peer + 1`
/// (0 = local memory).
pub const PEER_SHIFT: u32 = 56;
/// Mask of the local offset below the peer aperture.
pub const LOCAL_MASK: u64 = (1 << PEER_SHIFT) - 1;

/// The address `local` in the memory of GPU `peer`, through the peer aperture (bits
/// 63..56 = `peer + 1`; bits of `local` at and above [`PEER_SHIFT`] are dropped).
/// `peer` must be below 255 (255 would wrap to the local aperture).
pub const fn peer_address(peer: u8, local: u64) -> u64 {
    (((peer as u64) + 1) << PEER_SHIFT) | (local & LOCAL_MASK)
}

/// Splits a device address into its peer (`None` = local memory) and its local offset.
pub const fn split_peer(addr: u64) -> (Option<u8>, u64) {
    let tag = (addr >> PEER_SHIFT) as u8;
    if tag == 0 {
        (None, addr)
    } else {
        (Some(tag - 1), addr & LOCAL_MASK)
    }
}

/// Byte offsets of [`TrackerEntry`] fields.
pub mod tracker_offset {
    /// `id` u16.
    pub const ID: usize = 0;
    /// `dma_id` u16 ([`super::TRACKER_NO_DMA`] = notify only).
    pub const DMA_ID: usize = 2;
    /// `wg_id` u32.
    pub const WG_ID: usize = 4;
    /// `wf_id` u8 (bits 2:0; 7:3 reserved).
    pub const WF_ID: usize = 8;
    /// Reserved, 3 bytes.
    pub const RESERVED0: usize = 9;
    /// `threshold` u32.
    pub const THRESHOLD: usize = 12;
    /// `start_address` u64.
    pub const START_ADDRESS: usize = 16;
}

/// Byte offsets of [`DmaDescriptor`] fields.
pub mod dma_offset {
    /// `id` u16.
    pub const ID: usize = 0;
    /// `op` u8: 0 store, 1 update.
    pub const OP: usize = 2;
    /// `dtype` u8 of an update (0 for a store).
    pub const DTYPE: usize = 3;
    /// `trigger` u8: 0 none, 1 tracker.
    pub const TRIGGER: usize = 4;
    /// `fires` u8: tracker firings that make it ready (0 when `trigger` is none).
    pub const FIRES: usize = 5;
    /// Tracker entry id u16 (0 when `trigger` is none).
    pub const TRACKER_ENTRY: usize = 6;
    /// `src` u64.
    pub const SRC: usize = 8;
    /// `dst` u64.
    pub const DST: usize = 16;
    /// `rows` u16.
    pub const ROWS: usize = 24;
    /// `cols` u16.
    pub const COLS: usize = 26;
    /// `ld_bytes` u32.
    pub const LD_BYTES: usize = 28;
    /// `elem_bytes` u8.
    pub const ELEM_BYTES: usize = 32;
    /// `dst_wf_id` u8 (bits 2:0).
    pub const DST_WF_ID: usize = 33;
    /// Reserved, 2 bytes.
    pub const RESERVED0: usize = 34;
    /// `dst_wg_id` u32.
    pub const DST_WG_ID: usize = 36;
    /// Reserved, 8 bytes.
    pub const RESERVED1: usize = 40;
}

/// Byte offsets of [`OutputMap`] fields.
pub mod output_map_offset {
    /// `wg_first` u32.
    pub const WG_FIRST: usize = 0;
    /// `wg_count` u32.
    pub const WG_COUNT: usize = 4;
    /// Local op u8: 0 none, 1 store, 2 update.
    pub const LOCAL_OP: usize = 8;
    /// Local update dtype u8 (0 unless the local op is an update).
    pub const LOCAL_DTYPE: usize = 9;
    /// Remote op u8: 0 none, 1 store, 2 update.
    pub const REMOTE_OP: usize = 10;
    /// Remote update dtype u8 (0 unless the remote op is an update).
    pub const REMOTE_DTYPE: usize = 11;
    /// Remote peer GPU u8 (0 when there is no remote op).
    pub const REMOTE_PEER: usize = 12;
    /// Reserved, 3 bytes.
    pub const RESERVED0: usize = 13;
}

/// One tracker entry: counts the updates to one wavefront's output tile.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TrackerEntry {
    /// Entry id, echoed in the `TrackerFired` event.
    pub id: u16,
    /// Workgroup id: low 8 bits pick the set, the rest is the tag.
    pub wg_id: u32,
    /// Wavefront within the workgroup (< [`MAX_WFS_PER_WG`]), part of the tag.
    pub wf_id: u8,
    /// First address of the wavefront's output tile.
    pub start_address: u64,
    /// Updates that complete the tile: WF tile elements x updates per element.
    pub threshold: u32,
    /// DMA descriptor marked ready when the count reaches `threshold`, or
    /// [`TRACKER_NO_DMA`] for a notify-only entry.
    pub dma_id: u16,
}

/// What a DMA does at the destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DmaOp {
    /// Plain store.
    #[default]
    Store,
    /// Near-memory op-and-store: add to the destination in this element type.
    Update(GemmDataType),
}

/// What starts a DMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DmaTrigger {
    /// Starts as soon as it is programmed.
    #[default]
    None,
    /// Starts when the tracker entry with this id fires.
    Tracker(u16),
}

/// One DMA transfer: a `rows x cols` block of a row-major array (one or more whole WF
/// tiles), moved or op-and-stored to the same block at the destination.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DmaDescriptor {
    /// Descriptor id, echoed in the `DmaDone` event. Never [`TRACKER_NO_DMA`].
    pub id: u16,
    /// Store or update.
    pub op: DmaOp,
    /// What starts it.
    pub trigger: DmaTrigger,
    /// Tracker firings (entries whose `dma_id` is this descriptor) that make it ready:
    /// at least 1 when `trigger` is [`DmaTrigger::Tracker`], 0 when it is
    /// [`DmaTrigger::None`].
    pub fires: u8,
    /// Address of the block's first element.
    pub src: u64,
    /// The same at the destination; may carry a peer aperture ([`peer_address`]).
    pub dst: u64,
    /// Rows of the block.
    pub rows: u16,
    /// Columns (elements per row) of the block.
    pub cols: u16,
    /// Row pitch of the array in bytes (the same at source and destination).
    pub ld_bytes: u32,
    /// Bytes per element: 2 or 4.
    pub elem_bytes: u8,
    /// Workgroup id the receiver's tracker counts this transfer under.
    pub dst_wg_id: u32,
    /// The receiver tracker's WF id of the block's first WF tile (< 8); a block of `F` WF
    /// tiles is `F` consecutive WF ids stacked by rows.
    pub dst_wf_id: u8,
}

/// Where the producer kernel's stores to a range of workgroup ids go (SPEC 6.2's
/// `remote_map` and `dma_map`): locally, to one peer, or both, each with its own op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct OutputMap {
    /// First workgroup id of the range.
    pub wg_first: u32,
    /// Workgroups in the range (> 0).
    pub wg_count: u32,
    /// The op of the local write; `None` = not written locally.
    pub local: Option<DmaOp>,
    /// The peer GPU the tiles are also (or only) written to, with its op.
    pub remote: Option<(u8, DmaOp)>,
}

/// Why a tracker entry, DMA descriptor or output map does not decode or validate; each
/// variant names the field and its byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum T3Error {
    /// Fewer bytes than the record needs.
    Truncated {
        /// Bytes given.
        len: usize,
        /// Bytes needed.
        need: usize,
    },
    /// A WF id is not below [`MAX_WFS_PER_WG`].
    WfIdOutOfRange {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
        /// The value.
        value: u8,
    },
    /// A field that must be non-zero is zero.
    Zero {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
    },
    /// An enumerated field holds an unknown value.
    BadEnum {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
        /// The value.
        value: u8,
    },
    /// Reserved bytes (or a field that must be zero in this configuration) are not zero.
    ReservedNonZero {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
    },
    /// An update's element type does not have `elem_bytes` bytes.
    ElementMismatch {
        /// `elem_bytes`.
        elem_bytes: u8,
        /// Bytes of the update's element type.
        dtype_bytes: u8,
    },
    /// `cols * elem_bytes` exceeds the row pitch `ld_bytes`.
    PitchTooSmall {
        /// `ld_bytes`.
        ld_bytes: u32,
        /// `cols * elem_bytes`.
        row_bytes: u32,
    },
    /// A range wraps the (local, below the peer aperture) address space, or a WG-id range
    /// wraps `u32`.
    RangeOverflow {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
    },
    /// Source and destination ranges overlap.
    Overlap,
    /// A range lies outside the memory the caller maps.
    OutOfRange {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
        /// The address.
        address: u64,
    },
}

impl fmt::Display for T3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { len, need } => {
                write!(f, "T3 record truncated: {len} bytes, need {need}")
            }
            Self::WfIdOutOfRange {
                field,
                offset,
                value,
            } => write!(
                f,
                "{field} at byte {offset} = {value}, must be below {MAX_WFS_PER_WG}"
            ),
            Self::Zero { field, offset } => write!(f, "{field} at byte {offset} is 0"),
            Self::BadEnum {
                field,
                offset,
                value,
            } => write!(f, "{field} at byte {offset} = {value} is not a known value"),
            Self::ReservedNonZero { field, offset } => {
                write!(f, "{field} at byte {offset} must be zero")
            }
            Self::ElementMismatch {
                elem_bytes,
                dtype_bytes,
            } => write!(
                f,
                "elem_bytes at byte {} = {elem_bytes}, but the update dtype at byte {} has \
                 {dtype_bytes}-byte elements",
                dma_offset::ELEM_BYTES,
                dma_offset::DTYPE
            ),
            Self::PitchTooSmall {
                ld_bytes,
                row_bytes,
            } => write!(
                f,
                "ld_bytes at byte {} = {ld_bytes} is below the block's row of {row_bytes} bytes",
                dma_offset::LD_BYTES
            ),
            Self::RangeOverflow { field, offset } => {
                write!(
                    f,
                    "the range of {field} at byte {offset} wraps its address space"
                )
            }
            Self::Overlap => f.write_str("DMA source and destination ranges overlap"),
            Self::OutOfRange {
                field,
                offset,
                address,
            } => write!(
                f,
                "{field} at byte {offset} = {address:#x}: range outside mapped memory"
            ),
        }
    }
}

impl core::error::Error for T3Error {}

/// A field read past the end of the buffer: the record is shorter than its layout.
impl From<OutOfBounds> for T3Error {
    fn from(e: OutOfBounds) -> Self {
        Self::Truncated {
            len: e.len,
            need: e.at.saturating_add(e.width),
        }
    }
}

/// `(kind, dtype)` of an op: kind `base` = store, `base + 1` = update.
const fn op_bytes(op: DmaOp, base: u8) -> (u8, u8) {
    match op {
        DmaOp::Store => (base, 0),
        DmaOp::Update(t) => (base + 1, t as u8),
    }
}

/// Decodes an op whose kind byte is `kind - base` (0 store, 1 update).
fn op_from(
    kind: u8,
    dtype: u8,
    base: u8,
    fields: (&'static str, usize, &'static str, usize),
) -> Result<DmaOp, T3Error> {
    let (kind_field, kind_at, dtype_field, dtype_at) = fields;
    match kind.checked_sub(base) {
        Some(0) if dtype == 0 => Ok(DmaOp::Store),
        Some(0) => Err(T3Error::ReservedNonZero {
            field: dtype_field,
            offset: dtype_at as u8,
        }),
        Some(1) => GemmDataType::from_u8(dtype)
            .map(DmaOp::Update)
            .ok_or(T3Error::BadEnum {
                field: dtype_field,
                offset: dtype_at as u8,
                value: dtype,
            }),
        _ => Err(T3Error::BadEnum {
            field: kind_field,
            offset: kind_at as u8,
            value: kind,
        }),
    }
}

impl TrackerEntry {
    /// Tracker set this entry lives in.
    pub const fn set_index(&self) -> u32 {
        self.wg_id % TRACKER_SETS
    }

    /// Tag within the set: the high WG-id bits and the WF id.
    pub const fn tag(&self) -> (u32, u8) {
        (self.wg_id / TRACKER_SETS, self.wf_id)
    }

    /// `wf_id` < 8 and a non-zero threshold.
    ///
    /// # Errors
    /// [`T3Error::WfIdOutOfRange`], [`T3Error::Zero`].
    pub fn validate(&self) -> Result<(), T3Error> {
        if self.wf_id >= MAX_WFS_PER_WG {
            return Err(T3Error::WfIdOutOfRange {
                field: "wf_id",
                offset: tracker_offset::WF_ID as u8,
                value: self.wf_id,
            });
        }
        if self.threshold == 0 {
            return Err(T3Error::Zero {
                field: "threshold",
                offset: tracker_offset::THRESHOLD as u8,
            });
        }
        Ok(())
    }

    /// Encodes the entry (without validating it).
    pub fn encode(&self) -> [u8; TRACKER_ENTRY_BYTES] {
        let mut b = [0u8; TRACKER_ENTRY_BYTES];
        // Every field lies inside the layout (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u16_at(tracker_offset::ID, self.id)?;
        w.put_u16_at(tracker_offset::DMA_ID, self.dma_id)?;
        w.put_u32_at(tracker_offset::WG_ID, self.wg_id)?;
        w.put_u8_at(tracker_offset::WF_ID, self.wf_id)?;
        w.put_u32_at(tracker_offset::THRESHOLD, self.threshold)?;
        w.put_u64_at(tracker_offset::START_ADDRESS, self.start_address)
    }

    /// Decodes and validates an entry from the first [`TRACKER_ENTRY_BYTES`] bytes.
    ///
    /// # Errors
    /// [`T3Error::Truncated`], [`T3Error::ReservedNonZero`], or a validation error.
    pub fn decode(bytes: &[u8]) -> Result<Self, T3Error> {
        let r = bytes
            .get(..TRACKER_ENTRY_BYTES)
            .map(LeReader::new)
            .ok_or(T3Error::Truncated {
                len: bytes.len(),
                need: TRACKER_ENTRY_BYTES,
            })?;
        if r.array_at::<3>(tracker_offset::RESERVED0)? != [0; 3] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved0",
                offset: tracker_offset::RESERVED0 as u8,
            });
        }
        let e = Self {
            id: r.u16_at(tracker_offset::ID)?,
            dma_id: r.u16_at(tracker_offset::DMA_ID)?,
            wg_id: r.u32_at(tracker_offset::WG_ID)?,
            wf_id: r.u8_at(tracker_offset::WF_ID)?,
            threshold: r.u32_at(tracker_offset::THRESHOLD)?,
            start_address: r.u64_at(tracker_offset::START_ADDRESS)?,
        };
        e.validate()?;
        Ok(e)
    }
}

impl DmaDescriptor {
    /// Bytes the block holds: `rows * cols * elem_bytes`.
    pub const fn bytes(&self) -> u64 {
        self.rows as u64 * self.cols as u64 * self.elem_bytes as u64
    }

    /// Bytes from the first element to one past the last:
    /// `(rows - 1) * ld_bytes + cols * elem_bytes` (0 for an empty block).
    pub const fn span(&self) -> u64 {
        if self.rows == 0 {
            return 0;
        }
        (self.rows as u64 - 1) * self.ld_bytes as u64 + self.cols as u64 * self.elem_bytes as u64
    }

    /// Non-zero rows and columns, 2- or 4-byte elements that match an update's type, a
    /// pitch that holds a row, `fires >= 1` exactly when tracker-triggered, an id other
    /// than [`TRACKER_NO_DMA`], `dst_wf_id < 8`, ranges that do not wrap their (local)
    /// address space, and, when source and destination are in the same memory, bounding
    /// ranges that do not overlap.
    ///
    /// # Errors
    /// [`T3Error::Zero`], [`T3Error::BadEnum`], [`T3Error::ElementMismatch`],
    /// [`T3Error::PitchTooSmall`], [`T3Error::ReservedNonZero`],
    /// [`T3Error::WfIdOutOfRange`], [`T3Error::RangeOverflow`], [`T3Error::Overlap`].
    pub fn validate(&self) -> Result<(), T3Error> {
        if self.id == TRACKER_NO_DMA {
            return Err(T3Error::BadEnum {
                field: "id (0xFFFF is TRACKER_NO_DMA)",
                offset: dma_offset::ID as u8,
                value: 0xFF,
            });
        }
        if self.rows == 0 {
            return Err(T3Error::Zero {
                field: "rows",
                offset: dma_offset::ROWS as u8,
            });
        }
        if self.cols == 0 {
            return Err(T3Error::Zero {
                field: "cols",
                offset: dma_offset::COLS as u8,
            });
        }
        if self.elem_bytes != 2 && self.elem_bytes != 4 {
            return Err(T3Error::BadEnum {
                field: "elem_bytes",
                offset: dma_offset::ELEM_BYTES as u8,
                value: self.elem_bytes,
            });
        }
        if let DmaOp::Update(t) = self.op {
            if t.bytes() != u32::from(self.elem_bytes) {
                return Err(T3Error::ElementMismatch {
                    elem_bytes: self.elem_bytes,
                    dtype_bytes: t.bytes() as u8,
                });
            }
        }
        let row_bytes = u32::from(self.cols) * u32::from(self.elem_bytes);
        if row_bytes > self.ld_bytes {
            return Err(T3Error::PitchTooSmall {
                ld_bytes: self.ld_bytes,
                row_bytes,
            });
        }
        match (self.trigger, self.fires) {
            (DmaTrigger::Tracker(_), 0) => {
                return Err(T3Error::Zero {
                    field: "fires",
                    offset: dma_offset::FIRES as u8,
                })
            }
            (DmaTrigger::None, f) if f != 0 => {
                return Err(T3Error::ReservedNonZero {
                    field: "fires of an untriggered DMA",
                    offset: dma_offset::FIRES as u8,
                })
            }
            _ => {}
        }
        if self.dst_wf_id >= MAX_WFS_PER_WG {
            return Err(T3Error::WfIdOutOfRange {
                field: "dst_wf_id",
                offset: dma_offset::DST_WF_ID as u8,
                value: self.dst_wf_id,
            });
        }
        let span = self.span();
        let (src_peer, src) = split_peer(self.src);
        let (dst_peer, dst) = split_peer(self.dst);
        let end = |local: u64, peer: Option<u8>, field, at: usize| {
            let limit = if peer.is_some() {
                LOCAL_MASK + 1
            } else {
                u64::MAX
            };
            match local.checked_add(span) {
                Some(e) if e <= limit => Ok(e),
                _ => Err(T3Error::RangeOverflow {
                    field,
                    offset: at as u8,
                }),
            }
        };
        let src_end = end(src, src_peer, "src", dma_offset::SRC)?;
        let dst_end = end(dst, dst_peer, "dst", dma_offset::DST)?;
        if src_peer == dst_peer && src < dst_end && dst < src_end {
            return Err(T3Error::Overlap);
        }
        Ok(())
    }

    /// Source inside `src_map` and destination inside `dst_map` (SPEC 8: no DMA outside
    /// mapped memory), each checked on its local offset (the peer aperture stripped;
    /// `dst_map` is the peer's memory when `dst` carries one).
    ///
    /// # Errors
    /// [`T3Error::OutOfRange`] naming the side.
    pub fn check_mapped(
        &self,
        src_map: &DeviceRange,
        dst_map: &DeviceRange,
    ) -> Result<(), T3Error> {
        let span = self.span();
        let (_, src) = split_peer(self.src);
        let (_, dst) = split_peer(self.dst);
        if !src_map.contains(src, span) {
            return Err(T3Error::OutOfRange {
                field: "src",
                offset: dma_offset::SRC as u8,
                address: self.src,
            });
        }
        if !dst_map.contains(dst, span) {
            return Err(T3Error::OutOfRange {
                field: "dst",
                offset: dma_offset::DST as u8,
                address: self.dst,
            });
        }
        Ok(())
    }

    /// Encodes the descriptor (without validating it).
    pub fn encode(&self) -> [u8; DMA_DESCRIPTOR_BYTES] {
        let mut b = [0u8; DMA_DESCRIPTOR_BYTES];
        // Every field lies inside the layout (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u16_at(dma_offset::ID, self.id)?;
        let (op, dtype) = op_bytes(self.op, 0);
        w.put_u8_at(dma_offset::OP, op)?;
        w.put_u8_at(dma_offset::DTYPE, dtype)?;
        let (trigger, entry) = match self.trigger {
            DmaTrigger::None => (0u8, 0u16),
            DmaTrigger::Tracker(e) => (1, e),
        };
        w.put_u8_at(dma_offset::TRIGGER, trigger)?;
        w.put_u8_at(dma_offset::FIRES, self.fires)?;
        w.put_u16_at(dma_offset::TRACKER_ENTRY, entry)?;
        w.put_u64_at(dma_offset::SRC, self.src)?;
        w.put_u64_at(dma_offset::DST, self.dst)?;
        w.put_u16_at(dma_offset::ROWS, self.rows)?;
        w.put_u16_at(dma_offset::COLS, self.cols)?;
        w.put_u32_at(dma_offset::LD_BYTES, self.ld_bytes)?;
        w.put_u8_at(dma_offset::ELEM_BYTES, self.elem_bytes)?;
        w.put_u8_at(dma_offset::DST_WF_ID, self.dst_wf_id)?;
        w.put_u32_at(dma_offset::DST_WG_ID, self.dst_wg_id)
    }

    /// Decodes and validates a descriptor from the first [`DMA_DESCRIPTOR_BYTES`] bytes.
    ///
    /// # Errors
    /// [`T3Error::Truncated`], [`T3Error::BadEnum`], [`T3Error::ReservedNonZero`], or a
    /// validation error.
    pub fn decode(bytes: &[u8]) -> Result<Self, T3Error> {
        let r = bytes
            .get(..DMA_DESCRIPTOR_BYTES)
            .map(LeReader::new)
            .ok_or(T3Error::Truncated {
                len: bytes.len(),
                need: DMA_DESCRIPTOR_BYTES,
            })?;
        let op = op_from(
            r.u8_at(dma_offset::OP)?,
            r.u8_at(dma_offset::DTYPE)?,
            0,
            ("op", dma_offset::OP, "dtype", dma_offset::DTYPE),
        )?;
        let trigger = r.u8_at(dma_offset::TRIGGER)?;
        let entry = r.u16_at(dma_offset::TRACKER_ENTRY)?;
        let trigger = match trigger {
            0 if entry == 0 => DmaTrigger::None,
            0 => {
                return Err(T3Error::ReservedNonZero {
                    field: "tracker entry of an untriggered DMA",
                    offset: dma_offset::TRACKER_ENTRY as u8,
                })
            }
            1 => DmaTrigger::Tracker(entry),
            v => {
                return Err(T3Error::BadEnum {
                    field: "trigger",
                    offset: dma_offset::TRIGGER as u8,
                    value: v,
                })
            }
        };
        if r.array_at::<2>(dma_offset::RESERVED0)? != [0; 2] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved0",
                offset: dma_offset::RESERVED0 as u8,
            });
        }
        if r.array_at::<8>(dma_offset::RESERVED1)? != [0; 8] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved1",
                offset: dma_offset::RESERVED1 as u8,
            });
        }
        let d = Self {
            id: r.u16_at(dma_offset::ID)?,
            op,
            trigger,
            fires: r.u8_at(dma_offset::FIRES)?,
            src: r.u64_at(dma_offset::SRC)?,
            dst: r.u64_at(dma_offset::DST)?,
            rows: r.u16_at(dma_offset::ROWS)?,
            cols: r.u16_at(dma_offset::COLS)?,
            ld_bytes: r.u32_at(dma_offset::LD_BYTES)?,
            elem_bytes: r.u8_at(dma_offset::ELEM_BYTES)?,
            dst_wg_id: r.u32_at(dma_offset::DST_WG_ID)?,
            dst_wf_id: r.u8_at(dma_offset::DST_WF_ID)?,
        };
        d.validate()?;
        Ok(d)
    }
}

impl OutputMap {
    /// One past the last workgroup id of the range (saturating).
    pub const fn wg_end(&self) -> u32 {
        self.wg_first.saturating_add(self.wg_count)
    }

    /// Whether `wg` lies in the range.
    pub const fn contains(&self, wg: u32) -> bool {
        wg >= self.wg_first && wg - self.wg_first < self.wg_count
    }

    /// A non-empty WG-id range that does not wrap `u32`, written somewhere, to a peer
    /// other than 255.
    ///
    /// # Errors
    /// [`T3Error::Zero`], [`T3Error::RangeOverflow`], [`T3Error::BadEnum`].
    pub fn validate(&self) -> Result<(), T3Error> {
        if self.wg_count == 0 {
            return Err(T3Error::Zero {
                field: "wg_count",
                offset: output_map_offset::WG_COUNT as u8,
            });
        }
        if self.wg_first.checked_add(self.wg_count).is_none() {
            return Err(T3Error::RangeOverflow {
                field: "wg_count",
                offset: output_map_offset::WG_COUNT as u8,
            });
        }
        if self.local.is_none() && self.remote.is_none() {
            return Err(T3Error::Zero {
                field: "local_op and remote_op",
                offset: output_map_offset::LOCAL_OP as u8,
            });
        }
        if let Some((peer @ u8::MAX, _)) = self.remote {
            return Err(T3Error::BadEnum {
                field: "remote_peer",
                offset: output_map_offset::REMOTE_PEER as u8,
                value: peer,
            });
        }
        Ok(())
    }

    /// Encodes the map (without validating it).
    pub fn encode(&self) -> [u8; OUTPUT_MAP_BYTES] {
        let mut b = [0u8; OUTPUT_MAP_BYTES];
        // Every field lies inside the layout (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u32_at(output_map_offset::WG_FIRST, self.wg_first)?;
        w.put_u32_at(output_map_offset::WG_COUNT, self.wg_count)?;
        let (op, dtype) = self.local.map_or((0, 0), |op| op_bytes(op, 1));
        w.put_u8_at(output_map_offset::LOCAL_OP, op)?;
        w.put_u8_at(output_map_offset::LOCAL_DTYPE, dtype)?;
        let (peer, (op, dtype)) = self
            .remote
            .map_or((0, (0, 0)), |(peer, op)| (peer, op_bytes(op, 1)));
        w.put_u8_at(output_map_offset::REMOTE_OP, op)?;
        w.put_u8_at(output_map_offset::REMOTE_DTYPE, dtype)?;
        w.put_u8_at(output_map_offset::REMOTE_PEER, peer)
    }

    /// Decodes and validates a map from the first [`OUTPUT_MAP_BYTES`] bytes.
    ///
    /// # Errors
    /// [`T3Error::Truncated`], [`T3Error::BadEnum`], [`T3Error::ReservedNonZero`], or a
    /// validation error.
    pub fn decode(bytes: &[u8]) -> Result<Self, T3Error> {
        use output_map_offset as o;
        let r = bytes
            .get(..OUTPUT_MAP_BYTES)
            .map(LeReader::new)
            .ok_or(T3Error::Truncated {
                len: bytes.len(),
                need: OUTPUT_MAP_BYTES,
            })?;
        let local = match (r.u8_at(o::LOCAL_OP)?, r.u8_at(o::LOCAL_DTYPE)?) {
            (0, 0) => None,
            (0, _) => {
                return Err(T3Error::ReservedNonZero {
                    field: "local_dtype of an unwritten output",
                    offset: o::LOCAL_DTYPE as u8,
                })
            }
            (op, dtype) => Some(op_from(
                op,
                dtype,
                1,
                ("local_op", o::LOCAL_OP, "local_dtype", o::LOCAL_DTYPE),
            )?),
        };
        let peer = r.u8_at(o::REMOTE_PEER)?;
        let remote = match (r.u8_at(o::REMOTE_OP)?, r.u8_at(o::REMOTE_DTYPE)?) {
            (0, 0) if peer == 0 => None,
            (0, 0) => {
                return Err(T3Error::ReservedNonZero {
                    field: "remote_peer of an output not written remotely",
                    offset: o::REMOTE_PEER as u8,
                })
            }
            (0, _) => {
                return Err(T3Error::ReservedNonZero {
                    field: "remote_dtype of an output not written remotely",
                    offset: o::REMOTE_DTYPE as u8,
                })
            }
            (op, dtype) => Some((
                peer,
                op_from(
                    op,
                    dtype,
                    1,
                    ("remote_op", o::REMOTE_OP, "remote_dtype", o::REMOTE_DTYPE),
                )?,
            )),
        };
        if r.array_at::<3>(o::RESERVED0)? != [0; 3] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved0",
                offset: o::RESERVED0 as u8,
            });
        }
        let m = Self {
            wg_first: r.u32_at(o::WG_FIRST)?,
            wg_count: r.u32_at(o::WG_COUNT)?,
            local,
            remote,
        };
        m.validate()?;
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_lies_inside_the_layout() {
        let e = TrackerEntry {
            id: 1,
            dma_id: 2,
            wg_id: 0x1234_5678,
            wf_id: 7,
            threshold: 9,
            start_address: u64::MAX,
        };
        let mut b = [0u8; TRACKER_ENTRY_BYTES];
        assert_eq!(e.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(TrackerEntry::decode(&b), Ok(e));
        let d = DmaDescriptor {
            id: 3,
            op: DmaOp::Update(GemmDataType::F32),
            trigger: DmaTrigger::Tracker(1),
            fires: 2,
            src: 0x1000,
            dst: peer_address(3, 0x1000),
            rows: 32,
            cols: 128,
            ld_bytes: 4096,
            elem_bytes: 4,
            dst_wg_id: 0x1234_5678,
            dst_wf_id: 7,
        };
        let mut b = [0u8; DMA_DESCRIPTOR_BYTES];
        assert_eq!(d.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(DmaDescriptor::decode(&b), Ok(d));
        let m = OutputMap {
            wg_first: 1,
            wg_count: u32::MAX - 1,
            local: Some(DmaOp::Update(GemmDataType::Bf16)),
            remote: Some((254, DmaOp::Store)),
        };
        let mut b = [0u8; OUTPUT_MAP_BYTES];
        assert_eq!(m.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(OutputMap::decode(&b), Ok(m));
    }

    #[test]
    fn peer_aperture() {
        assert_eq!(split_peer(0x1234), (None, 0x1234));
        assert_eq!(peer_address(0, 0x1234), 0x0100_0000_0000_1234);
        assert_eq!(split_peer(peer_address(63, 0x1234)), (Some(63), 0x1234));
        assert_eq!(
            split_peer(peer_address(254, LOCAL_MASK)),
            (Some(254), LOCAL_MASK)
        );
    }
}
