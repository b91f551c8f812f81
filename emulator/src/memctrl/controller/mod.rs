//! The memory controller of one pseudo-channel: read and write queues, FR-FCFS under a
//! pluggable class [`Arbiter`], open or closed page, write draining, refresh, statistics,
//! an optional command log and an optional [`ControllerObserver`].
//!
//! # Requests
//! Each queued part says what it is ([`Access`]) and which traffic it belongs to
//! ([`TrafficClass`]). Reads go to the read queue; writes and near-memory updates share
//! the write queue and its drain mode, and an update issues `UPD` (op-and-store; the next
//! column command to its bank group waits tCCDWL) where a write issues `WR`.
//!
//! # Time
//! The controller is stepped by its owner at cycles it asks for: [`Controller::step`]
//! returns the next cycle at which anything could change (a gate opening, a request
//! becoming visible, refresh falling due), so idle and gated cycles are skipped.
//! HBM has separate row and column command buses; one step issues at most one row command
//! (ACT, PRE, PREA, REF, REFpb) and one column command (RD, WR, UPD) in the same cycle.
//!
//! # Arbitration and observation
//! Before its column and row passes a step asks the arbiter which classes it may serve
//! (see [`super::arbiter`]); the default [`FrFcfs`] grants every class and is never
//! called. The arbiter hears of every issued command and of kernel boundaries
//! ([`Controller::kernel_boundary`]). An attached observer hears of every issued column
//! command with the request's class, sender and address (see [`super::observer`]).
//!
//! # Sharing the pseudo-channel with an NMC engine
//! An NMC engine next to the controller drives the same DRAM through the same
//! [`PseudoChannel`] timing object, so every gate (tFAW, tRRD, tCCD, refresh) holds across
//! both users:
//! 1. [`Controller::acquire_for_nmc`] stops normal scheduling (requests still queue; the
//!    front end sees back-pressure when the queues fill). Column commands already issued
//!    complete normally; open rows stay open and are visible through
//!    [`Controller::pseudo_channel`].
//! 2. The engine issues with [`Controller::nmc_issue`] (earliest legal cycle, the fast
//!    path of the timing state) or, checked, [`Controller::issue_external`]; both go
//!    through the command log and the command counters.
//! 3. Refresh stays the controller's schedule: while NMC owns the channel the engine asks
//!    [`Controller::nmc_refresh_due`] before each column and, when due, closes its rows
//!    and issues an all-bank REF through [`Controller::nmc_issue`] (the engine broadcasts
//!    to every bank, so it refreshes every bank at once).
//! 4. [`Controller::release_from_nmc`] hands the channel back; the owner must step the
//!    controller at the returned cycle. Mode-switch cost (`nmc.mode_switch`) is charged
//!    by the engine around these calls.
//!
//! # Rooms
//! This file holds the controller's settings, its queued parts and its front end
//! (enqueue, accessors). The scheduler's step is in `schedule`, the state kept in step
//! with issued commands (drain mode, hit counts, look-ahead marks, quiet periods) in
//! `bookkeeping`, the NMC engine's use of the channel in `nmc`, and the checkpointed state
//! in `checkpoint`.

mod bookkeeping;
mod checkpoint;
mod nmc;
mod schedule;

pub use checkpoint::ControllerState;

use crate::hbm::config::{HbmPreset, PagePolicy, RefreshMode};
use crate::hbm::{Command, Cycle, PseudoChannel};

use super::arbiter::{Arbiter, FrFcfs, Grant};
use super::observer::ControllerObserver;
use super::refresh::{RefreshBlock, Refresher};
use super::request::{Access, Source, TrafficClass};
use super::scheduler::{BankQueues, Entry, PackedSource, PartKind};
use super::stats::{ControllerStats, RowClass};

/// Settings of one controller (per run; defaults come from the preset).
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerConfig {
    /// Entries in each of the read and write queues.
    pub queue_depth: usize,
    /// Row-buffer policy.
    pub page_policy: PagePolicy,
    /// Start draining writes at this many queued writes.
    pub write_high: usize,
    /// Stop draining at this many (if reads wait).
    pub write_low: usize,
    /// Cycles from enqueue to the first command for a request.
    pub command_overhead: Cycle,
    /// Refresh mode.
    pub refresh: RefreshMode,
    /// Look-ahead window: activated requests per bank held beyond the queue (0 or 1; see
    /// [`crate::hbm::config::ControllerDefaults::activated_per_bank`]).
    pub activated_per_bank: usize,
    /// Re-check every scheduled command's bank state and gates before issuing it (and
    /// panic on a violation, a scheduler bug). Default: on in debug builds, off in release
    /// builds, where the scheduler's own gate computation is trusted; both paths issue the
    /// same commands (`emulator/tests/dram_unchecked.rs`).
    pub checked_issue: bool,
}

impl ControllerConfig {
    /// The preset's defaults.
    pub fn from_preset(p: &HbmPreset) -> Self {
        Self::with_depth(p, p.controller.queue_depth as usize)
    }

    /// The preset's defaults with another queue depth (watermarks scale with it).
    pub fn with_depth(p: &HbmPreset, depth: usize) -> Self {
        let depth = depth.max(1);
        let c = &p.controller;
        let high = ((c.write_high_watermark * depth as f64).round() as usize).clamp(1, depth);
        let low = ((c.write_low_watermark * depth as f64).round() as usize).min(high - 1);
        ControllerConfig {
            queue_depth: depth,
            page_policy: c.page_policy,
            write_high: high,
            write_low: low,
            command_overhead: Cycle::from(c.command_overhead),
            refresh: p.refresh.mode,
            activated_per_bank: c.activated_per_bank as usize,
            checked_issue: cfg!(debug_assertions),
        }
    }
}

/// What the front end queues at one controller: one or two column accesses in one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestPart {
    /// Read, write or near-memory update.
    pub access: Access,
    /// Traffic class.
    pub class: TrafficClass,
    /// Sender (kept for an attached observer).
    pub source: Option<Source>,
    /// The request's byte address (kept for an attached observer).
    pub addr: u64,
    /// Tag returned in the [`Completion`].
    pub tag: u32,
    /// Bank index within the pseudo-channel (group-major).
    pub bank: usize,
    /// Row.
    pub row: u32,
    /// First column access.
    pub col: u32,
    /// Column accesses (1 or 2).
    pub bursts: u8,
}

impl RequestPart {
    /// A compute-class part with no sender and address 0.
    pub const fn new(
        access: Access,
        tag: u32,
        bank: usize,
        row: u32,
        col: u32,
        bursts: u8,
    ) -> Self {
        RequestPart {
            access,
            class: TrafficClass::Compute,
            source: None,
            addr: 0,
            tag,
            bank,
            row,
            col,
            bursts,
        }
    }

    /// The same part in another class.
    #[must_use]
    pub const fn with_class(mut self, class: TrafficClass) -> Self {
        self.class = class;
        self
    }

    /// The same part from a sender.
    #[must_use]
    pub const fn with_source(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }
}

/// An attached observer.
#[derive(Debug, Clone)]
struct Observed {
    observer: Box<dyn ControllerObserver>,
}

/// A request part that finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The tag given at enqueue.
    pub tag: u32,
    /// Cycle the last data beat of the part crossed the bus.
    pub at: Cycle,
}

/// One logged command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoggedCommand {
    /// Issue cycle.
    pub at: Cycle,
    /// The command.
    pub cmd: Command,
}

/// The memory controller of one pseudo-channel.
#[derive(Debug, Clone)]
pub struct Controller {
    pc: PseudoChannel,
    cfg: ControllerConfig,
    reads: BankQueues,
    writes: BankQueues,
    draining: bool,
    refresh: Refresher,
    nmc_owned: bool,
    bytes_per_column: u64,
    stats: ControllerStats,
    log: Option<Vec<LoggedCommand>>,
    /// Until this cycle the column pass cannot find a ready command unless something
    /// changes (an enqueue, a row command, a finished entry, refresh, the drain mode);
    /// gates only move later when commands issue, so skipping the scan is exact.
    column_quiet_until: Cycle,
    /// The same for the row pass.
    row_quiet_until: Cycle,
    last_block: RefreshBlock,
    last_write: bool,
    /// Pseudo-channel index in the memory system (for observers).
    index: usize,
    /// Banks whose first read-queue ([0]) / write-queue ([1]) entry had its row opened
    /// for it and is not yet served (the look-ahead window; always 0 without it).
    activated: [u64; 2],
    arbiter: Box<dyn Arbiter>,
    /// The arbiter grants every class and keeps no state: never call it.
    arbiter_blind: bool,
    last_grant: Grant,
    observed: Option<Box<Observed>>,
}

impl Controller {
    /// A controller with empty queues and every bank precharged.
    pub fn new(preset: &HbmPreset, cfg: ControllerConfig) -> Self {
        let pc = PseudoChannel::new(preset);
        let refresh = Refresher::new(cfg.refresh, pc.timing().trefi, pc.banks());
        Controller {
            reads: BankQueues::new(pc.banks()),
            writes: BankQueues::new(pc.banks()),
            stats: ControllerStats::new(cfg.queue_depth),
            bytes_per_column: u64::from(preset.organisation.bytes_per_column),
            pc,
            cfg,
            draining: false,
            refresh,
            nmc_owned: false,
            log: None,
            column_quiet_until: 0,
            row_quiet_until: 0,
            last_block: RefreshBlock::default(),
            last_write: false,
            index: 0,
            activated: [0; 2],
            arbiter: Box::new(FrFcfs),
            arbiter_blind: true,
            last_grant: Grant::ALL,
            observed: None,
        }
    }

    /// Sets the pseudo-channel index observers are told (the memory system numbers its
    /// controllers).
    pub fn set_index(&mut self, index: usize) {
        self.index = index;
    }

    /// The pseudo-channel index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// Replaces the arbitration policy (takes effect at the next step).
    pub fn set_arbiter(&mut self, arbiter: Box<dyn Arbiter>) {
        self.arbiter_blind = arbiter.class_blind();
        self.arbiter = arbiter;
        self.last_grant = Grant::ALL;
        self.invalidate();
    }

    /// The arbitration policy.
    pub fn arbiter(&self) -> &dyn Arbiter {
        self.arbiter.as_ref()
    }

    /// Tells the arbiter a kernel boundary passed; returns the cycle to step at.
    pub fn kernel_boundary(&mut self, now: Cycle) -> Cycle {
        self.arbiter.kernel_boundary(now);
        self.invalidate();
        now
    }

    /// Attaches an observer of issued column commands (replacing any other); each issued
    /// column reports its part's sender and address to it.
    pub fn set_observer(&mut self, observer: Box<dyn ControllerObserver>) {
        self.observed = Some(Box::new(Observed { observer }));
    }

    /// Detaches and returns the observer.
    pub fn take_observer(&mut self) -> Option<Box<dyn ControllerObserver>> {
        self.observed.take().map(|o| o.observer)
    }

    /// The attached observer.
    pub fn observer(&self) -> Option<&dyn ControllerObserver> {
        self.observed.as_deref().map(|o| o.observer.as_ref())
    }

    /// The attached observer if it is a `T`.
    pub fn observer_as<T: ControllerObserver + 'static>(&self) -> Option<&T> {
        self.observer()?.as_any().downcast_ref()
    }

    /// The attached observer, mutably, if it is a `T`.
    pub fn observer_as_mut<T: ControllerObserver + 'static>(&mut self) -> Option<&mut T> {
        self.observed
            .as_deref_mut()?
            .observer
            .as_any_mut()
            .downcast_mut()
    }

    /// Starts (or stops) recording every issued command.
    pub fn set_logging(&mut self, on: bool) {
        self.log = on.then(Vec::new);
    }

    /// The commands issued since logging started.
    pub fn log(&self) -> &[LoggedCommand] {
        self.log.as_deref().unwrap_or(&[])
    }

    /// The DRAM timing state.
    pub fn pseudo_channel(&self) -> &PseudoChannel {
        &self.pc
    }

    /// Applies the other pseudo-channels' use of a shared command interface (see
    /// [`PseudoChannel::share_buses`]); the memory system calls it before each step.
    #[inline]
    pub fn share_buses(&mut self, row: Cycle, col: Cycle) {
        self.pc.share_buses(row, col);
    }

    /// The settings.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &ControllerStats {
        &self.stats
    }

    /// Whether the queue `access` goes to (reads: the read queue; writes and updates: the
    /// write queue) has room for `n` more entries.
    #[inline]
    pub fn has_room(&self, access: Access, n: usize) -> bool {
        let w = access.is_write_like();
        let q = if w { &self.writes } else { &self.reads };
        // Activated requests are held beyond the queue (the look-ahead window).
        let held = self.activated[usize::from(w)].count_ones() as usize;
        q.len() - held + n <= self.cfg.queue_depth
    }

    /// Entries in the read queue and in the write queue (for a timeline's occupancy
    /// counters).
    pub fn queue_lens(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len())
    }

    /// Entries in the read queue and in the write queue, by traffic class (in
    /// [`TrafficClass::ALL`] order).
    pub fn queue_class_lens(
        &self,
    ) -> (
        [usize; super::request::TRAFFIC_CLASSES],
        [usize; super::request::TRAFFIC_CLASSES],
    ) {
        (self.reads.class_lens(), self.writes.class_lens())
    }

    /// Whether both queues are empty.
    pub fn is_idle(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }

    /// Queues a request part at `now`; it becomes visible to the scheduler after the
    /// command overhead. Returns the cycle at which the controller should be stepped, or
    /// `None` if the queue is full or the bank does not exist.
    #[inline]
    pub fn enqueue(&mut self, now: Cycle, part: RequestPart) -> Option<Cycle> {
        let RequestPart {
            access,
            class,
            source,
            addr,
            tag,
            bank,
            row,
            col,
            bursts,
        } = part;
        if !self.has_room(access, 1) || bank >= self.pc.banks() {
            return None;
        }
        let ready = now + self.cfg.command_overhead;
        let e = Entry {
            seq: 0,
            tag,
            row,
            ready,
            col,
            bank: bank as u8,
            bursts_left: bursts.max(1),
            row_class: RowClass::Hit,
            kind: PartKind::new(access, class),
            // The sender and address travel in the entry (for an observer): a side table
            // indexed by the system-wide tag missed the cache on every enqueue and issue.
            source: PackedSource::new(source),
            addr,
        };
        // A new entry cannot make anything ready before it is itself visible, and it can
        // only delay others (a new hit holds back a PRE).
        self.column_quiet_until = self.column_quiet_until.min(ready);
        self.row_quiet_until = self.row_quiet_until.min(ready);
        if access.is_write_like() {
            self.stats.write_queue.record(now, self.writes.len());
            let open = self.pc.open_row_raw(bank);
            self.writes.push(e, open);
        } else {
            self.stats.read_queue.record(now, self.reads.len());
            let open = self.pc.open_row_raw(bank);
            self.reads.push(e, open);
        }
        Some(ready)
    }

    /// Closes the occupancy histograms at `now` (call once at the end of a run).
    pub fn finish(&mut self, now: Cycle) {
        self.stats.read_queue.record(now, self.reads.len());
        self.stats.write_queue.record(now, self.writes.len());
    }
}
