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
    decide, decide_by_problem, decide_first_size, decide_masks, Decision, GemmCandidate,
    ProblemKey, MAX_CANDIDATES, MAX_CD,
};
pub use features::{CuResources, FeatureError, FEATURE_COUNT};
pub use predictor::{CdPredictor, CLASS_COUNT};
pub use queue::{QueueConfig, QueueTable, QueueTableError, MAX_QUEUES};
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
    DevAddr, DeviceMemory, DispatchError, DispatchRequest, KernelDispatcher, MappedFifo,
    MemoryError,
};
use crate::{Event, FirmwareError};
use queue::{low_id, QueueState, HEAD_KERNEL, HEAD_NONE, NO_KEY};

/// Packets the CP classifies in one event handler; the rest waits for the next event
/// ([`CommandProcessor::has_pending_work`] tells the platform to send one).
pub const MAX_PACKETS_PER_EVENT: usize = 32;

/// Queues, in priority order, a steady-state decision looks at at least
/// ([`CpState::decide_steady`]) before it leaves the rest to a follow-up event, after
/// the group is dispatched. Half the queues: a prediction of up to 8 with two GEMM sizes
/// interleaved is fixed within it.
pub const DECISION_PREFIX_QUEUES: usize = 16;
/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): enough for
/// one handler's packets plus one dispatch per queue (16 with the `small-tables`
/// feature: a platform that drains the log after every handler).
#[cfg(not(feature = "small-tables"))]
pub const LOG_CAPACITY: usize = MAX_PACKETS_PER_EVENT + MAX_QUEUES;
/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): 16 with the
/// `small-tables` feature (a platform that drains the log after every handler).
#[cfg(feature = "small-tables")]
pub const LOG_CAPACITY: usize = 16;

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
    /// Active queues, index = queue id (addresses kept as 32-bit offsets,
    /// [`QueueTable`]).
    pub queues: QueueTable,
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

/// Rejections whose reasons the log holds (the log's other records are 20 bytes; a
/// reason is larger). As many as the log has entries: one handler can reject every
/// packet it looks at (a queue of 16 garbage packets and more), and a reason queue
/// shorter than the log would drop records that a platform draining after every handler
/// must see (the `cp_stream` fuzz target found it with 16). 4 with the `small-tables`
/// feature (HiFive1: not yet running the CP; docs/decisions/board.md).
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
struct LogEntry {
    id: [u32; 2],
    ko: [u32; 2],
    meta: u32,
}

impl LogEntry {
    const EMPTY: Self = Self {
        id: [0; 2],
        ko: [0; 2],
        meta: 0,
    };

    /// The record of packet `id` dispatched with kernel object `ko` (`meta`: see
    /// [`LogEntry`]).
    #[inline(always)]
    fn dispatch(id: u64, ko: u64, meta: u32) -> Self {
        Self {
            id: [id as u32, (id >> 32) as u32],
            ko: [ko as u32, (ko >> 32) as u32],
            meta,
        }
    }

    /// `meta` without the queue byte.
    #[inline(always)]
    fn meta(kind: u8, cd: u8, predicted: u8) -> u32 {
        u32::from(kind) << 8 | u32::from(cd) << 16 | u32::from(predicted) << 24
    }

    #[inline(always)]
    fn queue(&self) -> u8 {
        self.meta as u8
    }

    #[inline(always)]
    fn kind(&self) -> u8 {
        (self.meta >> 8) as u8
    }
}

/// The log's storage: a ring of [`LOG_CAPACITY`] (a power of two) entries between two
/// free-running counters.
#[derive(Debug)]
struct LogRing {
    buf: [LogEntry; LOG_CAPACITY],
    head: u32,
    tail: u32,
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
    fn pop_front(&mut self) -> Option<LogEntry> {
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
    fn put(buf: &mut [LogEntry; LOG_CAPACITY], tail: u32, e: LogEntry) {
        if let Some(slot) = buf.get_mut(tail as usize & (LOG_CAPACITY - 1)) {
            *slot = e;
        }
    }

    /// Appends `e` when the caller knows the ring has room (it drops nothing).
    #[inline(always)]
    fn push_with_room(&mut self, e: LogEntry) {
        Self::put(&mut self.buf, self.tail, e);
        self.tail = self.tail.wrapping_add(1);
    }

    /// Appends `e`; returns the oldest entry, dropped to make room, when full.
    #[inline(always)]
    fn push_back(&mut self, e: LogEntry) -> Option<LogEntry> {
        let dropped = if self.tail.wrapping_sub(self.head) >= LOG_CAPACITY as u32 {
            self.pop_front()
        } else {
            None
        };
        self.push_with_room(e);
        dropped
    }
}

const LOG_REJECTED: u8 = 1;
const LOG_BARRIER: u8 = 2;
const LOG_DISPATCHED: u8 = 4;
const LOG_GEMM: u8 = 8;
const LOG_SWAPPED: u8 = 16;

/// GEMM shapes (extension records) the CP remembers: their validated kernel map and
/// their predicted CD. A training step has a handful of distinct GEMMs; one per queue
/// head means a full set of heads never evicts a shape another head still uses. With
/// the `small-tables` feature (a 16 KiB-RAM board, whose window holds two GEMM records)
/// 2: more distinct shapes at the heads than that evict one another (each eviction
/// re-reads, re-validates and re-predicts a record), which costs time, not correctness.
pub const MAX_SHAPES: usize = if cfg!(feature = "small-tables") {
    2
} else {
    MAX_QUEUES
};

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
    /// No other shape has this one's problem (its candidates are its problem's).
    sole: bool,
    /// A kernel object the record lists: the first packet validated with it carried
    /// this one (before that packet, the record's first). A producer keeps putting the
    /// same one in its packets, so the steady lane's check that a packet's kernel
    /// object is listed is one comparison.
    seen_ko: u64,
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
    /// The kernel object a packet of this shape carrying `own` runs with for CD index
    /// `cdi` (its own for none), or `None` when the record does not list `own`.
    #[inline(never)]
    fn decide(&self, own: u64, cdi: usize) -> Option<u64> {
        self.decide_inline(own, cdi)
    }

    /// [`Shape::decide`] where it is taken once per handler (the steady lane): inline,
    /// no call and no result through memory.
    #[inline(always)]
    fn decide_inline(&self, own: u64, cdi: usize) -> Option<u64> {
        (own == self.seen_ko || self.lists(own))
            .then(|| self.ko_per_cd.get(cdi).copied().unwrap_or(own))
    }

    #[inline(always)]
    fn lists(&self, ko: u64) -> bool {
        self.kos
            .iter()
            .take(usize::from(self.n_kos))
            .any(|&k| k == ko)
    }
}

/// What [`CpState::steady_group`] did.
enum Steady {
    /// Not the steady state, or it did not hold: nothing decided or dispatched, every
    /// queue the lane looked at still dirty (a head it set is set again by the general
    /// path, which classifies every dirty queue and decides).
    No,
    /// Decided and the group handed to the dispatcher.
    Dispatched,
}

/// [`CpState::decide_steady`]'s answer.
struct SteadyDecision {
    /// Chosen queues ([`rotate`]d), CD and prediction, as [`decide_first_size`]'s.
    decided: (u32, u8, u8),
    /// The dirty queues of the decision's range: their keys are to be checked.
    check: u32,
    /// How many (`check`'s bits).
    due: u32,
    /// The chosen queues in queue order.
    members: u32,
    /// The members' shape when they are all expected to be one.
    shape: Option<u8>,
    /// The first candidate in priority order: the group's first member.
    first: usize,
}

/// What a head packet needs.
enum Class {
    /// A GEMM of shape (index) `.0`.
    Gemm(u8),
    /// A non-GEMM kernel with this kernel object.
    Kernel(u64),
    Reject(RejectReason),
    BarrierDone,
    Wait,
}

/// The command processor's state.
#[derive(Debug, Default)]
pub struct CommandProcessor {
    /// Meaningful only while `state.configured` (kept in place rather than in an
    /// `Option`, so [`CommandProcessor::configure_in_place`] needs no temporary).
    config: CpConfig,
    state: CpState,
}

/// Per-queue flags are bits (bit `q` for queue `q`) of the masks below, so an event that
/// touches many queues (a doorbell bitmap, a completion that may release barriers) costs
/// a word operation, and the decision works on masks rather than on per-queue records.
#[derive(Debug, Default)]
struct CpState {
    /// The bytes the queue rings span, as `(first - 7, end - (first - 7))` (saturating):
    /// an 8-byte completion signal at `a` overlaps them iff `a - .0 < .1` (wrapping), one
    /// compare. A signal there would, when decremented, rewrite another packet's header
    /// (computed at `configure`).
    rings: (DevAddr, u64),
    /// [`rings_window`] of `rings` (computed with it: every dispatch checks its members'
    /// signals against it), `[0; 3]` with `ring_window_ok` false when there is
    /// none. (Not an `Option`: with one, the derived `Default` built the whole state on
    /// the stack at start-up, 7,132 B of stack on the virt board instead of 1,236.)
    ring_window: [u32; 3],
    ring_window_ok: bool,
    queues: QueueStates,
    /// Something may have changed (doorbell, head moved, completion, timer): re-read the
    /// write index on the next scan. A clean queue costs the scan nothing.
    dirty: u32,
    /// The head waits for a signal, the barrier bit or publication.
    waiting: u32,
    /// Dispatched; its workgroups are still being placed (the head has not moved).
    dispatching: u32,
    /// The queue has a member in the GEMM group in flight.
    in_group: u32,
    /// Queues whose classified head is a non-GEMM kernel.
    kernel_heads: u32,
    /// Per shape (index into `shapes`): the queues whose classified head is a GEMM of
    /// that shape.
    shape_heads: [u32; MAX_SHAPES],
    /// Per shape: the queues whose cached shape key (`QueueState::last_shape`) is that
    /// shape, so the fast path classifies a head with one store and one bit.
    last_masks: [u32; MAX_SHAPES],
    /// Queues whose words' indices in the mapped view are computed (`QueueState::view_*`).
    mapped: u32,
    /// Scratch of the decision: per GEMM problem, the queues whose head is one.
    problem_heads: [u32; MAX_SHAPES],
    shapes: Vec<Shape, MAX_SHAPES>,
    /// Device address of word 0 of the mapped view the queues' view indices refer to.
    view_base: DevAddr,
    next_victim: u8,
    completions_this_scan: u32,
    tally: Tally,
    gemm_group_in_flight: u8,
    rr_start: u8,
    work: CpWork,
    /// The log: compact entries, the reasons of rejections beside them (in the same
    /// order).
    log: LogRing,
    rejects: Deque<RejectReason, REJECT_CAPACITY>,
    log_dropped: u64,
    pending: bool,
    /// `CommandProcessor::config` holds a checked configuration.
    configured: bool,
}

/// Checks every queue descriptor of `config` and returns the CP's `rings` span
/// (`CpState::rings`).
fn check_config(config: &CpConfig) -> Result<(DevAddr, u64), CpError> {
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
    let lo = rings.0.saturating_sub(7);
    Ok((lo, rings.1.saturating_sub(lo)))
}

impl Default for CpConfig {
    /// [`CpConfig::empty`].
    fn default() -> Self {
        Self::empty()
    }
}

impl CpConfig {
    /// No queues, an empty device range, MI100 resources, the untrained predictor and
    /// concurrency control on (what [`CommandProcessor::configure_in_place`] fills).
    pub fn empty() -> Self {
        Self {
            queues: QueueTable::new(),
            device: DeviceRange { base: 0, len: 0 },
            resources: CuResources::MI100,
            predictor: CdPredictor::default(),
            concurrency_control: true,
        }
    }
}

impl CpState {
    /// Resets to `CpState { rings, ..CpState::default() }` in place (no 3 KiB
    /// temporary on a small board's stack). Every field is named, so a new field
    /// fails to compile here until it is reset too.
    fn reset(&mut self, rings_span: (DevAddr, u64)) {
        let CpState {
            rings,
            ring_window,
            ring_window_ok,
            queues,
            dirty,
            waiting,
            dispatching,
            in_group,
            kernel_heads,
            shape_heads,
            last_masks,
            mapped,
            problem_heads,
            shapes,
            view_base,
            next_victim,
            completions_this_scan,
            tally,
            gemm_group_in_flight,
            rr_start,
            work,
            log,
            rejects,
            log_dropped,
            pending,
            configured,
        } = self;
        *rings = rings_span;
        let window = rings_window(rings_span);
        *ring_window = window.unwrap_or_default();
        *ring_window_ok = window.is_some();
        queues.restart();
        *dirty = 0;
        *waiting = 0;
        *dispatching = 0;
        *in_group = 0;
        *kernel_heads = 0;
        *shape_heads = [0; MAX_SHAPES];
        *last_masks = [0; MAX_SHAPES];
        *mapped = 0;
        *problem_heads = [0; MAX_SHAPES];
        shapes.clear();
        *view_base = 0;
        *next_victim = 0;
        *completions_this_scan = 0;
        *tally = Tally::default();
        *gemm_group_in_flight = 0;
        *rr_start = 0;
        *work = CpWork::default();
        log.buf.fill(LogEntry::EMPTY);
        log.head = 0;
        log.tail = 0;
        rejects.clear();
        *log_dropped = 0;
        *pending = false;
        *configured = false;
    }
}

/// Every queue's state. Its `Default` copies one constant (`[T; 32]::default()` would
/// be 32 unrolled constructions, ~3.7 KiB of flash per instance).
#[derive(Debug)]
struct QueueStates([QueueState; MAX_QUEUES]);

impl QueueStates {
    /// The whole array as one constant, so `default` copies it from flash instead of
    /// building it in a stack temporary (2.3 KiB of start-up stack on a 16 KiB board).
    /// (Each with its [`QueueState::index`]. Indexing in a constant is evaluated by the
    /// compiler: out of bounds would fail the build, it cannot panic at run time.)
    #[allow(clippy::indexing_slicing)]
    const ALL: [QueueState; MAX_QUEUES] = {
        let mut all = [QueueState::INIT; MAX_QUEUES];
        let mut i = 0;
        while i < MAX_QUEUES {
            all[i].index = i as u8;
            i += 1;
        }
        all
    };
}

impl QueueStates {
    /// Every queue as [`QueueStates::ALL`] has it (copied in place: the whole array
    /// as one value would be built on the stack first).
    fn restart(&mut self) {
        self.0.copy_from_slice(&Self::ALL);
    }
}

impl Default for QueueStates {
    fn default() -> Self {
        Self(Self::ALL)
    }
}

impl core::ops::Deref for QueueStates {
    type Target = [QueueState; MAX_QUEUES];
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl core::ops::DerefMut for QueueStates {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

/// Bit of queue `q` in the per-queue masks.
#[inline(always)]
fn bit(q: usize) -> u32 {
    1u32 << (q & 31)
}

/// The mask of queues `0..n`.
#[inline(always)]
fn active_mask(n: usize) -> u32 {
    1u32.checked_shl(n as u32)
        .map_or(u32::MAX, |b| b.wrapping_sub(1))
}

/// `m` (bits `0..n`) in priority order: bit `j` of the result is queue `(start + j) % n`.
#[inline(always)]
fn rotate(m: u32, start: usize, n: usize) -> u32 {
    // Shift amounts wrap at 32 (one instruction each on RISC-V): exact for
    // `start < n <= 32`, the only rotations there are (`start == 0, n == 32` gives
    // `m | m`); anything else gives some mask, never a panic.
    let lo = m.wrapping_shr(start as u32);
    let hi = m.wrapping_shl(n.wrapping_sub(start) as u32);
    (lo | hi) & active_mask(n)
}

/// A [`rotate`]d mask (from `start`, over `n` queues) back in queue order: bit `q` for
/// queue `q`.
#[inline(always)]
fn unrotate_mask(m: u32, start: usize, n: usize) -> u32 {
    let back = if start == 0 { 0 } else { n.wrapping_sub(start) };
    rotate(m, back, n)
}

/// The queue of bit `j` of a [`rotate`]d mask.
#[inline(always)]
fn unrotate(j: usize, start: usize, n: usize) -> usize {
    let q = start.wrapping_add(j);
    if q >= n {
        q.wrapping_sub(n)
    } else {
        q
    }
}

/// Sets queue `qs`'s (bit `qbit`) classified head, keeping the head masks in step.
#[inline(always)]
fn set_head(
    kernel_heads: &mut u32,
    shape_heads: &mut [u32; MAX_SHAPES],
    qs: &mut QueueState,
    qbit: u32,
    head: u8,
) {
    let old = qs.head;
    if old == head {
        return;
    }
    if old == HEAD_KERNEL {
        *kernel_heads &= !qbit;
    } else if let Some(m) = shape_heads.get_mut(usize::from(old)) {
        *m &= !qbit;
    }
    if head == HEAD_KERNEL {
        *kernel_heads |= qbit;
    } else if let Some(m) = shape_heads.get_mut(usize::from(head)) {
        *m |= qbit;
    }
    qs.head = head;
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
        let rings = check_config(&config)?;
        self.config = config;
        self.state = CpState {
            rings,
            configured: true,
            ..CpState::default()
        };
        Ok(())
    }

    /// [`CommandProcessor::configure`] without moving a configuration or a state
    /// through the stack (a board with 16 KiB of RAM, docs/decisions/board.md): `fill`
    /// writes the new configuration over the current one (or over an empty one with
    /// the untrained predictor), which is then checked, and all queue state is
    /// forgotten in place.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor; the CP is then left
    /// unconfigured (it ignores events until configured again).
    pub fn configure_in_place(&mut self, fill: impl FnOnce(&mut CpConfig)) -> Result<(), CpError> {
        self.state.configured = false;
        fill(&mut self.config);
        let rings = check_config(&self.config)?;
        self.state.reset(rings);
        self.state.configured = true;
        Ok(())
    }

    /// Forgets all queue state but keeps the GEMM shapes learnt so far (their validated
    /// records and predictions), as after the host re-creates its queues between two
    /// training iterations with the same GEMMs. Only valid while the records stay where
    /// they were ([`CommandProcessor::configure`] forgets them).
    pub fn restart_queues(&mut self) {
        let s = &mut self.state;
        s.queues.restart();
        s.mapped = 0;
        s.dirty = 0;
        s.waiting = 0;
        s.dispatching = 0;
        s.in_group = 0;
        s.kernel_heads = 0;
        s.shape_heads = [0; MAX_SHAPES];
        s.last_masks = [0; MAX_SHAPES];
        s.completions_this_scan = 0;
        s.gemm_group_in_flight = 0;
        s.rr_start = 0;
        s.pending = false;
    }

    /// Makes queue `queue` the first the next scan visits (the highest priority; the
    /// CP rotates it after every decision). Out-of-range queues are ignored.
    pub fn set_rotation(&mut self, queue: u8) {
        if self.state.configured && usize::from(queue) < self.config.queues.len() {
            self.state.rr_start = queue;
        }
    }

    /// GEMM shapes in the shape table.
    pub fn shapes_known(&self) -> usize {
        self.state.shapes.len()
    }

    /// The configuration, if any.
    pub fn config(&self) -> Option<&CpConfig> {
        self.state.configured.then_some(&self.config)
    }

    /// Work done so far.
    pub fn work(&self) -> CpWork {
        let mut work = self.state.work;
        let mut tally = self.state.tally;
        tally.fold_into(&mut work);
        work
    }

    /// The oldest undrained log record.
    pub fn pop_record(&mut self) -> Option<CpRecord> {
        let s = &mut self.state;
        let e = s.log.pop_front()?;
        let id = u64::from(e.id[0]) | (u64::from(e.id[1]) << 32);
        let action = match e.kind() {
            LOG_REJECTED => CpAction::Rejected(
                // Always there: a rejection's reason leaves only with its entry.
                s.rejects
                    .pop_front()
                    .unwrap_or(RejectReason::DispatchRefused),
            ),
            LOG_BARRIER => CpAction::BarrierResolved,
            flags => CpAction::Dispatched {
                kernel_object: u64::from(e.ko[0]) | (u64::from(e.ko[1]) << 32),
                gemm: flags & LOG_GEMM != 0,
                cd: (e.meta >> 16) as u8,
                predicted_cd: (e.meta >> 24) as u8,
                swapped: flags & LOG_SWAPPED != 0,
            },
        };
        Some(CpRecord {
            queue: e.queue(),
            dispatch_id: id,
            action,
        })
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
        let Some(cfg) = self.state.configured.then_some(&self.config) else {
            return Ok(());
        };
        // (The handler is counted by the scan, in the tally.)
        let s = &mut self.state;
        match *event {
            Event::Doorbell { queue } => {
                // Only the rung queues: this one and those in the platform's doorbell
                // bitmap (rung while this event waited); the others' write indices have
                // not moved.
                s.dirty |= p.take_doorbells() | 1u32.checked_shl(u32::from(queue)).unwrap_or(0);
            }
            Event::KernelDispatched { queue, dispatch_id } => {
                let qi = usize::from(queue);
                if let Some(q) = s.queues.get(qi) {
                    let b = bit(qi);
                    s.dirty |= b;
                    // While a queue is dispatching, its next id is the one after the
                    // dispatched packet (the scan does not visit it, nothing advances it).
                    if s.dispatching & b != 0 && q.next_id.wrapping_sub(1) == dispatch_id {
                        s.dispatching &= !b;
                    }
                }
            }
            Event::KernelCompleted {
                queue, dispatch_id, ..
            } => {
                let qi = usize::from(queue);
                if let Some(q) = s.queues.get_mut(qi) {
                    let b = bit(qi);
                    q.outstanding = q.outstanding.saturating_sub(1);
                    s.dirty |= b;
                    // A group of CD GEMMs runs together; the next group starts when the
                    // whole group has completed (CD 1 serialises).
                    if s.in_group & b != 0 && q.group_id == low_id(dispatch_id) {
                        s.in_group &= !b;
                        s.gemm_group_in_flight = s.gemm_group_in_flight.saturating_sub(1);
                    }
                }
                // A completion signal changed: waiting barriers may resolve.
                s.mark_waiting_dirty();
            }
            // A handler stopped with work left (its packet budget, a rejection's next
            // packet, barriers to look at again, queues a fixed decision did not need):
            // that work is the dirty queues already.
            Event::Deferred => {}
            _ => s.dirty = u32::MAX,
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

/// Counts of the hot path, in 32-bit words (cheap on RV32), added to [`CpWork`]'s
/// 64-bit totals when read ([`CommandProcessor::work`]) and folded into them only before
/// a count could wrap.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    /// Event handlers run (by a configured CP; [`CpState::scan`] counts them and folds
    /// the tally every 2^12).
    handlers: u32,
    /// GEMM decisions taken.
    decisions: u32,
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
    /// Of `dispatches`, the steady lane's.
    mapped_dispatches: u32,
}

impl Tally {
    /// Queues whose head was settled by its key (3 words read: header and record
    /// address), as the fast path counts them: each a mapped visit and a packet
    /// inspected.
    #[inline(always)]
    fn count_key_visits(&mut self, n: u32) {
        self.reads = self.reads.wrapping_add(n.wrapping_mul(3));
        self.inspected = self.inspected.wrapping_add(n);
        self.mapped_visits = self.mapped_visits.wrapping_add(n);
    }

    fn fold_into(&mut self, work: &mut CpWork) {
        work.handlers = work.handlers.saturating_add(u64::from(self.handlers));
        work.decisions = work.decisions.saturating_add(u64::from(self.decisions));
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
        work.mapped_dispatches = work
            .mapped_dispatches
            .saturating_add(u64::from(self.mapped_dispatches));
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

/// Whether the 8-byte signal at `addr` overlaps the queue rings `[first, end)`, given as
/// `rings = (first - 7, end - (first - 7))` (saturating; `CpState::rings`): the same as
/// `addr < end && first < addr + 8` (saturating), in one subtraction and one compare.
#[inline(always)]
fn in_rings(rings: (DevAddr, u64), addr: u64) -> bool {
    addr.wrapping_sub(rings.0) < rings.1
}

/// The rejection of a completion signal inside the queue rings.
fn ring_signal(address: u64) -> RejectReason {
    RejectReason::Packet(aql::AqlError::AddressOutOfRange {
        field: "completion_signal",
        offset: aql::offset::COMPLETION_SIGNAL as u8,
        address,
    })
}

/// Word `k` of a packet's 16.
const W_KO: usize = aql::offset::KERNEL_OBJECT / 4;
const W_EXT: usize = aql::offset::GEMM_EXT_ADDRESS / 4;
const W_SIGNAL: usize = aql::offset::COMPLETION_SIGNAL / 4;
const PACKET_WORDS: usize = AQL_PACKET_BYTES / 4;
// The fast path destructures a packet's words: the record address at words 12-13; the
// dispatch reads words 8..16 (kernel object first, completion signal last).
const _: () = assert!(W_EXT == 12 && W_KO == 8 && W_SIGNAL == W_KO + 6 && PACKET_WORDS == 16);

/// Computes where queue `qs`'s words sit in the mapped view `words` (device address
/// `base`): 32-bit indices of its write index and ring, and reads its read index on the
/// first visit since configuration. False when they are not (all) in the view.
#[inline(never)]
fn map_queue(qs: &mut QueueState, qc: Option<&QueueConfig>, base: DevAddr, words: &[u32]) -> bool {
    let Some(qc) = qc else {
        return false;
    };
    let word = |i: usize| words.get(i).map(|&w| u32::from_le(w));
    let ri = word_index(base, qc.read_index_addr);
    let (Some(wi), Some(ring), Some(lo), Some(hi)) = (
        word_index(base, qc.write_index_addr),
        word_index(base, qc.ring_base),
        ri.and_then(word),
        ri.and_then(|i| word(i.wrapping_add(1))),
    ) else {
        return false;
    };
    let ring_end = ring.saturating_add(qc.size_packets as usize * PACKET_WORDS);
    if ring_end > words.len()
        || wi >= words.len()
        || ring_end > u32::MAX as usize
        || ring % PACKET_WORDS != 0
    {
        return false;
    }
    qs.view_write = wi as u32;
    qs.view_ring = (ring / PACKET_WORDS) as u32;
    qs.ring_mask = qc.size_packets.wrapping_sub(1);
    let mut next = qs.next_id;
    if !qs.synced {
        next = next.max(u64::from(lo) | (u64::from(hi) << 32));
        qs.synced = true;
    }
    qs.set_next(next);
    true
}

/// Pass one of [`CpState::dispatch_group`] over the members of `chosen` (a [`rotate`]d
/// mask from `start` over `n` queues): reads and checks each member's kernel object and
/// completion signal in the mapped `view` (as 64-byte packets), patches the kernel
/// object decided for `cdi` and appends the member's request to `reqs`. Returns the
/// masks (bit `i` for request `i`) of swapped kernel objects, members that failed the
/// checks and members outside the view. Out of line, and in 32-bit words: few values
/// live across its loop (rv32imac has 31 registers; a 64-bit value takes two).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn gather_members(
    shapes: &[Shape],
    queues: &[QueueState; MAX_QUEUES],
    mapped: u32,
    rings: (DevAddr, u64),
    mut view: Option<&mut [u32]>,
    (chosen, start, n): (u32, usize, usize),
    cdi: usize,
    reqs: &mut Vec<DispatchRequest, { MAX_CD as usize }>,
) -> (u32, u32, u32) {
    let mut swaps = 0u32;
    let mut bad = 0u32;
    let mut unread = 0u32;
    // The previous member's shape and what its record lists (`Listed`).
    let mut cur_head = HEAD_NONE;
    let mut cur_shape: Option<&Shape> = None;
    let mut listed = Listed::default();
    let mut rb = 1u32;
    let mut m = chosen;
    while m != 0 && !reqs.is_full() {
        let q = unrotate(m.trailing_zeros() as usize, start, n);
        m &= m.wrapping_sub(1);
        let Some(qs) = queues.get(q) else {
            continue;
        };
        if qs.head != cur_head {
            cur_head = qs.head;
            cur_shape = shapes.get(usize::from(cur_head));
            listed = Listed::default();
        }
        let Some(shape) = cur_shape else {
            // Not a GEMM head (cannot happen): not dispatched.
            continue;
        };
        let packet = view
            .as_mut()
            .filter(|_| mapped & bit(q) != 0)
            .and_then(|v| {
                v.as_chunks_mut::<PACKET_WORDS>()
                    .0
                    .get_mut(qs.view_slot as usize)
            });
        let mut kernel_object = 0;
        if let Some(pk) = packet {
            let (ok, swapped, ko) =
                check_member(pk, shape, cdi, &mut listed, |s| in_rings(rings, join(s)));
            kernel_object = ko;
            if !ok {
                bad |= rb;
            } else if swapped {
                swaps |= rb;
            }
        } else {
            unread |= rb;
        }
        let _ = reqs.push(DispatchRequest {
            queue: q as u8,
            dispatch_id: qs.next_id,
            kernel_object,
        });
        rb <<= 1;
    }
    (swaps, bad, unread)
}

/// [`gather_members`]' common case: every member of `chosen` is in the view `packets`
/// and is a GEMM of `shape`, and the rings lie in one 4 GiB-aligned window (`window`,
/// [`rings_window`]). The same checks, patch and requests, with the shape's kernel
/// object decided once per kernel object the packets carry (once for the whole group
/// when they carry the same). Returns the swapped and failed masks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn gather_uniform(
    queues: &[QueueState; MAX_QUEUES],
    words: &mut [u32],
    (chosen, start, n): (u32, usize, usize),
    shape: &Shape,
    cdi: usize,
    [ring_lo, ring_hi, ring_len]: [u32; 3],
    reqs: &mut Vec<DispatchRequest, { MAX_CD as usize }>,
) -> (u32, u32) {
    let mut swaps = 0u32;
    let mut bad = 0u32;
    let mut listed = Listed::default();
    let mut rb = 1u32;
    let mut m = chosen;
    while m != 0 && !reqs.is_full() {
        let q = unrotate(m.trailing_zeros() as usize, start, n);
        m &= m.wrapping_sub(1);
        let Some(qs) = queues.get(q) else {
            continue;
        };
        let packet = words
            .as_chunks_mut::<PACKET_WORDS>()
            .0
            .get_mut(qs.view_slot as usize);
        let mut kernel_object = 0;
        if let Some(pk) = packet {
            let (ok, swapped, ko) = check_member(pk, shape, cdi, &mut listed, |s| {
                s[1] == ring_hi && s[0].wrapping_sub(ring_lo) < ring_len
            });
            kernel_object = ko;
            if !ok {
                bad |= rb;
            } else if swapped {
                swaps |= rb;
            }
        } else {
            bad |= rb;
        }
        let _ = reqs.push(DispatchRequest {
            queue: q as u8,
            dispatch_id: qs.next_id,
            kernel_object,
        });
        rb <<= 1;
    }
    (swaps, bad)
}

/// `rings` ([`CpState::rings`]) as `[low word of its start, high word, length]` when the
/// span lies in one 4 GiB-aligned window: a signal `s` overlaps the rings iff its high
/// word is that one and `s.lo - start.lo < length` (32-bit).
#[inline(always)]
fn rings_window(rings: (DevAddr, u64)) -> Option<[u32; 3]> {
    let (first, len) = rings;
    let hi = (first >> 32) as u32;
    let lo = first as u32;
    let len32 = u32::try_from(len).ok()?;
    (u64::from(lo) + u64::from(len32) <= 1 << 32).then_some([lo, hi, len32])
}

/// A kernel object the GEMM packets of one shape carry that its record lists (`own`,
/// valid when `known`), and the one decided for it: a group of one shape whose packets
/// carry the same kernel object walks the record's list once.
#[derive(Debug, Clone, Copy, Default)]
struct Listed {
    known: bool,
    own: [u32; 2],
    decided: [u32; 2],
}

/// One group member's dispatch-time checks and patch on its packet `pk` (a GEMM of
/// `shape`): its kernel object is one the record lists and its completion signal (two
/// words) does not `overlap` the queue rings; then the kernel object decided for CD
/// index `cdi` is written when it differs. Returns whether the member passed, whether
/// its kernel object was swapped, and the kernel object its request carries (its own
/// when it failed).
#[inline(always)]
fn check_member(
    pk: &mut [u32; PACKET_WORDS],
    shape: &Shape,
    cdi: usize,
    listed: &mut Listed,
    overlaps: impl Fn([u32; 2]) -> bool,
) -> (bool, bool, u64) {
    let [.., k0, k1, _, _, _, _, s0, s1] = pk;
    let k = [u32::from_le(*k0), u32::from_le(*k1)];
    if !(listed.known && k == listed.own) {
        *listed = match shape.decide(join(k), cdi) {
            Some(ko) => Listed {
                known: true,
                own: k,
                decided: [ko as u32, (ko >> 32) as u32],
            },
            None => Listed::default(),
        };
    }
    if !listed.known || overlaps([u32::from_le(*s0), u32::from_le(*s1)]) {
        return (false, false, join(k));
    }
    let d = listed.decided;
    let swapped = d != k;
    if swapped {
        *k0 = d[0].to_le();
        *k1 = d[1].to_le();
    }
    (true, swapped, join(d))
}

/// The 64-bit value of two little-endian-order 32-bit words (low first).
#[inline(always)]
fn join(w: [u32; 2]) -> u64 {
    u64::from(w[0]) | (u64::from(w[1]) << 32)
}

impl CpState {
    /// Appends a record; when the log is full the oldest records are dropped (and
    /// counted).
    #[inline(always)]
    fn log(&mut self, queue: u8, dispatch_id: u64, action: CpAction) {
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
    fn log_entry(&mut self, e: LogEntry) {
        if let Some(old) = self.log.push_back(e) {
            self.log_dropped = self.log_dropped.saturating_add(1);
            if old.kind() == LOG_REJECTED {
                let _ = self.rejects.pop_front();
            }
        }
    }

    /// Counts a GEMM decision taken from rotation `start` (the queue with the first
    /// priority, `rr_start`) and moves the rotation on by one of the `n` queues.
    #[inline(always)]
    fn decision_taken(&mut self, start: usize, n: usize) {
        self.tally.decisions = self.tally.decisions.wrapping_add(1);
        let next = start + 1;
        self.rr_start = if next >= n { 0 } else { next as u8 };
    }

    #[inline(always)]
    fn mark_waiting_dirty(&mut self) {
        self.dirty |= self.waiting;
    }

    /// Sets queue `qi`'s classified head (and the head masks).
    #[inline(always)]
    fn set_head(&mut self, qi: usize, head: u8) {
        if let Some(qs) = self.queues.get_mut(qi) {
            set_head(
                &mut self.kernel_heads,
                &mut self.shape_heads,
                qs,
                bit(qi),
                head,
            );
        }
    }

    /// The handler's work once the event has set its masks: the steady lane when it may
    /// run ([`CpState::steady_or_general`]), the general path otherwise. Inline in
    /// `on_event`, which then ends in one call and saves no registers but `ra`.
    #[inline(always)]
    fn scan<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.pending = false;
        self.completions_this_scan = 0;
        // (The handler is counted by the path it takes, `count_handler`: no call here
        // but the last, so the entry saves no registers.)
        let n = cfg.queues.len().min(MAX_QUEUES);
        let todo = self.dirty & !self.dispatching & active_mask(n);
        // The steady state, on mapped memory: the decision from the queues' cached keys,
        // checked only as far as it depends on them (`steady_group`). It completes no
        // packet, so no barrier needs another look.
        if todo != 0
            && todo & !self.mapped == 0
            && self.gemm_group_in_flight == 0
            && self.kernel_heads == 0
        {
            return self.steady_or_general(cfg, p, todo, n);
        }
        self.scan_general(cfg, p, n, true)
    }

    /// Counts a handler. A handler adds far less than 2^18 to any tally count (a few
    /// thousand words at most), so folding every 2^12 handlers keeps every count below
    /// 2^30.
    #[inline(always)]
    fn count_handler(&mut self) {
        self.tally.handlers = self.tally.handlers.wrapping_add(1);
        if self.tally.handlers >= 1 << 12 {
            self.fold_tally();
        }
    }

    /// Adds the tally to the work totals (every 2^12 handlers; out of line).
    #[cold]
    #[inline(never)]
    fn fold_tally(&mut self) {
        let mut tally = self.tally;
        tally.fold_into(&mut self.work);
        self.tally = tally;
    }

    /// The steady lane ([`CpState::steady_group`]) and, when it does not dispatch, the
    /// general path. One function for both, whose frame is the handler's: the lane pays
    /// for one prologue. The general path is also reached without it (from
    /// [`CpState::scan`]), so a cold decision's deep calls do not sit under the lane's
    /// frame.
    #[inline(never)]
    fn steady_or_general<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        todo: u32,
        n: usize,
    ) -> Result<(), FirmwareError> {
        self.count_handler();
        if let Steady::Dispatched = self.steady_group(p, todo, n) {
            return Ok(());
        }
        // (Counted above.)
        self.scan_general(cfg, p, n, false)
    }

    /// The rest of a scan ([`CpState::scan`]): every dirty queue classified, then the
    /// decision and the dispatches; the handler counted first when `count`. Out of
    /// line: the steady lane's handler does not save the registers it needs.
    #[inline(never)]
    fn scan_general<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        n: usize,
        count: bool,
    ) -> Result<(), FirmwareError> {
        if count {
            self.count_handler();
        }
        let mut budget = MAX_PACKETS_PER_EVENT;
        // (The dirty queues again, rather than the scan's mask kept live across the
        // steady lane: that costs the steady decision more than this costs here.)
        let todo = self.dirty & !self.dispatching & active_mask(n);
        self.classify_queues(cfg, p, todo, n, &mut budget)?;
        if self.completions_this_scan > 0 && self.waiting != 0 {
            // This scan completed packets whose signals a barrier (possibly in a queue
            // already visited) may wait on: look again in a follow-up event.
            self.mark_waiting_dirty();
            self.pending = true;
        }
        if self.kernel_heads == 0 && self.gemm_group_in_flight > 0 {
            // Nothing `dispatch_heads` could start (its first two steps).
            return Ok(());
        }
        self.dispatch_heads(cfg, p, n)
    }

    /// The GEMM decision and its dispatch in the steady state, on directly mapped
    /// memory, in one pass over the queues it needs.
    ///
    /// Every dirty queue is expected to hold, at its head, a GEMM of the shape its cached
    /// key names (`QueueState::last_shape`); the clean ones keep their classified heads.
    /// The decision is taken on those expected heads first ([`decide_first_size`] on the
    /// masks, no queue read), which tells how far in priority order it depends on them:
    /// up to its `p`-th member when the first candidate's prediction `p` is in `2..16`
    /// and its size has `p` candidates, everywhere otherwise (at least the first
    /// [`DECISION_PREFIX_QUEUES`] positions: fewer would save little and leave more for
    /// the follow-up). The dirty queues in that range have their keys checked (the
    /// members' where their packets are read for the dispatch); when every one holds,
    /// the expected heads are the heads and the decision is the one a scan of every
    /// queue takes. The dirty queues beyond the range are looked at in a follow-up event
    /// (`pending`).
    ///
    /// Why the queues beyond the range cannot change it: they come later in priority
    /// order, so they change neither the first candidate nor the first `p` of its size;
    /// with another size among all the candidates there are more than `p` of them, so
    /// [`decide_first_size`] takes those `p` whatever the later queues hold.
    ///
    /// The members (one shape, one kernel object, checked as at any dispatch) are
    /// patched, booked, logged and their requests written into the dispatcher's FIFO
    /// ([`KernelDispatcher::mapped_fifo`]) as they are read; the dispatcher then takes
    /// the group whole ([`KernelDispatcher::dispatch_pushed`]) or refuses it.
    /// [`Steady::No`] when anything else holds (no FIFO, a key, the general rule
    /// [`decide_masks`], members of several shapes or kernel objects, a member failing
    /// its checks, no room in the log or the FIFO, a refused group): whatever was done
    /// to the members is undone ([`CpState::undo_steady`]), the queues settled so far
    /// stay settled, and the general path classifies every queue still dirty and
    /// decides. The caller checks that no group is in flight, no non-GEMM head waits,
    /// and every queue of `todo` is in the view. Inline in its one caller,
    /// [`CpState::steady_or_general`], whose frame is the lane's.
    #[inline(always)]
    fn steady_group<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        p: &mut P,
        todo: u32,
        n: usize,
    ) -> Steady {
        let Some(SteadyDecision {
            decided: d,
            check,
            due,
            members: unrotated,
            shape: uniform,
            first: q0,
        }) = self.decide_steady(todo, n)
        else {
            return Steady::No;
        };
        let (chosen, cd, pred) = d;
        let start = usize::from(self.rr_start);
        // Until every key of the range has held the decision rests on expected heads: any
        // way out before that is `Steady::No` (the general path classifies what is still
        // dirty, every queue of the range among them, and decides again).
        let (Some(first), Some([ring_lo, ring_hi, ring_len])) =
            (uniform, self.ring_window_ok.then_some(self.ring_window))
        else {
            return Steady::No;
        };
        let (Some(shape), Some(MappedFifo { base, words, fifo })) =
            (self.shapes.get(usize::from(first)), p.mapped_fifo())
        else {
            return Steady::No;
        };
        if base != self.view_base {
            return Steady::No;
        }
        let packets = words.as_chunks_mut::<PACKET_WORDS>().0;
        // Room in the log for every member's record: the bookkeeping below is undone
        // when the group does not go out, and a dropped record could not be.
        if u32::from(cd)
            > (LOG_CAPACITY as u32).wrapping_sub(self.log.tail.wrapping_sub(self.log.head))
        {
            return Steady::No;
        }
        let cdi = GemmExt::cd_index(cd);
        // The kernel object the members carry (the first's; every other must carry the
        // same) and the one decided for it.
        let Some(own) = self
            .queues
            .get(q0)
            .and_then(|qs| packets.get(qs.view_slot as usize))
            .map(|pk| [u32::from_le(pk[W_KO]), u32::from_le(pk[W_KO + 1])])
        else {
            return Steady::No;
        };
        let Some(ko) = shape.decide_inline(join(own), cdi) else {
            return Steady::No;
        };
        let decided = [ko as u32, (ko >> 32) as u32];
        let swapped = decided != own;
        let kind = LOG_DISPATCHED | LOG_GEMM | if swapped { LOG_SWAPPED } else { 0 };
        let meta = LogEntry::meta(kind, cd, pred);
        // Where this group's requests start in the dispatcher's FIFO.
        let from = fifo.len();
        // (Through `black_box`: where the table sits more than 2 KiB into the state, as
        // on the HiFive1 build, LLVM's loop strength reduction otherwise gives every field
        // the walks touch an induction variable of its own, a dozen adds per queue and
        // the rest spilled.)
        let Some((wrapped, first_part)) = core::hint::black_box(self.queues.get_mut(..n))
            .and_then(|qs| qs.split_at_mut_checked(start))
        else {
            return Steady::No;
        };
        // The log's records go in at `tail`, written back after the walks (the room was
        // checked above).
        let log = &mut self.log.buf;
        let mut tail = self.log.tail;
        // Queue `qs`'s part (`member` or only due); `false` when a check fails. (A macro:
        // both walks below inline it.)
        macro_rules! visit {
            ($qs:expr, $member:expr) => {{
                let (qs, member): (&mut QueueState, bool) = ($qs, $member);
                'visit: {
                    let Some(
                        &mut [header, _, _, _, _, _, _, _, ref mut k0, ref mut k1, _, _, e0, e1, s0, s1],
                    ) = packets.get_mut(qs.view_slot as usize)
                    else {
                        break 'visit false;
                    };
                    if u32::from_le(header) != qs.key_word
                        || u32::from_le(e0) != qs.key_ext[0]
                        || u32::from_le(e1) != qs.key_ext[1]
                    {
                        break 'visit false;
                    }
                    if !member {
                        qs.head = qs.last_shape;
                        break 'visit true;
                    }
                    if [u32::from_le(*k0), u32::from_le(*k1)] != own
                        // The completion signal must not overlap the rings (`rings_window`).
                        || (u32::from_le(s1) == ring_hi && u32::from_le(s0).wrapping_sub(ring_lo) < ring_len)
                    {
                        break 'visit false;
                    }
                    let id = qs.next_id;
                    if fifo
                        .push(DispatchRequest {
                            queue: qs.index,
                            dispatch_id: id,
                            kernel_object: ko,
                        })
                        .is_err()
                    {
                        break 'visit false;
                    }
                    *k0 = decided[0].to_le();
                    *k1 = decided[1].to_le();
                    qs.dispatched(id);
                    LogRing::put(log, tail, LogEntry::dispatch(id, ko, meta | u32::from(qs.index)));
                    tail = tail.wrapping_add(1);
                    true
                }
            }};
        }
        // The queues of the range in priority order, from `start` to the last queue and
        // then from queue 0 (two plain walks: no wrap-around per step): bit 0 of `v` is
        // the queue being visited (a member, or its key due: dirty), of `m` its being a
        // member. A member is checked, patched, booked, logged and its request pushed
        // into the dispatcher's FIFO as it is read, another dirty queue's head is set as
        // its key holds (one pass that knows where everything is); when a later check
        // fails, the members' part is undone (`undo_steady`; the heads set stay dirty:
        // the general path sets them again). Every member's key is checked, the clean
        // ones' too (a clean head's key is its shape's: a mismatch only sends the
        // decision the general way).
        let mut m = chosen;
        let mut v = m | rotate(check, start, n);
        let mut failed = false;
        // One walk over a part of the table (`$done`: the label to leave both walks by).
        macro_rules! walk {
            ($done:lifetime, $part:expr) => {
                for qs in $part.iter_mut() {
                    if v == 0 {
                        break $done;
                    }
                    let (visited, member) = (v & 1 != 0, m & 1 != 0);
                    v >>= 1;
                    m >>= 1;
                    if visited && !visit!(qs, member) {
                        failed = true;
                        break $done;
                    }
                }
            };
        }
        'walk: {
            walk!('walk, first_part);
            walk!('walk, wrapped);
        }
        self.log.tail = tail;
        let pushed = fifo.len().wrapping_sub(from);
        if failed {
            let booked = fifo
                .get(from..)
                .unwrap_or_default()
                .iter()
                .fold(0, |b, r| b | bit(usize::from(r.queue)));
            fifo.truncate(from);
            self.undo_steady(booked, first, Some(packets), own);
            return Steady::No;
        }
        if p.dispatch_pushed(from).is_err() {
            // Refused whole: taken back, and the decision goes the general way (which
            // meets the refusal again and handles it as at any dispatch).
            let view = p.mapped_fifo();
            let packets = view.map(|MappedFifo { words, fifo, .. }| {
                fifo.truncate(from);
                words.as_chunks_mut::<PACKET_WORDS>().0
            });
            self.undo_steady(unrotated, first, packets, own);
            return Steady::No;
        }
        // Every key held: the expected heads are the heads. The other dirty queues of the
        // range are classified heads now, the members dispatched.
        let others = check & !unrotated;
        let ns = self.shapes.len().min(MAX_SHAPES);
        for (heads, &last) in self.shape_heads.iter_mut().zip(&self.last_masks).take(ns) {
            *heads |= others & last;
        }
        self.dirty = (self.dirty & !check) | unrotated;
        self.waiting &= !check;
        // (The scan cleared `pending` just before calling the lane.)
        self.pending = todo & !check != 0;
        // As the fast path counts them: 3 words per key read (the clean members' too),
        // each dirty queue's a mapped visit and a packet inspected.
        // (Every member is due or clean: the keys read are the due queues' and the clean
        // members'.)
        let count = pushed as u32;
        // (Usually every member is due.)
        let clean_members = if unrotated & !check == 0 {
            0
        } else {
            (unrotated & !check).count_ones()
        };
        self.tally.count_key_visits(due);
        // As `dispatch_requests` counts: per member 4 words read, per swap 2 written.
        let t = &mut self.tally;
        t.reads = t.reads.wrapping_add(3 * clean_members + 4 * count);
        if swapped {
            t.writes = t.writes.wrapping_add(2 * count);
        }
        t.dispatches = t.dispatches.wrapping_add(count);
        t.mapped_dispatches = t.mapped_dispatches.wrapping_add(count);
        self.decision_taken(start, n);
        if let Some(h) = self.shape_heads.get_mut(usize::from(first)) {
            *h &= !unrotated;
        }
        self.dispatching |= unrotated;
        self.in_group |= unrotated;
        // (No group was in flight: the scan's condition for the lane.)
        self.gemm_group_in_flight = count as u8;
        Steady::Dispatched
    }

    /// Undoes [`CpState::steady_group`]'s bookkeeping of the members `booked` (bit mask),
    /// the last records it logged: each queue's next packet, outstanding count and
    /// classified head (`head`, the group's shape) as they were, and its packet's kernel
    /// object back to `own` when the view is given. Rare: a member that fails the
    /// checks, or a dispatcher that refuses the group.
    #[inline(never)]
    fn undo_steady(
        &mut self,
        booked: u32,
        head: u8,
        mut packets: Option<&mut [[u32; PACKET_WORDS]]>,
        own: [u32; 2],
    ) {
        let mut b = booked;
        while b != 0 {
            let q = b.trailing_zeros() as usize;
            b &= b.wrapping_sub(1);
            if let Some(qs) = self.queues.get_mut(q) {
                qs.outstanding = qs.outstanding.wrapping_sub(1);
                qs.set_next(qs.next_id.wrapping_sub(1));
                qs.head = head;
                if let Some(pk) = packets
                    .as_deref_mut()
                    .and_then(|pk| pk.get_mut(qs.view_slot as usize))
                {
                    pk[W_KO] = own[0].to_le();
                    pk[W_KO + 1] = own[1].to_le();
                }
            }
        }
        self.log.tail = self.log.tail.wrapping_sub(booked.count_ones());
    }

    /// [`CpState::steady_group`]'s decision on the expected heads: no queue read, no state
    /// changed.
    #[inline(always)]
    fn decide_steady(&self, todo: u32, n: usize) -> Option<SteadyDecision> {
        let start = usize::from(self.rr_start);
        let ns = self.shapes.len().min(MAX_SHAPES);
        // A shape's expected heads: its classified heads that stay, and the dirty queues
        // its key names.
        let expected = |heads: u32, last: u32| (heads & !todo) | (last & todo);
        // Every candidate, and the dirty queues with a key.
        let mut all = 0u32;
        let mut keyed = 0u32;
        for (&heads, &last) in self.shape_heads.iter().zip(&self.last_masks).take(ns) {
            all |= expected(heads, last);
            keyed |= last;
        }
        // The first candidate in priority order: the first at or after `start`, else the
        // first from queue 0. (A lone candidate runs its own kernel object:
        // `decide_now`'s.)
        let after = all & !active_mask(start);
        let q = if after != 0 { after } else { all }.trailing_zeros() as usize;
        if all & all.wrapping_sub(1) == 0 {
            return None;
        }
        let first = self.queues.get(q).map(|qs| {
            if todo & bit(q) != 0 {
                qs.last_shape
            } else {
                qs.head
            }
        })?;
        let fi = usize::from(first);
        let (shape, &heads, &last) = (
            self.shapes.get(fi)?,
            self.shape_heads.get(fi)?,
            self.last_masks.get(fi)?,
        );
        let pred = shape.predicted;
        let own = expected(heads, last);
        // The candidates of the first's problem (its own, when no other shape shares it).
        let group = if shape.sole {
            own
        } else {
            let pid = shape.problem_id;
            let mut group = 0u32;
            for ((sh, &heads), &last) in self
                .shapes
                .iter()
                .zip(&self.shape_heads)
                .zip(&self.last_masks)
                .take(ns)
            {
                if sh.problem_id == pid {
                    group |= expected(heads, last);
                }
            }
            group
        };
        let all_r = rotate(all, start, n);
        let group_r = if group == all {
            all_r
        } else {
            rotate(group, start, n)
        };
        // How far the decision depends on the heads: through its `pred`-th member,
        // when there is one (then the decision is its first `pred` members).
        let mut range = n;
        let mut early = None;
        if (2..MAX_CD).contains(&pred) {
            // (The `pred - 1` lowest members cleared, two per step: `pred` is below
            // `MAX_CD`, so this is a few steps on a register count.)
            let mut rest = group_r;
            let mut k = u32::from(pred) - 1;
            while k >= 2 {
                rest &= rest.wrapping_sub(1);
                rest &= rest.wrapping_sub(1);
                k -= 2;
            }
            if k != 0 {
                rest &= rest.wrapping_sub(1);
            }
            if rest != 0 {
                range = (rest.trailing_zeros() as usize + 1)
                    .max(DECISION_PREFIX_QUEUES)
                    .min(n);
                early = Some((group_r & !(rest & rest.wrapping_sub(1)), pred, pred));
            }
        }
        let window = unrotate_mask(active_mask(range), start, n);
        let check = todo & window;
        if check & !keyed != 0 {
            return None;
        }
        // (The window holds `range` queues: usually every one is dirty, and no bits
        // need counting.)
        let due = if check == window {
            range as u32
        } else {
            check.count_ones()
        };
        let decided = match early {
            Some(d) => d,
            None => decide_first_size(all_r, group_r, pred)?,
        };
        let members = unrotate_mask(decided.0, start, n);
        // The group is one shape (`first`'s, expected): its members' keys name it, or
        // their heads are classified as it (so when the problem is the shape's alone).
        let uniform = shape.sole || members & !own == 0;
        Some(SteadyDecision {
            decided,
            check,
            due,
            members,
            shape: uniform.then_some(first),
            first: q,
        })
    }

    /// Classifies the heads of the queues of `todo` (bit mask): the word-wise pass over
    /// directly mapped memory first (queues whose head is a GEMM of a known shape, or
    /// that have nothing new, are settled there), the general path, in priority order
    /// and within the event's packet `budget`, for the rest.
    #[inline(always)]
    fn classify_queues<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        todo: u32,
        n: usize,
        budget: &mut usize,
    ) -> Result<(), FirmwareError> {
        let slow = match p.mapped_words() {
            Some((base, words)) if todo != 0 => {
                if base != self.view_base {
                    // A different view: the queues' indices into it are recomputed.
                    self.view_base = base;
                    self.mapped = 0;
                    for q in self.queues.iter_mut() {
                        q.view_write = u32::MAX;
                    }
                }
                self.fast_scan(cfg, base, words, todo)
            }
            Some(_) => 0,
            None => todo,
        };
        if slow != 0 {
            let start = usize::from(self.rr_start);
            let mut m = rotate(slow, start, n);
            while m != 0 {
                let j = m.trailing_zeros() as usize;
                m &= m.wrapping_sub(1);
                self.head_of(cfg, unrotate(j, start, n), p, budget)?;
            }
        }
        Ok(())
    }

    /// The common case of a scan, on directly mapped memory: for every queue of `todo`,
    /// a head slot whose header word and GEMM record address equal the queue's cached
    /// shape key (`QueueState::key_*`, set when that shape was last classified on the
    /// queue) holds a published GEMM of that shape, which becomes the queue's head:
    /// three loads and three compares, no decode, no other field read, not even the
    /// write index (the header is the publication: see the loop). What only matters for
    /// a packet that runs (its kernel object is one the record lists, its completion
    /// signal lies outside the rings) is checked when it is dispatched
    /// ([`CpState::dispatch_group`]). Every other case (the write index read) is the
    /// second pass's.
    /// Returns the queues (bit mask) that need the general path: anything else at the
    /// head, or words outside the view.
    fn fast_scan(&mut self, cfg: &CpConfig, base: DevAddr, words: &[u32], todo: u32) -> u32 {
        let packets = words.as_chunks::<PACKET_WORDS>().0;
        let mut slow = 0u32;
        // GEMM heads classified here, queues waiting (unpublished slot or barrier bit),
        // queues with nothing published.
        let mut hits = 0u32;
        let mut waits = 0u32;
        let mut empty = 0u32;
        // Packets with the barrier bit whose key matched, unpublished slots, first
        // visits (read index read).
        let mut settled_barrier = 0u32;
        let mut unpublished = 0u32;
        let mut first_visits = 0u32;
        // Queues whose words are not (all) in the view: the general path, not counted
        // as mapped visits.
        let mut unmapped = 0u32;
        // First visits since configuration (or since the view moved): where each
        // queue's words sit in the view.
        let mut new = todo & !self.mapped;
        while new != 0 {
            let q = new.trailing_zeros() as usize;
            new &= new.wrapping_sub(1);
            let ok = self
                .queues
                .get_mut(q)
                .is_some_and(|qs| map_queue(qs, cfg.queues.get(q).as_ref(), base, words));
            if ok {
                self.mapped |= bit(q);
                first_visits += 1;
            } else {
                unmapped |= bit(q);
            }
        }
        // The common case first, queue by queue (lowest first; the order does not
        // matter: each queue's head is settled on its own): the slot at the head holds a
        // packet whose header word and record address are the queue's key. The header
        // alone says the packet is published: a producer writes it last, and the packet
        // processor writes INVALID back into every slot it consumes (HSA: "a packet
        // processor must not process a packet of this type"), so a slot the producer has
        // not published again holds INVALID, never an older packet's header. The write
        // index is not read here. Anything else (an unpublished slot, the barrier bit, an
        // unknown packet, a head classified otherwise) is `rare`, looked at again below,
        // where the write index is read.
        let mut rare = 0u32;
        let mut m = todo & self.mapped;
        let mut qi = 0usize;
        while m != 0 {
            let this = m & 1 != 0;
            let b = bit(qi);
            let q = qi;
            m >>= 1;
            qi += 1;
            if !this {
                continue;
            }
            let Some(qs) = self.queues.get_mut(q) else {
                break;
            };
            // Inside the ring, which lies inside the view (checked when the indices
            // were computed).
            let Some(&[header, _, _, _, _, _, _, _, _, _, _, _, e0, e1, _, _]) =
                packets.get(qs.view_slot as usize)
            else {
                rare |= b;
                continue;
            };
            if u32::from_le(header) != qs.key_word
                || u32::from_le(e0) != qs.key_ext[0]
                || u32::from_le(e1) != qs.key_ext[1]
            {
                rare |= b;
                continue;
            }
            qs.head = qs.last_shape;
            hits |= b;
        }
        // Write indices read by the second pass (one per queue it visits in the view).
        let mut rare_visits = 0u32;
        // The rest, case by case.
        while rare != 0 {
            let q = rare.trailing_zeros() as usize;
            rare &= rare.wrapping_sub(1);
            let b = bit(q);
            let Some(qs) = self.queues.get_mut(q) else {
                continue;
            };
            let Some(&w_lo) = words.get(qs.view_write as usize) else {
                unmapped |= b;
                continue;
            };
            rare_visits += 1;
            let avail = u32::from_le(w_lo).wrapping_sub(qs.next_id as u32);
            if avail.wrapping_sub(1) > qs.ring_mask {
                // Nothing published, or a garbage index (the general path reads it
                // whole).
                if avail == 0 {
                    empty |= b;
                } else {
                    slow |= b;
                }
                continue;
            }
            if qs.head != HEAD_NONE {
                // Classified before (not by its key) and still at the head.
                continue;
            }
            let Some(&[header, _, _, _, _, _, _, _, _, _, _, _, e0, e1, _, _]) =
                packets.get(qs.view_slot as usize)
            else {
                slow |= b;
                continue;
            };
            let header = u32::from_le(header);
            if header & !BARRIER_BIT != qs.key_word
                || u32::from_le(e0) != qs.key_ext[0]
                || u32::from_le(e1) != qs.key_ext[1]
            {
                if header & 0xFF == PacketType::Invalid as u32 {
                    // Not published yet: the producer writes the header last.
                    unpublished += 1;
                    waits |= b;
                } else {
                    slow |= b;
                }
                continue;
            }
            // The key, with the barrier bit set.
            settled_barrier |= b;
            if qs.outstanding > 0 {
                waits |= b;
                continue;
            }
            qs.head = qs.last_shape;
            hits |= b;
        }
        // The queues of each shape classified here: those whose cached key is that
        // shape's.
        let ns = self.shapes.len().min(MAX_SHAPES);
        if hits != 0 {
            for (heads, &last) in self.shape_heads.iter_mut().zip(&self.last_masks).take(ns) {
                *heads |= hits & last;
            }
        }
        // Per visit 3 words of the head slot (header, record address), per visit of the
        // second pass the write index, per first visit the read index. Packets
        // inspected: every GEMM head and barrier wait classified here, every
        // unpublished slot. (Software popcounts on rv32imac: the common case, every
        // visited queue a GEMM head and no barrier wait, counts once.)
        let visited_mask = todo & !unmapped;
        let visited = visited_mask.count_ones();
        let barrier_waits = waits & settled_barrier;
        let settled = if hits == visited_mask {
            visited
        } else {
            hits.count_ones()
        }
        .wrapping_add(if barrier_waits == 0 {
            0
        } else {
            barrier_waits.count_ones()
        });
        let mut e = empty;
        while e != 0 {
            // Rare: a head classified before whose write index went back.
            let q = e.trailing_zeros() as usize;
            e &= e.wrapping_sub(1);
            self.set_head(q, HEAD_NONE);
        }
        let clean = todo & !(slow | unmapped);
        self.dirty &= !clean;
        self.waiting = (self.waiting & !(empty | hits)) | waits;
        let t = &mut self.tally;
        t.reads = t
            .reads
            .wrapping_add(visited.wrapping_mul(3))
            .wrapping_add(rare_visits)
            .wrapping_add(first_visits.wrapping_mul(2));
        t.inspected = t.inspected.wrapping_add(settled).wrapping_add(unpublished);
        t.mapped_visits = t.mapped_visits.wrapping_add(visited);
        slow | unmapped
    }

    /// Brings queue `qi`'s head up to date: walks from the first unhandled packet until
    /// one that must run or wait, rejecting and resolving packets on the way (recorded in
    /// the queue's state and the head masks).
    fn head_of<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        qi: usize,
        p: &mut P,
        budget: &mut usize,
    ) -> Result<(), FirmwareError> {
        let qb = bit(qi);
        let (Some(qc), Some(qs)) = (cfg.queues.get(qi), self.queues.get_mut(qi)) else {
            return Ok(());
        };
        if self.dispatching & qb != 0 || self.dirty & qb == 0 {
            return Ok(());
        }
        self.tally.visits = self.tally.visits.wrapping_add(1);
        if !qs.synced {
            let read_id = read_u64(p, &mut self.tally, qc.read_index_addr)?;
            let next = qs.next_id.max(read_id);
            qs.set_next(next);
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
            let Some(qs) = self.queues.get(qi) else {
                return Ok(());
            };
            if qs.head != HEAD_NONE {
                self.dirty &= !qb;
                return Ok(());
            }
            if *budget == 0 {
                self.pending = true;
                return Ok(());
            }
            *budget -= 1;
            let outstanding = qs.outstanding;
            let class = self.classify(cfg, &qc, outstanding, id, p)?;
            match class {
                Class::Wait => {
                    self.dirty &= !qb;
                    self.waiting |= qb;
                    self.set_head(qi, HEAD_NONE);
                    return Ok(());
                }
                Class::Gemm(shape) => {
                    self.dirty &= !qb;
                    self.waiting &= !qb;
                    self.set_head(qi, shape);
                    // The queue's shape key: the fast path classifies the next packet
                    // with this header word and record as this shape.
                    let key = self
                        .shapes
                        .get(usize::from(shape))
                        .map_or((NO_KEY, 0), |s| (s.packet_word, s.ext_addr));
                    if let Some(qs) = self.queues.get_mut(qi) {
                        if let Some(m) = self.last_masks.get_mut(usize::from(qs.last_shape)) {
                            *m &= !qb;
                        }
                        if let Some(m) = self.last_masks.get_mut(usize::from(shape)) {
                            *m |= qb;
                        }
                        qs.last_shape = shape;
                        qs.key_word = key.0;
                        qs.key_ext = [key.1 as u32, (key.1 >> 32) as u32];
                    }
                    return Ok(());
                }
                Class::Kernel(ko) => {
                    self.dirty &= !qb;
                    self.waiting &= !qb;
                    self.set_head(qi, HEAD_KERNEL);
                    if let Some(qs) = self.queues.get_mut(qi) {
                        qs.head_ko = ko;
                    }
                    return Ok(());
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
                q.set_next(id);
            }
        }
        self.dirty &= !qb;
        self.waiting &= !qb;
        self.set_head(qi, HEAD_NONE);
        Ok(())
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
    /// CP has validated before, costs three word reads (header, record address): the
    /// header type and the record address are checked before anything is decoded, and
    /// the record is not read again; the kernel object and the completion signal are
    /// checked only if the packet is dispatched (`dispatch_gemm`). Everything else takes
    /// the full decode.
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
                        // Classified; its kernel object and signal are checked if it is
                        // dispatched (`dispatch_gemm`).
                        if word & BARRIER_BIT != 0 && outstanding > 0 {
                            return Ok(Class::Wait);
                        }
                        return Ok(Class::Gemm(si));
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
                    shape.seen_ko = k.kernel_object;
                }
                Ok(Class::Gemm(si))
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
            sole: true,
            // (A validated record lists 1..=3 non-zero kernel objects: this one is
            // listed until a packet's replaces it.)
            seen_ko: kos[0],
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
            let heads = self
                .shape_heads
                .get_mut(usize::from(victim))
                .map_or(0, core::mem::take);
            let mut m = heads;
            while m != 0 {
                let q = m.trailing_zeros() as usize;
                m &= m.wrapping_sub(1);
                if let Some(qs) = self.queues.get_mut(q) {
                    qs.head = HEAD_NONE;
                }
            }
            self.dirty |= heads;
            self.pending |= heads != 0;
            // The fast path's shortcut (same shape and kernel object as last time)
            // must not outlive the record it was validated with.
            if let Some(m) = self.last_masks.get_mut(usize::from(victim)) {
                *m = 0;
            }
            for q in self.queues.iter_mut().filter(|q| q.last_shape == victim) {
                q.last_shape = HEAD_NONE;
                q.key_word = NO_KEY;
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
            let others = self.shapes.iter().filter(|s| s.problem == problem).count() > 1;
            if let Some(s) = self.shapes.get_mut(i) {
                s.problem_id = first as u8;
                s.sole = !others;
            }
        }
        Ok(index)
    }

    /// The GEMM decision's common case ([`decide_first_size`]): the first candidate's
    /// problem decides alone. `all` is every candidate ([`rotate`]d from `start`, two or
    /// more), `all_queues` the same unrotated; `problem_heads` is set. `None` when the
    /// general rule ([`decide_masks`]) must decide.
    #[inline(always)]
    fn first_size(
        &self,
        start: usize,
        n: usize,
        all: u32,
        all_queues: u32,
    ) -> Option<(u32, u8, u8)> {
        // The first candidate's size is its queue's head shape's problem; its
        // prediction is that shape's.
        let q = unrotate(all.trailing_zeros() as usize, start, n);
        let shape = self
            .queues
            .get(q)
            .and_then(|qs| self.shapes.get(usize::from(qs.head)))?;
        let heads = *self.problem_heads.get(usize::from(shape.problem_id))?;
        let group = if heads == all_queues {
            all
        } else {
            rotate(heads, start, n)
        };
        decide_first_size(all, group, shape.predicted)
    }

    /// Dispatches non-GEMM heads, then decides and dispatches a GEMM group if none is
    /// still running. The decision is [`decide_by_problem`]'s rule over the candidates
    /// in priority order (the rotation), computed on the head masks: one mask per GEMM
    /// problem, so a homogeneous set costs a few word operations, not a pass over
    /// per-queue records. Out of line: its group's requests are not on the stack while
    /// the queues are classified.
    #[inline(never)]
    fn dispatch_heads<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        n: usize,
    ) -> Result<(), FirmwareError> {
        let start = usize::from(self.rr_start);
        let mut k = rotate(self.kernel_heads, start, n);
        while k != 0 {
            let q = unrotate(k.trailing_zeros() as usize, start, n);
            k &= k.wrapping_sub(1);
            let Some(&QueueState {
                next_id, head_ko, ..
            }) = self.queues.get(q)
            else {
                continue;
            };
            if !self.dispatch_one(p, q, next_id, head_ko, false, 1, 1, false)? {
                return Ok(());
            }
        }
        if self.gemm_group_in_flight > 0 {
            return Ok(());
        }
        let Some((chosen, cd, predicted)) = self.decide_now(start, n) else {
            return Ok(());
        };
        let baseline = cd == 0;
        let cd_index = (!baseline).then(|| GemmExt::cd_index(cd));
        let (cd, predicted) = if baseline { (1, 1) } else { (cd, predicted) };
        self.dispatch_group(cfg, p, chosen, start, n, cd_index, cd, predicted)
    }

    /// The GEMM decision over the classified heads ([`decide_by_problem`]'s rule on the
    /// head masks): the chosen queues ([`rotate`]d from `start`), the CD (0: a lone
    /// candidate, which runs its own kernel object) and the prediction; `None` without
    /// candidates. Counts the decision and moves the rotation on.
    #[inline(always)]
    fn decide_now(&mut self, start: usize, n: usize) -> Option<(u32, u8, u8)> {
        let ns = self.shapes.len().min(MAX_SHAPES);
        // Per problem (the index of its first shape, below `ns`; a shape's problem id
        // is never above its own index): its candidates. Entry `i` of the scratch is
        // meaningful only where shape `i` is the first of its problem (set here before
        // any later shape of the problem adds to it).
        let problem_heads = &mut self.problem_heads;
        let mut all = 0u32;
        for (i, (shape, &heads)) in self
            .shapes
            .iter()
            .zip(&self.shape_heads)
            .take(ns)
            .enumerate()
        {
            all |= heads;
            let pid = usize::from(shape.problem_id);
            if let Some(m) = problem_heads.get_mut(pid) {
                if pid == i {
                    *m = heads;
                } else {
                    *m |= heads;
                }
            }
        }
        let all_queues = all;
        let all = rotate(all, start, n);
        if all == 0 {
            return None;
        }
        // The prediction of a problem is its first candidate's (in priority order):
        // its first shape's when that shape holds all its candidates.
        let first_pred = |m: u32| -> u8 {
            let q = unrotate(m.trailing_zeros() as usize, start, n);
            self.queues
                .get(q)
                .and_then(|qs| self.shapes.get(usize::from(qs.head)))
                .map_or(1, |sh| sh.predicted)
        };
        Some(if all & all.wrapping_sub(1) == 0 {
            // Nothing to decide: the packet runs with its own kernel object.
            (all, 0, 1)
        } else if let Some((chosen, cd, pred)) = self.first_size(start, n, all, all_queues) {
            self.decision_taken(start, n);
            (chosen, cd, pred)
        } else {
            let groups = self
                .problem_heads
                .iter()
                .zip(self.shapes.iter().zip(&self.shape_heads))
                .take(ns)
                .enumerate()
                .map(|(i, (&m, (shape, &own)))| {
                    if usize::from(shape.problem_id) != i || m == 0 {
                        (0, 1)
                    } else if m == own {
                        (rotate(m, start, n), shape.predicted)
                    } else {
                        let r = rotate(m, start, n);
                        (r, first_pred(r))
                    }
                });
            let (chosen, cd, predicted, _) = decide_masks(all, groups);
            self.decision_taken(start, n);
            (chosen, cd, predicted)
        })
    }

    /// Dispatches the GEMM group `chosen` (a [`rotate`]d mask from `start`), each member
    /// with the kernel object its record tuned for `cd_index` (its own for `None`).
    ///
    /// One pass over the members, through one borrow of the mapped view when there is
    /// one, reads the two fields that matter only for a packet that runs and checks them
    /// (its kernel object is one the record lists, its completion signal lies outside
    /// the queue rings), patches the kernel object when the decided one differs and
    /// builds the member's request; members outside the view get the same through the
    /// platform's word reads and writes. The requests then go to the dispatcher in one
    /// [`KernelDispatcher::dispatch_group`] call, in priority order, and the queue
    /// bookkeeping and the log follow for the accepted ones. A member that fails the
    /// checks is rejected exactly as the general path's full decode rejects it
    /// ([`CpState::reject_at_dispatch`]) and the rest of the group still dispatches, with
    /// the CD decided (the group is one smaller). When the dispatcher is busy, the
    /// members not yet accepted stay classified heads.
    #[allow(clippy::too_many_arguments)]
    fn dispatch_group<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        chosen: u32,
        start: usize,
        n: usize,
        cd_index: Option<usize>,
        cd: u8,
        predicted: u8,
    ) -> Result<(), FirmwareError> {
        const G: usize = MAX_CD as usize;
        // Per member (in priority order) its request; bit i of the masks: request i's
        // kernel object was swapped, it failed the checks (its `kernel_object` is then
        // the packet's own), it is still to be read word by word.
        let mut reqs: Vec<DispatchRequest, G> = Vec::new();
        let rings = self.rings;
        let cdi = cd_index.unwrap_or(usize::MAX);
        let (mut swaps, mut bad, mut unread) = {
            let view_base = self.view_base;
            let view = p
                .mapped_words_mut()
                .filter(|&(base, _)| base == view_base)
                .map(|(_, w)| w);
            // The common case: every member in the view and of one shape, and the rings
            // inside one 4 GiB-aligned window (their check in 32-bit words).
            let first = self
                .queues
                .get(unrotate(chosen.trailing_zeros() as usize, start, n))
                .map_or(HEAD_NONE, |qs| qs.head);
            let queues = unrotate_mask(chosen, start, n);
            let uniform = self
                .shapes
                .get(usize::from(first))
                .zip(self.shape_heads.get(usize::from(first)))
                .filter(|&(_, &heads)| queues & !(heads & self.mapped) == 0)
                .map(|(shape, _)| shape);
            match (
                view,
                uniform,
                self.ring_window_ok.then_some(self.ring_window),
            ) {
                (Some(words), Some(shape), Some(window)) => {
                    let (swaps, bad) = gather_uniform(
                        &self.queues,
                        words,
                        (chosen, start, n),
                        shape,
                        cdi,
                        window,
                        &mut reqs,
                    );
                    (swaps, bad, 0)
                }
                (view, _, _) => gather_members(
                    &self.shapes,
                    &self.queues,
                    self.mapped,
                    self.rings,
                    view,
                    (chosen, start, n),
                    cdi,
                    &mut reqs,
                ),
            }
        };
        while unread != 0 {
            // Members outside the view: word reads and writes through the platform.
            let i = unread.trailing_zeros() as usize;
            unread &= unread.wrapping_sub(1);
            let Some(r) = reqs.get(i).copied() else {
                continue;
            };
            let q = usize::from(r.queue);
            let (Some(qs), Some(qc)) = (self.queues.get(q), cfg.queues.get(q)) else {
                bad |= bit(i);
                continue;
            };
            let Some(shape) = self.shapes.get(usize::from(qs.head)) else {
                bad |= bit(i);
                continue;
            };
            let addr = qc.packet_addr(r.dispatch_id);
            let ko_addr = addr.wrapping_add(aql::offset::KERNEL_OBJECT as u64);
            let own = read_u64(p, &mut self.tally, ko_addr)?;
            let signal = read_u64(
                p,
                &mut self.tally,
                addr.wrapping_add(aql::offset::COMPLETION_SIGNAL as u64),
            )?;
            self.tally.reads = self.tally.reads.wrapping_sub(4);
            let mut kernel_object = own;
            if !shape.lists(own) || in_rings(rings, signal) {
                bad |= bit(i);
            } else {
                let ko = shape.ko_per_cd.get(cdi).copied().unwrap_or(own);
                if ko != own {
                    p.write_u32(ko_addr, ko as u32)?;
                    p.write_u32(ko_addr.wrapping_add(4), (ko >> 32) as u32)?;
                    swaps |= bit(i);
                    kernel_object = ko;
                }
            }
            if let Some(r) = reqs.get_mut(i) {
                r.kernel_object = kernel_object;
            }
        }
        self.dispatch_requests(cfg, p, &reqs, swaps, bad, cd, predicted)
    }

    /// The second half of [`CpState::dispatch_group`]: the group's requests `reqs` (bit
    /// `i` of `swaps`: request `i`'s kernel object was swapped; of `bad`: it failed the
    /// dispatch-time checks) go to the dispatcher in priority order, runs of members that
    /// passed in one call each, the failed ones rejected; then the bookkeeping.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn dispatch_requests<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        reqs: &[DispatchRequest],
        swaps: u32,
        bad: u32,
        cd: u8,
        predicted: u8,
    ) -> Result<(), FirmwareError> {
        let len = reqs.len();
        // Every member's read: kernel object and signal (4 words); every swap: 2 writes.
        let t = &mut self.tally;
        t.reads = t.reads.wrapping_add(4 * len as u32);
        // (Software popcounts on rv32imac: a group swaps none or all in the common case.)
        let swapped = if swaps == 0 {
            0
        } else if swaps == active_mask(len) {
            len as u32
        } else {
            swaps.count_ones()
        };
        t.writes = t.writes.wrapping_add(2 * swapped);
        // The requests, in priority order: runs of members that passed the checks in
        // one call each (the whole group when every member did).
        let mut done = 0u32;
        let mut count = 0u32;
        let mut i = 0usize;
        while i < len {
            let Some(&r) = reqs.get(i) else {
                break;
            };
            if bad & bit(i) != 0 {
                self.reject_at_dispatch(
                    cfg,
                    p,
                    usize::from(r.queue),
                    r.dispatch_id,
                    r.kernel_object,
                )?;
                i += 1;
                continue;
            }
            let later = bad.checked_shr(i as u32).unwrap_or(0);
            let end = if later == 0 {
                len
            } else {
                i + later.trailing_zeros() as usize
            };
            let run = reqs.get(i..end).unwrap_or_default();
            let (accepted, result) = p.dispatch_group(run);
            let accepted = accepted.min(run.len());
            count = count.wrapping_add(accepted as u32);
            done |= self.dispatched_members(
                run.get(..accepted).unwrap_or_default(),
                swaps.checked_shr(i as u32).unwrap_or(0),
                cd,
                predicted,
            );
            i += accepted;
            match result {
                Ok(()) => {}
                Err(DispatchError::Busy) => break,
                Err(DispatchError::BadPacket) => {
                    if let Some(&r) = reqs.get(i) {
                        self.reject_head(
                            p,
                            usize::from(r.queue),
                            r.dispatch_id,
                            RejectReason::DispatchRefused,
                        )?;
                    }
                    i += 1;
                }
                Err(e) => return Err(e.into()),
            }
            if accepted == 0 && result.is_ok() {
                break;
            }
        }
        self.tally.dispatches = self.tally.dispatches.wrapping_add(count);
        let ns = self.shapes.len().min(MAX_SHAPES);
        for h in self.shape_heads.iter_mut().take(ns) {
            *h &= !done;
        }
        self.dispatching |= done;
        self.dirty |= done;
        self.in_group |= done;
        self.gemm_group_in_flight = self.gemm_group_in_flight.saturating_add(count as u8);
        Ok(())
    }

    /// The bookkeeping of GEMM group members `run`, accepted by the dispatcher (bit `j`
    /// of `swaps`: member `j`'s kernel object was swapped): each queue's ids,
    /// outstanding count and next packet, and its log entry. Returns the queues' bits.
    /// Out of line: few values live across its loop.
    #[inline(never)]
    fn dispatched_members(
        &mut self,
        run: &[DispatchRequest],
        mut swaps: u32,
        cd: u8,
        predicted: u8,
    ) -> u32 {
        let mut done = 0u32;
        for r in run {
            let qi = usize::from(r.queue);
            if let Some(qs) = self.queues.get_mut(qi) {
                qs.dispatched(r.dispatch_id);
            }
            let flags = LOG_DISPATCHED | LOG_GEMM | if swaps & 1 != 0 { LOG_SWAPPED } else { 0 };
            swaps >>= 1;
            self.log_entry(LogEntry::dispatch(
                r.dispatch_id,
                r.kernel_object,
                LogEntry::meta(flags, cd, predicted) | u32::from(r.queue),
            ));
            done |= bit(qi);
        }
        done
    }

    /// Rejects the GEMM packet `id` at queue `qi`'s head (its own kernel object `own`)
    /// that failed the dispatch-time checks ([`CpState::dispatch_group`]): with the
    /// reason the full decode gives it (the general path's, so the same code as had it
    /// been checked when classified), completed with `-code`, logged, and the queue
    /// moves on to its next packet in a follow-up event.
    #[inline(never)]
    fn reject_at_dispatch<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        qi: usize,
        id: u64,
        own: u64,
    ) -> Result<(), FirmwareError> {
        let addr = cfg.queues.get(qi).map_or(0, |qc| qc.packet_addr(id));
        let reason = match self.classify_full(cfg, 0, addr, p)? {
            Class::Reject(r) => r,
            // The decode finds nothing wrong only if the packet changed since it was
            // read; it failed the listing or the ring check then.
            _ => RejectReason::KernelNotListed { address: own },
        };
        self.reject_head(p, qi, id, reason)
    }

    /// Completes queue `qi`'s head packet `id` with `reason`'s error value (logged); the
    /// queue's next packet (and any barrier on this signal) is looked at in a follow-up
    /// event.
    fn reject_head<P: KernelDispatcher>(
        &mut self,
        p: &mut P,
        qi: usize,
        id: u64,
        reason: RejectReason,
    ) -> Result<(), FirmwareError> {
        let queue = qi as u8;
        p.complete_without_dispatch(queue, id, reason.signal_value())?;
        self.completed(queue, id, CpAction::Rejected(reason));
        if let Some(q) = self.queues.get_mut(qi) {
            q.set_next(id.wrapping_add(1));
        }
        self.set_head(qi, HEAD_NONE);
        self.dirty |= bit(qi);
        self.mark_waiting_dirty();
        self.pending = true;
        Ok(())
    }

    /// One dispatch request (the kernel object already in the packet); `Ok(false)` when
    /// the dispatcher is busy (retry on a later event).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn dispatch_one<P: KernelDispatcher>(
        &mut self,
        p: &mut P,
        qi: usize,
        dispatch_id: u64,
        kernel_object: u64,
        gemm: bool,
        cd: u8,
        predicted_cd: u8,
        swapped: bool,
    ) -> Result<bool, FirmwareError> {
        let queue = qi as u8;
        let qb = bit(qi);
        let req = DispatchRequest {
            queue,
            dispatch_id,
            kernel_object,
        };
        match p.dispatch(&req) {
            Ok(()) => {}
            Err(DispatchError::Busy) => return Ok(false),
            Err(DispatchError::BadPacket) => {
                // The dispatcher found what classification does not re-check on a later
                // packet of a known shape: the packet is rejected like any malformed one
                // (completed with its error code), and the queue moves on.
                self.reject_head(p, qi, dispatch_id, RejectReason::DispatchRefused)?;
                return Ok(true);
            }
            Err(e) => return Err(e.into()),
        }
        self.tally.dispatches = self.tally.dispatches.wrapping_add(1);
        if let Some(q) = self.queues.get_mut(qi) {
            if gemm {
                q.group_id = low_id(dispatch_id);
            }
            q.outstanding = q.outstanding.wrapping_add(1);
            q.set_next(dispatch_id.wrapping_add(1));
        }
        self.set_head(qi, HEAD_NONE);
        self.dispatching |= qb;
        self.dirty |= qb;
        if gemm {
            self.in_group |= qb;
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
