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

use half::{bf16, f16};
use nmcp_isa::nmc::{
    BinaryOp, BlockSteps, ControlError, Conversion, DType, Half, Instr, Loc, ReduceOp, Scalar,
    ShiftOp, SpecialOp, SrcImm, RCP_NEWTON_STEPS, RSQRT_NEWTON_STEPS, SCALAR_REGS,
};

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
const MAX_LANES: usize = 16;

/// Seed constant for 1/x on the mantissa (Lomont-style magic for the reciprocal).
const RCP_MAGIC: u32 = 0x7ef3_11c3;
/// Seed constant for 1/sqrt(x) (Lomont's 0x5f375a86).
const RSQRT_MAGIC: u32 = 0x5f37_5a86;

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

/// Lane values of one operand in the computation type.
#[derive(Debug, Clone, Copy)]
enum Lanes {
    F([f32; MAX_LANES]),
    I([i32; MAX_LANES]),
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

/// Lane `i` of a column as bytes.
fn lane_bytes<const N: usize>(col: &Column, i: usize) -> [u8; N] {
    let mut b = [0u8; N];
    if let Some(s) = col.get(i * N..(i + 1) * N) {
        b.copy_from_slice(s);
    }
    b
}

fn put_lane(col: &mut Column, i: usize, bytes: &[u8]) {
    let n = bytes.len();
    if let Some(d) = col.get_mut(i * n..(i + 1) * n) {
        d.copy_from_slice(bytes);
    }
}

/// Widens the lanes of a column to the computation type (exact).
fn load(dtype: DType, col: &Column) -> Lanes {
    match dtype {
        DType::F16 => Lanes::F(core::array::from_fn(|i| {
            f16::from_le_bytes(lane_bytes::<2>(col, i)).to_f32()
        })),
        DType::Bf16 => Lanes::F(core::array::from_fn(|i| {
            bf16::from_le_bytes(lane_bytes::<2>(col, i)).to_f32()
        })),
        DType::F32 => Lanes::F(core::array::from_fn(|i| {
            if i < 8 {
                f32::from_le_bytes(lane_bytes::<4>(col, i))
            } else {
                0.0
            }
        })),
        DType::I32 => Lanes::I(core::array::from_fn(|i| {
            if i < 8 {
                i32::from_le_bytes(lane_bytes::<4>(col, i))
            } else {
                0
            }
        })),
    }
}

/// Rounds lane values to the lane type (nearest-even) and packs them.
fn store(dtype: DType, lanes: &Lanes) -> Column {
    let mut col = [0u8; COLUMN_BYTES];
    let f = match *lanes {
        Lanes::F(v) => v,
        Lanes::I(v) => v.map(|x| x as f32),
    };
    match dtype {
        DType::F16 => f
            .iter()
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &f16::from_f32(*x).to_le_bytes())),
        DType::Bf16 => f
            .iter()
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &bf16::from_f32(*x).to_le_bytes())),
        DType::F32 => f
            .iter()
            .take(8)
            .enumerate()
            .for_each(|(i, x)| put_lane(&mut col, i, &x.to_le_bytes())),
        DType::I32 => {
            let v = match *lanes {
                Lanes::I(v) => v,
                Lanes::F(v) => v.map(|x| x as i32),
            };
            v.iter()
                .take(8)
                .enumerate()
                .for_each(|(i, x)| put_lane(&mut col, i, &x.to_le_bytes()));
        }
    }
    col
}

fn zip(a: Lanes, b: Lanes, f: impl Fn(f32, f32) -> f32, g: impl Fn(i32, i32) -> i32) -> Lanes {
    match (a, b) {
        (Lanes::F(x), Lanes::F(y)) => Lanes::F(core::array::from_fn(|i| f(x[i], y[i]))),
        (Lanes::I(x), Lanes::I(y)) => Lanes::I(core::array::from_fn(|i| g(x[i], y[i]))),
        // Both operands are loaded with the instruction's one dtype.
        _ => unreachable!("mixed lane kinds"),
    }
}

fn binary(op: BinaryOp, a: Lanes, b: Lanes) -> Lanes {
    match op {
        BinaryOp::Add => zip(a, b, |x, y| x + y, i32::wrapping_add),
        BinaryOp::Sub => zip(a, b, |x, y| x - y, i32::wrapping_sub),
        BinaryOp::Mul => zip(a, b, |x, y| x * y, i32::wrapping_mul),
        BinaryOp::Min => zip(a, b, f32::min, i32::min),
        BinaryOp::Max => zip(a, b, f32::max, i32::max),
    }
}

fn fma(a: Lanes, b: Lanes, c: Lanes) -> Lanes {
    match (a, b, c) {
        (Lanes::F(x), Lanes::F(y), Lanes::F(z)) => {
            Lanes::F(core::array::from_fn(|i| x[i].mul_add(y[i], z[i])))
        }
        (Lanes::I(x), Lanes::I(y), Lanes::I(z)) => Lanes::I(core::array::from_fn(|i| {
            x[i].wrapping_mul(y[i]).wrapping_add(z[i])
        })),
        _ => unreachable!("mixed lane kinds"),
    }
}

fn shift(op: ShiftOp, dtype: DType, a: Lanes, n: u32) -> Column {
    match a {
        Lanes::I(v) => store(
            dtype,
            &Lanes::I(v.map(|x| match op {
                ShiftOp::Shl => x.wrapping_shl(n),
                ShiftOp::Shr => x >> n,
            })),
        ),
        Lanes::F(v) => {
            let factor = match op {
                ShiftOp::Shl => 2f64.powi(n as i32),
                ShiftOp::Shr => 2f64.powi(-(n as i32)),
            };
            // Exact in f64; one rounding to the lane type.
            let mut col = [0u8; COLUMN_BYTES];
            for (i, x) in v.iter().take(dtype.lanes()).enumerate() {
                let y = f64::from(*x) * factor;
                match dtype {
                    DType::F16 => put_lane(&mut col, i, &f16::from_f64(y).to_le_bytes()),
                    DType::Bf16 => put_lane(&mut col, i, &bf16::from_f64(y).to_le_bytes()),
                    _ => put_lane(&mut col, i, &(y as f32).to_le_bytes()),
                }
            }
            col
        }
    }
}

fn convert(conv: Conversion, src: &Column, old_dst: &Column) -> Column {
    let half_base = |h: Half| if h == Half::Lo { 0 } else { 8 };
    match conv {
        Conversion::F16ToF32(h) | Conversion::Bf16ToF32(h) => {
            let from = if matches!(conv, Conversion::F16ToF32(_)) {
                DType::F16
            } else {
                DType::Bf16
            };
            let Lanes::F(v) = load(from, src) else {
                unreachable!("16-bit floats load as floats")
            };
            let base = half_base(h);
            let mut col = [0u8; COLUMN_BYTES];
            for i in 0..8 {
                let x = v.get(base + i).copied().unwrap_or(0.0);
                put_lane(&mut col, i, &x.to_le_bytes());
            }
            col
        }
        Conversion::F32ToF16(h) | Conversion::F32ToBf16(h) => {
            let Lanes::F(v) = load(DType::F32, src) else {
                unreachable!("f32 loads as floats")
            };
            let base = half_base(h);
            let mut col = *old_dst;
            for (i, x) in v.iter().take(8).enumerate() {
                let bytes = if matches!(conv, Conversion::F32ToF16(_)) {
                    f16::from_f32(*x).to_le_bytes()
                } else {
                    bf16::from_f32(*x).to_le_bytes()
                };
                put_lane(&mut col, base + i, &bytes);
            }
            col
        }
        // `as` rounds i32 -> f32 to nearest even, and truncates f32 -> i32 toward zero
        // with saturation and NaN -> 0: the documented hardware behaviour.
        Conversion::I32ToF32 => match load(DType::I32, src) {
            Lanes::I(v) => store(DType::F32, &Lanes::F(v.map(|x| x as f32))),
            Lanes::F(_) => unreachable!("i32 loads as integers"),
        },
        Conversion::F32ToI32 => match load(DType::F32, src) {
            Lanes::F(v) => store(DType::I32, &Lanes::I(v.map(|x| x as i32))),
            Lanes::I(_) => unreachable!("f32 loads as floats"),
        },
    }
}

/// The ALU's division: the IEEE f32 quotient, correctly rounded (nearest-even).
pub fn div(a: f32, b: f32) -> f32 {
    a / b
}

/// Splits a positive finite non-zero `x` into `m` in [1, 2) and `e` with `x = m * 2^e`
/// (the ALU's exponent/mantissa separation; subnormals are normalised first).
fn split(x: f32) -> (f32, i32) {
    const SUBNORMAL_SCALE_EXP: i32 = 64;
    let (x, bias) = if x < f32::MIN_POSITIVE {
        (x * 2f32.powi(SUBNORMAL_SCALE_EXP), SUBNORMAL_SCALE_EXP)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let e = ((bits >> 23) & 0xff) as i32 - 127 - bias;
    let m = f32::from_bits((bits & 0x007f_ffff) | 0x3f80_0000);
    (m, e)
}

/// `y * 2^e` with a single rounding to f32 (the final exponent add of the ALU; it only
/// rounds when the result is subnormal, and it overflows to infinity).
fn scale2(y: f32, e: i32) -> f32 {
    (f64::from(y) * 2f64.powi(e)) as f32
}

/// Splits `x` into `m` in [1, 4) and an even `e` with `x = m * 2^e`.
fn split_even(x: f32) -> (f32, i32) {
    let (m, e) = split(x);
    if e.rem_euclid(2) == 1 {
        (m * 2.0, e - 1)
    } else {
        (m, e)
    }
}

/// 1/sqrt(m) for m in [1, 4): seed + [`RSQRT_NEWTON_STEPS`] steps.
fn rsqrt_mantissa(m: f32) -> f32 {
    let mut y = f32::from_bits(RSQRT_MAGIC.wrapping_sub(m.to_bits() >> 1));
    for _ in 0..RSQRT_NEWTON_STEPS {
        let t = m * y;
        let r = (-t).mul_add(y, 1.0); // 1 - m y²
        y = (0.5 * y).mul_add(r, y); // y (1 + r/2)
    }
    y
}

/// The ALU's reciprocal: ±0 -> ±inf, ±inf -> ±0, NaN -> NaN; otherwise seed +
/// [`RCP_NEWTON_STEPS`] Newton steps, relative error within
/// [`nmcp_isa::nmc::SPECIAL_REL_ERROR_BOUND`] for normal results.
pub fn rcp(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    if x == 0.0 {
        return f32::INFINITY.copysign(x);
    }
    if x.is_infinite() {
        return 0f32.copysign(x);
    }
    let (m, e) = split(x.abs());
    let mut y = f32::from_bits(RCP_MAGIC.wrapping_sub(m.to_bits()));
    for _ in 0..RCP_NEWTON_STEPS {
        let r = (-m).mul_add(y, 1.0); // 1 - m y
        y = y.mul_add(r, y); // y (1 + r)
    }
    scale2(y, -e).copysign(x)
}

/// The ALU's reciprocal square root: ±0 -> ±inf, +inf -> +0, negative or NaN -> NaN.
pub fn rsqrt(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::INFINITY.copysign(x);
    }
    if x.is_infinite() {
        return 0.0;
    }
    let (m, e) = split_even(x);
    scale2(rsqrt_mantissa(m), -e / 2)
}

/// The ALU's square root: ±0 -> ±0, +inf -> +inf, negative or NaN -> NaN; otherwise
/// m·rsqrt(m) and one correction step.
pub fn sqrt(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 || x.is_infinite() {
        return x;
    }
    let (m, e) = split_even(x);
    let y = rsqrt_mantissa(m);
    let s = m * y;
    let r = (-s).mul_add(s, m); // m - s²
    let s = (0.5 * y).mul_add(r, s); // s + r / (2 sqrt(m))
    scale2(s, e / 2)
}

#[cfg(test)]
mod tests {
    //! Each instruction and type against a lane-by-lane reference written here, and the
    //! special functions against f64.

    use super::*;
    use nmcp_isa::asm::parse_instr;
    use nmcp_isa::nmc::SPECIAL_REL_ERROR_BOUND;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    type FloatOp = fn(f32, f32) -> f32;
    type IntOp = fn(i64, i64) -> i64;

    const CHUNK: u8 = 4;
    const K: u8 = 2;
    /// Entry of slot `s` at offset K.
    fn entry(s: usize) -> usize {
        s * usize::from(CHUNK) + usize::from(K)
    }

    // --- the test's own lane codec ------------------------------------------------

    fn floats(dtype: DType, col: &Column) -> Vec<f32> {
        match dtype {
            DType::F16 => col
                .chunks(2)
                .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32())
                .collect(),
            DType::Bf16 => col
                .chunks(2)
                .map(|c| f32::from_bits(u32::from(u16::from_le_bytes([c[0], c[1]])) << 16))
                .collect(),
            DType::F32 => col
                .chunks(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            DType::I32 => panic!("not a float type"),
        }
    }

    fn ints(col: &Column) -> Vec<i32> {
        col.chunks(4)
            .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    fn pack_floats(dtype: DType, v: &[f32]) -> Column {
        let mut out = [0u8; 32];
        for (i, x) in v.iter().enumerate() {
            match dtype {
                DType::F16 => out[2 * i..2 * i + 2]
                    .copy_from_slice(&f16::from_f32(*x).to_bits().to_le_bytes()),
                DType::Bf16 => out[2 * i..2 * i + 2]
                    .copy_from_slice(&bf16::from_f32(*x).to_bits().to_le_bytes()),
                DType::F32 => out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes()),
                DType::I32 => panic!("not a float type"),
            }
        }
        out
    }

    fn pack_ints(v: &[i32]) -> Column {
        let mut out = [0u8; 32];
        for (i, x) in v.iter().enumerate() {
            out[4 * i..4 * i + 4].copy_from_slice(&x.to_le_bytes());
        }
        out
    }

    /// Equal as bit patterns, any NaN matching any NaN.
    fn same(dtype: DType, a: &Column, b: &Column) -> bool {
        match dtype {
            DType::I32 => a == b,
            _ => floats(dtype, a)
                .iter()
                .zip(floats(dtype, b))
                .all(|(x, y)| (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits()),
        }
    }

    /// A column whose lanes are finite values of moderate size for the type.
    fn column(dtype: DType, seed: &[u8; 32]) -> Column {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::from_seed(*seed);
        match dtype {
            DType::I32 => pack_ints(&(0..8).map(|_| rng.random::<i32>()).collect::<Vec<_>>()),
            _ => {
                let v: Vec<f32> = (0..dtype.lanes())
                    .map(|_| {
                        let m: f32 = rng.random_range(-1.0..1.0);
                        m * 2f32.powi(rng.random_range(-10..10))
                    })
                    .collect();
                pack_floats(dtype, &v)
            }
        }
    }

    const SCALARS: [u32; 8] = [
        0x3f80_0000, // 1.0
        0x3dcc_cccd, // 0.1 (not exact in f16)
        0xbf00_0000, // -0.5
        7,
        0x4049_0fdb, // pi
        0,
        0xffff_fffd, // -3 as i32
        0x4120_0000, // 10.0
    ];

    /// Runs `text` with MEM = a and TS slot 1 = b (slot 2 = c); returns (mem, ts0).
    fn run(text: &str, a: Column, b: Column, c: Column) -> (Column, Column, BankAlu) {
        let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
        *alu.ts_mut(entry(1)).unwrap() = b;
        *alu.ts_mut(entry(2)).unwrap() = c;
        let mut mem = a;
        let instr = parse_instr(text).unwrap();
        alu.execute(&instr, CHUNK, K, &mut mem, &SCALARS).unwrap();
        let ts0 = *alu.ts(entry(0)).unwrap();
        (mem, ts0, alu)
    }

    fn float_types() -> impl Strategy<Value = DType> {
        prop::sample::select(vec![DType::F16, DType::Bf16, DType::F32])
    }

    proptest! {
        #[test]
        fn float_binary_ops_match_reference(dtype in float_types(), sa in any::<[u8; 32]>(), sb in any::<[u8; 32]>()) {
            let (a, b) = (column(dtype, &sa), column(dtype, &sb));
            let ops: [(&str, FloatOp); 5] = [
                ("add", |x, y| x + y),
                ("sub", |x, y| x - y),
                ("mul", |x, y| x * y),
                ("min", |x, y| if x < y { x } else { y }),
                ("max", |x, y| if x > y { x } else { y }),
            ];
            for (name, f) in ops {
                let (_, ts0, _) = run(&format!("{name}.{dtype} ts0, mem, ts1"), a, b, [0; 32]);
                let want: Vec<f32> = floats(dtype, &a).iter().zip(floats(dtype, &b)).map(|(x, y)| f(*x, y)).collect();
                prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)), "{name}.{dtype}");
            }
        }

        #[test]
        fn int_binary_ops_wrap(sa in any::<[u8; 32]>(), sb in any::<[u8; 32]>()) {
            let (a, b) = (column(DType::I32, &sa), column(DType::I32, &sb));
            let ops: [(&str, IntOp); 5] = [
                ("add", |x, y| x + y),
                ("sub", |x, y| x - y),
                ("mul", |x, y| x * y),
                ("min", |x, y| x.min(y)),
                ("max", |x, y| x.max(y)),
            ];
            for (name, f) in ops {
                let (mem, _, _) = run(&format!("{name}.i32 mem, mem, ts1"), a, b, [0; 32]);
                // Wrapping = the low 32 bits of the exact result.
                let want: Vec<i32> = ints(&a).iter().zip(ints(&b)).map(|(x, y)| f(i64::from(*x), i64::from(y)) as u32 as i32).collect();
                prop_assert_eq!(mem, pack_ints(&want), "{}", name);
            }
        }

        #[test]
        fn fma_is_fused_then_rounded(dtype in float_types(), s in any::<[[u8; 32]; 3]>()) {
            let (a, b, c) = (column(dtype, &s[0]), column(dtype, &s[1]), column(dtype, &s[2]));
            let (_, ts0, _) = run(&format!("fma.{dtype} ts0, mem, ts1, ts2"), a, b, c);
            // Reference: exact product and sum in f64 (exact for these magnitudes), then
            // rounded to f32 once: that is what a fused f32 FMA returns.
            let want: Vec<f32> = floats(dtype, &a).iter().zip(floats(dtype, &b)).zip(floats(dtype, &c))
                .map(|((x, y), z)| (f64::from(*x) * f64::from(y) + f64::from(z)) as f32).collect();
            prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
        }

        #[test]
        fn int_fma_wraps(s in any::<[[u8; 32]; 3]>()) {
            let (a, b, c) = (column(DType::I32, &s[0]), column(DType::I32, &s[1]), column(DType::I32, &s[2]));
            let (_, ts0, _) = run("fma.i32 ts0, mem, ts1, ts2", a, b, c);
            let want: Vec<i32> = (0..8).map(|i| (i64::from(ints(&a)[i]) * i64::from(ints(&b)[i]) + i64::from(ints(&c)[i])) as u32 as i32).collect();
            prop_assert_eq!(ts0, pack_ints(&want));
        }

        #[test]
        fn scalars_and_immediates_enter_unrounded(dtype in float_types(), sa in any::<[u8; 32]>()) {
            let a = column(dtype, &sa);
            let (_, ts0, _) = run(&format!("scale.{dtype} ts0, mem, s1"), a, [0; 32], [0; 32]);
            let s1 = f32::from_bits(SCALARS[1]);
            let want: Vec<f32> = floats(dtype, &a).iter().map(|x| x * s1).collect();
            prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
            let (_, ts0, _) = run(&format!("add.{dtype} ts0, mem, #-3"), a, [0; 32], [0; 32]);
            let want: Vec<f32> = floats(dtype, &a).iter().map(|x| x - 3.0).collect();
            prop_assert!(same(dtype, &ts0, &pack_floats(dtype, &want)));
        }

        #[test]
        fn shifts(dtype in float_types(), sa in any::<[u8; 32]>(), n in 0u32..=31) {
            let a = column(dtype, &sa);
            for (name, e) in [("shl", n as i32), ("shr", -(n as i32))] {
                let (_, ts0, _) = run(&format!("{name}.{dtype} ts0, mem, {n}"), a, [0; 32], [0; 32]);
                let want: Column = match dtype {
                    DType::F32 => pack_floats(dtype, &floats(dtype, &a).iter().map(|x| (f64::from(*x) * 2f64.powi(e)) as f32).collect::<Vec<_>>()),
                    DType::F16 => {
                        let mut o = [0u8; 32];
                        for (i, x) in floats(dtype, &a).iter().enumerate() {
                            o[2 * i..2 * i + 2].copy_from_slice(&f16::from_f64(f64::from(*x) * 2f64.powi(e)).to_bits().to_le_bytes());
                        }
                        o
                    }
                    _ => {
                        let mut o = [0u8; 32];
                        for (i, x) in floats(dtype, &a).iter().enumerate() {
                            o[2 * i..2 * i + 2].copy_from_slice(&bf16::from_f64(f64::from(*x) * 2f64.powi(e)).to_bits().to_le_bytes());
                        }
                        o
                    }
                };
                prop_assert!(same(dtype, &ts0, &want), "{name} {n}");
            }
            let ai = column(DType::I32, &sa);
            let (_, l, _) = run(&format!("shl.i32 ts0, mem, {n}"), ai, [0; 32], [0; 32]);
            let (_, r, _) = run(&format!("shr.i32 ts0, mem, {n}"), ai, [0; 32], [0; 32]);
            let wl: Vec<i32> = ints(&ai).iter().map(|x| ((i64::from(*x) << n) as u32) as i32).collect();
            let wr: Vec<i32> = ints(&ai).iter().map(|x| (i64::from(*x) >> n) as i32).collect();
            prop_assert_eq!(l, pack_ints(&wl));
            prop_assert_eq!(r, pack_ints(&wr));
        }

        #[test]
        fn reductions_add_lanes_in_order(dtype in prop::sample::select(DType::ALL.to_vec()), sa in any::<[u8; 32]>()) {
            let a = column(dtype, &sa);
            let vals: Vec<f32> = match dtype {
                DType::I32 => ints(&a).iter().map(|x| *x as f32).collect(),
                _ => floats(dtype, &a),
            };
            let (_, _, alu) = run(&format!("acc.{dtype} mem"), a, [0; 32], [0; 32]);
            let mut want = 0f32;
            for x in &vals { want += x; }
            prop_assert_eq!(alu.acc().to_bits(), want.to_bits());
            let (_, _, alu) = run(&format!("sqacc.{dtype} mem"), a, [0; 32], [0; 32]);
            let mut want = 0f32;
            for x in &vals { want = (f64::from(*x) * f64::from(*x) + f64::from(want)) as f32; }
            // f64 evaluates x*x + acc exactly for f16/bf16 inputs, so rounding once equals
            // the fused f32 result; for f32/i32 inputs allow the fused/unfused difference.
            let tol = if dtype.lane_bytes() == 2 { 0.0 } else { want.abs() * 1e-6 };
            prop_assert!((alu.acc() - want).abs() <= tol, "{} vs {}", alu.acc(), want);
        }

        #[test]
        fn conversions(s in any::<[u8; 32]>()) {
            for from in [DType::F16, DType::Bf16] {
                let a = column(from, &s);
                let lanes = floats(from, &a);
                let (_, lo, _) = run(&format!("cvt.f32.{from} ts0, mem"), a, [0; 32], [0; 32]);
                let (_, hi, _) = run(&format!("cvt.f32.{from} ts0, mem, hi"), a, [0; 32], [0; 32]);
                prop_assert_eq!(lo, pack_floats(DType::F32, &lanes[..8]));
                prop_assert_eq!(hi, pack_floats(DType::F32, &lanes[8..]));
                // Narrowing back into the other half keeps the first half.
                let f = column(DType::F32, &s);
                let (mem, _, _) = run(&format!("cvt.{from}.f32 mem, ts1, hi"), a, f, [0; 32]);
                let mut want = lanes.clone();
                want[8..].copy_from_slice(&floats(DType::F32, &f));
                prop_assert_eq!(mem, pack_floats(from, &want));
            }
            let i = column(DType::I32, &s);
            let (_, t, _) = run("cvt.f32.i32 ts0, mem", i, [0; 32], [0; 32]);
            prop_assert_eq!(t, pack_floats(DType::F32, &ints(&i).iter().map(|x| *x as f32).collect::<Vec<_>>()));
            let f = column(DType::F32, &s);
            let (_, t, _) = run("cvt.i32.f32 ts0, mem", f, [0; 32], [0; 32]);
            prop_assert_eq!(t, pack_ints(&floats(DType::F32, &f).iter().map(|x| x.trunc() as i32).collect::<Vec<_>>()));
        }

        #[test]
        fn mov_and_fill(dtype in prop::sample::select(DType::ALL.to_vec()), s in any::<[u8; 32]>()) {
            let a = column(dtype, &s);
            let (mem, ts0, _) = run(&format!("mov.{dtype} ts0, mem"), a, [0; 32], [0; 32]);
            prop_assert_eq!(ts0, a);
            prop_assert_eq!(mem, a);
            let (mem, _, _) = run(&format!("mov.{dtype} mem, ts1"), a, s, [0; 32]);
            prop_assert_eq!(mem, s);
            let (_, ts0, _) = run(&format!("fill.{dtype} ts0, s4"), a, [0; 32], [0; 32]);
            let want = match dtype {
                DType::I32 => pack_ints(&[SCALARS[4] as i32; 8]),
                _ => pack_floats(dtype, &vec![f32::from_bits(SCALARS[4]); dtype.lanes()]),
            };
            prop_assert_eq!(ts0, want);
        }
    }

    /// Quotient lanes equal `a / b` bit for bit (a NaN only has to be a NaN).
    fn assert_quotients(a: &[f32], b: &[f32], got: &Column, what: &str) {
        for ((x, y), q) in a.iter().zip(b).zip(floats(DType::F32, got)) {
            let want = x / y;
            assert!(
                (want.is_nan() && q.is_nan()) || want.to_bits() == q.to_bits(),
                "{what}: {x:e} ({:#010x}) / {y:e} ({:#010x}) = {q:e} ({:#010x}), want {want:e} ({:#010x})",
                x.to_bits(),
                y.to_bits(),
                q.to_bits(),
                want.to_bits()
            );
        }
    }

    #[test]
    fn div_is_the_ieee_quotient() {
        let specials = [
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(1),
            -f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::from_bits(0x0040_0001),
            f32::MIN_POSITIVE,
            -f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            f32::EPSILON,
            1.0,
            -1.0,
            3.0,
            0.1,
            1e-38,
            1e38,
            f32::from_bits(0x3fff_ffff), // mantissa all ones
            f32::from_bits(0x3f80_0001),
        ];
        let mut pairs: Vec<(f32, f32)> = specials
            .iter()
            .flat_map(|&x| specials.iter().map(move |&y| (x, y)))
            .collect();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0xd1f);
        // Any bit patterns (NaNs, infinities, subnormals included) ...
        pairs.extend((0..100_000).map(|_| {
            (
                f32::from_bits(rng.random::<u32>()),
                f32::from_bits(rng.random::<u32>()),
            )
        }));
        // ... and quotients that overflow, underflow into subnormals, or are ordinary.
        let mut magnitude = |lo: i32, hi: i32| {
            let m: f32 = rng.random_range(-2.0..2.0);
            m * 2f32.powi(rng.random_range(lo..hi))
        };
        pairs.extend((0..20_000).map(|_| (magnitude(100, 127), magnitude(-126, -100))));
        pairs.extend((0..20_000).map(|_| (magnitude(-149, -100), magnitude(0, 127))));
        pairs.extend((0..20_000).map(|_| (magnitude(-20, 20), magnitude(-20, 20))));
        for lanes in pairs.chunks(8) {
            let a: Vec<f32> = lanes.iter().map(|p| p.0).collect();
            let b: Vec<f32> = lanes.iter().map(|p| p.1).collect();
            let (ca, cb) = (pack_floats(DType::F32, &a), pack_floats(DType::F32, &b));
            let (mem, _, _) = run("div.f32 mem, mem, ts1", ca, cb, [0; 32]);
            assert_quotients(&a, &b, &mem, "div.f32 mem, mem, ts1");
            let (_, ts0, _) = run("div.f32 ts0, ts2, mem", cb, [0; 32], ca);
            assert_quotients(&a, &b, &ts0, "div.f32 ts0, ts2, mem");
            // A scalar register divisor, broadcast to every lane.
            let (_, ts0, _) = run("div.f32 ts0, ts1, s4", [0; 32], ca, [0; 32]);
            let pi = f32::from_bits(SCALARS[4]);
            assert_quotients(&a, &[pi; 8], &ts0, "div.f32 ts0, ts1, s4");
        }
        assert_eq!(
            Instr::Div {
                dst: Loc::Mem,
                src0: nmcp_isa::nmc::Src::Mem,
                src1: nmcp_isa::nmc::Src::Mem,
            }
            .column_slots(),
            6
        );
    }

    #[test]
    fn float_overflow_and_min_max_nan() {
        let a = pack_floats(DType::F16, &[60000.0; 16]);
        let (_, ts0, _) = run("add.f16 ts0, mem, mem", a, [0; 32], [0; 32]);
        assert!(floats(DType::F16, &ts0).iter().all(|x| *x == f32::INFINITY));
        let (_, ts0, _) = run("shl.f16 ts0, mem, 1", a, [0; 32], [0; 32]);
        assert!(floats(DType::F16, &ts0).iter().all(|x| *x == f32::INFINITY));
        let n = pack_floats(DType::F32, &[f32::NAN; 8]);
        let one = pack_floats(DType::F32, &[1.0; 8]);
        let (_, ts0, _) = run("min.f32 ts0, mem, ts1", n, one, [0; 32]);
        assert_eq!(floats(DType::F32, &ts0), vec![1.0; 8]);
    }

    #[test]
    fn ts_mapping_and_errors() {
        let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
        let mut mem = pack_floats(DType::F32, &[2.0; 8]);
        // chunk 4: slot 3 at k 3 is entry 15, the last one.
        let i = parse_instr("mov.f32 ts3, mem").unwrap();
        alu.execute(&i, 4, 3, &mut mem, &SCALARS).unwrap();
        assert_eq!(alu.ts(15), Some(&mem));
        // chunk 5: slot 3 at k 1 is entry 16, past the end.
        assert_eq!(
            alu.execute(&i, 5, 1, &mut mem, &SCALARS),
            Err(AluError::TsOutOfRange {
                slot: 3,
                entry: 16,
                entries: 16
            })
        );
        assert_eq!(
            alu.execute(&i, 4, 4, &mut mem, &SCALARS),
            Err(AluError::OffsetOutsideChunk { k: 4, chunk: 4 })
        );
        assert_eq!(
            alu.execute(&parse_instr("exit").unwrap(), 4, 0, &mut mem, &SCALARS),
            Err(AluError::ControlInstruction)
        );
        // The 4x TS variant takes it.
        let mut big = BankAlu::new(TS_4X_ENTRIES);
        assert_eq!(big.execute(&i, 5, 1, &mut mem, &SCALARS), Ok(()));
    }

    #[test]
    fn run_block_follows_loops_and_counts_slots() {
        let block: Vec<Instr> = [
            "mov.f32 ts0, mem",
            "add.f32 ts0, ts0, #1",
            "jump -1, 3",
            "rsqrt.f32 ts1, ts0",
            "exit",
            "mov.f32 mem, ts0",
        ]
        .iter()
        .map(|t| parse_instr(t).unwrap())
        .collect();
        let mut alu = BankAlu::default();
        let mut mem = pack_floats(DType::F32, &[5.0; 8]);
        let slots = alu.run_block(&block, 2, 1, &mut mem, &SCALARS).unwrap();
        // mov + 4 × add + rsqrt (5 slots); the store after EXIT never runs.
        assert_eq!(slots, 1 + 4 + 5);
        assert_eq!(floats(DType::F32, alu.ts(1).unwrap()), vec![9.0; 8]);
        assert_eq!(floats(DType::F32, &mem), vec![5.0; 8]);
        let r = floats(DType::F32, alu.ts(3).unwrap())[0];
        assert!((f64::from(r) - 1.0 / 3.0).abs() < 1e-7, "{r}");
    }

    /// Relative error against f64, for results that are normal f32 numbers; for
    /// subnormal results, error in units of the smallest subnormal.
    fn check(f: fn(f32) -> f32, exact: fn(f64) -> f64, x: f32, worst: &mut f64) {
        let want = exact(f64::from(x));
        let got = f(x);
        if want.abs() > f64::from(f32::MAX) {
            assert!(got.is_infinite(), "f({x:e}) = {got:e}, want overflow");
            return;
        }
        if want.abs() < f64::from(f32::MIN_POSITIVE) {
            let ulps = (f64::from(got) - want).abs() / f64::from(f32::from_bits(1));
            assert!(
                ulps <= 1.0,
                "f({x:e}) = {got:e}, want {want:e} ({ulps} subnormal ulps)"
            );
            return;
        }
        let rel = (f64::from(got) - want).abs() / want.abs();
        *worst = worst.max(rel);
        assert!(
            rel <= f64::from(SPECIAL_REL_ERROR_BOUND),
            "f({x:e}) = {got:e}, want {want:e}, rel {rel:e}"
        );
    }

    #[test]
    fn special_functions_meet_the_error_bound() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0x5eed);
        let mut inputs: Vec<f32> = (0..200_000)
            .map(|_| f32::from_bits(rng.random_range(1..0x7f80_0000u32)))
            .collect();
        // Mantissa sweep near 1, the seed's worst region, and the edges of the range.
        inputs.extend((0..4096).map(|i| 1.0 + i as f32 / 4096.0));
        inputs.extend([
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff),
            f32::MIN_POSITIVE,
            f32::MAX,
            1.0,
            2.0,
            4.0,
            0.25,
            3.0,
            1e-6,
            0.999,
        ]);
        let mut worst = [0f64; 3];
        for &x in &inputs {
            check(rcp, |v| 1.0 / v, x, &mut worst[0]);
            check(rcp, |v| 1.0 / v, -x, &mut worst[0]);
            check(rsqrt, |v| 1.0 / v.sqrt(), x, &mut worst[1]);
            check(sqrt, f64::sqrt, x, &mut worst[2]);
        }
        eprintln!(
            "max relative error: rcp {:.3e} (2^{:.1}), rsqrt {:.3e} (2^{:.1}), sqrt {:.3e} (2^{:.1})",
            worst[0], worst[0].log2(), worst[1], worst[1].log2(), worst[2], worst[2].log2()
        );
    }

    #[test]
    fn special_function_edge_cases() {
        assert_eq!(rcp(0.0), f32::INFINITY);
        assert_eq!(rcp(-0.0), f32::NEG_INFINITY);
        assert_eq!(rcp(f32::INFINITY).to_bits(), 0f32.to_bits());
        assert_eq!(rcp(f32::NEG_INFINITY).to_bits(), (-0f32).to_bits());
        assert!(rcp(f32::NAN).is_nan());
        assert_eq!(rsqrt(0.0), f32::INFINITY);
        assert_eq!(rsqrt(-0.0), f32::NEG_INFINITY);
        assert_eq!(rsqrt(f32::INFINITY), 0.0);
        assert!(rsqrt(-1.0).is_nan() && rsqrt(f32::NAN).is_nan());
        assert_eq!(sqrt(0.0).to_bits(), 0f32.to_bits());
        assert_eq!(sqrt(-0.0).to_bits(), (-0f32).to_bits());
        assert_eq!(sqrt(f32::INFINITY), f32::INFINITY);
        assert!(sqrt(-1e-30).is_nan() && sqrt(f32::NAN).is_nan());
        // Exact cases stay exact.
        assert_eq!(sqrt(4.0), 2.0);
        assert_eq!(rsqrt(4.0), 0.5);
        assert_eq!(rcp(8.0), 0.125);
    }

    /// Runs a macro-command over one bank whose arrays are `mem[base_row]` (one "row"
    /// per array, enough columns for the command): the chunk/phase/column order of the
    /// macro-command semantics, without timing.
    fn run_macro(
        alu: &mut BankAlu,
        cmd: &nmcp_isa::nmc::MacroCommand,
        mem: &mut [Vec<Column>],
        scalars: &[u32; 8],
    ) {
        cmd.validate().unwrap();
        assert!(cmd.ts_entries_needed() <= alu.ts_entries());
        let n = cmd.col_count as usize;
        let chunk = usize::from(cmd.chunk);
        for start in (0..n).step_by(chunk) {
            for phase in &cmd.phases {
                let block = cmd.block(phase).unwrap();
                for k in 0..chunk.min(n - start) {
                    let col = &mut mem[phase.base_row as usize][cmd.col_start as usize + start + k];
                    alu.run_block(block, cmd.chunk, k as u8, col, scalars)
                        .unwrap();
                }
            }
        }
    }

    const LAMB_STAGE1: &str = "
.macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4
.phase row=0                      ; g
  mov.f32 ts0, mem
.phase row=1                      ; m
  scale.f32 ts1, mem, s0          ; b1 m
  fma.f32 ts1, ts0, s1, ts1       ; + (1-b1)/clip g
  mov.f32 mem, ts1
.phase row=2                      ; v
  mul.f32 ts0, ts0, ts0           ; g^2
  scale.f32 ts2, mem, s2          ; b2 v
  fma.f32 ts2, ts0, s3, ts2       ; + (1-b2)/clip^2 g^2
  mov.f32 mem, ts2
  sqrt.f32 ts2, ts2
  fma.f32 ts2, ts2, s5, s6        ; sqrt(v) sqrt(bc2) + eps
  rcp.f32 ts2, ts2
  mul.f32 ts1, ts1, ts2
  scale.f32 ts1, ts1, s4          ; * bc1
.phase row=3                      ; w
  fma.f32 ts1, mem, s7, ts1       ; + wd w
.phase row=4                      ; u
  mov.f32 mem, ts1
.end
";

    const LAMB_NORMS: [&str; 2] = [
        ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4\n.phase row=3\n sqacc.f32 mem\n.end\n",
        ".macro channels=0+1 mode=all col_start=0 col_count=64 chunk=4\n.phase row=4\n sqacc.f32 mem\n.end\n",
    ];

    const LAMB_STAGE2: &str = "
.macro channels=0+1 mode=all col_start=0 col_count=64 chunk=8
.phase row=4                      ; u
  scale.f32 ts0, mem, s0          ; lr * ratio * u
.phase row=3                      ; w
  sub.f32 mem, mem, ts0
.end
";

    /// The ISA expresses LAMB (SPEC 4.1, Apex FusedLAMB variant) and its numerics meet
    /// the 1e-5 per-element budget against an f64 reference, over 10 steps with clipping
    /// and bias correction.
    #[test]
    fn lamb_programs_match_f64_reference_over_ten_steps() {
        use nmcp_isa::asm::parse_macro;
        let (b1, b2, eps, wd, lr, max_norm) = (0.9f64, 0.999f64, 1e-6f64, 0.01f64, 1e-3f64, 1.0f64);
        let n = 64 * 8;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let to_cols = |v: &[f64]| -> Vec<Column> {
            v.chunks(8)
                .map(|c| pack_floats(DType::F32, &c.iter().map(|x| *x as f32).collect::<Vec<_>>()))
                .collect()
        };
        let from_cols = |cols: &[Column]| -> Vec<f64> {
            cols.iter()
                .flat_map(|c| floats(DType::F32, c))
                .map(f64::from)
                .collect()
        };
        // Reference state in f64, starting from the same f32 values.
        let mut w: Vec<f64> = (0..n)
            .map(|_| f64::from(rng.random_range(-1.0f32..1.0)))
            .collect();
        let mut m = vec![0f64; n];
        let mut v = vec![0f64; n];
        let mut mem: Vec<Vec<Column>> = vec![to_cols(&vec![0.0; n]); 5];
        mem[3] = to_cols(&w);
        let stage1 = parse_macro(LAMB_STAGE1).unwrap();
        let stage2 = parse_macro(LAMB_STAGE2).unwrap();
        let norms: Vec<_> = LAMB_NORMS.iter().map(|t| parse_macro(t).unwrap()).collect();
        let mut alu = BankAlu::new(DEFAULT_TS_ENTRIES);
        let mut worst = 0f64;
        for t in 1..=10 {
            // Gradients large enough that clipping is active.
            let g: Vec<f64> = (0..n)
                .map(|_| f64::from(rng.random_range(-0.5f32..0.5)))
                .collect();
            mem[0] = to_cols(&g);
            let gnorm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
            let clip = if gnorm > max_norm {
                gnorm / max_norm
            } else {
                1.0
            };
            let (bc1, bc2) = (1.0 / (1.0 - b1.powi(t)), 1.0 / (1.0 - b2.powi(t)));
            // Reference.
            let mut u = vec![0f64; n];
            // Magnitude of the terms each element is summed from: errors are measured
            // relative to it, since b1·m + (1-b1)·g can cancel to near zero, where no f32
            // implementation is relatively accurate.
            let mut m_scale = vec![0f64; n];
            let mut w_scale = vec![0f64; n];
            for i in 0..n {
                let gh = g[i] / clip;
                m_scale[i] = b1 * m[i].abs() + (1.0 - b1) * gh.abs();
                m[i] = b1 * m[i] + (1.0 - b1) * gh;
                v[i] = b2 * v[i] + (1.0 - b2) * gh * gh;
                u[i] = (m[i] * bc1) / ((v[i] * bc2).sqrt() + eps) + wd * w[i];
            }
            let p = w.iter().map(|x| x * x).sum::<f64>().sqrt();
            let un = u.iter().map(|x| x * x).sum::<f64>().sqrt();
            let ratio = if p > 0.0 && un > 0.0 { p / un } else { 1.0 };
            for i in 0..n {
                w_scale[i] = w[i].abs() + (lr * ratio * u[i]).abs();
                w[i] -= lr * ratio * u[i];
            }
            // NMC: the host folds the scalars into the 8 registers.
            let sc = [
                b1,
                (1.0 - b1) / clip,
                b2,
                (1.0 - b2) / (clip * clip),
                bc1,
                bc2.sqrt(),
                eps,
                wd,
            ]
            .map(|x| (x as f32).to_bits());
            run_macro(&mut alu, &stage1, &mut mem, &sc);
            let mut sums = [0f64; 2];
            for (s, cmd) in sums.iter_mut().zip(&norms) {
                alu.take_acc();
                run_macro(&mut alu, cmd, &mut mem, &sc);
                *s = f64::from(alu.take_acc());
            }
            let (p_nmc, u_nmc) = (sums[0].sqrt(), sums[1].sqrt());
            let ratio_nmc = if p_nmc > 0.0 && u_nmc > 0.0 {
                p_nmc / u_nmc
            } else {
                1.0
            };
            let mut sc2 = [0u32; 8];
            sc2[0] = ((lr * ratio_nmc) as f32).to_bits();
            run_macro(&mut alu, &stage2, &mut mem, &sc2);
            for (name, row, want, scale) in [
                ("m", 1, &m, &m_scale),
                ("v", 2, &v, &v),
                ("w", 3, &w, &w_scale),
            ] {
                for (i, (got, want)) in from_cols(&mem[row]).iter().zip(want.iter()).enumerate() {
                    let rel = (got - want).abs() / scale[i].abs().max(1e-30);
                    worst = worst.max(rel);
                    assert!(
                        rel <= 1e-5,
                        "step {t}: {name}[{i}] = {got:e}, reference {want:e}, rel {rel:e}"
                    );
                }
            }
        }
        eprintln!("LAMB on the bank ALU, 10 steps: worst error of m, v, w relative to their terms = {worst:.2e}");
    }
}
