//! Transfer blocks and messages: a rectangle of requests a GPU waits on as one, what it
//! does when its last request finishes, and the messages that carry blocks between GPUs.

use nmcp_firmware::Event;

use super::dma::{key_region, DmaKey};
use super::node::REQ_BYTES;
use super::stepping::Ev;
use super::trace::ps;
use super::values::{dtype_of, Region, WriteOp};
use super::T3System;
use crate::hbm::Cycle;
use crate::memctrl::{Access, MemCompletion, Request, Source, TrafficClass};
use crate::t3::layout::Rect;

/// Who is told when a message's writes have landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ack {
    None,
    /// `DmaDone` for descriptor `id` of GPU `node` (a region block's landing, for a
    /// region key).
    Dma {
        node: u32,
        id: DmaKey,
    },
    /// A ring-kernel block of step `step` landed at its receiver.
    Ring {
        step: u32,
    },
}

/// A transfer between GPUs.
#[derive(Debug, Clone)]
pub(super) struct Message {
    pub(super) rect: Rect,
    pub(super) region: Region,
    pub(super) op: WriteOp,
    /// Tracker tag for the receiver: (workgroup, wavefront).
    pub(super) tag: Option<(u32, u8)>,
    pub(super) payload: Option<Vec<f32>>,
    pub(super) ack: Ack,
    pub(super) class: TrafficClass,
}

#[derive(Debug, Clone)]
pub(super) enum BlockKind {
    /// A producer workgroup's phase reads.
    WgRead { slot: u32 },
    /// Writes (local GEMM stores, or a message landing).
    Writes { ack: Ack, payload: Option<Vec<f32>> },
    /// A DMA descriptor's reads.
    DmaRead { desc: DmaKey },
    /// A ring-kernel block's reads (one or two of them per block).
    RingRead { item: u32 },
    /// Counter spills and other traffic nobody waits for.
    Untracked,
}

#[derive(Debug, Clone)]
pub(super) struct Block {
    pub(super) kind: BlockKind,
    pub(super) left: u32,
    pub(super) rect: Rect,
    pub(super) region: Region,
    pub(super) op: WriteOp,
}

impl T3System {
    pub(super) fn base(&self, region: Region) -> u64 {
        match region {
            Region::Out => 0,
            Region::Recv => self.recv_base,
        }
    }

    /// Queues the requests that cover `rect` of `region` on GPU `node` for block `block`;
    /// returns how many and their bytes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rect_requests(
        &mut self,
        node: usize,
        rect: Rect,
        region: Region,
        access: Access,
        class: TrafficClass,
        source: Option<Source>,
        block: u32,
        at: Cycle,
    ) -> (u32, u64) {
        let l = self.cfg.layout;
        let base = self.base(region);
        let (mut count, mut bytes) = (0, 0);
        for row in rect.row0..rect.row0 + rect.rows {
            let start = base + l.offset(row, rect.col0);
            let end = base + l.offset(row, rect.col0 + rect.cols);
            let mut a = start & !(REQ_BYTES - 1);
            while a < end {
                // A request covers the 64 B block's columns that hold some of the data:
                // both, or only the first or the second 32 B column when a row segment
                // starts or ends inside the block (a masked access never issues a column
                // with no byte enabled). Its address is the first byte it carries: the
                // column is the same, and the tracker tap reads from it how many of the
                // wavefront's elements each column holds (a block shared by two tiles,
                // or by the end of one row and the start of the next, counts each part
                // once).
                let lo = a.max(start);
                let hi = (a + REQ_BYTES).min(end);
                let half = REQ_BYTES / 2;
                let size = if hi <= a + half || lo >= a + half {
                    half
                } else {
                    REQ_BYTES
                };
                let mut r = Request {
                    addr: lo,
                    size: size as u32,
                    access,
                    class,
                    source: None,
                    arrival: at,
                };
                if let Some(s) = source {
                    r = r.with_source(s);
                }
                self.nodes[node].push_request(r, block);
                count += 1;
                bytes += size;
                a += REQ_BYTES;
            }
        }
        (count, bytes)
    }

    pub(super) fn access_of(&self, op: WriteOp) -> Access {
        match op {
            WriteOp::Store => Access::Write,
            WriteOp::Update => Access::Update(dtype_of(self.cfg.dtype)),
        }
    }

    /// Starts the write block `msg` describes on `node` (a local store, or a message
    /// landing).
    pub(super) fn start_writes(&mut self, node: usize, msg: Message, at: Cycle) {
        let Message {
            rect,
            region,
            op,
            tag,
            payload,
            ack,
            class,
        } = msg;
        if rect.rows == 0 || rect.cols == 0 {
            self.block_done(
                node,
                BlockKind::Writes { ack, payload },
                rect,
                region,
                op,
                at,
            );
            return;
        }
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::Writes { ack, payload },
            left: 0,
            rect,
            region,
            op,
        });
        let source = tag.map(|(wg, wf)| Source {
            gpu: node as u16,
            workgroup: wg,
            wavefront: wf,
        });
        let access = self.access_of(op);
        let (n, bytes) = self.rect_requests(node, rect, region, access, class, source, b, at);
        let k = &mut self.nodes[node].bytes;
        match (op, class, region) {
            (WriteOp::Update, _, _) => k.updates += bytes,
            (WriteOp::Store, TrafficClass::Compute, Region::Out) => k.gemm_writes += bytes,
            _ => k.rs_writes += bytes,
        }
        if let Some(Some(blk)) = self.nodes[node].blocks.get_mut(b as usize) {
            blk.left = n;
        }
    }

    /// Starts a read block of `rect` on `node`.
    pub(super) fn start_reads(
        &mut self,
        node: usize,
        rect: Rect,
        region: Region,
        kind: BlockKind,
        at: Cycle,
    ) {
        let b = self.nodes[node].new_block(Block {
            kind,
            left: 0,
            rect,
            region,
            op: WriteOp::Store,
        });
        let (n, bytes) = self.rect_requests(
            node,
            rect,
            region,
            Access::Read,
            TrafficClass::Communication,
            None,
            b,
            at,
        );
        self.nodes[node].bytes.rs_reads += bytes;
        if n == 0 {
            self.finish_block(node, b, at);
        } else if let Some(Some(blk)) = self.nodes[node].blocks.get_mut(b as usize) {
            blk.left = n;
        }
    }

    pub(super) fn finish_block(&mut self, node: usize, b: u32, at: Cycle) {
        let Some(blk) = self.nodes[node]
            .blocks
            .get_mut(b as usize)
            .and_then(Option::take)
        else {
            return;
        };
        self.nodes[node].free_blocks.push(b);
        self.block_done(node, blk.kind, blk.rect, blk.region, blk.op, at);
    }

    pub(super) fn block_done(
        &mut self,
        node: usize,
        kind: BlockKind,
        rect: Rect,
        region: Region,
        op: WriteOp,
        at: Cycle,
    ) {
        match kind {
            BlockKind::Untracked => {}
            BlockKind::WgRead { slot } => self.wg_progress(node, slot, true, at),
            BlockKind::Writes { ack, payload } => {
                if let Some(p) = payload {
                    self.apply(node, region, rect, op, &p);
                }
                match ack {
                    Ack::None => {
                        if let Some(p) = self.nodes[node].producer.as_mut() {
                            if region == Region::Out {
                                p.store_finished(at);
                            }
                        }
                    }
                    Ack::Dma { node: n, id } => {
                        let lat = self.cfg.link_latency_ns.ceil() as Cycle;
                        let target = if self.cfg.shortcut { 0 } else { n };
                        if let Some(t) = self.trace.as_deref_mut() {
                            let g = target as usize;
                            if let (Some((start, to)), Some(k)) =
                                (t.dma_start.remove(&(g, id)), t.nodes.get(g).map(|x| x.dma))
                            {
                                let name = format!("DMA -> GPU {to}");
                                t.tl.span(k, &name, ps(start), ps(at + lat));
                            }
                        }
                        let event = match (key_region(id), u16::try_from(id)) {
                            (Some(slot), _) => Ev::RegionDma { node: target, slot },
                            (None, Ok(id)) => Ev::Firmware {
                                node: target,
                                event: Event::DmaDone {
                                    engine: 0,
                                    id,
                                    status: Ok(()),
                                },
                            },
                            (None, Err(_)) => return,
                        };
                        self.schedule(at + lat, event);
                    }
                    Ack::Ring { step } => self.ring_received(node, step, at),
                }
            }
            BlockKind::DmaRead { desc } => self.dma_reads_done(node, desc, rect, at),
            BlockKind::RingRead { item } => self.ring_read_done(node, item, region, rect, at),
        }
    }

    /// Handles a message landing on `node`.
    pub(super) fn arrive(&mut self, node: usize, msg: Message, at: Cycle) {
        self.start_writes(node, msg, at);
    }

    pub(super) fn complete(&mut self, node: usize, done: &[MemCompletion]) {
        for c in done {
            let n = &mut self.nodes[node];
            n.inflight -= 1;
            if c.class != TrafficClass::Communication && !c.access.is_write_like() {
                n.inflight_reads = n.inflight_reads.saturating_sub(1);
            }
            let off = (c.id.0 - n.purpose_base) as usize;
            let b = n.purpose.get_mut(off).and_then(Option::take);
            while matches!(n.purpose.front(), Some(None)) {
                n.purpose.pop_front();
                n.purpose_base += 1;
            }
            let Some(b) = b else { continue };
            let last = match n.blocks.get_mut(b as usize) {
                Some(Some(blk)) => {
                    blk.left = blk.left.saturating_sub(1);
                    blk.left == 0
                }
                _ => false,
            };
            if last {
                self.finish_block(node, b, c.finish);
            }
        }
    }
}
