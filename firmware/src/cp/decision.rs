//! The GOLDYLOC concurrency decision as a pure function (dissertation Fig. 7.7 and
//! 7.5.7), shared by the firmware's event handler and the host's evaluation.

use heapless::Vec;
use nmcp_isa::gemm_ext::{GemmExt, CONCURRENCY_DEGREES};

use super::features::{self, CuResources, FeatureError, FEATURE_COUNT};
use super::predictor::{CdPredictor, CLASS_COUNT};
use super::work::CpWork;

/// Most GEMMs the CP considers at once: one per queue.
pub const MAX_CANDIDATES: usize = 32;
/// Highest concurrency degree the CP runs (the largest tuned class).
pub const MAX_CD: u8 = 16;

/// What makes two GEMMs "the same size" for the heterogeneous rule: the problem of the
/// extension record.
pub use nmcp_isa::gemm_ext::GemmProblem as ProblemKey;

/// A GEMM at a queue head, reduced to what the decision needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct GemmCandidate {
    /// Problem identity.
    pub problem: ProblemKey,
    /// Predictor features (raw Q16.16).
    pub features: [i64; FEATURE_COUNT],
    /// Kernel object the record tuned for each entry of [`CONCURRENCY_DEGREES`].
    pub ko_per_cd: [u64; CONCURRENCY_DEGREES.len()],
}

impl GemmCandidate {
    /// Builds a candidate from a (validated) extension record.
    ///
    /// # Errors
    /// [`FeatureError`] if a tuned choice names a missing kernel or cannot be resident.
    pub fn new(ext: &GemmExt, resources: &CuResources) -> Result<Self, FeatureError> {
        let features = features::features(ext, resources)?;
        let mut ko_per_cd = [0u64; CONCURRENCY_DEGREES.len()];
        for (i, ko) in ko_per_cd.iter_mut().enumerate() {
            *ko = features::kernel_for(ext, i)?.kernel_object;
        }
        Ok(Self {
            problem: ProblemKey::from_ext(ext),
            features,
            ko_per_cd,
        })
    }

    /// The kernel object for concurrency degree `cd` (the tuned choice of the largest
    /// tabulated degree not above `cd`).
    pub fn kernel_object_for(&self, cd: u8) -> u64 {
        self.ko_per_cd
            .get(GemmExt::cd_index(cd))
            .copied()
            .unwrap_or(0)
    }
}

impl AsRef<GemmCandidate> for GemmCandidate {
    fn as_ref(&self) -> &GemmCandidate {
        self
    }
}

/// The outcome of a decision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Decision {
    /// Concurrency degree to run (= `chosen.len()`).
    pub cd: u8,
    /// Indices (into the candidate slice) of the GEMMs to dispatch now, in order.
    pub chosen: Vec<u8, MAX_CANDIDATES>,
    /// The predicted CD that drove the decision (the deciding group's prediction, or
    /// the smallest prediction when mixed sizes run together).
    pub predicted: u8,
    /// Mixed sizes run together (every size preferred at least the CD of running them
    /// all); false for a homogeneous set.
    pub mixed: bool,
    /// One candidate or none: no prediction, the packet keeps its own kernel object.
    pub baseline: bool,
}

/// Decides which of the GEMMs at the queue heads run now and at which CD.
///
/// `candidates` come in priority order (the CP rotates the starting queue). With fewer
/// than two there is nothing to decide (baseline). Otherwise each distinct size is
/// predicted once; with one size, `CD = min(predicted, available, MAX_CD)`. With several
/// sizes (dissertation 7.5.7 generalised): run `min(available, MAX_CD)` of them together
/// only if every size's prediction is at least that; otherwise decide the first
/// candidate's size as a homogeneous group, `CD = min(predicted, |group|, MAX_CD)`, and
/// leave the other sizes for the next head change.
///
/// This is the host's entry point (candidates with features); the firmware keeps one
/// prediction per GEMM shape and calls [`decide_by_problem`] directly.
pub fn decide<C: AsRef<GemmCandidate>>(
    candidates: &[C],
    predictor: &CdPredictor,
    work: &mut CpWork,
) -> Decision {
    let n = candidates.len().min(MAX_CANDIDATES);
    let mut problem = [0u8; MAX_CANDIDATES];
    let mut predicted = [1u8; MAX_CANDIDATES];
    if n >= 2 {
        // (representative index, predicted CD) per distinct size, in first-seen order.
        let mut groups: Vec<(usize, u8), MAX_CANDIDATES> = Vec::new();
        for (i, c) in candidates.iter().map(AsRef::as_ref).take(n).enumerate() {
            let found = groups.iter().position(|&(r, _)| {
                candidates
                    .get(r)
                    .is_some_and(|rc| rc.as_ref().problem == c.problem)
            });
            let g = match found {
                Some(g) => g,
                None => {
                    work.predictions = work.predictions.saturating_add(1);
                    work.predictor_macs = work
                        .predictor_macs
                        .saturating_add(((CLASS_COUNT + 1) * FEATURE_COUNT) as u64);
                    let _ = groups.push((i, predictor.predict_cd(&c.features)));
                    groups.len().saturating_sub(1)
                }
            };
            if let (Some(pi), Some(pp), Some(&(_, cd))) =
                (problem.get_mut(i), predicted.get_mut(i), groups.get(g))
            {
                *pi = g as u8;
                *pp = cd;
            }
        }
    }
    decide_by_problem(
        problem.get(..n).unwrap_or_default(),
        predicted.get(..n).unwrap_or_default(),
        work,
    )
}

/// The decision over GEMM heads already classified: `problem[i]` identifies candidate
/// `i`'s size (equal ids, equal sizes; ids below 32, at most one per candidate slot)
/// and `predicted[i]` is its predicted CD; the prediction of a size is its first
/// candidate's. The rule is [`decide`]'s.
pub fn decide_by_problem(problem: &[u8], predicted: &[u8], work: &mut CpWork) -> Decision {
    let n = problem.len().min(predicted.len()).min(MAX_CANDIDATES);
    let mut d = Decision::default();
    if n < 2 {
        if n == 1 {
            let _ = d.chosen.push(0);
            d.cd = 1;
            d.predicted = 1;
        }
        d.baseline = true;
        return d;
    }
    work.decisions = work.decisions.saturating_add(1);
    let (Some(&first), Some(&first_pred)) = (problem.first(), predicted.first()) else {
        return d;
    };
    // Distinct sizes (a bit each) and the smallest prediction among them.
    let mut seen = 0u32;
    let mut min_pred = u8::MAX;
    let mut members = 0u8;
    for (&pid, &pred) in problem.iter().zip(predicted).take(n) {
        members += u8::from(pid == first);
        let bit = 1u32 << (pid & 31);
        if seen & bit == 0 {
            seen |= bit;
            min_pred = min_pred.min(pred);
        }
    }
    let cap = (n as u8).min(MAX_CD);
    if seen.count_ones() > 1 && min_pred >= cap {
        d.mixed = true;
        d.predicted = min_pred;
        d.cd = cap;
        for i in 0..cap {
            let _ = d.chosen.push(i);
        }
        return d;
    }
    // Homogeneous: the first candidate's size decides.
    let pred = first_pred.max(1);
    d.predicted = pred;
    d.cd = pred.min(members).clamp(1, MAX_CD);
    for (i, _) in problem
        .iter()
        .take(n)
        .enumerate()
        .filter(|&(_, &pid)| pid == first)
        .take(usize::from(d.cd))
    {
        let _ = d.chosen.push(i as u8);
    }
    d
}

/// [`decide_by_problem`]'s rule on bit masks, the firmware's form: bit `j` of a mask is
/// the `j`-th candidate in priority order. `all` is every candidate; `groups` yields, per
/// distinct size, the mask of its candidates and its prediction (its first candidate's;
/// any value for an empty mask); the masks are disjoint, their union is `all`, and `all`
/// holds two or more candidates (fewer is the baseline, no decision).
/// Returns the candidates to dispatch now (a mask), the CD, the prediction that drove
/// it and whether mixed sizes run together, as [`decide_by_problem`] would: a test
/// checks the two agree on every input.
pub fn decide_masks<I: Iterator<Item = (u32, u8)>>(all: u32, groups: I) -> (u32, u8, u8, bool) {
    let first = all & all.wrapping_neg();
    let (mut distinct, mut min_pred) = (0u32, u8::MAX);
    let (mut group, mut first_pred) = (0u32, 1u8);
    for (m, pred) in groups {
        if m != 0 {
            distinct += 1;
            min_pred = min_pred.min(pred);
            if m & first != 0 {
                group = m;
                first_pred = pred;
            }
        }
    }
    let cap = all.count_ones().min(u32::from(MAX_CD)) as u8;
    let (members, cd, predicted, mixed) = if distinct > 1 && min_pred >= cap {
        // Every size prefers at least running them all: mixed sizes together.
        (all, cap, min_pred, true)
    } else {
        // Homogeneous: the first candidate's size decides.
        let pred = first_pred.max(1);
        let members = u8::try_from(group.count_ones()).unwrap_or(u8::MAX);
        (group, pred.min(members).clamp(1, MAX_CD), pred, false)
    };
    // The first `cd` of them in priority order.
    let mut chosen = 0u32;
    let mut m = members;
    for _ in 0..cd {
        let low = m & m.wrapping_neg();
        chosen |= low;
        m ^= low;
    }
    (chosen, cd, predicted, mixed)
}

/// [`decide_masks`]' common case without its pass over the sizes: `all` (two or more
/// candidates, bit `j` the `j`-th in priority order), `group` the candidates of the first
/// candidate's size (it holds `all`'s lowest bit), `pred` that candidate's prediction.
/// When that size decides alone — it is the only size (`group == all`), or it predicts
/// fewer than `min(|all|, 16)`, so mixed sizes cannot run together (the minimum over the
/// sizes is at most its prediction) — returns what [`decide_masks`] returns (chosen,
/// CD, prediction; not mixed); otherwise `None` (the general rule decides). A test
/// checks the two agree.
#[inline(always)]
pub fn decide_first_size(all: u32, group: u32, pred: u8) -> Option<(u32, u8, u8)> {
    let pred = pred.max(1);
    if group != all {
        let mut m = all;
        for _ in 0..pred.min(MAX_CD) {
            m &= m.wrapping_sub(1);
        }
        if pred >= MAX_CD || m == 0 {
            return None;
        }
    }
    // CD = min(prediction, |group|, 16): its first CD candidates in priority order.
    let mut chosen = 0u32;
    let mut m = group;
    let mut cd = 0u8;
    while m != 0 && cd < pred.min(MAX_CD) {
        let low = m & m.wrapping_neg();
        chosen |= low;
        m ^= low;
        cd = cd.wrapping_add(1);
    }
    Some((chosen, cd, pred))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cp::features::FRAC_BITS;
    use nmcp_isa::gemm_ext::GemmDataType;

    /// A predictor whose answer is a step function of M (feature 0): CD 16 from
    /// M >= 4096, CD 4 from M >= 1024, else CD 1.
    fn step_predictor() -> CdPredictor {
        let mut p = CdPredictor::default();
        p.inv_range_q32[0] = (1i64 << 32) / 8192;
        // logit_c = bias_c + w_c * xn, xn = M / 8192.
        p.bias_q16 = [1 << FRAC_BITS, 0, 0, -(1 << FRAC_BITS), -(3 << FRAC_BITS)];
        p.weight_q16[2][0] = 8 << FRAC_BITS; // CD 4 beats CD 1 from xn 1/8
        p.weight_q16[4][0] = 16 << FRAC_BITS; // CD 16 beats CD 4 from xn 1/2
        p
    }

    fn cand(m: u32) -> GemmCandidate {
        let mut features = [0i64; FEATURE_COUNT];
        features[0] = i64::from(m) << FRAC_BITS;
        GemmCandidate {
            problem: ProblemKey {
                m,
                n: 64,
                k: 64,
                batch: 1,
                trans_a: false,
                trans_b: false,
                dtype: GemmDataType::F16,
            },
            features,
            ko_per_cd: [1, 2, 4, 8, 16].map(|c| 0x1000 * c),
        }
    }

    #[test]
    fn cd_is_min_of_prediction_and_available() {
        let p = step_predictor();
        let mut w = CpWork::default();
        let six = [cand(2048); 6];
        let d = decide(&six, &p, &mut w);
        assert_eq!((d.cd, d.predicted, d.chosen.len()), (4, 4, 4));
        let three = [cand(8192); 3];
        let d = decide(&three, &p, &mut w);
        assert_eq!((d.cd, d.predicted), (3, 16));
        assert_eq!(three[0].kernel_object_for(3), 0x2000);
        let one = [cand(8192)];
        assert!(decide(&one, &p, &mut w).baseline);
        assert_eq!(w.predictions, 2);
    }

    #[test]
    fn heterogeneous_rule() {
        let p = step_predictor();
        let mut w = CpWork::default();
        // 8 + 8, both prefer 16: all 16 run together.
        let mut c: std::vec::Vec<_> = (0..8).map(|_| cand(8192)).collect();
        c.extend((0..8).map(|_| cand(4096)));
        let d = decide(&c, &p, &mut w);
        assert!(d.mixed);
        assert_eq!(d.cd, 16);
        // 8 + 8, one prefers 4: the first size decides as a homogeneous group of 8.
        let mut c: std::vec::Vec<_> = (0..8).map(|_| cand(2048)).collect();
        c.extend((0..8).map(|_| cand(8192)));
        let d = decide(&c, &p, &mut w);
        assert!(!d.mixed);
        assert_eq!(d.cd, 4);
        assert!(d.chosen.iter().all(|&i| i < 8));
        // Interleaved order: the group is still one size only.
        let c: std::vec::Vec<_> = (0..16)
            .map(|i| cand(if i % 2 == 0 { 8192 } else { 2048 }))
            .collect();
        let d = decide(&c, &p, &mut w);
        assert_eq!(d.cd, 8);
        assert!(d.chosen.iter().all(|&i| i % 2 == 0));
    }

    proptest::proptest! {
        /// Any mix of sizes and predictions: CD never exceeds 16 or the GEMMs available,
        /// exactly CD distinct candidates are chosen, and a homogeneous choice holds one
        /// size only.
        #[test]
        fn decision_invariants(ms in proptest::collection::vec(0u32..4, 0..40)) {
            let p = step_predictor();
            let c: std::vec::Vec<_> = ms.iter().map(|&i| cand([512, 2048, 4096, 8192][i as usize])).collect();
            let mut w = CpWork::default();
            let d = decide(&c, &p, &mut w);
            let n = c.len().min(MAX_CANDIDATES);
            proptest::prop_assert!(usize::from(d.cd) <= n.min(usize::from(MAX_CD)));
            proptest::prop_assert_eq!(d.chosen.len(), usize::from(d.cd));
            let mut seen = [false; MAX_CANDIDATES];
            for &i in &d.chosen {
                proptest::prop_assert!(!seen[usize::from(i)]);
                seen[usize::from(i)] = true;
            }
            if !d.mixed {
                if let Some(&first) = d.chosen.first() {
                    let size = c[usize::from(first)].problem;
                    proptest::prop_assert!(d.chosen.iter().all(|&i| c[usize::from(i)].problem == size));
                }
            }
            proptest::prop_assert!(w.predictions <= 4);
        }
    }

    proptest::proptest! {
        /// The firmware's mask form decides exactly as [`decide_by_problem`]: same
        /// candidates, CD, prediction and mixed flag, for any sizes and predictions.
        #[test]
        fn mask_decision_matches_decide_by_problem(
            heads in proptest::collection::vec((0u8..5, 0usize..5), 2..=32),
        ) {
            let problem: std::vec::Vec<u8> = heads.iter().map(|&(p, _)| p).collect();
            let predicted: std::vec::Vec<u8> =
                heads.iter().map(|&(_, c)| [1u8, 2, 4, 8, 16][c]).collect();
            let mut w = CpWork::default();
            let d = decide_by_problem(&problem, &predicted, &mut w);
            // Per size: its candidates' mask and its first candidate's prediction.
            let mut groups = [(0u32, 0u8); 5];
            for (j, (&p, &c)) in problem.iter().zip(&predicted).enumerate() {
                let g = &mut groups[usize::from(p)];
                if g.0 == 0 {
                    g.1 = c;
                }
                g.0 |= 1 << j;
            }
            let all = groups.iter().fold(0u32, |a, g| a | g.0);
            let (chosen, cd, pred, mixed) = decide_masks(all, groups.iter().copied());
            let want = d.chosen.iter().fold(0u32, |m, &i| m | 1 << i);
            proptest::prop_assert_eq!((chosen, cd, pred, mixed), (want, d.cd, d.predicted, d.mixed));
            // The shortcut, when it decides, decides the same.
            let first = groups.iter().find(|g| g.0 & 1 != 0).copied().unwrap_or_default();
            if let Some(s) = decide_first_size(all, first.0, first.1) {
                proptest::prop_assert_eq!(s, (chosen, cd, pred));
                proptest::prop_assert!(!mixed);
            }
        }
    }
}
