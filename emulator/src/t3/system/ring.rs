//! The ring-collective kernels (reduce-scatter on CUs, reduce-scatter with near-memory
//! updates, all-gather): per-step work items, reads, reduction and sends downstream.

use std::collections::{HashMap, VecDeque};

use super::blocks::{Ack, BlockKind, Message};
use super::values::{add_in, Region, WriteOp};
use super::T3System;
use crate::hbm::Cycle;
use crate::memctrl::TrafficClass;
use crate::t3::layout::Rect;

/// Blocks the ring kernel keeps in flight per GPU with all 80 CUs (its CUs' outstanding
/// memory work); a kernel on fewer CUs keeps proportionally fewer.
pub const RING_IN_FLIGHT: usize = 64;

/// A ring-kernel block in flight: reads left, its tile, the local and received values.
/// A ring block in flight: reads left, its rectangle, the values read (local, received)
/// and the step it belongs to.
pub(super) type RingItem = (u32, Rect, Option<Vec<f32>>, Option<Vec<f32>>, u32);

/// The ring collective kernels on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    /// Baseline reduce-scatter on CUs: read local and received copies, add, send.
    ReduceScatter,
    /// Reduce-scatter with near-memory updates: read the (already reduced) local copy,
    /// send it as an update into the receiver's copy.
    ReduceScatterNmc,
    /// All-gather: read the chunk, send it as a plain store.
    AllGather,
}

#[derive(Debug, Clone)]
pub(super) struct Ring {
    pub(super) kind: RingKind,
    /// Current step (1..=N-1; N = the baseline's final local reduction).
    pub(super) step: u32,
    /// Work items (WF tiles) not yet started, each with its step: a GPU whose upstream
    /// ran ahead begins its next step before its own blocks of this one have all
    /// started (at most `max_in_flight` run at once), so the queue can hold two steps.
    pub(super) todo: VecDeque<(Rect, u32)>,
    pub(super) in_flight: usize,
    /// Most blocks in flight.
    pub(super) max_in_flight: usize,
    /// Blocks of the current step received from the upstream GPU.
    pub(super) received: u32,
    /// Blocks to receive in the current step ([`T3System::step_receives`]).
    pub(super) per_step: u32,
    /// Received counts that arrived for a later step (the upstream GPU ran ahead).
    pub(super) early: HashMap<u32, u32>,
    /// Items in flight: reads left and the values read.
    pub(super) items: HashMap<u32, RingItem>,
    pub(super) next_item: u32,
    /// Sends of the current step still to finish before the step may end.
    pub(super) done_at: Option<Cycle>,
}

impl T3System {
    /// Starts a ring collective on every GPU over the whole output array, with all CUs.
    pub fn start_ring(&mut self, kind: RingKind, at: Cycle) {
        self.start_ring_on(kind, RING_IN_FLIGHT, at);
    }

    /// Starts a ring collective keeping at most `in_flight` blocks in flight per GPU (a
    /// kernel confined to a share of the CUs).
    pub fn start_ring_on(&mut self, kind: RingKind, in_flight: usize, at: Cycle) {
        for i in 0..self.nodes.len() {
            self.nodes[i].ring = Some(Ring {
                kind,
                step: 0,
                todo: VecDeque::new(),
                in_flight: 0,
                max_in_flight: in_flight.max(1),
                received: 0,
                per_step: 0,
                early: HashMap::new(),
                items: HashMap::new(),
                next_item: 0,
                done_at: None,
            });
            self.ring_begin_step(i, 1, at);
        }
    }

    /// The chunk GPU `g` sends in step `s`.
    pub(super) fn ring_chunk(&self, g: u32, kind: RingKind, s: u32) -> u32 {
        let n = self.cfg.gpus;
        match kind {
            RingKind::AllGather => (g + s + n - 1) % n,
            _ => (g + s) % n,
        }
    }

    /// The work items (WF tiles) GPU `node` handles in step `s`: the chunk it sends, or
    /// its own chunk in the baseline's final pass.
    pub(super) fn step_items(&self, node: usize, kind: RingKind, s: u32) -> Vec<Rect> {
        let g = self.nodes[node].index;
        let c = if s >= self.cfg.gpus {
            g
        } else {
            self.ring_chunk(g, kind, s)
        };
        self.chunk_items(c)
    }

    /// The blocks GPU `node` receives in step `s`: those of the chunk its upstream
    /// neighbour sends in that step, or its own final-pass writes. Chunks differ in size
    /// when the tiles do not divide evenly among the GPUs, so each step has its own count.
    pub(super) fn step_receives(&self, node: usize, kind: RingKind, s: u32) -> u32 {
        let n = self.cfg.gpus;
        let g = self.nodes[node].index;
        let c = if s >= n {
            g
        } else {
            self.ring_chunk((g + 1) % n, kind, s)
        };
        self.chunk_items(c).len() as u32
    }

    /// The non-empty WF tiles of chunk `c`, in workgroup then wavefront order.
    fn chunk_items(&self, c: u32) -> Vec<Rect> {
        let l = self.cfg.layout;
        let (first, count) = l.chunk_wgs(c);
        let mut v = Vec::new();
        for wg in first..first + count {
            for wf in 0..l.wfs {
                let r = l.wf_rect(wg, wf);
                if r.rows > 0 {
                    v.push(r);
                }
            }
        }
        v
    }

    pub(super) fn ring_begin_step(&mut self, node: usize, s: u32, at: Cycle) {
        let n = self.cfg.gpus;
        let kind = self.nodes[node]
            .ring
            .as_ref()
            .map(|r| r.kind)
            .expect("ring");
        let final_pass = s >= n;
        if final_pass && kind != RingKind::ReduceScatter {
            if let Some(r) = self.nodes[node].ring.as_mut() {
                r.done_at = Some(at);
                r.step = s;
            }
            return;
        }
        let items = self.step_items(node, kind, s);
        let receives = self.step_receives(node, kind, s);
        if let Some(r) = self.nodes[node].ring.as_mut() {
            r.step = s;
            r.per_step = receives;
            r.todo.extend(items.into_iter().map(|rect| (rect, s)));
            r.received = r.early.remove(&s).unwrap_or(0);
        }
        self.ring_pump(node, at);
    }

    pub(super) fn ring_pump(&mut self, node: usize, at: Cycle) {
        loop {
            let (rect, item, s, kind) = {
                let r = self.nodes[node].ring.as_mut().expect("ring");
                if r.in_flight >= r.max_in_flight {
                    return;
                }
                let Some((rect, s)) = r.todo.pop_front() else {
                    return;
                };
                r.in_flight += 1;
                let item = r.next_item;
                r.next_item += 1;
                (rect, item, s, r.kind)
            };
            // Reads: the local copy; the received copy too for the CU reduction past
            // step 1 (and in the final pass).
            let two = kind == RingKind::ReduceScatter && s >= 2;
            let r = self.nodes[node].ring.as_mut().expect("ring");
            r.items
                .insert(item, (if two { 2 } else { 1 }, rect, None, None, s));
            self.start_reads(node, rect, Region::Out, BlockKind::RingRead { item }, at);
            if two {
                self.start_reads(node, rect, Region::Recv, BlockKind::RingRead { item }, at);
            }
        }
    }

    pub(super) fn ring_read_done(
        &mut self,
        node: usize,
        item: u32,
        region: Region,
        rect: Rect,
        at: Cycle,
    ) {
        let vals = self.values(node, region, rect);
        let (complete, s, kind) = {
            let r = self.nodes[node].ring.as_mut().expect("ring");
            let kind = r.kind;
            let Some(e) = r.items.get_mut(&item) else {
                return;
            };
            // The block's own step, not the ring's current one (which may have moved on).
            let s = e.4;
            e.0 -= 1;
            match region {
                Region::Out => e.2 = vals,
                Region::Recv => e.3 = vals,
            }
            (e.0 == 0, s, kind)
        };
        if !complete {
            return;
        }
        let (_, rect, local, received, _) = self.nodes[node]
            .ring
            .as_mut()
            .and_then(|r| r.items.remove(&item))
            .expect("item");
        let dtype = self.cfg.dtype;
        let payload = match (local, received) {
            (Some(a), Some(b)) => Some(
                a.iter()
                    .zip(&b)
                    .map(|(x, y)| add_in(dtype, *y, *x))
                    .collect(),
            ),
            (a, _) => a,
        };
        let n = self.cfg.gpus;
        let g = self.nodes[node].index;
        if s >= n {
            // The baseline's final pass: the reduced own chunk is written locally.
            let msg = Message {
                rect,
                region: Region::Out,
                op: WriteOp::Store,
                tag: None,
                payload,
                ack: Ack::Ring { step: s },
                class: TrafficClass::Communication,
            };
            self.start_writes(node, msg, at);
        } else {
            let (region, op) = match kind {
                RingKind::ReduceScatter => (Region::Recv, WriteOp::Store),
                RingKind::ReduceScatterNmc => (Region::Out, WriteOp::Update),
                RingKind::AllGather => (Region::Out, WriteOp::Store),
            };
            let msg = Message {
                rect,
                region,
                op,
                tag: None,
                payload,
                ack: Ack::Ring { step: s },
                class: TrafficClass::Communication,
            };
            self.send(g, (g + n - 1) % n, msg, at);
        }
        if let Some(r) = self.nodes[node].ring.as_mut() {
            r.in_flight -= 1;
        }
        self.ring_pump(node, at);
    }

    /// A block of step `step` landed on `node` (from upstream; or the final pass's own).
    pub(super) fn ring_received(&mut self, node: usize, step: u32, at: Cycle) {
        let n = self.cfg.gpus;
        let advance = {
            let r = self.nodes[node].ring.as_mut().expect("ring");
            if step != r.step {
                *r.early.entry(step).or_insert(0) += 1;
                false
            } else {
                r.received += 1;
                r.received >= r.per_step
            }
        };
        if advance {
            let s = self.nodes[node].ring.as_ref().map_or(n, |r| r.step);
            if s >= n {
                if let Some(r) = self.nodes[node].ring.as_mut() {
                    r.done_at = Some(at);
                }
            } else {
                self.ring_begin_step(node, s + 1, at);
            }
        }
    }
}
