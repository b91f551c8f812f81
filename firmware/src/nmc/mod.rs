//! NMC sequencing: turns a job (a LAMB step over a model's tensors) into macro-commands,
//! scalar-register writes and cross-bank reductions, lazily, as the engines take them.

pub mod lamb;

pub use lamb::{
    lay_out, FromSequencerErrors, LambJob, LambParams, LambSequencer, NmcGeometry,
    SequencerCostModel, SequencerError, SequencerWork, Stage1Program, TensorDesc, TensorPlacement,
};

use crate::platform::{DeviceMemory, NmcController};
use crate::Event;

/// The NMC sequencer's state.
#[derive(Debug, Default)]
pub struct NmcSequencer {
    /// LAMB optimizer steps.
    pub lamb: LambSequencer,
}

impl NmcSequencer {
    /// Starts a LAMB step.
    ///
    /// # Errors
    /// [`SequencerError::Busy`] while a step runs; descriptor and platform errors.
    pub fn start_lamb<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        job: LambJob,
        p: &mut P,
    ) -> Result<(), E> {
        self.lamb.start(job, p)
    }

    /// Reacts to an NMC completion.
    ///
    /// # Errors
    /// Any [`SequencerError`] (the sequencer's own or the platform's it met).
    pub fn on_event<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        event: &Event,
        p: &mut P,
    ) -> Result<(), E> {
        match *event {
            Event::NmcDone { ticket, status } => {
                // An engine failed a command it had accepted: the step cannot finish.
                status.map_err(|e| self.lamb.abort::<E>(e))?;
                self.lamb.on_done(ticket, p)
            }
            Event::PartialsReady {
                ticket,
                sum,
                status,
            } => {
                status.map_err(|e| self.lamb.abort::<E>(e))?;
                self.lamb.on_partials(ticket, sum, p)
            }
            _ => Ok(()),
        }
    }
}
