//! The board's T3 blocks: a store tracker, four DMA engines and the output mapping, just
//! enough for the firmware's T3 programmer to program one GEMM end to end (the
//! `t3_program_gemm` line, docs/decisions/board.md "T3").
//!
//! No data moves. The tracker fires its entries in the order they were programmed, each
//! as soon as the harness asks for the next event ([`Board::next_t3_event`]); an entry
//! that triggers a DMA is followed by that DMA's `DmaDone`. What the producer's stores
//! and the DMA's transfer would take in time does not matter to the firmware's work,
//! which is what the line measures.
//!
//! Pending entries are kept as *runs* of consecutive ids (the programmer programs a
//! stage's entries in WF-index order, so a stage's entries form a handful of runs: a
//! break at every empty WF tile and wherever the two live stages interleave). The runs
//! live in the board's window RAM ([`T3_RING_BYTES`] from its start), which no other
//! scenario uses while the T3 one runs: the line costs the HiFive1's 16 KiB no RAM beyond
//! a few bytes of [`T3Model`]. A full ring refuses the entry (`SetFull`, counted in
//! `BoardStats::t3_refused`): the firmware's own retry path, as at a full tracker set.
//!
//! Supported DMA shape: one WF tile per DMA block (`wf_tiles_per_dma_block = 1`, the
//! Table 8.2 runs' setting): every DMA is triggered once, by the entry programmed right
//! after it. Anything else is refused with `Unsupported` / `Invalid` (a T3 fault, the
//! run's `error:`), not modelled wrongly.

use nmcp_firmware::platform::{
    DmaController, DmaError, MapError, OutputMapController, TrackerController, TrackerError,
};
use nmcp_firmware::t3::DMA_ENGINES;
use nmcp_firmware::Event;
use nmcp_isa::t3::{DmaDescriptor, DmaTrigger, OutputMap, TrackerEntry, TRACKER_NO_DMA};

use super::{fnv_words, Board, LayoutError};

/// Runs of pending tracker entries the board holds.
pub const T3_RUNS: usize = 64;
/// Bytes of one run in the window: first id (u16), count (u16), flags (u16: bit 15 = the
/// entries trigger DMAs, bits 0..8 = the first entry's DMA engine), padding.
const RUN_BYTES: usize = 8;
/// Window bytes the pending runs occupy (from window byte 0).
pub const T3_RING_BYTES: usize = T3_RUNS * RUN_BYTES;
const RUN_DMA: u16 = 0x8000;

/// The T3 blocks' state outside the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct T3Model {
    /// Oldest run's slot.
    head: u8,
    /// Runs held.
    len: u8,
    /// A DMA programmed whose triggering entry is not yet: (engine, id).
    placed: Option<(u8, u16)>,
    /// The `DmaDone` owed for the entry fired last: (engine, id).
    owed: Option<(u8, u16)>,
    /// DMAs accepted and not yet done.
    dmas_out: u32,
}

/// One run of pending entries.
#[derive(Debug, Clone, Copy)]
struct Run {
    first: u16,
    count: u16,
    flags: u16,
}

impl Run {
    fn engine_at(&self, k: u16) -> u8 {
        ((self.flags & 0xFF).wrapping_add(k) % u16::from(DMA_ENGINES)) as u8
    }
}

impl Board<'_> {
    /// Prepares the T3 blocks for a job (after [`Board::reset`]).
    ///
    /// # Errors
    /// [`LayoutError::Window`] if the window is smaller than [`T3_RING_BYTES`].
    pub fn begin_t3(&mut self) -> Result<(), LayoutError> {
        if self.mem.len() < T3_RING_BYTES {
            return Err(LayoutError::Window);
        }
        self.t3 = T3Model::default();
        Ok(())
    }

    /// DMAs the firmware programmed that have not completed.
    pub fn t3_dmas_outstanding(&self) -> u32 {
        self.t3.dmas_out
    }

    fn run_at(&self, slot: usize) -> Option<Run> {
        let b: &[u8; 6] = self
            .mem
            .get(slot * RUN_BYTES..slot * RUN_BYTES + 6)?
            .try_into()
            .ok()?;
        Some(Run {
            first: u16::from_le_bytes([b[0], b[1]]),
            count: u16::from_le_bytes([b[2], b[3]]),
            flags: u16::from_le_bytes([b[4], b[5]]),
        })
    }

    fn put_run(&mut self, slot: usize, r: Run) -> bool {
        let Some(b) = self.mem.get_mut(slot * RUN_BYTES..slot * RUN_BYTES + 6) else {
            return false;
        };
        let [f0, f1] = r.first.to_le_bytes();
        let [c0, c1] = r.count.to_le_bytes();
        let [g0, g1] = r.flags.to_le_bytes();
        b.copy_from_slice(&[f0, f1, c0, c1, g0, g1]);
        true
    }

    /// Folds `bytes` into `t3_hash`, timed as the board's bookkeeping.
    fn hash_t3(&mut self, bytes: &[u8]) {
        let t0 = (self.clock)();
        self.stats.t3_hash = fnv_words(self.stats.t3_hash, bytes);
        let ticks = (self.clock)().saturating_sub(t0);
        self.stats.bookkeeping_ticks = self.stats.bookkeeping_ticks.saturating_add(ticks);
    }

    /// Appends entry `id` (with its DMA's engine, if any) to the pending runs.
    fn push_entry(&mut self, id: u16, dma_engine: Option<u8>) -> Result<(), TrackerError> {
        let dma = dma_engine.is_some();
        let len = usize::from(self.t3.len);
        if len > 0 {
            let tail = (usize::from(self.t3.head) + len - 1) % T3_RUNS;
            if let Some(mut r) = self.run_at(tail) {
                let extends = r.first.checked_add(r.count) == Some(id)
                    && (r.flags & RUN_DMA != 0) == dma
                    && dma_engine.is_none_or(|e| r.engine_at(r.count) == e)
                    && r.count < u16::MAX;
                if extends {
                    r.count += 1;
                    self.put_run(tail, r);
                    return Ok(());
                }
            }
        }
        if len >= T3_RUNS {
            self.stats.t3_refused = self.stats.t3_refused.saturating_add(1);
            return Err(TrackerError::SetFull);
        }
        let slot = (usize::from(self.t3.head) + len) % T3_RUNS;
        let flags = dma_engine.map_or(0, |e| RUN_DMA | u16::from(e));
        if !self.put_run(
            slot,
            Run {
                first: id,
                count: 1,
                flags,
            },
        ) {
            return Err(TrackerError::Unsupported);
        }
        self.t3.len += 1;
        Ok(())
    }

    /// The next T3 completion: the `DmaDone` of the entry fired last if it triggered one,
    /// else the oldest pending entry's `TrackerFired`; `None` when nothing is pending.
    pub fn next_t3_event(&mut self) -> Option<Event> {
        if let Some((engine, id)) = self.t3.owed.take() {
            self.t3.dmas_out = self.t3.dmas_out.saturating_sub(1);
            return Some(Event::DmaDone {
                engine,
                id,
                status: Ok(()),
            });
        }
        if self.t3.len == 0 {
            return None;
        }
        let slot = usize::from(self.t3.head);
        let mut r = self.run_at(slot)?;
        let id = r.first;
        if r.flags & RUN_DMA != 0 {
            self.t3.owed = Some((r.engine_at(0), id));
        }
        r.first = r.first.wrapping_add(1);
        r.count = r.count.saturating_sub(1);
        r.flags = (r.flags & RUN_DMA) | u16::from(r.engine_at(1));
        if r.count == 0 {
            self.t3.head = ((slot + 1) % T3_RUNS) as u8;
            self.t3.len -= 1;
        } else {
            self.put_run(slot, r);
        }
        Some(Event::TrackerFired { entry: id })
    }
}

impl DmaController for Board<'_> {
    /// Accepts a descriptor triggered once by the tracker entry of its own id (see the
    /// module comment); it completes right after that entry fires.
    fn program(&mut self, engine: u8, desc: &DmaDescriptor) -> Result<(), DmaError> {
        if engine >= DMA_ENGINES {
            return Err(DmaError::NoSuchEngine);
        }
        if desc.trigger != DmaTrigger::Tracker(desc.id)
            || desc.fires != 1
            || self.t3.placed.is_some()
        {
            return Err(DmaError::Unsupported);
        }
        self.hash_t3(&desc.encode());
        self.t3.placed = Some((engine, desc.id));
        self.t3.dmas_out = self.t3.dmas_out.saturating_add(1);
        self.stats.t3_dmas = self.stats.t3_dmas.saturating_add(1);
        Ok(())
    }
}

impl TrackerController for Board<'_> {
    /// Queues the entry to fire (see the module comment).
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError> {
        let dma_engine = if entry.dma_id == TRACKER_NO_DMA {
            None
        } else {
            match self.t3.placed {
                Some((e, id)) if id == entry.dma_id && id == entry.id => Some(e),
                _ => return Err(TrackerError::Invalid),
            }
        };
        self.push_entry(entry.id, dma_engine)?;
        if dma_engine.is_some() {
            self.t3.placed = None;
        }
        self.hash_t3(&entry.encode());
        self.stats.t3_entries = self.stats.t3_entries.saturating_add(1);
        Ok(())
    }
}

impl OutputMapController for Board<'_> {
    /// Accepts the map (the producer's stores are not modelled).
    fn map_output(&mut self, map: &OutputMap) -> Result<(), MapError> {
        self.hash_t3(&map.encode());
        self.stats.t3_maps = self.stats.t3_maps.saturating_add(1);
        Ok(())
    }

    fn set_dispatch_start(&mut self, first_wg: u32) -> Result<(), MapError> {
        self.hash_t3(&first_wg.to_le_bytes());
        self.stats.t3_maps = self.stats.t3_maps.saturating_add(1);
        Ok(())
    }
}
