//! The producer GEMM at workgroup and request level: what one workgroup computes, reads
//! from DRAM and stores, on the GPU of Table 8.1.
//!
//! Compute time and LLC filtering come from the chapter-7 GEMM model
//! ([`crate::gpu::gemm`]): the same efficiency curve and panel/reuse accounting, so the
//! T3 GEMM is not a second calibration. What T3 adds is where the outputs go: cached
//! plain stores (the baseline; the output tiles of a wave of resident workgroups occupy
//! LLC space the input panels then lack) or uncached near-memory updates (T3; the LLC is
//! all inputs' — dissertation 8.5's "LLC bypass helps input caching").

use crate::gpu::catalog::CatalogKernel;
use crate::gpu::config::GpuConfig;
use crate::gpu::gemm::{kernel_cost, Calibration, GemmShape, KernelCost, SliceKLoop};
use nmcp_isa::gemm_ext::GemmDataType;

/// Macro tile of the producer kernel (rows, columns of the output).
pub const TILE: (u16, u16) = (128, 128);
/// Wavefronts per workgroup (256 threads).
pub const WFS_PER_WG: u8 = 4;
/// Main-loop phases a workgroup's reads and compute are split into when loads are not
/// modelled per iteration ([`ProducerMemory::per_iteration_loads`] off): each phase's
/// reads must return before its compute can finish, so a quarter of the K loop's loads
/// are in flight ahead of the compute.
pub const COARSE_PHASES: u32 = 4;

/// How the producer's memory behaviour is modelled (each a row of
/// `docs/calibration.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProducerMemory {
    /// One phase per main-loop iteration of the kernel (`K / depth_u`, plus the tail
    /// loop): the kernel prefetches one iteration ahead (`producer_kernel`: depth 16,
    /// prefetch on), so an iteration's DRAM misses must return within one iteration's
    /// compute or the workgroup stalls. Off: [`COARSE_PHASES`] phases (a quarter of the
    /// loop's loads in flight, which hides any DRAM latency the communication adds).
    pub per_iteration_loads: bool,
    /// DRAM addresses of the panel reads follow the operands' layout in memory (forward
    /// sub-layers read the weights contiguous along K, backward ones along M: see
    /// [`OperandLayout`]). Off: each panel is read as one contiguous stream.
    pub operand_layout: bool,
}

impl Default for ProducerMemory {
    fn default() -> Self {
        Self {
            per_iteration_loads: true,
            operand_layout: true,
        }
    }
}

/// Which way the producer's A operand (M x K, the weights) is contiguous in memory. The
/// activations (B, K x N) are contiguous along K in both passes (stored tokens x
/// features).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperandLayout {
    /// Forward (OP, FC-2): `y = x W^T` with `W` stored out x in, so A's rows are
    /// contiguous along K (BLAS `TN`). An iteration of a 128-row tile reads 128 runs of
    /// `depth_u` elements, one per row, `K` elements apart.
    AlongK,
    /// Backward activation gradient (FC-1, IP): `dx = dy W` with `W` stored out x in, so
    /// A is contiguous along M (BLAS `NN`). An iteration reads `depth_u` runs of the
    /// tile's 128 rows.
    AlongM,
}

/// One GEMM's per-workgroup figures on one GPU.
#[derive(Debug, Clone, Copy)]
pub struct ProducerModel {
    /// The chapter-7 cost of the kernel.
    pub cost: KernelCost,
    /// Workgroups resident at once (CUs x occupancy).
    pub resident: u64,
    /// Compute time of one main-loop phase, ns (workgroups sharing a CU share its rate).
    pub phase_ns: f64,
    /// DRAM read bytes per workgroup (compulsory + re-fetches of evicted panels).
    pub read_bytes_per_wg: f64,
    /// Fraction of panel re-fetches that miss in the LLC.
    pub miss: f64,
    /// LLC bytes the input panels can use.
    pub llc_for_inputs: f64,
    /// Main-loop phases per workgroup (see [`ProducerMemory::per_iteration_loads`]).
    pub phases: u32,
    /// K elements one phase covers (the kernel's `depth_u` per iteration).
    pub k_per_phase: u32,
    /// The reduction dimension.
    pub k: u32,
    /// The output's rows (A's M).
    pub m: u32,
    /// How A is laid out, when the panel addresses follow the layout.
    pub layout: Option<OperandLayout>,
}

/// The producer kernel: a `tile` (128 x 128 unless the output is too small to give
/// every GPU a chunk), 256 threads, depth 16, prefetching, padded.
pub fn producer_kernel(tile: (u16, u16)) -> CatalogKernel {
    CatalogKernel {
        index: u32::MAX,
        mt0: tile.0,
        mt1: tile.1,
        depth_u: 16,
        threads: 64 * u16::from(WFS_PER_WG),
        split_u: 1,
        prefetch: true,
        lds_pad: true,
        stagger_mapping: 0,
        stages: 0,
        split_atomic: false,
    }
}

impl ProducerModel {
    /// The model of an `m x n x k` GEMM on `gpu` using `cus` CUs, with outputs cached in
    /// the LLC (`cached_outputs`) or bypassing it, A laid out as `layout`, memory
    /// behaviour modelled as `mem` says.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &GpuConfig,
        tile: (u16, u16),
        m: u32,
        n: u32,
        k: u32,
        dtype: GemmDataType,
        cus: u32,
        cached_outputs: bool,
        layout: OperandLayout,
        mem: ProducerMemory,
    ) -> Option<Self> {
        let cal = Calibration::default();
        // The chapter-7 model is column-major: A contiguous along K is A transposed.
        let trans_a = mem.operand_layout && layout == OperandLayout::AlongK;
        let shape = GemmShape::new(m, n, k, trans_a, false, dtype);
        let kernel = producer_kernel(tile);
        let depth = u32::from(kernel.depth_u);
        let phases = if mem.per_iteration_loads {
            let l = SliceKLoop::critical(k, depth, 1);
            (l.iterations + u64::from(l.tail > 0)).clamp(1, u64::from(u32::MAX)) as u32
        } else {
            COARSE_PHASES
        };
        let cost = kernel_cost(gpu, &cal, &shape, &kernel)?;
        let cus = cus.max(1);
        let resident = (u64::from(cus) * u64::from(cost.occupancy)).min(cost.workgroups.max(1));
        // Residents of a CU share its matrix rate.
        let per_cu = (resident as f64 / f64::from(cus)).max(1.0);
        let share = (1.0 / (per_cu * cost.cu_demand)).min(1.0);
        let main_ns = cost.wg_flops / (cost.wg_flops_per_ns * share);
        let phase_ns = (cost.wg_fixed_ns + main_ns) / f64::from(phases);
        // LLC: output tiles of one wave of residents occupy it when outputs are cached
        // (at most half of it: the inputs' reuse keeps the rest hot).
        let llc = gpu.llc_bytes as f64 * cal.llc_reuse;
        let out_share = if cached_outputs {
            (resident as f64 * cost.wg_out_bytes).min(llc / 2.0)
        } else {
            0.0
        };
        let llc_for_inputs = llc - out_share;
        let footprint = cost.footprint(resident as f64);
        let miss = if footprint <= 0.0 {
            0.0
        } else {
            ((footprint - llc_for_inputs) / footprint).clamp(0.0, 1.0)
        };
        let read_bytes_per_wg = cost.hbm_bytes(resident as f64, miss) - cost.wg_out_bytes;
        Some(Self {
            cost,
            resident,
            phase_ns,
            read_bytes_per_wg: read_bytes_per_wg.max(0.0),
            miss,
            llc_for_inputs,
            phases,
            k_per_phase: if mem.per_iteration_loads {
                depth
            } else {
                k.div_ceil(COARSE_PHASES)
            },
            k,
            m,
            layout: mem.operand_layout.then_some(layout),
        })
    }

    /// Time the GEMM would take with DRAM never in the way: waves of residents.
    pub fn compute_bound_ns(&self) -> f64 {
        let waves = (self.cost.workgroups as f64 / self.resident as f64).ceil();
        waves * self.phase_ns * f64::from(self.phases)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bypassing_the_llc_leaves_more_of_it_to_inputs() {
        let gpu = GpuConfig::t3_table_8_1();
        let (fwd, mem) = (OperandLayout::AlongK, ProducerMemory::default());
        let cached = ProducerModel::new(
            &gpu,
            TILE,
            4256,
            8192,
            2128,
            GemmDataType::F16,
            80,
            true,
            fwd,
            mem,
        )
        .unwrap();
        let bypass = ProducerModel::new(
            &gpu,
            TILE,
            4256,
            8192,
            2128,
            GemmDataType::F16,
            80,
            false,
            fwd,
            mem,
        )
        .unwrap();
        assert!(bypass.llc_for_inputs > cached.llc_for_inputs);
        assert!(bypass.read_bytes_per_wg <= cached.read_bytes_per_wg);
        assert!(cached.miss > 0.0, "T-NLG FC-2's panels exceed the LLC");
        // Compute-bound time is within the GPU's peak: 2MNK / peak is a lower bound.
        let peak = gpu.peak_flops_per_ns(GemmDataType::F16);
        let ideal = 2.0 * 4256.0 * 8192.0 * 2128.0 / peak;
        assert!(cached.compute_bound_ns() > ideal);
    }
}
