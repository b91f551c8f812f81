//! The firmware's only way to reach hardware.
//!
//! One trait per hardware block (Tock style). Every call returns at once: `Ok` means the
//! request was accepted, not that it finished; completion arrives later as an
//! [`Event`](crate::Event). The emulator implements these traits on its model; a board
//! binary implements them with MMIO (or with buffers when running under QEMU). Nothing in
//! the firmware reads emulator state any other way. A platform without a block declares
//! so with that block's marker in [`absent`] (one shared double) instead of stubbing it.

use core::fmt;

use nmcp_isa::nmc::{EncodedMacroCommand, MacroCommand};
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackRegion, TrackerEntry};

pub mod absent;

pub use absent::{
    Absent, NoDeviceMemory, NoDmaController, NoKernelDispatcher, NoNmcController,
    NoOutputMapController, NoTrackerController,
};

/// A point in time, in CP clock cycles.
pub type Cycle = u64;

/// A device-memory (GPU physical) address.
pub type DevAddr = u64;

macro_rules! simple_error {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $msg:literal,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vm])* $variant,)*
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $(Self::$variant => $msg,)* })
            }
        }
        impl core::error::Error for $name {}
    };
}

simple_error! {
    /// Errors of [`DeviceMemory`] calls.
    MemoryError {
        /// The address range is not inside mapped device memory.
        OutOfRange => "address range outside device memory",
        /// The access is not aligned as the block requires.
        Misaligned => "misaligned device-memory access",
        /// This platform has no device memory the firmware may reach.
        Unsupported => "device memory not available on this platform",
    }
}

simple_error! {
    /// Errors of [`KernelDispatcher`] calls.
    DispatchError {
        /// The queue index is not an active queue.
        NoSuchQueue => "no such queue",
        /// The dispatcher cannot take another kernel right now; retry after a
        /// `KernelDispatched` or `KernelCompleted` event.
        Busy => "dispatcher busy",
        /// The packet the request names is not at the queue's read index.
        NotAtHead => "packet is not at the queue head",
        /// The packet at the head, or its GEMM extension record, does not describe a
        /// kernel the dispatcher can run (it does not decode, or the kernel object is not
        /// one the record lists).
        BadPacket => "packet does not describe a runnable kernel",
        /// This platform has no kernel dispatcher.
        Unsupported => "no kernel dispatcher on this platform",
    }
}

simple_error! {
    /// Errors of [`NmcController`] calls.
    NmcError {
        /// The command queue of the NMC engine is full; retry after an `NmcDone` event.
        Busy => "NMC engine busy",
        /// The macro-command names a channel or bank the device does not have.
        OutOfRange => "NMC command outside the device",
        /// The macro-command does not fit the engine (e.g. TS slots beyond capacity), or
        /// this platform has no NMC engines.
        Unsupported => "NMC command not supported by this engine",
        /// The scalar register index is not implemented.
        NoSuchRegister => "no such scalar register",
    }
}

simple_error! {
    /// Errors of [`DmaController`] calls.
    DmaError {
        /// No such DMA engine.
        NoSuchEngine => "no such DMA engine",
        /// The engine's descriptor table is full.
        TableFull => "DMA descriptor table full",
        /// Source or destination outside mapped memory.
        OutOfRange => "DMA range outside mapped memory",
        /// This platform has no DMA engines.
        Unsupported => "no DMA engines on this platform",
    }
}

simple_error! {
    /// Errors of [`TrackerController`] calls.
    TrackerError {
        /// The tracker set for this workgroup id has no free way.
        SetFull => "tracker set full",
        /// The entry's fields are inconsistent (e.g. zero threshold).
        Invalid => "invalid tracker entry",
        /// This platform has no store tracker.
        Unsupported => "no store tracker on this platform",
    }
}

simple_error! {
    /// Errors of [`OutputMapController`] calls.
    MapError {
        /// The address-mapping table has no room for another range; retry after the
        /// producer kernel that uses the current maps completed.
        TooManyMaps => "output map table full",
        /// The map is inconsistent (it does not validate, overlaps a mapped range, or
        /// names a WG id the kernel does not have).
        Invalid => "invalid output map",
        /// The remote peer is not a GPU this one reaches.
        NoSuchPeer => "no such peer GPU",
        /// This platform cannot map producer output (no T3 support).
        Unsupported => "output mapping not supported on this platform",
    }
}

/// The CP's clock.
pub trait Clock {
    /// The current time in CP cycles.
    fn now(&self) -> Cycle;

    /// The clock's rate in hertz, so firmware can turn a duration into cycles (a T3
    /// timeout, a polling interval) on any platform.
    fn hz(&self) -> u64;
}

/// Device memory as the CP sees it (queues, packets, signals, descriptors).
///
/// Reads and writes complete immediately from the firmware's point of view; their cost is
/// charged to the CP's timeline by the platform.
pub trait DeviceMemory {
    /// Reads `buf.len()` bytes at `addr`.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`] if any byte lies outside device memory;
    /// [`MemoryError::Unsupported`] on a platform without device memory.
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError>;

    /// Writes `data` at `addr`.
    ///
    /// # Errors
    /// [`MemoryError::OutOfRange`] if any byte lies outside device memory;
    /// [`MemoryError::Unsupported`] on a platform without device memory.
    fn write(&mut self, addr: DevAddr, data: &[u8]) -> Result<(), MemoryError>;

    /// Reads the little-endian 32-bit word at `addr` (the CP's native load: its hot path
    /// reads queue indices and packet fields one word at a time instead of copying whole
    /// packets). A platform with directly addressable memory overrides this with a
    /// single bounds-checked load.
    ///
    /// # Errors
    /// As [`DeviceMemory::read`].
    fn read_u32(&mut self, addr: DevAddr) -> Result<u32, MemoryError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Device memory the CP can load from directly, as 32-bit words (a ring buffer and
    /// its index words mapped into the CP's address space, as a hardware CP maps its
    /// queues): the address of `words[0]` and the words (little-endian values). `None`
    /// (the default) when the platform has no such mapping; the CP then reads through
    /// [`DeviceMemory::read_u32`]. The CP only reads through the view and drops it
    /// before any other call.
    fn mapped_words(&self) -> Option<(DevAddr, &[u32])> {
        None
    }

    /// The view of [`DeviceMemory::mapped_words`] for stores (the CP patches a packet's
    /// kernel object through it): the same base and words, or `None` (the default; the
    /// CP then writes through [`DeviceMemory::write_u32`]).
    fn mapped_words_mut(&mut self) -> Option<(DevAddr, &mut [u32])> {
        None
    }

    /// Writes the little-endian 32-bit word `value` at `addr`.
    ///
    /// # Errors
    /// As [`DeviceMemory::write`].
    fn write_u32(&mut self, addr: DevAddr, value: u32) -> Result<(), MemoryError> {
        self.write(addr, &value.to_le_bytes())
    }
}

/// A request to launch the kernel whose packet sits at a queue's head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DispatchRequest {
    /// Queue index (0..32).
    pub queue: u8,
    /// Dispatch id (the packet's position in the queue's ring, monotonically increasing).
    pub dispatch_id: u64,
    /// Kernel object to run (possibly swapped by the CP for a globally-optimized one).
    pub kernel_object: u64,
}

/// [`KernelDispatcher::mapped_fifo`]: the mapped device memory and the dispatcher's
/// request FIFO, borrowed together.
#[derive(Debug)]
pub struct MappedFifo<'a> {
    /// Address of `words[0]` (as [`DeviceMemory::mapped_words_mut`]'s).
    pub base: DevAddr,
    /// The mapped words (little-endian values).
    pub words: &'a mut [u32],
    /// The dispatcher's request FIFO: the CP pushes the requests of a group, then calls
    /// [`KernelDispatcher::dispatch_pushed`].
    pub fifo: &'a mut heapless::VecView<DispatchRequest>,
}

/// The GPU's workgroup dispatcher and the queues' completion signals.
pub trait KernelDispatcher {
    /// Starts dispatching the workgroups of the packet at the head of `req.queue`.
    /// `KernelDispatched` arrives when its last workgroup was placed, `KernelCompleted`
    /// when its last workgroup finished.
    ///
    /// # Errors
    /// [`DispatchError::NoSuchQueue`], [`DispatchError::Busy`],
    /// [`DispatchError::NotAtHead`], [`DispatchError::BadPacket`],
    /// [`DispatchError::Unsupported`].
    fn dispatch(&mut self, req: &DispatchRequest) -> Result<(), DispatchError>;

    /// Dispatches the requests of one GEMM group, in order, as
    /// [`KernelDispatcher::dispatch`] would one by one (a dispatcher that takes a whole
    /// group in one command saves the CP a call per member). Returns how many were
    /// accepted and, when that is fewer than `reqs.len()`, the error of the first one
    /// that was not (the rest were not attempted). The default calls
    /// [`KernelDispatcher::dispatch`] for each.
    ///
    /// # Errors
    /// The second field: as [`KernelDispatcher::dispatch`], for request
    /// `reqs[accepted]`.
    fn dispatch_group(&mut self, reqs: &[DispatchRequest]) -> (usize, Result<(), DispatchError>) {
        for (i, r) in reqs.iter().enumerate() {
            if let Err(e) = self.dispatch(r) {
                return (i, Err(e));
            }
        }
        (reqs.len(), Ok(()))
    }

    /// The mapped view of [`DeviceMemory::mapped_words_mut`] and the dispatcher's request
    /// FIFO at once, for a CP that patches a group's packets and queues their requests
    /// in the same pass (a hardware CP writes its dispatcher's memory-mapped FIFO; no
    /// request is built on the side and copied). Requests pushed into `fifo` are not
    /// dispatched until [`KernelDispatcher::dispatch_pushed`]. `None` (the default): no
    /// such FIFO (or no mapped view); the CP then uses
    /// [`KernelDispatcher::dispatch_group`].
    fn mapped_fifo(&mut self) -> Option<MappedFifo<'_>> {
        None
    }

    /// Dispatches, as one group and in order, the requests the CP pushed into the FIFO
    /// of [`KernelDispatcher::mapped_fifo`] at positions `from..`: all of them, or none.
    ///
    /// # Errors
    /// As [`KernelDispatcher::dispatch`], for the first request refused; nothing was
    /// dispatched and the requests are still in the FIFO at `from..` (the CP takes
    /// them back). The default: [`DispatchError::Unsupported`].
    fn dispatch_pushed(&mut self, from: usize) -> Result<(), DispatchError> {
        let _ = from;
        Err(DispatchError::Unsupported)
    }

    /// Completes the packet at the head of `queue` without running it (a packet the CP
    /// rejected, or a barrier packet that resolved), storing `value` into its completion
    /// signal, and advances the queue's read index.
    ///
    /// # Errors
    /// [`DispatchError::NoSuchQueue`], [`DispatchError::NotAtHead`],
    /// [`DispatchError::Unsupported`].
    fn complete_without_dispatch(
        &mut self,
        queue: u8,
        dispatch_id: u64,
        value: i64,
    ) -> Result<(), DispatchError>;

    /// Reads and clears the doorbell bitmap: bit `q` set when queue `q`'s doorbell was
    /// rung since the last call (a hardware CP's doorbell-pending register). A `Doorbell`
    /// event marks its own queue; the bitmap adds the doorbells rung meanwhile whose
    /// events a platform coalesced. The default (a platform that delivers one event per
    /// doorbell) is an empty bitmap.
    fn take_doorbells(&mut self) -> u32 {
        0
    }
}

/// Which pseudo-channels a broadcast NMC operation reaches (the same range type a
/// macro-command carries).
pub type ChannelSet = nmcp_isa::nmc::ChannelRange;

/// Identifies one accepted NMC request; echoed in its completion event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NmcTicket(pub u32);

/// The per-channel NMC engines in the memory controllers.
pub trait NmcController {
    /// Queues a macro-command; `NmcDone` arrives when every targeted channel finished it.
    ///
    /// # Errors
    /// [`NmcError::Busy`], [`NmcError::OutOfRange`], [`NmcError::Unsupported`].
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError>;

    /// Queues a macro-command already in its binary form (an [`EncodedMacroCommand`]
    /// always decodes to a valid command), as a driver writes it to the engines' command
    /// window. The default decodes it and calls [`Self::submit`], which is all a platform
    /// that takes commands as values needs; one with a command window overrides it and
    /// copies the bytes.
    ///
    /// # Errors
    /// As [`Self::submit`]; [`NmcError::Unsupported`] if the bytes do not decode (never
    /// for an [`EncodedMacroCommand`] that holds a command).
    fn submit_encoded(&mut self, cmd: &EncodedMacroCommand) -> Result<NmcTicket, NmcError> {
        let decoded = MacroCommand::decode(cmd.as_bytes()).map_err(|_| NmcError::Unsupported)?;
        self.submit(&decoded)
    }

    /// Writes a scalar register (raw 32-bit pattern) in every bank ALU of `channels`.
    /// Ordered after every previously submitted macro-command on those channels.
    ///
    /// # Errors
    /// [`NmcError::NoSuchRegister`], [`NmcError::OutOfRange`], [`NmcError::Busy`],
    /// [`NmcError::Unsupported`].
    fn write_scalar(&mut self, channels: ChannelSet, reg: u8, bits: u32) -> Result<(), NmcError>;

    /// Asks the GPU host to read every bank's reduction accumulator on `channels`, add
    /// them up, and clear them. `PartialsReady { ticket, sum }` carries the total.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`], [`NmcError::Busy`], [`NmcError::Unsupported`].
    fn reduce_partials(&mut self, channels: ChannelSet) -> Result<NmcTicket, NmcError>;
}

/// DMA engines (T3).
pub trait DmaController {
    /// Installs a descriptor; it fires when its tracker entry marks it ready (or at once
    /// if it has no trigger). `DmaDone` arrives when the transfer landed.
    ///
    /// # Errors
    /// [`DmaError::NoSuchEngine`], [`DmaError::TableFull`], [`DmaError::OutOfRange`],
    /// [`DmaError::Unsupported`].
    fn program(&mut self, engine: u8, desc: &DmaDescriptor) -> Result<(), DmaError>;
}

/// The store tracker at the memory controller (T3).
pub trait TrackerController {
    /// Installs a tracker entry.
    ///
    /// # Errors
    /// [`TrackerError::SetFull`], [`TrackerError::Invalid`],
    /// [`TrackerError::Unsupported`].
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError>;

    /// Installs a tracked region in its slot: from then on the tracker derives the entry
    /// of every WF tile of the region (threshold, DMA block) itself, and raises one
    /// `RegionDone` when all of them fired and their DMAs landed.
    ///
    /// # Errors
    /// [`TrackerError::SetFull`] (the slot is live), [`TrackerError::Invalid`],
    /// [`TrackerError::Unsupported`].
    fn program_region(&mut self, region: &TrackRegion) -> Result<(), TrackerError>;
}

/// The producer kernel's output address mapping (T3's `remote_map` / `dma_map`) and its
/// staggered workgroup order. Maps apply to the next producer kernel dispatched; they
/// stay until the platform's kernel boundary clears them.
pub trait OutputMapController {
    /// Maps the output tiles of a WG-id range of the next producer kernel: where its
    /// stores go (locally, to a peer, or both) and with which op (store or update).
    ///
    /// # Errors
    /// [`MapError::TooManyMaps`], [`MapError::Invalid`], [`MapError::NoSuchPeer`],
    /// [`MapError::Unsupported`].
    fn map_output(&mut self, map: &OutputMap) -> Result<(), MapError>;

    /// The producer dispatches its workgroups starting at id `first_wg` and wrapping
    /// around (staggered scheduling: stage 1's chunk first).
    ///
    /// # Errors
    /// [`MapError::Invalid`], [`MapError::Unsupported`].
    fn set_dispatch_start(&mut self, first_wg: u32) -> Result<(), MapError>;
}

/// Everything the firmware may touch. A blanket impl makes any type that implements all
/// the blocks a `Platform`.
pub trait Platform:
    Clock
    + DeviceMemory
    + KernelDispatcher
    + NmcController
    + DmaController
    + TrackerController
    + OutputMapController
{
}

impl<T> Platform for T where
    T: Clock
        + DeviceMemory
        + KernelDispatcher
        + NmcController
        + DmaController
        + TrackerController
        + OutputMapController
{
}
