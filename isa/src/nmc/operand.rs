//! Operands of a bank-ALU instruction: range-checked numbers (TS slot, scalar register,
//! immediate, shift count, JUMP distance and count) and the location kinds each operand
//! field may name. Each type admits exactly the values its bit field can encode, which is
//! what makes [`Instr::encode`](super::Instr::encode) total.

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

macro_rules! bounded_newtype {
    ($(#[$m:meta])* $name:ident($t:ty), $min:expr, $max:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        // The NMC decoder (`super::encoding`) builds values straight from masked bit
        // fields that cannot exceed the range; everyone else goes through `new`.
        pub struct $name(pub(super) $t);

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
