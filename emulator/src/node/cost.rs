//! What the firmware's own work costs on the CP's timeline — one module for every
//! subsystem the firmware runs (the GOLDYLOC CP and the NMC sequencer alike).
//!
//! The firmware counts its work ([`CpWork`], [`SequencerWork`]); after each handler the
//! node takes the difference and turns it into CP cycles here. The CP is busy for those
//! cycles: later events for it wait, and the hardware calls the handler made (kernel
//! launches, NMC commands) take effect when it ends.

use nmcp_firmware::cp::{CpCostModel, CpWork};
use nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES;
use nmcp_firmware::nmc::SequencerWork;
use nmcp_firmware::Firmware;

use crate::sim::ClockDomain;

/// How the NMC sequencer's work turns into CP cycles: every device-memory access (a
/// tensor descriptor read) and every NMC platform call (one uncached MMIO write of a
/// macro-command, scalar or reduction request) waits for the CP's memory latency; the
/// sequencer does little arithmetic next to that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SequencerCostModel {
    /// Cycles per device-memory access or MMIO write.
    pub access_cycles: u64,
}

impl Default for SequencerCostModel {
    /// The CP model's 31-cycle memory latency (dissertation 7.4.4.2), so the sequencer
    /// and the CP are charged alike.
    fn default() -> Self {
        Self {
            access_cycles: CpCostModel::default().mem_latency_cycles,
        }
    }
}

/// The firmware's work counters, all subsystems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FirmwareWork {
    /// The GOLDYLOC CP's counters.
    pub cp: CpWork,
    /// The NMC sequencer's counters.
    pub sequencer: SequencerWork,
}

impl FirmwareWork {
    /// The counters of `fw` now.
    pub fn of(fw: &Firmware) -> Self {
        Self {
            cp: fw.cp.work(),
            sequencer: fw.nmc.lamb.work(),
        }
    }

    /// Field-wise `self - earlier`: the work of one handler. The sequencer's counters
    /// restart with every LAMB step, so a smaller value means a new step began.
    pub fn since(&self, earlier: &Self) -> Self {
        let d = |now: u32, then: u32| if now >= then { now - then } else { now };
        let (s, e) = (&self.sequencer, &earlier.sequencer);
        Self {
            cp: self.cp.since(&earlier.cp),
            sequencer: SequencerWork {
                macro_commands: d(s.macro_commands, e.macro_commands),
                scalar_writes: d(s.scalar_writes, e.scalar_writes),
                reductions: d(s.reductions, e.reductions),
                bytes_read: d(s.bytes_read, e.bytes_read),
            },
        }
    }
}

/// The cost of every firmware subsystem on one CP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FirmwareCost {
    /// The CP's clock and its cost per memory access and per operation.
    pub cp: CpCostModel,
    /// The NMC sequencer's cost.
    pub sequencer: SequencerCostModel,
}

impl FirmwareCost {
    /// A cost model that charges nothing (a CP infinitely fast next to the hardware).
    pub fn free() -> Self {
        Self {
            cp: CpCostModel::FREE,
            sequencer: SequencerCostModel { access_cycles: 0 },
        }
    }

    /// The CP's clock.
    pub fn clock(&self) -> ClockDomain {
        ClockDomain::from_hz(self.cp.clock_hz)
    }

    /// CP cycles of `work`.
    pub fn cycles(&self, work: &FirmwareWork) -> u64 {
        let s = &work.sequencer;
        let accesses = u64::from(s.bytes_read) / TENSOR_DESC_BYTES as u64
            + u64::from(s.macro_commands)
            + u64::from(s.scalar_writes)
            + u64::from(s.reductions);
        work.cp
            .cycles(&self.cp)
            .saturating_add(self.sequencer.access_cycles.saturating_mul(accesses))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencer_work_is_charged_per_access() {
        let c = FirmwareCost::default();
        let w = FirmwareWork {
            cp: CpWork::default(),
            sequencer: SequencerWork {
                macro_commands: 5,
                scalar_writes: 1,
                reductions: 2,
                bytes_read: TENSOR_DESC_BYTES as u32,
            },
        };
        assert_eq!(c.cycles(&w), 31 * 9);
        assert_eq!(FirmwareCost::free().cycles(&w), 0);
    }

    #[test]
    fn a_new_step_restarts_the_sequencer_counters() {
        let mut a = FirmwareWork::default();
        a.sequencer.macro_commands = 100;
        let mut b = FirmwareWork::default();
        b.sequencer.macro_commands = 3;
        assert_eq!(b.since(&a).sequencer.macro_commands, 3);
        assert_eq!(a.since(&b).sequencer.macro_commands, 97);
    }
}
