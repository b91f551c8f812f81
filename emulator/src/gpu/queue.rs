//! User-mode AQL queues in device memory: the ring layout, the producer protocol and
//! completion signals. Rings, index words and signals live in the node's one
//! [`DeviceMemory`]. The dump file format is [`super::dump`]; canned packets and dumps are
//! [`super::fixture`] (re-exported here under the paths callers have long used).

use std::fmt;

use nmcp_isa::aql::QueueConfig;

pub use crate::memory::DeviceMemory;
use nmcp_firmware::platform::MemoryError;
use nmcp_isa::aql::{PacketType, AQL_PACKET_BYTES};

/// Why a producer could not enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// The ring holds `size` unconsumed packets.
    Full {
        /// Ring size in packets.
        size: u32,
    },
    /// The queue's memory is not mapped.
    Memory(MemoryError),
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { size } => write!(f, "queue full ({size} packets)"),
            Self::Memory(e) => write!(f, "queue memory: {e}"),
        }
    }
}

impl std::error::Error for QueueError {}

impl From<MemoryError> for QueueError {
    fn from(e: MemoryError) -> Self {
        Self::Memory(e)
    }
}

/// The header word that marks a ring slot as free / not yet published.
pub const INVALID_HEADER: u16 = PacketType::Invalid as u16;

/// Lays out `count` queues of `size_packets` each in `[base, base + system_area_bytes)`:
/// per queue a ring followed by a 64-byte block holding the read index (+0), write index
/// (+8) and doorbell (+16), and initialises every slot to INVALID.
///
/// # Errors
/// [`MemoryError::OutOfRange`] if the area does not fit.
pub fn layout_queues(
    mem: &mut DeviceMemory,
    base: u64,
    count: usize,
    size_packets: u32,
) -> Result<Vec<QueueConfig>, MemoryError> {
    let ring_bytes = u64::from(size_packets) * AQL_PACKET_BYTES as u64;
    let stride = ring_bytes + AQL_PACKET_BYTES as u64;
    let mut out = Vec::with_capacity(count);
    for q in 0..count as u64 {
        let ring_base = base + q * stride;
        let ctl = ring_base + ring_bytes;
        let qc = QueueConfig {
            ring_base,
            size_packets,
            read_index_addr: ctl,
            write_index_addr: ctl + 8,
            doorbell_addr: ctl + 16,
        };
        for slot in 0..u64::from(size_packets) {
            mem.write(qc.packet_addr(slot), &INVALID_HEADER.to_le_bytes())?;
        }
        mem.write_u64(qc.read_index_addr, 0)?;
        mem.write_u64(qc.write_index_addr, 0)?;
        mem.write_u64(qc.doorbell_addr, 0)?;
        out.push(qc);
    }
    Ok(out)
}

/// Bytes [`layout_queues`] needs.
pub fn queue_area_bytes(count: usize, size_packets: u32) -> u64 {
    count as u64 * (u64::from(size_packets) + 1) * AQL_PACKET_BYTES as u64
}

/// The producer protocol of SPEC 5.1: reserve a slot by bumping the write index, write
/// the packet body, then publish by writing the header last. Returns the dispatch id.
/// The caller rings the doorbell.
///
/// # Errors
/// [`QueueError::Full`], [`QueueError::Memory`].
pub fn enqueue(
    mem: &mut DeviceMemory,
    q: &QueueConfig,
    packet: &[u8; AQL_PACKET_BYTES],
) -> Result<u64, QueueError> {
    let write = mem.read_u64(q.write_index_addr)?;
    let read = mem.read_u64(q.read_index_addr)?;
    if write.wrapping_sub(read) >= u64::from(q.size_packets) {
        return Err(QueueError::Full {
            size: q.size_packets,
        });
    }
    mem.write_u64(q.write_index_addr, write + 1)?;
    let slot = q.packet_addr(write);
    mem.write(slot + 2, &packet[2..])?;
    mem.write(slot, &packet[..2])?;
    Ok(write)
}

pub use super::dump::{
    DumpError, DumpPacket, MemSection, QueueDump, DIRECTIVE_DEVICE, DIRECTIVE_MAGIC, DIRECTIVE_MEM,
    DIRECTIVE_QUEUE,
};
pub use super::fixture::{demo, sample};
