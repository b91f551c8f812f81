//! Queue descriptors the CP is configured with, and what it remembers per queue.

use nmcp_isa::aql::{DeviceRange, AQL_PACKET_BYTES};

use crate::platform::DevAddr;

/// Queues (software streams) the CP serves.
pub const MAX_QUEUES: usize = 32;

/// One user-mode AQL queue: a ring of 64-byte packets in device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueConfig {
    /// Device address of ring slot 0.
    pub ring_base: DevAddr,
    /// Ring size in packets, a power of two.
    pub size_packets: u32,
    /// Device address of the u64 read dispatch id (advanced by the packet processor).
    pub read_index_addr: DevAddr,
    /// Device address of the u64 write dispatch id (advanced by producers).
    pub write_index_addr: DevAddr,
    /// Device address of the doorbell signal producers ring with the last write id.
    pub doorbell_addr: DevAddr,
}

impl QueueConfig {
    /// Device address of the slot holding dispatch id `id`.
    pub fn packet_addr(&self, id: u64) -> DevAddr {
        // The ring lies inside device memory (checked at configuration), so no sum
        // overflows.
        let slot = (id as u32) & self.size_packets.wrapping_sub(1);
        self.ring_base
            .wrapping_add(u64::from(slot) * AQL_PACKET_BYTES as u64)
    }

    /// Ring bytes.
    pub fn ring_bytes(&self) -> u64 {
        u64::from(self.size_packets).saturating_mul(AQL_PACKET_BYTES as u64)
    }

    /// Power-of-two size, ring and index words inside `device`.
    pub fn is_valid(&self, device: &DeviceRange) -> bool {
        self.size_packets.is_power_of_two()
            && device.contains(self.ring_base, self.ring_bytes())
            && device.contains(self.read_index_addr, 8)
            && device.contains(self.write_index_addr, 8)
            && device.contains(self.doorbell_addr, 8)
    }
}

/// `QueueState::head` of a queue without a classified runnable head.
pub(crate) const HEAD_NONE: u8 = 0xFF;
/// `QueueState::head` of a non-GEMM kernel head (its kernel object is in `head_ko`).
pub(crate) const HEAD_KERNEL: u8 = 0xFE;

/// What the CP remembers about one queue between events: a few words, so a scan never
/// copies more than it reads. The queue's flags (something changed, waiting, dispatching,
/// member of the GEMM group in flight) are bits of masks in the CP's state, so an event
/// that touches many queues costs one word operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueState {
    /// First dispatch id the CP has not dispatched or completed; the classified head
    /// (when `head != HEAD_NONE`) is this packet.
    pub next_id: u64,
    /// Kernel object of the classified head packet.
    pub head_ko: u64,
    /// Dispatch id of the kernel dispatched and not yet placed (valid while the queue's
    /// bit is set in the CP's `dispatching` mask).
    pub dispatching_id: u64,
    /// Dispatch id of this queue's member of the GEMM group in flight (valid while the
    /// queue's bit is set in the CP's `in_group` mask).
    pub group_id: u64,
    /// Dispatched kernels not yet completed (for the header's barrier bit).
    pub outstanding: u32,
    /// Word index of the write index in the platform's mapped view
    /// ([`crate::platform::DeviceMemory::mapped_words`]); `u32::MAX` until computed.
    pub view_write: u32,
    /// Word index of ring slot 0 in the mapped view.
    pub view_ring: u32,
    /// Ring size in packets (the configuration's, copied with the view indices).
    pub size_packets: u32,
    /// Word index in the mapped view of the slot of packet `next_id` (kept by
    /// [`QueueState::set_next`]; meaningful once `view_write` is computed).
    pub view_slot: u32,
    /// The classified head: [`HEAD_NONE`], [`HEAD_KERNEL`] or the index of its GEMM
    /// shape in the CP's shape table.
    pub head: u8,
    /// Shape of the last GEMM classified on this queue ([`HEAD_NONE`] when none): a
    /// later packet with the same header word (barrier bit aside) and the same record
    /// address (`key_*`) is that shape, classified by the fast path without a decode.
    pub last_shape: u8,
    /// The read index has been read once since configuration (afterwards the CP, the
    /// queue's packet processor, is the one that advances it and tracks it itself).
    pub synced: bool,
    /// Header and setup word (barrier bit cleared) of the packets of `last_shape`;
    /// [`NO_KEY`] when there is none (no header word equals it: bit 8 is clear in
    /// every key).
    pub key_word: u32,
    /// Low and high word of the GEMM record address of `last_shape`.
    pub key_ext: [u32; 2],
}

/// `QueueState::key_word` of a queue without a cached shape key.
pub(crate) const NO_KEY: u32 = u32::MAX;

impl QueueState {
    /// Sets the next dispatch id and the view index of its ring slot.
    #[inline(always)]
    pub fn set_next(&mut self, id: u64) {
        self.next_id = id;
        let slot = (id as u32) & self.size_packets.wrapping_sub(1);
        self.view_slot = self.view_ring.wrapping_add(slot << 4);
    }
}

impl QueueState {
    /// A queue the CP knows nothing about yet.
    pub const INIT: Self = Self {
        next_id: 0,
        head_ko: 0,
        dispatching_id: 0,
        group_id: 0,
        outstanding: 0,
        view_write: u32::MAX,
        view_ring: u32::MAX,
        size_packets: 0,
        view_slot: u32::MAX,
        head: HEAD_NONE,
        last_shape: HEAD_NONE,
        synced: false,
        key_word: NO_KEY,
        key_ext: [0; 2],
    };
}

impl Default for QueueState {
    fn default() -> Self {
        Self::INIT
    }
}
