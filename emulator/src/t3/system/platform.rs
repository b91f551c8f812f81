//! The firmware's view of one T3 GPU: DMA engines, tracker and output maps.

use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle as FwCycle, DevAddr, DeviceMemory as FwMemory, DispatchError,
    DispatchRequest, DmaController, DmaError, KernelDispatcher, MapError, MemoryError,
    NmcController, NmcError, NmcTicket, OutputMapController, TrackerController, TrackerError,
};
use nmcp_isa::nmc::MacroCommand;
use nmcp_isa::t3::{split_peer, DmaDescriptor, OutputMap, TrackerEntry};

use super::T3System;
use crate::hbm::Cycle;
use crate::t3::tracker::Fired;

/// The firmware's view of one GPU: DMA engines, tracker, output maps; everything else is
/// absent on a T3 node (the CP's queues are not modelled here).
#[derive(Debug)]
pub struct T3Platform<'a> {
    pub(super) sys: &'a mut T3System,
    pub(super) node: usize,
    pub(super) at: Cycle,
    /// Tracker entries that fired on programming (applied when the handler ends).
    pub(super) fired: Vec<Fired>,
}

impl T3Platform<'_> {
    /// Applies what the handler did (tracker entries that fired on programming).
    pub fn finish(mut self) {
        let fired = std::mem::take(&mut self.fired);
        for f in fired {
            self.sys.fired(self.node, f, self.at);
        }
        self.sys.run_dma(self.node, self.at);
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

impl FwMemory for T3Platform<'_> {
    fn read(&mut self, _addr: DevAddr, _buf: &mut [u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
    fn write(&mut self, _addr: DevAddr, _data: &[u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
}

impl KernelDispatcher for T3Platform<'_> {
    fn dispatch(&mut self, _req: &DispatchRequest) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
    fn complete_without_dispatch(
        &mut self,
        _queue: u8,
        _packet_id: u64,
        _status: i64,
    ) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
}

impl NmcController for T3Platform<'_> {
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
        self.sys.nodes[self.node].dma.program(desc)
    }
}

impl TrackerController for T3Platform<'_> {
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError> {
        let o = self.sys.nodes[self.node].tracker.program(entry)?;
        if o.spilled {
            self.sys
                .spill_access(self.node, entry.wg_id, entry.wf_id, self.at);
        }
        if let Some(f) = o.fired {
            self.fired.push(f);
        }
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
