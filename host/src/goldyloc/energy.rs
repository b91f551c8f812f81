//! GOLDYLOC's throughput gain turned into energy, per GEMM set (n copies of one GEMM)
//! and configuration: every configuration does the same FLOPs and moves at least the same
//! compulsory bytes (A, B and C once each, through the LLC and the DRAM), so what differs
//! is the time, paid for in GPU static power and DRAM standby and refresh. The memory is
//! `lamb-ch6`'s (four HBM2 stacks, the MI100-class device) and the parameters its
//! `[energy]` section's. The dissertation does not evaluate energy.

use nmcp_emulator::energy::{
    CommandEnergy, DramActivity, DramEnergy, EnergyReport, GpuEnergy, GpuWork, StreamBytes,
};
use nmcp_emulator::hbm::HbmPreset;
use serde::Serialize;

use super::eval::{EvalReport, CONFIGS};
use crate::t3::geomean;

/// The memory preset GOLDYLOC's energy is computed on.
pub const GOLDYLOC_ENERGY_PRESET: &str = "lamb-ch6";

/// One GEMM set's energy per configuration.
#[derive(Debug, Clone, Serialize)]
pub struct GemmSetEnergy {
    /// Application.
    pub app: String,
    /// `M_N_K_T1T2` label.
    pub gemm: String,
    /// GEMMs in the set.
    pub n: u32,
    /// Joules per configuration ([`CONFIGS`] order).
    pub joules: Vec<f64>,
    /// Default's joules over each configuration's.
    pub default_over: Vec<f64>,
}

/// Per scenario (available GEMMs), the geomean of Default's joules over each
/// configuration's.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioEnergy {
    /// Available GEMMs.
    pub n: u32,
    /// Geomean of Default's joules over each configuration's ([`CONFIGS`] order).
    pub default_over: Vec<f64>,
    /// Geomean of Default's time over each configuration's, for comparison.
    pub default_time_over: Vec<f64>,
}

/// The `energy` object of `nmcp goldyloc eval --json`.
#[derive(Debug, Clone, Serialize)]
pub struct GoldylocEnergy {
    /// The memory preset.
    pub preset: &'static str,
    /// Configuration names.
    pub configs: Vec<&'static str>,
    /// Per scenario.
    pub scenarios: Vec<ScenarioEnergy>,
    /// Per GEMM set.
    pub gemm_sets: Vec<GemmSetEnergy>,
}

/// M, N, K, batch and bytes per element of a `M_N_K_T1T2[_bB][_bf16|_f32]` label.
pub fn parse_label(label: &str) -> Option<(u64, u64, u64, u64, u64)> {
    let mut parts = label.split('_');
    let mut dim = || parts.next()?.parse::<u64>().ok();
    let (m, n, k) = (dim()?, dim()?, dim()?);
    let rest: Vec<&str> = label.split('_').skip(4).collect();
    let batch = rest
        .iter()
        .find_map(|p| p.strip_prefix('b').and_then(|b| b.parse().ok()))
        .unwrap_or(1);
    let bytes = if rest.contains(&"f32") { 4 } else { 2 };
    Some((m, n, k, batch, bytes))
}

/// The energy of `sets` GEMMs of `label` taking `seconds`.
pub fn set_energy(
    preset: &HbmPreset,
    label: &str,
    sets: u32,
    seconds: f64,
) -> Option<EnergyReport> {
    let (m, n, k, batch, bytes) = parse_label(label)?;
    let copies = u64::from(sets) * batch;
    let flops = 2.0 * (m * n * k) as f64 * copies as f64;
    let (a, b, c) = (m * k * bytes, k * n * bytes, m * n * bytes);
    let stream = StreamBytes {
        read: (a + b) * copies,
        write: c * copies,
        update: 0,
    };
    let cycles = (seconds / (preset.organisation.tck_ns * 1e-9)).ceil() as u64;
    let activity = DramActivity::streaming(preset, stream, cycles);
    let mut r = EnergyReport::dram(&DramEnergy::of(&activity, &CommandEnergy::of(preset)));
    let (f16, f32) = if bytes == 4 {
        (0.0, flops)
    } else {
        (flops, 0.0)
    };
    r.add_gpu(&GpuEnergy::of(
        &GpuWork {
            flops_f16: f16,
            flops_f32: f32,
            llc_bytes: ((a + b + c) * copies) as f64,
            seconds,
        },
        &preset.energy,
    ));
    Some(r)
}

/// The energy of every GEMM set of `report`.
pub fn goldyloc_energy(report: &EvalReport) -> Result<GoldylocEnergy, String> {
    let preset = HbmPreset::builtin(GOLDYLOC_ENERGY_PRESET).map_err(|e| e.to_string())?;
    let default = CONFIGS.iter().position(|c| *c == "Default").unwrap_or(1);
    let mut sets = Vec::with_capacity(report.gemms.len());
    for g in &report.gemms {
        let joules = g
            .time_ns
            .iter()
            .map(|t| {
                set_energy(&preset, &g.gemm, g.n, t * 1e-9)
                    .map(|e| e.total_j)
                    .ok_or_else(|| format!("GEMM label {:?}: not M_N_K_T1T2", g.gemm))
            })
            .collect::<Result<Vec<f64>, String>>()?;
        let d = joules.get(default).copied().unwrap_or(f64::NAN);
        sets.push(GemmSetEnergy {
            app: g.app.clone(),
            gemm: g.gemm.clone(),
            n: g.n,
            default_over: joules.iter().map(|j| d / j).collect(),
            joules,
        });
    }
    let mut ns: Vec<u32> = sets.iter().map(|s| s.n).collect();
    ns.sort_unstable();
    ns.dedup();
    let scenarios = ns
        .iter()
        .map(|&n| {
            let of = |i: usize| {
                sets.iter()
                    .filter(move |s| s.n == n)
                    .map(move |s| s.default_over[i])
            };
            let times = |i: usize| {
                report.gemms.iter().filter(move |g| g.n == n).map(move |g| {
                    g.time_ns.get(default).copied().unwrap_or(f64::NAN)
                        / g.time_ns.get(i).copied().unwrap_or(f64::NAN)
                })
            };
            ScenarioEnergy {
                n,
                default_over: (0..CONFIGS.len())
                    .map(|i| geomean(of(i)).unwrap_or(f64::NAN))
                    .collect(),
                default_time_over: (0..CONFIGS.len())
                    .map(|i| geomean(times(i)).unwrap_or(f64::NAN))
                    .collect(),
            }
        })
        .collect();
    Ok(GoldylocEnergy {
        preset: GOLDYLOC_ENERGY_PRESET,
        configs: CONFIGS.to_vec(),
        scenarios,
        gemm_sets: sets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_and_a_faster_set_costs_less() {
        assert_eq!(
            parse_label("1024_4096_1024_01"),
            Some((1024, 4096, 1024, 1, 2))
        );
        assert_eq!(parse_label("64_64_64_10_b8_f32"), Some((64, 64, 64, 8, 4)));
        assert_eq!(parse_label("64_x_64_00"), None);
        let p = HbmPreset::builtin(GOLDYLOC_ENERGY_PRESET).unwrap();
        let slow = set_energy(&p, "1024_4096_1024_01", 4, 2e-3).unwrap();
        let fast = set_energy(&p, "1024_4096_1024_01", 4, 1e-3).unwrap();
        // Same FLOPs and bytes: the difference is static and standby power over 1 ms.
        assert_eq!(
            slow.components_j["gpu_compute"],
            fast.components_j["gpu_compute"]
        );
        let static_w = p.energy.gpu_static_w;
        let diff = slow.total_j - fast.total_j;
        assert!(diff > static_w * 1e-3, "{diff}");
    }
}
