//! The per-pseudo-channel NMC engine: expands macro-commands into DRAM commands that it
//! issues through the pseudo-channel's memory [`Controller`] — the same timing state,
//! command log and refresh schedule ordinary requests use — and (optionally) runs every
//! bank's ALU on the bytes in device memory.
//!
//! Command generation depends on the [`AluModel`] (docs/decisions/nmc-alu-issue.md). Under
//! the pipelined model only instructions that read or write the open row issue column
//! commands and the ALU runs behind them on its own clock; the [`RowPolicy`] orders a row
//! visit's commands. The rest of this paragraph is the column-triggered model (SPEC 3.3):
//! every executed instruction occupies its [`Instr::column_slots`] column-command slots;
//! an instruction that writes the open row issues an all-bank WR in its last slot, every
//! other slot is an all-bank RD (the
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

mod exec;
mod flights;
mod pipelined;
mod rows;

use nmcp_isa::nmc::{
    BankMode, ControlError, Instr, ALU_OPS_PER_SLOT, SCALAR_RECIPROCAL_OPS, SCALAR_REGS,
};

use crate::hbm::{BankId, Command, Cycle, HbmPreset, TimingError};
use crate::memctrl::Controller;
use crate::nmc::alu::{AluError, BankAlu};

use std::fmt;

pub use super::policy::{
    alu_chunk, decoupled_buffer_columns, job_contexts, scalar_write_cycles, AluModel, RowMap,
    RowPolicy, JOBS_IN_FLIGHT, MASA_READ_COLUMNS, MASA_WRITE_COLUMNS, STAGING_COLUMNS,
};
pub use super::script::{MacroScript, PhaseScript};
pub use super::stats::EngineStats;
pub use exec::ColumnStore;

use super::policy::*;
use super::script::*;
use flights::*;

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
    alu_model: AluModel,
    policy: RowPolicy,
    /// Clocks after which a dependent operation's result is ready.
    dependent_op_clocks: u64,
    /// Pipelined model: when the ALU finishes the work it was given, in
    /// [`ALU_TICKS_PER_TCK`] ticks.
    alu_free: u64,
    /// Pipelined model: when the ALU takes each operand still waiting in the latch or
    /// staging buffer (oldest first).
    operands: std::collections::VecDeque<Cycle>,
    /// Posted writes waiting for the row visit's reads: (physical row, column, data
    /// ready).
    posted: Vec<(u32, u32, Cycle)>,
    /// MASA: the row open in each subarray (all banks alike: the engine's subarray
    /// commands are all-bank).
    sub_rows: Vec<Option<u32>>,
    /// MASA: log2(rows per subarray).
    sub_shift: u32,
    /// MASA with refresh-access parallelism (`[subarrays] refresh_parallel`): the
    /// decoupled policies refresh one subarray per REF (AB-SA-REF), the others stay open.
    refresh_parallel: bool,
    /// Refreshes issued: the DRAM's refresh counter, whose low bits pick the subarray an
    /// AB-SA-REF refreshes (successive refreshes go to successive subarrays).
    refresh_counter: u64,
    /// Logical to physical rows (the MASA layout), if any.
    row_map: Option<std::sync::Arc<RowMap>>,
    /// MASA: after a subarray select, the earliest RD and WR had there been none (so the
    /// next column's wait beyond it is charged to the select).
    before_select: Option<(Cycle, Cycle)>,
    /// What the time up to the next command is charged to.
    cause: Cause,
    /// Pipelined model: ALU ticks of work given so far.
    alu_busy_ticks: u64,
    /// [`RowPolicy::MasaDecoupled`]: columns of its operand and write buffers.
    decoupled_columns: usize,
    /// Writes ever posted to the write buffer, and ever issued from it (it is a FIFO, so
    /// write number `k` has been issued when `posted_issued > k`).
    posted_pushed: u64,
    posted_issued: u64,
    /// [`RowPolicy::MasaTwoJobs`]: jobs and markers waiting for admission, in order.
    queue: std::collections::VecDeque<Queued>,
    /// [`RowPolicy::MasaTwoJobs`]: the jobs in flight, oldest first.
    flights: Vec<Flight>,
    /// [`RowPolicy::MasaTwoJobs`]: jobs and reductions finished since the last
    /// [`Self::take_finished`]: (id, cycle).
    finished: Vec<(u64, Cycle)>,
    /// Cycle of the last write issued from the write buffer.
    last_posted_at: Cycle,
    /// [`RowPolicy::MasaTwoJobs`]: column commands and ALU ticks when the current run of
    /// overlapping jobs (a segment: from an idle engine to the next) began, and its cycle.
    segment: Option<(u64, u64, Cycle)>,
}

/// The row of the next column of a row-major walk over `cpr` columns a row: at the end of
/// a row (`col == cpr`) the walk moves to column 0 of the next row.
///
/// # Errors
/// [`EngineError::OutOfRange`] when the row does not fit a row address.
#[inline]
fn next_column_row(row_index: &mut u64, col: &mut u32, cpr: u32) -> Result<u32, EngineError> {
    if *col == cpr {
        *col = 0;
        *row_index += 1;
    }
    u32::try_from(*row_index).map_err(|_| EngineError::OutOfRange(format!("row {row_index}")))
}

impl NmcChannelEngine {
    /// An idle engine for pseudo-channel `index` with `ts_entries` TS entries per ALU,
    /// the column-triggered ALU and program order.
    pub fn new(index: usize, preset: &HbmPreset, ts_entries: usize) -> Self {
        Self::with_model(
            index,
            preset,
            ts_entries,
            AluModel::ColumnTriggered,
            RowPolicy::ProgramOrder,
        )
    }

    /// An idle engine with the given ALU issue model and row-visit policy.
    pub fn with_model(
        index: usize,
        preset: &HbmPreset,
        ts_entries: usize,
        alu_model: AluModel,
        policy: RowPolicy,
    ) -> Self {
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
            alu_model,
            policy,
            dependent_op_clocks: u64::from(preset.timing.tccd_l / ALU_OPS_PER_SLOT).max(1),
            alu_free: 0,
            operands: std::collections::VecDeque::with_capacity(STAGING_COLUMNS),
            posted: Vec::new(),
            cause: Cause::Column,
            alu_busy_ticks: 0,
            sub_rows: vec![None; preset.subarrays.per_bank.max(1) as usize],
            sub_shift: (o.rows / preset.subarrays.per_bank.max(1)).trailing_zeros(),
            refresh_parallel: preset.subarrays.refresh_parallel && preset.subarrays.per_bank > 1,
            refresh_counter: 0,
            row_map: None,
            before_select: None,
            decoupled_columns: decoupled_buffer_columns(&crate::hbm::config::TimingCycles::from(
                &preset.timing,
            )),
            posted_pushed: 0,
            posted_issued: 0,
            last_posted_at: 0,
            queue: std::collections::VecDeque::new(),
            flights: Vec::new(),
            finished: Vec::new(),
            segment: None,
        }
    }

    /// Sets the logical-to-physical row mapping (the MASA layout).
    pub fn set_row_map(&mut self, map: Option<std::sync::Arc<RowMap>>) {
        self.row_map = map;
    }

    /// The physical row of logical row `row`.
    #[inline]
    fn phys(&self, row: u32) -> u32 {
        match &self.row_map {
            Some(m) => m.physical(row),
            None => row,
        }
    }

    /// Whether row visits use the subarray commands.
    #[inline]
    fn masa(&self, single: Option<usize>) -> bool {
        matches!(
            self.policy,
            RowPolicy::Masa
                | RowPolicy::MasaDecoupled
                | RowPolicy::MasaTwoJobs
                | RowPolicy::MasaTwoJobsSplit
        ) && single.is_none()
            && self.sub_rows.len() > 1
            && matches!(self.alu_model, AluModel::Pipelined { .. })
    }

    /// Whether row visits run MASA decoupled (all-bank, pipelined, subarrays).
    #[inline]
    fn decoupled(&self, single: Option<usize>) -> bool {
        matches!(
            self.policy,
            RowPolicy::MasaDecoupled | RowPolicy::MasaTwoJobs | RowPolicy::MasaTwoJobsSplit
        ) && self.masa(single)
    }

    /// The ALU issue model.
    pub fn alu_model(&self) -> AluModel {
        self.alu_model
    }

    /// The row-visit policy.
    pub fn policy(&self) -> RowPolicy {
        self.policy
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
    /// The time since the previous command is charged to its cause: a row command to a
    /// row switch (or the refresh that forced it), the first column of a new row too
    /// (tRCD), every later column to column streaming.
    #[inline(always)]
    fn issue(&mut self, ctrl: &mut Controller, cmd: Command) -> Cycle {
        let at = ctrl.nmc_issue(&cmd, self.now);
        let mut waited = at - self.now;
        if let (Some((rd, wr)), Command::AbRd { .. } | Command::AbWr { .. }) =
            (self.before_select, cmd)
        {
            // The first column after a select: the select's share of the wait is what it
            // added to the column's earliest cycle.
            let without = if matches!(cmd, Command::AbRd { .. }) {
                rd
            } else {
                wr
            };
            let by_select = at.saturating_sub(without.max(self.now));
            self.stats.subarray_select_cycles += by_select;
            waited -= by_select;
            self.before_select = None;
        }
        let cause = match cmd {
            Command::Ref | Command::AbSaRef { .. } => Cause::Refresh,
            c if c.kind().is_row_command() && self.cause == Cause::Refresh => Cause::Refresh,
            Command::AbSaSel { .. } => Cause::Select,
            c if c.kind().is_row_command() => Cause::Row,
            _ => self.cause,
        };
        match cause {
            Cause::Column => self.stats.column_cycles += waited,
            Cause::Row => self.stats.row_cycles += waited,
            Cause::Refresh => self.stats.refresh_cycles += waited,
            Cause::Select => self.stats.subarray_select_cycles += waited,
        }
        self.cause = match cause {
            // A select's own wait is its; the column after it is charged above.
            Cause::Select => Cause::Column,
            c if cmd.kind().is_row_command() => c,
            _ => Cause::Column,
        };
        self.now = at;
        at
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
        let job_start = (self.stats.column_commands, self.alu_busy_ticks);
        let mut chunk_start = 0u32;
        let mut posted_before = 0usize;
        while chunk_start < cmd.col_count {
            chunk_start += self.run_chunk(
                ctrl,
                script,
                single,
                chunk_start,
                &mut posted_before,
                store.as_deref_mut(),
            )?;
        }
        // The job ends when its last write could be followed by a precharge: close the
        // rows so the next job (or ordinary traffic) starts from a known state. Under the
        // pipelined model it also waits for the ALU's trailing work (a reduction's last
        // accumulations, results in TS).
        self.close_rows(ctrl);
        if matches!(self.alu_model, AluModel::Pipelined { .. }) {
            self.wait_for_alu(self.alu_ready());
        }
        if self.decoupled(single) {
            let columns =
                (self.stats.column_commands - job_start.0) * ctrl.pseudo_channel().timing().tccd_l;
            let alu = (self.alu_busy_ticks - job_start.1).div_ceil(ALU_TICKS_PER_TCK);
            self.stats.job_floor_cycles += columns.max(alu);
        }
        self.stats.macro_commands += 1;
        self.stats.busy_cycles += self.now - first;
        Ok(self.now)
    }

    /// One chunk of `script` from its column `chunk_start` on (every phase's visit of
    /// the chunk's columns); returns the chunk's columns. `posted_before`: MASA's writes
    /// posted before this chunk (they go after its reads).
    #[inline(always)]
    fn run_chunk<'s>(
        &mut self,
        ctrl: &mut Controller,
        script: &MacroScript,
        single: Option<usize>,
        chunk_start: u32,
        posted_before: &mut usize,
        mut store: Option<&mut (dyn ColumnStore + 's)>,
    ) -> Result<u32, EngineError> {
        let cmd = &script.cmd;
        let chunk = u32::from(cmd.chunk);
        let cpr = self.cols_per_row;
        {
            let n = chunk.min(cmd.col_count - chunk_start);
            let chunk_first = u64::from(cmd.col_start) + u64::from(chunk_start);
            for (phase, sc) in cmd.phases.iter().zip(&script.phases) {
                // Row and column of the chunk's first column; later ones step through the
                // row (one division per chunk, not per column).
                let mut row_index = u64::from(phase.base_row) + chunk_first / u64::from(cpr);
                let mut col = (chunk_first % u64::from(cpr)) as u32;
                // The phase's last row in this job.
                let last_row = u64::from(phase.base_row)
                    + (u64::from(cmd.col_start) + u64::from(cmd.col_count.max(1)) - 1)
                        / u64::from(cpr);
                let rw = match self.alu_model {
                    AluModel::ColumnTriggered => sc.triggered_rw,
                    AluModel::Pipelined { .. } => sc.pipelined_rw,
                };
                let masa = self.masa(single);
                self.stats.visit_floor_cycles += if masa {
                    // Rows stay open across visits: the floor is the column stream.
                    u64::from(n) * u64::from(rw.0 + rw.1) * ctrl.pseudo_channel().timing().tccd_l
                } else {
                    visit_floor(ctrl.pseudo_channel().timing(), n, rw)
                };
                if let (
                    AluModel::Pipelined { ops_per_tck },
                    RowPolicy::Staged
                    | RowPolicy::Masa
                    | RowPolicy::MasaDecoupled
                    | RowPolicy::MasaTwoJobs
                    | RowPolicy::MasaTwoJobsSplit,
                    None,
                ) = (self.alu_model, self.policy, single)
                {
                    if col + n <= cpr && sc.stageable && (masa || self.policy == RowPolicy::Staged)
                    {
                        let row = u32::try_from(row_index)
                            .map_err(|_| EngineError::OutOfRange(format!("row {row_index}")))?;
                        let prow = self.phys(row);
                        self.refresh_if_due(ctrl);
                        if self.policy.two_jobs() && masa {
                            // Two jobs share the write buffer: only the posted writes this
                            // visit must not pass go first (the other job's later ones
                            // stay buffered).
                            let reads = sc.steps.iter().any(|st| {
                                matches!(st.mem, Some(ColumnOp::Read | ColumnOp::ReadModifyWrite))
                            });
                            let sub = prow >> self.sub_shift;
                            if let Some(i) = self.posted.iter().rposition(|p| {
                                reads && p.0 == prow && (col..col + n).contains(&p.1)
                                    || p.0 != prow && p.0 >> self.sub_shift == sub
                            }) {
                                self.flush_posted_oldest(ctrl, i + 1);
                            }
                        } else if masa
                            && sc.steps.iter().any(|st| {
                                matches!(st.mem, Some(ColumnOp::Read | ColumnOp::ReadModifyWrite))
                            })
                            && self
                                .posted
                                .iter()
                                .any(|p| p.0 == prow && (col..col + n).contains(&p.1))
                            || self.posted.iter().any(|p| {
                                p.0 != prow && p.0 >> self.sub_shift == prow >> self.sub_shift
                            })
                        {
                            // A read of a column must not pass a posted write to it.
                            self.flush_posted(ctrl);
                        }
                        if self.decoupled(single) && row_index < last_row {
                            // The array's next row, if the job goes there.
                            let next = self.phys(row.saturating_add(1));
                            self.activate_ahead(ctrl, prow, next);
                        }
                        self.open(ctrl, prow, None)?;
                        let op_ticks = self.op_ticks(ops_per_tck, n);
                        self.visit_staged(ctrl, sc, prow, col, n, op_ticks);
                        if let Some(st) = store.as_deref_mut() {
                            for k in 0..n {
                                self.execute(st, sc, None, row, col + k, cmd.chunk, k as u8)?;
                            }
                        }
                        continue;
                    }
                }
                if masa {
                    // Program order writes directly: earlier posted writes go first.
                    self.flush_posted(ctrl);
                }
                for k in 0..n {
                    let row = next_column_row(&mut row_index, &mut col, cpr)?;
                    let prow = self.phys(row);
                    self.refresh_if_due(ctrl);
                    self.open(ctrl, prow, single)?;
                    if let AluModel::Pipelined { ops_per_tck } = self.alu_model {
                        let op_ticks = self.op_ticks(ops_per_tck, n);
                        self.column_pipelined(ctrl, sc, single, prow, col, op_ticks);
                        if let Some(st) = store.as_deref_mut() {
                            self.execute(st, sc, single, row, col, cmd.chunk, k as u8)?;
                        }
                        col += 1;
                        continue;
                    }
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
                                row: prow,
                                col,
                            },
                            (ColumnOp::Write, Some(b)) => Command::Wr {
                                bank: self.bank_id(b),
                                row: prow,
                                col,
                            },
                            (ColumnOp::ReadModifyWrite, Some(b)) => Command::Update {
                                bank: self.bank_id(b),
                                row: prow,
                                col,
                            },
                        };
                        self.issue(ctrl, c);
                    }
                    self.stats.column_commands += sc.ops.len() as u64;
                    let banks = if single.is_some() {
                        1
                    } else {
                        self.banks as u64
                    };
                    self.stats.alu_bank_ops += sc.alu_ops_per_column() * banks;
                    if let Some(st) = store.as_deref_mut() {
                        self.execute(st, sc, single, row, col, cmd.chunk, k as u8)?;
                    }
                    col += 1;
                }
            }
            if self.decoupled(single) {
                // Decoupled: the writes whose data the ALU has produced drain (oldest
                // first); the rest wait in the buffer, the stream does not wait for them.
                let ready = self.posted.iter().take_while(|p| p.2 <= self.now).count();
                self.flush_posted_oldest(ctrl, ready);
            } else if self.masa(single) {
                // Reads first, writes last, and one chunk behind: the previous chunk's
                // posted writes go after this chunk's reads, so the ALU works on this
                // chunk while they stream (the buffer holds two chunks' writes at the
                // baseline TS).
                self.flush_posted_oldest(ctrl, *posted_before);
                *posted_before = self.posted.len();
            }
            Ok(n)
        }
    }

    /// Executes `script` on the bytes of `store` without timing: every column of every
    /// phase, chunk by chunk, in the order [`Self::run_macro`] executes them (so the same
    /// bits). [`RowPolicy::MasaTwoJobs`] executes a job this way when it is submitted, in
    /// submission order, and times it separately.
    ///
    /// # Errors
    /// [`EngineError`] for TS overflow, a row outside the device or an ALU error.
    pub fn execute_job(
        &mut self,
        store: &mut dyn ColumnStore,
        script: &MacroScript,
    ) -> Result<(), EngineError> {
        let single = self.admit(script)?;
        let cmd = &script.cmd;
        let chunk = u32::from(cmd.chunk);
        let cpr = self.cols_per_row;
        let mut chunk_start = 0u32;
        while chunk_start < cmd.col_count {
            let n = chunk.min(cmd.col_count - chunk_start);
            let chunk_first = u64::from(cmd.col_start) + u64::from(chunk_start);
            for (phase, sc) in cmd.phases.iter().zip(&script.phases) {
                let mut row_index = u64::from(phase.base_row) + chunk_first / u64::from(cpr);
                let mut col = (chunk_first % u64::from(cpr)) as u32;
                for k in 0..n {
                    let row = next_column_row(&mut row_index, &mut col, cpr)?;
                    self.execute(store, sc, single, row, col, cmd.chunk, k as u8)?;
                    col += 1;
                }
            }
            chunk_start += n;
        }
        Ok(())
    }

    /// Checks that every row `script` visits is inside the device (after the row map).
    fn check_rows(&self, script: &MacroScript) -> Result<(), EngineError> {
        let cmd = &script.cmd;
        let cpr = u64::from(self.cols_per_row.max(1));
        for phase in &cmd.phases {
            let first = u64::from(phase.base_row) + u64::from(cmd.col_start) / cpr;
            let last = u64::from(phase.base_row)
                + (u64::from(cmd.col_start) + u64::from(cmd.col_count.max(1)) - 1) / cpr;
            for r in first..=last {
                let row =
                    u32::try_from(r).map_err(|_| EngineError::OutOfRange(format!("row {r}")))?;
                if self.phys(row) >= self.rows {
                    return Err(EngineError::OutOfRange(format!(
                        "row {} of {}",
                        self.phys(row),
                        self.rows
                    )));
                }
            }
        }
        Ok(())
    }
}
