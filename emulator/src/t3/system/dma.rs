//! The DMA engines: descriptors made ready by tracker firings (programmed ones, or blocks
//! derived from a region), their reads, and the message each sends to its destination
//! GPU.
//!
//! A descriptor is keyed by a [`DmaKey`]: a programmed descriptor's id (below 2^16), or a
//! region block's [`region_key`].

use std::collections::{HashMap, VecDeque};

use nmcp_firmware::platform::DmaError;
use nmcp_firmware::Event;
use nmcp_isa::t3::{split_peer, DmaDescriptor, DmaOp, DmaTrigger, TRACKER_NO_DMA};

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

/// A descriptor's key in the engines' table.
pub(super) type DmaKey = u32;

/// Bit set in the key of a block derived from a region.
const REGION_BIT: DmaKey = 1 << 31;

/// The key of a region block: the region's slot and the block's first WF index in the
/// region (local WG index x WFs + first WF; below 2^16 since a chunk holds at most 0x7FFF
/// WF tiles).
pub(super) fn region_key(slot: u8, index: u32) -> DmaKey {
    REGION_BIT | (DmaKey::from(slot) << 16) | (index & 0xFFFF)
}

/// The region slot of a region block's key; `None` for a programmed descriptor.
pub(super) fn key_region(key: DmaKey) -> Option<u8> {
    (key & REGION_BIT != 0).then_some(((key >> 16) & 0xFF) as u8)
}

/// A GPU's DMA engines: the descriptor table the firmware programs, the descriptors whose
/// triggers have all fired (in the order they became ready), and how many are moving data.
#[derive(Debug, Clone, Default)]
pub(super) struct DmaEngine {
    /// Programmed descriptors by id, each with the tracker firings counted so far.
    table: HashMap<DmaKey, (DmaDescriptor, u8)>,
    /// Descriptors ready to start, oldest first.
    ready: VecDeque<DmaKey>,
    /// Descriptors started and not yet finished (their reads or sends in flight).
    busy: usize,
}

impl DmaEngine {
    /// Descriptors the table holds at most (the firmware gets `TableFull` past it).
    const TABLE_CAP: usize = 8_192;

    /// Adds `desc` to the table; one without a trigger is ready at once.
    pub(super) fn program(&mut self, desc: &DmaDescriptor) -> Result<(), DmaError> {
        if self.table.len() >= Self::TABLE_CAP {
            return Err(DmaError::TableFull);
        }
        let ready_now = matches!(desc.trigger, DmaTrigger::None);
        let key = DmaKey::from(desc.id);
        if self.table.insert(key, (desc.clone(), 0)).is_some() {
            return Err(DmaError::TableFull);
        }
        if ready_now {
            self.ready.push_back(key);
        }
        Ok(())
    }

    /// Whether the table takes `extra + 1` more descriptors.
    pub(super) fn has_room(&self, extra: usize) -> bool {
        self.table.len().saturating_add(extra) < Self::TABLE_CAP
    }

    /// Whether descriptor `id` is in the table.
    pub(super) fn holds(&self, id: u16) -> bool {
        self.table.contains_key(&DmaKey::from(id))
    }

    /// Counts one tracker firing for descriptor `id`; it becomes ready with its last.
    pub(super) fn trigger(&mut self, id: u16) {
        let key = DmaKey::from(id);
        let ready = match self.table.get_mut(&key) {
            Some((d, got)) => {
                *got += 1;
                *got >= d.fires.max(1)
            }
            None => false,
        };
        if ready {
            self.ready.push_back(key);
        }
    }

    /// Counts one firing of a region block (`key`, the transfer `desc`, ready after
    /// `fires` firings); returns whether this firing made it ready. The hardware keeps
    /// the block's count from its first firing; it does not take a table slot the
    /// firmware programs.
    pub(super) fn trigger_block(&mut self, key: DmaKey, desc: &DmaDescriptor, fires: u8) -> bool {
        let (_, got) = self.table.entry(key).or_insert_with(|| (desc.clone(), 0));
        *got += 1;
        let ready = *got >= fires.max(1);
        if ready {
            self.ready.push_back(key);
        }
        ready
    }

    /// The next ready descriptor to start, if an engine has room ([`DMA_IN_FLIGHT`]).
    pub(super) fn start_next(&mut self) -> Option<(DmaKey, DmaDescriptor)> {
        while self.busy < DMA_IN_FLIGHT {
            let id = self.ready.pop_front()?;
            if let Some((d, _)) = self.table.get(&id) {
                self.busy += 1;
                return Some((id, d.clone()));
            }
        }
        None
    }

    /// Descriptor `id`'s reads are done: it leaves the table and frees its engine slot.
    pub(super) fn finish(&mut self, id: DmaKey) -> Option<DmaDescriptor> {
        let (d, _) = self.table.remove(&id)?;
        self.busy = self.busy.saturating_sub(1);
        Some(d)
    }

    /// Whether no descriptor is programmed or waiting to start.
    pub(super) fn is_empty(&self) -> bool {
        self.table.is_empty() && self.ready.is_empty()
    }

    /// (ready, started, programmed) descriptors, for a stuck run's report.
    pub(super) fn counts(&self) -> (usize, usize, usize) {
        (self.ready.len(), self.busy, self.table.len())
    }
}

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
        if let Some(slot) = f.region {
            self.region_fired(node, slot, f, at);
            return;
        }
        self.nodes[node]
            .fw_events
            .push((at, Event::TrackerFired { entry: f.entry }));
        if f.dma_id == TRACKER_NO_DMA {
            return;
        }
        self.nodes[node].dma.trigger(f.dma_id);
    }

    pub(super) fn run_dma(&mut self, node: usize, at: Cycle) {
        while let Some((id, d)) = self.nodes[node].dma.start_next() {
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

    pub(super) fn dma_reads_done(&mut self, node: usize, id: DmaKey, rect: Rect, at: Cycle) {
        let Some(d) = self.nodes[node].dma.finish(id) else {
            return;
        };
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
