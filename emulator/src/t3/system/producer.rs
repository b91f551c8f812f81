//! The producer GEMM on each GPU: workgroup dispatch into resident slots, phase reads and
//! compute, and the epilogue that stores (or sends) each wavefront tile.

use nmcp_isa::t3::DmaOp;

use super::blocks::{Ack, Block, BlockKind, Message};
use super::node::REQ_BYTES;
use super::stepping::Ev;
use super::values::{Region, WriteOp};
use super::T3System;
use crate::hbm::Cycle;
use crate::memctrl::{Request, Source, TrafficClass};
use crate::t3::gemm::{ProducerModel, PHASES};
use crate::t3::layout::Rect;

/// Requests a GPU may hold waiting for controller queue room before its producer stops
/// dispatching workgroups (the L2's miss queues are finite).
pub(super) const PENDING_CAP: usize = 8_192;

/// How a GPU's producer stores one workgroup's tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StoreRoute {
    pub(super) local: Option<WriteOp>,
    pub(super) remote: Option<(u32, WriteOp)>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct WgState {
    pub(super) wg: u32,
    pub(super) phase: u32,
    pub(super) reads_left: u32,
    pub(super) compute_done: bool,
}

/// The producer GEMM on one GPU.
#[derive(Debug, Clone)]
pub(super) struct Producer {
    pub(super) model: ProducerModel,
    /// Workgroup ids in dispatch order.
    pub(super) start: u32,
    /// Workgroups to run: output tiles x split-K factor.
    pub(super) total: u32,
    /// Output tiles.
    pub(super) tiles: u32,
    /// Split-K factor: this many workgroups update each tile (under the tile's id).
    pub(super) splits: u32,
    pub(super) dispatched: u32,
    pub(super) finished: u32,
    pub(super) slots: Vec<Option<WgState>>,
    pub(super) free: Vec<u32>,
    pub(super) done_at: Option<Cycle>,
    /// Output stores still to finish (local blocks).
    pub(super) stores_left: u64,
}

impl Producer {
    /// The workgroup in `slot` is done (its slot free again); the producer is done when
    /// it was the last and no local store is left.
    fn wg_finished(&mut self, slot: u32, at: Cycle) {
        self.free.push(slot);
        self.finished += 1;
        if self.finished == self.total && self.stores_left == 0 {
            self.done_at = Some(at);
        }
    }

    /// One of the producer's local output stores finished at `at`.
    pub(super) fn store_finished(&mut self, at: Cycle) {
        if self.stores_left > 0 {
            self.stores_left -= 1;
            if self.stores_left == 0 && self.finished == self.total {
                self.done_at = Some(at);
            }
        }
    }
}

impl T3System {
    /// Starts the producer GEMM on every GPU (all local plain stores unless maps say
    /// otherwise).
    pub fn start_producer(&mut self, model: ProducerModel, at: Cycle) {
        self.start_split_producer(model, 1, at);
    }

    /// Starts a split-K producer: `splits` workgroups per output tile, each over
    /// `k / splits` (the model's `k` already is), each adding its part of the tile.
    pub fn start_split_producer(&mut self, model: ProducerModel, splits: u32, at: Cycle) {
        let tiles = self.cfg.layout.tiles();
        let splits = splits.max(1);
        let total = tiles * splits;
        for i in 0..self.nodes.len() {
            let resident = model.resident as usize;
            let start = self.nodes[i].dispatch_start % tiles.max(1);
            self.nodes[i].producer = Some(Producer {
                model,
                start,
                total,
                tiles,
                splits,
                dispatched: 0,
                finished: 0,
                slots: vec![None; resident],
                free: (0..resident as u32).rev().collect(),
                done_at: None,
                stores_left: 0,
            });
            self.dispatch(i, at);
        }
    }

    /// Where workgroup `wg`'s stores go; `None` when output maps exist and none covers
    /// it (the workgroup is not this GPU's to compute, as in all-gather).
    pub(super) fn route(&self, node: usize, wg: u32) -> Option<StoreRoute> {
        let maps = &self.nodes[node].maps;
        let op = |o: DmaOp| match o {
            DmaOp::Store => WriteOp::Store,
            DmaOp::Update(_) => WriteOp::Update,
        };
        for m in maps {
            if wg >= m.wg_first && wg - m.wg_first < m.wg_count {
                return Some(StoreRoute {
                    local: m.local.map(op),
                    remote: m.remote.map(|(p, o)| (u32::from(p), op(o))),
                });
            }
        }
        maps.is_empty().then_some(StoreRoute {
            local: Some(WriteOp::Store),
            remote: None,
        })
    }

    pub(super) fn dispatch(&mut self, node: usize, at: Cycle) {
        loop {
            if self.nodes[node].pending_compute > PENDING_CAP {
                return;
            }
            let Some(p) = self.nodes[node].producer.as_mut() else {
                return;
            };
            if p.dispatched >= p.total {
                return;
            }
            let Some(slot) = p.free.pop() else { return };
            // The splits of a tile run back to back, tiles in staggered order.
            let wg = (p.start + p.dispatched / p.splits) % p.tiles;
            p.dispatched += 1;
            if self.route(node, wg).is_none() {
                // Not this GPU's workgroup: it counts as done at once.
                let p = self.nodes[node].producer.as_mut().expect("producer");
                p.wg_finished(slot, at);
                continue;
            }
            self.trace_wgs(node, 1, at);
            let p = self.nodes[node].producer.as_mut().expect("producer");
            p.slots[slot as usize] = Some(WgState {
                wg,
                phase: 0,
                reads_left: 0,
                compute_done: false,
            });
            self.start_phase(node, slot, at);
        }
    }

    pub(super) fn start_phase(&mut self, node: usize, slot: u32, at: Cycle) {
        let (wg, phase, model) = {
            let p = self.nodes[node].producer.as_ref().expect("producer");
            let s = p.slots[slot as usize].expect("slot");
            (s.wg, s.phase, p.model)
        };
        let compute = model.phase_ns.ceil() as Cycle;
        self.schedule(
            at + compute.max(1),
            Ev::Compute {
                node: node as u32,
                slot,
            },
        );
        let per_phase = model.read_bytes_per_wg / f64::from(PHASES);
        let n = (per_phase / REQ_BYTES as f64).round() as u64;
        if n == 0 {
            return;
        }
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::WgRead { slot },
            left: n as u32,
            rect: Rect::default(),
            region: Region::Out,
            op: WriteOp::Store,
        });
        // Half the bytes from A's tile-row panel, half from B's tile-column panel.
        let l = self.cfg.layout;
        let r = l.wg_rect(wg);
        let (pa, pb) = model.cost.panel_bytes;
        let tr = u64::from(r.row0 / l.tile.0);
        let tc = u64::from(r.col0 / l.tile.1);
        let a0 = self.a_base
            + ((tr as f64 * pa) as u64 + (u64::from(phase) * pa as u64) / u64::from(PHASES))
                % (256 << 20);
        let b0 = self.b_base
            + ((tc as f64 * pb) as u64 + (u64::from(phase) * pb as u64) / u64::from(PHASES))
                % (256 << 20);
        for i in 0..n {
            let addr = if i % 2 == 0 {
                a0 + (i / 2) * REQ_BYTES
            } else {
                b0 + (i / 2) * REQ_BYTES
            };
            let req =
                Request::read(addr & !(REQ_BYTES - 1), REQ_BYTES as u32, at).with_source(Source {
                    gpu: node as u16,
                    workgroup: wg,
                    wavefront: 0,
                });
            self.nodes[node].push_request(req, b);
        }
        self.nodes[node].bytes.gemm_reads += n * REQ_BYTES;
        if let Some(s) = self.nodes[node]
            .producer
            .as_mut()
            .and_then(|p| p.slots[slot as usize].as_mut())
        {
            s.reads_left = 1;
        }
    }

    /// A workgroup phase's reads came back (`reads_back`) or its compute finished; the
    /// phase ends when both have.
    pub(super) fn wg_progress(&mut self, node: usize, slot: u32, reads_back: bool, at: Cycle) {
        let ready = {
            let Some(s) = self.nodes[node]
                .producer
                .as_mut()
                .and_then(|p| p.slots[slot as usize].as_mut())
            else {
                return;
            };
            if reads_back {
                s.reads_left = 0;
            } else {
                s.compute_done = true;
            }
            s.reads_left == 0 && s.compute_done
        };
        if ready {
            self.phase_end(node, slot, at);
        }
    }

    pub(super) fn phase_end(&mut self, node: usize, slot: u32, at: Cycle) {
        let (wg, last) = {
            let p = self.nodes[node].producer.as_mut().expect("producer");
            let s = p.slots[slot as usize].as_mut().expect("slot");
            s.phase += 1;
            s.compute_done = false;
            (s.wg, s.phase >= PHASES)
        };
        if !last {
            self.start_phase(node, slot, at);
            return;
        }
        // Epilogue: store the tile, wavefront by wavefront.
        let Some(route) = self.route(node, wg) else {
            return;
        };
        let l = self.cfg.layout;
        for wf in 0..l.wfs {
            let rect = l.wf_rect(wg, wf);
            if rect.rows == 0 {
                continue;
            }
            // The tile's stores: a local write and/or a message to a peer, the same
            // tile and tag either way.
            let tile = Message {
                rect,
                region: Region::Out,
                op: WriteOp::Store,
                tag: Some((wg, wf as u8)),
                payload: self.partial_values(node, rect),
                ack: Ack::None,
                class: TrafficClass::Compute,
            };
            if let Some((peer, op)) = route.remote {
                let msg = Message {
                    op,
                    class: TrafficClass::Communication,
                    ..tile.clone()
                };
                self.send(node as u32, peer, msg, at);
            }
            if let Some(op) = route.local {
                if let Some(p) = self.nodes[node].producer.as_mut() {
                    p.stores_left += 1;
                }
                self.start_writes(node, Message { op, ..tile }, at);
            }
        }
        self.trace_wgs(node, -1, at);
        let p = self.nodes[node].producer.as_mut().expect("producer");
        p.slots[slot as usize] = None;
        p.wg_finished(slot, at);
        self.dispatch(node, at);
    }
}
