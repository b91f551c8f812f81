//! Standard experiments on the GEMM model: one GEMM alone, `n` copies launched by one CP
//! decision, one after the other on one queue, and in rounds of a concurrency degree under
//! either CD semantics. Tuning, profiling, validation and the tests are built from these.

use super::catalog::CatalogKernel;
use super::config::GpuConfig;
use super::gemm::{Calibration, GemmShape};
use super::mem_port::MemoryPort;
use super::sim::GpuSim;
use super::{GpuEvent, KernelEngine, Nanos};

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
    Some((t, wgs, sim.into_port()))
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
