//! Phase scripting: a macro-command validated and each phase's block expanded once
//! ([`MacroScript`], [`PhaseScript`]) into the column commands it issues under each ALU
//! model.

use nmcp_isa::nmc::{BlockSteps, Instr, MacroCommand};

use super::engine::*;

/// What the engine's time between two commands is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    Column,
    Row,
    Refresh,
    /// MASA subarray selects and the wait for the selected subarray's first column.
    Select,
}

/// One column command an executed instruction issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ColumnOp {
    Read,
    Write,
    /// Read-modify-write of the open column (MEM as source and destination): an all-bank
    /// RD then WR in broadcast mode, one op-and-store UPDATE (the T3 command, next column
    /// command to the bank group after tCCDWL) in single-bank mode.
    ReadModifyWrite,
}

/// What one instruction needs under the pipelined ALU model: the column command it
/// issues (if it reads or writes the open row) and its dependent ALU operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PipelinedStep {
    pub(super) mem: Option<ColumnOp>,
    pub(super) alu_ops: u32,
}

/// A phase's block expanded once (JUMP/EXIT resolved): the instructions to execute per
/// column and the column commands they issue under each ALU model.
#[derive(Debug, Clone, Default)]
pub struct PhaseScript {
    pub(super) instrs: Vec<Instr>,
    /// Column-triggered: every slot of every instruction.
    pub(super) ops: Vec<ColumnOp>,
    /// Pipelined: one entry per executed instruction.
    pub(super) steps: Vec<PipelinedStep>,
    /// Column commands one column issues (reads, writes), column-triggered.
    pub(super) triggered_rw: (u32, u32),
    /// The same, pipelined (only row-touching instructions).
    pub(super) pipelined_rw: (u32, u32),
    /// Whether the staged policy may run the phase: instruction by instruction across a
    /// chunk, writes posted. Needs at most one reduction (the accumulator is the only
    /// state columns share, so with one reducing instruction it sums in column order
    /// either way) and no read of the row after a write to it (a posted write has not
    /// reached the row yet).
    pub(super) stageable: bool,
    /// ALU operations one column's pass through the phase executes on one bank's ALU
    /// (the steps' sum, kept so that the energy count is one add per column command).
    pub(super) alu_ops: u64,
}

impl PhaseScript {
    /// ALU operations one column's pass through the phase executes on one bank's ALU.
    #[inline]
    pub(super) fn alu_ops_per_column(&self) -> u64 {
        self.alu_ops
    }
}

pub(super) fn script(block: &[Instr]) -> Result<PhaseScript, EngineError> {
    let mut s = PhaseScript::default();
    let mut reductions = 0;
    let mut written = false;
    let mut read_after_write = false;
    for step in BlockSteps::new(block) {
        let i = *step.map_err(EngineError::Control)?;
        let slots = i.column_slots();
        if slots == 0 {
            continue;
        }
        s.instrs.push(i);
        reductions += usize::from(matches!(i, Instr::Reduce { .. }));
        read_after_write |= written && i.reads_memory();
        written |= i.writes_memory();
        let mem = match (i.reads_memory(), i.writes_memory()) {
            (true, true) => Some(ColumnOp::ReadModifyWrite),
            (true, false) => Some(ColumnOp::Read),
            (false, true) => Some(ColumnOp::Write),
            (false, false) => None,
        };
        s.steps.push(PipelinedStep {
            mem,
            alu_ops: i.alu_ops(),
        });
        if i.reads_memory() && i.writes_memory() {
            s.ops
                .extend(std::iter::repeat_n(ColumnOp::Read, slots as usize - 1));
            s.ops.push(ColumnOp::ReadModifyWrite);
        } else {
            s.ops
                .extend(std::iter::repeat_n(ColumnOp::Read, slots as usize - 1));
            s.ops.push(if i.writes_memory() {
                ColumnOp::Write
            } else {
                ColumnOp::Read
            });
        }
    }
    s.stageable = reductions <= 1 && !read_after_write;
    let count = |it: &mut dyn Iterator<Item = ColumnOp>| {
        it.fold((0, 0), |(r, w), op| match op {
            ColumnOp::Read => (r + 1, w),
            ColumnOp::Write => (r, w + 1),
            ColumnOp::ReadModifyWrite => (r + 1, w + 1),
        })
    };
    s.triggered_rw = count(&mut s.ops.iter().copied());
    s.pipelined_rw = count(&mut s.steps.iter().filter_map(|st| st.mem));
    s.alu_ops = s.steps.iter().map(|st| u64::from(st.alu_ops)).sum();
    Ok(s)
}

/// The row-cycle floor of one all-bank row visit of `n` columns, each issuing `rw.0` reads
/// and `rw.1` writes (see [`EngineStats::visit_floor_cycles`]).
pub(super) fn visit_floor(t: &crate::hbm::config::TimingCycles, n: u32, rw: (u32, u32)) -> u64 {
    let (reads, writes) = (u64::from(rw.0), u64::from(rw.1));
    let columns = u64::from(n) * (reads + writes);
    if columns == 0 {
        return 0;
    }
    let first = if reads > 0 { t.trcdrd } else { t.trcdwr };
    let last = first + (columns - 1) * t.tccd_l;
    let tail = if writes > 0 { t.wr_to_pre } else { t.trtp };
    (last + tail).max(t.tras).max(t.trc - t.trp) + t.trp
}

/// Which mode the pseudo-channel is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Normal,
    AllBank,
    SingleBank,
}

/// A macro-command validated and expanded once for every engine it is broadcast to.
#[derive(Debug, Clone)]
pub struct MacroScript {
    pub(super) cmd: MacroCommand,
    pub(super) phases: Vec<PhaseScript>,
}

impl MacroScript {
    /// Validates `cmd` and expands its phases.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] or [`EngineError::Control`] for a malformed command.
    pub fn new(cmd: &MacroCommand) -> Result<Self, EngineError> {
        cmd.validate()
            .map_err(|e| EngineError::Invalid(format!("{e:?}")))?;
        let phases = cmd
            .phases
            .iter()
            .map(|p| script(cmd.block(p).unwrap_or(&[])))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            cmd: cmd.clone(),
            phases,
        })
    }

    /// The command.
    pub fn command(&self) -> &MacroCommand {
        &self.cmd
    }
}
