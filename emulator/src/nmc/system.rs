//! A node's NMC block: the per-pseudo-channel engines, each driving its pseudo-channel's
//! memory controller, plus the GPU host's side of the reduction protocol.
//!
//! Times here are DRAM clock cycles (tCK); the node converts them to the one time axis.
//! The block holds no firmware and no event queue: the node's platform view calls it and
//! schedules the completions it returns.
//!
//! Engines are independent in broadcast mode (no traffic crosses pseudo-channels), so a
//! job submitted at `t` runs at once on every engine, each starting at
//! `max(t, engine free)`; the job's completion is the latest engine's finish. That is
//! exact because an engine owns its channel while it runs (the controller schedules
//! nothing then), and it lets timing-only runs use every core.
//!
//! Reduction protocol (dissertation 6.3, SPEC 4.2): `reduce_partials` queues an
//! accumulator read-out on every engine; when the last one finished, the GPU host adds
//! the partials (in f64, in pseudo-channel then bank order) and, after
//! [`NmcSystemConfig::host_reduction_ns`], the sum reaches the firmware as
//! `PartialsReady`.

use std::collections::VecDeque;

use nmcp_firmware::platform::{ChannelSet, NmcError};
use nmcp_isa::nmc::MacroCommand;
use rayon::prelude::*;

use crate::hbm::{AddressMapping, Cycle, DramAddr, HbmPreset};
use crate::memctrl::{Controller, ControllerConfig, MemCompletion, MemorySystem};
use crate::memory::DeviceMemory;
use crate::nmc::engine::{
    AluModel, ColumnStore, EngineError, EngineStats, MacroScript, NmcChannelEngine, RowPolicy,
};

/// Settings of a node's NMC block.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NmcSystemConfig {
    /// TS entries per bank ALU (256-bit each).
    pub ts_entries: usize,
    /// Execute the ALUs on data (otherwise timing only).
    pub functional: bool,
    /// Macro-commands an engine queue holds before `submit` answers `Busy`.
    pub queue_depth: usize,
    /// GPU-host time from the last partial read to the sum reaching the CP: the host
    /// noticing completion, the final add, and the write-back path (a calibration knob,
    /// see docs/calibration.md).
    pub host_reduction_ns: f64,
    /// Simulate engines on all cores (timing-only runs).
    pub parallel: bool,
    /// How the bank ALUs' instructions are issued (docs/calibration.md).
    pub alu_model: AluModel,
    /// How an engine orders a row visit's column commands.
    pub row_policy: RowPolicy,
    /// Timing-only runs whose every call is broadcast to all pseudo-channels: simulate
    /// pseudo-channel 0 and count it for all. Exact, because every engine then gets the
    /// same calls at the same cycles from the same state under the same preset (no
    /// per-channel refresh offset, no data-dependent timing), so their commands and
    /// cycles are identical; a test checks it against the full simulation. A call to a
    /// subset of channels is refused ([`NmcError::Unsupported`]). Ignored for functional
    /// runs.
    pub mirror_broadcast: bool,
    /// Logical to physical rows for every engine's commands (the MASA layout; `None`:
    /// identity).
    #[serde(skip)]
    pub row_map: Option<std::sync::Arc<crate::nmc::engine::RowMap>>,
}

impl Default for NmcSystemConfig {
    fn default() -> Self {
        Self {
            ts_entries: 16,
            functional: true,
            queue_depth: 16,
            host_reduction_ns: 1000.0,
            parallel: true,
            alu_model: AluModel::ColumnTriggered,
            row_policy: RowPolicy::ProgramOrder,
            mirror_broadcast: false,
            row_map: None,
        }
    }
}

/// Totals of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct NmcTotals {
    /// Engine statistics summed over pseudo-channels.
    pub engines: EngineStats,
    /// DRAM commands of every kind summed over pseudo-channels.
    pub commands_total: u64,
    /// Reductions the host performed.
    pub reductions: u64,
    /// Bytes the host read (accumulator read-outs).
    pub host_read_bytes: u64,
    /// Bytes the host wrote (scalar registers).
    pub host_write_bytes: u64,
}

/// Columns of device memory seen through the NMC mapping.
struct BankColumns<'a> {
    memory: &'a mut DeviceMemory,
    mapping: &'a AddressMapping,
    channels_per_stack: u32,
    pcs_per_channel: u32,
    banks_per_group: u32,
}

impl BankColumns<'_> {
    fn addr(&self, pc: usize, bank: usize, row: u32, col: u32) -> Result<u64, EngineError> {
        let pc = pc as u32;
        let per_stack = self.channels_per_stack * self.pcs_per_channel;
        let d = DramAddr {
            stack: pc / per_stack,
            channel: (pc % per_stack) / self.pcs_per_channel,
            pc: pc % self.pcs_per_channel,
            bank_group: bank as u32 / self.banks_per_group,
            bank: bank as u32 % self.banks_per_group,
            row,
            col,
        };
        self.mapping
            .encode(&d)
            .map_err(|e| EngineError::OutOfRange(format!("{e}")))
    }
}

fn column_error(addr: u64) -> EngineError {
    EngineError::OutOfRange(format!("column at {addr:#x} is outside device memory"))
}

impl ColumnStore for BankColumns<'_> {
    fn read_column(
        &self,
        pc: usize,
        bank: usize,
        row: u32,
        col: u32,
    ) -> Result<[u8; 32], EngineError> {
        let a = self.addr(pc, bank, row, col)?;
        let mut b = [0u8; 32];
        self.memory.read(a, &mut b).map_err(|_| column_error(a))?;
        Ok(b)
    }

    fn write_column(
        &mut self,
        pc: usize,
        bank: usize,
        row: u32,
        col: u32,
        data: &[u8; 32],
    ) -> Result<(), EngineError> {
        let a = self.addr(pc, bank, row, col)?;
        self.memory.write(a, data).map_err(|_| column_error(a))
    }
}

/// What an NMC block did since the last [`NmcBlock::take_trace`] (recorded only after
/// [`NmcBlock::enable_trace`]; cycles are DRAM cycles).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NmcTrace {
    /// Engine work: (pseudo-channel, start, end, what). A mirrored block records
    /// pseudo-channel 0 only (it stands for every channel).
    pub spans: Vec<(usize, Cycle, Cycle, String)>,
    /// The macro-command queue's occupancy: (cycle, commands submitted and not finished).
    pub queue: Vec<(Cycle, usize)>,
    /// Every DRAM command the controllers issued (the engines' and ordinary traffic's):
    /// (pseudo-channel, command).
    pub commands: Vec<(usize, crate::memctrl::controller::LoggedCommand)>,
}

/// What the deferred path ([`RowPolicy::MasaTwoJobs`]) reports once the engines have
/// simulated it: the caller's tag, the cycle, and for a reduction its sum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum NmcFinished {
    /// A macro-command is complete (it and every macro-command submitted before it).
    Job {
        /// The caller's tag.
        tag: u64,
        /// Completion cycle.
        at: Cycle,
        /// `Err` when the engines refused it while running.
        status: Result<(), NmcError>,
    },
    /// A reduction's sum reaches the firmware.
    Reduce {
        /// The caller's tag.
        tag: u64,
        /// Cycle the sum arrives (read-out plus the host's latency).
        at: Cycle,
        /// The sum.
        sum: f32,
        /// `Err` when the engines failed meanwhile.
        status: Result<(), NmcError>,
    },
}

/// A deferred job or reduction: id, tag, engines still to finish it, latest finish,
/// and the reduction's sum.
#[derive(Debug, Clone, Copy)]
struct Pending {
    id: u64,
    tag: u64,
    remaining: usize,
    done: Cycle,
    sum: Option<f32>,
}

/// The NMC engines of one node and the memory controllers they drive.
#[derive(Debug, Clone)]
pub struct NmcBlock {
    memory: MemorySystem,
    engines: Vec<NmcChannelEngine>,
    config: NmcSystemConfig,
    outstanding: VecDeque<Cycle>,
    totals: NmcTotals,
    error: Option<EngineError>,
    /// Pseudo-channel 0 stands for all ([`NmcSystemConfig::mirror_broadcast`]).
    mirror: bool,
    /// What is recorded for a timeline, when on.
    trace: Option<Box<NmcTrace>>,
    /// [`RowPolicy::MasaTwoJobs`]: ids handed to the engines so far.
    next_id: u64,
    /// Deferred jobs and reductions not reported yet, each in submission order.
    pending_jobs: VecDeque<Pending>,
    pending_reduces: VecDeque<Pending>,
    /// The last job completion reported (they are reported in order).
    last_job_done: Cycle,
}

impl NmcBlock {
    /// Engines for every pseudo-channel of `preset`, behind controllers with the preset's
    /// defaults, addressed through `mapping`.
    pub fn new(preset: &HbmPreset, mapping: AddressMapping, config: NmcSystemConfig) -> Self {
        let memory = MemorySystem::new(preset, mapping, ControllerConfig::from_preset(preset));
        let engines = (0..preset.pseudo_channels() as usize)
            .map(|i| {
                let mut e = NmcChannelEngine::with_model(
                    i,
                    preset,
                    config.ts_entries,
                    config.alu_model,
                    config.row_policy,
                );
                e.set_row_map(config.row_map.clone());
                e
            })
            .collect();
        let mirror = config.mirror_broadcast && !config.functional;
        Self {
            memory,
            engines,
            config,
            outstanding: VecDeque::new(),
            totals: NmcTotals::default(),
            error: None,
            mirror,
            trace: None,
            next_id: 0,
            pending_jobs: VecDeque::new(),
            pending_reduces: VecDeque::new(),
            last_job_done: 0,
        }
    }

    /// Whether macro-commands and reductions go through the deferred path
    /// ([`Self::submit_deferred`], [`Self::reduce_deferred`], [`Self::poll`]): the
    /// engines' row policy is [`RowPolicy::MasaTwoJobs`].
    pub fn is_deferred(&self) -> bool {
        self.config.row_policy.two_jobs()
    }

    /// Queues `cmd` on its channels at cycle `now` (executing it on data now when the
    /// block is functional: jobs execute in submission order); its completion comes from
    /// [`Self::poll`] with `tag`.
    ///
    /// # Errors
    /// As [`Self::submit`].
    pub fn submit_deferred(
        &mut self,
        now: Cycle,
        cmd: &MacroCommand,
        memory: &mut DeviceMemory,
        tag: u64,
    ) -> Result<(), NmcError> {
        let range = self.check_range(cmd.channels)?;
        self.retire(now);
        if self.outstanding.len() + self.pending_jobs.len() >= self.config.queue_depth {
            return Err(NmcError::Busy);
        }
        let script = std::sync::Arc::new(MacroScript::new(cmd).map_err(|e| self.fail(e))?);
        let range = self.simulated(range)?;
        let id = self.next_id;
        self.next_id += 1;
        let engines = &mut self.engines[range.clone()];
        let result = if self.config.functional {
            let preset = self.memory.preset();
            let o = &preset.organisation;
            let mut store = BankColumns {
                memory,
                mapping: self.memory.mapping(),
                channels_per_stack: o.channels_per_stack,
                pcs_per_channel: o.pseudo_channels_per_channel,
                banks_per_group: o.banks_per_group,
            };
            engines
                .iter_mut()
                .try_for_each(|e| e.execute_job(&mut store, &script))
        } else {
            Ok(())
        }
        .and_then(|()| {
            engines
                .iter_mut()
                .try_for_each(|e| e.enqueue_job(id, script.clone(), now))
        });
        if let Err(e) = result {
            return Err(self.fail(e));
        }
        self.pending_jobs.push_back(Pending {
            id,
            tag,
            remaining: range.len(),
            done: now,
            sum: None,
        });
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.queue
                .push((now, self.outstanding.len() + self.pending_jobs.len()));
        }
        Ok(())
    }

    /// Reads and clears every bank's accumulator on `channels` (the values now: jobs
    /// execute when submitted) and queues the read-out behind the jobs submitted before
    /// it; the sum arrives from [`Self::poll`] with `tag`.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`].
    pub fn reduce_deferred(
        &mut self,
        now: Cycle,
        channels: ChannelSet,
        tag: u64,
    ) -> Result<(), NmcError> {
        let range = self.check_range(channels)?;
        let range = self.simulated(range)?;
        let copies = self.copies();
        let id = self.next_id;
        self.next_id += 1;
        let mut sum = 0f64;
        for e in &mut self.engines[range.clone()] {
            let partials = e.enqueue_reduce(id, now);
            sum += partials.iter().map(|&x| f64::from(x)).sum::<f64>() * copies as f64;
            self.totals.host_read_bytes += 32 * partials.len() as u64 * copies;
        }
        self.totals.reductions += 1;
        self.pending_reduces.push_back(Pending {
            id,
            tag,
            remaining: range.len(),
            done: now,
            sum: Some(sum as f32),
        });
        Ok(())
    }

    /// Simulates the deferred work up to `horizon` (every submission up to it is known)
    /// and returns what finished, jobs in submission order, reductions in theirs.
    pub fn poll(&mut self, horizon: Cycle) -> Vec<NmcFinished> {
        let mut out = Vec::new();
        if !self.is_deferred() {
            return out;
        }
        let n = if self.mirror { 1 } else { self.engines.len() };
        let (_, _, controllers) = self.memory.split_for_nmc();
        let mut failed = None;
        for (e, c) in self.engines[..n].iter_mut().zip(controllers.iter_mut()) {
            if let Err(err) = e.advance(c, horizon) {
                failed = Some(err);
            }
            for (id, at) in e.take_finished() {
                if let Some(p) = self
                    .pending_jobs
                    .iter_mut()
                    .chain(self.pending_reduces.iter_mut())
                    .find(|p| p.id == id)
                {
                    p.remaining = p.remaining.saturating_sub(1);
                    p.done = p.done.max(at);
                }
            }
        }
        let status = match failed {
            Some(e) => {
                let code = self.fail(e);
                for p in self
                    .pending_jobs
                    .iter_mut()
                    .chain(self.pending_reduces.iter_mut())
                {
                    p.remaining = 0;
                }
                Err(code)
            }
            None => Ok(()),
        };
        while let Some(p) = self
            .pending_jobs
            .front()
            .filter(|p| p.remaining == 0)
            .copied()
        {
            self.pending_jobs.pop_front();
            let at = p.done.max(self.last_job_done);
            self.last_job_done = at;
            self.outstanding.push_back(at);
            out.push(NmcFinished::Job {
                tag: p.tag,
                at,
                status,
            });
        }
        let tck = self.memory.preset().organisation.tck_ns.max(1e-6);
        let delay = (self.config.host_reduction_ns / tck).ceil() as Cycle;
        while let Some(p) = self
            .pending_reduces
            .front()
            .filter(|p| p.remaining == 0)
            .copied()
        {
            self.pending_reduces.pop_front();
            out.push(NmcFinished::Reduce {
                tag: p.tag,
                at: p.done + delay,
                sum: p.sum.unwrap_or(0.0),
                status,
            });
        }
        out
    }

    /// The cycle at which [`Self::poll`] must run again (the engines stopped there with
    /// work left), if any.
    pub fn next_poll(&self) -> Option<Cycle> {
        let n = if self.mirror { 1 } else { self.engines.len() };
        self.engines[..n]
            .iter()
            .filter_map(NmcChannelEngine::next_poll)
            .min()
    }

    /// Runs the deferred work to the end (no further submissions) and returns it.
    fn settle(&mut self) -> Vec<NmcFinished> {
        self.poll(Cycle::MAX)
    }

    /// Starts recording engine spans, the command queue's occupancy and every DRAM
    /// command (the controllers' command logs) until [`Self::take_trace`] empties it.
    pub fn enable_trace(&mut self) {
        for c in self.memory.controllers_mut() {
            c.set_logging(true);
        }
        self.trace = Some(Box::default());
    }

    /// What was recorded since the last call (empty when recording is off); the
    /// controllers' command logs are emptied.
    /// Commands finished by `now` leave the queue first.
    pub fn take_trace(&mut self, now: Cycle) -> NmcTrace {
        if self.trace.is_none() {
            return NmcTrace::default();
        }
        self.retire(now);
        let Some(t) = self.trace.as_deref_mut() else {
            return NmcTrace::default();
        };
        let mut out = std::mem::take(t);
        for (pc, c) in self.memory.controllers_mut().iter_mut().enumerate() {
            out.commands.extend(c.log().iter().map(|l| (pc, *l)));
            c.set_logging(true);
        }
        out
    }

    /// Drops finished commands from the queue (at `now`), recording the occupancy.
    fn retire(&mut self, now: Cycle) {
        while let Some(&t) = self.outstanding.front().filter(|&&t| t <= now) {
            self.outstanding.pop_front();
            if let Some(tr) = self.trace.as_deref_mut() {
                tr.queue.push((t, self.outstanding.len()));
            }
        }
    }

    /// The settings.
    pub fn config(&self) -> &NmcSystemConfig {
        &self.config
    }

    /// The memory system (controllers, statistics, command logs) the engines drive.
    pub fn memory_system(&self) -> &MemorySystem {
        &self.memory
    }

    /// The memory system, mutable (command logging, ordinary traffic).
    pub fn memory_system_mut(&mut self) -> &mut MemorySystem {
        &mut self.memory
    }

    /// The preset.
    pub fn preset(&self) -> &HbmPreset {
        self.memory.preset()
    }

    /// The address mapping.
    pub fn mapping(&self) -> &AddressMapping {
        self.memory.mapping()
    }

    /// The engines.
    pub fn engines(&self) -> &[NmcChannelEngine] {
        &self.engines
    }

    /// When the last engine finishes what it was given.
    pub fn engines_done(&self) -> Cycle {
        self.engines
            .iter()
            .map(NmcChannelEngine::now)
            .max()
            .unwrap_or(0)
    }

    /// The first engine error a call hit (the call itself answered with a firmware error
    /// code, which cannot carry it).
    pub fn take_error(&mut self) -> Option<EngineError> {
        self.error.take()
    }

    /// What the DRAM did up to cycle `end`, for the energy model: every pseudo-channel's
    /// commands and state time, and the bank ALUs' lane operations (mirrored: pseudo-channel
    /// 0 counts for every one, as in [`Self::totals`]).
    pub fn dram_activity(&self, end: u64) -> crate::energy::DramActivity {
        let (n, copies) = if self.mirror {
            (1, self.engines.len() as u64)
        } else {
            (self.engines.len(), 1)
        };
        let controllers = self.memory.controllers();
        let mut a = crate::energy::DramActivity::from_controllers(
            controllers.get(..n).unwrap_or(controllers),
            end,
        );
        let lanes = u64::from(self.memory.preset().organisation.bytes_per_column / 4);
        a.nmc_lane_ops = self.engines[..n]
            .iter()
            .map(|e| e.stats().alu_bank_ops * lanes)
            .sum();
        a.times(copies)
    }

    /// Totals over the run so far.
    pub fn totals(&self) -> NmcTotals {
        let mut t = self.totals;
        let mut e = EngineStats::default();
        // Mirrored, pseudo-channel 0 counts for every one.
        let (engines, copies) = if self.mirror {
            (&self.engines[..1], self.engines.len() as u64)
        } else {
            (&self.engines[..], 1)
        };
        for s in engines.iter().map(NmcChannelEngine::stats) {
            e.macro_commands += s.macro_commands;
            e.column_commands += s.column_commands;
            e.activations += s.activations;
            e.refreshes += s.refreshes;
            e.scalar_writes += s.scalar_writes;
            e.accumulator_reads += s.accumulator_reads;
            e.mode_switches += s.mode_switches;
            e.busy_cycles += s.busy_cycles;
            e.column_cycles += s.column_cycles;
            e.row_cycles += s.row_cycles;
            e.refresh_cycles += s.refresh_cycles;
            e.alu_stall_cycles += s.alu_stall_cycles;
            e.alu_busy_cycles += s.alu_busy_cycles;
            e.alu_bank_ops += s.alu_bank_ops;
            e.visit_floor_cycles += s.visit_floor_cycles;
            e.subarray_selects += s.subarray_selects;
            e.subarray_select_cycles += s.subarray_select_cycles;
            e.job_floor_cycles += s.job_floor_cycles;
            e.rows_activated_ahead += s.rows_activated_ahead;
        }
        t.engines = e.times(copies);
        t.commands_total = self.memory.controllers()[..engines.len()]
            .iter()
            .map(|c| c.pseudo_channel().command_counts().iter().sum::<u64>())
            .sum::<u64>()
            * copies;
        t
    }

    /// The channels a call runs on: `range`, or only pseudo-channel 0 when mirrored
    /// (which needs `range` to be every channel).
    fn simulated(
        &mut self,
        range: std::ops::Range<usize>,
    ) -> Result<std::ops::Range<usize>, NmcError> {
        if !self.mirror {
            return Ok(range);
        }
        if range != (0..self.engines.len()) {
            self.error = Some(EngineError::Invalid(
                "a mirrored NMC block runs only commands broadcast to every pseudo-channel".into(),
            ));
            return Err(NmcError::Unsupported);
        }
        Ok(0..1)
    }

    /// How many channels each simulated one stands for.
    fn copies(&self) -> u64 {
        if self.mirror {
            self.engines.len() as u64
        } else {
            1
        }
    }

    fn check_range(&self, ch: ChannelSet) -> Result<std::ops::Range<usize>, NmcError> {
        let first = usize::from(ch.first);
        let end = first + usize::from(ch.count);
        if ch.count == 0 || end > self.engines.len() {
            return Err(NmcError::OutOfRange);
        }
        Ok(first..end)
    }

    fn fail(&mut self, e: EngineError) -> NmcError {
        let code = match e {
            EngineError::TsCapacity { .. } | EngineError::Invalid(_) => NmcError::Unsupported,
            _ => NmcError::OutOfRange,
        };
        self.error = Some(e);
        code
    }

    /// Room left in the command queue at cycle `now` (commands finished by then have
    /// left it).
    pub fn queue_room(&mut self, now: Cycle) -> usize {
        self.retire(now);
        self.config
            .queue_depth
            .saturating_sub(self.outstanding.len() + self.pending_jobs.len())
    }

    /// Checks, without running it, that the engines accept `cmd`: its channels exist, it
    /// validates, and it fits the ALUs (what a command queue checks when written).
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`], [`NmcError::Unsupported`].
    pub fn precheck(&mut self, cmd: &MacroCommand) -> Result<(), NmcError> {
        let range = self.check_range(cmd.channels)?;
        let script = MacroScript::new(cmd).map_err(|e| self.fail(e))?;
        if let Some(e) = self.engines.get(range.start) {
            if let Err(err) = e.admit(&script) {
                return Err(self.fail(err));
            }
        }
        Ok(())
    }

    /// Checks a scalar write without performing it.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`], [`NmcError::NoSuchRegister`].
    pub fn precheck_scalar(&self, channels: ChannelSet, reg: u8) -> Result<(), NmcError> {
        self.check_range(channels)?;
        if usize::from(reg) >= nmcp_isa::nmc::SCALAR_REGS as usize {
            return Err(NmcError::NoSuchRegister);
        }
        Ok(())
    }

    /// Checks a reduction request without performing it.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`].
    pub fn precheck_reduce(&self, channels: ChannelSet) -> Result<(), NmcError> {
        self.check_range(channels).map(|_| ())
    }

    /// Runs `cmd` on its channels from cycle `now` on (functionally on `memory` when the
    /// block is functional); returns the cycle the last channel finishes.
    ///
    /// # Errors
    /// [`NmcError::Busy`] when `queue_depth` commands are still running;
    /// [`NmcError::OutOfRange`] / [`NmcError::Unsupported`] for a command the engines
    /// refuse (the engine error is kept for [`Self::take_error`]).
    pub fn submit(
        &mut self,
        now: Cycle,
        cmd: &MacroCommand,
        memory: &mut DeviceMemory,
    ) -> Result<Cycle, NmcError> {
        if self.is_deferred() {
            // One job at a time through the deferred path: queued, then run to the end.
            self.submit_deferred(now, cmd, memory, u64::MAX)?;
            let mut done = now;
            for f in self.settle() {
                if let NmcFinished::Job { at, status, .. } = f {
                    status?;
                    done = at;
                }
            }
            return Ok(done);
        }
        let range = self.check_range(cmd.channels)?;
        self.retire(now);
        if self.outstanding.len() >= self.config.queue_depth {
            return Err(NmcError::Busy);
        }
        let script = MacroScript::new(cmd).map_err(|e| self.fail(e))?;
        let range = self.simulated(range)?;
        let first = range.start;
        let starts: Option<Vec<Cycle>> = self.trace.as_ref().map(|_| {
            self.engines[range.clone()]
                .iter()
                .map(|e| e.now().max(now))
                .collect()
        });
        let engines = &mut self.engines[range.clone()];
        let (preset, mapping, controllers) = self.memory.split_for_nmc();
        let controllers = &mut controllers[range];
        let result: Result<Vec<Cycle>, EngineError> = if self.config.functional {
            let o = &preset.organisation;
            let mut store = BankColumns {
                memory,
                mapping,
                channels_per_stack: o.channels_per_stack,
                pcs_per_channel: o.pseudo_channels_per_channel,
                banks_per_group: o.banks_per_group,
            };
            run_serial(engines, controllers, now, &script, Some(&mut store))
        } else if self.config.parallel {
            engines
                .par_iter_mut()
                .zip(controllers.par_iter_mut())
                .map(|(e, c)| e.run_macro(c, now, &script, None))
                .collect()
        } else {
            run_serial(engines, controllers, now, &script, None)
        };
        let done = match result {
            Ok(v) => {
                if let (Some(tr), Some(starts)) = (self.trace.as_deref_mut(), starts) {
                    let name = format!("macro {:?} x{} phases", cmd.mode, cmd.phases.len());
                    for (i, (&s, &e)) in starts.iter().zip(&v).enumerate() {
                        tr.spans.push((first + i, s, e, name.clone()));
                    }
                }
                v.into_iter().max().unwrap_or(now)
            }
            Err(e) => return Err(self.fail(e)),
        };
        self.outstanding.push_back(done);
        if let Some(tr) = self.trace.as_deref_mut() {
            tr.queue.push((now, self.outstanding.len()));
        }
        Ok(done)
    }

    /// Writes scalar register `reg` on `channels` from cycle `now` on.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`], [`NmcError::NoSuchRegister`].
    pub fn write_scalar(
        &mut self,
        now: Cycle,
        channels: ChannelSet,
        reg: u8,
        bits: u32,
    ) -> Result<(), NmcError> {
        let range = self.check_range(channels)?;
        let range = self.simulated(range)?;
        let copies = self.copies();
        let controllers = self.memory.controllers();
        for (e, c) in self.engines[range.clone()]
            .iter_mut()
            .zip(&controllers[range])
        {
            if let Err(err) = e.write_scalar(c, now, reg, bits) {
                self.error = Some(err);
                return Err(NmcError::NoSuchRegister);
            }
            self.totals.host_write_bytes += 4 * copies;
        }
        Ok(())
    }

    /// Reads and clears every bank's accumulator on `channels` from cycle `now` on and
    /// adds the partials as the GPU host does; returns the cycle the sum reaches the
    /// firmware (after the host's own latency) and the sum.
    ///
    /// # Errors
    /// [`NmcError::OutOfRange`].
    pub fn reduce_partials(
        &mut self,
        now: Cycle,
        channels: ChannelSet,
    ) -> Result<(Cycle, f32), NmcError> {
        if self.is_deferred() {
            self.reduce_deferred(now, channels, u64::MAX)?;
            let mut out = (now, 0.0);
            for f in self.settle() {
                if let NmcFinished::Reduce {
                    at, sum, status, ..
                } = f
                {
                    status?;
                    out = (at, sum);
                }
            }
            return Ok(out);
        }
        let range = self.check_range(channels)?;
        let range = self.simulated(range)?;
        let copies = self.copies();
        let mut sum = 0f64;
        let mut last = now;
        let controllers = self.memory.controllers();
        let first = range.start;
        for (i, (e, c)) in self.engines[range.clone()]
            .iter_mut()
            .zip(&controllers[range])
            .enumerate()
        {
            let begin = e.now().max(now);
            let (t, partials) = e.read_accumulators(c, now);
            if let Some(tr) = self.trace.as_deref_mut() {
                tr.spans
                    .push((first + i, begin, t, "accumulator read-out".to_string()));
            }
            last = last.max(t);
            sum += partials.iter().map(|&x| f64::from(x)).sum::<f64>() * copies as f64;
            self.totals.host_read_bytes += 32 * partials.len() as u64 * copies;
        }
        self.totals.reductions += 1;
        let tck = self.memory.preset().organisation.tck_ns.max(1e-6);
        let delay = (self.config.host_reduction_ns / tck).ceil() as Cycle;
        Ok((last + delay, sum as f32))
    }

    /// Hands back, from cycle `now` on, every channel whose engine is idle by then and
    /// whose controller has ordinary requests waiting; returns the cycle normal scheduling
    /// resumes on each channel it released, as (pseudo-channel, cycle).
    pub fn release_idle(&mut self, now: Cycle) -> Vec<(usize, Cycle)> {
        let mut out = Vec::new();
        let mem_now = self.memory.now();
        let controllers = self.memory.controllers_mut();
        for (i, (e, c)) in self
            .engines
            .iter_mut()
            .zip(controllers.iter_mut())
            .enumerate()
        {
            if e.owns_channel() && e.now() <= now && !e.has_deferred_work() && !c.is_idle() {
                let at = e.now().max(mem_now);
                out.push((i, e.release(c, at)));
            }
        }
        for &(pc, at) in &out {
            self.memory.wake_at(pc, at);
        }
        out
    }

    /// The earliest cycle at which an engine that owns its channel is idle while ordinary
    /// requests wait there (it hands the channel back then).
    fn next_handback(&self) -> Option<Cycle> {
        self.engines
            .iter()
            .zip(self.memory.controllers())
            .filter(|(e, c)| e.owns_channel() && !e.has_deferred_work() && !c.is_idle())
            .map(|(e, _)| e.now().max(self.memory.now()))
            .min()
    }

    /// Whether ordinary requests are queued or in flight (otherwise the block has nothing
    /// to do on its own but refresh, which [`Self::advance_until`] catches up on).
    pub fn has_traffic(&self) -> bool {
        !self.memory.is_idle()
    }

    /// When anything next happens on the block's own initiative: the memory system's next
    /// step, or a hand-back.
    pub fn next_wake(&self) -> Option<Cycle> {
        match (self.memory.next_wake(), self.next_handback()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs ordinary traffic up to `until`, handing channels back from idle engines when
    /// requests wait for them; finished requests are appended to `out`.
    pub fn advance_until(&mut self, until: Cycle, out: &mut Vec<MemCompletion>) {
        loop {
            match self.next_handback().filter(|&h| h <= until) {
                Some(h) => {
                    // Run the memory system up to the hand-back, then hand back.
                    if h > self.memory.now() {
                        self.memory.advance_until(h - 1, out);
                    }
                    self.release_idle(h);
                }
                None => {
                    self.memory.advance_until(until, out);
                    // Requests that arrived meanwhile may wait on an idle engine's channel.
                    if self.next_handback().is_none_or(|h| h > until) {
                        break;
                    }
                }
            }
        }
    }
}

fn run_serial<'s>(
    engines: &mut [NmcChannelEngine],
    controllers: &mut [Controller],
    now: Cycle,
    script: &MacroScript,
    mut store: Option<&mut (dyn ColumnStore + 's)>,
) -> Result<Vec<Cycle>, EngineError> {
    let mut done = Vec::with_capacity(engines.len());
    for (e, c) in engines.iter_mut().zip(controllers.iter_mut()) {
        done.push(e.run_macro(c, now, script, store.as_deref_mut())?);
    }
    Ok(done)
}

/// The NMC block on the one time axis: its memory system's ordinary traffic and the
/// hand-backs of idle engines (macro-commands themselves run when submitted, see the
/// module documentation).
impl crate::sim::Component for NmcBlock {
    type Output = MemCompletion;

    fn next_wake(&self) -> Option<crate::sim::Tick> {
        let clock = self.memory.clock();
        NmcBlock::next_wake(self).map(|c| clock.tick_of(c))
    }

    fn advance(&mut self, until: crate::sim::Tick, out: &mut Vec<MemCompletion>) {
        let c = self.memory.clock().cycle_at(until);
        self.advance_until(c, out);
    }
}
