//! LLC channel camping: how evenly a GEMM's concurrent panel loads spread over the LLC's
//! channels (banks).
//!
//! The LLC is split into channels that each serve [`GpuConfig::llc_channel_interleave_bytes`]
//! consecutive bytes in turn (16 channels of 256 bytes on gfx9, per Tensile's
//! documentation of `StaggerUStride`). A GEMM's resident workgroups walk K in step (the
//! LLC-reuse model's premise), so in one main-loop iteration they all load the same K
//! slab of their panels. When a panel's runs are a multiple of the channel period apart
//! (a leading dimension that is a multiple of 4 KiB / element size: K = 1024 in f32 for a
//! panel contiguous along K), every run of the slab starts in the same channel, and the
//! iteration's loads queue on one or two channels while the others idle. The busiest
//! channel sets the pace: a kernel can draw at most `total / (channels x busiest)` of the
//! LLC's bandwidth ([`llc_channel_efficiency`]), which the simulator applies as a cap per
//! kernel ([`super::sim::GpuSim`]).
//!
//! Tensile's remedy is StaggerU: each workgroup starts its K loop a number of 256-byte
//! "clicks" later, chosen from its tile index, and wraps around;
//! `StaggerU` clicks at most, halved until the loop has room for them. Every catalog kernel
//! carries Tensile's default, [`Stagger::TENSILE_DEFAULT`] (32 clicks of 256 bytes), with
//! the tile row or the tile column choosing the offset (`StaggerUMapping` 0 or 1, the
//! kernel's `stagger_mapping`: Tensile recommends tuning both). What remains is the
//! camping StaggerU cannot remove: few tiles resident along the mapping's dimension, a K
//! loop too short for many clicks, batches and split-U slices whose bases alias. How much that costs depends on the size, the transposes and the
//! tile together, which is what makes tuned winners size-specific (issue 12).
//!
//! Not modelled: StaggerU's price in LLC reuse (the LLC model already counts whole panels
//! as live, not an in-step window), hashing of the channel bits (Tensile's note says
//! power-of-two strides do camp on these GPUs), and camping on the HBM side (the DRAM port
//! hashes channels; see `mem_port`).

use super::config::GpuConfig;
use super::gemm::SliceKLoop;
use super::mem_port::{panels, three_significant_bits, tile_of, GemmTiling, MatrixBases};
use std::cell::RefCell;
use std::collections::HashMap;

/// Tensile's StaggerU: up to `clicks` start offsets of `stride_bytes` each along K, chosen
/// by a workgroup's tile-row index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stagger {
    /// Most distinct start offsets (a power of two; 0 = off).
    pub clicks: u32,
    /// Bytes of K per click (raised to a whole number of `DepthU` iterations).
    pub stride_bytes: u32,
}

impl Stagger {
    /// Tensile's default kernel parameters: `StaggerU` 32, `StaggerUStride` 256,
    /// `StaggerUMapping` 0.
    pub const TENSILE_DEFAULT: Self = Self {
        clicks: 32,
        stride_bytes: 256,
    };
    /// No stagger: every workgroup starts at K = 0.
    pub const OFF: Self = Self {
        clicks: 0,
        stride_bytes: 256,
    };

    /// Iterations per click and distinct starts for a K loop of `iterations` iterations of
    /// `depth_bytes` bytes each: the stride is raised to whole iterations, and the clicks
    /// halved until `starts x iterations per click` fits in the loop (as Tensile's kernels
    /// do at run time).
    pub fn plan(&self, depth_bytes: u64, iterations: u64) -> (u64, u64) {
        let per_click = u64::from(self.stride_bytes)
            .div_ceil(depth_bytes.max(1))
            .max(1);
        let mut starts = u64::from(self.clicks);
        while starts > 1 && starts * per_click > iterations {
            starts >>= 1;
        }
        (per_click, starts.max(1))
    }
}

/// Main-loop iterations sampled per estimate: the channel pattern of one K slab shifts as
/// the loop advances (A and B move by different strides), so a few consecutive slabs are
/// averaged.
const SAMPLED_ITERATIONS: u64 = 4;

/// Fraction of the LLC's bandwidth the first `resident` workgroups of `tiling` can use when
/// they load in step: requested bytes over `channels x` the busiest channel's bytes,
/// summed over [`SAMPLED_ITERATIONS`] consecutive iterations. 1 when channels are not
/// modelled or the loads spread evenly.
pub fn llc_channel_efficiency(
    gpu: &GpuConfig,
    tiling: &GemmTiling,
    resident: u64,
    stagger: Stagger,
) -> f64 {
    let channels = u64::from(gpu.llc_banks);
    let interleave = u64::from(gpu.llc_channel_interleave_bytes);
    if channels <= 1 || interleave == 0 {
        return 1.0;
    }
    let line = u64::from(gpu.l1_line_bytes.max(1));
    let resident = resident.min(tiling.workgroups());
    if resident == 0 {
        return 1.0;
    }
    let depth = u64::from(tiling.depth_u.max(1));
    let eb = u64::from(tiling.element_bytes.max(1));
    // StaggerU's run-time rule counts the workgroup's own main-loop iterations.
    let iterations = SliceKLoop::critical(tiling.k, tiling.depth_u, tiling.split_u)
        .iterations
        .max(1);
    let (per_click, starts) = stagger.plan(depth * eb, iterations);
    // Matrices are aligned far beyond the channel period, so only offsets within a
    // matrix decide the channel.
    let bases = MatrixBases { a: 0, b: 0, c: 0 };
    // Resident workgroups sharing a panel and a start load the same lines: count them.
    let mut a_keys: HashMap<(u64, u64), (u64, u64, u64)> = HashMap::new();
    let mut b_keys: HashMap<(u64, u64, u64), (u64, u64)> = HashMap::new();
    for id in 0..resident {
        let (slice, tr, tc) = tile_of(tiling, id);
        let by = if tiling.stagger_mapping == 1 { tc } else { tr };
        let offset = (by % starts) * per_click;
        a_keys.entry((slice, tr)).or_insert((tc, offset, 0)).2 += 1;
        b_keys.entry((slice, tc, offset)).or_insert((tr, 0)).1 += 1;
    }
    // Histograms are integer sums, so the maps' iteration order does not matter.
    let a_list: Vec<_> = a_keys
        .into_iter()
        .map(|((slice, tr), (tc, offset, n))| (panels(tiling, &bases, slice, tr, tc).0, offset, n))
        .collect();
    let b_list: Vec<_> = b_keys
        .into_iter()
        .map(|((slice, tc, offset), (tr, n))| (panels(tiling, &bases, slice, tr, tc).1, offset, n))
        .collect();
    let mut lines = Vec::new();
    let mut hist = vec![0u64; channels as usize];
    let (mut requested, mut paced) = (0u64, 0u64);
    for j in 0..SAMPLED_ITERATIONS.min(iterations) {
        hist.iter_mut().for_each(|h| *h = 0);
        for (panel, offset, n) in a_list.iter().chain(b_list.iter()) {
            lines.clear();
            panel.step_lines((j + offset) % iterations, depth, line, &mut lines);
            for &l in &lines {
                if let Some(h) = hist.get_mut(((l / interleave) % channels) as usize) {
                    *h += n * line;
                }
            }
        }
        requested += hist.iter().sum::<u64>();
        paced += channels * hist.iter().copied().max().unwrap_or(0);
    }
    if paced == 0 {
        return 1.0;
    }
    requested as f64 / paced as f64
}

type EfficiencyKey = (GemmTiling, u64, u32, u32, u32, Stagger);

thread_local! {
    static CACHE: RefCell<HashMap<EfficiencyKey, f64>> = RefCell::new(HashMap::new());
}

/// Entries kept per thread before the cache starts over.
const CACHE_LIMIT: usize = 1 << 16;

/// [`llc_channel_efficiency`] with `resident` rounded down to three significant bits (the
/// simulator asks at every re-solve; the answer changes little between nearby counts),
/// memoised per thread.
pub fn llc_channel_efficiency_cached(
    gpu: &GpuConfig,
    tiling: &GemmTiling,
    resident: u64,
    stagger: Stagger,
) -> f64 {
    let resident = three_significant_bits(resident.min(tiling.workgroups()));
    let key = (
        *tiling,
        resident,
        gpu.llc_banks,
        gpu.llc_channel_interleave_bytes,
        gpu.l1_line_bytes,
        stagger,
    );
    if let Some(e) = CACHE.with(|c| c.borrow().get(&key).copied()) {
        return e;
    }
    let e = llc_channel_efficiency(gpu, tiling, resident, stagger);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(key, e);
    });
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::catalog::CatalogKernel;
    use crate::gpu::gemm::GemmShape;
    use nmcp_isa::gemm_ext::GemmDataType;

    fn tiling(m: u32, n: u32, k: u32, ta: bool, tb: bool, mt: (u16, u16), u: u16) -> GemmTiling {
        let shape = GemmShape::new(m, n, k, ta, tb, GemmDataType::F32);
        let kernel = CatalogKernel {
            index: 0,
            mt0: mt.0,
            mt1: mt.1,
            depth_u: u,
            threads: 256,
            split_u: 1,
            prefetch: true,
            lds_pad: true,
            stagger_mapping: 0,
            stages: 0,
            split_atomic: false,
        };
        GemmTiling::new(&shape, &kernel)
    }

    fn efficiency(t: &GemmTiling, stagger: Stagger) -> f64 {
        llc_channel_efficiency(&GpuConfig::mi100(), t, 240, stagger)
    }

    #[test]
    fn stagger_plan_follows_tensile_run_time_rule() {
        // U 16 in f32: 64-byte slabs, so a 256-byte click is 4 iterations.
        assert_eq!(Stagger::TENSILE_DEFAULT.plan(64, 256), (4, 32));
        // A 64-iteration loop has room for 16 starts only; a 3-iteration one for none.
        assert_eq!(Stagger::TENSILE_DEFAULT.plan(64, 64), (4, 16));
        assert_eq!(Stagger::TENSILE_DEFAULT.plan(64, 3), (4, 1));
        // Slabs wider than the stride: one iteration per click.
        assert_eq!(Stagger::TENSILE_DEFAULT.plan(512, 40), (1, 32));
        assert_eq!(Stagger::OFF.plan(64, 256), (4, 1));
    }

    #[test]
    fn power_of_two_k_camps_without_stagger_and_spreads_with_it() {
        // B contiguous along K = 4096 f32 (16 KiB): every column's slab starts in the
        // same channel; A's columns spread over the tile rows.
        let t = tiling(4096, 4096, 4096, false, false, (128, 128), 16);
        let off = efficiency(&t, Stagger::OFF);
        let on = efficiency(&t, Stagger::TENSILE_DEFAULT);
        assert!(off < 0.2, "unstaggered {off}");
        assert!(on > 0.95, "staggered {on}");
        // A transposed too: both panels camp.
        let tn = tiling(4096, 4096, 4096, true, false, (128, 128), 16);
        assert!(efficiency(&tn, Stagger::OFF) < off);
    }

    #[test]
    fn a_leading_dimension_off_the_period_spreads_without_stagger() {
        let t = tiling(4000, 4000, 4000, false, false, (128, 128), 16);
        assert!(efficiency(&t, Stagger::OFF) > 0.95);
    }

    #[test]
    fn the_mapping_must_follow_a_dimension_with_several_tiles() {
        // M = 35: one tile row, so staggering by the row changes nothing; by the column
        // it spreads B's K-contiguous slabs (K = 2560 f32: columns 2 KiB apart mod 4 KiB).
        let by_row = tiling(35, 8457, 2560, true, false, (64, 64), 16);
        let by_column = GemmTiling {
            stagger_mapping: 1,
            ..by_row
        };
        let off = efficiency(&by_row, Stagger::OFF);
        let row = efficiency(&by_row, Stagger::TENSILE_DEFAULT);
        let column = efficiency(&by_column, Stagger::TENSILE_DEFAULT);
        assert!((row - off).abs() < 1e-12, "row {row} off {off}");
        assert!(off < 0.2, "{off}");
        assert!(column > 2.0 * row, "column {column} row {row}");
    }

    #[test]
    fn no_channels_no_effect() {
        let mut gpu = GpuConfig::mi100();
        gpu.llc_channel_interleave_bytes = 0;
        let t = tiling(4096, 4096, 4096, false, false, (128, 128), 16);
        assert_eq!(llc_channel_efficiency(&gpu, &t, 240, Stagger::OFF), 1.0);
        let e = llc_channel_efficiency_cached(&GpuConfig::mi100(), &t, 240, Stagger::OFF);
        assert!(e < 0.2 && e > 0.0);
    }
}
