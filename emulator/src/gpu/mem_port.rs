//! Where the GPU model's HBM bandwidth comes from: a [`MemoryPort`].
//!
//! The cohort simulator ([`super::sim::GpuSim`]) shares HBM among the resident workgroups
//! as a fluid max-min fair share; the port decides how much bandwidth there is to share
//! for the current mix of traffic. Two ports:
//! - [`FluidHbm`]: the calibrated formula (sustained fraction of peak times a row-buffer
//!   factor that falls with the number of kernels streaming at once). Cheap, the default,
//!   and what every GOLDYLOC figure uses.
//! - [`DramPort`]: turns the mix into requests — each cohort's LLC misses (its A/B panel
//!   lines walked along K, with the strides its transposes imply) and its output-tile
//!   stores, tagged with the workgroup and wavefront that issue them — runs a bounded window
//!   of them through the DRAM-command-level [`MemorySystem`] and returns the bandwidth the
//!   DRAM sustained. Windows are cached per mix, so a run simulates a bounded number.
//!
//! Both answer only "how many bytes per ns does HBM deliver to this mix"; the sharing of
//! that capacity among workgroups stays the simulator's fluid water level, so the two
//! ports differ exactly in what the DRAM model knows that the formula does not (row
//! conflicts between streams, transposed panels, write turnarounds, refresh).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use super::catalog::CatalogKernel;
use super::config::GpuConfig;
use super::gemm::{Calibration, GemmShape};
use crate::hbm::config::DEFAULT_PRESET;
use crate::hbm::{AddressMapping, Cycle, DramAddr, HbmPreset, MappingError, PresetError};
use crate::memctrl::request::Source;
use crate::memctrl::{ControllerConfig, MemorySystem, Request};

/// Bytes of one request the port sends: HBM2's 64-B access (two 32-B columns of one
/// pseudo-channel); a GPU cache line of 128 B is two of them.
pub const REQUEST_BYTES: u32 = 64;

/// Alignment of the matrices the port lays out: a 2 MiB page, what a GPU allocator hands
/// out for tensors of this size, so different matrices never share a DRAM row.
pub const MATRIX_ALIGN_BYTES: u64 = 2 << 20;

/// Requests per pseudo-channel in one measurement window of [`DramPort::for_gpu`]: 512
/// 64-B requests keep a 32-deep queue pair full for about 2 us of a 16 GB/s
/// pseudo-channel, long enough that the ramp (tRCD + CL, ~30 ns) and the drain cost about
/// 2 % and several per-bank refreshes (every tREFI / 16 = 244 ns) fall inside.
pub const DEFAULT_REQUESTS_PER_PSEUDO_CHANNEL: usize = 512;

/// The tiling of one GEMM kernel over its problem: what decides which addresses its
/// workgroups touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GemmTiling {
    /// Rows of C.
    pub m: u32,
    /// Columns of C.
    pub n: u32,
    /// Dot-product depth.
    pub k: u32,
    /// Batch count (>= 1).
    pub batch: u32,
    /// A transposed (stored K x M, so a tile row's panel is rows contiguous along K).
    pub trans_a: bool,
    /// B transposed (stored N x K, so a tile column's panel is strided along K).
    pub trans_b: bool,
    /// Bytes per element.
    pub element_bytes: u32,
    /// Macro tile rows.
    pub mt0: u32,
    /// Macro tile columns.
    pub mt1: u32,
    /// K elements per main-loop iteration.
    pub depth_u: u32,
    /// Global split-U.
    pub split_u: u32,
    /// StaggerU mapping: the K-loop start offset follows the tile row (0) or column (1).
    pub stagger_mapping: u32,
}

impl GemmTiling {
    /// The tiling of `kernel` over `shape`.
    pub fn new(shape: &GemmShape, kernel: &CatalogKernel) -> Self {
        Self {
            m: shape.m.max(1),
            n: shape.n.max(1),
            k: shape.k.max(1),
            batch: shape.batch.max(1),
            trans_a: shape.trans_a,
            trans_b: shape.trans_b,
            element_bytes: shape.dtype.bytes(),
            mt0: u32::from(kernel.mt0.max(1)),
            mt1: u32::from(kernel.mt1.max(1)),
            depth_u: u32::from(kernel.depth_u.max(1)),
            split_u: u32::from(kernel.split_u.max(1)),
            stagger_mapping: u32::from(kernel.stagger_mapping),
        }
    }

    pub(super) fn tiles_m(&self) -> u64 {
        u64::from(self.m).div_ceil(u64::from(self.mt0))
    }

    fn tiles_n(&self) -> u64 {
        u64::from(self.n).div_ceil(u64::from(self.mt1))
    }

    /// Workgroups in the grid: tiles times batch times split-U (column-major tile order
    /// within a slice, slices outermost, as the simulator and the LLC model assume).
    pub fn workgroups(&self) -> u64 {
        self.tiles_m() * self.tiles_n() * u64::from(self.batch) * u64::from(self.split_u)
    }
}

/// The HBM traffic of one resident cohort (workgroups of one kernel placed together and
/// progressing at one rate), as the simulator sees it when it re-solves the shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StreamDemand {
    /// Index of the kernel in the simulator's launch list: cohorts with the same index
    /// walk the same matrices (their panels are shared through the LLC).
    pub kernel: usize,
    /// The GEMM's tiling; `None` for a non-GEMM kernel (no address pattern known).
    pub tiling: Option<GemmTiling>,
    /// First workgroup id of the cohort: its workgroups are
    /// `first_workgroup .. first_workgroup + workgroups` (dispatch is in id order and
    /// cohorts finish in placement order, so a kernel's residents are its latest ids).
    pub first_workgroup: u64,
    /// Workgroups in the cohort.
    pub workgroups: u64,
    /// Wavefronts per workgroup (the loads and stores of a workgroup are spread over them).
    pub waves_per_workgroup: u32,
    /// Bytes per workgroup read from HBM: the LLC misses of its panels.
    pub read_bytes_per_workgroup: f64,
    /// Bytes per workgroup written to HBM: its output tile.
    pub write_bytes_per_workgroup: f64,
    /// Bytes per ns the cohort would move if HBM did not limit it.
    pub demand_bytes_per_ns: f64,
}

impl StreamDemand {
    fn bytes_per_workgroup(&self) -> f64 {
        self.read_bytes_per_workgroup + self.write_bytes_per_workgroup
    }
}

/// The source of the GPU model's HBM bandwidth.
pub trait MemoryPort {
    /// Bytes per ns HBM sustains for the mix `streams` (every cohort in its main loop).
    /// The simulator shares this capacity max-min fairly among the workgroups.
    ///
    /// No time argument: both ports answer for a mix, not for a moment (the DRAM port
    /// measures each mix in a window of its own, cached); a port that shares a live memory
    /// system with other traffic would need one.
    fn hbm_capacity(&mut self, gpu: &GpuConfig, cal: &Calibration, streams: &[StreamDemand])
        -> f64;
}

/// Kernels with a stream in `streams`.
fn distinct_kernels(streams: &[StreamDemand]) -> usize {
    let mut kernels: Vec<usize> = streams.iter().map(|s| s.kernel).collect();
    kernels.sort_unstable();
    kernels.dedup();
    kernels.len()
}

/// The calibrated fluid HBM: the GPU's sustained bandwidth times the row-buffer factor
/// for the number of kernels streaming at once ([`Calibration::hbm_row_factor`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FluidHbm;

impl MemoryPort for FluidHbm {
    fn hbm_capacity(
        &mut self,
        gpu: &GpuConfig,
        cal: &Calibration,
        streams: &[StreamDemand],
    ) -> f64 {
        gpu.hbm_sustained() * cal.hbm_row_factor(distinct_kernels(streams))
    }
}

/// One access the port sends: a 64-B read (part of an LLC miss of a panel line) or write
/// (part of an output tile), with the workgroup and wavefront that issue it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAccess {
    /// Byte address (before wrapping into the device).
    pub addr: u64,
    /// A store of the output tile (otherwise a load of a panel).
    pub write: bool,
    /// Workgroup id within its kernel.
    pub workgroup: u32,
    /// Wavefront id within its workgroup.
    pub wavefront: u8,
}

/// The one place a GPU access becomes a memory-controller request: a compute-class read
/// (panel miss) or write (output tile) that names its workgroup and wavefront, so a
/// controller observer (the T3 tracker) can attribute it.
pub fn controller_request(access: &PortAccess, arrival: Cycle) -> Request {
    let r = if access.write {
        Request::write(access.addr, REQUEST_BYTES, arrival)
    } else {
        Request::read(access.addr, REQUEST_BYTES, arrival)
    };
    r.with_source(Source {
        gpu: 0,
        workgroup: access.workgroup,
        wavefront: access.wavefront,
    })
}

/// Base addresses of one kernel's matrices.
#[derive(Debug, Clone, Copy)]
pub(super) struct MatrixBases {
    pub(super) a: u64,
    pub(super) b: u64,
    pub(super) c: u64,
}

/// Lays out every kernel's A, B and C one after another at [`MATRIX_ALIGN_BYTES`], in
/// kernel index order.
fn layout(streams: &[StreamDemand]) -> BTreeMap<usize, MatrixBases> {
    let mut kernels: BTreeMap<usize, GemmTiling> = BTreeMap::new();
    for s in streams {
        if let Some(t) = s.tiling {
            kernels.entry(s.kernel).or_insert(t);
        }
    }
    let mut next = 0u64;
    let mut alloc = |bytes: u64| {
        let at = next;
        next += bytes.div_ceil(MATRIX_ALIGN_BYTES).max(1) * MATRIX_ALIGN_BYTES;
        at
    };
    kernels
        .into_iter()
        .map(|(kernel, t)| {
            let (m, n, k) = (u64::from(t.m), u64::from(t.n), u64::from(t.k));
            let per = u64::from(t.batch) * u64::from(t.element_bytes);
            let a = alloc(m * k * per);
            let b = alloc(k * n * per);
            let c = alloc(m * n * per);
            (kernel, MatrixBases { a, b, c })
        })
        .collect()
}

/// One operand panel of a tile: how its bytes for a range of K lie in memory.
#[derive(Debug, Clone, Copy)]
pub(super) struct Panel {
    /// Address of the panel's element at k = 0.
    base: u64,
    /// Stored contiguously along K (one run per tile row/column, `runs` of them `stride`
    /// apart); otherwise one run of `run_bytes` per k, `stride` apart.
    along_k: bool,
    stride: u64,
    runs: u64,
    run_bytes: u64,
    element_bytes: u64,
    /// K range of the panel's slice (split-U gives each slice a part of K).
    k_begin: u64,
    k_end: u64,
    /// The first resident workgroup that uses the panel: it issues the misses.
    workgroup: u32,
}

impl Panel {
    /// Line addresses the main-loop iteration `step` (K elements `depth` wide) touches, in
    /// address order per run; `false` once the panel's K range is exhausted.
    pub(super) fn step_lines(&self, step: u64, depth: u64, line: u64, out: &mut Vec<u64>) -> bool {
        let k0 = self.k_begin + step * depth;
        if k0 >= self.k_end {
            return false;
        }
        let k1 = (k0 + depth).min(self.k_end);
        let mut push_range = |start: u64, end: u64| {
            if end > start {
                let mut l = start / line;
                while l * line < end {
                    out.push(l * line);
                    l += 1;
                }
            }
        };
        if self.along_k {
            for r in 0..self.runs {
                let row = self.base + r * self.stride;
                push_range(row + k0 * self.element_bytes, row + k1 * self.element_bytes);
            }
        } else {
            for kk in k0..k1 {
                let run = self.base + kk * self.stride;
                push_range(run, run + self.run_bytes);
            }
        }
        true
    }
}

/// Grid coordinates of a workgroup id: (slice, tile row, tile column).
pub(super) fn tile_of(t: &GemmTiling, id: u64) -> (u64, u64, u64) {
    let per_slice = t.tiles_m() * t.tiles_n();
    let slice = id / per_slice.max(1);
    let within = id % per_slice.max(1);
    (slice, within % t.tiles_m(), within / t.tiles_m())
}

/// The A panel (tile row `tr`) and B panel (tile column `tc`) of a slice.
pub(super) fn panels(
    t: &GemmTiling,
    m: &MatrixBases,
    slice: u64,
    tr: u64,
    tc: u64,
) -> (Panel, Panel) {
    let eb = u64::from(t.element_bytes);
    let (mm, nn, kk) = (u64::from(t.m), u64::from(t.n), u64::from(t.k));
    let split = u64::from(t.split_u);
    let (batch, part) = (slice / split, slice % split);
    let ks = kk.div_ceil(split);
    let (k_begin, k_end) = ((part * ks).min(kk), ((part + 1) * ks).min(kk));
    let row0 = tr * u64::from(t.mt0);
    let col0 = tc * u64::from(t.mt1);
    let rows = u64::from(t.mt0).min(mm.saturating_sub(row0));
    let cols = u64::from(t.mt1).min(nn.saturating_sub(col0));
    let a_mat = m.a + batch * mm * kk * eb;
    let b_mat = m.b + batch * kk * nn * eb;
    let common = Panel {
        base: 0,
        along_k: false,
        stride: 0,
        runs: 0,
        run_bytes: 0,
        element_bytes: eb,
        k_begin,
        k_end,
        workgroup: 0,
    };
    // Column-major: op(A) is M x K; stored as M x K (lda = M) or, transposed, K x M
    // (lda = K). op(B) is K x N; stored as K x N (ldb = K) or N x K (ldb = N).
    let a = if t.trans_a {
        Panel {
            base: a_mat + row0 * kk * eb,
            along_k: true,
            stride: kk * eb,
            runs: rows,
            ..common
        }
    } else {
        Panel {
            base: a_mat + row0 * eb,
            stride: mm * eb,
            run_bytes: rows * eb,
            ..common
        }
    };
    let b = if t.trans_b {
        Panel {
            base: b_mat + col0 * eb,
            stride: nn * eb,
            run_bytes: cols * eb,
            ..common
        }
    } else {
        Panel {
            base: b_mat + col0 * kk * eb,
            along_k: true,
            stride: kk * eb,
            runs: cols,
            ..common
        }
    };
    (a, b)
}

/// Splits a line into request-sized accesses.
fn push_line(
    out: &mut Vec<PortAccess>,
    line_addr: u64,
    line: u64,
    write: bool,
    workgroup: u32,
    wavefront: u8,
) {
    let mut a = line_addr;
    while a < line_addr + line {
        out.push(PortAccess {
            addr: a,
            write,
            workgroup,
            wavefront,
        });
        a += u64::from(REQUEST_BYTES);
    }
}

/// The wavefront that issues a workgroup's `index`-th line: a workgroup's loads and stores
/// are spread over its wavefronts in turn.
fn wave_of(index: u64, waves: u32) -> u8 {
    u8::try_from(index % u64::from(waves.max(1))).unwrap_or(u8::MAX)
}

/// The first `limit` panel reads of a cohort: every main-loop iteration touches one K
/// slab of each distinct A panel (tile row) and B panel (tile column) of its resident
/// workgroups; a line goes to HBM the first time any of them touches it (co-resident
/// workgroups share panels through the LLC). When the panels run out before `limit`, the
/// walk starts over (the next wave re-fetches them), so every cohort keeps its share of
/// the window.
fn stream_reads(
    s: &StreamDemand,
    t: &GemmTiling,
    m: &MatrixBases,
    line: u64,
    limit: usize,
) -> Vec<PortAccess> {
    let mut out = Vec::with_capacity(limit);
    if limit == 0 || s.workgroups == 0 {
        return out;
    }
    let mut a_panels: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let mut b_panels: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    let end = (s.first_workgroup + s.workgroups).min(t.workgroups());
    for id in s.first_workgroup.min(end)..end {
        let (slice, tr, tc) = tile_of(t, id);
        a_panels.entry((slice, tr)).or_insert(id);
        b_panels.entry((slice, tc)).or_insert(id);
    }
    let mut list: Vec<Panel> = Vec::with_capacity(a_panels.len() + b_panels.len());
    for (&(slice, tr), &id) in &a_panels {
        let tc = tile_of(t, id).2;
        let mut p = panels(t, m, slice, tr, tc).0;
        p.workgroup = u32::try_from(id).unwrap_or(u32::MAX);
        list.push(p);
    }
    for (&(slice, tc), &id) in &b_panels {
        let tr = tile_of(t, id).1;
        let mut p = panels(t, m, slice, tr, tc).1;
        p.workgroup = u32::try_from(id).unwrap_or(u32::MAX);
        list.push(p);
    }
    let depth = u64::from(t.depth_u);
    let mut seen: HashSet<u64> = HashSet::new();
    let mut lines = Vec::new();
    loop {
        let before = out.len();
        let mut step = 0u64;
        loop {
            let mut any = false;
            for p in &list {
                lines.clear();
                any |= p.step_lines(step, depth, line, &mut lines);
                let mut issued = 0u64;
                for &l in &lines {
                    if seen.insert(l) {
                        push_line(
                            &mut out,
                            l,
                            line,
                            false,
                            p.workgroup,
                            wave_of(issued, s.waves_per_workgroup),
                        );
                        issued += 1;
                        if out.len() >= limit {
                            out.truncate(limit);
                            return out;
                        }
                    }
                }
            }
            if !any {
                break;
            }
            step += 1;
        }
        if out.len() == before {
            return out;
        }
        seen.clear();
    }
}

/// The first `limit` output stores of a cohort: each resident workgroup writes its tile,
/// column by column (C is column-major); the columns are spread over its wavefronts.
fn stream_writes(
    s: &StreamDemand,
    t: &GemmTiling,
    m: &MatrixBases,
    line: u64,
    limit: usize,
) -> Vec<PortAccess> {
    let mut out = Vec::with_capacity(limit);
    if limit == 0 || s.workgroups == 0 {
        return out;
    }
    let eb = u64::from(t.element_bytes);
    let (mm, nn) = (u64::from(t.m), u64::from(t.n));
    let end = (s.first_workgroup + s.workgroups).min(t.workgroups());
    let start = s.first_workgroup.min(end);
    loop {
        let before = out.len();
        for id in start..end {
            let (slice, tr, tc) = tile_of(t, id);
            let batch = slice / u64::from(t.split_u);
            let row0 = tr * u64::from(t.mt0);
            let col0 = tc * u64::from(t.mt1);
            let rows = u64::from(t.mt0).min(mm.saturating_sub(row0));
            let cols = u64::from(t.mt1).min(nn.saturating_sub(col0));
            let tile = m.c + batch * mm * nn * eb + (col0 * mm + row0) * eb;
            let wg = u32::try_from(id).unwrap_or(u32::MAX);
            for j in 0..cols {
                let wave = wave_of(
                    j * u64::from(s.waves_per_workgroup.max(1)) / cols.max(1),
                    s.waves_per_workgroup,
                );
                let run = tile + j * mm * eb;
                let mut l = run / line;
                while l * line < run + rows * eb {
                    push_line(&mut out, l * line, line, true, wg, wave);
                    if out.len() >= limit {
                        out.truncate(limit);
                        return out;
                    }
                    l += 1;
                }
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// A window of `total` accesses for a mix: each GEMM cohort gets a share in proportion
/// to its demand, split into panel reads and tile stores in proportion to its bytes (the
/// stores after its reads: a cohort's workgroups write their tiles at the end of their
/// main loops), and the cohorts' sequences are interleaved evenly, as concurrent
/// workgroups' misses reach the memory controllers. `line_bytes` is the LLC line (misses
/// fetch whole lines). Deterministic: a pure function of its arguments.
pub fn window_accesses(streams: &[StreamDemand], line_bytes: u32, total: usize) -> Vec<PortAccess> {
    let line = u64::from(line_bytes.max(REQUEST_BYTES));
    let bases = layout(streams);
    let active: Vec<(&StreamDemand, GemmTiling)> = streams
        .iter()
        .filter(|s| s.demand_bytes_per_ns > 0.0 && s.bytes_per_workgroup() > 0.0)
        .filter_map(|s| s.tiling.map(|t| (s, t)))
        .collect();
    let demand: f64 = active.iter().map(|(s, _)| s.demand_bytes_per_ns).sum();
    if demand <= 0.0 {
        return Vec::new();
    }
    let mut sequences: Vec<Vec<PortAccess>> = Vec::with_capacity(active.len());
    for (s, t) in &active {
        let Some(m) = bases.get(&s.kernel) else {
            continue;
        };
        let share = (total as f64 * s.demand_bytes_per_ns / demand).round() as usize;
        let reads =
            (share as f64 * s.read_bytes_per_workgroup / s.bytes_per_workgroup()).round() as usize;
        let mut seq = stream_reads(s, t, m, line, reads);
        seq.extend(stream_writes(s, t, m, line, share.saturating_sub(reads)));
        sequences.push(seq);
    }
    let mut order: Vec<(f64, usize, usize)> = sequences
        .iter()
        .enumerate()
        .flat_map(|(si, seq)| {
            let n = seq.len() as f64;
            (0..seq.len()).map(move |j| ((j as f64 + 0.5) / n, si, j))
        })
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    order
        .into_iter()
        .filter_map(|(_, si, j)| sequences.get(si).and_then(|s| s.get(j)).copied())
        .collect()
}

/// Why a DRAM port could not be built.
#[derive(Debug, Clone, PartialEq)]
pub enum DramPortError {
    /// The HBM preset.
    Preset(PresetError),
    /// The address mapping.
    Mapping(MappingError),
}

impl fmt::Display for DramPortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Preset(e) => write!(f, "DRAM port preset: {e}"),
            Self::Mapping(e) => write!(f, "DRAM port mapping: {e}"),
        }
    }
}

impl std::error::Error for DramPortError {}

impl From<PresetError> for DramPortError {
    fn from(e: PresetError) -> Self {
        Self::Preset(e)
    }
}

impl From<MappingError> for DramPortError {
    fn from(e: MappingError) -> Self {
        Self::Mapping(e)
    }
}

/// One cohort's part of a mix key: what decides the window's traffic, rounded so that
/// mixes differing only in noise share a measurement.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct KernelKey {
    tiling: GemmTiling,
    /// Resident workgroups of the kernel, rounded down to three significant bits.
    workgroups: u64,
    /// The kernel's share of the mix's demand, in 1/32.
    demand_share: u32,
    /// Writes' share of the kernel's bytes, in 1/32.
    write_share: u32,
}

/// Rounds down to the three most significant bits (within 12.5 %).
pub(super) fn three_significant_bits(x: u64) -> u64 {
    if x < 8 {
        return x;
    }
    let shift = 63 - x.leading_zeros() - 2;
    (x >> shift) << shift
}

/// The mix of `streams` per kernel (cohorts of a kernel walk the same matrices), sorted
/// so that the order of cohorts does not matter.
fn mix_key(streams: &[StreamDemand]) -> Vec<KernelKey> {
    let mut per: BTreeMap<usize, (GemmTiling, u64, f64, f64, f64)> = BTreeMap::new();
    let mut demand = 0.0;
    for s in streams {
        let Some(t) = s.tiling else { continue };
        if s.demand_bytes_per_ns <= 0.0 {
            continue;
        }
        demand += s.demand_bytes_per_ns;
        let e = per.entry(s.kernel).or_insert((t, 0, 0.0, 0.0, 0.0));
        e.1 += s.workgroups;
        e.2 += s.demand_bytes_per_ns;
        e.3 += s.write_bytes_per_workgroup * s.workgroups as f64;
        e.4 += s.bytes_per_workgroup() * s.workgroups as f64;
    }
    let mut key: Vec<KernelKey> = per
        .into_values()
        .map(|(tiling, wgs, d, w, b)| KernelKey {
            tiling,
            workgroups: three_significant_bits(wgs),
            demand_share: (32.0 * d / demand).round() as u32,
            write_share: if b > 0.0 {
                (32.0 * w / b).round() as u32
            } else {
                0
            },
        })
        .collect();
    key.sort();
    key
}

/// What one measured window gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowMeasurement {
    /// Requests in the window.
    pub requests: u64,
    /// Achieved bandwidth over pin bandwidth of the simulated device.
    pub fraction_of_peak: f64,
    /// Row hits, misses (bank precharged) and conflicts (another row open).
    pub row_hits: u64,
    /// See `row_hits`.
    pub row_misses: u64,
    /// See `row_hits`.
    pub row_conflicts: u64,
}

/// The request-level port: measures each new mix on a DRAM-command-level
/// [`MemorySystem`] and returns the measured fraction of pin bandwidth times the GPU's
/// peak HBM bandwidth.
///
/// The fraction, not the simulated device's bytes per ns, because the device's preset
/// need not run at the GPU's pin rate (the MI100's HBM2 runs at 2.4 Gb/s, the validated
/// `hbm2-2000` preset at 2.0): what carries over is how well the DRAM serves the mix.
#[derive(Debug, Clone)]
pub struct DramPort {
    preset: HbmPreset,
    mapping: AddressMapping,
    controller: ControllerConfig,
    requests_per_window: usize,
    /// Whether the GPU hashes pseudo-channel selection with higher address bits (see
    /// [`DramPort::with_channel_hash`]).
    channel_hash: bool,
    /// Measured fraction of peak per mix.
    cache: HashMap<Vec<KernelKey>, f64>,
    windows_simulated: u64,
    requests_simulated: u64,
}

impl DramPort {
    /// A port on `preset` with its default mapping and controller settings, measuring
    /// windows of `requests_per_pseudo_channel` requests per pseudo-channel.
    pub fn new(
        preset: HbmPreset,
        requests_per_pseudo_channel: usize,
    ) -> Result<Self, DramPortError> {
        preset.check()?;
        let mapping = AddressMapping::parse(&preset.controller.mapping, &preset)?;
        let controller = ControllerConfig::from_preset(&preset);
        let requests_per_window =
            requests_per_pseudo_channel.max(1) * preset.pseudo_channels() as usize;
        Ok(Self {
            preset,
            mapping,
            controller,
            requests_per_window,
            channel_hash: true,
            cache: HashMap::new(),
            windows_simulated: 0,
            requests_simulated: 0,
        })
    }

    /// The port for a GPU: [`DramPort::preset_for_gpu`], default window.
    pub fn for_gpu(gpu: &GpuConfig) -> Result<Self, DramPortError> {
        Self::new(
            Self::preset_for_gpu(gpu)?,
            DEFAULT_REQUESTS_PER_PSEUDO_CHANNEL,
        )
    }

    /// The `hbm2-2000` preset with as many stacks as the GPU's peak bandwidth needs,
    /// rounded to a power of two (the address mapping needs whole stack bits): 4 for the
    /// MI100 (1228.8 GB/s: its four HBM2 stacks at 2.4 Gb/s) and for the T3 GPU (1 TB/s,
    /// the `t3-table-8.1` organisation). The GPU's channel count, not its pin rate, is
    /// what decides how a mix spreads over banks; the rate difference is absorbed by
    /// returning a fraction of the GPU's own peak.
    pub fn preset_for_gpu(gpu: &GpuConfig) -> Result<HbmPreset, PresetError> {
        let mut p = HbmPreset::builtin(DEFAULT_PRESET)?;
        let per_stack = p.peak_gbps() / f64::from(p.organisation.stacks.max(1));
        let ratio = (gpu.hbm_bytes_per_ns / per_stack).max(1.0);
        let stacks = 1u32 << (ratio.log2().round().clamp(0.0, 8.0) as u32);
        p.organisation.stacks = stacks;
        p.name = format!("{DEFAULT_PRESET}x{stacks}");
        p.check()?;
        Ok(p)
    }

    /// Turns the GPU-side channel hash on (the default) or off. A GPU's memory fabric
    /// selects the channel from a hash of the address (AMD's channel swizzle), so a
    /// power-of-two leading dimension does not send a whole panel to one channel; the DRAM
    /// model's mapping is a plain bit order, so the port applies the hash before a request
    /// enters the controllers: the pseudo-channel index is XORed with a fold of the row,
    /// bank and upper column bits (a bijection for every row, so nothing aliases; the
    /// column's lowest bit is left out so a 64-B request stays one row's column pair).
    #[must_use]
    pub fn with_channel_hash(mut self, on: bool) -> Self {
        self.channel_hash = on;
        self.cache.clear();
        self
    }

    /// The simulated device.
    pub fn preset(&self) -> &HbmPreset {
        &self.preset
    }

    /// Requests in one measurement window.
    pub fn requests_per_window(&self) -> usize {
        self.requests_per_window
    }

    /// Windows simulated so far (one per distinct mix).
    pub fn windows_simulated(&self) -> u64 {
        self.windows_simulated
    }

    /// Requests simulated so far.
    pub fn requests_simulated(&self) -> u64 {
        self.requests_simulated
    }

    /// The fractions of peak measured so far, one per mix, ascending.
    pub fn measured_fractions(&self) -> Vec<f64> {
        let mut f: Vec<f64> = self.cache.values().copied().collect();
        f.sort_by(f64::total_cmp);
        f
    }

    /// The window for `streams` with this port's line and window size.
    pub fn window(&self, gpu: &GpuConfig, streams: &[StreamDemand]) -> Vec<PortAccess> {
        window_accesses(streams, gpu.line_bytes, self.requests_per_window)
    }

    /// The device address of a GPU address: wrapped into the device, then channel-hashed
    /// if the hash is on.
    fn device_address(&self, addr: u64) -> u64 {
        let addr = addr % self.preset.capacity_bytes().max(1);
        if !self.channel_hash {
            return addr;
        }
        let d = self.mapping.decode(addr);
        let o = &self.preset.organisation;
        let pcs = u64::from(self.preset.pseudo_channels().max(1));
        let bits = pcs.trailing_zeros();
        if bits == 0 {
            return addr;
        }
        let mut rest = (u64::from(d.row) << 24)
            | (u64::from(d.bank) << 16)
            | (u64::from(d.bank_group) << 8)
            | u64::from(d.col >> 1);
        let mut fold = 0u64;
        while rest > 0 {
            fold ^= rest & (pcs - 1);
            rest >>= bits;
        }
        let index = (self.mapping.pseudo_channel_index(&d) as u64) ^ fold;
        let per_stack = u64::from(o.channels_per_stack * o.pseudo_channels_per_channel).max(1);
        let pc_per_channel = u64::from(o.pseudo_channels_per_channel).max(1);
        let hashed = DramAddr {
            stack: (index / per_stack) as u32,
            channel: ((index % per_stack) / pc_per_channel) as u32,
            pc: (index % pc_per_channel) as u32,
            ..d
        };
        let in_column = addr % self.mapping.column_bytes().max(1);
        self.mapping.encode(&hashed).map_or(addr, |a| a + in_column)
    }

    /// Runs the window for `streams` through a fresh memory system (uncached).
    ///
    /// The GPU's LLC keeps a miss queue per memory channel, so a full channel does not
    /// hold up requests to the others; [`MemorySystem::run`] admits one stream in order
    /// (a trace replay), where one full queue would stall everything behind it. So the
    /// window is handed over round-robin across pseudo-channels, each channel's requests
    /// in their original order: a channel that gets more than its share (camping) still
    /// finishes last and sets the window's time, but does not stall the rest meanwhile.
    pub fn measure(&self, gpu: &GpuConfig, streams: &[StreamDemand]) -> WindowMeasurement {
        let accesses = self.window(gpu, streams);
        let channels = self.preset.pseudo_channels().max(1) as usize;
        let mut per_channel: Vec<std::collections::VecDeque<PortAccess>> =
            vec![std::collections::VecDeque::new(); channels];
        for a in &accesses {
            let addr = self.device_address(a.addr);
            let pc = self
                .mapping
                .pseudo_channel_index(&self.mapping.decode(addr));
            if let Some(q) = per_channel.get_mut(pc % channels) {
                q.push_back(PortAccess { addr, ..*a });
            }
        }
        let mut ordered = Vec::with_capacity(accesses.len());
        while ordered.len() < accesses.len() {
            for q in &mut per_channel {
                if let Some(a) = q.pop_front() {
                    ordered.push(a);
                }
            }
        }
        let mut system =
            MemorySystem::new(&self.preset, self.mapping.clone(), self.controller.clone());
        let report = system.run(ordered.iter().map(|a| controller_request(a, 0)), |_| {});
        WindowMeasurement {
            requests: report.requests,
            fraction_of_peak: if report.peak_gbps > 0.0 {
                report.bandwidth_gbps / report.peak_gbps
            } else {
                0.0
            },
            row_hits: report.row_hits,
            row_misses: report.row_misses,
            row_conflicts: report.row_conflicts,
        }
    }
}

impl MemoryPort for DramPort {
    fn hbm_capacity(
        &mut self,
        gpu: &GpuConfig,
        _cal: &Calibration,
        streams: &[StreamDemand],
    ) -> f64 {
        let key = mix_key(streams);
        if key.is_empty() {
            // No GEMM traffic: nothing to measure, and the capacity binds nobody.
            return gpu.hbm_bytes_per_ns;
        }
        let fraction = match self.cache.get(&key) {
            Some(&f) => f,
            None => {
                let m = self.measure(gpu, streams);
                self.windows_simulated += 1;
                self.requests_simulated += m.requests;
                // A mix whose window came out empty (every cohort's share rounded to
                // nothing) moved no bytes: nothing was measured to limit it.
                let fraction = if m.requests == 0 {
                    1.0
                } else {
                    m.fraction_of_peak
                };
                self.cache.insert(key, fraction);
                fraction
            }
        };
        fraction * gpu.hbm_bytes_per_ns
    }
}
