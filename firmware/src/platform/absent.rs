//! The one double for a hardware block a platform does not have: a marker trait per block
//! (`No*`) whose blanket impl answers every call of that block with its `Unsupported`
//! error, and [`Absent`], a platform with no block at all.
//!
//! A partial platform (the emulator's node without T3, a test mock that only records T3
//! calls) declares what it lacks in one line (`impl NoDmaController for Node {}`) instead
//! of writing stub bodies, and every absent block refuses the same way. A platform that
//! has a block but refuses a particular request still answers `Unsupported` itself.

use nmcp_isa::nmc::MacroCommand;
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackRegion, TrackerEntry};

use super::{
    ChannelSet, Clock, Cycle, DevAddr, DeviceMemory, DispatchError, DispatchRequest, DmaController,
    DmaError, KernelDispatcher, MapError, MemoryError, NmcController, NmcError, NmcTicket,
    OutputMapController, TrackerController, TrackerError,
};

/// A platform without device memory the firmware may reach: [`DeviceMemory`] answers
/// [`MemoryError::Unsupported`].
pub trait NoDeviceMemory {}

/// A platform without a kernel dispatcher: [`KernelDispatcher`] answers
/// [`DispatchError::Unsupported`].
pub trait NoKernelDispatcher {}

/// A platform without NMC engines: [`NmcController`] answers [`NmcError::Unsupported`].
pub trait NoNmcController {}

/// A platform without DMA engines: [`DmaController`] answers [`DmaError::Unsupported`].
pub trait NoDmaController {}

/// A platform without a store tracker: [`TrackerController`] answers
/// [`TrackerError::Unsupported`].
pub trait NoTrackerController {}

/// A platform that cannot map producer output: [`OutputMapController`] answers
/// [`MapError::Unsupported`].
pub trait NoOutputMapController {}

impl<T: NoDeviceMemory> DeviceMemory for T {
    fn read(&mut self, _addr: DevAddr, _buf: &mut [u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
    fn write(&mut self, _addr: DevAddr, _data: &[u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
}

impl<T: NoKernelDispatcher> KernelDispatcher for T {
    fn dispatch(&mut self, _req: &DispatchRequest) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
    fn complete_without_dispatch(
        &mut self,
        _queue: u8,
        _dispatch_id: u64,
        _value: i64,
    ) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
}

impl<T: NoNmcController> NmcController for T {
    fn submit(&mut self, _cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }
    fn write_scalar(
        &mut self,
        _channels: ChannelSet,
        _reg: u8,
        _bits: u32,
    ) -> Result<(), NmcError> {
        Err(NmcError::Unsupported)
    }
    fn reduce_partials(&mut self, _channels: ChannelSet) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }
}

impl<T: NoDmaController> DmaController for T {
    fn program(&mut self, _engine: u8, _desc: &DmaDescriptor) -> Result<(), DmaError> {
        Err(DmaError::Unsupported)
    }
}

impl<T: NoTrackerController> TrackerController for T {
    fn program(&mut self, _entry: &TrackerEntry) -> Result<(), TrackerError> {
        Err(TrackerError::Unsupported)
    }
    fn program_region(&mut self, _region: &TrackRegion) -> Result<(), TrackerError> {
        Err(TrackerError::Unsupported)
    }
}

impl<T: NoOutputMapController> OutputMapController for T {
    fn map_output(&mut self, _map: &OutputMap) -> Result<(), MapError> {
        Err(MapError::Unsupported)
    }
    fn set_dispatch_start(&mut self, _first_wg: u32) -> Result<(), MapError> {
        Err(MapError::Unsupported)
    }
}

/// A platform with no hardware block: every call is refused with its block's
/// `Unsupported`, and its clock stands at cycle 0 of a 1 GHz CP. For tests of how the
/// firmware meets a missing block, and the base a partial test platform starts from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Absent;

impl Absent {
    /// The rate [`Clock::hz`] reports.
    pub const HZ: u64 = 1_000_000_000;
}

impl Clock for Absent {
    fn now(&self) -> Cycle {
        0
    }
    fn hz(&self) -> u64 {
        Self::HZ
    }
}

impl NoDeviceMemory for Absent {}
impl NoKernelDispatcher for Absent {}
impl NoNmcController for Absent {}
impl NoDmaController for Absent {}
impl NoTrackerController for Absent {}
impl NoOutputMapController for Absent {}
