//! The HBM loaded-latency curve: how much longer a GEMM's global load waits when the HBM
//! is busy, measured with the project's own cycle-level DRAM model rather than assumed.
//!
//! A GPU's load-to-use latency has a fixed part (the path through the L2 and the fabric,
//! the DRAM's own access) and a queueing part at the memory controller that grows with
//! the HBM's utilisation. The fixed parts are the calibration's `llc_hit_latency_ns` and
//! `memory_latency_ns`; this module supplies the queueing part. It drives the
//! [`MemorySystem`] of a preset (`hbm2-2000`) with open-loop Poisson arrivals of 64-byte
//! reads at uniformly random addresses (GEMM panels of many concurrent workgroups and
//! kernels interleave over the device) at a set of offered loads, each a fraction of the
//! bandwidth the same pattern saturates at, and records the mean time from a request's
//! arrival to its last data beat (front-end waiting included). The curve is that mean
//! above the lightest load's, as a function of utilisation.
//!
//! Queueing delay at equal utilisation scales with the service time of one access, so a
//! GPU whose pins run faster than the measured preset's sees proportionally shorter
//! delays ([`LoadedLatencyCurve::queue_delay_ns`] takes the ratio of pin rates).
//! Measuring takes a fraction of a second and is done once per process.

use std::sync::OnceLock;

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::hbm::mapping::STREAM_MAPPING;
use crate::hbm::{AddressMapping, HbmPreset};
use crate::memctrl::{ControllerConfig, MemCompletion, MemorySystem, Request};

/// The preset the curve is measured on (the project's JEDEC-style HBM2).
pub const CURVE_PRESET: &str = "hbm2-2000";
/// Offered loads measured, as fractions of the pattern's saturation bandwidth.
pub const CURVE_LOADS: [f64; 10] = [0.05, 0.2, 0.35, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95];
/// Requests per measured load (after warm-up: the first tenth is not recorded).
const REQUESTS_PER_LOAD: u64 = 40_000;
/// Bytes per request: one GPU L2 line fill of 64 B.
const REQUEST_BYTES: u32 = 64;
/// Seed of the arrival process and the addresses.
const SEED: u64 = 0x1a7e_c7c0;

/// One measured point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyPoint {
    /// Offered load / saturation bandwidth of the pattern.
    pub utilisation: f64,
    /// Achieved bandwidth / saturation bandwidth (equals `utilisation` below saturation).
    pub achieved: f64,
    /// Mean arrival-to-data latency, ns.
    pub mean_ns: f64,
    /// `mean_ns` above the lightest load's: the queueing delay, ns.
    pub queue_ns: f64,
}

/// Mean read latency against utilisation, measured on one DRAM preset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadedLatencyCurve {
    /// Preset name.
    pub preset: String,
    /// Data rate of the preset's pins, Gb/s.
    pub pin_gbps: f64,
    /// Bandwidth the pattern saturates at, GB/s (closed loop, every request at time 0).
    pub saturation_gbps: f64,
    /// Points in increasing utilisation.
    pub points: Vec<LatencyPoint>,
}

impl LoadedLatencyCurve {
    /// Measures the curve on `preset` at `loads` (fractions of the saturation bandwidth).
    pub fn measure(preset: &HbmPreset, loads: &[f64], requests: u64) -> Self {
        let capacity = preset.capacity_bytes();
        let system = || {
            let mapping = AddressMapping::named(STREAM_MAPPING, preset)
                .unwrap_or_else(|e| panic!("preset {}: default mapping: {e}", preset.name));
            MemorySystem::new(preset, mapping, ControllerConfig::from_preset(preset))
        };
        // Saturation: every request offered at once, the front end's back-pressure pacing.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED);
        let slots = (capacity / u64::from(REQUEST_BYTES)).max(1);
        let mut sat = system();
        let report = sat.run(
            (0..requests).map(|_| Request::read((rng.next_u64() % slots) * 64, REQUEST_BYTES, 0)),
            |_| {},
        );
        let saturation_gbps = report.bandwidth_gbps;
        let tck = preset.organisation.tck_ns;
        let mut points = Vec::with_capacity(loads.len());
        for (i, &u) in loads.iter().enumerate() {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(SEED ^ (i as u64 + 1));
            // Mean inter-arrival in cycles at this load: bytes / (GB/s) = ns.
            let mean_gap_cycles = f64::from(REQUEST_BYTES) / (u * saturation_gbps) / tck;
            let (mean_cycles, achieved) =
                open_loop(&mut system(), requests, mean_gap_cycles, slots, &mut rng);
            points.push(LatencyPoint {
                utilisation: u,
                achieved: achieved * f64::from(REQUEST_BYTES) / tck / saturation_gbps,
                mean_ns: mean_cycles * tck,
                queue_ns: 0.0,
            });
        }
        let base = points.first().map_or(0.0, |p| p.mean_ns);
        for p in &mut points {
            p.queue_ns = (p.mean_ns - base).max(0.0);
        }
        Self {
            preset: preset.name.clone(),
            pin_gbps: preset.organisation.data_rate_gbps,
            saturation_gbps,
            points,
        }
    }

    /// The curve of [`CURVE_PRESET`] at [`CURVE_LOADS`], measured once per process.
    pub fn standard() -> &'static Self {
        static CURVE: OnceLock<LoadedLatencyCurve> = OnceLock::new();
        CURVE.get_or_init(|| {
            let preset = HbmPreset::builtin(CURVE_PRESET)
                .unwrap_or_else(|e| panic!("built-in preset {CURVE_PRESET}: {e}"));
            Self::measure(&preset, &CURVE_LOADS, REQUESTS_PER_LOAD)
        })
    }

    /// Queueing delay at `utilisation` (0..1) for a GPU whose HBM pins run at
    /// `gpu_pin_gbps`: the measured delay, linear between points, held at the last point
    /// beyond it (a GPU's outstanding loads are bounded, so its queues are too), and
    /// scaled by the ratio of pin rates (the service time of one access).
    pub fn queue_delay_ns(&self, utilisation: f64, gpu_pin_gbps: f64) -> f64 {
        let scale = if gpu_pin_gbps > 0.0 {
            self.pin_gbps / gpu_pin_gbps
        } else {
            1.0
        };
        let u = if utilisation.is_finite() {
            utilisation.max(0.0)
        } else {
            0.0
        };
        let mut prev: Option<&LatencyPoint> = None;
        for p in &self.points {
            if u <= p.utilisation {
                return scale
                    * match prev {
                        None => p.queue_ns * u / p.utilisation.max(f64::MIN_POSITIVE),
                        Some(a) => {
                            let t = (u - a.utilisation) / (p.utilisation - a.utilisation);
                            a.queue_ns + t * (p.queue_ns - a.queue_ns)
                        }
                    };
            }
            prev = Some(p);
        }
        scale * prev.map_or(0.0, |p| p.queue_ns)
    }
}

/// Runs `requests` random reads arriving as a Poisson process of mean gap `gap` cycles;
/// returns the mean arrival-to-finish latency of the recorded requests (all but the first
/// tenth) in cycles and the achieved requests per cycle.
fn open_loop(
    sys: &mut MemorySystem,
    requests: u64,
    gap: f64,
    slots: u64,
    rng: &mut Xoshiro256PlusPlus,
) -> (f64, f64) {
    let warm = requests / 10;
    let mut arrival = 0.0f64;
    let mut done: Vec<MemCompletion> = Vec::new();
    let mut sum = 0.0f64;
    let mut recorded = 0u64;
    let mut last_finish = 0u64;
    let mut first_recorded_arrival = None;
    let mut record = |done: &mut Vec<MemCompletion>, sum: &mut f64, recorded: &mut u64| {
        for c in done.drain(..) {
            last_finish = last_finish.max(c.finish);
            if c.id.0 >= warm {
                *sum += c.finish.saturating_sub(c.arrival) as f64;
                *recorded += 1;
            }
        }
    };
    for n in 0..requests {
        // Exponential inter-arrival: -ln(U) x mean, U in (0, 1].
        let u = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
        arrival += -u.ln() * gap;
        let at = arrival as u64;
        if n == warm {
            first_recorded_arrival = Some(at);
        }
        let req = Request::read((rng.next_u64() % slots) * 64, REQUEST_BYTES, at);
        // Step to the arrival, then offer it until the front end has room.
        sys.advance_until(at.max(sys.now()), &mut done);
        while sys.submit(&req).is_err() {
            let next = sys.next_wake().unwrap_or(sys.now() + 1).max(sys.now() + 1);
            sys.advance_until(next, &mut done);
        }
        record(&mut done, &mut sum, &mut recorded);
    }
    while !sys.is_idle() {
        let next = sys.next_wake().unwrap_or(sys.now() + 1).max(sys.now() + 1);
        sys.advance_until(next, &mut done);
    }
    record(&mut done, &mut sum, &mut recorded);
    let span = last_finish
        .saturating_sub(first_recorded_arrival.unwrap_or(0))
        .max(1) as f64;
    let mean = if recorded > 0 {
        sum / recorded as f64
    } else {
        0.0
    };
    (mean, recorded as f64 / span)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> LoadedLatencyCurve {
        let preset = HbmPreset::builtin(CURVE_PRESET).expect("built-in");
        LoadedLatencyCurve::measure(&preset, &[0.05, 0.5, 0.9], 8_000)
    }

    #[test]
    fn latency_grows_with_load_and_is_deterministic() {
        let c = small();
        let ns: Vec<f64> = c.points.iter().map(|p| p.mean_ns).collect();
        assert!(ns[0] > 20.0 && ns[0] < 200.0, "unloaded {ns:?}");
        assert!(ns[1] > ns[0] && ns[2] > ns[1], "not increasing: {ns:?}");
        // Below saturation what is offered is served.
        for p in &c.points {
            assert!((p.achieved - p.utilisation).abs() < 0.1, "{p:?}");
        }
        assert_eq!(c, small());
    }

    #[test]
    fn delay_interpolates_and_scales_with_pin_rate() {
        let c = small();
        let at = |u| c.queue_delay_ns(u, c.pin_gbps);
        assert_eq!(at(0.0), 0.0);
        assert!((at(0.5) - c.points[1].queue_ns).abs() < 1e-9);
        let mid = at(0.7);
        assert!(mid > at(0.5) && mid < at(0.9));
        assert_eq!(at(2.0), at(0.9));
        assert!((c.queue_delay_ns(0.9, 2.0 * c.pin_gbps) - at(0.9) / 2.0).abs() < 1e-9);
    }
}
