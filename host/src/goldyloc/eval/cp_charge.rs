//! The CP's own cost per decision, from replaying the shipped firmware alone.

use super::*;

/// The CP's own time in one scenario, from a replay of the firmware.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct CpCharge {
    /// Available GEMMs (queues with a GEMM at the head).
    pub n: u32,
    /// Concurrency degree the predictor answered.
    pub cd: u8,
    /// CP cycles over the whole replay (every handler: doorbells, decisions, dispatch
    /// and completion events).
    pub cycles: u64,
    /// Concurrency decisions taken.
    pub decisions: u64,
    /// CP busy time over the replay, ns.
    pub busy_ns: f64,
    /// Busy time per decision, ns.
    pub per_decision_ns: f64,
    /// Device-memory accesses of the replay.
    pub mem_accesses: u64,
}

/// A predictor that answers `cd` for every GEMM (a constant class).
pub fn constant_predictor(cd: u8) -> Option<CdPredictor> {
    let class = CONCURRENCY_DEGREES.iter().position(|&d| d == cd)?;
    let mut p = CdPredictor {
        bias_q16: [0; CLASS_COUNT],
        ..CdPredictor::default()
    };
    *p.bias_q16.get_mut(class)? = 1 << FRAC_BITS;
    Some(p)
}

/// Replays `n` GEMMs (one per queue, the demo's three-kernel record) through the firmware
/// CP with a predictor answering `cd`, and reads off the CP's work and time.
pub fn cp_charge(n: u32, cd: u8, resources: &CuResources) -> CpCharge {
    let mut charge = CpCharge {
        n,
        cd,
        ..CpCharge::default()
    };
    let Some(predictor) = constant_predictor(cd) else {
        return charge;
    };
    let cfg = GpuNodeConfig {
        ring_packets: 16,
        predictor,
        resources: *resources,
        ..GpuNodeConfig::default()
    };
    let records = [sample::gemm_ext(1024, 1024, 1024, demo::KO_BASE)];
    let packets = vec![0usize; n.clamp(1, 32) as usize];
    let work = Workload {
        records: &records,
        packets: &packets,
        one_stream: false,
        hw_queues: None,
    };
    // Two iterations of the same GEMMs on the same queues, as in a training loop; the
    // second (the shape known: the steady state) is the one read off.
    let engine = FixedTimeEngine::new(resources.cus, 8, 1000.0);
    let Ok(run) = in_loop::run_on(cfg, &work, engine) else {
        return charge;
    };
    // The node charges its handlers with the default model: the same cycles.
    let model = CpCostModel::default();
    let w = run.cp_work;
    charge.cycles = w.cycles(&model);
    charge.decisions = w.decisions;
    charge.busy_ns = charge.cycles as f64 * 1e9 / model.clock_hz as f64;
    charge.per_decision_ns = charge.busy_ns / w.decisions.max(1) as f64;
    charge.mem_accesses = w.mem_accesses;
    charge
}
