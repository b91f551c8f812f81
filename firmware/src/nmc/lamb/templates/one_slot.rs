//! One template slot, rebuilt when a submission needs another program than the one it
//! holds (the `small-tables` build for a 16 KiB-RAM board).

use super::*;

/// The `small-tables` build (a 16 KiB-RAM board): one template slot instead of three,
/// rebuilt when a submission needs another program than the one it holds (~1 000
/// instructions per rebuild, about three per tensor), so the sequencer keeps ~940 B less
/// RAM. The slot is not kept encoded: an encoded copy would cost 216 B of the board's
/// 12 KiB, and with a rebuild per submission there is little encoding to save. The
/// commands are the same as the three-slot build's.
#[derive(Debug, Clone)]
pub(super) struct Templates {
    slot: MacroCommand,
    /// The program `slot` holds.
    built: Option<Kind>,
    decay: bool,
    program: Stage1Program,
}

impl Default for Templates {
    #[inline]
    fn default() -> Self {
        Self {
            slot: programs::empty(),
            built: None,
            decay: false,
            program: Stage1Program::default(),
        }
    }
}

impl Templates {
    /// Notes the step's program choices; the slot is built on first use.
    pub(super) fn build(&mut self, job: &LambJob) -> Result<(), SequencerError> {
        self.built = None;
        self.decay = job.params.weight_decay != 0.0;
        self.program = job.program;
        Ok(())
    }

    /// Submits the program of `kind` for tensor `t` (`row`: the array a sum of squares
    /// reads): its instruction words and the platform's answer.
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
        if self.built != Some(kind) {
            // A placeholder tensor, as in the three-slot build: rows and columns are
            // patched below.
            let ph = TensorDesc {
                elements: 1,
                ..TensorDesc::default()
            };
            self.built = None;
            let s = &mut self.slot;
            match kind {
                Kind::SumOfSquares => programs::sum_of_squares_into(s, g, &ph, 0, 0)?,
                Kind::Stage1 => programs::stage1_into(s, g, &ph, 0, self.decay, self.program)?,
                Kind::Stage2 => programs::stage2_into(s, g, &ph, 0)?,
            }
            self.built = Some(kind);
        }
        let cmd = &mut self.slot;
        for (phase, r) in cmd.phases.iter_mut().zip(rows_of(kind, self.decay, t, row)) {
            phase.base_row = r;
        }
        cmd.col_count = programs::cols(g, t, index)?;
        Ok((cmd.program.len(), p.submit(cmd)))
    }
}
