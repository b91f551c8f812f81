//! What an engine counts: commands, cycles by cause and ALU work ([`EngineStats`]).

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

pub(super) fn is_zero(n: &u64) -> bool {
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
