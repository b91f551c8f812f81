//! Multinomial logistic regression over [`FEATURE_COUNT`] features, evaluated in fixed
//! point. The host trains in `f64` and exports a [`CdPredictor`]; the firmware only takes
//! the argmax of the logits, so no `exp` is needed at run time.

use super::features::{FEATURE_COUNT, FRAC_BITS};
use nmcp_isa::gemm_ext::CONCURRENCY_DEGREES;

/// Output classes: the concurrency degrees 1, 2, 4, 8, 16.
pub const CLASS_COUNT: usize = CONCURRENCY_DEGREES.len();

/// Trained weights and min-max normalisation, all fixed point.
///
/// Normalised feature (Q16.16): `xn = ((x - min) * inv_range_q32) >> 32` where `x` and
/// `min` are raw Q16.16 features and `inv_range_q32 = round(2^32 / (max - min))` with
/// `max - min` in raw (unscaled) units. Logit of class `c` (Q16.16):
/// `bias[c] + sum_i (weight[c][i] * xn_i) >> 16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdPredictor {
    /// Per-feature minimum over the training set, Q16.16.
    pub min_q16: [i64; FEATURE_COUNT],
    /// Per-feature `2^32 / (max - min)`; zero for a constant feature.
    pub inv_range_q32: [i64; FEATURE_COUNT],
    /// Per-class weights, Q16.16.
    pub weight_q16: [[i64; FEATURE_COUNT]; CLASS_COUNT],
    /// Per-class bias, Q16.16.
    pub bias_q16: [i64; CLASS_COUNT],
}

impl Default for CdPredictor {
    /// An untrained predictor that always says CD 1 (baseline behaviour).
    fn default() -> Self {
        let mut bias_q16 = [0; CLASS_COUNT];
        bias_q16[0] = 1 << FRAC_BITS;
        Self {
            min_q16: [0; FEATURE_COUNT],
            inv_range_q32: [0; FEATURE_COUNT],
            weight_q16: [[0; FEATURE_COUNT]; CLASS_COUNT],
            bias_q16,
        }
    }
}

impl CdPredictor {
    /// Normalises raw Q16.16 features to [0, 1] in Q16.16 (clamped, so a GEMM outside the
    /// training range cannot blow up a logit).
    pub fn normalise(&self, raw: &[i64; FEATURE_COUNT]) -> [i64; FEATURE_COUNT] {
        let mut out = [0i64; FEATURE_COUNT];
        for ((o, &x), (&min, &inv)) in out
            .iter_mut()
            .zip(raw)
            .zip(self.min_q16.iter().zip(&self.inv_range_q32))
        {
            let d = i128::from(x.saturating_sub(min));
            let v = (d * i128::from(inv)) >> 32;
            *o = v.clamp(0, 1 << FRAC_BITS) as i64;
        }
        out
    }

    /// Logits in Q16.16.
    pub fn logits(&self, raw: &[i64; FEATURE_COUNT]) -> [i64; CLASS_COUNT] {
        let xn = self.normalise(raw);
        let mut out = self.bias_q16;
        for (o, w) in out.iter_mut().zip(&self.weight_q16) {
            let dot: i64 = w
                .iter()
                .zip(&xn)
                .map(|(&w, &x)| w.saturating_mul(x) >> FRAC_BITS)
                .sum();
            *o = o.saturating_add(dot);
        }
        out
    }

    /// The predicted class index (into [`CONCURRENCY_DEGREES`]); ties go to the lower CD.
    pub fn predict_class(&self, raw: &[i64; FEATURE_COUNT]) -> usize {
        let l = self.logits(raw);
        let mut best = 0;
        for (i, &v) in l.iter().enumerate() {
            if l.get(best).is_some_and(|&b| v > b) {
                best = i;
            }
        }
        best
    }

    /// The predicted concurrency degree.
    pub fn predict_cd(&self, raw: &[i64; FEATURE_COUNT]) -> u8 {
        CONCURRENCY_DEGREES
            .get(self.predict_class(raw))
            .copied()
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_predicts_cd1() {
        let p = CdPredictor::default();
        assert_eq!(p.predict_cd(&[123 << 16; FEATURE_COUNT]), 1);
    }

    #[test]
    fn normalisation_and_argmax() {
        let mut p = CdPredictor::default();
        // Feature 0 ranges over [0, 1024]; class 4 (CD 16) grows with it, class 0 is flat.
        p.inv_range_q32[0] = (1i64 << 32) / 1024;
        p.bias_q16 = [1 << 15, 0, 0, 0, 0];
        p.weight_q16[4][0] = 1 << 16;
        let mut x = [0i64; FEATURE_COUNT];
        x[0] = 256 << 16; // xn = 0.25 -> logit 0.25 < 0.5
        assert_eq!(p.predict_cd(&x), 1);
        x[0] = 768 << 16; // xn = 0.75 -> logit 0.75 > 0.5
        assert_eq!(p.predict_cd(&x), 16);
        x[0] = 100_000 << 16; // clamped to 1.0
        assert_eq!(p.normalise(&x)[0], 1 << 16);
    }
}
