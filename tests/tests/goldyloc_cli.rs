//! `nmcp goldyloc tune|train|eval --quick` end to end, output parsed as JSON.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn scratch() -> PathBuf {
    common::scratch("goldyloc-cli")
}

fn run(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = common::nmcp_cached(NMCP, dir, args);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "nmcp {args:?}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

#[test]
fn quick_tune_train_eval_produce_consistent_json() {
    let dir = scratch();
    let lib = dir.join("golib.json");
    let lib_s = lib.to_string_lossy().to_string();
    let tune = run(
        &dir,
        &["goldyloc", "tune", "--quick", "--json", "--out", &lib_s],
    );
    let tuned = tune["gemms_tuned"].as_u64().expect("count");
    assert!(tuned > 20, "{tune}");
    let library: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&lib).expect("library written"))
            .expect("json");
    assert_eq!(library.as_array().map(|a| a.len() as u64), Some(tuned));
    assert!(library[0]["kernels"]
        .as_array()
        .is_some_and(|k| !k.is_empty() && k.len() <= 3));

    let pred = dir.join("pred.json");
    let pred_s = pred.to_string_lossy().to_string();
    let train = run(
        &dir,
        &["goldyloc", "train", "--quick", "--json", "--out", &pred_s],
    );
    assert!(
        train["fixed_point_agreement"].as_f64().expect("agreement") >= 0.99,
        "{train}"
    );
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pred).expect("predictor written"))
            .expect("json");
    assert_eq!(p["weight_q16"].as_array().map(Vec::len), Some(5));

    let eval = run(&dir, &["goldyloc", "eval", "--quick", "--json"]);
    let scenarios = eval["scenarios"].as_array().expect("scenarios");
    let ns: Vec<u64> = scenarios.iter().filter_map(|s| s["n"].as_u64()).collect();
    assert_eq!(ns, vec![2, 4, 8, 16]);
    for s in scenarios {
        let split: f64 = s["split"]
            .as_array()
            .expect("split")
            .iter()
            .filter_map(|v| v.as_f64())
            .sum();
        assert!((split - 1.0).abs() < 1e-9, "{split}");
        // Sequential over itself is 1; every configuration produced a finite time.
        assert!((s["all_over_sequential"][0].as_f64().expect("seq") - 1.0).abs() < 1e-12);
        for v in s["all_over_sequential"].as_array().expect("geomeans") {
            assert!(v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0), "{v}");
        }
        // The accuracy is cross-validated by size under three seeds, next to the
        // majority-class baseline on the same predictions, and every evaluated GEMM was
        // predicted by a model that never saw its size.
        assert_eq!(
            s["predictor_accuracy_seeds"].as_array().map(Vec::len),
            Some(3)
        );
        let acc = s["predictor_accuracy"].as_f64().expect("accuracy");
        let base = s["majority_baseline_accuracy"].as_f64().expect("baseline");
        assert!(
            (0.0..=1.0).contains(&acc) && (0.0..=1.0).contains(&base),
            "{s}"
        );
        // A near tie (within 2 % of the best CD's speedup) counts as right: never below
        // the strict figure, for the predictor and for the majority class alike.
        let near = s["near_tie_accuracy"].as_f64().expect("near-tie accuracy");
        let near_base = s["majority_near_tie_accuracy"]
            .as_f64()
            .expect("majority near-tie accuracy");
        assert!(near >= acc && near <= 1.0, "{s}");
        assert!(near_base >= base && near_base <= 1.0, "{s}");
        let evaluated: u64 = s["apps"]
            .as_array()
            .expect("apps")
            .iter()
            .filter_map(|a| a["gemms"].as_u64())
            .sum();
        assert_eq!(s["held_out_gemms"].as_u64(), Some(evaluated), "{s}");
        assert_eq!(s["gemms"], s["n"]);
        let gl = s["speedup_over_default"]["goldyloc"]
            .as_f64()
            .expect("goldyloc");
        assert!((gl - s["all_over_default"][3].as_f64().expect("same")).abs() < 1e-12);
        // Oracle never loses to Sequential by construction.
        assert!(s["all_over_sequential"][4].as_f64().expect("oracle") >= 1.0 - 1e-9);
    }
    let gemms = eval["gemms"].as_array().expect("gemms");
    assert!(!gemms.is_empty());
    // Every configuration ran through the firmware CP: the CP was busy in each, and
    // under GOLDYLOC it dispatched at the CD its own predictor answered (capped by n).
    assert_eq!(eval["loop_failures"].as_array().map(Vec::len), Some(0));
    for g in gemms {
        let n = g["n"].as_u64().expect("n");
        let busy = g["cp_busy_ns"].as_array().expect("cp busy");
        assert_eq!(busy.len(), 7, "{g}");
        assert!(
            busy.iter().all(|b| b.as_f64().is_some_and(|x| x > 0.0)),
            "{g}"
        );
        let predicted = g["predicted_cd"].as_u64().expect("predicted");
        assert_eq!(g["dispatched_cd"].as_u64(), Some(predicted.min(n)), "{g}");
    }
    // The CP charge comes from replaying the firmware: more queues to scan cost more,
    // and one decision at CD 16 is cheaper than fifteen at CD 1.
    let charges = eval["cp_charges"].as_array().expect("cp charges");
    let busy = |n: u64, cd: u64| {
        charges
            .iter()
            .find(|c| c["n"] == n && c["cd"] == cd)
            .and_then(|c| c["busy_ns"].as_f64())
            .expect("charge")
    };
    assert!(busy(2, 2) > 0.0 && busy(16, 16) > busy(2, 2));
    assert!(busy(16, 1) > busy(16, 16));
    // Heterogeneous mixes are evaluated in every scenario.
    let hetero = eval["hetero"].as_array().expect("hetero");
    assert_eq!(hetero.len(), 4);
    for h in hetero {
        assert!(h["pairs"].as_u64().is_some_and(|p| p > 0), "{h}");
        assert!((h["over_default"][1].as_f64().expect("default") - 1.0).abs() < 1e-12);
    }
    check_pinned(&eval);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The quick evaluation's figures, pinned (issue 12): a change to the GEMM model, the
/// firmware CP or the training that moves any of them fails here, so it is seen and
/// re-recorded on purpose (`NMCP_BLESS=1 cargo test -p nmcp-tests --test goldyloc_cli`),
/// with the move explained in the commit.
const PINNED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/expected/goldyloc-quick.txt");

fn pinned_text(eval: &serde_json::Value) -> String {
    let f = |v: &serde_json::Value| v.as_f64().map_or("-".to_string(), |x| format!("{x:.4}"));
    let mut out = String::from(
        "# nmcp goldyloc eval --quick --json: per scenario, geomean speedups (4 decimals) and accuracy\n",
    );
    for s in eval["scenarios"].as_array().into_iter().flatten() {
        let d = &s["speedup_over_default"];
        out.push_str(&format!(
            "n={} default/seq={} go={} goldyloc={} oracle={} cu={} rp={} accuracy={} majority={} held_out={}\n",
            s["n"],
            f(&s["speedup_over_sequential"]["default"]),
            f(&d["go_kernels"]),
            f(&d["goldyloc"]),
            f(&d["oracle"]),
            f(&d["cu_partition"]),
            f(&d["resource_partition"]),
            f(&s["predictor_accuracy"]),
            f(&s["majority_baseline_accuracy"]),
            s["held_out_gemms"],
        ));
    }
    for h in eval["hetero"].as_array().into_iter().flatten() {
        let o = &h["over_default"];
        out.push_str(&format!(
            "hetero n={} seq={} go={} goldyloc={} mixed={}\n",
            h["n"],
            f(&o[0]),
            f(&o[2]),
            f(&o[3]),
            f(&h["mixed_share"]),
        ));
    }
    out
}

fn check_pinned(eval: &serde_json::Value) {
    let now = pinned_text(eval);
    if std::env::var_os("NMCP_BLESS").is_some() {
        std::fs::write(PINNED, &now).expect("write the pinned figures");
        return;
    }
    let then = std::fs::read_to_string(PINNED).unwrap_or_default();
    assert!(
        then == now,
        "the quick GOLDYLOC evaluation moved (re-record with NMCP_BLESS=1 if intended):\n--- {PINNED}\n{then}\n--- now\n{now}"
    );
}

/// `--dtype f32` runs the same sizes in FP32 through tuning, training and the
/// configurations: at the MI100's FP32 matrix rate (a quarter of FP16's) and twice the
/// bytes, every GEMM's Sequential time is longer than in FP16.
#[test]
fn fp32_runs_the_same_sizes_slower_than_fp16() {
    let dir = scratch().join("fp32");
    std::fs::create_dir_all(&dir).expect("dir");
    let f16 = run(&dir, &["goldyloc", "eval", "--quick", "--json"]);
    let f32 = run(
        &dir,
        &["goldyloc", "eval", "--quick", "--json", "--dtype", "f32"],
    );
    let rows = |e: &serde_json::Value| -> Vec<(String, u64, f64)> {
        e["gemms"]
            .as_array()
            .expect("gemms")
            .iter()
            .map(|g| {
                (
                    g["gemm"].as_str().expect("label").to_string(),
                    g["n"].as_u64().expect("n"),
                    g["time_ns"][0].as_f64().expect("sequential"),
                )
            })
            .collect()
    };
    let (a, b) = (rows(&f16), rows(&f32));
    assert_eq!(a.len(), b.len());
    for ((la, na, ta), (lb, nb, tb)) in a.iter().zip(&b) {
        // The label names a non-FP16 type: `M_N_K_T1T2_f32`.
        assert_eq!((format!("{la}_f32"), na), (lb.clone(), nb));
        assert!(tb > ta, "{la} n={na}: f32 {tb} ns vs f16 {ta} ns");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--cd-sweep` runs each GEMM at every constant CD below `n` through the firmware and
/// keeps the fastest: the same in-loop runs as the configurations (deterministic), so
/// per GEMM the best is never slower than GO-Kernels (the sweep's largest CD) nor than
/// Oracle (a constant CD the sweep also runs), its CD is one of the table's up to `n`,
/// and the scenario's room over GO-Kernels is at least 1; the figures without the flag
/// are the same (pinned above).
#[test]
fn the_cd_sweep_bounds_every_cd_choice_in_the_loop() {
    let dir = scratch().join("sweep");
    std::fs::create_dir_all(&dir).expect("dir");
    let plain = run(&dir, &["goldyloc", "eval", "--quick", "--json"]);
    let sweep = run(
        &dir,
        &["goldyloc", "eval", "--quick", "--json", "--cd-sweep"],
    );
    assert!(plain["scenarios"][0]
        .get("best_constant_cd_over_go_kernels")
        .is_none());
    let gemms = sweep["gemms"].as_array().expect("gemms");
    assert!(!gemms.is_empty());
    let mut below_n = 0;
    for (g, p) in gemms.iter().zip(plain["gemms"].as_array().expect("gemms")) {
        assert_eq!(
            g["time_ns"], p["time_ns"],
            "the configurations did not move"
        );
        let n = g["n"].as_u64().expect("n");
        let best = &g["best_constant_cd"];
        let (cd, t) = (best[0].as_u64().expect("cd"), best[1].as_f64().expect("t"));
        assert!([1, 2, 4, 8, 16].contains(&cd) && cd <= n, "{g}");
        let go_kernels = g["time_ns"][2].as_f64().expect("go");
        let oracle = g["time_ns"][4].as_f64().expect("oracle");
        assert!(t <= go_kernels, "{g}");
        assert!(t <= oracle, "{g}");
        below_n += usize::from(cd < n);
    }
    // Somewhere a CD below n is the fastest (else the sweep would show nothing).
    assert!(below_n > 0);
    for s in sweep["scenarios"].as_array().expect("scenarios") {
        let room = s["best_constant_cd_over_go_kernels"]
            .as_f64()
            .expect("room");
        let taken = s["goldyloc_over_best_constant_cd"].as_f64().expect("taken");
        assert!(room >= 1.0 && taken > 0.0 && taken <= 1.0, "{s}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_gemm_csv_is_an_error_with_line_and_column() {
    let dir = scratch().join("bad");
    std::fs::create_dir_all(&dir).expect("dir");
    let csv = dir.join("g.csv");
    std::fs::write(&csv, "64,64,64,0,0,f16\n64,64,zz,0,0,f16\n").expect("write");
    let out = Command::new(NMCP)
        .args([
            "goldyloc",
            "eval",
            "--no-cache",
            "--gemms",
            &csv.to_string_lossy(),
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2, column 3"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
