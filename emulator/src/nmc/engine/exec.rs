//! Functional execution: every bank's ALU run on the bytes of device memory through a
//! [`ColumnStore`], and the scalar registers and accumulators the host reads and writes.

use super::*;

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

impl NmcChannelEngine {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn execute(
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
    pub(super) fn scalar_slot(&mut self, ctrl: &Controller) {
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
