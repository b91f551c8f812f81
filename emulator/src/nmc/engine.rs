//! The per-pseudo-channel NMC engine: expands macro-commands into DRAM commands that it
//! issues through the pseudo-channel's memory [`Controller`] — the same timing state,
//! command log and refresh schedule ordinary requests use — and (optionally) runs every
//! bank's ALU on the bytes in device memory.
//!
//! Command generation (SPEC 3.3): every executed instruction occupies its
//! [`Instr::column_slots`] column-command slots; an instruction that writes the open row
//! issues an all-bank WR in its last slot, every other slot is an all-bank RD (the
//! HBM-PIM convention: a bank-ALU instruction is triggered by a column command, which for
//! an ALU-only instruction reads the column and discards it). A read-modify-write
//! instruction (MEM as source and destination) issues a RD and then a WR. A row change
//! precharges all banks and activates the new row in all banks (PREA, AB-ACT), so it pays
//! tRP + tRCD and the tRAS/tWR/tRTP gates before the PRE. While the engine owns the
//! pseudo-channel it performs the controller's refresh: an all-bank REF every tREFI,
//! issued between columns (closing and re-opening the row).
//!
//! Ownership: the engine takes the channel from the controller
//! ([`Controller::acquire_for_nmc`]) when it enters NMC mode and keeps it across
//! macro-commands (a LAMB step is thousands of them back to back, and every hand-over costs
//! two mode switches); [`NmcChannelEngine::release`] hands it back when ordinary traffic
//! waits. While it owns the channel the controller schedules nothing, so running a
//! macro-command to completion at once is exact.

use nmcp_isa::nmc::{BankMode, BlockSteps, ControlError, Instr, MacroCommand, SCALAR_REGS};

use crate::hbm::{BankId, Command, Cycle, HbmPreset, TimingError};
use crate::memctrl::Controller;
use crate::nmc::alu::{AluError, BankAlu};

use std::fmt;

/// Why the engine could not run a command.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EngineError {
    /// The macro-command is invalid (its validation error, as text).
    Invalid(String),
    /// The command needs more TS entries than the ALUs have.
    TsCapacity {
        /// Entries the command addresses.
        needed: usize,
        /// Entries each ALU has.
        available: usize,
    },
    /// A bank or row outside the device.
    OutOfRange(String),
    /// The DRAM timing state refused a command. The engine issues through the unchecked
    /// fast path (debug builds assert the state instead), so it does not produce this
    /// today; the variant stays for checked issuing and for callers that match on it.
    Timing(TimingError),
    /// A bank ALU refused an instruction.
    Alu(AluError),
    /// JUMP/EXIT structure error.
    Control(ControlError),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid(m) => write!(f, "invalid macro-command: {m}"),
            Self::TsCapacity { needed, available } => write!(
                f,
                "macro-command needs {needed} TS entries, the bank ALUs have {available}"
            ),
            Self::OutOfRange(m) => write!(f, "outside the device: {m}"),
            Self::Timing(e) => write!(f, "DRAM timing: {e}"),
            Self::Alu(e) => write!(f, "bank ALU: {e}"),
            Self::Control(e) => write!(f, "control flow: {e:?}"),
        }
    }
}

impl std::error::Error for EngineError {}

impl From<TimingError> for EngineError {
    fn from(e: TimingError) -> Self {
        Self::Timing(e)
    }
}

impl From<AluError> for EngineError {
    fn from(e: AluError) -> Self {
        Self::Alu(e)
    }
}

/// One column command an executed instruction issues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ColumnOp {
    Read,
    Write,
    /// Read-modify-write of the open column (MEM as source and destination): an all-bank
    /// RD then WR in broadcast mode, one op-and-store UPDATE (the T3 command, next column
    /// command to the bank group after tCCDWL) in single-bank mode.
    ReadModifyWrite,
}

/// A phase's block expanded once (JUMP/EXIT resolved): the instructions to execute per
/// column and the column commands they issue.
#[derive(Debug, Clone, Default)]
pub struct PhaseScript {
    instrs: Vec<Instr>,
    ops: Vec<ColumnOp>,
}

fn script(block: &[Instr]) -> Result<PhaseScript, EngineError> {
    let mut s = PhaseScript::default();
    for step in BlockSteps::new(block) {
        let i = *step.map_err(EngineError::Control)?;
        let slots = i.column_slots();
        if slots == 0 {
            continue;
        }
        s.instrs.push(i);
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
    Ok(s)
}

/// What one pseudo-channel's engine has done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct EngineStats {
    /// Macro-commands completed.
    pub macro_commands: u64,
    /// Column commands issued (all-bank or single-bank RD/WR).
    pub column_commands: u64,
    /// Row activations (all-bank ACT counts once).
    pub activations: u64,
    /// Refreshes issued while the engine owned the pseudo-channel.
    pub refreshes: u64,
    /// Scalar-register writes.
    pub scalar_writes: u64,
    /// Accumulator read-outs (one per bank per reduction).
    pub accumulator_reads: u64,
    /// Mode switches (normal <-> NMC).
    pub mode_switches: u64,
    /// Cycles from the first command of a job to its end, summed.
    pub busy_cycles: u64,
}

/// Which mode the pseudo-channel is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Normal,
    AllBank,
    SingleBank,
}

/// The bytes of every bank, for functional runs: the engine hands a closure the
/// coordinates of a column and gets its address.
pub trait ColumnStore {
    /// Reads the 32-byte column of bank `bank` (flat index in the pseudo-channel).
    ///
    /// # Errors
    /// [`EngineError::OutOfRange`] when the column is not backed by device memory.
    fn read_column(
        &self,
        pc: usize,
        bank: usize,
        row: u32,
        col: u32,
    ) -> Result<[u8; 32], EngineError>;
    /// Writes it back.
    ///
    /// # Errors
    /// [`EngineError::OutOfRange`] when the column is not backed by device memory.
    fn write_column(
        &mut self,
        pc: usize,
        bank: usize,
        row: u32,
        col: u32,
        data: &[u8; 32],
    ) -> Result<(), EngineError>;
}

/// A macro-command validated and expanded once for every engine it is broadcast to.
#[derive(Debug, Clone)]
pub struct MacroScript {
    cmd: MacroCommand,
    phases: Vec<PhaseScript>,
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

/// The NMC engine of one pseudo-channel.
#[derive(Debug, Clone)]
pub struct NmcChannelEngine {
    index: usize,
    banks: usize,
    banks_per_group: usize,
    rows: u32,
    cols_per_row: u32,
    /// Cycle at which the engine is free for its next job.
    now: Cycle,
    open_row: Option<u32>,
    mode: Mode,
    mode_switch: Cycle,
    scalars: [u32; SCALAR_REGS as usize],
    alus: Vec<BankAlu>,
    stats: EngineStats,
}

impl NmcChannelEngine {
    /// An idle engine for pseudo-channel `index` with `ts_entries` TS entries per ALU.
    pub fn new(index: usize, preset: &HbmPreset, ts_entries: usize) -> Self {
        let o = &preset.organisation;
        let banks = (o.bank_groups * o.banks_per_group) as usize;
        Self {
            index,
            banks,
            banks_per_group: o.banks_per_group as usize,
            rows: o.rows,
            cols_per_row: o.columns_per_row,
            now: 0,
            open_row: None,
            mode: Mode::Normal,
            mode_switch: Cycle::from(preset.nmc.mode_switch),
            scalars: [0; SCALAR_REGS as usize],
            alus: (0..banks).map(|_| BankAlu::new(ts_entries)).collect(),
            stats: EngineStats::default(),
        }
    }

    /// Cycle at which the engine finishes what it was given.
    pub fn now(&self) -> Cycle {
        self.now
    }

    /// Whether the engine owns its pseudo-channel (it is in NMC mode).
    pub fn owns_channel(&self) -> bool {
        self.mode != Mode::Normal
    }

    /// Sets a scalar register without charging time (test set-up, checkpoints).
    pub fn set_scalar(&mut self, reg: usize, bits: u32) {
        if let Some(s) = self.scalars.get_mut(reg) {
            *s = bits;
        }
    }

    /// Statistics so far.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// The bank ALUs.
    pub fn alus(&self) -> &[BankAlu] {
        &self.alus
    }

    fn bank_id(&self, flat: usize) -> BankId {
        BankId::new(
            (flat / self.banks_per_group) as u8,
            (flat % self.banks_per_group) as u8,
        )
    }

    /// Issues `cmd` as early as timing allows, in program order (never before the
    /// previous command). Inlined so the command's kind is known where it is built and
    /// the timing state's dispatch on it folds away.
    #[inline(always)]
    fn issue(&mut self, ctrl: &mut Controller, cmd: Command) -> Cycle {
        self.now = ctrl.nmc_issue(&cmd, self.now);
        self.now
    }

    fn close_rows(&mut self, ctrl: &mut Controller) {
        if ctrl.pseudo_channel().any_open() {
            self.issue(ctrl, Command::PreAll);
        }
        self.open_row = None;
    }

    /// Refresh due: close, refresh every bank, and leave the rows closed (the caller
    /// re-opens).
    #[inline]
    fn refresh_if_due(&mut self, ctrl: &mut Controller) {
        while ctrl.nmc_refresh_due(self.now) {
            self.close_rows(ctrl);
            self.issue(ctrl, Command::Ref);
            self.stats.refreshes += 1;
        }
    }

    fn enter(&mut self, ctrl: &mut Controller, mode: Mode) {
        if self.mode != mode {
            if self.mode == Mode::Normal {
                ctrl.acquire_for_nmc(self.now);
            }
            self.close_rows(ctrl);
            self.now += self.mode_switch;
            self.mode = mode;
            self.stats.mode_switches += 1;
        }
    }

    /// Hands the pseudo-channel back to the controller at the earliest cycle at or after
    /// `at` (closing the rows and switching back to normal mode); returns the cycle
    /// normal scheduling resumes at. Does nothing when the engine does not own it.
    pub fn release(&mut self, ctrl: &mut Controller, at: Cycle) -> Cycle {
        if self.mode == Mode::Normal {
            return self.now.max(at);
        }
        self.now = self.now.max(at);
        self.close_rows(ctrl);
        self.now += self.mode_switch;
        self.mode = Mode::Normal;
        self.stats.mode_switches += 1;
        ctrl.release_from_nmc(self.now)
    }

    /// Opens `row` (in every bank, or in `single`).
    fn open(
        &mut self,
        ctrl: &mut Controller,
        row: u32,
        single: Option<usize>,
    ) -> Result<(), EngineError> {
        if row >= self.rows {
            return Err(EngineError::OutOfRange(format!(
                "row {row} of {}",
                self.rows
            )));
        }
        if self.open_row == Some(row) {
            return Ok(());
        }
        self.close_rows(ctrl);
        match single {
            None => self.issue(ctrl, Command::AbAct { row }),
            Some(b) => {
                let bank = self.bank_id(b);
                self.issue(ctrl, Command::Act { bank, row })
            }
        };
        self.open_row = Some(row);
        self.stats.activations += 1;
        Ok(())
    }

    /// Checks that the engine can run `script` (TS capacity, bank) and returns the
    /// single bank it targets, if any.
    pub(crate) fn admit(&self, script: &MacroScript) -> Result<Option<usize>, EngineError> {
        let cmd = &script.cmd;
        let available = self.alus.first().map_or(0, BankAlu::ts_entries);
        let needed = cmd.ts_entries_needed();
        if needed > available {
            return Err(EngineError::TsCapacity { needed, available });
        }
        match cmd.mode {
            BankMode::AllBank => Ok(None),
            BankMode::SingleBank { bank_group, bank } => {
                let flat = usize::from(bank_group) * self.banks_per_group + usize::from(bank);
                if usize::from(bank) >= self.banks_per_group || flat >= self.banks {
                    return Err(EngineError::OutOfRange(format!(
                        "bank group {bank_group} bank {bank}"
                    )));
                }
                Ok(Some(flat))
            }
        }
    }

    /// Runs a macro-command to completion on `ctrl`'s pseudo-channel, starting no
    /// earlier than `start`; returns its finishing cycle.
    ///
    /// # Errors
    /// [`EngineError`] for TS overflow or a range outside the device.
    pub fn run_macro<'s>(
        &mut self,
        ctrl: &mut Controller,
        start: Cycle,
        script: &MacroScript,
        mut store: Option<&mut (dyn ColumnStore + 's)>,
    ) -> Result<Cycle, EngineError> {
        let single = self.admit(script)?;
        let cmd = &script.cmd;
        self.now = self.now.max(start);
        self.enter(
            ctrl,
            if single.is_some() {
                Mode::SingleBank
            } else {
                Mode::AllBank
            },
        );
        let first = self.now;
        let chunk = u32::from(cmd.chunk);
        let cpr = self.cols_per_row;
        let mut chunk_start = 0u32;
        while chunk_start < cmd.col_count {
            let n = chunk.min(cmd.col_count - chunk_start);
            let chunk_first = u64::from(cmd.col_start) + u64::from(chunk_start);
            for (phase, sc) in cmd.phases.iter().zip(&script.phases) {
                // Row and column of the chunk's first column; later ones step through the
                // row (one division per chunk, not per column).
                let mut row_index = u64::from(phase.base_row) + chunk_first / u64::from(cpr);
                let mut col = (chunk_first % u64::from(cpr)) as u32;
                for k in 0..n {
                    if col == cpr {
                        col = 0;
                        row_index += 1;
                    }
                    let row = u32::try_from(row_index)
                        .map_err(|_| EngineError::OutOfRange(format!("row {row_index}")))?;
                    self.refresh_if_due(ctrl);
                    self.open(ctrl, row, single)?;
                    for op in &sc.ops {
                        let c = match (op, single) {
                            (ColumnOp::Read, None) => Command::AbRd { col },
                            (ColumnOp::Write, None) => Command::AbWr { col },
                            (ColumnOp::ReadModifyWrite, None) => {
                                self.issue(ctrl, Command::AbRd { col });
                                self.stats.column_commands += 1;
                                Command::AbWr { col }
                            }
                            (ColumnOp::Read, Some(b)) => Command::Rd {
                                bank: self.bank_id(b),
                                row,
                                col,
                            },
                            (ColumnOp::Write, Some(b)) => Command::Wr {
                                bank: self.bank_id(b),
                                row,
                                col,
                            },
                            (ColumnOp::ReadModifyWrite, Some(b)) => Command::Update {
                                bank: self.bank_id(b),
                                row,
                                col,
                            },
                        };
                        self.issue(ctrl, c);
                    }
                    self.stats.column_commands += sc.ops.len() as u64;
                    if let Some(st) = store.as_deref_mut() {
                        self.execute(st, sc, single, row, col, cmd.chunk, k as u8)?;
                    }
                    col += 1;
                }
            }
            chunk_start += n;
        }
        // The job ends when its last write could be followed by a precharge: close the
        // rows so the next job (or ordinary traffic) starts from a known state.
        self.close_rows(ctrl);
        self.stats.macro_commands += 1;
        self.stats.busy_cycles += self.now - first;
        Ok(self.now)
    }

    #[allow(clippy::too_many_arguments)]
    fn execute(
        &mut self,
        store: &mut dyn ColumnStore,
        sc: &PhaseScript,
        single: Option<usize>,
        row: u32,
        col: u32,
        chunk: u8,
        k: u8,
    ) -> Result<(), EngineError> {
        let writes = sc.instrs.iter().any(Instr::writes_memory);
        let banks = match single {
            Some(b) => b..b + 1,
            None => 0..self.banks,
        };
        for b in banks {
            let mut data = store.read_column(self.index, b, row, col)?;
            let alu = &mut self.alus[b];
            for i in &sc.instrs {
                alu.execute(i, chunk, k, &mut data, &self.scalars)?;
            }
            if writes {
                store.write_column(self.index, b, row, col, &data)?;
            }
        }
        Ok(())
    }

    /// Writes a scalar register in every bank ALU (one mode-register-style command slot,
    /// tCCD_L long, ordered after earlier jobs).
    ///
    /// # Errors
    /// [`EngineError::OutOfRange`] for a register the ALUs do not have.
    pub fn write_scalar(
        &mut self,
        ctrl: &Controller,
        start: Cycle,
        reg: u8,
        bits: u32,
    ) -> Result<Cycle, EngineError> {
        let slot = self
            .scalars
            .get_mut(usize::from(reg))
            .ok_or_else(|| EngineError::OutOfRange(format!("scalar register {reg}")))?;
        *slot = bits;
        self.now = self.now.max(start) + ctrl.pseudo_channel().timing().tccd_l;
        self.stats.scalar_writes += 1;
        Ok(self.now)
    }

    /// Reads out and clears every bank's accumulator: one column-sized read per bank over
    /// the pseudo-channel's bus (`tCCD_S` apart, the first after CL), as the GPU host would
    /// issue them. Returns the finishing cycle and the partials in bank order.
    pub fn read_accumulators(&mut self, ctrl: &Controller, start: Cycle) -> (Cycle, Vec<f32>) {
        let t = ctrl.pseudo_channel().timing();
        let spacing = t.tccd_s.max(t.bl);
        let first = self.now.max(start);
        let n = self.banks as u64;
        self.now = first + t.cl + spacing * n;
        self.stats.accumulator_reads += n;
        let partials = self.alus.iter_mut().map(BankAlu::take_acc).collect();
        (self.now, partials)
    }
}
