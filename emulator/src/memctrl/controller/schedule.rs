//! One step of a [`Controller`]: the column pass (look-ahead window first, then FR-FCFS
//! over the queue the drain mode picks, in the arbiter's class tiers), the row pass
//! (refresh first, then FR-FCFS), serving a column access, and telling a stateful
//! arbiter and an observer what issued.

use crate::hbm::config::{PagePolicy, RefreshMode};
use crate::hbm::timing::CLOSED_ROW;
use crate::hbm::{Command, CommandKind, Cycle, PseudoChannel};

use super::super::arbiter::{ArbiterView, ClassSet, Issued};
use super::super::observer::IssuedColumn;
use super::super::refresh::RefreshBlock;
use super::super::request::TrafficClass;
use super::super::scheduler::{
    pick_activated, pick_column, pick_row, wanted_banks, BankQueues, Everyone, PartKind, Slot,
};
use super::super::stats::RowClass;
use super::{Completion, Controller};

/// [`pick_column`] among the first tier's classes, then (if nothing can issue) among the
/// second's.
#[inline(never)]
fn pick_column_tiered(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    drain: bool,
    block: RefreshBlock,
    (first, then): (ClassSet, ClassSet),
    wake: &mut Cycle,
) -> Option<Slot> {
    pick_column(queue, pc, now, drain, block, first, wake).or_else(|| {
        if then == first {
            None
        } else {
            pick_column(queue, pc, now, drain, block, then, wake)
        }
    })
}

/// [`pick_row`] among the first tier's classes, then among the second's.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn pick_row_tiered(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    policy: PagePolicy,
    (first, then): (ClassSet, ClassSet),
    protect: u64,
    wake: &mut Cycle,
) -> Option<(Command, Option<Slot>)> {
    let p = pick_row(queue, pc, now, block, policy, first, protect, wake);
    if p.is_none() && then != first {
        pick_row(queue, pc, now, block, policy, then, protect, wake)
    } else {
        p
    }
}

/// Bit b set when bank b has a row open: [`PseudoChannel::open_mask`] read off the packed
/// open-row copy (one cache line) instead of the per-bank timing records (one line per
/// bank or two), as the scheduler's passes do. Same mask.
#[inline]
fn open_mask(pc: &PseudoChannel) -> u64 {
    (0..pc.banks().min(64))
        .filter(|&b| pc.open_row_raw(b) != CLOSED_ROW)
        .fold(0, |m, b| m | 1u64 << b)
}

impl Controller {
    /// Issues what can issue at `now` and returns the next cycle worth stepping at (always
    /// later than `now`). Finished request parts are appended to `done`.
    pub fn step(&mut self, now: Cycle, done: &mut Vec<Completion>) -> Cycle {
        if self.arbiter_blind {
            self.step_with::<false>(now, done)
        } else {
            self.step_with::<true>(now, done)
        }
    }

    /// [`Controller::step`], compiled once without the arbiter (`ARBITRATED` false: the
    /// class-blind default, which is the plain FR-FCFS scan) and once with it.
    #[inline(always)]
    fn step_with<const ARBITRATED: bool>(
        &mut self,
        now: Cycle,
        done: &mut Vec<Completion>,
    ) -> Cycle {
        if self.nmc_owned {
            return Cycle::MAX;
        }
        self.update_drain_mode();
        // Serve the write queue (writes and updates) while draining, else the read queue.
        let drain = self.draining;
        let mut wake = Cycle::MAX;
        let per_bank_due =
            self.cfg.refresh == RefreshMode::PerBank && now >= self.refresh.next_due();
        let (wanted, open) = if per_bank_due {
            (
                wanted_banks([&self.reads, &self.writes]),
                open_mask(&self.pc),
            )
        } else {
            (0, 0)
        };
        let block = self.refresh.block(now, wanted, open);
        // The classes to serve, in two tiers (the class-blind default never asks).
        let tiers = if ARBITRATED {
            self.consult_arbiter(now, drain, &mut wake)
        } else {
            (ClassSet::ALL, ClassSet::ALL)
        };
        if block != self.last_block || drain != self.last_write {
            self.last_block = block;
            self.last_write = drain;
            self.invalidate();
        }

        if now >= self.column_quiet_until {
            let mut w = Cycle::MAX;
            // The look-ahead window first (Ramulator 2 serves its active buffer first).
            let mut pick = None;
            if self.activated != [0, 0] {
                pick = pick_activated(
                    [&self.reads, &self.writes],
                    self.activated,
                    &self.pc,
                    now,
                    block,
                    &mut w,
                );
            }
            if pick.is_none() {
                let queue = if drain { &self.writes } else { &self.reads };
                pick = if ARBITRATED {
                    pick_column_tiered(queue, &self.pc, now, drain, block, tiers, &mut w)
                } else {
                    pick_column(queue, &self.pc, now, drain, block, Everyone, &mut w)
                }
                .map(|i| (i, drain));
            }
            match pick {
                Some((i, write)) => {
                    if self.serve_column::<ARBITRATED>(i, write, now, done) {
                        // Fewer hits may free a PRE.
                        self.row_quiet_until = 0;
                    }
                    self.column_quiet_until = 0;
                    // The next column command cannot come before the bus-wide gates open.
                    let floor = if write == drain {
                        self.pc.column_floor(drain)
                    } else {
                        now + 1
                    };
                    wake = wake.min(floor);
                }
                None => self.column_quiet_until = w,
            }
            wake = wake.min(w);
        } else {
            wake = wake.min(self.column_quiet_until);
        }

        // Row command bus: refresh first, then FR-FCFS.
        let mut row_done = false;
        if let Some(cmd) = self.refresh.command(now, &self.pc) {
            let t = self.pc.earliest(&cmd);
            if t <= now {
                self.issue_internal(&cmd, now);
                if ARBITRATED {
                    self.tell_arbiter(&cmd, None, false, now);
                }
                if matches!(cmd.kind(), CommandKind::Ref | CommandKind::RefPb) {
                    self.refresh.refreshed(&cmd, &self.pc);
                }
                if self.activated != [0, 0] {
                    self.revalidate_activated();
                }
                self.recount_hits();
                self.invalidate();
                row_done = true;
                wake = now + 1;
            } else {
                wake = wake.min(t);
            }
        } else {
            wake = wake.min(self.refresh.next_due());
        }
        if !row_done && now >= self.row_quiet_until {
            let mut w = Cycle::MAX;
            let queue = if drain { &self.writes } else { &self.reads };
            let policy = self.cfg.page_policy;
            let protect = self.activated[0] | self.activated[1];
            let pick = if ARBITRATED {
                pick_row_tiered(queue, &self.pc, now, block, policy, tiers, protect, &mut w)
            } else {
                pick_row(
                    queue, &self.pc, now, block, policy, Everyone, protect, &mut w,
                )
            };
            match pick {
                Some((cmd, entry)) => {
                    self.issue_internal(&cmd, now);
                    self.rows_changed(&cmd);
                    let mut kind = None;
                    if let Some(i) = entry {
                        let q = if drain {
                            &mut self.writes
                        } else {
                            &mut self.reads
                        };
                        if let Some(e) = q.get_mut(i) {
                            kind = Some(e.kind);
                            match cmd {
                                Command::Pre { .. } => e.row_class = RowClass::Conflict,
                                Command::Act { .. } if e.row_class == RowClass::Hit => {
                                    e.row_class = RowClass::Miss
                                }
                                _ => {}
                            }
                        }
                        if let Command::Act { .. } = cmd {
                            // The row was opened for this request (first of its bank).
                            if self.cfg.activated_per_bank > 0 && i.1 == 0 {
                                self.activated[usize::from(drain)] |= 1u64 << i.0;
                            }
                        }
                    }
                    if ARBITRATED {
                        self.tell_arbiter(&cmd, kind.map(PartKind::class), false, now);
                    }
                    // Other banks' row candidates only move later when a command issues,
                    // so `w` still bounds them; the served bank's next row command is its
                    // PRE after an ACT, its ACT after a PRE. (Closed page: look again.)
                    let served = match cmd {
                        Command::Act { bank, .. } => {
                            self.pc.bank_index(bank).map(|b| self.pc.earliest_pre(b))
                        }
                        Command::Pre { bank } => {
                            self.pc.bank_index(bank).map(|b| self.pc.earliest_act(b))
                        }
                        _ => None,
                    };
                    self.row_quiet_until = match (policy, entry, served) {
                        (PagePolicy::Open, Some(_), Some(t)) => w.min(t),
                        _ => 0,
                    };
                    // An ACT creates row hits, ready no earlier than the bank's column
                    // gates; a PRE only removes hits.
                    if let Command::Act { bank, .. } = cmd {
                        if let Some(b) = self.pc.bank_index(bank) {
                            let hit_at = self
                                .pc
                                .earliest_column(b, false)
                                .min(self.pc.earliest_column(b, true));
                            self.column_quiet_until = self.column_quiet_until.min(hit_at);
                        }
                    }
                    wake = now + 1;
                }
                None => self.row_quiet_until = w,
            }
            wake = wake.min(w);
        } else if !row_done {
            wake = wake.min(self.row_quiet_until);
        }
        // A controller re-evaluates its drain mode every cycle: if what was issued (or
        // queued) flips it, step again next cycle.
        if self.wants_drain() != self.draining {
            now + 1
        } else {
            wake.max(now + 1)
        }
    }

    /// Asks a (not class-blind) arbiter for its grant: forgets the quiet periods if the
    /// grant changed, lowers `wake` to the cycle the grant changes by itself, and returns
    /// the two tiers.
    #[inline(never)]
    fn consult_arbiter(
        &mut self,
        now: Cycle,
        drain: bool,
        wake: &mut Cycle,
    ) -> (ClassSet, ClassSet) {
        let view = ArbiterView {
            now,
            draining: drain,
            reads: self.reads.class_lens(),
            writes: self.writes.class_lens(),
            depth: self.cfg.queue_depth,
        };
        let g = self.arbiter.grant(&view);
        *wake = (*wake).min(g.until.max(now + 1));
        if !g.same_classes(&self.last_grant) {
            self.last_grant = g;
            self.invalidate();
        }
        (g.first, g.then.union(g.first))
    }

    /// Tells a stateful arbiter about an issued command.
    fn tell_arbiter(
        &mut self,
        cmd: &Command,
        class: Option<TrafficClass>,
        completes: bool,
        at: Cycle,
    ) {
        self.arbiter.on_issue(&Issued {
            at,
            kind: cmd.kind(),
            class,
            completes,
        });
    }

    /// Issues the next column access of entry `i` of the write queue (`drain`) or the read
    /// queue; returns whether the entry finished.
    fn serve_column<const ARBITRATED: bool>(
        &mut self,
        i: Slot,
        drain: bool,
        now: Cycle,
        done: &mut Vec<Completion>,
    ) -> bool {
        let q = if drain {
            &mut self.writes
        } else {
            &mut self.reads
        };
        let Some(e) = q.get_mut(i) else {
            return false;
        };
        let (row, col) = (e.row, e.col);
        let bank = self.pc.bank_id(usize::from(e.bank));
        let kind = e.kind;
        let cmd = if !drain {
            Command::Rd { bank, row, col }
        } else if kind.is_update() {
            Command::Update { bank, row, col }
        } else {
            Command::Wr { bank, row, col }
        };
        // Copy the entry before updating it: a narrow store followed by a wide load of the
        // same bytes defeats store-to-load forwarding (measured: 12 % of `step` on a
        // stream when the copy came after the update).
        let entry = *e;
        let finished = entry.bursts_left == 1;
        if !finished {
            e.col += 1;
            e.bursts_left -= 1;
        }
        self.issue_internal(&cmd, now);
        let t = self.pc.timing();
        let data_end = now + if drain { t.cwl + t.bl } else { t.cl + t.bl };
        if drain {
            self.stats.bytes_written += self.bytes_per_column;
        } else {
            self.stats.bytes_read += self.bytes_per_column;
        }
        self.stats.bytes_by.add(
            kind.access_index(),
            kind.class_index(),
            self.bytes_per_column,
        );
        if finished {
            if i.1 == 0 {
                self.activated[usize::from(drain)] &= !(1u64 << i.0);
            }
            let q = if drain {
                &mut self.writes
            } else {
                &mut self.reads
            };
            let len = q.len();
            q.remove(i, row);
            if drain {
                self.stats.write_queue.record(now, len);
                self.stats.writes += 1;
            } else {
                self.stats.read_queue.record(now, len);
                self.stats.reads += 1;
            }
            self.stats
                .parts_by
                .add(kind.access_index(), kind.class_index(), 1);
            self.stats.classify(entry.row_class);
            done.push(Completion {
                tag: entry.tag,
                at: data_end,
            });
        }
        if ARBITRATED {
            self.tell_arbiter(&cmd, Some(kind.class()), finished, now);
        }
        if let Some(o) = &mut self.observed {
            o.observer.on_issue(&IssuedColumn {
                at: now,
                pseudo_channel: self.index,
                bank,
                row,
                col,
                access: kind.access(),
                class: kind.class(),
                source: entry.source.get(),
                addr: entry.addr,
                tag: entry.tag,
                last: finished,
            });
        }
        finished
    }
}
