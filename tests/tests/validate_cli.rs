//! `nmcp goldyloc validate` on a two-GEMM excerpt of the H200 measurement file: the JSON
//! keys issue 39 lists, measured figures read from the file, and a bad file's error
//! naming the file and the field.

use std::process::Command;

fn nmcp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_nmcp-cli"))
}

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/h200-two-gemms.json"
);

#[test]
fn validate_prints_the_issues_keys_with_the_files_measurements() {
    let out = nmcp()
        .args([
            "goldyloc", "validate", "--gpu", "h200", "--json", "--data", FIXTURE,
        ])
        .output()
        .expect("run nmcp");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["gemms"], 2);
    for key in ["median_abs_error", "spearman", "winner_agreement"] {
        let x = v["isolated"][key].as_f64().expect(key);
        assert!(x.is_finite(), "{key} = {x}");
    }
    for n in ["2", "4", "8", "16"] {
        for group in ["default_over_sequential", "go_over_default"] {
            let model = v[group][n]["model"].as_f64().expect("model");
            assert!(model > 0.5 && model < 3.0, "{group}.{n}.model = {model}");
        }
    }
    // The measured side is the file's: the geomean of seq_ms / conc_ms at n = 2.
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    let rows = file["cublas"].as_array().unwrap();
    let log_sum: f64 = rows
        .iter()
        .map(|r| (r["seq_ms"]["2"].as_f64().unwrap() / r["conc_ms"]["2"].as_f64().unwrap()).ln())
        .sum();
    let expect = (log_sum / rows.len() as f64).exp();
    let m2 = v["default_over_sequential"]["2"]["measured"]
        .as_f64()
        .unwrap();
    assert!((m2 - expect).abs() < 1e-12, "{m2} vs {expect}");
    let b = &v["best_cd16"];
    assert_eq!(
        b["measured_hist"]["16"], 2,
        "both GEMMs' best CD is 16 on the H200"
    );
    let models: u64 = b["model_hist"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(models, 2);
    assert_eq!(b["measured_majority_share"], 1.0);
}

#[test]
fn a_bad_field_is_named_with_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(FIXTURE).unwrap().replacen(
        "\"best_cd16\": 16",
        "\"best_cd16\": 3",
        1,
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, text).unwrap();
    let out = nmcp()
        .args(["goldyloc", "validate", "--data"])
        .arg(&bad)
        .output()
        .expect("run nmcp");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.json") && err.contains("cublas[0].best_cd16"),
        "{err}"
    );
}
