//! The step's three programs built and encoded once per step, each submission patching a
//! tensor's rows and columns into the binary form (the default build).

use super::*;

/// The step's three programs, built and encoded once per step; a submission only writes
/// the tensor's rows and column count into one of them, in its binary form (building a
/// command costs ~1,000 instructions of moves on RV32; validating and encoding one, ~470
/// plus ~37 per instruction word; patching the encoded form, a few dozen).
#[derive(Debug, Clone)]
pub(super) struct Templates {
    /// Where a program is built before it is encoded.
    scratch: MacroCommand,
    sum_of_squares: EncodedMacroCommand,
    stage1: EncodedMacroCommand,
    stage2: EncodedMacroCommand,
}

impl Default for Templates {
    #[inline]
    fn default() -> Self {
        Self {
            scratch: programs::empty(),
            sum_of_squares: EncodedMacroCommand::empty(),
            stage1: EncodedMacroCommand::empty(),
            stage2: EncodedMacroCommand::empty(),
        }
    }
}

impl Templates {
    /// Builds and encodes the step's programs in place.
    pub(super) fn build(&mut self, job: &LambJob) -> Result<(), SequencerError> {
        // A placeholder tensor: rows and columns are patched per submission.
        let t = TensorDesc {
            elements: 1,
            ..TensorDesc::default()
        };
        let g = &job.geometry;
        let decay = job.params.weight_decay != 0.0;
        let s = &mut self.scratch;
        programs::sum_of_squares_into(s, g, &t, 0, 0)?;
        encode(&mut self.sum_of_squares, s)?;
        programs::stage1_into(s, g, &t, 0, decay, job.program)?;
        encode(&mut self.stage1, s)?;
        programs::stage2_into(s, g, &t, 0)?;
        encode(&mut self.stage2, s)
    }

    /// Submits the program of `kind` for tensor `t` (`row`: the array a sum of squares
    /// reads): its rows and column count written into the encoded template, then the
    /// bytes to the platform. Returns its instruction words and the platform's answer.
    #[inline]
    pub(super) fn submit<P: NmcController>(
        &mut self,
        kind: Kind,
        g: &NmcGeometry,
        t: &TensorDesc,
        row: u32,
        index: u32,
        p: &mut P,
    ) -> Result<(usize, Result<NmcTicket, NmcError>), SequencerError> {
        let decay = self.stage1.phase_count() == 5;
        let cmd = match kind {
            Kind::SumOfSquares => &mut self.sum_of_squares,
            Kind::Stage2 => &mut self.stage2,
            Kind::Stage1 => &mut self.stage1,
        };
        let phases = cmd.phase_count();
        for (phase, r) in rows_of(kind, decay, t, row)
            .into_iter()
            .enumerate()
            .take(phases)
        {
            cmd.set_base_row(phase, r)
                .map_err(|_| SequencerError::Geometry)?;
        }
        // Never fails: a decoded descriptor has elements, so at least one column, and
        // `col_start` is 0.
        cmd.set_col_count(programs::cols(g, t, index)?)
            .map_err(|_| SequencerError::TooLarge { index })?;
        Ok((cmd.program_len(), p.submit_encoded(cmd)))
    }
}

/// Encodes a built program into its template (a program the sequencer built that does not
/// validate means the geometry cannot run it, e.g. a chunk beyond the engine's limit).
pub(super) fn encode(
    into: &mut EncodedMacroCommand,
    cmd: &MacroCommand,
) -> Result<(), SequencerError> {
    into.encode_from(cmd).map_err(|_| SequencerError::Geometry)
}
