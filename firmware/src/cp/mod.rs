//! GOLDYLOC command processor: inspect the packets at every queue head, predict how many
//! independent GEMMs to run together, swap in the kernel object tuned for that degree.
//! (The queue logic is filled in by issue 4; features and predictor are shared now.)

pub mod features;
pub mod predictor;

use core::fmt;
pub use features::{CuResources, FeatureError, FEATURE_COUNT};
pub use predictor::{CdPredictor, CLASS_COUNT};

use crate::{Event, FirmwareError, Platform};

/// Errors of the command processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CpError {
    /// A bounded table overflowed.
    Capacity,
}

impl fmt::Display for CpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("CP table capacity exceeded"),
        }
    }
}

impl core::error::Error for CpError {}

/// The command processor's state.
#[derive(Debug, Default)]
pub struct CommandProcessor {}

impl CommandProcessor {
    /// Reacts to a queue event.
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
