//! Text assembler and disassembler for the NMC ISA.
//!
//! No allocation: the assembler parses from a `&str` and yields [`Item`]s; the
//! disassembler writes into any [`core::fmt::Write`]. The disassembler's output is the
//! canonical text form and assembles back to the same instruction words and bytes.
//!
//! # Syntax
//!
//! One instruction per line, `;` starts a comment, blank lines are ignored, names are
//! ASCII case-insensitive:
//!
//! ```text
//! mnemonic[.type[.srctype]] operand, operand, ...
//!
//! nop | exit | jump -BACK, TAKEN          ; go back 1..=31 instructions, 1..=16 times
//! mov.T    dst, src                      ; dst: tsN | mem      src: tsN | mem
//! fill.T   dst, scalar                   ; scalar: sN | #imm
//! cvt.TO.FROM dst, src[, lo|hi]          ; f16/bf16 <-> f32 (half select), i32 <-> f32
//! add|sub|mul|min|max.T dst, src, src-or-imm   ; src: tsN | sN | mem
//! fma.T    dst, src, src, src            ; dst = src0 * src1 + src2
//! scale.T  dst, src, scalar
//! shl|shr.T dst, src, COUNT              ; COUNT 0..=31
//! acc|sqacc.T src                        ; src: tsN | mem
//! rcp|rsqrt|sqrt.f32 dst, src            ; src: tsN | mem
//! div.f32  dst, src, src                 ; dst = src0 / src1, correctly rounded; no #imm
//! ```
//!
//! Types are `f16`, `bf16`, `f32`, `i32`; immediates are `#` followed by a decimal or
//! `0x` hexadecimal integer in -256..=255. A macro-command is a block:
//!
//! ```text
//! .macro channels=FIRST+COUNT mode=all|single [bank_group=G bank=B] col_start=N col_count=N chunk=N
//! .phase row=BASE_ROW
//!   instructions of the phase
//! .phase row=...
//!   ...
//! .end
//! ```
//!
//! The program of the macro-command is the phases' instructions in order.
//!
//! The tokenizer is in `lex`, the instruction and macro-command parser in `parse`, the
//! disassembler in `write`.

use core::fmt;

use crate::nmc::{Instr, MacroCommand, ValidationError, MAX_PHASES, MAX_PROGRAM};

mod lex;
mod parse;
mod write;

pub use parse::{parse_instr, parse_macro, Assembler};
pub use write::{write_instr, write_macro};

/// What went wrong, without the position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum AsmErrorKind {
    /// Not an instruction name.
    UnknownMnemonic,
    /// The instruction needs a type suffix.
    MissingType,
    /// Not a type name.
    UnknownType,
    /// A type suffix the instruction does not take.
    UnexpectedSuffix,
    /// Something else was expected here.
    Expected(&'static str),
    /// More operands than the instruction takes.
    ExtraOperand,
    /// A number outside its field's range.
    OutOfRange {
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// Not a number.
    BadNumber,
    /// No conversion between these types (or half select on i32<->f32).
    BadConversion,
    /// A `.macro` key given twice.
    DuplicateKey,
    /// A required `.macro` key is missing.
    MissingKey(&'static str),
    /// Not a key of this directive.
    UnknownKey,
    /// Not a directive.
    UnknownDirective,
    /// `.macro` inside a macro-command.
    NestedMacro,
    /// `.phase` outside a macro-command.
    PhaseOutsideMacro,
    /// `.end` outside a macro-command.
    EndOutsideMacro,
    /// The input ends inside a macro-command.
    UnterminatedMacro,
    /// An instruction inside a macro-command before its first `.phase`.
    InstrBeforePhase,
    /// More than [`MAX_PROGRAM`] instructions in a macro-command.
    ProgramFull,
    /// More than [`MAX_PHASES`] phases in a macro-command.
    TooManyPhases,
    /// The macro-command cannot execute.
    Invalid(ValidationError),
}

impl fmt::Display for AsmErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::UnknownMnemonic => f.write_str("unknown instruction"),
            Self::MissingType => f.write_str("expected a type suffix: .f16, .bf16, .f32 or .i32"),
            Self::UnknownType => f.write_str("unknown type, expected f16, bf16, f32 or i32"),
            Self::UnexpectedSuffix => f.write_str("this instruction takes no such type suffix"),
            Self::Expected(what) => write!(f, "expected {what}"),
            Self::ExtraOperand => f.write_str("too many operands"),
            Self::OutOfRange { min, max } => write!(f, "number outside {min}..={max}"),
            Self::BadNumber => f.write_str("expected a decimal or 0x-hexadecimal integer"),
            Self::BadConversion => f.write_str(
                "no such conversion: f16/bf16 <-> f32 (with lo|hi) and i32 <-> f32 only",
            ),
            Self::DuplicateKey => f.write_str("key given twice"),
            Self::MissingKey(key) => write!(f, "missing key {key}="),
            Self::UnknownKey => f.write_str("unknown key for this directive"),
            Self::UnknownDirective => {
                f.write_str("unknown directive, expected .macro, .phase or .end")
            }
            Self::NestedMacro => f.write_str(".macro inside a macro-command (missing .end?)"),
            Self::PhaseOutsideMacro => f.write_str(".phase outside a macro-command"),
            Self::EndOutsideMacro => f.write_str(".end outside a macro-command"),
            Self::UnterminatedMacro => f.write_str("macro-command has no .end"),
            Self::InstrBeforePhase => f.write_str("instruction before the first .phase"),
            Self::ProgramFull => {
                write!(f, "more than {MAX_PROGRAM} instructions in a macro-command")
            }
            Self::TooManyPhases => write!(f, "more than {MAX_PHASES} phases in a macro-command"),
            Self::Invalid(e) => write!(f, "invalid macro-command: {e}"),
        }
    }
}

/// An assembler error with its 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AsmError {
    /// Line, from 1.
    pub line: u32,
    /// Column (byte), from 1.
    pub column: u32,
    /// What went wrong.
    pub kind: AsmErrorKind,
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.kind)
    }
}

impl core::error::Error for AsmError {}

/// One thing a source text defines.
#[derive(Debug, Clone, PartialEq, Eq)]
// No allocation, so the macro-command cannot be boxed; items are consumed one at a time.
#[allow(clippy::large_enum_variant)]
pub enum Item {
    /// A loose instruction.
    Instr(Instr),
    /// A `.macro` ... `.end` block.
    Macro(MacroCommand),
}
