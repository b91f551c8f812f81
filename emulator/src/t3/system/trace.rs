//! The timeline a T3 run records: per GPU kernels, workgroups, firmware, DMA, links,
//! tracker and memory occupancy.

use std::collections::HashMap;

use nmcp_firmware::Event;

use super::T3System;
use crate::hbm::Cycle;
use crate::sim::PS_PER_NS;
use crate::timeline::{variant_name, Timeline, TimelineConfig, TrackId, TrackKind};

/// A GPU's timeline tracks.
#[derive(Debug, Clone)]
pub(super) struct NodeTracks {
    pub(super) kernel: TrackId,
    pub(super) cp: TrackId,
    pub(super) dma: TrackId,
    pub(super) link: TrackId,
    pub(super) tracker: TrackId,
    pub(super) tracker_live: TrackId,
    pub(super) wgs: TrackId,
    pub(super) inflight: TrackId,
    /// Per pseudo-channel: requests queued at its controller (reads + writes).
    pub(super) queues: Vec<TrackId>,
}

/// What a T3 run records on its timeline (off unless [`T3System::enable_timeline`]).
#[derive(Debug)]
pub(super) struct T3Trace {
    pub(super) tl: Timeline,
    pub(super) nodes: Vec<NodeTracks>,
    /// Producer start per GPU, ns (its kernel span ends when the producer is done).
    pub(super) kernel_start: Vec<Option<Cycle>>,
    pub(super) kernel_told: Vec<bool>,
    /// DMA descriptors in flight: (GPU, id) -> (start ns, destination GPU).
    pub(super) dma_start: HashMap<(usize, super::dma::DmaKey), (Cycle, u32)>,
    /// Workgroups running per GPU.
    pub(super) running: Vec<u32>,
}

/// ns on the T3 clock to the timeline's ps.
pub(super) fn ps(c: Cycle) -> u64 {
    c.saturating_mul(PS_PER_NS)
}

impl T3System {
    /// Starts recording a timeline under `config` (call before starting any kernel):
    /// per GPU the producer kernel, running workgroups, firmware handler runs, DMA
    /// transfers, link transfers, tracker firings and live entries, requests in flight,
    /// and each controller's queue occupancy (sampled).
    pub fn enable_timeline(&mut self, config: TimelineConfig) {
        let mut tl = Timeline::new(config);
        let gpus = self.nodes.len();
        let nodes = (0..gpus)
            .map(|g| {
                let p = format!("GPU {g}");
                let m = format!("GPU {g} memory");
                let pcs = self.nodes[g].mem.controllers().len();
                NodeTracks {
                    kernel: tl.track(&p, "kernels", TrackKind::Spans),
                    cp: tl.track(&p, "CP (firmware)", TrackKind::Instants),
                    dma: tl.track(&p, "DMA", TrackKind::Spans),
                    link: tl.track(&p, "link out", TrackKind::Spans),
                    tracker: tl.track(&p, "tracker fired", TrackKind::Instants),
                    tracker_live: tl.track(&p, "tracker live entries", TrackKind::Counter),
                    wgs: tl.track(&p, "workgroups running", TrackKind::Counter),
                    inflight: tl.track(&m, "requests in flight", TrackKind::Counter),
                    queues: (0..pcs)
                        .map(|pc| tl.track(&m, &format!("PC {pc} queue"), TrackKind::Counter))
                        .collect(),
                }
            })
            .collect();
        tl.set_meta("model", "t3");
        tl.set_meta("gpus", &self.cfg.gpus.to_string());
        tl.set_meta("simulated_gpus", &gpus.to_string());
        self.trace = Some(Box::new(T3Trace {
            tl,
            nodes,
            kernel_start: vec![None; gpus],
            kernel_told: vec![false; gpus],
            dma_start: HashMap::new(),
            running: vec![0; gpus],
        }));
    }

    /// The recorded timeline (recording stops).
    pub fn take_timeline(&mut self) -> Option<Timeline> {
        self.trace.take().map(|mut t| {
            t.tl.finish();
            t.tl
        })
    }

    /// Records a firmware handler run on GPU `node` at `at` (an instant named after
    /// the event; the CP time the handler is charged is `t3/cp_time.rs`'s).
    pub fn trace_firmware(&mut self, node: usize, event: &Event, at: Cycle) {
        if self.trace.is_some() {
            let d = format!("{event:?}");
            self.trace_cp(node, variant_name(&d), at);
        }
    }

    /// Records a firmware call named `name` on GPU `node` at `at` (an instant).
    pub fn trace_cp(&mut self, node: usize, name: &str, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let Some(k) = t.nodes.get(node).map(|n| n.cp) {
                t.tl.instant(k, name, ps(at));
            }
        }
    }

    /// The workgroups running on GPU `node` changed by `delta` at `at`.
    pub(super) fn trace_wgs(&mut self, node: usize, delta: i32, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let (Some(r), Some(k)) = (t.running.get_mut(node), t.nodes.get(node)) {
                *r = r.saturating_add_signed(delta);
                if t.kernel_start[node].is_none() {
                    t.kernel_start[node] = Some(at);
                }
                t.tl.counter(k.wgs, ps(at), f64::from(*r));
            }
        }
    }

    /// Per slice: the producer kernels that ended, and the sampled counters.
    pub(super) fn trace_slice(&mut self, end: Cycle) {
        let Some(t) = self.trace.as_deref_mut() else {
            return;
        };
        for (g, n) in self.nodes.iter().enumerate() {
            if let Some(done) = n.producer.as_ref().and_then(|p| p.done_at) {
                if !t.kernel_told[g] {
                    t.kernel_told[g] = true;
                    let start = t.kernel_start[g].unwrap_or(0);
                    t.tl.span(t.nodes[g].kernel, "GEMM (producer)", ps(start), ps(done));
                }
            }
        }
        if !t.tl.sample_due(ps(end)) {
            return;
        }
        for (g, n) in self.nodes.iter().enumerate() {
            let k = &t.nodes[g];
            for (c, &q) in n.mem.controllers().iter().zip(&k.queues) {
                let (r, w) = c.queue_lens();
                t.tl.counter(q, ps(end), (r + w) as f64);
            }
            t.tl.counter(k.inflight, ps(end), n.inflight as f64);
            t.tl.counter(k.tracker_live, ps(end), n.tracker.live() as f64);
        }
    }
}
