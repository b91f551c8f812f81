//! A GPU statically split into independent partitions (the MIG-like Resource-Partition
//! configuration of dissertation 7.4.5): each partition has its own CUs, LLC share and
//! HBM bandwidth share, so kernels on different partitions do not interfere at all.
//!
//! Modelled as one [`KernelEngine`] per partition behind the single engine interface the
//! node drives: the CP dispatches exactly as on an unpartitioned GPU, and the hardware
//! assigns each launch to a partition in launch order (round robin), as
//! [`super::sim::GpuSim::with_cu_partitions`] assigns CU masks.

use super::{GpuEvent, KernelEngine, KernelLaunch, Nanos};

/// `parts` independent engines behind one [`KernelEngine`].
#[derive(Debug, Clone)]
pub struct PartitionedGpu<E> {
    parts: Vec<E>,
    launches: usize,
    scratch: Vec<GpuEvent>,
}

impl<E: KernelEngine> PartitionedGpu<E> {
    /// A GPU made of `parts` (at least one; an empty list gets no partition and every
    /// launch is dropped, so callers pass one engine per partition).
    pub fn new(parts: Vec<E>) -> Self {
        Self {
            parts,
            launches: 0,
            scratch: Vec::new(),
        }
    }

    /// The partitions, in assignment order.
    pub fn parts(&self) -> &[E] {
        &self.parts
    }
}

fn event_time(e: &GpuEvent) -> Nanos {
    match *e {
        GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => at,
    }
}

impl<E: KernelEngine> KernelEngine for PartitionedGpu<E> {
    fn launch(&mut self, now: Nanos, tag: u64, launch: &KernelLaunch) {
        let count = self.parts.len();
        if count == 0 {
            return;
        }
        if let Some(p) = self.parts.get_mut(self.launches % count) {
            p.launch(now, tag, launch);
        }
        self.launches = self.launches.wrapping_add(1);
    }

    fn next_event(&self) -> Option<Nanos> {
        self.parts
            .iter()
            .filter_map(KernelEngine::next_event)
            .reduce(f64::min)
    }

    fn advance(&mut self, until: Nanos, out: &mut Vec<GpuEvent>) {
        self.scratch.clear();
        for p in &mut self.parts {
            p.advance(until, &mut self.scratch);
        }
        // Time order across partitions; a stable sort keeps each partition's own order
        // and breaks ties by partition index, so runs are deterministic.
        self.scratch
            .sort_by(|a, b| event_time(a).total_cmp(&event_time(b)));
        out.append(&mut self.scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::FixedTimeEngine;

    fn launch(workgroups: u64) -> KernelLaunch {
        KernelLaunch {
            gemm: None,
            workgroups,
            workgroup_size: 256,
            workgroup_time: 1000.0,
            barrier: false,
        }
    }

    #[test]
    fn launches_go_round_robin_and_do_not_interfere() {
        // Two partitions of 1 CU x 1 slot: two 2-workgroup kernels run side by side
        // (2 us each), where one such partition alone would take 4 us for both.
        let mut g = PartitionedGpu::new(vec![
            FixedTimeEngine::new(1, 1, 1000.0),
            FixedTimeEngine::new(1, 1, 1000.0),
        ]);
        g.launch(0.0, 1, &launch(2));
        g.launch(0.0, 2, &launch(2));
        let mut out = Vec::new();
        while let Some(t) = g.next_event() {
            g.advance(t, &mut out);
        }
        let done: Vec<(u64, f64)> = out
            .iter()
            .filter_map(|e| match *e {
                GpuEvent::Completed { tag, at } => Some((tag, at)),
                GpuEvent::AllDispatched { .. } => None,
            })
            .collect();
        assert_eq!(done.len(), 2);
        for (_, at) in &done {
            assert!((at - 2000.0).abs() < 1e-6, "{done:?}");
        }
        let times: Vec<f64> = out.iter().map(event_time).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");

        let mut one = FixedTimeEngine::new(1, 1, 1000.0);
        one.launch(0.0, 1, &launch(2));
        one.launch(0.0, 2, &launch(2));
        let mut out1 = Vec::new();
        while let Some(t) = one.next_event() {
            one.advance(t, &mut out1);
        }
        let last = out1.iter().map(event_time).fold(0.0, f64::max);
        assert!((last - 4000.0).abs() < 1e-6, "{last}");
    }
}
