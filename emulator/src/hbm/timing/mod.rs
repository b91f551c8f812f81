//! Timing state of one pseudo-channel: which rows are open and the earliest cycle each
//! command may issue.
//!
//! Ramulator-style: every gate is a "next allowed" counter at the level it applies to
//! (bank, bank group, pseudo-channel, command bus), raised when a command issues. The
//! earliest cycle of a command is then the maximum of three to five counters, which keeps
//! the scheduler's hot path to a handful of loads. Each counter remembers which gate last
//! raised it, so an illegal command is rejected with the constraint's name.
//!
//! Everything that issues DRAM commands on a pseudo-channel — the memory controller, the
//! refresh logic, and the NMC engine — goes through the same [`PseudoChannel`].
//!
//! This module holds the channel's state (banks, bank groups, the shared gates and their
//! running maxima) and its queries; the gates and errors are in [`gate`], the
//! subarray-level state in [`masa`], the earliest-cycle computation in [`earliest`], the
//! issue path in [`issue`], and a whole channel's shared command buses in [`shared`].

mod earliest;
mod gate;
mod issue;
mod masa;
mod shared;

pub use gate::{Gate, RowState, TimingError};
pub use shared::SharedChannel;

use super::bank::{BankId, COMMAND_KINDS};
use super::config::{HbmPreset, TimingCycles};
use super::power_state::PowerState;
use super::Cycle;
use gate::{no_gate, Gated};
use masa::Masa;

/// The row value [`PseudoChannel::open_row_raw`] returns for a precharged bank.
pub const CLOSED_ROW: u32 = u32::MAX;
const NO_ROW: u32 = CLOSED_ROW;
const MAX_BANKS: usize = crate::hbm::config::MAX_BANKS_PER_PSEUDO_CHANNEL as usize;

/// Serde for the open-row array (serde derives arrays up to 32 elements only): a sequence
/// of exactly `MAX_BANKS` rows.
mod open_rows_serde {
    use super::MAX_BANKS;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(rows: &[u32; MAX_BANKS], s: S) -> Result<S::Ok, S::Error> {
        rows.as_slice().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<[u32; MAX_BANKS], D::Error> {
        let v = Vec::<u32>::deserialize(d)?;
        let n = v.len();
        v.try_into()
            .map_err(|_| serde::de::Error::custom(format!("{n} open rows, expected {MAX_BANKS}")))
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Bank {
    open_row: u32,
    act: Gated,
    pre: Gated,
    rd: Gated,
    wr: Gated,
    opened_at: Cycle,
    open_cycles: u64,
}

impl Bank {
    fn new() -> Self {
        Bank {
            open_row: NO_ROW,
            act: Gated::ZERO,
            pre: Gated::ZERO,
            rd: Gated::ZERO,
            wr: Gated::ZERO,
            opened_at: 0,
            open_cycles: 0,
        }
    }

    fn state(&self) -> RowState {
        if self.open_row == NO_ROW {
            RowState::Closed
        } else {
            RowState::Open(self.open_row)
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Group {
    act: Gated,
    rd: Gated,
    wr: Gated,
}

/// The maximum, over every bank (or every bank group), of its ACT, PRE, RD and WR gates:
/// what an all-bank command waits for.
///
/// Gates only ever rise, so the maximum over the units equals the largest value any unit
/// was ever raised to, and a running maximum updated at each raise is exact. It turns
/// the all-bank commands' earliest cycle (the NMC engine's hot path: one per column
/// command) from a walk over every bank into a handful of loads.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct GateMax {
    act: Cycle,
    /// Banks only (bank groups have no PRE gate); excludes the shared `all_pre`.
    pre: Cycle,
    rd: Cycle,
    wr: Cycle,
}

/// Timing and row state of one pseudo-channel.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PseudoChannel {
    t: TimingCycles,
    banks_per_group: usize,
    /// log2(banks_per_group): presets guarantee a power of two, and a shift keeps integer
    /// division out of the hot path.
    group_shift: u32,
    banks: Vec<Bank>,
    groups: Vec<Group>,
    act: Gated,
    rd: Gated,
    wr: Gated,
    row_bus: Gated,
    col_bus: Gated,
    /// Cycles at which the last four ACTs leave the tFAW window, oldest at `faw_next`.
    faw: [Cycle; 4],
    faw_next: usize,
    open_banks: u32,
    /// Copy of each bank's open row, packed so the scheduler's queue scans touch one
    /// cache line instead of one per bank.
    #[serde(with = "open_rows_serde")]
    open_rows: [u32; MAX_BANKS],
    /// PRE gate shared by every bank: all-bank column commands raise it instead of each
    /// bank's own (a bank's PRE gate is the later of the two), so the engine's hot path
    /// does not walk the banks.
    all_pre: Gated,
    /// Running maxima of the bank-level gates, for all-bank commands.
    bank_max: GateMax,
    /// Running maxima of the bank-group-level gates, for all-bank commands.
    group_max: GateMax,
    counts: [u64; COMMAND_KINDS],
    /// Subarray state, when the preset has more than one subarray per bank.
    #[serde(default)]
    masa: Option<Masa>,
    /// The end of the refresh in progress (REF or AB-SA-REF): no refresh starts before it.
    #[serde(default = "no_gate")]
    refresh: Gated,
    /// Active-standby time and bank precharges, for the energy model.
    #[serde(default)]
    power: PowerState,
}

impl PseudoChannel {
    /// A pseudo-channel with every bank precharged and no history.
    pub fn new(preset: &HbmPreset) -> Self {
        let o = &preset.organisation;
        let groups = o.bank_groups as usize;
        let per = o.banks_per_group as usize;
        PseudoChannel {
            t: TimingCycles::from(&preset.timing),
            banks_per_group: per,
            group_shift: per.trailing_zeros(),
            banks: vec![Bank::new(); groups * per],
            groups: vec![
                Group {
                    act: Gated::ZERO,
                    rd: Gated::ZERO,
                    wr: Gated::ZERO
                };
                groups
            ],
            act: Gated::ZERO,
            rd: Gated::ZERO,
            wr: Gated::ZERO,
            row_bus: Gated::ZERO,
            col_bus: Gated::ZERO,
            faw: [0; 4],
            faw_next: 0,
            open_banks: 0,
            open_rows: [NO_ROW; MAX_BANKS],
            all_pre: Gated::ZERO,
            bank_max: GateMax::default(),
            group_max: GateMax::default(),
            counts: [0; COMMAND_KINDS],
            masa: Masa::new(preset, groups * per),
            refresh: Gated::ZERO,
            power: PowerState::default(),
        }
    }

    /// Subarrays per bank (1 without subarray-level parallelism).
    pub fn subarrays_per_bank(&self) -> usize {
        self.masa.as_ref().map_or(1, |m| m.per_bank)
    }

    /// The subarray `row` is in (0 without subarray-level parallelism).
    pub fn subarray_of(&self, row: u32) -> usize {
        self.masa.as_ref().and_then(|m| m.of(row)).unwrap_or(0)
    }

    /// The row open in subarray `subarray` of bank `bank` (flat index), if any (MASA; the
    /// bank's open row without it).
    pub fn subarray_open_row(&self, bank: usize, subarray: usize) -> Option<u32> {
        match &self.masa {
            None => self.open_row(bank).filter(|_| subarray == 0),
            Some(m) => m
                .subs
                .get(bank * m.per_bank + subarray)
                .map(|s| s.row)
                .filter(|r| *r != NO_ROW),
        }
    }

    /// Whether bank `i` has any row open (in any subarray).
    #[inline]
    fn bank_busy(&self, i: usize) -> bool {
        self.banks[i].open_row != NO_ROW
            || self
                .masa
                .as_ref()
                .is_some_and(|m| m.open.get(i).is_some_and(|o| *o != 0))
    }

    /// The timing parameters in cycles.
    pub fn timing(&self) -> &TimingCycles {
        &self.t
    }

    /// Banks in the pseudo-channel.
    pub fn banks(&self) -> usize {
        self.banks.len()
    }

    /// Whether `other` (a restored state) has this pseudo-channel's timing and geometry,
    /// so that it can take its place without an index going out of range.
    pub fn same_shape(&self, other: &PseudoChannel) -> bool {
        self.t == other.t
            && self.banks.len() == other.banks.len()
            && self.groups.len() == other.groups.len()
            && self.banks_per_group == other.banks_per_group
            && self.group_shift == other.group_shift
            && other.faw_next < other.faw.len()
            && self.subarrays_per_bank() == other.subarrays_per_bank()
    }

    /// Flat index (group-major) of a bank, if it exists.
    #[inline]
    pub fn bank_index(&self, b: BankId) -> Option<usize> {
        let (g, k) = (usize::from(b.group), usize::from(b.bank));
        (k < self.banks_per_group && g < self.groups.len()).then_some(g * self.banks_per_group + k)
    }

    /// The bank at a flat index.
    #[inline]
    pub fn bank_id(&self, index: usize) -> BankId {
        BankId::new(
            (index >> self.group_shift) as u8,
            (index & (self.banks_per_group - 1)) as u8,
        )
    }

    /// The open row of a bank (flat index), if any.
    #[inline]
    pub fn open_row(&self, bank: usize) -> Option<u32> {
        self.open_rows.get(bank).copied().filter(|r| *r != NO_ROW)
    }

    /// The open row of a bank, or [`CLOSED_ROW`]; the bank index is taken modulo the
    /// maximum bank count, so this never fails (the scheduler's inner loop).
    #[inline(always)]
    pub fn open_row_raw(&self, bank: usize) -> u32 {
        self.open_rows[bank % MAX_BANKS]
    }

    /// Bit b set when bank b (flat index) has a row open.
    pub fn open_mask(&self) -> u64 {
        self.banks
            .iter()
            .enumerate()
            .filter(|(_, b)| b.open_row != NO_ROW)
            .fold(0, |m, (i, _)| m | 1u64 << i)
    }

    /// Whether any bank has a row open.
    pub fn any_open(&self) -> bool {
        self.open_banks > 0 || self.masa.as_ref().is_some_and(|m| m.open_count > 0)
    }

    /// Commands issued so far, indexed by [`CommandKind`] as `usize`.
    pub fn command_counts(&self) -> &[u64; COMMAND_KINDS] {
        &self.counts
    }

    /// Cycles up to `now` with at least one bank (or subarray) open: active standby.
    pub fn active_cycles(&self, now: Cycle) -> u64 {
        self.power.active_cycles(now)
    }

    /// Banks (or subarrays) precharged so far, by PRE, PREA and AB-SA-PRE.
    pub fn bank_precharges(&self) -> u64 {
        self.power.precharges
    }

    /// Cycles each bank has had a row open up to `now`, for utilisation statistics.
    pub fn bank_open_cycles(&self, now: Cycle) -> impl Iterator<Item = u64> + '_ {
        self.banks.iter().map(move |b| {
            b.open_cycles
                + if b.open_row == NO_ROW {
                    0
                } else {
                    now.saturating_sub(b.opened_at)
                }
        })
    }

    /// A lower bound on every column command's earliest cycle: the pseudo-channel-wide
    /// gates alone. Lets a scheduler skip scanning its queue while the bus is busy.
    #[inline]
    pub fn column_floor(&self, write: bool) -> Cycle {
        if write { self.wr.at } else { self.rd.at }.max(self.col_bus.at)
    }

    /// A lower bound on every ACT's earliest cycle (tRRD_S, tFAW, row bus).
    #[inline]
    pub fn act_floor(&self) -> Cycle {
        self.act
            .at
            .max(self.faw[self.faw_next])
            .max(self.row_bus.at)
    }

    /// Earliest cycle the row command bus is free.
    #[inline]
    pub fn row_bus_free(&self) -> Cycle {
        self.row_bus.at
    }

    /// The cycles at which the row and the column command bus are next free.
    #[inline]
    pub fn buses_free(&self) -> (Cycle, Cycle) {
        (self.row_bus.at, self.col_bus.at)
    }

    /// Takes the other pseudo-channels' use of a shared command interface into account:
    /// the row bus is busy until `row`, the column bus until `col` (JEDEC HBM2: the
    /// pseudo-channels of a channel share one row and one column command bus). Gates only
    /// rise, so this never lets a command issue earlier. See [`SharedChannel`].
    #[inline]
    pub fn share_buses(&mut self, row: Cycle, col: Cycle) {
        self.row_bus.raise(row, Gate::RowBus);
        self.col_bus.raise(col, Gate::ColumnBus);
    }

    /// Earliest cycle of an ACT to a closed bank (flat index).
    #[inline]
    pub fn earliest_act(&self, bank: usize) -> Cycle {
        self.act_gate(bank).at
    }

    /// Earliest cycle of a PRE to an open bank (flat index).
    #[inline]
    pub fn earliest_pre(&self, bank: usize) -> Cycle {
        match self.banks.get(bank) {
            Some(b) => self.pre_gate(b).at.max(self.row_bus.at),
            None => Cycle::MAX,
        }
    }

    /// Earliest cycle of a RD (`write` false) or WR (`write` true) to an open bank.
    #[inline]
    pub fn earliest_column(&self, bank: usize, write: bool) -> Cycle {
        self.column_gate(bank, write).at
    }

    /// Earliest cycle of an op-and-store (`UPD`) to an open bank: a write's gates and the
    /// bank's read gate (the bank reads the column before it stores the sum).
    #[inline]
    pub fn earliest_update(&self, bank: usize) -> Cycle {
        let rd = self.banks.get(bank).map_or(0, |b| b.rd.at);
        self.column_gate(bank, true).at.max(rd)
    }
}
