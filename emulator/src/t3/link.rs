//! One direction of an inter-GPU link: a FIFO with a bandwidth and a latency (Table 8.1:
//! 150 GB/s bidirectional, 500 ns).
//!
//! A message of `b` bytes offered at `t` starts on the wire when the direction is free,
//! occupies it for `b / bandwidth`, and arrives `latency` after its last byte left. The
//! queue is the backlog of messages waiting for the wire; it is unbounded (a sender's
//! flow control bounds it: a GEMM stage's stores, a DMA engine's descriptors in flight).

use serde::Serialize;

/// Times in this module are DRAM cycles of 1 ns (the T3 HBM clock); fractions of a
/// cycle are carried so back-to-back small messages do not each round up.
pub type Ns = f64;

/// Totals of one link direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LinkStats {
    /// Messages sent.
    pub messages: u64,
    /// Payload bytes sent.
    pub bytes: u64,
    /// Time the wire was busy, ns.
    pub busy_ns: f64,
    /// Largest backlog (bytes offered but not yet on the wire) seen.
    pub max_backlog_bytes: f64,
}

/// One direction of a link.
#[derive(Debug, Clone)]
pub struct LinkDirection {
    bytes_per_ns: f64,
    latency_ns: f64,
    /// When the wire is next free.
    free_at: Ns,
    stats: LinkStats,
}

impl LinkDirection {
    /// A direction of `bytes_per_ns` bandwidth and `latency_ns` latency.
    pub fn new(bytes_per_ns: f64, latency_ns: f64) -> Self {
        Self {
            bytes_per_ns: bytes_per_ns.max(1e-9),
            latency_ns: latency_ns.max(0.0),
            free_at: 0.0,
            stats: LinkStats::default(),
        }
    }

    /// Offers a message of `bytes` at `now`; returns when it arrives at the other end.
    pub fn send(&mut self, now: Ns, bytes: u64) -> Ns {
        let start = self.free_at.max(now);
        let wire = bytes as f64 / self.bytes_per_ns;
        let backlog = (start - now) * self.bytes_per_ns;
        self.free_at = start + wire;
        self.stats.messages += 1;
        self.stats.bytes += bytes;
        self.stats.busy_ns += wire;
        self.stats.max_backlog_bytes = self.stats.max_backlog_bytes.max(backlog);
        self.free_at + self.latency_ns
    }

    /// When the wire is next free.
    pub fn free_at(&self) -> Ns {
        self.free_at
    }

    /// Totals so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_takes_its_wire_time_plus_the_latency_and_queues_behind_the_last() {
        let mut l = LinkDirection::new(75.0, 500.0);
        // 7,500 B at 75 B/ns = 100 ns on the wire.
        assert_eq!(l.send(0.0, 7_500), 600.0);
        // Offered while the first is on the wire: starts at 100.
        assert_eq!(l.send(50.0, 7_500), 700.0);
        // Offered after the wire went idle: starts at once.
        assert_eq!(l.send(1_000.0, 75), 1_501.0);
        let s = l.stats();
        assert_eq!((s.messages, s.bytes), (3, 15_075));
        assert!((s.busy_ns - 201.0).abs() < 1e-9);
        assert!((s.max_backlog_bytes - 50.0 * 75.0).abs() < 1e-9);
    }
}
