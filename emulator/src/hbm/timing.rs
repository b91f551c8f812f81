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

use std::fmt;

use super::bank::{BankId, Command, COMMAND_KINDS};
use super::config::{HbmPreset, TimingCycles};
use super::power_state::PowerState;
use super::Cycle;

/// A timing constraint, named as in the JEDEC tables (and SPEC 2.1 / 3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Gate {
    /// Nothing has constrained the command yet.
    None,
    /// ACT to ACT, same bank.
    Trc,
    /// ACT to ACT, different bank group.
    TrrdS,
    /// ACT to ACT, same bank group.
    TrrdL,
    /// At most four ACTs in a rolling window.
    Tfaw,
    /// ACT to RD, same bank.
    TrcdRd,
    /// ACT to WR, same bank.
    TrcdWr,
    /// ACT to PRE, same bank.
    Tras,
    /// RD to PRE, same bank.
    Trtp,
    /// WR to PRE, same bank: CWL + BL + tWR.
    WriteRecovery,
    /// PRE to ACT, same bank.
    Trp,
    /// Column to column, different bank group.
    TccdS,
    /// Column to column, same bank group.
    TccdL,
    /// WR to RD, different bank group: CWL + BL + tWTR_S.
    WtrS,
    /// WR to RD, same bank group: CWL + BL + tWTR_L.
    WtrL,
    /// RD to WR: CL + BL + turnaround - CWL.
    ReadToWrite,
    /// REF to anything on the pseudo-channel.
    Trfc,
    /// REFpb to ACT, same bank.
    TrfcPb,
    /// An all-bank column command occupies every bank for tCCD_L.
    AllBankColumn,
    /// Op-and-store to the next column command, same bank group.
    Tccdwl,
    /// One row command per cycle.
    RowBus,
    /// One column command per cycle.
    ColumnBus,
    /// MASA: SA_SEL to the first column command of the newly designated subarray.
    SaSel,
}

impl Gate {
    /// Name and meaning, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Gate::None => "no constraint",
            Gate::Trc => "tRC (ACT -> ACT, same bank)",
            Gate::TrrdS => "tRRD_S (ACT -> ACT, different bank group)",
            Gate::TrrdL => "tRRD_L (ACT -> ACT, same bank group)",
            Gate::Tfaw => "tFAW (at most four ACTs per window; an all-bank ACT counts as four)",
            Gate::TrcdRd => "tRCDRD (ACT -> RD, same bank)",
            Gate::TrcdWr => "tRCDWR (ACT -> WR, same bank)",
            Gate::Tras => "tRAS (ACT -> PRE, same bank)",
            Gate::Trtp => "tRTP (RD -> PRE, same bank)",
            Gate::WriteRecovery => "CWL + BL + tWR (WR -> PRE, same bank)",
            Gate::Trp => "tRP (PRE -> ACT, same bank)",
            Gate::TccdS => "tCCD_S (column -> column, different bank group)",
            Gate::TccdL => "tCCD_L (column -> column, same bank group)",
            Gate::WtrS => "CWL + BL + tWTR_S (WR -> RD, different bank group)",
            Gate::WtrL => "CWL + BL + tWTR_L (WR -> RD, same bank group)",
            Gate::ReadToWrite => "CL + BL + turnaround - CWL (RD -> WR)",
            Gate::Trfc => "tRFC (REF -> ACT or REF)",
            Gate::TrfcPb => "tRFCpb (REFpb -> ACT, same bank)",
            Gate::AllBankColumn => "tCCD_L after an all-bank column command",
            Gate::Tccdwl => "tCCDWL (op-and-store -> column, same bank group)",
            Gate::RowBus => "row command bus (one row command per cycle)",
            Gate::ColumnBus => "column command bus (one column command per cycle)",
            Gate::SaSel => "SA_SEL latency (subarray select -> column)",
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// What a bank holds, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowState {
    /// Precharged.
    Closed,
    /// This row is open.
    Open(u32),
}

impl fmt::Display for RowState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowState::Closed => f.write_str("closed"),
            RowState::Open(r) => write!(f, "open at row {r}"),
        }
    }
}

/// An illegal command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimingError {
    /// Issued before a gate allows.
    TooEarly {
        /// The command.
        command: Command,
        /// When it was issued.
        at: Cycle,
        /// The earliest legal cycle.
        earliest: Cycle,
        /// The constraint that sets `earliest`.
        gate: Gate,
    },
    /// A bank is not in the state the command needs.
    WrongState {
        /// The command.
        command: Command,
        /// The bank.
        bank: BankId,
        /// What the bank holds.
        found: RowState,
        /// What the command needs.
        needed: &'static str,
    },
    /// The command names a bank the pseudo-channel does not have.
    NoSuchBank {
        /// The command.
        command: Command,
    },
    /// A subarray command on a pseudo-channel whose preset has one subarray per bank, or
    /// naming a row outside the bank; or an AB-SA-REF on a preset without
    /// `[subarrays] refresh_parallel`.
    NoSubarrays {
        /// The command.
        command: Command,
    },
}

impl fmt::Display for TimingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimingError::TooEarly {
                command,
                at,
                earliest,
                gate,
            } => write!(
                f,
                "`{command}` at cycle {at} is too early: {gate} allows cycle {earliest}"
            ),
            TimingError::WrongState {
                command,
                bank,
                found,
                needed,
            } => {
                write!(
                    f,
                    "`{command}`: bank {bank} is {found}; it must be {needed}"
                )
            }
            TimingError::NoSuchBank { command } => {
                write!(f, "`{command}`: no such bank in this pseudo-channel")
            }
            TimingError::NoSubarrays {
                command: command @ Command::AbSaRef { .. },
            } => write!(
                f,
                "`{command}`: the preset has no refresh-access parallelism \
                 (subarrays.refresh_parallel = false), or one subarray per bank, or the row \
                 is outside the bank; a subarray refresh needs e.g. lamb-ch6-masa16-sarp"
            ),
            TimingError::NoSubarrays { command } => write!(
                f,
                "`{command}`: the preset has one subarray per bank (subarrays.per_bank = 1) \
                 or the row is outside the bank; subarray commands need a MASA preset"
            ),
        }
    }
}

impl std::error::Error for TimingError {}

/// A "next allowed" cycle and the gate that set it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Gated {
    at: Cycle,
    gate: Gate,
}

/// [`Gated::ZERO`], for fields that older serialized states lack.
fn no_gate() -> Gated {
    Gated::ZERO
}

impl Gated {
    const ZERO: Gated = Gated {
        at: 0,
        gate: Gate::None,
    };

    #[inline(always)]
    fn raise(&mut self, at: Cycle, gate: Gate) {
        if at > self.at {
            self.at = at;
            self.gate = gate;
        }
    }

    #[inline(always)]
    fn max(self, other: Gated) -> Gated {
        if other.at > self.at {
            other
        } else {
            self
        }
    }
}

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

/// One subarray of one bank (MASA).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
struct Sub {
    /// Open row, or [`NO_ROW`].
    row: u32,
    /// ACT to this subarray: tRC after its ACT, tRP after its PRE.
    act: Gated,
    /// PRE of this subarray: tRAS after its ACT, tRTP / CWL + BL + tWR after its columns.
    pre: Gated,
    /// First RD / WR after its ACT (tRCD).
    rd: Cycle,
    wr: Cycle,
}

/// Subarray-level state (MASA, Kim et al. ISCA 2012) of a pseudo-channel whose preset
/// has more than one subarray per bank. The per-bank gates keep what the bank shares:
/// the column path (tCCD, turnarounds, the designated subarray's tRCD and the SA_SEL
/// latency through the rd/wr gates), tRFC and the tRP of a whole-bank precharge (act),
/// and the whole-bank PRE (the maximum over its subarrays: pre). Each subarray has its own
/// tRC / tRAS / tRP / tRTP / tWR. ACT-to-ACT spacing (tRRD, tFAW) is per pseudo-channel
/// whatever the subarray (it is a power limit).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Masa {
    per_bank: usize,
    /// log2(rows per subarray).
    row_shift: u32,
    /// SA_SEL to column, cycles.
    sa_sel: Cycle,
    /// `banks * per_bank`, bank-major.
    subs: Vec<Sub>,
    /// Open subarrays per bank (bit mask).
    open: Vec<u64>,
    /// The designated subarray of each bank.
    designated: Vec<u8>,
    /// Subarrays open in the pseudo-channel.
    open_count: u32,
    /// Running maximum of every subarray's ACT gate (what a REF waits for).
    max_act: Cycle,
    /// The preset allows AB-SA-REF (refresh-access parallelism).
    #[serde(default)]
    refresh_parallel: bool,
}

impl Masa {
    fn new(preset: &HbmPreset, banks: usize) -> Option<Self> {
        let per = preset.subarrays.per_bank as usize;
        if per <= 1 {
            return None;
        }
        let rows_per = preset.organisation.rows / preset.subarrays.per_bank;
        Some(Masa {
            per_bank: per,
            row_shift: rows_per.trailing_zeros(),
            sa_sel: Cycle::from(preset.subarrays.sa_sel),
            subs: vec![
                Sub {
                    row: NO_ROW,
                    act: Gated::ZERO,
                    pre: Gated::ZERO,
                    rd: 0,
                    wr: 0,
                };
                banks * per
            ],
            open: vec![0; banks],
            designated: vec![0; banks],
            open_count: 0,
            max_act: 0,
            refresh_parallel: preset.subarrays.refresh_parallel,
        })
    }

    /// The subarray of `row`, if the bank has it.
    #[inline]
    fn of(&self, row: u32) -> Option<usize> {
        let s = (row >> self.row_shift) as usize;
        (s < self.per_bank).then_some(s)
    }

    #[inline]
    fn sub(&mut self, bank: usize, s: usize) -> &mut Sub {
        &mut self.subs[bank * self.per_bank + s]
    }

    /// Opens `row` in subarray `s` of `bank` (and designates it).
    fn open(&mut self, t: &TimingCycles, bank: usize, s: usize, row: u32, at: Cycle) {
        let sub = self.sub(bank, s);
        sub.row = row;
        sub.act.raise(at + t.trc, Gate::Trc);
        sub.pre.raise(at + t.tras, Gate::Tras);
        sub.rd = at + t.trcdrd;
        sub.wr = at + t.trcdwr;
        self.max_act = self.max_act.max(at + t.trc);
        if self.open[bank] & (1 << s) == 0 {
            self.open[bank] |= 1 << s;
            self.open_count += 1;
        }
        self.designated[bank] = s as u8;
    }

    /// Closes subarray `s` of `bank`.
    fn close(&mut self, t: &TimingCycles, bank: usize, s: usize, at: Cycle) {
        let sub = self.sub(bank, s);
        sub.row = NO_ROW;
        sub.act.raise(at + t.trp, Gate::Trp);
        self.max_act = self.max_act.max(at + t.trp);
        if self.open[bank] & (1 << s) != 0 {
            self.open[bank] &= !(1 << s);
            self.open_count -= 1;
        }
    }

    /// Closes every subarray of `bank`.
    fn close_all(&mut self, t: &TimingCycles, bank: usize, at: Cycle) {
        for s in 0..self.per_bank {
            if self.open[bank] & (1 << s) != 0 {
                self.close(t, bank, s, at);
            }
        }
    }

    /// A column command to `bank`'s designated subarray raises its PRE gate.
    #[inline]
    fn column(&mut self, bank: usize, pre: Cycle, gate: Gate) {
        let s = self.designated[bank] as usize;
        self.sub(bank, s).pre.raise(pre, gate);
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

    #[inline]
    fn act_gate(&self, bank: usize) -> Gated {
        let Some(b) = self.banks.get(bank) else {
            return Gated {
                at: Cycle::MAX,
                gate: Gate::None,
            };
        };
        let g = &self.groups[bank >> self.group_shift];
        b.act
            .max(g.act)
            .max(self.act)
            .max(Gated {
                at: self.faw[self.faw_next],
                gate: Gate::Tfaw,
            })
            .max(self.row_bus)
    }

    #[inline]
    fn column_gate(&self, bank: usize, write: bool) -> Gated {
        let Some(b) = self.banks.get(bank) else {
            return Gated {
                at: Cycle::MAX,
                gate: Gate::None,
            };
        };
        let g = &self.groups[bank >> self.group_shift];
        if write {
            b.wr.max(g.wr).max(self.wr).max(self.col_bus)
        } else {
            b.rd.max(g.rd).max(self.rd).max(self.col_bus)
        }
    }

    /// A bank's PRE gate: its own, or the all-bank one if later.
    #[inline]
    fn pre_gate(&self, b: &Bank) -> Gated {
        b.pre.max(self.all_pre)
    }

    fn all_banks(&self, f: impl Fn(&Bank) -> Gated) -> Gated {
        self.banks.iter().map(f).fold(Gated::ZERO, Gated::max)
    }

    fn all_groups(&self, f: impl Fn(&Group) -> Gated) -> Gated {
        self.groups.iter().map(f).fold(Gated::ZERO, Gated::max)
    }

    /// The earliest cycle `cmd` may issue as far as timing goes (bank state is checked by
    /// [`Self::issue`]), and the gate that sets it. `Cycle::MAX` for a bank that does not
    /// exist.
    pub fn earliest_with_gate(&self, cmd: &Command) -> (Cycle, Gate) {
        let bank = |b: BankId| self.bank_index(b).unwrap_or(usize::MAX);
        let g = match *cmd {
            Command::Act { bank: b, .. } => self.act_gate(bank(b)),
            Command::Pre { bank: b } => match self.banks.get(bank(b)) {
                Some(x) => self.pre_gate(x).max(self.row_bus),
                None => Gated {
                    at: Cycle::MAX,
                    gate: Gate::None,
                },
            },
            Command::PreAll => (0..self.banks.len())
                .map(|i| {
                    if self.bank_busy(i) {
                        self.pre_gate(&self.banks[i])
                    } else {
                        Gated::ZERO
                    }
                })
                .fold(Gated::ZERO, Gated::max)
                .max(self.row_bus),
            Command::Rd { bank: b, .. } => self.column_gate(bank(b), false),
            Command::Wr { bank: b, .. } => self.column_gate(bank(b), true),
            Command::Update { bank: b, .. } => {
                let i = bank(b);
                let rd = self.banks.get(i).map_or(Gated::ZERO, |x| x.rd);
                self.column_gate(i, true).max(rd)
            }
            Command::Ref => self
                .all_banks(|b| b.act)
                .max(self.masa_act_gate())
                .max(self.refresh)
                .max(self.row_bus),
            Command::RefPb { bank: b } => match self.banks.get(bank(b)) {
                Some(x) => x.act.max(self.row_bus),
                None => Gated {
                    at: Cycle::MAX,
                    gate: Gate::None,
                },
            },
            Command::AbAct { .. } => self.all_bank_act_gate(),
            Command::AbRd { .. } => self
                .all_banks(|b| b.rd)
                .max(self.all_groups(|g| g.rd))
                .max(self.rd)
                .max(self.col_bus),
            Command::AbWr { .. } => self
                .all_banks(|b| b.wr)
                .max(self.all_groups(|g| g.wr))
                .max(self.wr)
                .max(self.col_bus),
            Command::AbSaAct { row } => self.all_subs(row, |s| s.act).max(self.all_bank_act_gate()),
            Command::AbSaSel { .. } => self.row_bus,
            Command::AbSaPre { row } => self.all_subs(row, |s| s.pre).max(self.row_bus),
            // A subarray refresh draws an activate's current in every bank: it keeps the
            // AB-ACT's tRRD / tFAW spacing, and never overlaps another refresh.
            Command::AbSaRef { row } => self
                .all_subs(row, |s| s.act)
                .max(self.all_bank_act_gate())
                .max(self.refresh),
        };
        (g.at, g.gate)
    }

    /// What an all-bank activate (AB-ACT, AB-SA-ACT) waits for: every bank's ACT gate,
    /// tRRD in every group and across groups, the oldest of the four tFAW slots, the row bus.
    fn all_bank_act_gate(&self) -> Gated {
        let newest = self.faw.iter().copied().max().unwrap_or(0);
        self.all_banks(|b| b.act)
            .max(self.all_groups(|g| g.act))
            .max(self.act)
            .max(Gated {
                at: newest,
                gate: Gate::Tfaw,
            })
            .max(self.row_bus)
    }

    /// The maximum of `f` over the subarray of `row` in every bank.
    fn all_subs(&self, row: u32, f: impl Fn(&Sub) -> Gated) -> Gated {
        let Some(m) = &self.masa else {
            return Gated::ZERO;
        };
        let Some(s) = m.of(row) else {
            return Gated::ZERO;
        };
        m.subs
            .iter()
            .skip(s)
            .step_by(m.per_bank)
            .map(f)
            .fold(Gated::ZERO, Gated::max)
    }

    /// What a REF waits for in the subarrays (their tRP after a subarray PRE).
    #[inline]
    fn masa_act_gate(&self) -> Gated {
        match &self.masa {
            Some(m) => Gated {
                at: m.max_act,
                gate: Gate::Trp,
            },
            None => Gated::ZERO,
        }
    }

    /// The earliest cycle `cmd` may issue as far as timing goes.
    pub fn earliest(&self, cmd: &Command) -> Cycle {
        self.earliest_with_gate(cmd).0
    }

    /// The same cycle as [`Self::earliest`] without naming the gate, so the all-bank
    /// commands read the running maxima instead of walking every bank.
    #[inline]
    fn earliest_fast(&self, cmd: &Command) -> Cycle {
        match *cmd {
            Command::AbRd { .. } => self
                .bank_max
                .rd
                .max(self.group_max.rd)
                .max(self.rd.at)
                .max(self.col_bus.at),
            Command::AbWr { .. } => self
                .bank_max
                .wr
                .max(self.group_max.wr)
                .max(self.wr.at)
                .max(self.col_bus.at),
            Command::AbAct { .. } => {
                let newest = self.faw.iter().copied().max().unwrap_or(0);
                self.bank_max
                    .act
                    .max(self.group_max.act)
                    .max(self.act.at)
                    .max(newest)
                    .max(self.row_bus.at)
            }
            Command::Ref => self
                .bank_max
                .act
                .max(self.masa_act_gate().at)
                .max(self.refresh.at)
                .max(self.row_bus.at),
            // PREA waits for the open banks only; with every bank open (the NMC engine's
            // case) that is the maximum over all banks.
            Command::PreAll if self.open_banks as usize == self.banks.len() => {
                self.bank_max.pre.max(self.all_pre.at).max(self.row_bus.at)
            }
            _ => self.earliest(cmd),
        }
    }

    /// Issues `cmd` at its earliest legal cycle, but not before `not_before`, and returns
    /// that cycle: the NMC engine's hot path.
    ///
    /// Unlike [`Self::issue`] this neither re-derives the gate nor checks the banks'
    /// state in release builds: the caller issues at the earliest cycle by construction
    /// and must know the state is right (an engine that tracks its own open row does).
    /// Debug builds (and so the tests) check both against the checked path.
    #[inline]
    pub fn issue_at_earliest(&mut self, cmd: &Command, not_before: Cycle) -> Cycle {
        debug_assert_eq!(self.check_state(cmd), Ok(()), "issue_at_earliest: {cmd}");
        let earliest = self.earliest_fast(cmd);
        debug_assert_eq!(earliest, self.earliest(cmd), "running maxima for {cmd}");
        let at = earliest.max(not_before);
        self.apply(cmd, at);
        at
    }

    /// Issues `cmd` at `at` without re-checking the banks' state or the gates: for a
    /// caller that has checked both already (the memory controller's scheduler picks only
    /// commands whose gate it computed). Debug builds check both and panic on a violation.
    /// `emulator/tests/dram_unchecked.rs` runs whole workloads both ways and compares
    /// every command.
    #[inline]
    pub fn issue_unchecked(&mut self, cmd: &Command, at: Cycle) {
        debug_assert_eq!(self.check_state(cmd), Ok(()), "issue_unchecked: {cmd}");
        debug_assert!(
            self.earliest(cmd) <= at,
            "issue_unchecked: {cmd} at {at} before {}",
            self.earliest(cmd)
        );
        self.apply(cmd, at);
    }

    /// Checks that `cmd` finds its bank(s) in the right state.
    pub fn check_state(&self, cmd: &Command) -> Result<(), TimingError> {
        let one = |b: BankId| -> Result<&Bank, TimingError> {
            self.bank_index(b)
                .and_then(|i| self.banks.get(i))
                .ok_or(TimingError::NoSuchBank { command: *cmd })
        };
        let wrong = |bank: BankId, found: RowState, needed: &'static str| TimingError::WrongState {
            command: *cmd,
            bank,
            found,
            needed,
        };
        let all = |needed: &'static str, ok: &dyn Fn(&Bank) -> bool| -> Result<(), TimingError> {
            match self.banks.iter().position(|b| !ok(b)) {
                Some(i) => Err(wrong(self.bank_id(i), self.banks[i].state(), needed)),
                None => Ok(()),
            }
        };
        let masa_open = |i: usize| {
            self.masa
                .as_ref()
                .and_then(|m| m.open.get(i))
                .is_some_and(|o| *o != 0)
        };
        let conventional = matches!(
            cmd,
            Command::Ref | Command::AbAct { .. } | Command::Act { .. } | Command::RefPb { .. }
        );
        let blocked = |i: usize| {
            masa_open(i)
                && match *cmd {
                    Command::Act { bank, .. } | Command::RefPb { bank } => {
                        self.bank_index(bank) == Some(i)
                    }
                    _ => true,
                }
        };
        if self.masa.is_some() && conventional {
            if let Some(i) = (0..self.banks.len()).find(|&i| blocked(i)) {
                return Err(wrong(
                    self.bank_id(i),
                    self.banks[i].state(),
                    "precharged in every subarray",
                ));
            }
        }
        match *cmd {
            Command::AbSaAct { row }
            | Command::AbSaSel { row }
            | Command::AbSaPre { row }
            | Command::AbSaRef { row } => {
                let Some((m, s)) = self.masa.as_ref().and_then(|m| Some((m, m.of(row)?))) else {
                    return Err(TimingError::NoSubarrays { command: *cmd });
                };
                if matches!(cmd, Command::AbSaRef { .. }) && !m.refresh_parallel {
                    return Err(TimingError::NoSubarrays { command: *cmd });
                }
                for i in 0..self.banks.len() {
                    let r = m.subs[i * m.per_bank + s].row;
                    let found = if r == NO_ROW {
                        RowState::Closed
                    } else {
                        RowState::Open(r)
                    };
                    let (ok, needed) = match cmd {
                        Command::AbSaAct { .. } | Command::AbSaRef { .. } => {
                            (r == NO_ROW, "precharged in the row's subarray")
                        }
                        Command::AbSaSel { .. } => (r == row, "open at the row in its subarray"),
                        _ => (r != NO_ROW, "open in the row's subarray"),
                    };
                    if !ok {
                        return Err(wrong(self.bank_id(i), found, needed));
                    }
                }
            }
            Command::Act { bank, .. } | Command::RefPb { bank } => {
                let b = one(bank)?;
                if b.open_row != NO_ROW {
                    return Err(wrong(bank, b.state(), "precharged"));
                }
            }
            Command::Pre { bank } => {
                let b = one(bank)?;
                if b.open_row == NO_ROW {
                    return Err(wrong(bank, b.state(), "open"));
                }
            }
            Command::Rd { bank, row, .. }
            | Command::Wr { bank, row, .. }
            | Command::Update { bank, row, .. } => {
                let b = one(bank)?;
                if b.open_row != row {
                    return Err(wrong(bank, b.state(), "open at the command's row"));
                }
            }
            Command::PreAll => {}
            Command::Ref | Command::AbAct { .. } => all("precharged", &|b| b.open_row == NO_ROW)?,
            Command::AbRd { .. } | Command::AbWr { .. } => all("open", &|b| b.open_row != NO_ROW)?,
        }
        Ok(())
    }

    /// Issues `cmd` at cycle `at`, or says which state or gate forbids it.
    pub fn issue(&mut self, cmd: &Command, at: Cycle) -> Result<(), TimingError> {
        self.check_state(cmd)?;
        let (earliest, gate) = self.earliest_with_gate(cmd);
        if at < earliest {
            return Err(TimingError::TooEarly {
                command: *cmd,
                at,
                earliest,
                gate,
            });
        }
        self.apply(cmd, at);
        Ok(())
    }

    fn open(&mut self, i: usize, row: u32, at: Cycle) {
        let b = &mut self.banks[i];
        b.open_row = row;
        b.opened_at = at;
        self.open_rows[i] = row;
        b.act.raise(at + self.t.trc, Gate::Trc);
        b.pre.raise(at + self.t.tras, Gate::Tras);
        b.rd.raise(at + self.t.trcdrd, Gate::TrcdRd);
        b.wr.raise(at + self.t.trcdwr, Gate::TrcdWr);
        let m = &mut self.bank_max;
        m.act = m.act.max(at + self.t.trc);
        m.pre = m.pre.max(at + self.t.tras);
        m.rd = m.rd.max(at + self.t.trcdrd);
        m.wr = m.wr.max(at + self.t.trcdwr);
        self.open_banks += 1;
        if let Some(ms) = &mut self.masa {
            if let Some(s) = ms.of(row) {
                ms.open(&self.t, i, s, row, at);
            }
        }
    }

    /// Closes bank `i` (every subarray under MASA), counting the banks or subarrays it
    /// precharges. Inlined: an all-bank precharge calls it once per bank, and out of line
    /// (as the energy count made it) it cost the NMC engine about 1 % of its instructions.
    #[inline]
    fn close(&mut self, i: usize, at: Cycle) {
        self.power.precharges += match &self.masa {
            Some(m) => u64::from(m.open.get(i).map_or(0, |o| o.count_ones())),
            None => u64::from(self.banks[i].open_row != NO_ROW),
        };
        let b = &mut self.banks[i];
        if b.open_row != NO_ROW {
            b.open_row = NO_ROW;
            b.open_cycles += at.saturating_sub(b.opened_at);
            self.open_banks -= 1;
            self.open_rows[i] = NO_ROW;
        }
        b.act.raise(at + self.t.trp, Gate::Trp);
        self.bank_max.act = self.bank_max.act.max(at + self.t.trp);
        if let Some(m) = &mut self.masa {
            m.close_all(&self.t, i, at);
        }
    }

    /// MASA: makes `row` (open in subarray `s`) bank `i`'s open row for column commands,
    /// its first column no earlier than `col_at` and the subarray's tRCD.
    fn designate(&mut self, i: usize, s: usize, row: u32, at: Cycle, col_at: Cycle, gate: Gate) {
        let Some(m) = &mut self.masa else {
            return;
        };
        m.designated[i] = s as u8;
        let sub = *m.sub(i, s);
        let b = &mut self.banks[i];
        if b.open_row == NO_ROW {
            self.open_banks += 1;
            b.opened_at = at;
        }
        b.open_row = row;
        self.open_rows[i] = row;
        let (rd_gate, wr_gate) = if gate == Gate::SaSel && col_at >= sub.rd.max(sub.wr) {
            (Gate::SaSel, Gate::SaSel)
        } else {
            (Gate::TrcdRd, Gate::TrcdWr)
        };
        b.rd.raise(sub.rd.max(col_at), rd_gate);
        b.wr.raise(sub.wr.max(col_at), wr_gate);
        let mx = &mut self.bank_max;
        mx.rd = mx.rd.max(b.rd.at);
        mx.wr = mx.wr.max(b.wr.at);
    }

    /// The ACT-to-ACT power limits after an all-bank activate (AB-ACT, AB-SA-ACT): tRRD_L
    /// in every bank group, tRRD_S, and all four tFAW slots (it counts as four ACTs).
    fn all_bank_act_gates(&mut self, at: Cycle) {
        for g in &mut self.groups {
            g.act.raise(at + self.t.trrd_l, Gate::TrrdL);
        }
        self.group_max.act = self.group_max.act.max(at + self.t.trrd_l);
        self.act.raise(at + self.t.trrd_s, Gate::TrrdS);
        self.faw = [at + self.t.tfaw; 4];
    }

    /// Applies a command already checked by [`Self::issue`].
    #[inline]
    fn apply(&mut self, cmd: &Command, at: Cycle) {
        self.counts[cmd.kind() as usize] += 1;
        if cmd.kind().is_row_command() {
            // Only row commands open or close banks: the active-standby clock is kept
            // here, off the column commands' path.
            let was_open = self.any_open();
            self.apply_state(cmd, at);
            self.power.track(was_open, self.any_open(), at);
        } else {
            self.apply_state(cmd, at);
        }
    }

    /// The buses and bank state after `cmd` at `at`.
    #[inline]
    fn apply_state(&mut self, cmd: &Command, at: Cycle) {
        if cmd.kind().is_row_command() {
            let cycles = if matches!(cmd, Command::Act { .. } | Command::AbAct { .. }) {
                self.t.act_bus
            } else {
                1
            };
            self.row_bus.raise(at + cycles, Gate::RowBus);
        } else {
            self.col_bus.raise(at + 1, Gate::ColumnBus);
        }
        let idx = |s: &Self, b: BankId| s.bank_index(b).unwrap_or(0);
        match *cmd {
            Command::Act { bank, row } => {
                let i = idx(self, bank);
                self.open(i, row, at);
                self.groups[i >> self.group_shift]
                    .act
                    .raise(at + self.t.trrd_l, Gate::TrrdL);
                self.group_max.act = self.group_max.act.max(at + self.t.trrd_l);
                self.act.raise(at + self.t.trrd_s, Gate::TrrdS);
                self.faw[self.faw_next] = at + self.t.tfaw;
                self.faw_next = (self.faw_next + 1) % self.faw.len();
            }
            Command::AbAct { row } => {
                for i in 0..self.banks.len() {
                    self.open(i, row, at);
                }
                self.all_bank_act_gates(at);
            }
            Command::Pre { bank } => {
                let i = idx(self, bank);
                self.close(i, at);
            }
            Command::PreAll => {
                for i in 0..self.banks.len() {
                    if self.bank_busy(i) {
                        self.close(i, at);
                    }
                }
            }
            Command::Rd { bank, .. } => {
                let i = idx(self, bank);
                let g = &mut self.groups[i >> self.group_shift];
                g.rd.raise(at + self.t.tccd_l, Gate::TccdL);
                self.group_max.rd = self.group_max.rd.max(at + self.t.tccd_l);
                self.rd.raise(at + self.t.tccd_s, Gate::TccdS);
                self.wr.raise(at + self.t.rd_to_wr, Gate::ReadToWrite);
                self.banks[i].pre.raise(at + self.t.trtp, Gate::Trtp);
                self.bank_max.pre = self.bank_max.pre.max(at + self.t.trtp);
                if let Some(m) = &mut self.masa {
                    m.column(i, at + self.t.trtp, Gate::Trtp);
                }
            }
            Command::Wr { bank, .. } | Command::Update { bank, .. } => {
                let i = idx(self, bank);
                let g = &mut self.groups[i >> self.group_shift];
                g.wr.raise(at + self.t.tccd_l, Gate::TccdL);
                g.rd.raise(at + self.t.wr_to_rd_l, Gate::WtrL);
                if matches!(cmd, Command::Update { .. }) {
                    g.wr.raise(at + self.t.tccdwl, Gate::Tccdwl);
                    g.rd.raise(at + self.t.tccdwl, Gate::Tccdwl);
                }
                let (g_rd, g_wr) = (g.rd.at, g.wr.at);
                self.group_max.rd = self.group_max.rd.max(g_rd);
                self.group_max.wr = self.group_max.wr.max(g_wr);
                self.wr.raise(at + self.t.tccd_s, Gate::TccdS);
                self.rd.raise(at + self.t.wr_to_rd_s, Gate::WtrS);
                self.banks[i]
                    .pre
                    .raise(at + self.t.wr_to_pre, Gate::WriteRecovery);
                self.bank_max.pre = self.bank_max.pre.max(at + self.t.wr_to_pre);
                if let Some(m) = &mut self.masa {
                    m.column(i, at + self.t.wr_to_pre, Gate::WriteRecovery);
                }
            }
            // An all-bank column command blocks every bank group for tCCD_L (and a write
            // delays reads by the same-group turnaround). The pseudo-channel-wide gates get
            // exactly those values, and every column gate takes the maximum of its bank
            // group's gate and the pseudo-channel's, so raising the groups as well would
            // change no cycle: they are left alone.
            Command::AbRd { .. } => {
                self.rd.raise(at + self.t.tccd_l, Gate::AllBankColumn);
                self.wr.raise(at + self.t.tccd_l, Gate::AllBankColumn);
                self.all_pre.raise(at + self.t.trtp, Gate::Trtp);
                if let Some(m) = &mut self.masa {
                    for i in 0..self.banks.len() {
                        m.column(i, at + self.t.trtp, Gate::Trtp);
                    }
                }
            }
            Command::AbWr { .. } => {
                self.wr.raise(at + self.t.tccd_l, Gate::AllBankColumn);
                self.rd.raise(at + self.t.wr_to_rd_l, Gate::WtrL);
                self.all_pre
                    .raise(at + self.t.wr_to_pre, Gate::WriteRecovery);
                if let Some(m) = &mut self.masa {
                    for i in 0..self.banks.len() {
                        m.column(i, at + self.t.wr_to_pre, Gate::WriteRecovery);
                    }
                }
            }
            Command::Ref => {
                for b in &mut self.banks {
                    b.act.raise(at + self.t.trfc, Gate::Trfc);
                }
                self.bank_max.act = self.bank_max.act.max(at + self.t.trfc);
                self.refresh.raise(at + self.t.trfc, Gate::Trfc);
            }
            Command::AbSaRef { row } => {
                let Some(m) = &mut self.masa else {
                    return;
                };
                let Some(s) = m.of(row) else {
                    return;
                };
                for i in 0..self.banks.len() {
                    m.sub(i, s).act.raise(at + self.t.trfc, Gate::Trfc);
                }
                // (A later REF waits on `refresh`, not on the subarrays' ACT maximum.)
                self.refresh.raise(at + self.t.trfc, Gate::Trfc);
                self.all_bank_act_gates(at);
            }
            Command::RefPb { bank } => {
                let i = idx(self, bank);
                self.banks[i].act.raise(at + self.t.trfcpb, Gate::TrfcPb);
                self.bank_max.act = self.bank_max.act.max(at + self.t.trfcpb);
            }
            Command::AbSaAct { row } => {
                let Some(s) = self.masa.as_ref().and_then(|m| m.of(row)) else {
                    return;
                };
                for i in 0..self.banks.len() {
                    if let Some(m) = &mut self.masa {
                        m.open(&self.t, i, s, row, at);
                    }
                    self.banks[i].pre.raise(at + self.t.tras, Gate::Tras);
                    self.designate(i, s, row, at, at, Gate::TrcdRd);
                }
                self.bank_max.pre = self.bank_max.pre.max(at + self.t.tras);
                self.all_bank_act_gates(at);
            }
            Command::AbSaSel { row } => {
                let Some((s, sel)) = self
                    .masa
                    .as_ref()
                    .and_then(|m| Some((m.of(row)?, m.sa_sel)))
                else {
                    return;
                };
                for i in 0..self.banks.len() {
                    self.designate(i, s, row, at, at + sel, Gate::SaSel);
                }
            }
            Command::AbSaPre { row } => {
                let Some(s) = self.masa.as_ref().and_then(|m| m.of(row)) else {
                    return;
                };
                for i in 0..self.banks.len() {
                    let Some(m) = &mut self.masa else {
                        return;
                    };
                    if m.open.get(i).is_some_and(|o| o & (1 << s) != 0) {
                        self.power.precharges += 1;
                    }
                    m.close(&self.t, i, s, at);
                    if m.designated[i] as usize == s {
                        let b = &mut self.banks[i];
                        if b.open_row != NO_ROW {
                            b.open_row = NO_ROW;
                            b.open_cycles += at.saturating_sub(b.opened_at);
                            self.open_banks -= 1;
                            self.open_rows[i] = NO_ROW;
                        }
                    }
                }
            }
        }
    }
}

/// The pseudo-channels of one channel behind one shared command interface (JEDEC HBM2
/// pseudo-channel mode): one row command bus and one column command bus for all of them.
///
/// The memory system keeps the two buses' "free at" cycles per channel and hands them to
/// each pseudo-channel before it schedules ([`PseudoChannel::share_buses`]) and reads them
/// back after ([`PseudoChannel::buses_free`]); this type does the same around single
/// commands, so timing tests can drive a whole channel.
#[derive(Debug, Clone)]
pub struct SharedChannel {
    pcs: Vec<PseudoChannel>,
    row: Cycle,
    col: Cycle,
}

impl SharedChannel {
    /// A channel of the preset's pseudo-channels, every bank precharged.
    pub fn new(preset: &HbmPreset) -> Self {
        let n = preset.organisation.pseudo_channels_per_channel.max(1) as usize;
        SharedChannel {
            pcs: (0..n).map(|_| PseudoChannel::new(preset)).collect(),
            row: 0,
            col: 0,
        }
    }

    /// One pseudo-channel's timing state, with the channel's bus use applied.
    pub fn pseudo_channel(&mut self, pc: usize) -> &PseudoChannel {
        let (row, col) = (self.row, self.col);
        let p = &mut self.pcs[pc];
        p.share_buses(row, col);
        p
    }

    /// Earliest cycle of `cmd` on pseudo-channel `pc`.
    pub fn earliest(&mut self, pc: usize, cmd: &Command) -> Cycle {
        self.pseudo_channel(pc).earliest(cmd)
    }

    /// Issues `cmd` on pseudo-channel `pc` at `at`, under every check.
    pub fn issue(&mut self, pc: usize, cmd: &Command, at: Cycle) -> Result<(), TimingError> {
        let (row, col) = (self.row, self.col);
        let p = &mut self.pcs[pc];
        p.share_buses(row, col);
        p.issue(cmd, at)?;
        let (r, c) = p.buses_free();
        self.row = self.row.max(r);
        self.col = self.col.max(c);
        Ok(())
    }
}
