//! FR-FCFS: among the requests of the active queue whose next command may issue now,
//! column commands to open rows ("first ready" row hits) go first, oldest first; then the
//! oldest request's ACT or PRE. A bank is not precharged while a queued request still hits
//! its open row, so a conflict cannot steal a row from older hits that are merely waiting
//! for tCCD.
//!
//! Queues are kept per bank ([`BankQueues`]), each in arrival order, with a sequence
//! number for age across banks. Within a bank only the oldest hit can be the column
//! candidate and only the oldest non-hit the row candidate (younger entries of the same
//! bank face the same gates and become visible later), so a pass costs one look per busy
//! bank, not one per queued entry. Each pass also lowers `wake` to a cycle at or before
//! which something could next become ready, so the controller can sleep until then.
//! Pseudo-channel-wide gates (data bus, tRRD_S, tFAW, command buses) are checked once per
//! pass before any bank is looked at.
//!
//! Every entry carries its traffic class. A pass looks only at the entries its [`Admit`]
//! filter lets through (the classes an arbiter granted); [`Everyone`] admits all, and
//! compiles to the class-blind pass.

use crate::hbm::config::PagePolicy;
use crate::hbm::timing::CLOSED_ROW;
use crate::hbm::{Command, Cycle, PseudoChannel};

use nmcp_isa::nmc::DType;

use super::arbiter::ClassSet;
use super::refresh::RefreshBlock;
use super::request::{Access, Source, TrafficClass, TRAFFIC_CLASSES};
use super::stats::RowClass;

/// An entry's access kind and traffic class in one byte: bits 0-1 the access index (read,
/// write, update), bits 2-3 the update's data type, bits 4-5 the class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartKind(u8);

impl PartKind {
    /// Packs an access and a class.
    #[inline]
    pub const fn new(access: Access, class: TrafficClass) -> Self {
        let dtype = match access {
            Access::Update(d) => d as u8,
            _ => 0,
        };
        PartKind(access.index() as u8 | dtype << 2 | (class as u8) << 4)
    }

    /// The access.
    #[inline]
    pub const fn access(self) -> Access {
        match self.0 & 3 {
            0 => Access::Read,
            1 => Access::Write,
            _ => Access::Update(DType::from_bits(self.0 >> 2)),
        }
    }

    /// Index of the access kind (read 0, write 1, update 2).
    #[inline]
    pub const fn access_index(self) -> usize {
        (self.0 & 3) as usize
    }

    /// Whether the access is a near-memory update.
    #[inline]
    pub const fn is_update(self) -> bool {
        self.0 & 3 == 2
    }

    /// The traffic class.
    #[inline]
    pub const fn class(self) -> TrafficClass {
        match (self.0 >> 4) & 3 {
            0 => TrafficClass::Compute,
            1 => TrafficClass::Communication,
            _ => TrafficClass::Host,
        }
    }

    /// Index of the traffic class.
    #[inline]
    pub const fn class_index(self) -> usize {
        ((self.0 >> 4) & 3) as usize
    }
}

/// Which entries a scheduling pass may serve.
pub trait Admit: Copy {
    /// Whether `e` may be served.
    fn admits(self, e: &Entry) -> bool;
}

/// Admits every entry (class-blind FR-FCFS).
#[derive(Debug, Clone, Copy)]
pub struct Everyone;

impl Admit for Everyone {
    #[inline(always)]
    fn admits(self, _e: &Entry) -> bool {
        true
    }
}

impl Admit for ClassSet {
    #[inline(always)]
    fn admits(self, e: &Entry) -> bool {
        self.contains(e.kind.class())
    }
}

/// One queued request part: one or two column accesses in the same row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// Arrival order across all banks of the queue.
    pub seq: u64,
    /// First cycle the scheduler may act on this entry.
    pub ready: Cycle,
    /// The front end's tag, returned on completion.
    pub tag: u32,
    /// Row.
    pub row: u32,
    /// Next column access (advances as the entry's column accesses issue).
    pub col: u32,
    /// Bank index within the pseudo-channel.
    pub bank: u8,
    /// Column accesses still to issue.
    pub bursts_left: u8,
    /// How the entry found its row.
    pub row_class: RowClass,
    /// Access kind and traffic class.
    pub kind: PartKind,
    /// The sender, packed (see [`PackedSource`]); kept only for an attached observer and
    /// not saved in a checkpoint (which refuses controllers with an observer).
    #[serde(skip, default)]
    pub source: PackedSource,
    /// The request's byte address, for an attached observer (not saved either).
    #[serde(skip, default)]
    pub addr: u64,
}

/// A request's optional [`Source`] in one word, so a queue entry carries it without a
/// side table: bits 0-31 the workgroup, 32-47 the GPU, 48-55 the wavefront, bit 63 set
/// when there is a sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PackedSource(u64);

impl PackedSource {
    const PRESENT: u64 = 1 << 63;

    /// Packs a sender (or none).
    #[inline]
    pub const fn new(source: Option<Source>) -> Self {
        match source {
            Some(s) => PackedSource(
                Self::PRESENT
                    | s.workgroup as u64
                    | (s.gpu as u64) << 32
                    | (s.wavefront as u64) << 48,
            ),
            None => PackedSource(0),
        }
    }

    /// The sender, if any.
    #[inline]
    pub const fn get(self) -> Option<Source> {
        if self.0 & Self::PRESENT == 0 {
            None
        } else {
            Some(Source {
                workgroup: self.0 as u32,
                gpu: (self.0 >> 32) as u16,
                wavefront: (self.0 >> 48) as u8,
            })
        }
    }
}

/// Where an entry sits: (bank, position in the bank's queue).
pub type Slot = (usize, usize);

/// A request queue kept per bank, each bank's entries in arrival order.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct BankQueues {
    banks: Vec<Vec<Entry>>,
    nonempty: u64,
    /// Per bank, entries whose row is the bank's open row (kept by the controller through
    /// [`BankQueues::push`], [`BankQueues::remove`] and [`BankQueues::recount`]), so the
    /// passes need not rescan a bank's queue to know whether it holds a row hit.
    hits: Vec<u32>,
    /// Bit b set when `hits[b] > 0`.
    hit_mask: u64,
    len: usize,
    next_seq: u64,
    per_class: [usize; TRAFFIC_CLASSES],
}

impl BankQueues {
    /// Whether `other` (a restored state) has as many banks and at most `depth` entries,
    /// each in range of `slots` request slots.
    pub fn same_shape(&self, other: &BankQueues, depth: usize, slots: usize) -> bool {
        let mask = match self.banks.len() {
            n if n >= 64 => u64::MAX,
            n => (1u64 << n) - 1,
        };
        other.banks.len() == self.banks.len()
            && other.hits.len() == self.hits.len()
            && other.nonempty & !mask == 0
            && other.hit_mask & !mask == 0
            && other.len <= depth
            && other.banks.iter().map(Vec::len).sum::<usize>() == other.len
            && other
                .banks
                .iter()
                .flatten()
                .all(|e| (e.tag as usize) < slots && usize::from(e.bank) < self.banks.len())
    }

    /// Empty queues for `banks` banks.
    pub fn new(banks: usize) -> Self {
        BankQueues {
            banks: vec![Vec::new(); banks],
            nonempty: 0,
            hits: vec![0; banks],
            hit_mask: 0,
            len: 0,
            next_seq: 0,
            per_class: [0; TRAFFIC_CLASSES],
        }
    }

    /// Entries queued.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries queued, by traffic class.
    #[inline]
    pub fn class_lens(&self) -> [usize; TRAFFIC_CLASSES] {
        self.per_class
    }

    /// Bit b set when bank b has entries.
    #[inline]
    pub fn nonempty(&self) -> u64 {
        self.nonempty
    }

    /// Bit b set when bank b has an entry for its open row.
    #[inline]
    pub fn hit_mask(&self) -> u64 {
        self.hit_mask
    }

    /// Entries of bank `b` for its open row.
    #[inline]
    pub fn hits(&self, b: usize) -> u32 {
        self.hits.get(b).copied().unwrap_or(0)
    }

    /// Appends an entry (its `seq` is assigned here); `open` is its bank's open row (or
    /// [`CLOSED_ROW`]).
    pub fn push(&mut self, mut e: Entry, open: u32) {
        let b = usize::from(e.bank);
        if let Some(q) = self.banks.get_mut(b) {
            e.seq = self.next_seq;
            self.next_seq += 1;
            self.per_class[e.kind.class_index()] += 1;
            if e.row == open {
                self.hits[b] += 1;
                self.hit_mask |= 1u64 << b;
            }
            q.push(e);
            self.nonempty |= 1u64 << b;
            self.len += 1;
        }
    }

    /// Recounts bank `b`'s hits after its open row changed (`open`: the new row, or
    /// [`CLOSED_ROW`]).
    pub fn recount(&mut self, b: usize, open: u32) {
        let Some(q) = self.banks.get(b) else {
            return;
        };
        let n = if open == CLOSED_ROW {
            0
        } else {
            q.iter().filter(|e| e.row == open).count() as u32
        };
        self.hits[b] = n;
        if n > 0 {
            self.hit_mask |= 1u64 << b;
        } else {
            self.hit_mask &= !(1u64 << b);
        }
    }

    /// The entries of one bank, oldest first.
    #[inline]
    pub fn bank(&self, b: usize) -> &[Entry] {
        self.banks.get(b).map_or(&[], Vec::as_slice)
    }

    /// An entry by slot.
    #[inline]
    pub fn get_mut(&mut self, (b, i): Slot) -> Option<&mut Entry> {
        self.banks.get_mut(b)?.get_mut(i)
    }

    /// Removes an entry by slot; `open` is its bank's open row.
    pub fn remove(&mut self, (b, i): Slot, open: u32) -> Option<Entry> {
        let q = self.banks.get_mut(b)?;
        if i >= q.len() {
            return None;
        }
        let e = q.remove(i);
        if e.row == open {
            self.hits[b] -= 1;
            if self.hits[b] == 0 {
                self.hit_mask &= !(1u64 << b);
            }
        }
        if q.is_empty() {
            self.nonempty &= !(1u64 << b);
        }
        self.len -= 1;
        self.per_class[e.kind.class_index()] -= 1;
        Some(e)
    }
}

/// Iterates the set bits of a mask, lowest first.
#[inline]
fn bits(mut m: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if m == 0 {
            return None;
        }
        let b = m.trailing_zeros() as usize;
        m &= m - 1;
        Some(b)
    })
}

/// An update's column gate, out of line so the common read/write scan stays a plain
/// branch (not both gates computed and selected).
#[inline(never)]
fn update_gate(pc: &PseudoChannel, bank: usize) -> Cycle {
    pc.earliest_update(bank)
}

/// Bit mask of banks any queued entry targets.
pub fn wanted_banks(queues: [&BankQueues; 2]) -> u64 {
    queues[0].nonempty() | queues[1].nonempty()
}

/// Picks the oldest admitted row hit whose column command may issue at `now`; `write`
/// says which queue this is (the write queue holds writes and updates).
#[inline(always)]
pub fn pick_column<A: Admit>(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    write: bool,
    block: RefreshBlock,
    admit: A,
    wake: &mut Cycle,
) -> Option<Slot> {
    let floor = pc.column_floor(write);
    if floor > now {
        *wake = (*wake).min(floor);
        return None;
    }
    let mut best: Option<(u64, Slot)> = None;
    for b in bits(queue.hit_mask()) {
        let open = pc.open_row_raw(b);
        debug_assert_ne!(open, CLOSED_ROW);
        let Some(i) = queue
            .bank(b)
            .iter()
            .position(|e| e.row == open && admit.admits(e))
        else {
            continue;
        };
        let e = &queue.bank(b)[i];
        if e.ready > now {
            *wake = (*wake).min(e.ready);
            continue;
        }
        if block.blocks(b) || best.is_some_and(|(s, _)| s < e.seq) {
            continue;
        }
        let t = if write && e.kind.is_update() {
            update_gate(pc, b)
        } else {
            pc.earliest_column(b, write)
        };
        if t <= now {
            best = Some((e.seq, (b, i)));
        } else {
            *wake = (*wake).min(t);
        }
    }
    best.map(|(_, slot)| slot)
}

/// The oldest ACT or PRE that may issue at `now`, for an admitted request or (closed
/// page) for an open row nobody hits any more. Returns the command and the entry it
/// serves. When a request's command is returned, `wake` covers every other bank's
/// candidate (but not the closed-page precharges), so the caller can bound its next row
/// pass with it. Only admitted entries protect an open row from a PRE: an entry that may
/// not issue must not hold up one that may.
///
/// Banks in `protect` hold a request whose row was opened for it and is not yet served
/// (the look-ahead window, see [`pick_activated`]): their open row is not precharged,
/// whichever queue the miss comes from.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn pick_row<A: Admit>(
    queue: &BankQueues,
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    policy: PagePolicy,
    admit: A,
    protect: u64,
    wake: &mut Cycle,
) -> Option<(Command, Option<Slot>)> {
    let bus = pc.row_bus_free();
    if bus > now {
        *wake = (*wake).min(bus);
        return None;
    }
    let act_floor = pc.act_floor();
    let mut best: Option<(u64, Command, Slot)> = None;
    for b in bits(queue.nonempty()) {
        let entries = queue.bank(b);
        let open = pc.open_row_raw(b);
        let hits = queue.hits(b) as usize;
        if hits == entries.len() {
            // Every entry hits the open row: no row command wanted here.
            continue;
        }
        let Some(i) = (if hits == 0 && admit.admits(&entries[0]) {
            Some(0)
        } else {
            entries
                .iter()
                .position(|e| e.row != open && admit.admits(e))
        }) else {
            continue;
        };
        let e = &entries[i];
        let (cmd, t) = if open != CLOSED_ROW {
            if protect & (1u64 << b) != 0 {
                // Serving the activated request clears the bit and wakes the row pass.
                continue;
            }
            let t = pc.earliest_pre(b).max(e.ready);
            if t <= now && hits > 0 && entries.iter().any(|x| x.row == open && admit.admits(x)) {
                // Hits go first; their column gates set the wake.
                continue;
            }
            (
                Command::Pre {
                    bank: pc.bank_id(b),
                },
                t,
            )
        } else {
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
        };
        if t <= now {
            // Every ready candidate but the oldest could issue next cycle.
            if let Some((older, _, _)) = best {
                *wake = (*wake).min(now + 1);
                if older < e.seq {
                    continue;
                }
            }
            best = Some((e.seq, cmd, (b, i)));
        } else {
            *wake = (*wake).min(t);
        }
    }
    if let Some((_, cmd, slot)) = best {
        return Some((cmd, Some(slot)));
    }
    if policy == PagePolicy::Closed && pc.any_open() {
        for b in 0..pc.banks() {
            let open = pc.open_row_raw(b);
            if open == CLOSED_ROW || protect & (1u64 << b) != 0 || queue.hits(b) > 0 {
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

/// The look-ahead window (`activated_per_bank` = 1, Ramulator 2's active buffer): among
/// the requests whose row was opened for them (`activated[0]` banks of the read queue,
/// `activated[1]` of the write queue; each such request is the first of its bank's
/// queue), the oldest whose column command may issue at `now`, whatever the drain mode.
/// Returns the slot and whether it is in the write queue. Lowers `wake` to the others'
/// gates.
pub fn pick_activated(
    queues: [&BankQueues; 2],
    activated: [u64; 2],
    pc: &PseudoChannel,
    now: Cycle,
    block: RefreshBlock,
    wake: &mut Cycle,
) -> Option<(Slot, bool)> {
    let mut best: Option<(Cycle, u64, Slot, bool)> = None;
    for (qi, queue) in queues.iter().enumerate() {
        let write = qi == 1;
        for b in bits(activated[qi]) {
            let Some(e) = queue.bank(b).first() else {
                continue;
            };
            if block.blocks(b) {
                continue;
            }
            let t = if write && e.kind.is_update() {
                update_gate(pc, b)
            } else {
                pc.earliest_column(b, write)
            }
            .max(e.ready);
            if t > now {
                *wake = (*wake).min(t);
                continue;
            }
            // Oldest first: arrival (ready cycle), then queue order; reads before writes
            // on a tie.
            if best.is_some_and(|(r, s, _, _)| (r, s) <= (e.ready, e.seq)) {
                continue;
            }
            best = Some((e.ready, e.seq, (b, 0), write));
        }
    }
    best.map(|(_, _, slot, write)| (slot, write))
}
