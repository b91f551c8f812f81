//! FR-FCFS: among the requests of the active queue whose next command may issue now,
//! column commands to open rows ("first ready" row hits) go first, oldest first; then the
//! oldest request's ACT or PRE. A bank is not precharged while a queued request still hits
//! its open row, so a conflict cannot steal a row from older hits that are merely waiting
//! for tCCD.
//!
//! The queues are kept in arrival order, so "oldest" is the lowest index. Each pass also
//! lowers `wake` to a cycle at or before which something could next become ready, so the
//! controller can sleep until then instead of being stepped every cycle. Pseudo-channel-
//! wide gates (data bus, tRRD_S, tFAW, command buses) are checked once per pass before
//! any entry is looked at: while they are closed the queue is not scanned at all.

use crate::hbm::config::PagePolicy;
use crate::hbm::timing::CLOSED_ROW;
use crate::hbm::{Command, Cycle, PseudoChannel};

use super::refresh::RefreshBlock;
use super::stats::RowClass;

/// One queued request part: one or two column accesses in the same row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The front end's tag, returned on completion.
    pub tag: u32,
    /// Row.
    pub row: u32,
    /// First cycle the scheduler may act on this entry.
    pub ready: Cycle,
    /// First column access.
    pub col: u32,
    /// Bank index within the pseudo-channel.
    pub bank: u8,
    /// Column accesses still to issue.
    pub bursts_left: u8,
    /// Column accesses in total.
    pub bursts: u8,
    /// How the entry found its row.
    pub class: RowClass,
}

/// Bit mask of banks any queued entry targets.
pub fn wanted_banks(queues: [&[Entry]; 2]) -> u64 {
    queues
        .iter()
        .flat_map(|q| q.iter())
        .fold(0u64, |m, e| m | 1u64 << e.bank)
}

/// Per-step memo of which banks have a queued row hit, filled in lazily so a queue full
/// of conflicts costs one scan per bank rather than one per entry.
#[derive(Debug, Default)]
struct HitMemo {
    checked: u64,
    hit: u64,
}

impl HitMemo {
    /// Whether any queued entry hits `row` (the open row) in `bank`.
    #[inline]
    fn has_hit(&mut self, queue: &[Entry], bank: u8, row: u32) -> bool {
        let bit = 1u64 << bank;
        if self.checked & bit == 0 {
            self.checked |= bit;
            if queue.iter().any(|e| e.bank == bank && e.row == row) {
                self.hit |= bit;
            }
        }
        self.hit & bit != 0
    }
}

/// Picks the oldest row hit whose column command may issue at `now`.
#[inline]
pub fn pick_column(
    queue: &[Entry],
    pc: &PseudoChannel,
    now: Cycle,
    write: bool,
    block: RefreshBlock,
    wake: &mut Cycle,
) -> Option<usize> {
    let floor = pc.column_floor(write);
    if floor > now {
        *wake = (*wake).min(floor);
        return None;
    }
    // Only the oldest hit of each bank can be the oldest ready one: younger hits to the
    // same bank face the same gates and become visible later.
    let mut seen = 0u64;
    for (i, e) in queue.iter().enumerate() {
        let b = usize::from(e.bank);
        if seen & (1u64 << b) != 0 || pc.open_row_raw(b) != e.row {
            continue;
        }
        seen |= 1u64 << b;
        if e.ready > now {
            *wake = (*wake).min(e.ready);
            continue;
        }
        if block.blocks(b) {
            continue;
        }
        let t = pc.earliest_column(b, write);
        if t <= now {
            return Some(i);
        }
        *wake = (*wake).min(t);
    }
    None
}

/// The oldest ACT or PRE that may issue at `now`, for a request or (closed page) for an
/// open row nobody hits any more. Returns the command and the entry it serves.
#[inline]
pub fn pick_row(
    queue: &[Entry],
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    policy: PagePolicy,
    wake: &mut Cycle,
) -> Option<(Command, Option<usize>)> {
    let bus = pc.row_bus_free();
    if bus > now {
        *wake = (*wake).min(bus);
        return None;
    }
    let act_floor = pc.act_floor();
    let mut memo = HitMemo::default();
    // A row command serves a bank; only the oldest request of each bank that needs one
    // is considered (younger ones face the same gates and become visible later).
    let mut seen = 0u64;
    for (i, e) in queue.iter().enumerate() {
        let b = usize::from(e.bank);
        if seen & (1u64 << b) != 0 {
            continue;
        }
        let raw = pc.open_row_raw(b);
        if raw == e.row {
            continue;
        }
        let open = (raw != CLOSED_ROW).then_some(raw);
        seen |= 1u64 << b;
        let (cmd, t) = match open {
            Some(r) => {
                let t = pc.earliest_pre(b).max(e.ready);
                if t <= now && memo.has_hit(queue, e.bank, r) {
                    // Older or younger hits go first; their column gates set the wake.
                    continue;
                }
                (
                    Command::Pre {
                        bank: pc.bank_id(b),
                    },
                    t,
                )
            }
            None => {
                if block.blocks(b) {
                    continue;
                }
                if act_floor > now {
                    *wake = (*wake).min(act_floor.max(e.ready));
                    continue;
                }
                (
                    Command::Act {
                        bank: pc.bank_id(b),
                        row: e.row,
                    },
                    pc.earliest_act(b).max(e.ready),
                )
            }
        };
        if t <= now {
            return Some((cmd, Some(i)));
        }
        *wake = (*wake).min(t);
    }
    if policy == PagePolicy::Closed && pc.any_open() {
        for b in 0..pc.banks() {
            let Some(r) = pc.open_row(b) else { continue };
            if memo.has_hit(queue, b as u8, r) {
                continue;
            }
            let t = pc.earliest_pre(b);
            if t <= now {
                return Some((
                    Command::Pre {
                        bank: pc.bank_id(b),
                    },
                    None,
                ));
            }
            *wake = (*wake).min(t);
        }
    }
    None
}
