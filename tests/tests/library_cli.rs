//! `nmcp goldyloc library` on a four-row fixture cut from rocBLAS' MI100 data: the JSON's
//! keys, its aggregates recomputed from its own rows, the scatter SVG, and a clear error
//! on a missing data directory.

use std::path::{Path, PathBuf};
use std::process::Command;

const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mi100-library")
}

#[test]
fn library_compares_the_fixture_rows_and_writes_the_scatter() {
    let svg_dir = std::env::temp_dir().join(format!("nmcp-library-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&svg_dir);
    let o = Command::new(NMCP)
        .args(["goldyloc", "library", "--json", "--data"])
        .arg(fixture())
        .arg("--svg")
        .arg(&svg_dir)
        .output()
        .expect("nmcp runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let rows = doc["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 4);
    // Every model efficiency is a positive share of peak, and follows from its own time.
    for r in rows {
        let e = r["model"]["efficiency"].as_f64().expect("efficiency");
        assert!(e > 0.0 && e <= 100.0, "{r}");
        let (m, n, k) = (
            r["row"]["M"].as_f64().unwrap_or(0.0),
            r["row"]["N"].as_f64().unwrap_or(0.0),
            r["row"]["K"].as_f64().unwrap_or(0.0),
        );
        let ns = r["model"]["kernel_ns"].as_f64().expect("time");
        let peak = if r["row"]["dtype"] == "f32" {
            46.1
        } else {
            184.6
        };
        let want = 100.0 * 2.0 * m * n * k / ns / (peak * 1e3);
        assert!((e / want - 1.0).abs() < 0.01, "{e} vs {want}");
    }
    // Groups: HEAD FP16, HEAD FP32, rocm-4.1.0 FP32; agreement recomputed from the rows.
    let fam = doc["by_family"].as_array().expect("by_family");
    assert_eq!(fam.len(), 3);
    for g in fam {
        let mine: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| {
                r["row"]["tag"] == g["tag"]
                    && (r["row"]["dtype"] == "f32") == (g["dtype"] == "FP32")
            })
            .collect();
        assert_eq!(g["agreement"]["rows"].as_u64(), Some(mine.len() as u64));
        let tile = mine
            .iter()
            .filter(|r| {
                r["model"]["kernel"]["mt0"] == r["row"]["MacroTile0"]
                    && r["model"]["kernel"]["mt1"] == r["row"]["MacroTile1"]
            })
            .count() as f64
            / mine.len() as f64;
        assert_eq!(g["agreement"]["tile"].as_f64(), Some(tile), "{g}");
        // Only rows with a stored efficiency count: rocm-4.1.0's FP32 row has none.
        let with = mine
            .iter()
            .filter(|r| r["row"]["efficiency"].as_f64() > Some(0.0))
            .count();
        if with == 0 {
            assert!(g["efficiency"].is_null(), "{g}");
        } else {
            assert_eq!(g["efficiency"]["rows"].as_u64(), Some(with as u64));
        }
    }
    let by_type = doc["by_type"].as_array().expect("by_type");
    assert!(by_type
        .iter()
        .all(|g| g["distinct"]["library_solutions"].as_u64() == Some(1)));
    let svg = std::fs::read_to_string(svg_dir.join("mi100-library.svg")).expect("scatter");
    assert!(
        svg.starts_with("<svg") && svg.contains("FP32 HEAD (1)"),
        "{svg}"
    );
    let _ = std::fs::remove_dir_all(&svg_dir);
}

#[test]
fn a_missing_data_directory_is_a_clear_error() {
    let o = Command::new(NMCP)
        .args(["goldyloc", "library", "--data", "/nonexistent/mi100"])
        .output()
        .expect("nmcp runs");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("/nonexistent/mi100/matched.csv"), "{err}");
}
