//! The heterogeneous mixes of dissertation 7.5.7: two different GEMMs at once.

use super::*;

/// Heterogeneous mixes of 7.5.7: for each pair of sizes (a, b) and `n` in the scenarios,
/// `n/2` instances of each on interleaved queues (a, b, a, b, ...), through the firmware
/// CP: Sequential on one stream with isolated kernels; Default all `n` with isolated
/// kernels and no concurrency control; GO-Kernels all `n` with the GO kernels; GOLDYLOC
/// with the trained predictor, which runs all `n` together only if both sizes predict at
/// least `n`, otherwise homogeneous groups, decided by the firmware round after round.
pub(super) fn evaluate_hetero(
    ctx: &Context,
    tuned: &[TunedGemm],
    cv: &CrossValidation,
    pair_predictors: &BTreeMap<(usize, usize), CdPredictor>,
    pairs: &[(String, GemmShape, GemmShape)],
) -> (Vec<HeteroSummary>, Vec<HeteroResult>, Vec<String>) {
    let by_shape: BTreeMap<String, usize> = tuned
        .iter()
        .enumerate()
        .map(|(i, t)| (t.shape.to_string(), i))
        .collect();
    let res = ctx.gpu.cu_resources();
    let jobs: Vec<(&(String, GemmShape, GemmShape), u32)> = pairs
        .iter()
        .flat_map(|p| SCENARIOS.iter().map(move |&n| (p, n)))
        .collect();
    let pb = ctx.bar(jobs.len(), "mixes");
    let outcomes: Vec<Result<HeteroResult, String>> = jobs
        .par_iter()
        .filter_map(|&((app, a, b), n)| {
            let (ia, ib) = (
                *by_shape.get(&a.to_string())?,
                *by_shape.get(&b.to_string())?,
            );
            let (ta, tb) = (tuned.get(ia)?, tuned.get(ib)?);
            // A predictor that saw neither size: the fold model when both share a fold.
            let fa = cv.fold_of.get(ia).copied().flatten()?;
            let fb = cv.fold_of.get(ib).copied().flatten()?;
            let own;
            let predictor = if fa == fb {
                own = cv.models.get(fa)?.fixed.to_predictor();
                &own
            } else {
                pair_predictors.get(&(fa.min(fb), fa.max(fb)))?
            };
            let r = evaluate_mix(ctx, predictor, &res, app, (ta, tb), n);
            pb.inc(1);
            Some(r)
        })
        .collect();
    pb.finish_and_clear();
    let mut results = Vec::new();
    let mut failures = Vec::new();
    for o in outcomes {
        match o {
            Ok(r) => results.push(r),
            Err(e) => failures.push(e),
        }
    }
    let summaries = SCENARIOS
        .iter()
        .map(|&n| {
            let rows: Vec<&HeteroResult> = results.iter().filter(|r| r.n == n).collect();
            let mut over_default = [1.0; 4];
            for (c, slot) in over_default.iter_mut().enumerate() {
                *slot = geomean(
                    rows.iter()
                        .filter_map(|r| Some(r.time_ns.get(1)? / r.time_ns.get(c)?)),
                );
            }
            HeteroSummary {
                n,
                pairs: rows.len(),
                over_default,
                mixed_share: rows.iter().filter(|r| r.mixed).count() as f64
                    / rows.len().max(1) as f64,
            }
        })
        .collect();
    (summaries, results, failures)
}

/// One heterogeneous pair in one scenario, every configuration through the firmware.
pub(super) fn evaluate_mix(
    ctx: &Context,
    predictor: &CdPredictor,
    res: &CuResources,
    app: &str,
    (ta, tb): (&TunedGemm, &TunedGemm),
    n: u32,
) -> Result<HeteroResult, String> {
    let label = format!("{app} mix {} + {} with {n} GEMMs", ta.shape, tb.shape);
    let missing = || format!("{label}: no isolated kernel in the catalog");
    let base = [
        baseline_ext(ta, &ctx.catalog).ok_or_else(missing)?,
        baseline_ext(tb, &ctx.catalog).ok_or_else(missing)?,
    ];
    let go = [ta.to_ext(&ctx.catalog), tb.to_ext(&ctx.catalog)];
    let packets: Vec<usize> = (0..n as usize).map(|i| i % 2).collect();
    let configs = shared_configs(&base, &go);
    let mut time_ns = [0.0; 4];
    let mut mixed = false;
    for (slot, c) in time_ns.iter_mut().zip(&configs) {
        let r = run_config(ctx, &label, predictor, &packets, c)?;
        *slot = r.makespan_ns;
        if c.cp == Cp::Trained {
            // Both sizes ran in one group only when all n went together.
            mixed = n >= 2 && u32::from(r.max_cd()) == n;
        }
    }
    let features = |t: &TunedGemm| {
        GemmCandidate::new(&t.to_ext(&ctx.catalog), res)
            .map(|c| predictor.predict_cd(&c.features))
            .map_err(|e| format!("{label}: features: {e}"))
    };
    Ok(HeteroResult {
        app: app.to_string(),
        gemms: (ta.shape.to_string(), tb.shape.to_string()),
        n,
        time_ns,
        mixed,
        predicted: (features(ta)?, features(tb)?),
    })
}
