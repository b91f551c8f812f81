//! The rate solve of [`GpuSim`]: CU shares (water filling per CU group under memory
//! latency), the LLC working set's misses, per-CU L1 and LLC-channel caps, and the HBM
//! and LLC bandwidth shares, with the loaded-latency fixed point around them.

use super::super::gemm::LoadedLatency;
use super::super::llc_channel::{llc_channel_efficiency_cached, Stagger};
use super::super::loaded_latency::LoadedLatencyCurve;
use super::super::mem_port::{GemmTiling, MemoryPort, StreamDemand};
use super::super::rate_share::{
    latency_fraction, loaded_floor, water_level, LOADED_LATENCY_PASSES,
};
use super::GpuSim;
use std::collections::BTreeMap;

impl<P: MemoryPort> GpuSim<P> {
    /// Re-solves CU shares, LLC misses and bandwidth shares for the current residents.
    ///
    /// With the loaded-latency option the main-loop latency floors depend on the HBM's
    /// utilisation, which depends on the rates: a short fixed-point iteration (start
    /// unloaded, solve, take the utilisation the solution puts on HBM, average it with the
    /// previous guess, solve again) until the utilisation moves by less than 1 % or
    /// [`LOADED_LATENCY_PASSES`] solves were made. Deterministic: no state carries over
    /// between calls.
    pub(super) fn solve_rates(&mut self) {
        let Some(ll) = self.cal.loaded_latency else {
            let floors: Vec<f64> = self
                .kernels
                .iter()
                .map(|k| k.cost.wg_latency_floor_ns)
                .collect();
            self.solve_rates_at(&floors);
            return;
        };
        let miss = self.llc_miss();
        let curve = LoadedLatencyCurve::standard();
        // Where no resident main loop is latency-bound even at the largest queueing delay,
        // the floors do not enter the solution: one solve.
        let worst = self.loaded_floors(ll, miss, curve.queue_delay_ns(1.0, self.gpu.hbm_pin_gbps));
        let binds = self
            .kernels
            .iter()
            .zip(&worst)
            .any(|(k, &f)| k.resident > 0 && latency_fraction(&k.cost, f) < 1.0);
        if !binds {
            self.solve_rates_at(&worst);
            return;
        }
        let mut util = 0.0f64;
        for _ in 0..LOADED_LATENCY_PASSES {
            let floors =
                self.loaded_floors(ll, miss, curve.queue_delay_ns(util, self.gpu.hbm_pin_gbps));
            let next = self.solve_rates_at(&floors);
            if (next - util).abs() < 0.01 {
                break;
            }
            util = 0.5 * (util + next);
        }
    }

    /// Every kernel's main-loop latency floor under the loaded-latency option at a
    /// queueing delay of `queue_ns` (see [`loaded_floor`]).
    fn loaded_floors(&self, ll: LoadedLatency, miss: f64, queue_ns: f64) -> Vec<f64> {
        self.kernels
            .iter()
            .map(|k| loaded_floor(&k.cost, k.resident as f64, miss, &self.cal, ll, queue_ns))
            .collect()
    }

    /// The LLC miss fraction of the resident panels' working set (what exceeds the LLC's
    /// reusable capacity misses).
    fn llc_miss(&self) -> f64 {
        let working_set: f64 = self
            .kernels
            .iter()
            .filter(|k| k.resident > 0)
            .map(|k| k.cost.footprint(k.resident as f64))
            .sum();
        let effective_llc = self.gpu.llc_bytes as f64 * self.cal.llc_reuse;
        if working_set > effective_llc {
            1.0 - effective_llc / working_set
        } else {
            0.0
        }
    }

    /// [`Self::solve_rates`] with the main loop's latency floor of kernel `i` taken as
    /// `floors[i]`; returns the utilisation of HBM's capacity the solution makes.
    fn solve_rates_at(&mut self, floors: &[f64]) -> f64 {
        let floor_of = |ki: usize| floors.get(ki).copied().unwrap_or(0.0);
        // Matrix units: each main-loop workgroup asks for its `cu_demand` of a CU (its
        // waves' SIMDs) times the fraction of its full rate memory latency lets it
        // use; a CU's units are shared in proportion to `cu_demand`, and what a
        // latency-bound workgroup leaves goes to its co-residents (water-filling per
        // CU group, in units of `cu_demand`).
        let mut cu_level = vec![None; self.groups.len()];
        {
            let mut per_group: Vec<(Vec<f64>, Vec<f64>)> =
                vec![(Vec::new(), Vec::new()); self.groups.len()];
            for c in &self.cohorts {
                if c.fixed_left <= 0.0 && c.work_left > 0.0 {
                    if let (Some(k), Some(g)) =
                        (self.kernels.get(c.kernel), per_group.get_mut(c.group))
                    {
                        g.0.push(c.per_cu as f64 * k.cost.cu_demand);
                        g.1.push(latency_fraction(&k.cost, floor_of(c.kernel)));
                    }
                }
            }
            for (level, (weights, wants)) in cu_level.iter_mut().zip(&per_group) {
                let ones = vec![1.0; wants.len()];
                *level = water_level(weights, wants, &ones, 1.0);
            }
        }
        // LLC working set of all resident workgroups.
        let miss = self.llc_miss();
        let mut idx = Vec::with_capacity(self.cohorts.len());
        let mut counts = Vec::with_capacity(self.cohorts.len());
        let mut rates = Vec::with_capacity(self.cohorts.len());
        let mut hbm = Vec::with_capacity(self.cohorts.len());
        let mut llc = Vec::with_capacity(self.cohorts.len());
        // LLC bytes beyond `llc` that atomic adds cost (not through L1: only the LLC's
        // own limits see them).
        let mut atomic = Vec::with_capacity(self.cohorts.len());
        for (ci, c) in self.cohorts.iter().enumerate() {
            if c.fixed_left > 0.0 || c.work_left <= 0.0 {
                continue;
            }
            let Some(k) = self.kernels.get(c.kernel) else {
                continue;
            };
            let want = latency_fraction(&k.cost, floor_of(c.kernel));
            let used = match cu_level.get(c.group).copied().flatten() {
                Some(level) => want.min(level),
                None => want,
            };
            idx.push(ci);
            counts.push((c.per_cu * self.groups.get(c.group).map_or(0, |g| g.cus)) as f64);
            rates.push(k.cost.wg_flops_per_ns * used / k.cost.wg_flops);
            hbm.push(k.cost.hbm_bytes(k.resident as f64, miss));
            llc.push(k.cost.wg_llc_bytes);
            atomic.push(k.cost.wg_llc_atomic_extra_bytes);
        }
        // Per-CU L1 bandwidth: the residents of a CU group share it; over-demand slows
        // them all in proportion (like the matrix units).
        let l1_per_cu = self.cal.l1_bytes_per_cycle * self.gpu.clock_ghz;
        if l1_per_cu > 0.0 {
            let mut l1_demand = vec![0.0f64; self.groups.len()];
            for (j, &ci) in idx.iter().enumerate() {
                if let (Some(c), Some(r), Some(b)) =
                    (self.cohorts.get(ci), rates.get(j), llc.get(j))
                {
                    if let Some(d) = l1_demand.get_mut(c.group) {
                        *d += c.per_cu as f64 * r * b;
                    }
                }
            }
            for (j, &ci) in idx.iter().enumerate() {
                let over = self
                    .cohorts
                    .get(ci)
                    .and_then(|c| l1_demand.get(c.group))
                    .copied()
                    .unwrap_or(0.0)
                    / l1_per_cu;
                if over > 1.0 {
                    if let Some(r) = rates.get_mut(j) {
                        *r /= over;
                    }
                }
            }
        }
        for (l, a) in llc.iter_mut().zip(&atomic) {
            *l += a;
        }
        // LLC channels: a kernel's resident workgroups load the same K slab at once, and
        // where their addresses alias onto few channels the busiest one paces them: a
        // kernel gets at most its channel efficiency times the LLC's bandwidth, and other
        // kernels use the channels it leaves idle (their K loops run at their own phase).
        // With `llc_copies_in_phase`, copies of one GEMM with one kernel (the same
        // tiling) walk K in step with each other too and share one cap.
        if self.gpu.llc_channel_interleave_bytes > 0 {
            let in_phase = self.cal.llc_copies_in_phase;
            let group_of = |ki: usize, t: GemmTiling| (if in_phase { None } else { Some(ki) }, t);
            // Per group: LLC demand (then its scale factor), resident workgroups, kernels.
            let mut groups: BTreeMap<(Option<usize>, GemmTiling), (f64, u64, u64)> =
                BTreeMap::new();
            for (ki, k) in self
                .kernels
                .iter()
                .enumerate()
                .filter(|(_, k)| k.resident > 0)
            {
                if let Some(t) = k.tiling {
                    let g = groups.entry(group_of(ki, t)).or_insert((0.0, 0, 0));
                    g.1 += k.resident;
                    g.2 += 1;
                }
            }
            for (j, &ci) in idx.iter().enumerate() {
                if let (Some(c), Some(n), Some(r), Some(b)) = (
                    self.cohorts.get(ci),
                    counts.get(j),
                    rates.get(j),
                    llc.get(j),
                ) {
                    if let Some(g) = self
                        .kernels
                        .get(c.kernel)
                        .and_then(|k| k.tiling)
                        .and_then(|t| groups.get_mut(&group_of(c.kernel, t)))
                    {
                        g.0 += n * r * b;
                    }
                }
            }
            // Each group's demand becomes the factor that brings it within its cap.
            let llc_capacity = self.gpu.llc_bytes_per_ns();
            for ((_, t), g) in groups.iter_mut() {
                let (demand, resident, kernels) = *g;
                let cap = llc_channel_efficiency_cached(
                    &self.gpu,
                    t,
                    resident / kernels.max(1),
                    Stagger::TENSILE_DEFAULT,
                ) * llc_capacity;
                g.0 = if demand > cap { cap / demand } else { 1.0 };
            }
            for (j, &ci) in idx.iter().enumerate() {
                let f = self
                    .cohorts
                    .get(ci)
                    .and_then(|c| {
                        let t = self.kernels.get(c.kernel)?.tiling?;
                        groups.get(&group_of(c.kernel, t))
                    })
                    .map_or(1.0, |g| g.0);
                if let Some(r) = rates.get_mut(j) {
                    *r *= f;
                }
            }
        }
        // Every cohort in its main loop fetches from HBM at once; the port says how much
        // bandwidth HBM has for that mix.
        let streams = self.stream_demands(&idx, &counts, &rates, &hbm);
        let hbm_capacity = self.port.hbm_capacity(&self.gpu, &self.cal, &streams);
        for (bytes, capacity) in [(&hbm, hbm_capacity), (&llc, self.gpu.llc_bytes_per_ns())] {
            if let Some(l) = water_level(&counts, &rates, bytes, capacity) {
                for (r, b) in rates.iter_mut().zip(bytes.iter()) {
                    if *b > 0.0 {
                        *r = r.min(l / b);
                    }
                }
            }
        }
        for (ci, r) in idx.iter().zip(&rates) {
            if let Some(c) = self.cohorts.get_mut(*ci) {
                c.rate = *r;
            }
        }
        let hbm_demand: f64 = counts
            .iter()
            .zip(rates.iter().zip(&hbm))
            .map(|(n, (r, b))| n * r * b)
            .sum();
        if hbm_capacity > 0.0 {
            hbm_demand / hbm_capacity
        } else {
            0.0
        }
    }

    /// The HBM traffic of the main-loop cohorts `idx` (with their workgroup counts, rates
    /// before the HBM share and HBM bytes per workgroup). A kernel's resident workgroups
    /// are taken to be its latest dispatched ids, handed to its cohorts oldest first
    /// (workgroups are dispatched in id order and cohorts finish in placement order).
    fn stream_demands(
        &self,
        idx: &[usize],
        counts: &[f64],
        rates: &[f64],
        hbm: &[f64],
    ) -> Vec<StreamDemand> {
        let mut order: Vec<usize> = (0..self.cohorts.len()).collect();
        let key = |ci: usize| self.cohorts.get(ci).map(|c| (c.kernel, c.born, c.group));
        order.sort_by(|&x, &y| match (key(x), key(y)) {
            (Some(a), Some(b)) => a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)),
            _ => x.cmp(&y),
        });
        let mut first = vec![0u64; self.cohorts.len()];
        let mut next: Option<(usize, u64)> = None;
        for ci in order {
            let Some(c) = self.cohorts.get(ci) else {
                continue;
            };
            let Some(k) = self.kernels.get(c.kernel) else {
                continue;
            };
            let start = match next {
                Some((kernel, id)) if kernel == c.kernel => id,
                _ => {
                    let dispatched = k.cost.workgroups - k.to_place.min(k.cost.workgroups);
                    dispatched.saturating_sub(k.resident)
                }
            };
            if let Some(f) = first.get_mut(ci) {
                *f = start;
            }
            let count = c.per_cu * self.groups.get(c.group).map_or(0, |g| g.cus);
            next = Some((c.kernel, start + count));
        }
        idx.iter()
            .zip(counts.iter().zip(rates.iter().zip(hbm)))
            .filter_map(|(&ci, (&n, (&r, &bytes)))| {
                let c = self.cohorts.get(ci)?;
                let k = self.kernels.get(c.kernel)?;
                let write = k.cost.wg_out_bytes.min(bytes);
                Some(StreamDemand {
                    kernel: c.kernel,
                    tiling: k.tiling,
                    first_workgroup: first.get(ci).copied().unwrap_or(0),
                    workgroups: n as u64,
                    waves_per_workgroup: k.cost.waves_per_wg as u32,
                    read_bytes_per_workgroup: bytes - write,
                    write_bytes_per_workgroup: write,
                    demand_bytes_per_ns: n * r * bytes,
                })
            })
            .collect()
    }
}
