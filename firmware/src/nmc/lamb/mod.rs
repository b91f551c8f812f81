//! LAMB on near-memory compute: a lazy generator of NMC macro-commands.
//!
//! The host places every tensor's five arrays (g, w, m, v, u) at the start of a row
//! stripe (row bytes x every bank of the device), so element `i` of every array of a
//! tensor sits in the same bank at the same column, in different rows (dissertation
//! 6.2.2). It writes one [`TensorDesc`] per tensor into device memory and starts a
//! [`LambJob`]. The sequencer then walks the step as a state machine, emitting a few
//! macro-commands per tensor as engine queue space allows, so its RAM use does not grow
//! with the model:
//!
//! 1. `sqacc g` over every tensor, then one cross-bank reduction: the global gradient
//!    norm. From it the firmware computes the clip divisor and writes the stage-1 scalars.
//! 2. Per tensor: stage 1 (m, v, u), `sqacc w`, reduction, `sqacc u`, reduction. The next
//!    tensor's stage 1 is queued while the reductions travel to the host and back.
//! 3. When both norms of a tensor are back: write `-lr * ratio` and run stage 2.
//!
//! Scalar registers: `s0` wd, `s1` b1, `s2` 1-b1, `s3` b2, `s4` 1-b2,
//! `s5` bc1/sqrt(bc2), `s6` eps/sqrt(bc2) (written once per step, after the global norm),
//! and `s7`, the per-command operand: the clip divisor before each stage 1, `-lr * ratio`
//! before each stage 2. The engines execute commands and register writes in order, so a
//! stage 1 queued behind another tensor's stage 2 still sees its own `s7`.
//!
//! Numerics: m and v are computed with the reference's operations in the reference's
//! order (`b1*m + (1-b1)*g'`, `b2*v + ((1-b2)*g')*g'`, with `g' = g / clip` a correctly
//! rounded DIV), so they are bit-identical to an FP32 implementation of SPEC 4.1: m
//! suffers cancellation, and any other rounding would show as a large relative error
//! there. The update u folds the bias corrections into two scalars
//! (`m*bc1 / (sqrt(v*bc2) + eps) = m*(bc1/sqrt(bc2)) / (sqrt(v) + eps/sqrt(bc2))`), which
//! is exact algebra and only changes roundings of a quantity without cancellation. When
//! the clip divisor is 1 the DIV is still issued (exact, and keeps the timing independent
//! of the data, as Apex's kernel also always divides).

mod cost;
mod desc;
mod job;
mod math;
pub mod programs;
mod sequencer;
#[cfg_attr(not(feature = "small-tables"), path = "templates/three_slot.rs")]
#[cfg_attr(feature = "small-tables", path = "templates/one_slot.rs")]
mod templates;
#[cfg(test)]
mod tests;

use core::fmt;

use heapless::{Deque, Vec};
use nmcp_isa::le::{LeReader, LeWriter, OutOfBounds};
use nmcp_isa::nmc::{
    BankMode, BinaryOp, ChannelRange, DType, Instr, Loc, MacroCommand, Phase, ReduceOp, ScalarReg,
    SpecialOp, Src, SrcImm, TsSlot, MAX_CHUNK,
};

use crate::platform::DeviceMemory;
use crate::platform::{DevAddr, MemoryError, NmcController, NmcError, NmcTicket};
#[cfg(not(feature = "small-tables"))]
use nmcp_isa::nmc::EncodedMacroCommand;

pub use cost::{SequencerCostModel, SequencerWork};
pub use desc::{lay_out, NmcGeometry, TensorDesc, TensorPlacement, TENSOR_DESC_BYTES};
pub use job::{LambJob, LambParams, Stage1Program};
pub use sequencer::{
    FromSequencerErrors, LambSequencer, SequencerError, LOOKAHEAD, MAX_PENDING_REDUCTIONS,
};

use math::*;
use templates::*;

/// Which program a submission uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SumOfSquares,
    Stage1,
    Stage2,
}

/// Each phase's base row of a `kind` program for tensor `t` (`row`: the array a sum of
/// squares reads); rows past the program's phases are 0 and unused.
fn rows_of(kind: Kind, decay: bool, t: &TensorDesc, row: u32) -> [u32; 5] {
    match kind {
        Kind::SumOfSquares => [row, 0, 0, 0, 0],
        Kind::Stage2 => [t.u_row, t.w_row, 0, 0, 0],
        // Phases g, m, v, (w,) u: the weight phase only with weight decay.
        Kind::Stage1 if decay => [t.g_row, t.m_row, t.v_row, t.w_row, t.u_row],
        Kind::Stage1 => [t.g_row, t.m_row, t.v_row, t.u_row, 0],
    }
}

// Instruction builders shared by `programs` and the sequencer.
fn ts(s: u8) -> Result<Loc, SequencerError> {
    TsSlot::new(s).map(Loc::Ts).ok_or(SequencerError::Capacity)
}

fn sreg(r: u8) -> Result<Src, SequencerError> {
    ScalarReg::new(r)
        .map(Src::Sreg)
        .ok_or(SequencerError::Capacity)
}

fn src(l: Loc) -> Src {
    Src::from(l)
}

fn bin(op: BinaryOp, dst: Loc, a: Src, b: Src) -> Instr {
    Instr::Binary {
        op,
        dtype: DType::F32,
        dst,
        src0: a,
        src1: SrcImm::from(b),
    }
}

fn mov(dst: Loc, s: Loc) -> Instr {
    Instr::Mov {
        dtype: DType::F32,
        dst,
        src: s,
    }
}
