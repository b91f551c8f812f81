//! The earliest cycle each DRAM command may issue on a pseudo-channel, and the gate that
//! sets it: the maximum of the bank, bank-group, pseudo-channel and command-bus counters,
//! with running maxima for the all-bank commands of the NMC engine's hot path.

use super::gate::{Gate, Gated};
use super::masa::Sub;
use super::{Bank, Group, PseudoChannel};
use crate::hbm::bank::{BankId, Command};
use crate::hbm::Cycle;

impl PseudoChannel {
    #[inline]
    pub(super) fn act_gate(&self, bank: usize) -> Gated {
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
    pub(super) fn column_gate(&self, bank: usize, write: bool) -> Gated {
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
    pub(super) fn pre_gate(&self, b: &Bank) -> Gated {
        b.pre.max(self.all_pre)
    }

    pub(super) fn all_banks(&self, f: impl Fn(&Bank) -> Gated) -> Gated {
        self.banks.iter().map(f).fold(Gated::ZERO, Gated::max)
    }

    pub(super) fn all_groups(&self, f: impl Fn(&Group) -> Gated) -> Gated {
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
    pub(super) fn all_bank_act_gate(&self) -> Gated {
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
    pub(super) fn all_subs(&self, row: u32, f: impl Fn(&Sub) -> Gated) -> Gated {
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
    pub(super) fn masa_act_gate(&self) -> Gated {
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
    pub(super) fn earliest_fast(&self, cmd: &Command) -> Cycle {
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
}
