//! A mock platform that records every T3 call.
#![allow(dead_code)]

use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle, DevAddr, DeviceMemory, DispatchError, DispatchRequest, DmaController,
    DmaError, KernelDispatcher, MapError, MemoryError, NmcController, NmcError, NmcTicket,
    OutputMapController, TrackerController, TrackerError,
};
use nmcp_isa::nmc::MacroCommand;
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackerEntry};

#[derive(Debug, Default)]
pub struct Mock {
    pub maps: Vec<OutputMap>,
    pub dispatch_start: Option<u32>,
    pub entries: Vec<TrackerEntry>,
    pub dmas: Vec<(u8, DmaDescriptor)>,
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

impl DeviceMemory for Mock {
    fn read(&mut self, _addr: DevAddr, _buf: &mut [u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
    fn write(&mut self, _addr: DevAddr, _data: &[u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
}

impl KernelDispatcher for Mock {
    fn dispatch(&mut self, _req: &DispatchRequest) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
    fn complete_without_dispatch(&mut self, _q: u8, _d: u64, _v: i64) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
}

impl NmcController for Mock {
    fn submit(&mut self, _cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }
    fn write_scalar(&mut self, _c: ChannelSet, _reg: u8, _bits: u32) -> Result<(), NmcError> {
        Err(NmcError::Unsupported)
    }
    fn reduce_partials(&mut self, _c: ChannelSet) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }
}

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
