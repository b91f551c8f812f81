//! The experiments: isolated GEMM, ring collectives, the fused T3 run with the firmware
//! programming the tracker, DMAs and output maps, and the functional check.

pub use nmcp_firmware::t3::Collective;
use nmcp_firmware::t3::T3Job;
use nmcp_firmware::{Event, Firmware};
use nmcp_isa::gemm_ext::GemmDataType;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::cp_time::FirmwareClock;
use super::gemm::{ProducerModel, TILE, WFS_PER_WG};
use super::layout::OutputLayout;
use super::system::{
    add_in, round_to, Contention, FirmwareHost, Ingress, NodeTotals, RingKind, SystemConfig,
    T3System,
};
use super::{
    Block, CheckOutput, CheckRun, RsTiming, Scenario, Simulate, SubLayer, SubLayerResult, T3Error,
    T3Options, TrafficBytes,
};
use crate::hbm::{Cycle, HbmPreset};
use crate::memctrl::{Arbiter, FrFcfs, Mca, RoundRobin};
use crate::node::cost::FirmwareWork;
use crate::timeline::{Timeline, TimelineConfig};

/// The HBM preset of a T3 GPU (Table 8.1).
pub const T3_PRESET: &str = "t3-table-8.1";

/// How long a run may take before it is declared stuck: this many times its
/// compute-bound or link-bound estimate, plus 1 ms.
const STUCK_FACTOR: f64 = 50.0;

pub(super) fn gpus_of(opts: &T3Options, tp: u32) -> u32 {
    if opts.gpus == 0 {
        tp
    } else {
        opts.gpus
    }
}

fn elem_bytes(d: GemmDataType) -> u32 {
    d.bytes()
}

pub(super) fn layout(opts: &T3Options, m: u32, n: u32, gpus: u32) -> Result<OutputLayout, T3Error> {
    if !matches!(opts.dtype, GemmDataType::F16 | GemmDataType::F32) {
        return Err(T3Error::Config(format!(
            "data type {:?}: T3 runs take f16 or f32",
            opts.dtype
        )));
    }
    // The 128 x 128 tile, or a smaller one when the output has too few tiles for every
    // GPU to get a chunk (what a BLAS picks for a small problem), or to make the chunks
    // equal.
    // Prefer a tile whose chunks are all the same size (the symmetric shortcut needs it,
    // and all-GPU runs use the same tile so the two agree).
    let mut first: Option<OutputLayout> = None;
    let mut err = None;
    let mut tile = u32::from(TILE.0);
    while tile >= 16 {
        match OutputLayout::new(m, n, (tile, tile), u32::from(WFS_PER_WG), gpus, opts.dtype) {
            Ok(l) if l.even() => return Ok(l),
            Ok(l) => {
                first.get_or_insert(l);
            }
            Err(e) => {
                err.get_or_insert(e);
            }
        }
        tile /= 2;
    }
    first.ok_or_else(|| T3Error::Config(err.unwrap_or_default()))
}

fn system(
    opts: &T3Options,
    layout: OutputLayout,
    shortcut: bool,
    functional: bool,
    arbiter: &dyn Fn() -> Box<dyn Arbiter>,
    ingress: Ingress,
) -> Result<T3System, T3Error> {
    let preset = HbmPreset::builtin(T3_PRESET).map_err(|e| T3Error::Config(e.to_string()))?;
    let bad = |v: f64, min: f64| v.is_nan() || v < min;
    if bad(opts.link.bytes_per_ns, f64::MIN_POSITIVE) || bad(opts.link.latency_ns, 0.0) {
        return Err(T3Error::Config(format!(
            "link {} B/ns, {} ns: bandwidth must be > 0 and latency >= 0",
            opts.link.bytes_per_ns, opts.link.latency_ns
        )));
    }
    T3System::new(
        SystemConfig {
            preset,
            gpus: layout.gpus,
            shortcut,
            link_bytes_per_ns: opts.link.bytes_per_ns,
            link_latency_ns: opts.link.latency_ns,
            layout,
            dtype: opts.dtype,
            functional,
            limits: opts.limits,
            window_slices: opts.window_slices,
            threads: opts.threads,
            ingress,
        },
        arbiter,
    )
    .map_err(T3Error::Config)
}

pub(super) fn model(
    opts: &T3Options,
    l: &OutputLayout,
    sl: &SubLayer,
    k: u32,
    cached: bool,
) -> Result<ProducerModel, T3Error> {
    let tile = (l.tile.0 as u16, l.tile.1 as u16);
    ProducerModel::new(
        &opts.gpu,
        tile,
        sl.m,
        sl.n,
        k,
        opts.dtype,
        opts.gpu.cus,
        cached,
        sl.operand_layout(),
        opts.producer_memory,
    )
    .ok_or_else(|| {
        T3Error::Config(format!(
            "the producer kernel cannot run on {}",
            opts.gpu.name
        ))
    })
}

/// Totals averaged over the simulated GPUs.
fn mean_bytes(t: &[NodeTotals]) -> super::system::KindBytes {
    let n = t.len().max(1) as u64;
    let mut s = super::system::KindBytes::default();
    for x in t {
        s.gemm_reads += x.bytes.gemm_reads;
        s.gemm_writes += x.bytes.gemm_writes;
        s.rs_reads += x.bytes.rs_reads;
        s.rs_writes += x.bytes.rs_writes;
        s.updates += x.bytes.updates;
        s.spill += x.bytes.spill;
    }
    s.gemm_reads /= n;
    s.gemm_writes /= n;
    s.rs_reads /= n;
    s.rs_writes /= n;
    s.updates /= n;
    s.spill /= n;
    s
}

/// One measured phase.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Phase {
    pub(super) ns: f64,
    pub(super) bytes: super::system::KindBytes,
    pub(super) occupancy: f64,
    /// The T3 firmware's charged time, the busiest GPU's (0 when no firmware ran).
    pub(super) firmware_ns: f64,
    /// GPU 0's contention figures.
    pub(super) contention: Contention,
}

/// GPU 0's contention figures (the shortcut's one GPU).
fn first_contention(t: &[super::system::NodeTotals]) -> Contention {
    t.first().map(|x| x.contention).unwrap_or_default()
}

/// How requests enter the controller queues in a run with MCA at `mca` (or none).
fn ingress(opts: &T3Options, mca: Option<usize>) -> Ingress {
    Ingress::of(opts.compute_first_ingress, mca, opts.mca_starvation_cycles)
}

/// A system whose controllers arbitrate FR-FCFS (one traffic class, or the CU split).
fn plain_system(
    opts: &T3Options,
    l: OutputLayout,
    shortcut: bool,
    ingress: Ingress,
) -> Result<T3System, T3Error> {
    system(opts, l, shortcut, false, &|| Box::new(FrFcfs), ingress)
}

fn limit(estimate_ns: f64) -> Cycle {
    (estimate_ns * STUCK_FACTOR + 1e6) as Cycle
}

/// The producer GEMM alone, outputs cached (plain stores).
pub(super) fn isolated_gemm(
    opts: &T3Options,
    sl: &SubLayer,
    shortcut: bool,
) -> Result<Phase, T3Error> {
    let gpus = gpus_of(opts, sl.tp);
    let l = layout(opts, sl.m, sl.n, gpus)?;
    let m = model(opts, &l, sl, sl.k, true)?;
    let mut s = plain_system(opts, l, shortcut, ingress(opts, None))?;
    s.start_producer(m, 0);
    s.run_without_firmware(limit(m.compute_bound_ns()), T3System::producers_done)
        .map_err(T3Error::from)?;
    let t = s.totals();
    let ns = t.iter().filter_map(|x| x.gemm_done_ns).fold(0.0, f64::max);
    Ok(Phase {
        ns,
        bytes: mean_bytes(&t),
        occupancy: t
            .iter()
            .map(|x| {
                if opts.mca_occupancy_with_writes {
                    x.mean_occupancy
                } else {
                    x.mean_read_occupancy
                }
            })
            .sum::<f64>()
            / t.len().max(1) as f64,
        firmware_ns: 0.0,
        contention: first_contention(&t),
    })
}

/// Ring runs already done in this process: they depend only on the array, the GPU
/// count, the links and the kind, which the four sub-layers of a model share.
/// (The stepping window and threads do not change a result, but are part of the key so
/// that a test comparing them compares two runs.)
type RingKey = (u32, u32, u32, u8, bool, u64, u64, u8, u32, u32);

fn ring_cache() -> &'static std::sync::Mutex<std::collections::HashMap<RingKey, Phase>> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<RingKey, Phase>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// A ring collective alone over an `m x n` array (memoised per process).
pub(super) fn ring(
    opts: &T3Options,
    m: u32,
    n: u32,
    gpus: u32,
    kind: RingKind,
    shortcut: bool,
) -> Result<Phase, T3Error> {
    let key = (
        m,
        n,
        gpus,
        kind as u8,
        shortcut,
        opts.link.bytes_per_ns.to_bits(),
        opts.link.latency_ns.to_bits(),
        opts.dtype as u8,
        opts.window_slices,
        opts.threads,
    );
    if let Some(p) = ring_cache().lock().ok().and_then(|c| c.get(&key).copied()) {
        return Ok(p);
    }
    let p = ring_uncached(opts, m, n, gpus, kind, shortcut)?;
    if let Ok(mut c) = ring_cache().lock() {
        c.insert(key, p);
    }
    Ok(p)
}

fn ring_uncached(
    opts: &T3Options,
    m: u32,
    n: u32,
    gpus: u32,
    kind: RingKind,
    shortcut: bool,
) -> Result<Phase, T3Error> {
    let l = layout(opts, m, n, gpus)?;
    let mut s = plain_system(opts, l, shortcut, ingress(opts, None))?;
    s.start_ring(kind, 0);
    let est = l.bytes() as f64 / opts.link.bytes_per_ns + f64::from(gpus) * opts.link.latency_ns;
    s.run_without_firmware(limit(est), T3System::rings_done)
        .map_err(T3Error::from)?;
    let t = s.totals();
    let ns = t
        .iter()
        .filter_map(|x| x.collective_done_ns)
        .fold(0.0, f64::max);
    Ok(Phase {
        ns,
        bytes: mean_bytes(&t),
        occupancy: 0.0,
        firmware_ns: 0.0,
        contention: Contention::default(),
    })
}

/// The MCA threshold picked from the producer's isolated run: requests in flight per
/// pseudo-channel (the DRAM queue occupancy it keeps) — the busier the queues, the less
/// room communication gets. Bands: >= 8 -> 5, >= 2 -> 10, >= 0.5 -> 30, else no limit.
pub fn mca_threshold_for(occupancy: f64) -> usize {
    if occupancy >= 8.0 {
        5
    } else if occupancy >= 2.0 {
        10
    } else if occupancy >= 0.5 {
        30
    } else {
        usize::MAX
    }
}

fn job(
    l: &OutputLayout,
    rank: u32,
    dtype: GemmDataType,
    collective: Collective,
    split_k: u8,
) -> T3Job {
    T3Job {
        collective,
        gpus: l.gpus as u8,
        rank: rank as u8,
        m: l.m,
        n: l.n,
        tile_m: l.tile.0 as u16,
        tile_n: l.tile.1 as u16,
        wfs_per_wg: l.wfs as u8,
        dtype,
        split_k,
        out_base: 0,
        wf_tiles_per_dma_block: 1,
    }
}

/// A fused run's result: its time (the last GPU's completion), and the system to
/// inspect (tracker firings, totals, values).
#[derive(Debug)]
pub struct FusedRun {
    /// ns until every GPU's producer finished and its firmware reported the
    /// reduce-scatter complete.
    pub ns: f64,
    /// The system after the run.
    pub system: T3System,
}

/// Runs the fused GEMM + ring reduce-scatter of `sl` (T3; with MCA at `mca` queue
/// entries when given), values carried when `partials` are given.
///
/// # Errors
/// [`T3Error`].
pub fn run_fused(
    opts: &T3Options,
    sl: &SubLayer,
    collective: Collective,
    mca: Option<usize>,
    partials: Option<&[Vec<f32>]>,
) -> Result<FusedRun, T3Error> {
    let shortcut = opts.simulate == Simulate::Shortcut;
    let (p, system) = fused(opts, sl, collective, mca, shortcut, partials, None)?;
    Ok(FusedRun { ns: p.ns, system })
}

/// The fused GEMM + reduce-scatter, the firmware programming every GPU.
pub(super) fn fused(
    opts: &T3Options,
    sl: &SubLayer,
    collective: Collective,
    mca: Option<usize>,
    shortcut: bool,
    partials: Option<&[Vec<f32>]>,
    trace: Option<TimelineConfig>,
) -> Result<(Phase, T3System), T3Error> {
    let gpus = gpus_of(opts, sl.tp);
    let l = layout(opts, sl.m, sl.n, gpus)?;
    let splits = u32::from(opts.split_k.max(1));
    let m = model(opts, &l, sl, sl.k.div_ceil(splits), false)?;
    let starve = opts.mca_starvation_cycles;
    let arb: Box<dyn Fn() -> Box<dyn Arbiter>> = match mca {
        Some(t) => Box::new(move || Box::new(Mca::new(t, starve))),
        None => Box::new(|| Box::new(RoundRobin::new())),
    };
    let mut s = system(
        opts,
        l,
        shortcut,
        partials.is_some(),
        &*arb,
        ingress(opts, mca),
    )?;
    if let Some(p) = partials {
        for (g, v) in p.iter().enumerate() {
            s.set_partial(g, v.clone());
        }
    }
    s.enable_tracking();
    if let Some(c) = trace {
        s.enable_timeline(c);
    }
    let simulated = s.nodes().len();
    let mut hosts: Vec<GpuFirmware> = (0..simulated)
        .map(|_| GpuFirmware {
            fw: Firmware::default(),
            cp: FirmwareClock::new(1, opts.firmware_cost),
            fault: None,
        })
        .collect();
    for (g, h) in hosts.iter_mut().enumerate() {
        let j = job(&l, g as u32, opts.dtype, collective, opts.split_k.max(1));
        s.trace_cp(g, "start_t3", 0);
        let before = FirmwareWork::of(&h.fw);
        let mut p = s.platform(g, 0);
        let r = h.fw.start_t3(&j, &mut p);
        let end = h.cp.charge(0, 0, &FirmwareWork::of(&h.fw).since(&before));
        p.finish(end);
        r.map_err(|e| T3Error::Firmware(format!("GPU {g}: {e}")))?;
        if h.fw.has_pending_work() {
            s.post_firmware(g, Event::Deferred, end.max(1));
        }
    }
    s.start_split_producer(m, splits, 0);
    let est = m.compute_bound_ns() + l.bytes() as f64 / opts.link.bytes_per_ns;
    s.run_until(limit(est), &mut hosts, |sys| {
        sys.producers_done() && sys.nodes_finished()
    })
    .map_err(T3Error::from)?;
    if partials.is_some() {
        // The collective is complete when the last update column issues; its data (and
        // so the values) lands with the write's completion, a few cycles on.
        s.run_until(limit(est), &mut hosts, T3System::quiet)
            .map_err(T3Error::from)?;
    }
    // The earliest handler fault (by time, then GPU): the same whichever way the GPUs
    // were stepped.
    let mut fault = hosts
        .iter_mut()
        .filter_map(|h| h.fault.take())
        .min()
        .map(|(_, _, f)| f);
    if let Some(f) = s.platform_fault() {
        fault.get_or_insert(f.to_string());
    }
    if let Some(f) = fault {
        return Err(T3Error::Firmware(f));
    }
    let t = s.totals();
    let ns = t
        .iter()
        .filter_map(|x| x.collective_done_ns)
        .fold(0.0, f64::max)
        .max(t.iter().filter_map(|x| x.gemm_done_ns).fold(0.0, f64::max));
    if let Some(o) = t.iter().find(|x| x.orphans > 0 || x.tracker.overcounts > 0) {
        if std::env::var("T3_DEBUG").is_ok() {
            for (g, x) in t.iter().enumerate() {
                eprintln!("GPU {g}: {x:?} fires {:?}", s.fire_log(g));
                eprintln!(
                    "GPU {g} orphans {:?}",
                    s.nodes()[g].tracker().orphan_entries()
                );
            }
        }
        return Err(T3Error::Stuck(format!(
            "tracker left {} unprogrammed entries and {} overcounts",
            o.orphans, o.tracker.overcounts
        )));
    }
    Ok((
        Phase {
            ns,
            bytes: mean_bytes(&t),
            occupancy: 0.0,
            firmware_ns: hosts.iter().map(|h| h.cp.busiest_ns()).fold(0.0, f64::max),
            contention: first_contention(&t),
        },
        s,
    ))
}

/// One GPU's T3 firmware and the CP that runs it: the CP runs one handler at a time,
/// and what a handler programs reaches the hardware when its charged time ends.
struct GpuFirmware {
    fw: Firmware,
    /// This GPU's CP (a clock of one).
    cp: FirmwareClock,
    /// The first handler error: (time, GPU, message).
    fault: Option<(Cycle, usize, String)>,
}

impl FirmwareHost for GpuFirmware {
    fn handle(&mut self, sys: &mut T3System, g: usize, ev: Event, at: Cycle) {
        // An event that comes while the CP is busy waits for the end of the handler
        // before it.
        let free = self.cp.free_at(0);
        if at < free {
            sys.post_firmware(g, ev, free);
            return;
        }
        sys.trace_firmware(g, &ev, at);
        let before = FirmwareWork::of(&self.fw);
        let mut p = sys.platform(g, at);
        let r = self.fw.handle(ev, &mut p);
        let end = self
            .cp
            .charge(0, at, &FirmwareWork::of(&self.fw).since(&before));
        p.finish(end);
        if let Err(e) = r {
            self.fault
                .get_or_insert((at, g, format!("GPU {g} at {at} ns: {e}")));
        }
        if self.fw.has_pending_work() {
            sys.post_firmware(g, Event::Deferred, end.max(at + 1));
        }
        if self.fw.t3().is_done() {
            sys.mark_finished(g, end);
        }
    }
}

fn traffic(parts: &[(&super::system::KindBytes, bool)]) -> TrafficBytes {
    let mut t = TrafficBytes::default();
    for (b, ag) in parts {
        if *ag {
            t.ag += b.rs_reads + b.rs_writes + b.updates;
        } else {
            t.gemm_reads += b.gemm_reads;
            t.gemm_writes += b.gemm_writes;
            t.rs_reads += b.rs_reads;
            t.rs_writes += b.rs_writes + b.spill;
            t.updates += b.updates;
        }
    }
    t
}

/// Runs one sub-layer under all five scenarios.
///
/// # Errors
/// [`T3Error`].
pub fn run_sublayer(opts: &T3Options, sl: &SubLayer) -> Result<Vec<SubLayerResult>, T3Error> {
    run_sublayer_with(opts, sl, None).map(|(r, _)| r)
}

/// [`run_sublayer`], recording the fused runs (`t3` and `t3-mca`, their processes
/// prefixed with the configuration's name) on one timeline under `trace`. The results
/// are the same as without recording.
///
/// # Errors
/// [`T3Error`].
pub fn run_sublayer_traced(
    opts: &T3Options,
    sl: &SubLayer,
    trace: TimelineConfig,
) -> Result<(Vec<SubLayerResult>, Timeline), T3Error> {
    let (r, t) = run_sublayer_with(opts, sl, Some(trace))?;
    Ok((r, t.unwrap_or_else(|| Timeline::new(trace))))
}

fn run_sublayer_with(
    opts: &T3Options,
    sl: &SubLayer,
    trace: Option<TimelineConfig>,
) -> Result<(Vec<SubLayerResult>, Option<Timeline>), T3Error> {
    let shortcut = opts.simulate == Simulate::Shortcut;
    let gpus = gpus_of(opts, sl.tp);
    let gemm = isolated_gemm(opts, sl, shortcut)?;
    let rs = ring(opts, sl.m, sl.n, gpus, RingKind::ReduceScatter, shortcut)?;
    let rs_nmc = ring(opts, sl.m, sl.n, gpus, RingKind::ReduceScatterNmc, shortcut)?;
    let ag = ring(opts, sl.m, sl.n, gpus, RingKind::AllGather, shortcut)?;
    let threshold = opts
        .mca_threshold
        .unwrap_or_else(|| mca_threshold_for(gemm.occupancy));
    let (t3, mut t3_sys) = fused(
        opts,
        sl,
        Collective::RingReduceScatter,
        None,
        shortcut,
        None,
        trace,
    )?;
    let (t3m, mut t3m_sys) = fused(
        opts,
        sl,
        Collective::RingReduceScatter,
        Some(threshold),
        shortcut,
        None,
        trace,
    )?;
    let timeline = trace.map(|c| {
        let mut all = Timeline::new(c);
        for (sys, name) in [(&mut t3_sys, "t3"), (&mut t3m_sys, "t3-mca")] {
            if let Some(t) = sys.take_timeline() {
                for (k, v) in t.meta() {
                    all.set_meta(k, v);
                }
                all.absorb(&t, &format!("{name}: "));
            }
        }
        all.set_meta("sublayer", &format!("{} {} TP{}", sl.model, sl.name, sl.tp));
        all.set_meta("mca_threshold", &threshold.to_string());
        all
    });
    let rows = rows(
        sl,
        &SubLayerPhases {
            gemm,
            rs,
            rs_nmc,
            ag,
            t3,
            t3m,
        },
    );
    Ok((rows, timeline))
}

/// The six simulations a sub-layer's five rows are built from.
#[derive(Debug, Clone, Copy)]
pub(super) struct SubLayerPhases {
    pub(super) gemm: Phase,
    pub(super) rs: Phase,
    pub(super) rs_nmc: Phase,
    pub(super) ag: Phase,
    pub(super) t3: Phase,
    pub(super) t3m: Phase,
}

/// The five rows (Sequential, T3, T3-MCA, ideal overlap, ideal RS + NMC) of `sl` from
/// its simulations.
pub(super) fn rows(sl: &SubLayer, p: &SubLayerPhases) -> Vec<SubLayerResult> {
    let SubLayerPhases {
        gemm,
        rs,
        rs_nmc,
        ag,
        t3,
        t3m,
    } = *p;
    let s = 1e-9;
    let seq_total = gemm.ns + rs.ns + ag.ns;
    let row = |scenario, g: f64, r: f64, bytes| SubLayerResult {
        firmware_seconds: match scenario {
            Scenario::T3 => t3.firmware_ns * s,
            Scenario::T3Mca => t3m.firmware_ns * s,
            _ => 0.0,
        },
        rs_alone_seconds: match scenario {
            Scenario::Sequential | Scenario::IdealOverlap => rs.ns * s,
            Scenario::IdealRsNmc => rs_nmc.ns * s,
            Scenario::T3 | Scenario::T3Mca => 0.0,
        },
        sublayer: sl.clone(),
        scenario,
        gemm_seconds: g * s,
        rs_seconds: r * s,
        ag_seconds: ag.ns * s,
        total_seconds: (g + r + ag.ns) * s,
        speedup_vs_sequential: seq_total / (g + r + ag.ns),
        bytes,
        contention: match scenario {
            Scenario::Sequential => Some(gemm.contention),
            Scenario::T3 => Some(t3.contention),
            Scenario::T3Mca => Some(t3m.contention),
            Scenario::IdealOverlap | Scenario::IdealRsNmc => None,
        },
    };
    let seq_bytes = traffic(&[(&gemm.bytes, false), (&rs.bytes, false), (&ag.bytes, true)]);
    vec![
        row(Scenario::Sequential, gemm.ns, rs.ns, seq_bytes),
        row(
            Scenario::T3,
            t3.ns,
            0.0,
            traffic(&[(&t3.bytes, false), (&ag.bytes, true)]),
        ),
        row(
            Scenario::T3Mca,
            t3m.ns,
            0.0,
            traffic(&[(&t3m.bytes, false), (&ag.bytes, true)]),
        ),
        row(Scenario::IdealOverlap, gemm.ns.max(rs.ns), 0.0, seq_bytes),
        row(
            Scenario::IdealRsNmc,
            gemm.ns.max(rs_nmc.ns),
            0.0,
            traffic(&[
                (&gemm.bytes, false),
                (&rs_nmc.bytes, false),
                (&ag.bytes, true),
            ]),
        ),
    ]
}

/// The CU-sharing experiment of dissertation 8.2.2 (Fig. 8.4): the GEMM on `gemm_cus`
/// CUs and the baseline ring reduce-scatter (of independent data) on the other
/// `rs_cus`, at the same time on the same GPUs.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CuSplit {
    /// CUs the GEMM runs on.
    pub gemm_cus: u32,
    /// CUs the reduce-scatter runs on.
    pub rs_cus: u32,
    /// GEMM time while sharing, s.
    pub gemm_seconds: f64,
    /// Reduce-scatter time while sharing, s.
    pub rs_seconds: f64,
    /// GEMM alone on every CU, s.
    pub gemm_alone_seconds: f64,
    /// Reduce-scatter alone on every CU, s.
    pub rs_alone_seconds: f64,
    /// Sequential (alone + alone) over the shared run's `max(GEMM, RS)`.
    pub speedup: f64,
    /// Sequential over `max(GEMM alone, RS alone)`: the ideal overlap.
    pub ideal_speedup: f64,
}

/// Runs the CU-split experiment for `sl`.
///
/// # Errors
/// [`T3Error`].
pub fn cu_split(
    opts: &T3Options,
    sl: &SubLayer,
    gemm_cus: u32,
    rs_cus: u32,
) -> Result<CuSplit, T3Error> {
    let total = opts.gpu.cus;
    if gemm_cus == 0 || rs_cus == 0 || gemm_cus + rs_cus > total {
        return Err(T3Error::Config(format!(
            "CU split {gemm_cus}-{rs_cus}: both shares > 0 and together at most the GPU's {total} CUs"
        )));
    }
    let shortcut = opts.simulate == Simulate::Shortcut;
    let gpus = gpus_of(opts, sl.tp);
    let alone = isolated_gemm(opts, sl, shortcut)?;
    let rs_alone = ring(opts, sl.m, sl.n, gpus, RingKind::ReduceScatter, shortcut)?;
    let l = layout(opts, sl.m, sl.n, gpus)?;
    let tile = (l.tile.0 as u16, l.tile.1 as u16);
    let m = ProducerModel::new(
        &opts.gpu,
        tile,
        sl.m,
        sl.n,
        sl.k,
        opts.dtype,
        gemm_cus,
        true,
        sl.operand_layout(),
        opts.producer_memory,
    )
    .ok_or_else(|| T3Error::Config("the producer kernel cannot run".into()))?;
    // The ring kernel's traffic enters the queues behind the GEMM's: the arrival-order
    // ingress of the fused runs is not applied to the CU-sharing study
    // (docs/decisions/t3.md, "Ingress").
    let mut s = plain_system(opts, l, shortcut, Ingress::ComputeFirst)?;
    s.start_producer(m, 0);
    let in_flight = (super::system::RING_IN_FLIGHT * rs_cus as usize).div_ceil(total as usize);
    s.start_ring_on(RingKind::ReduceScatter, in_flight, 0);
    let est = m.compute_bound_ns() + l.bytes() as f64 / opts.link.bytes_per_ns;
    s.run_without_firmware(limit(est), |x| x.producers_done() && x.rings_done())
        .map_err(T3Error::from)?;
    let t = s.totals();
    let g = t.iter().filter_map(|x| x.gemm_done_ns).fold(0.0, f64::max);
    let r = t
        .iter()
        .filter_map(|x| x.collective_done_ns)
        .fold(0.0, f64::max);
    let seq = alone.ns + rs_alone.ns;
    Ok(CuSplit {
        gemm_cus,
        rs_cus,
        gemm_seconds: g * 1e-9,
        rs_seconds: r * 1e-9,
        gemm_alone_seconds: alone.ns * 1e-9,
        rs_alone_seconds: rs_alone.ns * 1e-9,
        speedup: seq / g.max(r),
        ideal_speedup: seq / alone.ns.max(rs_alone.ns),
    })
}

/// Times a plain ring reduce-scatter of `bytes` (an f16 array of 4096 columns).
///
/// # Errors
/// [`T3Error`].
pub fn time_reduce_scatter(opts: &T3Options, bytes: u64) -> Result<RsTiming, T3Error> {
    let gpus = gpus_of(opts, 0);
    if gpus < 2 {
        return Err(T3Error::Config("a ring needs --gpus >= 2".into()));
    }
    let elem = u64::from(elem_bytes(opts.dtype));
    let n = 4096u32;
    let m = (bytes / elem).div_ceil(u64::from(n)).max(1);
    let m = u32::try_from(m).map_err(|_| T3Error::Config(format!("{bytes} bytes is too large")))?;
    let shortcut = opts.simulate == Simulate::Shortcut;
    let p = ring(opts, m, n, gpus, RingKind::ReduceScatter, shortcut)?;
    let total = u64::from(m) * u64::from(n) * elem;
    let g = f64::from(gpus);
    let model_ns = (g - 1.0) * (total as f64 / g / opts.link.bytes_per_ns + opts.link.latency_ns);
    Ok(RsTiming {
        rs_seconds: p.ns * 1e-9,
        model_seconds: model_ns * 1e-9,
        steps: gpus - 1,
    })
}

/// Each GPU's partial output `A_g x B_g` with A, B uniform in [-1, 1] on a 1/64 grid,
/// accumulated in f32 and rounded to the type.
pub fn partial_outputs(
    gpus: u32,
    m: u32,
    n: u32,
    k: u32,
    dtype: GemmDataType,
    seed: u64,
) -> Vec<Vec<f32>> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..gpus)
        .map(|_| {
            let a: Vec<f32> = (0..m as usize * k as usize)
                .map(|_| f32::from(rng.random_range(-64i8..=64)) / 64.0)
                .collect();
            let b: Vec<f32> = (0..k as usize * n as usize)
                .map(|_| f32::from(rng.random_range(-64i8..=64)) / 64.0)
                .collect();
            let mut c = vec![0f32; m as usize * n as usize];
            for i in 0..m as usize {
                for p in 0..k as usize {
                    let x = a[i * k as usize + p];
                    let row = &b[p * n as usize..(p + 1) * n as usize];
                    for (o, y) in c[i * n as usize..(i + 1) * n as usize].iter_mut().zip(row) {
                        *o += x * y;
                    }
                }
            }
            c.into_iter().map(|v| round_to(dtype, v)).collect()
        })
        .collect()
}

/// The reduced value of chunk `c`'s element `i` in the ring's order:
/// `p[c-1] + p[c-2]`, then `+ p[c-3]`, ..., `+ p[c]`, rounding after each addition.
pub fn ring_order_sum(partials: &[Vec<f32>], c: u32, i: usize, dtype: GemmDataType) -> f32 {
    let g = partials.len() as u32;
    let mut s = partials[((c + g - 1) % g) as usize][i];
    for j in 2..=g {
        s = add_in(dtype, s, partials[((c + g - j) % g) as usize][i]);
    }
    s
}

/// The functional check (`nmcp t3 check`).
///
/// # Errors
/// [`T3Error`].
pub fn check(opts: &T3Options, run: &CheckRun) -> Result<CheckOutput, T3Error> {
    let gpus = run.gpus;
    let l = layout(opts, run.m, run.n, gpus)?;
    if u64::from(run.m) * u64::from(run.n) * u64::from(run.k) * u64::from(gpus) > 1 << 34 {
        return Err(T3Error::Config(format!(
            "{} x {} x {} on {gpus} GPUs is too large for a functional check (it computes the GEMMs on the host)",
            run.m, run.n, run.k
        )));
    }
    let partials = partial_outputs(gpus, run.m, run.n, run.k.max(1), opts.dtype, opts.seed);
    let sl = SubLayer {
        model: "check".into(),
        name: "check",
        h: run.m,
        tokens: run.n,
        tp: gpus,
        m: run.m,
        n: run.n,
        k: run.k.max(1),
    };
    let mut o = T3Options {
        gpus,
        ..opts.clone()
    };
    o.simulate = Simulate::AllGpus;
    let (seconds, outs): (f64, Vec<Vec<f32>>) = match run.scenario {
        Scenario::T3 | Scenario::T3Mca => {
            let mca = (run.scenario == Scenario::T3Mca).then(|| o.mca_threshold.unwrap_or(10));
            let (p, s) = fused(
                &o,
                &sl,
                Collective::RingReduceScatter,
                mca,
                false,
                Some(&partials),
                None,
            )?;
            (
                p.ns * 1e-9,
                (0..gpus as usize)
                    .map(|g| s.out_values(g).map(<[f32]>::to_vec).unwrap_or_default())
                    .collect(),
            )
        }
        Scenario::Sequential => {
            let gemm = isolated_gemm(&o, &sl, false)?;
            let mut s = system(&o, l, false, true, &|| Box::new(FrFcfs), ingress(&o, None))?;
            for (g, v) in partials.iter().enumerate() {
                s.set_partial(g, v.clone());
                s.load_partial_as_output(g);
            }
            s.start_ring(RingKind::ReduceScatter, 0);
            s.run_without_firmware(
                limit(l.bytes() as f64 / o.link.bytes_per_ns),
                T3System::rings_done,
            )
            .map_err(T3Error::from)?;
            let rs_ns = s
                .totals()
                .iter()
                .filter_map(|x| x.collective_done_ns)
                .fold(0.0, f64::max);
            (
                (gemm.ns + rs_ns) * 1e-9,
                (0..gpus as usize)
                    .map(|g| s.out_values(g).map(<[f32]>::to_vec).unwrap_or_default())
                    .collect(),
            )
        }
        other => {
            return Err(T3Error::Config(format!(
                "check runs sequential, t3 or t3-mca, not {other}"
            )))
        }
    };
    let mut mismatches = 0u64;
    let mut first = None;
    let mut blocks = Vec::new();
    let mut reduced = Vec::new();
    let n = run.n as usize;
    for g in 0..gpus {
        let r = l.chunk_rect(g);
        blocks.push(Block {
            gpu: g,
            rows: [r.row0, r.row0 + r.rows],
            cols: [r.col0, r.col0 + r.cols],
        });
        let mut v = Vec::with_capacity(super::layout::elements(&r) as usize);
        for row in r.row0..r.row0 + r.rows {
            for col in r.col0..r.col0 + r.cols {
                let i = row as usize * n + col as usize;
                let got = outs[g as usize].get(i).copied().unwrap_or(f32::NAN);
                let want = ring_order_sum(&partials, g, i, opts.dtype);
                if got != want {
                    mismatches += 1;
                    first.get_or_insert_with(|| {
                        format!("GPU {g} element ({row}, {col}): {got} where the ring-order sum is {want}")
                    });
                }
                v.push(got);
            }
        }
        reduced.push(v);
    }
    Ok(CheckOutput {
        partials,
        reduced,
        blocks,
        mismatches,
        first_mismatch: first,
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(gpus: u32) -> T3Options {
        T3Options {
            gpus,
            ..T3Options::default()
        }
    }

    #[test]
    fn a_plain_ring_reduce_scatter_is_never_faster_than_the_bandwidth_latency_model() {
        for gpus in [2, 4, 8] {
            let t = time_reduce_scatter(&opts(gpus), 4 << 20).unwrap();
            assert!(t.rs_seconds >= t.model_seconds, "{gpus} GPUs: {t:?}");
            assert!(t.rs_seconds < 1.5 * t.model_seconds, "{gpus} GPUs: {t:?}");
        }
    }

    #[test]
    fn sequential_check_reduces_exactly() {
        let run = CheckRun {
            gpus: 4,
            m: 256,
            n: 256,
            k: 32,
            scenario: Scenario::Sequential,
        };
        let out = check(&opts(4), &run).unwrap();
        assert_eq!(out.mismatches, 0, "{:?}", out.first_mismatch);
        assert!(out.seconds > 0.0);
    }
}

#[cfg(test)]
mod fused_tests {
    use super::*;

    #[test]
    fn t3_check_reduces_exactly() {
        for scenario in [Scenario::T3, Scenario::T3Mca] {
            let run = CheckRun {
                gpus: 4,
                m: 512,
                n: 512,
                k: 32,
                scenario,
            };
            let o = T3Options {
                gpus: 4,
                ..T3Options::default()
            };
            let out = check(&o, &run).unwrap();
            assert_eq!(out.mismatches, 0, "{scenario}: {:?}", out.first_mismatch);
        }
    }
}
