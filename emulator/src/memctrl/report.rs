//! The figures of a run: [`RunReport`] and how [`MemorySystem::report`] gathers them from
//! the controllers' statistics.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::hbm::bank::ALL_COMMAND_KINDS;
use crate::hbm::Cycle;

use super::{Access, ByKindClass, MemorySystem, Occupancy};

/// Figures of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// Preset name.
    pub preset: String,
    /// Address mapping string.
    pub mapping: String,
    /// Page policy.
    pub page_policy: String,
    /// Refresh mode.
    pub refresh: String,
    /// Queue depth per pseudo-channel (each of read and write).
    pub queue_depth: usize,
    /// Pseudo-channels simulated.
    pub pseudo_channels: usize,
    /// Requests served.
    pub requests: u64,
    /// Read requests served.
    pub reads: u64,
    /// Write requests served.
    pub writes: u64,
    /// Near-memory update requests served.
    pub updates: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Cycles from the start to the last data beat.
    pub cycles: Cycle,
    /// Simulated time in ns.
    pub simulated_ns: f64,
    /// Achieved bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// The preset's pin bandwidth, GB/s.
    pub peak_gbps: f64,
    /// Achieved / peak, in percent.
    pub percent_of_peak: f64,
    /// Read latency, cycles: from acceptance into a controller queue (time spent waiting
    /// in front of a full queue is excluded) to the last data beat.
    pub read_latency_mean: f64,
    /// Minimum read latency, cycles.
    pub read_latency_min: u64,
    /// Median read latency, cycles (bucketed, see [`LogHistogram`]).
    pub read_latency_p50: u64,
    /// 99th-percentile read latency, cycles (bucketed).
    pub read_latency_p99: u64,
    /// Maximum read latency, cycles.
    pub read_latency_max: u64,
    /// Queue entries that hit an open row.
    pub row_hits: u64,
    /// Queue entries that found the bank precharged.
    pub row_misses: u64,
    /// Queue entries that found another row open.
    pub row_conflicts: u64,
    /// Commands issued, by mnemonic.
    pub commands: BTreeMap<String, u64>,
    /// Mean read-queue length per pseudo-channel.
    pub read_queue_mean: f64,
    /// Mean write-queue length per pseudo-channel.
    pub write_queue_mean: f64,
    /// Time-weighted read-queue occupancy, summed over pseudo-channels: cycles at each length.
    pub read_queue_histogram: Vec<u64>,
    /// Time-weighted write-queue occupancy, summed over pseudo-channels.
    pub write_queue_histogram: Vec<u64>,
    /// Fraction of time banks had a row open, averaged over all banks.
    pub bank_utilisation: f64,
    /// Fraction of time the data buses carried data.
    pub data_bus_utilisation: f64,
    /// Arbitration policy (of the first controller).
    pub arbiter: String,
    /// Bytes moved by traffic class and access kind: class, then `read`/`write`/`update`.
    pub bytes_by_class: BTreeMap<String, BTreeMap<String, u64>>,
    /// Requests served by traffic class and access kind.
    pub requests_by_class: BTreeMap<String, BTreeMap<String, u64>>,
}

impl MemorySystem {
    /// Figures of the run so far, taking `end` as its last cycle.
    pub fn report(&self, end: Cycle) -> RunReport {
        let p = &self.preset;
        let tck = p.organisation.tck_ns;
        let mut row = (0, 0, 0);
        let mut commands: BTreeMap<String, u64> = BTreeMap::new();
        let mut rq = Occupancy::new(self.cfg.queue_depth);
        let mut wq = Occupancy::new(self.cfg.queue_depth);
        let mut bytes = 0u64;
        let mut bytes_by = ByKindClass::default();
        let (mut open, mut banks, mut bursts) = (0u64, 0u64, 0u64);
        for c in &self.controllers {
            let s = c.stats();
            bytes_by.merge(&s.bytes_by);
            row.0 += s.row_hits;
            row.1 += s.row_misses;
            row.2 += s.row_conflicts;
            bytes += s.bytes_read + s.bytes_written;
            rq.merge(&s.read_queue);
            wq.merge(&s.write_queue);
            let counts = c.pseudo_channel().command_counts();
            for k in ALL_COMMAND_KINDS {
                let n = counts[k as usize];
                if n > 0 {
                    *commands.entry(k.mnemonic().to_string()).or_default() += n;
                }
            }
            for o in c.pseudo_channel().bank_open_cycles(end) {
                open += o;
                banks += 1;
            }
            bursts += s.bytes_read / u64::from(p.organisation.bytes_per_column)
                + s.bytes_written / u64::from(p.organisation.bytes_per_column);
        }
        let simulated_ns = end as f64 * tck;
        let reads = self.finished.kind_total(Access::Read.index());
        let writes = self.finished.kind_total(Access::Write.index());
        let updates = self.finished.kind_total(2);
        let bandwidth = if end == 0 {
            0.0
        } else {
            bytes as f64 / simulated_ns
        };
        let peak = p.peak_gbps();
        let n = self.controllers.len().max(1) as f64;
        let span = (end.max(1) as f64) * n;
        RunReport {
            preset: p.name.clone(),
            mapping: self.mapping.text().to_string(),
            page_policy: format!("{:?}", self.cfg.page_policy).to_lowercase(),
            refresh: match self.cfg.refresh {
                crate::hbm::config::RefreshMode::AllBank => "all-bank".into(),
                crate::hbm::config::RefreshMode::PerBank => "per-bank".into(),
                crate::hbm::config::RefreshMode::Off => "off".into(),
            },
            queue_depth: self.cfg.queue_depth,
            pseudo_channels: self.controllers.len(),
            requests: reads + writes + updates,
            reads,
            writes,
            updates,
            bytes,
            cycles: end,
            simulated_ns,
            bandwidth_gbps: bandwidth,
            peak_gbps: peak,
            percent_of_peak: if peak > 0.0 {
                100.0 * bandwidth / peak
            } else {
                0.0
            },
            read_latency_mean: self.read_latency.mean(),
            read_latency_min: self.read_latency.min(),
            read_latency_p50: self.read_latency.quantile(0.5),
            read_latency_p99: self.read_latency.quantile(0.99),
            read_latency_max: self.read_latency.max(),
            row_hits: row.0,
            row_misses: row.1,
            row_conflicts: row.2,
            commands,
            read_queue_mean: rq.mean(),
            write_queue_mean: wq.mean(),
            read_queue_histogram: rq.cycles,
            write_queue_histogram: wq.cycles,
            bank_utilisation: if banks == 0 {
                0.0
            } else {
                open as f64 / (banks as f64 * end.max(1) as f64)
            },
            data_bus_utilisation: (bursts * u64::from(p.timing.bl)) as f64 / span,
            arbiter: self
                .controllers
                .first()
                .map_or("fr-fcfs", |c| c.arbiter().name())
                .to_string(),
            bytes_by_class: bytes_by.to_map(),
            requests_by_class: self.finished.to_map(),
        }
    }
}
