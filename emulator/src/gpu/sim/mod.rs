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
};
use super::mem_port::{FluidHbm, GemmTiling, MemoryPort};
pub use super::runs::{
    concurrent_time, dispatch_stagger_ns, isolated_time, makespan, makespan_partitioned,
    makespan_with_port, rounds_time, sequential_time,
};
use super::{GpuEvent, KernelEngine, KernelLaunch, Nanos};
use std::sync::OnceLock;

mod solve;

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
    /// When the front end finishes setting up the last kernel launched (only with
    /// [`GpuConfig::serial_kernel_start`]).
    front_end_free: Nanos,
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
            front_end_free: 0.0,
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
                let cost = if self.cal.persistent_grid {
                    cost.persistent(u64::from(self.gpu.cus) * u64::from(cost.occupancy))
                } else {
                    cost
                };
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
        let mut start_at = at + start_delay;
        if self.gpu.serial_kernel_start {
            // One front end sets kernels up in launch order: this one's set-up begins
            // when the previous one's ends.
            start_at = self.front_end_free.max(at) + start_delay;
            self.front_end_free = start_at;
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
            start_at,
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
            wg_llc_atomic_extra_bytes: 0.0,
            tiles_per_wg: 1.0,
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
    /// The memory port, giving the simulator up (e.g. to read what a DRAM port simulated).
    pub fn into_port(self) -> P {
        self.port
    }

    fn flush(&mut self, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.outbox);
    }
}
