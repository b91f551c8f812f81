//! The bank-ALU instruction word's bit layout, encoder and strict decoder.
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
//! [`Instr::encode`] is total because [`Instr`] holds only encodable instructions, so
//! `decode(encode(i)) == i` always holds. [`Instr::decode`] is strict: every unused field
//! must be NONE or zero, so each valid instruction has exactly one encoding and a stray
//! bit is an error, never a guess.

use core::fmt;

use super::instr::{
    BinaryOp, Conversion, DType, Half, Instr, Opcode, ReduceOp, ShiftOp, SpecialOp,
};
use super::operand::{
    Imm, JumpBack, JumpTaken, Loc, Scalar, ScalarReg, ShiftAmount, Src, SrcImm, TsSlot,
};

/// Bytes of one serialised instruction word.
pub const INSTR_BYTES: usize = 4;

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

/// A field of the instruction word, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Field {
    /// Bits `[31:26]`.
    Opcode,
    /// Bits `[25:24]`.
    Dtype,
    /// Bits `[23:19]`.
    Dst,
    /// Bits `[18:14]`.
    Src0,
    /// Bits `[13:9]`.
    Src1,
    /// FMA's third source, `aux[4:0]`.
    Src2,
    /// Bits `[8:0]`.
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
