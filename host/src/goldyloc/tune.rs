//! Steps 1-4 of the offline flow: isolated tuning, resource-constrained tuning (GPU/2,
//! GPU/4), the GO kernel per CD among the <= 3 candidates, and profiling of concurrent
//! runs (which CD beats serial execution the most).

use super::cache::key_of;
use super::Context;
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_emulator::gpu::config::GpuConfig;
use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
pub use nmcp_emulator::gpu::search::{best_isolated, ranked_isolated};
use nmcp_emulator::gpu::sim::{concurrent_time, rounds_time};
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

use crate::checkpoint::{CheckpointError, Session};

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
    /// Under head-change CD semantics (`Context::release_on_dispatch`): time of
    /// [`ROUNDS_TOTAL`] copies in rounds of each entry of `CONCURRENCY_DEGREES` with that
    /// CD's GO kernel, the next round starting when the current one has placed all its
    /// workgroups, ns. Empty under the group barrier (rounds are then back-to-back
    /// `t_concurrent` runs). Always serialised: tuning checkpoints are postcard, which
    /// cannot skip a field.
    #[serde(default)]
    pub t_rounds: Vec<f64>,
}

/// GEMMs the head-change labels are profiled with (the training label's "16 available").
pub const ROUNDS_TOTAL: u32 = 16;

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
        if let Some(t) = self.t_rounds.get(cd_index) {
            return f64::from(ROUNDS_TOTAL) * self.t_isolated / t;
        }
        let cd = f64::from(CONCURRENCY_DEGREES.get(cd_index).copied().unwrap_or(1));
        cd * self.t_isolated / self.go_time(cd_index)
    }

    /// The profiled label for a scenario with `available` GEMMs: the CD (index) with the
    /// largest speedup among those <= available.
    pub fn best_cd_index(&self, available: u32) -> usize {
        let mut best = 0;
        let mut best_s = self.speedup(0);
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

/// Band within which a runner-up counts as a near-tie of the tuned winner
/// (`TuneSummary::near_tie_gemms`): about the run-to-run variation of a GPU kernel's
/// measured time, so a tuner measuring real hardware could not tell the two apart.
pub const NEAR_TIE_BAND: f64 = 0.01;

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
        t_rounds: Vec::new(),
    })
}

#[derive(Serialize)]
struct TuneKey<'a> {
    gpu: &'a GpuConfig,
    cal: &'a Calibration,
    catalog_len: usize,
    shapes: &'a [GemmShape],
    knn: bool,
    #[serde(skip_serializing_if = "is_false")]
    release_on_dispatch: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Adds the head-change rounds profile ([`TunedGemm::t_rounds`]) to every tuned GEMM.
fn profile_rounds(ctx: &Context, tuned: &mut [TunedGemm]) {
    tuned.par_iter_mut().for_each(|t| {
        t.t_rounds = CONCURRENCY_DEGREES
            .iter()
            .enumerate()
            .map(|(i, &cd)| {
                let c = usize::from(t.cd_choice.get(i).copied().unwrap_or(0));
                t.candidates
                    .get(c)
                    .and_then(|&k| ctx.catalog.get(k as usize))
                    .and_then(|k| {
                        rounds_time(
                            &ctx.gpu,
                            &ctx.cal,
                            &t.shape,
                            k,
                            u32::from(cd),
                            ROUNDS_TOTAL,
                            true,
                        )
                    })
                    .unwrap_or(f64::INFINITY)
            })
            .collect();
    });
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
fn tune_knn(
    ctx: &Context,
    shapes: &[GemmShape],
    pb: &indicatif::ProgressBar,
    units: &mut Units<'_>,
) -> Result<Vec<TunedGemm>, CheckpointError> {
    let (gpu, cal, cat) = (&ctx.gpu, &ctx.cal, &ctx.catalog);
    let exhaustive: Vec<(usize, &GemmShape)> = shapes
        .iter()
        .enumerate()
        .filter(|(i, _)| i % KNN_STRIDE == 0)
        .collect();
    let full = units.run(&exhaustive, |s| {
        let r = tune_one(gpu, cal, cat, s);
        pb.inc(1);
        r
    })?;
    let points: Vec<((f64, f64), usize)> = full
        .iter()
        .map(|(_, t)| (knn_point(cat, &t.shape, t.rc_best[0]), preferred_rc(t)))
        .collect();
    let predicted: Vec<(usize, &GemmShape)> = shapes
        .iter()
        .enumerate()
        .filter(|(i, _)| i % KNN_STRIDE != 0)
        .collect();
    let rest = units.run(&predicted, |s| {
        let r = (|| {
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
            profile(gpu, cal, cat, s, rc_best, t_iso)
        })();
        pb.inc(1);
        r
    })?;
    let mut all: Vec<(usize, TunedGemm)> = full.into_iter().chain(rest).collect();
    all.sort_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, t)| t).collect())
}

/// GEMMs per checkpoint unit of the tuning step (a fraction of a second of tuning).
pub const CHUNK: usize = 8;

/// The tuning step's checkpoint units: chunks of [`CHUNK`] GEMMs, numbered in the order
/// they are tuned (with `--knn`: the exhaustively tuned GEMMs' chunks, then the rest's).
/// Without a checkpoint session, every chunk is simply tuned.
struct Units<'a> {
    session: Option<&'a Mutex<Session>>,
    next: u32,
}

/// A chunk's result: each GEMM's index in the shape list and its tuning (GEMMs no catalog
/// kernel can run are left out).
type Chunk = Vec<(usize, TunedGemm)>;

impl Units<'_> {
    /// Tunes `items` (index, shape) with `f` chunk by chunk (each chunk's GEMMs in
    /// parallel), loading chunks a resumed checkpoint holds and recording the others.
    fn run<F>(&mut self, items: &[(usize, &GemmShape)], f: F) -> Result<Chunk, CheckpointError>
    where
        F: Fn(&GemmShape) -> Option<TunedGemm> + Sync,
    {
        let tune = |c: &[(usize, &GemmShape)]| -> Chunk {
            c.par_iter()
                .filter_map(|&(i, s)| f(s).map(|t| (i, t)))
                .collect()
        };
        let Some(session) = self.session else {
            self.next += items.len().div_ceil(CHUNK) as u32;
            return Ok(tune(items));
        };
        let mut out = Vec::new();
        for c in items.chunks(CHUNK) {
            let unit = self.next;
            self.next += 1;
            let loaded: Option<Chunk> = lock(session).get(unit)?;
            let done = match loaded {
                Some(d) => d,
                None => {
                    let d = tune(c);
                    lock(session).put(unit, &d)?;
                    d
                }
            };
            out.extend(done);
        }
        Ok(out)
    }
}

fn lock(s: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Checkpoint units of tuning `n` shapes (with or without the KNN shortcut).
fn unit_count(n: usize, knn: bool) -> u32 {
    let chunks = |k: usize| k.div_ceil(CHUNK);
    let total = if knn {
        let exhaustive = n.div_ceil(KNN_STRIDE);
        chunks(exhaustive) + chunks(n - exhaustive)
    } else {
        chunks(n)
    };
    u32::try_from(total).unwrap_or(u32::MAX)
}

/// Tunes and profiles every GEMM (in parallel), cached by a hash of all inputs. GEMMs no
/// catalog kernel can run are left out. (No checkpoints: see [`tune_all_checkpointed`].)
pub fn tune_all(ctx: &Context, shapes: &[GemmShape]) -> Vec<TunedGemm> {
    tune_all_with(ctx, shapes, None).unwrap_or_default()
}

/// [`tune_all`] under the process's checkpoint request (`--checkpoint-dir`, `nmcp
/// resume`): when the result is not cached, the tuning is a list of units (chunks of
/// [`CHUNK`] GEMMs) written to the checkpoint every `--checkpoint-every` chunks, and a
/// resumed run loads the finished chunks instead of tuning them again. The result is the
/// same as an uninterrupted run's (each GEMM's tuning is a pure function of its inputs).
///
/// # Errors
/// The checkpoint cannot be written, or the one resumed does not fit this run.
pub fn tune_all_checkpointed(
    ctx: &Context,
    shapes: &[GemmShape],
) -> Result<Vec<TunedGemm>, CheckpointError> {
    let session = Session::start("goldyloc-tune", unit_count(shapes.len(), ctx.knn))?;
    let out = tune_all_with(ctx, shapes, session.as_ref())?;
    if let Some(s) = &session {
        lock(s).write()?;
    }
    Ok(out)
}

fn tune_all_with(
    ctx: &Context,
    shapes: &[GemmShape],
    session: Option<&Mutex<Session>>,
) -> Result<Vec<TunedGemm>, CheckpointError> {
    let key = key_of(
        "tune",
        &TuneKey {
            gpu: &ctx.gpu,
            cal: &ctx.cal,
            catalog_len: ctx.catalog.len(),
            shapes,
            knn: ctx.knn,
            release_on_dispatch: ctx.release_on_dispatch,
        },
    );
    if let Some(c) = &ctx.cache {
        if let Some(v) = c.get::<Vec<TunedGemm>>("tune", key) {
            return Ok(v);
        }
    }
    let pb = ctx.bar(shapes.len(), "tuning");
    let mut units = Units { session, next: 0 };
    let out = if ctx.knn {
        tune_knn(ctx, shapes, &pb, &mut units)?
    } else {
        let all: Vec<(usize, &GemmShape)> = shapes.iter().enumerate().collect();
        units
            .run(&all, |s| {
                let r = tune_one(&ctx.gpu, &ctx.cal, &ctx.catalog, s);
                pb.inc(1);
                r
            })?
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    };
    pb.finish_and_clear();
    let mut out = out;
    if ctx.release_on_dispatch {
        profile_rounds(ctx, &mut out);
    }
    if let Some(c) = &ctx.cache {
        c.put("tune", key, &out);
    }
    Ok(out)
}

/// The stricter resource constraints of 7.6.3 (GPU/8, GPU/16), studied next to the GO
/// library's GPU, GPU/2 and GPU/4 (the dissertation: "gave little benefit").
pub const STRICT_RC_DIVISORS: [u32; 2] = [8, 16];

/// What adding GPU/8 and GPU/16 candidates does to one concurrency degree, from the
/// profiled concurrent times (offline, as step 3 chooses GO kernels; not run through the
/// CP, whose kernel-object map holds at most three kernels).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrictRcRow {
    /// Concurrency degree.
    pub cd: u8,
    /// Geomean over the GEMMs of `cd x isolated time / concurrent time` with the GO kernel
    /// among the GPU, GPU/2 and GPU/4 kernels (what the GO library holds).
    pub speedup_base: f64,
    /// The same with the GPU/8 and GPU/16 kernels as further candidates.
    pub speedup_strict: f64,
    /// Share of the GEMMs whose best candidate at this CD is a GPU/8 or GPU/16 kernel
    /// (faster than every base candidate).
    pub strict_wins_share: f64,
    /// Largest per-GEMM gain of the strict candidates (base time / strict time).
    pub max_gain: f64,
}

/// [`strict_rc_study`]'s result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrictRcStudy {
    /// GEMMs studied (the whole tuned list: evaluated GEMMs and dataset).
    pub gemms: usize,
    /// GEMMs whose GPU/8 or GPU/16 kernel is none of the base candidates.
    pub gemms_with_new_candidates: usize,
    /// One row per CD 2, 4, 8, 16.
    pub rows: Vec<StrictRcRow>,
}

/// GO kernels chosen with GPU/8 and GPU/16 candidates added, against the three-candidate
/// choice the GO library stores; every time comes from the same `concurrent_time` the
/// tuning uses, so a row's strict speedup can only be at least its base one.
pub fn strict_rc_study(ctx: &Context, tuned: &[TunedGemm]) -> StrictRcStudy {
    let (gpu, cal, cat) = (&ctx.gpu, &ctx.cal, &ctx.catalog);
    // Per GEMM: (base time, strict time) per CD index 1..5, and whether a new kernel came in.
    let per_gemm: Vec<(Vec<(f64, f64)>, bool)> = tuned
        .par_iter()
        .map(|t| {
            let mut extra: Vec<u32> = Vec::new();
            for div in STRICT_RC_DIVISORS {
                if let Some((k, _)) = best_isolated(&gpu.constrained(div), cal, cat, &t.shape) {
                    if !t.candidates.contains(&k) && !extra.contains(&k) {
                        extra.push(k);
                    }
                }
            }
            let times = (1..CONCURRENCY_DEGREES.len())
                .map(|i| {
                    let cd = u32::from(CONCURRENCY_DEGREES.get(i).copied().unwrap_or(1));
                    let base = t.go_time(i);
                    let strict = extra
                        .iter()
                        .filter_map(|&k| {
                            cat.get(k as usize)
                                .and_then(|kk| concurrent_time(gpu, cal, &t.shape, kk, cd))
                        })
                        .fold(base, f64::min);
                    (base, strict)
                })
                .collect();
            (times, !extra.is_empty())
        })
        .collect();
    let rows = (1..CONCURRENCY_DEGREES.len())
        .map(|i| {
            let cd = CONCURRENCY_DEGREES.get(i).copied().unwrap_or(1);
            let speedup = |time: f64, t: &TunedGemm| f64::from(cd) * t.t_isolated / time;
            let pairs = || {
                tuned
                    .iter()
                    .zip(&per_gemm)
                    .filter_map(move |(t, (v, _))| v.get(i - 1).map(|&p| (t, p)))
            };
            let n = pairs().count().max(1) as f64;
            StrictRcRow {
                cd,
                speedup_base: super::geomean(pairs().map(|(t, (b, _))| speedup(b, t))),
                speedup_strict: super::geomean(pairs().map(|(t, (_, s))| speedup(s, t))),
                strict_wins_share: pairs().filter(|(_, (b, s))| s < b).count() as f64 / n,
                max_gain: pairs().map(|(_, (b, s))| b / s).fold(1.0, f64::max),
            }
        })
        .collect();
    StrictRcStudy {
        gemms: tuned.len(),
        gemms_with_new_candidates: per_gemm.iter().filter(|(_, new)| *new).count(),
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_isa::gemm_ext::GemmDataType;

    #[test]
    fn strict_constraints_choose_among_more_kernels_and_never_lose() {
        let gpu = GpuConfig::preset("mi100").unwrap();
        // GPU/16 of the 120-CU MI100: 7 CUs and a sixteenth of the LLC.
        let g16 = gpu.constrained(16);
        assert_eq!(g16.cus, 7);
        assert_eq!(g16.llc_bytes, gpu.llc_bytes / 16);
        let ctx = Context::new(gpu, None, false);
        let shapes = [
            GemmShape::new(256, 256, 4096, false, false, GemmDataType::F16),
            GemmShape::new(1024, 512, 1024, true, false, GemmDataType::F16),
            GemmShape::new(4096, 4096, 1024, false, true, GemmDataType::F32),
            GemmShape::new(128, 2048, 512, false, false, GemmDataType::F32),
        ];
        let tuned: Vec<TunedGemm> = shapes
            .iter()
            .filter_map(|s| tune_one(&ctx.gpu, &ctx.cal, &ctx.catalog, s))
            .collect();
        assert_eq!(tuned.len(), shapes.len());
        let st = strict_rc_study(&ctx, &tuned);
        assert_eq!(st.gemms, 4);
        assert_eq!(
            st.rows.iter().map(|r| r.cd).collect::<Vec<_>>(),
            [2, 4, 8, 16]
        );
        for (i, r) in st.rows.iter().enumerate() {
            // The base column is exactly the GO library's choice.
            let base = crate::goldyloc::geomean(tuned.iter().map(|t| t.speedup(i + 1)));
            assert!((r.speedup_base - base).abs() < 1e-12, "{r:?} vs {base}");
            // A superset of candidates: never slower, and a win is a real gain.
            assert!(r.speedup_strict >= r.speedup_base, "{r:?}");
            assert!(r.max_gain >= 1.0);
            assert_eq!(r.strict_wins_share > 0.0, r.max_gain > 1.0, "{r:?}");
        }
    }
}
