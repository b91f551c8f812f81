//! Step 5: the CD predictor. Multinomial logistic regression (softmax) over the
//! firmware's own feature vector, min-max normalised, trained by full-batch gradient
//! descent on a seeded 90/10 split, exported to the firmware's fixed-point
//! [`CdPredictor`].

use super::tune::TunedGemm;
use nmcp_emulator::gpu::catalog::Catalog;
use nmcp_firmware::cp::features::{features, CuResources, FEATURE_COUNT, FRAC_BITS};
use nmcp_firmware::cp::predictor::{CdPredictor, CLASS_COUNT};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Gradient-descent iterations.
const ITERATIONS: usize = 4000;
/// Learning rate (on min-max normalised features).
const LEARNING_RATE: f64 = 0.5;
/// L2 penalty on the weights (not the bias).
const L2: f64 = 1e-4;
/// Share of the dataset held out for testing.
pub const TEST_SHARE: f64 = 0.10;
/// Default split seed.
pub const DEFAULT_SEED: u64 = 7;

/// A trained model, in f64 and as the firmware's fixed point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainedModel {
    /// Per-feature minimum (real units).
    pub min: Vec<f64>,
    /// Per-feature maximum (real units).
    pub max: Vec<f64>,
    /// Weights `[class][feature]`.
    pub weights: Vec<Vec<f64>>,
    /// Bias per class.
    pub bias: Vec<f64>,
    /// Fixed-point export.
    pub fixed: PredictorFile,
    /// Indices (into the dataset) of the test GEMMs.
    pub test: Vec<usize>,
    /// Training-set accuracy (label = best CD with 16 available).
    pub train_accuracy: f64,
    /// Seed of the split.
    pub seed: u64,
}

/// The firmware predictor as a file (`CdPredictor` field for field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PredictorFile {
    /// Per-feature minimum, Q16.16.
    pub min_q16: Vec<i64>,
    /// Per-feature `2^32 / (max - min)` with the range in real units.
    pub inv_range_q32: Vec<i64>,
    /// Weights per class, Q16.16.
    pub weight_q16: Vec<Vec<i64>>,
    /// Bias per class, Q16.16.
    pub bias_q16: Vec<i64>,
}

impl PredictorFile {
    /// The firmware struct.
    pub fn to_predictor(&self) -> CdPredictor {
        let mut p = CdPredictor::default();
        for (d, s) in p.min_q16.iter_mut().zip(&self.min_q16) {
            *d = *s;
        }
        for (d, s) in p.inv_range_q32.iter_mut().zip(&self.inv_range_q32) {
            *d = *s;
        }
        for (dr, sr) in p.weight_q16.iter_mut().zip(&self.weight_q16) {
            for (d, s) in dr.iter_mut().zip(sr) {
                *d = *s;
            }
        }
        for (d, s) in p.bias_q16.iter_mut().zip(&self.bias_q16) {
            *d = *s;
        }
        p
    }
}

/// The raw Q16.16 feature vector of a tuned GEMM, exactly as the firmware computes it.
pub fn raw_features(
    t: &TunedGemm,
    catalog: &Catalog,
    res: &CuResources,
) -> Option<[i64; FEATURE_COUNT]> {
    features(&t.to_ext(catalog), res).ok()
}

fn to_real(raw: &[i64; FEATURE_COUNT]) -> Vec<f64> {
    raw.iter()
        .map(|&v| v as f64 / f64::from(1u32 << FRAC_BITS))
        .collect()
}

impl TrainedModel {
    /// Normalised features, clamped to [0, 1] as the firmware does.
    pub fn normalise(&self, x: &[f64]) -> Vec<f64> {
        x.iter()
            .zip(self.min.iter().zip(&self.max))
            .map(|(&v, (&lo, &hi))| {
                if hi > lo {
                    ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
                } else {
                    0.0
                }
            })
            .collect()
    }

    /// The f64 model's class (ties to the lower CD, as in the firmware).
    pub fn predict_class(&self, x: &[f64]) -> usize {
        argmax(&logits(&self.weights, &self.bias, &self.normalise(x)))
    }
}

fn logits(w: &[Vec<f64>], b: &[f64], xn: &[f64]) -> Vec<f64> {
    w.iter()
        .zip(b)
        .map(|(wr, &bc)| bc + wr.iter().zip(xn).map(|(a, x)| a * x).sum::<f64>())
        .collect()
}

fn softmax(z: &[f64]) -> Vec<f64> {
    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = z.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

fn argmax(z: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in z.iter().enumerate() {
        if z.get(best).is_some_and(|b| v > b) {
            best = i;
        }
    }
    best
}

/// Trains on `data` (features, label) with a seeded 90/10 split.
pub fn train(data: &[(Vec<f64>, usize)], seed: u64) -> TrainedModel {
    let mut idx: Vec<usize> = (0..data.len()).collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    idx.shuffle(&mut rng);
    let n_test = ((data.len() as f64) * TEST_SHARE).round() as usize;
    let (test, train_idx) = idx.split_at(n_test.min(idx.len()));
    let mut test = test.to_vec();
    test.sort_unstable();
    let mut model = train_rows(data, train_idx);
    model.test = test;
    model.seed = seed;
    model
}

/// Trains on the rows `train_idx` of `data` (min-max ranges from those rows only).
pub fn train_rows(data: &[(Vec<f64>, usize)], train_idx: &[usize]) -> TrainedModel {
    let nf = FEATURE_COUNT;
    let mut min = vec![f64::INFINITY; nf];
    let mut max = vec![f64::NEG_INFINITY; nf];
    for &i in train_idx {
        if let Some((x, _)) = data.get(i) {
            for ((lo, hi), v) in min.iter_mut().zip(max.iter_mut()).zip(x) {
                *lo = lo.min(*v);
                *hi = hi.max(*v);
            }
        }
    }
    for (lo, hi) in min.iter_mut().zip(max.iter_mut()) {
        if !lo.is_finite() {
            *lo = 0.0;
            *hi = 0.0;
        }
    }
    let mut model = TrainedModel {
        min,
        max,
        weights: vec![vec![0.0; nf]; CLASS_COUNT],
        bias: vec![0.0; CLASS_COUNT],
        fixed: PredictorFile {
            min_q16: vec![],
            inv_range_q32: vec![],
            weight_q16: vec![],
            bias_q16: vec![],
        },
        test: Vec::new(),
        train_accuracy: 0.0,
        seed: 0,
    };
    let xs: Vec<(Vec<f64>, usize)> = train_idx
        .iter()
        .filter_map(|&i| data.get(i))
        .map(|(x, y)| (model.normalise(x), *y))
        .collect();
    let n = xs.len().max(1) as f64;
    for _ in 0..ITERATIONS {
        let mut gw = vec![vec![0.0; nf]; CLASS_COUNT];
        let mut gb = vec![0.0; CLASS_COUNT];
        for (x, y) in &xs {
            let p = softmax(&logits(&model.weights, &model.bias, x));
            for (c, pc) in p.iter().enumerate() {
                let err = pc - if c == *y { 1.0 } else { 0.0 };
                if let (Some(gwr), Some(gbc)) = (gw.get_mut(c), gb.get_mut(c)) {
                    *gbc += err;
                    for (g, xv) in gwr.iter_mut().zip(x) {
                        *g += err * xv;
                    }
                }
            }
        }
        for (wr, gwr) in model.weights.iter_mut().zip(&gw) {
            for (w, g) in wr.iter_mut().zip(gwr) {
                *w -= LEARNING_RATE * (g / n + L2 * *w);
            }
        }
        for (b, g) in model.bias.iter_mut().zip(&gb) {
            *b -= LEARNING_RATE * g / n;
        }
    }
    let correct = train_idx
        .iter()
        .filter_map(|&i| data.get(i))
        .filter(|(x, y)| model.predict_class(x) == *y)
        .count();
    model.train_accuracy = correct as f64 / n;
    model.fixed = export(&model);
    model
}

/// One dataset row for the cross-validation: (features, label), `None` without features.
pub type Row = Option<(Vec<f64>, usize)>;

/// Folds of the cross-validation the evaluation reports accuracy with.
pub const FOLDS: usize = 5;

/// A cross-validation split by **shape group** (M, N, K, batch: the transposed variants
/// and data types of one size fall in the same fold, so no size is ever both trained on
/// and tested): every row is predicted by the model of the fold that held it out.
#[derive(Debug, Clone)]
pub struct CrossValidation {
    /// Seed of the fold assignment.
    pub seed: u64,
    /// Fold of each dataset row (`None` for a row without features).
    pub fold_of: Vec<Option<usize>>,
    /// One model per fold, trained on every other fold.
    pub models: Vec<TrainedModel>,
}

impl CrossValidation {
    /// The model that never saw row `i`'s shape group.
    pub fn model_for(&self, i: usize) -> Option<&TrainedModel> {
        self.models.get(self.fold_of.get(i).copied().flatten()?)
    }

    /// Rows of the dataset in folds other than `fold` (the fold model's training rows).
    pub fn training_rows(&self, fold: usize) -> impl Iterator<Item = usize> + '_ {
        self.fold_of
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.is_some_and(|f| f != fold))
            .map(|(i, _)| i)
    }
}

/// `FOLDS`-fold cross-validation by shape group. `data[i]` is row `i`'s (features,
/// label) or `None` (no features: left out); `group[i]` its shape group key. Groups are
/// shuffled with `seed` and dealt round robin over the folds.
pub fn cross_validate(data: &[Row], group: &[String], seed: u64) -> CrossValidation {
    let mut groups: Vec<&String> = group
        .iter()
        .zip(data)
        .filter(|(_, d)| d.is_some())
        .map(|(g, _)| g)
        .collect();
    groups.sort();
    groups.dedup();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    groups.shuffle(&mut rng);
    let fold_of_group: std::collections::BTreeMap<&String, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (*g, i % FOLDS))
        .collect();
    let fold_of: Vec<Option<usize>> = group
        .iter()
        .zip(data)
        .map(|(g, d)| d.as_ref().and(fold_of_group.get(g).copied()))
        .collect();
    let rows: Vec<(Vec<f64>, usize)> = data
        .iter()
        .map(|d| d.clone().unwrap_or_else(|| (vec![0.0; FEATURE_COUNT], 0)))
        .collect();
    let mut cv = CrossValidation {
        seed,
        fold_of,
        models: Vec::with_capacity(FOLDS),
    };
    let trained: Vec<TrainedModel> = (0..FOLDS)
        .map(|f| {
            let idx: Vec<usize> = cv.training_rows(f).collect();
            let mut m = train_rows(&rows, &idx);
            m.seed = seed;
            m.test = cv
                .fold_of
                .iter()
                .enumerate()
                .filter(|(_, x)| **x == Some(f))
                .map(|(i, _)| i)
                .collect();
            m
        })
        .collect();
    cv.models = trained;
    cv
}

/// Fixed-point export: `min_q16 = round(min * 2^16)`, `inv_range_q32 = round(2^32 /
/// (max - min))`, weights and biases rounded to Q16.16.
fn export(m: &TrainedModel) -> PredictorFile {
    let q16 = |v: f64| (v * f64::from(1u32 << FRAC_BITS)).round() as i64;
    PredictorFile {
        min_q16: m.min.iter().map(|&v| q16(v)).collect(),
        inv_range_q32: m
            .min
            .iter()
            .zip(&m.max)
            .map(|(&lo, &hi)| {
                if hi > lo {
                    (4_294_967_296.0 / (hi - lo)).round() as i64
                } else {
                    0
                }
            })
            .collect(),
        weight_q16: m
            .weights
            .iter()
            .map(|r| r.iter().map(|&v| q16(v)).collect())
            .collect(),
        bias_q16: m.bias.iter().map(|&v| q16(v)).collect(),
    }
}

/// The dataset of tuned GEMMs: real-valued features and the profiled label (best CD
/// with 16 GEMMs available), plus the raw Q16.16 features for the fixed-point check.
pub fn dataset(
    tuned: &[TunedGemm],
    catalog: &Catalog,
    res: &CuResources,
) -> Vec<(Vec<f64>, usize, [i64; FEATURE_COUNT])> {
    tuned
        .iter()
        .filter_map(|t| {
            let raw = raw_features(t, catalog, res)?;
            Some((to_real(&raw), t.best_cd_index(16), raw))
        })
        .collect()
}

/// Features of a tuned GEMM in real units (for the f64 model).
pub fn real_features(
    t: &TunedGemm,
    catalog: &Catalog,
    res: &CuResources,
) -> Option<(Vec<f64>, [i64; FEATURE_COUNT])> {
    let raw = raw_features(t, catalog, res)?;
    Some((to_real(&raw), raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows in groups of three (a size and two transposed variants), labels by group.
    fn data(groups: usize) -> (Vec<Row>, Vec<String>) {
        let mut d = Vec::new();
        let mut g = Vec::new();
        for i in 0..groups {
            for _ in 0..3 {
                let x = (0..FEATURE_COUNT).map(|f| (i * 7 + f) as f64).collect();
                d.push(Some((x, i % 3)));
                g.push(format!("g{i}"));
            }
        }
        // A row without features stays out of every fold.
        d.push(None);
        g.push("none".into());
        (d, g)
    }

    #[test]
    fn folds_split_by_group_and_cover_every_row_once() {
        let (d, g) = data(23);
        let cv = cross_validate(&d, &g, 7);
        assert_eq!(cv.models.len(), FOLDS);
        assert_eq!(cv.fold_of.last(), Some(&None));
        for (f, m) in cv.models.iter().enumerate() {
            let train: std::collections::BTreeSet<&String> =
                cv.training_rows(f).map(|r| &g[r]).collect();
            for &t in &m.test {
                assert_eq!(cv.fold_of[t], Some(f));
                assert!(!train.contains(&g[t]), "group {} in both", g[t]);
            }
        }
        let tested: usize = cv.models.iter().map(|m| m.test.len()).sum();
        assert_eq!(tested, d.len() - 1, "every row with features tested once");
        // Same seed, same folds; another seed, another assignment.
        assert_eq!(cross_validate(&d, &g, 7).fold_of, cv.fold_of);
        assert_ne!(cross_validate(&d, &g, 8).fold_of, cv.fold_of);
    }
}
