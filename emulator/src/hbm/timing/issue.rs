//! Issuing a DRAM command on a pseudo-channel: the checked path (bank state and timing,
//! with the violated constraint named), the unchecked paths of the scheduler and the NMC
//! engine, and how each command raises the gates and changes the rows it opens or closes.

use super::gate::{Gate, RowState, TimingError};
use super::{Bank, PseudoChannel, NO_ROW};
use crate::hbm::bank::{BankId, Command};
use crate::hbm::Cycle;

impl PseudoChannel {
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
        self.settle_open_row(i, at);
        self.banks[i].act.raise(at + self.t.trp, Gate::Trp);
        self.bank_max.act = self.bank_max.act.max(at + self.t.trp);
        if let Some(m) = &mut self.masa {
            m.close_all(&self.t, i, at);
        }
    }

    /// Bank `i` no longer has a row open for column commands: its open time is added up
    /// and it leaves the open-bank count (nothing when it had none).
    #[inline]
    fn settle_open_row(&mut self, i: usize, at: Cycle) {
        let b = &mut self.banks[i];
        if b.open_row != NO_ROW {
            b.open_row = NO_ROW;
            b.open_cycles += at.saturating_sub(b.opened_at);
            self.open_banks -= 1;
            self.open_rows[i] = NO_ROW;
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
                        self.settle_open_row(i, at);
                    }
                }
            }
        }
    }
}
