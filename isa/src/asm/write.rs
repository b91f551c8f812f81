//! The disassembler: the canonical text form of instructions and macro-commands.

use core::fmt::{self, Write};

use crate::nmc::{BankMode, Half, Instr, Loc, MacroCommand, Src, SrcImm};

struct LocText(Loc);
impl fmt::Display for LocText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Loc::Ts(s) => write!(f, "ts{}", s.get()),
            Loc::Mem => f.write_str("mem"),
        }
    }
}

struct SrcText(SrcImm);
impl fmt::Display for SrcText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            SrcImm::Ts(s) => write!(f, "ts{}", s.get()),
            SrcImm::Sreg(r) => write!(f, "s{}", r.get()),
            SrcImm::Mem => f.write_str("mem"),
            SrcImm::Imm(i) => write!(f, "#{}", i.get()),
        }
    }
}

fn s(x: Src) -> SrcText {
    SrcText(x.into())
}

/// Writes the canonical text of one instruction (no newline).
///
/// # Errors
/// Whatever `w` returns.
pub fn write_instr<W: Write + ?Sized>(w: &mut W, instr: &Instr) -> fmt::Result {
    let m = instr.opcode().mnemonic();
    match *instr {
        Instr::Nop | Instr::Exit => w.write_str(m),
        Instr::Jump { back, taken } => write!(w, "{m} -{}, {}", back.get(), taken.get()),
        Instr::Mov { dtype, dst, src } => {
            write!(w, "{m}.{dtype} {}, {}", LocText(dst), LocText(src))
        }
        Instr::Fill { dtype, dst, value } => {
            write!(w, "{m}.{dtype} {}, {}", LocText(dst), SrcText(value.into()))
        }
        Instr::Cvt { conv, dst, src } => {
            write!(
                w,
                "{m}.{}.{} {}, {}",
                conv.to(),
                conv.from(),
                LocText(dst),
                LocText(src)
            )?;
            if conv.half() == Some(Half::Hi) {
                w.write_str(", hi")?;
            }
            Ok(())
        }
        Instr::Binary {
            dtype,
            dst,
            src0,
            src1,
            ..
        } => write!(
            w,
            "{m}.{dtype} {}, {}, {}",
            LocText(dst),
            s(src0),
            SrcText(src1)
        ),
        Instr::Fma {
            dtype,
            dst,
            src0,
            src1,
            src2,
        } => write!(
            w,
            "{m}.{dtype} {}, {}, {}, {}",
            LocText(dst),
            s(src0),
            s(src1),
            s(src2)
        ),
        Instr::Scale {
            dtype,
            dst,
            src,
            factor,
        } => write!(
            w,
            "{m}.{dtype} {}, {}, {}",
            LocText(dst),
            s(src),
            SrcText(factor.into())
        ),
        Instr::Shift {
            dtype,
            dst,
            src,
            amount,
            ..
        } => write!(
            w,
            "{m}.{dtype} {}, {}, {}",
            LocText(dst),
            s(src),
            amount.get()
        ),
        Instr::Reduce { dtype, src, .. } => write!(w, "{m}.{dtype} {}", LocText(src)),
        Instr::Div { dst, src0, src1 } => {
            write!(w, "{m}.f32 {}, {}, {}", LocText(dst), s(src0), s(src1))
        }
        Instr::Special { dst, src, .. } => {
            write!(w, "{m}.f32 {}, {}", LocText(dst), LocText(src))
        }
    }
}

/// Writes the canonical text of a macro-command, ending with `.end` and a newline.
///
/// # Errors
/// Whatever `w` returns.
pub fn write_macro<W: Write + ?Sized>(w: &mut W, cmd: &MacroCommand) -> fmt::Result {
    write!(
        w,
        ".macro channels={}+{} ",
        cmd.channels.first, cmd.channels.count
    )?;
    match cmd.mode {
        BankMode::AllBank => w.write_str("mode=all")?,
        BankMode::SingleBank { bank_group, bank } => {
            write!(w, "mode=single bank_group={bank_group} bank={bank}")?;
        }
    }
    writeln!(
        w,
        " col_start={} col_count={} chunk={}",
        cmd.col_start, cmd.col_count, cmd.chunk
    )?;
    for phase in &cmd.phases {
        writeln!(w, ".phase row={}", phase.base_row)?;
        for instr in cmd.block(phase).into_iter().flatten() {
            w.write_str("  ")?;
            write_instr(w, instr)?;
            w.write_char('\n')?;
        }
    }
    w.write_str(".end\n")
}
