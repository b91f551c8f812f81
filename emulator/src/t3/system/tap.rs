//! The tracker tap: an observer on every controller that hands issued write columns with
//! a source to the GPU's tracker, counting the elements each column carries.

use super::blocks::{Block, BlockKind};
use super::node::REQ_BYTES;
use super::values::{Region, WriteOp};
use super::T3System;
use crate::hbm::Cycle;
use crate::memctrl::{Access, ControllerObserver, IssuedColumn, Request, TrafficClass};
use crate::t3::layout::Rect;

/// An observer that hands every issued column with a source to the node's tracker.
#[derive(Debug, Clone, Default)]
pub(super) struct TrackerTap {
    pub(super) issued: Vec<Tapped>,
}

/// A sourced write column as the tracker's observer saw it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tapped {
    pub(super) at: Cycle,
    pub(super) wg: u32,
    pub(super) wf: u8,
    /// The request's first carried byte.
    pub(super) addr: u64,
    /// Where the column went: (pseudo-channel, bank group, bank, row, column).
    pub(super) place: (usize, u8, u8, u32, u32),
}

impl ControllerObserver for TrackerTap {
    fn on_issue(&mut self, c: &IssuedColumn) {
        if matches!(c.access, Access::Read) {
            return;
        }
        if let Some(s) = c.source {
            self.issued.push(Tapped {
                at: c.at,
                wg: s.workgroup,
                wf: s.wavefront,
                addr: c.addr,
                place: (c.pseudo_channel, c.bank.group, c.bank.bank, c.row, c.col),
            });
        }
    }
}

impl T3System {
    /// Elements of the tapped column's wavefront that the column carries. A request is
    /// [`REQ_BYTES`] long and issues one column per 32 B half; its data is the wavefront's
    /// row segment from the request's first carried byte to the request's end or the
    /// segment's end, whichever comes first; the column carries the part of that in its
    /// half (found by decoding the request's first half to a place).
    pub(super) fn column_elements(&self, node: usize, t: &Tapped) -> u32 {
        const COL: u64 = 32;
        let l = &self.cfg.layout;
        let elem = u64::from(l.elem.max(1));
        let base = if t.addr >= self.recv_base {
            self.recv_base
        } else {
            0
        };
        let Some(row) = (t.addr - base).checked_div(u64::from(l.n) * elem) else {
            return 0;
        };
        let rect = l.wf_rect(t.wg, u32::from(t.wf));
        let req = t.addr & !(REQ_BYTES - 1);
        let data_end = (req + REQ_BYTES).min(base + l.offset(row as u32, rect.col0 + rect.cols));
        let map = &self.nodes[node].mapping;
        let d = map.decode(req);
        let first = (
            map.pseudo_channel_index(&d),
            d.bank_group as u8,
            d.bank as u8,
            d.row,
            d.col,
        ) == t.place;
        let col_lo = if first { req } else { req + COL };
        let lo = col_lo.max(t.addr);
        let hi = (col_lo + COL).min(data_end);
        (hi.saturating_sub(lo) / elem) as u32
    }

    pub(super) fn drain_taps(&mut self, node: usize) {
        let mut issued = std::mem::take(&mut self.nodes[node].tap_buf);
        if !self.nodes[node].tracking {
            issued.clear();
            self.nodes[node].tap_buf = issued;
            return;
        }
        issued.sort_unstable_by_key(|x| x.at);
        for t in issued.drain(..) {
            let (at, wg, wf) = (t.at, t.wg, t.wf);
            let elems = self.column_elements(node, &t);
            if elems == 0 {
                // A column of a request whose wavefront data ended in its other half:
                // its byte mask is empty, so it is no update of this tile.
                continue;
            }
            let o = self.nodes[node].tracker.count(wg, wf, elems);
            if o.spilled {
                self.spill_access(node, wg, wf, at);
            }
            if let Some(f) = o.fired {
                self.fired(node, f, at);
            }
        }
        // Keep the buffer's capacity for the next slice (nothing taps while it is out).
        self.nodes[node].tap_buf = issued;
    }

    pub(super) fn spill_access(&mut self, node: usize, wg: u32, wf: u8, at: Cycle) {
        // One read-modify-write of the entry's counter in the spill table: an array of
        // 64-B records indexed by (workgroup, wavefront), spread over the channels as
        // any array is.
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::Untracked,
            left: 2,
            rect: Rect::default(),
            region: Region::Out,
            op: WriteOp::Store,
        });
        let slot = (u64::from(wg) * 8 + u64::from(wf & 7)) % (1 << 20);
        let addr = self.b_base + (300 << 20) + slot * 64;
        self.nodes[node].push_request(
            Request::read(addr, 32, at).with_class(TrafficClass::Communication),
            b,
        );
        self.nodes[node].push_request(
            Request::write(addr, 32, at).with_class(TrafficClass::Communication),
            b,
        );
        self.nodes[node].bytes.spill += 64;
    }
}
