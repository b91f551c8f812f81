//! The memory system: one [`Controller`] per pseudo-channel behind an address mapping, a
//! front end that accepts requests with arrival cycles and applies back-pressure, and the
//! engine loop that runs a request stream to drain.
//!
//! # Requests
//! A [`Request`] says what it does ([`Access`]: read, write, near-memory update), which
//! traffic it belongs to ([`TrafficClass`]) and who sent it ([`Source`]). Controllers
//! arbitrate between classes through an [`Arbiter`] (default: class-blind FR-FCFS) and
//! report issued column commands to an attached [`ControllerObserver`]. Statistics count
//! bytes and requests by access kind and class.
//!
//! # Stepping
//! [`MemorySystem::submit`] offers a request at the current cycle (or refuses it with
//! [`Backpressure`]); [`MemorySystem::next_wake`] says when anything next happens;
//! [`MemorySystem::advance_until`] runs up to a cycle and hands back each finished request
//! as a [`MemCompletion`]. The same protocol on the common time axis is
//! [`Component`] (ticks converted through the preset's tCK). [`MemorySystem::run`] is a
//! driver over these calls for a whole request stream.
//!
//! # Engine
//! Discrete-event over cycles: each controller reports the next cycle at which it can do
//! anything, and the loop jumps straight to the earliest of those and of the next arrival.
//! A streaming run is busy nearly every cycle, so this costs no more than cycle stepping;
//! random traffic, refresh and long gates (tRFC, tRC) leave many idle cycles that are
//! skipped. The per-request path allocates nothing: request slots come from a free list
//! sized to what the queues can hold, and queue entries are 32-byte values in per-bank
//! vectors that keep their capacity.

pub mod arbiter;
pub mod controller;
pub mod observer;
mod pending;
pub mod refresh;
pub mod request;
pub mod scheduler;
pub mod stats;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hbm::bank::ALL_COMMAND_KINDS;
use crate::hbm::config::CommandBus;
use crate::hbm::{AddressMapping, Cycle, DramAddr, HbmPreset};
use crate::sim::{ClockDomain, Component, Tick};

use pending::CompletionQueue;
use scheduler::{PackedSource, PartKind};

pub use arbiter::{Arbiter, ArbiterView, ClassSet, FrFcfs, Grant, Issued, Mca, RoundRobin};
pub use controller::{
    Completion, Controller, ControllerConfig, ControllerState, LoggedCommand, RequestPart,
};
pub use observer::{ColumnLog, ControllerObserver, IssuedColumn};
pub use request::{Access, Request, RequestId, Source, TrafficClass};
pub use stats::{ByKindClass, LogHistogram, Occupancy, RowClass};

/// A request the memory system finished: its last data beat crossed the bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemCompletion {
    /// The id [`MemorySystem::submit`] returned.
    pub id: RequestId,
    /// The request's address.
    pub addr: u64,
    /// Read, write or update.
    pub access: Access,
    /// Traffic class.
    pub class: TrafficClass,
    /// Sender.
    pub source: Option<Source>,
    /// The request's arrival cycle.
    pub arrival: Cycle,
    /// The cycle the front end accepted it into a controller queue.
    pub accepted: Cycle,
    /// The cycle its last data beat crossed the bus.
    pub finish: Cycle,
}

/// The queue a request needs is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backpressure {
    /// The pseudo-channel whose queue is full.
    pub pseudo_channel: usize,
}

/// What the front end tracks of an accepted request, in one 64-byte cache line: a
/// completion reads the slot it updates and nothing else (the request's id, address,
/// arrival and sender used to sit in a side table, a second cache miss per completion
/// of a T3 run). Those four are written only when completions are handed out
/// (`MemorySystem::keep_meta`), so they are never part of a saved state.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
#[repr(align(64))]
struct Slot {
    /// Cycle the front end accepted the request into a controller queue.
    accepted: Cycle,
    done_at: Cycle,
    parts_left: u8,
    kind: PartKind,
    #[serde(skip, default)]
    id: u64,
    #[serde(skip, default)]
    addr: u64,
    #[serde(skip, default)]
    arrival: Cycle,
    #[serde(skip, default)]
    source: PackedSource,
}

impl Slot {
    /// The slot of `req`, accepted at `accepted` in `parts` parts, without the fields
    /// only a completion handed out reads.
    fn new(accepted: Cycle, parts: u8, req: &Request) -> Self {
        Slot {
            accepted,
            done_at: 0,
            parts_left: parts,
            kind: PartKind::new(req.access, req.class),
            id: 0,
            addr: 0,
            arrival: 0,
            source: PackedSource::default(),
        }
    }
}

/// A device of controllers behind an address mapping.
#[derive(Debug, Clone)]
pub struct MemorySystem {
    preset: HbmPreset,
    mapping: AddressMapping,
    /// The decode of the address one column access in (`mapping.decode(column_bytes)`):
    /// the DRAM-address bits of the one address bit that separates the halves of a
    /// 64-byte request (see `MemorySystem::place`).
    second_half: DramAddr,
    cfg: ControllerConfig,
    controllers: Vec<Controller>,
    /// The cycle each controller wants to be stepped at.
    wake: Vec<Cycle>,
    /// The minimum of `wake`.
    next: Cycle,
    slots: Vec<Slot>,
    /// Whether to fill the slots' completion fields (off inside [`MemorySystem::run`],
    /// which hands out none).
    keep_meta: bool,
    free: Vec<u32>,
    done: Vec<Completion>,
    now: Cycle,
    read_latency: LogHistogram,
    /// Finished requests by access kind and class.
    finished: ByKindClass,
    next_id: u64,
    last_completion: Cycle,
    clock: ClockDomain,
    /// Finished requests whose last data beat is still ahead of the current cycle (a
    /// column command's data crosses the bus CL or CWL + BL after it issues), for
    /// [`MemorySystem::advance_until`] to hand out in time order.
    pending: CompletionQueue,
    /// Per channel, when its pseudo-channels share one command interface
    /// ([`CommandBus::Shared`] with more than one pseudo-channel per channel); empty
    /// otherwise.
    buses: Vec<ChannelBuses>,
    /// Pseudo-channels per channel (consecutive controller indices).
    pcs_per_channel: usize,
    /// Parallel windows run and windows thrown away ([`MemorySystem::run_parallel`]).
    windows: (u64, u64),
}

/// The shared row and column command buses of one channel.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct ChannelBuses {
    /// Row bus free from this cycle.
    row: Cycle,
    /// Column bus free from this cycle.
    col: Cycle,
    /// The pseudo-channel (within the channel) stepped first: it has priority on both
    /// buses in a cycle. Passes to the next one whenever it issued a command, so two
    /// pseudo-channels that contend alternate (round-robin at command granularity).
    first: usize,
}

/// The changing state of a [`MemorySystem`] between two requests of
/// [`MemorySystem::run_checkpointed`], for a checkpoint (postcard-serialised by `nmcp
/// mem`): every controller's queues, banks, refresh and statistics, the front end's
/// request slots, the clock and the run's figures so far. The preset, mapping and
/// controller settings are not in it: the system it is restored into is built from the
/// same command line, and [`MemorySystem::restore`] checks that the shapes agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryState {
    controllers: Vec<ControllerState>,
    wake: Vec<Cycle>,
    next: Cycle,
    slots: Vec<Slot>,
    free: Vec<u32>,
    now: Cycle,
    read_latency: LogHistogram,
    finished: ByKindClass,
    next_id: u64,
    last_completion: Cycle,
    buses: Vec<ChannelBuses>,
}

impl MemoryState {
    /// The cycle the state was taken at.
    pub fn now(&self) -> Cycle {
        self.now
    }
}

/// Figures of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// Preset name.
    pub preset: String,
    /// Address mapping string.
    pub mapping: String,
    /// Page policy.
    pub page_policy: String,
    /// Refresh mode.
    pub refresh: String,
    /// Queue depth per pseudo-channel (each of read and write).
    pub queue_depth: usize,
    /// Pseudo-channels simulated.
    pub pseudo_channels: usize,
    /// Requests served.
    pub requests: u64,
    /// Read requests served.
    pub reads: u64,
    /// Write requests served.
    pub writes: u64,
    /// Near-memory update requests served.
    pub updates: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Cycles from the start to the last data beat.
    pub cycles: Cycle,
    /// Simulated time in ns.
    pub simulated_ns: f64,
    /// Achieved bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// The preset's pin bandwidth, GB/s.
    pub peak_gbps: f64,
    /// Achieved / peak, in percent.
    pub percent_of_peak: f64,
    /// Read latency, cycles: from acceptance into a controller queue (time spent waiting
    /// in front of a full queue is excluded) to the last data beat.
    pub read_latency_mean: f64,
    /// Minimum read latency, cycles.
    pub read_latency_min: u64,
    /// Median read latency, cycles (bucketed, see [`LogHistogram`]).
    pub read_latency_p50: u64,
    /// 99th-percentile read latency, cycles (bucketed).
    pub read_latency_p99: u64,
    /// Maximum read latency, cycles.
    pub read_latency_max: u64,
    /// Queue entries that hit an open row.
    pub row_hits: u64,
    /// Queue entries that found the bank precharged.
    pub row_misses: u64,
    /// Queue entries that found another row open.
    pub row_conflicts: u64,
    /// Commands issued, by mnemonic.
    pub commands: BTreeMap<String, u64>,
    /// Mean read-queue length per pseudo-channel.
    pub read_queue_mean: f64,
    /// Mean write-queue length per pseudo-channel.
    pub write_queue_mean: f64,
    /// Time-weighted read-queue occupancy, summed over pseudo-channels: cycles at each length.
    pub read_queue_histogram: Vec<u64>,
    /// Time-weighted write-queue occupancy, summed over pseudo-channels.
    pub write_queue_histogram: Vec<u64>,
    /// Fraction of time banks had a row open, averaged over all banks.
    pub bank_utilisation: f64,
    /// Fraction of time the data buses carried data.
    pub data_bus_utilisation: f64,
    /// Arbitration policy (of the first controller).
    pub arbiter: String,
    /// Bytes moved by traffic class and access kind: class, then `read`/`write`/`update`.
    pub bytes_by_class: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests served by traffic class and access kind.
    pub requests_by_class: BTreeMap<String, BTreeMap<String, u64>>,
}

impl MemorySystem {
    /// A device with the preset's geometry, the given mapping and controller settings.
    pub fn new(preset: &HbmPreset, mapping: AddressMapping, cfg: ControllerConfig) -> Self {
        let n = preset.pseudo_channels() as usize;
        let controllers = (0..n)
            .map(|i| {
                let mut c = Controller::new(preset, cfg.clone());
                c.set_index(i);
                c
            })
            .collect();
        let capacity = n * cfg.queue_depth * 2;
        let o = &preset.organisation;
        let pcs_per_channel = o.pseudo_channels_per_channel.max(1) as usize;
        let buses = if o.command_bus == CommandBus::Shared && pcs_per_channel > 1 {
            vec![ChannelBuses::default(); n / pcs_per_channel]
        } else {
            Vec::new()
        };
        MemorySystem {
            buses,
            pcs_per_channel,
            windows: (0, 0),
            preset: preset.clone(),
            second_half: mapping.decode(mapping.column_bytes()),
            mapping,
            controllers,
            wake: vec![Cycle::MAX; n],
            next: Cycle::MAX,
            slots: Vec::with_capacity(capacity),
            keep_meta: true,
            free: Vec::with_capacity(capacity),
            done: Vec::with_capacity(64),
            now: 0,
            read_latency: LogHistogram::new(),
            finished: ByKindClass::default(),
            next_id: 0,
            last_completion: 0,
            clock: ClockDomain::from_period_ns(preset.organisation.tck_ns),
            pending: CompletionQueue::default(),
            cfg,
        }
    }

    /// The DRAM clock (the preset's tCK) on the common time axis.
    pub fn clock(&self) -> ClockDomain {
        self.clock
    }

    /// Gives every controller an arbiter made by `make(pseudo_channel)`.
    pub fn set_arbiter(&mut self, mut make: impl FnMut(usize) -> Box<dyn Arbiter>) {
        for (i, c) in self.controllers.iter_mut().enumerate() {
            c.set_arbiter(make(i));
        }
        let now = self.now;
        for w in &mut self.wake {
            *w = (*w).min(now);
        }
        self.next = self.next.min(now);
    }

    /// Attaches an observer made by `make(pseudo_channel)` to every controller.
    pub fn set_observers(&mut self, mut make: impl FnMut(usize) -> Box<dyn ControllerObserver>) {
        for (i, c) in self.controllers.iter_mut().enumerate() {
            c.set_observer(make(i));
        }
    }

    /// Makes sure controller `pc` is stepped at `at` (or at the current cycle, if later):
    /// for a controller handed back with [`Controller::release_from_nmc`]. Every change
    /// of `wake` must also lower `next` (the cached minimum the stepping loop runs on).
    pub fn wake_at(&mut self, pc: usize, at: Cycle) {
        if let Some(w) = self.wake.get_mut(pc) {
            *w = (*w).min(at.max(self.now));
            self.next = self.next.min(*w);
        }
    }

    /// Tells every controller's arbiter that a kernel boundary passed at the current cycle.
    pub fn kernel_boundary(&mut self) {
        let now = self.now;
        for (c, w) in self.controllers.iter_mut().zip(self.wake.iter_mut()) {
            *w = (*w).min(c.kernel_boundary(now));
            self.next = self.next.min(*w);
        }
    }

    /// The cycle each controller is next stepped at (`Cycle::MAX`: not until something is
    /// queued). Only stepping moves a controller's own wake later, so a controller whose
    /// wake is after `until` is not stepped by [`MemorySystem::advance_until`]`(until)`
    /// (what an observer that is polled after each advance uses to skip the others).
    pub fn wakes(&self) -> &[Cycle] {
        &self.wake
    }

    /// The controllers, one per pseudo-channel.
    pub fn controllers(&self) -> &[Controller] {
        &self.controllers
    }

    /// Mutable access to one controller (e.g. to switch on its command log). A change that
    /// needs the controller stepped (a release from NMC ownership) must be followed by
    /// [`MemorySystem::wake_at`].
    pub fn controller_mut(&mut self, pc: usize) -> Option<&mut Controller> {
        self.controllers.get_mut(pc)
    }

    /// The address mapping.
    pub fn mapping(&self) -> &AddressMapping {
        &self.mapping
    }

    /// The preset.
    pub fn preset(&self) -> &HbmPreset {
        &self.preset
    }

    /// Every controller, mutable (an NMC engine drives its pseudo-channel's controller).
    pub fn controllers_mut(&mut self) -> &mut [Controller] {
        &mut self.controllers
    }

    /// The preset and mapping next to mutable controllers (an NMC engine drives the
    /// controllers while its functional store decodes addresses through the mapping).
    pub fn split_for_nmc(&mut self) -> (&HbmPreset, &AddressMapping, &mut [Controller]) {
        (&self.preset, &self.mapping, &mut self.controllers)
    }

    /// Current cycle.
    pub fn now(&self) -> Cycle {
        self.now
    }

    /// Read latencies recorded so far.
    pub fn read_latency(&self) -> &LogHistogram {
        &self.read_latency
    }

    /// Where a request goes: its first column's address and pseudo-channel, the second
    /// column's address for a 64-byte request, and whether both fall into one row of one
    /// bank (one queue entry of two column accesses).
    #[inline]
    fn place(&self, req: &Request) -> (DramAddr, usize, Option<DramAddr>, bool) {
        let col_bytes = self.mapping.column_bytes();
        let size = if u64::from(req.size) > col_bytes {
            2 * col_bytes
        } else {
            col_bytes
        };
        let base = req.addr & !(size - 1);
        let a = self.mapping.decode(base);
        let pa = self.mapping.pseudo_channel_index(&a);
        // `base` is aligned to two column accesses, so `base + col_bytes` only sets the
        // address bit `col_bytes`, which is clear in `base`: decoding gathers address bits
        // into fields (bitwise, no carries), so its decode is `a` with that bit's field
        // bits set — one decode per request instead of two.
        let h = &self.second_half;
        let second = (size > col_bytes).then_some(DramAddr {
            stack: a.stack | h.stack,
            channel: a.channel | h.channel,
            pc: a.pc | h.pc,
            bank_group: a.bank_group | h.bank_group,
            bank: a.bank | h.bank,
            row: a.row | h.row,
            col: a.col | h.col,
        });
        debug_assert_eq!(
            second,
            (size > col_bytes).then(|| self.mapping.decode(base + col_bytes))
        );
        let merged = second.is_none_or(|b| {
            b.stack == a.stack
                && b.channel == a.channel
                && b.pc == a.pc
                && b.bank_group == a.bank_group
                && b.bank == a.bank
                && b.row == a.row
                && b.col == a.col + 1
        });
        (a, pa, second, merged)
    }

    /// A request slot (a free one reused, else a new one) holding `slot`; its tag.
    fn take_slot(&mut self, slot: Slot) -> u32 {
        match self.free.pop() {
            Some(t) => {
                self.slots[t as usize] = slot;
                t
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        }
    }

    /// Offers a request to the front end at the current cycle (or at its arrival, if
    /// later). A 64-byte request whose two halves fall into one row becomes one queue entry
    /// of two column accesses; otherwise each half is queued where the mapping sends it.
    /// Either every part is queued (and the request's id returned) or none.
    pub fn submit(&mut self, req: &Request) -> Result<RequestId, Backpressure> {
        let now = self.now.max(req.arrival);
        let (a, pa, second, merged) = self.place(req);
        // Check room before queuing anything.
        match (second, merged) {
            (Some(b), false) => {
                let pb = self.mapping.pseudo_channel_index(&b);
                let need_a = if pa == pb { 2 } else { 1 };
                if !self
                    .controllers
                    .get(pa)
                    .is_some_and(|c| c.has_room(req.access, need_a))
                {
                    return Err(Backpressure { pseudo_channel: pa });
                }
                if !self
                    .controllers
                    .get(pb)
                    .is_some_and(|c| c.has_room(req.access, 1))
                {
                    return Err(Backpressure { pseudo_channel: pb });
                }
            }
            _ => {
                if !self
                    .controllers
                    .get(pa)
                    .is_some_and(|c| c.has_room(req.access, 1))
                {
                    return Err(Backpressure { pseudo_channel: pa });
                }
            }
        }
        let parts: u8 = if merged { 1 } else { 2 };
        let id = RequestId(self.next_id);
        self.next_id += 1;
        let mut slot = Slot::new(now, parts, req);
        if self.keep_meta {
            slot.id = id.0;
            slot.addr = req.addr;
            slot.arrival = req.arrival;
            slot.source = PackedSource::new(req.source);
        }
        let tag = self.take_slot(slot);
        let bursts = if merged && second.is_some() { 2 } else { 1 };
        self.enqueue_part(now, pa, &a, req, tag, bursts);
        if let (Some(b), false) = (second, merged) {
            let pb = self.mapping.pseudo_channel_index(&b);
            self.enqueue_part(now, pb, &b, req, tag, 1);
        }
        Ok(id)
    }

    fn enqueue_part(
        &mut self,
        now: Cycle,
        pc: usize,
        d: &crate::hbm::DramAddr,
        req: &Request,
        tag: u32,
        bursts: u8,
    ) {
        let bank = self.mapping.bank_index(d);
        if let Some(c) = self.controllers.get_mut(pc) {
            let part = RequestPart {
                access: req.access,
                class: req.class,
                source: req.source,
                addr: req.addr,
                tag,
                bank,
                row: d.row,
                col: d.col,
                bursts,
            };
            if let Some(ready) = c.enqueue(now, part) {
                if let Some(w) = self.wake.get_mut(pc) {
                    *w = (*w).min(ready);
                    self.next = self.next.min(ready);
                }
            }
        }
    }

    /// Accounts for finished request parts; finished requests go to `out` if given.
    #[inline]
    fn collect(&mut self, mut out: Option<&mut CompletionQueue>) {
        for c in self.done.drain(..) {
            let Some(s) = self.slots.get_mut(c.tag as usize) else {
                continue;
            };
            s.done_at = s.done_at.max(c.at);
            s.parts_left -= 1;
            if s.parts_left == 0 {
                self.finished
                    .add(s.kind.access_index(), s.kind.class_index(), 1);
                if s.kind.access_index() == 0 {
                    self.read_latency.record(s.done_at - s.accepted);
                }
                self.last_completion = self.last_completion.max(s.done_at);
                if let Some(out) = out.as_deref_mut() {
                    out.push(
                        s.done_at,
                        MemCompletion {
                            id: RequestId(s.id),
                            addr: s.addr,
                            access: s.kind.access(),
                            class: s.kind.class(),
                            source: s.source.get(),
                            arrival: s.arrival,
                            accepted: s.accepted,
                            finish: s.done_at,
                        },
                    );
                }
                self.free.push(c.tag);
            }
        }
    }

    /// Steps every controller due at the current cycle and returns the next cycle any of
    /// them wants.
    #[inline]
    fn step_controllers(&mut self) -> Cycle {
        if !self.buses.is_empty() {
            return self.step_shared_channels();
        }
        let now = self.now;
        let mut next = Cycle::MAX;
        for (c, w) in self.controllers.iter_mut().zip(self.wake.iter_mut()) {
            if *w <= now {
                *w = c.step(now, &mut self.done);
            }
            next = next.min(*w);
        }
        next
    }

    /// [`Self::step_controllers`] when the pseudo-channels of a channel share one command
    /// interface: each channel's pseudo-channels due now are stepped one after the other,
    /// the one with priority first, each seeing the buses as the ones before it left them.
    fn step_shared_channels(&mut self) -> Cycle {
        let now = self.now;
        let per = self.pcs_per_channel;
        let mut next = Cycle::MAX;
        for ((bus, ctrls), wakes) in self
            .buses
            .iter_mut()
            .zip(self.controllers.chunks_mut(per))
            .zip(self.wake.chunks_mut(per))
        {
            next = next.min(step_channel(ctrls, wakes, bus, now, &mut self.done));
        }
        next
    }

    fn all_idle(&self) -> bool {
        self.controllers.iter().all(Controller::is_idle)
    }

    /// Whether every submitted request has been handed out as finished.
    pub fn is_idle(&self) -> bool {
        self.all_idle() && self.pending.is_empty()
    }

    /// The earliest cycle at which anything happens: a controller has something to do (a
    /// queued request, a gate opening, refresh falling due) or a finished request's last
    /// data beat arrives. `None` when nothing ever will.
    pub fn next_wake(&self) -> Option<Cycle> {
        let w = self
            .next
            .min(self.pending.peek_tick().unwrap_or(Cycle::MAX));
        (w != Cycle::MAX).then_some(w)
    }

    /// Runs every controller step due up to and including cycle `until`, in time order,
    /// appending each request that finishes to `out`, and then moves the current cycle to
    /// `until` (unless `until` is `Cycle::MAX`: then it stays at the last step). Requests
    /// submitted afterwards arrive no earlier than `until`.
    pub fn advance_until(&mut self, until: Cycle, out: &mut Vec<MemCompletion>) {
        let mut pending = std::mem::take(&mut self.pending);
        self.advance(until, Some(&mut pending));
        while let Some((at, c)) = pending.pop_due(until) {
            self.now = self.now.max(at);
            out.push(c);
        }
        self.pending = pending;
        if until != Cycle::MAX {
            self.now = self.now.max(until);
        }
    }

    #[inline]
    fn advance(&mut self, until: Cycle, mut out: Option<&mut CompletionQueue>) {
        while self.next <= until {
            self.now = self.now.max(self.next);
            self.next = self.step_controllers();
            self.collect(out.as_deref_mut());
        }
    }

    /// Runs a request stream (in arrival order) until every request is served, calling
    /// `progress` with the count of requests accepted every 2^16 requests. A driver over
    /// [`submit`](Self::submit) and the stepping calls.
    pub fn run<I>(&mut self, requests: I, progress: impl FnMut(u64)) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        self.run_checkpointed(requests, progress, None, |_, _| true)
    }

    /// [`MemorySystem::run`] with a hook called after each accepted request with the count
    /// accepted so far: the state there ([`MemorySystem::state`]) together with the
    /// position of the stream after that request is a complete checkpoint. The hook
    /// returns `false` to stop the run (the report is then of the part run).
    ///
    /// `resumed` says that this system was [`restore`](Self::restore)d from a state taken
    /// in the hook after that many requests, and `requests` continues right after them: the
    /// run carries on exactly as the interrupted one would have (same report).
    pub fn run_checkpointed<I, H>(
        &mut self,
        requests: I,
        mut progress: impl FnMut(u64),
        resumed: Option<u64>,
        mut hook: H,
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
        H: FnMut(&Self, u64) -> bool,
    {
        let mut source = requests.into_iter();
        let mut head = source.next();
        let mut accepted = resumed.unwrap_or(0);
        // A state is taken in the middle of admitting requests at the current cycle: a
        // resumed run re-enters there, without stepping the controllers first.
        let mut step_first = resumed.is_none();
        // No completions are handed out: skip recording what they would carry.
        let keep_meta = std::mem::replace(&mut self.keep_meta, false);
        loop {
            // Step whatever is due now.
            if step_first {
                self.advance(self.now, None);
            }
            step_first = true;
            // Admit everything that has arrived and fits, in order.
            while let Some(r) = head {
                if r.arrival > self.now || self.submit(&r).is_err() {
                    break;
                }
                accepted += 1;
                if accepted & 0xFFFF == 0 {
                    progress(accepted);
                }
                if !hook(self, accepted) {
                    progress(accepted);
                    return self.finish_run(keep_meta);
                }
                head = source.next();
            }
            let Some(next) = self.next_cycle(head.as_ref()) else {
                break;
            };
            self.now = next.max(self.now);
        }
        progress(accepted);
        self.finish_run(keep_meta)
    }

    /// The cycle a run loop steps to next: the controllers' next event or the next
    /// request's arrival (`head`, the first request not yet admitted); `None` when the run
    /// is over (no request left and every queue empty, or nothing can happen any more —
    /// the latter cannot occur with a well-formed preset).
    #[inline]
    fn next_cycle(&self, head: Option<&Request>) -> Option<Cycle> {
        let mut next = self.next;
        match head {
            Some(r) if r.arrival > self.now => next = next.min(r.arrival),
            Some(_) => {}
            None if self.all_idle() => return None,
            None => {}
        }
        (next != Cycle::MAX).then_some(next)
    }

    /// The changing state, for a checkpoint: call it from the hook of
    /// [`MemorySystem::run_checkpointed`] (between two requests of a run).
    ///
    /// # Errors
    /// Why the state cannot be saved: a controller with a stateful arbiter, an observer
    /// or a command log, or completions not yet handed out (outside `run`).
    pub fn state(&self) -> Result<MemoryState, String> {
        if !self.pending.is_empty() || !self.done.is_empty() || self.keep_meta {
            return Err("completions are waiting to be handed out: a state can be taken only inside `run_checkpointed`".into());
        }
        Ok(MemoryState {
            controllers: self
                .controllers
                .iter()
                .map(Controller::state)
                .collect::<Result<_, _>>()?,
            wake: self.wake.clone(),
            next: self.next,
            slots: self.slots.clone(),
            free: self.free.clone(),
            now: self.now,
            read_latency: self.read_latency.clone(),
            finished: self.finished,
            next_id: self.next_id,
            last_completion: self.last_completion,
            buses: self.buses.clone(),
        })
    }

    /// Takes over a state from [`MemorySystem::state`] of a system built with the same
    /// preset, mapping and settings (then resume with
    /// [`run_checkpointed`](Self::run_checkpointed)). Refused whole, leaving this system
    /// as it was, when its shape does not fit (controller, bank or channel counts, queue
    /// lengths, slot references).
    ///
    /// # Errors
    /// What does not fit.
    pub fn restore(&mut self, state: MemoryState) -> Result<(), String> {
        let n = self.controllers.len();
        let slots = state.slots.len();
        if state.controllers.len() != n || state.wake.len() != n {
            return Err(format!(
                "the saved state has {} pseudo-channels, this system {n}",
                state.controllers.len()
            ));
        }
        if state.buses.len() != self.buses.len()
            || state.buses.iter().any(|b| b.first >= self.pcs_per_channel)
        {
            return Err("the saved state's shared command buses do not fit this system".into());
        }
        if state.free.iter().any(|&t| t as usize >= slots) || !state.read_latency.is_well_formed() {
            return Err("the saved state's front end is inconsistent".into());
        }
        let mut restored = self.controllers.clone();
        for (c, s) in restored.iter_mut().zip(state.controllers) {
            c.restore(s, slots)?;
        }
        self.controllers = restored;
        self.wake = state.wake;
        self.next = state.next;
        self.slots = state.slots;
        self.free = state.free;
        self.now = state.now;
        self.read_latency = state.read_latency;
        self.finished = state.finished;
        self.next_id = state.next_id;
        self.last_completion = state.last_completion;
        self.buses = state.buses;
        Ok(())
    }

    /// The end of `run` and `run_parallel`: metadata recording restored, every controller
    /// closed at the last completion, the report.
    fn finish_run(&mut self, keep_meta: bool) -> RunReport {
        self.keep_meta = keep_meta;
        let end = self.last_completion.max(self.now);
        for c in &mut self.controllers {
            c.finish(end);
        }
        self.report(end)
    }

    /// Figures of the run so far, taking `end` as its last cycle.
    pub fn report(&self, end: Cycle) -> RunReport {
        let p = &self.preset;
        let tck = p.organisation.tck_ns;
        let mut row = (0, 0, 0);
        let mut commands: BTreeMap<String, u64> = BTreeMap::new();
        let mut rq = Occupancy::new(self.cfg.queue_depth);
        let mut wq = Occupancy::new(self.cfg.queue_depth);
        let mut bytes = 0u64;
        let mut bytes_by = ByKindClass::default();
        let (mut open, mut banks, mut bursts) = (0u64, 0u64, 0u64);
        for c in &self.controllers {
            let s = c.stats();
            bytes_by.merge(&s.bytes_by);
            row.0 += s.row_hits;
            row.1 += s.row_misses;
            row.2 += s.row_conflicts;
            bytes += s.bytes_read + s.bytes_written;
            rq.merge(&s.read_queue);
            wq.merge(&s.write_queue);
            let counts = c.pseudo_channel().command_counts();
            for k in ALL_COMMAND_KINDS {
                let n = counts[k as usize];
                if n > 0 {
                    *commands.entry(k.mnemonic().to_string()).or_default() += n;
                }
            }
            for o in c.pseudo_channel().bank_open_cycles(end) {
                open += o;
                banks += 1;
            }
            bursts += s.bytes_read / u64::from(p.organisation.bytes_per_column)
                + s.bytes_written / u64::from(p.organisation.bytes_per_column);
        }
        let simulated_ns = end as f64 * tck;
        let reads = self.finished.kind_total(Access::Read.index());
        let writes = self.finished.kind_total(Access::Write.index());
        let updates = self.finished.kind_total(2);
        let bandwidth = if end == 0 {
            0.0
        } else {
            bytes as f64 / simulated_ns
        };
        let peak = p.peak_gbps();
        let n = self.controllers.len().max(1) as f64;
        let span = (end.max(1) as f64) * n;
        RunReport {
            preset: p.name.clone(),
            mapping: self.mapping.text().to_string(),
            page_policy: format!("{:?}", self.cfg.page_policy).to_lowercase(),
            refresh: match self.cfg.refresh {
                crate::hbm::config::RefreshMode::AllBank => "all-bank".into(),
                crate::hbm::config::RefreshMode::PerBank => "per-bank".into(),
                crate::hbm::config::RefreshMode::Off => "off".into(),
            },
            queue_depth: self.cfg.queue_depth,
            pseudo_channels: self.controllers.len(),
            requests: reads + writes + updates,
            reads,
            writes,
            updates,
            bytes,
            cycles: end,
            simulated_ns,
            bandwidth_gbps: bandwidth,
            peak_gbps: peak,
            percent_of_peak: if peak > 0.0 {
                100.0 * bandwidth / peak
            } else {
                0.0
            },
            read_latency_mean: self.read_latency.mean(),
            read_latency_min: self.read_latency.min(),
            read_latency_p50: self.read_latency.quantile(0.5),
            read_latency_p99: self.read_latency.quantile(0.99),
            read_latency_max: self.read_latency.max(),
            row_hits: row.0,
            row_misses: row.1,
            row_conflicts: row.2,
            commands,
            read_queue_mean: rq.mean(),
            write_queue_mean: wq.mean(),
            read_queue_histogram: rq.cycles,
            write_queue_histogram: wq.cycles,
            bank_utilisation: if banks == 0 {
                0.0
            } else {
                open as f64 / (banks as f64 * end.max(1) as f64)
            },
            data_bus_utilisation: (bursts * u64::from(p.timing.bl)) as f64 / span,
            arbiter: self
                .controllers
                .first()
                .map_or("fr-fcfs", |c| c.arbiter().name())
                .to_string(),
            bytes_by_class: bytes_by.to_map(),
            requests_by_class: self.finished.to_map(),
        }
    }
}

/// Steps the pseudo-channels of one channel that share its command buses and are due at
/// `now` (see [`MemorySystem::step_shared_channels`]); returns their earliest wake.
fn step_channel(
    ctrls: &mut [Controller],
    wakes: &mut [Cycle],
    bus: &mut ChannelBuses,
    now: Cycle,
    done: &mut Vec<Completion>,
) -> Cycle {
    let per = ctrls.len();
    let first = bus.first;
    let mut next = Cycle::MAX;
    for k in 0..per {
        let i = (first + k) % per;
        let w = &mut wakes[i];
        if *w <= now {
            let c = &mut ctrls[i];
            c.share_buses(bus.row, bus.col);
            *w = c.step(now, done);
            let (row, col) = c.pseudo_channel().buses_free();
            if k == 0 && (row > bus.row || col > bus.col) {
                // The first one issued: the next one gets priority.
                bus.first = (first + 1) % per;
            }
            bus.row = bus.row.max(row);
            bus.col = bus.col.max(col);
        }
        next = next.min(*w);
    }
    next
}

/// One group of controllers a parallel window runs on one thread: a channel when its
/// pseudo-channels share the command buses, else one pseudo-channel.
struct Group<'a> {
    ctrls: &'a mut [Controller],
    wakes: &'a mut [Cycle],
    bus: Option<&'a mut ChannelBuses>,
    /// (arrival, controller within the group, part), in admission order.
    parts: Vec<(Cycle, usize, RequestPart)>,
    done: Vec<Completion>,
}

impl Group<'_> {
    /// Runs the group's controllers over the cycles before `end` as the serial loop
    /// would, enqueuing each part at its arrival. `false` if a part found its queue full
    /// (the serial front end would have stalled there: the window must be redone).
    fn run(&mut self, end: Cycle) -> bool {
        let mut k = 0;
        loop {
            let wmin = self.wakes.iter().copied().min().unwrap_or(Cycle::MAX);
            let arrival = self.parts.get(k).map_or(Cycle::MAX, |p| p.0);
            let now = wmin.min(arrival);
            if now >= end {
                return true;
            }
            if wmin <= now {
                match self.bus.as_deref_mut() {
                    Some(bus) => {
                        step_channel(self.ctrls, self.wakes, bus, now, &mut self.done);
                    }
                    None => {
                        for (c, w) in self.ctrls.iter_mut().zip(self.wakes.iter_mut()) {
                            if *w <= now {
                                *w = c.step(now, &mut self.done);
                            }
                        }
                    }
                }
            }
            while let Some(&(at, i, part)) = self.parts.get(k) {
                if at > now {
                    break;
                }
                match self.ctrls[i].enqueue(now, part) {
                    Some(ready) => self.wakes[i] = self.wakes[i].min(ready),
                    None => return false,
                }
                k += 1;
            }
        }
    }
}

impl MemorySystem {
    /// [`MemorySystem::run`] with the channels (or, with per-pseudo-channel buses, the
    /// pseudo-channels) stepped on the current rayon pool's threads in windows of `window`
    /// cycles. The result is identical to `run`'s: a window is simulated speculatively
    /// with every request admitted at its arrival cycle, and if any request would have
    /// found its queue full (where the serial front end stalls the whole stream), the
    /// window is thrown away and run serially. Paced traces (arrival cycles, queues rarely
    /// full) gain; saturating streams stall all the time and run serially.
    pub fn run_parallel<I>(
        &mut self,
        requests: I,
        window: Cycle,
        mut progress: impl FnMut(u64),
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        use rayon::prelude::*;
        let window = window.max(1);
        let mut source = requests.into_iter();
        let mut buffered: std::collections::VecDeque<Request> = Default::default();
        let mut head = source.next();
        let mut accepted = 0u64;
        let keep_meta = std::mem::replace(&mut self.keep_meta, false);
        let mut serial_until: Cycle = 0;
        let per = if self.buses.is_empty() {
            1
        } else {
            self.pcs_per_channel
        };
        loop {
            // One iteration of the serial loop (as in `run`).
            self.advance(self.now, None);
            while let Some(r) = head {
                if r.arrival > self.now || self.submit(&r).is_err() {
                    break;
                }
                accepted += 1;
                if accepted & 0xFFFF == 0 {
                    progress(accepted);
                }
                head = buffered.pop_front().or_else(|| source.next());
            }
            let Some(next) = self.next_cycle(head.as_ref()) else {
                break;
            };
            // A window can start when nothing is left at this cycle and the stream is not
            // stalled.
            let free = self.next > self.now && head.is_none_or(|r| r.arrival > self.now);
            if free && self.now >= serial_until {
                let start = self.now + 1;
                let end = start + window;
                let backup = self.clone();
                let backup_head = head;
                // The window's requests, their slots, and their parts per group.
                let mut taken = Vec::new();
                while let Some(r) = head {
                    if r.arrival >= end {
                        break;
                    }
                    taken.push(r);
                    head = buffered.pop_front().or_else(|| source.next());
                }
                if head.is_none() {
                    // The stream ends inside the window: the serial loop stops as soon as
                    // every queue is empty, so run the rest serially.
                    self.requeue(&mut head, backup_head, taken, &mut buffered);
                    serial_until = Cycle::MAX;
                    self.now = next.max(self.now);
                    continue;
                }
                let groups_n = self.controllers.len() / per;
                let mut parts: Vec<Vec<(Cycle, usize, RequestPart)>> = vec![Vec::new(); groups_n];
                for r in &taken {
                    self.stage(r, |pc, part| {
                        parts[pc / per].push((r.arrival, pc % per, part));
                    });
                }
                let mut buses: Vec<Option<&mut ChannelBuses>> = if self.buses.is_empty() {
                    (0..groups_n).map(|_| None).collect()
                } else {
                    self.buses.iter_mut().map(Some).collect()
                };
                let mut groups: Vec<Group> = self
                    .controllers
                    .chunks_mut(per)
                    .zip(self.wake.chunks_mut(per))
                    .zip(buses.drain(..))
                    .zip(parts)
                    .map(|(((ctrls, wakes), bus), parts)| Group {
                        ctrls,
                        wakes,
                        bus,
                        parts,
                        done: Vec::new(),
                    })
                    .collect();
                let ok = groups.par_iter_mut().map(|g| g.run(end)).all(|ok| ok);
                if ok {
                    let done: Vec<Completion> = groups.into_iter().flat_map(|g| g.done).collect();
                    self.done = done;
                    self.collect(None);
                    self.now = end - 1;
                    self.next = self.wake.iter().copied().min().unwrap_or(Cycle::MAX);
                    accepted += taken.len() as u64;
                    progress(accepted);
                    self.windows.0 += 1;
                    continue;
                }
                // Speculation failed: restore and run this stretch serially.
                drop(groups);
                let windows = (self.windows.0, self.windows.1 + 1);
                *self = backup;
                self.windows = windows;
                self.requeue(&mut head, backup_head, taken, &mut buffered);
                serial_until = end;
                self.now = next.max(self.now);
                continue;
            }
            self.now = next.max(self.now);
        }
        progress(accepted);
        self.finish_run(keep_meta)
    }

    /// Windows [`MemorySystem::run_parallel`] ran in parallel, and windows it threw away
    /// (a queue filled) and ran serially.
    pub fn parallel_windows(&self) -> (u64, u64) {
        self.windows
    }

    /// Puts requests taken for a window back in front of the stream: `taken[0]` becomes
    /// the head again and the rest, then the old head, come next.
    fn requeue(
        &self,
        head: &mut Option<Request>,
        first: Option<Request>,
        taken: Vec<Request>,
        buffered: &mut std::collections::VecDeque<Request>,
    ) {
        if taken.is_empty() {
            return;
        }
        let mut front: Vec<Request> = taken[1..].to_vec();
        if let Some(h) = *head {
            front.push(h);
        }
        for r in front.into_iter().rev() {
            buffered.push_front(r);
        }
        *head = first;
    }

    /// The front end's work for one request without queuing it: the request's slot and
    /// id, and its parts as (pseudo-channel, part) handed to `queue`. Parts are produced
    /// as [`MemorySystem::submit`] would queue them.
    fn stage(&mut self, req: &Request, mut queue: impl FnMut(usize, RequestPart)) {
        let (a, pa, second, merged) = self.place(req);
        let parts: u8 = if merged { 1 } else { 2 };
        self.next_id += 1;
        let tag = self.take_slot(Slot::new(req.arrival, parts, req));
        let part = |d: &crate::hbm::DramAddr, bursts: u8| RequestPart {
            access: req.access,
            class: req.class,
            source: req.source,
            addr: req.addr,
            tag,
            bank: self.mapping.bank_index(d),
            row: d.row,
            col: d.col,
            bursts,
        };
        let bursts = if merged && second.is_some() { 2 } else { 1 };
        queue(pa, part(&a, bursts));
        if let (Some(b), false) = (second, merged) {
            queue(self.mapping.pseudo_channel_index(&b), part(&b, 1));
        }
    }
}

impl Component for MemorySystem {
    type Output = MemCompletion;

    /// [`MemorySystem::next_wake`] on the common time axis.
    fn next_wake(&self) -> Option<Tick> {
        MemorySystem::next_wake(self).map(|c| self.clock.tick_of(c))
    }

    /// [`MemorySystem::advance_until`] the last DRAM cycle that has begun at `until`.
    fn advance(&mut self, until: Tick, out: &mut Vec<MemCompletion>) {
        self.advance_until(self.clock.cycle_at(until), out);
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use crate::hbm::config::{PagePolicy, RefreshMode};
    use crate::hbm::mapping::STREAM_MAPPING;
    use crate::trace::{Pattern, Synthetic};

    fn system(bus: CommandBus, refresh: RefreshMode, page: PagePolicy, look: u32) -> MemorySystem {
        let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
        p.organisation.command_bus = bus;
        p.controller.activated_per_bank = look;
        let mut cfg = ControllerConfig::with_depth(&p, 16);
        cfg.refresh = refresh;
        cfg.page_policy = page;
        let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
        MemorySystem::new(&p, mapping, cfg)
    }

    fn stream(n: u64) -> Synthetic {
        Synthetic::new(Pattern::Random, n, 64, 1 << 30, 0.3, 7)
    }

    /// A run stopped at any accepted request and continued from its state (in a system
    /// built afresh) ends with exactly the uninterrupted run's report.
    #[test]
    fn a_run_restored_from_any_point_ends_as_the_uninterrupted_one() {
        const N: u64 = 30_000;
        let setups = [
            (
                CommandBus::Shared,
                RefreshMode::AllBank,
                PagePolicy::Open,
                0,
            ),
            (
                CommandBus::PerPseudoChannel,
                RefreshMode::PerBank,
                PagePolicy::Closed,
                1,
            ),
        ];
        for (bus, refresh, page, look) in setups {
            let whole = system(bus, refresh, page, look).run(stream(N), |_| {});
            let mut states = Vec::new();
            let points = [1, 4_999, 17_000, N];
            let mut sys = system(bus, refresh, page, look);
            let stopped = sys.run_checkpointed(
                stream(N),
                |_| {},
                None,
                |s, n| {
                    if points.contains(&n) {
                        states.push((n, s.state().unwrap()));
                    }
                    true
                },
            );
            assert_eq!(stopped, whole, "{bus:?}: the hook changed the run");
            assert_eq!(states.len(), points.len());
            for (n, state) in states {
                let mut sys = system(bus, refresh, page, look);
                sys.restore(state).unwrap();
                let mut rest = stream(N);
                for _ in 0..n {
                    rest.next();
                }
                let resumed = sys.run_checkpointed(rest, |_| {}, Some(n), |_, _| true);
                assert_eq!(resumed, whole, "{bus:?} {refresh:?}: resumed after {n}");
            }
        }
    }

    #[test]
    fn a_state_of_another_shape_is_refused_and_changes_nothing() {
        let mut a = system(
            CommandBus::Shared,
            RefreshMode::AllBank,
            PagePolicy::Open,
            0,
        );
        let mut state = None;
        a.run_checkpointed(
            stream(2_000),
            |_| {},
            None,
            |s, n| {
                if n == 1_000 {
                    state = Some(s.state().unwrap());
                }
                true
            },
        );
        let state = state.unwrap();
        let mut b = system(
            CommandBus::PerPseudoChannel,
            RefreshMode::AllBank,
            PagePolicy::Open,
            0,
        );
        let before = b.report(0);
        let e = b.restore(state.clone()).unwrap_err();
        assert!(e.contains("buses"), "{e}");
        assert_eq!(b.report(0), before);
        let mut c = system(
            CommandBus::Shared,
            RefreshMode::PerBank,
            PagePolicy::Open,
            0,
        );
        let e = c.restore(state).unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
