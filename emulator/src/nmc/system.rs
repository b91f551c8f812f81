//! A memory system in NMC mode with the firmware attached: every pseudo-channel's
//! [`PcEngine`], device memory, the GPU host's side of the reduction protocol, and an
//! event queue that delivers completions to the firmware.
//!
//! Time is counted in DRAM clock cycles (tCK); the CP's [`Clock`] reads the same counter.
//!
//! Engines are independent in broadcast mode (no traffic crosses pseudo-channels), so a
//! job submitted at CP time `t` is simulated at once on every engine, each starting at
//! `max(t, engine free)`; the job's completion is the latest engine's finish. That is
//! exact for in-order per-channel engines and lets timing-only runs use every core.
//!
//! Reduction protocol (dissertation 6.3, SPEC 4.2): `reduce_partials` queues an
//! accumulator read-out on every engine; when the last one finished, the GPU host adds
//! the partials (in f64, in pseudo-channel then bank order) and, after
//! [`NmcSystemConfig::host_reduction_ns`], the sum reaches the firmware as
//! `PartialsReady`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle as CpCycle, DevAddr, DeviceMemory as FwMemory, DispatchError,
    DispatchRequest, DmaController, DmaError, KernelDispatcher, MemoryError, NmcController,
    NmcError, NmcTicket, TrackerController, TrackerError,
};
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::nmc::MacroCommand;
use nmcp_isa::t3::{DmaDescriptor, TrackerEntry};
use rayon::prelude::*;

use crate::hbm::{AddressMapping, Cycle, DramAddr, HbmPreset};
use crate::memory::DeviceMemory;
use crate::nmc::engine::{ColumnStore, EngineError, EngineStats, PcEngine};

/// Settings of an NMC run.
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
}

impl Default for NmcSystemConfig {
    fn default() -> Self {
        Self {
            ts_entries: 16,
            functional: true,
            queue_depth: 16,
            host_reduction_ns: 1000.0,
            parallel: true,
        }
    }
}

/// Totals of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct NmcTotals {
    /// Engine statistics summed over pseudo-channels.
    pub engines: EngineStats,
    /// DRAM commands of each kind summed over pseudo-channels (ACT, PRE, PREA, RD, WR,
    /// REF, REFpb, AB-ACT, AB-RD, AB-WR, UPD — in `CommandKind` order).
    pub commands_total: u64,
    /// Reductions the host performed.
    pub reductions: u64,
    /// Bytes the host read (accumulator read-outs).
    pub host_read_bytes: u64,
    /// Bytes the host wrote (scalar registers).
    pub host_write_bytes: u64,
}

struct Store<'a> {
    memory: &'a mut DeviceMemory,
    mapping: &'a AddressMapping,
    channels_per_stack: u32,
    pcs_per_channel: u32,
    banks_per_group: u32,
}

impl Store<'_> {
    fn addr(&self, pc: usize, bank: usize, row: u32, col: u32) -> u64 {
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
        // Coordinates come from the engine, which checked them against the geometry.
        self.mapping.encode(&d).unwrap_or(u64::MAX)
    }
}

impl ColumnStore for Store<'_> {
    fn read_column(&self, pc: usize, bank: usize, row: u32, col: u32) -> [u8; 32] {
        let mut b = [0u8; 32];
        self.memory.read(self.addr(pc, bank, row, col), &mut b);
        b
    }

    fn write_column(&mut self, pc: usize, bank: usize, row: u32, col: u32, data: &[u8; 32]) {
        let a = self.addr(pc, bank, row, col);
        self.memory.write(a, data);
    }
}

/// The NMC memory system plus the platform the firmware sees.
pub struct NmcSystem {
    preset: HbmPreset,
    mapping: AddressMapping,
    memory: DeviceMemory,
    engines: Vec<PcEngine>,
    config: NmcSystemConfig,
    now: Cycle,
    seq: u64,
    events: BinaryHeap<Reverse<(Cycle, u64)>>,
    payloads: std::collections::HashMap<u64, Event>,
    next_ticket: u32,
    outstanding: VecDeque<Cycle>,
    totals: NmcTotals,
    error: Option<EngineError>,
}

impl std::fmt::Debug for NmcSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NmcSystem")
            .field("preset", &self.preset.name)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl NmcSystem {
    /// A system for `preset` with `mapping`, empty memory, idle engines.
    pub fn new(preset: HbmPreset, mapping: AddressMapping, config: NmcSystemConfig) -> Self {
        let pcs = preset.pseudo_channels() as usize;
        let engines = (0..pcs)
            .map(|i| PcEngine::new(i, &preset, config.ts_entries))
            .collect();
        Self {
            preset,
            mapping,
            memory: DeviceMemory::new(),
            engines,
            config,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            payloads: Default::default(),
            next_ticket: 0,
            outstanding: VecDeque::new(),
            totals: NmcTotals::default(),
            error: None,
        }
    }

    /// The preset.
    pub fn preset(&self) -> &HbmPreset {
        &self.preset
    }

    /// The address mapping.
    pub fn mapping(&self) -> &AddressMapping {
        &self.mapping
    }

    /// Device memory (to place inputs and read results).
    pub fn memory(&self) -> &DeviceMemory {
        &self.memory
    }

    /// Device memory, mutable.
    pub fn memory_mut(&mut self) -> &mut DeviceMemory {
        &mut self.memory
    }

    /// The engines.
    pub fn engines(&self) -> &[PcEngine] {
        &self.engines
    }

    /// The engines, mutable (command logging).
    pub fn engines_mut(&mut self) -> &mut [PcEngine] {
        &mut self.engines
    }

    /// Current CP time in DRAM cycles.
    pub fn now(&self) -> Cycle {
        self.now
    }

    /// When the last engine finishes what it was given.
    pub fn engines_done(&self) -> Cycle {
        self.engines.iter().map(PcEngine::now).max().unwrap_or(0)
    }

    /// The first engine error a platform call hit (the call itself answered with a
    /// generic error code, since the firmware's error types cannot carry it).
    pub fn take_error(&mut self) -> Option<EngineError> {
        self.error.take()
    }

    /// Totals over the run so far.
    pub fn totals(&self) -> NmcTotals {
        let mut t = self.totals;
        let mut e = EngineStats::default();
        for s in self.engines.iter().map(PcEngine::stats) {
            e.macro_commands += s.macro_commands;
            e.column_commands += s.column_commands;
            e.activations += s.activations;
            e.refreshes += s.refreshes;
            e.scalar_writes += s.scalar_writes;
            e.accumulator_reads += s.accumulator_reads;
            e.mode_switches += s.mode_switches;
            e.busy_cycles += s.busy_cycles;
        }
        t.engines = e;
        t.commands_total = self
            .engines
            .iter()
            .map(|x| x.timing().command_counts().iter().sum::<u64>())
            .sum();
        t
    }

    fn push_event(&mut self, at: Cycle, ev: Event) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq)));
        self.payloads.insert(self.seq, ev);
    }

    /// The next event in time order, advancing the clock to it.
    pub fn pop_event(&mut self) -> Option<Event> {
        let Reverse((at, seq)) = self.events.pop()?;
        self.now = self.now.max(at);
        self.payloads.remove(&seq)
    }

    /// Delivers events to `fw` until none are left.
    ///
    /// # Errors
    /// The first firmware error, with the engine error behind it if there was one.
    pub fn run_firmware(&mut self, fw: &mut Firmware) -> Result<(), RunError> {
        while let Some(ev) = self.pop_event() {
            fw.handle(ev, self).map_err(|e| RunError {
                firmware: e,
                engine: self.error.take(),
            })?;
        }
        Ok(())
    }

    fn check_range(&self, ch: ChannelSet) -> Result<std::ops::Range<usize>, NmcError> {
        let first = usize::from(ch.first);
        let end = first + usize::from(ch.count);
        if ch.count == 0 || end > self.engines.len() {
            return Err(NmcError::OutOfRange);
        }
        Ok(first..end)
    }

    fn ticket(&mut self) -> NmcTicket {
        self.next_ticket = self.next_ticket.wrapping_add(1);
        NmcTicket(self.next_ticket)
    }
}

/// A firmware error and, when an engine caused it, the engine's reason.
#[derive(Debug)]
pub struct RunError {
    /// What the firmware reported.
    pub firmware: FirmwareError,
    /// The engine error behind it.
    pub engine: Option<EngineError>,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.engine {
            Some(e) => write!(f, "{} ({e})", self.firmware),
            None => write!(f, "{}", self.firmware),
        }
    }
}

impl std::error::Error for RunError {}

impl Clock for NmcSystem {
    fn now(&self) -> CpCycle {
        self.now
    }
}

impl FwMemory for NmcSystem {
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError> {
        let end = addr
            .checked_add(buf.len() as u64)
            .ok_or(MemoryError::OutOfRange)?;
        if end > self.preset.capacity_bytes() {
            return Err(MemoryError::OutOfRange);
        }
        self.memory.read(addr, buf);
        Ok(())
    }

    fn write(&mut self, addr: DevAddr, data: &[u8]) -> Result<(), MemoryError> {
        let end = addr
            .checked_add(data.len() as u64)
            .ok_or(MemoryError::OutOfRange)?;
        if end > self.preset.capacity_bytes() {
            return Err(MemoryError::OutOfRange);
        }
        self.memory.write(addr, data);
        Ok(())
    }
}

impl NmcController for NmcSystem {
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        let range = self.check_range(cmd.channels)?;
        let now = self.now;
        while self.outstanding.front().is_some_and(|&t| t <= now) {
            self.outstanding.pop_front();
        }
        if self.outstanding.len() >= self.config.queue_depth {
            return Err(NmcError::Busy);
        }
        let result: Result<Vec<Cycle>, EngineError> = if self.config.functional {
            let o = &self.preset.organisation;
            let mut store = Store {
                memory: &mut self.memory,
                mapping: &self.mapping,
                channels_per_stack: o.channels_per_stack,
                pcs_per_channel: o.pseudo_channels_per_channel,
                banks_per_group: o.banks_per_group,
            };
            self.engines[range]
                .iter_mut()
                .map(|e| e.run_macro(now, cmd, Some(&mut store)))
                .collect()
        } else if self.config.parallel {
            self.engines[range]
                .par_iter_mut()
                .map(|e| e.run_macro(now, cmd, None))
                .collect()
        } else {
            self.engines[range]
                .iter_mut()
                .map(|e| e.run_macro(now, cmd, None))
                .collect()
        };
        let done = match result {
            Ok(v) => v.into_iter().max().unwrap_or(now),
            Err(e) => {
                let code = match e {
                    EngineError::TsCapacity { .. } | EngineError::Invalid(_) => {
                        NmcError::Unsupported
                    }
                    _ => NmcError::OutOfRange,
                };
                self.error = Some(e);
                return Err(code);
            }
        };
        self.outstanding.push_back(done);
        let t = self.ticket();
        self.push_event(done, Event::NmcDone { ticket: t });
        Ok(t)
    }

    fn write_scalar(&mut self, channels: ChannelSet, reg: u8, bits: u32) -> Result<(), NmcError> {
        let range = self.check_range(channels)?;
        let now = self.now;
        for e in &mut self.engines[range] {
            if let Err(err) = e.write_scalar(now, reg, bits) {
                self.error = Some(err);
                return Err(NmcError::NoSuchRegister);
            }
            self.totals.host_write_bytes += 4;
        }
        Ok(())
    }

    fn reduce_partials(&mut self, channels: ChannelSet) -> Result<NmcTicket, NmcError> {
        let range = self.check_range(channels)?;
        let now = self.now;
        let mut sum = 0f64;
        let mut last = now;
        for e in &mut self.engines[range] {
            let (t, partials) = e.read_accumulators(now);
            last = last.max(t);
            sum += partials.iter().map(|&x| f64::from(x)).sum::<f64>();
            self.totals.host_read_bytes += 32 * partials.len() as u64;
        }
        self.totals.reductions += 1;
        let tck = self.preset.organisation.tck_ns.max(1e-6);
        let delay = (self.config.host_reduction_ns / tck).ceil() as Cycle;
        let t = self.ticket();
        self.push_event(
            last + delay,
            Event::PartialsReady {
                ticket: t,
                sum: sum as f32,
            },
        );
        Ok(t)
    }
}

impl KernelDispatcher for NmcSystem {
    fn dispatch(&mut self, _req: &DispatchRequest) -> Result<(), DispatchError> {
        Err(DispatchError::NoSuchQueue)
    }

    fn complete_without_dispatch(
        &mut self,
        _q: u8,
        _id: u64,
        _v: i64,
    ) -> Result<(), DispatchError> {
        Err(DispatchError::NoSuchQueue)
    }
}

impl DmaController for NmcSystem {
    fn program(&mut self, _engine: u8, _desc: &DmaDescriptor) -> Result<(), DmaError> {
        Err(DmaError::NoSuchEngine)
    }
}

impl TrackerController for NmcSystem {
    fn program(&mut self, _entry: &TrackerEntry) -> Result<(), TrackerError> {
        Err(TrackerError::Invalid)
    }
}
