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
use crate::t3::gemm::{OperandLayout, ProducerModel};
use crate::t3::layout::{OutputLayout, Rect};

/// Requests a GPU may hold waiting for controller queue room before its producer stops
/// dispatching workgroups (the L2's miss queues are finite).
pub(super) const PENDING_CAP: usize = 8_192;

/// Bytes of the address region each input operand's panels are read from (offsets wrap
/// inside it).
const PANEL_REGION: u64 = 256 << 20;

/// Where one phase of one workgroup reads its operands' DRAM misses: the requests are
/// spread over the part of the A tile-row panel and the B tile-column panel that phase
/// covers, in the operands' layout ([`OperandLayout`]; B is contiguous along K), or, with
/// no layout, as one contiguous run per panel starting at the phase's share of it.
struct PanelReads {
    layout: Option<OperandLayout>,
    /// Tile rows and columns of the workgroup, and the tile's size.
    tr: u64,
    tc: u64,
    tile: (u64, u64),
    /// First K element of the phase, K, M, element bytes.
    k0: u64,
    k: u64,
    m: u64,
    eb: u64,
    /// Without a layout: the phase's first byte in each panel.
    flat: (u64, u64),
}

impl PanelReads {
    fn new(model: &ProducerModel, l: OutputLayout, wg: u32, phase: u32, eb: u32) -> Self {
        let r = l.wg_rect(wg);
        let tr = u64::from(r.row0 / l.tile.0);
        let tc = u64::from(r.col0 / l.tile.1);
        let (pa, pb) = model.cost.panel_bytes;
        let phases = u64::from(model.phases.max(1));
        let p = u64::from(phase);
        Self {
            layout: model.layout,
            tr,
            tc,
            tile: (u64::from(l.tile.0), u64::from(l.tile.1)),
            k0: p * u64::from(model.k_per_phase),
            k: u64::from(model.k),
            m: u64::from(model.m),
            eb: u64::from(eb),
            flat: (
                (tr as f64 * pa) as u64 + p * pa as u64 / phases,
                (tc as f64 * pb) as u64 + p * pb as u64 / phases,
            ),
        }
    }

    /// Byte offset of request `j` of `n` from A.
    fn a(&self, j: u64, n: u64) -> u64 {
        match self.layout {
            None => self.flat.0 + j * REQ_BYTES,
            // One run per tile row, rows K elements apart: the requests walk the rows.
            Some(OperandLayout::AlongK) => {
                let row = self.tr * self.tile.0 + j * self.tile.0 / n.max(1);
                (row * self.k + self.k0) * self.eb
            }
            // One run of the tile's rows per K element, M elements apart: the requests
            // fill the runs in order.
            Some(OperandLayout::AlongM) => {
                let run = self.tile.0 * self.eb;
                let off = j * REQ_BYTES;
                (self.k0 + off / run) * self.m * self.eb + self.tr * run + off % run
            }
        }
    }

    /// Byte offset of request `j` of `n` from B (contiguous along K: one run per tile
    /// column).
    fn b(&self, j: u64, n: u64) -> u64 {
        match self.layout {
            None => self.flat.1 + j * REQ_BYTES,
            Some(_) => {
                let col = self.tc * self.tile.1 + j * self.tile.1 / n.max(1);
                (col * self.k + self.k0) * self.eb
            }
        }
    }
}

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
    /// When the current phase started (its reads issued) and when its compute ended.
    pub(super) phase_start: Cycle,
    pub(super) compute_at: Option<Cycle>,
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
                phase_start: at,
                compute_at: None,
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
        // Phase boundaries on the rounded cumulative time and byte counts, so many short
        // phases add up to the workgroup's total.
        let phases = f64::from(model.phases.max(1));
        let cum = |total: f64, i: u32| (total * f64::from(i) / phases).round() as u64;
        let wg_ns = model.phase_ns * phases;
        let compute = cum(wg_ns, phase + 1) - cum(wg_ns, phase);
        self.schedule(
            at + compute.max(1),
            Ev::Compute {
                node: node as u32,
                slot,
            },
        );
        let reqs = model.read_bytes_per_wg / REQ_BYTES as f64;
        let n = cum(reqs, phase + 1) - cum(reqs, phase);
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
        // Half the requests from A's tile-row panel, half from B's tile-column panel.
        let panels = PanelReads::new(&model, self.cfg.layout, wg, phase, self.cfg.dtype.bytes());
        for i in 0..n {
            let (base, off) = if i % 2 == 0 {
                (self.a_base, panels.a(i / 2, n.div_ceil(2)))
            } else {
                (self.b_base, panels.b(i / 2, n / 2))
            };
            let addr = base + off % PANEL_REGION;
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
            s.phase_start = at;
            s.compute_at = None;
        }
    }

    /// A workgroup phase's reads came back (`reads_back`) or its compute finished; the
    /// phase ends when both have.
    pub(super) fn wg_progress(&mut self, node: usize, slot: u32, reads_back: bool, at: Cycle) {
        let n = &mut self.nodes[node];
        let ready = {
            let Some(s) = n
                .producer
                .as_mut()
                .and_then(|p| p.slots[slot as usize].as_mut())
            else {
                return;
            };
            if reads_back {
                s.reads_left = 0;
                n.contention.phase_reads(s.phase_start, at, s.compute_at);
            } else {
                s.compute_done = true;
                s.compute_at = Some(at);
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
            (s.wg, s.phase >= p.model.phases.max(1))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn reads(layout: Option<OperandLayout>) -> PanelReads {
        PanelReads {
            layout,
            tr: 1,
            tc: 2,
            tile: (128, 128),
            k0: 32,
            k: 2048,
            m: 4096,
            eb: 2,
            flat: (1000, 2000),
        }
    }

    #[test]
    fn panel_reads_follow_the_operand_layout() {
        // Along K: request j of 4 reads row 128 + 32 j at K element 32.
        let k = reads(Some(OperandLayout::AlongK));
        assert_eq!(k.a(0, 4), (128 * 2048 + 32) * 2);
        assert_eq!(k.a(1, 4) - k.a(0, 4), 32 * 2048 * 2);
        // Along M: consecutive 64-B pieces of the tile's 256-B run, then the next K row.
        let m = reads(Some(OperandLayout::AlongM));
        assert_eq!(m.a(0, 8), 32 * 4096 * 2 + 256);
        assert_eq!(m.a(1, 8) - m.a(0, 8), 64);
        assert_eq!(m.a(4, 8) - m.a(0, 8), 4096 * 2);
        // B is along K in both: one run per tile column.
        assert_eq!(k.b(1, 4), m.b(1, 4));
        assert_eq!(k.b(1, 4) - k.b(0, 4), 32 * 2048 * 2);
        // No layout: one contiguous stream per panel.
        let f = reads(None);
        assert_eq!((f.a(3, 4), f.b(3, 4)), (1000 + 192, 2000 + 192));
    }
}
