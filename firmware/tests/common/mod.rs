//! A mock platform that records every T3 call.
#![allow(dead_code)]

use nmcp_firmware::platform::{
    Clock, Cycle, DmaController, DmaError, MapError, NoDeviceMemory, NoKernelDispatcher,
    NoNmcController, OutputMapController, TrackerController, TrackerError,
};
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackRegion, TrackerEntry};

#[derive(Debug, Default)]
pub struct Mock {
    pub maps: Vec<OutputMap>,
    pub dispatch_start: Option<u32>,
    pub entries: Vec<TrackerEntry>,
    pub dmas: Vec<(u8, DmaDescriptor)>,
    /// Regions programmed, in order.
    pub regions: Vec<TrackRegion>,
    /// Bit `s`: slot `s` holds a region not yet reported done.
    pub live: u16,
    /// Refuse this many tracker programs with `SetFull`.
    pub set_full: u32,
    /// Refuse this many DMA programs with `TableFull`.
    pub table_full: u32,
    pub refused: u32,
}

impl Clock for Mock {
    fn now(&self) -> Cycle {
        0
    }
    fn hz(&self) -> u64 {
        1_000_000_000
    }
}

// The mock records T3 calls only: the other blocks are the shared absent double.
impl NoDeviceMemory for Mock {}
impl NoKernelDispatcher for Mock {}
impl NoNmcController for Mock {}

impl DmaController for Mock {
    fn program(&mut self, engine: u8, desc: &DmaDescriptor) -> Result<(), DmaError> {
        if self.table_full > 0 {
            self.table_full -= 1;
            self.refused += 1;
            return Err(DmaError::TableFull);
        }
        assert_eq!(desc.validate(), Ok(()), "{desc:?}");
        assert!(engine < 4);
        self.dmas.push((engine, desc.clone()));
        Ok(())
    }
}

impl TrackerController for Mock {
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError> {
        if self.set_full > 0 {
            self.set_full -= 1;
            self.refused += 1;
            return Err(TrackerError::SetFull);
        }
        assert_eq!(entry.validate(), Ok(()), "{entry:?}");
        self.entries.push(entry.clone());
        Ok(())
    }
    fn program_region(&mut self, region: &TrackRegion) -> Result<(), TrackerError> {
        if self.set_full > 0 || self.live & (1 << region.slot) != 0 {
            self.set_full = self.set_full.saturating_sub(1);
            self.refused += 1;
            return Err(TrackerError::SetFull);
        }
        assert_eq!(region.validate(), Ok(()), "{region:?}");
        self.live |= 1 << region.slot;
        self.regions.push(*region);
        Ok(())
    }
}

impl OutputMapController for Mock {
    fn map_output(&mut self, map: &OutputMap) -> Result<(), MapError> {
        assert_eq!(map.validate(), Ok(()), "{map:?}");
        self.maps.push(*map);
        Ok(())
    }
    fn set_dispatch_start(&mut self, first_wg: u32) -> Result<(), MapError> {
        self.dispatch_start = Some(first_wg);
        Ok(())
    }
}
