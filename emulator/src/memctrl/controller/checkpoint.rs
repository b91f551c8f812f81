//! A [`Controller`]'s checkpoint: the changing state (queues, banks, refresh,
//! statistics) that a controller made with the same preset and settings takes over to
//! carry on exactly where the saved one was.

use crate::hbm::{Cycle, PseudoChannel};

use super::super::arbiter::Grant;
use super::super::refresh::{RefreshBlock, Refresher};
use super::super::scheduler::BankQueues;
use super::super::stats::ControllerStats;
use super::Controller;

/// The changing state of a [`Controller`] (its queues, banks, refresh, statistics), for a
/// checkpoint: what a controller made with the same preset and settings needs to carry on
/// exactly where this one was. Only for a controller with the default class-blind,
/// stateless arbiter, no observer and no command log (`nmcp mem`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ControllerState {
    pc: PseudoChannel,
    reads: BankQueues,
    writes: BankQueues,
    draining: bool,
    refresh: Refresher,
    nmc_owned: bool,
    stats: ControllerStats,
    /// The occupancy histograms' last change (read, write queue).
    occupancy_since: [Cycle; 2],
    column_quiet_until: Cycle,
    row_quiet_until: Cycle,
    last_block: RefreshBlock,
    last_write: bool,
    activated: [u64; 2],
    last_grant: Grant,
}

impl Controller {
    /// The changing state, or why it cannot be taken (a stateful arbiter, an observer or
    /// a command log attached: those are not saved).
    ///
    /// # Errors
    /// What prevents it.
    pub fn state(&self) -> Result<ControllerState, String> {
        if !self.arbiter_blind {
            return Err(format!(
                "pseudo-channel {}: arbiter {} keeps state a checkpoint does not save",
                self.index,
                self.arbiter.name()
            ));
        }
        if self.observed.is_some() || self.log.is_some() {
            return Err(format!(
                "pseudo-channel {}: an observer or command log is attached",
                self.index
            ));
        }
        Ok(ControllerState {
            pc: self.pc.clone(),
            reads: self.reads.clone(),
            writes: self.writes.clone(),
            draining: self.draining,
            refresh: self.refresh.clone(),
            nmc_owned: self.nmc_owned,
            stats: self.stats.clone(),
            occupancy_since: [
                self.stats.read_queue.since(),
                self.stats.write_queue.since(),
            ],
            column_quiet_until: self.column_quiet_until,
            row_quiet_until: self.row_quiet_until,
            last_block: self.last_block,
            last_write: self.last_write,
            activated: self.activated,
            last_grant: self.last_grant,
        })
    }

    /// Takes over a state from [`Controller::state`] of a controller with the same preset
    /// and settings; `slots` is how many request slots the memory system holds (queue
    /// entries must refer to one). Nothing changes if it is refused.
    ///
    /// # Errors
    /// What does not fit (timing, bank count, queue lengths, refresh setup).
    pub fn restore(&mut self, state: ControllerState, slots: usize) -> Result<(), String> {
        // A queue holds up to its depth plus the activated entries (one per bank).
        let depth = self.cfg.queue_depth + self.pc.banks();
        let bank_mask = match self.pc.banks() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        let fits = self.arbiter_blind
            && self.observed.is_none()
            && self.pc.same_shape(&state.pc)
            && self.reads.same_shape(&state.reads, depth, slots)
            && self.writes.same_shape(&state.writes, depth, slots)
            && self.refresh.same_shape(&state.refresh)
            && state.stats.read_queue.cycles.len() == self.stats.read_queue.cycles.len()
            && state.stats.write_queue.cycles.len() == self.stats.write_queue.cycles.len()
            && state.activated.iter().all(|&m| m & !bank_mask == 0);
        if !fits {
            return Err(format!(
                "pseudo-channel {}: the saved state does not fit this preset and settings",
                self.index
            ));
        }
        self.pc = state.pc;
        self.reads = state.reads;
        self.writes = state.writes;
        self.draining = state.draining;
        self.refresh = state.refresh;
        self.nmc_owned = state.nmc_owned;
        self.stats = state.stats;
        self.stats.read_queue.set_since(state.occupancy_since[0]);
        self.stats.write_queue.set_since(state.occupancy_since[1]);
        self.column_quiet_until = state.column_quiet_until;
        self.row_quiet_until = state.row_quiet_until;
        self.last_block = state.last_block;
        self.last_write = state.last_write;
        self.activated = state.activated;
        self.last_grant = state.last_grant;
        Ok(())
    }
}
