//! When refresh is due and which command performs it.
//!
//! All-bank mode issues REF every tREFI; per-bank mode issues one REFpb every
//! tREFI / banks, so every bank is refreshed once per tREFI. Due times are computed from
//! the count of refreshes done (k x tREFI / banks), not accumulated, so integer division
//! never drifts. Per-bank targets are picked, within each round of all banks, preferring a
//! bank no queued request wants (the controller tells which), so refresh hides behind
//! traffic to the other banks; the round guarantees that no bank is skipped.

use crate::hbm::config::RefreshMode;
use crate::hbm::{Command, Cycle, PseudoChannel};

/// Refresh bookkeeping of one pseudo-channel.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Refresher {
    mode: RefreshMode,
    trefi: Cycle,
    banks: usize,
    done: u64,
    next_due: Cycle,
    target: Option<usize>,
    round_done: u64,
    /// While an NMC engine owns the pseudo-channel: when its next all-bank REF is due.
    nmc_due: Cycle,
}

/// What an outstanding refresh blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RefreshBlock {
    /// An all-bank refresh is due: no new ACT or column command.
    pub all: bool,
    /// A per-bank refresh is due for this bank: no new ACT or column command to it.
    pub bank: Option<usize>,
}

impl RefreshBlock {
    /// Whether commands for the request's bank must wait.
    #[inline]
    pub fn blocks(&self, bank: usize) -> bool {
        self.all || self.bank == Some(bank)
    }
}

impl Refresher {
    /// Whether `other` (a restored state) has this refresher's mode, interval and banks.
    pub fn same_shape(&self, other: &Refresher) -> bool {
        self.mode == other.mode
            && self.trefi == other.trefi
            && self.banks == other.banks
            && other.target.is_none_or(|t| t < self.banks)
    }

    /// Refresh for a pseudo-channel of `banks` banks.
    pub fn new(mode: RefreshMode, trefi: Cycle, banks: usize) -> Self {
        let mut r = Refresher {
            mode,
            trefi,
            banks,
            done: 0,
            next_due: 0,
            target: None,
            round_done: 0,
            nmc_due: Cycle::MAX,
        };
        r.next_due = r.due_time(1);
        r.nmc_due = if mode == RefreshMode::Off {
            Cycle::MAX
        } else {
            trefi
        };
        r
    }

    fn due_time(&self, k: u64) -> Cycle {
        match self.mode {
            RefreshMode::AllBank => k * self.trefi,
            RefreshMode::PerBank => k * self.trefi / self.banks as u64,
            RefreshMode::Off => Cycle::MAX,
        }
    }

    /// The refresh mode.
    pub fn mode(&self) -> RefreshMode {
        self.mode
    }

    /// When the next refresh falls due (or is already due).
    pub fn next_due(&self) -> Cycle {
        self.next_due
    }

    /// What a due refresh blocks at `now`; picks the per-bank target if needed.
    /// `wanted` has bit b set when a queued request targets bank b, `open` when bank b
    /// has a row open. The target is, in order of preference, a bank nobody wants that is
    /// already precharged, one nobody wants, or the lowest left in the round.
    pub fn block(&mut self, now: Cycle, wanted: u64, open: u64) -> RefreshBlock {
        if now < self.next_due {
            return RefreshBlock::default();
        }
        match self.mode {
            RefreshMode::Off => RefreshBlock::default(),
            RefreshMode::AllBank => RefreshBlock {
                all: true,
                bank: None,
            },
            RefreshMode::PerBank => {
                let target = match self.target {
                    Some(t) => t,
                    None => {
                        let all = if self.banks >= 64 {
                            u64::MAX
                        } else {
                            (1u64 << self.banks) - 1
                        };
                        let left = all & !self.round_done;
                        let idle = left & !wanted;
                        let closed_idle = idle & !open;
                        let pick = [closed_idle, idle, left]
                            .into_iter()
                            .find(|m| *m != 0)
                            .unwrap_or(left);
                        let t = pick.trailing_zeros() as usize;
                        self.target = Some(t);
                        t
                    }
                };
                RefreshBlock {
                    all: false,
                    bank: Some(target),
                }
            }
        }
    }

    /// The next command the due refresh needs, if one is due: a precharge of what is open,
    /// then the refresh itself.
    pub fn command(&self, now: Cycle, pc: &PseudoChannel) -> Option<Command> {
        if now < self.next_due {
            return None;
        }
        match self.mode {
            RefreshMode::Off => None,
            RefreshMode::AllBank => Some(if pc.any_open() {
                Command::PreAll
            } else {
                Command::Ref
            }),
            RefreshMode::PerBank => {
                let t = self.target?;
                let bank = pc.bank_id(t);
                Some(if pc.open_row(t).is_some() {
                    Command::Pre { bank }
                } else {
                    Command::RefPb { bank }
                })
            }
        }
    }

    /// Records that a REF or REFpb issued.
    pub fn refreshed(&mut self, cmd: &Command, pc: &PseudoChannel) {
        match (*cmd, self.mode) {
            (Command::Ref, RefreshMode::AllBank) => {}
            (Command::RefPb { bank }, RefreshMode::PerBank) => {
                if let Some(i) = pc.bank_index(bank) {
                    self.round_done |= 1 << i;
                }
                if self.round_done.count_ones() as usize >= self.banks {
                    self.round_done = 0;
                }
                self.target = None;
            }
            _ => return,
        }
        self.done += 1;
        self.next_due = self.due_time(self.done + 1);
    }

    // --- While an NMC engine owns the pseudo-channel -----------------------------------
    //
    // The engine broadcasts to every bank, so it refreshes every bank at once: an
    // all-bank REF every tREFI, on a grid of tREFI multiples from cycle 0, whatever the
    // controller's own mode. The per-bank round of normal operation pauses meanwhile and
    // restarts from the time the channel is handed back (every bank was refreshed within
    // the last tREFI then, so no catch-up burst is owed).

    /// The channel passes to an NMC engine at `now`: the next all-bank refresh falls on
    /// the first tREFI multiple after the last one normal operation covered.
    pub fn nmc_acquire(&mut self, now: Cycle) {
        if self.mode == RefreshMode::Off {
            return;
        }
        if self.nmc_due < now {
            let k = now / self.trefi.max(1) + 1;
            self.nmc_due = k * self.trefi;
        }
    }

    /// Whether the engine must refresh before its next command at `now`.
    #[inline]
    pub fn nmc_due(&self, now: Cycle) -> bool {
        now >= self.nmc_due
    }

    /// The engine issued its all-bank REF.
    #[inline]
    pub fn nmc_refreshed(&mut self) {
        self.nmc_due = self.nmc_due.saturating_add(self.trefi);
        if self.mode == RefreshMode::AllBank {
            self.done += 1;
            self.next_due = self.due_time(self.done + 1);
        }
    }

    /// Normal operation resumes at `now`.
    pub fn nmc_release(&mut self, now: Cycle) {
        if self.mode == RefreshMode::PerBank {
            self.done = now.saturating_mul(self.banks as u64) / self.trefi.max(1);
            self.next_due = self.due_time(self.done + 1);
            self.round_done = 0;
            self.target = None;
        }
    }
}
