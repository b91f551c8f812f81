//! A LAMB step's parameters: the optimiser's hyper-parameters ([`LambParams`]), the stage-1
//! program variant ([`Stage1Program`]) and the job the host starts ([`LambJob`]).

use super::*;

/// LAMB hyperparameters as the firmware applies them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LambParams {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Added to sqrt(v_hat).
    pub eps: f32,
    /// Weight decay (0 drops the weight read from stage 1).
    pub weight_decay: f32,
    /// Clipping threshold of the global gradient norm, or a non-positive value for none.
    pub max_grad_norm: f32,
    /// Bias correction on.
    pub bias_correction: bool,
    /// Step number for the bias correction (>= 1).
    pub step: u32,
    /// Upper clamp of the trust ratio, or a non-positive value for none.
    pub trust_clamp: f32,
}

/// Which stage-1 program the sequencer runs. Both compute the same values with the same
/// operations in the same order (bit-identical results); they differ in how many TS slots
/// a column needs, hence in the chunk (columns per row visit) a TS size allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Stage1Program {
    /// g', m, v and a scratch slot: chunk = TS / 4 (16 entries: 4 columns).
    #[default]
    FourSlot,
    /// The scratch's role moves: v takes g''s slot once g' is dead (its last use is
    /// `(1-b2) g' * g'`), so a column needs g'/v, m and one scratch: chunk = TS / 3
    /// (16 entries: 5 columns, 64 entries: 21).
    ThreeSlot,
}

impl Stage1Program {
    /// The most TS slots a column of any stage-1 program occupies.
    pub const MAX_SLOTS: u16 = 4;

    /// TS slots one column of stage 1 occupies.
    pub const fn slots(self) -> u16 {
        match self {
            Self::FourSlot => 4,
            Self::ThreeSlot => 3,
        }
    }

    /// Name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::FourSlot => "four-slot",
            Self::ThreeSlot => "three-slot",
        }
    }
}

/// One LAMB step to run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LambJob {
    /// Device address of the first [`TensorDesc`].
    pub table: DevAddr,
    /// Number of tensors.
    pub tensors: u32,
    /// Device geometry.
    pub geometry: NmcGeometry,
    /// Hyperparameters.
    pub params: LambParams,
    /// The stage-1 program.
    pub program: Stage1Program,
}
