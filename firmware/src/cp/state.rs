//! The CP's state: per-queue flags as bit masks (and the helpers that rotate them into
//! priority order), every queue's state, the hot-path tally and the word readers that
//! count into it.

use super::*;

/// Per-queue flags are bits (bit `q` for queue `q`) of the masks below, so an event that
/// touches many queues (a doorbell bitmap, a completion that may release barriers) costs
/// a word operation, and the decision works on masks rather than on per-queue records.
#[derive(Debug, Default)]
pub(super) struct CpState {
    /// The bytes the queue rings span, as `(first - 7, end - (first - 7))` (saturating):
    /// an 8-byte completion signal at `a` overlaps them iff `a - .0 < .1` (wrapping), one
    /// compare. A signal there would, when decremented, rewrite another packet's header
    /// (computed at `configure`).
    pub(super) rings: (DevAddr, u64),
    /// [`rings_window`] of `rings` (computed with it: every dispatch checks its members'
    /// signals against it), `[0; 3]` with `ring_window_ok` false when there is
    /// none. (Not an `Option`: with one, the derived `Default` built the whole state on
    /// the stack at start-up, 7,132 B of stack on the virt board instead of 1,236.)
    pub(super) ring_window: [u32; 3],
    pub(super) ring_window_ok: bool,
    pub(super) queues: QueueStates,
    /// Something may have changed (doorbell, head moved, completion, timer): re-read the
    /// write index on the next scan. A clean queue costs the scan nothing.
    pub(super) dirty: u32,
    /// The head waits for a signal, the barrier bit or publication.
    pub(super) waiting: u32,
    /// Dispatched; its workgroups are still being placed (the head has not moved).
    pub(super) dispatching: u32,
    /// The queue has a member in the GEMM group in flight.
    pub(super) in_group: u32,
    /// Queues whose classified head is a non-GEMM kernel.
    pub(super) kernel_heads: u32,
    /// Per shape (index into `shapes`): the queues whose classified head is a GEMM of
    /// that shape.
    pub(super) shape_heads: [u32; MAX_SHAPES],
    /// Per shape: the queues whose cached shape key (`QueueState::last_shape`) is that
    /// shape, so the fast path classifies a head with one store and one bit.
    pub(super) last_masks: [u32; MAX_SHAPES],
    /// Queues whose words' indices in the mapped view are computed (`QueueState::view_*`).
    pub(super) mapped: u32,
    /// Scratch of the decision: per GEMM problem, the queues whose head is one.
    pub(super) problem_heads: [u32; MAX_SHAPES],
    pub(super) shapes: Vec<Shape, MAX_SHAPES>,
    /// Device address of word 0 of the mapped view the queues' view indices refer to.
    pub(super) view_base: DevAddr,
    pub(super) next_victim: u8,
    pub(super) completions_this_scan: u32,
    pub(super) tally: Tally,
    pub(super) gemm_group_in_flight: u8,
    pub(super) rr_start: u8,
    pub(super) work: CpWork,
    /// The log: compact entries, the reasons of rejections beside them (in the same
    /// order).
    pub(super) log: LogRing,
    pub(super) rejects: Deque<RejectReason, REJECT_CAPACITY>,
    pub(super) log_dropped: u64,
    pub(super) pending: bool,
    /// `CommandProcessor::config` holds a checked configuration.
    pub(super) configured: bool,
}

impl CpState {
    /// Resets to `CpState { rings, ..CpState::default() }` in place (no 3 KiB
    /// temporary on a small board's stack). Every field is named, so a new field
    /// fails to compile here until it is reset too.
    pub(super) fn reset(&mut self, rings_span: (DevAddr, u64)) {
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
pub(super) struct QueueStates([QueueState; MAX_QUEUES]);

impl QueueStates {
    /// The whole array as one constant, so `default` copies it from flash instead of
    /// building it in a stack temporary (2.3 KiB of start-up stack on a 16 KiB board).
    /// (Each with its [`QueueState::index`]. Indexing in a constant is evaluated by the
    /// compiler: out of bounds would fail the build, it cannot panic at run time.)
    #[allow(clippy::indexing_slicing)]
    pub(super) const ALL: [QueueState; MAX_QUEUES] = {
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
    pub(super) fn restart(&mut self) {
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
pub(super) fn bit(q: usize) -> u32 {
    1u32 << (q & 31)
}

/// The mask of queues `0..n`.
#[inline(always)]
pub(super) fn active_mask(n: usize) -> u32 {
    1u32.checked_shl(n as u32)
        .map_or(u32::MAX, |b| b.wrapping_sub(1))
}

/// `m` (bits `0..n`) in priority order: bit `j` of the result is queue `(start + j) % n`.
#[inline(always)]
pub(super) fn rotate(m: u32, start: usize, n: usize) -> u32 {
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
pub(super) fn unrotate_mask(m: u32, start: usize, n: usize) -> u32 {
    let back = if start == 0 { 0 } else { n.wrapping_sub(start) };
    rotate(m, back, n)
}

/// The queue of bit `j` of a [`rotate`]d mask.
#[inline(always)]
pub(super) fn unrotate(j: usize, start: usize, n: usize) -> usize {
    let q = start.wrapping_add(j);
    if q >= n {
        q.wrapping_sub(n)
    } else {
        q
    }
}

/// Sets queue `qs`'s (bit `qbit`) classified head, keeping the head masks in step.
#[inline(always)]
pub(super) fn set_head(
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

pub(super) fn read<P: DeviceMemory>(
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
pub(super) struct Tally {
    /// Event handlers run (by a configured CP; [`CpState::scan`] counts them and folds
    /// the tally every 2^12).
    pub(super) handlers: u32,
    /// GEMM decisions taken.
    pub(super) decisions: u32,
    /// 32-bit device-memory reads.
    pub(super) reads: u32,
    /// Queue heads looked at on the general path.
    pub(super) visits: u32,
    /// Queue heads looked at on the fast path.
    pub(super) mapped_visits: u32,
    /// Packets classified.
    pub(super) inspected: u32,
    /// 32-bit device-memory writes (kernel-object patches).
    pub(super) writes: u32,
    /// Kernels dispatched.
    pub(super) dispatches: u32,
    /// Of `dispatches`, the steady lane's.
    pub(super) mapped_dispatches: u32,
}

impl Tally {
    /// Queues whose head was settled by its key (3 words read: header and record
    /// address), as the fast path counts them: each a mapped visit and a packet
    /// inspected.
    #[inline(always)]
    pub(super) fn count_key_visits(&mut self, n: u32) {
        self.reads = self.reads.wrapping_add(n.wrapping_mul(3));
        self.inspected = self.inspected.wrapping_add(n);
        self.mapped_visits = self.mapped_visits.wrapping_add(n);
    }

    pub(super) fn fold_into(&mut self, work: &mut CpWork) {
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
pub(super) fn read_u32<P: DeviceMemory>(
    p: &mut P,
    tally: &mut Tally,
    addr: DevAddr,
) -> Result<u32, MemoryError> {
    tally.reads = tally.reads.wrapping_add(1);
    p.read_u32(addr)
}

#[inline]
pub(super) fn read_u64<P: DeviceMemory>(
    p: &mut P,
    tally: &mut Tally,
    addr: DevAddr,
) -> Result<u64, MemoryError> {
    let lo = read_u32(p, tally, addr)?;
    let hi = read_u32(p, tally, addr.wrapping_add(4))?;
    Ok(u64::from(lo) | (u64::from(hi) << 32))
}

/// Header bit 8: the packet waits for every earlier packet of its queue to complete.
pub(super) const BARRIER_BIT: u32 = 1 << 8;

/// Word index of `addr` in a view starting at `base`, if aligned.
#[inline(always)]
pub(super) fn word_index(base: DevAddr, addr: DevAddr) -> Option<usize> {
    let off = addr.wrapping_sub(base);
    (off & 3 == 0 && off >> 32 == 0).then_some((off >> 2) as usize)
}

/// Whether the 8-byte signal at `addr` overlaps the queue rings `[first, end)`, given as
/// `rings = (first - 7, end - (first - 7))` (saturating; `CpState::rings`): the same as
/// `addr < end && first < addr + 8` (saturating), in one subtraction and one compare.
#[inline(always)]
pub(super) fn in_rings(rings: (DevAddr, u64), addr: u64) -> bool {
    addr.wrapping_sub(rings.0) < rings.1
}

/// The rejection of a completion signal inside the queue rings.
pub(super) fn ring_signal(address: u64) -> RejectReason {
    RejectReason::Packet(aql::AqlError::AddressOutOfRange {
        field: "completion_signal",
        offset: aql::offset::COMPLETION_SIGNAL as u8,
        address,
    })
}

/// Word `k` of a packet's 16.
pub(super) const W_KO: usize = aql::offset::KERNEL_OBJECT / 4;
pub(super) const W_EXT: usize = aql::offset::GEMM_EXT_ADDRESS / 4;
pub(super) const W_SIGNAL: usize = aql::offset::COMPLETION_SIGNAL / 4;
pub(super) const PACKET_WORDS: usize = AQL_PACKET_BYTES / 4;
// The fast path destructures a packet's words: the record address at words 12-13; the
// dispatch reads words 8..16 (kernel object first, completion signal last).
const _: () = assert!(W_EXT == 12 && W_KO == 8 && W_SIGNAL == W_KO + 6 && PACKET_WORDS == 16);

/// `rings` ([`CpState::rings`]) as `[low word of its start, high word, length]` when the
/// span lies in one 4 GiB-aligned window: a signal `s` overlaps the rings iff its high
/// word is that one and `s.lo - start.lo < length` (32-bit).
#[inline(always)]
pub(super) fn rings_window(rings: (DevAddr, u64)) -> Option<[u32; 3]> {
    let (first, len) = rings;
    let hi = (first >> 32) as u32;
    let lo = first as u32;
    let len32 = u32::try_from(len).ok()?;
    (u64::from(lo) + u64::from(len32) <= 1 << 32).then_some([lo, hi, len32])
}

/// The 64-bit value of two little-endian-order 32-bit words (low first).
#[inline(always)]
pub(super) fn join(w: [u32; 2]) -> u64 {
    u64::from(w[0]) | (u64::from(w[1]) << 32)
}

impl CpState {
    /// Counts a GEMM decision taken from rotation `start` (the queue with the first
    /// priority, `rr_start`) and moves the rotation on by one of the `n` queues.
    #[inline(always)]
    pub(super) fn decision_taken(&mut self, start: usize, n: usize) {
        self.tally.decisions = self.tally.decisions.wrapping_add(1);
        let next = start + 1;
        self.rr_start = if next >= n { 0 } else { next as u8 };
    }

    #[inline(always)]
    pub(super) fn mark_waiting_dirty(&mut self) {
        self.dirty |= self.waiting;
    }

    /// Sets queue `qi`'s classified head (and the head masks).
    #[inline(always)]
    pub(super) fn set_head(&mut self, qi: usize, head: u8) {
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
}
