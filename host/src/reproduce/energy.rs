//! The energy section of the report: the dissertation's unevaluated claims (its ch. 9
//! "Power & energy implications") evaluated from the `energy` objects the mechanisms'
//! JSON carries: LAMB step energy on NMC against the ideal GPU, T3's energy per sub-layer
//! under Sequential, T3 and T3-MCA, GOLDYLOC's energy per GEMM set against Default. The
//! dissertation has no number for any of them; where another source publishes a
//! comparable figure it is named in the baseline column, not used as the target.

use serde_json::Value;

use super::figures::{arr, at, geomean, num, FigureError, Headline, Unit};

const CH: &str = "energy";

/// LAMB: joules per step on NMC and on the ideal GPU, and their ratio.
///
/// # Errors
/// `nmcp lamb --json` lacks its `energy` object.
pub fn lamb(doc: &Value) -> Result<Vec<Headline>, FigureError> {
    const W: &str = "lamb JSON";
    let steps = num(doc, W, "steps")?.max(1.0);
    let model = at(doc, W, "model")?.as_str().unwrap_or("?").to_string();
    let nmc = num(doc, W, "energy.nmc.total_j")? / steps;
    let gpu = num(doc, W, "energy.ideal_gpu.total_j")? / steps;
    let cfg = format!("{model}, main engine setup, per step");
    Ok(vec![
        Headline {
            chapter: CH,
            figure: "LAMB step energy on NMC".into(),
            dissertation: None,
            ours: nmc,
            unit: Unit::Joules,
            config: cfg.clone(),
            baseline: format!("ideal GPU at peak {gpu:.3} J"),
        },
        Headline {
            chapter: CH,
            figure: "LAMB step energy, ideal GPU over NMC".into(),
            dissertation: None,
            ours: gpu / nmc,
            unit: Unit::Times,
            config: cfg,
            baseline: "Samsung HBM-PIM (other workloads): system energy -71 %, i.e. 3.4x".into(),
        },
        Headline {
            chapter: CH,
            figure: "ideal GPU's DRAM energy per bit moved".into(),
            dissertation: None,
            ours: num(doc, W, "energy.ideal_gpu.dram_pj_per_interface_bit")?,
            unit: Unit::PjPerBit,
            config: "LAMB's 13 array passes streamed at peak".into(),
            baseline: "core (DRAMsim3 HBM2 IDD) + I/O 1.79 + TSV 0.23 pJ/bit".into(),
        },
    ])
}

/// T3: mean energy per sub-layer (per GPU) of each configuration, and T3-MCA's saving.
///
/// # Errors
/// A row of `nmcp t3 --json` lacks its `energy` object.
pub fn t3(rows: &[Value]) -> Result<Vec<Headline>, FigureError> {
    let mut out = Vec::new();
    let total = |c: &str| -> Result<Vec<f64>, FigureError> {
        rows.iter()
            .filter(|r| r["config"].as_str() == Some(c))
            .map(|r| num(r, "t3 JSON row", "energy.total_j"))
            .collect()
    };
    let seq = total("sequential")?;
    let n = seq.len();
    for (c, name) in [
        ("sequential", "Sequential"),
        ("t3", "T3"),
        ("t3-mca", "T3-MCA"),
    ] {
        let xs = total(c)?;
        if xs.is_empty() {
            continue;
        }
        out.push(Headline {
            chapter: CH,
            figure: format!("T3 sub-layer energy per GPU, {name}, mean"),
            dissertation: None,
            ours: xs.iter().sum::<f64>() / xs.len() as f64,
            unit: Unit::Joules,
            config: format!("{n} sub-layers"),
            baseline: "DRAM from the row's traffic by kind over its time; GPU FLOPs + static"
                .into(),
        });
        if c != "sequential" && xs.len() == n {
            let ratios: Vec<f64> = seq.iter().zip(&xs).map(|(s, x)| s / x).collect();
            out.push(Headline {
                chapter: CH,
                figure: format!("Sequential's energy over {name}'s, geomean"),
                dissertation: None,
                ours: geomean(&ratios).unwrap_or(f64::NAN),
                unit: Unit::Times,
                config: format!("{n} sub-layers"),
                baseline: "dissertation: traffic -22 % (mean) and speedup, no energy".into(),
            });
        }
    }
    Ok(out)
}

/// GOLDYLOC: per scenario, Default's joules over GOLDYLOC's (geomean over GEMM sets),
/// next to its time ratio.
///
/// # Errors
/// `nmcp goldyloc eval --json` lacks its `energy` object.
pub fn goldyloc(doc: &Value, label: &str) -> Result<Vec<Headline>, FigureError> {
    const W: &str = "goldyloc JSON";
    let configs = arr(doc, W, "energy.configs")?;
    let idx = configs
        .iter()
        .position(|c| c.as_str() == Some("GOLDYLOC"))
        .ok_or_else(|| FigureError(format!("{W}: energy.configs has no GOLDYLOC")))?;
    let default = configs
        .iter()
        .position(|c| c.as_str() == Some("Default"))
        .ok_or_else(|| FigureError(format!("{W}: energy.configs has no Default")))?;
    let sets = arr(doc, W, "energy.gemm_sets")?;
    let mut out = Vec::new();
    for s in arr(doc, W, "energy.scenarios")? {
        let n = s["n"].as_u64().unwrap_or(0);
        let j = s["default_over"][idx].as_f64().unwrap_or(f64::NAN);
        let t = s["default_time_over"][idx].as_f64().unwrap_or(f64::NAN);
        // Joules per GEMM set of this scenario, geomean over its sets (static and dynamic
        // power: GPU FLOPs and LLC bytes, DRAM stream, static power and DRAM standby over
        // the configuration's time).
        let joules = |i: usize| {
            let xs: Vec<f64> = sets
                .iter()
                .filter(|g| g["n"].as_u64() == Some(n))
                .filter_map(|g| g["joules"][i].as_f64())
                .collect();
            geomean(&xs).unwrap_or(f64::NAN)
        };
        let (jd, jg) = (joules(default), joules(idx));
        out.push(Headline {
            chapter: CH,
            figure: format!("GOLDYLOC {label}: energy per GEMM set, {n} GEMMs"),
            dissertation: None,
            ours: jg,
            unit: Unit::Joules,
            config: format!("geomean over GEMM sets, {n} available"),
            baseline: format!("Default {jd:.4} J; time ratio {t:.3}x"),
        });
        out.push(Headline {
            chapter: CH,
            figure: format!("GOLDYLOC {label}: Default's energy over GOLDYLOC's, {n} GEMMs"),
            dissertation: None,
            ours: j,
            unit: Unit::Times,
            config: format!("geomean over GEMM sets, {n} available"),
            baseline: format!("time ratio {t:.3}x"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GOLDYLOC's headlines per scenario: the energy per GEMM set (geomean over the
    /// scenario's sets) with Default's beside it and the time ratio, then the ratio.
    #[test]
    fn goldyloc_energy_per_set_is_the_geomean_of_the_scenarios_sets() {
        let doc = serde_json::json!({"energy": {
            "configs": ["Default", "GOLDYLOC"],
            "scenarios": [{"n": 2, "default_over": [1.0, 1.5], "default_time_over": [1.0, 2.0]}],
            "gemm_sets": [
                {"n": 2, "joules": [2.0, 1.0]},
                {"n": 2, "joules": [8.0, 4.0]},
                {"n": 4, "joules": [100.0, 100.0]},
            ],
        }});
        let h = goldyloc(&doc, "FP32").unwrap();
        assert_eq!(h.len(), 2);
        assert!((h[0].ours - 2.0).abs() < 1e-12, "{}", h[0].ours);
        assert_eq!(h[0].baseline, "Default 4.0000 J; time ratio 2.000x");
        assert!((h[1].ours - 1.5).abs() < 1e-12);
    }
}
