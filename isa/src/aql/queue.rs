//! The AQL queue descriptor a packet processor is configured with: where a user-mode
//! queue's ring and its read, write and doorbell words lie in device memory
//! ([`QueueConfig`]), and the compact table of up to [`MAX_QUEUES`] of them the CP keeps
//! ([`QueueTable`]). The emulator builds the same descriptors for the queues it creates,
//! so they live here rather than in the firmware.

use super::{DeviceRange, AQL_PACKET_BYTES};

/// Queues (software streams) the CP serves.
pub const MAX_QUEUES: usize = 32;

/// One user-mode AQL queue: a ring of 64-byte packets in device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueConfig {
    /// Device address of ring slot 0.
    pub ring_base: u64,
    /// Ring size in packets, a power of two.
    pub size_packets: u32,
    /// Device address of the u64 read dispatch id (advanced by the packet processor).
    pub read_index_addr: u64,
    /// Device address of the u64 write dispatch id (advanced by producers).
    pub write_index_addr: u64,
    /// Device address of the doorbell signal producers ring with the last write id.
    pub doorbell_addr: u64,
}

// The CP's scan calls these per packet: `#[inline]` keeps them inlinable into the firmware
// crate (a non-generic function of another crate is not, in a build without LTO).
impl QueueConfig {
    /// Device address of the slot holding dispatch id `id`.
    #[inline]
    pub fn packet_addr(&self, id: u64) -> u64 {
        // The ring lies inside device memory (checked at configuration), so no sum
        // overflows.
        let slot = (id as u32) & self.size_packets.wrapping_sub(1);
        self.ring_base
            .wrapping_add(u64::from(slot) * AQL_PACKET_BYTES as u64)
    }

    /// Ring bytes.
    #[inline]
    pub fn ring_bytes(&self) -> u64 {
        u64::from(self.size_packets).saturating_mul(AQL_PACKET_BYTES as u64)
    }

    /// Power-of-two size, ring and index words inside `device`.
    #[inline]
    pub fn is_valid(&self, device: &DeviceRange) -> bool {
        self.size_packets.is_power_of_two()
            && device.contains(self.ring_base, self.ring_bytes())
            && device.contains(self.read_index_addr, 8)
            && device.contains(self.write_index_addr, 8)
            && device.contains(self.doorbell_addr, 8)
    }
}

/// One queue as the CP stores it ([`QueueTable`]): [`QueueConfig`]'s addresses as 32-bit
/// offsets from the table's anchor (20 bytes instead of 40 on RV32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CompactQueue {
    ring: u32,
    size_packets: u32,
    read_index: u32,
    write_index: u32,
    doorbell: u32,
}

/// Why [`QueueTable::push`] refused a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum QueueTableError {
    /// The table holds [`MAX_QUEUES`] queues already.
    Full,
    /// An address of queue `queue` lies 2 GiB or more from the first queue's ring base
    /// (the CP keeps queue addresses as signed 32-bit offsets from it).
    OutOfWindow {
        /// Index the queue would have had.
        queue: u8,
    },
}

impl core::fmt::Display for QueueTableError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Full => write!(f, "more than {MAX_QUEUES} queues"),
            Self::OutOfWindow { queue } => write!(
                f,
                "queue {queue}: an address lies 2 GiB or more from queue 0's ring base"
            ),
        }
    }
}

impl core::error::Error for QueueTableError {}

/// The CP's queue descriptors (up to [`MAX_QUEUES`]). Every address is stored as a
/// 32-bit offset from one 64-bit anchor (the first queue's ring base), read as a signed
/// (two's-complement) offset: a queue's ring and index words may lie anywhere within
/// 2 GiB of it on either side, however high device memory sits (the emulator's queues
/// live above 2^46). 20 bytes per queue instead of 40 on RV32; [`QueueTable::get`]
/// rebuilds the full [`QueueConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueTable {
    anchor: u64,
    queues: heapless::Vec<CompactQueue, MAX_QUEUES>,
}

impl Default for QueueTable {
    fn default() -> Self {
        Self::new()
    }
}

impl QueueTable {
    /// No queues.
    pub const fn new() -> Self {
        Self {
            anchor: 0,
            queues: heapless::Vec::new(),
        }
    }

    /// A table of `queues`, in order.
    ///
    /// # Errors
    /// As [`QueueTable::push`].
    pub fn from_slice(queues: &[QueueConfig]) -> Result<Self, QueueTableError> {
        let mut t = Self::new();
        for &q in queues {
            t.push(q)?;
        }
        Ok(t)
    }

    /// Appends queue `q` (its index is the number of queues before it).
    ///
    /// # Errors
    /// [`QueueTableError::Full`] with [`MAX_QUEUES`] queues already;
    /// [`QueueTableError::OutOfWindow`] when one of its addresses is not within 2 GiB
    /// of the first queue's ring base (the table is unchanged).
    pub fn push(&mut self, q: QueueConfig) -> Result<(), QueueTableError> {
        if self.queues.is_full() {
            return Err(QueueTableError::Full);
        }
        let anchor = if self.queues.is_empty() {
            q.ring_base
        } else {
            self.anchor
        };
        let off = |a: u64| -> Option<u32> {
            let d = a.wrapping_sub(anchor) as i64;
            i32::try_from(d).ok().map(|d| d as u32)
        };
        let (Some(ring), Some(read_index), Some(write_index), Some(doorbell)) = (
            off(q.ring_base),
            off(q.read_index_addr),
            off(q.write_index_addr),
            off(q.doorbell_addr),
        ) else {
            return Err(QueueTableError::OutOfWindow {
                queue: self.queues.len() as u8,
            });
        };
        self.anchor = anchor;
        self.queues
            .push(CompactQueue {
                ring,
                size_packets: q.size_packets,
                read_index,
                write_index,
                doorbell,
            })
            .map_err(|_| QueueTableError::Full)
    }

    /// Forgets every queue.
    #[inline]
    pub fn clear(&mut self) {
        self.queues.clear();
    }

    /// Queues in the table.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.queues.len()
    }

    /// No queue in the table.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Queue `i`, if there is one.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Option<QueueConfig> {
        let c = self.queues.get(i)?;
        let at = |o: u32| self.anchor.wrapping_add(o as i32 as i64 as u64);
        Some(QueueConfig {
            ring_base: at(c.ring),
            size_packets: c.size_packets,
            read_index_addr: at(c.read_index),
            write_index_addr: at(c.write_index),
            doorbell_addr: at(c.doorbell),
        })
    }

    /// Queue 0, if there is one.
    #[inline]
    pub fn first(&self) -> Option<QueueConfig> {
        self.get(0)
    }

    /// Every queue, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = QueueConfig> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(ring_base: u64) -> QueueConfig {
        QueueConfig {
            ring_base,
            size_packets: 64,
            read_index_addr: ring_base + 64 * 64,
            write_index_addr: ring_base + 64 * 64 + 8,
            doorbell_addr: ring_base + 64 * 64 + 16,
        }
    }

    #[test]
    fn table_round_trips_queues_on_both_sides_of_a_high_anchor() {
        // The emulator's queues sit above 2^46; a queue may lie below the first one.
        let base = 0x7000_0F00_0000u64;
        let qs = [q(base), q(base - 0x10_0000), q(base + 0x7FFF_0000)];
        let t = QueueTable::from_slice(&qs).unwrap();
        assert_eq!(t.len(), 3);
        for (i, want) in qs.iter().enumerate() {
            assert_eq!(t.get(i), Some(*want));
        }
        assert_eq!(t.iter().collect::<std::vec::Vec<_>>(), qs.to_vec());
        assert_eq!(t.get(3), None);
    }

    #[test]
    fn table_refuses_an_address_2_gib_or_more_from_the_anchor() {
        let base = 0x1_0000_0000u64;
        let mut t = QueueTable::from_slice(&[q(base)]).unwrap();
        // The ring fits, its doorbell lies exactly 2^31 above the anchor.
        let mut far = q(base + 0x7FFF_0000);
        far.doorbell_addr = base + (1 << 31);
        assert_eq!(t.push(far), Err(QueueTableError::OutOfWindow { queue: 1 }));
        assert_eq!(t.len(), 1);
        assert_eq!(
            t.push(q(base - (1 << 31) - 64)),
            Err(QueueTableError::OutOfWindow { queue: 1 })
        );
        // Exactly -2^31 is inside (a signed 32-bit offset).
        let mut low = q(base);
        low.ring_base = base - (1 << 31);
        assert_eq!(t.push(low), Ok(()));
        assert_eq!(t.get(1), Some(low));
        t.clear();
        assert!(t.is_empty());
    }

    #[test]
    fn table_refuses_a_33rd_queue() {
        let mut t = QueueTable::new();
        for i in 0..MAX_QUEUES as u64 {
            t.push(q(0x1000 + i * 0x2000)).unwrap();
        }
        assert_eq!(t.push(q(0x1000)), Err(QueueTableError::Full));
    }
}
