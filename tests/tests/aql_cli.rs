//! `nmcp aql decode` and `nmcp cp replay` end to end, on a dump made by `nmcp cp gen-dump`.

mod common;

use std::path::PathBuf;

use serde_json::Value;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn nmcp(args: &[&str]) -> std::process::Output {
    common::nmcp(NMCP, args)
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nmcp-aql-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn gen(name: &str, extra: &[&str]) -> String {
    let path = temp(name);
    let p = path.to_str().unwrap().to_owned();
    let mut args = vec!["cp", "gen-dump", &p, "--queues", "3", "--gemms", "2"];
    args.extend_from_slice(extra);
    let out = nmcp(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    p
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    common::json_lines(stdout)
}

#[test]
fn decode_table_and_json() {
    let dump = gen("clean.bin", &[]);
    let out = nmcp(&["aql", "decode", &dump]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kernel_dispatch"), "{text}");
    assert!(text.contains("barrier_and"), "{text}");
    assert!(text.contains("GEMM 4096x1024x512 f16 kernels=3"), "{text}");

    let out = nmcp(&["aql", "decode", &dump, "--json"]);
    assert!(out.status.success());
    let lines = json_lines(&out.stdout);
    // 3 queues x (2 GEMMs + 1 kernel) + barrier + GEMM behind it.
    assert_eq!(lines.len(), 11);
    let gemm = lines
        .iter()
        .find(|l| l.get("gemm_ext").is_some())
        .expect("a GEMM packet");
    for field in [
        "type",
        "barrier",
        "acquire_fence_scope",
        "release_fence_scope",
        "dimensions",
        "workgroup_size_x",
        "workgroup_size_y",
        "workgroup_size_z",
        "grid_size_x",
        "grid_size_y",
        "grid_size_z",
        "private_segment_size",
        "group_segment_size",
        "kernel_object",
        "kernarg_address",
        "completion_signal",
    ] {
        assert!(gemm.get(field).is_some(), "missing {field}: {gemm}");
    }
    assert_eq!(gemm["type"], "kernel_dispatch");
    assert_eq!(gemm["gemm_ext"]["kernels"].as_array().unwrap().len(), 3);
    assert_eq!(
        gemm["kernel_object"],
        gemm["gemm_ext"]["kernels"][0]["kernel_object"]
    );
    let barrier = lines.iter().find(|l| l["type"] == "barrier_and").unwrap();
    assert!(barrier["dep_signal"].is_array());
}

#[test]
fn decode_reports_malformed_packets_and_bad_lengths() {
    let dump = gen("bad.bin", &["--malformed"]);
    let out = nmcp(&["aql", "decode", &dump, "--json"]);
    assert!(
        !out.status.success(),
        "a packet that does not decode fails the command"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("header.type") && err.contains("offset"),
        "{err}"
    );
    let lines = json_lines(&out.stdout);
    assert!(lines.iter().any(|l| l.get("error").is_some()));
    assert!(lines.iter().any(|l| l["invalid"]
        .as_str()
        .is_some_and(|s| s.contains("grid_size_x"))));
    assert!(lines.iter().any(|l| l["gemm_ext_error"]
        .as_str()
        .is_some_and(|s| s.contains("magic at byte 0"))));

    let mut bytes = std::fs::read(&dump).unwrap();
    let len = bytes.len();
    bytes.extend_from_slice(&[0u8; 7]);
    let cut = temp("cut.bin");
    std::fs::write(&cut, bytes).unwrap();
    let out = nmcp(&["aql", "decode", cut.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("offset {len}")), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn replay_runs_good_packets_and_rejects_bad_ones() {
    let dump = gen("replay.bin", &["--malformed"]);
    let out = nmcp(&["cp", "replay", &dump, "--cd", "4", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = json_lines(&out.stdout);
    let summary = &lines.last().unwrap()["summary"];
    assert_eq!(summary["packets"], 21);
    assert_eq!(summary["rejected"], 10);
    assert_eq!(summary["dispatched"], 10);
    assert_eq!(summary["pending"], 0);
    assert!(summary["cp_cycles"].as_u64().unwrap() > 0);
    let packets = &lines[..lines.len() - 1];
    // Three GEMMs at the heads, predicted 4: CD = min(4, 3) = 3, which runs the kernels
    // tuned for CD 2 (the isolated ones in the sample records).
    assert!(packets
        .iter()
        .any(|l| l["status"] == "dispatched" && l["cd"] == 3 && l["swapped"] == false));
    for l in packets.iter().filter(|l| l["status"] == "rejected") {
        assert!(l["signal_value"].as_i64().unwrap() < 0, "{l}");
        assert!(l["completed_ns"].is_number(), "{l}");
    }

    // The sample's kernel objects are not catalog kernels: the GEMM model resolves
    // them from their metadata. CD 1 from a constant predictor (no training needed).
    let out = nmcp(&["cp", "replay", &dump, "--cd", "1"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("rejected ext_magic"), "{text}");
    assert!(text.contains("barrier resolved"), "{text}");
    assert!(text.contains("10 rejected"), "{text}");
}
