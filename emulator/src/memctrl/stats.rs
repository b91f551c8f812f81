//! Statistics of a run: per-controller counters, a time-weighted queue-occupancy
//! histogram and a log-linear latency histogram.

use std::collections::BTreeMap;

use crate::hbm::Cycle;

use super::request::{TrafficClass, ACCESS_KINDS};

/// Access-kind names in counter order.
pub const ACCESS_NAMES: [&str; ACCESS_KINDS] = ["read", "write", "update"];

/// Counters by access kind (read 0, write 1, update 2) and traffic class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ByKindClass {
    /// Padded to 4 x 4 so a two-bit index needs no bounds check on the hot path.
    counts: [[u64; 4]; 4],
}

impl ByKindClass {
    /// Adds `n` to (kind index, class index); both are taken modulo 4.
    #[inline]
    pub fn add(&mut self, kind: usize, class: usize, n: u64) {
        self.counts[kind & 3][class & 3] += n;
    }

    /// The counter of (kind index, class).
    pub fn get(&self, kind: usize, class: TrafficClass) -> u64 {
        self.counts[kind & 3][class.index() & 3]
    }

    /// Sum over kinds for one class.
    pub fn class_total(&self, class: TrafficClass) -> u64 {
        (0..ACCESS_KINDS).map(|k| self.get(k, class)).sum()
    }

    /// Sum over classes for one kind index.
    pub fn kind_total(&self, kind: usize) -> u64 {
        TrafficClass::ALL.iter().map(|&c| self.get(kind, c)).sum()
    }

    /// Adds another set of counters.
    pub fn merge(&mut self, o: &ByKindClass) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
    }

    /// As nested maps for reports: class name to kind name to count (every class and kind).
    pub fn to_map(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        TrafficClass::ALL
            .iter()
            .map(|&c| {
                let kinds = ACCESS_NAMES
                    .iter()
                    .enumerate()
                    .map(|(k, name)| (name.to_string(), self.get(k, c)))
                    .collect();
                (c.name().to_string(), kinds)
            })
            .collect()
    }
}

/// How a request found its bank when the controller first looked at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[repr(u8)]
pub enum RowClass {
    /// The row was open: column command only.
    #[default]
    Hit,
    /// The bank was precharged: ACT then column command.
    Miss,
    /// Another row was open: PRE, ACT, then column command.
    Conflict,
}

/// Sub-buckets per power of two of [`LogHistogram`]; the relative error of a quantile is at
/// most 1 / this.
pub const LATENCY_SUB_BUCKETS: u64 = 32;
const SUB_BITS: u32 = LATENCY_SUB_BUCKETS.trailing_zeros();

/// Values below `2 x LATENCY_SUB_BUCKETS` are counted exactly; above, each power of two is
/// split into [`LATENCY_SUB_BUCKETS`] buckets (an HdrHistogram-like layout in a few lines).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct LogHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl LogHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        LogHistogram {
            buckets: vec![0; 64 * LATENCY_SUB_BUCKETS as usize],
            min: u64::MAX,
            ..Default::default()
        }
    }

    fn index(v: u64) -> usize {
        if v < 2 * LATENCY_SUB_BUCKETS {
            return v as usize;
        }
        let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
        let shift = e - SUB_BITS;
        ((u64::from(shift) + 1) * LATENCY_SUB_BUCKETS + ((v >> shift) - LATENCY_SUB_BUCKETS))
            as usize
    }

    fn upper(index: usize) -> u64 {
        let i = index as u64;
        if i < 2 * LATENCY_SUB_BUCKETS {
            return i;
        }
        let shift = i / LATENCY_SUB_BUCKETS - 1;
        let sub = i % LATENCY_SUB_BUCKETS + LATENCY_SUB_BUCKETS;
        ((sub + 1) << shift) - 1
    }

    /// Whether it has the bucket layout [`LogHistogram::new`] gives (for a restored one).
    pub fn is_well_formed(&self) -> bool {
        self.buckets.len() == 64 * LATENCY_SUB_BUCKETS as usize
    }

    /// Adds one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        if let Some(b) = self.buckets.get_mut(Self::index(v)) {
            *b += 1;
        }
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact mean (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// Exact minimum (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// Exact maximum.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The smallest bucket bound below which a fraction `q` of values lie, clamped to the
    /// exact maximum (exact below 64, within 1/32 above).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::upper(i).min(self.max);
            }
        }
        self.max
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &LogHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }
}

/// Time-weighted histogram of a queue's length: `cycles[n]` is how long it held n entries.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Occupancy {
    /// Cycles spent at each length.
    pub cycles: Vec<u64>,
    #[serde(skip)]
    since: Cycle,
}

impl Occupancy {
    /// For a queue of `depth` entries.
    pub fn new(depth: usize) -> Self {
        Occupancy {
            cycles: vec![0; depth + 1],
            since: 0,
        }
    }

    /// The cycle of the last change (not in the serialised form: a checkpoint saves it
    /// beside, see [`Occupancy::set_since`]).
    pub fn since(&self) -> Cycle {
        self.since
    }

    /// Sets the cycle of the last change (restoring a checkpoint).
    pub fn set_since(&mut self, since: Cycle) {
        self.since = since;
    }

    /// The queue had `len` entries from the last change until `now`.
    #[inline]
    pub fn record(&mut self, now: Cycle, len: usize) {
        if let Some(c) = self.cycles.get_mut(len) {
            *c += now.saturating_sub(self.since);
        }
        self.since = now;
    }

    /// Mean length over the recorded time.
    pub fn mean(&self) -> f64 {
        let total: u64 = self.cycles.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let weighted: f64 = self
            .cycles
            .iter()
            .enumerate()
            .map(|(n, c)| n as f64 * *c as f64)
            .sum();
        weighted / total as f64
    }

    /// Adds another histogram (lengths beyond this one's depth are clamped).
    pub fn merge(&mut self, other: &Occupancy) {
        if self.cycles.len() < other.cycles.len() {
            self.cycles.resize(other.cycles.len(), 0);
        }
        for (a, b) in self.cycles.iter_mut().zip(&other.cycles) {
            *a += b;
        }
    }
}

/// Counters of one controller.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ControllerStats {
    /// Read queue entries served (a 64-byte request in one row is one entry).
    pub reads: u64,
    /// Write queue entries served.
    pub writes: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written (writes and updates).
    pub bytes_written: u64,
    /// Bytes moved, by access kind and traffic class.
    pub bytes_by: ByKindClass,
    /// Queue entries served, by access kind and traffic class.
    pub parts_by: ByKindClass,
    /// Entries that found their row open.
    pub row_hits: u64,
    /// Entries that found their bank precharged.
    pub row_misses: u64,
    /// Entries that found another row open.
    pub row_conflicts: u64,
    /// Read queue length over time.
    pub read_queue: Occupancy,
    /// Write queue length over time.
    pub write_queue: Occupancy,
}

impl ControllerStats {
    /// Zeroed counters for queues of `depth`.
    pub fn new(depth: usize) -> Self {
        ControllerStats {
            reads: 0,
            writes: 0,
            bytes_read: 0,
            bytes_written: 0,
            bytes_by: ByKindClass::default(),
            parts_by: ByKindClass::default(),
            row_hits: 0,
            row_misses: 0,
            row_conflicts: 0,
            read_queue: Occupancy::new(depth),
            write_queue: Occupancy::new(depth),
        }
    }

    /// Counts one served entry by how it found its row.
    #[inline]
    pub fn classify(&mut self, class: RowClass) {
        match class {
            RowClass::Hit => self.row_hits += 1,
            RowClass::Miss => self.row_misses += 1,
            RowClass::Conflict => self.row_conflicts += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_exact_below_64_and_close_above() {
        let mut h = LogHistogram::new();
        for v in 0..1000u64 {
            h.record(v);
        }
        assert_eq!(h.quantile(0.05), 49);
        let p99 = h.quantile(0.99);
        assert!((989..=989 + 989 / 32 + 1).contains(&p99), "{p99}");
        assert_eq!(h.max(), 999);
        assert!((h.mean() - 499.5).abs() < 1e-9);
        for v in [64u64, 65, 127, 128, 1 << 20, u64::MAX / 2] {
            let i = LogHistogram::index(v);
            assert!(
                LogHistogram::upper(i) >= v && LogHistogram::upper(i) - v <= v / 32,
                "{v}"
            );
        }
    }
}
