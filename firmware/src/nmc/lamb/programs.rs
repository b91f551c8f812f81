//! The macro-commands of one step, as pure functions of the tensor and geometry.

use super::*;

/// TS slots the default stage-1 program ([`Stage1Program::FourSlot`]) uses.
pub const STAGE1_SLOTS: u16 = Stage1Program::FourSlot.slots();

/// An empty command (no phases, no program) to build into.
pub fn empty() -> MacroCommand {
    MacroCommand {
        channels: ChannelRange { first: 0, count: 0 },
        mode: BankMode::AllBank,
        col_start: 0,
        col_count: 0,
        chunk: 1,
        phases: Vec::new(),
        program: Vec::new(),
    }
}

/// Builds a command in place (no command-sized temporaries on the stack).
struct Builder<'a> {
    cmd: &'a mut MacroCommand,
}

impl<'a> Builder<'a> {
    fn new(cmd: &'a mut MacroCommand) -> Self {
        cmd.phases.clear();
        cmd.program.clear();
        Self { cmd }
    }

    fn phase(&mut self, row: u32, instrs: &[Instr]) -> Result<(), SequencerError> {
        let first = u8::try_from(self.cmd.program.len()).map_err(|_| SequencerError::Capacity)?;
        let len = u8::try_from(instrs.len()).map_err(|_| SequencerError::Capacity)?;
        self.cmd
            .program
            .extend_from_slice(instrs)
            .map_err(|_| SequencerError::Capacity)?;
        self.cmd
            .phases
            .push(Phase {
                base_row: row,
                first,
                len,
            })
            .map_err(|_| SequencerError::Capacity)
    }

    fn finish(self, g: &NmcGeometry, cols: u32, chunk: u16) {
        // A chunk longer than a row cannot save an activation (every phase crosses
        // into the next row anyway), so it is capped at the row as well as at the
        // command's limit.
        let row = u16::try_from(g.cols_per_row).unwrap_or(u16::MAX);
        let cap = u16::from(MAX_CHUNK).min(row).max(1);
        self.cmd.chunk = u8::try_from(chunk.clamp(1, cap)).unwrap_or(MAX_CHUNK);
        self.cmd.channels = g.channels();
        self.cmd.mode = BankMode::AllBank;
        self.cmd.col_start = 0;
        self.cmd.col_count = cols;
    }
}

#[inline(always)]
pub(super) fn cols(g: &NmcGeometry, t: &TensorDesc, index: u32) -> Result<u32, SequencerError> {
    u32::try_from(g.columns_per_bank(t.elements)).map_err(|_| SequencerError::TooLarge { index })
}

/// `sqacc mem` over one array starting at `row`.
pub fn sum_of_squares(
    g: &NmcGeometry,
    t: &TensorDesc,
    row: u32,
    index: u32,
) -> Result<MacroCommand, SequencerError> {
    let mut c = empty();
    sum_of_squares_into(&mut c, g, t, row, index)?;
    Ok(c)
}

/// [`sum_of_squares`], built into `cmd`.
pub fn sum_of_squares_into(
    cmd: &mut MacroCommand,
    g: &NmcGeometry,
    t: &TensorDesc,
    row: u32,
    index: u32,
) -> Result<(), SequencerError> {
    let cols = cols(g, t, index)?;
    let mut b = Builder::new(cmd);
    b.phase(
        row,
        &[Instr::Reduce {
            op: ReduceOp::SqAcc,
            dtype: DType::F32,
            src: Loc::Mem,
        }],
    )?;
    b.finish(g, cols, u16::from(MAX_CHUNK));
    Ok(())
}

/// Stage 1: m, v and u (with weight decay when `with_decay`); g is divided by `s7`.
/// `program` picks the TS slots (the instructions, their operands' order and so the
/// results are the same for both; see [`Stage1Program`]).
pub fn stage1(
    g: &NmcGeometry,
    t: &TensorDesc,
    index: u32,
    with_decay: bool,
    program: Stage1Program,
) -> Result<MacroCommand, SequencerError> {
    let mut c = empty();
    stage1_into(&mut c, g, t, index, with_decay, program)?;
    Ok(c)
}

/// [`stage1`], built into `cmd`.
pub fn stage1_into(
    cmd: &mut MacroCommand,
    g: &NmcGeometry,
    t: &TensorDesc,
    index: u32,
    with_decay: bool,
    program: Stage1Program,
) -> Result<(), SequencerError> {
    let cols = cols(g, t, index)?;
    // g0: g'; m1: m, then the update; v2: v; p2: (1-b2) g' (in v's slot when v has its
    // own, in the scratch when v reuses g''s slot, which it may only overwrite with the
    // product that is g''s last use); x3: scratch.
    let (g0, m1, v2, p2, x3) = match program {
        Stage1Program::FourSlot => (ts(0)?, ts(1)?, ts(2)?, ts(2)?, ts(3)?),
        Stage1Program::ThreeSlot => (ts(0)?, ts(1)?, ts(0)?, ts(2)?, ts(2)?),
    };
    let mem = Loc::Mem;
    let mut b = Builder::new(cmd);
    // Always a division, as Apex does (`g / clip` with clip = 1 when not clipping):
    // exact either way, and the step's timing does not depend on the data.
    let load_g = Instr::Div {
        dst: g0,
        src0: src(mem),
        src1: sreg(7)?,
    };
    b.phase(t.g_row, &[load_g])?;
    b.phase(
        t.m_row,
        &[
            bin(BinaryOp::Mul, m1, src(mem), sreg(1)?),
            bin(BinaryOp::Mul, x3, src(g0), sreg(2)?),
            bin(BinaryOp::Add, m1, src(m1), src(x3)),
            mov(mem, m1),
        ],
    )?;
    b.phase(
        t.v_row,
        &[
            bin(BinaryOp::Mul, p2, src(g0), sreg(4)?),
            bin(BinaryOp::Mul, v2, src(p2), src(g0)),
            bin(BinaryOp::Mul, x3, src(mem), sreg(3)?),
            bin(BinaryOp::Add, v2, src(x3), src(v2)),
            mov(mem, v2),
            Instr::Special {
                op: SpecialOp::Sqrt,
                dst: v2,
                src: v2,
            },
            bin(BinaryOp::Add, v2, src(v2), sreg(6)?),
            bin(BinaryOp::Mul, m1, src(m1), sreg(5)?),
            Instr::Div {
                dst: m1,
                src0: src(m1),
                src1: src(v2),
            },
        ],
    )?;
    if with_decay {
        b.phase(
            t.w_row,
            &[
                bin(BinaryOp::Mul, x3, src(mem), sreg(0)?),
                bin(BinaryOp::Add, m1, src(m1), src(x3)),
            ],
        )?;
    }
    b.phase(t.u_row, &[mov(mem, m1)])?;
    let chunk = g.job_ts_entries() / program.slots();
    if chunk == 0 {
        return Err(SequencerError::Geometry);
    }
    b.finish(g, cols, chunk);
    Ok(())
}

/// Stage 2: w += s7 * u.
pub fn stage2(g: &NmcGeometry, t: &TensorDesc, index: u32) -> Result<MacroCommand, SequencerError> {
    let mut c = empty();
    stage2_into(&mut c, g, t, index)?;
    Ok(c)
}

/// [`stage2`], built into `cmd`.
pub fn stage2_into(
    cmd: &mut MacroCommand,
    g: &NmcGeometry,
    t: &TensorDesc,
    index: u32,
) -> Result<(), SequencerError> {
    let cols = cols(g, t, index)?;
    let x0 = ts(0)?;
    let mem = Loc::Mem;
    let mut b = Builder::new(cmd);
    b.phase(t.u_row, &[bin(BinaryOp::Mul, x0, src(mem), sreg(7)?)])?;
    b.phase(
        t.w_row,
        &[bin(BinaryOp::Add, x0, src(mem), src(x0)), mov(mem, x0)],
    )?;
    let entries = g.job_ts_entries();
    if entries == 0 {
        return Err(SequencerError::Geometry);
    }
    b.finish(g, cols, entries);
    Ok(())
}
