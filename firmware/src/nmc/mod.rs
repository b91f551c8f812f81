//! NMC sequencing: LAMB and reductions. (Filled in by issue 3.)

use core::fmt;

use crate::{Event, FirmwareError, Platform};

/// Errors of the NMC sequencer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SequencerError {
    /// A bounded table overflowed.
    Capacity,
}

impl fmt::Display for SequencerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("sequencer capacity exceeded"),
        }
    }
}

impl core::error::Error for SequencerError {}

/// The NMC sequencer's state.
#[derive(Debug, Default)]
pub struct NmcSequencer {}

impl NmcSequencer {
    /// Reacts to an NMC completion.
    ///
    /// # Errors
    /// Any [`FirmwareError`] from the platform.
    pub fn on_event<P: Platform>(
        &mut self,
        _event: &Event,
        _p: &mut P,
    ) -> Result<(), FirmwareError> {
        Ok(())
    }
}
