//! The system: N GPU nodes on one time axis with one event queue. It owns time: it asks
//! every node's components when they next need to run, advances the earliest, delivers
//! firmware events in (tick, priority, sequence) order, and repeats. T3's multi-GPU runs
//! are `t3::system::T3System`, an assembly of their own (docs/decisions/t3.md).

use std::collections::HashMap;

use nmcp_firmware::nmc::LambJob;
use nmcp_firmware::{Event, FirmwareError};
use nmcp_isa::aql::AQL_PACKET_BYTES;

use crate::gpu::queue::QueueDump;
use crate::gpu::{KernelEngine, Nanos};
use crate::hbm::Command;
use crate::node::{
    GpuNode, GpuNodeConfig, NodeError, RunSummary, SysEvent, DEFERRED_PRIORITY, EVENT_PRIORITY,
};
use crate::sim::time::{ns_to_tick, tick_to_ns};
use crate::sim::{Component, EventQueue, Tick};
use crate::timeline::{variant_name, Timeline, TimelineConfig, TrackId, TrackKind};

/// What a system records on its timeline (off unless [`System::enable_timeline`]).
#[derive(Debug)]
struct SysTrace {
    tl: Timeline,
    /// Per node: its CP's handler spans.
    cp: Vec<TrackId>,
    /// (node, pseudo-channel) -> the NMC engine's spans.
    engines: HashMap<(usize, usize), TrackId>,
    /// (node, thread) -> a track of the node's process `GPU n` or `GPU n NMC`, created
    /// on first use (a LAMB node has no kernels, a GOLDYLOC node no NMC queue).
    lazy: HashMap<(usize, &'static str), TrackId>,
    /// (node, pseudo-channel, bank) -> the bank's open row.
    banks: HashMap<(usize, usize, usize), TrackId>,
    /// Per node: CP decision records already on the timeline.
    records_seen: Vec<usize>,
}

impl SysTrace {
    /// Node `node`'s track `thread` (of `kind`; in `GPU n NMC` when `nmc`).
    fn lazy(&mut self, node: usize, thread: &'static str, kind: TrackKind, nmc: bool) -> TrackId {
        let tl = &mut self.tl;
        *self.lazy.entry((node, thread)).or_insert_with(|| {
            let p = if nmc {
                format!("GPU {node} NMC")
            } else {
                format!("GPU {node}")
            };
            tl.track(&p, thread, kind)
        })
    }

    fn engine(&mut self, node: usize, pc: usize) -> TrackId {
        let tl = &mut self.tl;
        *self.engines.entry((node, pc)).or_insert_with(|| {
            tl.track(
                &format!("GPU {node} NMC"),
                &format!("PC {pc} engine"),
                TrackKind::Spans,
            )
        })
    }

    fn bank(&mut self, node: usize, pc: usize, bank: usize, id: crate::hbm::BankId) -> TrackId {
        let tl = &mut self.tl;
        *self.banks.entry((node, pc, bank)).or_insert_with(|| {
            tl.track(
                &format!("GPU {node} HBM PC {pc}"),
                &format!("bank {}.{}", id.group, id.bank),
                TrackKind::BankRow,
            )
        })
    }
}

/// N GPU nodes sharing one event queue.
#[derive(Debug)]
pub struct System<E: KernelEngine> {
    now: Tick,
    queue: EventQueue<SysEvent>,
    nodes: Vec<GpuNode<E>>,
    truncated: bool,
    trace: Option<Box<SysTrace>>,
}

impl<E: KernelEngine> System<E> {
    /// A system of `nodes` (their indices must be 0, 1, ... in order).
    ///
    /// # Errors
    /// [`NodeError::Config`] when a node's index does not match its position.
    pub fn new(nodes: Vec<GpuNode<E>>) -> Result<Self, NodeError> {
        if let Some((i, n)) = nodes.iter().enumerate().find(|(i, n)| n.index() != *i) {
            return Err(NodeError::Config(format!(
                "node at position {i} has index {}",
                n.index()
            )));
        }
        Ok(Self {
            now: 0,
            queue: EventQueue::new(),
            nodes,
            truncated: false,
            trace: None,
        })
    }

    /// A system of one node.
    ///
    /// # Errors
    /// [`NodeError`] for a bad node configuration.
    pub fn single(config: GpuNodeConfig, gpu: E) -> Result<Self, NodeError> {
        Self::new(vec![GpuNode::new(0, config, gpu)?])
    }

    /// The current time.
    pub fn now(&self) -> Tick {
        self.now
    }

    /// The nodes.
    pub fn nodes(&self) -> &[GpuNode<E>] {
        &self.nodes
    }

    /// Node `i`.
    ///
    /// # Panics
    /// If the system has no node `i` (a caller's indexing bug, like a slice's).
    pub fn node(&self, i: usize) -> &GpuNode<E> {
        &self.nodes[i]
    }

    /// Node `i`, mutable.
    ///
    /// # Panics
    /// If the system has no node `i`.
    pub fn node_mut(&mut self, i: usize) -> &mut GpuNode<E> {
        &mut self.nodes[i]
    }

    fn node_checked(&mut self, i: usize) -> Result<&mut GpuNode<E>, NodeError> {
        let n = self.nodes.len();
        self.nodes
            .get_mut(i)
            .ok_or_else(|| NodeError::Config(format!("no node {i} (the system has {n})")))
    }

    /// Delivers `event` to node `node` at `at` ns (a producer's doorbell, a host's
    /// request).
    pub fn post(&mut self, node: usize, event: Event, at: Nanos) {
        self.queue
            .push_with(ns_to_tick(at), EVENT_PRIORITY, SysEvent { node, event });
    }

    /// Enqueues a raw packet on node `node`'s `queue` at `at` ns (producer protocol; the
    /// doorbell is rung separately).
    ///
    /// # Errors
    /// [`NodeError`] if the node or queue does not exist or the ring is full.
    pub fn enqueue(
        &mut self,
        node: usize,
        queue: u8,
        packet: &[u8; AQL_PACKET_BYTES],
        at: Nanos,
    ) -> Result<u64, NodeError> {
        self.node_checked(node)?.enqueue(queue, packet, at)
    }

    /// Rings node `node`'s `queue` doorbell at `at` ns: stores the last write index into
    /// the doorbell signal and delivers a `Doorbell` event.
    ///
    /// # Errors
    /// [`NodeError`] if the node or queue does not exist.
    pub fn ring_doorbell(&mut self, node: usize, queue: u8, at: Nanos) -> Result<(), NodeError> {
        let n = self.node_checked(node)?;
        n.write_doorbell(queue)?;
        n.note_doorbell(queue, crate::sim::time::ns_to_tick(at));
        self.post(node, Event::Doorbell { queue }, at);
        Ok(())
    }

    /// Loads a dump into node `node` and rings every used queue's doorbell at time 0.
    ///
    /// # Errors
    /// [`NodeError`] if a section overlaps the system area or leaves device memory, a
    /// packet names a queue the node lacks, or a ring overflows.
    pub fn load_dump(&mut self, node: usize, dump: &QueueDump) -> Result<(), NodeError> {
        let used = self.node_checked(node)?.load_dump(dump)?;
        for q in used {
            self.ring_doorbell(node, q, 0.0)?;
        }
        Ok(())
    }

    /// Starts a LAMB step on node `node` now (or when its CP is free).
    ///
    /// # Errors
    /// The firmware's refusal; [`FirmwareError::Nmc`] with `Unsupported` for a node
    /// without NMC engines.
    pub fn start_lamb(&mut self, node: usize, job: LambJob) -> Result<(), FirmwareError> {
        let now = self.now;
        let Some(n) = self.nodes.get_mut(node) else {
            return Err(FirmwareError::Nmc(
                nmcp_firmware::platform::NmcError::OutOfRange,
            ));
        };
        // The handler starts when the CP is free.
        let start = now.max(n.cp_free_at());
        let r = n.start_lamb(job, now, &mut self.queue);
        if let Some(t) = self.trace.as_deref_mut() {
            if let Some(&k) = t.cp.get(node) {
                t.tl.span(k, "start_lamb", start, n.cp_free_at());
            }
            self.collect_nmc(node);
        }
        r
    }

    /// Starts recording a timeline under `config`: every CP handler run as a span (from
    /// its event to the CP being free again), and on nodes with NMC engines each engine's
    /// macro-commands and accumulator read-outs, the macro-command queue's occupancy and
    /// every bank's open row (from the controllers' command logs).
    pub fn enable_timeline(&mut self, config: TimelineConfig) {
        let mut tl = Timeline::new(config);
        let cp = (0..self.nodes.len())
            .map(|i| tl.track(&format!("GPU {i}"), "CP (firmware)", TrackKind::Spans))
            .collect();
        for n in &mut self.nodes {
            if let Some(b) = n.nmc_mut() {
                b.enable_trace();
            }
        }
        let records_seen = self.nodes.iter().map(|n| n.records().len()).collect();
        self.trace = Some(Box::new(SysTrace {
            tl,
            cp,
            engines: HashMap::new(),
            lazy: HashMap::new(),
            banks: HashMap::new(),
            records_seen,
        }));
    }

    /// The recorded timeline so far (what the NMC blocks hold is collected first); the
    /// recording goes on with the same tracks, from no events.
    pub fn take_timeline(&mut self) -> Option<Timeline> {
        for i in 0..self.nodes.len() {
            self.collect_nmc(i);
        }
        self.trace.as_deref_mut().map(|t| t.tl.take())
    }

    /// Records node `i`'s handler of `event` that started at `at`: the CP's busy span,
    /// the decisions it made, the kernel it completed, and what the NMC block did.
    fn trace_handler(&mut self, i: usize, event: &Event, at: Tick) {
        let (Some(t), Some(node)) = (self.trace.as_deref_mut(), self.nodes.get(i)) else {
            return;
        };
        if let Some(&k) = t.cp.get(i) {
            let d = format!("{event:?}");
            t.tl.span(k, variant_name(&d), at, node.cp_free_at());
        }
        let seen = t.records_seen.get(i).copied().unwrap_or(0);
        if node.records().len() > seen {
            let k = t.lazy(i, "CP decisions", TrackKind::Instants, false);
            for (end_ns, rec) in node.records().iter().skip(seen) {
                let d = format!("{:?}", rec.action);
                let name = format!("queue {}: {}", rec.queue, variant_name(&d));
                t.tl.instant(k, &name, ns_to_tick(*end_ns));
            }
            if let Some(s) = t.records_seen.get_mut(i) {
                *s = node.records().len();
            }
        }
        if let Event::KernelCompleted {
            queue, dispatch_id, ..
        } = *event
        {
            let o = node.outcomes().get(&(queue, dispatch_id));
            if let Some((s, e)) = o.and_then(|o| o.launched_at.zip(o.completed_at)) {
                let k = t.lazy(i, "kernels", TrackKind::Spans, false);
                let name = format!("queue {queue}");
                t.tl.span(k, &name, ns_to_tick(s), ns_to_tick(e));
            }
        }
        self.collect_nmc(i);
    }

    /// Moves what node `i`'s NMC block recorded onto the timeline.
    fn collect_nmc(&mut self, i: usize) {
        let Some(t) = self.trace.as_deref_mut() else {
            return;
        };
        let now = self.now;
        let Some(node) = self.nodes.get_mut(i) else {
            return;
        };
        let clock = node.dram_clock();
        let Some(b) = node.nmc_mut() else { return };
        let mut rec = b.take_trace(clock.cycle_at(now));
        let ctrls = b.memory_system().controllers();
        for (pc, s, e, name) in &rec.spans {
            let k = t.engine(i, *pc);
            t.tl.span(k, name, clock.tick_of(*s), clock.tick_of(*e));
        }
        rec.queue.sort_by_key(|q| q.0);
        if !rec.queue.is_empty() {
            let k = t.lazy(i, "macro-command queue", TrackKind::Counter, true);
            for &(at, n) in &rec.queue {
                t.tl.counter(k, clock.tick_of(at), n as f64);
            }
        }
        for (pc, l) in &rec.commands {
            let Some(pch) = ctrls.get(*pc).map(|c| c.pseudo_channel()) else {
                continue;
            };
            let at = clock.tick_of(l.at);
            let all = 0..pch.banks();
            let (banks, row) = match l.cmd {
                Command::Act { bank, row } => match pch.bank_index(bank) {
                    Some(b) => (b..b + 1, f64::from(row)),
                    None => continue,
                },
                Command::Pre { bank } => match pch.bank_index(bank) {
                    Some(b) => (b..b + 1, -1.0),
                    None => continue,
                },
                Command::AbAct { row } => (all, f64::from(row)),
                Command::PreAll => (all, -1.0),
                _ => continue,
            };
            for b in banks {
                let k = t.bank(i, *pc, b, pch.bank_id(b));
                t.tl.counter(k, at, row);
            }
        }
    }

    /// Runs until nothing is left to happen, or until `max_steps` steps (firmware events
    /// handled plus component advances) were taken; then `truncated` is set. Returns the
    /// totals over all nodes.
    pub fn run(&mut self, max_steps: u64) -> RunSummary {
        let mut steps = 0u64;
        let mut out = Vec::new();
        loop {
            if steps >= max_steps {
                self.truncated = true;
                break;
            }
            // The earliest component; ties go to the lowest node index.
            let mut gpu: Option<(Tick, usize)> = None;
            for (i, n) in self.nodes.iter().enumerate() {
                if let Some(t) = n.next_wake() {
                    if gpu.is_none_or(|(b, _)| t < b) {
                        gpu = Some((t, i));
                    }
                }
            }
            let ev = self.queue.peek_tick();
            match (ev, gpu) {
                (None, None) => break,
                // A component due no later than the next event runs first.
                (e, Some((g, i))) if e.is_none_or(|e| g <= e) => {
                    steps += 1;
                    self.now = self.now.max(g);
                    out.clear();
                    self.nodes[i].advance(g, &mut out);
                    for (at, e) in out.drain(..) {
                        self.queue.push_with(at, EVENT_PRIORITY, e);
                    }
                    if self.trace.is_some() {
                        self.collect_nmc(i);
                    }
                }
                _ => {
                    let Some(s) = self.queue.pop() else { break };
                    let Some(node) = self.nodes.get_mut(s.event.node) else {
                        continue;
                    };
                    let free = node.cp_free_at();
                    if s.at < free {
                        // The CP is busy: the event waits, ahead of events due later.
                        self.queue.push_with(free, DEFERRED_PRIORITY, s.event);
                        continue;
                    }
                    steps += 1;
                    self.now = self.now.max(s.at);
                    let event = s.event.event;
                    node.handle(event, s.at, &mut self.queue);
                    if self.trace.is_some() {
                        self.trace_handler(s.event.node, &event, s.at);
                    }
                }
            }
        }
        self.summary()
    }

    /// Totals over all nodes so far.
    pub fn summary(&self) -> RunSummary {
        let mut s = RunSummary {
            truncated: self.truncated,
            ..RunSummary::default()
        };
        for n in &self.nodes {
            s.merge(&n.summary());
        }
        s
    }

    /// The current time in ns.
    pub fn now_ns(&self) -> Nanos {
        tick_to_ns(self.now)
    }
}
