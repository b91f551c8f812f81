//! `nmcp mem` and `nmcp presets` through the CLI.

mod common;

use std::path::PathBuf;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn nmcp(args: &[&str]) -> std::process::Output {
    common::nmcp(NMCP, args)
}

/// A file in the system temp directory, unique to this test process and name.
fn temp_file(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("nmcp-mem-cli-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn small_stream_run_prints_parseable_json() {
    let out = nmcp(&["mem", "--requests", "4000", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["requests"], 4000);
    assert_eq!(v["reads"], 4000);
    assert_eq!(v["bytes"], 4000 * 64);
    assert_eq!(v["peak_gbps"], 256.0);
    assert_eq!(
        v["commands"]["RD"], 8000,
        "64-byte requests are two column reads each"
    );
    let bw = v["bandwidth_gbps"].as_f64().unwrap();
    assert!(bw > 0.0 && bw <= 256.0, "{bw}");
    assert!(v["read_latency_p99"].as_u64().unwrap() >= v["read_latency_min"].as_u64().unwrap());
    assert!(v["requests_per_second"].as_f64().unwrap() > 0.0);
    // Added keys: traffic by class and access kind, the arbiter, updates.
    assert_eq!(v["arbiter"], "fr-fcfs");
    assert_eq!(v["updates"], 0);
    assert_eq!(v["bytes_by_class"]["compute"]["read"], 4000 * 64);
    assert_eq!(v["bytes_by_class"]["communication"]["read"], 0);
    assert_eq!(v["requests_by_class"]["compute"]["read"], 4000);
    assert_eq!(v["requests_by_class"]["host"]["write"], 0);
}

#[test]
fn human_table_shows_bandwidth_next_to_peak() {
    let out = nmcp(&[
        "mem",
        "--pattern",
        "random",
        "--requests",
        "3000",
        "--size",
        "32",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "GB/s of 256.0 GB/s peak",
        "p99",
        "conflicts",
        "ACT",
        "M requests/s",
        "class         compute: 3000 reads (96000 B), 0 writes (0 B), 0 updates (0 B)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

#[test]
fn traces_in_both_formats_run() {
    let d = temp_file(
        "ok.trace",
        "# dramsim3\n0x0 R 0\n0x40 W 10\n0x1000 READ 20\n",
    );
    let out = nmcp(&["mem", "--trace", d.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        (v["reads"].as_u64(), v["writes"].as_u64()),
        (Some(2), Some(1))
    );

    let r = temp_file("ok.ramulator", "LD 0x0\nST 0x40\nLD 4096\n");
    let out = nmcp(&[
        "mem",
        "--trace",
        r.to_str().unwrap(),
        "--format",
        "ramulator",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["requests"], 3);
}

#[test]
fn bad_trace_line_reports_file_line_and_column() {
    let path = temp_file("bad.trace", "0x0 R 0\n0x40 X 10\n");
    let out = nmcp(&["mem", "--trace", path.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = stderr(&out);
    let want = format!("{}:2:6:", path.display());
    assert!(err.contains(&want), "expected {want:?} in {err:?}");
    assert!(err.contains("expected R or W"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn bad_preset_names_the_field() {
    let dump = nmcp(&["presets", "--dump", "hbm2-2000"]);
    assert!(dump.status.success());
    let good = temp_file("good.toml", &stdout(&dump));
    let out = nmcp(&["presets", "--check", good.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("ok"));

    let bad = temp_file("bad.toml", &stdout(&dump).replace("trc = 48", "trc = 30"));
    for args in [
        vec!["presets", "--check", bad.to_str().unwrap()],
        vec![
            "mem",
            "--preset-file",
            bad.to_str().unwrap(),
            "--requests",
            "10",
        ],
    ] {
        let out = nmcp(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.contains("timing.trc") && err.contains("tRAS + tRP"),
            "{args:?}: {err}"
        );
    }

    let unknown = temp_file(
        "unknown.toml",
        &stdout(&dump).replace("cl = 14", "cl = 14\ncas = 1"),
    );
    let out = nmcp(&["presets", "--check", unknown.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("cas"), "{}", stderr(&out));
}

#[test]
fn presets_lists_the_built_ins() {
    let out = nmcp(&["presets"]);
    assert!(out.status.success());
    let text = stdout(&out);
    for name in ["hbm2-2000", "t3-table-8.1", "lamb-ch6"] {
        assert!(text.contains(name), "{text}");
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    for args in [
        vec!["mem", "--size", "48", "--requests", "10"],
        vec!["mem", "--mapping", "ro-ba-bg", "--requests", "10"],
        vec!["mem", "--preset", "no-such", "--requests", "10"],
    ] {
        let out = nmcp(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = stderr(&out);
        assert!(
            err.starts_with("nmcp: error:") && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}
