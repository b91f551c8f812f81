//! The store tracker at a GPU's memory controllers (dissertation 8.3.2.1; Fig. 8.7 is
//! lost, the geometry below is `docs/decisions/t3.md`'s).
//!
//! 256 sets indexed by the low 8 bits of the workgroup id, 8 ways tagged by the high
//! WG-id bits and the 3-bit wavefront id; each way holds a start address, an element
//! counter, a threshold and the DMA descriptor to mark ready. Counting happens when an
//! update's (or store's) column command issues, so a DMA the entry triggers reads the
//! finished data.
//!
//! Two rules make the tracker safe for lazy programming and for overflow:
//! * **Miss allocates.** Counts for a tag nobody programmed yet allocate a way and
//!   accumulate; programming the entry later merges them (and fires at once if the count
//!   is already at the threshold). Firmware can program stage by stage without racing
//!   the producer or the peers.
//! * **Overflow spills.** When a set has no free way, the entry lives in a spill table in
//!   device memory: still counted exactly once, but each count costs the controller a
//!   read-modify-write (the caller charges it). An entry frees its way when it fires.
//!
//! **Regions** (dissertation 8.3.4's pre-programmed `dma_map`): a table of
//! [`REGION_SLOTS`] tracked regions. A count that allocates a way for a WG id a region
//! holds programs the entry from the region at once (threshold = the WF tile's elements x
//! updates per element); programming a region programs the ways its WG ids already hold.
//! A region's entries fire with `region` set, and the caller runs the region's action.

use std::collections::HashMap;

use nmcp_firmware::platform::TrackerError;
use nmcp_isa::t3::{
    RegionAction, TrackRegion, TrackerEntry, MAX_WFS_PER_WG, REGION_SLOTS, TRACKER_NO_DMA,
    TRACKER_SETS,
};
use serde::Serialize;

/// Ways per set (2,048 entries: the dissertation's 19 KB with a 64-bit address and a
/// 12-bit counter per entry).
pub const TRACKER_WAYS: usize = 8;

/// A tracker entry that reached its threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fired {
    /// The entry's id.
    pub entry: u16,
    /// The DMA descriptor it marks ready (`TRACKER_NO_DMA` = notify only; for a region's
    /// entry, the region's slot when the region sends DMA blocks).
    pub dma_id: u16,
    /// Workgroup id.
    pub wg_id: u32,
    /// Wavefront id.
    pub wf_id: u8,
    /// The region slot whose entry this was (`None`: a programmed entry).
    pub region: Option<u8>,
}

/// What a count or a programming did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TrackOutcome {
    /// The entry that fired, if this completed one.
    pub fired: Option<Fired>,
    /// Whether the entry lives in the spill table (the caller charges a memory access).
    pub spilled: bool,
}

/// Totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TrackerStats {
    /// Entries programmed.
    pub programmed: u64,
    /// Entries fired.
    pub fired: u64,
    /// Counts applied (one per issued column command with a source).
    pub counts: u64,
    /// Ways allocated by a count before their entry was programmed.
    pub miss_allocations: u64,
    /// Counts and programmings that went to the spill table.
    pub spilled: u64,
    /// Most entries live at once (on chip and spilled).
    pub max_live: u64,
    /// Most entries in the spill table at once.
    pub max_spilled: u64,
    /// Entries whose count went past the threshold before they were programmed (a plan
    /// that expects fewer updates than arrive: a bug the caller reports).
    pub overcounts: u64,
    /// Regions programmed.
    pub regions: u64,
    /// Of `programmed`, entries the tracker derived from a region.
    pub region_entries: u64,
}

#[derive(Debug, Clone, Copy)]
struct Way {
    tag: (u32, u8),
    count: u32,
    /// What the entry does once programmed.
    program: Option<Program>,
}

/// A programmed entry's threshold and what its firing reports.
#[derive(Debug, Clone, Copy)]
struct Program {
    entry: u16,
    threshold: u32,
    dma_id: u16,
    region: Option<u8>,
}

/// One GPU's tracker.
#[derive(Debug, Clone)]
pub struct Tracker {
    ways: usize,
    sets: Vec<Vec<Way>>,
    spill: HashMap<(u32, u8), Way>,
    /// The region table, by slot.
    regions: Vec<Option<TrackRegion>>,
    live: u64,
    stats: TrackerStats,
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new(TRACKER_SETS as usize, TRACKER_WAYS)
    }
}

impl Tracker {
    /// A tracker of `sets` x `ways` on-chip entries (tests shrink it to force spills).
    pub fn new(sets: usize, ways: usize) -> Self {
        Self {
            ways: ways.max(1),
            sets: vec![Vec::new(); sets.max(1)],
            spill: HashMap::new(),
            regions: vec![None; usize::from(REGION_SLOTS)],
            live: 0,
            stats: TrackerStats::default(),
        }
    }

    fn locate(&self, wg_id: u32) -> (usize, (u32, u8)) {
        let n = self.sets.len() as u32;
        ((wg_id % n) as usize, (wg_id / n, 0))
    }

    /// Finds or allocates the way of `(wg_id, wf_id)`; returns (set, index) on chip or
    /// `None` for the spill table, and whether it was newly allocated.
    fn slot(&mut self, wg_id: u32, wf_id: u8) -> (Option<(usize, usize)>, bool) {
        let (set, (hi, _)) = self.locate(wg_id);
        let tag = (hi, wf_id);
        if let Some(i) = self.sets[set].iter().position(|w| w.tag == tag) {
            return (Some((set, i)), false);
        }
        if self.spill.contains_key(&(wg_id, wf_id)) {
            return (None, false);
        }
        let program = self.region_program(wg_id, wf_id);
        if program.is_some() {
            self.stats.programmed += 1;
            self.stats.region_entries += 1;
        }
        let fresh = Way {
            tag,
            count: 0,
            program,
        };
        self.live += 1;
        self.stats.max_live = self.stats.max_live.max(self.live);
        if self.sets[set].len() < self.ways {
            self.sets[set].push(fresh);
            (Some((set, self.sets[set].len() - 1)), true)
        } else {
            self.spill.insert((wg_id, wf_id), fresh);
            self.stats.max_spilled = self.stats.max_spilled.max(self.spill.len() as u64);
            (None, true)
        }
    }

    fn way_mut(&mut self, at: Option<(usize, usize)>, key: (u32, u8)) -> Option<&mut Way> {
        match at {
            Some((s, i)) => self.sets.get_mut(s).and_then(|v| v.get_mut(i)),
            None => self.spill.get_mut(&key),
        }
    }

    /// Fires and frees the way if it is programmed and complete.
    fn settle(&mut self, at: Option<(usize, usize)>, wg_id: u32, wf_id: u8) -> Option<Fired> {
        let way = *self.way_mut(at, (wg_id, wf_id))?;
        let Program {
            entry,
            threshold,
            dma_id,
            region,
        } = way.program?;
        if way.count < threshold {
            return None;
        }
        if way.count > threshold {
            self.stats.overcounts += 1;
        }
        match at {
            Some((s, i)) => {
                self.sets[s].swap_remove(i);
            }
            None => {
                self.spill.remove(&(wg_id, wf_id));
            }
        }
        self.live -= 1;
        self.stats.fired += 1;
        Some(Fired {
            entry,
            dma_id,
            wg_id,
            wf_id,
            region,
        })
    }

    /// The entry a live region gives WF `wf_id` of `wg_id`, if a region holds the WG and
    /// the WF tile is not empty.
    fn region_program(&self, wg_id: u32, wf_id: u8) -> Option<Program> {
        let r = self.regions.iter().flatten().find(|r| r.contains(wg_id))?;
        // A region entry's `dma_id` says whether its firing feeds a DMA block (the
        // region's slot) or only the region's completion (`TRACKER_NO_DMA`).
        let dma_id = match r.action {
            RegionAction::Notify => TRACKER_NO_DMA,
            RegionAction::Dma { .. } => u16::from(r.slot),
        };
        Some(Program {
            entry: 0,
            threshold: r.threshold(wg_id, wf_id)?,
            dma_id,
            region: Some(r.slot),
        })
    }

    /// Installs a region in its slot and programs from it every way its WG ids already
    /// hold (counts that came first); returns the entries that fire at once.
    ///
    /// # Errors
    /// [`TrackerError::SetFull`] when the slot holds a live region;
    /// [`TrackerError::Invalid`] for a region that does not validate or whose WG ids
    /// overlap a live region's.
    pub fn program_region(&mut self, r: &TrackRegion) -> Result<Vec<Fired>, TrackerError> {
        Self::check_region(r)?;
        let slot = usize::from(r.slot);
        if self.regions.get(slot).is_some_and(Option::is_some) {
            return Err(TrackerError::SetFull);
        }
        let overlaps = self.regions.iter().flatten().any(|o| {
            o.wg_first < r.wg_first.saturating_add(r.wg_count)
                && r.wg_first < o.wg_first.saturating_add(o.wg_count)
        });
        if overlaps {
            return Err(TrackerError::Invalid);
        }
        if let Some(s) = self.regions.get_mut(slot) {
            *s = Some(*r);
        }
        self.stats.regions += 1;
        let n_sets = self.sets.len() as u32;
        let mut waiting: Vec<(u32, u8)> = Vec::new();
        for (set, ways) in self.sets.iter().enumerate() {
            for w in ways.iter().filter(|w| w.program.is_none()) {
                let wg = w.tag.0 * n_sets + set as u32;
                if r.contains(wg) {
                    waiting.push((wg, w.tag.1));
                }
            }
        }
        let mut spilled: Vec<(u32, u8)> = self
            .spill
            .iter()
            .filter(|(k, w)| w.program.is_none() && r.contains(k.0))
            .map(|(k, _)| *k)
            .collect();
        // The spill table is a hash map: its order is not the run's to depend on.
        spilled.sort_unstable();
        waiting.extend(spilled);
        let mut fired = Vec::new();
        for (wg, wf) in waiting {
            let Some(program) = self.region_program(wg, wf) else {
                continue;
            };
            let (set, (hi, _)) = self.locate(wg);
            let at = self.sets[set]
                .iter()
                .position(|w| w.tag == (hi, wf))
                .map(|i| (set, i));
            if let Some(w) = self.way_mut(at, (wg, wf)) {
                w.program = Some(program);
                self.stats.programmed += 1;
                self.stats.region_entries += 1;
            }
            fired.extend(self.settle(at, wg, wf));
        }
        Ok(fired)
    }

    /// Frees a region's slot (its entries all fired).
    pub fn release_region(&mut self, slot: u8) -> Option<TrackRegion> {
        self.regions.get_mut(usize::from(slot))?.take()
    }

    /// The live region in `slot`.
    pub fn region(&self, slot: u8) -> Option<&TrackRegion> {
        self.regions.get(usize::from(slot))?.as_ref()
    }

    /// Refuses a region no tracker takes.
    ///
    /// # Errors
    /// [`TrackerError::Invalid`].
    pub fn check_region(r: &TrackRegion) -> Result<(), TrackerError> {
        r.validate().map_err(|_| TrackerError::Invalid)
    }

    /// Installs an entry (merging counts that arrived before it).
    ///
    /// # Errors
    /// [`TrackerError::Invalid`] for a WF id of 8 or more or a zero threshold.
    pub fn program(&mut self, e: &TrackerEntry) -> Result<TrackOutcome, TrackerError> {
        Self::check(e)?;
        let (at, _) = self.slot(e.wg_id, e.wf_id);
        let Some(way) = self.way_mut(at, (e.wg_id, e.wf_id)) else {
            return Err(TrackerError::Invalid);
        };
        if way.program.is_some() {
            return Err(TrackerError::Invalid);
        }
        way.program = Some(Program {
            entry: e.id,
            threshold: e.threshold,
            dma_id: e.dma_id,
            region: None,
        });
        self.stats.programmed += 1;
        let spilled = at.is_none();
        if spilled {
            self.stats.spilled += 1;
        }
        Ok(TrackOutcome {
            fired: self.settle(at, e.wg_id, e.wf_id),
            spilled,
        })
    }

    /// Refuses an entry no tracker takes (a WF id past the workgroup's, a zero threshold).
    ///
    /// # Errors
    /// [`TrackerError::Invalid`].
    pub fn check(e: &TrackerEntry) -> Result<(), TrackerError> {
        if e.wf_id >= MAX_WFS_PER_WG || e.threshold == 0 {
            return Err(TrackerError::Invalid);
        }
        Ok(())
    }

    /// Counts `elements` written by (or on behalf of) wavefront `wf_id` of workgroup
    /// `wg_id`.
    pub fn count(&mut self, wg_id: u32, wf_id: u8, elements: u32) -> TrackOutcome {
        let wf_id = wf_id & (MAX_WFS_PER_WG - 1);
        let (at, fresh) = self.slot(wg_id, wf_id);
        // One lookup adds the count and says whether the entry is programmed (a fresh
        // way a region programmed at allocation is not a miss allocation).
        let unprogrammed = self.way_mut(at, (wg_id, wf_id)).is_some_and(|w| {
            w.count = w.count.saturating_add(elements);
            w.program.is_none()
        });
        if fresh && unprogrammed {
            self.stats.miss_allocations += 1;
        }
        self.stats.counts += 1;
        let spilled = at.is_none();
        if spilled {
            self.stats.spilled += 1;
        }
        TrackOutcome {
            fired: self.settle(at, wg_id, wf_id),
            spilled,
        }
    }

    /// Entries live now (programmed and waiting, or allocated by counts).
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Live entries nobody programmed (after a run: counts for tiles no plan expected).
    pub fn orphans(&self) -> u64 {
        self.sets
            .iter()
            .flatten()
            .chain(self.spill.values())
            .filter(|w| w.program.is_none())
            .count() as u64
    }

    /// The (workgroup, wavefront, count) of every live entry nobody programmed.
    pub fn orphan_entries(&self) -> Vec<(u32, u8, u32)> {
        self.sets
            .iter()
            .flatten()
            .chain(self.spill.values())
            .filter(|w| w.program.is_none())
            .map(|w| (w.tag.0, w.tag.1, w.count))
            .collect()
    }

    /// Totals.
    pub fn stats(&self) -> TrackerStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(id: u16, wg_id: u32, wf_id: u8, threshold: u32) -> TrackerEntry {
        TrackerEntry {
            id,
            wg_id,
            wf_id,
            start_address: 0,
            threshold,
            dma_id: id,
        }
    }

    #[test]
    fn fires_on_the_count_that_reaches_the_threshold_and_frees_its_way() {
        let mut t = Tracker::default();
        assert_eq!(t.program(&entry(7, 300, 2, 32)).unwrap().fired, None);
        assert_eq!(t.count(300, 2, 16).fired, None);
        assert_eq!(t.count(300, 1, 16).fired, None, "another wavefront");
        let f = t.count(300, 2, 16).fired.unwrap();
        assert_eq!((f.entry, f.dma_id, f.wg_id, f.wf_id), (7, 7, 300, 2));
        assert_eq!(t.live(), 1, "only the other wavefront's way is left");
        assert_eq!(t.orphans(), 1);
    }

    #[test]
    fn counts_before_programming_are_merged() {
        let mut t = Tracker::default();
        t.count(5, 0, 10);
        t.count(5, 0, 10);
        let o = t.program(&entry(1, 5, 0, 20)).unwrap();
        assert_eq!(o.fired.map(|f| f.entry), Some(1));
        assert_eq!(t.stats().miss_allocations, 1);
    }

    #[test]
    fn a_full_set_spills_and_still_fires_once() {
        let mut t = Tracker::new(1, 1);
        t.program(&entry(1, 0, 0, 4)).unwrap();
        let o = t.program(&entry(2, 1, 0, 4)).unwrap();
        assert!(o.spilled);
        assert!(t.count(1, 0, 4).fired.is_some());
        assert!(t.count(0, 0, 4).fired.is_some());
        assert_eq!(t.live(), 0);
        assert_eq!(t.stats().fired, 2);
    }

    #[test]
    fn bad_entries_are_refused() {
        let mut t = Tracker::default();
        assert_eq!(t.program(&entry(1, 0, 8, 4)), Err(TrackerError::Invalid));
        assert_eq!(t.program(&entry(1, 0, 0, 0)), Err(TrackerError::Invalid));
        t.program(&entry(1, 0, 0, 4)).unwrap();
        assert_eq!(
            t.program(&entry(2, 0, 0, 4)),
            Err(TrackerError::Invalid),
            "programmed twice"
        );
    }

    fn region(slot: u8, wg_first: u32, wg_count: u32) -> TrackRegion {
        // A 2 x 2-tile box of 8 x 8 tiles, 2 WFs (4-row bands), 2 updates per element.
        TrackRegion {
            slot,
            wg_first,
            wg_count,
            tile_row0: 0,
            tile_col0: 0,
            box_cols: 2,
            m: 12,
            n: 16,
            tile_m: 8,
            tile_n: 8,
            wfs_per_wg: 2,
            elem_bytes: 2,
            base: 0,
            updates_per_element: 2,
            wf_tiles: 7,
            action: RegionAction::Notify,
        }
    }

    #[test]
    fn a_region_programs_its_entries_on_allocation_and_on_installation() {
        let mut t = Tracker::default();
        // Counts before the region: an unprogrammed way, merged when the region comes.
        t.count(100, 0, 32);
        assert_eq!(t.orphans(), 1);
        let fired = t.program_region(&region(3, 100, 4)).unwrap();
        assert!(fired.is_empty(), "32 of 64 counted");
        assert_eq!(t.orphans(), 0);
        let f = t.count(100, 0, 32).fired.unwrap();
        assert_eq!((f.region, f.dma_id), (Some(3), TRACKER_NO_DMA));
        // WG 102 is tile row 1 (rows 8..12 of 12): WF 0 has 4 x 8 elements, WF 1 none.
        assert_eq!(t.count(102, 0, 63).fired, None);
        assert!(t.count(102, 0, 1).fired.is_some());
        assert_eq!(t.stats().region_entries, 2);
        // A live slot is refused; an overlapping range is invalid; a WG outside every
        // region allocates an unprogrammed way as before.
        assert_eq!(
            t.program_region(&region(3, 200, 4)),
            Err(TrackerError::SetFull)
        );
        assert_eq!(
            t.program_region(&region(4, 103, 4)),
            Err(TrackerError::Invalid)
        );
        t.count(7, 0, 1);
        assert_eq!(t.orphans(), 1);
        assert!(t.release_region(3).is_some());
        assert!(t.region(3).is_none());
    }

    #[test]
    fn a_region_installed_after_its_counts_fires_them_at_once() {
        let mut t = Tracker::new(1, 1);
        t.count(100, 0, 64);
        t.count(100, 1, 64);
        let mut r = region(0, 100, 4);
        r.action = RegionAction::Dma {
            op: nmcp_isa::t3::DmaOp::Store,
            peer: 1,
            wf_tiles_per_block: 1,
        };
        let fired = t.program_region(&r).unwrap();
        assert_eq!(fired.len(), 2, "one on chip, one spilled");
        assert!(fired.iter().all(|f| f.dma_id == 0 && f.region == Some(0)));
        assert_eq!(t.live(), 0);
    }

    proptest! {
        /// Random tiles, a tiny tracker, programming and counting interleaved at random:
        /// each tile fires exactly once, exactly when it is both programmed and complete.
        #[test]
        fn no_update_lost_or_counted_twice_under_overflow(
            tiles in proptest::collection::vec((0u32..64, 0u8..8, 1u32..6), 1..40),
            order_seed in any::<u64>(),
            sets in 1usize..4, ways in 1usize..3,
        ) {
            // Unique (wg, wf) per tile.
            let mut seen = std::collections::HashSet::new();
            let tiles: Vec<_> = tiles.into_iter().filter(|&(w, f, _)| seen.insert((w, f))).collect();
            // Each tile: one Program step and `pieces` Count steps of 3 elements each.
            let mut steps: Vec<(usize, bool)> = Vec::new();
            for (i, &(_, _, pieces)) in tiles.iter().enumerate() {
                steps.push((i, true));
                for _ in 0..pieces { steps.push((i, false)); }
            }
            // Deterministic shuffle.
            let mut s = order_seed | 1;
            for i in (1..steps.len()).rev() {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                steps.swap(i, (s % (i as u64 + 1)) as usize);
            }
            let mut t = Tracker::new(sets, ways);
            let mut fired = vec![0u32; tiles.len()];
            let mut programmed = vec![false; tiles.len()];
            let mut counted = vec![0u32; tiles.len()];
            for (i, prog) in steps {
                let (wg, wf, pieces) = tiles[i];
                let out = if prog {
                    programmed[i] = true;
                    t.program(&entry(i as u16, wg, wf, pieces * 3)).unwrap()
                } else {
                    counted[i] += 1;
                    t.count(wg, wf, 3)
                };
                let complete = programmed[i] && counted[i] == pieces;
                if let Some(f) = out.fired {
                    prop_assert_eq!(f.entry as usize, i);
                    prop_assert!(complete, "fired early");
                    fired[i] += 1;
                } else {
                    prop_assert!(!complete, "complete but did not fire");
                }
            }
            prop_assert!(fired.iter().all(|&f| f == 1));
            prop_assert_eq!(t.live(), 0);
            prop_assert_eq!(t.stats().overcounts, 0);
        }
    }
}
