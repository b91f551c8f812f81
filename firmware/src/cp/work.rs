//! What the CP's firmware did, so a platform can charge its time.
//!
//! The emulator does not assume a fixed cost per decision: it charges the work the
//! handler actually performed, with the dissertation's CP model (1.5 GHz, 31-cycle memory
//! latency) as the default. A board binary measures the same handlers with `mcycle`.

/// Counters of the firmware CP's work. Monotonic; take differences with [`CpWork::since`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpWork {
    /// Device-memory reads and writes (one per `DeviceMemory` call: a burst of at most
    /// one packet or one extension record).
    pub mem_accesses: u64,
    /// Bytes read from device memory.
    pub bytes_read: u64,
    /// Bytes written to device memory.
    pub bytes_written: u64,
    /// Queue heads looked at (one per active queue per scan).
    pub queue_visits: u64,
    /// Packets decoded and classified.
    pub packets_inspected: u64,
    /// Predictor evaluations (one per distinct GEMM size in a decision).
    pub predictions: u64,
    /// Multiply-accumulates of the predictor (normalisation and logits).
    pub predictor_macs: u64,
    /// Concurrency decisions taken (two or more GEMMs at the heads).
    pub decisions: u64,
    /// Kernels dispatched.
    pub dispatches: u64,
    /// Packets completed without a dispatch (rejected, or resolved barriers).
    pub completions: u64,
}

/// Operations the firmware performs to classify one packet (decode and validate);
/// a count, not a calibration: each field check is one compare-and-branch.
pub const OPS_PER_PACKET: u64 = 24;

impl CpWork {
    /// Field-wise `self - earlier` (saturating), the work of one handler.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            mem_accesses: self.mem_accesses.saturating_sub(earlier.mem_accesses),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
            queue_visits: self.queue_visits.saturating_sub(earlier.queue_visits),
            packets_inspected: self
                .packets_inspected
                .saturating_sub(earlier.packets_inspected),
            predictions: self.predictions.saturating_sub(earlier.predictions),
            predictor_macs: self.predictor_macs.saturating_sub(earlier.predictor_macs),
            decisions: self.decisions.saturating_sub(earlier.decisions),
            dispatches: self.dispatches.saturating_sub(earlier.dispatches),
            completions: self.completions.saturating_sub(earlier.completions),
        }
    }

    /// Non-memory operations: predictor MACs plus [`OPS_PER_PACKET`] per packet inspected.
    pub fn ops(&self) -> u64 {
        self.predictor_macs
            .saturating_add(self.packets_inspected.saturating_mul(OPS_PER_PACKET))
    }

    /// CP cycles this work takes under `model`:
    /// `mem_latency_cycles x mem_accesses + cycles_per_op x ops`.
    pub fn cycles(&self, model: &CpCostModel) -> u64 {
        model
            .mem_latency_cycles
            .saturating_mul(self.mem_accesses)
            .saturating_add(model.cycles_per_op.saturating_mul(self.ops()))
    }
}

/// How CP work turns into time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpCostModel {
    /// CP clock in Hz.
    pub clock_hz: u64,
    /// Cycles per device-memory access (the CP does not overlap its accesses).
    pub mem_latency_cycles: u64,
    /// Cycles per non-memory operation.
    pub cycles_per_op: u64,
}

impl Default for CpCostModel {
    /// Dissertation 7.4.4.2: a 1.5 GHz CP with 31-cycle memory latency; one cycle per op
    /// (a single-issue in-order core).
    fn default() -> Self {
        Self {
            clock_hz: 1_500_000_000,
            mem_latency_cycles: 31,
            cycles_per_op: 1,
        }
    }
}
