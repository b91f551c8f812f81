//! What the firmware's own work costs on the CP's timeline — one module for every
//! subsystem the firmware runs (the GOLDYLOC CP, the NMC sequencer and the T3 programmer).
//!
//! The firmware counts its work ([`CpWork`], [`SequencerWork`]); after each handler the
//! node takes the difference and turns it into CP cycles here. The CP is busy for those
//! cycles: later events for it wait, and the hardware calls the handler made (kernel
//! launches, NMC commands) take effect when it ends.

use nmcp_firmware::cp::{CpCostModel, CpWork};
use nmcp_firmware::nmc::SequencerWork;
use nmcp_firmware::t3::T3Work;
use nmcp_firmware::Firmware;

use crate::sim::ClockDomain;

pub use nmcp_firmware::nmc::SequencerCostModel;
pub use nmcp_firmware::t3::T3CostModel;

/// The firmware's work counters, all subsystems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FirmwareWork {
    /// The GOLDYLOC CP's counters.
    pub cp: CpWork,
    /// The NMC sequencer's counters.
    pub sequencer: SequencerWork,
    /// The T3 programmer's counters.
    pub t3: T3Work,
}

impl FirmwareWork {
    /// The counters of `fw` now.
    pub fn of(fw: &Firmware) -> Self {
        Self {
            cp: fw.cp.work(),
            sequencer: fw.nmc.lamb.work(),
            t3: fw.t3().work(),
        }
    }

    /// Field-wise `self - earlier`: the work of one handler (the sequencer's counters
    /// count up across steps).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            cp: self.cp.since(&earlier.cp),
            sequencer: self.sequencer.since(&earlier.sequencer),
            t3: self.t3.since(&earlier.t3),
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
    /// The T3 programmer's cost.
    pub t3: T3CostModel,
}

impl FirmwareCost {
    /// A cost model that charges nothing (a CP infinitely fast next to the hardware).
    pub fn free() -> Self {
        Self {
            cp: CpCostModel::FREE,
            sequencer: SequencerCostModel::FREE,
            t3: T3CostModel::FREE,
        }
    }

    /// The CP's clock.
    pub fn clock(&self) -> ClockDomain {
        ClockDomain::from_hz(self.cp.clock_hz)
    }

    /// CP cycles of `work`.
    pub fn cycles(&self, work: &FirmwareWork) -> u64 {
        work.cp
            .cycles(&self.cp)
            .saturating_add(work.sequencer.cycles(&self.sequencer))
            .saturating_add(work.t3.cycles(&self.t3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequencer_work_is_charged_per_kind_and_access() {
        let c = FirmwareCost::default();
        let w = FirmwareWork {
            cp: CpWork::default(),
            sequencer: SequencerWork {
                steps: 0,
                handlers: 2,
                idle_handlers: 1,
                macro_commands: 5,
                program_words: 20,
                scalar_writes: 1,
                reductions: 2,
                bytes_read: nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES as u32,
            },
            t3: T3Work::default(),
        };
        let m = SequencerCostModel::default();
        let instr = m.instr_per_handler
            + m.instr_per_idle_handler
            + 5 * m.instr_per_command
            + 20 * m.instr_per_word
            + m.instr_per_scalar_write
            + 2 * m.instr_per_reduction
            + m.instr_per_descriptor;
        assert_eq!(c.cycles(&w), instr + 9 * m.stall_per_access);
        assert_eq!(FirmwareCost::free().cycles(&w), 0);
    }

    #[test]
    fn t3_work_is_charged_per_record_with_its_mmio_stall() {
        let c = FirmwareCost::default();
        let w = FirmwareWork {
            t3: T3Work {
                records: 10,
                events: 9,
            },
            ..FirmwareWork::default()
        };
        let m = T3CostModel::default();
        assert_eq!(c.cycles(&w), 10 * (m.instr_per_record + m.stall_per_record));
        assert_eq!(FirmwareCost::free().cycles(&w), 0);
        let later = T3Work {
            records: 25,
            events: 30,
        };
        assert_eq!(later.since(&w.t3).records, 15);
    }

    #[test]
    fn sequencer_work_counts_up_across_steps() {
        let mut a = FirmwareWork::default();
        a.sequencer.macro_commands = 100;
        let mut b = FirmwareWork::default();
        b.sequencer.macro_commands = 103;
        assert_eq!(b.since(&a).sequencer.macro_commands, 3);
        assert_eq!(a.since(&b).sequencer.macro_commands, 0);
    }
}
