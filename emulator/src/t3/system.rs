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
//! count (`T3System::schedule`), never by the order the GPUs happened to run in. The
//! same independence lets the GPUs of a window be stepped on worker threads
//! ([`SystemConfig::threads`], `parallel.rs`), with the same results.
//!
//! # Data
//! With `functional` set, every GPU holds its output array (and the ring kernel's receive
//! buffer) as values, and each transfer block carries the values it moves: a block of
//! stores or updates applies them when its last request finishes; a block of reads
//! snapshots them when its last read returns. Reductions round to the element type after
//! every addition ([`add_in`]), the same function the reference sum uses.

mod blocks;
mod contention;
mod dma;
mod links;
mod node;
mod parallel;
mod platform;
mod producer;
mod regions;
mod ring;
mod stepping;
mod tap;
mod trace;
mod values;

pub use contention::{Contention, LATENCY_BOUNDS_NS};
pub use dma::DMA_IN_FLIGHT;
pub use node::{GpuNode, Ingress, KindBytes, NodeTotals};
pub use parallel::{choose_threads, free_cores};
pub use platform::T3Platform;
pub use ring::{RingKind, RING_IN_FLIGHT};
pub use stepping::{FirmwareHost, NoFirmware, MAX_WINDOW_SLICES, SLICE_CYCLES};
pub use values::{add_in, round_to, Region, WriteOp};

use nmcp_firmware::Event;
use nmcp_isa::gemm_ext::GemmDataType;

use super::layout::{OutputLayout, Rect};
use crate::hbm::{Cycle, HbmPreset};
use crate::memctrl::Arbiter;
use crate::sim::{EventQueue, LimitReached, Limits};
use links::Links;
use node::REQ_BYTES;
use parallel::Nodes;
use stepping::{Ev, Outgoing};
use trace::T3Trace;

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
    /// Threads that step the GPUs of a window (1: this thread alone). Results do not
    /// depend on it.
    pub threads: u32,
    /// How each pseudo-channel's compute and communication lanes enter its controller's
    /// queues.
    pub ingress: Ingress,
}

/// Why [`T3System::run_until`] stopped before its condition held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The internal time limit passed with work left: what was still running.
    Stuck(String),
    /// A user-set cap was reached.
    Limit(LimitReached),
}

/// The multi-GPU system.
#[derive(Debug)]
pub struct T3System {
    cfg: SystemConfig,
    nodes: Nodes,
    /// The links between the GPUs (ring directions and direct links).
    links: Links,
    /// Per simulated GPU, the events addressed to it. Among events of one cycle the
    /// order is by sender and the sender's own sequence ([`T3System::schedule`]), so it
    /// does not depend on the order the GPUs are stepped in.
    queues: Vec<EventQueue<Ev>>,
    /// The GPU being stepped (the sender of what is scheduled now).
    sender: u32,
    /// Per GPU, events it has scheduled so far.
    sent: Vec<u64>,
    /// Events for GPUs outside this system's share of a parallel window.
    outbox: Vec<Outgoing>,
    now: Cycle,
    /// Events handled (scheduled events and memory completions), for the event cap.
    events: u64,
    /// Base addresses of the arrays.
    recv_base: u64,
    a_base: u64,
    b_base: u64,
    /// The timeline being recorded, if any.
    trace: Option<Box<T3Trace>>,
    /// The first record the hardware refused after the firmware was told `Ok`.
    fault: Option<String>,
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
            .map(|i| {
                GpuNode::new(i, &cfg.preset, arbiter).map(|mut n| {
                    n.ingress = cfg.ingress;
                    n
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mb = 1u64 << 20;
        let out_bytes = cfg.layout.bytes().div_ceil(mb) * mb;
        let links = Links::new(cfg.gpus, cfg.link_bytes_per_ns, cfg.link_latency_ns);
        let mut s = Self {
            recv_base: out_bytes,
            a_base: 2 * out_bytes,
            b_base: 2 * out_bytes + (256 * mb),
            cfg,
            nodes: Nodes::new(nodes),
            links,
            queues: (0..simulated).map(|_| EventQueue::new()).collect(),
            sender: 0,
            sent: vec![0; simulated as usize],
            outbox: Vec::new(),
            now: 0,
            events: 0,
            trace: None,
            fault: None,
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
                node.values.out = Some(vec![0.0; n]);
                node.values.recv = Some(vec![0.0; n]);
            }
        }
        Ok(s)
    }

    /// The GPUs simulated.
    pub fn nodes(&self) -> &[GpuNode] {
        self.nodes.as_slice()
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
            n.values.partial = Some(values);
        }
    }

    /// GPU `g`'s output array values (functional runs).
    pub fn out_values(&self, g: usize) -> Option<&[f32]> {
        self.nodes.get(g).and_then(|n| n.values.out.as_deref())
    }

    /// Puts GPU `g`'s partial output into its output array at once (the GEMM's result
    /// before a sequential collective; its stores' timing is the producer run's).
    pub fn load_partial_as_output(&mut self, g: usize) {
        if let Some(n) = self.nodes.get_mut(g) {
            if let Some(p) = n.values.partial.clone() {
                n.values.out = Some(p);
            }
        }
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
            && self
                .nodes
                .iter()
                .all(|n| n.pending_total == 0 && n.inflight == 0 && n.dma.is_empty())
    }

    /// Per-GPU totals.
    pub fn totals(&self) -> Vec<NodeTotals> {
        self.nodes
            .iter()
            .map(|n| {
                let per_pc = |sum: f64| {
                    if n.occupancy_cycles > 0.0 {
                        sum / n.occupancy_cycles / (n.pending.len() / 2).max(1) as f64
                    } else {
                        0.0
                    }
                };
                let in_flight = (per_pc(n.occupancy_sum), per_pc(n.read_occupancy_sum));
                NodeTotals {
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
                    mean_occupancy: in_flight.0,
                    mean_read_occupancy: in_flight.1,
                    tracker: n.tracker.stats(),
                    orphans: n.tracker.orphans(),
                    contention: n.contention(in_flight),
                }
            })
            .collect()
    }

    /// Marks GPU `node` finished (its firmware says the collective completed).
    pub fn mark_finished(&mut self, node: usize, at: Cycle) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.finished_at.get_or_insert(at);
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
            programmed: Vec::new(),
        }
    }

    /// GPU `node`'s tracker firings in order: (cycle, workgroup, wavefront, DMA id).
    pub fn fire_log(&self, node: usize) -> &[(Cycle, u32, u8, u16)] {
        self.nodes.get(node).map_or(&[], |n| &n.fire_log)
    }

    /// Link totals (GPU g's sending direction).
    pub fn link_stats(&self) -> Vec<super::link::LinkStats> {
        self.links.ring_stats()
    }
}
