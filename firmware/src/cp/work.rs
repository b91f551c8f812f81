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
    /// Event handlers run.
    pub handlers: u64,
    /// Of `queue_visits`, those settled word by word on mapped memory (the fast path).
    pub mapped_visits: u64,
    /// Packets that took the full decode (the general path): everything but a GEMM of a
    /// known shape on mapped memory.
    pub packets_decoded: u64,
    /// Of `dispatches`, those of the steady lane on mapped memory (each member checked,
    /// patched, booked and logged in the one pass that reads its packet).
    pub mapped_dispatches: u64,
}

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
            handlers: self.handlers.saturating_sub(earlier.handlers),
            mapped_visits: self.mapped_visits.saturating_sub(earlier.mapped_visits),
            packets_decoded: self.packets_decoded.saturating_sub(earlier.packets_decoded),
            mapped_dispatches: self
                .mapped_dispatches
                .saturating_sub(earlier.mapped_dispatches),
        }
    }

    /// rv32imac instructions this work retires under `model` (docs/calibration.md):
    /// `handler x handlers + decision x decisions + mapped_visit x mapped_visits + visit
    /// x (queue_visits - mapped_visits) + mapped_dispatch x mapped_dispatches + dispatch
    /// x (dispatches - mapped_dispatches) + shape x predictions + decode x
    /// (packets_decoded - predictions) + completion x completions`.
    pub fn instructions(&self, model: &CpCostModel) -> u64 {
        let general_visits = self.queue_visits.saturating_sub(self.mapped_visits);
        let general_dispatches = self.dispatches.saturating_sub(self.mapped_dispatches);
        let other_decodes = self.packets_decoded.saturating_sub(self.predictions);
        [
            (model.instr_per_handler, self.handlers),
            (model.instr_per_decision, self.decisions),
            (model.instr_per_mapped_visit, self.mapped_visits),
            (model.instr_per_visit, general_visits),
            (model.instr_per_mapped_dispatch, self.mapped_dispatches),
            (model.instr_per_dispatch, general_dispatches),
            (model.instr_per_shape, self.predictions),
            (model.instr_per_decode, other_decodes),
            (model.instr_per_completion, self.completions),
        ]
        .iter()
        .fold(0u64, |acc, &(per, n)| {
            acc.saturating_add(per.saturating_mul(n))
        })
    }

    /// CP cycles this work takes under `model`: one cycle per instruction (an in-order,
    /// single-issue core) plus `mem_latency_cycles - 1` stall cycles per device-memory
    /// access (the access's own instruction is already counted).
    pub fn cycles(&self, model: &CpCostModel) -> u64 {
        self.instructions(model).saturating_add(
            model
                .mem_latency_cycles
                .saturating_sub(1)
                .saturating_mul(self.mem_accesses),
        )
    }
}

/// How CP work turns into time: instructions per operation kind, fitted to the board's
/// measurements (`firmware/board/expected/virt.txt`, QEMU `-icount shift=0`; the fit and
/// its residuals are in docs/calibration.md), at the dissertation's CP clock and memory
/// latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpCostModel {
    /// CP clock in Hz.
    pub clock_hz: u64,
    /// Cycles per device-memory access (the CP does not overlap its accesses).
    pub mem_latency_cycles: u64,
    /// Instructions per event handler (entry, the scan's set-up, the masks).
    pub instr_per_handler: u64,
    /// Instructions per GEMM concurrency decision on top of its handler (the
    /// candidates' masks, the decision, the group's set-up and the dispatcher call).
    pub instr_per_decision: u64,
    /// Instructions per queue head settled on the fast path (mapped memory).
    pub instr_per_mapped_visit: u64,
    /// Instructions per queue head looked at on the general path.
    pub instr_per_visit: u64,
    /// Instructions per dispatch of the steady lane on mapped memory (the key, kernel
    /// object and signal checks, the patch, the bookkeeping, the log and the member's
    /// share of the dispatcher call).
    pub instr_per_mapped_dispatch: u64,
    /// Instructions per other dispatch (the general path's gather and checks, the
    /// dispatcher call, the bookkeeping and the log), fitted with the board's steady
    /// decision on the general path (`cp_decision_32q_general`).
    pub instr_per_dispatch: u64,
    /// Instructions per GEMM shape learnt (its packet's full decode, the record's decode
    /// and checks, features and the prediction).
    pub instr_per_shape: u64,
    /// Instructions per other full packet decode (not fitted: the board's
    /// `part_aql_decode`, decode without the field checks, a lower bound).
    pub instr_per_decode: u64,
    /// Instructions per packet completed without a dispatch (not measured on the board:
    /// charged as a dispatch).
    pub instr_per_completion: u64,
}

impl CpCostModel {
    /// Cycles of one dispatch: its instructions, the four word reads of the checks made
    /// at dispatch (kernel object, completion signal) and the two word writes of the
    /// kernel-object patch. A decision's dispatches follow one another this far apart.
    pub fn dispatch_cycles(&self) -> u64 {
        CpWork {
            dispatches: 1,
            mem_accesses: 6,
            ..CpWork::default()
        }
        .cycles(self)
    }

    /// A model that charges nothing (a CP infinitely fast next to the hardware).
    pub const FREE: Self = Self {
        clock_hz: 1_500_000_000,
        mem_latency_cycles: 0,
        instr_per_handler: 0,
        instr_per_decision: 0,
        instr_per_mapped_visit: 0,
        instr_per_visit: 0,
        instr_per_mapped_dispatch: 0,
        instr_per_dispatch: 0,
        instr_per_shape: 0,
        instr_per_decode: 0,
        instr_per_completion: 0,
    };
}

impl Default for CpCostModel {
    /// Dissertation 7.4.4.2: a 1.5 GHz CP with 31-cycle memory latency; the per-kind
    /// instruction counts fitted to the board (docs/calibration.md).
    fn default() -> Self {
        Self {
            clock_hz: 1_500_000_000,
            mem_latency_cycles: 31,
            instr_per_handler: 527,
            instr_per_decision: 2,
            instr_per_mapped_visit: 28,
            instr_per_visit: 406,
            instr_per_mapped_dispatch: 60,
            instr_per_dispatch: 191,
            instr_per_shape: 11_605,
            instr_per_decode: 270,
            instr_per_completion: 191,
        }
    }
}
