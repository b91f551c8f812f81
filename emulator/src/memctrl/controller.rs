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

use crate::hbm::config::{HbmPreset, PagePolicy, RefreshMode};
use crate::hbm::timing::CLOSED_ROW;
use crate::hbm::{Command, CommandKind, Cycle, PseudoChannel, TimingError};

use super::arbiter::{Arbiter, ArbiterView, ClassSet, FrFcfs, Grant, Issued};
use super::observer::{ControllerObserver, IssuedColumn};
use super::refresh::{RefreshBlock, Refresher};
use super::request::{Access, Source, TrafficClass};
use super::scheduler::{
    pick_activated, pick_column, pick_row, wanted_banks, BankQueues, Entry, Everyone, PackedSource,
    PartKind, Slot,
};
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

/// [`pick_column`] among the first tier's classes, then (if nothing can issue) among the
/// second's.
#[inline(never)]
fn pick_column_tiered(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    drain: bool,
    block: RefreshBlock,
    (first, then): (ClassSet, ClassSet),
    wake: &mut Cycle,
) -> Option<Slot> {
    pick_column(queue, pc, now, drain, block, first, wake).or_else(|| {
        if then == first {
            None
        } else {
            pick_column(queue, pc, now, drain, block, then, wake)
        }
    })
}

/// [`pick_row`] among the first tier's classes, then among the second's.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn pick_row_tiered(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    policy: PagePolicy,
    (first, then): (ClassSet, ClassSet),
    protect: u64,
    wake: &mut Cycle,
) -> Option<(Command, Option<Slot>)> {
    let p = pick_row(queue, pc, now, block, policy, first, protect, wake);
    if p.is_none() && then != first {
        pick_row(queue, pc, now, block, policy, then, protect, wake)
    } else {
        p
    }
}

/// Bit b set when bank b has a row open: [`PseudoChannel::open_mask`] read off the packed
/// open-row copy (one cache line) instead of the per-bank timing records (one line per
/// bank or two), as the scheduler's passes do. Same mask.
#[inline]
fn open_mask(pc: &PseudoChannel) -> u64 {
    (0..pc.banks().min(64))
        .filter(|&b| pc.open_row_raw(b) != CLOSED_ROW)
        .fold(0, |m, b| m | 1u64 << b)
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

/// The changing state of a [`Controller`] (its queues, banks, refresh, statistics), for a
/// checkpoint: what a controller made with the same preset and settings needs to carry on
/// exactly where this one was. Only for a controller with the default class-blind,
/// stateless arbiter, no observer and no command log (`nmcp mem`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ControllerState {
    pc: PseudoChannel,
    reads: BankQueues,
    writes: BankQueues,
    draining: bool,
    refresh: Refresher,
    nmc_owned: bool,
    stats: ControllerStats,
    /// The occupancy histograms' last change (read, write queue).
    occupancy_since: [Cycle; 2],
    column_quiet_until: Cycle,
    row_quiet_until: Cycle,
    last_block: RefreshBlock,
    last_write: bool,
    activated: [u64; 2],
    last_grant: Grant,
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

    /// The changing state, or why it cannot be taken (a stateful arbiter, an observer or
    /// a command log attached: those are not saved).
    ///
    /// # Errors
    /// What prevents it.
    pub fn state(&self) -> Result<ControllerState, String> {
        if !self.arbiter_blind {
            return Err(format!(
                "pseudo-channel {}: arbiter {} keeps state a checkpoint does not save",
                self.index,
                self.arbiter.name()
            ));
        }
        if self.observed.is_some() || self.log.is_some() {
            return Err(format!(
                "pseudo-channel {}: an observer or command log is attached",
                self.index
            ));
        }
        Ok(ControllerState {
            pc: self.pc.clone(),
            reads: self.reads.clone(),
            writes: self.writes.clone(),
            draining: self.draining,
            refresh: self.refresh.clone(),
            nmc_owned: self.nmc_owned,
            stats: self.stats.clone(),
            occupancy_since: [
                self.stats.read_queue.since(),
                self.stats.write_queue.since(),
            ],
            column_quiet_until: self.column_quiet_until,
            row_quiet_until: self.row_quiet_until,
            last_block: self.last_block,
            last_write: self.last_write,
            activated: self.activated,
            last_grant: self.last_grant,
        })
    }

    /// Takes over a state from [`Controller::state`] of a controller with the same preset
    /// and settings; `slots` is how many request slots the memory system holds (queue
    /// entries must refer to one). Nothing changes if it is refused.
    ///
    /// # Errors
    /// What does not fit (timing, bank count, queue lengths, refresh setup).
    pub fn restore(&mut self, state: ControllerState, slots: usize) -> Result<(), String> {
        // A queue holds up to its depth plus the activated entries (one per bank).
        let depth = self.cfg.queue_depth + self.pc.banks();
        let bank_mask = match self.pc.banks() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        let fits = self.arbiter_blind
            && self.observed.is_none()
            && self.pc.same_shape(&state.pc)
            && self.reads.same_shape(&state.reads, depth, slots)
            && self.writes.same_shape(&state.writes, depth, slots)
            && self.refresh.same_shape(&state.refresh)
            && state.stats.read_queue.cycles.len() == self.stats.read_queue.cycles.len()
            && state.stats.write_queue.cycles.len() == self.stats.write_queue.cycles.len()
            && state.activated.iter().all(|&m| m & !bank_mask == 0);
        if !fits {
            return Err(format!(
                "pseudo-channel {}: the saved state does not fit this preset and settings",
                self.index
            ));
        }
        self.pc = state.pc;
        self.reads = state.reads;
        self.writes = state.writes;
        self.draining = state.draining;
        self.refresh = state.refresh;
        self.nmc_owned = state.nmc_owned;
        self.stats = state.stats;
        self.stats.read_queue.set_since(state.occupancy_since[0]);
        self.stats.write_queue.set_since(state.occupancy_since[1]);
        self.column_quiet_until = state.column_quiet_until;
        self.row_quiet_until = state.row_quiet_until;
        self.last_block = state.last_block;
        self.last_write = state.last_write;
        self.activated = state.activated;
        self.last_grant = state.last_grant;
        Ok(())
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

    /// Keeps the queues' per-bank hit counts after a row command the scheduler issued.
    #[inline]
    fn rows_changed(&mut self, cmd: &Command) {
        match *cmd {
            Command::Act { bank, .. } | Command::Pre { bank } => {
                if let Some(b) = self.pc.bank_index(bank) {
                    let open = self.pc.open_row_raw(b);
                    self.reads.recount(b, open);
                    self.writes.recount(b, open);
                }
            }
            _ => self.recount_hits(),
        }
    }

    /// Recounts every bank's hits (after refresh, or after an NMC engine drove the banks).
    fn recount_hits(&mut self) {
        for b in 0..self.pc.banks() {
            let open = self.pc.open_row_raw(b);
            self.reads.recount(b, open);
            self.writes.recount(b, open);
        }
    }

    /// Drops look-ahead marks whose bank no longer has the request's row open (refresh or
    /// an NMC engine closed it): they would otherwise protect a row nobody waits for.
    fn revalidate_activated(&mut self) {
        for (k, q) in [&self.reads, &self.writes].into_iter().enumerate() {
            let mut m = self.activated[k];
            while m != 0 {
                let b = m.trailing_zeros() as usize;
                m &= m - 1;
                let keep = q
                    .bank(b)
                    .first()
                    .is_some_and(|e| self.pc.open_row_raw(b) == e.row);
                if !keep {
                    self.activated[k] &= !(1u64 << b);
                }
            }
        }
    }

    /// Entries in the read queue and in the write queue (for a timeline's occupancy
    /// counters).
    pub fn queue_lens(&self) -> (usize, usize) {
        (self.reads.len(), self.writes.len())
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

    /// Whether the controller should be serving the write queue, given the queues now.
    fn wants_drain(&self) -> bool {
        let w = self.writes.len();
        if self.draining {
            !(w == 0 || (w <= self.cfg.write_low && !self.reads.is_empty()))
        } else {
            w > 0 && (w >= self.cfg.write_high || self.reads.is_empty())
        }
    }

    fn update_drain_mode(&mut self) {
        self.draining = self.wants_drain();
    }

    fn record(&mut self, cmd: &Command, at: Cycle) {
        if let Some(log) = &mut self.log {
            log.push(LoggedCommand { at, cmd: *cmd });
        }
    }

    #[inline]
    fn issue_internal(&mut self, cmd: &Command, at: Cycle) {
        if self.cfg.checked_issue {
            if let Err(e) = self.pc.issue(cmd, at) {
                // The scheduler only picks commands whose gates it has checked; reaching
                // this is a bug in the scheduler, not a property of the input.
                panic!("memory controller scheduled an illegal command: {e}");
            }
        } else {
            self.pc.issue_unchecked(cmd, at);
        }
        self.record(cmd, at);
    }

    /// Issues what can issue at `now` and returns the next cycle worth stepping at (always
    /// later than `now`). Finished request parts are appended to `done`.
    pub fn step(&mut self, now: Cycle, done: &mut Vec<Completion>) -> Cycle {
        if self.arbiter_blind {
            self.step_with::<false>(now, done)
        } else {
            self.step_with::<true>(now, done)
        }
    }

    /// [`Controller::step`], compiled once without the arbiter (`ARBITRATED` false: the
    /// class-blind default, which is the plain FR-FCFS scan) and once with it.
    #[inline(always)]
    fn step_with<const ARBITRATED: bool>(
        &mut self,
        now: Cycle,
        done: &mut Vec<Completion>,
    ) -> Cycle {
        if self.nmc_owned {
            return Cycle::MAX;
        }
        self.update_drain_mode();
        // Serve the write queue (writes and updates) while draining, else the read queue.
        let drain = self.draining;
        let mut wake = Cycle::MAX;
        let per_bank_due =
            self.cfg.refresh == RefreshMode::PerBank && now >= self.refresh.next_due();
        let (wanted, open) = if per_bank_due {
            (
                wanted_banks([&self.reads, &self.writes]),
                open_mask(&self.pc),
            )
        } else {
            (0, 0)
        };
        let block = self.refresh.block(now, wanted, open);
        // The classes to serve, in two tiers (the class-blind default never asks).
        let tiers = if ARBITRATED {
            self.consult_arbiter(now, drain, &mut wake)
        } else {
            (ClassSet::ALL, ClassSet::ALL)
        };
        if block != self.last_block || drain != self.last_write {
            self.last_block = block;
            self.last_write = drain;
            self.invalidate();
        }

        if now >= self.column_quiet_until {
            let mut w = Cycle::MAX;
            // The look-ahead window first (Ramulator 2 serves its active buffer first).
            let mut pick = None;
            if self.activated != [0, 0] {
                pick = pick_activated(
                    [&self.reads, &self.writes],
                    self.activated,
                    &self.pc,
                    now,
                    block,
                    &mut w,
                );
            }
            if pick.is_none() {
                let queue = if drain { &self.writes } else { &self.reads };
                pick = if ARBITRATED {
                    pick_column_tiered(queue, &self.pc, now, drain, block, tiers, &mut w)
                } else {
                    pick_column(queue, &self.pc, now, drain, block, Everyone, &mut w)
                }
                .map(|i| (i, drain));
            }
            match pick {
                Some((i, write)) => {
                    if self.serve_column::<ARBITRATED>(i, write, now, done) {
                        // Fewer hits may free a PRE.
                        self.row_quiet_until = 0;
                    }
                    self.column_quiet_until = 0;
                    // The next column command cannot come before the bus-wide gates open.
                    let floor = if write == drain {
                        self.pc.column_floor(drain)
                    } else {
                        now + 1
                    };
                    wake = wake.min(floor);
                }
                None => self.column_quiet_until = w,
            }
            wake = wake.min(w);
        } else {
            wake = wake.min(self.column_quiet_until);
        }

        // Row command bus: refresh first, then FR-FCFS.
        let mut row_done = false;
        if let Some(cmd) = self.refresh.command(now, &self.pc) {
            let t = self.pc.earliest(&cmd);
            if t <= now {
                self.issue_internal(&cmd, now);
                if ARBITRATED {
                    self.tell_arbiter(&cmd, None, false, now);
                }
                if matches!(cmd.kind(), CommandKind::Ref | CommandKind::RefPb) {
                    self.refresh.refreshed(&cmd, &self.pc);
                }
                if self.activated != [0, 0] {
                    self.revalidate_activated();
                }
                self.recount_hits();
                self.invalidate();
                row_done = true;
                wake = now + 1;
            } else {
                wake = wake.min(t);
            }
        } else {
            wake = wake.min(self.refresh.next_due());
        }
        if !row_done && now >= self.row_quiet_until {
            let mut w = Cycle::MAX;
            let queue = if drain { &self.writes } else { &self.reads };
            let policy = self.cfg.page_policy;
            let protect = self.activated[0] | self.activated[1];
            let pick = if ARBITRATED {
                pick_row_tiered(queue, &self.pc, now, block, policy, tiers, protect, &mut w)
            } else {
                pick_row(
                    queue, &self.pc, now, block, policy, Everyone, protect, &mut w,
                )
            };
            match pick {
                Some((cmd, entry)) => {
                    self.issue_internal(&cmd, now);
                    self.rows_changed(&cmd);
                    let mut kind = None;
                    if let Some(i) = entry {
                        let q = if drain {
                            &mut self.writes
                        } else {
                            &mut self.reads
                        };
                        if let Some(e) = q.get_mut(i) {
                            kind = Some(e.kind);
                            match cmd {
                                Command::Pre { .. } => e.row_class = RowClass::Conflict,
                                Command::Act { .. } if e.row_class == RowClass::Hit => {
                                    e.row_class = RowClass::Miss
                                }
                                _ => {}
                            }
                        }
                        if let Command::Act { .. } = cmd {
                            // The row was opened for this request (first of its bank).
                            if self.cfg.activated_per_bank > 0 && i.1 == 0 {
                                self.activated[usize::from(drain)] |= 1u64 << i.0;
                            }
                        }
                    }
                    if ARBITRATED {
                        self.tell_arbiter(&cmd, kind.map(PartKind::class), false, now);
                    }
                    // Other banks' row candidates only move later when a command issues,
                    // so `w` still bounds them; the served bank's next row command is its
                    // PRE after an ACT, its ACT after a PRE. (Closed page: look again.)
                    let served = match cmd {
                        Command::Act { bank, .. } => {
                            self.pc.bank_index(bank).map(|b| self.pc.earliest_pre(b))
                        }
                        Command::Pre { bank } => {
                            self.pc.bank_index(bank).map(|b| self.pc.earliest_act(b))
                        }
                        _ => None,
                    };
                    self.row_quiet_until = match (policy, entry, served) {
                        (PagePolicy::Open, Some(_), Some(t)) => w.min(t),
                        _ => 0,
                    };
                    // An ACT creates row hits, ready no earlier than the bank's column
                    // gates; a PRE only removes hits.
                    if let Command::Act { bank, .. } = cmd {
                        if let Some(b) = self.pc.bank_index(bank) {
                            let hit_at = self
                                .pc
                                .earliest_column(b, false)
                                .min(self.pc.earliest_column(b, true));
                            self.column_quiet_until = self.column_quiet_until.min(hit_at);
                        }
                    }
                    wake = now + 1;
                }
                None => self.row_quiet_until = w,
            }
            wake = wake.min(w);
        } else if !row_done {
            wake = wake.min(self.row_quiet_until);
        }
        // A controller re-evaluates its drain mode every cycle: if what was issued (or
        // queued) flips it, step again next cycle.
        if self.wants_drain() != self.draining {
            now + 1
        } else {
            wake.max(now + 1)
        }
    }

    /// Asks a (not class-blind) arbiter for its grant: forgets the quiet periods if the
    /// grant changed, lowers `wake` to the cycle the grant changes by itself, and returns
    /// the two tiers.
    #[inline(never)]
    fn consult_arbiter(
        &mut self,
        now: Cycle,
        drain: bool,
        wake: &mut Cycle,
    ) -> (ClassSet, ClassSet) {
        let view = ArbiterView {
            now,
            draining: drain,
            reads: self.reads.class_lens(),
            writes: self.writes.class_lens(),
            depth: self.cfg.queue_depth,
        };
        let g = self.arbiter.grant(&view);
        *wake = (*wake).min(g.until.max(now + 1));
        if !g.same_classes(&self.last_grant) {
            self.last_grant = g;
            self.invalidate();
        }
        (g.first, g.then.union(g.first))
    }

    /// Tells a stateful arbiter about an issued command.
    fn tell_arbiter(
        &mut self,
        cmd: &Command,
        class: Option<TrafficClass>,
        completes: bool,
        at: Cycle,
    ) {
        self.arbiter.on_issue(&Issued {
            at,
            kind: cmd.kind(),
            class,
            completes,
        });
    }

    /// Issues the next column access of entry `i` of the write queue (`drain`) or the read
    /// queue; returns whether the entry finished.
    fn serve_column<const ARBITRATED: bool>(
        &mut self,
        i: Slot,
        drain: bool,
        now: Cycle,
        done: &mut Vec<Completion>,
    ) -> bool {
        let q = if drain {
            &mut self.writes
        } else {
            &mut self.reads
        };
        let Some(e) = q.get_mut(i) else {
            return false;
        };
        let (row, col) = (e.row, e.col);
        let bank = self.pc.bank_id(usize::from(e.bank));
        let kind = e.kind;
        let cmd = if !drain {
            Command::Rd { bank, row, col }
        } else if kind.is_update() {
            Command::Update { bank, row, col }
        } else {
            Command::Wr { bank, row, col }
        };
        // Copy the entry before updating it: a narrow store followed by a wide load of the
        // same bytes defeats store-to-load forwarding (measured: 12 % of `step` on a
        // stream when the copy came after the update).
        let entry = *e;
        let finished = entry.bursts_left == 1;
        if !finished {
            e.col += 1;
            e.bursts_left -= 1;
        }
        self.issue_internal(&cmd, now);
        let t = self.pc.timing();
        let data_end = now + if drain { t.cwl + t.bl } else { t.cl + t.bl };
        if drain {
            self.stats.bytes_written += self.bytes_per_column;
        } else {
            self.stats.bytes_read += self.bytes_per_column;
        }
        self.stats.bytes_by.add(
            kind.access_index(),
            kind.class_index(),
            self.bytes_per_column,
        );
        if finished {
            if i.1 == 0 {
                self.activated[usize::from(drain)] &= !(1u64 << i.0);
            }
            let q = if drain {
                &mut self.writes
            } else {
                &mut self.reads
            };
            let len = q.len();
            q.remove(i, row);
            if drain {
                self.stats.write_queue.record(now, len);
                self.stats.writes += 1;
            } else {
                self.stats.read_queue.record(now, len);
                self.stats.reads += 1;
            }
            self.stats
                .parts_by
                .add(kind.access_index(), kind.class_index(), 1);
            self.stats.classify(entry.row_class);
            done.push(Completion {
                tag: entry.tag,
                at: data_end,
            });
        }
        if ARBITRATED {
            self.tell_arbiter(&cmd, Some(kind.class()), finished, now);
        }
        if let Some(o) = &mut self.observed {
            o.observer.on_issue(&IssuedColumn {
                at: now,
                pseudo_channel: self.index,
                bank,
                row,
                col,
                access: kind.access(),
                class: kind.class(),
                source: entry.source.get(),
                addr: entry.addr,
                tag: entry.tag,
                last: finished,
            });
        }
        finished
    }

    /// Forgets what the scheduler learnt about quiet periods: something changed that can
    /// make a command ready earlier than the passes last computed.
    #[inline]
    fn invalidate(&mut self) {
        self.column_quiet_until = 0;
        self.row_quiet_until = 0;
    }

    /// Closes the occupancy histograms at `now` (call once at the end of a run).
    pub fn finish(&mut self, now: Cycle) {
        self.stats.read_queue.record(now, self.reads.len());
        self.stats.write_queue.record(now, self.writes.len());
    }

    /// Stops normal scheduling at `now` so an NMC engine can own the pseudo-channel (see
    /// the module documentation).
    pub fn acquire_for_nmc(&mut self, now: Cycle) {
        self.nmc_owned = true;
        self.refresh.nmc_acquire(now);
    }

    /// Hands the pseudo-channel back to normal scheduling; returns the cycle to step at.
    pub fn release_from_nmc(&mut self, now: Cycle) -> Cycle {
        self.nmc_owned = false;
        self.refresh.nmc_release(now);
        self.recount_hits();
        self.revalidate_activated();
        self.invalidate();
        now
    }

    /// Whether an NMC engine owns the pseudo-channel.
    pub fn is_nmc_owned(&self) -> bool {
        self.nmc_owned
    }

    /// Whether the owning NMC engine must refresh (all banks) before a command at `now`.
    #[inline]
    pub fn nmc_refresh_due(&self, now: Cycle) -> bool {
        self.refresh.nmc_due(now)
    }

    /// Issues `cmd` for the owning NMC engine at the earliest cycle at or after
    /// `not_before` that every gate allows, and returns that cycle. The engine tracks the
    /// banks' rows itself, so this is the timing state's fast path (debug builds check
    /// every command against the checked path); the command log and counters see it like
    /// any other command. A REF or AB-SA-REF issued here counts as the engine's refresh.
    #[inline(always)]
    pub fn nmc_issue(&mut self, cmd: &Command, not_before: Cycle) -> Cycle {
        let at = self.pc.issue_at_earliest(cmd, not_before);
        if let Some(log) = &mut self.log {
            log.push(LoggedCommand { at, cmd: *cmd });
        }
        if matches!(cmd, Command::Ref | Command::AbSaRef { .. }) {
            self.refresh.nmc_refreshed();
        }
        at
    }

    /// The refresh command due at `now`, if any (for an NMC engine that owns the channel).
    pub fn pending_refresh(&self, now: Cycle) -> Option<Command> {
        self.refresh.command(now, &self.pc)
    }

    /// Earliest cycle of a command an NMC engine wants to issue.
    pub fn earliest_external(&self, cmd: &Command) -> Cycle {
        self.pc.earliest(cmd)
    }

    /// Issues a command on behalf of an NMC engine, under full timing checks.
    pub fn issue_external(&mut self, cmd: &Command, at: Cycle) -> Result<(), TimingError> {
        self.pc.issue(cmd, at)?;
        self.recount_hits();
        self.revalidate_activated();
        self.invalidate();
        self.record(cmd, at);
        if matches!(cmd.kind(), CommandKind::Ref | CommandKind::RefPb) {
            self.refresh.refreshed(cmd, &self.pc);
        }
        Ok(())
    }
}
