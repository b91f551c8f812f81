//! FR-FCFS: among the requests of the active queue whose next command may issue now,
//! column commands to open rows ("first ready" row hits) go first, oldest first; then the
//! oldest request's ACT or PRE. A bank is not precharged while a queued request still hits
//! its open row, so a conflict cannot steal a row from older hits that are merely waiting
//! for tCCD.
//!
//! The queues are kept in arrival order, so "oldest" is the lowest index. Each pass also
//! computes the earliest future cycle at which something could become ready, so the
//! controller can sleep until then instead of being stepped every cycle.

use crate::hbm::config::{PagePolicy, MAX_BANKS_PER_PSEUDO_CHANNEL};
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

/// Per-bank count of queued entries that hit the bank's open row.
pub type HitCounts = [u16; MAX_BANKS_PER_PSEUDO_CHANNEL as usize];

/// Bit mask of banks any queued entry targets.
pub fn wanted_banks(queues: [&[Entry]; 2]) -> u64 {
    queues
        .iter()
        .flat_map(|q| q.iter())
        .fold(0u64, |m, e| m | 1u64 << e.bank)
}

/// First pass: counts row hits per bank and picks the oldest hit whose column command may
/// issue at `now`.
#[inline]
pub fn pick_column(
    queue: &[Entry],
    pc: &PseudoChannel,
    now: Cycle,
    write: bool,
    block: RefreshBlock,
    hits: &mut HitCounts,
    wake: &mut Cycle,
) -> Option<usize> {
    let mut pick = None;
    for (i, e) in queue.iter().enumerate() {
        let b = usize::from(e.bank);
        if pc.open_row(b) != Some(e.row) {
            continue;
        }
        if let Some(h) = hits.get_mut(b) {
            *h += 1;
        }
        if e.ready > now {
            *wake = (*wake).min(e.ready);
            continue;
        }
        if pick.is_some() || block.blocks(b) {
            continue;
        }
        let t = pc.earliest_column(b, write);
        if t <= now {
            pick = Some(i);
        } else {
            *wake = (*wake).min(t);
        }
    }
    pick
}

/// Second pass: the oldest ACT or PRE that may issue at `now`, for a request or (closed
/// page) for an open row nobody hits any more. Returns the command and the entry it serves.
#[inline]
pub fn pick_row(
    queue: &[Entry],
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    hits: &HitCounts,
    policy: PagePolicy,
    wake: &mut Cycle,
) -> Option<(Command, Option<usize>)> {
    for (i, e) in queue.iter().enumerate() {
        let b = usize::from(e.bank);
        let (cmd, t) = match pc.open_row(b) {
            Some(r) if r == e.row => continue,
            Some(_) => {
                if hits.get(b).copied().unwrap_or(0) > 0 {
                    continue;
                }
                (
                    Command::Pre {
                        bank: pc.bank_id(b),
                    },
                    pc.earliest_pre(b),
                )
            }
            None => {
                if block.blocks(b) {
                    continue;
                }
                (
                    Command::Act {
                        bank: pc.bank_id(b),
                        row: e.row,
                    },
                    pc.earliest_act(b),
                )
            }
        };
        let t = t.max(e.ready);
        if t <= now {
            return Some((cmd, Some(i)));
        }
        *wake = (*wake).min(t);
    }
    if policy == PagePolicy::Closed && pc.any_open() {
        for b in 0..pc.banks() {
            if pc.open_row(b).is_some() && hits.get(b).copied().unwrap_or(0) == 0 {
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
    }
    None
}
