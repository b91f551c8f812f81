//! Stepping the GPUs of a lookahead window on worker threads: the system splits into
//! shares of consecutive GPUs, each share runs the window on its own thread, and the
//! shares join again, their messages to other shares delivered in the order the serial
//! path gives them.
//!
//! Within a window no GPU can affect another (nothing a GPU sends arrives sooner than
//! the smallest link latency, which bounds the window), and events of one cycle are
//! ordered by (priority, sender GPU, sender's own count), never by when they were
//! queued. So a share steps its GPUs exactly as the serial loop would, and what it sends
//! across the split waits in its outbox until the shares join. The threads are spawned
//! once per run and parked on their channels between windows.

use std::ops::{Index, IndexMut, Range};
use std::sync::mpsc;

use super::node::GpuNode;
use super::stepping::{FirmwareHost, Outgoing, SLICE_CYCLES};
use super::{RunError, T3System};
use crate::hbm::Cycle;

/// Threads for one simulation's windows: `requested`, or with 0 the free cores
/// ([`free_cores`]) `jobs` simulations running at once leave each (at least 1).
/// [`T3System::run_until`] uses at most one per simulated GPU, and one with a timeline
/// or one-slice windows.
pub fn choose_threads(requested: u32, free_cores: usize, jobs: usize) -> u32 {
    if requested > 0 {
        return requested;
    }
    u32::try_from(free_cores / jobs.max(1))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// The machine's cores less the ones other work keeps busy (its 1-minute load average,
/// rounded down; all of them where the load is not known), at least 1. A window ends
/// when its slowest share does, so a thread that has to wait for a core holds the others
/// up: on a loaded machine extra threads only add work (docs/decisions/t3-runs.md,
/// "Which stepping runs").
pub fn free_cores() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|l| l.is_finite() && *l >= 0.0)
        .unwrap_or(0.0);
    cores.saturating_sub(load as usize).max(1)
}

/// The GPUs a system steps, indexed by GPU number: every simulated GPU, or a worker's
/// share of consecutive GPUs starting at `first`.
#[derive(Debug, Default)]
pub(super) struct Nodes {
    first: usize,
    v: Vec<GpuNode>,
}

impl Nodes {
    pub(super) fn new(v: Vec<GpuNode>) -> Self {
        Self { first: 0, v }
    }

    /// The number of the first GPU held.
    pub(super) fn first(&self) -> usize {
        self.first
    }

    /// The GPU numbers held.
    pub(super) fn range(&self) -> Range<usize> {
        self.first..self.first + self.v.len()
    }

    pub(super) fn len(&self) -> usize {
        self.v.len()
    }

    pub(super) fn get(&self, g: usize) -> Option<&GpuNode> {
        g.checked_sub(self.first).and_then(|i| self.v.get(i))
    }

    pub(super) fn get_mut(&mut self, g: usize) -> Option<&mut GpuNode> {
        g.checked_sub(self.first).and_then(|i| self.v.get_mut(i))
    }

    pub(super) fn iter(&self) -> std::slice::Iter<'_, GpuNode> {
        self.v.iter()
    }

    pub(super) fn as_slice(&self) -> &[GpuNode] {
        &self.v
    }

    /// Moves GPUs `g..` out into a share of their own.
    fn split_off(&mut self, g: usize) -> Self {
        Self {
            first: g,
            v: self.v.split_off(g - self.first),
        }
    }

    /// Takes back the share that follows this one.
    fn append(&mut self, mut next: Self) {
        debug_assert_eq!(next.first, self.first + self.v.len());
        self.v.append(&mut next.v);
    }
}

impl Index<usize> for Nodes {
    type Output = GpuNode;
    fn index(&self, g: usize) -> &GpuNode {
        &self.v[g - self.first]
    }
}

impl IndexMut<usize> for Nodes {
    fn index_mut(&mut self, g: usize) -> &mut GpuNode {
        &mut self.v[g - self.first]
    }
}

impl<'a> IntoIterator for &'a mut Nodes {
    type Item = &'a mut GpuNode;
    type IntoIter = std::slice::IterMut<'a, GpuNode>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.iter_mut()
    }
}

/// A share sent to a worker: the GPUs and the window's first cycle.
type Work = (T3System, Cycle);

impl T3System {
    /// Runs the GPUs of one window from `start`: each GPU its `window` slices in turn,
    /// with `hosts[k]` running the firmware of the share's `k`-th GPU.
    pub(super) fn step_window<H: FirmwareHost>(
        &mut self,
        start: Cycle,
        window: Cycle,
        hosts: &mut [H],
    ) {
        for (k, i) in self.nodes.range().enumerate() {
            self.sender = i as u32;
            let mut end = start;
            for _ in 0..window {
                end += SLICE_CYCLES;
                self.step_node(i, end, hosts.get_mut(k));
            }
        }
    }

    /// Moves GPUs `g..` (with their queues, counts and links) into a share stepped on
    /// its own; what it sends to GPUs outside the share waits in its outbox.
    fn split_off(&mut self, g: usize) -> T3System {
        let at = g - self.nodes.first();
        T3System {
            cfg: self.cfg.clone(),
            nodes: self.nodes.split_off(g),
            links: self.links.split_off(g),
            queues: self.queues.split_off(at),
            sender: g as u32,
            sent: self.sent.split_off(at),
            outbox: Vec::new(),
            now: self.now,
            events: 0,
            recv_base: self.recv_base,
            a_base: self.a_base,
            b_base: self.b_base,
            trace: None,
            fault: None,
        }
    }

    /// Takes back the share that follows this system's GPUs. Its outbox joins this one
    /// (delivered by [`T3System::deliver_outbox`]); its first fault counts after this
    /// system's, as the serial loop steps lower GPUs first.
    fn append(&mut self, mut share: T3System) {
        self.nodes.append(share.nodes);
        self.links.append(share.links);
        self.queues.append(&mut share.queues);
        self.sent.append(&mut share.sent);
        self.outbox.append(&mut share.outbox);
        self.events += share.events;
        if self.fault.is_none() {
            self.fault = share.fault;
        }
    }

    /// Queues the messages held for GPUs outside the share that sent them. Their keys
    /// (sender, sender's count) set their order among events of a cycle, so the order
    /// they are queued in does not matter.
    fn deliver_outbox(&mut self) {
        let first = self.nodes.first();
        for Outgoing { to, at, key, ev } in std::mem::take(&mut self.outbox) {
            if let Some(q) = to.checked_sub(first).and_then(|i| self.queues.get_mut(i)) {
                q.push_keyed(at, 0, key, ev);
            }
        }
    }

    /// [`T3System::run_until`] with the GPUs split into `threads` shares of consecutive
    /// GPUs, each stepping its share of every window on a thread of its own (this
    /// thread runs the first share).
    pub(super) fn run_parallel<H: FirmwareHost>(
        &mut self,
        limit: Cycle,
        hosts: &mut [H],
        done: impl Fn(&Self) -> bool,
        threads: usize,
        window: Cycle,
    ) -> Result<Cycle, RunError> {
        let n = self.nodes.len();
        let bounds: Vec<usize> = (0..=threads).map(|k| k * n / threads).collect();
        let mut parts = Vec::with_capacity(threads);
        let mut rest = hosts;
        for w in bounds.windows(2) {
            let take = (w[1] - w[0]).min(rest.len());
            let (h, r) = std::mem::take(&mut rest).split_at_mut(take);
            parts.push(h);
            rest = r;
        }
        let mut parts = parts.into_iter();
        let mine = parts.next().unwrap_or_default();
        std::thread::scope(|scope| {
            let mut workers = Vec::with_capacity(threads - 1);
            for h in parts {
                let (to_worker, inbox) = mpsc::channel::<Work>();
                let (reply, from_worker) = mpsc::channel::<T3System>();
                scope.spawn(move || {
                    for (mut share, start) in inbox {
                        share.step_window(start, window, h);
                        if reply.send(share).is_err() {
                            break;
                        }
                    }
                });
                workers.push((to_worker, from_worker));
            }
            while !done(self) {
                self.check_limits(limit)?;
                let start = self.now;
                let mut shares: Vec<T3System> = bounds[1..threads]
                    .iter()
                    .rev()
                    .map(|&g| self.split_off(g))
                    .collect();
                shares.reverse();
                for (share, (to_worker, _)) in shares.into_iter().zip(&workers) {
                    to_worker
                        .send((share, start))
                        .map_err(|_| RunError::Stuck("a stepping thread stopped".into()))?;
                }
                self.step_window(start, window, mine);
                for (_, from_worker) in &workers {
                    let share = from_worker
                        .recv()
                        .map_err(|_| RunError::Stuck("a stepping thread stopped".into()))?;
                    self.append(share);
                }
                self.deliver_outbox();
                self.now = start + window * SLICE_CYCLES;
            }
            Ok(self.now)
        })
    }
}
