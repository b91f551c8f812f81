//! What a [`Controller`] keeps in step with the commands it issues: the write-drain mode
//! (high and low watermarks), the queues' per-bank row-hit counts, the look-ahead marks,
//! the command log and the scheduler's quiet periods.

use crate::hbm::{Command, Cycle};

use super::{Controller, LoggedCommand};

impl Controller {
    /// Keeps the queues' per-bank hit counts after a row command the scheduler issued.
    #[inline]
    pub(super) fn rows_changed(&mut self, cmd: &Command) {
        match *cmd {
            Command::Act { bank, .. } | Command::Pre { bank } => {
                if let Some(b) = self.pc.bank_index(bank) {
                    let open = self.pc.open_row_raw(b);
                    self.reads.recount(b, open);
                    self.writes.recount(b, open);
                }
            }
            _ => self.recount_hits(),
        }
    }

    /// Recounts every bank's hits (after refresh, or after an NMC engine drove the banks).
    pub(super) fn recount_hits(&mut self) {
        for b in 0..self.pc.banks() {
            let open = self.pc.open_row_raw(b);
            self.reads.recount(b, open);
            self.writes.recount(b, open);
        }
    }

    /// Drops look-ahead marks whose bank no longer has the request's row open (refresh or
    /// an NMC engine closed it): they would otherwise protect a row nobody waits for.
    pub(super) fn revalidate_activated(&mut self) {
        for (k, q) in [&self.reads, &self.writes].into_iter().enumerate() {
            let mut m = self.activated[k];
            while m != 0 {
                let b = m.trailing_zeros() as usize;
                m &= m - 1;
                let keep = q
                    .bank(b)
                    .first()
                    .is_some_and(|e| self.pc.open_row_raw(b) == e.row);
                if !keep {
                    self.activated[k] &= !(1u64 << b);
                }
            }
        }
    }

    /// Whether the controller should be serving the write queue, given the queues now.
    #[inline]
    pub(super) fn wants_drain(&self) -> bool {
        let w = self.writes.len();
        if self.draining {
            !(w == 0 || (w <= self.cfg.write_low && !self.reads.is_empty()))
        } else {
            w > 0 && (w >= self.cfg.write_high || self.reads.is_empty())
        }
    }

    /// Enters or leaves the write-drain mode by the watermarks.
    #[inline]
    pub(super) fn update_drain_mode(&mut self) {
        self.draining = self.wants_drain();
    }

    /// Appends an issued command to the log, when logging.
    #[inline]
    pub(super) fn record(&mut self, cmd: &Command, at: Cycle) {
        if let Some(log) = &mut self.log {
            log.push(LoggedCommand { at, cmd: *cmd });
        }
    }

    /// Issues a command the scheduler picked (checked in debug builds) and logs it.
    #[inline]
    pub(super) fn issue_internal(&mut self, cmd: &Command, at: Cycle) {
        if self.cfg.checked_issue {
            if let Err(e) = self.pc.issue(cmd, at) {
                // The scheduler only picks commands whose gates it has checked; reaching
                // this is a bug in the scheduler, not a property of the input.
                panic!("memory controller scheduled an illegal command: {e}");
            }
        } else {
            self.pc.issue_unchecked(cmd, at);
        }
        self.record(cmd, at);
    }

    /// Forgets what the scheduler learnt about quiet periods: something changed that can
    /// make a command ready earlier than the passes last computed.
    #[inline]
    pub(super) fn invalidate(&mut self) {
        self.column_quiet_until = 0;
        self.row_quiet_until = 0;
    }
}
