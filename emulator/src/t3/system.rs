//! N GPUs at DRAM-request level: each with its HBM (controllers, refresh, arbitration),
//! a tracker fed by an observer on every controller, DMA engines, a producer GEMM and the
//! ring-collective kernels, joined by link directions. One event queue per GPU and one
//! clock (the HBM's 1 GHz command clock: a cycle is a nanosecond).
//!
//! # Stepping
//! Time advances in slices of [`SLICE_CYCLES`]. In a slice a GPU handles its events due
//! in the slice in time order (a request they cause arrives at its event's cycle), then
//! its memory system runs to the slice's end, its column issues feed the tracker and its
//! finished requests complete their transfer blocks. A request caused by a finished
//! request therefore enters up to one slice late.
//!
//! GPUs interact only through links, and nothing a GPU sends arrives sooner than the
//! link latency (500 ns). So each GPU runs a *window* of up to [`MAX_WINDOW_SLICES`]
//! slices, as many as fit in the latency, before the next GPU's turn: the results are
//! those of stepping all GPUs slice by slice, and one GPU's state stays in the host's
//! caches for the whole window (the 16 GPUs of a TP-16 run otherwise evict each other's
//! every slice). For that, events of one cycle are ordered by sender and the sender's own
//! count (`T3System::schedule`), never by the order the GPUs happened to run in.
//!
//! # Data
//! With `functional` set, every GPU holds its output array (and the ring kernel's receive
//! buffer) as values, and each transfer block carries the values it moves: a block of
//! stores or updates applies them when its last request finishes; a block of reads
//! snapshots them when its last read returns. Reductions round to the element type after
//! every addition ([`add_in`]), the same function the reference sum uses.

use std::collections::{HashMap, VecDeque};

use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle as FwCycle, DevAddr, DeviceMemory as FwMemory, DispatchError,
    DispatchRequest, DmaController, DmaError, KernelDispatcher, MapError, MemoryError,
    NmcController, NmcError, NmcTicket, OutputMapController, TrackerController, TrackerError,
};
use nmcp_firmware::Event;
use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::nmc::{DType, MacroCommand};
use nmcp_isa::t3::{
    split_peer, DmaDescriptor, DmaOp, DmaTrigger, OutputMap, TrackerEntry, TRACKER_NO_DMA,
};

use super::gemm::{ProducerModel, PHASES};
use super::layout::{OutputLayout, Rect};
use super::link::LinkDirection;
use super::tracker::{Fired, Tracker};
use crate::hbm::{AddressMapping, Cycle, HbmPreset};
use crate::memctrl::{
    Access, Arbiter, ControllerConfig, ControllerObserver, IssuedColumn, MemCompletion,
    MemorySystem, Request, Source, TrafficClass,
};
use crate::sim::{EventQueue, LimitReached, Limits, PS_PER_NS};
use crate::timeline::{variant_name, Timeline, TimelineConfig, TrackId, TrackKind};

/// Cycles per simulation slice (see the module docs).
pub const SLICE_CYCLES: Cycle = 16;

/// Most slices a GPU runs before the next GPU's turn (see [`T3System::run_until`]).
pub const MAX_WINDOW_SLICES: Cycle = 31;
/// Bytes per memory request.
const REQ_BYTES: u64 = 64;
/// Requests a GPU may hold waiting for controller queue room before its producer stops
/// dispatching workgroups (the L2's miss queues are finite).
const PENDING_CAP: usize = 8_192;
/// DMA descriptors one GPU's engines work on at once (4 engines x 4).
pub const DMA_IN_FLIGHT: usize = 16;
/// Blocks the ring kernel keeps in flight per GPU with all 80 CUs (its CUs' outstanding
/// memory work); a kernel on fewer CUs keeps proportionally fewer.
pub const RING_IN_FLIGHT: usize = 64;

/// Adds `b` to `a` in the element type (round after the addition).
pub fn add_in(dtype: GemmDataType, a: f32, b: f32) -> f32 {
    round_to(dtype, a + b)
}

/// `v` rounded to the element type.
pub fn round_to(dtype: GemmDataType, v: f32) -> f32 {
    match dtype {
        GemmDataType::F16 => half::f16::from_f32(v).to_f32(),
        GemmDataType::Bf16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

fn dtype_of(d: GemmDataType) -> DType {
    match d {
        GemmDataType::F16 => DType::F16,
        GemmDataType::Bf16 => DType::Bf16,
        _ => DType::F32,
    }
}

/// Which of a GPU's arrays a block touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Region {
    /// The GEMM output / reduction array.
    Out,
    /// The ring kernel's receive buffer.
    Recv,
}

/// What a write block does to its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOp {
    /// Plain store.
    Store,
    /// Near-memory op-and-store (add).
    Update,
}

/// Who is told when a message's writes have landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ack {
    None,
    /// `DmaDone` for descriptor `id` of GPU `node`.
    Dma {
        node: u32,
        id: u16,
    },
    /// A ring-kernel block of step `step` landed at its receiver.
    Ring {
        step: u32,
    },
}

/// A transfer between GPUs.
#[derive(Debug, Clone)]
struct Message {
    rect: Rect,
    region: Region,
    op: WriteOp,
    /// Tracker tag for the receiver: (workgroup, wavefront).
    tag: Option<(u32, u8)>,
    payload: Option<Vec<f32>>,
    ack: Ack,
    class: TrafficClass,
}

#[derive(Debug, Clone)]
enum BlockKind {
    /// A producer workgroup's phase reads.
    WgRead { slot: u32 },
    /// Writes (local GEMM stores, or a message landing).
    Writes { ack: Ack, payload: Option<Vec<f32>> },
    /// A DMA descriptor's reads.
    DmaRead { desc: u16 },
    /// A ring-kernel block's reads (one or two of them per block).
    RingRead { item: u32 },
    /// Counter spills and other traffic nobody waits for.
    Untracked,
}

#[derive(Debug, Clone)]
struct Block {
    kind: BlockKind,
    left: u32,
    rect: Rect,
    region: Region,
    op: WriteOp,
}

/// How a GPU's producer stores one workgroup's tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct StoreRoute {
    local: Option<WriteOp>,
    remote: Option<(u32, WriteOp)>,
}

#[derive(Debug, Clone, Copy)]
struct WgState {
    wg: u32,
    phase: u32,
    reads_left: u32,
    compute_done: bool,
}

/// The producer GEMM on one GPU.
#[derive(Debug, Clone)]
struct Producer {
    model: ProducerModel,
    /// Workgroup ids in dispatch order.
    start: u32,
    /// Workgroups to run: output tiles x split-K factor.
    total: u32,
    /// Output tiles.
    tiles: u32,
    /// Split-K factor: this many workgroups update each tile (under the tile's id).
    splits: u32,
    dispatched: u32,
    finished: u32,
    slots: Vec<Option<WgState>>,
    free: Vec<u32>,
    done_at: Option<Cycle>,
    /// Output stores still to finish (local blocks).
    stores_left: u64,
}

/// A ring-kernel block in flight: reads left, its tile, the local and received values.
/// A ring block in flight: reads left, its rectangle, the values read (local, received)
/// and the step it belongs to.
type RingItem = (u32, Rect, Option<Vec<f32>>, Option<Vec<f32>>, u32);

/// The ring collective kernels on one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingKind {
    /// Baseline reduce-scatter on CUs: read local and received copies, add, send.
    ReduceScatter,
    /// Reduce-scatter with near-memory updates: read the (already reduced) local copy,
    /// send it as an update into the receiver's copy.
    ReduceScatterNmc,
    /// All-gather: read the chunk, send it as a plain store.
    AllGather,
}

#[derive(Debug, Clone)]
struct Ring {
    kind: RingKind,
    /// Current step (1..=N-1; N = the baseline's final local reduction).
    step: u32,
    /// Work items (WF tiles) not yet started, each with its step: a GPU whose upstream
    /// ran ahead begins its next step before its own blocks of this one have all
    /// started (at most `max_in_flight` run at once), so the queue can hold two steps.
    todo: VecDeque<(Rect, u32)>,
    in_flight: usize,
    /// Most blocks in flight.
    max_in_flight: usize,
    /// Blocks of the current step received from the upstream GPU.
    received: u32,
    /// Blocks per step.
    per_step: u32,
    /// Received counts that arrived for a later step (the upstream GPU ran ahead).
    early: HashMap<u32, u32>,
    /// Items in flight: reads left and the values read.
    items: HashMap<u32, RingItem>,
    next_item: u32,
    /// Sends of the current step still to finish before the step may end.
    done_at: Option<Cycle>,
}

/// Counts of one GPU's DRAM traffic by kind (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindBytes {
    /// Producer input reads.
    pub gemm_reads: u64,
    /// Producer plain output stores.
    pub gemm_writes: u64,
    /// Collective reads (ring kernels, DMA reads).
    pub rs_reads: u64,
    /// Collective plain writes.
    pub rs_writes: u64,
    /// Near-memory updates (producer stores and incoming).
    pub updates: u64,
    /// Tracker spill read-modify-writes.
    pub spill: u64,
}

/// An observer that hands every issued column with a source to the node's tracker.
#[derive(Debug, Clone, Default)]
struct TrackerTap {
    issued: Vec<Tapped>,
}

/// A sourced write column as the tracker's observer saw it.
#[derive(Debug, Clone, Copy)]
struct Tapped {
    at: Cycle,
    wg: u32,
    wf: u8,
    /// The request's first carried byte.
    addr: u64,
    /// Where the column went: (pseudo-channel, bank group, bank, row, column).
    place: (usize, u8, u8, u32, u32),
}

impl ControllerObserver for TrackerTap {
    fn on_issue(&mut self, c: &IssuedColumn) {
        if matches!(c.access, Access::Read) {
            return;
        }
        if let Some(s) = c.source {
            self.issued.push(Tapped {
                at: c.at,
                wg: s.workgroup,
                wf: s.wavefront,
                addr: c.addr,
                place: (c.pseudo_channel, c.bank.group, c.bank.bank, c.row, c.col),
            });
        }
    }
}

/// One GPU.
#[derive(Debug)]
pub struct GpuNode {
    index: u32,
    mem: MemorySystem,
    mapping: AddressMapping,
    pending: Vec<VecDeque<(Request, u32)>>,
    /// Bit `l % 64` of word `l / 64` set when lane `l` of `pending` holds requests, so a
    /// fill visits only those (in lane order, as a walk over every lane would).
    lanes_waiting: Vec<u64>,
    /// Per lane, the pseudo-channel whose full queue refused the lane's front request at
    /// its last try (`u32::MAX`: none). While that queue still has no room for one entry
    /// of the request's kind, a submit would be refused again (every placement needs at
    /// least one entry there, and a refused submit changes nothing), so it is not made:
    /// the retries decoded the address twice per lane per fill.
    refused_by: Vec<u32>,
    pending_total: usize,
    /// Of `pending_total`, the producer's (compute-class) requests: only these hold the
    /// producer back (communication reaches the controllers through the DMA engines'
    /// and links' own queues).
    pending_compute: usize,
    /// Block of each request id still in flight (ids are dense from 0).
    purpose: VecDeque<Option<u32>>,
    purpose_base: u64,
    blocks: Vec<Option<Block>>,
    free_blocks: Vec<u32>,
    tracker: Tracker,
    tracking: bool,
    dma: HashMap<u16, (DmaDescriptor, u8)>,
    dma_ready: VecDeque<u16>,
    dma_busy: usize,
    maps: Vec<OutputMap>,
    dispatch_start: u32,
    producer: Option<Producer>,
    ring: Option<Ring>,
    out: Option<Vec<f32>>,
    recv: Option<Vec<f32>>,
    partial: Option<Vec<f32>>,
    bytes: KindBytes,
    /// Time-summed requests in flight (accepted, not finished), for occupancy.
    inflight: u64,
    occupancy_sum: f64,
    occupancy_cycles: f64,
    /// When the last of this GPU's expected tracker entries fired and its DMAs landed.
    finished_at: Option<Cycle>,
    fw_events: Vec<(Cycle, Event)>,
    /// Every tracker firing: (cycle, workgroup, wavefront, DMA id).
    fire_log: Vec<(Cycle, u32, u8, u16)>,
    /// Whether the controllers were told the producer kernel ended (MCA then drains
    /// communication).
    boundary_told: bool,
    /// Requests finished in the current slice.
    done_buf: Vec<MemCompletion>,
    /// Columns with a source issued in the current slice.
    tap_buf: Vec<Tapped>,
    /// Controllers due by the current slice's end (the ones whose taps are polled).
    due_buf: Vec<usize>,
}

/// Events between components.
#[derive(Debug, Clone)]
enum Ev {
    /// A workgroup's phase compute finished.
    Compute { node: u32, slot: u32 },
    /// A message arrives at `node`.
    Arrive { node: u32, msg: Box<Message> },
    /// A firmware event for `node`.
    Firmware { node: u32, event: Event },
}

/// How a run is set up.
#[derive(Debug, Clone)]
pub struct SystemConfig {
    /// HBM preset of every GPU.
    pub preset: HbmPreset,
    /// GPUs in the ring.
    pub gpus: u32,
    /// Simulate only GPU 0, mirroring its traffic as its neighbours'.
    pub shortcut: bool,
    /// Link bytes per ns per direction.
    pub link_bytes_per_ns: f64,
    /// Link latency, ns.
    pub link_latency_ns: f64,
    /// Output layout.
    pub layout: OutputLayout,
    /// Element type.
    pub dtype: GemmDataType,
    /// Carry values.
    pub functional: bool,
    /// Caps on simulated time and events.
    pub limits: Limits,
    /// Most slices one GPU runs before the next GPU's turn ([`T3System::run_until`]).
    pub window_slices: u32,
}

/// Why [`T3System::run_until`] stopped before its condition held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The internal time limit passed with work left: what was still running.
    Stuck(String),
    /// A user-set cap was reached.
    Limit(LimitReached),
}

/// A GPU's timeline tracks.
#[derive(Debug, Clone)]
struct NodeTracks {
    kernel: TrackId,
    cp: TrackId,
    dma: TrackId,
    link: TrackId,
    tracker: TrackId,
    tracker_live: TrackId,
    wgs: TrackId,
    inflight: TrackId,
    /// Per pseudo-channel: requests queued at its controller (reads + writes).
    queues: Vec<TrackId>,
}

/// What a T3 run records on its timeline (off unless [`T3System::enable_timeline`]).
#[derive(Debug)]
struct T3Trace {
    tl: Timeline,
    nodes: Vec<NodeTracks>,
    /// Producer start per GPU, ns (its kernel span ends when the producer is done).
    kernel_start: Vec<Option<Cycle>>,
    kernel_told: Vec<bool>,
    /// DMA descriptors in flight: (GPU, id) -> (start ns, destination GPU).
    dma_start: HashMap<(usize, u16), (Cycle, u32)>,
    /// Workgroups running per GPU.
    running: Vec<u32>,
}

/// ns on the T3 clock to the timeline's ps.
fn ps(c: Cycle) -> u64 {
    c.saturating_mul(PS_PER_NS)
}

/// The multi-GPU system.
#[derive(Debug)]
pub struct T3System {
    cfg: SystemConfig,
    nodes: Vec<GpuNode>,
    /// `links[g]`: GPU g's direction towards `g - 1` (the ring's sending direction).
    links: Vec<LinkDirection>,
    /// Direct links (fully connected), `direct[from * N + to]`, created on first use.
    direct: HashMap<(u32, u32), LinkDirection>,
    /// Per simulated GPU, the events addressed to it. Among events of one cycle the
    /// order is by sender and the sender's own sequence ([`T3System::schedule`]), so it
    /// does not depend on the order the GPUs are stepped in.
    queues: Vec<EventQueue<Ev>>,
    /// The GPU being stepped (the sender of what is scheduled now).
    sender: u32,
    /// Per GPU, events it has scheduled so far.
    sent: Vec<u64>,
    now: Cycle,
    /// Events handled (scheduled events and memory completions), for the event cap.
    events: u64,
    /// Base addresses of the arrays.
    recv_base: u64,
    a_base: u64,
    b_base: u64,
    /// The timeline being recorded, if any.
    trace: Option<Box<T3Trace>>,
}

impl GpuNode {
    /// This GPU's tracker.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    fn new(
        index: u32,
        preset: &HbmPreset,
        arbiter: &dyn Fn() -> Box<dyn Arbiter>,
    ) -> Result<Self, String> {
        let mapping = AddressMapping::parse(&preset.controller.mapping, preset)
            .map_err(|e| format!("{}: mapping: {e}", preset.name))?;
        let mut mem = MemorySystem::new(
            preset,
            mapping.clone(),
            ControllerConfig::from_preset(preset),
        );
        mem.set_arbiter(|_| arbiter());
        mem.set_observers(|_| Box::new(TrackerTap::default()));
        let pcs = preset.pseudo_channels() as usize;
        Ok(Self {
            index,
            mem,
            mapping,
            pending: vec![VecDeque::new(); 2 * pcs],
            lanes_waiting: vec![0; (2 * pcs).div_ceil(64)],
            refused_by: vec![u32::MAX; 2 * pcs],
            pending_total: 0,
            pending_compute: 0,
            purpose: VecDeque::new(),
            purpose_base: 0,
            blocks: Vec::new(),
            free_blocks: Vec::new(),
            tracker: Tracker::default(),
            tracking: false,
            dma: HashMap::new(),
            dma_ready: VecDeque::new(),
            dma_busy: 0,
            maps: Vec::new(),
            dispatch_start: 0,
            producer: None,
            ring: None,
            out: None,
            recv: None,
            partial: None,
            bytes: KindBytes::default(),
            inflight: 0,
            occupancy_sum: 0.0,
            occupancy_cycles: 0.0,
            finished_at: None,
            fw_events: Vec::new(),
            fire_log: Vec::new(),
            boundary_told: false,
            done_buf: Vec::new(),
            tap_buf: Vec::new(),
            due_buf: Vec::new(),
        })
    }

    fn new_block(&mut self, b: Block) -> u32 {
        if let Some(i) = self.free_blocks.pop() {
            self.blocks[i as usize] = Some(b);
            i
        } else {
            self.blocks.push(Some(b));
            (self.blocks.len() - 1) as u32
        }
    }

    /// Queues a request for controller room.
    fn push_request(&mut self, req: Request, block: u32) {
        // The first column the request touches (a 32 B request may be a block's second).
        let a = self.mapping.decode(req.addr & !(REQ_BYTES / 2 - 1));
        let pc = self.mapping.pseudo_channel_index(&a);
        let lane = 2 * pc + usize::from(req.class != TrafficClass::Compute);
        if let Some(q) = self.pending.get_mut(lane) {
            q.push_back((req, block));
            if let Some(w) = self.lanes_waiting.get_mut(lane / 64) {
                *w |= 1u64 << (lane % 64);
            }
            self.pending_total += 1;
            if req.class == TrafficClass::Compute {
                self.pending_compute += 1;
            }
        }
    }

    /// The part of a slice that touches only this GPU: queue waiting requests, run the
    /// memory to `end`, collect finished requests and the tracker taps' columns.
    fn advance_memory(&mut self, end: Cycle) {
        self.fill();
        self.done_buf.clear();
        // Only controllers due by `end` are stepped (a controller's wake moves later only
        // when it is stepped), so only their taps can hold columns: the others were
        // emptied when they last stepped. Polling 64 boxed observers per GPU every slice
        // cost more than the columns they held.
        self.due_buf.clear();
        self.due_buf.extend(
            self.mem
                .wakes()
                .iter()
                .enumerate()
                .filter(|&(_, &w)| w <= end)
                .map(|(i, _)| i),
        );
        self.mem.advance_until(end, &mut self.done_buf);
        let ctrls = self.mem.controllers_mut();
        for &i in &self.due_buf {
            if let Some(t) = ctrls
                .get_mut(i)
                .and_then(|c| c.observer_as_mut::<TrackerTap>())
            {
                self.tap_buf.append(&mut t.issued);
            }
        }
    }

    /// Moves waiting requests into controller queues while they have room: per
    /// pseudo-channel, the producer's lane first, then communication's (separate ingress
    /// queues, so neither blocks the other's head).
    fn fill(&mut self) {
        if self.pending_total == 0 {
            return;
        }
        for word in 0..self.lanes_waiting.len() {
            let mut bits = self.lanes_waiting[word];
            while bits != 0 {
                let pc = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.fill_lane(pc);
                if self.pending[pc].is_empty() {
                    self.lanes_waiting[word] &= !(1u64 << (pc % 64));
                }
            }
        }
    }

    /// Submits lane `pc`'s waiting requests, oldest first, until one meets a full queue.
    #[inline]
    fn fill_lane(&mut self, pc: usize) {
        while let Some(&(req, block)) = self.pending[pc].front() {
            if let Some(by) = self.refused_by.get_mut(pc) {
                if *by != u32::MAX {
                    let full = self
                        .mem
                        .controllers()
                        .get(*by as usize)
                        .is_none_or(|c| !c.has_room(req.access, 1));
                    if full {
                        break;
                    }
                    *by = u32::MAX;
                }
            }
            match self.mem.submit(&req) {
                Ok(id) => {
                    self.pending[pc].pop_front();
                    self.pending_total -= 1;
                    if req.class == TrafficClass::Compute {
                        self.pending_compute -= 1;
                    }
                    self.inflight += 1;
                    let off = (id.0 - self.purpose_base) as usize;
                    while self.purpose.len() <= off {
                        self.purpose.push_back(None);
                    }
                    self.purpose[off] = Some(block);
                }
                Err(refused) => {
                    if let Some(by) = self.refused_by.get_mut(pc) {
                        *by = u32::try_from(refused.pseudo_channel).unwrap_or(u32::MAX);
                    }
                    break;
                }
            }
        }
    }
}

/// Totals of one GPU after a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeTotals {
    /// DRAM bytes by kind.
    pub bytes: KindBytes,
    /// Producer finished (last store done), ns.
    pub gemm_done_ns: Option<f64>,
    /// Collective finished, ns.
    pub collective_done_ns: Option<f64>,
    /// Mean requests in flight per pseudo-channel while the producer ran.
    pub mean_occupancy: f64,
    /// Tracker figures.
    pub tracker: super::tracker::TrackerStats,
    /// Tracker entries left unprogrammed (should be 0).
    pub orphans: u64,
}

impl T3System {
    /// A system of `cfg.gpus` GPUs (one, in the shortcut) with `arbiter` at every
    /// controller.
    ///
    /// # Errors
    /// A message naming what is wrong with the configuration.
    pub fn new(cfg: SystemConfig, arbiter: &dyn Fn() -> Box<dyn Arbiter>) -> Result<Self, String> {
        let shape = |c: u32| {
            let r = cfg.layout.chunk_rect(c);
            (r.rows, r.cols)
        };
        if cfg.shortcut
            && !(cfg.layout.even() && (1..cfg.layout.gpus).all(|c| shape(c) == shape(0)))
        {
            return Err(format!(
                "the symmetric shortcut needs chunks of equal shape ({} x {} over {} GPUs has \
                 partial tiles in some chunks only); simulate all GPUs",
                cfg.layout.m, cfg.layout.n, cfg.layout.gpus
            ));
        }
        let l = &cfg.layout;
        let aligned = |bytes: u64| bytes.is_multiple_of(REQ_BYTES);
        if cfg.shortcut
            && !(aligned(u64::from(l.n) * u64::from(l.elem))
                && (0..l.gpus)
                    .all(|c| aligned(u64::from(l.chunk_rect(c).col0) * u64::from(l.elem))))
        {
            // Mirroring shifts GPU 0's requests by a chunk's offset: exact only when the
            // shift moves whole requests (rows and chunk starts on request boundaries).
            return Err(format!(
                "the symmetric shortcut needs rows and chunk starts on {REQ_BYTES}-byte request \
                 boundaries ({} x {} elements of {} B); simulate all GPUs",
                l.m, l.n, l.elem
            ));
        }
        let simulated = if cfg.shortcut { 1 } else { cfg.gpus };
        let nodes = (0..simulated)
            .map(|i| GpuNode::new(i, &cfg.preset, arbiter))
            .collect::<Result<Vec<_>, _>>()?;
        let mb = 1u64 << 20;
        let out_bytes = cfg.layout.bytes().div_ceil(mb) * mb;
        let links = (0..cfg.gpus)
            .map(|_| LinkDirection::new(cfg.link_bytes_per_ns, cfg.link_latency_ns))
            .collect();
        let mut s = Self {
            recv_base: out_bytes,
            a_base: 2 * out_bytes,
            b_base: 2 * out_bytes + (256 * mb),
            cfg,
            nodes,
            links,
            direct: HashMap::new(),
            queues: (0..simulated).map(|_| EventQueue::new()).collect(),
            sender: 0,
            sent: vec![0; simulated as usize],
            now: 0,
            events: 0,
            trace: None,
        };
        if s.b_base + 512 * mb > s.cfg.preset.capacity_bytes() {
            return Err(format!(
                "the arrays ({} MB) do not fit the HBM ({} MB)",
                (s.b_base + 512 * mb) >> 20,
                s.cfg.preset.capacity_bytes() >> 20
            ));
        }
        if s.cfg.functional {
            let n = (s.cfg.layout.m as usize) * (s.cfg.layout.n as usize);
            for node in &mut s.nodes {
                node.out = Some(vec![0.0; n]);
                node.recv = Some(vec![0.0; n]);
            }
        }
        Ok(s)
    }

    /// The GPUs simulated.
    pub fn nodes(&self) -> &[GpuNode] {
        &self.nodes
    }

    /// Current cycle (ns).
    pub fn now(&self) -> Cycle {
        self.now
    }

    /// The block of the output GPU `g` holds reduced at the end of a reduce-scatter:
    /// its chunk of the firmware's geometry.
    pub fn owned_rect(&self, g: u32) -> Rect {
        self.cfg.layout.chunk_rect(g)
    }

    /// Sets GPU `g`'s partial output values (functional runs).
    pub fn set_partial(&mut self, g: usize, values: Vec<f32>) {
        if let Some(n) = self.nodes.get_mut(g) {
            n.partial = Some(values);
        }
    }

    /// GPU `g`'s output array values (functional runs).
    pub fn out_values(&self, g: usize) -> Option<&[f32]> {
        self.nodes.get(g).and_then(|n| n.out.as_deref())
    }

    /// Puts GPU `g`'s partial output into its output array at once (the GEMM's result
    /// before a sequential collective; its stores' timing is the producer run's).
    pub fn load_partial_as_output(&mut self, g: usize) {
        if let Some(n) = self.nodes.get_mut(g) {
            if let Some(p) = n.partial.clone() {
                n.out = Some(p);
            }
        }
    }

    fn base(&self, region: Region) -> u64 {
        match region {
            Region::Out => 0,
            Region::Recv => self.recv_base,
        }
    }

    /// Queues the requests that cover `rect` of `region` on GPU `node` for block `block`;
    /// returns how many and their bytes.
    #[allow(clippy::too_many_arguments)]
    fn rect_requests(
        &mut self,
        node: usize,
        rect: Rect,
        region: Region,
        access: Access,
        class: TrafficClass,
        source: Option<Source>,
        block: u32,
        at: Cycle,
    ) -> (u32, u64) {
        let l = self.cfg.layout;
        let base = self.base(region);
        let (mut count, mut bytes) = (0, 0);
        for row in rect.row0..rect.row0 + rect.rows {
            let start = base + l.offset(row, rect.col0);
            let end = base + l.offset(row, rect.col0 + rect.cols);
            let mut a = start & !(REQ_BYTES - 1);
            while a < end {
                // A request covers the 64 B block's columns that hold some of the data:
                // both, or only the first or the second 32 B column when a row segment
                // starts or ends inside the block (a masked access never issues a column
                // with no byte enabled). Its address is the first byte it carries: the
                // column is the same, and the tracker tap reads from it how many of the
                // wavefront's elements each column holds (a block shared by two tiles,
                // or by the end of one row and the start of the next, counts each part
                // once).
                let lo = a.max(start);
                let hi = (a + REQ_BYTES).min(end);
                let half = REQ_BYTES / 2;
                let size = if hi <= a + half || lo >= a + half {
                    half
                } else {
                    REQ_BYTES
                };
                let mut r = Request {
                    addr: lo,
                    size: size as u32,
                    access,
                    class,
                    source: None,
                    arrival: at,
                };
                if let Some(s) = source {
                    r = r.with_source(s);
                }
                self.nodes[node].push_request(r, block);
                count += 1;
                bytes += size;
                a += REQ_BYTES;
            }
        }
        (count, bytes)
    }

    fn access_of(&self, op: WriteOp) -> Access {
        match op {
            WriteOp::Store => Access::Write,
            WriteOp::Update => Access::Update(dtype_of(self.cfg.dtype)),
        }
    }

    /// Starts the write block `msg` describes on `node` (a local store, or a message
    /// landing).
    fn start_writes(&mut self, node: usize, msg: Message, at: Cycle) {
        let Message {
            rect,
            region,
            op,
            tag,
            payload,
            ack,
            class,
        } = msg;
        if rect.rows == 0 || rect.cols == 0 {
            self.block_done(
                node,
                BlockKind::Writes { ack, payload },
                rect,
                region,
                op,
                at,
            );
            return;
        }
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::Writes { ack, payload },
            left: 0,
            rect,
            region,
            op,
        });
        let source = tag.map(|(wg, wf)| Source {
            gpu: node as u16,
            workgroup: wg,
            wavefront: wf,
        });
        let access = self.access_of(op);
        let (n, bytes) = self.rect_requests(node, rect, region, access, class, source, b, at);
        let k = &mut self.nodes[node].bytes;
        match (op, class, region) {
            (WriteOp::Update, _, _) => k.updates += bytes,
            (WriteOp::Store, TrafficClass::Compute, Region::Out) => k.gemm_writes += bytes,
            _ => k.rs_writes += bytes,
        }
        if let Some(Some(blk)) = self.nodes[node].blocks.get_mut(b as usize) {
            blk.left = n;
        }
    }

    /// Starts a read block of `rect` on `node`.
    fn start_reads(&mut self, node: usize, rect: Rect, region: Region, kind: BlockKind, at: Cycle) {
        let b = self.nodes[node].new_block(Block {
            kind,
            left: 0,
            rect,
            region,
            op: WriteOp::Store,
        });
        let (n, bytes) = self.rect_requests(
            node,
            rect,
            region,
            Access::Read,
            TrafficClass::Communication,
            None,
            b,
            at,
        );
        self.nodes[node].bytes.rs_reads += bytes;
        if n == 0 {
            self.finish_block(node, b, at);
        } else if let Some(Some(blk)) = self.nodes[node].blocks.get_mut(b as usize) {
            blk.left = n;
        }
    }

    /// The values of `rect` in a row-major `m x n` array, each times `scale`.
    fn rect_values(&self, arr: &[f32], rect: Rect, scale: f32) -> Vec<f32> {
        let n = self.cfg.layout.n as usize;
        let mut v = Vec::with_capacity(super::layout::elements(&rect) as usize);
        for r in rect.row0..rect.row0 + rect.rows {
            let s = r as usize * n + rect.col0 as usize;
            v.extend(arr[s..s + rect.cols as usize].iter().map(|x| x * scale));
        }
        v
    }

    fn values(&self, node: usize, region: Region, rect: Rect) -> Option<Vec<f32>> {
        let arr = match region {
            Region::Out => self.nodes[node].out.as_ref()?,
            Region::Recv => self.nodes[node].recv.as_ref()?,
        };
        Some(self.rect_values(arr, rect, 1.0))
    }

    /// What a producer workgroup stores for `rect`: the GPU's partial output, or with
    /// split-K an equal share of it per split (exact for a power-of-two split of values
    /// on a binary grid), so the tile sums to the partial.
    fn partial_values(&self, node: usize, rect: Rect) -> Option<Vec<f32>> {
        let splits = self.nodes[node].producer.as_ref().map_or(1, |p| p.splits);
        let p = self.nodes[node].partial.as_ref()?;
        Some(self.rect_values(p, rect, 1.0 / splits as f32))
    }

    fn apply(&mut self, node: usize, region: Region, rect: Rect, op: WriteOp, vals: &[f32]) {
        let n = self.cfg.layout.n as usize;
        let dtype = self.cfg.dtype;
        let arr = match region {
            Region::Out => self.nodes[node].out.as_mut(),
            Region::Recv => self.nodes[node].recv.as_mut(),
        };
        let Some(arr) = arr else { return };
        let mut i = 0;
        for r in rect.row0..rect.row0 + rect.rows {
            let s = r as usize * n + rect.col0 as usize;
            for x in &mut arr[s..s + rect.cols as usize] {
                let v = vals.get(i).copied().unwrap_or(0.0);
                *x = match op {
                    WriteOp::Store => v,
                    WriteOp::Update => add_in(dtype, *x, v),
                };
                i += 1;
            }
        }
    }

    /// Sends `msg` from GPU `from` to GPU `to` at `at`.
    fn send(&mut self, from: u32, to: u32, msg: Message, at: Cycle) {
        let g = self.cfg.gpus;
        let bytes = super::layout::elements(&msg.rect) * u64::from(self.cfg.layout.elem) + 64;
        let arrive = if (from + g - 1) % g == to {
            self.links[from as usize].send(at as f64, bytes)
        } else {
            let (bw, lat) = (self.cfg.link_bytes_per_ns, self.cfg.link_latency_ns);
            self.direct
                .entry((from, to))
                .or_insert_with(|| LinkDirection::new(bw, lat))
                .send(at as f64, bytes)
        };
        let arrive = arrive.ceil() as Cycle;
        if let Some(t) = self.trace.as_deref_mut() {
            let g = if self.cfg.shortcut { 0 } else { from as usize };
            if let Some(k) = t.nodes.get(g).map(|x| x.link) {
                let name = format!("to GPU {to}");
                t.tl.span(k, &name, ps(at), ps(arrive));
            }
        }
        if self.cfg.shortcut {
            // GPU 0 stands for every GPU: what it sends to `to` is what GPU `from + d`
            // sends to `to + d`; the copy that lands on GPU 0 comes from `from - to`
            // positions upstream, i.e. the same message shifted by `(from - to)` chunks.
            let shift = (from + g - to) % g;
            let msg = self.shift_message(msg, shift);
            self.schedule(
                arrive,
                Ev::Arrive {
                    node: 0,
                    msg: Box::new(msg),
                },
            );
        } else {
            self.schedule(
                arrive,
                Ev::Arrive {
                    node: to,
                    msg: Box::new(msg),
                },
            );
        }
    }

    /// The message as it looks coming from `shift` GPUs further along the ring.
    fn shift_message(&self, mut msg: Message, shift: u32) -> Message {
        let l = self.cfg.layout;
        let chunk_of = |r: &Rect| {
            (0..l.gpus)
                .find(|&c| {
                    let cr = l.chunk_rect(c);
                    r.row0 >= cr.row0
                        && r.row0 < cr.row0 + cr.rows
                        && r.col0 >= cr.col0
                        && r.col0 < cr.col0 + cr.cols
                })
                .unwrap_or(0)
        };
        let from_chunk = chunk_of(&msg.rect);
        let to_chunk = (from_chunk + shift) % l.gpus;
        let (a, b) = (l.chunk_rect(from_chunk), l.chunk_rect(to_chunk));
        msg.rect.row0 = msg.rect.row0 - a.row0 + b.row0;
        msg.rect.col0 = msg.rect.col0 - a.col0 + b.col0;
        if let Some((wg, wf)) = msg.tag {
            let (fa, _) = l.chunk_wgs(from_chunk);
            let (fb, _) = l.chunk_wgs(to_chunk);
            msg.tag = Some((wg - fa + fb, wf));
        }
        // A DMA acknowledgement stays GPU 0's own: by symmetry it lands when this does.
        msg
    }

    fn finish_block(&mut self, node: usize, b: u32, at: Cycle) {
        let Some(blk) = self.nodes[node]
            .blocks
            .get_mut(b as usize)
            .and_then(Option::take)
        else {
            return;
        };
        self.nodes[node].free_blocks.push(b);
        self.block_done(node, blk.kind, blk.rect, blk.region, blk.op, at);
    }

    fn block_done(
        &mut self,
        node: usize,
        kind: BlockKind,
        rect: Rect,
        region: Region,
        op: WriteOp,
        at: Cycle,
    ) {
        match kind {
            BlockKind::Untracked => {}
            BlockKind::WgRead { slot } => self.wg_progress(node, slot, true, at),
            BlockKind::Writes { ack, payload } => {
                if let Some(p) = payload {
                    self.apply(node, region, rect, op, &p);
                }
                match ack {
                    Ack::None => {
                        if let Some(p) = self.nodes[node].producer.as_mut() {
                            if region == Region::Out && p.stores_left > 0 {
                                p.stores_left -= 1;
                                if p.stores_left == 0 && p.finished == p.total {
                                    p.done_at = Some(at);
                                }
                            }
                        }
                    }
                    Ack::Dma { node: n, id } => {
                        let lat = self.cfg.link_latency_ns.ceil() as Cycle;
                        let target = if self.cfg.shortcut { 0 } else { n };
                        if let Some(t) = self.trace.as_deref_mut() {
                            let g = target as usize;
                            if let (Some((start, to)), Some(k)) =
                                (t.dma_start.remove(&(g, id)), t.nodes.get(g).map(|x| x.dma))
                            {
                                let name = format!("DMA -> GPU {to}");
                                t.tl.span(k, &name, ps(start), ps(at + lat));
                            }
                        }
                        self.schedule(
                            at + lat,
                            Ev::Firmware {
                                node: target,
                                event: Event::DmaDone {
                                    engine: 0,
                                    id,
                                    status: Ok(()),
                                },
                            },
                        );
                    }
                    Ack::Ring { step } => self.ring_received(node, step, at),
                }
            }
            BlockKind::DmaRead { desc } => self.dma_reads_done(node, desc, rect, at),
            BlockKind::RingRead { item } => self.ring_read_done(node, item, region, rect, at),
        }
    }

    // ----- producer -----

    /// Starts the producer GEMM on every GPU (all local plain stores unless maps say
    /// otherwise).
    pub fn start_producer(&mut self, model: ProducerModel, at: Cycle) {
        self.start_split_producer(model, 1, at);
    }

    /// Starts a split-K producer: `splits` workgroups per output tile, each over
    /// `k / splits` (the model's `k` already is), each adding its part of the tile.
    pub fn start_split_producer(&mut self, model: ProducerModel, splits: u32, at: Cycle) {
        let tiles = self.cfg.layout.tiles();
        let splits = splits.max(1);
        let total = tiles * splits;
        for i in 0..self.nodes.len() {
            let resident = model.resident as usize;
            let start = self.nodes[i].dispatch_start % tiles.max(1);
            self.nodes[i].producer = Some(Producer {
                model,
                start,
                total,
                tiles,
                splits,
                dispatched: 0,
                finished: 0,
                slots: vec![None; resident],
                free: (0..resident as u32).rev().collect(),
                done_at: None,
                stores_left: 0,
            });
            self.dispatch(i, at);
        }
    }

    /// Where workgroup `wg`'s stores go; `None` when output maps exist and none covers
    /// it (the workgroup is not this GPU's to compute, as in all-gather).
    fn route(&self, node: usize, wg: u32) -> Option<StoreRoute> {
        let maps = &self.nodes[node].maps;
        let op = |o: DmaOp| match o {
            DmaOp::Store => WriteOp::Store,
            DmaOp::Update(_) => WriteOp::Update,
        };
        for m in maps {
            if wg >= m.wg_first && wg - m.wg_first < m.wg_count {
                return Some(StoreRoute {
                    local: m.local.map(op),
                    remote: m.remote.map(|(p, o)| (u32::from(p), op(o))),
                });
            }
        }
        maps.is_empty().then_some(StoreRoute {
            local: Some(WriteOp::Store),
            remote: None,
        })
    }

    fn dispatch(&mut self, node: usize, at: Cycle) {
        loop {
            if self.nodes[node].pending_compute > PENDING_CAP {
                return;
            }
            let Some(p) = self.nodes[node].producer.as_mut() else {
                return;
            };
            if p.dispatched >= p.total {
                return;
            }
            let Some(slot) = p.free.pop() else { return };
            // The splits of a tile run back to back, tiles in staggered order.
            let wg = (p.start + p.dispatched / p.splits) % p.tiles;
            p.dispatched += 1;
            if self.route(node, wg).is_none() {
                // Not this GPU's workgroup: it counts as done at once.
                let p = self.nodes[node].producer.as_mut().expect("producer");
                p.free.push(slot);
                p.finished += 1;
                if p.finished == p.total && p.stores_left == 0 {
                    p.done_at = Some(at);
                }
                continue;
            }
            self.trace_wgs(node, 1, at);
            let p = self.nodes[node].producer.as_mut().expect("producer");
            p.slots[slot as usize] = Some(WgState {
                wg,
                phase: 0,
                reads_left: 0,
                compute_done: false,
            });
            self.start_phase(node, slot, at);
        }
    }

    fn start_phase(&mut self, node: usize, slot: u32, at: Cycle) {
        let (wg, phase, model) = {
            let p = self.nodes[node].producer.as_ref().expect("producer");
            let s = p.slots[slot as usize].expect("slot");
            (s.wg, s.phase, p.model)
        };
        let compute = model.phase_ns.ceil() as Cycle;
        self.schedule(
            at + compute.max(1),
            Ev::Compute {
                node: node as u32,
                slot,
            },
        );
        let per_phase = model.read_bytes_per_wg / f64::from(PHASES);
        let n = (per_phase / REQ_BYTES as f64).round() as u64;
        if n == 0 {
            return;
        }
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::WgRead { slot },
            left: n as u32,
            rect: Rect::default(),
            region: Region::Out,
            op: WriteOp::Store,
        });
        // Half the bytes from A's tile-row panel, half from B's tile-column panel.
        let l = self.cfg.layout;
        let r = l.wg_rect(wg);
        let (pa, pb) = model.cost.panel_bytes;
        let tr = u64::from(r.row0 / l.tile.0);
        let tc = u64::from(r.col0 / l.tile.1);
        let a0 = self.a_base
            + ((tr as f64 * pa) as u64 + (u64::from(phase) * pa as u64) / u64::from(PHASES))
                % (256 << 20);
        let b0 = self.b_base
            + ((tc as f64 * pb) as u64 + (u64::from(phase) * pb as u64) / u64::from(PHASES))
                % (256 << 20);
        for i in 0..n {
            let addr = if i % 2 == 0 {
                a0 + (i / 2) * REQ_BYTES
            } else {
                b0 + (i / 2) * REQ_BYTES
            };
            let req =
                Request::read(addr & !(REQ_BYTES - 1), REQ_BYTES as u32, at).with_source(Source {
                    gpu: node as u16,
                    workgroup: wg,
                    wavefront: 0,
                });
            self.nodes[node].push_request(req, b);
        }
        self.nodes[node].bytes.gemm_reads += n * REQ_BYTES;
        if let Some(s) = self.nodes[node]
            .producer
            .as_mut()
            .and_then(|p| p.slots[slot as usize].as_mut())
        {
            s.reads_left = 1;
        }
    }

    /// A workgroup phase's reads came back (`reads_back`) or its compute finished; the
    /// phase ends when both have.
    fn wg_progress(&mut self, node: usize, slot: u32, reads_back: bool, at: Cycle) {
        let ready = {
            let Some(s) = self.nodes[node]
                .producer
                .as_mut()
                .and_then(|p| p.slots[slot as usize].as_mut())
            else {
                return;
            };
            if reads_back {
                s.reads_left = 0;
            } else {
                s.compute_done = true;
            }
            s.reads_left == 0 && s.compute_done
        };
        if ready {
            self.phase_end(node, slot, at);
        }
    }

    fn phase_end(&mut self, node: usize, slot: u32, at: Cycle) {
        let (wg, last) = {
            let p = self.nodes[node].producer.as_mut().expect("producer");
            let s = p.slots[slot as usize].as_mut().expect("slot");
            s.phase += 1;
            s.compute_done = false;
            (s.wg, s.phase >= PHASES)
        };
        if !last {
            self.start_phase(node, slot, at);
            return;
        }
        // Epilogue: store the tile, wavefront by wavefront.
        let Some(route) = self.route(node, wg) else {
            return;
        };
        let l = self.cfg.layout;
        for wf in 0..l.wfs {
            let rect = l.wf_rect(wg, wf);
            if rect.rows == 0 {
                continue;
            }
            // The tile's stores: a local write and/or a message to a peer, the same
            // tile and tag either way.
            let tile = Message {
                rect,
                region: Region::Out,
                op: WriteOp::Store,
                tag: Some((wg, wf as u8)),
                payload: self.partial_values(node, rect),
                ack: Ack::None,
                class: TrafficClass::Compute,
            };
            if let Some((peer, op)) = route.remote {
                let msg = Message {
                    op,
                    class: TrafficClass::Communication,
                    ..tile.clone()
                };
                self.send(node as u32, peer, msg, at);
            }
            if let Some(op) = route.local {
                if let Some(p) = self.nodes[node].producer.as_mut() {
                    p.stores_left += 1;
                }
                self.start_writes(node, Message { op, ..tile }, at);
            }
        }
        self.trace_wgs(node, -1, at);
        let p = self.nodes[node].producer.as_mut().expect("producer");
        p.slots[slot as usize] = None;
        p.free.push(slot);
        p.finished += 1;
        if p.finished == p.total && p.stores_left == 0 {
            p.done_at = Some(at);
        }
        self.dispatch(node, at);
    }

    // ----- tracker and DMA -----

    fn fired(&mut self, node: usize, f: Fired, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let Some(k) = t.nodes.get(node).map(|n| n.tracker) {
                t.tl.instant(k, "fired", ps(at));
            }
        }
        self.nodes[node]
            .fire_log
            .push((at, f.wg_id, f.wf_id, f.dma_id));
        self.nodes[node]
            .fw_events
            .push((at, Event::TrackerFired { entry: f.entry }));
        if f.dma_id == TRACKER_NO_DMA {
            return;
        }
        let ready = match self.nodes[node].dma.get_mut(&f.dma_id) {
            Some((d, got)) => {
                *got += 1;
                *got >= d.fires.max(1)
            }
            None => false,
        };
        if ready {
            self.nodes[node].dma_ready.push_back(f.dma_id);
        }
    }

    fn run_dma(&mut self, node: usize, at: Cycle) {
        while self.nodes[node].dma_busy < DMA_IN_FLIGHT {
            let Some(id) = self.nodes[node].dma_ready.pop_front() else {
                return;
            };
            let Some((d, _)) = self.nodes[node].dma.get(&id).cloned() else {
                continue;
            };
            self.nodes[node].dma_busy += 1;
            if let Some(t) = self.trace.as_deref_mut() {
                let to = split_peer(d.dst).0.map_or(node as u32, u32::from);
                t.dma_start.insert((node, id), (at, to));
            }
            let rect = self.desc_rect(d.src, d.rows, d.cols);
            self.start_reads(node, rect, Region::Out, BlockKind::DmaRead { desc: id }, at);
        }
    }

    fn desc_rect(&self, addr: u64, rows: u16, cols: u16) -> Rect {
        let l = self.cfg.layout;
        let (_, local) = split_peer(addr);
        let e = local / u64::from(l.elem);
        Rect {
            row0: (e / u64::from(l.n)) as u32,
            col0: (e % u64::from(l.n)) as u32,
            rows: u32::from(rows),
            cols: u32::from(cols),
        }
    }

    fn dma_reads_done(&mut self, node: usize, id: u16, rect: Rect, at: Cycle) {
        let Some((d, _)) = self.nodes[node].dma.remove(&id) else {
            return;
        };
        self.nodes[node].dma_busy -= 1;
        let payload = self.values(node, Region::Out, rect);
        let (peer, dst_local) = split_peer(d.dst);
        let to = peer.map_or(node as u32, u32::from);
        let dst_rect = self.desc_rect(dst_local, d.rows, d.cols);
        let op = match d.op {
            DmaOp::Store => WriteOp::Store,
            DmaOp::Update(_) => WriteOp::Update,
        };
        let msg = Message {
            rect: dst_rect,
            region: Region::Out,
            op,
            tag: Some((d.dst_wg_id, d.dst_wf_id)),
            payload,
            ack: Ack::Dma {
                node: node as u32,
                id,
            },
            class: TrafficClass::Communication,
        };
        let from = self.nodes[node].index;
        self.send(from, to, msg, at);
        self.run_dma(node, at);
    }

    // ----- ring collectives -----

    /// Starts a ring collective on every GPU over the whole output array, with all CUs.
    pub fn start_ring(&mut self, kind: RingKind, at: Cycle) {
        self.start_ring_on(kind, RING_IN_FLIGHT, at);
    }

    /// Starts a ring collective keeping at most `in_flight` blocks in flight per GPU (a
    /// kernel confined to a share of the CUs).
    pub fn start_ring_on(&mut self, kind: RingKind, in_flight: usize, at: Cycle) {
        for i in 0..self.nodes.len() {
            let per_step = self.step_items(i, kind, 1).len() as u32;
            self.nodes[i].ring = Some(Ring {
                kind,
                step: 0,
                todo: VecDeque::new(),
                in_flight: 0,
                max_in_flight: in_flight.max(1),
                received: 0,
                per_step,
                early: HashMap::new(),
                items: HashMap::new(),
                next_item: 0,
                done_at: None,
            });
            self.ring_begin_step(i, 1, at);
        }
    }

    /// The chunk GPU `g` sends in step `s`.
    fn ring_chunk(&self, g: u32, kind: RingKind, s: u32) -> u32 {
        let n = self.cfg.gpus;
        match kind {
            RingKind::AllGather => (g + s + n - 1) % n,
            _ => (g + s) % n,
        }
    }

    fn step_items(&self, node: usize, kind: RingKind, s: u32) -> Vec<Rect> {
        let l = self.cfg.layout;
        let g = self.nodes[node].index;
        let c = if s >= self.cfg.gpus {
            g
        } else {
            self.ring_chunk(g, kind, s)
        };
        let (first, count) = l.chunk_wgs(c);
        let mut v = Vec::new();
        for wg in first..first + count {
            for wf in 0..l.wfs {
                let r = l.wf_rect(wg, wf);
                if r.rows > 0 {
                    v.push(r);
                }
            }
        }
        v
    }

    fn ring_begin_step(&mut self, node: usize, s: u32, at: Cycle) {
        let n = self.cfg.gpus;
        let kind = self.nodes[node]
            .ring
            .as_ref()
            .map(|r| r.kind)
            .expect("ring");
        let final_pass = s >= n;
        if final_pass && kind != RingKind::ReduceScatter {
            if let Some(r) = self.nodes[node].ring.as_mut() {
                r.done_at = Some(at);
                r.step = s;
            }
            return;
        }
        let items = self.step_items(node, kind, s);
        if let Some(r) = self.nodes[node].ring.as_mut() {
            r.step = s;
            r.todo.extend(items.into_iter().map(|rect| (rect, s)));
            r.received = r.early.remove(&s).unwrap_or(0);
        }
        self.ring_pump(node, at);
    }

    fn ring_pump(&mut self, node: usize, at: Cycle) {
        loop {
            let (rect, item, s, kind) = {
                let r = self.nodes[node].ring.as_mut().expect("ring");
                if r.in_flight >= r.max_in_flight {
                    return;
                }
                let Some((rect, s)) = r.todo.pop_front() else {
                    return;
                };
                r.in_flight += 1;
                let item = r.next_item;
                r.next_item += 1;
                (rect, item, s, r.kind)
            };
            // Reads: the local copy; the received copy too for the CU reduction past
            // step 1 (and in the final pass).
            let two = kind == RingKind::ReduceScatter && s >= 2;
            let r = self.nodes[node].ring.as_mut().expect("ring");
            r.items
                .insert(item, (if two { 2 } else { 1 }, rect, None, None, s));
            self.start_reads(node, rect, Region::Out, BlockKind::RingRead { item }, at);
            if two {
                self.start_reads(node, rect, Region::Recv, BlockKind::RingRead { item }, at);
            }
        }
    }

    fn ring_read_done(&mut self, node: usize, item: u32, region: Region, rect: Rect, at: Cycle) {
        let vals = self.values(node, region, rect);
        let (complete, s, kind) = {
            let r = self.nodes[node].ring.as_mut().expect("ring");
            let kind = r.kind;
            let Some(e) = r.items.get_mut(&item) else {
                return;
            };
            // The block's own step, not the ring's current one (which may have moved on).
            let s = e.4;
            e.0 -= 1;
            match region {
                Region::Out => e.2 = vals,
                Region::Recv => e.3 = vals,
            }
            (e.0 == 0, s, kind)
        };
        if !complete {
            return;
        }
        let (_, rect, local, received, _) = self.nodes[node]
            .ring
            .as_mut()
            .and_then(|r| r.items.remove(&item))
            .expect("item");
        let dtype = self.cfg.dtype;
        let payload = match (local, received) {
            (Some(a), Some(b)) => Some(
                a.iter()
                    .zip(&b)
                    .map(|(x, y)| add_in(dtype, *y, *x))
                    .collect(),
            ),
            (a, _) => a,
        };
        let n = self.cfg.gpus;
        let g = self.nodes[node].index;
        if s >= n {
            // The baseline's final pass: the reduced own chunk is written locally.
            let msg = Message {
                rect,
                region: Region::Out,
                op: WriteOp::Store,
                tag: None,
                payload,
                ack: Ack::Ring { step: s },
                class: TrafficClass::Communication,
            };
            self.start_writes(node, msg, at);
        } else {
            let (region, op) = match kind {
                RingKind::ReduceScatter => (Region::Recv, WriteOp::Store),
                RingKind::ReduceScatterNmc => (Region::Out, WriteOp::Update),
                RingKind::AllGather => (Region::Out, WriteOp::Store),
            };
            let msg = Message {
                rect,
                region,
                op,
                tag: None,
                payload,
                ack: Ack::Ring { step: s },
                class: TrafficClass::Communication,
            };
            self.send(g, (g + n - 1) % n, msg, at);
        }
        if let Some(r) = self.nodes[node].ring.as_mut() {
            r.in_flight -= 1;
        }
        self.ring_pump(node, at);
    }

    /// A block of step `step` landed on `node` (from upstream; or the final pass's own).
    fn ring_received(&mut self, node: usize, step: u32, at: Cycle) {
        let n = self.cfg.gpus;
        let advance = {
            let r = self.nodes[node].ring.as_mut().expect("ring");
            if step != r.step {
                *r.early.entry(step).or_insert(0) += 1;
                false
            } else {
                r.received += 1;
                r.received >= r.per_step
            }
        };
        if advance {
            let s = self.nodes[node].ring.as_ref().map_or(n, |r| r.step);
            if s >= n {
                if let Some(r) = self.nodes[node].ring.as_mut() {
                    r.done_at = Some(at);
                }
            } else {
                self.ring_begin_step(node, s + 1, at);
            }
        }
    }

    // ----- the loop -----

    /// Handles a message landing on `node`.
    fn arrive(&mut self, node: usize, msg: Message, at: Cycle) {
        self.start_writes(node, msg, at);
    }

    /// Elements of the tapped column's wavefront that the column carries. A request is
    /// [`REQ_BYTES`] long and issues one column per 32 B half; its data is the wavefront's
    /// row segment from the request's first carried byte to the request's end or the
    /// segment's end, whichever comes first; the column carries the part of that in its
    /// half (found by decoding the request's first half to a place).
    fn column_elements(&self, node: usize, t: &Tapped) -> u32 {
        const COL: u64 = 32;
        let l = &self.cfg.layout;
        let elem = u64::from(l.elem.max(1));
        let base = if t.addr >= self.recv_base {
            self.recv_base
        } else {
            0
        };
        let Some(row) = (t.addr - base).checked_div(u64::from(l.n) * elem) else {
            return 0;
        };
        let rect = l.wf_rect(t.wg, u32::from(t.wf));
        let req = t.addr & !(REQ_BYTES - 1);
        let data_end = (req + REQ_BYTES).min(base + l.offset(row as u32, rect.col0 + rect.cols));
        let map = &self.nodes[node].mapping;
        let d = map.decode(req);
        let first = (
            map.pseudo_channel_index(&d),
            d.bank_group as u8,
            d.bank as u8,
            d.row,
            d.col,
        ) == t.place;
        let col_lo = if first { req } else { req + COL };
        let lo = col_lo.max(t.addr);
        let hi = (col_lo + COL).min(data_end);
        (hi.saturating_sub(lo) / elem) as u32
    }

    fn drain_taps(&mut self, node: usize) {
        let mut issued = std::mem::take(&mut self.nodes[node].tap_buf);
        if !self.nodes[node].tracking {
            issued.clear();
            self.nodes[node].tap_buf = issued;
            return;
        }
        issued.sort_unstable_by_key(|x| x.at);
        for t in issued.drain(..) {
            let (at, wg, wf) = (t.at, t.wg, t.wf);
            let elems = self.column_elements(node, &t);
            if elems == 0 {
                // A column of a request whose wavefront data ended in its other half:
                // its byte mask is empty, so it is no update of this tile.
                continue;
            }
            let o = self.nodes[node].tracker.count(wg, wf, elems);
            if o.spilled {
                self.spill_access(node, wg, wf, at);
            }
            if let Some(f) = o.fired {
                self.fired(node, f, at);
            }
        }
        // Keep the buffer's capacity for the next slice (nothing taps while it is out).
        self.nodes[node].tap_buf = issued;
    }

    fn spill_access(&mut self, node: usize, wg: u32, wf: u8, at: Cycle) {
        // One read-modify-write of the entry's counter in the spill table: an array of
        // 64-B records indexed by (workgroup, wavefront), spread over the channels as
        // any array is.
        let b = self.nodes[node].new_block(Block {
            kind: BlockKind::Untracked,
            left: 2,
            rect: Rect::default(),
            region: Region::Out,
            op: WriteOp::Store,
        });
        let slot = (u64::from(wg) * 8 + u64::from(wf & 7)) % (1 << 20);
        let addr = self.b_base + (300 << 20) + slot * 64;
        self.nodes[node].push_request(
            Request::read(addr, 32, at).with_class(TrafficClass::Communication),
            b,
        );
        self.nodes[node].push_request(
            Request::write(addr, 32, at).with_class(TrafficClass::Communication),
            b,
        );
        self.nodes[node].bytes.spill += 64;
    }

    fn complete(&mut self, node: usize, done: &[MemCompletion]) {
        for c in done {
            let n = &mut self.nodes[node];
            n.inflight -= 1;
            let off = (c.id.0 - n.purpose_base) as usize;
            let b = n.purpose.get_mut(off).and_then(Option::take);
            while matches!(n.purpose.front(), Some(None)) {
                n.purpose.pop_front();
                n.purpose_base += 1;
            }
            let Some(b) = b else { continue };
            let last = match n.blocks.get_mut(b as usize) {
                Some(Some(blk)) => {
                    blk.left = blk.left.saturating_sub(1);
                    blk.left == 0
                }
                _ => false,
            };
            if last {
                self.finish_block(node, b, c.finish);
            }
        }
    }

    /// Schedules `ev` for its GPU, keyed by the GPU being stepped (the sender) and the
    /// sender's own count, so that events of one cycle are delivered in an order that
    /// does not depend on how the GPUs' steps interleave.
    fn schedule(&mut self, at: Cycle, ev: Ev) {
        let to = match &ev {
            Ev::Compute { node, .. } | Ev::Arrive { node, .. } | Ev::Firmware { node, .. } => {
                *node as usize
            }
        };
        let n = self.sent.get_mut(self.sender as usize).map_or(0, |c| {
            *c += 1;
            *c
        });
        let key = (u64::from(self.sender) << 48) | n;
        if let Some(q) = self.queues.get_mut(to) {
            q.push_keyed(at, 0, key, ev);
        }
    }

    /// Slices each GPU runs on its own before the next GPU's turn: as many as fit in
    /// the link latency (nothing a GPU sends reaches another sooner), one when a
    /// timeline samples every slice or the latency is shorter than two slices.
    fn window_slices(&self) -> Cycle {
        if self.trace.is_some() {
            return 1;
        }
        // A latency under 33 ns gives 1; an infinite one, the cap.
        let lat = self.cfg.link_latency_ns as Cycle;
        let cap = Cycle::from(self.cfg.window_slices).clamp(1, MAX_WINDOW_SLICES);
        (lat.saturating_sub(1) / SLICE_CYCLES).clamp(1, cap)
    }

    /// One slice of GPU `i`, ending at `end`: its events due by `end` in time order (a
    /// request they cause arrives at its event's cycle), its memory to `end`, then the
    /// consequences (column issues to the tracker, finished requests to their blocks,
    /// firmware events, DMA, dispatch, queued requests into the controllers).
    fn step_node(
        &mut self,
        i: usize,
        end: Cycle,
        fw: &mut impl FnMut(&mut Self, usize, Event, Cycle),
    ) {
        while let Some(e) = self.queues[i].pop_due(end) {
            self.events += 1;
            let at = e.at;
            match e.event {
                Ev::Compute { node, slot } => self.wg_progress(node as usize, slot, false, at),
                Ev::Arrive { node, msg } => self.arrive(node as usize, *msg, at),
                Ev::Firmware { node, event } => fw(self, node as usize, event, at),
            }
        }
        self.nodes[i].advance_memory(end);
        self.drain_taps(i);
        let done_now = std::mem::take(&mut self.nodes[i].done_buf);
        self.events += done_now.len() as u64;
        self.complete(i, &done_now);
        self.nodes[i].done_buf = done_now;
        let evs = std::mem::take(&mut self.nodes[i].fw_events);
        for (at, ev) in evs {
            fw(self, i, ev, at);
        }
        self.run_dma(i, end);
        self.dispatch(i, end);
        self.nodes[i].fill();
        let n = &mut self.nodes[i];
        if !n.boundary_told && n.producer.as_ref().is_some_and(|p| p.done_at.is_some()) {
            n.boundary_told = true;
            n.mem.kernel_boundary();
        }
        if n.producer.as_ref().is_some_and(|p| p.done_at.is_none()) {
            n.occupancy_sum += n.inflight as f64;
            n.occupancy_cycles += 1.0;
        }
    }

    /// Runs until `done(self)` holds, or `limit` cycles pass. `done` is checked between
    /// windows ([`T3System::window_slices`]): the GPUs may run up to a window past the
    /// slice where it first held, idle by then for the conditions the runs use (every
    /// producer, collective or firmware finished), whose results are stamped per GPU.
    ///
    /// # Errors
    /// [`RunError::Stuck`] saying what was still running when `limit` passed;
    /// [`RunError::Limit`] when a cap of the configuration's [`Limits`] is reached.
    pub fn run_until(
        &mut self,
        limit: Cycle,
        mut fw: impl FnMut(&mut Self, usize, Event, Cycle),
        done: impl Fn(&Self) -> bool,
    ) -> Result<Cycle, RunError> {
        let window = self.window_slices();
        while !done(self) {
            if self.now > limit {
                return Err(RunError::Stuck(self.describe()));
            }
            self.cfg
                .limits
                .check(self.now * PS_PER_NS, self.events)
                .map_err(RunError::Limit)?;
            let start = self.now;
            // Each GPU runs the window's slices on its own: nothing it sends reaches
            // another GPU within the window, so the GPUs' order does not matter, and a
            // GPU's state stays in the host's caches for the whole window. (Running the
            // GPUs on rayon threads was measured slower with one slice per turn: too
            // little work per fork-join.)
            for i in 0..self.nodes.len() {
                self.sender = i as u32;
                let mut end = start;
                for _ in 0..window {
                    end += SLICE_CYCLES;
                    self.step_node(i, end, &mut fw);
                }
            }
            self.now = start + window * SLICE_CYCLES;
            if window == 1 {
                self.trace_slice(self.now);
            }
        }
        Ok(self.now)
    }

    fn describe(&self) -> String {
        let n = &self.nodes[0];
        format!(
            "at {} ns: GPU 0 producer {:?} of {:?}, ring step {:?}, pending {}, in flight {}, DMA ready {} busy {} programmed {}, tracker live {}",
            self.now,
            n.producer.as_ref().map(|p| p.finished),
            n.producer.as_ref().map(|p| p.total),
            n.ring.as_ref().map(|r| (r.step, r.received, r.per_step)),
            n.pending_total,
            n.inflight,
            n.dma_ready.len(),
            n.dma_busy,
            n.dma.len(),
            n.tracker.live()
        )
    }

    /// Whether every GPU's producer finished.
    pub fn producers_done(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| n.producer.as_ref().is_none_or(|p| p.done_at.is_some()))
    }

    /// Whether every GPU's ring kernel finished.
    pub fn rings_done(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| n.ring.as_ref().is_none_or(|r| r.done_at.is_some()))
    }

    /// Delivers a firmware event to GPU `node` at `at`.
    pub fn post_firmware(&mut self, node: usize, event: Event, at: Cycle) {
        self.schedule(
            at,
            Ev::Firmware {
                node: node as u32,
                event,
            },
        );
    }

    /// Whether every simulated GPU's firmware reported its collective complete.
    pub fn nodes_finished(&self) -> bool {
        self.nodes.iter().all(|n| n.finished_at.is_some())
    }

    /// Whether nothing is left in flight (no pending requests, blocks, DMAs or events).
    pub fn quiet(&self) -> bool {
        self.queues.iter().all(EventQueue::is_empty)
            && self.nodes.iter().all(|n| {
                n.pending_total == 0
                    && n.inflight == 0
                    && n.dma.is_empty()
                    && n.dma_ready.is_empty()
            })
    }

    /// Per-GPU totals.
    pub fn totals(&self) -> Vec<NodeTotals> {
        self.nodes
            .iter()
            .map(|n| NodeTotals {
                bytes: n.bytes,
                gemm_done_ns: n
                    .producer
                    .as_ref()
                    .and_then(|p| p.done_at)
                    .map(|c| c as f64),
                collective_done_ns: n
                    .ring
                    .as_ref()
                    .and_then(|r| r.done_at)
                    .map(|c| c as f64)
                    .or(n.finished_at.map(|c| c as f64)),
                mean_occupancy: if n.occupancy_cycles > 0.0 {
                    n.occupancy_sum / n.occupancy_cycles / (n.pending.len() / 2).max(1) as f64
                } else {
                    0.0
                },
                tracker: n.tracker.stats(),
                orphans: n.tracker.orphans(),
            })
            .collect()
    }

    /// Marks GPU `node` finished (its firmware says the collective completed).
    pub fn mark_finished(&mut self, node: usize, at: Cycle) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.finished_at.get_or_insert(at);
        }
    }

    /// Starts recording a timeline under `config` (call before starting any kernel):
    /// per GPU the producer kernel, running workgroups, firmware handler runs, DMA
    /// transfers, link transfers, tracker firings and live entries, requests in flight,
    /// and each controller's queue occupancy (sampled).
    pub fn enable_timeline(&mut self, config: TimelineConfig) {
        let mut tl = Timeline::new(config);
        let gpus = self.nodes.len();
        let nodes = (0..gpus)
            .map(|g| {
                let p = format!("GPU {g}");
                let m = format!("GPU {g} memory");
                let pcs = self.nodes[g].mem.controllers().len();
                NodeTracks {
                    kernel: tl.track(&p, "kernels", TrackKind::Spans),
                    cp: tl.track(&p, "CP (firmware)", TrackKind::Instants),
                    dma: tl.track(&p, "DMA", TrackKind::Spans),
                    link: tl.track(&p, "link out", TrackKind::Spans),
                    tracker: tl.track(&p, "tracker fired", TrackKind::Instants),
                    tracker_live: tl.track(&p, "tracker live entries", TrackKind::Counter),
                    wgs: tl.track(&p, "workgroups running", TrackKind::Counter),
                    inflight: tl.track(&m, "requests in flight", TrackKind::Counter),
                    queues: (0..pcs)
                        .map(|pc| tl.track(&m, &format!("PC {pc} queue"), TrackKind::Counter))
                        .collect(),
                }
            })
            .collect();
        tl.set_meta("model", "t3");
        tl.set_meta("gpus", &self.cfg.gpus.to_string());
        tl.set_meta("simulated_gpus", &gpus.to_string());
        self.trace = Some(Box::new(T3Trace {
            tl,
            nodes,
            kernel_start: vec![None; gpus],
            kernel_told: vec![false; gpus],
            dma_start: HashMap::new(),
            running: vec![0; gpus],
        }));
    }

    /// The recorded timeline (recording stops).
    pub fn take_timeline(&mut self) -> Option<Timeline> {
        self.trace.take().map(|mut t| {
            t.tl.finish();
            t.tl
        })
    }

    /// Records a firmware handler run on GPU `node` at `at` (T3 charges the CP no time:
    /// an instant named after the event).
    pub fn trace_firmware(&mut self, node: usize, event: &Event, at: Cycle) {
        if self.trace.is_some() {
            let d = format!("{event:?}");
            self.trace_cp(node, variant_name(&d), at);
        }
    }

    /// Records a firmware call named `name` on GPU `node` at `at` (an instant).
    pub fn trace_cp(&mut self, node: usize, name: &str, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let Some(k) = t.nodes.get(node).map(|n| n.cp) {
                t.tl.instant(k, name, ps(at));
            }
        }
    }

    /// The workgroups running on GPU `node` changed by `delta` at `at`.
    fn trace_wgs(&mut self, node: usize, delta: i32, at: Cycle) {
        if let Some(t) = self.trace.as_deref_mut() {
            if let (Some(r), Some(k)) = (t.running.get_mut(node), t.nodes.get(node)) {
                *r = r.saturating_add_signed(delta);
                if t.kernel_start[node].is_none() {
                    t.kernel_start[node] = Some(at);
                }
                t.tl.counter(k.wgs, ps(at), f64::from(*r));
            }
        }
    }

    /// Per slice: the producer kernels that ended, and the sampled counters.
    fn trace_slice(&mut self, end: Cycle) {
        let Some(t) = self.trace.as_deref_mut() else {
            return;
        };
        for (g, n) in self.nodes.iter().enumerate() {
            if let Some(done) = n.producer.as_ref().and_then(|p| p.done_at) {
                if !t.kernel_told[g] {
                    t.kernel_told[g] = true;
                    let start = t.kernel_start[g].unwrap_or(0);
                    t.tl.span(t.nodes[g].kernel, "GEMM (producer)", ps(start), ps(done));
                }
            }
        }
        if !t.tl.sample_due(ps(end)) {
            return;
        }
        for (g, n) in self.nodes.iter().enumerate() {
            let k = &t.nodes[g];
            for (c, &q) in n.mem.controllers().iter().zip(&k.queues) {
                let (r, w) = c.queue_lens();
                t.tl.counter(q, ps(end), (r + w) as f64);
            }
            t.tl.counter(k.inflight, ps(end), n.inflight as f64);
            t.tl.counter(k.tracker_live, ps(end), n.tracker.live() as f64);
        }
    }

    /// Turns tracking on for every GPU (T3 runs).
    pub fn enable_tracking(&mut self) {
        for n in &mut self.nodes {
            n.tracking = true;
        }
    }

    /// Tells every controller a kernel boundary passed (MCA drains communication).
    pub fn kernel_boundary(&mut self) {
        for n in &mut self.nodes {
            n.mem.kernel_boundary();
        }
    }

    /// The firmware's view of GPU `node` at `at`.
    pub fn platform(&mut self, node: usize, at: Cycle) -> T3Platform<'_> {
        T3Platform {
            sys: self,
            node,
            at,
            fired: Vec::new(),
        }
    }

    /// GPU `node`'s tracker firings in order: (cycle, workgroup, wavefront, DMA id).
    pub fn fire_log(&self, node: usize) -> &[(Cycle, u32, u8, u16)] {
        self.nodes.get(node).map_or(&[], |n| &n.fire_log)
    }

    /// Link totals (GPU g's sending direction).
    pub fn link_stats(&self) -> Vec<super::link::LinkStats> {
        self.links.iter().map(LinkDirection::stats).collect()
    }
}

/// The firmware's view of one GPU: DMA engines, tracker, output maps; everything else is
/// absent on a T3 node (the CP's queues are not modelled here).
#[derive(Debug)]
pub struct T3Platform<'a> {
    sys: &'a mut T3System,
    node: usize,
    at: Cycle,
    /// Tracker entries that fired on programming (applied when the handler ends).
    fired: Vec<Fired>,
}

impl T3Platform<'_> {
    /// Applies what the handler did (tracker entries that fired on programming).
    pub fn finish(mut self) {
        let fired = std::mem::take(&mut self.fired);
        for f in fired {
            self.sys.fired(self.node, f, self.at);
        }
        self.sys.run_dma(self.node, self.at);
    }
}

impl Clock for T3Platform<'_> {
    fn now(&self) -> FwCycle {
        self.at
    }
    fn hz(&self) -> u64 {
        1_000_000_000
    }
}

impl FwMemory for T3Platform<'_> {
    fn read(&mut self, _addr: DevAddr, _buf: &mut [u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
    fn write(&mut self, _addr: DevAddr, _data: &[u8]) -> Result<(), MemoryError> {
        Err(MemoryError::Unsupported)
    }
}

impl KernelDispatcher for T3Platform<'_> {
    fn dispatch(&mut self, _req: &DispatchRequest) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
    fn complete_without_dispatch(
        &mut self,
        _queue: u8,
        _packet_id: u64,
        _status: i64,
    ) -> Result<(), DispatchError> {
        Err(DispatchError::Unsupported)
    }
}

impl NmcController for T3Platform<'_> {
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

impl DmaController for T3Platform<'_> {
    fn program(&mut self, engine: u8, desc: &DmaDescriptor) -> Result<(), DmaError> {
        if engine >= 4 {
            return Err(DmaError::NoSuchEngine);
        }
        if desc.validate().is_err() {
            return Err(DmaError::OutOfRange);
        }
        let (peer, _) = split_peer(desc.dst);
        if peer.is_some_and(|p| u32::from(p) >= self.sys.cfg.gpus) {
            return Err(DmaError::OutOfRange);
        }
        let n = &mut self.sys.nodes[self.node];
        if n.dma.len() >= 8_192 {
            return Err(DmaError::TableFull);
        }
        let ready_now = matches!(desc.trigger, DmaTrigger::None);
        if n.dma.insert(desc.id, (desc.clone(), 0)).is_some() {
            return Err(DmaError::TableFull);
        }
        if ready_now {
            n.dma_ready.push_back(desc.id);
        }
        Ok(())
    }
}

impl TrackerController for T3Platform<'_> {
    fn program(&mut self, entry: &TrackerEntry) -> Result<(), TrackerError> {
        let o = self.sys.nodes[self.node].tracker.program(entry)?;
        if o.spilled {
            self.sys
                .spill_access(self.node, entry.wg_id, entry.wf_id, self.at);
        }
        if let Some(f) = o.fired {
            self.fired.push(f);
        }
        Ok(())
    }
}

impl OutputMapController for T3Platform<'_> {
    fn map_output(&mut self, map: &OutputMap) -> Result<(), MapError> {
        if map.wg_count == 0 || (map.local.is_none() && map.remote.is_none()) {
            return Err(MapError::Invalid);
        }
        if map
            .remote
            .is_some_and(|(p, _)| u32::from(p) >= self.sys.cfg.gpus)
        {
            return Err(MapError::NoSuchPeer);
        }
        let n = &mut self.sys.nodes[self.node];
        if n.maps.len() >= 64 {
            return Err(MapError::TooManyMaps);
        }
        n.maps.push(*map);
        Ok(())
    }
    fn set_dispatch_start(&mut self, first_wg: u32) -> Result<(), MapError> {
        self.sys.nodes[self.node].dispatch_start = first_wg;
        Ok(())
    }
}
