//! Workgroup-granularity simulation of kernels sharing a GPU (SPEC 5.2, Appendix A).
//!
//! Workgroups placed together by the dispatcher for the same kernel are identical and
//! progress at the same rate, so they are simulated as one *cohort*; events happen when
//! a cohort finishes its fixed phase or its main loop, and each event re-places freed CU
//! capacity round-robin over the runnable kernels and re-solves the shared resources:
//! - CU matrix throughput: the resident main-loop workgroups of a CU demand their
//!   `cu_demand` each, capped by memory latency (a workgroup cannot outrun its loads in
//!   flight, [`Calibration::memory_latency_ns`]); over-demand is shared in proportion to
//!   `cu_demand`, and what a latency-bound workgroup leaves goes to its co-residents.
//! - LLC: the panel working set of all resident workgroups (of all kernels) against
//!   `llc_bytes * llc_reuse`; the part that does not fit turns reuse hits into misses.
//! - HBM and LLC bandwidth: fluid max-min fair shares per workgroup. How much HBM
//!   bandwidth there is for the current mix is the [`MemoryPort`]'s answer (the calibrated
//!   fluid formula by default, or the DRAM model, see [`super::mem_port`]).
//!
//! CU capacity is accounted in exact integer units: a workgroup of a kernel with
//! occupancy `o` takes `SLOT_UNITS_PER_CU / o` of a CU, so mixed kernels share CUs and a
//! homogeneous kernel fits exactly `cus * o` workgroups. Placement spreads evenly (the
//! per-CU load is the pool average), which is what round-robin placement tends to.

use super::catalog::{Catalog, CatalogKernel};
use super::config::GpuConfig;
use super::gemm::{
    cost_from_meta, kernel_cost, kernel_from_meta, Calibration, GemmShape, KernelCost,
    LoadedLatency,
};
use super::llc_channel::{llc_channel_efficiency_cached, Stagger};
use super::loaded_latency::LoadedLatencyCurve;
use super::mem_port::{FluidHbm, GemmTiling, MemoryPort, StreamDemand};
use super::{GpuEvent, KernelEngine, KernelLaunch, Nanos};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// Capacity units per CU: the least common multiple of 1..=16, so every occupancy up to
/// the hardware limit divides it.
const SLOT_UNITS_PER_CU: u64 = 720_720;
/// Times closer than this (ns) are the same event.
const TIME_EPS: f64 = 1e-6;

/// The catalog kernel objects resolve against.
pub fn shared_catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(Catalog::standard)
}

#[derive(Debug, Clone)]
struct KernelState {
    tag: u64,
    cost: KernelCost,
    /// The GEMM's tiling (what the memory port needs to know its addresses); `None` for
    /// a non-GEMM kernel.
    tiling: Option<GemmTiling>,
    slot_units: u64,
    pool: usize,
    start_at: Nanos,
    to_place: u64,
    resident: u64,
    all_dispatched: bool,
    /// When the last workgroup was placed (the queue's next packet became its head).
    dispatched_at: Nanos,
    /// When the kernel completes once its last workgroup has ended: that time plus its
    /// cost's `tail_ns` (a split-U reduction); `None` while workgroups remain.
    done_at: Option<Nanos>,
    completed: bool,
}

/// Workgroups of one kernel placed at the same time on every CU of one group, the same
/// number per CU: they progress identically.
#[derive(Debug, Clone, Copy)]
struct Cohort {
    kernel: usize,
    group: usize,
    per_cu: u64,
    born: Nanos,
    fixed_left: f64,
    work_left: f64,
    rate: f64,
    /// Placed in the current placement pass; the dispatcher's launch delay is still to
    /// be added to its fixed phase.
    awaiting_launch: bool,
}

impl Cohort {
    fn finish_at(&self, now: Nanos) -> Nanos {
        if self.fixed_left > 0.0 {
            now + self.fixed_left
        } else if self.work_left <= 0.0 {
            now
        } else if self.rate > 0.0 {
            now + self.work_left / self.rate
        } else {
            f64::INFINITY
        }
    }
}

/// CUs whose residents are identical: `cus` of them, each with `used` capacity units
/// taken. Groups split when a placement covers only part of them and merge again when
/// their contents coincide.
#[derive(Debug, Clone, Copy)]
struct CuGroup {
    pool: usize,
    cus: u64,
    used: u64,
}

/// The GPU running kernels; implements [`KernelEngine`]. `P` is where its HBM bandwidth
/// comes from (a type parameter rather than a boxed port: the node and the host are
/// already generic over the engine, and the default port costs nothing).
#[derive(Debug, Clone)]
pub struct GpuSim<P = FluidHbm> {
    gpu: GpuConfig,
    cal: Calibration,
    port: P,
    now: Nanos,
    kernels: Vec<KernelState>,
    cohorts: Vec<Cohort>,
    groups: Vec<CuGroup>,
    pools: u32,
    outbox: Vec<GpuEvent>,
    rr: usize,
    launches: usize,
    workgroups_done: u64,
    /// When the workgroup dispatcher has launched every wave placed so far.
    dispatcher_free: Nanos,
    /// When the most recently completed kernel placed its last workgroup: from then on
    /// its queue's next packet sat at the head (see `push_kernel`).
    last_completed_dispatched_at: Option<Nanos>,
}

impl GpuSim<FluidHbm> {
    /// An idle GPU with the fluid HBM model.
    pub fn new(gpu: GpuConfig, cal: Calibration) -> Self {
        Self::with_cu_partitions(gpu, cal, 1)
    }

    /// An idle GPU whose CUs are statically split into `parts` equal masks (the
    /// CU-Partition configuration); kernels are assigned to partitions in launch order.
    /// LLC and HBM stay shared.
    pub fn with_cu_partitions(gpu: GpuConfig, cal: Calibration, parts: u32) -> Self {
        Self::with_port(gpu, cal, parts, FluidHbm)
    }
}

impl<P: MemoryPort> GpuSim<P> {
    /// An idle GPU whose HBM bandwidth comes from `port`, with its CUs split into `parts`
    /// masks as in [`GpuSim::with_cu_partitions`] (1 = no split).
    pub fn with_port(gpu: GpuConfig, cal: Calibration, parts: u32, port: P) -> Self {
        let parts = parts.clamp(1, gpu.cus.max(1));
        let per = u64::from(gpu.cus / parts);
        let groups = (0..parts as usize)
            .map(|pool| CuGroup {
                pool,
                cus: per,
                used: 0,
            })
            .collect();
        Self {
            gpu,
            cal,
            port,
            now: 0.0,
            kernels: Vec::new(),
            cohorts: Vec::new(),
            groups,
            pools: parts,
            outbox: Vec::new(),
            rr: 0,
            launches: 0,
            workgroups_done: 0,
            dispatcher_free: 0.0,
            last_completed_dispatched_at: None,
        }
    }

    /// The GPU configuration.
    pub fn config(&self) -> &GpuConfig {
        &self.gpu
    }

    /// The memory port (e.g. to read a DRAM port's window counts).
    pub fn port(&self) -> &P {
        &self.port
    }

    /// Current time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Groups and cohorts alive (diagnostics).
    pub fn debug_sizes(&self) -> String {
        format!(
            "groups {} cohorts {}",
            self.groups.len(),
            self.cohorts.len()
        )
    }

    /// Workgroups that have finished so far.
    pub fn workgroups_done(&self) -> u64 {
        self.workgroups_done
    }

    /// Launches a GEMM with a catalog kernel. Returns false (and launches nothing) if the
    /// kernel cannot be resident on this GPU.
    pub fn launch_gemm(
        &mut self,
        now: Nanos,
        tag: u64,
        shape: &GemmShape,
        k: &CatalogKernel,
    ) -> bool {
        self.launch_gemm_packet(now, tag, shape, k, false)
    }

    /// [`GpuSim::launch_gemm`] with the packet's barrier bit: `true` for a kernel that
    /// waited at its queue's head for the queue's previous kernel (one stream).
    pub fn launch_gemm_packet(
        &mut self,
        now: Nanos,
        tag: u64,
        shape: &GemmShape,
        k: &CatalogKernel,
        barrier: bool,
    ) -> bool {
        match kernel_cost(&self.gpu, &self.cal, shape, k) {
            Some(cost) => {
                self.push_kernel(now, tag, cost, Some(GemmTiling::new(shape, k)), barrier);
                true
            }
            None => false,
        }
    }

    /// Adds a kernel launched at `now`. Its first workgroup can be placed
    /// `kernel_start_ns` later (packet and kernel-descriptor fetch, dispatch set-up),
    /// except for a `barrier` packet: it waited at its queue's head while the kernel it
    /// depended on ran its last workgroups, and a single stream's packet processor sets
    /// up the next kernel in that time (as a HIP stream does); only what is left of the
    /// start-up after that window delays it. What cannot overlap is already charged
    /// elsewhere: the CP noticing the completion and dispatching (the firmware's own
    /// time) and the wave launches (`waves_launched_per_cycle`). The GPU does not see
    /// when a packet was published; the window is the time since the last completed
    /// kernel placed its last workgroup, exact for one stream whose packets were
    /// published ahead (the evaluation's Sequential).
    fn push_kernel(
        &mut self,
        now: Nanos,
        tag: u64,
        cost: KernelCost,
        tiling: Option<GemmTiling>,
        barrier: bool,
    ) {
        if now > self.now {
            self.progress(now);
        }
        let at = self.now.max(now);
        let mut start_delay = self.gpu.kernel_start_ns;
        if barrier {
            if let Some(head_since) = self.last_completed_dispatched_at {
                // At least a picosecond: placement happens at a start event; at least the
                // GPU's inter-kernel gap (completion signal, packet processing, cache
                // release and acquire), which no look-ahead hides.
                start_delay = (start_delay - (at - head_since).max(0.0))
                    .max(self.gpu.inter_kernel_gap_ns)
                    .max(1e3 * TIME_EPS);
            }
        }
        let pool = self.launches % (self.pools.max(1) as usize);
        self.launches += 1;
        let slot_units = SLOT_UNITS_PER_CU / u64::from(cost.occupancy.max(1));
        self.kernels.push(KernelState {
            tag,
            cost,
            tiling,
            slot_units,
            pool,
            start_at: at + start_delay,
            to_place: cost.workgroups,
            resident: 0,
            all_dispatched: false,
            dispatched_at: at,
            done_at: None,
            completed: false,
        });
    }

    fn non_gemm_cost(&self, launch: &KernelLaunch) -> KernelCost {
        let waves = u32::from(launch.workgroup_size.max(1)).div_ceil(self.gpu.wave_size.max(1));
        let occ = (self.gpu.wave_slots_per_cu / waves.max(1))
            .min(self.gpu.max_wgs_per_cu)
            .max(1);
        KernelCost {
            workgroups: launch.workgroups,
            occupancy: occ,
            cu_demand: 0.0,
            wg_flops_per_ns: 1.0,
            wg_flops: 0.0,
            wg_llc_bytes: 0.0,
            wg_compulsory_bytes: 0.0,
            wg_out_bytes: 0.0,
            grid: (1, 1, 1),
            panel_bytes: (0.0, 0.0),
            wg_fixed_ns: launch.workgroup_time.max(0.0),
            waves_per_wg: f64::from(waves),
            wg_latency_floor_ns: 0.0,
            wg_latency_waits: 0.0,
            tail_ns: 0.0,
        }
    }

    /// Runs until every launched kernel completed; returns the time of the last event.
    pub fn run_to_idle(&mut self, events: &mut Vec<GpuEvent>) -> Nanos {
        while let Some(t) = self.next_event() {
            self.advance(t, events);
        }
        self.now
    }

    fn next_internal(&self) -> Option<Nanos> {
        let mut t = f64::INFINITY;
        for k in &self.kernels {
            if !k.completed && k.start_at > self.now {
                t = t.min(k.start_at);
            }
            if let Some(d) = k.done_at.filter(|&d| !k.completed && d > self.now) {
                t = t.min(d);
            }
        }
        for c in &self.cohorts {
            t = t.min(c.finish_at(self.now));
        }
        t.is_finite().then_some(t)
    }

    fn progress(&mut self, t: Nanos) {
        let dt = t - self.now;
        if dt <= 0.0 {
            return;
        }
        for c in &mut self.cohorts {
            if c.fixed_left > 0.0 {
                c.fixed_left -= dt;
                if c.fixed_left < TIME_EPS {
                    c.fixed_left = 0.0;
                }
            } else {
                c.work_left -= c.rate * dt;
            }
        }
        self.now = t;
    }

    /// Processes everything due at `self.now`.
    fn handle_due(&mut self) {
        let now = self.now;
        let mut finished = Vec::new();
        for (i, c) in self.cohorts.iter_mut().enumerate() {
            if c.fixed_left <= TIME_EPS {
                c.fixed_left = 0.0;
                let done = c.work_left <= 0.0 || (c.rate > 0.0 && c.work_left / c.rate <= TIME_EPS);
                if done {
                    finished.push(i);
                }
            }
        }
        for &i in finished.iter().rev() {
            let c = self.cohorts.swap_remove(i);
            let cus = self.groups.get(c.group).map_or(0, |g| g.cus);
            let count = c.per_cu * cus;
            self.workgroups_done += count;
            if let Some(k) = self.kernels.get_mut(c.kernel) {
                k.resident -= count.min(k.resident);
                if let Some(g) = self.groups.get_mut(c.group) {
                    g.used -= (c.per_cu * k.slot_units).min(g.used);
                }
            }
        }
        self.merge_groups();
        self.place(now);
        for k in &mut self.kernels {
            if !k.completed && k.to_place == 0 && k.resident == 0 && k.start_at <= now + TIME_EPS {
                if !k.all_dispatched {
                    k.all_dispatched = true;
                    k.dispatched_at = now;
                    self.outbox.push(GpuEvent::AllDispatched {
                        tag: k.tag,
                        at: now,
                    });
                }
                let tail = k.cost.tail_ns.max(0.0);
                let due = *k.done_at.get_or_insert(now + tail);
                if due > now + TIME_EPS {
                    continue;
                }
                k.completed = true;
                self.last_completed_dispatched_at = Some(k.dispatched_at);
                self.outbox.push(GpuEvent::Completed {
                    tag: k.tag,
                    at: now,
                });
            }
        }
        if self.cohorts.is_empty() && self.kernels.iter().all(|k| k.completed) {
            self.kernels.clear();
        }
        self.merge_groups();
        self.solve_rates();
    }

    /// Merges groups of the same pool whose residents are identical (same kernels, per-CU
    /// counts and progress), so a long run does not fragment into one group per CU.
    fn merge_groups(&mut self) {
        if self.groups.len() < 2 {
            return;
        }
        type Sig = Vec<(usize, u64, u64, u64, u64)>;
        let mut sigs: Vec<(usize, u64, Sig)> = self
            .groups
            .iter()
            .map(|g| (g.pool, g.used, Vec::new()))
            .collect();
        for c in &self.cohorts {
            if let Some(s) = sigs.get_mut(c.group) {
                s.2.push((
                    c.kernel,
                    c.per_cu,
                    c.born.to_bits(),
                    (c.fixed_left * 1e3).round() as u64,
                    (c.work_left * 1e9).round() as u64,
                ));
            }
        }
        for s in &mut sigs {
            s.2.sort_unstable();
        }
        let mut target: Vec<usize> = (0..self.groups.len()).collect();
        let mut map: std::collections::HashMap<(usize, u64, Sig), usize> = Default::default();
        for (gi, sig) in sigs.into_iter().enumerate() {
            match map.get(&sig) {
                Some(&t) => {
                    if let Some(slot) = target.get_mut(gi) {
                        *slot = t;
                    }
                }
                None => {
                    map.insert(sig, gi);
                }
            }
        }
        if target.iter().enumerate().all(|(i, &t)| i == t) {
            return;
        }
        // Fold CUs into targets, drop merged groups' cohorts, renumber.
        let mut extra = vec![0u64; self.groups.len()];
        for (gi, &t) in target.iter().enumerate() {
            if gi != t {
                if let (Some(e), Some(g)) = (extra.get_mut(t), self.groups.get(gi)) {
                    *e += g.cus;
                }
            }
        }
        self.cohorts
            .retain(|c| target.get(c.group).is_some_and(|&t| t == c.group));
        let mut new_index = vec![usize::MAX; self.groups.len()];
        let mut groups = Vec::new();
        for (gi, g) in self.groups.iter().enumerate() {
            if target.get(gi) == Some(&gi) {
                if let Some(ni) = new_index.get_mut(gi) {
                    *ni = groups.len();
                }
                let mut g = *g;
                g.cus += extra.get(gi).copied().unwrap_or(0);
                groups.push(g);
            }
        }
        for c in &mut self.cohorts {
            c.group = new_index.get(c.group).copied().unwrap_or(0);
        }
        self.groups = groups;
    }

    /// Splits `take` CUs off group `gi` (cloning its cohorts); returns the new group.
    fn split_group(&mut self, gi: usize, take: u64) -> usize {
        let ng = self.groups.len();
        let Some(g) = self.groups.get_mut(gi) else {
            return gi;
        };
        if take == 0 || take >= g.cus {
            return gi;
        }
        g.cus -= take;
        let mut new = *g;
        new.cus = take;
        self.groups.push(new);
        let clones: Vec<Cohort> = self
            .cohorts
            .iter()
            .filter(|c| c.group == gi)
            .map(|c| Cohort { group: ng, ..*c })
            .collect();
        self.cohorts.extend(clones);
        ng
    }

    /// Round-robin placement of pending workgroups into free CU capacity: in each round
    /// every runnable kernel puts one workgroup on each CU of its share of the
    /// least-loaded group with room (a kernel alone may fill several per CU at once).
    fn place(&mut self, now: Nanos) {
        let nk = self.kernels.len();
        if nk == 0 {
            return;
        }
        let resident_waves = |s: &Self| -> f64 {
            s.kernels
                .iter()
                .map(|k| k.resident as f64 * k.cost.waves_per_wg)
                .sum()
        };
        let waves_before = resident_waves(self);
        self.place_rounds(now, nk);
        // The dispatcher launches the waves placed in this pass one after another (after
        // any it is still launching): their workgroups start over [start, end]; every
        // cohort of the pass starts at the midpoint, so the pass's cohorts stay identical.
        let waves = (resident_waves(self) - waves_before).max(0.0);
        let launch_rate = self.cal.waves_launched_per_cycle * self.gpu.clock_ghz;
        let delay = if launch_rate > 0.0 && waves > 0.0 {
            let start = self.dispatcher_free.max(now);
            let end = start + waves / launch_rate;
            self.dispatcher_free = end;
            0.5 * (start + end) - now
        } else {
            0.0
        };
        for c in &mut self.cohorts {
            if c.awaiting_launch {
                c.awaiting_launch = false;
                c.fixed_left += delay;
            }
        }
    }

    fn place_rounds(&mut self, now: Nanos, nk: usize) {
        loop {
            let order: Vec<usize> = (0..nk)
                .map(|i| (self.rr + i) % nk)
                .filter(|&i| {
                    self.kernels.get(i).is_some_and(|k| {
                        k.to_place > 0
                            && k.start_at <= now + TIME_EPS
                            && self.best_group(k.pool, k.slot_units).is_some()
                    })
                })
                .collect();
            if order.is_empty() {
                break;
            }
            let alone = order.len() == 1;
            for &i in &order {
                let Some((pool, units, to_place)) = self
                    .kernels
                    .get(i)
                    .map(|k| (k.pool, k.slot_units, k.to_place))
                else {
                    continue;
                };
                let Some(gi) = self.best_group(pool, units) else {
                    continue;
                };
                let Some(g) = self.groups.get(gi).copied() else {
                    continue;
                };
                let fit = (SLOT_UNITS_PER_CU - g.used) / units;
                // Kernels of one round interleave over the CUs (the hardware alternates
                // queues workgroup by workgroup): each takes its share of the group.
                // The share is a fixed fraction of the pool, so groups split into at
                // most one part per runnable kernel instead of fragmenting per CU.
                let share = if alone {
                    g.cus
                } else {
                    self.pool_cus().div_ceil(order.len() as u64).min(g.cus)
                };
                let take = share.min(to_place);
                let (gi, per_cu) = if take < g.cus {
                    (self.split_group(gi, take), 1)
                } else if alone {
                    (gi, fit.min(to_place / g.cus).max(1))
                } else {
                    (gi, 1)
                };
                self.place_on(i, gi, per_cu, now);
                self.rr = (i + 1) % nk;
            }
        }
    }

    fn pool_cus(&self) -> u64 {
        u64::from(self.gpu.cus / self.pools.max(1))
    }

    fn best_group(&self, pool: usize, units: u64) -> Option<usize> {
        self.groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.pool == pool && SLOT_UNITS_PER_CU - g.used >= units)
            .min_by_key(|(i, g)| (g.used, *i))
            .map(|(i, _)| i)
    }

    fn place_on(&mut self, ki: usize, gi: usize, per_cu: u64, now: Nanos) {
        let Some(cus) = self.groups.get(gi).map(|g| g.cus) else {
            return;
        };
        let Some(k) = self.kernels.get_mut(ki) else {
            return;
        };
        let n = per_cu * cus;
        k.to_place -= n.min(k.to_place);
        k.resident += n;
        if let Some(g) = self.groups.get_mut(gi) {
            g.used += per_cu * k.slot_units;
        }
        let work = if k.cost.wg_flops > 0.0 { 1.0 } else { 0.0 };
        let fixed = k.cost.wg_fixed_ns;
        if k.to_place == 0 && !k.all_dispatched {
            k.all_dispatched = true;
            k.dispatched_at = now;
            self.outbox.push(GpuEvent::AllDispatched {
                tag: k.tag,
                at: now,
            });
        }
        if let Some(c) = self
            .cohorts
            .iter_mut()
            .find(|c| c.kernel == ki && c.group == gi && c.born == now)
        {
            c.per_cu += per_cu;
        } else {
            self.cohorts.push(Cohort {
                kernel: ki,
                group: gi,
                per_cu,
                born: now,
                fixed_left: fixed,
                work_left: work,
                rate: 0.0,
                awaiting_launch: true,
            });
        }
    }

    /// Re-solves CU shares, LLC misses and bandwidth shares for the current residents.
    ///
    /// With the loaded-latency option the main-loop latency floors depend on the HBM's
    /// utilisation, which depends on the rates: a short fixed-point iteration (start
    /// unloaded, solve, take the utilisation the solution puts on HBM, average it with the
    /// previous guess, solve again) until the utilisation moves by less than 1 % or
    /// [`LOADED_LATENCY_PASSES`] solves were made. Deterministic: no state carries over
    /// between calls.
    fn solve_rates(&mut self) {
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

/// The fraction of its full main-loop rate (its `cu_demand` of a CU to itself) a
/// workgroup can use given memory latency: 1 when latency does not bind.
fn latency_fraction(cost: &KernelCost, floor_ns: f64) -> f64 {
    if floor_ns <= 0.0 || cost.wg_flops <= 0.0 || cost.wg_flops_per_ns <= 0.0 {
        return 1.0;
    }
    let full = cost.wg_flops_per_ns / cost.wg_flops;
    (1.0 / floor_ns / full).min(1.0)
}

/// Solves of the loaded-latency fixed point per rate update (see [`GpuSim::solve_rates`]).
const LOADED_LATENCY_PASSES: usize = 4;

/// A workgroup's main-loop latency floor under the loaded-latency option: its loads wait
/// the LLC-hit latency for the share of its LLC bytes the LLC serves and the HBM latency
/// plus the queueing delay `queue_ns` for the share that comes from HBM (what
/// `hbm_bytes` charges at this residency and LLC miss fraction), replacing the one
/// fixed latency of `wg_latency_floor_ns`.
fn loaded_floor(
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
fn water_level(counts: &[f64], rates: &[f64], bytes: &[f64], capacity: f64) -> Option<f64> {
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

impl<P: MemoryPort> KernelEngine for GpuSim<P> {
    fn launch(&mut self, now: Nanos, tag: u64, launch: &KernelLaunch) {
        let gemm = launch.gemm.as_ref().and_then(|(ext, meta)| {
            let shape = GemmShape::from_ext(ext);
            let kernel = shared_catalog()
                .by_kernel_object(meta.kernel_object)
                .copied()
                .unwrap_or_else(|| kernel_from_meta(meta, shape.dtype));
            cost_from_meta(&self.gpu, &self.cal, &shape, &kernel, meta)
                .map(|cost| (cost, GemmTiling::new(&shape, &kernel)))
        });
        match gemm {
            Some((cost, tiling)) => {
                self.push_kernel(now, tag, cost, Some(tiling), launch.barrier);
            }
            None => {
                let cost = self.non_gemm_cost(launch);
                self.push_kernel(now, tag, cost, None, launch.barrier);
            }
        }
    }

    fn next_event(&self) -> Option<Nanos> {
        let pending = self
            .outbox
            .iter()
            .map(|e| match e {
                GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => *at,
            })
            .reduce(f64::min);
        match (pending, self.next_internal()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, until: Nanos, out: &mut Vec<GpuEvent>) {
        while let Some(t) = self.next_internal() {
            if t > until {
                break;
            }
            self.progress(t);
            self.handle_due();
            self.flush(out);
        }
        if until.is_finite() && until > self.now {
            self.progress(until);
        }
        self.flush(out);
    }
}

impl<P> GpuSim<P> {
    fn flush(&mut self, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.outbox);
    }
}

/// Runs `runs` launched together at time 0 on separate queues and returns the time the
/// last one completes, or `None` if a kernel cannot be resident. Also returns the
/// workgroups simulated.
pub fn makespan(
    gpu: &GpuConfig,
    cal: &Calibration,
    runs: &[(GemmShape, CatalogKernel)],
) -> Option<(Nanos, u64)> {
    makespan_partitioned(gpu, cal, runs, 1)
}

/// [`makespan`] with the CUs statically split into `parts` masks (CU-Partition).
pub fn makespan_partitioned(
    gpu: &GpuConfig,
    cal: &Calibration,
    runs: &[(GemmShape, CatalogKernel)],
    parts: u32,
) -> Option<(Nanos, u64)> {
    let mut sim = GpuSim::with_cu_partitions(gpu.clone(), *cal, parts);
    run_together(&mut sim, runs)
}

/// [`makespan`] on a GPU whose HBM bandwidth comes from `port`; also returns the port
/// (e.g. to read how many DRAM windows the run simulated).
pub fn makespan_with_port<P: MemoryPort>(
    gpu: &GpuConfig,
    cal: &Calibration,
    runs: &[(GemmShape, CatalogKernel)],
    port: P,
) -> Option<(Nanos, u64, P)> {
    let mut sim = GpuSim::with_port(gpu.clone(), *cal, 1, port);
    let (t, wgs) = run_together(&mut sim, runs)?;
    Some((t, wgs, sim.port))
}

/// Time between two kernel launches of one CP decision: the firmware CP issues its
/// dispatches one after another, each costing one dispatch of the board-calibrated
/// `CpCostModel` (its instructions and the two word writes of the kernel-object patch),
/// as the emulator's node charges them. About 0.2 us at 1.5 GHz.
pub fn dispatch_stagger_ns() -> Nanos {
    let model = nmcp_firmware::cp::CpCostModel::default();
    model.dispatch_cycles() as f64 * 1e9 / model.clock_hz.max(1) as f64
}

/// Launches `runs` on separate queues of an idle `sim` as one CP decision does — run `i`
/// at `i x` [`dispatch_stagger_ns`], so the first launched fills the free slots first —
/// and runs it to idle: the last completion (from the first launch) and the workgroups
/// simulated.
fn run_together<P: MemoryPort>(
    sim: &mut GpuSim<P>,
    runs: &[(GemmShape, CatalogKernel)],
) -> Option<(Nanos, u64)> {
    let stagger = dispatch_stagger_ns();
    let mut events = Vec::new();
    for (i, (shape, k)) in runs.iter().enumerate() {
        let at = i as f64 * stagger;
        sim.advance(at, &mut events);
        if !sim.launch_gemm(at, i as u64, shape, k) {
            return None;
        }
    }
    let t = sim.run_to_idle(&mut events);
    Some((t, sim.workgroups_done()))
}

/// Time of one GEMM alone (launch to completion).
pub fn isolated_time(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    k: &CatalogKernel,
) -> Option<Nanos> {
    makespan(gpu, cal, &[(*shape, *k)]).map(|r| r.0)
}

/// Time of `copies` identical GEMMs run one after the other on one queue (Sequential):
/// each launched with the barrier bit the moment its predecessor completes, so the
/// GPU's look-ahead hides what it can of its start-up (see `push_kernel`).
pub fn sequential_time(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    k: &CatalogKernel,
    copies: u32,
) -> Option<Nanos> {
    let mut sim = GpuSim::new(gpu.clone(), *cal);
    let mut events = Vec::new();
    let mut at = 0.0;
    for i in 0..copies.max(1) {
        if !sim.launch_gemm_packet(at, u64::from(i), shape, k, i > 0) {
            return None;
        }
        at = sim.run_to_idle(&mut events);
    }
    Some(at)
}

/// Time of `copies` identical GEMMs run concurrently on separate queues.
pub fn concurrent_time(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    k: &CatalogKernel,
    copies: u32,
) -> Option<Nanos> {
    let runs = vec![(*shape, *k); copies.max(1) as usize];
    makespan(gpu, cal, &runs).map(|r| r.0)
}

/// Time of `total` identical GEMMs run in rounds of `cd`, each round launched by one CP
/// decision (its dispatches [`dispatch_stagger_ns`] apart). With `release_on_dispatch` the
/// next round is launched when every member of the current one has placed all its
/// workgroups — the CP re-decides whenever a queue head changes (dissertation 7.3.4), so
/// a round's tail overlaps the next round's start; otherwise when every member has
/// completed (a group barrier, `total / cd` back-to-back [`concurrent_time`]s).
pub fn rounds_time(
    gpu: &GpuConfig,
    cal: &Calibration,
    shape: &GemmShape,
    k: &CatalogKernel,
    cd: u32,
    total: u32,
    release_on_dispatch: bool,
) -> Option<Nanos> {
    let mut sim = GpuSim::new(gpu.clone(), *cal);
    let stagger = dispatch_stagger_ns();
    let total = total.max(1);
    let cd = cd.clamp(1, total);
    let mut events = Vec::new();
    let mut launched = 0u32;
    let mut at = 0.0;
    while launched < total {
        let end = (launched + cd).min(total);
        let mut left: Vec<u64> = (launched..end).map(u64::from).collect();
        for (j, tag) in (launched..end).enumerate() {
            let t = at + j as f64 * stagger;
            sim.advance(t, &mut events);
            if !sim.launch_gemm(t, u64::from(tag), shape, k) {
                return None;
            }
        }
        launched = end;
        if launched == total {
            break;
        }
        loop {
            for e in events.drain(..) {
                let (tag, t) = match e {
                    GpuEvent::AllDispatched { tag, at } if release_on_dispatch => (tag, at),
                    GpuEvent::Completed { tag, at } if !release_on_dispatch => (tag, at),
                    _ => continue,
                };
                if let Some(i) = left.iter().position(|&x| x == tag) {
                    left.swap_remove(i);
                    at = at.max(t);
                }
            }
            if left.is_empty() {
                break;
            }
            let next = sim.next_event()?;
            sim.advance(next, &mut events);
        }
    }
    Some(sim.run_to_idle(&mut events))
}
