//! What the CP remembers per queue between events ([`QueueState`]); the queue descriptors
//! it is configured with are `nmcp_isa::aql::queue`'s.

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
    /// Low 32 bits of the dispatch id of this queue's member of the GEMM group in
    /// flight (valid while the queue's bit is set in the CP's `in_group` mask). The
    /// 64-bit HSA id of a `KernelCompleted` event is compared by its low word
    /// ([`low_id`]): exact, since the ids compared are packets of the same ring, fewer
    /// than 2^31 apart (a ring holds at most 2^31 packets: its size is a `u32` power of
    /// two), and two ids less than 2^32 apart differ in their low word. (The dispatching
    /// kernel's id needs no field: while the queue's bit is set in the CP's
    /// `dispatching` mask its next id is the one after it.)
    pub group_id: u32,
    /// Dispatched kernels not yet completed (for the header's barrier bit).
    pub outstanding: u32,
    /// Word index of the write index in the platform's mapped view
    /// ([`crate::platform::DeviceMemory::mapped_words`]); `u32::MAX` until computed.
    pub view_write: u32,
    /// Packet index of ring slot 0 in the mapped view taken as 16-word packets
    /// (`words.as_chunks::<16>()`: the ring starts on a 64-byte boundary of the view, as
    /// AQL rings are aligned, or the queue is not mapped).
    pub view_ring: u32,
    /// Ring size in packets less one (the configuration's size, a power of two, copied
    /// with the view indices): the mask of a packet id's slot, kept as the mask because
    /// every dispatch takes it.
    pub ring_mask: u32,
    /// Packet index in the mapped view of the slot of packet `next_id` (kept by
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
    /// This queue's index in the CP's table (constant): a walk over the table need not
    /// count positions to name the queue a dispatch goes to. (It fills what was padding.)
    pub index: u8,
    /// Header and setup word (barrier bit cleared) of the packets of `last_shape`;
    /// [`NO_KEY`] when there is none (no header word equals it: bit 8 is clear in
    /// every key).
    pub key_word: u32,
    /// Low and high word of the GEMM record address of `last_shape`.
    pub key_ext: [u32; 2],
}

/// The low 32 bits of a dispatch id: the ring position the CP keeps per queue
/// (`QueueState::group_id`).
#[inline(always)]
pub(crate) fn low_id(id: u64) -> u32 {
    id as u32
}

/// `QueueState::key_word` of a queue without a cached shape key.
pub(crate) const NO_KEY: u32 = u32::MAX;

impl QueueState {
    /// Sets the next dispatch id and the view index of its ring slot.
    #[inline(always)]
    pub fn set_next(&mut self, id: u64) {
        self.next_id = id;
        let slot = (id as u32) & self.ring_mask;
        self.view_slot = self.view_ring.wrapping_add(slot);
    }

    /// Its head packet `id` went to the dispatcher as a GEMM group member: the group's
    /// id, one more outstanding kernel, the next packet, no classified head.
    #[inline(always)]
    pub fn dispatched(&mut self, id: u64) {
        self.group_id = low_id(id);
        self.outstanding = self.outstanding.wrapping_add(1);
        self.set_next(id.wrapping_add(1));
        self.head = HEAD_NONE;
    }
}

impl QueueState {
    /// A queue the CP knows nothing about yet.
    pub const INIT: Self = Self {
        next_id: 0,
        head_ko: 0,
        group_id: 0,
        outstanding: 0,
        view_write: u32::MAX,
        view_ring: u32::MAX,
        ring_mask: u32::MAX,
        view_slot: u32::MAX,
        head: HEAD_NONE,
        last_shape: HEAD_NONE,
        synced: false,
        index: 0,
        key_word: NO_KEY,
        key_ext: [0; 2],
    };
}

impl Default for QueueState {
    fn default() -> Self {
        Self::INIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_ids_tell_apart_ids_of_one_ring() {
        // Ids less than 2^32 apart (a ring holds at most 2^31 packets) differ in their
        // low word, across the 2^32 boundary too.
        let id = (5u64 << 32) - 3;
        for d in 1..8u64 {
            assert_ne!(low_id(id), low_id(id + d));
            assert_ne!(low_id(id), low_id(id + (1 << 31) - d));
        }
        assert_eq!(low_id(id), low_id(id + (1 << 32)));
    }
}
