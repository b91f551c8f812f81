//! T3 (SPEC 6, dissertation ch. 8): a GEMM fused with its reduce-scatter across N GPUs —
//! the tracker at each memory controller counts the producer's stores and the peers'
//! updates, and fires pre-programmed DMAs that op-and-store finished tiles into the next
//! GPU's memory, while communication-aware arbitration keeps the GEMM's reads first.
//!
//! Decisions (tiling, chunking, schedule, tracker overflow, link reading) are in
//! `docs/decisions/t3.md`.

pub mod cp_time;
pub mod energy;
pub mod gemm;
pub mod layout;
pub mod link;
pub mod plan;
pub mod run;
pub mod system;
pub mod tracker;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::gpu::config::GpuConfig;
use crate::sim::{LimitReached, Limits};
use nmcp_isa::gemm_ext::GemmDataType;

/// The five configurations of dissertation 8.4.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Sliced GEMM, then the ring reduce-scatter kernel, then all-gather, in sequence.
    Sequential,
    /// Fused, overlapped GEMM + RS (track and trigger, near-memory updates), then AG.
    T3,
    /// T3 with communication-aware memory-controller arbitration.
    T3Mca,
    /// `max(isolated GEMM, isolated RS) + AG`: no dependency, no contention.
    IdealOverlap,
    /// `max(isolated GEMM, RS with near-memory reductions) + AG`.
    IdealRsNmc,
}

impl Scenario {
    /// All five, in report order.
    pub const ALL: [Scenario; 5] = [
        Scenario::Sequential,
        Scenario::T3,
        Scenario::T3Mca,
        Scenario::IdealOverlap,
        Scenario::IdealRsNmc,
    ];

    /// The name used on the command line and in JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Scenario::Sequential => "sequential",
            Scenario::T3 => "t3",
            Scenario::T3Mca => "t3-mca",
            Scenario::IdealOverlap => "ideal-overlap",
            Scenario::IdealRsNmc => "ideal-rs-nmc",
        }
    }

    /// Parses [`Scenario::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.name() == s)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How many GPUs are simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Simulate {
    /// Every GPU of the ring, each with its own HBM, tracker and DMA engines.
    AllGpus,
    /// The dissertation's shortcut: GPU 0 simulated, its neighbours' traffic injected as
    /// the mirror image of its own (exact when inputs are symmetric).
    Shortcut,
}

/// One sliced sub-layer of Table 8.2 that ends in a reduce-scatter: an `m x n` output
/// (hidden x tokens) with a `k` sliced by TP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SubLayer {
    /// Model name (`mega-gpt-2`, `t-nlg`, `gpt-3`, `palm`, `mt-nlg`, or a user's).
    pub model: String,
    /// `OP`, `FC-2` (forward), `FC-1`, `IP` (backward).
    pub name: &'static str,
    /// Hidden size H.
    pub h: u32,
    /// Tokens (sequence length x batch).
    pub tokens: u32,
    /// Tensor-parallel degree (= GPUs in the ring).
    pub tp: u32,
    /// Output rows (H).
    pub m: u32,
    /// Output columns (tokens).
    pub n: u32,
    /// Reduction dimension per GPU (sliced).
    pub k: u32,
}

impl SubLayer {
    /// How the producer's A operand (the weights) lies in memory: the forward sub-layers
    /// (OP, FC-2) read it contiguous along K, the backward ones (FC-1, IP: activation
    /// gradients) contiguous along M (see [`gemm::OperandLayout`]).
    pub fn operand_layout(&self) -> gemm::OperandLayout {
        match self.name {
            "FC-1" | "IP" => gemm::OperandLayout::AlongM,
            _ => gemm::OperandLayout::AlongK,
        }
    }
}

/// The Table 8.2 models: name, H, tokens, the TP degrees evaluated.
pub const TABLE_8_2: [(&str, u32, u32, &[u32]); 5] = [
    ("mega-gpt-2", 3072, 16 * 1024, &[8, 16]),
    ("t-nlg", 4256, 8 * 1024, &[8, 16]),
    ("gpt-3", 12 * 1024, 2 * 1024, &[32]),
    ("palm", 18 * 1024, 2 * 1024, &[32]),
    ("mt-nlg", 20 * 1024, 2 * 1024, &[32]),
];

/// The four sub-layers (OP, FC-2, FC-1, IP) of a model with hidden size `h` and `tokens`
/// tokens at TP `tp`: outputs `h x tokens`, `k` = `h/tp`, `4h/tp`, `4h/tp`, `3h/tp`.
pub fn sublayers(model: &str, h: u32, tokens: u32, tp: u32) -> Vec<SubLayer> {
    let tp = tp.max(1);
    [("OP", 1), ("FC-2", 4), ("FC-1", 4), ("IP", 3)]
        .into_iter()
        .map(|(name, f)| SubLayer {
            model: model.to_string(),
            name,
            h,
            tokens,
            tp,
            m: h,
            n: tokens,
            k: (h * f / tp).max(1),
        })
        .collect()
}

/// Link settings (Table 8.1).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LinkConfig {
    /// Bytes per ns in each direction (75 = Table 8.1's 150 GB/s bidirectional).
    pub bytes_per_ns: f64,
    /// One-way latency in ns.
    pub latency_ns: f64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            bytes_per_ns: 75.0,
            latency_ns: 500.0,
        }
    }
}

/// Everything a T3 experiment is run with.
#[derive(Debug, Clone, Serialize)]
pub struct T3Options {
    /// GPUs in the ring (0 = the sub-layer's TP degree).
    pub gpus: u32,
    /// All GPUs or the symmetric shortcut.
    pub simulate: Simulate,
    /// The GPU of each node (Table 8.1's 80-CU GPU by default; `--gpu-2x-cu` doubles CUs).
    pub gpu: GpuConfig,
    /// Links.
    pub link: LinkConfig,
    /// Element type of the GEMM output and the reductions.
    pub dtype: GemmDataType,
    /// MCA occupancy threshold (queue entries per pseudo-channel); `None` = chosen from
    /// the producer's isolated first stage.
    pub mca_threshold: Option<usize>,
    /// MCA anti-starvation limit in DRAM cycles.
    pub mca_starvation_cycles: u64,
    /// Seed for everything random (data values).
    pub seed: u64,
    /// Split-K factor of the producer (8.6.7): workgroups per output tile.
    pub split_k: u8,
    /// Caps on each simulation's simulated time and events.
    pub limits: Limits,
    /// Most 16-cycle slices one GPU runs before the next GPU's turn (capped by the link
    /// latency; 1 = every GPU one slice at a time). Results do not depend on it (test
    /// `t3_ring::stepping_window_does_not_change_results`); it keeps one GPU's state in
    /// the host's caches.
    pub window_slices: u32,
    /// Threads that step the GPUs of one simulation's lookahead window (1: serial;
    /// [`system::choose_threads`] picks one per free core).
    /// Results do not depend on it (test `t3_threads`); `--jobs` runs independent
    /// simulations at once instead (docs/decisions/t3-runs.md, "Stepping").
    pub threads: u32,
    /// How the producer's memory behaviour is modelled (`docs/calibration.md`).
    pub producer_memory: gemm::ProducerMemory,
    /// Compute requests enter the controller queues before communication's in the T3
    /// run, and T3-MCA has no admission threshold ([`system::Ingress::ComputeFirst`]);
    /// off: the T3 run's ingress is in arrival order, T3-MCA's is MCA's admission.
    #[serde(default)]
    pub compute_first_ingress: bool,
    /// MCA's threshold from the isolated GEMM's requests in flight including its output
    /// writes; off: its reads alone (the fused run's first stage, whose threshold it
    /// stands for, writes its output to the peer, so only its reads occupy the local
    /// queues; dissertation 8.3.5).
    #[serde(default)]
    pub mca_occupancy_with_writes: bool,
    /// What the T3 firmware's work costs on each GPU's CP (`node::cost`; the board's
    /// `t3_per_record` at the CP's 1.5 GHz by default; fixed per build, so not part of
    /// the options' JSON).
    #[serde(skip)]
    pub firmware_cost: crate::node::cost::FirmwareCost,
}

impl Default for T3Options {
    fn default() -> Self {
        Self {
            gpus: 0,
            simulate: Simulate::AllGpus,
            gpu: GpuConfig::t3_table_8_1(),
            link: LinkConfig::default(),
            dtype: GemmDataType::F16,
            mca_threshold: None,
            mca_starvation_cycles: 2_000,
            seed: 1,
            split_k: 1,
            limits: Limits::default(),
            window_slices: system::MAX_WINDOW_SLICES as u32,
            threads: 1,
            producer_memory: gemm::ProducerMemory::default(),
            compute_first_ingress: false,
            mca_occupancy_with_writes: false,
            firmware_cost: crate::node::cost::FirmwareCost::default(),
        }
    }
}

/// DRAM bytes by kind, averaged over the GPUs (dissertation Fig. 8.16's categories).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TrafficBytes {
    /// GEMM input reads that reach DRAM.
    pub gemm_reads: u64,
    /// GEMM output writes (plain stores) that reach DRAM.
    pub gemm_writes: u64,
    /// Reduce-scatter reads (the ring kernel's local and received copies; T3's DMA reads).
    pub rs_reads: u64,
    /// Reduce-scatter plain writes (the ring kernel's results, received copies).
    pub rs_writes: u64,
    /// Near-memory op-and-store updates (GEMM stage stores, remote and DMA updates).
    pub updates: u64,
    /// All-gather reads and writes.
    pub ag: u64,
}

impl TrafficBytes {
    /// Every byte.
    pub fn total(&self) -> u64 {
        self.gemm_reads + self.gemm_writes + self.rs_reads + self.rs_writes + self.updates + self.ag
    }
}

/// One sub-layer under one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct SubLayerResult {
    /// The sub-layer.
    pub sublayer: SubLayer,
    /// The scenario.
    pub scenario: Scenario,
    /// GEMM time (for fused scenarios: the fused GEMM + RS part).
    pub gemm_seconds: f64,
    /// Reduce-scatter time not overlapped with the GEMM (0 for fused scenarios).
    pub rs_seconds: f64,
    /// All-gather time.
    pub ag_seconds: f64,
    /// End to end.
    pub total_seconds: f64,
    /// Sequential's total over this one's.
    pub speedup_vs_sequential: f64,
    /// The isolated reduce-scatter this scenario is built from: the baseline ring kernel
    /// (sequential, ideal-overlap) or the ring with near-memory updates (ideal-rs-nmc);
    /// 0 for the fused scenarios.
    pub rs_alone_seconds: f64,
    /// DRAM bytes by kind, per GPU.
    pub bytes: TrafficBytes,
    /// The T3 firmware's CP time in the fused run, the busiest GPU's (its handlers
    /// charged through `node::cost`); 0 for the scenarios without firmware.
    #[serde(default)]
    pub firmware_seconds: f64,
    /// What the communication did to the producer's reads (GPU 0): the isolated GEMM's
    /// for Sequential, the fused run's for T3 and T3-MCA, none for the ideal rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contention: Option<system::Contention>,
}

/// A plain ring reduce-scatter, timed alone.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RsTiming {
    /// Simulated.
    pub rs_seconds: f64,
    /// The bandwidth-latency model: `(N - 1) x (bytes / N / link + latency)`.
    pub model_seconds: f64,
    /// Ring steps.
    pub steps: u32,
}

/// A functional check run (`nmcp t3 check`).
#[derive(Debug, Clone, Serialize)]
pub struct CheckRun {
    /// GPUs.
    pub gpus: u32,
    /// Output rows.
    pub m: u32,
    /// Output columns.
    pub n: u32,
    /// Reduction dimension per GPU.
    pub k: u32,
    /// Sequential, T3 or T3-MCA.
    pub scenario: Scenario,
}

/// The block of the output one GPU holds at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Block {
    /// GPU.
    pub gpu: u32,
    /// `[first, end)` rows.
    pub rows: [u32; 2],
    /// `[first, end)` columns.
    pub cols: [u32; 2],
}

/// What a check run produced: values are exactly representable in the run's data type.
#[derive(Debug, Clone)]
pub struct CheckOutput {
    /// Per GPU, its `m x n` partial output (row-major) before any reduction.
    pub partials: Vec<Vec<f32>>,
    /// Per GPU, the block it holds at the end (row-major, `blocks[g]`'s shape).
    pub reduced: Vec<Vec<f32>>,
    /// Which block each GPU holds.
    pub blocks: Vec<Block>,
    /// Elements that differ from the reference sum (in the ring's order, in the type).
    pub mismatches: u64,
    /// The first mismatch, described.
    pub first_mismatch: Option<String>,
    /// Simulated time of the run.
    pub seconds: f64,
}

/// Why a T3 run could not be done.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum T3Error {
    /// A bad option or shape; says which and why.
    Config(String),
    /// The firmware refused to program the mechanism.
    Firmware(String),
    /// The simulation stopped without finishing (a model bug; says where).
    Stuck(String),
    /// A user-set cap (simulated time, events) was reached.
    Limit(LimitReached),
}

impl From<system::RunError> for T3Error {
    fn from(e: system::RunError) -> Self {
        match e {
            system::RunError::Stuck(s) => Self::Stuck(s),
            system::RunError::Limit(l) => Self::Limit(l),
        }
    }
}

impl fmt::Display for T3Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            T3Error::Config(s) => write!(f, "bad T3 configuration: {s}"),
            T3Error::Firmware(s) => write!(f, "T3 firmware error: {s}"),
            T3Error::Stuck(s) => write!(f, "T3 simulation stuck: {s}"),
            T3Error::Limit(l) => write!(f, "T3 simulation stopped: {l}"),
        }
    }
}

impl std::error::Error for T3Error {}

pub use run::{check, run_sublayer, run_sublayer_traced, time_reduce_scatter};
