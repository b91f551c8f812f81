//! Row management under NMC: opening and closing rows, MASA subarray selects and the
//! activate-ahead of the decoupled policies, and refresh while the engine owns the channel.

use super::*;

impl NmcChannelEngine {
    pub(super) fn close_rows(&mut self, ctrl: &mut Controller) {
        self.flush_posted(ctrl);
        if ctrl.pseudo_channel().any_open() {
            self.issue(ctrl, Command::PreAll);
        }
        self.open_row = None;
        self.sub_rows.fill(None);
    }

    /// MASA: makes physical `row` the designated open row of every bank: a subarray
    /// select if its subarray has it open, else a subarray precharge (if the subarray has
    /// another row open) and a subarray activate. Posted writes keep their rows.
    pub(super) fn masa_open(&mut self, ctrl: &mut Controller, row: u32) {
        if self.open_row == Some(row) {
            return;
        }
        let s = (row >> self.sub_shift) as usize;
        match self.sub_rows.get(s).copied().flatten() {
            Some(r) if r == row => {
                let pc = ctrl.pseudo_channel();
                let before = (
                    pc.earliest(&Command::AbRd { col: 0 }),
                    pc.earliest(&Command::AbWr { col: 0 }),
                );
                self.issue(ctrl, Command::AbSaSel { row });
                self.before_select = Some(before);
                self.stats.subarray_selects += 1;
            }
            open => {
                if open.is_some() {
                    self.issue(ctrl, Command::AbSaPre { row });
                }
                self.issue(ctrl, Command::AbSaAct { row });
                self.stats.activations += 1;
                if let Some(slot) = self.sub_rows.get_mut(s) {
                    *slot = Some(row);
                }
            }
        }
        self.open_row = Some(row);
    }

    /// [`RowPolicy::MasaDecoupled`]: prepares physical row `next` (an array's next row) in
    /// its subarray while the stream works in `current`'s, one command per call and only
    /// a command whose gates are already met (the stream never waits for it), and only
    /// while `current` is open: the
    /// subarray's precharge if it has another row open (and no posted write to it), then,
    /// at a later call, its activate. Nothing when `next` shares `current`'s subarray.
    pub(super) fn activate_ahead(&mut self, ctrl: &mut Controller, current: u32, next: u32) {
        let s = (next >> self.sub_shift) as usize;
        let here = (current >> self.sub_shift) as usize;
        // Only once the current row is open (a job's first visit opens its own row
        // first: an activate ahead of it would take its tFAW slot).
        if s == here || next >= self.rows || self.sub_rows.get(here) != Some(&Some(current)) {
            return;
        }
        let Some(open) = self.sub_rows.get(s).copied() else {
            return;
        };
        let cmd = match open {
            Some(r) if r == next => return,
            Some(r) => {
                if self.posted.iter().any(|p| p.0 == r) {
                    return;
                }
                Command::AbSaPre { row: r }
            }
            None => Command::AbSaAct { row: next },
        };
        if ctrl.pseudo_channel().earliest(&cmd) > self.now {
            return;
        }
        self.issue(ctrl, cmd);
        if let Some(slot) = self.sub_rows.get_mut(s) {
            *slot = match cmd {
                Command::AbSaAct { row } => {
                    // An activate designates its subarray.
                    self.open_row = Some(row);
                    self.stats.activations += 1;
                    self.stats.rows_activated_ahead += 1;
                    Some(row)
                }
                _ => {
                    if self.open_row == open {
                        self.open_row = None;
                    }
                    None
                }
            };
        }
    }

    /// Refresh due: close, refresh every bank, and leave the rows closed (the caller
    /// re-opens).
    #[inline]
    pub(super) fn refresh_if_due(&mut self, ctrl: &mut Controller) {
        while ctrl.nmc_refresh_due(self.now) {
            if self.mode == Mode::AllBank && self.decoupled(None) {
                // Decoupled: the posted writes stay in the write buffer (it is outside the
                // array; they go to their rows after the refresh, re-opened then), so
                // the ALU keeps producing into it through tRFC.
                self.cause = Cause::Refresh;
                if self.refresh_parallel {
                    // SARP: only the subarray the refresh counter points at closes (its
                    // row's posted writes wait in the buffer as above); the stream goes on
                    // in the others and waits only for a row of this one.
                    let s = (self.refresh_counter % self.sub_rows.len() as u64) as usize;
                    self.refresh_counter += 1;
                    if let Some(Some(r)) = self.sub_rows.get(s).copied() {
                        self.issue(ctrl, Command::AbSaPre { row: r });
                        self.sub_rows[s] = None;
                        if self.open_row == Some(r) {
                            self.open_row = None;
                        }
                    }
                    self.issue(
                        ctrl,
                        Command::AbSaRef {
                            row: (s as u32) << self.sub_shift,
                        },
                    );
                    self.stats.refreshes += 1;
                    continue;
                }
                if ctrl.pseudo_channel().any_open() {
                    self.issue(ctrl, Command::PreAll);
                }
                self.open_row = None;
                self.sub_rows.fill(None);
                self.issue(ctrl, Command::Ref);
                self.stats.refreshes += 1;
                continue;
            }
            self.flush_posted(ctrl);
            self.cause = Cause::Refresh;
            self.close_rows(ctrl);
            self.issue(ctrl, Command::Ref);
            self.stats.refreshes += 1;
        }
    }

    /// Opens `row` (in every bank, or in `single`).
    pub(super) fn open(
        &mut self,
        ctrl: &mut Controller,
        row: u32,
        single: Option<usize>,
    ) -> Result<(), EngineError> {
        if row >= self.rows {
            return Err(EngineError::OutOfRange(format!(
                "row {row} of {}",
                self.rows
            )));
        }
        if self.open_row == Some(row) {
            return Ok(());
        }
        if self.masa(single) {
            self.masa_open(ctrl, row);
            return Ok(());
        }
        self.close_rows(ctrl);
        match single {
            None => self.issue(ctrl, Command::AbAct { row }),
            Some(b) => {
                let bank = self.bank_id(b);
                self.issue(ctrl, Command::Act { bank, row })
            }
        };
        self.open_row = Some(row);
        self.stats.activations += 1;
        Ok(())
    }
}
