//! Bank-ALU instructions: the opcode table, the lane types and the [`Instr`] enum, whose
//! values are exactly the encodable instructions (slot numbers, immediates, shift counts
//! and loop counts are range-checked newtypes in [`super::operand`], conversions are an
//! enum of the legal pairs). The word layout and codec are in [`super::encoding`]; the
//! cost model in [`super::cost`].

use core::fmt;

use super::operand::{JumpBack, JumpTaken, Loc, Scalar, ShiftAmount, Src, SrcImm};

/// Operation code (6 bits). Gaps are reserved for later opcodes and decode to an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum Opcode {
    /// Occupies a column slot, does nothing.
    Nop = 0x00,
    /// dst = src0 (load or store between memory and TS).
    Mov = 0x01,
    /// dst = broadcast of a scalar register or immediate.
    Fill = 0x02,
    /// dst = src0 converted between types.
    Cvt = 0x03,
    /// dst = src0 + src1.
    Add = 0x08,
    /// dst = src0 - src1.
    Sub = 0x09,
    /// dst = src0 * src1.
    Mul = 0x0a,
    /// dst = src0 * src1 + src2.
    Fma = 0x0b,
    /// dst = src0 * scalar.
    Scale = 0x0c,
    /// dst = min(src0, src1).
    Min = 0x0d,
    /// dst = max(src0, src1).
    Max = 0x0e,
    /// dst = src0 / src1 (f32, correctly rounded, multi-cycle).
    Div = 0x0f,
    /// dst = src0 << aux (floats: times 2^aux).
    Shl = 0x10,
    /// dst = src0 >> aux, arithmetic (floats: times 2^-aux).
    Shr = 0x11,
    /// accumulator += sum of the lanes of src0.
    Acc = 0x18,
    /// accumulator += sum of the squared lanes of src0.
    SqAcc = 0x19,
    /// dst = 1 / src0 (f32, multi-cycle).
    Rcp = 0x20,
    /// dst = 1 / sqrt(src0) (f32, multi-cycle).
    Rsqrt = 0x21,
    /// dst = sqrt(src0) (f32, multi-cycle).
    Sqrt = 0x22,
    /// Loop back to an earlier instruction of the block.
    Jump = 0x3c,
    /// End of the block.
    Exit = 0x3f,
}

impl Opcode {
    /// Every defined opcode.
    pub const ALL: [Opcode; 21] = [
        Self::Nop,
        Self::Mov,
        Self::Fill,
        Self::Cvt,
        Self::Add,
        Self::Sub,
        Self::Mul,
        Self::Fma,
        Self::Scale,
        Self::Min,
        Self::Max,
        Self::Div,
        Self::Shl,
        Self::Shr,
        Self::Acc,
        Self::SqAcc,
        Self::Rcp,
        Self::Rsqrt,
        Self::Sqrt,
        Self::Jump,
        Self::Exit,
    ];

    /// The opcode with these 6 bits, if one is defined.
    pub fn from_bits(bits: u8) -> Option<Self> {
        Self::ALL.iter().copied().find(|o| *o as u8 == bits)
    }

    /// Assembler name.
    pub const fn mnemonic(self) -> &'static str {
        match self {
            Self::Nop => "nop",
            Self::Mov => "mov",
            Self::Fill => "fill",
            Self::Cvt => "cvt",
            Self::Add => "add",
            Self::Sub => "sub",
            Self::Mul => "mul",
            Self::Fma => "fma",
            Self::Scale => "scale",
            Self::Min => "min",
            Self::Max => "max",
            Self::Div => "div",
            Self::Shl => "shl",
            Self::Shr => "shr",
            Self::Acc => "acc",
            Self::SqAcc => "sqacc",
            Self::Rcp => "rcp",
            Self::Rsqrt => "rsqrt",
            Self::Sqrt => "sqrt",
            Self::Jump => "jump",
            Self::Exit => "exit",
        }
    }

    /// The opcode with this assembler name (ASCII case-insensitive).
    pub fn from_mnemonic(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|o| o.mnemonic().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

/// Lane type of a 256-bit operand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum DType {
    /// IEEE binary16, 16 lanes.
    F16 = 0,
    /// bfloat16, 16 lanes.
    Bf16 = 1,
    /// IEEE binary32, 8 lanes.
    F32 = 2,
    /// Two's-complement 32-bit integer, 8 lanes, wrapping.
    I32 = 3,
}

impl DType {
    /// Every data type, in encoding order.
    pub const ALL: [DType; 4] = [Self::F16, Self::Bf16, Self::F32, Self::I32];

    /// The type with these 2 bits.
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0x3 {
            0 => Self::F16,
            1 => Self::Bf16,
            2 => Self::F32,
            _ => Self::I32,
        }
    }

    /// Lanes in one 256-bit column.
    pub const fn lanes(self) -> usize {
        match self {
            Self::F16 | Self::Bf16 => 16,
            Self::F32 | Self::I32 => 8,
        }
    }

    /// Bytes per lane.
    pub const fn lane_bytes(self) -> usize {
        match self {
            Self::F16 | Self::Bf16 => 2,
            Self::F32 | Self::I32 => 4,
        }
    }

    /// Assembler suffix.
    pub const fn name(self) -> &'static str {
        match self {
            Self::F16 => "f16",
            Self::Bf16 => "bf16",
            Self::F32 => "f32",
            Self::I32 => "i32",
        }
    }

    /// The type with this assembler suffix (ASCII case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Two-source element-wise operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BinaryOp {
    /// src0 + src1.
    Add,
    /// src0 - src1.
    Sub,
    /// src0 * src1.
    Mul,
    /// min(src0, src1).
    Min,
    /// max(src0, src1).
    Max,
}

/// Shift direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ShiftOp {
    /// Left (floats: times 2^n).
    Shl,
    /// Right, arithmetic (floats: times 2^-n).
    Shr,
}

/// What the reduction accumulator adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ReduceOp {
    /// The lanes.
    Acc,
    /// The squares of the lanes.
    SqAcc,
}

/// Multi-cycle f32 functions (seed + Newton–Raphson in the ALU).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SpecialOp {
    /// 1/x.
    Rcp,
    /// 1/sqrt(x).
    Rsqrt,
    /// sqrt(x).
    Sqrt,
}

/// Which 128-bit half of the wider operand a widening or narrowing conversion uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Half {
    /// Lanes 0..8 of the 16-lane side.
    Lo,
    /// Lanes 8..16 of the 16-lane side.
    Hi,
}

/// The legal type conversions.
///
/// 16 lanes of f16/bf16 hold twice the values of 8 lanes of f32, so widening reads one
/// half of the 16-bit source and narrowing writes one half of the 16-bit destination,
/// keeping the other half (the destination is read-modify-written).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Conversion {
    /// 8 of the 16 f16 lanes to 8 f32 lanes.
    F16ToF32(Half),
    /// 8 of the 16 bf16 lanes to 8 f32 lanes.
    Bf16ToF32(Half),
    /// 8 f32 lanes to 8 of the 16 f16 lanes, rounded to nearest even.
    F32ToF16(Half),
    /// 8 f32 lanes to 8 of the 16 bf16 lanes, rounded to nearest even.
    F32ToBf16(Half),
    /// i32 to f32, rounded to nearest even.
    I32ToF32,
    /// f32 to i32, truncated toward zero, saturating, NaN to 0.
    F32ToI32,
}

impl Conversion {
    /// Destination type (the `dtype` field).
    pub const fn to(self) -> DType {
        match self {
            Self::F16ToF32(_) | Self::Bf16ToF32(_) | Self::I32ToF32 => DType::F32,
            Self::F32ToF16(_) => DType::F16,
            Self::F32ToBf16(_) => DType::Bf16,
            Self::F32ToI32 => DType::I32,
        }
    }

    /// Source type (`aux[1:0]`).
    pub const fn from(self) -> DType {
        match self {
            Self::F16ToF32(_) => DType::F16,
            Self::Bf16ToF32(_) => DType::Bf16,
            Self::F32ToF16(_) | Self::F32ToBf16(_) | Self::F32ToI32 => DType::F32,
            Self::I32ToF32 => DType::I32,
        }
    }

    /// The half select (`aux[2]`); `None` for the lane-count-preserving conversions.
    pub const fn half(self) -> Option<Half> {
        match self {
            Self::F16ToF32(h) | Self::Bf16ToF32(h) | Self::F32ToF16(h) | Self::F32ToBf16(h) => {
                Some(h)
            }
            Self::I32ToF32 | Self::F32ToI32 => None,
        }
    }

    /// The conversion from `from` to `to` using `half`, if it is a legal pair.
    /// `half` must be `Lo` for i32<->f32.
    pub const fn new(to: DType, from: DType, half: Half) -> Option<Self> {
        match (to, from, half) {
            (DType::F32, DType::F16, h) => Some(Self::F16ToF32(h)),
            (DType::F32, DType::Bf16, h) => Some(Self::Bf16ToF32(h)),
            (DType::F16, DType::F32, h) => Some(Self::F32ToF16(h)),
            (DType::Bf16, DType::F32, h) => Some(Self::F32ToBf16(h)),
            (DType::F32, DType::I32, Half::Lo) => Some(Self::I32ToF32),
            (DType::I32, DType::F32, Half::Lo) => Some(Self::F32ToI32),
            _ => None,
        }
    }
}

/// One bank-ALU instruction. Every value of this type is encodable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "u32", into = "u32")]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Instr {
    /// Occupies one column slot.
    Nop,
    /// dst = src (bit copy; `dtype` only documents the contents).
    Mov {
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// Source.
        src: Loc,
    },
    /// dst = value in every lane.
    Fill {
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// Broadcast value.
        value: Scalar,
    },
    /// dst = convert(src).
    Cvt {
        /// Which conversion.
        conv: Conversion,
        /// Destination.
        dst: Loc,
        /// Source.
        src: Loc,
    },
    /// dst = src0 op src1.
    Binary {
        /// Operation.
        op: BinaryOp,
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// First source.
        src0: Src,
        /// Second source (may be the immediate).
        src1: SrcImm,
    },
    /// dst = src0 * src1 + src2 (fused for floats).
    Fma {
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// Multiplicand.
        src0: Src,
        /// Multiplier.
        src1: Src,
        /// Addend (encoded in `aux[4:0]`).
        src2: Src,
    },
    /// dst = src * factor.
    Scale {
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// Source.
        src: Src,
        /// Broadcast factor.
        factor: Scalar,
    },
    /// dst = src shifted by `amount`.
    Shift {
        /// Direction.
        op: ShiftOp,
        /// Lane type.
        dtype: DType,
        /// Destination.
        dst: Loc,
        /// Source.
        src: Src,
        /// Shift count.
        amount: ShiftAmount,
    },
    /// Bank accumulator += sum over lanes of src (or of src²), in f32.
    Reduce {
        /// Sum or sum of squares.
        op: ReduceOp,
        /// Lane type of src.
        dtype: DType,
        /// Source.
        src: Loc,
    },
    /// dst = src0 / src1, f32 only, the IEEE correctly-rounded quotient.
    Div {
        /// Destination.
        dst: Loc,
        /// Dividend.
        src0: Src,
        /// Divisor (no immediate).
        src1: Src,
    },
    /// dst = f(src), f32 only.
    Special {
        /// Function.
        op: SpecialOp,
        /// Destination.
        dst: Loc,
        /// Source.
        src: Loc,
    },
    /// Go back `back` instructions, `taken` times, then fall through.
    Jump {
        /// Distance back to the first instruction of the loop body.
        back: JumpBack,
        /// Times the jump is taken.
        taken: JumpTaken,
    },
    /// End of the block.
    Exit,
}

impl Instr {
    /// The opcode.
    pub const fn opcode(&self) -> Opcode {
        match self {
            Self::Nop => Opcode::Nop,
            Self::Mov { .. } => Opcode::Mov,
            Self::Fill { .. } => Opcode::Fill,
            Self::Cvt { .. } => Opcode::Cvt,
            Self::Binary { op, .. } => match op {
                BinaryOp::Add => Opcode::Add,
                BinaryOp::Sub => Opcode::Sub,
                BinaryOp::Mul => Opcode::Mul,
                BinaryOp::Min => Opcode::Min,
                BinaryOp::Max => Opcode::Max,
            },
            Self::Fma { .. } => Opcode::Fma,
            Self::Scale { .. } => Opcode::Scale,
            Self::Shift { op, .. } => match op {
                ShiftOp::Shl => Opcode::Shl,
                ShiftOp::Shr => Opcode::Shr,
            },
            Self::Reduce { op, .. } => match op {
                ReduceOp::Acc => Opcode::Acc,
                ReduceOp::SqAcc => Opcode::SqAcc,
            },
            Self::Div { .. } => Opcode::Div,
            Self::Special { op, .. } => match op {
                SpecialOp::Rcp => Opcode::Rcp,
                SpecialOp::Rsqrt => Opcode::Rsqrt,
                SpecialOp::Sqrt => Opcode::Sqrt,
            },
            Self::Jump { .. } => Opcode::Jump,
            Self::Exit => Opcode::Exit,
        }
    }

    /// The lane type the instruction computes in (for CVT: the destination type); `None`
    /// for NOP, JUMP and EXIT.
    pub const fn dtype(&self) -> Option<DType> {
        match *self {
            Self::Nop | Self::Jump { .. } | Self::Exit => None,
            Self::Mov { dtype, .. }
            | Self::Fill { dtype, .. }
            | Self::Binary { dtype, .. }
            | Self::Fma { dtype, .. }
            | Self::Scale { dtype, .. }
            | Self::Shift { dtype, .. }
            | Self::Reduce { dtype, .. } => Some(dtype),
            Self::Cvt { conv, .. } => Some(conv.to()),
            Self::Div { .. } | Self::Special { .. } => Some(DType::F32),
        }
    }

    /// JUMP and EXIT steer the block sequencer; they take no column slot.
    pub const fn is_control(&self) -> bool {
        matches!(self, Self::Jump { .. } | Self::Exit)
    }

    /// The sources, in field order (src0, src1, src2).
    fn sources(&self) -> [Option<SrcImm>; 3] {
        let loc = |l: Loc| Some(SrcImm::from(Src::from(l)));
        let src = |s: Src| Some(SrcImm::from(s));
        match *self {
            Self::Nop | Self::Jump { .. } | Self::Exit => [None, None, None],
            Self::Mov { src: s, .. }
            | Self::Cvt { src: s, .. }
            | Self::Reduce { src: s, .. }
            | Self::Special { src: s, .. } => [loc(s), None, None],
            Self::Fill { value, .. } => [Some(value.into()), None, None],
            Self::Binary { src0, src1, .. } => [src(src0), Some(src1), None],
            Self::Div { src0, src1, .. } => [src(src0), src(src1), None],
            Self::Fma {
                src0, src1, src2, ..
            } => [src(src0), src(src1), src(src2)],
            Self::Scale { src: s, factor, .. } => [src(s), Some(factor.into()), None],
            Self::Shift { src: s, .. } => [src(s), None, None],
        }
    }

    /// The destination, if the instruction writes a column.
    pub const fn dst(&self) -> Option<Loc> {
        match *self {
            Self::Nop | Self::Jump { .. } | Self::Exit | Self::Reduce { .. } => None,
            Self::Mov { dst, .. }
            | Self::Fill { dst, .. }
            | Self::Cvt { dst, .. }
            | Self::Binary { dst, .. }
            | Self::Fma { dst, .. }
            | Self::Scale { dst, .. }
            | Self::Shift { dst, .. }
            | Self::Div { dst, .. }
            | Self::Special { dst, .. } => Some(dst),
        }
    }

    /// Whether the instruction reads the open row's column (a RD at the bank).
    pub fn reads_memory(&self) -> bool {
        self.sources()
            .iter()
            .any(|s| matches!(s, Some(SrcImm::Mem)))
            || self.narrows_into(Loc::Mem)
    }

    /// Whether the instruction writes the open row's column (a WR at the bank).
    pub fn writes_memory(&self) -> bool {
        self.dst() == Some(Loc::Mem)
    }

    /// A narrowing CVT keeps the other half of its destination, so it reads it too.
    fn narrows_into(&self, loc: Loc) -> bool {
        matches!(
            self,
            Self::Cvt { conv: Conversion::F32ToF16(_) | Conversion::F32ToBf16(_), dst, .. }
                if *dst == loc
        )
    }

    /// The highest TS slot the instruction names, as source or destination.
    pub fn max_ts_slot(&self) -> Option<u8> {
        let from_dst = match self.dst() {
            Some(Loc::Ts(s)) => Some(s.get()),
            _ => None,
        };
        self.sources()
            .iter()
            .filter_map(|s| match s {
                Some(SrcImm::Ts(t)) => Some(t.get()),
                _ => None,
            })
            .chain(from_dst)
            .max()
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::asm::write_instr(f, self)
    }
}
