//! The tracked regions' hardware on one GPU (dissertation 8.3.4): each region's progress
//! (entries fired, DMA blocks started and landed), the DMA block a firing completes, and
//! the one `RegionDone` the firmware hears when the whole region is done.
//!
//! The tracker derives a region's entries (`crate::t3::tracker`); a firing of a DMA
//! region counts towards its block, and the block's descriptor comes from the region
//! ([`TrackRegion::dma_block`], the same addresses, sizes and receiver tag a firmware
//! would program). The region is done when all its non-empty WF tiles fired and every
//! block it sent landed; the tracker's slot is then free again.

use nmcp_firmware::Event;
use nmcp_isa::t3::{RegionAction, TrackRegion, REGION_SLOTS};

use super::dma::region_key;
use super::T3System;
use crate::hbm::Cycle;
use crate::t3::tracker::Fired;

/// One live region's progress.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct RegionProgress {
    /// Entries of the region that fired.
    fired: u32,
    /// DMA blocks made ready.
    dmas: u32,
    /// DMA blocks that landed.
    landed: u32,
}

/// A GPU's region progress, by slot.
#[derive(Debug, Clone)]
pub(super) struct Regions {
    progress: Vec<RegionProgress>,
    /// `RegionDone` events raised.
    pub(super) done: u64,
}

impl Default for Regions {
    fn default() -> Self {
        Self {
            progress: vec![RegionProgress::default(); usize::from(REGION_SLOTS)],
            done: 0,
        }
    }
}

impl T3System {
    /// Installs region `r` in GPU `node`'s tracker at `at` (a handler's end); entries its
    /// earlier counts complete fire now. A refusal here (the firmware was told `Ok`) is a
    /// platform fault.
    pub(super) fn program_region(&mut self, node: usize, r: &TrackRegion, at: Cycle) {
        match self.nodes[node].tracker.program_region(r) {
            Ok(fired) => {
                if let Some(p) = self.nodes[node]
                    .regions
                    .progress
                    .get_mut(usize::from(r.slot))
                {
                    *p = RegionProgress::default();
                }
                for f in fired {
                    self.fired(node, f, at);
                }
                self.region_check(node, r.slot, at);
            }
            Err(e) => {
                self.fault
                    .get_or_insert(format!("GPU {node}: region {}: {e}", r.slot));
            }
        }
    }

    /// An entry of region `slot` fired: count it, and trigger its DMA block.
    pub(super) fn region_fired(&mut self, node: usize, slot: u8, f: Fired, at: Cycle) {
        let Some(r) = self.nodes[node].tracker.region(slot).copied() else {
            self.fault
                .get_or_insert(format!("GPU {node}: an entry of free region {slot} fired"));
            return;
        };
        let block = match r.action {
            RegionAction::Notify => None,
            RegionAction::Dma { .. } => {
                let Some(b) = r.dma_block(f.wg_id, f.wf_id) else {
                    self.fault.get_or_insert(format!(
                        "GPU {node}: region {slot} has no DMA block for WG {} WF {}",
                        f.wg_id, f.wf_id
                    ));
                    return;
                };
                let local = f.wg_id.saturating_sub(r.wg_first);
                let index = local * u32::from(r.wfs_per_wg) + u32::from(b.first_wf);
                Some((region_key(slot, index), b))
            }
        };
        let n = &mut self.nodes[node];
        let ready = block.is_some_and(|(key, b)| n.dma.trigger_block(key, &b.desc, b.fires));
        if let Some(p) = n.regions.progress.get_mut(usize::from(slot)) {
            p.fired += 1;
            p.dmas += u32::from(ready);
        }
        if ready {
            self.run_dma(node, at);
        }
        self.region_check(node, slot, at);
    }

    /// A DMA block of region `slot` landed at its destination.
    pub(super) fn region_dma_landed(&mut self, node: usize, slot: u8, at: Cycle) {
        if let Some(p) = self.nodes[node].regions.progress.get_mut(usize::from(slot)) {
            p.landed += 1;
        }
        self.region_check(node, slot, at);
    }

    /// Raises `RegionDone` and frees the slot when every WF tile of the region fired and
    /// every block it sent landed.
    fn region_check(&mut self, node: usize, slot: u8, at: Cycle) {
        let n = &mut self.nodes[node];
        let Some(r) = n.tracker.region(slot) else {
            return;
        };
        let Some(p) = n.regions.progress.get(usize::from(slot)) else {
            return;
        };
        if p.fired < r.wf_tiles || p.landed < p.dmas {
            return;
        }
        n.tracker.release_region(slot);
        n.regions.done += 1;
        n.fw_events.push((at, Event::RegionDone { slot }));
    }
}
