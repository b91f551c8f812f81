//! The firmware's view of one T3 GPU: DMA engines, tracker and output maps.

use nmcp_firmware::platform::{
    Clock, Cycle as FwCycle, DmaController, DmaError, MapError, NoDeviceMemory, NoKernelDispatcher,
    NoNmcController, OutputMapController, TrackerController, TrackerError,
};
use nmcp_isa::t3::{split_peer, DmaDescriptor, OutputMap, RegionAction, TrackRegion, TrackerEntry};

use super::stepping::Ev;
use super::T3System;
use crate::hbm::Cycle;
use crate::t3::tracker::Tracker;

/// The firmware's view of one GPU: DMA engines, tracker, output maps; everything else is
/// absent on a T3 node (the CP's queues are not modelled here).
///
/// Regions, tracker entries and DMA descriptors a handler programs are held here and reach the
/// hardware when the handler ends ([`T3Platform::finish`]): the CP is busy for the
/// handler's charged time and its MMIO writes land at its end. Output maps and the
/// dispatch start apply at once (they configure the producer before its launch).
#[derive(Debug)]
pub struct T3Platform<'a> {
    pub(super) sys: &'a mut T3System,
    pub(super) node: usize,
    pub(super) at: Cycle,
    /// Records programmed by the handler, in order.
    pub(super) programmed: Vec<Programmed>,
}

/// A record the firmware programmed, applied when its handler ends.
#[derive(Debug, Clone)]
pub(super) enum Programmed {
    Entry(TrackerEntry),
    Dma(DmaDescriptor),
    Region(TrackRegion),
}

impl T3Platform<'_> {
    /// Ends the handler at `end` (≥ the handler's start): its records reach the tracker
    /// and the DMA engines then, at once when `end` is the start (a free firmware).
    pub fn finish(mut self, end: Cycle) {
        let programmed = std::mem::take(&mut self.programmed);
        if end <= self.at {
            self.sys.apply_programmed(self.node, programmed, self.at);
        } else if !programmed.is_empty() {
            self.sys.sender = self.node as u32;
            self.sys.schedule(
                end,
                Ev::Apply {
                    node: self.node as u32,
                    programmed,
                },
            );
        }
    }

    fn dmas_held(&self) -> usize {
        self.programmed
            .iter()
            .filter(|r| matches!(r, Programmed::Dma(_)))
            .count()
    }
}

impl T3System {
    /// Programs a handler's records into GPU `node`'s tracker and DMA table at `at` (its
    /// end), in the order the firmware made them; entries that fire on programming fire
    /// then. A refusal here (the firmware was told `Ok`) is a platform fault.
    pub(super) fn apply_programmed(&mut self, node: usize, programmed: Vec<Programmed>, at: Cycle) {
        for r in programmed {
            match r {
                Programmed::Dma(d) => {
                    if let Err(e) = self.nodes[node].dma.program(&d) {
                        self.fault
                            .get_or_insert(format!("GPU {node}: DMA descriptor {}: {e}", d.id));
                    }
                }
                Programmed::Region(r) => self.program_region(node, &r, at),
                Programmed::Entry(e) => match self.nodes[node].tracker.program(&e) {
                    Ok(o) => {
                        if o.spilled {
                            self.spill_access(node, e.wg_id, e.wf_id, at);
                        }
                        if let Some(f) = o.fired {
                            self.fired(node, f, at);
                        }
                    }
                    Err(err) => {
                        self.fault
                            .get_or_insert(format!("GPU {node}: tracker entry {}: {err}", e.id));
                    }
                },
            }
        }
        self.run_dma(node, at);
    }

    /// The first record the hardware refused after the firmware was told `Ok`.
    pub fn platform_fault(&self) -> Option<&str> {
        self.fault.as_deref()
    }
}

impl Clock for T3Platform<'_> {
    fn now(&self) -> FwCycle {
        self.at
    }
    fn hz(&self) -> u64 {
        1_000_000_000
    }
}

// Blocks a T3 node does not have: the shared absent-block markers answer `Unsupported`.
impl NoDeviceMemory for T3Platform<'_> {}
impl NoKernelDispatcher for T3Platform<'_> {}
impl NoNmcController for T3Platform<'_> {}

impl DmaController for T3Platform<'_> {
    fn program(&mut self, engine: u8, desc: &DmaDescriptor) -> Result<(), DmaError> {
        if engine >= 4 {
            return Err(DmaError::NoSuchEngine);
        }
        if desc.validate().is_err() {
            return Err(DmaError::OutOfRange);
        }
        let (peer, _) = split_peer(desc.dst);
        if peer.is_some_and(|p| u32::from(p) >= self.sys.cfg.gpus) {
            return Err(DmaError::OutOfRange);
        }
        // The table's room counts the descriptors this handler holds; an id already
        // live (in the table or held) is refused as the table refuses it.
        let dma = &self.sys.nodes[self.node].dma;
        let held = self
            .programmed
            .iter()
            .any(|r| matches!(r, Programmed::Dma(d) if d.id == desc.id));
        if !dma.has_room(self.dmas_held()) || dma.holds(desc.id) || held {
            return Err(DmaError::TableFull);
        }
        self.programmed.push(Programmed::Dma(desc.clone()));
        Ok(())
    }
}

impl TrackerController for T3Platform<'_> {
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError> {
        // The tracker spills instead of refusing a full set, so only a malformed entry
        // is refused; it is checked now, the entry programmed at the handler's end.
        Tracker::check(entry)?;
        self.programmed.push(Programmed::Entry(entry.clone()));
        Ok(())
    }

    fn program_region(&mut self, region: &TrackRegion) -> Result<(), TrackerError> {
        // Checked now, installed at the handler's end; a slot that is live in the
        // tracker or held by this handler is refused as the tracker refuses it.
        Tracker::check_region(region)?;
        if let RegionAction::Dma { peer, .. } = region.action {
            if u32::from(peer) >= self.sys.cfg.gpus {
                return Err(TrackerError::Invalid);
            }
        }
        let held = self
            .programmed
            .iter()
            .any(|r| matches!(r, Programmed::Region(h) if h.slot == region.slot));
        if held
            || self.sys.nodes[self.node]
                .tracker
                .region(region.slot)
                .is_some()
        {
            return Err(TrackerError::SetFull);
        }
        self.programmed.push(Programmed::Region(*region));
        Ok(())
    }
}

impl OutputMapController for T3Platform<'_> {
    fn map_output(&mut self, map: &OutputMap) -> Result<(), MapError> {
        if map.wg_count == 0 || (map.local.is_none() && map.remote.is_none()) {
            return Err(MapError::Invalid);
        }
        if map
            .remote
            .is_some_and(|(p, _)| u32::from(p) >= self.sys.cfg.gpus)
        {
            return Err(MapError::NoSuchPeer);
        }
        let n = &mut self.sys.nodes[self.node];
        if n.maps.len() >= 64 {
            return Err(MapError::TooManyMaps);
        }
        n.maps.push(*map);
        Ok(())
    }
    fn set_dispatch_start(&mut self, first_wg: u32) -> Result<(), MapError> {
        self.sys.nodes[self.node].dispatch_start = first_wg;
        Ok(())
    }
}
