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

use nmcp_isa::nmc::{
    BankMode, BlockSteps, ControlError, Instr, MacroCommand, ALU_OPS_PER_SLOT,
    PIPELINED_OPS_PER_TCK, SCALAR_RECIPROCAL_OPS, SCALAR_REGS,
};

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

/// How a bank ALU's instructions reach the DRAM command stream: the design axis of
/// docs/calibration.md ("ALU issue model"). Both models execute the same instructions on
/// the same data (the numerics do not depend on it); only the timing differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum AluModel {
    /// HBM-PIM-like: every instruction is triggered by column commands and occupies
    /// [`Instr::column_slots`] of them (an ALU-only instruction reads a column and
    /// discards it), so ALU work and column traffic are one stream.
    ColumnTriggered,
    /// The bank ALU runs on its own clock at `ops_per_tck` operations per DRAM clock,
    /// decoupled from the column stream: only an instruction that reads or writes the
    /// open row issues a column command; TS-only work executes while the bank streams
    /// its next columns. What bounds the overlap: a read's operand latch (one column per
    /// bank: the next RD waits until the ALU has taken the previous operand), a write's
    /// data (the WR waits until the ALU has produced it), the ALU's own throughput, and
    /// dependent operations (an operation's result is ready `tCCD_L / ALU_OPS_PER_SLOT`
    /// clocks after it starts, so a chunk of `c` independent columns sustains at most
    /// `c` operations per that latency).
    Pipelined {
        /// ALU operations (each on a whole 256-bit column) per DRAM clock.
        ops_per_tck: u32,
    },
}

impl AluModel {
    /// The pipelined model at its documented default rate.
    pub const PIPELINED: Self = Self::Pipelined {
        ops_per_tck: PIPELINED_OPS_PER_TCK,
    };

    /// Name as the command line and the JSON report spell it.
    pub fn name(&self) -> String {
        match self {
            Self::ColumnTriggered => "column-triggered".into(),
            Self::Pipelined { ops_per_tck } if *ops_per_tck == PIPELINED_OPS_PER_TCK => {
                "pipelined".into()
            }
            Self::Pipelined { ops_per_tck } => format!("pipelined-{ops_per_tck}"),
        }
    }

    /// Parses `column-triggered`, `pipelined` (the default rate) or `pipelined-N`
    /// (N operations per tCK, 1..=16).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "column-triggered" => Some(Self::ColumnTriggered),
            "pipelined" => Some(Self::PIPELINED),
            _ => {
                let n: u32 = s.strip_prefix("pipelined-")?.parse().ok()?;
                (1..=16)
                    .contains(&n)
                    .then_some(Self::Pipelined { ops_per_tck: n })
            }
        }
    }
}

/// How the engine orders the column commands of one row visit (a phase's chunk in one
/// open row). Neither changes what is computed: the columns of a chunk are independent
/// (their TS entries are indexed by the column), so any order that keeps each column's
/// own instruction order gives the same bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowPolicy {
    /// Every column command in program order (today's engine).
    #[default]
    ProgramOrder,
    /// Staged row visits (pipelined ALU, all-bank mode). A visit runs instruction by
    /// instruction, each for every column of the chunk (the ALU interleaves the chunk's
    /// independent columns), through a per-bank staging buffer of [`STAGING_COLUMNS`]
    /// columns between the row and the ALU: reads stream back to back into it (a read
    /// waits only while the buffer holds that many operands the ALU has not taken), and
    /// results for the open row are posted to it and written back to back when it is
    /// full or the row closes. So no read follows a write inside a visit: program order
    /// pays the all-bank write-to-read gap (CWL + BL + tWTR_L = 15 tCK on hbm2-2000,
    /// against tCCD_L = 4) for every column of a read-modify-write phase, staged visits
    /// never. And a bank closes its row and opens the next while the ALU still works on
    /// operands it read, so ALU time hides behind the row switch instead of holding the
    /// row open. A phase with a read after a write of the row, or two reductions, runs in
    /// program order (a posted write has not reached the row; the accumulator's order).
    /// Ignored under the column-triggered model, whose instructions execute in their own
    /// column slots.
    Staged,
    /// MASA row visits (pipelined ALU, all-bank mode, a preset with several subarrays per
    /// bank, docs/decisions/dram.md): the rows of a macro-command's arrays stay open
    /// across chunks, one per subarray (the layout's [`RowMap`] puts a tensor's arrays in
    /// different subarrays); the engine switches between open rows with a subarray select
    /// (AB-SA-SEL) instead of PREA/AB-ACT, and precharges and activates one subarray
    /// (AB-SA-PRE, AB-SA-ACT) only when an array moves to its next row. Within a chunk
    /// every phase's visit runs as under [`Self::Staged`] (instruction by instruction over
    /// the chunk, reads back to back), and the writes of all phases are posted to a
    /// [`MASA_WRITE_COLUMNS`]-column buffer and written after the next chunk's reads (each
    /// row's after a select): reads first, writes last, so a chunk pays one read-to-write
    /// and one write-to-read turnaround instead of one per read-modify-write phase, and
    /// the ALU works on a chunk while the previous chunk's writes stream. A read of a
    /// column with a posted write, or a row switch in a subarray with posted writes to its
    /// old row, drains the buffer first.
    /// Phases that [`Self::Staged`] runs in program order run in program order here too
    /// (with subarray selects). On a preset with one subarray per bank it is refused.
    Masa,
    /// [`Self::Masa`] with decoupled access and execute (docs/decisions/nmc-alu-issue.md,
    /// "MASA, decoupled"): the operand buffer and the write buffer are
    /// [`decoupled_buffer_columns`] deep (sized to keep the ALU fed through a refresh and
    /// a row move), posted writes drain when their data is ready instead of one chunk
    /// behind (the stream waits for the ALU only when a buffer is full), an array's next
    /// row is activated ahead in its other subarray while the stream still works in the
    /// current one (with the layout that alternates an array's rows between two
    /// subarrays, a preset with at least 11 subarrays per bank, e.g. `lamb-ch6-masa16`),
    /// and a refresh leaves the posted writes in the buffer (it closes the rows; the writes
    /// go after it). Same instructions on the same bytes as every other policy.
    MasaDecoupled,
    /// [`Self::MasaDecoupled`] with [`JOBS_IN_FLIGHT`] macro-commands in flight per engine
    /// (docs/decisions/nmc-alu-issue.md, "Two macro-commands in flight"): the engine
    /// admits the next queued job while the current one still streams or drains, and
    /// interleaves the two jobs' chunks on the one command stream, sharing the bank ALU
    /// (in order, chunk by chunk), the operand buffer and the write buffer. An arbiter
    /// picks, at each chunk boundary, the ALU-heavier job's chunk when the ALU would
    /// otherwise run dry within the lighter job's next chunk, else the lighter job's.
    /// Dependencies are kept exactly: a younger job's chunk that touches a column the
    /// older job has still to read or write (one of them writing) waits; a read of a
    /// column with a posted write drains the buffer first (as within a job); jobs that
    /// reduce never overlap (one accumulator); the TS entries of the jobs in flight must
    /// fit the TS together. Each job context holds its own copy of the scalar registers,
    /// taken when the job is admitted, so a scalar write takes one command slot and
    /// applies to the jobs queued after it without waiting for the jobs in flight. A job is
    /// complete when its ALU work is done and its last write can be followed by a
    /// precharge (CWL + BL + tWR); completions are reported in submission order.
    /// Functionally every job still executes in submission order (the numerics of every
    /// other policy). Runs through [`NmcChannelEngine::enqueue_job`] and
    /// [`NmcChannelEngine::advance`] (the node's deferred path);
    /// [`NmcChannelEngine::run_macro`] runs one job alone, as [`Self::MasaDecoupled`].
    MasaTwoJobs,
    /// [`Self::MasaTwoJobs`] with the LAMB sequencer's TS split between the two job
    /// contexts ([`job_contexts`] = 2: each program gets half the TS, stage 1 at chunk TS / 8
    /// and stage 2 at TS / 2, where stage 1 keeps at least [`alu_chunk`] columns), so that
    /// stage 1 and stage 2 fit the TS together and may overlap. The engine is the same;
    /// only the sequencer's chunks differ. Not the default: measured slower on BERT-Large
    /// at TS 16 (4.92x against 5.04x; stage 1 at chunk 2 re-opens its rows twice as often,
    /// docs/decisions/nmc-alu-issue.md, "Per-context scalars and the TS split").
    MasaTwoJobsSplit,
}

impl RowPolicy {
    /// Whether the engine keeps [`JOBS_IN_FLIGHT`] macro-commands in flight
    /// ([`Self::MasaTwoJobs`], [`Self::MasaTwoJobsSplit`]).
    pub fn two_jobs(self) -> bool {
        matches!(self, Self::MasaTwoJobs | Self::MasaTwoJobsSplit)
    }
}

/// Macro-commands in flight per engine under [`RowPolicy::MasaTwoJobs`].
pub const JOBS_IN_FLIGHT: usize = 2;

/// Job contexts an engine under `policy` has (the firmware's
/// `NmcGeometry::job_contexts`: it splits the TS between them).
pub fn job_contexts(policy: RowPolicy) -> u16 {
    if policy == RowPolicy::MasaTwoJobsSplit {
        JOBS_IN_FLIGHT as u16
    } else {
        1
    }
}

/// Independent columns a bank ALU of `model` needs in flight to run at its rate (the
/// firmware's `NmcGeometry::alu_chunk`): under the pipelined model its dependent-operation
/// latency (`tCCD_L / ALU_OPS_PER_SLOT` clocks) times its operations per clock; 1 for the
/// column-triggered model.
pub fn alu_chunk(preset: &HbmPreset, model: AluModel) -> u16 {
    match model {
        AluModel::ColumnTriggered => 1,
        AluModel::Pipelined { ops_per_tck } => {
            let latency = u64::from(preset.timing.tccd_l / ALU_OPS_PER_SLOT).max(1);
            u16::try_from(latency * u64::from(ops_per_tck.max(1))).unwrap_or(u16::MAX)
        }
    }
}

/// Cycles from a scalar-register write to its latched reciprocal for timing `t`: the
/// bank ALU runs [`SCALAR_RECIPROCAL_OPS`] dependent operations on the new value, at
/// [`ALU_OPS_PER_SLOT`] per tCCD_L whatever the issue model (a dependent chain is
/// latency-bound), so that a later DIV by the register costs only its correction
/// (`nmcp_isa::nmc::DIV_BY_SCALAR_OPS`). 24 on hbm2-2000; never less than the write's
/// command slot.
pub fn scalar_write_cycles(t: &crate::hbm::config::TimingCycles) -> Cycle {
    let latch = u64::from(SCALAR_RECIPROCAL_OPS.div_ceil(ALU_OPS_PER_SLOT)) * t.tccd_l;
    latch.max(t.tccd_l)
}

/// Columns of the operand buffer and of the write buffer of [`RowPolicy::MasaDecoupled`]
/// for timing `t` (docs/calibration.md, "Decoupled buffers"): the stream cannot move a
/// column for a refresh (tRFC) plus one row move it could not activate ahead (tRP + tRCD:
/// PRE to the new row's first read). The ALU must not run dry in that time, nor its
/// results overflow: it takes and produces at most one column per tCCD_L while the stream
/// keeps up (a faster ALU is not the bottleneck and needs no buffer), so each buffer holds
/// ceil((tRFC + tRP + tRCDRD) / tCCD_L) columns (95 on hbm2-2000: 378 / 4).
pub fn decoupled_buffer_columns(t: &crate::hbm::config::TimingCycles) -> usize {
    let cover = t.trfc.saturating_add(t.trp).saturating_add(t.trcdrd);
    usize::try_from(cover.div_ceil(t.tccd_l.max(1))).unwrap_or(usize::MAX)
}

/// Columns of the per-bank write buffer of [`RowPolicy::Masa`] (32 B each, 1 KiB per
/// bank, one row's worth): a chunk of stage 1 at the baseline TS (4 columns) posts 12
/// writes (m, v, u), written after the next chunk's reads, so the buffer holds two
/// chunks' writes; larger chunks flush it when it is full.
pub const MASA_WRITE_COLUMNS: usize = 32;

/// Operand columns of the per-bank read buffer of [`RowPolicy::Masa`] (32 B each, 512 B
/// per bank): reads run this far ahead of the ALU, a baseline-TS chunk's reads of stage 1
/// (g, m, v, w: 16 columns) without waiting for it.
pub const MASA_READ_COLUMNS: usize = 16;

/// Where the rows of arrays sit in the DRAM (the MASA layout's address mapping): the
/// firmware lays a tensor's arrays out in consecutive rows; the mapping sends each
/// range of logical rows to a range of physical rows (in the subarray of its choice). A
/// row no range covers maps to itself. Commands carry physical rows; the functional
/// store keeps logical ones.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct RowMap {
    /// (first logical row, rows, first physical row), sorted by logical row, disjoint.
    ranges: Vec<(u32, u32, u32)>,
}

impl RowMap {
    /// A mapping of the given ranges (first logical row, rows, first physical row).
    ///
    /// # Errors
    /// [`EngineError::Invalid`] when two logical or two physical ranges overlap.
    pub fn new(mut ranges: Vec<(u32, u32, u32)>) -> Result<Self, EngineError> {
        ranges.retain(|r| r.1 > 0);
        ranges.sort_unstable();
        let overlap = |v: &mut Vec<(u32, u32)>| {
            v.sort_unstable();
            v.windows(2)
                .find(|w| u64::from(w[0].0) + u64::from(w[0].1) > u64::from(w[1].0))
                .map(|w| (w[0], w[1]))
        };
        let mut logical: Vec<_> = ranges.iter().map(|r| (r.0, r.1)).collect();
        let mut physical: Vec<_> = ranges.iter().map(|r| (r.2, r.1)).collect();
        if let Some((a, b)) = overlap(&mut logical) {
            return Err(EngineError::Invalid(format!(
                "row map: logical rows {}+{} and {}+{} overlap",
                a.0, a.1, b.0, b.1
            )));
        }
        if let Some((a, b)) = overlap(&mut physical) {
            return Err(EngineError::Invalid(format!(
                "row map: physical rows {}+{} and {}+{} overlap",
                a.0, a.1, b.0, b.1
            )));
        }
        Ok(Self { ranges })
    }

    /// The physical row of logical row `row`.
    pub fn physical(&self, row: u32) -> u32 {
        let i = self.ranges.partition_point(|r| r.0 <= row);
        match i.checked_sub(1).and_then(|i| self.ranges.get(i)) {
            Some(&(start, len, phys)) if row - start < len => phys + (row - start),
            _ => row,
        }
    }
}

/// Columns of the per-bank staging buffer of [`RowPolicy::Staged`] (each 32 B): a
/// quarter of the baseline TS (16 entries), so the policy adds 128 B per bank. Deeper
/// buffers let reads run further ahead of the ALU; four cover a DIV's 12 operations
/// against 4-clock column slots at one operation per clock.
pub const STAGING_COLUMNS: usize = 4;

impl RowPolicy {
    /// Name as the command line and the JSON report spell it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ProgramOrder => "program-order",
            Self::Staged => "staged",
            Self::Masa => "masa",
            Self::MasaDecoupled => "masa-decoupled",
            Self::MasaTwoJobs => "masa-2jobs",
            Self::MasaTwoJobsSplit => "masa-2jobs-split",
        }
    }

    /// Parses a [`Self::name`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "program-order" => Some(Self::ProgramOrder),
            "staged" => Some(Self::Staged),
            "masa" => Some(Self::Masa),
            "masa-decoupled" => Some(Self::MasaDecoupled),
            "masa-2jobs" => Some(Self::MasaTwoJobs),
            "masa-2jobs-split" => Some(Self::MasaTwoJobsSplit),
            _ => None,
        }
    }
}

/// Sub-cycle resolution of the pipelined ALU's clock (divisible by 1..=10, so common
/// rates are exact).
const ALU_TICKS_PER_TCK: u64 = 2520;

/// What the engine's time between two commands is attributed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cause {
    Column,
    Row,
    Refresh,
    /// MASA subarray selects and the wait for the selected subarray's first column.
    Select,
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

/// What one instruction needs under the pipelined ALU model: the column command it
/// issues (if it reads or writes the open row) and its dependent ALU operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PipelinedStep {
    mem: Option<ColumnOp>,
    alu_ops: u32,
}

/// A phase's block expanded once (JUMP/EXIT resolved): the instructions to execute per
/// column and the column commands they issue under each ALU model.
#[derive(Debug, Clone, Default)]
pub struct PhaseScript {
    instrs: Vec<Instr>,
    /// Column-triggered: every slot of every instruction.
    ops: Vec<ColumnOp>,
    /// Pipelined: one entry per executed instruction.
    steps: Vec<PipelinedStep>,
    /// Column commands one column issues (reads, writes), column-triggered.
    triggered_rw: (u32, u32),
    /// The same, pipelined (only row-touching instructions).
    pipelined_rw: (u32, u32),
    /// Whether the staged policy may run the phase: instruction by instruction across a
    /// chunk, writes posted. Needs at most one reduction (the accumulator is the only
    /// state columns share, so with one reducing instruction it sums in column order
    /// either way) and no read of the row after a write to it (a posted write has not
    /// reached the row yet).
    stageable: bool,
}

impl PhaseScript {
    /// ALU operations one column's pass through the phase executes on one bank's ALU.
    fn alu_ops_per_column(&self) -> u64 {
        self.steps.iter().map(|st| u64::from(st.alu_ops)).sum()
    }
}

fn script(block: &[Instr]) -> Result<PhaseScript, EngineError> {
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
    Ok(s)
}

/// The row-cycle floor of one all-bank row visit of `n` columns, each issuing `rw.0` reads
/// and `rw.1` writes (see [`EngineStats::visit_floor_cycles`]).
fn visit_floor(t: &crate::hbm::config::TimingCycles, n: u32, rw: (u32, u32)) -> u64 {
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
    /// Of the engine's time, cycles spent waiting for and streaming column commands.
    pub column_cycles: u64,
    /// Cycles of row switches: PRE/ACT and the wait for the first column of a new row.
    pub row_cycles: u64,
    /// Cycles of refresh: the close before a REF, tRFC and the re-opening it forces.
    pub refresh_cycles: u64,
    /// Cycles the command stream waited for the pipelined ALU (a write for its data, a
    /// read for the operand latch, a job's end for trailing ALU work).
    pub alu_stall_cycles: u64,
    /// The row-cycle floor of the row visits made: per visit of `n` columns, the ACT to
    /// the next ACT can be no shorter than tRC, nor than tRCD + the visit's column
    /// commands tCCD_L apart + tRTP (or CWL + BL + tWR after a write) + tRP, nor than
    /// tRAS + tRP; summed. No schedule of these commands on one row buffer per bank is
    /// faster (refresh, ALU and host time come on top).
    pub visit_floor_cycles: u64,
    /// Pipelined model: cycles the ALU computes (its operations at the rate the chunk
    /// sustains), whether or not they overlap the column stream.
    pub alu_busy_cycles: u64,
    /// ALU operations executed, one per bank ALU per 256-bit operation (an all-bank
    /// instruction on one column counts once per bank): the energy model's count.
    pub alu_bank_ops: u64,
    /// MASA: subarray selects issued (all-bank SA_SEL counts once).
    #[serde(skip_serializing_if = "is_zero")]
    pub subarray_selects: u64,
    /// MASA: cycles of subarray selects (the select and the wait for the selected
    /// subarray's first column).
    #[serde(skip_serializing_if = "is_zero")]
    pub subarray_select_cycles: u64,
    /// [`RowPolicy::MasaDecoupled`]: per macro-command, its column commands at tCCD_L or
    /// its ALU work, whichever is longer, summed: what a schedule that overlaps the
    /// stream and the ALU perfectly within each job (but not across jobs: a job ends when
    /// its results are in the row) could reach, with no row switches, refresh or host
    /// time.
    /// [`RowPolicy::MasaTwoJobs`]: the same per segment (jobs that overlap, from an idle
    /// engine to the next), the floor of that policy.
    #[serde(skip_serializing_if = "is_zero")]
    pub job_floor_cycles: u64,
    /// [`RowPolicy::MasaDecoupled`]: rows activated ahead of the stream (counted in
    /// `activations` too).
    #[serde(skip_serializing_if = "is_zero")]
    pub rows_activated_ahead: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl EngineStats {
    /// Every count multiplied by `n` (one engine standing for `n` identical ones).
    pub fn times(&self, n: u64) -> Self {
        Self {
            macro_commands: self.macro_commands * n,
            column_commands: self.column_commands * n,
            activations: self.activations * n,
            refreshes: self.refreshes * n,
            scalar_writes: self.scalar_writes * n,
            accumulator_reads: self.accumulator_reads * n,
            mode_switches: self.mode_switches * n,
            busy_cycles: self.busy_cycles * n,
            column_cycles: self.column_cycles * n,
            row_cycles: self.row_cycles * n,
            refresh_cycles: self.refresh_cycles * n,
            alu_stall_cycles: self.alu_stall_cycles * n,
            visit_floor_cycles: self.visit_floor_cycles * n,
            alu_busy_cycles: self.alu_busy_cycles * n,
            alu_bank_ops: self.alu_bank_ops * n,
            subarray_selects: self.subarray_selects * n,
            subarray_select_cycles: self.subarray_select_cycles * n,
            job_floor_cycles: self.job_floor_cycles * n,
            rows_activated_ahead: self.rows_activated_ahead * n,
        }
    }
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

/// A job or marker queued for [`RowPolicy::MasaTwoJobs`].
#[derive(Debug, Clone)]
enum Queued {
    /// A macro-command (id, script, submission cycle).
    Job(u64, std::sync::Arc<MacroScript>, Cycle),
    /// A scalar-register write (submission cycle): one command slot once every earlier
    /// job is admitted (each job context keeps the scalars it was admitted with).
    Scalar(Cycle),
    /// An accumulator read-out (id, submission cycle): waits until no reducing job is in
    /// flight.
    Reduce(u64, Cycle),
}

/// A job in flight under [`RowPolicy::MasaTwoJobs`].
#[derive(Debug, Clone)]
struct Flight {
    id: u64,
    script: std::sync::Arc<MacroScript>,
    /// The next chunk's first column (relative to `col_start`).
    next: u32,
    /// ALU ticks at which its work is done (set with its last chunk).
    alu_done: u64,
    /// Number of its last posted write, if it posted any.
    last_write: Option<u64>,
    /// Cycle its last posted write (so far) was issued.
    writes_done: Cycle,
    /// TS entries it uses.
    ts: usize,
    /// Whether it accumulates (a REDUCE instruction).
    reduces: bool,
    /// ALU ticks per column (at its chunk's rate) and stream cycles per column (its
    /// column commands at tCCD_L): the arbiter's weights.
    alu_per_col: u64,
    stream_per_col: u64,
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

    /// Holds the command stream until `ready` (the pipelined ALU's data or latch).
    #[inline]
    fn wait_for_alu(&mut self, ready: Cycle) {
        if ready > self.now {
            self.stats.alu_stall_cycles += ready - self.now;
            self.now = ready;
        }
    }

    /// Cycle at which the pipelined ALU has finished everything it was given.
    fn alu_ready(&self) -> Cycle {
        self.alu_free.div_ceil(ALU_TICKS_PER_TCK)
    }

    /// Issues the posted writes of the row visit, in column order, each no earlier than
    /// its data.
    fn flush_posted(&mut self, ctrl: &mut Controller) {
        if self.posted.is_empty() {
            return;
        }
        let posted = std::mem::take(&mut self.posted);
        for &(row, col, ready) in &posted {
            if self.masa(None) && self.open_row != Some(row) {
                self.masa_open(ctrl, row);
            }
            self.wait_for_alu(ready);
            let at = self.issue(ctrl, Command::AbWr { col });
            self.stats.column_commands += 1;
            let seq = self.posted_issued;
            self.posted_issued += 1;
            self.last_posted_at = at;
            for f in &mut self.flights {
                if f.last_write == Some(seq) {
                    f.writes_done = at;
                }
            }
        }
        self.posted = posted;
        self.posted.clear();
    }

    /// Issues the oldest `n` posted writes (MASA: the previous chunk's), keeping the rest.
    fn flush_posted_oldest(&mut self, ctrl: &mut Controller, n: usize) {
        let n = n.min(self.posted.len());
        if n == 0 {
            return;
        }
        let rest = self.posted.split_off(n);
        self.flush_posted(ctrl);
        self.posted = rest;
    }

    fn close_rows(&mut self, ctrl: &mut Controller) {
        self.flush_posted(ctrl);
        if ctrl.pseudo_channel().any_open() {
            self.issue(ctrl, Command::PreAll);
        }
        self.open_row = None;
        self.sub_rows.fill(None);
    }

    /// MASA: makes physical `row` the designated open row of every bank: a subarray
    /// select if its subarray has it open, else a subarray precharge (if the subarray has
    /// another row open) and a subarray activate. Posted writes keep their rows.
    fn masa_open(&mut self, ctrl: &mut Controller, row: u32) {
        if self.open_row == Some(row) {
            return;
        }
        let s = (row >> self.sub_shift) as usize;
        match self.sub_rows.get(s).copied().flatten() {
            Some(r) if r == row => {
                let pc = ctrl.pseudo_channel();
                let before = (
                    pc.earliest(&Command::AbRd { col: 0 }),
                    pc.earliest(&Command::AbWr { col: 0 }),
                );
                self.issue(ctrl, Command::AbSaSel { row });
                self.before_select = Some(before);
                self.stats.subarray_selects += 1;
            }
            open => {
                if open.is_some() {
                    self.issue(ctrl, Command::AbSaPre { row });
                }
                self.issue(ctrl, Command::AbSaAct { row });
                self.stats.activations += 1;
                if let Some(slot) = self.sub_rows.get_mut(s) {
                    *slot = Some(row);
                }
            }
        }
        self.open_row = Some(row);
    }

    /// [`RowPolicy::MasaDecoupled`]: prepares physical row `next` (an array's next row) in
    /// its subarray while the stream works in `current`'s, one command per call and only
    /// a command whose gates are already met (the stream never waits for it), and only
    /// while `current` is open: the
    /// subarray's precharge if it has another row open (and no posted write to it), then,
    /// at a later call, its activate. Nothing when `next` shares `current`'s subarray.
    fn activate_ahead(&mut self, ctrl: &mut Controller, current: u32, next: u32) {
        let s = (next >> self.sub_shift) as usize;
        let here = (current >> self.sub_shift) as usize;
        // Only once the current row is open (a job's first visit opens its own row
        // first: an activate ahead of it would take its tFAW slot).
        if s == here || next >= self.rows || self.sub_rows.get(here) != Some(&Some(current)) {
            return;
        }
        let Some(open) = self.sub_rows.get(s).copied() else {
            return;
        };
        let cmd = match open {
            Some(r) if r == next => return,
            Some(r) => {
                if self.posted.iter().any(|p| p.0 == r) {
                    return;
                }
                Command::AbSaPre { row: r }
            }
            None => Command::AbSaAct { row: next },
        };
        if ctrl.pseudo_channel().earliest(&cmd) > self.now {
            return;
        }
        self.issue(ctrl, cmd);
        if let Some(slot) = self.sub_rows.get_mut(s) {
            *slot = match cmd {
                Command::AbSaAct { row } => {
                    // An activate designates its subarray.
                    self.open_row = Some(row);
                    self.stats.activations += 1;
                    self.stats.rows_activated_ahead += 1;
                    Some(row)
                }
                _ => {
                    if self.open_row == open {
                        self.open_row = None;
                    }
                    None
                }
            };
        }
    }

    /// Refresh due: close, refresh every bank, and leave the rows closed (the caller
    /// re-opens).
    #[inline]
    fn refresh_if_due(&mut self, ctrl: &mut Controller) {
        while ctrl.nmc_refresh_due(self.now) {
            if self.mode == Mode::AllBank && self.decoupled(None) {
                // Decoupled: the posted writes stay in the write buffer (it is outside the
                // array; they go to their rows after the refresh, re-opened then), so
                // the ALU keeps producing into it through tRFC.
                self.cause = Cause::Refresh;
                if self.refresh_parallel {
                    // SARP: only the subarray the refresh counter points at closes (its
                    // row's posted writes wait in the buffer as above); the stream goes on
                    // in the others and waits only for a row of this one.
                    let s = (self.refresh_counter % self.sub_rows.len() as u64) as usize;
                    self.refresh_counter += 1;
                    if let Some(Some(r)) = self.sub_rows.get(s).copied() {
                        self.issue(ctrl, Command::AbSaPre { row: r });
                        self.sub_rows[s] = None;
                        if self.open_row == Some(r) {
                            self.open_row = None;
                        }
                    }
                    self.issue(
                        ctrl,
                        Command::AbSaRef {
                            row: (s as u32) << self.sub_shift,
                        },
                    );
                    self.stats.refreshes += 1;
                    continue;
                }
                if ctrl.pseudo_channel().any_open() {
                    self.issue(ctrl, Command::PreAll);
                }
                self.open_row = None;
                self.sub_rows.fill(None);
                self.issue(ctrl, Command::Ref);
                self.stats.refreshes += 1;
                continue;
            }
            self.flush_posted(ctrl);
            self.cause = Cause::Refresh;
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
        if self.masa(single) {
            self.masa_open(ctrl, row);
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
                    if col == cpr {
                        col = 0;
                        row_index += 1;
                    }
                    let row = u32::try_from(row_index)
                        .map_err(|_| EngineError::OutOfRange(format!("row {row_index}")))?;
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
                    if col == cpr {
                        col = 0;
                        row_index += 1;
                    }
                    let row = u32::try_from(row_index)
                        .map_err(|_| EngineError::OutOfRange(format!("row {row_index}")))?;
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

    /// [`RowPolicy::MasaTwoJobs`]: queues job `id` (`script`, submitted at cycle `at`)
    /// for admission; it runs in [`Self::advance`].
    ///
    /// # Errors
    /// [`EngineError`] for TS overflow or a row outside the device.
    pub fn enqueue_job(
        &mut self,
        id: u64,
        script: std::sync::Arc<MacroScript>,
        at: Cycle,
    ) -> Result<(), EngineError> {
        self.admit(&script)?;
        self.check_rows(&script)?;
        self.queue.push_back(Queued::Job(id, script, at));
        Ok(())
    }

    /// [`RowPolicy::MasaTwoJobs`]: reads out and clears every bank's accumulator now (the
    /// values: jobs execute on data when submitted) and queues the read-out's timing as
    /// reduction `id`, submitted at `at`: it goes over the bus once no job that reduces
    /// is in flight.
    pub fn enqueue_reduce(&mut self, id: u64, at: Cycle) -> Vec<f32> {
        self.stats.accumulator_reads += self.banks as u64;
        self.queue.push_back(Queued::Reduce(id, at));
        self.alus.iter_mut().map(BankAlu::take_acc).collect()
    }

    /// Whether jobs or markers are queued or in flight ([`RowPolicy::MasaTwoJobs`]).
    pub fn has_deferred_work(&self) -> bool {
        !self.queue.is_empty() || !self.flights.is_empty()
    }

    /// The cycle up to which [`Self::advance`] has simulated while work remains (call it
    /// again once the node's time reaches it), if any.
    pub fn next_poll(&self) -> Option<Cycle> {
        self.has_deferred_work().then_some(self.now)
    }

    /// Jobs and reductions finished since the last call: (id, cycle).
    pub fn take_finished(&mut self) -> Vec<(u64, Cycle)> {
        std::mem::take(&mut self.finished)
    }

    /// [`RowPolicy::MasaTwoJobs`]: runs the queued jobs and markers, two jobs in flight,
    /// chunk by chunk. Everything submitted so far is queued, so the engine runs ahead
    /// while its admissions do not depend on later submissions; with a slot free and
    /// nothing queued it stops at the first chunk boundary after `horizon` (a job
    /// submitted later is admitted at the chunk boundary after its submission).
    ///
    /// # Errors
    /// [`EngineError`] from a job (rows and TS were checked when it was queued).
    pub fn advance(&mut self, ctrl: &mut Controller, horizon: Cycle) -> Result<(), EngineError> {
        loop {
            self.retire_flights(ctrl);
            if self.admit_next(ctrl)? {
                continue;
            }
            if self.flights.is_empty() {
                if self.queue.is_empty() && self.mode != Mode::Normal {
                    // Idle: close the rows, as a job's end does under the other policies.
                    self.close_rows(ctrl);
                }
                return Ok(());
            }
            if self.queue.is_empty() && self.flights.len() < JOBS_IN_FLIGHT && self.now > horizon {
                return Ok(());
            }
            match self.pick() {
                Some(i) => self.flight_chunk(ctrl, i)?,
                None => self.drain_step(ctrl),
            }
        }
    }

    /// Admits the head of the queue if it may start now; whether it did.
    fn admit_next(&mut self, ctrl: &mut Controller) -> Result<bool, EngineError> {
        let Some(head) = self.queue.front() else {
            return Ok(false);
        };
        match head {
            &Queued::Scalar(at) => {
                // Per-context scalars: the jobs in flight keep the copy they were admitted
                // with, so the write need not drain them; it waits only, as a job does,
                // for the stream to reach its submission.
                if at > self.now && !self.flights.is_empty() {
                    return Ok(false);
                }
                self.queue.pop_front();
                self.now = self.now.max(at);
                self.scalar_slot(ctrl);
            }
            &Queued::Reduce(id, at) => {
                if self.flights.iter().any(|f| f.reduces) {
                    return Ok(false);
                }
                self.queue.pop_front();
                let t = ctrl.pseudo_channel().timing();
                let spacing = t.tccd_s.max(t.bl);
                self.now = self.now.max(at) + t.cl + spacing * self.banks as u64;
                self.finished.push((id, self.now));
            }
            Queued::Job(id, script, at) => {
                let (id, at) = (*id, *at);
                let script = script.clone();
                let single = self.admit(&script)?;
                if single.is_some() || !self.decoupled(None) {
                    // Not a broadcast the decoupled stream runs: alone, as usual.
                    if !self.flights.is_empty() {
                        return Ok(false);
                    }
                    self.queue.pop_front();
                    let done = self.run_macro(ctrl, at, &script, None)?;
                    self.finished.push((id, done));
                    return Ok(true);
                }
                let ts = script.cmd.ts_entries_needed();
                let available = self.alus.first().map_or(0, BankAlu::ts_entries);
                let reduces = script
                    .phases
                    .iter()
                    .any(|p| p.instrs.iter().any(|i| matches!(i, Instr::Reduce { .. })));
                if self.flights.len() >= JOBS_IN_FLIGHT
                    || self.flights.iter().map(|f| f.ts).sum::<usize>() + ts > available
                    || reduces && self.flights.iter().any(|f| f.reduces)
                    || at > self.now && !self.flights.is_empty()
                {
                    return Ok(false);
                }
                self.queue.pop_front();
                self.now = self.now.max(at);
                if self.flights.is_empty() {
                    self.enter(ctrl, Mode::AllBank);
                    self.segment =
                        Some((self.stats.column_commands, self.alu_busy_ticks, self.now));
                }
                let (alu_per_col, stream_per_col) = match self.alu_model {
                    AluModel::Pipelined { ops_per_tck } => {
                        let op = self.op_ticks(ops_per_tck, u32::from(script.cmd.chunk));
                        let ops: u64 = script
                            .phases
                            .iter()
                            .flat_map(|p| &p.steps)
                            .map(|st| u64::from(st.alu_ops))
                            .sum();
                        let cols: u64 = script
                            .phases
                            .iter()
                            .map(|p| u64::from(p.pipelined_rw.0 + p.pipelined_rw.1))
                            .sum();
                        (ops * op, cols * ctrl.pseudo_channel().timing().tccd_l)
                    }
                    AluModel::ColumnTriggered => (0, 1),
                };
                self.flights.push(Flight {
                    id,
                    script,
                    next: 0,
                    alu_done: self.alu_free,
                    last_write: None,
                    writes_done: 0,
                    ts,
                    reduces,
                    alu_per_col,
                    stream_per_col,
                });
            }
        }
        Ok(true)
    }

    /// The cycle a streamed flight whose writes are all issued is complete: its ALU work
    /// done and its last write followed by CWL + BL + tWR (a precharge could follow).
    fn flight_done(&self, f: &Flight, wr_to_pre: Cycle) -> Cycle {
        let alu = f.alu_done.div_ceil(ALU_TICKS_PER_TCK);
        match f.last_write {
            Some(_) => alu.max(f.writes_done + wr_to_pre),
            None => alu,
        }
    }

    fn flight_complete(&self, f: &Flight) -> bool {
        f.next >= f.script.cmd.col_count && f.last_write.is_none_or(|w| self.posted_issued > w)
    }

    /// Retires the flights complete by now (oldest first in the finished list).
    fn retire_flights(&mut self, ctrl: &Controller) {
        let wr_to_pre = ctrl.pseudo_channel().timing().wr_to_pre;
        let mut i = 0;
        while i < self.flights.len() {
            let f = &self.flights[i];
            if self.flight_complete(f) {
                let done = self.flight_done(f, wr_to_pre);
                if done <= self.now {
                    self.finished.push((f.id, done));
                    self.stats.macro_commands += 1;
                    self.flights.remove(i);
                    continue;
                }
            }
            i += 1;
        }
        if self.flights.is_empty() {
            if let Some((cols, alu, start)) = self.segment.take() {
                // The segment floor: its column commands at tCCD_L or its ALU work,
                // whichever is longer (jobs overlap only within a segment).
                let columns =
                    (self.stats.column_commands - cols) * ctrl.pseudo_channel().timing().tccd_l;
                let alu = (self.alu_busy_ticks - alu).div_ceil(ALU_TICKS_PER_TCK);
                self.stats.job_floor_cycles += columns.max(alu);
                self.stats.busy_cycles += self.now - start;
            }
        }
    }

    /// Whether the younger flight `y`'s next chunk touches a column the older flight `o`
    /// has still to stream (not yet read or written), one of them writing it.
    fn conflicts(&self, y: &Flight, o: &Flight) -> bool {
        let (yc, oc) = (&y.script.cmd, &o.script.cmd);
        if o.next >= oc.col_count {
            return false;
        }
        let cpr = u64::from(self.cols_per_row);
        let n = u64::from(u32::from(yc.chunk).min(yc.col_count - y.next));
        let ylo = u64::from(yc.col_start) + u64::from(y.next);
        let olo = u64::from(oc.col_start) + u64::from(o.next);
        let ohi = u64::from(oc.col_start) + u64::from(oc.col_count);
        let access = |sc: &PhaseScript| {
            (
                sc.instrs.iter().any(Instr::reads_memory),
                sc.instrs.iter().any(Instr::writes_memory),
            )
        };
        for (yp, ys) in yc.phases.iter().zip(&y.script.phases) {
            let (yr, yw) = access(ys);
            let yb = u64::from(yp.base_row) * cpr;
            for (op, os) in oc.phases.iter().zip(&o.script.phases) {
                let (or, ow) = access(os);
                if !(yw && (or || ow) || ow && yr) {
                    continue;
                }
                let ob = u64::from(op.base_row) * cpr;
                if yb + ylo < ob + ohi && ob + olo < yb + ylo + n {
                    return true;
                }
            }
        }
        false
    }

    /// Whether flight `f`'s next chunk would have to wait for the ALU to drain posted
    /// writes whose data is not produced yet: a read of a column with such a write, or a
    /// row in a subarray where such a write waits for another row.
    fn waits_on_posted(&self, f: &Flight) -> bool {
        let cmd = &f.script.cmd;
        let cpr = u64::from(self.cols_per_row);
        let n = u64::from(u32::from(cmd.chunk).min(cmd.col_count - f.next));
        let first = u64::from(cmd.col_start) + u64::from(f.next);
        let unready = || self.posted.iter().rev().take_while(|p| p.2 > self.now);
        if unready().next().is_none() {
            return false;
        }
        for (phase, sc) in cmd.phases.iter().zip(&f.script.phases) {
            let reads = sc.instrs.iter().any(Instr::reads_memory);
            let touches = reads || sc.instrs.iter().any(Instr::writes_memory);
            if !touches {
                continue;
            }
            for r in (first / cpr)..=((first + n - 1) / cpr) {
                let Ok(row) = u32::try_from(u64::from(phase.base_row) + r) else {
                    continue;
                };
                let prow = self.phys(row);
                let lo = if r == first / cpr {
                    (first % cpr) as u32
                } else {
                    0
                };
                let hi = ((first + n).min((r + 1) * cpr) - r * cpr) as u32;
                let sub = prow >> self.sub_shift;
                if unready().any(|p| {
                    reads && p.0 == prow && (lo..hi).contains(&p.1)
                        || p.0 != prow && p.0 >> self.sub_shift == sub
                }) {
                    return true;
                }
            }
        }
        false
    }

    /// The flight whose chunk runs next, if any may: the ALU-heavier one (ALU time per
    /// stream time) when the ALU's backlog is shorter than the lighter one's next chunk
    /// of column commands, else the lighter one; a younger flight that conflicts with the
    /// older one waits.
    fn pick(&self) -> Option<usize> {
        let open: Vec<usize> = (0..self.flights.len())
            .filter(|&i| {
                let f = &self.flights[i];
                f.next < f.script.cmd.col_count
                    && !self.flights[..i].iter().any(|o| self.conflicts(f, o))
            })
            .collect();
        // A flight that would wait on the ALU for posted writes yields to one that would
        // not.
        let ready: Vec<usize> = open
            .iter()
            .copied()
            .filter(|&i| !self.waits_on_posted(&self.flights[i]))
            .collect();
        let open = if ready.is_empty() { open } else { ready };
        match open[..] {
            [] => None,
            [i] => Some(i),
            [a, b, ..] => {
                let (fa, fb) = (&self.flights[a], &self.flights[b]);
                let a_heavier = u128::from(fa.alu_per_col) * u128::from(fb.stream_per_col.max(1))
                    >= u128::from(fb.alu_per_col) * u128::from(fa.stream_per_col.max(1));
                let (heavy, light) = if a_heavier { (a, b) } else { (b, a) };
                let fl = &self.flights[light];
                let n = u32::from(fl.script.cmd.chunk).min(fl.script.cmd.col_count - fl.next);
                let light_stream = u64::from(n) * fl.stream_per_col;
                let backlog = self.alu_ready().saturating_sub(self.now);
                Some(if backlog < light_stream { heavy } else { light })
            }
        }
    }

    /// Runs flight `i`'s next chunk.
    fn flight_chunk(&mut self, ctrl: &mut Controller, i: usize) -> Result<(), EngineError> {
        let script = self.flights[i].script.clone();
        let next = self.flights[i].next;
        let pushed = self.posted_pushed;
        let mut posted_before = 0;
        let n = self.run_chunk(ctrl, &script, None, next, &mut posted_before, None)?;
        let (alu_free, posted_pushed, issued, at) = (
            self.alu_free,
            self.posted_pushed,
            self.posted_issued,
            self.last_posted_at,
        );
        let f = &mut self.flights[i];
        f.next += n;
        f.alu_done = alu_free;
        if posted_pushed > pushed {
            f.last_write = Some(posted_pushed - 1);
            if issued == posted_pushed {
                // Its last write went out within the chunk.
                f.writes_done = at;
            }
        }
        Ok(())
    }

    /// Nothing may stream: issue the posted writes up to the oldest flight's last one
    /// (waiting for their data), or else wait for the first flight to complete.
    fn drain_step(&mut self, ctrl: &mut Controller) {
        let pending = self
            .flights
            .iter()
            .filter_map(|f| f.last_write)
            .filter(|&w| w >= self.posted_issued)
            .min();
        if let Some(last) = pending {
            let n = usize::try_from(last + 1 - self.posted_issued).unwrap_or(usize::MAX);
            self.flush_posted_oldest(ctrl, n);
            return;
        }
        let wr_to_pre = ctrl.pseudo_channel().timing().wr_to_pre;
        let first = self
            .flights
            .iter()
            .filter(|f| self.flight_complete(f))
            .map(|f| self.flight_done(f, wr_to_pre))
            .min();
        if let Some(t) = first {
            self.wait_for_alu(t);
        }
    }

    /// ALU ticks one operation takes under the pipelined model with `chunk` independent
    /// columns in flight: the ALU's rate, or the dependent-operation latency spread over
    /// the columns, whichever is slower.
    fn op_ticks(&self, ops_per_tck: u32, chunk: u32) -> u64 {
        let rate = ALU_TICKS_PER_TCK.div_ceil(u64::from(ops_per_tck.max(1)));
        let latency =
            (self.dependent_op_clocks * ALU_TICKS_PER_TCK).div_ceil(u64::from(chunk.max(1)));
        rate.max(latency)
    }

    /// One column of a phase under the pipelined model in program order: only
    /// instructions that touch the open row issue column commands; the ALU runs behind
    /// them, column after column.
    fn column_pipelined(
        &mut self,
        ctrl: &mut Controller,
        sc: &PhaseScript,
        single: Option<usize>,
        row: u32,
        col: u32,
        op_ticks: u64,
    ) {
        let banks = if single.is_some() {
            1
        } else {
            self.banks as u64
        };
        self.count_alu_work(sc, 1, op_ticks, banks);
        let staged = self.policy == RowPolicy::Staged && single.is_none() && sc.stageable;
        // (Under MASA, program-order phases write directly, as under program order.)
        for st in &sc.steps {
            self.step_pipelined(ctrl, st, single, row, col, op_ticks, staged);
        }
    }

    /// A row visit of `n` columns from `col` under [`RowPolicy::Staged`]: instruction by
    /// instruction, each for every column of the chunk (the ALU interleaves the chunk's
    /// independent columns, so the visit's reads of one instruction go back to back and
    /// its writes are posted together).
    fn visit_staged(
        &mut self,
        ctrl: &mut Controller,
        sc: &PhaseScript,
        row: u32,
        col: u32,
        n: u32,
        op_ticks: u64,
    ) {
        self.count_alu_work(sc, u64::from(n), op_ticks, self.banks as u64);
        for st in &sc.steps {
            for c in col..col + n {
                self.step_pipelined(ctrl, st, None, row, c, op_ticks, true);
            }
        }
    }

    fn count_alu_work(&mut self, sc: &PhaseScript, columns: u64, op_ticks: u64, banks: u64) {
        let ops = sc.alu_ops_per_column();
        self.alu_busy_ticks += ops * op_ticks * columns;
        self.stats.alu_bank_ops += ops * columns * banks;
        self.stats.alu_busy_cycles = self.alu_busy_ticks / ALU_TICKS_PER_TCK;
    }

    /// One instruction for one column under the pipelined model, `staged` through the
    /// staging buffer or in program order.
    #[allow(clippy::too_many_arguments)]
    fn step_pipelined(
        &mut self,
        ctrl: &mut Controller,
        st: &PipelinedStep,
        single: Option<usize>,
        row: u32,
        col: u32,
        op_ticks: u64,
        staged: bool,
    ) {
        let depth = match (staged, self.masa(single)) {
            (true, true) if self.decoupled(single) => self.decoupled_columns,
            (true, true) => MASA_READ_COLUMNS,
            (true, false) => STAGING_COLUMNS,
            (false, _) => 1,
        };
        let cost = u64::from(st.alu_ops) * op_ticks;
        let Some(op) = st.mem else {
            self.alu_free += cost;
            return;
        };
        if matches!(op, ColumnOp::Read | ColumnOp::ReadModifyWrite) {
            // The column lands in the operand latch (program order) or the staging buffer;
            // a full one holds the read until the ALU takes its oldest operand.
            while let Some(&taken) = self.operands.front() {
                if taken <= self.now {
                    self.operands.pop_front();
                } else if self.operands.len() >= depth {
                    self.wait_for_alu(taken);
                    self.operands.pop_front();
                } else {
                    break;
                }
            }
            let c = match single {
                None => Command::AbRd { col },
                Some(b) => Command::Rd {
                    bank: self.bank_id(b),
                    row,
                    col,
                },
            };
            let t = self.issue(ctrl, c);
            self.stats.column_commands += 1;
            let start = self.alu_free.max(t * ALU_TICKS_PER_TCK);
            self.operands.push_back(start.div_ceil(ALU_TICKS_PER_TCK));
            self.alu_free = start + cost;
        } else {
            self.alu_free += cost;
        }
        if matches!(op, ColumnOp::Write | ColumnOp::ReadModifyWrite) {
            let ready = self.alu_ready();
            if staged {
                let capacity = if self.decoupled(single) {
                    self.decoupled_columns
                } else if self.masa(single) {
                    MASA_WRITE_COLUMNS
                } else {
                    STAGING_COLUMNS
                };
                if self.posted.len() >= capacity {
                    if self.decoupled(single) {
                        // Full: the oldest half drains (waiting for its data), so the
                        // turnarounds are paid once per half buffer, not per write.
                        self.flush_posted_oldest(ctrl, capacity.div_ceil(2));
                    } else {
                        self.flush_posted(ctrl);
                    }
                }
                self.posted.push((row, col, ready));
                self.posted_pushed += 1;
                return;
            }
            self.wait_for_alu(ready);
            let c = match single {
                None => Command::AbWr { col },
                Some(b) => Command::Wr {
                    bank: self.bank_id(b),
                    row,
                    col,
                },
            };
            self.issue(ctrl, c);
            self.stats.column_commands += 1;
        }
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
    /// ordered after earlier jobs, and the latch of the register's reciprocal: see
    /// `scalar_slot`).
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
        self.stats.scalar_writes += 1;
        if self.policy.two_jobs() {
            // Ordered behind the queued jobs: it takes its slot once they are admitted
            // (the jobs in flight keep their own context's copy).
            self.queue.push_back(Queued::Scalar(start));
            return Ok(self.now.max(start));
        }
        self.now = self.now.max(start);
        self.scalar_slot(ctrl);
        Ok(self.now)
    }

    /// A scalar write's time from `now`. Column-triggered, the ALU works only inside
    /// column slots, so the reciprocal latch holds the stream for [`scalar_write_cycles`].
    /// Pipelined, the write takes its command slot and the latch goes on the ALU: its
    /// operations at the ALU's rate, in order with the work before it, and the reciprocal
    /// ready a dependent chain's latency after the write; ALU work given after the write
    /// starts no earlier (in-order ALU), work already given is not delayed.
    fn scalar_slot(&mut self, ctrl: &Controller) {
        let t = ctrl.pseudo_channel().timing();
        match self.alu_model {
            AluModel::ColumnTriggered => self.now += scalar_write_cycles(t),
            AluModel::Pipelined { ops_per_tck } => {
                let written = self.now;
                self.now += t.tccd_l;
                let rate = ALU_TICKS_PER_TCK.div_ceil(u64::from(ops_per_tck.max(1)));
                let issued = self.alu_free.max(written * ALU_TICKS_PER_TCK)
                    + u64::from(SCALAR_RECIPROCAL_OPS) * rate;
                let ready = (written + scalar_write_cycles(t)) * ALU_TICKS_PER_TCK;
                self.alu_free = issued.max(ready);
            }
        }
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
