//! The memory system's front end and stepping: [`MemorySystem`] places each request on its
//! controllers, keeps its slot until every part finished, and steps the controllers due at
//! each cycle (channels whose pseudo-channels share a command interface in turn).

use crate::hbm::config::CommandBus;
use crate::hbm::{AddressMapping, Cycle, DramAddr, HbmPreset};
use crate::sim::{ClockDomain, Component, Tick};

use super::pending::CompletionQueue;
use super::scheduler::{PackedSource, PartKind};
use super::{
    Access, Arbiter, ByKindClass, Completion, Controller, ControllerConfig, ControllerObserver,
    LogHistogram, Request, RequestId, RequestPart, Source, TrafficClass,
};

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
pub(super) struct Slot {
    /// Cycle the front end accepted the request into a controller queue.
    pub(super) accepted: Cycle,
    pub(super) done_at: Cycle,
    pub(super) parts_left: u8,
    pub(super) kind: PartKind,
    #[serde(skip, default)]
    pub(super) id: u64,
    #[serde(skip, default)]
    pub(super) addr: u64,
    #[serde(skip, default)]
    pub(super) arrival: Cycle,
    #[serde(skip, default)]
    pub(super) source: PackedSource,
}

impl Slot {
    /// The slot of `req`, accepted at `accepted` in `parts` parts, without the fields
    /// only a completion handed out reads.
    pub(super) fn new(accepted: Cycle, parts: u8, req: &Request) -> Self {
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
    pub(super) preset: HbmPreset,
    pub(super) mapping: AddressMapping,
    /// The decode of the address one column access in (`mapping.decode(column_bytes)`):
    /// the DRAM-address bits of the one address bit that separates the halves of a
    /// 64-byte request (see `MemorySystem::place`).
    pub(super) second_half: DramAddr,
    pub(super) cfg: ControllerConfig,
    pub(super) controllers: Vec<Controller>,
    /// The cycle each controller wants to be stepped at.
    pub(super) wake: Vec<Cycle>,
    /// The minimum of `wake`.
    pub(super) next: Cycle,
    pub(super) slots: Vec<Slot>,
    /// Whether to fill the slots' completion fields (off inside [`MemorySystem::run`],
    /// which hands out none).
    pub(super) keep_meta: bool,
    pub(super) free: Vec<u32>,
    pub(super) done: Vec<Completion>,
    pub(super) now: Cycle,
    pub(super) read_latency: LogHistogram,
    /// Finished requests by access kind and class.
    pub(super) finished: ByKindClass,
    pub(super) next_id: u64,
    pub(super) last_completion: Cycle,
    pub(super) clock: ClockDomain,
    /// Finished requests whose last data beat is still ahead of the current cycle (a
    /// column command's data crosses the bus CL or CWL + BL after it issues), for
    /// [`MemorySystem::advance_until`] to hand out in time order.
    pub(super) pending: CompletionQueue,
    /// Per channel, when its pseudo-channels share one command interface
    /// ([`CommandBus::Shared`] with more than one pseudo-channel per channel); empty
    /// otherwise.
    pub(super) buses: Vec<ChannelBuses>,
    /// Pseudo-channels per channel (consecutive controller indices).
    pub(super) pcs_per_channel: usize,
    /// Parallel windows run and windows thrown away ([`MemorySystem::run_parallel`]).
    pub(super) windows: (u64, u64),
}

/// The shared row and column command buses of one channel.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct ChannelBuses {
    /// Row bus free from this cycle.
    pub(super) row: Cycle,
    /// Column bus free from this cycle.
    pub(super) col: Cycle,
    /// The pseudo-channel (within the channel) stepped first: it has priority on both
    /// buses in a cycle. Passes to the next one whenever it issued a command, so two
    /// pseudo-channels that contend alternate (round-robin at command granularity).
    pub(super) first: usize,
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
    pub(super) fn place(&self, req: &Request) -> (DramAddr, usize, Option<DramAddr>, bool) {
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
    pub(super) fn take_slot(&mut self, slot: Slot) -> u32 {
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
    pub(super) fn collect(&mut self, mut out: Option<&mut CompletionQueue>) {
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

    pub(super) fn all_idle(&self) -> bool {
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
    pub(super) fn advance(&mut self, until: Cycle, mut out: Option<&mut CompletionQueue>) {
        while self.next <= until {
            self.now = self.now.max(self.next);
            self.next = self.step_controllers();
            self.collect(out.as_deref_mut());
        }
    }
}

/// Steps the pseudo-channels of one channel that share its command buses and are due at
/// `now` (see [`MemorySystem::step_shared_channels`]); returns their earliest wake.
pub(super) fn step_channel(
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
