//! What the communication does to the producer's reads on one GPU: the read latency of
//! its main-loop phases, the time its workgroups stall on them, the controller queues'
//! occupancy by traffic class while it runs, and how often a compute request found its
//! queue full with communication entries in it. A diagnostic: nothing reads it back
//! into the model.

use serde::{Deserialize, Serialize};

use crate::hbm::Cycle;
use crate::memctrl::TrafficClass;

/// Upper bounds (ns) of the read-latency histogram's buckets; the last bucket holds the
/// rest. One producer iteration computes in about 400 ns (`docs/decisions/t3.md`), so
/// the buckets straddle the prefetch slack.
pub const LATENCY_BOUNDS_NS: [u64; 6] = [200, 400, 800, 1_600, 3_200, 6_400];

/// Counters of one GPU (cycles of the HBM clock; 1 ns at Table 8.1's 1 GHz).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ContentionCounters {
    phases: u64,
    latency_sum: u64,
    latency_hist: [u64; LATENCY_BOUNDS_NS.len() + 1],
    stall_sum: u64,
    stalled_phases: u64,
    samples: u64,
    read_q: [u64; 2],
    write_q: [u64; 2],
    compute_refused: u64,
    refused_comm_entries: u64,
    refused_with_comm: u64,
}

impl ContentionCounters {
    /// A producer phase's reads, issued at `start`, came back at `back`; its compute
    /// ended at `compute_done` (`None`: still computing, so no stall).
    pub(super) fn phase_reads(&mut self, start: Cycle, back: Cycle, compute_done: Option<Cycle>) {
        let lat = back.saturating_sub(start);
        self.phases += 1;
        self.latency_sum += lat;
        let b = LATENCY_BOUNDS_NS
            .iter()
            .position(|&u| lat < u)
            .unwrap_or(LATENCY_BOUNDS_NS.len());
        if let Some(h) = self.latency_hist.get_mut(b) {
            *h += 1;
        }
        if let Some(c) = compute_done {
            self.stall_sum += back.saturating_sub(c);
            self.stalled_phases += 1;
        }
    }

    /// One sample (a slice while the producer runs) of the entries the GPU's controllers
    /// hold: read and write queues, (compute, communication) each.
    pub(super) fn sample(&mut self, reads: [u64; 2], writes: [u64; 2]) {
        self.samples += 1;
        for k in 0..2 {
            self.read_q[k] += reads[k];
            self.write_q[k] += writes[k];
        }
    }

    /// A compute request was refused by a full queue holding `comm` communication entries.
    pub(super) fn compute_refused(&mut self, comm: usize) {
        self.compute_refused += 1;
        self.refused_comm_entries += comm as u64;
        if comm > 0 {
            self.refused_with_comm += 1;
        }
    }

    /// The figures, with `controllers` per GPU and the mean (requests, producer reads) in
    /// flight per pseudo-channel.
    pub(super) fn report(&self, controllers: usize, in_flight: (f64, f64)) -> Contention {
        let per = |v: u64| v as f64 / (self.samples.max(1) * controllers.max(1) as u64) as f64;
        Contention {
            requests_in_flight: in_flight.0,
            reads_in_flight: in_flight.1,
            phases: self.phases,
            read_latency_ns_mean: self.latency_sum as f64 / self.phases.max(1) as f64,
            read_latency_histogram: self.latency_hist,
            stall_ns: self.stall_sum,
            stalled_phases: self.stalled_phases,
            read_queue_compute: per(self.read_q[0]),
            read_queue_communication: per(self.read_q[1]),
            write_queue_compute: per(self.write_q[0]),
            write_queue_communication: per(self.write_q[1]),
            compute_refusals: self.compute_refused,
            compute_refusals_with_communication: self.refused_with_comm,
            communication_entries_at_refusal: self.refused_comm_entries as f64
                / self.compute_refused.max(1) as f64,
        }
    }
}

/// The index (0 compute, 1 communication) a class is counted under; host traffic (none
/// in T3 runs) counts as compute.
pub(super) fn class_slot(c: TrafficClass) -> usize {
    usize::from(c == TrafficClass::Communication)
}

/// Per-class queue entries (in [`TrafficClass::ALL`] order) folded into (compute,
/// communication) by [`class_slot`].
pub(super) fn by_slot(per_class: &[usize]) -> [usize; 2] {
    let mut out = [0usize; 2];
    for (class, n) in TrafficClass::ALL.iter().zip(per_class) {
        out[class_slot(*class)] += n;
    }
    out
}

/// What the communication did to one GPU's producer (`nmcp t3 --json`, field
/// `contention` of the fused and isolated rows).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// Mean requests in flight per pseudo-channel while the producer runs (every class).
    pub requests_in_flight: f64,
    /// The same, the producer's reads alone (the isolated GEMM's picks MCA's threshold).
    pub reads_in_flight: f64,
    /// Producer main-loop phases that read DRAM.
    pub phases: u64,
    /// Mean time from a phase's start (its reads issued) to its last read back, ns.
    pub read_latency_ns_mean: f64,
    /// Phases by read latency, buckets bounded by [`LATENCY_BOUNDS_NS`] (the last: the
    /// rest).
    pub read_latency_histogram: [u64; LATENCY_BOUNDS_NS.len() + 1],
    /// Time workgroups waited for reads after their phase's compute ended, summed, ns.
    pub stall_ns: u64,
    /// Phases that waited so.
    pub stalled_phases: u64,
    /// Mean read-queue entries per controller while the producer runs, compute class.
    pub read_queue_compute: f64,
    /// The same, communication class.
    pub read_queue_communication: f64,
    /// Mean write-queue entries per controller while the producer runs, compute class.
    pub write_queue_compute: f64,
    /// The same, communication class.
    pub write_queue_communication: f64,
    /// Times a compute request met a full controller queue at ingress (once per lane and
    /// fill).
    pub compute_refusals: u64,
    /// Of those, the times the full queue held communication entries.
    pub compute_refusals_with_communication: u64,
    /// Mean communication entries in the full queue at a refusal.
    pub communication_entries_at_refusal: f64,
}
