//! Sharing a [`Controller`]'s pseudo-channel with an NMC engine (see the controller's
//! module documentation): handing the channel over and back, the engine's refresh, and
//! the engine's command issue through the controller's timing state and log.

use crate::hbm::{Command, CommandKind, Cycle, TimingError};

use super::{Controller, LoggedCommand};

impl Controller {
    /// Stops normal scheduling at `now` so an NMC engine can own the pseudo-channel (see
    /// the module documentation).
    pub fn acquire_for_nmc(&mut self, now: Cycle) {
        self.nmc_owned = true;
        self.refresh.nmc_acquire(now);
    }

    /// Hands the pseudo-channel back to normal scheduling; returns the cycle to step at.
    pub fn release_from_nmc(&mut self, now: Cycle) -> Cycle {
        self.nmc_owned = false;
        self.refresh.nmc_release(now);
        self.recount_hits();
        self.revalidate_activated();
        self.invalidate();
        now
    }

    /// Whether an NMC engine owns the pseudo-channel.
    pub fn is_nmc_owned(&self) -> bool {
        self.nmc_owned
    }

    /// Whether the owning NMC engine must refresh (all banks) before a command at `now`.
    #[inline]
    pub fn nmc_refresh_due(&self, now: Cycle) -> bool {
        self.refresh.nmc_due(now)
    }

    /// Issues `cmd` for the owning NMC engine at the earliest cycle at or after
    /// `not_before` that every gate allows, and returns that cycle. The engine tracks the
    /// banks' rows itself, so this is the timing state's fast path (debug builds check
    /// every command against the checked path); the command log and counters see it like
    /// any other command. A REF or AB-SA-REF issued here counts as the engine's refresh.
    #[inline(always)]
    pub fn nmc_issue(&mut self, cmd: &Command, not_before: Cycle) -> Cycle {
        let at = self.pc.issue_at_earliest(cmd, not_before);
        if let Some(log) = &mut self.log {
            log.push(LoggedCommand { at, cmd: *cmd });
        }
        if matches!(cmd, Command::Ref | Command::AbSaRef { .. }) {
            self.refresh.nmc_refreshed();
        }
        at
    }

    /// The refresh command due at `now`, if any (for an NMC engine that owns the channel).
    pub fn pending_refresh(&self, now: Cycle) -> Option<Command> {
        self.refresh.command(now, &self.pc)
    }

    /// Earliest cycle of a command an NMC engine wants to issue.
    pub fn earliest_external(&self, cmd: &Command) -> Cycle {
        self.pc.earliest(cmd)
    }

    /// Issues a command on behalf of an NMC engine, under full timing checks.
    pub fn issue_external(&mut self, cmd: &Command, at: Cycle) -> Result<(), TimingError> {
        self.pc.issue(cmd, at)?;
        self.recount_hits();
        self.revalidate_activated();
        self.invalidate();
        self.record(cmd, at);
        if matches!(cmd.kind(), CommandKind::Ref | CommandKind::RefPb) {
            self.refresh.refreshed(cmd, &self.pc);
        }
        Ok(())
    }
}
