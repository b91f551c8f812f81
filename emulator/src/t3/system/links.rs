//! Link endpoints: sending a message over the ring or a direct link, and the symmetric
//! shortcut's mirroring of GPU 0's traffic as its neighbours'.

use std::collections::HashMap;

use super::blocks::Message;
use super::stepping::Ev;
use super::trace::ps;
use super::T3System;
use crate::hbm::Cycle;
use crate::t3::layout::Rect;
use crate::t3::link::{LinkDirection, LinkStats};

/// The links between the GPUs, as data: each GPU's ring direction towards its upstream
/// neighbour (`g - 1`, the ring's sending direction), and direct links of a fully
/// connected topology, created on first use. Every link has the same bandwidth and
/// latency. Each direction belongs to its sending GPU, so a share of the GPUs stepped on
/// a thread of its own takes its senders' links along ([`Links::split_off`]).
#[derive(Debug, Clone)]
pub(super) struct Links {
    /// The first sending GPU held (0 but in a share).
    first: usize,
    /// All GPUs in the ring.
    gpus: u32,
    /// `ring[g - first]`: GPU g's direction towards `g - 1`.
    ring: Vec<LinkDirection>,
    /// `direct[g - first]`: GPU g's direct links by destination, created on first use.
    direct: Vec<HashMap<u32, LinkDirection>>,
    bytes_per_ns: f64,
    latency_ns: f64,
}

impl Links {
    /// Ring links for `gpus` GPUs.
    pub(super) fn new(gpus: u32, bytes_per_ns: f64, latency_ns: f64) -> Self {
        Self {
            first: 0,
            gpus,
            ring: (0..gpus)
                .map(|_| LinkDirection::new(bytes_per_ns, latency_ns))
                .collect(),
            direct: (0..gpus).map(|_| HashMap::new()).collect(),
            bytes_per_ns,
            latency_ns,
        }
    }

    /// Sends `bytes` from GPU `from` to GPU `to` at `at`: the ring direction when `to` is
    /// `from`'s upstream neighbour, else the pair's direct link. Returns the arrival cycle.
    pub(super) fn send(&mut self, from: u32, to: u32, at: Cycle, bytes: u64) -> Cycle {
        let g = self.gpus;
        let i = (from as usize)
            .checked_sub(self.first)
            .unwrap_or(usize::MAX);
        debug_assert!(
            i < self.ring.len(),
            "GPU {from} sends on a link it does not hold"
        );
        let arrive = match self.ring.get_mut(i) {
            Some(link) if (from + g - 1) % g == to => link.send(at as f64, bytes),
            _ => {
                let (bw, lat) = (self.bytes_per_ns, self.latency_ns);
                match self.direct.get_mut(i) {
                    Some(d) => d
                        .entry(to)
                        .or_insert_with(|| LinkDirection::new(bw, lat))
                        .send(at as f64, bytes),
                    // A sender this share does not hold (never: a share sends only from
                    // its own GPUs): the link's unloaded time.
                    None => at as f64 + lat + bytes as f64 / bw,
                }
            }
        };
        arrive.ceil() as Cycle
    }

    /// Moves the links GPUs `g..` send on into a share of their own.
    pub(super) fn split_off(&mut self, g: usize) -> Self {
        let at = g - self.first;
        Self {
            first: g,
            gpus: self.gpus,
            ring: self.ring.split_off(at),
            direct: self.direct.split_off(at),
            bytes_per_ns: self.bytes_per_ns,
            latency_ns: self.latency_ns,
        }
    }

    /// Takes back the links of the share that follows this one.
    pub(super) fn append(&mut self, mut next: Self) {
        self.ring.append(&mut next.ring);
        self.direct.append(&mut next.direct);
    }

    /// The smallest latency of any link, ns: nothing a GPU sends reaches another sooner,
    /// which bounds the stepping lookahead.
    pub(super) fn min_latency_ns(&self) -> f64 {
        self.latency_ns
    }

    /// Totals of the ring directions (GPU g's sending direction).
    pub(super) fn ring_stats(&self) -> Vec<LinkStats> {
        self.ring.iter().map(LinkDirection::stats).collect()
    }
}

impl T3System {
    /// Sends `msg` from GPU `from` to GPU `to` at `at`.
    pub(super) fn send(&mut self, from: u32, to: u32, msg: Message, at: Cycle) {
        let g = self.cfg.gpus;
        let bytes = crate::t3::layout::elements(&msg.rect) * u64::from(self.cfg.layout.elem) + 64;
        let arrive = self.links.send(from, to, at, bytes);
        if let Some(t) = self.trace.as_deref_mut() {
            let g = if self.cfg.shortcut { 0 } else { from as usize };
            if let Some(k) = t.nodes.get(g).map(|x| x.link) {
                let name = format!("to GPU {to}");
                t.tl.span(k, &name, ps(at), ps(arrive));
            }
        }
        if self.cfg.shortcut {
            // GPU 0 stands for every GPU: what it sends to `to` is what GPU `from + d`
            // sends to `to + d`; the copy that lands on GPU 0 comes from `from - to`
            // positions upstream, i.e. the same message shifted by `(from - to)` chunks.
            let shift = (from + g - to) % g;
            let msg = self.shift_message(msg, shift);
            self.schedule(
                arrive,
                Ev::Arrive {
                    node: 0,
                    msg: Box::new(msg),
                },
            );
        } else {
            self.schedule(
                arrive,
                Ev::Arrive {
                    node: to,
                    msg: Box::new(msg),
                },
            );
        }
    }

    /// The message as it looks coming from `shift` GPUs further along the ring.
    pub(super) fn shift_message(&self, mut msg: Message, shift: u32) -> Message {
        let l = self.cfg.layout;
        let chunk_of = |r: &Rect| {
            (0..l.gpus)
                .find(|&c| {
                    let cr = l.chunk_rect(c);
                    r.row0 >= cr.row0
                        && r.row0 < cr.row0 + cr.rows
                        && r.col0 >= cr.col0
                        && r.col0 < cr.col0 + cr.cols
                })
                .unwrap_or(0)
        };
        let from_chunk = chunk_of(&msg.rect);
        let to_chunk = (from_chunk + shift) % l.gpus;
        let (a, b) = (l.chunk_rect(from_chunk), l.chunk_rect(to_chunk));
        msg.rect.row0 = msg.rect.row0 - a.row0 + b.row0;
        msg.rect.col0 = msg.rect.col0 - a.col0 + b.col0;
        if let Some((wg, wf)) = msg.tag {
            let (fa, _) = l.chunk_wgs(from_chunk);
            let (fb, _) = l.chunk_wgs(to_chunk);
            msg.tag = Some((wg - fa + fb, wf));
        }
        // A DMA acknowledgement stays GPU 0's own: by symmetry it lands when this does.
        msg
    }
}
