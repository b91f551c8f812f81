//! `nmcp goldyloc validate`: the GPU model against concurrent-GEMM measurements of a real
//! GPU (a file in the format of `../shared/data/h200/gemm-concurrency.json`): isolated
//! times of a kernel catalogue, Default over Sequential, the GO kernel's gain and the
//! best CD for 16 GEMMs, measured against the model, per GEMM and in aggregate.
//!
//! The model runs every GEMM of the file through the emulator's GPU simulation
//! (`nmcp_emulator::gpu::sim`): isolated, n copies on separate queues, n copies one after
//! the other on one queue, and 16 in rounds of c with a barrier between rounds, as the
//! measurements were taken. The vendor library is not modelled: the model's own isolated
//! winner over the catalogue stands for it in the cuBLAS comparisons.

pub mod data;

use super::geomean;
use data::{CublasRow, Dataset, TritonRow, CDS, NS};
use nmcp_emulator::gpu::catalog::{Catalog, CatalogKernel};
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
use nmcp_emulator::gpu::search::best_isolated;
use nmcp_emulator::gpu::sim::{concurrent_time, isolated_time, sequential_time};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::BTreeMap;

/// Measured and modelled value of one figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pair {
    /// From the file.
    pub measured: f64,
    /// From the model.
    pub model: f64,
}

/// Isolated agreement over the Triton rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Isolated {
    /// Median over every GEMM x configuration of |model - measured| / measured.
    pub median_abs_error: f64,
    /// Mean over GEMMs of the Spearman rank correlation of the configurations' times.
    pub spearman: f64,
    /// Share of GEMMs whose modelled isolated winner is the measured one.
    pub winner_agreement: f64,
    /// Geomean over every GEMM x configuration of model / measured.
    pub geomean_ratio: f64,
}

/// Concurrent agreement at one n over the Triton rows: every configuration run as n
/// concurrent copies, the quantity the GO kernel's gain is a ratio of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Concurrent {
    /// Median over every GEMM x configuration of |model - measured| / measured makespan.
    pub median_abs_error: f64,
    /// Geomean over every GEMM x configuration of the makespan of n copies over the
    /// isolated time (the concurrency slowdown; n when copies serialise fully).
    pub slowdown: Pair,
}

/// Best CD for 16 GEMMs over the cuBLAS rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestCd16 {
    /// How many GEMMs each CD is best for, measured.
    pub measured_hist: BTreeMap<u32, usize>,
    /// The same, modelled.
    pub model_hist: BTreeMap<u32, usize>,
    /// Share of the most common measured best CD.
    pub measured_majority_share: f64,
    /// Share of the most common modelled best CD.
    pub model_majority_share: f64,
    /// Share of GEMMs whose modelled best CD is the measured one.
    pub agreement: f64,
}

/// The model on one cuBLAS row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CublasModel {
    /// The GEMM's label.
    pub gemm: String,
    /// Its network.
    pub app: String,
    /// The model's isolated winner (the stand-in for cuBLAS).
    pub kernel: String,
    /// Isolated time, ms.
    pub iso_ms: Pair,
    /// Sequential over Default at n = 2, 4, 8, 16.
    pub default_over_sequential: [Pair; 4],
    /// 16 GEMMs in rounds of c = 1, 2, 4, 8, 16, modelled, ms.
    pub model_cd16_ms: [f64; 5],
    /// Best CD for 16.
    pub best_cd16: (u32, u32),
}

/// The model on one Triton row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TritonModel {
    /// The GEMM's label.
    pub gemm: String,
    /// Its network.
    pub app: String,
    /// Modelled isolated time of each configuration, ms.
    pub model_iso_ms: Vec<f64>,
    /// Isolated winner (configuration index), measured and modelled.
    pub winner: (usize, usize),
    /// GO kernel over the isolated winner, both n-concurrent, at n = 2, 4, 8, 16.
    pub go_gain: [Pair; 4],
    /// The modelled GO kernel at n = 2, 4, 8, 16.
    pub model_go: [usize; 4],
    /// Modelled makespan of n concurrent copies of each configuration, ms, at n = 2, 4,
    /// 8, 16.
    pub model_conc_ms: [Vec<f64>; 4],
}

/// Everything `validate` reports (its JSON form has the keys issue 39 lists).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationReport {
    /// The GPU preset.
    pub gpu: String,
    /// GEMMs in the file (the larger of its cuBLAS and Triton row counts).
    pub gemms: usize,
    /// Isolated agreement.
    pub isolated: Isolated,
    /// Geomeans of Sequential over Default (cuBLAS rows), keyed by n.
    pub default_over_sequential: BTreeMap<u32, Pair>,
    /// Geomeans of `go_gain` (Triton rows), keyed by n.
    pub go_over_default: BTreeMap<u32, Pair>,
    /// `go_over_default` over only the Triton rows whose modelled isolated winner is the
    /// measured one, keyed by n: the GO kernel's gain is a ratio to the isolated winner,
    /// so where the model picks another near-tie winner the gain measures a different
    /// kernel; this subset separates the concurrency model from that choice.
    pub go_over_default_agreed: BTreeMap<u32, Pair>,
    /// Triton rows in `go_over_default_agreed`.
    pub agreed_gemms: usize,
    /// Concurrent makespans of every configuration (Triton rows), keyed by n.
    pub concurrent: BTreeMap<u32, Concurrent>,
    /// Best CD for 16 GEMMs.
    pub best_cd16: BestCd16,
    /// Per cuBLAS row.
    pub cublas: Vec<CublasModel>,
    /// Per Triton row.
    pub triton: Vec<TritonModel>,
}

/// A run of the model that found no resident kernel.
fn no_kernel(what: &str, shape: &GemmShape) -> String {
    format!("{shape}: no catalogue kernel can run it ({what})")
}

const NS_PER_MS: f64 = 1e6;

/// How the kernel standing for the vendor library (the cuBLAS rows) is launched.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VendorGrid {
    /// A persistent grid: at most one wave of workgroups, each looping over output tiles
    /// (`KernelCost::persistent`), as cuBLAS launches its GEMMs on Hopper.
    #[default]
    Persistent,
    /// One workgroup per output tile, as the Triton rows' kernel.
    Tiled,
}

/// Runs the model on every row of `data` and compares.
///
/// # Errors
/// A GEMM no catalogue kernel can run.
pub fn validate(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    data: &Dataset,
    vendor: VendorGrid,
) -> Result<ValidationReport, String> {
    let vendor_cal = Calibration {
        persistent_grid: vendor == VendorGrid::Persistent,
        ..*cal
    };
    let cublas = data
        .cublas
        .par_iter()
        .map(|r| model_cublas(gpu, &vendor_cal, catalog, r))
        .collect::<Result<Vec<_>, _>>()?;
    let triton = data
        .triton
        .par_iter()
        .map(|r| model_triton(gpu, cal, catalog, r))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(summarise(gpu, data, cublas, triton))
}

fn model_cublas(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    r: &CublasRow,
) -> Result<CublasModel, String> {
    let s = &r.shape;
    let (i, iso) = best_isolated(gpu, cal, catalog, s).ok_or_else(|| no_kernel("isolated", s))?;
    let k = *catalog
        .get(i as usize)
        .ok_or_else(|| no_kernel("isolated", s))?;
    let conc =
        |n: u32| concurrent_time(gpu, cal, s, &k, n).ok_or_else(|| no_kernel("concurrent", s));
    let seq =
        |n: u32| sequential_time(gpu, cal, s, &k, n).ok_or_else(|| no_kernel("sequential", s));
    let mut dos = [Pair {
        measured: 0.0,
        model: 0.0,
    }; 4];
    let mut conc_ns = [0.0; 4];
    let mut seq_ns = [0.0; 4];
    for (j, &n) in NS.iter().enumerate() {
        conc_ns[j] = conc(n)?;
        seq_ns[j] = seq(n)?;
        dos[j] = Pair {
            measured: r.seq_ms[j] / r.conc_ms[j],
            model: seq_ns[j] / conc_ns[j],
        };
    }
    // Rounds of CD c under the group barrier are 16 / c back-to-back runs of c copies:
    // the concurrent times above (CD 1 is Sequential's 16).
    let mut cd16 = [0.0; 5];
    for (j, &c) in CDS.iter().enumerate() {
        cd16[j] = match NS.iter().position(|&n| n == c) {
            _ if c == 1 => seq_ns[3],
            Some(i) => f64::from(16 / c) * conc_ns[i],
            None => f64::from(16 / c) * conc(c)?,
        } / NS_PER_MS;
    }
    Ok(CublasModel {
        gemm: s.to_string(),
        app: r.app.clone(),
        kernel: k.name(),
        iso_ms: Pair {
            measured: r.iso_ms,
            model: iso / NS_PER_MS,
        },
        default_over_sequential: dos,
        model_cd16_ms: cd16,
        best_cd16: (r.best_cd16, best_cd(&cd16)),
    })
}

/// The fastest CD of `times` (in [`CDS`] order), the larger CD on a tie.
fn best_cd(times: &[f64; 5]) -> u32 {
    let mut best = 0;
    for (j, t) in times.iter().enumerate() {
        if *t <= times[best] {
            best = j;
        }
    }
    CDS[best]
}

/// Index of the smallest value (the first on a tie).
fn argmin(xs: &[f64]) -> usize {
    xs.iter()
        .enumerate()
        .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(&b.0)))
        .map_or(0, |(i, _)| i)
}

fn model_triton(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    r: &TritonRow,
) -> Result<TritonModel, String> {
    let s = &r.shape;
    let kernels: &[CatalogKernel] = catalog.kernels();
    let iso = kernels
        .iter()
        .map(|k| isolated_time(gpu, cal, s, k).ok_or_else(|| no_kernel(&k.name(), s)))
        .collect::<Result<Vec<_>, _>>()?;
    let winner = argmin(&iso);
    let mut go_gain = [Pair {
        measured: 0.0,
        model: 0.0,
    }; 4];
    let mut model_go = [0; 4];
    let mut model_conc_ms: [Vec<f64>; 4] = Default::default();
    for (j, &n) in NS.iter().enumerate() {
        let conc = kernels
            .iter()
            .map(|k| concurrent_time(gpu, cal, s, k, n).ok_or_else(|| no_kernel(&k.name(), s)))
            .collect::<Result<Vec<_>, _>>()?;
        let go = argmin(&conc);
        model_go[j] = go;
        go_gain[j] = Pair {
            measured: r.go_gain[j],
            model: conc[winner] / conc[go],
        };
        model_conc_ms[j] = conc.iter().map(|t| t / NS_PER_MS).collect();
    }
    Ok(TritonModel {
        gemm: s.to_string(),
        app: r.app.clone(),
        model_iso_ms: iso.iter().map(|t| t / NS_PER_MS).collect(),
        winner: (argmin(&r.iso_ms), winner),
        go_gain,
        model_go,
        model_conc_ms,
    })
}

/// Ranks (1-based, ties averaged).
fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &t in &idx[i..=j] {
            r[t] = avg;
        }
        i = j + 1;
    }
    r
}

/// Spearman's rank correlation (Pearson's on the ranks); 0 when either side is constant.
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len().min(rb.len());
    if n < 2 {
        return 0.0;
    }
    let mean = |r: &[f64]| r.iter().take(n).sum::<f64>() / n as f64;
    let (ma, mb) = (mean(&ra), mean(&rb));
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb).take(n) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma) * (x - ma);
        sbb += (y - mb) * (y - mb);
    }
    if saa <= 0.0 || sbb <= 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let m = xs.len() / 2;
    if xs.len() % 2 == 1 {
        xs[m]
    } else {
        (xs[m - 1] + xs[m]) / 2.0
    }
}

fn share(count: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        count as f64 / of as f64
    }
}

fn majority(hist: &BTreeMap<u32, usize>, of: usize) -> f64 {
    share(hist.values().copied().max().unwrap_or(0), of)
}

fn summarise(
    gpu: &GpuConfig,
    data: &Dataset,
    cublas: Vec<CublasModel>,
    triton: Vec<TritonModel>,
) -> ValidationReport {
    let mut errors = Vec::new();
    let mut ratios = Vec::new();
    let mut rho = Vec::new();
    for (row, m) in data.triton.iter().zip(&triton) {
        for (meas, model) in row.iso_ms.iter().zip(&m.model_iso_ms) {
            errors.push((model - meas).abs() / meas);
            ratios.push(model / meas);
        }
        rho.push(spearman(&row.iso_ms, &m.model_iso_ms));
    }
    let isolated = Isolated {
        median_abs_error: median(errors),
        spearman: if rho.is_empty() {
            0.0
        } else {
            rho.iter().sum::<f64>() / rho.len() as f64
        },
        winner_agreement: share(
            triton.iter().filter(|t| t.winner.0 == t.winner.1).count(),
            triton.len(),
        ),
        geomean_ratio: geomean(ratios),
    };
    let pair_geomean = |pairs: Vec<Pair>| Pair {
        measured: geomean(pairs.iter().map(|p| p.measured)),
        model: geomean(pairs.iter().map(|p| p.model)),
    };
    let mut default_over_sequential = BTreeMap::new();
    let mut go_over_default = BTreeMap::new();
    let mut go_over_default_agreed = BTreeMap::new();
    let agreed: Vec<&TritonModel> = triton.iter().filter(|t| t.winner.0 == t.winner.1).collect();
    for (j, &n) in NS.iter().enumerate() {
        default_over_sequential.insert(
            n,
            pair_geomean(
                cublas
                    .iter()
                    .map(|c| c.default_over_sequential[j])
                    .collect(),
            ),
        );
        go_over_default.insert(
            n,
            pair_geomean(triton.iter().map(|t| t.go_gain[j]).collect()),
        );
        go_over_default_agreed.insert(
            n,
            pair_geomean(agreed.iter().map(|t| t.go_gain[j]).collect()),
        );
    }
    let mut concurrent = BTreeMap::new();
    for (j, &n) in NS.iter().enumerate() {
        let mut errors = Vec::new();
        let (mut meas, mut model) = (Vec::new(), Vec::new());
        for (row, m) in data.triton.iter().zip(&triton) {
            for (c, (mc, oc)) in row.conc_ms[j].iter().zip(&m.model_conc_ms[j]).enumerate() {
                errors.push((oc - mc).abs() / mc);
                if let (Some(mi), Some(oi)) = (row.iso_ms.get(c), m.model_iso_ms.get(c)) {
                    meas.push(mc / mi);
                    model.push(oc / oi);
                }
            }
        }
        concurrent.insert(
            n,
            Concurrent {
                median_abs_error: median(errors),
                slowdown: Pair {
                    measured: geomean(meas),
                    model: geomean(model),
                },
            },
        );
    }
    let mut measured_hist = BTreeMap::new();
    let mut model_hist = BTreeMap::new();
    for c in &cublas {
        *measured_hist.entry(c.best_cd16.0).or_insert(0) += 1;
        *model_hist.entry(c.best_cd16.1).or_insert(0) += 1;
    }
    let best_cd16 = BestCd16 {
        measured_majority_share: majority(&measured_hist, cublas.len()),
        model_majority_share: majority(&model_hist, cublas.len()),
        agreement: share(
            cublas
                .iter()
                .filter(|c| c.best_cd16.0 == c.best_cd16.1)
                .count(),
            cublas.len(),
        ),
        measured_hist,
        model_hist,
    };
    ValidationReport {
        gpu: gpu.name.clone(),
        gemms: data.cublas.len().max(data.triton.len()),
        isolated,
        default_over_sequential,
        go_over_default,
        go_over_default_agreed,
        agreed_gemms: agreed.len(),
        concurrent,
        best_cd16,
        cublas,
        triton,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_a_reversed_order_is_minus_one() {
        assert!((spearman(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]) + 1.0).abs() < 1e-12);
        assert!((spearman(&[1.0, 2.0, 3.0], &[10.0, 20.0, 35.0]) - 1.0).abs() < 1e-12);
        assert_eq!(ranks(&[5.0, 1.0, 5.0]), vec![2.5, 1.0, 2.5]);
    }

    #[test]
    fn best_cd_prefers_the_larger_cd_on_a_tie() {
        assert_eq!(best_cd(&[5.0, 4.0, 3.0, 3.0, 3.0]), 16);
        assert_eq!(best_cd(&[1.0, 4.0, 3.0, 3.0, 3.0]), 1);
    }
}
