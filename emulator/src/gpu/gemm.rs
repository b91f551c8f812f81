//! What one GEMM workgroup costs: FLOPs at an efficiency, bytes requested from the LLC,
//! compulsory and reuse traffic, output writes, and the CU share it can use alone.
//!
//! The calibration of the whole model lives in [`Calibration`]: one efficiency curve (the
//! fraction of a CU's matrix peak a workgroup's main loop reaches, as a function of its
//! tile, depth, prefetch and padding) and one LLC-reuse parameter. They were set once
//! (see `docs/decisions/gemm.md`) and are not tuned per result.

use super::catalog::CatalogKernel;
use super::config::GpuConfig;
use nmcp_isa::gemm_ext::{grid_workgroups, occupancy, CuResources, GemmDataType, KernelMeta};
use serde::{Deserialize, Serialize};

/// The model's calibration: one efficiency curve and one LLC-reuse parameter.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Efficiency curve: the best fraction of matrix peak a main loop reaches (issue
    /// slots spent on LDS reads, address arithmetic and waits never reach zero).
    pub peak_efficiency: f64,
    /// Efficiency curve: tile intensity `MT0*MT1/(MT0+MT1)` (FLOPs per element moved
    /// into LDS, halved) at which the main loop reaches half its peak. Small tiles move
    /// more data per FLOP through LDS and registers.
    pub half_intensity: f64,
    /// Efficiency curve: loop overhead expressed in K elements per iteration; a loop of
    /// depth U runs at `U / (U + loop_overhead_u)`.
    pub loop_overhead_u: f64,
    /// Efficiency curve: factor when global loads are not hidden (no prefetch and only
    /// one resident workgroup per CU to switch to). 1 since `memory_latency_ns` charges
    /// the exposed loads as a mechanism (it was 0.85, a stand-in for it, before cache
    /// version 4); a value below 1 with latency on would count them twice.
    pub exposed_load_factor: f64,
    /// Efficiency curve: factor for LDS bank conflicts when rows are not padded.
    pub bank_conflict_factor: f64,
    /// LLC reuse: how many times its capacity the LLC can serve as panel working set.
    /// Workgroups of a wave walk K roughly in step, so only a window of each panel must
    /// be live for reuse; reuse fails when the resident panels exceed
    /// `llc_bytes * llc_reuse`.
    pub llc_reuse: f64,
    /// Per-CU L1 bandwidth, bytes per cycle. Every panel byte a workgroup loads from the
    /// LLC passes through its CU's vector L1 on the way to LDS (CDNA: 64 B/clk per CU),
    /// so all residents of a CU, of whatever kernel, share it.
    pub l1_bytes_per_cycle: f64,
    /// HBM row-buffer locality: time of an access that misses the open row relative to a
    /// row hit, at full load. From the project's HBM2 model (`nmcp mem`): streaming
    /// reaches 99.99 % of peak, uniformly random 64 B accesses 82.3 %, so 99.99 / 82.3.
    pub hbm_row_miss_cost: f64,
    /// Banks per bank group of the HBM. With the `stream` address mapping a kernel's
    /// current accesses use one bank index in every bank group; kernels streaming
    /// unrelated arrays pick bank indices independently, so with `s` of them a kernel
    /// keeps its row open only if none of the other `s - 1` picked its bank:
    /// hit rate `(1 - 1/banks)^(s-1)`.
    pub hbm_banks_per_group: f64,
    /// Workgroup dispatcher: waves the GPU can launch per cycle (one per shader engine
    /// per cycle; MI100 has 4 shader engines). Workgroups of all kernels queue for it.
    pub waves_launched_per_cycle: f64,
    /// Memory latency of a main-loop iteration's global loads, ns (0 = off). Little's
    /// law per workgroup: with prefetch (a second LDS buffer) the next iteration's tile
    /// is always in flight while this one computes, so an iteration takes at least one
    /// latency; without it the loads are issued, waited for, then computed on, so an
    /// iteration takes the latency plus its compute. A workgroup alone on its CU is then
    /// latency-bound when its iteration computes faster than the latency; co-resident
    /// workgroups (of its kernel or of concurrent ones) use the CU while it waits.
    /// Co-resident workgroups walk K in step, so a panel line another workgroup already
    /// requested is an in-flight miss for the late-comers too: one latency, the HBM one.
    pub memory_latency_ns: f64,
    /// LLC channel camping (`gpu::llc_channel`): whether copies of one GEMM with one
    /// kernel (the same tiling) walk K in phase with each other and so camp on the same
    /// channels under one cap (`true`), or at independent phases like different kernels,
    /// each under its own cap (`false`, the default). Copies dispatched a CP dispatch
    /// (~2 us) apart start about an iteration (~2.5 us alone) apart, so 16 copies spread
    /// over several 256-byte clicks; in phase is the bound the other way (measured in
    /// `docs/decisions/gemm.md`, "In-phase bound").
    #[serde(default)]
    pub llc_copies_in_phase: bool,
    /// Load-dependent memory latency (`None`: every main-loop load waits
    /// `memory_latency_ns`, whatever the load and wherever the data comes from). With it,
    /// a workgroup's loads wait the LLC-hit latency for the share of its panel bytes the
    /// LLC serves and `memory_latency_ns` plus the HBM's queueing delay at its current
    /// utilisation ([`super::loaded_latency::LoadedLatencyCurve`], measured with the
    /// project's DRAM model) for the share that misses. Left out of the serialised form
    /// when off, so existing cache keys stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded_latency: Option<LoadedLatency>,
    /// Launch every GEMM kernel as a persistent grid ([`KernelCost::persistent`]): how
    /// a vendor library (cuBLAS on Hopper) launches, where the model's own kernel stands
    /// for the library's (`nmcp goldyloc validate`'s cuBLAS rows). Off by default and
    /// left out of the serialised form when off, so existing cache keys stay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub persistent_grid: bool,
    /// Rows of one warpgroup matrix instruction (`None`: the operands leave shared memory
    /// once per tile). Hopper's `wgmma.mma_async` is `m64nNk16` (N = 8..256, PTX ISA) and
    /// reads both operands from shared memory for every instruction (Triton's MMAv3
    /// lowering puts A and B there), so the operand bytes per FLOP a main loop moves
    /// through shared memory are those of a `64 x N` instruction, not of the tile: a
    /// 128 x 64 tile on one warpgroup issues two `m64n64` instructions that each re-read
    /// B, a 64 x 128 tile one `m64n128`. Applies to kernels whose threads are whole
    /// warpgroups (4 warps); the rest keep the tile's intensity. Left out of the
    /// serialised form when off, so existing cache keys stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warpgroup_mma_rows: Option<u32>,
}

/// The load-dependent latency option of [`Calibration::loaded_latency`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadedLatency {
    /// Load-to-use latency of a global load that hits the LLC, ns.
    pub llc_hit_latency_ns: f64,
}

impl LoadedLatency {
    /// LLC-hit latency as a fraction of the unloaded HBM latency in public pointer-chasing
    /// measurements (an L2 hit costs about 40 % of a DRAM access on recent NVIDIA and AMD
    /// GPUs; `docs/calibration.md`), applied to the preset's `memory_latency_ns`.
    pub const LLC_HIT_FRACTION: f64 = 0.4;

    /// The option for a calibration whose unloaded HBM latency is `memory_latency_ns`.
    pub fn for_memory_latency(memory_latency_ns: f64) -> Self {
        Self {
            llc_hit_latency_ns: Self::LLC_HIT_FRACTION * memory_latency_ns,
        }
    }
}

impl Default for Calibration {
    fn default() -> Self {
        Self {
            peak_efficiency: 0.80,
            half_intensity: 12.0,
            loop_overhead_u: 4.0,
            exposed_load_factor: 1.0,
            bank_conflict_factor: 0.92,
            llc_reuse: 1.0,
            l1_bytes_per_cycle: 64.0,
            hbm_row_miss_cost: 99.99 / 82.3,
            hbm_banks_per_group: 4.0,
            waves_launched_per_cycle: 4.0,
            memory_latency_ns: 500.0,
            llc_copies_in_phase: false,
            loaded_latency: None,
            persistent_grid: false,
            warpgroup_mma_rows: None,
        }
    }
}

impl Calibration {
    /// The main-loop efficiency of a kernel at a given occupancy.
    pub fn efficiency(&self, k: &CatalogKernel, occupancy: u32) -> f64 {
        let (t0, t1) = match self
            .warpgroup_mma_rows
            .and_then(|m| warpgroup_instruction(k, m))
        {
            Some((m, n)) => (f64::from(m), f64::from(n)),
            None => (f64::from(k.mt0), f64::from(k.mt1)),
        };
        let intensity = t0 * t1 / (t0 + t1);
        let u = f64::from(k.depth_u);
        let mut e = self.peak_efficiency * intensity / (intensity + self.half_intensity) * u
            / (u + self.loop_overhead_u);
        if !k.prefetch && occupancy < 2 {
            e *= self.exposed_load_factor;
        }
        if !k.lds_pad {
            e *= self.bank_conflict_factor;
        }
        e
    }

    /// Factor on sustained HBM bandwidth when `streams` kernels fetch from HBM at once
    /// (1 for one stream: the base sustained fraction already holds a lone stream's row
    /// hits). Row hits survive with probability `(1 - 1/banks)^(streams-1)`; a miss costs
    /// `hbm_row_miss_cost` times a hit.
    pub fn hbm_row_factor(&self, streams: usize) -> f64 {
        if streams <= 1 || self.hbm_banks_per_group <= 1.0 {
            return 1.0;
        }
        let keep = 1.0 - 1.0 / self.hbm_banks_per_group;
        let hit = keep.powi(i32::try_from(streams - 1).unwrap_or(i32::MAX));
        1.0 / (hit + (1.0 - hit) * self.hbm_row_miss_cost.max(1.0))
    }
}

/// Threads of one warpgroup (4 warps of 32).
const WARPGROUP_THREADS: u16 = 128;
/// Widest N of one warpgroup matrix instruction (`m64n256k16`).
const WARPGROUP_MAX_N: u32 = 256;

/// The `rows x N` matrix instruction a warpgroup of kernel `k` issues, or `None` when its
/// threads are not whole warpgroups. Warps are laid out as Triton's MMAv3 lowering does
/// (`warpsPerTileV3`): one warpgroup spans 4 x 16 rows, and further warps go along M
/// while the tile has rows for them, then along N; N is the tile's columns per warp
/// column, at most 256.
fn warpgroup_instruction(k: &CatalogKernel, rows: u32) -> Option<(u32, u32)> {
    if rows == 0 || k.threads == 0 || !k.threads.is_multiple_of(WARPGROUP_THREADS) {
        return None;
    }
    let warps = u32::from(k.threads / 32);
    let (mut along_m, mut along_n) = (4u32, 1u32);
    while along_m * along_n < warps {
        if u32::from(k.mt0) > 16 * along_m {
            along_m *= 2;
        } else {
            along_n *= 2;
        }
    }
    let n = (u32::from(k.mt1) / along_n).clamp(1, WARPGROUP_MAX_N);
    Some((rows, n))
}

/// A GEMM problem without its kernel map (shared with the firmware CP and the GEMM
/// extension record; its `Display` is the ch. 7 label).
pub use nmcp_isa::gemm_ext::GemmProblem as GemmShape;

/// Everything the simulator needs about one kernel running one GEMM on one GPU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KernelCost {
    /// Workgroups in the grid.
    pub workgroups: u64,
    /// Resident workgroups per CU.
    pub occupancy: u32,
    /// Fraction of a CU one workgroup can keep busy alone (waves / SIMDs, capped at 1).
    pub cu_demand: f64,
    /// Matrix FLOP per ns one workgroup reaches when it has its `cu_demand` to itself.
    pub wg_flops_per_ns: f64,
    /// FLOPs one workgroup executes (full tiles: edge tiles waste work).
    pub wg_flops: f64,
    /// Bytes one workgroup requests from the LLC (panels in L1 lines, iteration by
    /// iteration, plus output).
    pub wg_llc_bytes: f64,
    /// Panel bytes per workgroup that must come from HBM in any case (the GEMM's inputs
    /// read once, spread over its workgroups).
    pub wg_compulsory_bytes: f64,
    /// Output bytes per workgroup (always written to HBM).
    pub wg_out_bytes: f64,
    /// Tile grid rows, columns and independent slices (batch x split-U).
    pub grid: (u64, u64, u64),
    /// Bytes of one A tile-row panel and one B tile-column panel (in lines).
    pub panel_bytes: (f64, f64),
    /// Fixed time per workgroup (prologue, epilogue), ns.
    pub wg_fixed_ns: f64,
    /// Wavefronts per workgroup (what the dispatcher launches).
    pub waves_per_wg: f64,
    /// Shortest time the main loop can take because of memory latency, ns (0 when
    /// latency is off): `iterations x memory_latency_ns` with prefetch, plus the main
    /// loop's compute alone without it (see [`Calibration::memory_latency_ns`]).
    pub wg_latency_floor_ns: f64,
    /// How many memory latencies `wg_latency_floor_ns` holds (iterations over the loads
    /// in flight, plus nothing for the compute part): the floor at another latency `L`
    /// is `wg_latency_floor_ns + wg_latency_waits x (L - memory_latency_ns)`.
    pub wg_latency_waits: f64,
    /// Time from the last workgroup's end to the kernel's completion, ns: 0, except
    /// for split-U, whose partial tiles a reduction kernel sums into the output after
    /// the main kernel (Tensile's multiple-buffer global split-U): its launch
    /// (`kernel_start_ns`) plus reading every partial in f32 and writing the output, at
    /// the sustained HBM bandwidth of one stream. It cannot start before the last
    /// partial is written, so it never overlaps the main loop.
    pub tail_ns: f64,
    /// LLC bytes one workgroup's atomic output adds cost beyond plain writes (0 unless
    /// the kernel adds split-K partials with atomics on a GPU with an atomic rate,
    /// [`GpuConfig::llc_atomic_byte_cost`]).
    pub wg_llc_atomic_extra_bytes: f64,
    /// Output tiles one workgroup computes: 1, or more for a persistent grid
    /// ([`KernelCost::persistent`]).
    pub tiles_per_wg: f64,
}

/// The K loop of the slice that finishes last, as Tensile's kernels divide K: the main
/// loop runs whole iterations of U elements (`K / U` of them); global split-U hands
/// them out `q = L / split` per slice with the first `L % split` slices taking one more
/// (Tensile's `numIterPerWgRemainder`), and the `K % U` remainder runs in a tail loop in
/// one slice only (the one whose index equals that remainder count). So a slice's work
/// is quantised to iterations: K = 4096 with U = 32 over 6 slices gives 22 iterations
/// (704 elements) to the longest slice, not 4096 / 6 = 683, while U = 16 gives it 688;
/// which U and split a size favours depends on how its K factors. The tail loop is not
/// prefetched (its guarded element loads wait for memory before its MFMAs run), so it
/// exposes one memory latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceKLoop {
    /// Main-loop iterations (U elements each).
    pub iterations: u64,
    /// K elements in the tail loop (0 without one).
    pub tail: u64,
}

impl SliceKLoop {
    /// The slice with the most K work. Where some slices take an extra iteration, one
    /// of those (its `q + 1` iterations outweigh the tail slice's `q` iterations and
    /// fewer than U tail elements); otherwise the tail slice.
    pub fn critical(k: u32, depth_u: u32, split_u: u32) -> Self {
        let u = u64::from(depth_u.max(1));
        let split = u64::from(split_u.max(1));
        let k = u64::from(k);
        let (full, tail) = (k / u, k % u);
        let (q, r) = (full / split, full % split);
        if r > 0 {
            Self {
                iterations: q + 1,
                tail: 0,
            }
        } else {
            Self {
                iterations: q,
                tail,
            }
        }
    }

    /// K elements the slice multiplies.
    pub fn k_elements(&self, depth_u: u32) -> u64 {
        self.iterations * u64::from(depth_u.max(1)) + self.tail
    }
}

/// Fraction of a cache line's bytes a contiguous run of `run` bytes uses, inverted
/// (>= 1): a strided panel with short runs pulls whole lines for part of their data.
fn line_waste(run: f64, line: f64) -> f64 {
    if run <= 0.0 {
        return 1.0;
    }
    (run / line).ceil() * line / run
}

/// The cost of running `kernel` for `shape` on `gpu`; `None` when the kernel cannot be
/// resident (zero occupancy).
pub fn kernel_cost(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    kernel: &CatalogKernel,
) -> Option<KernelCost> {
    let meta = kernel.meta(shape.dtype);
    cost_of_meta(gpu, cal, shape, kernel, &meta, &gpu.cu_resources())
}

fn cost_of_meta(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    kernel: &CatalogKernel,
    meta: &KernelMeta,
    res: &CuResources,
) -> Option<KernelCost> {
    let occ = occupancy(meta, res);
    if occ == 0 {
        return None;
    }
    let eb = f64::from(shape.dtype.bytes());
    let line = f64::from(gpu.line_bytes);
    let (mt0, mt1) = (f64::from(kernel.mt0), f64::from(kernel.mt1));
    let (m, n, k) = (f64::from(shape.m), f64::from(shape.n), f64::from(shape.k));
    let split = f64::from(kernel.split_u.max(1));
    let tiles_m = u64::from(shape.m).div_ceil(u64::from(kernel.mt0.max(1)));
    let tiles_n = u64::from(shape.n).div_ceil(u64::from(kernel.mt1.max(1)));
    let slices = u64::from(shape.batch.max(1)) * u64::from(kernel.split_u.max(1));
    // The count is the one the CP's features use (tiles_m x tiles_n x slices); the
    // catalog kernel's tiling (not `meta`'s) sets it, as the GPU launches that kernel.
    let workgroups = grid_workgroups(
        shape.m,
        shape.n,
        shape.batch,
        kernel.mt0,
        kernel.mt1,
        kernel.split_u,
    );
    let ks = (k / split).ceil().max(1.0);
    // Rows of a tile that exist (a tile larger than the matrix loads only what is there).
    let rows_a = mt0.min(m);
    let cols_b = mt1.min(n);
    // Column-major storage: A (M x K) is contiguous along M unless transposed, B (K x N)
    // is contiguous along K unless transposed.
    let waste_a = if shape.trans_a {
        line_waste(ks * eb, line)
    } else {
        line_waste(rows_a * eb, line)
    };
    let waste_b = if shape.trans_b {
        line_waste(cols_b * eb, line)
    } else {
        line_waste(ks * eb, line)
    };
    let panel_a = rows_a * ks * eb * waste_a;
    let panel_b = cols_b * ks * eb * waste_b;
    // Split-U writes each slice's partial tile in f32 to its own buffer; the
    // reduction after the kernel (`tail_ns`) reads them and writes the output.
    let out_bytes = if kernel.split_u > 1 {
        rows_a * cols_b * 4.0
    } else {
        rows_a * cols_b * eb
    };
    let tail_ns = if kernel.split_u > 1 {
        let outputs = m * n * f64::from(shape.batch.max(1));
        // Tensile: a reduction kernel reads every f32 partial and writes the output.
        // Triton (atomic): a memset kernel zeroes the f32 output before the main kernel;
        // on one stream it costs the same wherever it sits, so it is charged here.
        let bytes = if kernel.split_atomic {
            outputs * 4.0
        } else {
            outputs * (4.0 * split + eb)
        };
        gpu.kernel_start_ns + bytes / gpu.hbm_sustained().max(f64::MIN_POSITIVE)
    } else {
        0.0
    };
    let wg_panels = panel_a + panel_b;
    // What the workgroup pulls from the LLC into its L1, in L1 lines, iteration by
    // iteration: a panel contiguous along K (A transposed, B not) gives runs of only
    // U elements per row per iteration, and the L1 (16 KB, shared by the CU's
    // residents) does not keep a line until the next iteration needs its other part;
    // a panel contiguous along M (N) gives runs of the tile's rows (columns). So the
    // transposes and U decide how many line bytes feed the same FLOPs (HBM traffic and
    // the LLC footprint above stay in LLC lines over the whole K).
    let l1_line = f64::from(gpu.l1_line_bytes.max(1));
    let u_run = f64::from(kernel.depth_u.max(1)).min(ks) * eb;
    let l1_waste_a = if shape.trans_a {
        line_waste(u_run, l1_line)
    } else {
        line_waste(rows_a * eb, l1_line)
    };
    let l1_waste_b = if shape.trans_b {
        line_waste(cols_b * eb, l1_line)
    } else {
        line_waste(u_run, l1_line)
    };
    let wg_l1_panels = (rows_a * l1_waste_a + cols_b * l1_waste_b) * ks * eb;
    // Every A element is needed by all tile columns and every B element by all tile
    // rows, but fetched from HBM once if reuse works.
    let compulsory_total = (m * waste_a * k + n * waste_b * k) * eb * f64::from(shape.batch);
    let wgs_f = workgroups as f64;
    let compulsory_panels = (compulsory_total / wgs_f).min(wg_panels);
    let waves_per_wg = (f64::from(kernel.threads) / f64::from(gpu.wave_size.max(1)))
        .ceil()
        .max(1.0);
    let cu_demand = (waves_per_wg / f64::from(gpu.simds_per_cu)).min(1.0);
    let eff = cal.efficiency(kernel, occ);
    let wg_flops_per_ns = gpu.cu_flops_per_ns(shape.dtype) * eff * cu_demand;
    // The longest slice's K loop: whole iterations, plus a tail loop for K % U.
    let k_loop = SliceKLoop::critical(
        shape.k,
        u32::from(kernel.depth_u),
        u32::from(kernel.split_u),
    );
    let wg_flops = 2.0 * mt0 * mt1 * (k_loop.k_elements(u32::from(kernel.depth_u)).max(1) as f64);
    // Memory latency (Little's law): one iteration's tile in flight at a time; with
    // prefetch it overlaps the compute, without it the compute waits for it. The tail
    // loop waits for its loads unprefetched: one latency on top (in the fixed time).
    let iterations = k_loop.iterations as f64;
    let latency = cal.memory_latency_ns.max(0.0);
    let tail_loop_ns = if k_loop.tail > 0 { latency } else { 0.0 };
    // A pipeline of `s` stages keeps `s - 1` tiles' loads in flight (Little's law).
    let in_flight = f64::from(kernel.pipeline_stages().saturating_sub(1).max(1));
    let latency_waits = if latency <= 0.0 {
        0.0
    } else if kernel.pipeline_stages() >= 2 {
        iterations / in_flight
    } else {
        iterations
    };
    let latency_floor = if latency <= 0.0 {
        0.0
    } else if kernel.pipeline_stages() >= 2 {
        iterations * latency / in_flight
    } else {
        iterations * latency + wg_flops / wg_flops_per_ns.max(f64::MIN_POSITIVE)
    };
    Some(KernelCost {
        workgroups,
        occupancy: occ,
        cu_demand,
        wg_flops_per_ns,
        wg_flops,
        wg_llc_bytes: wg_l1_panels + out_bytes,
        wg_compulsory_bytes: compulsory_panels,
        wg_out_bytes: out_bytes,
        grid: (tiles_m, tiles_n, slices),
        panel_bytes: (panel_a, panel_b),
        wg_fixed_ns: gpu.wg_fixed_ns + tail_loop_ns,
        waves_per_wg,
        wg_latency_floor_ns: latency_floor,
        wg_latency_waits: latency_waits,
        tail_ns,
        wg_llc_atomic_extra_bytes: if kernel.split_atomic && kernel.split_u > 1 {
            out_bytes * (gpu.llc_atomic_byte_cost() - 1.0)
        } else {
            0.0
        },
        tiles_per_wg: 1.0,
    })
}

impl KernelCost {
    /// This kernel launched as a persistent grid on a GPU with `slots` workgroup slots
    /// (CUs x occupancy): at most `slots` workgroups, each looping over
    /// `ceil(tiles / slots)` output tiles, as vendor libraries launch their GEMMs on
    /// recent GPUs (CUTLASS 3's persistent tile schedulers for sm90, behind cuBLAS):
    /// one prologue per workgroup, and a concurrent kernel finds no free slot until a
    /// workgroup of this one exits. A grid that fits in one wave is unchanged.
    pub fn persistent(mut self, slots: u64) -> Self {
        let slots = slots.max(1);
        if self.workgroups <= slots {
            return self;
        }
        let per = self.workgroups.div_ceil(slots);
        let f = per as f64;
        self.workgroups = self.workgroups.div_ceil(per);
        self.tiles_per_wg *= f;
        self.wg_flops *= f;
        self.wg_llc_bytes *= f;
        self.wg_compulsory_bytes *= f;
        self.wg_out_bytes *= f;
        self.wg_llc_atomic_extra_bytes *= f;
        self.wg_latency_floor_ns *= f;
        self.wg_latency_waits *= f;
        self
    }

    /// Panel bytes that `resident` workgroups of this kernel keep live: workgroups are
    /// dispatched in column-major tile order, so `r` consecutive ones span
    /// `min(r, tiles_m)` tile rows and `ceil(r / tiles_m)` tile columns of a slice.
    pub fn footprint(&self, resident: f64) -> f64 {
        if resident <= 0.0 {
            return 0.0;
        }
        let (tm, tn, slices) = (self.grid.0 as f64, self.grid.1 as f64, self.grid.2 as f64);
        let touched = slices.min(resident);
        let per_slice = (resident / touched).ceil();
        let rows = per_slice.min(tm);
        let cols = (per_slice / tm).ceil().min(tn);
        touched * (rows * self.panel_bytes.0 + cols * self.panel_bytes.1)
    }

    /// Panel bytes per workgroup that are new to the resident set when `resident`
    /// workgroups of this kernel run together: co-resident workgroups of one tile row
    /// (column) walk K roughly in step and share the A (B) panel through the LLC, so
    /// only one of them fetches it.
    pub fn first_touch_bytes(&self, resident: f64) -> f64 {
        if resident <= 0.0 {
            return 0.0;
        }
        let (tm, tn, slices) = (self.grid.0 as f64, self.grid.1 as f64, self.grid.2 as f64);
        let touched = slices.min(resident);
        let per_slice = (resident / touched).ceil().max(1.0);
        let rows = per_slice.min(tm);
        let cols = (per_slice / tm).ceil().min(tn);
        (rows * self.panel_bytes.0 + cols * self.panel_bytes.1) / per_slice
    }

    /// HBM bytes per workgroup with `resident` co-resident workgroups of this kernel and
    /// a probability `miss` that a panel fetched by an earlier wave has been evicted:
    /// compulsory traffic, plus re-fetches of evicted panels, plus the output.
    pub fn hbm_bytes(&self, resident: f64, miss: f64) -> f64 {
        let first =
            (self.first_touch_bytes(resident) * self.tiles_per_wg).max(self.wg_compulsory_bytes);
        self.wg_compulsory_bytes + (first - self.wg_compulsory_bytes) * miss + self.wg_out_bytes
    }

    /// Time one workgroup would take alone on an idle GPU (fixed part plus main loop at
    /// its own CU share, ignoring memory).
    pub fn alone_ns(&self) -> f64 {
        self.wg_fixed_ns + self.wg_flops / self.wg_flops_per_ns
    }
}

/// Resolves a kernel launched with only its metadata (not from the catalog): prefetch
/// is inferred from an LDS size above one staging buffer, padding assumed absent.
pub fn kernel_from_meta(meta: &KernelMeta, dtype: GemmDataType) -> CatalogKernel {
    let slab = (u32::from(meta.macro_tile_0) + u32::from(meta.macro_tile_1))
        * u32::from(meta.depth_u)
        * dtype.bytes();
    CatalogKernel {
        index: u32::MAX,
        mt0: meta.macro_tile_0.max(1),
        mt1: meta.macro_tile_1.max(1),
        depth_u: meta.depth_u.max(1),
        threads: meta.workgroup_size.max(1),
        split_u: meta.split_k.max(1),
        prefetch: meta.lds_bytes >= slab.saturating_mul(2),
        lds_pad: false,
        stagger_mapping: 0,
        stages: 0,
        split_atomic: false,
    }
}

/// Cost for a launch given as metadata (the CP side's view); occupancy from the
/// metadata exactly as the firmware computes it.
pub fn cost_from_meta(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    kernel: &CatalogKernel,
    meta: &KernelMeta,
) -> Option<KernelCost> {
    cost_of_meta(gpu, cal, shape, kernel, meta, &gpu.cu_resources())
}
