//! `nmcp lamb` end to end: JSON figures, bounds, TS sweep, `.npy` in and out.

mod common;

use std::path::Path;

/// The CLI under test, as Cargo built it for this package.
const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn json(args: &[&str]) -> serde_json::Value {
    let out = common::nmcp(NMCP, args);
    assert!(
        out.status.success(),
        "nmcp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

const SMALL: [&str; 8] = [
    "lamb",
    "--layers",
    "1",
    "--d-model",
    "64",
    "--preset",
    "hbm2-2000",
    "--json",
];

#[test]
fn small_model_functional_run_matches_reference_and_respects_bounds() {
    let mut args = SMALL.to_vec();
    args.extend(["--functional", "--steps", "2", "--ts-sweep", "--breakdown"]);
    let v = json(&args);
    let err = v["max_error_vs_term_scale"].as_f64().unwrap();
    assert!(err <= 1e-5, "max relative error {err}");
    let bound = v["physical_bound"].as_f64().unwrap();
    let s = v["speedup"][0].as_f64().unwrap();
    assert!(s > 0.0 && s <= bound, "speedup {s} vs bound {bound}");
    assert!(
        v["speedup"][2].as_f64().unwrap() > s,
        "80 % GPU must be slower than 100 %"
    );
    let sweep = v["ts_sweep"].as_array().unwrap();
    assert!(sweep.len() >= 5);
    let mut last = 0.0;
    for t in sweep {
        let x = t["speedup_vs_ideal_100"].as_f64().unwrap();
        assert!(x <= bound, "{t}");
        assert!(
            x >= last * 0.999,
            "speedup fell from {last} to {x} at TS {}",
            t["ts_entries"]
        );
        last = x;
    }
    // Removing an overhead never makes NMC slower, and nothing passes the bounds.
    let b: Vec<f64> = v["breakdown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["speedup_vs_ideal_100"].as_f64().unwrap())
        .collect();
    // As configured; without refresh; the sequencer free; free and without refresh;
    // without host latency; and TS 256 without refresh; program bound; physical bound.
    assert_eq!(b.len(), 8);
    assert!((b[0] - s).abs() < 1e-9 * s, "{b:?} vs {s}");
    assert!(
        b[1] >= b[0] && b[2] >= b[0] * 0.999 && b[3] >= b[1].max(b[2]) * 0.999,
        "{b:?}"
    );
    assert!(b[4] >= b[0] && b[5] >= b[1].max(b[4]) * 0.999, "{b:?}");
    assert!(
        b[3].max(b[5]) <= b[6] && b[6] <= b[7] && (b[7] - bound).abs() < 1e-9,
        "{b:?}"
    );
    assert!(v["activations"].as_u64().unwrap() > 0);
    assert!(v["gpu_bytes"].as_u64().unwrap() == 13 * 4 * v["parameters"].as_u64().unwrap() * 2);
    // The ALU issue models side by side (issue 10): the default three, each with its
    // speedups at 100/90/80 % of peak, under the physical bound, with its own TS sweep.
    let models = v["alu_models"].as_array().unwrap();
    let names: Vec<&str> = models.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["column-triggered", "pipelined", "pipelined+staged"]);
    assert!((models[0]["speedup"][0].as_f64().unwrap() - s).abs() < 1e-12);
    for m in models {
        let sp: Vec<f64> = m["speedup"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(sp.len(), 3);
        assert!(sp[0] <= bound && sp[0] < sp[1] && sp[1] < sp[2], "{m}");
        assert_eq!(m["ts_sweep"].as_array().unwrap().len(), sweep.len());
    }
    assert!(v["firmware_share"].as_f64().unwrap() > 0.0);
}

fn write_npy(path: &Path, shape: &[u64], data: &[f32]) {
    use npyz::WriterBuilder;
    let f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(f)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn read_npy(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap()
}

#[test]
fn npy_in_and_out() {
    let dir = std::env::temp_dir().join(format!("nmcp-lamb-npy-{}", std::process::id()));
    let (inp, out) = (dir.join("in"), dir.join("out"));
    std::fs::create_dir_all(&inp).unwrap();
    let w: Vec<f32> = (0..300).map(|i| (i as f32 * 0.37).sin()).collect();
    let g: Vec<f32> = (0..300).map(|i| (i as f32 * 0.11).cos() * 1e-2).collect();
    write_npy(&inp.join("dense.w.npy"), &[20, 15], &w);
    write_npy(&inp.join("dense.g.npy"), &[20, 15], &g);
    write_npy(&inp.join("bias.w.npy"), &[7], &w[..7]);
    write_npy(&inp.join("bias.g.npy"), &[7], &g[..7]);
    let v = json(&[
        "lamb",
        "--preset",
        "hbm2-2000",
        "--input",
        inp.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(v["tensors"], 2);
    assert!(v["max_error_vs_term_scale"].as_f64().unwrap() <= 1e-5);
    let w2 = read_npy(&out.join("dense.w.npy"));
    assert_eq!(w2.len(), 300);
    assert!(
        w2.iter().zip(&w).any(|(a, b)| a != b),
        "weights did not change"
    );
    assert_eq!(read_npy(&out.join("bias.m.npy")).len(), 7);

    // A shape mismatch is an error naming the file, and nothing is written.
    let out2 = dir.join("out2");
    write_npy(&inp.join("bias.g.npy"), &[8], &g[..8]);
    let r = common::nmcp(
        NMCP,
        &[
            "lamb",
            "--preset",
            "hbm2-2000",
            "--input",
            inp.to_str().unwrap(),
            "--output",
            out2.to_str().unwrap(),
        ],
    );
    assert!(!r.status.success());
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(e.contains("bias.g.npy") && e.contains("shape"), "{e}");
    assert!(!out2.exists(), "output written despite the error");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--program three-slot` computes the same numbers as the default program (the global
/// norm and the error against the reference are bit-for-bit the same) under every bound;
/// an unknown program is refused by name.
#[test]
fn three_slot_program_matches_the_default_and_respects_bounds() {
    let mut base = SMALL.to_vec();
    base.extend(["--functional", "--steps", "2"]);
    let four = json(&base);
    let mut args = base.clone();
    args.extend(["--program", "three-slot"]);
    let three = json(&args);
    assert_eq!(four["program"], "four-slot");
    assert_eq!(three["program"], "three-slot");
    for k in ["max_error_vs_term_scale", "global_norm"] {
        assert_eq!(four[k], three[k], "{k}");
    }
    let bound = three["physical_bound"].as_f64().unwrap();
    for m in three["alu_models"].as_array().unwrap() {
        let s = m["speedup"][0].as_f64().unwrap();
        assert!(s <= m["row_cycle_bound"].as_f64().unwrap(), "{m}");
        assert!(s <= bound, "{m}");
    }
    let mut bad = SMALL.to_vec();
    bad.extend(["--program", "two-slot"]);
    let out = common::nmcp(NMCP, &bad);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--program two-slot"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
