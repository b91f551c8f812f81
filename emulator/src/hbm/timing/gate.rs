//! The named timing constraints of a pseudo-channel ([`Gate`]), the "next allowed" cycle
//! each counter holds with the gate that last raised it ([`Gated`]), and the errors an
//! illegal command is rejected with ([`TimingError`], [`RowState`]).

use std::fmt;

use crate::hbm::bank::{BankId, Command};
use crate::hbm::Cycle;

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
pub(super) struct Gated {
    pub(super) at: Cycle,
    pub(super) gate: Gate,
}

/// [`Gated::ZERO`], for fields that older serialized states lack.
pub(super) fn no_gate() -> Gated {
    Gated::ZERO
}

impl Gated {
    pub(super) const ZERO: Gated = Gated {
        at: 0,
        gate: Gate::None,
    };

    #[inline(always)]
    pub(super) fn raise(&mut self, at: Cycle, gate: Gate) {
        if at > self.at {
            self.at = at;
            self.gate = gate;
        }
    }

    #[inline(always)]
    pub(super) fn max(self, other: Gated) -> Gated {
        if other.at > self.at {
            other
        } else {
            self
        }
    }
}
