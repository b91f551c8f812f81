//! Stepping: the per-GPU event queues, one slice of a GPU, and the lookahead window of
//! slices each GPU runs before the next GPU's turn (on worker threads with
//! [`super::SystemConfig::threads`], `parallel.rs`).

use nmcp_firmware::Event;

use super::blocks::Message;
use super::platform::Programmed;
use super::{RunError, T3System};
use crate::hbm::Cycle;
use crate::sim::PS_PER_NS;

/// Cycles per simulation slice (see the module docs of [`super`]).
pub const SLICE_CYCLES: Cycle = 16;

/// Most slices a GPU runs before the next GPU's turn (see [`T3System::run_until`]).
pub const MAX_WINDOW_SLICES: Cycle = 31;

/// Events between components.
#[derive(Debug, Clone)]
pub(super) enum Ev {
    /// A workgroup's phase compute finished.
    Compute { node: u32, slot: u32 },
    /// A message arrives at `node`.
    Arrive { node: u32, msg: Box<Message> },
    /// A firmware event for `node`.
    Firmware { node: u32, event: Event },
    /// A DMA block of region `slot` of `node` landed at its destination.
    RegionDma { node: u32, slot: u8 },
    /// A firmware handler on `node` ended: what it programmed reaches the hardware.
    Apply {
        node: u32,
        programmed: Vec<Programmed>,
    },
}

/// What runs one GPU's firmware: [`T3System::run_until`] hands it every firmware event
/// that reaches its GPU. One per GPU, so the GPUs of a window can be stepped on
/// different threads.
pub trait FirmwareHost: Send {
    /// Handles `event` on GPU `node` at `at` (typically through
    /// [`T3System::platform`]).
    fn handle(&mut self, sys: &mut T3System, node: usize, event: Event, at: Cycle);
}

/// No firmware: runs without tracker-driven work (isolated GEMMs, ring kernels) get no
/// firmware events.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoFirmware;

impl FirmwareHost for NoFirmware {
    fn handle(&mut self, _: &mut T3System, _: usize, _: Event, _: Cycle) {}
}

/// An event for a GPU outside the share that sent it, held until the shares join.
#[derive(Debug)]
pub(super) struct Outgoing {
    pub(super) to: usize,
    pub(super) at: Cycle,
    pub(super) key: u64,
    pub(super) ev: Ev,
}

impl T3System {
    /// Schedules `ev` for its GPU, keyed by the GPU being stepped (the sender) and the
    /// sender's own count, so that events of one cycle are delivered in an order that
    /// does not depend on how the GPUs' steps interleave.
    pub(super) fn schedule(&mut self, at: Cycle, ev: Ev) {
        let to = match &ev {
            Ev::Compute { node, .. }
            | Ev::Arrive { node, .. }
            | Ev::Firmware { node, .. }
            | Ev::RegionDma { node, .. }
            | Ev::Apply { node, .. } => *node as usize,
        };
        let first = self.nodes.first();
        let n = (self.sender as usize)
            .checked_sub(first)
            .and_then(|i| self.sent.get_mut(i))
            .map_or(0, |c| {
                *c += 1;
                *c
            });
        let key = (u64::from(self.sender) << 48) | n;
        match to.checked_sub(first).and_then(|i| self.queues.get_mut(i)) {
            Some(q) => q.push_keyed(at, 0, key, ev),
            // A GPU another thread steps: nothing sent reaches it within the window.
            None => self.outbox.push(Outgoing { to, at, key, ev }),
        }
    }

    /// Slices each GPU runs on its own before the next GPU's turn: as many as fit in
    /// the link latency (nothing a GPU sends reaches another sooner), one when a
    /// timeline samples every slice or the latency is shorter than two slices.
    pub(super) fn window_slices(&self) -> Cycle {
        if self.trace.is_some() {
            return 1;
        }
        // A latency under 33 ns gives 1; an infinite one, the cap.
        let lat = self.links.min_latency_ns() as Cycle;
        let cap = Cycle::from(self.cfg.window_slices).clamp(1, MAX_WINDOW_SLICES);
        (lat.saturating_sub(1) / SLICE_CYCLES).clamp(1, cap)
    }

    /// One slice of GPU `i`, ending at `end`: its events due by `end` in time order (a
    /// request they cause arrives at its event's cycle), its memory to `end`, then the
    /// consequences (column issues to the tracker, finished requests to their blocks,
    /// firmware events, DMA, dispatch, queued requests into the controllers).
    pub(super) fn step_node<H: FirmwareHost>(
        &mut self,
        i: usize,
        end: Cycle,
        mut host: Option<&mut H>,
    ) {
        let q = i - self.nodes.first();
        while let Some(e) = self.queues[q].pop_due(end) {
            self.events += 1;
            let at = e.at;
            match e.event {
                Ev::Compute { node, slot } => self.wg_progress(node as usize, slot, false, at),
                Ev::Arrive { node, msg } => self.arrive(node as usize, *msg, at),
                Ev::Firmware { node, event } => {
                    if let Some(h) = host.as_deref_mut() {
                        h.handle(self, node as usize, event, at);
                    }
                }
                Ev::RegionDma { node, slot } => self.region_dma_landed(node as usize, slot, at),
                Ev::Apply { node, programmed } => {
                    self.apply_programmed(node as usize, programmed, at);
                }
            }
        }
        self.nodes[i].advance_memory(end);
        self.drain_taps(i);
        let done_now = std::mem::take(&mut self.nodes[i].done_buf);
        self.events += done_now.len() as u64;
        self.complete(i, &done_now);
        self.nodes[i].done_buf = done_now;
        let evs = std::mem::take(&mut self.nodes[i].fw_events);
        if let Some(h) = host {
            for (at, ev) in evs {
                h.handle(self, i, ev, at);
            }
        }
        self.run_dma(i, end);
        self.dispatch(i, end);
        self.nodes[i].fill(end);
        let n = &mut self.nodes[i];
        if !n.boundary_told && n.producer.as_ref().is_some_and(|p| p.done_at.is_some()) {
            n.boundary_told = true;
            n.mem.kernel_boundary();
        }
        if n.producer.as_ref().is_some_and(|p| p.done_at.is_none()) {
            n.occupancy_sum += n.inflight as f64;
            n.read_occupancy_sum += n.inflight_reads as f64;
            n.occupancy_cycles += 1.0;
            n.sample_queues();
        }
    }

    /// Runs until `done(self)` holds, or `limit` cycles pass, with `hosts[g]` running GPU
    /// `g`'s firmware (one per simulated GPU; a GPU without one gets no firmware
    /// events). `done` is checked between windows ([`T3System::window_slices`]): the
    /// GPUs may run up to a window past the slice where it first held, idle by then for
    /// the conditions the runs use (every producer, collective or firmware finished),
    /// whose results are stamped per GPU. With [`SystemConfig::threads`] above 1 the
    /// GPUs of a window are stepped on that many threads (at most one per GPU; not with
    /// a timeline, which samples every slice, nor with one-slice windows), with the same
    /// results.
    ///
    /// # Errors
    /// [`RunError::Stuck`] saying what was still running when `limit` passed;
    /// [`RunError::Limit`] when a cap of the configuration's [`Limits`] is reached.
    ///
    /// [`SystemConfig::threads`]: super::SystemConfig::threads
    /// [`Limits`]: crate::sim::Limits
    pub fn run_until<H: FirmwareHost>(
        &mut self,
        limit: Cycle,
        hosts: &mut [H],
        done: impl Fn(&Self) -> bool,
    ) -> Result<Cycle, RunError> {
        let window = self.window_slices();
        let threads = (self.cfg.threads.max(1) as usize).min(self.nodes.len());
        // One-slice windows (lockstep, or a link latency under 33 ns) would synchronise
        // the threads every 16 cycles: too little work per synchronisation.
        if threads > 1 && window > 1 && self.trace.is_none() {
            return self.run_parallel(limit, hosts, done, threads, window);
        }
        while !done(self) {
            self.check_limits(limit)?;
            let start = self.now;
            // Each GPU runs the window's slices on its own: nothing it sends reaches
            // another GPU within the window, so the GPUs' order does not matter, and a
            // GPU's state stays in the host's caches for the whole window.
            self.step_window(start, window, hosts);
            self.now = start + window * SLICE_CYCLES;
            if window == 1 {
                self.trace_slice(self.now);
            }
        }
        Ok(self.now)
    }

    /// [`T3System::run_until`] for runs without firmware.
    ///
    /// # Errors
    /// As [`T3System::run_until`].
    pub fn run_without_firmware(
        &mut self,
        limit: Cycle,
        done: impl Fn(&Self) -> bool,
    ) -> Result<Cycle, RunError> {
        let mut none = vec![NoFirmware; self.nodes.len()];
        self.run_until(limit, &mut none, done)
    }

    /// Whether the run may take another window: `limit` not passed, caps not reached.
    pub(super) fn check_limits(&self, limit: Cycle) -> Result<(), RunError> {
        if self.now > limit {
            return Err(RunError::Stuck(self.describe()));
        }
        self.cfg
            .limits
            .check(self.now * PS_PER_NS, self.events)
            .map_err(RunError::Limit)
    }

    pub(super) fn describe(&self) -> String {
        let n = &self.nodes[0];
        let (ready, busy, programmed) = n.dma.counts();
        format!(
            "at {} ns: GPU 0 producer {:?} of {:?}, ring step {:?}, pending {}, in flight {}, DMA ready {} busy {} programmed {}, tracker live {}",
            self.now,
            n.producer.as_ref().map(|p| p.finished),
            n.producer.as_ref().map(|p| p.total),
            n.ring.as_ref().map(|r| (r.step, r.received, r.per_step)),
            n.pending_total,
            n.inflight,
            ready,
            busy,
            programmed,
            n.tracker.live()
        )
    }
}
