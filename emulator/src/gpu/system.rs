//! A GPU with its command processor: AQL queues in device memory, the firmware CP, and a
//! [`KernelEngine`] that runs the kernels the CP dispatches.
//!
//! [`CpSystem`] implements the firmware's platform traits, owns time, delivers events to
//! the [`Firmware`], and charges each handler's [`CpWork`] to the CP's timeline with a
//! [`CpCostModel`]: the CP is busy for `cycles / clock` after it starts a handler, later
//! events wait for it, and the kernels it dispatched start when the handler ends.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::fmt;

use nmcp_firmware::cp::{
    CdPredictor, CpAction, CpConfig, CpCostModel, CpError, CpRecord, CpWork, CuResources,
    QueueConfig, MAX_QUEUES,
};
use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle, DevAddr, DeviceMemory, DispatchError, DispatchRequest, DmaController,
    DmaError, KernelDispatcher, MemoryError, NmcController, NmcError, NmcTicket, TrackerController,
    TrackerError,
};
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::aql::{self, AqlPacket, DeviceRange, AQL_PACKET_BYTES};
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};
use nmcp_isa::nmc::MacroCommand;
use nmcp_isa::t3::{DmaDescriptor, TrackerEntry};

use super::queue::{self, QueueDump, QueueError, SparseMemory, INVALID_HEADER};
use super::{GpuEvent, KernelEngine, KernelLaunch, Nanos};

/// Default device memory: 256 MiB at 256 MiB (the null page and low addresses stay
/// unmapped, so a zero kernel object is out of range).
pub const DEFAULT_DEVICE: DeviceRange = DeviceRange {
    base: 0x1000_0000,
    len: 0x1000_0000,
};
/// Bytes at the top of device memory reserved for queue rings and index words.
pub const SYSTEM_AREA_BYTES: u64 = 16 << 20;

/// How to build a [`CpSystem`].
#[derive(Debug, Clone)]
pub struct CpSystemConfig {
    /// Device memory.
    pub device: DeviceRange,
    /// Queues (1..=32).
    pub queues: usize,
    /// Ring size in packets (power of two).
    pub ring_packets: u32,
    /// CP cost model.
    pub cost: CpCostModel,
    /// GPU resources the CP computes occupancy with.
    pub resources: CuResources,
    /// CD predictor.
    pub predictor: CdPredictor,
    /// Time a workgroup of a non-GEMM kernel takes when its packet gives none.
    pub non_gemm_workgroup_ns: Nanos,
}

impl Default for CpSystemConfig {
    fn default() -> Self {
        Self {
            device: DEFAULT_DEVICE,
            queues: 4,
            ring_packets: 64,
            cost: CpCostModel::default(),
            resources: CuResources::MI100,
            predictor: CdPredictor::default(),
            non_gemm_workgroup_ns: 2_000.0,
        }
    }
}

/// Why a system could not be built or loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemError {
    /// Bad configuration.
    Config(String),
    /// The CP refused the configuration.
    Cp(CpError),
    /// Device memory.
    Memory(MemoryError),
    /// A queue.
    Queue(QueueError),
}

impl fmt::Display for SystemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(s) => f.write_str(s),
            Self::Cp(e) => write!(f, "CP configuration: {e}"),
            Self::Memory(e) => write!(f, "device memory: {e}"),
            Self::Queue(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for SystemError {}

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

#[derive(Debug, Clone, Copy)]
struct Launched {
    queue: u8,
    dispatch_id: u64,
}

#[derive(Debug, Clone, Copy)]
struct TimedEvent {
    at: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for TimedEvent {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for TimedEvent {}
impl PartialOrd for TimedEvent {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for TimedEvent {
    /// Reversed: `BinaryHeap` pops the earliest, then the first queued.
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.total_cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// Totals of a run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunSummary {
    /// Time of the last event.
    pub end: Nanos,
    /// Firmware events handled.
    pub events: u64,
    /// CP cycles charged.
    pub cp_cycles: u64,
    /// CP busy time.
    pub cp_busy_ns: Nanos,
    /// Firmware handler errors (the firmware stays consistent; counted, not fatal).
    pub handler_errors: u64,
    /// The run stopped at its step limit with work left.
    pub truncated: bool,
    /// The most CP cycles one handler took.
    pub max_handler_cycles: u64,
}

/// GPU + CP + queues, generic over the kernel timing model.
#[derive(Debug)]
pub struct CpSystem<E: KernelEngine> {
    mem: SparseMemory,
    queues: Vec<QueueConfig>,
    firmware: Firmware,
    engine: E,
    cost: CpCostModel,
    non_gemm_workgroup_ns: Nanos,
    cp_now: Nanos,
    cp_free_at: Nanos,
    events: BinaryHeap<TimedEvent>,
    seq: u64,
    next_tag: u64,
    pending_launches: Vec<(u64, KernelLaunch)>,
    launched: HashMap<u64, Launched>,
    dispatching: Vec<Option<u64>>,
    completed_in_handler: Vec<(u8, u64)>,
    outcomes: BTreeMap<(u8, u64), PacketOutcome>,
    records: Vec<(Nanos, CpRecord)>,
    summary: RunSummary,
    last_error: Option<FirmwareError>,
}

impl<E: KernelEngine> CpSystem<E> {
    /// Builds the system: lays out the queues at the top of device memory and
    /// configures the firmware CP.
    ///
    /// # Errors
    /// [`SystemError`] for a bad configuration.
    pub fn new(config: CpSystemConfig, engine: E) -> Result<Self, SystemError> {
        if config.queues == 0 || config.queues > MAX_QUEUES {
            return Err(SystemError::Config(format!(
                "queue count {} outside 1..={MAX_QUEUES}",
                config.queues
            )));
        }
        if !config.ring_packets.is_power_of_two() {
            return Err(SystemError::Config(format!(
                "ring size {} is not a power of two",
                config.ring_packets
            )));
        }
        let area = queue::queue_area_bytes(config.queues, config.ring_packets);
        if area > SYSTEM_AREA_BYTES || config.device.len < SYSTEM_AREA_BYTES {
            return Err(SystemError::Config(format!(
                "queues need {area} bytes; the system area is {SYSTEM_AREA_BYTES} bytes"
            )));
        }
        let mut mem = SparseMemory::new(config.device);
        let base = config.device.base + config.device.len - SYSTEM_AREA_BYTES;
        let queues = queue::layout_queues(&mut mem, base, config.queues, config.ring_packets)
            .map_err(SystemError::Memory)?;
        let mut firmware = Firmware::default();
        firmware
            .cp
            .configure(CpConfig {
                queues: heapless::Vec::from_slice(&queues)
                    .map_err(|_| SystemError::Cp(CpError::Capacity))?,
                device: config.device,
                resources: config.resources,
                predictor: config.predictor,
            })
            .map_err(SystemError::Cp)?;
        Ok(Self {
            mem,
            dispatching: vec![None; queues.len()],
            queues,
            firmware,
            engine,
            cost: config.cost,
            non_gemm_workgroup_ns: config.non_gemm_workgroup_ns,
            cp_now: 0.0,
            cp_free_at: 0.0,
            events: BinaryHeap::new(),
            seq: 0,
            next_tag: 0,
            pending_launches: Vec::new(),
            launched: HashMap::new(),
            completed_in_handler: Vec::new(),
            outcomes: BTreeMap::new(),
            records: Vec::new(),
            summary: RunSummary::default(),
            last_error: None,
        })
    }

    /// First address of the reserved system area (rings, index words).
    pub fn system_area_base(&self) -> u64 {
        let d = self.mem.range();
        d.base + d.len - SYSTEM_AREA_BYTES
    }

    /// Device memory.
    pub fn memory(&self) -> &SparseMemory {
        &self.mem
    }

    /// Device memory, writable (to place extension records, signals...).
    pub fn memory_mut(&mut self) -> &mut SparseMemory {
        &mut self.mem
    }

    /// The queue descriptors.
    pub fn queues(&self) -> &[QueueConfig] {
        &self.queues
    }

    /// The kernel engine.
    pub fn engine(&self) -> &E {
        &self.engine
    }

    /// The firmware.
    pub fn firmware(&self) -> &Firmware {
        &self.firmware
    }

    /// Enqueues a raw packet on `queue` at time `at` with the producer protocol, after
    /// setting its completion signal (if it has one in device memory) to 1. The doorbell
    /// is rung separately ([`Self::ring_doorbell`]).
    ///
    /// # Errors
    /// [`SystemError`] if the queue does not exist or is full.
    pub fn enqueue(
        &mut self,
        queue: u8,
        packet: &[u8; AQL_PACKET_BYTES],
        at: Nanos,
    ) -> Result<u64, SystemError> {
        let q = *self
            .queues
            .get(usize::from(queue))
            .ok_or_else(|| SystemError::Config(format!("no queue {queue}")))?;
        let signal = u64::from_le_bytes(
            packet[aql::offset::COMPLETION_SIGNAL..]
                .try_into()
                .unwrap_or([0; 8]),
        );
        if signal != 0 && self.mem.range().contains(signal, 8) {
            self.mem
                .write_signal(signal, 1)
                .map_err(SystemError::Memory)?;
        }
        let id = queue::enqueue(&mut self.mem, &q, packet).map_err(SystemError::Queue)?;
        self.outcomes.insert(
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

    /// Rings `queue`'s doorbell at time `at` (stores the last write index into the
    /// doorbell signal and delivers a `Doorbell` event).
    ///
    /// # Errors
    /// [`SystemError`] if the queue does not exist.
    pub fn ring_doorbell(&mut self, queue: u8, at: Nanos) -> Result<(), SystemError> {
        let q = *self
            .queues
            .get(usize::from(queue))
            .ok_or_else(|| SystemError::Config(format!("no queue {queue}")))?;
        let w = self
            .mem
            .read_u64(q.write_index_addr)
            .map_err(SystemError::Memory)?;
        self.mem
            .write_u64(q.doorbell_addr, w.saturating_sub(1))
            .map_err(SystemError::Memory)?;
        self.push_event(at, Event::Doorbell { queue });
        Ok(())
    }

    /// Loads a dump: its memory sections, then its packets onto their queues, and rings
    /// every used queue's doorbell at time 0.
    ///
    /// # Errors
    /// [`SystemError`] if a section overlaps the system area or leaves device memory, a
    /// packet names a queue the system lacks, or a ring overflows.
    pub fn load_dump(&mut self, dump: &QueueDump) -> Result<(), SystemError> {
        let sys = self.system_area_base();
        for m in &dump.memory {
            let end = m.addr.saturating_add(m.bytes.len() as u64);
            if end > sys {
                return Err(SystemError::Config(format!(
                    "memory section at {:#x} overlaps the queue area at {sys:#x}",
                    m.addr
                )));
            }
            self.mem.write(m.addr, &m.bytes).map_err(|_| {
                SystemError::Config(format!(
                    "memory section at {:#x} ({} bytes) is outside device memory",
                    m.addr,
                    m.bytes.len()
                ))
            })?;
        }
        let mut used = [false; MAX_QUEUES];
        for p in &dump.packets {
            self.enqueue(p.queue, &p.bytes, 0.0)
                .map_err(|e| SystemError::Config(format!("packet at offset {}: {e}", p.offset)))?;
            if let Some(u) = used.get_mut(usize::from(p.queue)) {
                *u = true;
            }
        }
        for (q, _) in used.iter().enumerate().filter(|(_, &u)| u) {
            self.ring_doorbell(q as u8, 0.0)?;
        }
        Ok(())
    }

    fn push_event(&mut self, at: Nanos, event: Event) {
        self.seq += 1;
        self.events.push(TimedEvent {
            at,
            seq: self.seq,
            event,
        });
    }

    /// Runs until nothing is left to happen, or until `max_steps` steps (firmware events
    /// handled plus GPU-model advances) were taken; then `truncated` is set.
    pub fn run(&mut self, max_steps: u64) -> RunSummary {
        let mut out = Vec::new();
        let mut steps = 0u64;
        loop {
            if steps >= max_steps {
                self.summary.truncated = true;
                break;
            }
            steps += 1;
            let t_fw = self.events.peek().map(|e| e.at.max(self.cp_free_at));
            let t_gpu = self.engine.next_event();
            match (t_fw, t_gpu) {
                (None, None) => break,
                (fw, Some(g)) if fw.is_none_or(|f| g <= f) => {
                    out.clear();
                    self.engine.advance(g, &mut out);
                    self.gpu_events(&out);
                }
                _ => self.handle_next(),
            }
        }
        self.summary
    }

    fn handle_next(&mut self) {
        let Some(ev) = self.events.pop() else { return };
        let start = ev.at.max(self.cp_free_at);
        self.cp_now = start;
        let before = self.firmware.cp.work();
        // The firmware is lent out while it runs, so it can borrow the platform (self).
        let mut fw = std::mem::take(&mut self.firmware);
        let result = fw.handle(ev.event, self);
        self.firmware = fw;
        if let Err(e) = result {
            self.summary.handler_errors += 1;
            self.last_error = Some(e);
        }
        let work = self.firmware.cp.work().since(&before);
        let cycles = work.cycles(&self.cost);
        let busy = cycles as f64 * 1e9 / self.cost.clock_hz.max(1) as f64;
        let end = start + busy;
        self.cp_free_at = end;
        self.summary.events += 1;
        self.summary.cp_cycles += cycles;
        self.summary.max_handler_cycles = self.summary.max_handler_cycles.max(cycles);
        self.summary.cp_busy_ns += busy;
        self.summary.end = self.summary.end.max(end);
        while let Some(rec) = self.firmware.cp.pop_record() {
            if let Some(o) = self.outcomes.get_mut(&(rec.queue, rec.dispatch_id)) {
                o.action = Some(rec.action);
            }
            self.records.push((end, rec));
        }
        for key in std::mem::take(&mut self.completed_in_handler) {
            if let Some(o) = self.outcomes.get_mut(&key) {
                o.completed_at = Some(end);
            }
        }
        let launches = std::mem::take(&mut self.pending_launches);
        if !launches.is_empty() {
            let mut out = Vec::new();
            self.engine.advance(end, &mut out);
            self.gpu_events(&out);
            for (tag, l) in launches {
                if let Some(info) = self.launched.get(&tag).copied() {
                    if let Some(o) = self.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.launched_at = Some(end);
                    }
                }
                self.engine.launch(end, tag, &l);
            }
        }
        if self.firmware.cp.has_pending_work() {
            self.push_event(end, Event::Timer);
        }
    }

    fn gpu_events(&mut self, evs: &[GpuEvent]) {
        for &ev in evs {
            match ev {
                GpuEvent::AllDispatched { tag, at } => {
                    let Some(info) = self.launched.get(&tag).copied() else {
                        continue;
                    };
                    let q = usize::from(info.queue);
                    if let Some(qc) = self.queues.get(q).copied() {
                        let _ = self.mem.write_u64(qc.read_index_addr, info.dispatch_id + 1);
                        let _ = self.mem.write(
                            qc.packet_addr(info.dispatch_id),
                            &INVALID_HEADER.to_le_bytes(),
                        );
                    }
                    if let Some(d) = self.dispatching.get_mut(q) {
                        *d = None;
                    }
                    if let Some(o) = self.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.all_dispatched_at = Some(at);
                    }
                    self.summary.end = self.summary.end.max(at);
                    self.push_event(
                        at,
                        Event::KernelDispatched {
                            queue: info.queue,
                            dispatch_id: info.dispatch_id,
                        },
                    );
                }
                GpuEvent::Completed { tag, at } => {
                    let Some(info) = self.launched.remove(&tag) else {
                        continue;
                    };
                    if let Some(o) = self.outcomes.get_mut(&(info.queue, info.dispatch_id)) {
                        o.completed_at = Some(at);
                        o.completions += 1;
                        if let Some(sig) = self.completion_signal_of(info.queue, info.dispatch_id) {
                            let _ = self.mem.write_signal(sig, 0);
                        }
                    }
                    self.summary.end = self.summary.end.max(at);
                    self.push_event(
                        at,
                        Event::KernelCompleted {
                            queue: info.queue,
                            dispatch_id: info.dispatch_id,
                        },
                    );
                }
            }
        }
    }

    /// The completion-signal handle recorded for a packet (read from the ring while the
    /// body is still there: invalidating a slot only rewrites its header).
    fn completion_signal_of(&self, queue: u8, id: u64) -> Option<u64> {
        let qc = self.queues.get(usize::from(queue))?;
        let sig = self
            .mem
            .read_u64(qc.packet_addr(id) + aql::offset::COMPLETION_SIGNAL as u64)
            .ok()?;
        (sig != 0 && self.mem.range().contains(sig, 8)).then_some(sig)
    }

    /// Per-packet outcomes, by (queue, dispatch id).
    pub fn outcomes(&self) -> &BTreeMap<(u8, u64), PacketOutcome> {
        &self.outcomes
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

    fn check_head(&self, queue: u8, id: u64) -> Result<QueueConfig, DispatchError> {
        let qc = *self
            .queues
            .get(usize::from(queue))
            .ok_or(DispatchError::NoSuchQueue)?;
        let read = self
            .mem
            .read_u64(qc.read_index_addr)
            .map_err(|_| DispatchError::NoSuchQueue)?;
        let write = self
            .mem
            .read_u64(qc.write_index_addr)
            .map_err(|_| DispatchError::NoSuchQueue)?;
        if read != id || id >= write {
            return Err(DispatchError::NotAtHead);
        }
        Ok(qc)
    }
}

impl<E: KernelEngine> Clock for CpSystem<E> {
    fn now(&self) -> Cycle {
        (self.cp_now * self.cost.clock_hz as f64 / 1e9) as Cycle
    }
}

impl<E: KernelEngine> DeviceMemory for CpSystem<E> {
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError> {
        self.mem.read(addr, buf)
    }

    fn write(&mut self, addr: DevAddr, data: &[u8]) -> Result<(), MemoryError> {
        self.mem.write(addr, data)
    }
}

impl<E: KernelEngine> KernelDispatcher for CpSystem<E> {
    fn dispatch(&mut self, req: &DispatchRequest) -> Result<(), DispatchError> {
        let qc = self.check_head(req.queue, req.dispatch_id)?;
        if self
            .dispatching
            .get(usize::from(req.queue))
            .is_some_and(|d| d.is_some())
        {
            return Err(DispatchError::Busy);
        }
        let mut bytes = [0u8; AQL_PACKET_BYTES];
        self.mem
            .read(qc.packet_addr(req.dispatch_id), &mut bytes)
            .map_err(|_| DispatchError::NotAtHead)?;
        let Ok(AqlPacket::KernelDispatch(p)) = aql::decode(&bytes) else {
            return Err(DispatchError::NotAtHead);
        };
        let gemm = if p.gemm_ext_address == 0 {
            None
        } else {
            let mut eb = [0u8; GEMM_EXT_BYTES];
            self.mem
                .read(p.gemm_ext_address, &mut eb)
                .ok()
                .and_then(|()| GemmExt::decode(&eb).ok())
                .and_then(|ext| {
                    let meta = ext
                        .kernels
                        .iter()
                        .find(|k| k.kernel_object == req.kernel_object)
                        .or(ext.kernels.first())
                        .copied()?;
                    Some((ext, meta))
                })
        };
        let launch = match gemm {
            Some((ext, meta)) => KernelLaunch {
                workgroups: nmcp_firmware::cp::features::workgroups(&ext, &meta),
                workgroup_size: meta.workgroup_size,
                workgroup_time: 0.0,
                gemm: Some((ext, meta)),
            },
            None => KernelLaunch {
                gemm: None,
                workgroups: p.workgroups(),
                workgroup_size: u16::try_from(p.workgroup_threads()).unwrap_or(u16::MAX),
                workgroup_time: self.non_gemm_workgroup_ns,
            },
        };
        let tag = self.next_tag;
        self.next_tag += 1;
        self.launched.insert(
            tag,
            Launched {
                queue: req.queue,
                dispatch_id: req.dispatch_id,
            },
        );
        if let Some(d) = self.dispatching.get_mut(usize::from(req.queue)) {
            *d = Some(req.dispatch_id);
        }
        if let Some(o) = self.outcomes.get_mut(&(req.queue, req.dispatch_id)) {
            o.dispatches += 1;
            o.kernel_object = Some(req.kernel_object);
        }
        self.pending_launches.push((tag, launch));
        Ok(())
    }

    fn complete_without_dispatch(
        &mut self,
        queue: u8,
        dispatch_id: u64,
        value: i64,
    ) -> Result<(), DispatchError> {
        let qc = self.check_head(queue, dispatch_id)?;
        if let Some(sig) = self.completion_signal_of(queue, dispatch_id) {
            let _ = self.mem.write_signal(sig, value);
        }
        let _ = self.mem.write_u64(qc.read_index_addr, dispatch_id + 1);
        let _ = self
            .mem
            .write(qc.packet_addr(dispatch_id), &INVALID_HEADER.to_le_bytes());
        if let Some(o) = self.outcomes.get_mut(&(queue, dispatch_id)) {
            o.completions += 1;
            o.completion_value = Some(value);
        }
        self.completed_in_handler.push((queue, dispatch_id));
        Ok(())
    }
}

impl<E: KernelEngine> NmcController for CpSystem<E> {
    fn submit(&mut self, _cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }

    fn write_scalar(&mut self, _c: ChannelSet, _reg: u8, _bits: u32) -> Result<(), NmcError> {
        Err(NmcError::Unsupported)
    }

    fn reduce_partials(&mut self, _c: ChannelSet) -> Result<NmcTicket, NmcError> {
        Err(NmcError::Unsupported)
    }
}

impl<E: KernelEngine> DmaController for CpSystem<E> {
    fn program(&mut self, _engine: u8, _desc: &DmaDescriptor) -> Result<(), DmaError> {
        Err(DmaError::NoSuchEngine)
    }
}

impl<E: KernelEngine> TrackerController for CpSystem<E> {
    fn program(&mut self, _entry: &TrackerEntry) -> Result<(), TrackerError> {
        Err(TrackerError::Invalid)
    }
}

// ---------------------------------------------------------------------------------------
// A fixed-time kernel engine, for testing the CP
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct RunningKernel {
    tag: u64,
    to_place: u64,
    in_flight: u64,
    workgroup_ns: Nanos,
}

/// Workgroups of one kernel placed together, finishing together.
#[derive(Debug, Clone, Copy)]
struct WgDone {
    at: Nanos,
    seq: u64,
    tag: u64,
    count: u64,
}

impl PartialEq for WgDone {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for WgDone {}
impl PartialOrd for WgDone {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for WgDone {
    fn cmp(&self, o: &Self) -> Ordering {
        o.at.total_cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// A test double of the GPU: `cus x slots_per_cu` workgroup slots; every workgroup of a
/// GEMM takes `gemm_workgroup_ns`, every workgroup of another kernel its launch's
/// `workgroup_time`; free slots are filled round-robin across the running kernels, one
/// workgroup at a time, as the hardware dispatcher does. No sharing effects: enough to
/// test the CP, not to evaluate GOLDYLOC.
#[derive(Debug, Clone)]
pub struct FixedTimeEngine {
    slots: u64,
    free: u64,
    gemm_workgroup_ns: Nanos,
    kernels: Vec<RunningKernel>,
    rr: usize,
    done: BinaryHeap<WgDone>,
    seq: u64,
    pending: Vec<GpuEvent>,
    now: Nanos,
    placed: u64,
}

impl FixedTimeEngine {
    /// `cus x slots_per_cu` slots; GEMM workgroups take `gemm_workgroup_ns`.
    pub fn new(cus: u32, slots_per_cu: u32, gemm_workgroup_ns: Nanos) -> Self {
        let slots = u64::from(cus) * u64::from(slots_per_cu);
        Self {
            slots,
            free: slots,
            gemm_workgroup_ns,
            kernels: Vec::new(),
            rr: 0,
            done: BinaryHeap::new(),
            seq: 0,
            pending: Vec::new(),
            now: 0.0,
            placed: 0,
        }
    }

    /// Workgroup slots of the whole GPU.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Workgroups placed so far.
    pub fn workgroups_placed(&self) -> u64 {
        self.placed
    }

    /// Kernels currently running.
    pub fn running(&self) -> usize {
        self.kernels.len()
    }

    /// Fills free slots round-robin across the kernels with workgroups left, one
    /// workgroup per kernel per turn; the turns of one call are batched into one
    /// completion entry per kernel (they start, and so end, together).
    fn place(&mut self, now: Nanos) {
        let n = self.kernels.len();
        if n == 0 || self.free == 0 {
            return;
        }
        let mut grant = vec![0u64; n];
        loop {
            let wanting: Vec<usize> = (0..n)
                .map(|i| (self.rr + i) % n)
                .filter(|&i| self.kernels[i].to_place > grant[i])
                .collect();
            if wanting.is_empty() || self.free == 0 {
                break;
            }
            let share = (self.free / wanting.len() as u64).max(1);
            for i in wanting {
                let g = share
                    .min(self.kernels[i].to_place - grant[i])
                    .min(self.free);
                grant[i] += g;
                self.free -= g;
                if self.free == 0 {
                    break;
                }
            }
        }
        self.rr = (self.rr + 1) % n;
        for (kern, g) in self.kernels.iter_mut().zip(grant) {
            if g == 0 {
                continue;
            }
            kern.to_place -= g;
            kern.in_flight += g;
            self.placed += g;
            self.seq += 1;
            self.done.push(WgDone {
                at: now + kern.workgroup_ns,
                seq: self.seq,
                tag: kern.tag,
                count: g,
            });
            if kern.to_place == 0 {
                self.pending.push(GpuEvent::AllDispatched {
                    tag: kern.tag,
                    at: now,
                });
            }
        }
    }
}

impl KernelEngine for FixedTimeEngine {
    fn launch(&mut self, now: Nanos, tag: u64, launch: &KernelLaunch) {
        self.now = self.now.max(now);
        if launch.workgroups == 0 {
            self.pending.push(GpuEvent::AllDispatched { tag, at: now });
            self.pending.push(GpuEvent::Completed { tag, at: now });
            return;
        }
        let workgroup_ns = if launch.gemm.is_some() {
            self.gemm_workgroup_ns
        } else {
            launch.workgroup_time
        };
        self.kernels.push(RunningKernel {
            tag,
            to_place: launch.workgroups,
            in_flight: 0,
            workgroup_ns,
        });
        self.place(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        let p = self.pending.first().map(|e| match *e {
            GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => at,
        });
        let d = self.done.peek().map(|w| w.at);
        match (p, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, until: Nanos, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.pending);
        while let Some(w) = self.done.peek().copied() {
            if w.at > until {
                break;
            }
            self.done.pop();
            self.now = w.at;
            self.free += w.count;
            if let Some(i) = self.kernels.iter().position(|k| k.tag == w.tag) {
                let k = &mut self.kernels[i];
                k.in_flight -= w.count;
                if k.in_flight == 0 && k.to_place == 0 {
                    self.pending.push(GpuEvent::Completed {
                        tag: w.tag,
                        at: w.at,
                    });
                    self.kernels.remove(i);
                    if self.rr > i {
                        self.rr -= 1;
                    }
                }
            }
            self.place(w.at);
            out.append(&mut self.pending);
        }
        self.now = self.now.max(until);
    }
}
