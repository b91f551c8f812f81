//! T3 tracker entries and DMA descriptors (SPEC 6.2).
//!
//! The firmware turns a collective and a GEMM shape into these two records and programs
//! them into the tracker at the memory controller and into a DMA engine. A tracker entry
//! counts the stores/updates one wavefront's output tile receives; when the count reaches
//! its threshold it marks a DMA descriptor ready, and the DMA moves (or op-and-stores) the
//! finished tile to a peer. Both have a fixed little-endian layout so a board can place
//! them in MMIO tables and the emulator can checkpoint them.

use core::fmt;

use crate::aql::DeviceRange;
use crate::gemm_ext::GemmDataType;
use crate::le::{LeReader, LeWriter, OutOfBounds};

/// Tracker sets, indexed by the low 8 bits of the workgroup id.
pub const TRACKER_SETS: u32 = 256;
/// Wavefronts per workgroup the 3-bit WF id can name.
pub const MAX_WFS_PER_WG: u8 = 8;
/// Bytes of an encoded [`TrackerEntry`].
pub const TRACKER_ENTRY_BYTES: usize = 24;
/// Bytes of an encoded [`DmaDescriptor`].
pub const DMA_DESCRIPTOR_BYTES: usize = 32;

/// Byte offsets of [`TrackerEntry`] fields.
pub mod tracker_offset {
    /// `id` u16.
    pub const ID: usize = 0;
    /// `dma_id` u16.
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
    /// Reserved u8.
    pub const RESERVED0: usize = 5;
    /// Tracker entry id u16 (0 when `trigger` is none).
    pub const TRACKER_ENTRY: usize = 6;
    /// `src` u64.
    pub const SRC: usize = 8;
    /// `dst` u64.
    pub const DST: usize = 16;
    /// `bytes` u32.
    pub const BYTES: usize = 24;
    /// Reserved u32.
    pub const RESERVED1: usize = 28;
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
    /// DMA descriptor marked ready when the count reaches `threshold`.
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

/// One DMA transfer.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DmaDescriptor {
    /// Descriptor id, echoed in the `DmaDone` event.
    pub id: u16,
    /// Source address.
    pub src: u64,
    /// Destination address (local or a peer's aperture).
    pub dst: u64,
    /// Bytes to move.
    pub bytes: u32,
    /// Store or update.
    pub op: DmaOp,
    /// What starts it.
    pub trigger: DmaTrigger,
}

/// Why a tracker entry or DMA descriptor does not decode or validate; each variant names
/// the field and its byte offset.
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
    /// `wf_id` is not below [`MAX_WFS_PER_WG`].
    WfIdOutOfRange {
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
    /// Reserved bytes are not zero.
    ReservedNonZero {
        /// Field name.
        field: &'static str,
        /// Byte offset.
        offset: u8,
    },
    /// An update's byte count is not a multiple of its element size.
    UnalignedUpdate {
        /// Bytes.
        bytes: u32,
        /// Element bytes.
        element: u32,
    },
    /// `addr + bytes` overflows the address space.
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
            Self::WfIdOutOfRange { value } => write!(
                f,
                "wf_id at byte {} = {value}, must be below {MAX_WFS_PER_WG}",
                tracker_offset::WF_ID
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
            Self::UnalignedUpdate { bytes, element } => write!(
                f,
                "bytes at byte {} = {bytes} is not a multiple of the update element size {element}",
                dma_offset::BYTES
            ),
            Self::RangeOverflow { field, offset } => {
                write!(
                    f,
                    "{field} at byte {offset} + bytes overflows the address space"
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
            return Err(T3Error::WfIdOutOfRange { value: self.wf_id });
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
    /// Non-zero size, an update size that is a whole number of elements, ranges that do
    /// not wrap and do not overlap.
    ///
    /// # Errors
    /// [`T3Error::Zero`], [`T3Error::UnalignedUpdate`], [`T3Error::RangeOverflow`],
    /// [`T3Error::Overlap`].
    pub fn validate(&self) -> Result<(), T3Error> {
        if self.bytes == 0 {
            return Err(T3Error::Zero {
                field: "bytes",
                offset: dma_offset::BYTES as u8,
            });
        }
        if let DmaOp::Update(t) = self.op {
            if self.bytes % t.bytes() != 0 {
                return Err(T3Error::UnalignedUpdate {
                    bytes: self.bytes,
                    element: t.bytes(),
                });
            }
        }
        let len = u64::from(self.bytes);
        let src_end = self.src.checked_add(len).ok_or(T3Error::RangeOverflow {
            field: "src",
            offset: dma_offset::SRC as u8,
        })?;
        let dst_end = self.dst.checked_add(len).ok_or(T3Error::RangeOverflow {
            field: "dst",
            offset: dma_offset::DST as u8,
        })?;
        if self.src < dst_end && self.dst < src_end {
            return Err(T3Error::Overlap);
        }
        Ok(())
    }

    /// Source inside `src_map` and destination inside `dst_map` (SPEC 8: no DMA outside
    /// mapped memory).
    ///
    /// # Errors
    /// [`T3Error::OutOfRange`] naming the side.
    pub fn check_mapped(
        &self,
        src_map: &DeviceRange,
        dst_map: &DeviceRange,
    ) -> Result<(), T3Error> {
        let len = u64::from(self.bytes);
        if !src_map.contains(self.src, len) {
            return Err(T3Error::OutOfRange {
                field: "src",
                offset: dma_offset::SRC as u8,
                address: self.src,
            });
        }
        if !dst_map.contains(self.dst, len) {
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
        let (op, dtype) = match self.op {
            DmaOp::Store => (0u8, 0u8),
            DmaOp::Update(t) => (1, t as u8),
        };
        w.put_u8_at(dma_offset::OP, op)?;
        w.put_u8_at(dma_offset::DTYPE, dtype)?;
        let (trigger, entry) = match self.trigger {
            DmaTrigger::None => (0u8, 0u16),
            DmaTrigger::Tracker(e) => (1, e),
        };
        w.put_u8_at(dma_offset::TRIGGER, trigger)?;
        w.put_u16_at(dma_offset::TRACKER_ENTRY, entry)?;
        w.put_u64_at(dma_offset::SRC, self.src)?;
        w.put_u64_at(dma_offset::DST, self.dst)?;
        w.put_u32_at(dma_offset::BYTES, self.bytes)
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
        let op = r.u8_at(dma_offset::OP)?;
        let dtype = r.u8_at(dma_offset::DTYPE)?;
        let bad = |field, at: usize, value| T3Error::BadEnum {
            field,
            offset: at as u8,
            value,
        };
        let op = match op {
            0 if dtype == 0 => DmaOp::Store,
            0 => {
                return Err(T3Error::ReservedNonZero {
                    field: "dtype of a store",
                    offset: dma_offset::DTYPE as u8,
                })
            }
            1 => DmaOp::Update(GemmDataType::from_u8(dtype).ok_or(bad(
                "dtype",
                dma_offset::DTYPE,
                dtype,
            ))?),
            v => return Err(bad("op", dma_offset::OP, v)),
        };
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
            v => return Err(bad("trigger", dma_offset::TRIGGER, v)),
        };
        if r.array_at::<1>(dma_offset::RESERVED0)? != [0] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved0",
                offset: dma_offset::RESERVED0 as u8,
            });
        }
        if r.array_at::<4>(dma_offset::RESERVED1)? != [0; 4] {
            return Err(T3Error::ReservedNonZero {
                field: "reserved1",
                offset: dma_offset::RESERVED1 as u8,
            });
        }
        let d = Self {
            id: r.u16_at(dma_offset::ID)?,
            src: r.u64_at(dma_offset::SRC)?,
            dst: r.u64_at(dma_offset::DST)?,
            bytes: r.u32_at(dma_offset::BYTES)?,
            op,
            trigger,
        };
        d.validate()?;
        Ok(d)
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
            src: 0x1000,
            dst: 0x8000,
            bytes: 64,
            op: DmaOp::Update(GemmDataType::F32),
            trigger: DmaTrigger::Tracker(1),
        };
        let mut b = [0u8; DMA_DESCRIPTOR_BYTES];
        assert_eq!(d.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(DmaDescriptor::decode(&b), Ok(d));
    }
}
