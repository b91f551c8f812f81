//! Queue descriptors the CP is configured with, and what it remembers per queue.

use nmcp_isa::aql::{DeviceRange, AQL_PACKET_BYTES};

use crate::platform::DevAddr;

use super::decision::GemmCandidate;

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
        let slot = id & u64::from(self.size_packets.saturating_sub(1));
        self.ring_base
            .saturating_add(slot.saturating_mul(AQL_PACKET_BYTES as u64))
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

/// What the CP remembers about one queue between events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QueueState {
    /// First dispatch id the CP has not dispatched or completed.
    pub next_id: u64,
    /// Dispatched; its workgroups are still being placed (the head has not moved).
    pub dispatching: Option<u64>,
    /// The dispatching kernel belongs to the current GEMM group.
    pub dispatching_gemm: bool,
    /// Dispatched kernels not yet completed (for the header's barrier bit).
    pub outstanding: u32,
    /// Something may have changed (doorbell, head moved, completion, timer): re-read the
    /// indices on the next scan. A clean queue costs the scan no memory access.
    pub dirty: bool,
    /// The head waits for a signal, the barrier bit or publication.
    pub waiting: bool,
    /// The classified head packet, so a deferred GEMM is not re-read every scan.
    pub cached: Option<CachedHead>,
}

/// A head packet that passed classification and can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CachedHead {
    /// Dispatch id.
    pub dispatch_id: u64,
    /// The packet's own kernel object.
    pub kernel_object: u64,
    /// The GEMM features and kernel map, for a GEMM.
    pub gemm: Option<GemmCandidate>,
}
