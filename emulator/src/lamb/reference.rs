//! Plain FP32 LAMB (SPEC 4.1; the variant of NVIDIA Apex's FusedLAMB the dissertation
//! cites). This is the yardstick the NMC result is checked against, so it is written for
//! clarity, element by element, with norms accumulated in f64 so that the reference's own
//! rounding is negligible next to the bound being tested.

/// LAMB hyperparameters and switches.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LambHyper {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Added to sqrt(v_hat).
    pub eps: f32,
    /// Decoupled weight decay (0 disables it).
    pub weight_decay: f32,
    /// Global gradient-norm clipping threshold; `None` disables clipping.
    pub max_grad_norm: Option<f32>,
    /// Divide m and v by (1 - beta^t).
    pub bias_correction: bool,
    /// Step number used by the bias correction (1 for the first update).
    pub step: u32,
    /// Upper clamp of the trust ratio; `None` leaves it unclamped.
    pub trust_clamp: Option<f32>,
}

impl Default for LambHyper {
    /// The defaults of SPEC 4.1 (Apex FusedLAMB): b1 0.9, b2 0.999, eps 1e-6, wd 0.01,
    /// max_grad_norm 1.0, bias correction on, lr 1e-3, step 1.
    fn default() -> Self {
        Self {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-6,
            weight_decay: 0.01,
            max_grad_norm: Some(1.0),
            bias_correction: true,
            step: 1,
            trust_clamp: None,
        }
    }
}

impl LambHyper {
    /// 1 / (1 - beta1^t) and 1 / (1 - beta2^t), or (1, 1) without bias correction.
    pub fn bias_factors(&self) -> (f32, f32) {
        if !self.bias_correction {
            return (1.0, 1.0);
        }
        let t = self.step.max(1) as i32;
        (
            1.0 / (1.0 - self.beta1.powi(t)),
            1.0 / (1.0 - self.beta2.powi(t)),
        )
    }

    /// The clip divisor for a global gradient norm `g_norm`.
    pub fn clip_divisor(&self, g_norm: f32) -> f32 {
        match self.max_grad_norm {
            Some(max) if g_norm > max => g_norm / max,
            _ => 1.0,
        }
    }

    /// The trust ratio for weight norm `p` and update norm `u`.
    pub fn trust_ratio(&self, p: f32, u: f32) -> f32 {
        let r = if p > 0.0 && u > 0.0 { p / u } else { 1.0 };
        match self.trust_clamp {
            Some(c) => r.min(c),
            None => r,
        }
    }
}

/// One tensor's optimizer state.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorState {
    /// Weights.
    pub w: Vec<f32>,
    /// Gradients.
    pub g: Vec<f32>,
    /// First moment.
    pub m: Vec<f32>,
    /// Second moment.
    pub v: Vec<f32>,
}

impl TensorState {
    /// A tensor with zero moments.
    pub fn new(w: Vec<f32>, g: Vec<f32>) -> Self {
        let n = w.len();
        Self {
            w,
            g,
            m: vec![0.0; n],
            v: vec![0.0; n],
        }
    }
}

fn l2(xs: impl Iterator<Item = f32>) -> f32 {
    xs.map(|x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt() as f32
}

/// Running magnitudes of the terms each output element has been formed from, over all
/// steps so far (a forward error analysis of the LAMB recurrences):
///
/// - `w_t = w_{t-1} - d_t` with `d_t = lr * ratio * u`: `S_w(t) = S_w(t-1) + |d_t|`, from
///   `S_w(0) = |w_0|`;
/// - `m_t = b1 m_{t-1} + (1 - b1) g'`: `S_m(t) = b1 S_m(t-1) + |(1 - b1) g'|`;
/// - `v_t = b2 v_{t-1} + (1 - b2) g'^2`: `S_v(t) = b2 S_v(t-1) + (1 - b2) g'^2`.
///
/// Two correct FP32 implementations that round differently (another summation order of
/// the norms, a folded constant, an FMA) differ by a few ulps of these terms. Where an
/// element is a small difference of large terms (m near a sign change, w crossing zero),
/// that difference is large relative to the element itself, so plain relative error is
/// ill-posed there; relative to `S` it is not. Where nothing cancels, `S` equals the
/// element's magnitude and the two measures agree.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TermScales {
    /// S_w per element.
    pub w: Vec<f64>,
    /// S_m per element.
    pub m: Vec<f64>,
    /// S_v per element.
    pub v: Vec<f64>,
}

/// One LAMB step over all tensors, in place. Returns the global gradient norm.
pub fn step(tensors: &mut [TensorState], h: &LambHyper) -> f32 {
    let mut scales = Vec::new();
    step_tracking(tensors, h, &mut scales)
}

/// [`step`], also advancing each element's [`TermScales`] (initialised from the state on
/// the first call, when `scales` is empty).
pub fn step_tracking(
    tensors: &mut [TensorState],
    h: &LambHyper,
    scales: &mut Vec<TermScales>,
) -> f32 {
    if scales.len() != tensors.len() {
        *scales = tensors
            .iter()
            .map(|t| {
                let abs = |x: &[f32]| x.iter().map(|v| f64::from(v.abs())).collect();
                TermScales {
                    w: abs(&t.w),
                    m: abs(&t.m),
                    v: abs(&t.v),
                }
            })
            .collect();
    }
    let g_norm = l2(tensors.iter().flat_map(|t| t.g.iter().copied()));
    let clip = h.clip_divisor(g_norm);
    let (bc1, bc2) = h.bias_factors();
    let (b1, b2) = (f64::from(h.beta1), f64::from(h.beta2));
    for (t, sc) in tensors.iter_mut().zip(scales.iter_mut()) {
        let n = t.w.len();
        let mut u = vec![0.0f32; n];
        for ((((u, w), g), (m, v)), (sm, sv)) in u
            .iter_mut()
            .zip(&t.w)
            .zip(&t.g)
            .zip(t.m.iter_mut().zip(t.v.iter_mut()))
            .zip(sc.m.iter_mut().zip(sc.v.iter_mut()))
        {
            let g = g / clip;
            let (m1, m2) = (h.beta1 * *m, (1.0 - h.beta1) * g);
            let (v1, v2) = (h.beta2 * *v, (1.0 - h.beta2) * g * g);
            *sm = b1 * *sm + f64::from(m2.abs());
            *sv = b2 * *sv + f64::from(v2.abs());
            *m = m1 + m2;
            *v = v1 + v2;
            let mh = *m * bc1;
            let vh = *v * bc2;
            *u = mh / (vh.sqrt() + h.eps) + h.weight_decay * w;
        }
        let p = l2(t.w.iter().copied());
        let un = l2(u.iter().copied());
        let ratio = h.trust_ratio(p, un);
        for ((w, u), sw) in t.w.iter_mut().zip(&u).zip(sc.w.iter_mut()) {
            let d = h.lr * ratio * u;
            *sw += f64::from(d.abs());
            *w -= d;
        }
    }
    g_norm
}

/// Where the NMC result is furthest from the reference (see [`compare`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ElementError {
    /// Tensor index.
    pub tensor: usize,
    /// Array: `w`, `m` or `v`.
    pub array: &'static str,
    /// Element index.
    pub index: usize,
    /// The value under test.
    pub got: f32,
    /// The reference value.
    pub want: f32,
    /// `|got - want|` (infinite if exactly one is NaN or the difference overflows).
    pub error: f64,
    /// The running term scale `max(S, |want|)` the error is measured against.
    pub term_scale: f64,
}

impl std::fmt::Display for ElementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "tensor {} {}[{}]: {} vs {}, error {:e} vs term scale {:e}",
            self.tensor, self.array, self.index, self.got, self.want, self.error, self.term_scale
        )
    }
}

/// How far a result is from the reference, over w, m and v of every tensor.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Comparison {
    /// Worst `|got - want| / max(S, |want|)` (S: the running term scale, [`TermScales`]);
    /// the documented bound is 1e-5. An element whose scale is 0 counts 0 if it is exact
    /// and infinity otherwise; a NaN on one side only counts infinity.
    pub max_error_vs_term_scale: f64,
    /// Worst plain `|got - want| / |want|` over elements with `want != 0` (large only
    /// where an element cancels).
    pub max_plain_rel_error: f64,
    /// The element behind `max_error_vs_term_scale` (`None` if every error is 0 or the
    /// tensor lists do not match).
    pub worst: Option<ElementError>,
}

/// Compares `got` with the reference `want`, whose running term scales are `scales`
/// (as [`step_tracking`] left them). Tensor lists of different lengths compare as
/// infinitely wrong.
pub fn compare(got: &[TensorState], want: &[TensorState], scales: &[TermScales]) -> Comparison {
    let mut c = Comparison {
        max_error_vs_term_scale: 0.0,
        max_plain_rel_error: 0.0,
        worst: None,
    };
    if scales.len() != want.len() || got.len() != want.len() {
        c.max_error_vs_term_scale = f64::INFINITY;
        c.max_plain_rel_error = f64::INFINITY;
        return c;
    }
    for (tensor, ((a, b), sc)) in got.iter().zip(want).zip(scales).enumerate() {
        for (array, x, y, s) in [
            ("w", &a.w, &b.w, &sc.w),
            ("m", &a.m, &b.m, &sc.m),
            ("v", &a.v, &b.v, &sc.v),
        ] {
            for (index, ((&x, &y), &s)) in x.iter().zip(y).zip(s).enumerate() {
                if (x.is_nan() && y.is_nan()) || x == y {
                    continue;
                }
                let error = if x.is_nan() != y.is_nan() {
                    c.max_plain_rel_error = f64::INFINITY;
                    f64::INFINITY
                } else {
                    f64::from((x - y).abs())
                };
                let term_scale = s.max(f64::from(y.abs()));
                let scaled = if term_scale > 0.0 {
                    error / term_scale
                } else {
                    f64::INFINITY
                };
                if y != 0.0 && !y.is_nan() {
                    c.max_plain_rel_error = c.max_plain_rel_error.max(error / f64::from(y.abs()));
                }
                if scaled > c.max_error_vs_term_scale || c.worst.is_none() {
                    c.max_error_vs_term_scale = c.max_error_vs_term_scale.max(scaled);
                    c.worst = Some(ElementError {
                        tensor,
                        array,
                        index,
                        got: x,
                        want: y,
                        error,
                        term_scale,
                    });
                }
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_step_moves_each_weight_by_about_lr_times_ratio() {
        // With bias correction at t = 1, m_hat = g and v_hat = g^2, so the Adam part of u
        // is sign(g) (up to eps); one tensor with no decay: u = sign(g), ||u|| = sqrt(n),
        // ratio = ||w|| / sqrt(n).
        let w = vec![3.0f32, -4.0, 0.0, 0.0];
        let g = vec![0.1f32, -0.2, 0.05, -0.05];
        let mut t = vec![TensorState::new(w.clone(), g.clone())];
        let h = LambHyper {
            weight_decay: 0.0,
            max_grad_norm: None,
            ..LambHyper::default()
        };
        step(&mut t, &h);
        let ratio = 5.0 / 2.0;
        for i in 0..4 {
            let expect = w[i] - h.lr * ratio * g[i].signum();
            assert!(
                (t[0].w[i] - expect).abs() < 1e-5,
                "{i}: {} vs {expect}",
                t[0].w[i]
            );
        }
    }

    #[test]
    fn clipping_divides_by_global_norm_over_max() {
        let h = LambHyper::default();
        assert_eq!(h.clip_divisor(0.5), 1.0);
        assert_eq!(h.clip_divisor(4.0), 4.0);
        let h2 = LambHyper {
            max_grad_norm: None,
            ..h
        };
        assert_eq!(h2.clip_divisor(4.0), 1.0);
        assert_eq!(h.trust_ratio(0.0, 2.0), 1.0);
        assert_eq!(h.trust_ratio(3.0, 2.0), 1.5);
    }
}
