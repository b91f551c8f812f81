//! The top floor: the one place that knows the CP, the NMC sequencer and T3, routes each
//! event to its owner and gathers their errors. Each subsystem has its own error
//! ([`cp::CpError`], [`nmc::SequencerError`], [`t3::T3Fault`]) and never names
//! [`FirmwareError`]; only this file converts into it. T3 returns `T3Fault`, converted
//! here; the CP's and the sequencer's handlers return the caller's error type
//! ([`cp::FromCpErrors`], [`nmc::FromSequencerErrors`]) and this file asks for
//! `FirmwareError`, so they build it where an error arises and the conversion costs their
//! RV32 paths nothing (a converted `CpError` cost 7 instructions per CP event).

use core::fmt;

use crate::{cp, nmc, t3, Event, Platform};

use crate::platform::{DispatchError, DmaError, MemoryError, NmcError, TrackerError};

/// Why a handler could not finish. The firmware stays consistent after any of these.
///
/// A platform error is reported by the block that raised it (`Memory`, `Dispatch`, `Nmc`),
/// whichever subsystem met it; `Cp` and `Sequencer` carry the subsystems' own refusals.
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
    /// The command processor refused.
    Cp(cp::CpError),
    /// The NMC sequencer refused.
    Sequencer(nmc::SequencerError),
    /// T3 programming failed.
    T3(t3::T3Fault),
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
            Self::T3(e) => write!(f, "T3: {e}"),
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
            DmaError => Dma, TrackerError => Tracker, t3::T3Fault => T3,
            nmc::SequencerError => Sequencer);

impl From<cp::CpError> for FirmwareError {
    /// The platform errors the CP met are reported by their block, its own refusals as `Cp`.
    fn from(e: cp::CpError) -> Self {
        match e {
            cp::CpError::Memory(e) => Self::Memory(e),
            cp::CpError::Dispatch(e) => Self::Dispatch(e),
            e => Self::Cp(e),
        }
    }
}

/// The whole firmware: one value, owned by the board's main loop or by the emulator.
#[derive(Debug, Default)]
pub struct Firmware {
    /// GOLDYLOC command processor.
    pub cp: cp::CommandProcessor,
    /// NMC sequencing (LAMB, reductions).
    pub nmc: nmc::NmcSequencer,
    /// T3 programming (tracker entries, DMA descriptors, output maps).
    pub t3: t3::T3Programmer,
}

impl Firmware {
    /// Starts a fused GEMM + collective: maps the producer's output, sets its dispatch
    /// start and programs the first tracked stage. Call before dispatching the producer.
    ///
    /// # Errors
    /// [`FirmwareError::T3`].
    pub fn start_t3<P: Platform>(
        &mut self,
        job: &t3::T3Job,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        Ok(self.t3.start(job, p)?)
    }

    /// Starts a LAMB step on the NMC sequencer.
    ///
    /// # Errors
    /// The sequencer's refusals ([`FirmwareError::Sequencer`]) and the platform errors it
    /// met ([`FirmwareError::Memory`], [`FirmwareError::Nmc`]).
    pub fn start_lamb<P: Platform>(
        &mut self,
        job: nmc::LambJob,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.nmc.start_lamb(job, p)
    }

    /// The T3 programmer (state, completion, work counters).
    pub fn t3(&self) -> &t3::T3Programmer {
        &self.t3
    }

    /// Some handler stopped at its work bound with work left: the platform should
    /// deliver an [`Event::Deferred`].
    pub fn has_pending_work(&self) -> bool {
        self.cp.has_pending_work() || self.t3.has_pending_work()
    }

    /// Handles one event to completion.
    ///
    /// # Errors
    /// Any [`FirmwareError`]; the firmware's state stays consistent and the next event
    /// can be handled.
    pub fn handle<P: Platform>(&mut self, event: Event, p: &mut P) -> Result<(), FirmwareError> {
        match event {
            Event::Doorbell { .. }
            | Event::KernelDispatched { .. }
            | Event::KernelCompleted { .. } => self.cp.on_event(&event, p),
            // Both may have stopped at their work bound; each continues (the T3 result
            // is kept even when the CP's fails).
            Event::Deferred => {
                let cp: Result<(), FirmwareError> = self.cp.on_event(&event, p);
                let t3 = self.t3.on_event(&event, p);
                cp?;
                Ok(t3?)
            }
            Event::NmcDone { .. } | Event::PartialsReady { .. } => self.nmc.on_event(&event, p),
            // DmaDone, TrackerFired, RegionDone (a wildcard: an explicit list of the three
            // costs every CP decision two instructions on RV32, board line `cp_decision*`).
            _ => Ok(self.t3.on_event(&event, p)?),
        }
    }
}
