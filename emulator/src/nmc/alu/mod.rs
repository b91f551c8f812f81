//! Functional model of one bank's ALU: what each instruction does to the column, the TS
//! and the reduction accumulator. Timing is the NMC engine's business; this module only
//! computes values.
//!
//! Numerics (documented in `docs/decisions/isa.md`):
//! - 256-bit columns, little-endian lanes: 16 × f16, 16 × bf16, 8 × f32, 8 × i32.
//! - f16/bf16 lanes are widened to f32 (exactly), the operation runs in f32 (FMA fused),
//!   and the result is rounded to the lane type, nearest-even.
//! - Scalar registers hold 32-bit patterns: an f32 for float instructions (it enters the
//!   f32 computation unrounded), an i32 for i32 instructions. Immediates are converted
//!   exactly (|imm| <= 256).
//! - i32 arithmetic wraps; SHR is arithmetic; MIN/MAX are signed.
//! - Float MIN/MAX return the non-NaN operand when one is NaN (IEEE minNum/maxNum).
//! - Float SHL/SHR multiply by 2^±n exactly and round once to the lane type.
//! - ACC/SQACC add lanes 0, 1, ... in order into the f32 accumulator (SQACC fused:
//!   acc = fma(x, x, acc)); i32 lanes are converted to f32 first.
//! - RCP/RSQRT/SQRT: exponent/mantissa split, bit-trick seed on the mantissa, Newton–
//!   Raphson steps in f32 with FMA, exponent re-applied with one final rounding; the step
//!   counts are the ones [`Instr::column_slots`] charges for.
//! - DIV (f32 only) is the IEEE correctly-rounded quotient, bit for bit Rust's `a / b`
//!   (zeros, infinities, NaNs and subnormals included); the hardware's seed + Newton +
//!   Markstein correction sequence is what [`Instr::column_slots`] charges for.
//!
//! The module holds the ALU's state and instruction dispatch; the lane codec and the
//! lane-wise operations are in [`lanes`], the special functions (DIV, RCP, RSQRT, SQRT)
//! in [`special`].

#[cfg(test)]
mod lamb_program_tests;
mod lanes;
mod special;
#[cfg(test)]
mod tests;

use lanes::{binary, convert, fma, load, shift, store, Lanes};
use nmcp_isa::nmc::{
    BinaryOp, BlockSteps, ControlError, DType, Instr, Loc, ReduceOp, Scalar, SpecialOp, SrcImm,
    SCALAR_REGS,
};
pub use special::{div, rcp, rsqrt, sqrt};

/// Bytes of one column access and of one TS entry (the ALU's datapath width).
pub const COLUMN_BYTES: usize = 32;
/// One 256-bit column or TS entry.
pub type Column = [u8; COLUMN_BYTES];
/// Default TS entries per bank: 16 × 256 bit, the register-file size per processing unit
/// of Samsung's HBM-PIM (8 GRF_A + 8 GRF_B), the closest published design.
pub const DEFAULT_TS_ENTRIES: usize = 16;
/// The "4× TS" variant of the dissertation's chapter 6.
pub const TS_4X_ENTRIES: usize = 4 * DEFAULT_TS_ENTRIES;
/// Most lanes in a column (16-bit lanes).
pub(super) const MAX_LANES: usize = 16;

/// Why an instruction could not execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AluError {
    /// The column offset is not inside the chunk.
    OffsetOutsideChunk {
        /// Column offset k.
        k: u8,
        /// Chunk size.
        chunk: u8,
    },
    /// A TS slot maps past the end of TS for this chunk size.
    TsOutOfRange {
        /// Slot named by the instruction.
        slot: u8,
        /// Entry it maps to (`slot * chunk + k`).
        entry: usize,
        /// TS entries of the bank.
        entries: usize,
    },
    /// JUMP/EXIT reached [`BankAlu::execute`]; they belong to the block sequencer.
    ControlInstruction,
    /// The block's control flow is invalid.
    Control(ControlError),
}

impl std::fmt::Display for AluError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Self::OffsetOutsideChunk { k, chunk } => {
                write!(f, "column offset {k} outside chunk of {chunk}")
            }
            Self::TsOutOfRange {
                slot,
                entry,
                entries,
            } => write!(
                f,
                "TS slot {slot} maps to entry {entry}, the bank has {entries} entries"
            ),
            Self::ControlInstruction => {
                f.write_str("jump/exit are executed by the block sequencer, not the ALU")
            }
            Self::Control(e) => write!(f, "control flow: {e}"),
        }
    }
}

impl std::error::Error for AluError {}

/// One bank's ALU state: its TS and its reduction accumulator.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BankAlu {
    ts: Vec<Column>,
    acc: f32,
}

impl Default for BankAlu {
    fn default() -> Self {
        Self::new(DEFAULT_TS_ENTRIES)
    }
}

impl BankAlu {
    /// An ALU with `ts_entries` zeroed TS entries and a zero accumulator.
    pub fn new(ts_entries: usize) -> Self {
        Self {
            ts: vec![[0; COLUMN_BYTES]; ts_entries],
            acc: 0.0,
        }
    }

    /// TS entries.
    pub fn ts_entries(&self) -> usize {
        self.ts.len()
    }

    /// One TS entry.
    pub fn ts(&self, entry: usize) -> Option<&Column> {
        self.ts.get(entry)
    }

    /// One TS entry, writable (for loading state in tests and checkpoints).
    pub fn ts_mut(&mut self, entry: usize) -> Option<&mut Column> {
        self.ts.get_mut(entry)
    }

    /// The reduction accumulator.
    pub fn acc(&self) -> f32 {
        self.acc
    }

    /// Reads and clears the accumulator, as the host's partial-sum read does.
    pub fn take_acc(&mut self) -> f32 {
        std::mem::take(&mut self.acc)
    }

    /// Sets the accumulator.
    pub fn set_acc(&mut self, value: f32) {
        self.acc = value;
    }

    /// Runs one block (a phase's instructions) for column offset `k` of a chunk, JUMP and
    /// EXIT included. Returns the column slots it occupied.
    ///
    /// # Errors
    /// The first [`AluError`]; the state changes of the instructions before it remain.
    pub fn run_block(
        &mut self,
        block: &[Instr],
        chunk: u8,
        k: u8,
        mem: &mut Column,
        scalars: &[u32; SCALAR_REGS as usize],
    ) -> Result<u32, AluError> {
        let mut slots = 0u32;
        for step in BlockSteps::new(block) {
            let instr = step.map_err(AluError::Control)?;
            self.execute(instr, chunk, k, mem, scalars)?;
            slots = slots.saturating_add(instr.column_slots());
        }
        Ok(slots)
    }

    /// Executes one instruction for column offset `k` of a chunk of `chunk` columns: MEM
    /// is `mem`, TS slot `s` is entry `s * chunk + k`. All sources are read before the
    /// destination is written.
    ///
    /// # Errors
    /// [`AluError`] if `k` is outside the chunk, a TS slot maps outside TS, or the
    /// instruction is JUMP/EXIT.
    pub fn execute(
        &mut self,
        instr: &Instr,
        chunk: u8,
        k: u8,
        mem: &mut Column,
        scalars: &[u32; SCALAR_REGS as usize],
    ) -> Result<(), AluError> {
        if k >= chunk {
            return Err(AluError::OffsetOutsideChunk { k, chunk });
        }
        let ctx = Ctx {
            chunk,
            k,
            scalars,
            entries: self.ts.len(),
        };
        let result: Column = match *instr {
            Instr::Nop => return Ok(()),
            Instr::Jump { .. } | Instr::Exit => return Err(AluError::ControlInstruction),
            Instr::Mov { src, .. } => self.read_loc(&ctx, src, mem)?,
            Instr::Fill { dtype, value, .. } => {
                let v = ctx.scalar_lanes(dtype, value);
                store(dtype, &v)
            }
            Instr::Cvt { conv, dst, src } => {
                let s = self.read_loc(&ctx, src, mem)?;
                let old = self.read_loc(&ctx, dst, mem)?;
                convert(conv, &s, &old)
            }
            Instr::Binary {
                op,
                dtype,
                src0,
                src1,
                ..
            } => {
                let a = self.src_lanes(&ctx, dtype, src0.into(), mem)?;
                let b = self.src_lanes(&ctx, dtype, src1, mem)?;
                store(dtype, &binary(op, a, b))
            }
            Instr::Fma {
                dtype,
                src0,
                src1,
                src2,
                ..
            } => {
                let a = self.src_lanes(&ctx, dtype, src0.into(), mem)?;
                let b = self.src_lanes(&ctx, dtype, src1.into(), mem)?;
                let c = self.src_lanes(&ctx, dtype, src2.into(), mem)?;
                store(dtype, &fma(a, b, c))
            }
            Instr::Scale {
                dtype, src, factor, ..
            } => {
                let a = self.src_lanes(&ctx, dtype, src.into(), mem)?;
                let b = ctx.scalar_lanes(dtype, factor);
                store(dtype, &binary(BinaryOp::Mul, a, b))
            }
            Instr::Shift {
                op,
                dtype,
                src,
                amount,
                ..
            } => {
                let a = self.src_lanes(&ctx, dtype, src.into(), mem)?;
                shift(op, dtype, a, u32::from(amount.get()))
            }
            Instr::Reduce { op, dtype, src } => {
                let col = self.read_loc(&ctx, src, mem)?;
                let lanes = match load(dtype, &col) {
                    Lanes::F(v) => v,
                    Lanes::I(v) => v.map(|x| x as f32),
                };
                for x in lanes.iter().take(dtype.lanes()) {
                    self.acc = match op {
                        ReduceOp::Acc => self.acc + x,
                        ReduceOp::SqAcc => x.mul_add(*x, self.acc),
                    };
                }
                return Ok(());
            }
            Instr::Div { src0, src1, .. } => {
                let a = self.src_lanes(&ctx, DType::F32, src0.into(), mem)?;
                let b = self.src_lanes(&ctx, DType::F32, src1.into(), mem)?;
                let (Lanes::F(x), Lanes::F(y)) = (a, b) else {
                    unreachable!("f32 loads as floats")
                };
                store(
                    DType::F32,
                    &Lanes::F(core::array::from_fn(|i| div(x[i], y[i]))),
                )
            }
            Instr::Special { op, src, .. } => {
                let col = self.read_loc(&ctx, src, mem)?;
                let f = match op {
                    SpecialOp::Rcp => rcp,
                    SpecialOp::Rsqrt => rsqrt,
                    SpecialOp::Sqrt => sqrt,
                };
                let Lanes::F(v) = load(DType::F32, &col) else {
                    unreachable!("f32 loads as floats")
                };
                store(DType::F32, &Lanes::F(v.map(f)))
            }
        };
        if let Some(dst) = instr.dst() {
            *self.loc_mut(&ctx, dst, mem)? = result;
        }
        Ok(())
    }

    fn entry(&self, ctx: &Ctx<'_>, slot: u8) -> Result<usize, AluError> {
        let entry = usize::from(slot) * usize::from(ctx.chunk) + usize::from(ctx.k);
        if entry >= ctx.entries {
            return Err(AluError::TsOutOfRange {
                slot,
                entry,
                entries: ctx.entries,
            });
        }
        Ok(entry)
    }

    fn read_loc(&self, ctx: &Ctx<'_>, loc: Loc, mem: &Column) -> Result<Column, AluError> {
        match loc {
            Loc::Mem => Ok(*mem),
            Loc::Ts(s) => {
                let e = self.entry(ctx, s.get())?;
                Ok(self.ts.get(e).copied().unwrap_or([0; COLUMN_BYTES]))
            }
        }
    }

    fn loc_mut<'a>(
        &'a mut self,
        ctx: &Ctx<'_>,
        loc: Loc,
        mem: &'a mut Column,
    ) -> Result<&'a mut Column, AluError> {
        match loc {
            Loc::Mem => Ok(mem),
            Loc::Ts(s) => {
                let slot = s.get();
                let e = self.entry(ctx, slot)?;
                self.ts.get_mut(e).ok_or(AluError::TsOutOfRange {
                    slot,
                    entry: e,
                    entries: ctx.entries,
                })
            }
        }
    }

    fn src_lanes(
        &self,
        ctx: &Ctx<'_>,
        dtype: DType,
        src: SrcImm,
        mem: &Column,
    ) -> Result<Lanes, AluError> {
        Ok(match src {
            SrcImm::Ts(s) => load(dtype, &self.read_loc(ctx, Loc::Ts(s), mem)?),
            SrcImm::Mem => load(dtype, mem),
            SrcImm::Sreg(r) => ctx.scalar_lanes(dtype, Scalar::Sreg(r)),
            SrcImm::Imm(i) => ctx.scalar_lanes(dtype, Scalar::Imm(i)),
        })
    }
}

/// What one execution step needs to resolve operands.
struct Ctx<'a> {
    chunk: u8,
    k: u8,
    scalars: &'a [u32; SCALAR_REGS as usize],
    entries: usize,
}

impl Ctx<'_> {
    fn scalar_lanes(&self, dtype: DType, s: Scalar) -> Lanes {
        let bits = match s {
            Scalar::Sreg(r) => self.scalars.get(usize::from(r.get())).copied().unwrap_or(0),
            Scalar::Imm(i) => {
                let v = i32::from(i.get());
                return match dtype {
                    DType::I32 => Lanes::I([v; MAX_LANES]),
                    _ => Lanes::F([v as f32; MAX_LANES]),
                };
            }
        };
        match dtype {
            DType::I32 => Lanes::I([bits as i32; MAX_LANES]),
            _ => Lanes::F([f32::from_bits(bits); MAX_LANES]),
        }
    }
}
