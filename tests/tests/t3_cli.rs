//! `nmcp t3` end to end: usage errors, and (once the T3 runs exist) the study's JSON rows
//! and plots, `check`'s `.npy` files and layout, `rs`.

use std::path::Path;
use std::process::{Command, Output};

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn nmcp(args: &[&str]) -> Output {
    Command::new(NMCP)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NMCP}: {e}"))
}

fn ok(args: &[&str]) -> Output {
    let out = nmcp(args);
    assert!(
        out.status.success(),
        "nmcp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_model_is_a_usage_error_listing_the_known_ones() {
    let out = nmcp(&["t3", "--models", "nosuch"]);
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--models") && e.contains("nosuch"), "{e}");
    for m in ["mega-gpt-2", "t-nlg", "gpt-3", "palm", "mt-nlg"] {
        assert!(e.contains(m), "{m} missing from: {e}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_values_name_the_option() {
    for (args, want) in [
        (&["t3", "--tp", "0"][..], "--tp"),
        (&["t3", "--sublayers", "XY"][..], "--sublayers"),
        (&["t3", "--dtype", "f64"][..], "--dtype"),
        (&["t3", "--jobs", "0"][..], "--jobs"),
        (&["t3", "--link-latency-ns=-1"][..], "--link-latency-ns"),
        (&["t3", "rs", "--gpus", "1"][..], "--gpus"),
    ] {
        let out = nmcp(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    // A combination only the command sees is also a usage error.
    let out = nmcp(&["t3", "--h", "64", "--tokens", "128", "--tp", "128"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--tp 128"), "{}", stderr(&out));
}

#[test]
fn check_needs_at_least_two_gpus() {
    let out = nmcp(&["t3", "check", "--gpus", "1"]);
    assert!(!out.status.success());
    assert_eq!(out.status.code(), Some(2));
    let e = stderr(&out);
    assert!(e.contains("--gpus") && e.contains("at least 2"), "{e}");
}

#[test]
fn help_lists_the_subcommands_and_options() {
    let out = ok(&["t3", "--help"]);
    let h = String::from_utf8_lossy(&out.stdout);
    for want in [
        "check",
        "rs",
        "--models",
        "--tp",
        "--sublayers",
        "--h",
        "--tokens",
        "--model-name",
        "--gpus",
        "--shortcut",
        "--gpu-2x-cu",
        "--link-gbps",
        "--link-latency-ns",
        "--dtype",
        "--mca-threshold",
        "--json",
        "--svg",
        "--jobs",
    ] {
        assert!(h.contains(want), "{want} missing from help:\n{h}");
    }
}

#[test]
fn check_writes_partials_reduced_blocks_and_layout() {
    for (dtype, descr) in [("f16", "'<f2'"), ("f32", "'<f4'")] {
        for config in ["t3", "t3-mca", "sequential"] {
            let dir = tempfile::tempdir().unwrap();
            let d = dir.path().to_str().unwrap();
            let out = ok(&[
                "t3", "check", "--gpus", "4", "--m", "256", "--n", "256", "--k", "64", "--dtype",
                dtype, "--config", config, "--seed", "3", "--out", d,
            ]);
            let line = String::from_utf8_lossy(&out.stdout);
            assert!(line.contains("0 mismatches"), "{line}");
            check_dir(dir.path(), 4, 256, 256, descr);
        }
    }
}

/// Every partial is M x N, every reduced block has its layout's shape, and the blocks'
/// values are the element-wise sums of the partials.
fn check_dir(dir: &Path, gpus: u64, m: u64, n: u64, descr: &str) {
    let layout: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("layout.json")).unwrap()).unwrap();
    assert_eq!(layout["gpus"], gpus);
    assert_eq!(layout["m"], m);
    assert_eq!(layout["n"], n);
    let blocks = layout["blocks"].as_array().unwrap();
    assert_eq!(blocks.len() as u64, gpus);
    let read = |name: String| -> (Vec<u64>, Vec<f32>) {
        let bytes = std::fs::read(dir.join(&name)).unwrap();
        let f = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(f.dtype().descr(), descr, "{name}");
        let shape = f.shape().to_vec();
        let data: Vec<f32> = if descr == "'<f2'" {
            let h: Vec<half::f16> = f.into_vec().unwrap();
            h.iter().map(|x| x.to_f32()).collect()
        } else {
            f.into_vec().unwrap()
        };
        (shape, data)
    };
    let partials: Vec<Vec<f32>> = (0..gpus)
        .map(|g| {
            let (shape, d) = read(format!("partial_{g}.npy"));
            assert_eq!(shape, vec![m, n]);
            d
        })
        .collect();
    let mut covered = 0;
    for b in blocks {
        let g = b["gpu"].as_u64().unwrap();
        let r = [
            b["rows"][0].as_u64().unwrap(),
            b["rows"][1].as_u64().unwrap(),
        ];
        let c = [
            b["cols"][0].as_u64().unwrap(),
            b["cols"][1].as_u64().unwrap(),
        ];
        let (shape, d) = read(format!("reduced_{g}.npy"));
        assert_eq!(shape, vec![r[1] - r[0], c[1] - c[0]]);
        covered += d.len() as u64;
        // The sum is formed in f32 here; the block must agree to the type's rounding.
        for (i, row) in (r[0]..r[1]).enumerate() {
            for (j, col) in (c[0]..c[1]).enumerate() {
                let at = (row * n + col) as usize;
                let sum: f32 = partials.iter().map(|p| p[at]).sum();
                let got = d[i * (c[1] - c[0]) as usize + j];
                let tol = if descr == "'<f2'" { 1e-2 } else { 1e-5 } * sum.abs().max(1.0);
                assert!(
                    (got - sum).abs() <= tol,
                    "GPU {g} ({row}, {col}): {got} vs {sum}"
                );
            }
        }
    }
    assert_eq!(covered, m * n, "the blocks cover the output once");
}

#[test]
fn study_json_rows_and_svgs_for_a_small_custom_model() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("plots");
    let out = ok(&[
        "t3",
        "--h",
        "512",
        "--tokens",
        "512",
        "--model-name",
        "tiny",
        "--tp",
        "4",
        "--sublayers",
        "OP,FC-2",
        "--json",
        "--svg",
        svg.to_str().unwrap(),
    ]);
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 2 * 5);
    let configs: Vec<&str> = rows[..5]
        .iter()
        .map(|r| r["config"].as_str().unwrap())
        .collect();
    assert_eq!(
        configs,
        [
            "sequential",
            "t3",
            "t3-mca",
            "ideal-overlap",
            "ideal-rs-nmc"
        ]
    );
    for r in rows {
        assert_eq!(r["model"], "tiny");
        assert_eq!(r["tp"], 4);
        assert_eq!(r["gpus"], 4);
        assert_eq!(r["simulate"], "all-gpus");
        for k in [
            "gemm_seconds",
            "rs_seconds",
            "ag_seconds",
            "total_seconds",
            "speedup_vs_sequential",
        ] {
            assert!(r[k].as_f64().unwrap() >= 0.0, "{k}: {r}");
        }
        for k in [
            "gemm_reads",
            "gemm_writes",
            "rs_reads",
            "rs_writes",
            "updates",
            "ag",
        ] {
            assert!(r["bytes"][k].is_u64(), "bytes.{k}: {r}");
        }
    }
    for name in ["t3-speedup.svg", "t3-traffic.svg"] {
        assert!(std::fs::read_to_string(svg.join(name))
            .unwrap()
            .contains("<svg"));
    }
    // The human report of the same run.
    let out = ok(&[
        "t3",
        "--h",
        "512",
        "--tokens",
        "512",
        "--tp",
        "4",
        "--sublayers",
        "OP",
        "--shortcut",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("dissertation") && text.contains("DRAM traffic"),
        "{text}"
    );
}

#[test]
fn rs_json_has_rs_seconds() {
    let out = ok(&["t3", "rs", "--gpus", "4", "--bytes", "1M", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rs = v["rs_seconds"].as_f64().unwrap();
    let model = v["model_seconds"].as_f64().unwrap();
    assert!(rs > 0.0 && rs >= model * 0.999, "{v}");
    assert_eq!(v["gpus"], 4);
    assert_eq!(v["bytes"], 1 << 20);
}
