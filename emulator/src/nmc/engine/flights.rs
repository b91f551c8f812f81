//! Two jobs in flight ([`RowPolicy::MasaTwoJobs`]): the admission queue, the flights, and
//! the arbiter that interleaves their chunks.

use super::*;

/// A job or marker queued for [`RowPolicy::MasaTwoJobs`].
#[derive(Debug, Clone)]
pub(super) enum Queued {
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
pub(super) struct Flight {
    pub(super) id: u64,
    pub(super) script: std::sync::Arc<MacroScript>,
    /// The next chunk's first column (relative to `col_start`).
    pub(super) next: u32,
    /// ALU ticks at which its work is done (set with its last chunk).
    pub(super) alu_done: u64,
    /// Number of its last posted write, if it posted any.
    pub(super) last_write: Option<u64>,
    /// Cycle its last posted write (so far) was issued.
    pub(super) writes_done: Cycle,
    /// TS entries it uses.
    pub(super) ts: usize,
    /// Whether it accumulates (a REDUCE instruction).
    pub(super) reduces: bool,
    /// ALU ticks per column (at its chunk's rate) and stream cycles per column (its
    /// column commands at tCCD_L): the arbiter's weights.
    pub(super) alu_per_col: u64,
    pub(super) stream_per_col: u64,
}

impl NmcChannelEngine {
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
    pub(super) fn admit_next(&mut self, ctrl: &mut Controller) -> Result<bool, EngineError> {
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
    pub(super) fn flight_done(&self, f: &Flight, wr_to_pre: Cycle) -> Cycle {
        let alu = f.alu_done.div_ceil(ALU_TICKS_PER_TCK);
        match f.last_write {
            Some(_) => alu.max(f.writes_done + wr_to_pre),
            None => alu,
        }
    }

    pub(super) fn flight_complete(&self, f: &Flight) -> bool {
        f.next >= f.script.cmd.col_count && f.last_write.is_none_or(|w| self.posted_issued > w)
    }

    /// Retires the flights complete by now (oldest first in the finished list).
    pub(super) fn retire_flights(&mut self, ctrl: &Controller) {
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
    pub(super) fn conflicts(&self, y: &Flight, o: &Flight) -> bool {
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
    pub(super) fn waits_on_posted(&self, f: &Flight) -> bool {
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
    pub(super) fn pick(&self) -> Option<usize> {
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
    pub(super) fn flight_chunk(
        &mut self,
        ctrl: &mut Controller,
        i: usize,
    ) -> Result<(), EngineError> {
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
    pub(super) fn drain_step(&mut self, ctrl: &mut Controller) {
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
}
