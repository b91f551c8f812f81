//! What the T3 programmer's work costs in CP cycles: [`T3CostModel`] over the
//! programmer's own counters ([`T3Work`]), fitted to the board's `t3_program_gemm` line
//! (docs/decisions/t3-firmware.md, "Cost"; docs/calibration.md).

use super::programmer::T3Work;

/// How T3 programming work turns into CP cycles.
///
/// The board measures one whole job (`t3_per_record`: instructions of `start` and every
/// handler over the records programmed). A job programs one output map per stage, the
/// dispatch start and one region per tracked stage, and handles one `RegionDone` per
/// region, so events are in a fixed proportion to records and the per-record figure
/// carries their share: the model charges records only, one number from one line, not a
/// fit of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct T3CostModel {
    /// Instructions per record programmed, the handlers' event dispatch included.
    pub instr_per_record: u64,
    /// Stall cycles per record on top of its instructions: its MMIO write (the CP
    /// model's 31-cycle device latency less the access's own instruction, as the NMC
    /// sequencer's `stall_per_access`).
    pub stall_per_record: u64,
}

impl T3CostModel {
    /// A model that charges nothing.
    pub const FREE: Self = Self {
        instr_per_record: 0,
        stall_per_record: 0,
    };
}

impl Default for T3CostModel {
    /// The board's `t3_per_record` (`firmware/board/expected/virt.txt`).
    fn default() -> Self {
        Self {
            instr_per_record: 1033,
            stall_per_record: 30,
        }
    }
}

impl T3Work {
    /// Field-wise `self - earlier` (the counters count up across jobs).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            records: self.records.saturating_sub(earlier.records),
            events: self.events.saturating_sub(earlier.events),
        }
    }

    /// Instructions of this work under `m`.
    pub fn instructions(&self, m: &T3CostModel) -> u64 {
        u64::from(self.records).saturating_mul(m.instr_per_record)
    }

    /// CP cycles of this work under `m`: instructions plus the records' MMIO stalls.
    pub fn cycles(&self, m: &T3CostModel) -> u64 {
        self.instructions(m)
            .saturating_add(u64::from(self.records).saturating_mul(m.stall_per_record))
    }
}
