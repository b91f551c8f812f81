//! The CP's decision log: what it did with each packet ([`CpRecord`], [`CpAction`]), kept as
//! compact entries in a ring for the platform to drain.

use super::*;

/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): enough for
/// one handler's packets plus one dispatch per queue (16 with the `small-tables`
/// feature: a platform that drains the log after every handler).
#[cfg(not(feature = "small-tables"))]
pub const LOG_CAPACITY: usize = MAX_PACKETS_PER_EVENT + MAX_QUEUES;
/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): 16 with the
/// `small-tables` feature (a platform that drains the log after every handler).
#[cfg(feature = "small-tables")]
pub const LOG_CAPACITY: usize = 16;

/// What the CP did with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CpAction {
    /// Dispatched.
    Dispatched {
        /// Kernel object it runs with.
        kernel_object: u64,
        /// The packet had a GEMM extension.
        gemm: bool,
        /// Concurrency degree of the decision (1 for baseline and non-GEMMs).
        cd: u8,
        /// Predicted CD (1 when nothing was predicted).
        predicted_cd: u8,
        /// The kernel object was swapped for a globally-optimized one.
        swapped: bool,
    },
    /// Completed with an error value.
    Rejected(RejectReason),
    /// A barrier packet whose dependencies resolved; completed with 0.
    BarrierResolved,
}

/// One line of the CP's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpRecord {
    /// Queue.
    pub queue: u8,
    /// Dispatch id.
    pub dispatch_id: u64,
    /// What happened.
    pub action: CpAction,
}

/// Rejections whose reasons the log holds (the log's other records are 20 bytes; a
/// reason is larger). As many as the log has entries: one handler can reject every
/// packet it looks at (a queue of 16 garbage packets and more), and a reason queue
/// shorter than the log would drop records that a platform draining after every handler
/// must see (the `cp_stream` fuzz target found it with 16). 4 with the `small-tables`
/// feature (the HiFive1 build, whose small RAM the CP shares with LAMB and T3;
/// docs/decisions/board.md).
pub const REJECT_CAPACITY: usize = if cfg!(feature = "small-tables") {
    4
} else {
    LOG_CAPACITY
};

/// One record of the log as the CP stores it: [`CpRecord`]'s fields in 32-bit words
/// (20 bytes), the reason of a rejection kept apart (`CpState::rejects`). The queue, the
/// kind (`LOG_REJECTED`, `LOG_BARRIER`, or `LOG_DISPATCHED` with `LOG_GEMM` /
/// `LOG_SWAPPED`), the CD and the prediction are the bytes of `meta`, low first: a GEMM
/// group's records differ only in the queue byte, so each is one `or` and one store.
#[derive(Debug, Clone, Copy)]
pub(super) struct LogEntry {
    pub(super) id: [u32; 2],
    pub(super) ko: [u32; 2],
    pub(super) meta: u32,
}

impl LogEntry {
    pub(super) const EMPTY: Self = Self {
        id: [0; 2],
        ko: [0; 2],
        meta: 0,
    };

    /// The record of packet `id` dispatched with kernel object `ko` (`meta`: see
    /// [`LogEntry`]).
    #[inline(always)]
    pub(super) fn dispatch(id: u64, ko: u64, meta: u32) -> Self {
        Self {
            id: [id as u32, (id >> 32) as u32],
            ko: [ko as u32, (ko >> 32) as u32],
            meta,
        }
    }

    /// `meta` without the queue byte.
    #[inline(always)]
    pub(super) fn meta(kind: u8, cd: u8, predicted: u8) -> u32 {
        u32::from(kind) << 8 | u32::from(cd) << 16 | u32::from(predicted) << 24
    }

    #[inline(always)]
    pub(super) fn queue(&self) -> u8 {
        self.meta as u8
    }

    #[inline(always)]
    pub(super) fn kind(&self) -> u8 {
        (self.meta >> 8) as u8
    }
}

/// The log's storage: a ring of [`LOG_CAPACITY`] (a power of two) entries between two
/// free-running counters.
#[derive(Debug)]
pub(super) struct LogRing {
    pub(super) buf: [LogEntry; LOG_CAPACITY],
    pub(super) head: u32,
    pub(super) tail: u32,
}

const _: () = assert!(LOG_CAPACITY.is_power_of_two() && LOG_CAPACITY <= 1 << 16);

impl Default for LogRing {
    fn default() -> Self {
        Self {
            buf: [LogEntry::EMPTY; LOG_CAPACITY],
            head: 0,
            tail: 0,
        }
    }
}

impl LogRing {
    #[inline(always)]
    pub(super) fn pop_front(&mut self) -> Option<LogEntry> {
        if self.head == self.tail {
            return None;
        }
        let e = self
            .buf
            .get(self.head as usize & (LOG_CAPACITY - 1))
            .copied();
        self.head = self.head.wrapping_add(1);
        e
    }

    /// Writes `e` at position `tail` of the ring `buf` (the caller knows there is room
    /// and moves the tail; the steady lane keeps it in a register across a group).
    #[inline(always)]
    pub(super) fn put(buf: &mut [LogEntry; LOG_CAPACITY], tail: u32, e: LogEntry) {
        if let Some(slot) = buf.get_mut(tail as usize & (LOG_CAPACITY - 1)) {
            *slot = e;
        }
    }

    /// Appends `e` when the caller knows the ring has room (it drops nothing).
    #[inline(always)]
    pub(super) fn push_with_room(&mut self, e: LogEntry) {
        Self::put(&mut self.buf, self.tail, e);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Appends `e`; returns the oldest entry, dropped to make room, when full.
    #[inline(always)]
    pub(super) fn push_back(&mut self, e: LogEntry) -> Option<LogEntry> {
        let dropped = if self.tail.wrapping_sub(self.head) >= LOG_CAPACITY as u32 {
            self.pop_front()
        } else {
            None
        };
        self.push_with_room(e);
        dropped
    }
}

pub(super) const LOG_REJECTED: u8 = 1;
pub(super) const LOG_BARRIER: u8 = 2;
pub(super) const LOG_DISPATCHED: u8 = 4;
pub(super) const LOG_GEMM: u8 = 8;
pub(super) const LOG_SWAPPED: u8 = 16;

impl CpState {
    /// Appends a record; when the log is full the oldest records are dropped (and
    /// counted).
    #[inline(always)]
    pub(super) fn log(&mut self, queue: u8, dispatch_id: u64, action: CpAction) {
        let (kind, ko, cd, predicted) = match action {
            CpAction::Dispatched {
                kernel_object,
                gemm,
                cd,
                predicted_cd,
                swapped,
            } => (
                LOG_DISPATCHED
                    | if gemm { LOG_GEMM } else { 0 }
                    | if swapped { LOG_SWAPPED } else { 0 },
                kernel_object,
                cd,
                predicted_cd,
            ),
            CpAction::Rejected(reason) => {
                if self.rejects.is_full() {
                    // Drop records up to and including the oldest rejection.
                    while let Some(old) = self.log.pop_front() {
                        self.log_dropped = self.log_dropped.saturating_add(1);
                        if old.kind() == LOG_REJECTED {
                            let _ = self.rejects.pop_front();
                            break;
                        }
                    }
                }
                let _ = self.rejects.push_back(reason);
                (LOG_REJECTED, 0, 0, 0)
            }
            CpAction::BarrierResolved => (LOG_BARRIER, 0, 0, 0),
        };
        self.log_entry(LogEntry {
            id: [dispatch_id as u32, (dispatch_id >> 32) as u32],
            ko: [ko as u32, (ko >> 32) as u32],
            meta: LogEntry::meta(kind, cd, predicted) | u32::from(queue),
        });
    }

    /// Appends `e` (a rejection's reason already queued); when the log is full the
    /// oldest entry is dropped (and counted).
    #[inline(always)]
    pub(super) fn log_entry(&mut self, e: LogEntry) {
        if let Some(old) = self.log.push_back(e) {
            self.log_dropped = self.log_dropped.saturating_add(1);
            if old.kind() == LOG_REJECTED {
                let _ = self.rejects.pop_front();
            }
        }
    }

    pub(super) fn completed(&mut self, queue: u8, id: u64, action: CpAction) {
        self.work.completions = self.work.completions.saturating_add(1);
        self.completions_this_scan = self.completions_this_scan.saturating_add(1);
        self.log(queue, id, action);
    }
}
