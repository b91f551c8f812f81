//! How the rates of a resident set are shared, as pure functions of their costs: max-min
//! water filling of a capacity, the share of its full rate a latency-bound workgroup can
//! use, and its latency floor under the loaded-latency option. `GpuSim::solve_rates`
//! composes them.

use super::gemm::{Calibration, KernelCost, LoadedLatency};

/// The fraction of its full main-loop rate (its `cu_demand` of a CU to itself) a
/// workgroup can use given memory latency: 1 when latency does not bind.
pub(super) fn latency_fraction(cost: &KernelCost, floor_ns: f64) -> f64 {
    if floor_ns <= 0.0 || cost.wg_flops <= 0.0 || cost.wg_flops_per_ns <= 0.0 {
        return 1.0;
    }
    let full = cost.wg_flops_per_ns / cost.wg_flops;
    (1.0 / floor_ns / full).min(1.0)
}

/// Solves of the loaded-latency fixed point per rate update (see `GpuSim::solve_rates`).
pub(super) const LOADED_LATENCY_PASSES: usize = 4;

/// A workgroup's main-loop latency floor under the loaded-latency option: its loads wait
/// the LLC-hit latency for the share of its LLC bytes the LLC serves and the HBM latency
/// plus the queueing delay `queue_ns` for the share that comes from HBM (what
/// `hbm_bytes` charges at this residency and LLC miss fraction), replacing the one
/// fixed latency of `wg_latency_floor_ns`.
pub(super) fn loaded_floor(
    cost: &KernelCost,
    resident: f64,
    miss: f64,
    cal: &Calibration,
    ll: LoadedLatency,
    queue_ns: f64,
) -> f64 {
    if cost.wg_latency_waits <= 0.0 {
        return cost.wg_latency_floor_ns;
    }
    let loads = (cost.wg_llc_bytes - cost.wg_out_bytes).max(0.0);
    let from_hbm = (cost.hbm_bytes(resident.max(1.0), miss) - cost.wg_out_bytes).max(0.0);
    let hbm_share = if loads > 0.0 {
        (from_hbm / loads).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let latency =
        (1.0 - hbm_share) * ll.llc_hit_latency_ns + hbm_share * (cal.memory_latency_ns + queue_ns);
    (cost.wg_latency_floor_ns + cost.wg_latency_waits * (latency - cal.memory_latency_ns)).max(0.0)
}

/// Max-min fair level: per-workgroup bandwidth `lambda` such that workgroups wanting
/// less get what they want and the rest get `lambda`, using up `capacity`. `None` when
/// everyone's demand fits.
pub(super) fn water_level(
    counts: &[f64],
    rates: &[f64],
    bytes: &[f64],
    capacity: f64,
) -> Option<f64> {
    let mut d: Vec<(f64, f64)> = counts
        .iter()
        .zip(rates.iter().zip(bytes))
        .map(|(&n, (&r, &b))| (r * b, n))
        .collect();
    let total: f64 = d.iter().map(|(b, n)| b * n).sum();
    if total <= capacity {
        return None;
    }
    d.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cap = capacity;
    let mut remaining: f64 = d.iter().map(|x| x.1).sum();
    for (b, n) in d {
        if remaining <= 0.0 {
            break;
        }
        if b * remaining <= cap {
            cap -= b * n;
            remaining -= n;
        } else {
            return Some(cap / remaining);
        }
    }
    // Every demand was met: `total` exceeded `capacity` only by rounding (identical
    // demands summed in another order). No level, rather than the rounding residue as
    // one (which stalled every workgroup: 16 identical kernels at saturation ran for
    // 1e17 ns).
    None
}
