//! Bank-ALU instruction word.
//!
//! One 32-bit word per instruction, little-endian when serialised:
//!
//! ```text
//!  31      26 25 24 23    19 18    14 13     9 8          0
//! +----------+-----+--------+--------+--------+------------+
//! |  opcode  |dtype|  dst   |  src0  |  src1  |    aux     |
//! +----------+-----+--------+--------+--------+------------+
//! ```
//!
//! Operand fields (5 bits): `0b00sss` TS slot `s`, `0b01rrr` scalar register `r` (source
//! only), `0b10000` MEM (the current column of the open row), `0b10001` IMM (source only:
//! `aux` read as a signed 9-bit integer), `0b11111` NONE; every other pattern is reserved.
//!
//! The Rust type [`Instr`] can only hold encodable instructions (slot numbers, immediates,
//! shift counts and loop counts are range-checked newtypes, conversions are an enum of the
//! legal pairs), so [`Instr::encode`] is total and `decode(encode(i)) == i` always holds.
//! [`Instr::decode`] is strict: every unused field must be NONE or zero, so each valid
//! instruction has exactly one encoding and a stray bit is an error, never a guess.

use core::fmt;

/// Bytes of one serialised instruction word.
pub const INSTR_BYTES: usize = 4;
/// TS slots an instruction can name (3 bits of the operand field).
pub const TS_SLOTS: u8 = 8;
/// Scalar registers per channel (3 bits of the operand field).
pub const SCALAR_REGS: u8 = 8;
/// Smallest immediate (signed 9-bit `aux`).
pub const IMM_MIN: i16 = -256;
/// Largest immediate (signed 9-bit `aux`).
pub const IMM_MAX: i16 = 255;
/// Largest shift count (`aux[4:0]`).
pub const MAX_SHIFT: u8 = 31;
/// Largest backward distance of a JUMP (`aux[4:0]`).
pub const MAX_JUMP_BACK: u8 = 31;
/// Largest number of times one JUMP is taken (`aux[8:5] + 1`).
pub const MAX_JUMP_TAKEN: u8 = 16;

/// Dependent FMA-class operations the ALU completes in one column slot (tCCD_L).
///
/// A column slot is tCCD_L = 4 DRAM clocks in `hbm2-2000`; the ALU is pipelined at the
/// DRAM clock but an operand read and a write-back share the slot with the arithmetic, so
/// only half the clocks carry a dependent operation. Ordinary instructions are one
/// operation and are bound by the column access, not the ALU.
pub const ALU_OPS_PER_SLOT: u32 = 2;
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
/// Guaranteed bound on the relative error of RCP, RSQRT and SQRT against the exact
/// result, for every finite input whose exact result is a normal f32. Tested by the
/// emulator's ALU tests over random, tiny, huge and denormal inputs.
pub const SPECIAL_REL_ERROR_BOUND: f32 = 1.0 / (1u32 << 21) as f32;

const OPCODE_SHIFT: u32 = 26;
const DTYPE_SHIFT: u32 = 24;
const DST_SHIFT: u32 = 19;
const SRC0_SHIFT: u32 = 14;
const SRC1_SHIFT: u32 = 9;
const OPCODE_MASK: u32 = 0x3f;
const DTYPE_MASK: u32 = 0x3;
const OPERAND_MASK: u32 = 0x1f;
const AUX_MASK: u32 = 0x1ff;
/// `aux[4:0]`: shift count, JUMP distance, FMA's src2.
const AUX_LOW_MASK: u16 = 0x1f;
/// `aux[8:5]` starts here: JUMP's taken count; must be zero elsewhere.
const AUX_HIGH_SHIFT: u16 = 5;

const OPERAND_TS_BASE: u8 = 0b00000;
const OPERAND_SREG_BASE: u8 = 0b01000;
const OPERAND_MEM: u8 = 0b10000;
const OPERAND_IMM: u8 = 0b10001;
const OPERAND_NONE: u8 = 0b11111;

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

macro_rules! bounded_newtype {
    ($(#[$m:meta])* $name:ident($t:ty), $min:expr, $max:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub struct $name($t);

        impl $name {
            /// Smallest allowed value.
            pub const MIN: $t = $min;
            /// Largest allowed value.
            pub const MAX: $t = $max;

            /// `Some` when `value` is in `MIN..=MAX`.
            pub const fn new(value: $t) -> Option<Self> {
                if value >= Self::MIN && value <= Self::MAX {
                    Some(Self(value))
                } else {
                    None
                }
            }

            /// The value.
            pub const fn get(self) -> $t {
                self.0
            }
        }
    };
}

bounded_newtype!(
    /// A TS slot number, 0..8. Slot `s` at column offset `k` of a chunk of `chunk`
    /// columns is TS entry `s * chunk + k`, so one slot streams a whole chunk.
    TsSlot(u8), 0, TS_SLOTS - 1
);
bounded_newtype!(
    /// A scalar register number, 0..8.
    ScalarReg(u8), 0, SCALAR_REGS - 1
);
bounded_newtype!(
    /// A signed 9-bit immediate, converted to the instruction's type when used.
    Imm(i16), IMM_MIN, IMM_MAX
);
bounded_newtype!(
    /// A shift count, 0..=31.
    ShiftAmount(u8), 0, MAX_SHIFT
);
bounded_newtype!(
    /// How many instructions a JUMP goes back, 1..=31 (0 would loop on the JUMP itself).
    JumpBack(u8), 1, MAX_JUMP_BACK
);
bounded_newtype!(
    /// How many times a JUMP is taken before it falls through, 1..=16; the loop body
    /// therefore runs `taken + 1` times in total.
    JumpTaken(u8), 1, MAX_JUMP_TAKEN
);

/// A vector location: a destination, or a source that must be a whole column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Loc {
    /// A TS slot.
    Ts(TsSlot),
    /// The current column of the open row.
    Mem,
}

/// A register or memory source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Src {
    /// A TS slot.
    Ts(TsSlot),
    /// A scalar register, broadcast to every lane.
    Sreg(ScalarReg),
    /// The current column of the open row.
    Mem,
}

/// A source that may also be the immediate (only one per instruction: it lives in `aux`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SrcImm {
    /// A TS slot.
    Ts(TsSlot),
    /// A scalar register, broadcast to every lane.
    Sreg(ScalarReg),
    /// The current column of the open row.
    Mem,
    /// The immediate, broadcast to every lane.
    Imm(Imm),
}

/// A broadcast scalar: a scalar register or the immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Scalar {
    /// A scalar register.
    Sreg(ScalarReg),
    /// The immediate.
    Imm(Imm),
}

impl From<Loc> for Src {
    fn from(l: Loc) -> Self {
        match l {
            Loc::Ts(s) => Self::Ts(s),
            Loc::Mem => Self::Mem,
        }
    }
}

impl From<Src> for SrcImm {
    fn from(s: Src) -> Self {
        match s {
            Src::Ts(t) => Self::Ts(t),
            Src::Sreg(r) => Self::Sreg(r),
            Src::Mem => Self::Mem,
        }
    }
}

impl From<Scalar> for SrcImm {
    fn from(s: Scalar) -> Self {
        match s {
            Scalar::Sreg(r) => Self::Sreg(r),
            Scalar::Imm(i) => Self::Imm(i),
        }
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

/// A field of the instruction word, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Field {
    /// Bits [31:26].
    Opcode,
    /// Bits [25:24].
    Dtype,
    /// Bits [23:19].
    Dst,
    /// Bits [18:14].
    Src0,
    /// Bits [13:9].
    Src1,
    /// FMA's third source, `aux[4:0]`.
    Src2,
    /// Bits [8:0].
    Aux,
    /// `aux[8:5]`.
    AuxHigh,
    /// CVT's `aux[8:3]`.
    CvtAuxHigh,
}

impl Field {
    /// Name and bit range.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Opcode => "opcode [31:26]",
            Self::Dtype => "dtype [25:24]",
            Self::Dst => "dst [23:19]",
            Self::Src0 => "src0 [18:14]",
            Self::Src1 => "src1 [13:9]",
            Self::Src2 => "src2 aux[4:0]",
            Self::Aux => "aux [8:0]",
            Self::AuxHigh => "aux[8:5]",
            Self::CvtAuxHigh => "aux[8:3]",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a word is not a valid instruction. Each variant names the field and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum DecodeError {
    /// The opcode is not defined.
    ReservedOpcode {
        /// The 6 opcode bits.
        value: u8,
    },
    /// The opcode does not accept this dtype.
    DtypeNotAllowed {
        /// The opcode.
        opcode: Opcode,
        /// The 2 dtype bits.
        value: u8,
    },
    /// An operand field holds a reserved pattern.
    ReservedOperand {
        /// The field.
        field: Field,
        /// The 5 operand bits.
        value: u8,
    },
    /// An operand field holds a kind of operand this opcode does not accept there.
    OperandNotAllowed {
        /// The opcode.
        opcode: Opcode,
        /// The field.
        field: Field,
        /// The 5 operand bits.
        value: u8,
    },
    /// A field this opcode does not use is not NONE / zero.
    UnusedNotZero {
        /// The opcode.
        opcode: Opcode,
        /// The field.
        field: Field,
        /// Its bits.
        value: u16,
    },
    /// CVT names a pair of types (or a half select) with no conversion.
    BadConversion {
        /// The dtype bits (destination type).
        to: u8,
        /// `aux[1:0]` (source type).
        from: u8,
        /// `aux[2]` (half select).
        half: u8,
    },
    /// JUMP with a distance of 0 would loop on itself.
    JumpBackZero,
}

/// Describes a 5-bit operand pattern for messages.
struct OperandName(u8);

impl fmt::Display for OperandName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match RawOperand::from_bits(self.0) {
            Some(RawOperand::Ts(s)) => write!(f, "ts{s}"),
            Some(RawOperand::Sreg(r)) => write!(f, "s{r}"),
            Some(RawOperand::Mem) => f.write_str("mem"),
            Some(RawOperand::Imm) => f.write_str("imm"),
            Some(RawOperand::None) => f.write_str("none"),
            None => f.write_str("reserved"),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::ReservedOpcode { value } => {
                write!(f, "{}: reserved opcode {value:#04x}", Field::Opcode)
            }
            Self::DtypeNotAllowed { opcode, value } => write!(
                f,
                "{}: {} ({value}) not allowed for {opcode}",
                Field::Dtype,
                DType::from_bits(value)
            ),
            Self::ReservedOperand { field, value } => {
                write!(f, "{field}: reserved operand pattern {value:#07b}")
            }
            Self::OperandNotAllowed {
                opcode,
                field,
                value,
            } => write!(
                f,
                "{field}: operand {} ({value:#07b}) not allowed for {opcode}",
                OperandName(value)
            ),
            Self::UnusedNotZero {
                opcode,
                field,
                value,
            } => write!(
                f,
                "{field}: unused by {opcode}, must be NONE/zero, found {value:#x}"
            ),
            Self::BadConversion { to, from, half } => write!(
                f,
                "cvt: no conversion from {} (aux[1:0]) to {} (dtype) with half select {half} (aux[2])",
                DType::from_bits(from),
                DType::from_bits(to)
            ),
            Self::JumpBackZero => write!(f, "{}: jump distance 0", Field::Aux),
        }
    }
}

impl core::error::Error for DecodeError {}

/// An operand field, classified but not yet checked against the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RawOperand {
    Ts(u8),
    Sreg(u8),
    Mem,
    Imm,
    None,
}

impl RawOperand {
    fn from_bits(bits: u8) -> Option<Self> {
        match bits {
            0..=7 => Some(Self::Ts(bits)),
            8..=15 => Some(Self::Sreg(bits - OPERAND_SREG_BASE)),
            OPERAND_MEM => Some(Self::Mem),
            OPERAND_IMM => Some(Self::Imm),
            OPERAND_NONE => Some(Self::None),
            _ => None,
        }
    }
}

fn ts_code(s: TsSlot) -> u32 {
    u32::from(OPERAND_TS_BASE + s.get())
}

fn sreg_code(r: ScalarReg) -> u32 {
    u32::from(OPERAND_SREG_BASE + r.get())
}

fn loc_code(l: Loc) -> u32 {
    match l {
        Loc::Ts(s) => ts_code(s),
        Loc::Mem => u32::from(OPERAND_MEM),
    }
}

fn src_code(s: Src) -> u32 {
    match s {
        Src::Ts(t) => ts_code(t),
        Src::Sreg(r) => sreg_code(r),
        Src::Mem => u32::from(OPERAND_MEM),
    }
}

/// Operand code and aux bits of a source that may be the immediate.
fn src_imm_code(s: SrcImm) -> (u32, u32) {
    match s {
        SrcImm::Ts(t) => (ts_code(t), 0),
        SrcImm::Sreg(r) => (sreg_code(r), 0),
        SrcImm::Mem => (u32::from(OPERAND_MEM), 0),
        SrcImm::Imm(i) => (u32::from(OPERAND_IMM), imm_aux(i)),
    }
}

fn scalar_code(s: Scalar) -> (u32, u32) {
    src_imm_code(s.into())
}

fn imm_aux(i: Imm) -> u32 {
    // Two's complement, 9 bits.
    (i.get() as u16 as u32) & AUX_MASK
}

/// Sign-extends the 9-bit aux field.
fn aux_imm(aux: u16) -> Imm {
    let v = ((aux << 7) as i16) >> 7;
    // A sign-extended 9-bit value is always in range; `unwrap_or` keeps decoding free of
    // panicking paths without a second representation of the range.
    Imm::new(v).unwrap_or(Imm(0))
}

const NONE: u32 = OPERAND_NONE as u32;

fn word(opcode: Opcode, dtype: u8, dst: u32, src0: u32, src1: u32, aux: u32) -> u32 {
    (u32::from(opcode as u8) & OPCODE_MASK) << OPCODE_SHIFT
        | (u32::from(dtype) & DTYPE_MASK) << DTYPE_SHIFT
        | (dst & OPERAND_MASK) << DST_SHIFT
        | (src0 & OPERAND_MASK) << SRC0_SHIFT
        | (src1 & OPERAND_MASK) << SRC1_SHIFT
        | (aux & AUX_MASK)
}

/// The decoder's view of one word.
struct Fields {
    opcode: Opcode,
    dtype: u8,
    dst: u8,
    src0: u8,
    src1: u8,
    aux: u16,
}

impl Fields {
    fn raw(&self, field: Field) -> Result<RawOperand, DecodeError> {
        let value = match field {
            Field::Dst => self.dst,
            Field::Src0 => self.src0,
            Field::Src1 => self.src1,
            _ => (self.aux & AUX_LOW_MASK) as u8,
        };
        RawOperand::from_bits(value).ok_or(DecodeError::ReservedOperand { field, value })
    }

    fn bits(&self, field: Field) -> u8 {
        match field {
            Field::Dst => self.dst,
            Field::Src0 => self.src0,
            Field::Src1 => self.src1,
            _ => (self.aux & AUX_LOW_MASK) as u8,
        }
    }

    fn not_allowed(&self, field: Field) -> DecodeError {
        DecodeError::OperandNotAllowed {
            opcode: self.opcode,
            field,
            value: self.bits(field),
        }
    }

    fn loc(&self, field: Field) -> Result<Loc, DecodeError> {
        match self.raw(field)? {
            RawOperand::Ts(s) => Ok(Loc::Ts(TsSlot(s))),
            RawOperand::Mem => Ok(Loc::Mem),
            _ => Err(self.not_allowed(field)),
        }
    }

    fn src(&self, field: Field) -> Result<Src, DecodeError> {
        match self.raw(field)? {
            RawOperand::Ts(s) => Ok(Src::Ts(TsSlot(s))),
            RawOperand::Sreg(r) => Ok(Src::Sreg(ScalarReg(r))),
            RawOperand::Mem => Ok(Src::Mem),
            _ => Err(self.not_allowed(field)),
        }
    }

    /// A source that may be the immediate; when it is not, `aux` must be zero.
    fn src_imm(&self, field: Field) -> Result<SrcImm, DecodeError> {
        match self.raw(field)? {
            RawOperand::Imm => Ok(SrcImm::Imm(aux_imm(self.aux))),
            RawOperand::None => Err(self.not_allowed(field)),
            _ => {
                self.aux_zero()?;
                Ok(self.src(field)?.into())
            }
        }
    }

    fn scalar(&self, field: Field) -> Result<Scalar, DecodeError> {
        match self.src_imm(field)? {
            SrcImm::Sreg(r) => Ok(Scalar::Sreg(r)),
            SrcImm::Imm(i) => Ok(Scalar::Imm(i)),
            _ => Err(self.not_allowed(field)),
        }
    }

    fn none(&self, field: Field) -> Result<(), DecodeError> {
        if self.bits(field) == OPERAND_NONE {
            Ok(())
        } else {
            Err(DecodeError::UnusedNotZero {
                opcode: self.opcode,
                field,
                value: u16::from(self.bits(field)),
            })
        }
    }

    fn aux_zero(&self) -> Result<(), DecodeError> {
        self.zero(Field::Aux, self.aux)
    }

    fn aux_high_zero(&self) -> Result<(), DecodeError> {
        self.zero(Field::AuxHigh, self.aux >> AUX_HIGH_SHIFT)
    }

    fn zero(&self, field: Field, value: u16) -> Result<(), DecodeError> {
        if value == 0 {
            Ok(())
        } else {
            Err(DecodeError::UnusedNotZero {
                opcode: self.opcode,
                field,
                value,
            })
        }
    }

    fn dtype_zero(&self) -> Result<(), DecodeError> {
        if self.dtype == 0 {
            Ok(())
        } else {
            Err(DecodeError::DtypeNotAllowed {
                opcode: self.opcode,
                value: self.dtype,
            })
        }
    }

    fn no_operands(&self) -> Result<(), DecodeError> {
        self.none(Field::Dst)?;
        self.none(Field::Src0)?;
        self.none(Field::Src1)
    }
}

impl Instr {
    /// Decodes a word strictly.
    ///
    /// # Errors
    /// [`DecodeError`] naming the offending field and its value.
    pub fn decode(word: u32) -> Result<Self, DecodeError> {
        let op_bits = ((word >> OPCODE_SHIFT) & OPCODE_MASK) as u8;
        let opcode =
            Opcode::from_bits(op_bits).ok_or(DecodeError::ReservedOpcode { value: op_bits })?;
        let f = Fields {
            opcode,
            dtype: ((word >> DTYPE_SHIFT) & DTYPE_MASK) as u8,
            dst: ((word >> DST_SHIFT) & OPERAND_MASK) as u8,
            src0: ((word >> SRC0_SHIFT) & OPERAND_MASK) as u8,
            src1: ((word >> SRC1_SHIFT) & OPERAND_MASK) as u8,
            aux: (word & AUX_MASK) as u16,
        };
        let dtype = DType::from_bits(f.dtype);
        let binary = |op| -> Result<Self, DecodeError> {
            Ok(Self::Binary {
                op,
                dtype,
                dst: f.loc(Field::Dst)?,
                src0: f.src(Field::Src0)?,
                src1: f.src_imm(Field::Src1)?,
            })
        };
        let shift = |op| -> Result<Self, DecodeError> {
            let dst = f.loc(Field::Dst)?;
            let src = f.src(Field::Src0)?;
            f.none(Field::Src1)?;
            f.aux_high_zero()?;
            Ok(Self::Shift {
                op,
                dtype,
                dst,
                src,
                amount: ShiftAmount((f.aux & AUX_LOW_MASK) as u8),
            })
        };
        let reduce = |op| -> Result<Self, DecodeError> {
            f.none(Field::Dst)?;
            let src = f.loc(Field::Src0)?;
            f.none(Field::Src1)?;
            f.aux_zero()?;
            Ok(Self::Reduce { op, dtype, src })
        };
        let special = |op| -> Result<Self, DecodeError> {
            if dtype != DType::F32 {
                return Err(DecodeError::DtypeNotAllowed {
                    opcode,
                    value: f.dtype,
                });
            }
            let dst = f.loc(Field::Dst)?;
            let src = f.loc(Field::Src0)?;
            f.none(Field::Src1)?;
            f.aux_zero()?;
            Ok(Self::Special { op, dst, src })
        };
        match opcode {
            Opcode::Nop | Opcode::Exit => {
                f.dtype_zero()?;
                f.no_operands()?;
                f.aux_zero()?;
                Ok(if opcode == Opcode::Nop {
                    Self::Nop
                } else {
                    Self::Exit
                })
            }
            Opcode::Jump => {
                f.dtype_zero()?;
                f.no_operands()?;
                let back = (f.aux & AUX_LOW_MASK) as u8;
                if back == 0 {
                    return Err(DecodeError::JumpBackZero);
                }
                Ok(Self::Jump {
                    back: JumpBack(back),
                    taken: JumpTaken((f.aux >> AUX_HIGH_SHIFT) as u8 + 1),
                })
            }
            Opcode::Mov => {
                let dst = f.loc(Field::Dst)?;
                let src = f.loc(Field::Src0)?;
                f.none(Field::Src1)?;
                f.aux_zero()?;
                Ok(Self::Mov { dtype, dst, src })
            }
            Opcode::Fill => {
                let dst = f.loc(Field::Dst)?;
                let value = f.scalar(Field::Src0)?;
                f.none(Field::Src1)?;
                Ok(Self::Fill { dtype, dst, value })
            }
            Opcode::Cvt => {
                let dst = f.loc(Field::Dst)?;
                let src = f.loc(Field::Src0)?;
                f.none(Field::Src1)?;
                f.zero(Field::CvtAuxHigh, f.aux >> 3)?;
                let from = (f.aux & 0x3) as u8;
                let half_bit = ((f.aux >> 2) & 1) as u8;
                let half = if half_bit == 0 { Half::Lo } else { Half::Hi };
                let conv = Conversion::new(dtype, DType::from_bits(from), half).ok_or(
                    DecodeError::BadConversion {
                        to: f.dtype,
                        from,
                        half: half_bit,
                    },
                )?;
                Ok(Self::Cvt { conv, dst, src })
            }
            Opcode::Add => binary(BinaryOp::Add),
            Opcode::Sub => binary(BinaryOp::Sub),
            Opcode::Mul => binary(BinaryOp::Mul),
            Opcode::Min => binary(BinaryOp::Min),
            Opcode::Max => binary(BinaryOp::Max),
            Opcode::Fma => {
                let dst = f.loc(Field::Dst)?;
                let src0 = f.src(Field::Src0)?;
                let src1 = f.src(Field::Src1)?;
                let src2 = f.src(Field::Src2)?;
                f.aux_high_zero()?;
                Ok(Self::Fma {
                    dtype,
                    dst,
                    src0,
                    src1,
                    src2,
                })
            }
            Opcode::Scale => {
                let dst = f.loc(Field::Dst)?;
                let src = f.src(Field::Src0)?;
                let factor = f.scalar(Field::Src1)?;
                Ok(Self::Scale {
                    dtype,
                    dst,
                    src,
                    factor,
                })
            }
            Opcode::Shl => shift(ShiftOp::Shl),
            Opcode::Shr => shift(ShiftOp::Shr),
            Opcode::Acc => reduce(ReduceOp::Acc),
            Opcode::SqAcc => reduce(ReduceOp::SqAcc),
            Opcode::Div => {
                if dtype != DType::F32 {
                    return Err(DecodeError::DtypeNotAllowed {
                        opcode,
                        value: f.dtype,
                    });
                }
                let dst = f.loc(Field::Dst)?;
                let src0 = f.src(Field::Src0)?;
                let src1 = f.src(Field::Src1)?;
                f.aux_zero()?;
                Ok(Self::Div { dst, src0, src1 })
            }
            Opcode::Rcp => special(SpecialOp::Rcp),
            Opcode::Rsqrt => special(SpecialOp::Rsqrt),
            Opcode::Sqrt => special(SpecialOp::Sqrt),
        }
    }

    /// The word for this instruction.
    pub fn encode(&self) -> u32 {
        let op = self.opcode();
        match *self {
            Self::Nop | Self::Exit => word(op, 0, NONE, NONE, NONE, 0),
            Self::Jump { back, taken } => {
                let aux =
                    u32::from(back.get()) | u32::from(taken.get() - 1) << u32::from(AUX_HIGH_SHIFT);
                word(op, 0, NONE, NONE, NONE, aux)
            }
            Self::Mov { dtype, dst, src } => {
                word(op, dtype as u8, loc_code(dst), loc_code(src), NONE, 0)
            }
            Self::Fill { dtype, dst, value } => {
                let (code, aux) = scalar_code(value);
                word(op, dtype as u8, loc_code(dst), code, NONE, aux)
            }
            Self::Cvt { conv, dst, src } => {
                let half = u32::from(matches!(conv.half(), Some(Half::Hi)));
                let aux = conv.from() as u32 | half << 2;
                word(op, conv.to() as u8, loc_code(dst), loc_code(src), NONE, aux)
            }
            Self::Binary {
                dtype,
                dst,
                src0,
                src1,
                ..
            } => {
                let (code1, aux) = src_imm_code(src1);
                word(op, dtype as u8, loc_code(dst), src_code(src0), code1, aux)
            }
            Self::Fma {
                dtype,
                dst,
                src0,
                src1,
                src2,
            } => word(
                op,
                dtype as u8,
                loc_code(dst),
                src_code(src0),
                src_code(src1),
                src_code(src2),
            ),
            Self::Scale {
                dtype,
                dst,
                src,
                factor,
            } => {
                let (code1, aux) = scalar_code(factor);
                word(op, dtype as u8, loc_code(dst), src_code(src), code1, aux)
            }
            Self::Shift {
                dtype,
                dst,
                src,
                amount,
                ..
            } => word(
                op,
                dtype as u8,
                loc_code(dst),
                src_code(src),
                NONE,
                u32::from(amount.get()),
            ),
            Self::Reduce { dtype, src, .. } => word(op, dtype as u8, NONE, loc_code(src), NONE, 0),
            Self::Div { dst, src0, src1 } => word(
                op,
                DType::F32 as u8,
                loc_code(dst),
                src_code(src0),
                src_code(src1),
                0,
            ),
            Self::Special { dst, src, .. } => {
                word(op, DType::F32 as u8, loc_code(dst), loc_code(src), NONE, 0)
            }
        }
    }

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

    /// Dependent ALU operations the instruction needs (0 for control instructions).
    pub const fn alu_ops(&self) -> u32 {
        match self {
            Self::Jump { .. } | Self::Exit => 0,
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
    /// SQRT (13 ops, 7 slots) and DIV (10 ops, 5 slots).
    pub const fn column_slots(&self) -> u32 {
        self.alu_ops().div_ceil(ALU_OPS_PER_SLOT)
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

impl From<Instr> for u32 {
    fn from(i: Instr) -> Self {
        i.encode()
    }
}

impl TryFrom<u32> for Instr {
    type Error = DecodeError;
    fn try_from(w: u32) -> Result<Self, Self::Error> {
        Self::decode(w)
    }
}

impl fmt::Display for Instr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        crate::asm::write_instr(f, self)
    }
}
