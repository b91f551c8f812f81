//! The DMA engines: descriptors made ready by tracker firings, their reads, and the
//! message each sends to its destination GPU.

use nmcp_firmware::Event;
use nmcp_isa::t3::{split_peer, DmaOp, TRACKER_NO_DMA};

use super::blocks::{Ack, BlockKind, Message};
use super::trace::ps;
use super::values::{Region, WriteOp};
use super::T3System;
use crate::hbm::Cycle;
use crate::memctrl::TrafficClass;
use crate::t3::layout::Rect;
use crate::t3::tracker::Fired;

/// DMA descriptors one GPU's engines work on at once (4 engines x 4).
pub const DMA_IN_FLIGHT: usize = 16;

impl T3System {
    pub(super) fn fired(&mut self, node: usize, f: Fired, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let Some(k) = t.nodes.get(node).map(|n| n.tracker) {
                t.tl.instant(k, "fired", ps(at));
            }
        }
        self.nodes[node]
            .fire_log
            .push((at, f.wg_id, f.wf_id, f.dma_id));
        self.nodes[node]
            .fw_events
            .push((at, Event::TrackerFired { entry: f.entry }));
        if f.dma_id == TRACKER_NO_DMA {
            return;
        }
        let ready = match self.nodes[node].dma.get_mut(&f.dma_id) {
            Some((d, got)) => {
                *got += 1;
                *got >= d.fires.max(1)
            }
            None => false,
        };
        if ready {
            self.nodes[node].dma_ready.push_back(f.dma_id);
        }
    }

    pub(super) fn run_dma(&mut self, node: usize, at: Cycle) {
        while self.nodes[node].dma_busy < DMA_IN_FLIGHT {
            let Some(id) = self.nodes[node].dma_ready.pop_front() else {
                return;
            };
            let Some((d, _)) = self.nodes[node].dma.get(&id).cloned() else {
                continue;
            };
            self.nodes[node].dma_busy += 1;
            if let Some(t) = self.trace.as_deref_mut() {
                let to = split_peer(d.dst).0.map_or(node as u32, u32::from);
                t.dma_start.insert((node, id), (at, to));
            }
            let rect = self.desc_rect(d.src, d.rows, d.cols);
            self.start_reads(node, rect, Region::Out, BlockKind::DmaRead { desc: id }, at);
        }
    }

    pub(super) fn desc_rect(&self, addr: u64, rows: u16, cols: u16) -> Rect {
        let l = self.cfg.layout;
        let (_, local) = split_peer(addr);
        let e = local / u64::from(l.elem);
        Rect {
            row0: (e / u64::from(l.n)) as u32,
            col0: (e % u64::from(l.n)) as u32,
            rows: u32::from(rows),
            cols: u32::from(cols),
        }
    }

    pub(super) fn dma_reads_done(&mut self, node: usize, id: u16, rect: Rect, at: Cycle) {
        let Some((d, _)) = self.nodes[node].dma.remove(&id) else {
            return;
        };
        self.nodes[node].dma_busy -= 1;
        let payload = self.values(node, Region::Out, rect);
        let (peer, dst_local) = split_peer(d.dst);
        let to = peer.map_or(node as u32, u32::from);
        let dst_rect = self.desc_rect(dst_local, d.rows, d.cols);
        let op = match d.op {
            DmaOp::Store => WriteOp::Store,
            DmaOp::Update(_) => WriteOp::Update,
        };
        let msg = Message {
            rect: dst_rect,
            region: Region::Out,
            op,
            tag: Some((d.dst_wg_id, d.dst_wf_id)),
            payload,
            ack: Ack::Dma {
                node: node as u32,
                id,
            },
            class: TrafficClass::Communication,
        };
        let from = self.nodes[node].index;
        self.send(from, to, msg, at);
        self.run_dma(node, at);
    }
}
