//! `nmcp cp gen-dump --library` and `nmcp cp replay` end to end: real GEMMs with their GO
//! library records, replayed through the firmware CP on the GEMM model (`GpuSim`) with the
//! predictor `nmcp goldyloc train` wrote.

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn scratch() -> PathBuf {
    common::scratch("cp-replay-cli")
}

fn run(dir: &Path, args: &[&str]) -> Output {
    common::nmcp_cached(NMCP, dir, args)
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    common::json_lines(stdout)
}

#[test]
fn go_library_gemms_replay_on_the_gemm_model_with_the_trained_predictor() {
    let dir = scratch();
    let s = |p: &str| dir.join(p).to_string_lossy().to_string();
    let (lib, pred, dump) = (s("golib.json"), s("predictor.json"), s("go.bin"));
    run(
        &dir,
        &["goldyloc", "tune", "--quick", "--json", "--out", &lib],
    );
    run(
        &dir,
        &["goldyloc", "train", "--quick", "--json", "--out", &pred],
    );
    let library: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&lib).expect("library")).expect("json");
    let (queues, gemms) = (8usize, 3usize);
    run(
        &dir,
        &[
            "cp",
            "gen-dump",
            &dump,
            "--library",
            &lib,
            "--queues",
            "8",
            "--gemms",
            "3",
        ],
    );

    let out = run(
        &dir,
        &["cp", "replay", &dump, "--predictor", &pred, "--json"],
    );
    let lines = json_lines(&out.stdout);
    let summary = &lines.last().expect("summary")["summary"];
    assert_eq!(summary["engine"], "gpu mi100", "{summary}");
    assert_eq!(summary["predictor"], pred.as_str());
    assert_eq!(summary["packets"], queues * gemms);
    assert_eq!(summary["dispatched"], queues * gemms);
    assert_eq!(summary["rejected"], 0);
    assert_eq!(summary["pending"], 0);
    assert_eq!(summary["truncated"], false);
    assert!(summary["cp_decisions"].as_u64().expect("decisions") >= 1);
    assert!(summary["cp_ns_per_decision"].as_f64().expect("ns") > 0.0);
    let packets = &lines[..lines.len() - 1];
    for l in packets {
        assert_eq!(l["kind"], "gemm", "{l}");
        assert_eq!(l["gemm"], true, "{l}");
        // Dispatch id i on every queue is library entry i: the CP patched in one of that
        // record's kernel objects (the GO kernel for its CD).
        let i = l["dispatch_id"].as_u64().expect("id") as usize;
        let kos: Vec<u64> = library[i]["kernels"]
            .as_array()
            .expect("kernels")
            .iter()
            .map(|k| k["kernel_object"].as_u64().expect("ko"))
            .collect();
        assert!(
            kos.contains(&l["kernel_object"].as_u64().expect("ko")),
            "{l}"
        );
        let cd = l["cd"].as_u64().expect("cd");
        assert!((1..=queues as u64).contains(&cd), "{l}");
        let (launched, done) = (
            l["launched_ns"].as_f64().expect("launched"),
            l["completed_ns"].as_f64().expect("completed"),
        );
        assert!(done > launched, "{l}");
    }
    let gpu_makespan = summary["makespan_ns"].as_f64().expect("makespan");

    // The fixed-time engine and a constant CD remain available.
    let out = run(
        &dir,
        &[
            "cp", "replay", &dump, "--engine", "fixed", "--cd", "4", "--json",
        ],
    );
    let lines = json_lines(&out.stdout);
    let summary = &lines.last().expect("summary")["summary"];
    assert!(summary["engine"]
        .as_str()
        .expect("engine")
        .starts_with("fixed"));
    assert_eq!(summary["dispatched"], queues * gemms);
    assert!(lines[..lines.len() - 1]
        .iter()
        .all(|l| l["cd"].as_u64().is_some_and(|cd| cd <= 4)));
    assert_ne!(summary["makespan_ns"].as_f64(), Some(gpu_makespan));

    // A library dump refuses --malformed (that belongs to the sample dump).
    let bad = Command::new(NMCP)
        .args(["cp", "gen-dump", &dump, "--library", &lib, "--malformed"])
        .output()
        .expect("runs");
    assert!(!bad.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}
