//! `nmcp goldyloc validate`: the GPU model against a concurrent-GEMM measurement file,
//! as a per-GEMM table and aggregate figures, JSON or SVG.

use super::io::{emit, outln, write_file};
use super::{CmdResult, UsageError};
use crate::goldyloc::validate::{self, data, ValidationReport};
use crate::reproduce::plot::grouped;
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::Calibration;
use nmcp_emulator::gpu::h200::{h200_calibration, h200_catalog, H200_TRITON_CONFIGS};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Arguments of `nmcp goldyloc validate`.
#[derive(clap::Args, Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ValidateArgs {
    /// GPU preset the file was measured on (its kernel catalogue and calibration come
    /// with it): h200.
    #[arg(long, default_value = "h200")]
    gpu: String,
    /// Measurement file (the format of ../shared/data/h200/gemm-concurrency.json).
    #[arg(long)]
    data: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write SVG charts (measured against model) into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// How the model launches the kernel that stands for the vendor library (the cuBLAS
    /// rows): persistent (at most one wave of workgroups looping over the tiles, as
    /// cuBLAS launches on Hopper) or tiled (one workgroup per tile, like the Triton rows).
    #[arg(long, value_enum, default_value_t = validate::VendorGrid::Persistent)]
    vendor_grid: validate::VendorGrid,
    /// The model's contention options.
    #[command(flatten)]
    #[serde(flatten)]
    model: super::model_options::ModelOptions,
}

/// The GPU, calibration and catalogue of a preset that has measurements to check.
fn preset(name: &str) -> Result<(GpuConfig, Calibration, Catalog), UsageError> {
    match name {
        "h200" => Ok((GpuConfig::h200(), h200_calibration(), h200_catalog())),
        _ => Err(UsageError(format!(
            "--gpu {name}: validate needs a preset whose kernel catalogue was measured (h200)"
        ))),
    }
}

/// Runs `nmcp goldyloc validate`.
pub fn run(a: &ValidateArgs) -> CmdResult {
    let (mut gpu, mut cal, catalog) = preset(&a.gpu)?;
    a.model.apply(&mut gpu, &mut cal);
    let data = data::read(&a.data)?;
    if data.triton_configs != H200_TRITON_CONFIGS {
        return Err(format!(
            "{}: triton_configs: the file's {} configurations are not the {} preset's catalogue",
            a.data.display(),
            data.triton_configs.len(),
            gpu.name
        )
        .into());
    }
    let report = validate::validate(&gpu, &cal, &catalog, &data, a.vendor_grid)
        .map_err(|e| format!("{}: {e}", a.data.display()))?;
    if let Some(dir) = &a.svg {
        write_svgs(dir, &report)?;
    }
    if a.json {
        emit(&(serde_json::to_string_pretty(&report)? + "\n"))
    } else {
        emit(&table(&report))
    }
}

/// The per-GEMM tables and the aggregate figures.
pub fn table(r: &ValidationReport) -> String {
    let mut out = String::new();
    outln!(
        out,
        "GPU {}: {} GEMMs, measured against model",
        r.gpu,
        r.gemms
    );
    outln!(out, "");
    outln!(
        out,
        "cuBLAS rows (model: its own isolated winner)\n{:<26} {:<11} {:>9} {:>9}  {:>11} {:>11}  {:>7}",
        "GEMM",
        "app",
        "iso ms",
        "model",
        "D/S@16",
        "model",
        "bestCD"
    );
    for c in &r.cublas {
        outln!(
            out,
            "{:<26} {:<11} {:>9.4} {:>9.4}  {:>11.3} {:>11.3}  {:>3}/{:<3}",
            c.gemm,
            c.app,
            c.iso_ms.measured,
            c.iso_ms.model,
            c.default_over_sequential[3].measured,
            c.default_over_sequential[3].model,
            c.best_cd16.0,
            c.best_cd16.1
        );
    }
    outln!(out, "");
    outln!(
        out,
        "Triton rows\n{:<26} {:<11} {:>8} {:>8}  {:>9} {:>9}",
        "GEMM",
        "app",
        "winner",
        "model",
        "GO@16",
        "model"
    );
    for t in &r.triton {
        outln!(
            out,
            "{:<26} {:<11} {:>8} {:>8}  {:>9.3} {:>9.3}",
            t.gemm,
            t.app,
            t.winner.0,
            t.winner.1,
            t.go_gain[3].measured,
            t.go_gain[3].model
        );
    }
    outln!(out, "");
    let i = &r.isolated;
    outln!(
        out,
        "isolated: median |error| {:.1} %, geomean model/measured {:.3}, Spearman {:.3}, winner agreement {:.0} %",
        100.0 * i.median_abs_error,
        i.geomean_ratio,
        i.spearman,
        100.0 * i.winner_agreement
    );
    outln!(
        out,
        "{:<28} {:>8} {:>8} {:>8} {:>8}",
        "",
        "n = 2",
        "4",
        "8",
        "16"
    );
    for (name, m) in [
        ("Default/Sequential measured", &r.default_over_sequential),
        ("GO/Default measured", &r.go_over_default),
        ("GO/D, winners agree, meas.", &r.go_over_default_agreed),
    ] {
        let row = |f: fn(&validate::Pair) -> f64| {
            m.values().fold(String::new(), |mut s, p| {
                let _ = write!(s, " {:>8.3}", f(p));
                s
            })
        };
        outln!(out, "{name:<28}{}", row(|p| p.measured));
        outln!(out, "{:<28}{}", "  model", row(|p| p.model));
    }
    let conc = |f: fn(&validate::Concurrent) -> f64| {
        r.concurrent.values().fold(String::new(), |mut s, c| {
            let _ = write!(s, " {:>8.3}", f(c));
            s
        })
    };
    outln!(
        out,
        "{:<28}{}",
        "n copies/isolated measured",
        conc(|c| c.slowdown.measured)
    );
    outln!(out, "{:<28}{}", "  model", conc(|c| c.slowdown.model));
    outln!(
        out,
        "{:<28}{}",
        "  median |error| of makespan",
        conc(|c| c.median_abs_error)
    );
    outln!(
        out,
        "({} of {} Triton rows have the measured isolated winner in the model)",
        r.agreed_gemms,
        r.triton.len()
    );
    let b = &r.best_cd16;
    outln!(
        out,
        "best CD for 16: measured {:?} (majority {:.0} %), model {:?} (majority {:.0} %), agreement {:.0} %",
        b.measured_hist,
        100.0 * b.measured_majority_share,
        b.model_hist,
        100.0 * b.model_majority_share,
        100.0 * b.agreement
    );
    out
}

/// `validate_concurrency.svg` (Default/Sequential and GO/Default per n, measured and
/// model) and `validate_best_cd16.svg` (the best-CD histograms).
fn write_svgs(dir: &Path, r: &ValidationReport) -> CmdResult {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut groups = Vec::new();
    for (what, m) in [
        ("D/S", &r.default_over_sequential),
        ("GO/D", &r.go_over_default),
    ] {
        for (n, p) in m {
            groups.push((
                format!("{what} n={n}"),
                vec![
                    ("measured".to_string(), p.measured),
                    ("model".to_string(), p.model),
                ],
            ));
        }
    }
    let svg = grouped(
        &format!("{}: concurrency, measured against model (geomeans)", r.gpu),
        "ratio",
        &groups,
    )?;
    write_file(&dir.join("validate_concurrency.svg"), svg.as_bytes())?;
    let cds: Vec<(String, Vec<(String, f64)>)> = data::CDS
        .iter()
        .map(|c| {
            let get =
                |h: &std::collections::BTreeMap<u32, usize>| h.get(c).copied().unwrap_or(0) as f64;
            (
                format!("CD {c}"),
                vec![
                    ("measured".to_string(), get(&r.best_cd16.measured_hist)),
                    ("model".to_string(), get(&r.best_cd16.model_hist)),
                ],
            )
        })
        .collect();
    let svg = grouped(
        &format!("{}: best CD for 16 GEMMs (GEMMs per CD)", r.gpu),
        "GEMMs",
        &cds,
    )?;
    write_file(&dir.join("validate_best_cd16.svg"), svg.as_bytes())?;
    Ok(())
}
