//! GOLDYLOC command processor: inspect the packets at every queue head, predict how many
//! independent GEMMs to run together, swap in the kernel object tuned for that degree.
//!
//! On every event that can move a queue head (doorbell, kernel dispatched, kernel
//! completed, timer) the CP scans the active queues from a rotating start, reads each
//! head packet through `DeviceMemory` and classifies it:
//! malformed packets are completed with an error value ([`RejectReason`]) and the queue
//! moves on; barrier packets complete once their dependencies allow; non-GEMM kernels
//! dispatch at once with their own kernel object; GEMMs (kernels with a valid extension
//! record) go to [`decide`]. Dispatched GEMMs form a group; no new group starts until every
//! member has completed (CD 1 serialises), which is what "leave the rest queued" means.

pub mod decision;
pub mod features;
pub mod predictor;
pub mod queue;
pub mod reject;
pub mod work;

use core::fmt;

pub use decision::{
    decide, decide_by_problem, Decision, GemmCandidate, ProblemKey, MAX_CANDIDATES, MAX_CD,
};
pub use features::{CuResources, FeatureError, FEATURE_COUNT};
pub use predictor::{CdPredictor, CLASS_COUNT};
pub use queue::{QueueConfig, MAX_QUEUES};
pub use reject::{RejectCode, RejectReason};
pub use work::{CpCostModel, CpWork};

use heapless::{Deque, Vec};
use nmcp_isa::aql::{
    self, AqlPacket, DeviceRange, PacketType, AQL_PACKET_BYTES, KERNEL_DESCRIPTOR_BYTES,
};
use nmcp_isa::gemm_ext::{
    checked_workgroups, GemmExt, CONCURRENCY_DEGREES, GEMM_EXT_BYTES, MAX_KERNEL_OBJECTS,
};

use crate::platform::{
    DevAddr, DeviceMemory, DispatchError, DispatchRequest, KernelDispatcher, MemoryError,
};
use crate::{Event, FirmwareError};
use queue::{QueueState, HEAD_KERNEL, HEAD_NONE};

/// Packets the CP classifies in one event handler; the rest waits for the next event
/// ([`CommandProcessor::has_pending_work`] tells the platform to send one).
pub const MAX_PACKETS_PER_EVENT: usize = 32;
/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): enough for
/// one handler's packets plus one dispatch per queue.
pub const LOG_CAPACITY: usize = MAX_PACKETS_PER_EVENT + MAX_QUEUES;

/// Errors of the command processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CpError {
    /// A bounded table overflowed.
    Capacity,
    /// A queue descriptor is unusable (size not a power of two, or ring / index words
    /// outside device memory).
    BadQueue {
        /// Queue index.
        queue: u8,
    },
}

impl fmt::Display for CpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("CP table capacity exceeded"),
            Self::BadQueue { queue } => write!(
                f,
                "queue {queue}: size not a power of two or ring/index words outside device memory"
            ),
        }
    }
}

impl core::error::Error for CpError {}

/// Everything the CP needs to know about its GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpConfig {
    /// Active queues, index = queue id.
    pub queues: Vec<QueueConfig, MAX_QUEUES>,
    /// Device memory every address must fall in.
    pub device: DeviceRange,
    /// Per-CU resources, for occupancy and waves.
    pub resources: CuResources,
    /// The trained predictor.
    pub predictor: CdPredictor,
    /// GOLDYLOC's concurrency control. Off, the CP is the baseline one of a GPU without
    /// GOLDYLOC: every kernel is dispatched with its own kernel object as soon as it
    /// reaches a queue head (barrier bits still honoured), no GEMM extension record is
    /// read, nothing is predicted and no group waits for another — the Default,
    /// CU-Partition and Resource-Partition configurations of dissertation 7.4.5, run
    /// through the same firmware and charged its real (smaller) cost.
    pub concurrency_control: bool,
}

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

/// GEMM shapes (extension records) the CP remembers: their validated kernel map and
/// their predicted CD. A training step has a handful of distinct GEMMs; one per queue
/// head means a full set of heads never evicts a shape another head still uses.
pub const MAX_SHAPES: usize = MAX_QUEUES;

/// A GEMM extension record the CP has validated, keyed by its device address, with the
/// prediction for its features. Records are immutable while the CP runs (they live with
/// the GO library's code objects, like the kernel descriptors they point at); a new
/// configuration forgets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    /// Device address of the record.
    ext_addr: u64,
    /// Header and setup word of the first packet validated with this record, barrier bit
    /// cleared: a later packet with the same word and record skips the full decode.
    packet_word: u32,
    /// Index of the first shape of the same GEMM problem (the heterogeneous rule's
    /// "same size").
    problem_id: u8,
    /// Kernel objects the record lists (`kos[..n_kos]`).
    kos: [u64; MAX_KERNEL_OBJECTS],
    n_kos: u8,
    /// Kernel object the record tuned for each entry of [`CONCURRENCY_DEGREES`].
    ko_per_cd: [u64; CONCURRENCY_DEGREES.len()],
    /// Predicted CD.
    predicted: u8,
    problem: ProblemKey,
}

impl Shape {
    fn lists(&self, ko: u64) -> bool {
        self.kos
            .iter()
            .take(usize::from(self.n_kos))
            .any(|&k| k == ko)
    }
}

/// What a head packet needs.
enum Class {
    /// A GEMM of shape (index) `.0` whose packet names kernel object `.1`.
    Gemm(u8, u64),
    /// A non-GEMM kernel with this kernel object.
    Kernel(u64),
    Reject(RejectReason),
    BarrierDone,
    Wait,
}

/// The command processor's state.
#[derive(Debug, Default)]
pub struct CommandProcessor {
    config: Option<CpConfig>,
    state: CpState,
}

#[derive(Debug, Default)]
struct CpState {
    /// `[first, end)` of the bytes the queue rings span: a completion signal there would,
    /// when decremented, rewrite another packet's header (computed at `configure`).
    rings: (DevAddr, DevAddr),
    queues: [QueueState; MAX_QUEUES],
    shapes: Vec<Shape, MAX_SHAPES>,
    next_victim: u8,
    completions_this_scan: u32,
    tally: Tally,
    gemm_group_in_flight: u8,
    rr_start: u8,
    work: CpWork,
    log: Deque<CpRecord, LOG_CAPACITY>,
    log_dropped: u64,
    pending: bool,
}

impl CommandProcessor {
    /// Bytes of CP state (for RAM budgets).
    pub const STATE_BYTES: usize = core::mem::size_of::<Self>();

    /// A CP configured for `config`.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor.
    pub fn new(config: CpConfig) -> Result<Self, CpError> {
        let mut cp = Self::default();
        cp.configure(config)?;
        Ok(cp)
    }

    /// (Re)configures the CP and forgets all queue state.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor; the old configuration
    /// stays.
    pub fn configure(&mut self, config: CpConfig) -> Result<(), CpError> {
        for (i, q) in config.queues.iter().enumerate() {
            if !q.is_valid(&config.device) {
                return Err(CpError::BadQueue { queue: i as u8 });
            }
        }
        let rings = config
            .queues
            .iter()
            .map(|q| {
                let len = u64::from(q.size_packets).saturating_mul(AQL_PACKET_BYTES as u64);
                (q.ring_base, q.ring_base.saturating_add(len))
            })
            .fold((DevAddr::MAX, 0), |(lo, hi), (a, b)| (lo.min(a), hi.max(b)));
        self.config = Some(config);
        self.state = CpState {
            rings,
            ..CpState::default()
        };
        Ok(())
    }

    /// Forgets all queue state but keeps the GEMM shapes learnt so far (their validated
    /// records and predictions), as after the host re-creates its queues between two
    /// training iterations with the same GEMMs. Only valid while the records stay where
    /// they were ([`CommandProcessor::configure`] forgets them).
    pub fn restart_queues(&mut self) {
        let s = &mut self.state;
        s.queues = Default::default();
        s.completions_this_scan = 0;
        s.gemm_group_in_flight = 0;
        s.rr_start = 0;
        s.pending = false;
    }

    /// Makes queue `queue` the first the next scan visits (the highest priority; the
    /// CP rotates it after every decision). Out-of-range queues are ignored.
    pub fn set_rotation(&mut self, queue: u8) {
        if self
            .config
            .as_ref()
            .is_some_and(|c| usize::from(queue) < c.queues.len())
        {
            self.state.rr_start = queue;
        }
    }

    /// GEMM shapes in the shape table.
    pub fn shapes_known(&self) -> usize {
        self.state.shapes.len()
    }

    /// The configuration, if any.
    pub fn config(&self) -> Option<&CpConfig> {
        self.config.as_ref()
    }

    /// Work done so far.
    pub fn work(&self) -> CpWork {
        self.state.work
    }

    /// The oldest undrained log record.
    pub fn pop_record(&mut self) -> Option<CpRecord> {
        self.state.log.pop_front()
    }

    /// Log records dropped because nobody drained the log.
    pub fn records_dropped(&self) -> u64 {
        self.state.log_dropped
    }

    /// The last handler stopped at [`MAX_PACKETS_PER_EVENT`]; deliver another event
    /// (e.g. `Timer`) to continue.
    pub fn has_pending_work(&self) -> bool {
        self.state.pending
    }

    /// Reacts to a queue event. An unconfigured CP ignores events.
    ///
    /// # Errors
    /// Any [`FirmwareError`] from the platform; the CP stays consistent.
    pub fn on_event<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        event: &Event,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        let Some(cfg) = self.config.as_ref() else {
            return Ok(());
        };
        let s = &mut self.state;
        s.work.handlers = s.work.handlers.wrapping_add(1);
        match *event {
            Event::Doorbell { queue } => {
                // Only the rung queues: this one and those in the platform's doorbell
                // bitmap (rung while this event waited); the others' write indices have
                // not moved.
                let rung = p.take_doorbells() | 1u32.checked_shl(u32::from(queue)).unwrap_or(0);
                for (i, q) in s.queues.iter_mut().enumerate() {
                    if rung & (1 << (i & 31)) != 0 {
                        q.dirty = true;
                    }
                }
            }
            Event::KernelDispatched { queue, dispatch_id } => {
                if let Some(q) = s.queues.get_mut(usize::from(queue)) {
                    q.dirty = true;
                    if q.dispatching == Some(dispatch_id) {
                        q.dispatching = None;
                    }
                }
            }
            Event::KernelCompleted {
                queue, dispatch_id, ..
            } => {
                if let Some(q) = s.queues.get_mut(usize::from(queue)) {
                    q.outstanding = q.outstanding.saturating_sub(1);
                    q.dirty = true;
                    // A group of CD GEMMs runs together; the next group starts when the
                    // whole group has completed (CD 1 serialises).
                    if q.group_member == Some(dispatch_id) {
                        q.group_member = None;
                        s.gemm_group_in_flight = s.gemm_group_in_flight.saturating_sub(1);
                    }
                }
                // A completion signal changed: waiting barriers may resolve.
                s.mark_waiting_dirty();
            }
            _ => {
                for q in s.queues.iter_mut() {
                    q.dirty = true;
                }
            }
        }
        s.scan(cfg, p)
    }
}

fn read<P: DeviceMemory>(
    p: &mut P,
    work: &mut CpWork,
    addr: DevAddr,
    buf: &mut [u8],
) -> Result<(), MemoryError> {
    work.mem_accesses = work.mem_accesses.saturating_add(1);
    work.bytes_read = work.bytes_read.saturating_add(buf.len() as u64);
    p.read(addr, buf)
}

/// Counts of the hot path, in 32-bit words (cheap on RV32), folded into [`CpWork`]
/// once per event.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// 32-bit device-memory reads.
    reads: u32,
    /// Queue heads looked at on the general path.
    visits: u32,
    /// Queue heads looked at on the fast path.
    mapped_visits: u32,
    /// Packets classified.
    inspected: u32,
    /// 32-bit device-memory writes (kernel-object patches).
    writes: u32,
    /// Kernels dispatched.
    dispatches: u32,
}

impl Tally {
    fn fold_into(&mut self, work: &mut CpWork) {
        work.mem_accesses = work.mem_accesses.saturating_add(u64::from(self.reads));
        work.bytes_read = work.bytes_read.saturating_add(4 * u64::from(self.reads));
        work.queue_visits = work
            .queue_visits
            .saturating_add(u64::from(self.visits) + u64::from(self.mapped_visits));
        work.mapped_visits = work
            .mapped_visits
            .saturating_add(u64::from(self.mapped_visits));
        work.packets_inspected = work
            .packets_inspected
            .saturating_add(u64::from(self.inspected));
        work.mem_accesses = work.mem_accesses.saturating_add(u64::from(self.writes));
        work.bytes_written = work
            .bytes_written
            .saturating_add(4 * u64::from(self.writes));
        work.dispatches = work.dispatches.saturating_add(u64::from(self.dispatches));
        *self = Self::default();
    }
}

#[inline]
fn read_u32<P: DeviceMemory>(
    p: &mut P,
    tally: &mut Tally,
    addr: DevAddr,
) -> Result<u32, MemoryError> {
    tally.reads = tally.reads.wrapping_add(1);
    p.read_u32(addr)
}

#[inline]
fn read_u64<P: DeviceMemory>(
    p: &mut P,
    tally: &mut Tally,
    addr: DevAddr,
) -> Result<u64, MemoryError> {
    let lo = read_u32(p, tally, addr)?;
    let hi = read_u32(p, tally, addr.wrapping_add(4))?;
    Ok(u64::from(lo) | (u64::from(hi) << 32))
}

/// Header bit 8: the packet waits for every earlier packet of its queue to complete.
const BARRIER_BIT: u32 = 1 << 8;

/// Word index of `addr` in a view starting at `base`, if aligned.
#[inline(always)]
fn word_index(base: DevAddr, addr: DevAddr) -> Option<usize> {
    let off = addr.wrapping_sub(base);
    (off & 3 == 0 && off >> 32 == 0).then_some((off >> 2) as usize)
}

/// The common case of a scan, on directly mapped memory: for every dirty queue, the
/// write index tells whether anything new is published; a head packet that is a kernel
/// dispatch whose header and GEMM record match a known shape becomes the queue's head
/// (a dozen loads and compares, no decode). Returns the queues (bit mask) that need the
/// general path: anything else at the head, or words outside the view.
#[allow(clippy::too_many_arguments)]
/// Whether the 8-byte signal at `addr` overlaps the queue rings `[rings.0, rings.1)`.
#[inline(always)]
fn in_rings(rings: (DevAddr, DevAddr), addr: u64) -> bool {
    addr < rings.1 && rings.0 < addr.saturating_add(8)
}

/// The rejection of a completion signal inside the queue rings.
fn ring_signal(address: u64) -> RejectReason {
    RejectReason::Packet(aql::AqlError::AddressOutOfRange {
        field: "completion_signal",
        offset: aql::offset::COMPLETION_SIGNAL as u8,
        address,
    })
}

#[allow(clippy::too_many_arguments)]
fn fast_scan(
    cfg: &CpConfig,
    rings: (DevAddr, DevAddr),
    queues: &mut [QueueState; MAX_QUEUES],
    shapes: &[Shape],
    base: DevAddr,
    words: &[u32],
    tally: &mut Tally,
    start: usize,
    heads: &mut [u8; MAX_QUEUES],
    nh: &mut usize,
) -> u32 {
    let mut slow = 0u32;
    let word = |i: usize| words.get(i).map(|&w| u32::from_le(w));
    let n = cfg.queues.len().min(MAX_QUEUES);
    let mut qi = start;
    for _ in 0..n {
        if qi >= n {
            qi = 0;
        }
        let this = qi;
        qi += 1;
        let (Some(qc), Some(qs)) = (cfg.queues.get(this), queues.get_mut(this)) else {
            continue;
        };
        let mut push = |q: usize| {
            if let Some(slot) = heads.get_mut(*nh) {
                *slot = q as u8;
                *nh += 1;
            }
        };
        if qs.dispatching.is_some() {
            continue;
        }
        if !qs.dirty {
            if qs.head != HEAD_NONE {
                push(this);
            }
            continue;
        }
        let qi = this;
        let bit = 1u32 << (qi & 31);
        if qs.view_write == u32::MAX || !qs.synced {
            // First visit since configuration: where the queue's words sit in the view
            // (kept as 32-bit indices), and the read index.
            let ri = word_index(base, qc.read_index_addr);
            let (Some(wi), Some(ring), Some(lo), Some(hi)) = (
                word_index(base, qc.write_index_addr),
                word_index(base, qc.ring_base),
                ri.and_then(word),
                ri.and_then(|i| word(i.wrapping_add(1))),
            ) else {
                slow |= bit;
                continue;
            };
            let ring_end = ring.saturating_add(qc.size_packets as usize * (AQL_PACKET_BYTES / 4));
            if ring_end > words.len() || wi >= words.len() || ring_end > u32::MAX as usize {
                slow |= bit;
                continue;
            }
            qs.view_write = wi as u32;
            qs.view_ring = ring as u32;
            qs.next_id = qs.next_id.max(u64::from(lo) | (u64::from(hi) << 32));
            qs.synced = true;
            tally.reads = tally.reads.wrapping_add(2);
        }
        let wi = qs.view_write as usize;
        let Some(w_lo) = word(wi) else {
            slow |= bit;
            continue;
        };
        tally.reads = tally.reads.wrapping_add(1);
        tally.mapped_visits = tally.mapped_visits.wrapping_add(1);
        let id = qs.next_id;
        let avail = w_lo.wrapping_sub(id as u32);
        if avail == 0 {
            qs.dirty = false;
            qs.waiting = false;
            qs.head = HEAD_NONE;
            continue;
        }
        if avail > qc.size_packets {
            slow |= bit;
            continue;
        }
        if qs.head != HEAD_NONE && qs.head_id == id {
            qs.dirty = false;
            push(qi);
            continue;
        }
        // Inside the ring, which lies inside the view (checked when the indices were
        // computed).
        let slot = (id as u32) & qc.size_packets.wrapping_sub(1);
        let first = qs.view_ring.wrapping_add(slot << 4) as usize;
        let Some(pkt) = words.get(first..first.wrapping_add(AQL_PACKET_BYTES / 4)) else {
            slow |= bit;
            continue;
        };
        let header = pkt.first().map_or(0, |&w| u32::from_le(w));
        let ptype = header & 0xFF;
        if ptype == PacketType::Invalid as u32 {
            // Not published yet: the producer writes the header last.
            tally.reads = tally.reads.wrapping_add(1);
            tally.inspected = tally.inspected.wrapping_add(1);
            qs.dirty = false;
            qs.waiting = true;
            qs.head = HEAD_NONE;
            continue;
        }
        let ext_word = |k: usize| pkt.get(k).map_or(0, |&w| u64::from(u32::from_le(w)));
        let ext = ext_word(aql::offset::GEMM_EXT_ADDRESS / 4)
            | (ext_word(aql::offset::GEMM_EXT_ADDRESS / 4 + 1) << 32);
        let key = header & !BARRIER_BIT;
        let shape = if ptype == PacketType::KernelDispatch as u32 && ext != 0 {
            shapes
                .iter()
                .position(|s| s.ext_addr == ext && s.packet_word == key)
        } else {
            None
        };
        let ko = ext_word(aql::offset::KERNEL_OBJECT / 4)
            | (ext_word(aql::offset::KERNEL_OBJECT / 4 + 1) << 32);
        let signal = ext_word(aql::offset::COMPLETION_SIGNAL / 4)
            | (ext_word(aql::offset::COMPLETION_SIGNAL / 4 + 1) << 32);
        // The packet's own kernel object must be one the record lists, and its signal
        // must lie outside the rings (the general path rejects it otherwise).
        let Some(si) = shape
            .filter(|&si| shapes.get(si).is_some_and(|s| s.lists(ko)) && !in_rings(rings, signal))
        else {
            slow |= bit;
            continue;
        };
        tally.reads = tally.reads.wrapping_add(5);
        tally.inspected = tally.inspected.wrapping_add(1);
        qs.dirty = false;
        if header & BARRIER_BIT != 0 && qs.outstanding > 0 {
            qs.waiting = true;
            qs.head = HEAD_NONE;
            continue;
        }
        qs.waiting = false;
        qs.head = si as u8;
        qs.head_id = id;
        qs.head_ko = ko;
        push(qi);
    }
    slow
}

impl CpState {
    fn log(&mut self, queue: u8, dispatch_id: u64, action: CpAction) {
        let rec = CpRecord {
            queue,
            dispatch_id,
            action,
        };
        if self.log.is_full() {
            let _ = self.log.pop_front();
            self.log_dropped = self.log_dropped.saturating_add(1);
        }
        let _ = self.log.push_back(rec);
    }

    fn mark_waiting_dirty(&mut self) {
        for q in self.queues.iter_mut().filter(|q| q.waiting) {
            q.dirty = true;
        }
    }

    fn scan<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.pending = false;
        self.completions_this_scan = 0;
        let n = cfg.queues.len();
        // First the word-wise pass over directly mapped memory: queues whose head is a
        // GEMM of a known shape (or that have nothing new) are settled there; the rest
        // take the general path below.
        let mut heads = [0u8; MAX_QUEUES];
        let mut nh = 0usize;
        let start = usize::from(self.rr_start);
        let slow = match p.mapped_words() {
            Some((base, words)) => fast_scan(
                cfg,
                self.rings,
                &mut self.queues,
                &self.shapes,
                base,
                words,
                &mut self.tally,
                start,
                &mut heads,
                &mut nh,
            ),
            None => u32::MAX,
        };
        if slow != 0 {
            // Some queues need the general path: list the heads again in priority order
            // (the queues the fast pass settled are clean and cost a test each).
            let mut budget = MAX_PACKETS_PER_EVENT;
            nh = 0;
            let mut qi = start;
            for _ in 0..n {
                if qi >= n {
                    qi = 0;
                }
                let has_head = if slow & (1u32 << (qi & 31)) != 0 {
                    self.head_of(cfg, qi, p, &mut budget)?
                } else {
                    self.queues
                        .get(qi)
                        .is_some_and(|q| q.head != HEAD_NONE && q.dispatching.is_none())
                };
                if has_head {
                    if let Some(slot) = heads.get_mut(nh) {
                        *slot = qi as u8;
                        nh += 1;
                    }
                }
                qi += 1;
            }
        }
        if self.completions_this_scan > 0 && self.queues.iter().any(|q| q.waiting) {
            // This scan completed packets whose signals a barrier (possibly in a queue
            // already visited) may wait on: look again in a follow-up event.
            self.mark_waiting_dirty();
            self.pending = true;
        }
        let r = self.dispatch_heads(cfg, p, heads.get(..nh).unwrap_or_default());
        let mut tally = self.tally;
        tally.fold_into(&mut self.work);
        self.tally = tally;
        r
    }

    /// Brings queue `qi`'s head up to date: walks from the first unhandled packet until
    /// one that must run or wait, rejecting and resolving packets on the way. True when
    /// the queue has a runnable head (recorded in its state).
    fn head_of<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        qi: usize,
        p: &mut P,
        budget: &mut usize,
    ) -> Result<bool, FirmwareError> {
        let (Some(qc), Some(qs)) = (cfg.queues.get(qi), self.queues.get_mut(qi)) else {
            return Ok(false);
        };
        if qs.dispatching.is_some() {
            return Ok(false);
        }
        if !qs.dirty {
            return Ok(qs.head != HEAD_NONE);
        }
        self.tally.visits = self.tally.visits.wrapping_add(1);
        if !qs.synced {
            let read_id = read_u64(p, &mut self.tally, qc.read_index_addr)?;
            qs.next_id = qs.next_id.max(read_id);
            qs.synced = true;
        }
        // Fewer packets than the ring holds can be published: the low word of the write
        // index gives the exact count unless the index is garbage (then read it whole).
        let mut id = qs.next_id;
        let w_lo = read_u32(p, &mut self.tally, qc.write_index_addr)?;
        let avail = w_lo.wrapping_sub(id as u32);
        let write_id = if avail <= qc.size_packets {
            id.wrapping_add(u64::from(avail))
        } else {
            read_u64(p, &mut self.tally, qc.write_index_addr)?
        };
        let queue = qi as u8;
        // Bounded: at most the per-event budget of packets.
        while id < write_id {
            let Some(qs) = self.queues.get_mut(qi) else {
                return Ok(false);
            };
            if qs.head != HEAD_NONE && qs.head_id == id {
                qs.dirty = false;
                return Ok(true);
            }
            if *budget == 0 {
                self.pending = true;
                return Ok(false);
            }
            *budget -= 1;
            let outstanding = qs.outstanding;
            let class = self.classify(cfg, qc, outstanding, id, p)?;
            let Some(qs) = self.queues.get_mut(qi) else {
                return Ok(false);
            };
            match class {
                Class::Wait => {
                    qs.dirty = false;
                    qs.waiting = true;
                    qs.head = HEAD_NONE;
                    return Ok(false);
                }
                Class::Gemm(shape, ko) => {
                    qs.dirty = false;
                    qs.waiting = false;
                    qs.head = shape;
                    qs.head_id = id;
                    qs.head_ko = ko;
                    return Ok(true);
                }
                Class::Kernel(ko) => {
                    qs.dirty = false;
                    qs.waiting = false;
                    qs.head = HEAD_KERNEL;
                    qs.head_id = id;
                    qs.head_ko = ko;
                    return Ok(true);
                }
                Class::Reject(reason) => {
                    p.complete_without_dispatch(queue, id, reason.signal_value())?;
                    self.completed(queue, id, CpAction::Rejected(reason));
                }
                Class::BarrierDone => {
                    p.complete_without_dispatch(queue, id, 0)?;
                    self.completed(queue, id, CpAction::BarrierResolved);
                }
            }
            id = id.wrapping_add(1);
            if let Some(q) = self.queues.get_mut(qi) {
                q.next_id = id;
            }
        }
        if let Some(qs) = self.queues.get_mut(qi) {
            qs.dirty = false;
            qs.waiting = false;
            qs.head = HEAD_NONE;
        }
        Ok(false)
    }

    fn completed(&mut self, queue: u8, id: u64, action: CpAction) {
        self.work.completions = self.work.completions.saturating_add(1);
        self.completions_this_scan = self.completions_this_scan.saturating_add(1);
        self.log(queue, id, action);
    }

    fn find_shape(&self, ext_addr: u64) -> Option<u8> {
        self.shapes
            .iter()
            .position(|s| s.ext_addr == ext_addr)
            .map(|i| i as u8)
    }

    /// Classifies the packet `id`. The common case, a GEMM whose extension record the
    /// CP has validated before, costs four word reads (header, record address): the
    /// header type and the record address are checked before anything is decoded, and
    /// the record is not read again. Everything else takes the full decode.
    fn classify<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        qc: &QueueConfig,
        outstanding: u32,
        id: u64,
        p: &mut P,
    ) -> Result<Class, FirmwareError> {
        let addr = qc.packet_addr(id);
        let word = read_u32(p, &mut self.tally, addr)?;
        self.tally.inspected = self.tally.inspected.wrapping_add(1);
        let ptype = word & 0xFF;
        if ptype == PacketType::Invalid as u32 {
            // Not published yet: the producer writes the header last.
            return Ok(Class::Wait);
        }
        if ptype == PacketType::KernelDispatch as u32 {
            let ext_addr = read_u64(
                p,
                &mut self.tally,
                addr.wrapping_add(aql::offset::GEMM_EXT_ADDRESS as u64),
            )?;
            if ext_addr != 0 {
                if let Some(si) = self.find_shape(ext_addr) {
                    let known = self
                        .shapes
                        .get(usize::from(si))
                        .is_some_and(|s| s.packet_word == word & !BARRIER_BIT);
                    if known {
                        if word & BARRIER_BIT != 0 && outstanding > 0 {
                            return Ok(Class::Wait);
                        }
                        let ko = read_u64(
                            p,
                            &mut self.tally,
                            addr.wrapping_add(aql::offset::KERNEL_OBJECT as u64),
                        )?;
                        let signal = read_u64(
                            p,
                            &mut self.tally,
                            addr.wrapping_add(aql::offset::COMPLETION_SIGNAL as u64),
                        )?;
                        if self
                            .shapes
                            .get(usize::from(si))
                            .is_some_and(|s| s.lists(ko))
                            && !in_rings(self.rings, signal)
                        {
                            return Ok(Class::Gemm(si, ko));
                        }
                    }
                }
            }
        }
        self.classify_full(cfg, outstanding, addr, p)
    }

    /// The full decode and validation of the packet at `addr`.
    fn classify_full<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        outstanding: u32,
        addr: DevAddr,
        p: &mut P,
    ) -> Result<Class, FirmwareError> {
        let mut bytes = [0u8; AQL_PACKET_BYTES];
        read(p, &mut self.work, addr, &mut bytes)?;
        self.work.packets_decoded = self.work.packets_decoded.wrapping_add(1);
        if aql::raw_header(&bytes) & 0xFF == PacketType::Invalid as u16 {
            return Ok(Class::Wait);
        }
        let packet = match aql::decode(&bytes) {
            Ok(pk) => pk,
            Err(e) => return Ok(Class::Reject(RejectReason::Packet(e))),
        };
        if packet.header().barrier && outstanding > 0 {
            return Ok(Class::Wait);
        }
        match packet {
            AqlPacket::Invalid(_) => Ok(Class::Wait),
            AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
                if let Err(e) = b.validate(&cfg.device) {
                    return Ok(Class::Reject(RejectReason::Packet(e)));
                }
                if b.completion_signal != 0 && in_rings(self.rings, b.completion_signal) {
                    return Ok(Class::Reject(ring_signal(b.completion_signal)));
                }
                let and = matches!(packet, AqlPacket::BarrierAnd(_));
                let (mut any_zero, mut all_zero, mut failed) = (false, true, None);
                let mut deps = 0;
                for (i, &sig) in b.dep_signal.iter().enumerate() {
                    if sig == 0 {
                        continue;
                    }
                    deps += 1;
                    let v = read_u64(p, &mut self.tally, sig)? as i64;
                    any_zero |= v == 0;
                    all_zero &= v == 0;
                    if v < 0 && failed.is_none() {
                        failed = Some(RejectReason::DependencyFailed {
                            index: i as u8,
                            value: v,
                        });
                    }
                }
                let satisfied = deps == 0 || if and { all_zero } else { any_zero };
                Ok(match failed {
                    Some(r) if and || !satisfied => Class::Reject(r),
                    _ if satisfied => Class::BarrierDone,
                    _ => Class::Wait,
                })
            }
            AqlPacket::KernelDispatch(k) => {
                if let Err(e) = k.validate(&cfg.device, GEMM_EXT_BYTES as u64) {
                    return Ok(Class::Reject(RejectReason::Packet(e)));
                }
                if k.completion_signal != 0 && in_rings(self.rings, k.completion_signal) {
                    return Ok(Class::Reject(ring_signal(k.completion_signal)));
                }
                if k.gemm_ext_address == 0 || !cfg.concurrency_control {
                    return Ok(Class::Kernel(k.kernel_object));
                }
                let si = match self.find_shape(k.gemm_ext_address) {
                    Some(si) => si,
                    None => match self.learn_shape(cfg, k.gemm_ext_address, p) {
                        Ok(si) => si,
                        Err(reason) => return Ok(Class::Reject(reason)),
                    },
                };
                let Some(shape) = self.shapes.get_mut(usize::from(si)) else {
                    return Ok(Class::Reject(RejectReason::KernelNotListed {
                        address: k.kernel_object,
                    }));
                };
                if !shape.lists(k.kernel_object) {
                    return Ok(Class::Reject(RejectReason::KernelNotListed {
                        address: k.kernel_object,
                    }));
                }
                let word = u32::from_le_bytes([
                    bytes.first().copied().unwrap_or(0),
                    bytes.get(1).copied().unwrap_or(0),
                    bytes.get(2).copied().unwrap_or(0),
                    bytes.get(3).copied().unwrap_or(0),
                ]);
                if shape.packet_word == 0 {
                    shape.packet_word = word & !BARRIER_BIT;
                }
                Ok(Class::Gemm(si, k.kernel_object))
            }
        }
    }

    /// Reads, validates and predicts a GEMM extension record seen for the first time,
    /// and enters it in the shape table (evicting the oldest entry when full).
    fn learn_shape<P: DeviceMemory>(
        &mut self,
        cfg: &CpConfig,
        ext_addr: u64,
        p: &mut P,
    ) -> Result<u8, RejectReason> {
        let mut ext_bytes = [0u8; GEMM_EXT_BYTES];
        read(p, &mut self.work, ext_addr, &mut ext_bytes).map_err(RejectReason::Memory)?;
        let ext = GemmExt::decode(&ext_bytes).map_err(RejectReason::Extension)?;
        if let Some((index, km)) = ext.kernels.iter().enumerate().find(|(_, km)| {
            !cfg.device
                .contains(km.kernel_object, KERNEL_DESCRIPTOR_BYTES)
        }) {
            return Err(RejectReason::KernelObject {
                index: index as u8,
                address: km.kernel_object,
            });
        }
        if let Some(index) = ext
            .kernels
            .iter()
            .position(|km| checked_workgroups(&ext, km).is_none())
        {
            return Err(RejectReason::GridTooLarge { index: index as u8 });
        }
        let cand = GemmCandidate::new(&ext, &cfg.resources).map_err(RejectReason::Features)?;
        self.work.predictions = self.work.predictions.saturating_add(1);
        self.work.predictor_macs = self
            .work
            .predictor_macs
            .saturating_add(((CLASS_COUNT + 1) * FEATURE_COUNT) as u64);
        let predicted = cfg.predictor.predict_cd(&cand.features);
        let mut kos = [0u64; MAX_KERNEL_OBJECTS];
        for (d, km) in kos.iter_mut().zip(&ext.kernels) {
            *d = km.kernel_object;
        }
        let shape = Shape {
            ext_addr,
            packet_word: 0,
            problem_id: 0,
            kos,
            n_kos: ext.kernels.len() as u8,
            ko_per_cd: cand.ko_per_cd,
            predicted,
            problem: cand.problem,
        };
        let index = if self.shapes.push(shape).is_ok() {
            self.shapes.len().saturating_sub(1) as u8
        } else {
            // Full: replace the oldest entry; heads classified with it are classified
            // again.
            let victim = self.next_victim;
            self.next_victim = ((usize::from(victim) + 1) % MAX_SHAPES) as u8;
            if let Some(slot) = self.shapes.get_mut(usize::from(victim)) {
                *slot = shape;
            }
            for q in self.queues.iter_mut().filter(|q| q.head == victim) {
                q.head = HEAD_NONE;
                q.dirty = true;
                self.pending = true;
            }
            victim
        };
        // Problem ids: the index of the first shape with the same problem.
        for i in 0..self.shapes.len() {
            let Some(problem) = self.shapes.get(i).map(|s| s.problem) else {
                continue;
            };
            let first = self
                .shapes
                .iter()
                .position(|s| s.problem == problem)
                .unwrap_or(i);
            if let Some(s) = self.shapes.get_mut(i) {
                s.problem_id = first as u8;
            }
        }
        Ok(index)
    }

    /// Dispatches non-GEMM heads, then decides and dispatches a GEMM group if none is
    /// still running.
    fn dispatch_heads<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        heads: &[u8],
    ) -> Result<(), FirmwareError> {
        let mut gemm_q = [0u8; MAX_QUEUES];
        let mut problem = [0u8; MAX_QUEUES];
        let mut predicted = [0u8; MAX_QUEUES];
        let mut ng = 0usize;
        for &q in heads {
            let Some(qs) = self.queues.get(usize::from(q)) else {
                continue;
            };
            let head = qs.head;
            if head == HEAD_KERNEL {
                let (id, ko) = (qs.head_id, qs.head_ko);
                if !self.dispatch_one(cfg, p, q, id, ko, ko, false, 1, 1)? {
                    return Ok(());
                }
            } else if let Some(s) = self.shapes.get(usize::from(head)) {
                if let (Some(gq), Some(pi), Some(pp)) = (
                    gemm_q.get_mut(ng),
                    problem.get_mut(ng),
                    predicted.get_mut(ng),
                ) {
                    *gq = q;
                    *pi = s.problem_id;
                    *pp = s.predicted;
                    ng += 1;
                }
            }
        }
        if self.gemm_group_in_flight > 0 || ng == 0 {
            return Ok(());
        }
        let d = decide_by_problem(
            problem.get(..ng).unwrap_or_default(),
            predicted.get(..ng).unwrap_or_default(),
            &mut self.work,
        );
        if !d.baseline {
            let n = cfg.queues.len().max(1);
            self.rr_start = ((usize::from(self.rr_start) + 1) % n) as u8;
        }
        let cd_index = GemmExt::cd_index(d.cd);
        for &i in d.chosen.iter() {
            let Some(&q) = gemm_q.get(usize::from(i)) else {
                continue;
            };
            let Some(qs) = self.queues.get(usize::from(q)) else {
                continue;
            };
            let (id, head, own) = (qs.head_id, qs.head, qs.head_ko);
            let Some(shape) = self.shapes.get(usize::from(head)) else {
                continue;
            };
            let ko = if d.baseline {
                own
            } else {
                shape.ko_per_cd.get(cd_index).copied().unwrap_or(own)
            };
            if !self.dispatch_one(cfg, p, q, id, own, ko, true, d.cd, d.predicted)? {
                break;
            }
        }
        Ok(())
    }

    /// One dispatch; `Ok(false)` when the dispatcher is busy (retry on a later event).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn dispatch_one<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        queue: u8,
        dispatch_id: u64,
        own_kernel_object: u64,
        kernel_object: u64,
        gemm: bool,
        cd: u8,
        predicted_cd: u8,
    ) -> Result<bool, FirmwareError> {
        let qi = usize::from(queue);
        let swapped = kernel_object != own_kernel_object;
        if swapped {
            let addr = cfg
                .queues
                .get(qi)
                .map_or(0, |qc| qc.packet_addr(dispatch_id))
                .wrapping_add(aql::offset::KERNEL_OBJECT as u64);
            self.tally.writes = self.tally.writes.wrapping_add(2);
            p.write_u32(addr, kernel_object as u32)?;
            p.write_u32(addr.wrapping_add(4), (kernel_object >> 32) as u32)?;
        }
        let req = DispatchRequest {
            queue,
            dispatch_id,
            kernel_object,
        };
        match p.dispatch(&req) {
            Ok(()) => {}
            Err(DispatchError::Busy) => return Ok(false),
            Err(DispatchError::BadPacket) => {
                // The dispatcher found what the fast path does not re-check on a later
                // packet of a known shape: the packet is rejected like any malformed one
                // (completed with its error code), and the queue moves on.
                let reason = RejectReason::DispatchRefused;
                p.complete_without_dispatch(queue, dispatch_id, reason.signal_value())?;
                self.completed(queue, dispatch_id, CpAction::Rejected(reason));
                if let Some(q) = self.queues.get_mut(qi) {
                    q.next_id = dispatch_id.wrapping_add(1);
                    q.head = HEAD_NONE;
                    q.dirty = true;
                }
                // The queue's next packet (and any barrier on this signal) is looked at
                // in a follow-up event.
                self.mark_waiting_dirty();
                self.pending = true;
                return Ok(true);
            }
            Err(e) => return Err(e.into()),
        }
        self.tally.dispatches = self.tally.dispatches.wrapping_add(1);
        if let Some(q) = self.queues.get_mut(qi) {
            q.dispatching = Some(dispatch_id);
            if gemm {
                q.group_member = Some(dispatch_id);
            }
            q.outstanding = q.outstanding.wrapping_add(1);
            q.next_id = dispatch_id.wrapping_add(1);
            q.head = HEAD_NONE;
            q.dirty = true;
        }
        if gemm {
            self.gemm_group_in_flight = self.gemm_group_in_flight.saturating_add(1);
        }
        self.log(
            queue,
            dispatch_id,
            CpAction::Dispatched {
                kernel_object,
                gemm,
                cd,
                predicted_cd,
                swapped,
            },
        );
        Ok(true)
    }
}
