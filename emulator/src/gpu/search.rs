//! Finding the best catalog kernel for a GEMM running alone (tuning's step 1 and 2),
//! without simulating every kernel.
//!
//! A kernel's cost gives a lower bound on its simulated time
//! ([`isolated_time_lower_bound`]); kernels are simulated in the order of their bounds,
//! and once a bound exceeds the best time found no later kernel can win. The answer is
//! the exhaustive search's (tests `pruned_search_equals_the_exhaustive_search` and
//! `the_lower_bound_never_exceeds_the_simulated_time`), at about 30 simulations per GEMM
//! instead of one per catalog kernel (2,925): what lets the catalog be Tensile-sized.

use super::catalog::{Catalog, CatalogKernel};
use super::config::GpuConfig;
use super::gemm::{kernel_cost, Calibration, GemmShape};
use super::sim::isolated_time;
use super::Nanos;

/// A lower bound on [`isolated_time`] from the kernel's cost alone, without simulating:
/// the launch's start-up plus the largest of (a) one workgroup's own time (its fixed
/// part and its main loop at its full CU share, or its memory-latency floor if longer:
/// no workgroup runs faster than alone), (b) the grid's FLOPs at every CU's matrix rate
/// for this kernel (residents of a CU share it, so a CU never exceeds it) and (c) the
/// compulsory input and output bytes at the sustained HBM bandwidth of one stream; plus
/// the kernel's tail after its last workgroup (a split-U reduction). `None` where the
/// kernel cannot be resident.
pub fn isolated_time_lower_bound(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    k: &CatalogKernel,
) -> Option<Nanos> {
    let c = kernel_cost(gpu, cal, shape, k)?;
    let main = (c.wg_flops / c.wg_flops_per_ns.max(f64::MIN_POSITIVE)).max(c.wg_latency_floor_ns);
    let one_wg = c.wg_fixed_ns + main;
    let wgs = c.workgroups as f64;
    let cu_rate = if c.cu_demand > 0.0 {
        c.wg_flops_per_ns / c.cu_demand
    } else {
        f64::INFINITY
    };
    let flops = wgs * c.wg_flops / (f64::from(gpu.cus.max(1)) * cu_rate);
    let hbm =
        wgs * (c.wg_compulsory_bytes + c.wg_out_bytes) / gpu.hbm_sustained().max(f64::MIN_POSITIVE);
    Some(gpu.kernel_start_ns + one_wg.max(flops).max(hbm) + c.tail_ns.max(0.0))
}

/// Every catalog kernel whose isolated time on `gpu` is within `band` (a fraction) of
/// the best, fastest first (ties to the lower catalog index).
pub fn ranked_isolated(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
    band: f64,
) -> Vec<(u32, Nanos)> {
    let mut order: Vec<(f64, u32)> = catalog
        .kernels()
        .iter()
        .filter_map(|k| isolated_time_lower_bound(gpu, cal, shape, k).map(|b| (b, k.index)))
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut best = f64::INFINITY;
    let mut found: Vec<(u32, Nanos)> = Vec::new();
    for (bound, i) in order {
        if bound > best * (1.0 + band) {
            break;
        }
        let Some(t) = catalog
            .get(i as usize)
            .and_then(|k| isolated_time(gpu, cal, shape, k))
        else {
            continue;
        };
        best = best.min(t);
        found.push((i, t));
    }
    found.retain(|&(_, t)| t <= best * (1.0 + band));
    found.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    found
}

/// The best catalog kernel for `shape` running alone on `gpu`, with its time (ties to
/// the lower catalog index); `None` if no kernel can be resident.
pub fn best_isolated(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
) -> Option<(u32, Nanos)> {
    ranked_isolated(gpu, cal, catalog, shape, 0.0)
        .first()
        .copied()
}

/// [`best_isolated`] by simulating every kernel: the reference the pruned search is
/// checked against.
pub fn best_isolated_exhaustive(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
) -> Option<(u32, Nanos)> {
    catalog
        .kernels()
        .iter()
        .filter_map(|k| isolated_time(gpu, cal, shape, k).map(|t| (k.index, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
}

/// The best kernel itself (see [`best_isolated`]).
pub fn best_isolated_kernel(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
) -> Option<CatalogKernel> {
    let (i, _) = best_isolated(gpu, cal, catalog, shape)?;
    catalog.get(i as usize).copied()
}
