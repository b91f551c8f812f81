//! Steps 1-4 of the offline flow: isolated tuning, resource-constrained tuning (GPU/2,
//! GPU/4), the GO kernel per CD among the <= 3 candidates, and profiling of concurrent
//! runs (which CD beats serial execution the most).

use super::cache::key_of;
use super::Context;
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
use nmcp_emulator::gpu::sim::{concurrent_time, isolated_time};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

/// Resource-constraint divisors: GPU, GPU/2, GPU/4.
pub const RC_DIVISORS: [u32; 3] = [1, 2, 4];

/// Tuning and profiling result of one GEMM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunedGemm {
    /// The problem.
    pub shape: GemmShape,
    /// Best catalog kernel per resource configuration (GPU, GPU/2, GPU/4).
    pub rc_best: [u32; 3],
    /// Distinct candidates (catalog indices), the isolated kernel first; this is the
    /// kernel-object map of the GEMM extension.
    pub candidates: Vec<u32>,
    /// Isolated time of the isolated kernel on the full GPU, ns.
    pub t_isolated: f64,
    /// `t_concurrent[cd][c]`: time of `CONCURRENCY_DEGREES[cd + 1]` copies run
    /// concurrently with candidate `c`, ns.
    pub t_concurrent: Vec<Vec<f64>>,
    /// Index into `candidates` of the GO kernel per entry of `CONCURRENCY_DEGREES`.
    pub cd_choice: [u8; 5],
}

impl TunedGemm {
    /// Time of `cd` copies concurrently with the GO kernel for that CD (CD 1: isolated).
    pub fn go_time(&self, cd_index: usize) -> f64 {
        if cd_index == 0 {
            return self.t_isolated;
        }
        let c = usize::from(self.cd_choice.get(cd_index).copied().unwrap_or(0));
        self.t_concurrent
            .get(cd_index - 1)
            .and_then(|v| v.get(c))
            .copied()
            .unwrap_or(f64::INFINITY)
    }

    /// Speedup of running `cd` copies concurrently with GO kernels over running them
    /// back to back with the isolated kernel.
    pub fn speedup(&self, cd_index: usize) -> f64 {
        let cd = f64::from(CONCURRENCY_DEGREES.get(cd_index).copied().unwrap_or(1));
        cd * self.t_isolated / self.go_time(cd_index)
    }

    /// The profiled label for a scenario with `available` GEMMs: the CD (index) with the
    /// largest speedup among those <= available.
    pub fn best_cd_index(&self, available: u32) -> usize {
        let mut best = 0;
        let mut best_s = 1.0;
        for (i, &cd) in CONCURRENCY_DEGREES.iter().enumerate().skip(1) {
            if u32::from(cd) > available {
                break;
            }
            let s = self.speedup(i);
            if s > best_s {
                best = i;
                best_s = s;
            }
        }
        best
    }

    /// The GEMM extension record: kernel map and per-CD choice.
    pub fn to_ext(&self, catalog: &Catalog) -> GemmExt {
        let mut ext = self.shape.to_ext();
        for &c in &self.candidates {
            if let Some(k) = catalog.get(c as usize) {
                let _ = ext.kernels.push(k.meta(self.shape.dtype));
            }
        }
        ext.cd_choice = self.cd_choice;
        ext
    }
}

/// Best catalog kernel for `shape` running alone on `gpu`, with its time.
pub fn best_isolated(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
) -> Option<(u32, f64)> {
    catalog
        .kernels()
        .iter()
        .filter_map(|k| isolated_time(gpu, cal, shape, k).map(|t| (k.index, t)))
        .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)))
}

/// Tunes and profiles one GEMM.
pub fn tune_one(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
) -> Option<TunedGemm> {
    let mut rc_best = [0u32; 3];
    let mut t_isolated = f64::INFINITY;
    for (slot, div) in rc_best.iter_mut().zip(RC_DIVISORS) {
        let g = if div == 1 {
            gpu.clone()
        } else {
            gpu.constrained(div)
        };
        let (k, t) = best_isolated(&g, cal, catalog, shape)?;
        *slot = k;
        if div == 1 {
            t_isolated = t;
        }
    }
    profile(gpu, cal, catalog, shape, rc_best, t_isolated)
}

/// Step 3-4 for given per-RC kernels: GO kernel per CD among the distinct candidates,
/// with the concurrent times that profiling needs.
fn profile(
    gpu: &GpuConfig,
    cal: &Calibration,
    catalog: &Catalog,
    shape: &GemmShape,
    rc_best: [u32; 3],
    t_isolated: f64,
) -> Option<TunedGemm> {
    let mut candidates: Vec<u32> = Vec::new();
    for k in rc_best {
        if !candidates.contains(&k) {
            candidates.push(k);
        }
    }
    let mut t_concurrent = Vec::new();
    let mut cd_choice = [0u8; 5];
    for (i, &cd) in CONCURRENCY_DEGREES.iter().enumerate().skip(1) {
        let times: Vec<f64> = candidates
            .iter()
            .map(|&c| {
                catalog
                    .get(c as usize)
                    .and_then(|k| concurrent_time(gpu, cal, shape, k, u32::from(cd)))
                    .unwrap_or(f64::INFINITY)
            })
            .collect();
        let best = times
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(&b.0)))
            .map_or(0, |(j, _)| j);
        if let Some(slot) = cd_choice.get_mut(i) {
            *slot = u8::try_from(best).unwrap_or(0);
        }
        t_concurrent.push(times);
    }
    Some(TunedGemm {
        shape: *shape,
        rc_best,
        candidates,
        t_isolated,
        t_concurrent,
        cd_choice,
    })
}

#[derive(Serialize)]
struct TuneKey<'a> {
    gpu: &'a GpuConfig,
    cal: &'a Calibration,
    catalog_len: usize,
    shapes: &'a [GemmShape],
    knn: bool,
}

/// One of every `KNN_STRIDE` GEMMs is tuned exhaustively under the KNN shortcut (20 %).
pub const KNN_STRIDE: usize = 5;
/// Neighbours that vote on the preferred resource configuration.
pub const KNN_K: usize = 3;

/// The resource configuration (index into [`RC_DIVISORS`]) a tuned GEMM's GO kernels
/// come from most often over the CDs (ties to the less constrained one).
fn preferred_rc(t: &TunedGemm) -> usize {
    let mut votes = [0usize; 3];
    for &c in t.cd_choice.iter().skip(1) {
        let k = t.candidates.get(usize::from(c)).copied().unwrap_or(0);
        if let Some(rc) = t.rc_best.iter().position(|&r| r == k) {
            if let Some(v) = votes.get_mut(rc) {
                *v += 1;
            }
        }
    }
    argmax_votes(&votes)
}

fn argmax_votes(votes: &[usize; 3]) -> usize {
    let mut best = 0;
    for (i, &v) in votes.iter().enumerate() {
        if votes.get(best).is_some_and(|&b| v > b) {
            best = i;
        }
    }
    best
}

/// KNN point of 7.6.1: (log2 output size, log2 isolated tile area).
fn knn_point(catalog: &Catalog, shape: &GemmShape, iso: u32) -> (f64, f64) {
    let area = catalog
        .get(iso as usize)
        .map_or(1.0, |k| f64::from(k.mt0) * f64::from(k.mt1));
    (
        (f64::from(shape.m) * f64::from(shape.n)).log2(),
        area.log2(),
    )
}

/// The tuning shortcut of 7.6.1: exhaustive tuning for 20 % of the GEMMs; for the rest,
/// isolated tuning only, the preferred RC predicted from the nearest tuned GEMMs in
/// (output size, isolated tile size), and only that RC tuned.
fn tune_knn(ctx: &Context, shapes: &[GemmShape], pb: &indicatif::ProgressBar) -> Vec<TunedGemm> {
    let (gpu, cal, cat) = (&ctx.gpu, &ctx.cal, &ctx.catalog);
    let full: Vec<(usize, TunedGemm)> = shapes
        .par_iter()
        .enumerate()
        .filter(|(i, _)| i % KNN_STRIDE == 0)
        .filter_map(|(i, s)| {
            let r = tune_one(gpu, cal, cat, s).map(|t| (i, t));
            pb.inc(1);
            r
        })
        .collect();
    let points: Vec<((f64, f64), usize)> = full
        .iter()
        .map(|(_, t)| (knn_point(cat, &t.shape, t.rc_best[0]), preferred_rc(t)))
        .collect();
    let rest: Vec<(usize, TunedGemm)> = shapes
        .par_iter()
        .enumerate()
        .filter(|(i, _)| i % KNN_STRIDE != 0)
        .filter_map(|(i, s)| {
            let (iso, t_iso) = best_isolated(gpu, cal, cat, s)?;
            let p = knn_point(cat, s, iso);
            let mut near: Vec<(f64, usize)> = points
                .iter()
                .map(|(q, rc)| ((q.0 - p.0).powi(2) + (q.1 - p.1).powi(2), *rc))
                .collect();
            near.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut votes = [0usize; 3];
            for (_, rc) in near.iter().take(KNN_K) {
                if let Some(v) = votes.get_mut(*rc) {
                    *v += 1;
                }
            }
            let prc = argmax_votes(&votes);
            let mut rc_best = [iso; 3];
            if let (Some(&div), Some(slot)) = (RC_DIVISORS.get(prc), rc_best.get_mut(prc)) {
                if div > 1 {
                    *slot = best_isolated(&gpu.constrained(div), cal, cat, s)?.0;
                }
            }
            let r = profile(gpu, cal, cat, s, rc_best, t_iso).map(|t| (i, t));
            pb.inc(1);
            r
        })
        .collect();
    let mut all: Vec<(usize, TunedGemm)> = full.into_iter().chain(rest).collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, t)| t).collect()
}

/// Tunes and profiles every GEMM (in parallel), cached by a hash of all inputs. GEMMs no
/// catalog kernel can run are left out.
pub fn tune_all(ctx: &Context, shapes: &[GemmShape]) -> Vec<TunedGemm> {
    let key = key_of(
        "tune",
        &TuneKey {
            gpu: &ctx.gpu,
            cal: &ctx.cal,
            catalog_len: ctx.catalog.len(),
            shapes,
            knn: ctx.knn,
        },
    );
    if let Some(c) = &ctx.cache {
        if let Some(v) = c.get::<Vec<TunedGemm>>("tune", key) {
            return v;
        }
    }
    let pb = ctx.bar(shapes.len(), "tuning");
    if ctx.knn {
        let out = tune_knn(ctx, shapes, &pb);
        pb.finish_and_clear();
        if let Some(c) = &ctx.cache {
            c.put("tune", key, &out);
        }
        return out;
    }
    let out: Vec<TunedGemm> = shapes
        .par_iter()
        .filter_map(|s| {
            let r = tune_one(&ctx.gpu, &ctx.cal, &ctx.catalog, s);
            pb.inc(1);
            r
        })
        .collect();
    pb.finish_and_clear();
    if let Some(c) = &ctx.cache {
        c.put("tune", key, &out);
    }
    out
}
