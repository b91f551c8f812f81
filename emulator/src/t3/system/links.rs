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
/// latency.
#[derive(Debug, Clone)]
pub(super) struct Links {
    /// `ring[g]`: GPU g's direction towards `g - 1`.
    ring: Vec<LinkDirection>,
    /// Direct links by (from, to), created on first use.
    direct: HashMap<(u32, u32), LinkDirection>,
    bytes_per_ns: f64,
    latency_ns: f64,
}

impl Links {
    /// Ring links for `gpus` GPUs.
    pub(super) fn new(gpus: u32, bytes_per_ns: f64, latency_ns: f64) -> Self {
        Self {
            ring: (0..gpus)
                .map(|_| LinkDirection::new(bytes_per_ns, latency_ns))
                .collect(),
            direct: HashMap::new(),
            bytes_per_ns,
            latency_ns,
        }
    }

    /// Sends `bytes` from GPU `from` to GPU `to` at `at`: the ring direction when `to` is
    /// `from`'s upstream neighbour, else the pair's direct link. Returns the arrival cycle.
    pub(super) fn send(&mut self, from: u32, to: u32, at: Cycle, bytes: u64) -> Cycle {
        let g = self.ring.len() as u32;
        let arrive = match self.ring.get_mut(from as usize) {
            Some(link) if (from + g - 1) % g == to => link.send(at as f64, bytes),
            _ => {
                let (bw, lat) = (self.bytes_per_ns, self.latency_ns);
                self.direct
                    .entry((from, to))
                    .or_insert_with(|| LinkDirection::new(bw, lat))
                    .send(at as f64, bytes)
            }
        };
        arrive.ceil() as Cycle
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
