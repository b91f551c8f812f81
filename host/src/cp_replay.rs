//! `nmcp cp replay` as a library function: a queue dump through the firmware CP on an
//! emulated GPU, with the queue count and ring size derived from the dump.

use std::fmt;

use nmcp_emulator::gpu::queue::QueueDump;

use nmcp_emulator::gpu::config::{GpuConfig, UnknownGpu};
use nmcp_emulator::gpu::gemm::Calibration;
use nmcp_emulator::gpu::sim::GpuSim;
use nmcp_emulator::gpu::FixedTimeEngine;
use nmcp_emulator::gpu::KernelEngine;
use nmcp_emulator::node::{GpuNodeConfig, NodeError, DEFAULT_DEVICE};
use nmcp_emulator::system::System;
use nmcp_firmware::cp::features::CuResources;
use nmcp_firmware::cp::{CdPredictor, CpAction};
use nmcp_isa::aql::{self, AqlPacket, DeviceRange};
use serde::Serialize;

/// The dispatch id each packet of a dump gets when loaded (its position in its queue).
pub fn dispatch_ids(dump: &QueueDump) -> Vec<u64> {
    let mut next = [0u64; 256];
    dump.packets
        .iter()
        .map(|p| {
            let slot = &mut next[usize::from(p.queue)];
            let id = *slot;
            *slot += 1;
            id
        })
        .collect()
}

/// The kernel timing model of a replay.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayEngine {
    /// The GEMM model (`GpuSim`) of a GPU preset, by name.
    Gpu(String),
    /// Every GEMM workgroup takes `wg_ns` in one of `cus x slots` slots (a test double).
    Fixed {
        /// Compute units.
        cus: u32,
        /// Workgroup slots per CU.
        slots: u32,
        /// Time of one GEMM workgroup, ns.
        wg_ns: f64,
    },
}

/// What to replay a dump with.
#[derive(Debug, Clone)]
pub struct ReplaySetup {
    /// Device memory; default: the dump's DEVICE directive, else [`DEFAULT_DEVICE`].
    pub device: Option<DeviceRange>,
    /// Timing model.
    pub engine: ReplayEngine,
    /// The CD predictor the CP runs.
    pub predictor: CdPredictor,
    /// Simulation steps before the run is cut off.
    pub max_steps: u64,
    /// Record a timeline (CP busy spans, decisions, kernels) with these bounds.
    pub timeline: Option<nmcp_emulator::timeline::TimelineConfig>,
}

/// Why a replay could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayError {
    /// The GPU preset does not exist.
    Gpu(UnknownGpu),
    /// One queue holds more packets than a ring can.
    TooManyPackets,
    /// The system could not be built, or the dump not loaded.
    System(NodeError),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Gpu(e) => write!(f, "{e}"),
            Self::TooManyPackets => f.write_str("too many packets on one queue"),
            Self::System(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReplayError {}

/// One packet of the dump and what the CP did with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PacketRow {
    /// Queue.
    pub queue: u8,
    /// Dispatch id (position in its queue).
    pub dispatch_id: u64,
    /// File offset of the packet record.
    pub offset: u64,
    /// `gemm`, the packet type's name, or `malformed`.
    pub kind: &'static str,
    /// Whether the packet was loaded (has an outcome).
    pub loaded: bool,
    /// The CP's last action on it (`None`: not processed, or not loaded).
    #[serde(skip)]
    pub action: Option<CpAction>,
    /// When its kernel was launched.
    pub launched_ns: Option<f64>,
    /// When its last workgroup was placed.
    pub all_dispatched_ns: Option<f64>,
    /// When it completed.
    pub completed_ns: Option<f64>,
}

/// Totals of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// Time of the last event.
    pub makespan_ns: f64,
    /// CP cycles charged.
    pub cp_cycles: u64,
    /// CP busy time.
    pub cp_busy_ns: f64,
    /// The CP clock the cycles are converted with.
    pub cp_clock_hz: u64,
    /// Firmware events handled.
    pub events: u64,
    /// The run stopped at its step limit with work left.
    pub truncated: bool,
    /// The most CP cycles one handler took.
    pub max_handler_cycles: u64,
    /// CP device-memory accesses.
    pub cp_mem_accesses: u64,
    /// Packets the CP inspected.
    pub cp_packets_inspected: u64,
    /// CD predictions.
    pub cp_predictions: u64,
    /// Concurrency decisions.
    pub cp_decisions: u64,
}

/// A replayed dump.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    /// The timing model, in words.
    pub engine: String,
    /// Every packet of the dump, in dump order.
    pub packets: Vec<PacketRow>,
    /// Totals.
    pub summary: ReplaySummary,
    /// The run's timeline, if [`ReplaySetup::timeline`] asked for one.
    #[serde(skip)]
    pub timeline: Option<nmcp_emulator::timeline::Timeline>,
}

/// Queues and ring size (packets, a power of two, at least 16) a dump needs.
///
/// # Errors
/// [`ReplayError::TooManyPackets`] if a ring would not fit `u32`.
pub fn queue_shape(dump: &QueueDump) -> Result<(usize, u32), ReplayError> {
    let queues = dump
        .packets
        .iter()
        .map(|p| usize::from(p.queue) + 1)
        .max()
        .unwrap_or(1);
    let per_queue_max = dispatch_ids(dump).iter().map(|&i| i + 1).max().unwrap_or(1);
    let ring = u32::try_from(per_queue_max.next_power_of_two().max(16))
        .map_err(|_| ReplayError::TooManyPackets)?;
    Ok((queues, ring))
}

/// Replays `dump` through the firmware CP on the chosen engine.
///
/// # Errors
/// [`ReplayError`].
pub fn replay(dump: &QueueDump, setup: &ReplaySetup) -> Result<ReplayReport, ReplayError> {
    let (queues, ring_packets) = queue_shape(dump)?;
    let cfg = GpuNodeConfig {
        device: setup.device.or(dump.device).unwrap_or(DEFAULT_DEVICE),
        queues,
        ring_packets,
        predictor: setup.predictor.clone(),
        ..GpuNodeConfig::default()
    };
    match &setup.engine {
        ReplayEngine::Gpu(name) => {
            let gpu = GpuConfig::preset(name).map_err(ReplayError::Gpu)?;
            let cfg = GpuNodeConfig {
                resources: gpu.cu_resources(),
                ..cfg
            };
            let engine = GpuSim::new(gpu, Calibration::default());
            run(dump, cfg, engine, format!("gpu {name}"), setup)
        }
        &ReplayEngine::Fixed { cus, slots, wg_ns } => {
            let cfg = GpuNodeConfig {
                resources: CuResources::MI100,
                ..cfg
            };
            let engine = FixedTimeEngine::new(cus, slots, wg_ns);
            let label = format!("fixed {cus} CUs x {slots} slots, {wg_ns} ns/WG");
            run(dump, cfg, engine, label, setup)
        }
    }
}

/// The one place a replay builds its system.
fn build<E: KernelEngine>(
    cfg: GpuNodeConfig,
    engine: E,
    dump: &QueueDump,
) -> Result<System<E>, NodeError> {
    let mut sys = System::single(cfg, engine)?;
    sys.load_dump(0, dump)?;
    Ok(sys)
}

fn run<E: KernelEngine>(
    dump: &QueueDump,
    cfg: GpuNodeConfig,
    engine: E,
    label: String,
    setup: &ReplaySetup,
) -> Result<ReplayReport, ReplayError> {
    let clock_hz = cfg.cost.cp.clock_hz;
    let mut sys = build(cfg, engine, dump).map_err(ReplayError::System)?;
    if let Some(c) = setup.timeline {
        sys.enable_timeline(c);
    }
    let s = sys.run(setup.max_steps);
    let packets = dump
        .packets
        .iter()
        .zip(dispatch_ids(dump))
        .map(|(p, id)| {
            let o = sys.node(0).outcomes().get(&(p.queue, id));
            PacketRow {
                queue: p.queue,
                dispatch_id: id,
                offset: p.offset,
                kind: match aql::decode(&p.bytes) {
                    Ok(AqlPacket::KernelDispatch(k)) if k.gemm_ext_address != 0 => "gemm",
                    Ok(pk) => pk.header().packet_type.name(),
                    Err(_) => "malformed",
                },
                loaded: o.is_some(),
                action: o.and_then(|o| o.action),
                launched_ns: o.and_then(|o| o.launched_at),
                all_dispatched_ns: o.and_then(|o| o.all_dispatched_at),
                completed_ns: o.and_then(|o| o.completed_at),
            }
        })
        .collect();
    let work = sys.node(0).cp_work();
    Ok(ReplayReport {
        engine: label,
        packets,
        summary: ReplaySummary {
            makespan_ns: s.end,
            cp_cycles: s.cp_cycles,
            cp_busy_ns: s.cp_busy_ns,
            cp_clock_hz: clock_hz,
            events: s.events,
            truncated: s.truncated,
            max_handler_cycles: s.max_handler_cycles,
            cp_mem_accesses: work.mem_accesses,
            cp_packets_inspected: work.packets_inspected,
            cp_predictions: work.predictions,
            cp_decisions: work.decisions,
        },
        timeline: sys.take_timeline(),
    })
}
