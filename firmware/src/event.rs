//! Events the platform delivers and the firmware's top-level dispatcher.

use core::fmt;

use crate::platform::{DispatchError, DmaError, MemoryError, NmcError, NmcTicket, TrackerError};
use crate::{cp, nmc, Platform};

/// Something the hardware reports to the CP. Each one is handled to completion.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Event {
    /// A producer rang the doorbell of `queue` (new packets may be visible).
    Doorbell {
        /// Queue index.
        queue: u8,
    },
    /// The dispatcher placed the last workgroup of a kernel: the queue head moved.
    KernelDispatched {
        /// Queue index.
        queue: u8,
        /// Dispatch id of the packet.
        dispatch_id: u64,
    },
    /// The last workgroup of a kernel finished.
    KernelCompleted {
        /// Queue index.
        queue: u8,
        /// Dispatch id of the packet.
        dispatch_id: u64,
    },
    /// A macro-command finished on every channel it targeted.
    NmcDone {
        /// Ticket returned by `submit`.
        ticket: NmcTicket,
    },
    /// The host finished a cross-bank reduction requested with `reduce_partials`.
    PartialsReady {
        /// Ticket returned by `reduce_partials`.
        ticket: NmcTicket,
        /// The sum of every bank's accumulator.
        sum: f32,
    },
    /// A DMA transfer landed.
    DmaDone {
        /// DMA engine.
        engine: u8,
        /// Descriptor id.
        id: u16,
    },
    /// A tracker entry reached its threshold.
    TrackerFired {
        /// Tracker entry id.
        entry: u16,
    },
    /// A periodic timer tick.
    Timer,
}

/// Why a handler could not finish. The firmware stays consistent after any of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum FirmwareError {
    /// A device-memory access failed.
    Memory(MemoryError),
    /// The dispatcher refused a request.
    Dispatch(DispatchError),
    /// The NMC engine refused a request.
    Nmc(NmcError),
    /// A DMA engine refused a request.
    Dma(DmaError),
    /// The tracker refused a request.
    Tracker(TrackerError),
    /// The command processor failed.
    Cp(cp::CpError),
    /// The NMC sequencer failed.
    Sequencer(nmc::SequencerError),
}

impl fmt::Display for FirmwareError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory(e) => write!(f, "device memory: {e}"),
            Self::Dispatch(e) => write!(f, "dispatch: {e}"),
            Self::Nmc(e) => write!(f, "NMC: {e}"),
            Self::Dma(e) => write!(f, "DMA: {e}"),
            Self::Tracker(e) => write!(f, "tracker: {e}"),
            Self::Cp(e) => write!(f, "command processor: {e}"),
            Self::Sequencer(e) => write!(f, "NMC sequencer: {e}"),
        }
    }
}

impl core::error::Error for FirmwareError {}

macro_rules! from_error {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for FirmwareError {
            fn from(e: $t) -> Self { Self::$v(e) }
        }
    )*};
}
from_error!(MemoryError => Memory, DispatchError => Dispatch, NmcError => Nmc,
            DmaError => Dma, TrackerError => Tracker, cp::CpError => Cp,
            nmc::SequencerError => Sequencer);

/// The whole firmware: one value, owned by the board's main loop or by the emulator.
#[derive(Debug, Default)]
pub struct Firmware {
    /// GOLDYLOC command processor.
    pub cp: cp::CommandProcessor,
    /// NMC sequencing (LAMB, reductions).
    pub nmc: nmc::NmcSequencer,
}

impl Firmware {
    /// Handles one event to completion.
    ///
    /// # Errors
    /// Any [`FirmwareError`]; the firmware's state stays consistent and the next event
    /// can be handled.
    pub fn handle<P: Platform>(&mut self, event: Event, p: &mut P) -> Result<(), FirmwareError> {
        match event {
            Event::Doorbell { .. }
            | Event::KernelDispatched { .. }
            | Event::KernelCompleted { .. }
            | Event::Timer => self.cp.on_event(&event, p),
            Event::NmcDone { .. } | Event::PartialsReady { .. } => self.nmc.on_event(&event, p),
            Event::DmaDone { .. } | Event::TrackerFired { .. } => Ok(()),
        }
    }
}
