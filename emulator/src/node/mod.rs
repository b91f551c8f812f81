//! One GPU node: its CP firmware, its GPU model, its AQL queues, its device memory, its
//! HBM with memory controllers and NMC engines (and, with T3, its DMA engines and tracker).
//! It replaces the two single-purpose systems the emulator had (a CP with queues and a
//! GEMM model; an NMC memory system with the LAMB sequencer), so one node type serves
//! GOLDYLOC, NMC LAMB and T3, and a [`System`](crate::system::System) holds N of them on
//! one time axis.
//!
//! # The firmware's time
//! A handler starts when its event is due and the CP is free. The platform view
//! ([`platform::NodePlatform`]) borrows the node's parts while it runs — device memory
//! reads and writes take effect at once; hardware calls (kernel launches, NMC commands,
//! scalar writes, reductions) are accepted or refused at once and take effect when the
//! handler ends. The handler's work counters are charged to the CP's timeline by
//! [`cost`]; its end is `start + cycles / CP clock`.

pub mod cost;
pub mod platform;

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use nmcp_firmware::cp::{CdPredictor, CpAction, CpConfig, CpError, CpRecord, CpWork, CuResources};
use nmcp_firmware::nmc::LambJob;
use nmcp_firmware::platform::{MemoryError, NmcTicket};
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::aql::{self, DeviceRange, QueueConfig, QueueTable, AQL_PACKET_BYTES, MAX_QUEUES};
use nmcp_isa::nmc::MacroCommand;

use crate::gpu::queue::{self, QueueDump, QueueError, INVALID_HEADER};
use crate::gpu::{GpuEvent, KernelEngine, KernelLaunch, Nanos};
use crate::hbm::{AddressMapping, HbmPreset};
use crate::memory::DeviceMemory;
use crate::nmc::engine::EngineError;
use crate::nmc::system::{NmcBlock, NmcFinished, NmcSystemConfig};
use crate::sim::time::{ns_to_tick, tick_to_ns};
use crate::sim::{ClockDomain, Component, EventQueue, Tick};

pub use cost::{FirmwareCost, FirmwareWork, SequencerCostModel};

/// Default device memory of a CP node: 256 MiB at 256 MiB (the null page and low
/// addresses stay unmapped, so a zero kernel object is out of range).
pub const DEFAULT_DEVICE: DeviceRange = DeviceRange {
    base: 0x1000_0000,
    len: 0x1000_0000,
};
/// Bytes at the top of device memory reserved for queue rings and index words.
pub const SYSTEM_AREA_BYTES: u64 = 16 << 20;

/// Priority of firmware events in the system's queue; events that waited for a busy CP
/// are re-queued with [`DEFERRED_PRIORITY`] so they keep their order ahead of events
/// that were due later.
pub const EVENT_PRIORITY: u8 = 1;
/// See [`EVENT_PRIORITY`].
pub const DEFERRED_PRIORITY: u8 = 0;

/// A firmware event for one node.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SysEvent {
    /// The node it is for.
    pub node: usize,
    /// The event.
    pub event: Event,
}

/// A node's HBM with NMC engines.
#[derive(Debug, Clone)]
pub struct NmcNodeConfig {
    /// The HBM preset.
    pub preset: HbmPreset,
    /// The address mapping the engines' functional store and ordinary traffic use.
    pub mapping: AddressMapping,
    /// Engine settings.
    pub system: NmcSystemConfig,
}

/// How to build a [`GpuNode`].
#[derive(Debug, Clone)]
pub struct GpuNodeConfig {
    /// Device memory the firmware and the queues see.
    pub device: DeviceRange,
    /// AQL queues (0 = a node whose CP runs no queues, e.g. NMC only; at most 32).
    pub queues: usize,
    /// Ring size in packets (power of two).
    pub ring_packets: u32,
    /// What the firmware's work costs on the CP.
    pub cost: FirmwareCost,
    /// GPU resources the CP computes occupancy with.
    pub resources: CuResources,
    /// CD predictor.
    pub predictor: CdPredictor,
    /// GOLDYLOC's concurrency control in the firmware CP (`false`: the baseline CP that
    /// dispatches every kernel as it reaches a queue head; see `CpConfig`).
    pub concurrency_control: bool,
    /// GEMM groups release the next decision when their members have placed all their
    /// workgroups, not when they complete (`CpConfig::release_group_on_dispatch`).
    pub release_group_on_dispatch: bool,
    /// Time a workgroup of a non-GEMM kernel takes when its packet gives none.
    pub non_gemm_workgroup_ns: Nanos,
    /// HBM with NMC engines, if the node has them.
    pub nmc: Option<NmcNodeConfig>,
}

impl Default for GpuNodeConfig {
    fn default() -> Self {
        Self {
            device: DEFAULT_DEVICE,
            queues: 4,
            ring_packets: 64,
            cost: FirmwareCost::default(),
            resources: CuResources::MI100,
            predictor: CdPredictor::default(),
            concurrency_control: true,
            release_group_on_dispatch: false,
            non_gemm_workgroup_ns: 2_000.0,
            nmc: None,
        }
    }
}

impl GpuNodeConfig {
    /// A node with NMC engines on `preset` and no AQL queues: device memory is the whole
    /// HBM.
    pub fn nmc_only(preset: HbmPreset, mapping: AddressMapping, system: NmcSystemConfig) -> Self {
        Self {
            device: DeviceRange {
                base: 0,
                len: preset.capacity_bytes(),
            },
            queues: 0,
            nmc: Some(NmcNodeConfig {
                preset,
                mapping,
                system,
            }),
            ..Self::default()
        }
    }
}

/// Why a node could not be built or loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeError {
    /// Bad configuration.
    Config(String),
    /// The CP refused the configuration.
    Cp(CpError),
    /// Device memory.
    Memory(MemoryError),
    /// A queue.
    Queue(QueueError),
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(s) => f.write_str(s),
            Self::Cp(e) => write!(f, "CP configuration: {e}"),
            Self::Memory(e) => write!(f, "device memory: {e}"),
            Self::Queue(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for NodeError {}

/// What happened to one enqueued packet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PacketOutcome {
    /// Queue.
    pub queue: u8,
    /// Dispatch id.
    pub dispatch_id: u64,
    /// When the producer enqueued it.
    pub enqueued_at: Nanos,
    /// The CP's last action on it.
    pub action: Option<CpAction>,
    /// Times it was dispatched (must be 0 or 1).
    pub dispatches: u32,
    /// Times it completed, by running or without (must end at 1).
    pub completions: u32,
    /// Kernel object it ran with.
    pub kernel_object: Option<u64>,
    /// When its kernel was launched (the CP handler that dispatched it ended).
    pub launched_at: Option<Nanos>,
    /// When its last workgroup was placed.
    pub all_dispatched_at: Option<Nanos>,
    /// When it completed (kernel finished, or the CP completed it without a dispatch).
    pub completed_at: Option<Nanos>,
    /// Value stored into its completion signal by a completion without dispatch.
    pub completion_value: Option<i64>,
}

/// Totals of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunSummary {
    /// Time of the last event, ns.
    pub end: Nanos,
    /// Firmware events handled.
    pub events: u64,
    /// CP cycles charged.
    pub cp_cycles: u64,
    /// CP busy time, ns.
    pub cp_busy_ns: Nanos,
    /// Firmware handler errors (the firmware stays consistent; counted, not fatal).
    pub handler_errors: u64,
    /// The run stopped at its step limit with work left.
    pub truncated: bool,
    /// The most CP cycles one handler took.
    pub max_handler_cycles: u64,
}

impl RunSummary {
    /// Adds another node's totals (ends and maxima are maxima, counts add).
    pub fn merge(&mut self, o: &RunSummary) {
        self.end = self.end.max(o.end);
        self.events += o.events;
        self.cp_cycles += o.cp_cycles;
        self.cp_busy_ns += o.cp_busy_ns;
        self.handler_errors += o.handler_errors;
        self.truncated |= o.truncated;
        self.max_handler_cycles = self.max_handler_cycles.max(o.max_handler_cycles);
    }
}

#[derive(Debug, Clone, Copy)]
struct Launched {
    queue: u8,
    dispatch_id: u64,
}

/// An NMC call a handler made; it takes effect when the handler ends.
#[derive(Debug, Clone)]
enum NmcOp {
    Submit(NmcTicket, Box<MacroCommand>),
    Scalar(nmcp_firmware::platform::ChannelSet, u8, u32),
    Reduce(NmcTicket, nmcp_firmware::platform::ChannelSet),
}

/// The hardware blocks of a node: what the firmware's platform view borrows.
#[derive(Debug)]
pub struct NodeParts<E: KernelEngine> {
    /// Doorbells rung and not yet read through the CP's doorbell bitmap: (tick, queue).
    doorbells_rung: Vec<(Tick, u8)>,
    memory: DeviceMemory,
    queues: Vec<QueueConfig>,
    gpu: E,
    nmc: Option<NmcBlock>,
    cost: FirmwareCost,
    cp_clock: ClockDomain,
    dram_clock: ClockDomain,
    non_gemm_workgroup_ns: Nanos,
    next_tag: u64,
    pending_launches: Vec<(u64, KernelLaunch)>,
    launched: HashMap<u64, Launched>,
    dispatching: Vec<Option<u64>>,
    completed_in_handler: Vec<(u8, u64)>,
    outcomes: BTreeMap<(u8, u64), PacketOutcome>,
    next_ticket: u32,
    nmc_ops: Vec<NmcOp>,
    nmc_error: Option<EngineError>,
    mem_done: Vec<crate::memctrl::MemCompletion>,
    /// The queues' area offered to the CP as mapped words, with `fifo` as the
    /// dispatcher's request FIFO (its fast path, as on the board); off: the general path.
    mapped: bool,
    /// The dispatcher's request FIFO the CP's steady lane writes in place.
    fifo: heapless::Vec<nmcp_firmware::platform::DispatchRequest, MAX_QUEUES>,
}

/// One GPU: firmware plus hardware.
#[derive(Debug)]
pub struct GpuNode<E: KernelEngine> {
    index: usize,
    firmware: Firmware,
    parts: NodeParts<E>,
    cp_free_at: Tick,
    records: Vec<(Nanos, CpRecord)>,
    summary: RunSummary,
    last_error: Option<FirmwareError>,
}

impl<E: KernelEngine> GpuNode<E> {
    /// Builds node `index`: lays out its queues at the top of device memory and
    /// configures the firmware CP (when it has queues) and its NMC engines (when it has
    /// HBM).
    ///
    /// # Errors
    /// [`NodeError`] for a bad configuration.
    pub fn new(index: usize, config: GpuNodeConfig, gpu: E) -> Result<Self, NodeError> {
        if config.queues > MAX_QUEUES {
            return Err(NodeError::Config(format!(
                "queue count {} outside 0..={MAX_QUEUES}",
                config.queues
            )));
        }
        let mut memory = DeviceMemory::new(config.device);
        let mut firmware = Firmware::default();
        let mut queues = Vec::new();
        if config.queues > 0 {
            if !config.ring_packets.is_power_of_two() {
                return Err(NodeError::Config(format!(
                    "ring size {} is not a power of two",
                    config.ring_packets
                )));
            }
            let area = queue::queue_area_bytes(config.queues, config.ring_packets);
            if area > SYSTEM_AREA_BYTES {
                return Err(NodeError::Config(format!(
                    "queues need {area} bytes; the system area is {SYSTEM_AREA_BYTES} bytes"
                )));
            }
            if config.device.len < SYSTEM_AREA_BYTES {
                return Err(NodeError::Config(format!(
                    "device memory of {} bytes is smaller than the {SYSTEM_AREA_BYTES}-byte system area its top holds (the queue rings); give at least that",
                    config.device.len
                )));
            }
            let base = config
                .device
                .base
                .checked_add(config.device.len - SYSTEM_AREA_BYTES)
                .filter(|_| config.device.base.checked_add(config.device.len).is_some())
                .ok_or_else(|| {
                    NodeError::Config(format!(
                        "device memory at {:#x} of {} bytes ends past the 64-bit address space",
                        config.device.base, config.device.len
                    ))
                })?;
            queues = queue::layout_queues(&mut memory, base, config.queues, config.ring_packets)
                .map_err(NodeError::Memory)?;
            // The rings and index words at a fixed address, as a hardware CP maps them:
            // the view its fast path reads (platform.rs).
            memory.map_words(base, area).map_err(NodeError::Memory)?;
            firmware
                .cp
                .configure(CpConfig {
                    queues: QueueTable::from_slice(&queues)
                        .map_err(|e| NodeError::Config(format!("CP queue table: {e}")))?,
                    device: config.device,
                    resources: config.resources,
                    predictor: config.predictor,
                    concurrency_control: config.concurrency_control,
                    release_group_on_dispatch: config.release_group_on_dispatch,
                })
                .map_err(NodeError::Cp)?;
        }
        let (nmc, dram_clock) = match config.nmc {
            Some(n) => {
                if config.device.base > 0 || config.device.len < n.preset.capacity_bytes() {
                    return Err(NodeError::Config(format!(
                        "device memory {:#x}+{:#x} does not cover the HBM's {} bytes",
                        config.device.base,
                        config.device.len,
                        n.preset.capacity_bytes()
                    )));
                }
                let clock = ClockDomain::from_period_ns(n.preset.organisation.tck_ns);
                (Some(NmcBlock::new(&n.preset, n.mapping, n.system)), clock)
            }
            None => (None, ClockDomain::from_hz(1_000_000_000)),
        };
        Ok(Self {
            index,
            firmware,
            parts: NodeParts {
                doorbells_rung: Vec::new(),
                memory,
                dispatching: vec![None; queues.len()],
                queues,
                gpu,
                nmc,
                cost: config.cost,
                cp_clock: config.cost.clock(),
                dram_clock,
                non_gemm_workgroup_ns: config.non_gemm_workgroup_ns,
                next_tag: 0,
                pending_launches: Vec::new(),
                launched: HashMap::new(),
                completed_in_handler: Vec::new(),
                outcomes: BTreeMap::new(),
                next_ticket: 0,
                nmc_ops: Vec::new(),
                nmc_error: None,
                mem_done: Vec::new(),
                mapped: true,
                fifo: heapless::Vec::new(),
            },
            cp_free_at: 0,
            records: Vec::new(),
            summary: RunSummary::default(),
            last_error: None,
        })
    }

    /// Offers the queues' area to the CP as mapped words (the default: the path the
    /// board takes and is charged for) or not (every word through `read`: the general
    /// path); returns the previous setting.
    pub fn set_mapped_view(&mut self, mapped: bool) -> bool {
        std::mem::replace(&mut self.parts.mapped, mapped)
    }

    /// The node's index in its system.
    pub fn index(&self) -> usize {
        self.index
    }

    /// First address of the reserved system area (rings, index words).
    pub fn system_area_base(&self) -> u64 {
        let d = self.parts.memory.range();
        d.base + d.len - SYSTEM_AREA_BYTES
    }

    /// Device memory.
    pub fn memory(&self) -> &DeviceMemory {
        &self.parts.memory
    }

    /// Device memory, writable (to place extension records, signals, tensors...).
    pub fn memory_mut(&mut self) -> &mut DeviceMemory {
        &mut self.parts.memory
    }

    /// The queue descriptors.
    pub fn queues(&self) -> &[QueueConfig] {
        &self.parts.queues
    }

    /// The GPU model.
    pub fn engine(&self) -> &E {
        &self.parts.gpu
    }

    /// The NMC block, if the node has HBM with NMC engines.
    pub fn nmc(&self) -> Option<&NmcBlock> {
        self.parts.nmc.as_ref()
    }

    /// The NMC block, mutable (command logs, ordinary traffic).
    pub fn nmc_mut(&mut self) -> Option<&mut NmcBlock> {
        self.parts.nmc.as_mut()
    }

    /// The first engine error behind an NMC failure the firmware saw.
    pub fn take_nmc_error(&mut self) -> Option<EngineError> {
        self.parts
            .nmc_error
            .take()
            .or_else(|| self.parts.nmc.as_mut().and_then(NmcBlock::take_error))
    }

    /// The firmware.
    pub fn firmware(&self) -> &Firmware {
        &self.firmware
    }

    /// Per-packet outcomes, by (queue, dispatch id).
    pub fn outcomes(&self) -> &BTreeMap<(u8, u64), PacketOutcome> {
        &self.parts.outcomes
    }

    /// The CP's log with the time each record's handler ended.
    pub fn records(&self) -> &[(Nanos, CpRecord)] {
        &self.records
    }

    /// Totals so far.
    pub fn summary(&self) -> RunSummary {
        self.summary
    }

    /// The CP's work counters.
    pub fn cp_work(&self) -> CpWork {
        self.firmware.cp.work()
    }

    /// The last error a firmware handler returned.
    pub fn last_error(&self) -> Option<FirmwareError> {
        self.last_error
    }

    /// When the CP is free for its next handler.
    pub fn cp_free_at(&self) -> Tick {
        self.cp_free_at
    }

    /// Ordinary memory requests of the node's HBM that finished since the last call.
    pub fn take_mem_completions(&mut self) -> Vec<crate::memctrl::MemCompletion> {
        std::mem::take(&mut self.parts.mem_done)
    }

    /// The DRAM clock (1 GHz when the node has no HBM model).
    pub fn dram_clock(&self) -> ClockDomain {
        self.parts.dram_clock
    }

    /// Enqueues a raw packet on `queue` at `at` ns with the producer protocol, after
    /// setting its completion signal (if it has one in device memory) to 1. The doorbell
    /// is rung separately.
    ///
    /// # Errors
    /// [`NodeError`] if the queue does not exist or is full.
    pub fn enqueue(
        &mut self,
        queue: u8,
        packet: &[u8; AQL_PACKET_BYTES],
        at: Nanos,
    ) -> Result<u64, NodeError> {
        let q = *self
            .parts
            .queues
            .get(usize::from(queue))
            .ok_or_else(|| NodeError::Config(format!("no queue {queue}")))?;
        let signal = u64::from_le_bytes(
            packet[aql::offset::COMPLETION_SIGNAL..]
                .try_into()
                .unwrap_or([0; 8]),
        );
        let mem = &mut self.parts.memory;
        // The producer initialises the completion signal: a signal it set to the number
        // of packets sharing it (> 0) is left alone; an unset one (<= 0) starts at 1.
        if signal != 0
            && mem.range().contains(signal, 8)
            && mem.read_signal(signal).map_err(NodeError::Memory)? <= 0
        {
            mem.write_signal(signal, 1).map_err(NodeError::Memory)?;
        }
        let id = queue::enqueue(mem, &q, packet).map_err(NodeError::Queue)?;
        self.parts.outcomes.insert(
            (queue, id),
            PacketOutcome {
                queue,
                dispatch_id: id,
                enqueued_at: at,
                ..PacketOutcome::default()
            },
        );
        Ok(id)
    }

    /// Records that `queue`'s doorbell rings at tick `at`: the CP's doorbell bitmap
    /// (`KernelDispatcher::take_doorbells`) shows it to any handler running from `at`
    /// on, even before that doorbell's own event is delivered.
    pub fn note_doorbell(&mut self, queue: u8, at: Tick) {
        if usize::from(queue) < 32 {
            self.parts.doorbells_rung.push((at, queue));
        }
    }

    /// Stores `queue`'s last write index into its doorbell signal (the producer's side of
    /// ringing it; the system delivers the `Doorbell` event).
    ///
    /// # Errors
    /// [`NodeError`] if the queue does not exist.
    pub fn write_doorbell(&mut self, queue: u8) -> Result<(), NodeError> {
        let q = *self
            .parts
            .queues
            .get(usize::from(queue))
            .ok_or_else(|| NodeError::Config(format!("no queue {queue}")))?;
        let w = self
            .parts
            .memory
            .read_u64(q.write_index_addr)
            .map_err(NodeError::Memory)?;
        self.parts
            .memory
            .write_u64(q.doorbell_addr, w.saturating_sub(1))
            .map_err(NodeError::Memory)
    }

    /// Loads a dump's memory sections and enqueues its packets; returns the queues used
    /// (whose doorbells the caller rings).
    ///
    /// # Errors
    /// [`NodeError`] if a section overlaps the system area or leaves device memory, a
    /// packet names a queue the node lacks, or a ring overflows.
    pub fn load_dump(&mut self, dump: &QueueDump) -> Result<Vec<u8>, NodeError> {
        let sys = self.system_area_base();
        for m in &dump.memory {
            let end = m.addr.saturating_add(m.bytes.len() as u64);
            if end > sys {
                return Err(NodeError::Config(format!(
                    "memory section at {:#x} overlaps the queue area at {sys:#x}",
                    m.addr
                )));
            }
            self.parts.memory.write(m.addr, &m.bytes).map_err(|_| {
                NodeError::Config(format!(
                    "memory section at {:#x} ({} bytes) is outside device memory",
                    m.addr,
                    m.bytes.len()
                ))
            })?;
        }
        let mut used = [false; MAX_QUEUES];
        for p in &dump.packets {
            self.enqueue(p.queue, &p.bytes, 0.0)
                .map_err(|e| NodeError::Config(format!("packet at offset {}: {e}", p.offset)))?;
            if let Some(u) = used.get_mut(usize::from(p.queue)) {
                *u = true;
            }
        }
        Ok((0..MAX_QUEUES as u8)
            .filter(|&q| used[usize::from(q)])
            .collect())
    }

    /// When the GPU model next has something to report.
    pub fn gpu_wake(&self) -> Option<Tick> {
        self.parts.gpu.next_event().map(ns_to_tick)
    }

    /// Advances the GPU model to `until` and turns what it reports into firmware events.
    pub fn advance_gpu(&mut self, until: Tick, q: &mut EventQueue<SysEvent>) {
        let mut u = tick_to_ns(until);
        // The wake tick is the model's time rounded up; never stop short of it.
        if let Some(g) = self.parts.gpu.next_event() {
            if ns_to_tick(g) <= until {
                u = u.max(g);
            }
        }
        let mut out = Vec::new();
        self.parts.gpu.advance(u, &mut out);
        self.gpu_events(&out, q);
    }

    fn push(&self, q: &mut EventQueue<SysEvent>, at: Tick, event: Event) {
        q.push_with(
            at,
            EVENT_PRIORITY,
            SysEvent {
                node: self.index,
                event,
            },
        );
    }

    fn gpu_events(&mut self, evs: &[GpuEvent], q: &mut EventQueue<SysEvent>) {
        for &ev in evs {
            match ev {
                GpuEvent::AllDispatched { tag, at } => {
                    let Some(info) = self.parts.launched.get(&tag).copied() else {
                        continue;
                    };
                    let qi = usize::from(info.queue);
                    let p = &mut self.parts;
                    if let Some(qc) = p.queues.get(qi).copied() {
                        let _ = p.memory.write_u64(qc.read_index_addr, info.dispatch_id + 1);
                        let _ = p.memory.write(
                            qc.packet_addr(info.dispatch_id),
                            &INVALID_HEADER.to_le_bytes(),
                        );
                    }
                    if let Some(d) = p.dispatching.get_mut(qi) {
                        *d = None;
                    }
                    if let Some(o) = p.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.all_dispatched_at = Some(at);
                    }
                    self.summary.end = self.summary.end.max(at);
                    self.push(
                        q,
                        ns_to_tick(at),
                        Event::KernelDispatched {
                            queue: info.queue,
                            dispatch_id: info.dispatch_id,
                        },
                    );
                }
                GpuEvent::Completed { tag, at } => {
                    let Some(info) = self.parts.launched.remove(&tag) else {
                        continue;
                    };
                    let sig = self
                        .parts
                        .completion_signal_of(info.queue, info.dispatch_id);
                    let p = &mut self.parts;
                    if let Some(o) = p.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.completed_at = Some(at);
                        o.completions += 1;
                        if let Some(sig) = sig {
                            let _ = p.memory.decrement_signal(sig);
                        }
                    }
                    self.summary.end = self.summary.end.max(at);
                    self.push(
                        q,
                        ns_to_tick(at),
                        Event::KernelCompleted {
                            queue: info.queue,
                            dispatch_id: info.dispatch_id,
                            status: Ok(()),
                        },
                    );
                }
            }
        }
    }

    /// Delivers `event` (due at `at`) to the firmware at `max(at, CP free)`.
    pub fn handle(&mut self, event: Event, at: Tick, q: &mut EventQueue<SysEvent>) {
        let start = at.max(self.cp_free_at);
        let result = self.run_handler(start, q, |fw, p| fw.handle(event, p));
        if let Err(e) = result {
            self.summary.handler_errors += 1;
            self.last_error = Some(e);
        }
    }

    /// Starts a LAMB step on the NMC sequencer at `at` (or when the CP is free), as a
    /// handler of its own.
    ///
    /// # Errors
    /// The sequencer's or the platform's refusal.
    pub fn start_lamb(
        &mut self,
        job: LambJob,
        at: Tick,
        q: &mut EventQueue<SysEvent>,
    ) -> Result<(), FirmwareError> {
        let start = at.max(self.cp_free_at);
        self.run_handler(start, q, |fw, p| fw.start_lamb(job, p))
    }

    /// Runs one firmware handler from `start` with the node's platform view, charges its
    /// work, and makes its hardware calls take effect at its end.
    fn run_handler(
        &mut self,
        start: Tick,
        q: &mut EventQueue<SysEvent>,
        f: impl FnOnce(&mut Firmware, &mut platform::NodePlatform<'_, E>) -> Result<(), FirmwareError>,
    ) -> Result<(), FirmwareError> {
        let before = FirmwareWork::of(&self.firmware);
        let result = {
            let mut p = platform::NodePlatform::new(&mut self.parts, start);
            f(&mut self.firmware, &mut p)
        };
        let work = FirmwareWork::of(&self.firmware).since(&before);
        let cycles = self.parts.cost.cycles(&work);
        let busy = self.parts.cp_clock.ticks(cycles);
        let end = start + busy;
        self.cp_free_at = end;
        let end_ns = tick_to_ns(end);
        self.summary.events += 1;
        self.summary.cp_cycles += cycles;
        self.summary.max_handler_cycles = self.summary.max_handler_cycles.max(cycles);
        self.summary.cp_busy_ns += tick_to_ns(busy);
        self.summary.end = self.summary.end.max(end_ns);
        while let Some(rec) = self.firmware.cp.pop_record() {
            if let Some(o) = self.parts.outcomes.get_mut(&(rec.queue, rec.dispatch_id)) {
                o.action = Some(rec.action);
            }
            self.records.push((end_ns, rec));
        }
        for key in std::mem::take(&mut self.parts.completed_in_handler) {
            if let Some(o) = self.parts.outcomes.get_mut(&key) {
                o.completed_at = Some(end_ns);
            }
        }
        let launches = std::mem::take(&mut self.parts.pending_launches);
        if !launches.is_empty() {
            // The CP issues a handler's dispatches one after another as its last work,
            // each costing one dispatch (its instructions and the two word writes of the
            // kernel-object patch), the last at the handler's end: kernels of one
            // decision reach the GPU staggered, in dispatch order, and the first fills
            // the free slots first (the hardware dispatcher is first come, first served).
            let per_dispatch = self
                .parts
                .cp_clock
                .ticks(self.parts.cost.cp.dispatch_cycles());
            let last = launches.len().saturating_sub(1);
            let mut out = Vec::new();
            for (k, (tag, l)) in launches.into_iter().enumerate() {
                let back = per_dispatch.saturating_mul((last - k) as u64);
                let at = tick_to_ns(end.saturating_sub(back).max(start));
                out.clear();
                self.parts.gpu.advance(at, &mut out);
                self.gpu_events(&out, q);
                if let Some(info) = self.parts.launched.get(&tag).copied() {
                    if let Some(o) = self.parts.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.launched_at = Some(at);
                    }
                }
                self.parts.gpu.launch(at, tag, &l);
            }
            out.clear();
            self.parts.gpu.advance(end_ns, &mut out);
            self.gpu_events(&out, q);
        }
        self.run_nmc_ops(end, q);
        if self.firmware.has_pending_work() {
            self.push(q, end, Event::Deferred);
        }
        result
    }

    /// The NMC calls of the handler that ended at `end`, in call order.
    fn run_nmc_ops(&mut self, end: Tick, q: &mut EventQueue<SysEvent>) {
        if self.parts.nmc_ops.is_empty() {
            return;
        }
        let clock = self.parts.dram_clock;
        let now = clock.cycle_at_or_after(end);
        let ops = std::mem::take(&mut self.parts.nmc_ops);
        let node = self.index;
        let push = |q: &mut EventQueue<SysEvent>, at: Tick, event: Event| {
            q.push_with(at, EVENT_PRIORITY, SysEvent { node, event });
        };
        let p = &mut self.parts;
        let Some(nmc) = p.nmc.as_mut() else { return };
        // The controllers catch up to now (refresh, ordinary traffic) before an engine
        // takes a channel.
        nmc.advance_until(now, &mut p.mem_done);
        let deferred = nmc.is_deferred();
        for op in ops {
            match op {
                NmcOp::Submit(ticket, cmd) if deferred => {
                    // Two jobs in flight: the completion comes from the engines' poll.
                    let tag = u64::from(ticket.0);
                    if let Err(e) = nmc.submit_deferred(now, &cmd, &mut p.memory, tag) {
                        push(
                            q,
                            end,
                            Event::NmcDone {
                                ticket,
                                status: Err(e),
                            },
                        );
                    }
                }
                NmcOp::Reduce(ticket, ch) if deferred => {
                    if let Err(e) = nmc.reduce_deferred(now, ch, u64::from(ticket.0)) {
                        let ev = Event::PartialsReady {
                            ticket,
                            sum: 0.0,
                            status: Err(e),
                        };
                        push(q, end, ev);
                    }
                }
                NmcOp::Submit(ticket, cmd) => {
                    let (at, status) = match nmc.submit(now, &cmd, &mut p.memory) {
                        Ok(done) => (clock.tick_of(done), Ok(())),
                        Err(e) => (end, Err(e)),
                    };
                    push(q, at, Event::NmcDone { ticket, status });
                }
                NmcOp::Scalar(ch, reg, bits) => {
                    // Checked when the firmware called; the engines cannot refuse it now.
                    if nmc.write_scalar(now, ch, reg, bits).is_err() {
                        p.nmc_error = nmc.take_error();
                    }
                }
                NmcOp::Reduce(ticket, ch) => {
                    let (at, sum, status) = match nmc.reduce_partials(now, ch) {
                        Ok((ready, sum)) => (clock.tick_of(ready), sum, Ok(())),
                        Err(e) => (end, 0.0, Err(e)),
                    };
                    let ev = Event::PartialsReady {
                        ticket,
                        sum,
                        status,
                    };
                    push(q, at, ev);
                }
            }
        }
        if deferred {
            self.poll_nmc(now, q);
        }
    }

    /// The deferred NMC path: simulates the engines up to `now` and posts what finished.
    fn poll_nmc(&mut self, now: crate::hbm::Cycle, q: &mut EventQueue<SysEvent>) {
        let clock = self.parts.dram_clock;
        let Some(nmc) = self.parts.nmc.as_mut() else {
            return;
        };
        let done = nmc.poll(now);
        if let Some(e) = nmc.take_error() {
            self.parts.nmc_error = Some(e);
        }
        for f in done {
            let (at, event) = match f {
                NmcFinished::Job { tag, at, status } => (
                    at,
                    Event::NmcDone {
                        ticket: NmcTicket(tag as u32),
                        status,
                    },
                ),
                NmcFinished::Reduce {
                    tag,
                    at,
                    sum,
                    status,
                } => (
                    at,
                    Event::PartialsReady {
                        ticket: NmcTicket(tag as u32),
                        sum,
                        status,
                    },
                ),
            };
            self.push(q, clock.tick_of(at), event);
        }
    }
}

/// A node's timed hardware as one component of the system: its GPU model and the
/// ordinary traffic of its HBM (refresh alone does not wake the system: the controllers
/// catch up on it when they are next needed). It reports firmware events for its CP as
/// (tick, event) pairs.
impl<E: KernelEngine> Component for GpuNode<E> {
    type Output = (Tick, SysEvent);

    fn next_wake(&self) -> Option<Tick> {
        let mem = self
            .parts
            .nmc
            .as_ref()
            .filter(|n| n.has_traffic())
            .and_then(Component::next_wake);
        let clock = self.parts.dram_clock;
        let poll = self
            .parts
            .nmc
            .as_ref()
            .and_then(NmcBlock::next_poll)
            .map(|c| clock.tick_of(c));
        [self.gpu_wake(), mem, poll].into_iter().flatten().min()
    }

    fn advance(&mut self, until: Tick, out: &mut Vec<Self::Output>) {
        let mut q = EventQueue::new();
        if self.gpu_wake().is_some_and(|g| g <= until) {
            self.advance_gpu(until, &mut q);
        }
        let p = &mut self.parts;
        if let Some(nmc) = p.nmc.as_mut().filter(|n| n.has_traffic()) {
            Component::advance(nmc, until, &mut p.mem_done);
        }
        if let Some(due) = p.nmc.as_ref().and_then(NmcBlock::next_poll) {
            // Woken for it: the engines go on from where they stopped (at least one
            // chunk), whatever the clocks' rounding.
            let mut now = p.dram_clock.cycle_at(until);
            if p.dram_clock.tick_of(due) <= until {
                now = now.max(due);
            }
            self.poll_nmc(now, &mut q);
        }
        while let Some(s) = q.pop() {
            out.push((s.at, s.event));
        }
    }
}

impl<E: KernelEngine> NodeParts<E> {
    /// The completion-signal handle recorded for a packet (read from the ring while the
    /// body is still there: invalidating a slot only rewrites its header).
    fn completion_signal_of(&self, queue: u8, id: u64) -> Option<u64> {
        let qc = self.queues.get(usize::from(queue))?;
        let sig = self
            .memory
            .read_u64(qc.packet_addr(id) + aql::offset::COMPLETION_SIGNAL as u64)
            .ok()?;
        // A signal word overlapping a queue's ring or its index and doorbell words is not
        // a signal: storing into it would corrupt the packet processor's own state (a
        // rejected packet's garbage signal on another queue's read index made that
        // queue's index -9 and its next dispatch `NotAtHead`; cp_stream fuzz finding).
        // The dispatch path rejects such a signal inside the rings; the completion of a
        // rejected packet leaves it alone.
        let in_queue_area = self.queues.iter().any(|q| {
            let end = q.doorbell_addr.max(q.ring_base + q.ring_bytes()) + 8;
            sig < end && q.ring_base < sig.saturating_add(8)
        });
        (sig != 0 && !in_queue_area && self.memory.range().contains(sig, 8)).then_some(sig)
    }

    fn ticket(&mut self) -> NmcTicket {
        self.next_ticket = self.next_ticket.wrapping_add(1);
        NmcTicket(self.next_ticket)
    }
}
