//! The pseudo-channels of one channel behind one shared command interface, so timing
//! tests can drive a whole channel under every check.

use super::{PseudoChannel, TimingError};
use crate::hbm::bank::Command;
use crate::hbm::config::HbmPreset;
use crate::hbm::Cycle;

/// The pseudo-channels of one channel behind one shared command interface (JEDEC HBM2
/// pseudo-channel mode): one row command bus and one column command bus for all of them.
///
/// The memory system keeps the two buses' "free at" cycles per channel and hands them to
/// each pseudo-channel before it schedules ([`PseudoChannel::share_buses`]) and reads them
/// back after ([`PseudoChannel::buses_free`]); this type does the same around single
/// commands, so timing tests can drive a whole channel.
#[derive(Debug, Clone)]
pub struct SharedChannel {
    pcs: Vec<PseudoChannel>,
    row: Cycle,
    col: Cycle,
}

impl SharedChannel {
    /// A channel of the preset's pseudo-channels, every bank precharged.
    pub fn new(preset: &HbmPreset) -> Self {
        let n = preset.organisation.pseudo_channels_per_channel.max(1) as usize;
        SharedChannel {
            pcs: (0..n).map(|_| PseudoChannel::new(preset)).collect(),
            row: 0,
            col: 0,
        }
    }

    /// One pseudo-channel's timing state, with the channel's bus use applied.
    pub fn pseudo_channel(&mut self, pc: usize) -> &PseudoChannel {
        let (row, col) = (self.row, self.col);
        let p = &mut self.pcs[pc];
        p.share_buses(row, col);
        p
    }

    /// Earliest cycle of `cmd` on pseudo-channel `pc`.
    pub fn earliest(&mut self, pc: usize, cmd: &Command) -> Cycle {
        self.pseudo_channel(pc).earliest(cmd)
    }

    /// Issues `cmd` on pseudo-channel `pc` at `at`, under every check.
    pub fn issue(&mut self, pc: usize, cmd: &Command, at: Cycle) -> Result<(), TimingError> {
        let (row, col) = (self.row, self.col);
        let p = &mut self.pcs[pc];
        p.share_buses(row, col);
        p.issue(cmd, at)?;
        let (r, c) = p.buses_free();
        self.row = self.row.max(r);
        self.col = self.col.max(c);
        Ok(())
    }
}
