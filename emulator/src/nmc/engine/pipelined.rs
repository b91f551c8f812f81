//! The pipelined ALU model: the ALU behind the column commands on its own clock, its
//! operand latch and staging buffer, and the posted writes of the staged policies.

use super::*;

impl NmcChannelEngine {
    /// Holds the command stream until `ready` (the pipelined ALU's data or latch).
    #[inline]
    pub(super) fn wait_for_alu(&mut self, ready: Cycle) {
        if ready > self.now {
            self.stats.alu_stall_cycles += ready - self.now;
            self.now = ready;
        }
    }

    /// Cycle at which the pipelined ALU has finished everything it was given.
    pub(super) fn alu_ready(&self) -> Cycle {
        self.alu_free.div_ceil(ALU_TICKS_PER_TCK)
    }

    /// Issues the posted writes of the row visit, in column order, each no earlier than
    /// its data.
    pub(super) fn flush_posted(&mut self, ctrl: &mut Controller) {
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
    pub(super) fn flush_posted_oldest(&mut self, ctrl: &mut Controller, n: usize) {
        let n = n.min(self.posted.len());
        if n == 0 {
            return;
        }
        let rest = self.posted.split_off(n);
        self.flush_posted(ctrl);
        self.posted = rest;
    }

    /// ALU ticks one operation takes under the pipelined model with `chunk` independent
    /// columns in flight: the ALU's rate, or the dependent-operation latency spread over
    /// the columns, whichever is slower.
    pub(super) fn op_ticks(&self, ops_per_tck: u32, chunk: u32) -> u64 {
        let rate = ALU_TICKS_PER_TCK.div_ceil(u64::from(ops_per_tck.max(1)));
        let latency =
            (self.dependent_op_clocks * ALU_TICKS_PER_TCK).div_ceil(u64::from(chunk.max(1)));
        rate.max(latency)
    }

    /// One column of a phase under the pipelined model in program order: only
    /// instructions that touch the open row issue column commands; the ALU runs behind
    /// them, column after column.
    pub(super) fn column_pipelined(
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
    pub(super) fn visit_staged(
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

    pub(super) fn count_alu_work(
        &mut self,
        sc: &PhaseScript,
        columns: u64,
        op_ticks: u64,
        banks: u64,
    ) {
        let ops = sc.alu_ops_per_column();
        self.alu_busy_ticks += ops * op_ticks * columns;
        self.stats.alu_bank_ops += ops * columns * banks;
        self.stats.alu_busy_cycles = self.alu_busy_ticks / ALU_TICKS_PER_TCK;
    }

    /// One instruction for one column under the pipelined model, `staged` through the
    /// staging buffer or in program order.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn step_pipelined(
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
}
