//! The board's T3 blocks: a tracker region table, four DMA engines and the output mapping,
//! just enough for the firmware's T3 programmer to program one GEMM end to end (the
//! `t3_program_gemm` line, docs/decisions/board.md "T3").
//!
//! No data moves. The firmware programs one tracked region per stage
//! (`TrackerController::program_region`); the board completes the regions in the order they
//! were programmed, one per event the harness asks for ([`Board::next_t3_event`]: a
//! `RegionDone`). What the producer's stores and the DMAs would take in time does not
//! matter to the firmware's work, which is what the line measures. Per-tile entries and
//! DMA descriptors are not modelled (the programmer does not program them): they are
//! refused with `Unsupported`, a T3 fault, not modelled wrongly.

use nmcp_firmware::platform::{
    DmaController, DmaError, MapError, OutputMapController, TrackerController, TrackerError,
};
use nmcp_firmware::Event;
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackRegion, TrackerEntry, REGION_SLOTS};

use super::{fnv_words, Board, LayoutError};

/// The T3 blocks' state: the live regions' slots, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct T3Model {
    /// Slots in programming order (the first `len` are live).
    order: [u8; REGION_SLOTS as usize],
    len: u8,
    /// Bit `s`: slot `s` is live.
    live: u16,
}

impl Board<'_> {
    /// Prepares the T3 blocks for a job (after [`Board::reset`]).
    ///
    /// # Errors
    /// None today; the signature matches the other blocks' `begin`.
    pub fn begin_t3(&mut self) -> Result<(), LayoutError> {
        self.t3 = T3Model::default();
        Ok(())
    }

    /// Regions the firmware programmed that have not completed.
    pub fn t3_regions_outstanding(&self) -> u32 {
        u32::from(self.t3.len)
    }

    /// Folds `bytes` into `t3_hash`, timed as the board's bookkeeping.
    fn hash_t3(&mut self, bytes: &[u8]) {
        let t0 = (self.clock)();
        self.stats.t3_hash = fnv_words(self.stats.t3_hash, bytes);
        let ticks = (self.clock)().saturating_sub(t0);
        self.stats.bookkeeping_ticks = self.stats.bookkeeping_ticks.saturating_add(ticks);
    }

    /// The next T3 completion: the oldest live region's `RegionDone`; `None` when no
    /// region is live.
    pub fn next_t3_event(&mut self) -> Option<Event> {
        if self.t3.len == 0 {
            return None;
        }
        let slot = *self.t3.order.first()?;
        self.t3.order.copy_within(1.., 0);
        self.t3.len -= 1;
        self.t3.live &= !(1u16 << (slot % REGION_SLOTS));
        Some(Event::RegionDone { slot })
    }
}

impl DmaController for Board<'_> {
    /// Not modelled: the programmer's DMAs are derived from regions.
    fn program(&mut self, _engine: u8, _desc: &DmaDescriptor) -> Result<(), DmaError> {
        Err(DmaError::Unsupported)
    }
}

impl TrackerController for Board<'_> {
    /// Not modelled: the programmer programs regions.
    fn program(&mut self, _entry: &TrackerEntry) -> Result<(), TrackerError> {
        Err(TrackerError::Unsupported)
    }

    /// Queues the region to complete (see the module comment).
    fn program_region(&mut self, region: &TrackRegion) -> Result<(), TrackerError> {
        region.validate().map_err(|_| TrackerError::Invalid)?;
        let bit = 1u16 << (region.slot % REGION_SLOTS);
        let len = usize::from(self.t3.len);
        if self.t3.live & bit != 0 || len >= self.t3.order.len() {
            self.stats.t3_refused = self.stats.t3_refused.saturating_add(1);
            return Err(TrackerError::SetFull);
        }
        if let Some(o) = self.t3.order.get_mut(len) {
            *o = region.slot;
        }
        self.t3.len += 1;
        self.t3.live |= bit;
        self.hash_t3(&region.encode());
        self.stats.t3_regions = self.stats.t3_regions.saturating_add(1);
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
