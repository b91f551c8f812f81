//! Parsing: operands checked against each instruction's form, single instructions, and
//! the `.macro` / `.phase` / `.end` blocks of a source text.

use super::lex::{int_in, strip_comment, KindAt, Operands, Suffixes, Tok};
use super::{AsmError, AsmErrorKind, Item};
use crate::nmc::{
    BankMode, BinaryOp, ChannelRange, Conversion, DType, Half, Imm, Instr, JumpBack, JumpTaken,
    Loc, MacroCommand, Opcode, Phase, ReduceOp, Scalar, ScalarReg, ShiftAmount, ShiftOp, SpecialOp,
    Src, SrcImm, TsSlot, ValidationError, MAX_PHASES, MAX_PROGRAM,
};

/// An operand as written, before checking it against the instruction.
#[derive(Debug, Clone, Copy)]
enum Operand {
    Ts(TsSlot),
    Sreg(ScalarReg),
    Mem,
    Imm(Imm),
}

const EXPECT_OPERAND: &str = "an operand: tsN, sN, mem or #imm";

fn parse_operand(tok: Tok<'_>) -> Result<Operand, KindAt> {
    let t = tok.text;
    let lower_starts = |p: &str| t.get(..p.len()).is_some_and(|h| h.eq_ignore_ascii_case(p));
    if t.eq_ignore_ascii_case("mem") {
        return Ok(Operand::Mem);
    }
    if t.starts_with('#') {
        let v = int_in(tok.skip(1), i64::from(Imm::MIN), i64::from(Imm::MAX))?;
        return Ok(Operand::Imm(Imm::new(v as i16).ok_or(tok.err(
            AsmErrorKind::OutOfRange {
                min: i64::from(Imm::MIN),
                max: i64::from(Imm::MAX),
            },
        ))?));
    }
    if lower_starts("ts") && t.len() > 2 {
        let n = digits_in(tok.skip(2), TsSlot::MAX)?;
        return Ok(Operand::Ts(TsSlot::new(n).ok_or(tok.err(
            AsmErrorKind::OutOfRange {
                min: 0,
                max: i64::from(TsSlot::MAX),
            },
        ))?));
    }
    if lower_starts("s") && t.len() > 1 {
        let n = digits_in(tok.skip(1), ScalarReg::MAX)?;
        return Ok(Operand::Sreg(ScalarReg::new(n).ok_or(tok.err(
            AsmErrorKind::OutOfRange {
                min: 0,
                max: i64::from(ScalarReg::MAX),
            },
        ))?));
    }
    Err(tok.err(AsmErrorKind::Expected(EXPECT_OPERAND)))
}

/// A register number: decimal digits only, at most `max`.
fn digits_in(tok: Tok<'_>, max: u8) -> Result<u8, KindAt> {
    if tok.text.is_empty() || !tok.text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(tok.err(AsmErrorKind::Expected(EXPECT_OPERAND)));
    }
    let v = int_in(tok, 0, i64::from(max))?;
    Ok(v as u8)
}

const EXPECT_LOC: &str = "tsN or mem";
const EXPECT_SRC: &str = "tsN, sN or mem";
const EXPECT_SRC_IMM: &str = "tsN, sN, mem or #imm";
const EXPECT_SCALAR: &str = "sN or #imm";

fn loc(ops: &mut Operands<'_>) -> Result<Loc, KindAt> {
    let tok = ops.next(EXPECT_LOC)?;
    match parse_operand(tok)? {
        Operand::Ts(s) => Ok(Loc::Ts(s)),
        Operand::Mem => Ok(Loc::Mem),
        _ => Err(tok.err(AsmErrorKind::Expected(EXPECT_LOC))),
    }
}

fn src(ops: &mut Operands<'_>) -> Result<Src, KindAt> {
    let tok = ops.next(EXPECT_SRC)?;
    match parse_operand(tok)? {
        Operand::Ts(s) => Ok(Src::Ts(s)),
        Operand::Sreg(r) => Ok(Src::Sreg(r)),
        Operand::Mem => Ok(Src::Mem),
        Operand::Imm(_) => Err(tok.err(AsmErrorKind::Expected(EXPECT_SRC))),
    }
}

fn src_imm(ops: &mut Operands<'_>) -> Result<SrcImm, KindAt> {
    let tok = ops.next(EXPECT_SRC_IMM)?;
    Ok(match parse_operand(tok)? {
        Operand::Ts(s) => SrcImm::Ts(s),
        Operand::Sreg(r) => SrcImm::Sreg(r),
        Operand::Mem => SrcImm::Mem,
        Operand::Imm(i) => SrcImm::Imm(i),
    })
}

fn scalar(ops: &mut Operands<'_>) -> Result<Scalar, KindAt> {
    let tok = ops.next(EXPECT_SCALAR)?;
    match parse_operand(tok)? {
        Operand::Sreg(r) => Ok(Scalar::Sreg(r)),
        Operand::Imm(i) => Ok(Scalar::Imm(i)),
        _ => Err(tok.err(AsmErrorKind::Expected(EXPECT_SCALAR))),
    }
}

/// Parses one instruction from a line with the comment already removed.
pub(super) fn parse_instr_tok(line: Tok<'_>) -> Result<Instr, KindAt> {
    let (head, rest) = line.trim().split_word();
    let mut parts = Suffixes::new(head);
    let name = parts.next().unwrap_or(head);
    let opcode = Opcode::from_mnemonic(name.text).ok_or(name.err(AsmErrorKind::UnknownMnemonic))?;
    let mut ops = Operands::new(rest);
    let end_of_head = Tok {
        text: "",
        col: head.col + head.text.len() as u32,
    };
    let dtype = |parts: &mut Suffixes<'_>| -> Result<DType, KindAt> {
        let t = parts
            .next()
            .ok_or(end_of_head.err(AsmErrorKind::MissingType))?;
        DType::from_name(t.text).ok_or(t.err(AsmErrorKind::UnknownType))
    };
    let f32_only = |parts: &mut Suffixes<'_>| -> Result<(), KindAt> {
        let t = parts.peek();
        if dtype(parts)? != DType::F32 {
            return Err(t.unwrap_or(end_of_head).err(AsmErrorKind::Expected(
                "type f32 (the only type of this instruction)",
            )));
        }
        Ok(())
    };
    let instr = match opcode {
        Opcode::Nop => Instr::Nop,
        Opcode::Exit => Instr::Exit,
        Opcode::Jump => {
            let tok = ops.next("-BACK (1..=31 instructions back)")?;
            if !tok.text.starts_with('-') {
                return Err(tok.err(AsmErrorKind::Expected("-BACK (1..=31 instructions back)")));
            }
            let back = -int_in(tok, -i64::from(JumpBack::MAX), -i64::from(JumpBack::MIN))?;
            let tok = ops.next("TAKEN (1..=16 times)")?;
            let taken = int_in(tok, i64::from(JumpTaken::MIN), i64::from(JumpTaken::MAX))?;
            Instr::Jump {
                back: JumpBack::new(back as u8).ok_or(tok.err(AsmErrorKind::BadNumber))?,
                taken: JumpTaken::new(taken as u8).ok_or(tok.err(AsmErrorKind::BadNumber))?,
            }
        }
        Opcode::Mov => {
            let dtype = dtype(&mut parts)?;
            Instr::Mov {
                dtype,
                dst: loc(&mut ops)?,
                src: loc(&mut ops)?,
            }
        }
        Opcode::Fill => {
            let dtype = dtype(&mut parts)?;
            Instr::Fill {
                dtype,
                dst: loc(&mut ops)?,
                value: scalar(&mut ops)?,
            }
        }
        Opcode::Cvt => {
            let to = dtype(&mut parts)?;
            let from_tok = parts.peek();
            let from = dtype(&mut parts)?;
            let dst = loc(&mut ops)?;
            let src = loc(&mut ops)?;
            let half = match ops.optional("lo or hi")? {
                None => Half::Lo,
                Some(t) if t.text.eq_ignore_ascii_case("lo") => Half::Lo,
                Some(t) if t.text.eq_ignore_ascii_case("hi") => Half::Hi,
                Some(t) => return Err(t.err(AsmErrorKind::Expected("lo or hi"))),
            };
            let conv = Conversion::new(to, from, half).ok_or(
                from_tok
                    .unwrap_or(end_of_head)
                    .err(AsmErrorKind::BadConversion),
            )?;
            Instr::Cvt { conv, dst, src }
        }
        Opcode::Add | Opcode::Sub | Opcode::Mul | Opcode::Min | Opcode::Max => {
            let op = match opcode {
                Opcode::Add => BinaryOp::Add,
                Opcode::Sub => BinaryOp::Sub,
                Opcode::Mul => BinaryOp::Mul,
                Opcode::Min => BinaryOp::Min,
                _ => BinaryOp::Max,
            };
            let dtype = dtype(&mut parts)?;
            Instr::Binary {
                op,
                dtype,
                dst: loc(&mut ops)?,
                src0: src(&mut ops)?,
                src1: src_imm(&mut ops)?,
            }
        }
        Opcode::Fma => {
            let dtype = dtype(&mut parts)?;
            Instr::Fma {
                dtype,
                dst: loc(&mut ops)?,
                src0: src(&mut ops)?,
                src1: src(&mut ops)?,
                src2: src(&mut ops)?,
            }
        }
        Opcode::Scale => {
            let dtype = dtype(&mut parts)?;
            Instr::Scale {
                dtype,
                dst: loc(&mut ops)?,
                src: src(&mut ops)?,
                factor: scalar(&mut ops)?,
            }
        }
        Opcode::Shl | Opcode::Shr => {
            let op = if opcode == Opcode::Shl {
                ShiftOp::Shl
            } else {
                ShiftOp::Shr
            };
            let dtype = dtype(&mut parts)?;
            let dst = loc(&mut ops)?;
            let src = src(&mut ops)?;
            let tok = ops.next("a shift count 0..=31")?;
            let n = int_in(tok, 0, i64::from(ShiftAmount::MAX))?;
            Instr::Shift {
                op,
                dtype,
                dst,
                src,
                amount: ShiftAmount::new(n as u8).ok_or(tok.err(AsmErrorKind::BadNumber))?,
            }
        }
        Opcode::Acc | Opcode::SqAcc => {
            let op = if opcode == Opcode::Acc {
                ReduceOp::Acc
            } else {
                ReduceOp::SqAcc
            };
            let dtype = dtype(&mut parts)?;
            Instr::Reduce {
                op,
                dtype,
                src: loc(&mut ops)?,
            }
        }
        Opcode::Div => {
            f32_only(&mut parts)?;
            Instr::Div {
                dst: loc(&mut ops)?,
                src0: src(&mut ops)?,
                src1: src(&mut ops)?,
            }
        }
        Opcode::Rcp | Opcode::Rsqrt | Opcode::Sqrt => {
            let op = match opcode {
                Opcode::Rcp => SpecialOp::Rcp,
                Opcode::Rsqrt => SpecialOp::Rsqrt,
                _ => SpecialOp::Sqrt,
            };
            f32_only(&mut parts)?;
            Instr::Special {
                op,
                dst: loc(&mut ops)?,
                src: loc(&mut ops)?,
            }
        }
    };
    if let Some(extra) = parts.next() {
        return Err(extra.err(AsmErrorKind::UnexpectedSuffix));
    }
    ops.finish()?;
    Ok(instr)
}

/// Parses a single instruction (one line; a trailing `;` comment is allowed).
///
/// # Errors
/// [`AsmError`] with line 1 and the column of the problem.
pub fn parse_instr(text: &str) -> Result<Instr, AsmError> {
    let tok = Tok {
        text: strip_comment(text),
        col: 1,
    };
    parse_instr_tok(tok).map_err(|(column, kind)| AsmError {
        line: 1,
        column,
        kind,
    })
}

/// A macro-command being assembled.
struct MacroBuilder {
    cmd: MacroCommand,
    /// Line of `.macro`.
    line: u32,
    /// Line of each instruction.
    instr_lines: [u32; MAX_PROGRAM],
    /// Line of each `.phase`.
    phase_lines: [u32; MAX_PHASES],
}

/// Parses a source text into loose instructions and macro-commands, in order. Stops after
/// the first error.
#[derive(Debug, Clone)]
pub struct Assembler<'a> {
    lines: core::str::Lines<'a>,
    line_no: u32,
    failed: bool,
}

impl<'a> Assembler<'a> {
    /// Assembles `text`.
    pub fn new(text: &'a str) -> Self {
        Self {
            lines: text.lines(),
            line_no: 0,
            failed: false,
        }
    }

    /// Line number of the last line read (1-based).
    pub fn line(&self) -> u32 {
        self.line_no
    }

    fn next_line(&mut self) -> Option<Tok<'a>> {
        let line = self.lines.next()?;
        self.line_no += 1;
        Some(Tok {
            text: strip_comment(line),
            col: 1,
        })
    }

    fn at(&self, (column, kind): KindAt) -> AsmError {
        AsmError {
            line: self.line_no,
            column,
            kind,
        }
    }

    fn item(&mut self) -> Option<Result<Item, AsmError>> {
        loop {
            let line = self.next_line()?;
            let t = line.trim();
            if t.text.is_empty() {
                continue;
            }
            if t.text.starts_with('.') {
                let (word, rest) = t.split_word();
                return Some(if word.text.eq_ignore_ascii_case(".macro") {
                    self.macro_block(rest).map(Item::Macro)
                } else if word.text.eq_ignore_ascii_case(".phase") {
                    Err(self.at(word.err(AsmErrorKind::PhaseOutsideMacro)))
                } else if word.text.eq_ignore_ascii_case(".end") {
                    Err(self.at(word.err(AsmErrorKind::EndOutsideMacro)))
                } else {
                    Err(self.at(word.err(AsmErrorKind::UnknownDirective)))
                });
            }
            return Some(parse_instr_tok(t).map(Item::Instr).map_err(|e| self.at(e)));
        }
    }

    fn macro_block(&mut self, keys: Tok<'a>) -> Result<MacroCommand, AsmError> {
        let cmd = parse_macro_keys(keys).map_err(|e| self.at(e))?;
        let mut b = MacroBuilder {
            cmd,
            line: self.line_no,
            instr_lines: [0; MAX_PROGRAM],
            phase_lines: [0; MAX_PHASES],
        };
        loop {
            let Some(line) = self.next_line() else {
                return Err(AsmError {
                    line: b.line,
                    column: 1,
                    kind: AsmErrorKind::UnterminatedMacro,
                });
            };
            let t = line.trim();
            if t.text.is_empty() {
                continue;
            }
            if t.text.starts_with('.') {
                let (word, rest) = t.split_word();
                if word.text.eq_ignore_ascii_case(".end") {
                    if !rest.text.is_empty() {
                        return Err(self.at(rest.err(AsmErrorKind::ExtraOperand)));
                    }
                    return self.finish_macro(b);
                } else if word.text.eq_ignore_ascii_case(".phase") {
                    let base_row = parse_phase_keys(rest).map_err(|e| self.at(e))?;
                    let first = b.cmd.program.len() as u8;
                    let index = b.cmd.phases.len();
                    b.cmd
                        .phases
                        .push(Phase {
                            base_row,
                            first,
                            len: 0,
                        })
                        .map_err(|_| self.at(word.err(AsmErrorKind::TooManyPhases)))?;
                    if let Some(l) = b.phase_lines.get_mut(index) {
                        *l = self.line_no;
                    }
                    continue;
                } else if word.text.eq_ignore_ascii_case(".macro") {
                    return Err(self.at(word.err(AsmErrorKind::NestedMacro)));
                }
                return Err(self.at(word.err(AsmErrorKind::UnknownDirective)));
            }
            let instr = parse_instr_tok(t).map_err(|e| self.at(e))?;
            let Some(phase) = b.cmd.phases.last_mut() else {
                return Err(self.at(t.err(AsmErrorKind::InstrBeforePhase)));
            };
            let index = b.cmd.program.len();
            b.cmd
                .program
                .push(instr)
                .map_err(|_| self.at(t.err(AsmErrorKind::ProgramFull)))?;
            phase.len += 1;
            if let Some(l) = b.instr_lines.get_mut(index) {
                *l = self.line_no;
            }
        }
    }

    /// Validates; points the error at the line it is about.
    fn finish_macro(&self, b: MacroBuilder) -> Result<MacroCommand, AsmError> {
        match b.cmd.validate() {
            Ok(()) => Ok(b.cmd),
            Err(e) => {
                let line = match e {
                    ValidationError::JumpOutsidePhase { index, .. }
                    | ValidationError::NestedLoop { index, .. } => {
                        b.instr_lines.get(usize::from(index)).copied()
                    }
                    ValidationError::EmptyPhase { phase } => {
                        b.phase_lines.get(usize::from(phase)).copied()
                    }
                    ValidationError::NoPhases | ValidationError::EmptyProgram => Some(self.line_no),
                    _ => Some(b.line),
                };
                Err(AsmError {
                    line: line.unwrap_or(b.line),
                    column: 1,
                    kind: AsmErrorKind::Invalid(e),
                })
            }
        }
    }
}

impl Iterator for Assembler<'_> {
    type Item = Result<Item, AsmError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let item = self.item();
        if matches!(item, Some(Err(_))) {
            self.failed = true;
        }
        item
    }
}

/// Parses exactly one `.macro` ... `.end` block (comments and blank lines around it are
/// allowed).
///
/// # Errors
/// [`AsmError`]; also [`AsmErrorKind::Expected`] if the text holds anything else or more.
pub fn parse_macro(text: &str) -> Result<MacroCommand, AsmError> {
    let mut asm = Assembler::new(text);
    let cmd = match asm.next() {
        Some(Ok(Item::Macro(m))) => m,
        Some(Err(e)) => return Err(e),
        Some(Ok(Item::Instr(_))) | None => {
            return Err(AsmError {
                line: asm.line().max(1),
                column: 1,
                kind: AsmErrorKind::Expected("a .macro block"),
            })
        }
    };
    match asm.next() {
        None => Ok(cmd),
        Some(Err(e)) => Err(e),
        Some(Ok(_)) => Err(AsmError {
            line: asm.line(),
            column: 1,
            kind: AsmErrorKind::Expected("end of input after .end"),
        }),
    }
}

/// `key=value` pairs of a directive.
fn key_values<'a>(
    rest: Tok<'a>,
    mut f: impl FnMut(Tok<'a>, Tok<'a>) -> Result<(), KindAt>,
) -> Result<(), KindAt> {
    let mut rest = rest.trim();
    while !rest.text.is_empty() {
        let (word, r) = rest.split_word();
        let (key, value) = word
            .split_once('=')
            .ok_or(word.err(AsmErrorKind::Expected("key=value")))?;
        f(key, value)?;
        rest = r;
    }
    Ok(())
}

fn set_once<T>(slot: &mut Option<T>, key: Tok<'_>, v: T) -> Result<(), KindAt> {
    if slot.is_some() {
        return Err(key.err(AsmErrorKind::DuplicateKey));
    }
    *slot = Some(v);
    Ok(())
}

fn uint<T: TryFrom<i64>>(tok: Tok<'_>, max: T) -> Result<T, KindAt>
where
    i64: From<T>,
{
    let v = int_in(tok, 0, i64::from(max))?;
    T::try_from(v).map_err(|_| tok.err(AsmErrorKind::BadNumber))
}

fn parse_macro_keys(rest: Tok<'_>) -> Result<MacroCommand, KindAt> {
    let mut channels = None;
    let mut all_bank = None;
    let mut bank_group = None;
    let mut bank = None;
    let mut col_start = None;
    let mut col_count = None;
    let mut chunk = None;
    key_values(rest, |key, value| {
        let k = key.text;
        if k.eq_ignore_ascii_case("channels") {
            let (first, count) = value
                .split_once('+')
                .ok_or(value.err(AsmErrorKind::Expected("FIRST+COUNT")))?;
            let c = ChannelRange {
                first: uint(first, u16::MAX)?,
                count: uint(count, u16::MAX)?,
            };
            set_once(&mut channels, key, c)
        } else if k.eq_ignore_ascii_case("mode") {
            let all = if value.text.eq_ignore_ascii_case("all") {
                true
            } else if value.text.eq_ignore_ascii_case("single") {
                false
            } else {
                return Err(value.err(AsmErrorKind::Expected("all or single")));
            };
            set_once(&mut all_bank, key, all)
        } else if k.eq_ignore_ascii_case("bank_group") {
            let v = uint(value, u8::MAX)?;
            set_once(&mut bank_group, key, (v, key))
        } else if k.eq_ignore_ascii_case("bank") {
            let v = uint(value, u8::MAX)?;
            set_once(&mut bank, key, (v, key))
        } else if k.eq_ignore_ascii_case("col_start") {
            set_once(&mut col_start, key, uint(value, u32::MAX)?)
        } else if k.eq_ignore_ascii_case("col_count") {
            set_once(&mut col_count, key, uint(value, u32::MAX)?)
        } else if k.eq_ignore_ascii_case("chunk") {
            set_once(&mut chunk, key, uint(value, u8::MAX)?)
        } else {
            Err(key.err(AsmErrorKind::UnknownKey))
        }
    })?;
    let end = Tok {
        text: "",
        col: rest.col + rest.text.len() as u32,
    };
    let missing = |k| end.err(AsmErrorKind::MissingKey(k));
    let mode = match all_bank.ok_or(missing("mode"))? {
        true => {
            if let Some((_, key)) = bank_group.or(bank) {
                return Err(key.err(AsmErrorKind::Expected(
                    "no bank_group/bank with mode=all (or mode=single)",
                )));
            }
            BankMode::AllBank
        }
        false => BankMode::SingleBank {
            bank_group: bank_group.ok_or(missing("bank_group"))?.0,
            bank: bank.ok_or(missing("bank"))?.0,
        },
    };
    Ok(MacroCommand {
        channels: channels.ok_or(missing("channels"))?,
        mode,
        col_start: col_start.ok_or(missing("col_start"))?,
        col_count: col_count.ok_or(missing("col_count"))?,
        chunk: chunk.ok_or(missing("chunk"))?,
        phases: heapless::Vec::new(),
        program: heapless::Vec::new(),
    })
}

fn parse_phase_keys(rest: Tok<'_>) -> Result<u32, KindAt> {
    let mut row = None;
    key_values(rest, |key, value| {
        if key.text.eq_ignore_ascii_case("row") {
            set_once(&mut row, key, uint(value, u32::MAX)?)
        } else {
            Err(key.err(AsmErrorKind::UnknownKey))
        }
    })?;
    row.ok_or((
        rest.col + rest.text.len() as u32,
        AsmErrorKind::MissingKey("row"),
    ))
}
