//! What a bank-ALU instruction costs: dependent ALU operations and the column-command
//! slots they occupy, with the Newton-step counts of the multi-cycle functions that set
//! them. The NMC engine's timing and the firmware's scheduling read these.

use super::instr::{Instr, SpecialOp};
use super::operand::Src;

/// Dependent FMA-class operations the ALU completes in one column slot (tCCD_L).
///
/// A column slot is tCCD_L = 4 DRAM clocks in `hbm2-2000`; the ALU is pipelined at the
/// DRAM clock but an operand read and a write-back share the slot with the arithmetic, so
/// only half the clocks carry a dependent operation. Ordinary instructions are one
/// operation and are bound by the column access, not the ALU.
pub const ALU_OPS_PER_SLOT: u32 = 2;
/// ALU operations per DRAM clock of the pipelined issue model (the emulator's
/// `AluModel::Pipelined` default; docs/calibration.md, "ALU issue model").
///
/// Why 1: it is the same ALU as [`ALU_OPS_PER_SLOT`] describes, at the same clock (the
/// DRAM clock), once instruction issue is decoupled from column commands. Column-triggered,
/// an instruction's operand read and write-back share its tCCD_L slot with the arithmetic,
/// so a dependent chain gets one operation every `tCCD_L / ALU_OPS_PER_SLOT` = 2 clocks.
/// Pipelined, the independent columns of a chunk (one per TS column, like UPMEM's
/// tasklets filling its 14-stage pipeline) fill those bubbles, and a TS with two read and
/// one write port sustains one operation per clock. Published near-bank units sit at or
/// below this: Samsung's HBM-PIM (Aquabolt-XL, ISSCC 2021) runs its 16-lane FP16 unit at
/// 300 MHz against a 1.2 GHz DRAM clock (one 256-bit operation per tCCD_L, shared by two
/// banks), UPMEM's DPU at 350–400 MHz, one instruction per cycle, against DDR4-2400's
/// 1.2 GHz. One 256-bit operation per 1 GHz clock per bank is therefore an optimistic
/// but logic-process-plausible point; `pipelined-N` in `nmcp lamb --alu-models` explores
/// the rest of the axis.
pub const PIPELINED_OPS_PER_TCK: u32 = 1;
/// Newton–Raphson steps RCP runs after its bit-trick seed (error up to ~12 %, so two steps
/// leave ~2^-17.6). Each step is two FMAs.
pub const RCP_NEWTON_STEPS: u32 = 3;
/// Newton–Raphson steps RSQRT (and SQRT) run after the bit-trick seed (whose error is up to
/// 3.4 %, so two steps leave ~2^-18). Each step is three dependent operations (m·y, the
/// residual FMA, the update FMA).
pub const RSQRT_NEWTON_STEPS: u32 = 3;
/// Dependent operations SQRT adds after its RSQRT: s = m·y, the residual FMA and the
/// correction FMA (one Heron/Newton step on s, which makes the result nearly correctly
/// rounded).
pub const SQRT_EXTRA_OPS: u32 = 3;
/// Dependent operations DIV adds after its reciprocal (seed + [`RCP_NEWTON_STEPS`] Newton
/// steps, as RCP): `q = a·y`, the residual `r = fma(-b, q, a)` and the correction
/// `q' = fma(r, y, q)`, so DIV is `1 + 2·RCP_NEWTON_STEPS + DIV_EXTRA_OPS` operations.
///
/// This is Markstein's FMA-based division (Markstein 1990; Cornea et al. for IA-64), the
/// scheme GPUs use for `div.rn.f32`. Why it is correctly rounded: with `q` within an ulp
/// of `a/b`, the residual `r = a - b·q` is exactly representable, so the FMA computes it
/// without error; the correction `q + r·y` then lands on the round-to-nearest-even quotient
/// in its single final rounding, provided the reciprocal `y` has been refined to full
/// precision (Markstein's theorem assumes `y` is `1/b` correctly rounded). Operand scaling
/// and the special cases (zeros, infinities, NaNs, subnormal and overflowing quotients) go
/// through the exponent logic beside the mantissa datapath, off the dependent chain. The
/// emulator executes DIV as exactly IEEE `a / b`.
///
/// Caveat, measured with the emulator's RCP seed and step form: three Newton steps leave
/// `y` one ulp off for ~0.016 % of divisor mantissas, and then the final FMA can miss by
/// one ulp (34 of the 2^32 quotients of the 512 divisor mantissas nearest 1 and 2, none in
/// 5·10^7 random mantissa pairs). A fourth step (`1 + 2·4 + 3` = 12 operations, 6 slots)
/// leaves only the textbook exception, a divisor mantissa of all ones. See
/// `docs/decisions/isa.md`. So DIV pays for that fourth step ([`DIV_NEWTON_STEPS`]) and
/// handles the all-ones divisor mantissa as a special case in the exponent logic, like
/// hardware dividers do: 12 operations, 6 slots, and the IEEE quotient it is modelled as.
pub const DIV_EXTRA_OPS: u32 = 3;
/// Newton steps DIV refines its reciprocal with (one more than RCP, see [`DIV_EXTRA_OPS`]).
pub const DIV_NEWTON_STEPS: u32 = RCP_NEWTON_STEPS + 1;
/// Dependent operations the scalar unit runs on every scalar-register write to latch the
/// register's correctly rounded reciprocal `RN(1/s)` beside it: DIV's whole sequence with
/// a dividend of 1 (the all-ones divisor mantissa special-cased, as DIV does). The NMC
/// engine charges a scalar write this latency (at [`ALU_OPS_PER_SLOT`] dependent
/// operations per tCCD_L) instead of one command slot.
pub const SCALAR_RECIPROCAL_OPS: u32 = 1 + 2 * DIV_NEWTON_STEPS + DIV_EXTRA_OPS;
/// Dependent operations of a DIV whose divisor is a scalar register: only the correction
/// `q = a·y; r = fma(-b, q, a); q' = fma(r, y, q)`, with `y` the reciprocal latched when
/// the register was written ([`SCALAR_RECIPROCAL_OPS`]).
///
/// Why this is the IEEE quotient: Markstein's theorem needs exactly two things, `y` equal
/// to `1/b` correctly rounded (which the latch computes once) and `q` within an ulp of
/// `a/b` (which `RN(a·y)` is); then the residual is exact and `q + r·y` rounds once to the
/// correctly rounded quotient. This is division by a divisor known in advance
/// (Brisebarre, Muller and Raina, IEEE Trans. Computers 2004). Checked, not assumed:
/// `isa/tests/nmc_div_by_scalar.rs` compares the three operations with `a / b` over
/// every divisor mantissa with sampled dividends, the all-ones divisor mantissa
/// included, and over random exponents. LAMB's stage 1 divides every gradient by the
/// clip divisor in a scalar register, so this is 9 of its ~50 operations per column.
pub const DIV_BY_SCALAR_OPS: u32 = DIV_EXTRA_OPS;
/// Guaranteed bound on the relative error of RCP, RSQRT and SQRT against the exact
/// result, for every finite input whose exact result is a normal f32. Tested by the
/// emulator's ALU tests over random, tiny, huge and denormal inputs.
pub const SPECIAL_REL_ERROR_BOUND: f32 = 1.0 / (1u32 << 21) as f32;

impl Instr {
    /// Dependent ALU operations the instruction needs (0 for control instructions).
    pub const fn alu_ops(&self) -> u32 {
        match self {
            Self::Jump { .. } | Self::Exit => 0,
            Self::Div {
                src1: Src::Sreg(_), ..
            } => DIV_BY_SCALAR_OPS,
            Self::Div { .. } => 1 + 2 * DIV_NEWTON_STEPS + DIV_EXTRA_OPS,
            Self::Special { op, .. } => match op {
                SpecialOp::Rcp => 1 + 2 * RCP_NEWTON_STEPS,
                SpecialOp::Rsqrt => 1 + 3 * RSQRT_NEWTON_STEPS,
                SpecialOp::Sqrt => 1 + 3 * RSQRT_NEWTON_STEPS + SQRT_EXTRA_OPS,
            },
            _ => 1,
        }
    }

    /// Column-command slots (each tCCD_L long in all-bank mode) the instruction occupies:
    /// 0 for JUMP/EXIT, 1 for ordinary instructions (including NOP), and
    /// `ceil(alu_ops / ALU_OPS_PER_SLOT)` for RCP (7 ops, 4 slots), RSQRT (10 ops, 5 slots),
    /// SQRT (13 ops, 7 slots), DIV (12 ops, 6 slots) and DIV by a scalar register (3 ops,
    /// 2 slots).
    pub const fn column_slots(&self) -> u32 {
        self.alu_ops().div_ceil(ALU_OPS_PER_SLOT)
    }
}
