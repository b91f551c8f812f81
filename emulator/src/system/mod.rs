//! The system: N GPU nodes on one time axis with one event queue. It owns time: it asks
//! every node's components when they next need to run, advances the earliest, delivers
//! firmware events in (tick, priority, sequence) order, and repeats. T3 adds links and
//! DMA engines between the nodes here.

use nmcp_firmware::nmc::LambJob;
use nmcp_firmware::{Event, FirmwareError};
use nmcp_isa::aql::AQL_PACKET_BYTES;

use crate::gpu::queue::QueueDump;
use crate::gpu::{KernelEngine, Nanos};
use crate::node::{
    GpuNode, GpuNodeConfig, NodeError, RunSummary, SysEvent, DEFERRED_PRIORITY, EVENT_PRIORITY,
};
use crate::sim::time::{ns_to_tick, tick_to_ns};
use crate::sim::{Component, EventQueue, Tick};

/// N GPU nodes sharing one event queue.
#[derive(Debug)]
pub struct System<E: KernelEngine> {
    now: Tick,
    queue: EventQueue<SysEvent>,
    nodes: Vec<GpuNode<E>>,
    truncated: bool,
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
        n.start_lamb(job, now, &mut self.queue)
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
                    node.handle(s.event.event, s.at, &mut self.queue);
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
