//! The engine's knobs: the ALU issue model ([`AluModel`]), the row-visit policy
//! ([`RowPolicy`]) and the sizes they imply (job contexts, ALU chunks, buffers), and the
//! MASA row layout ([`RowMap`]).

use nmcp_isa::nmc::{ALU_OPS_PER_SLOT, PIPELINED_OPS_PER_TCK, SCALAR_RECIPROCAL_OPS};

use crate::hbm::{Cycle, HbmPreset};

use super::engine::*;

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
/// for timing `t` (docs/calibration.md, "Operand and write buffers of the `masa-decoupled` row policy"): the stream cannot move a
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
    pub(super) ranges: Vec<(u32, u32, u32)>,
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
pub(super) const ALU_TICKS_PER_TCK: u64 = 2520;
