//! The report's validation section: the GPU model against hardware data that no model
//! constant was fitted to a dissertation figure with. Holds the MI100 comparison with
//! rocBLAS' own MI100 tuning (`nmcp goldyloc library --json`): its stage, its scatter
//! plot and its headline rows (median efficiency error, tuner agreement, distinct winners);
//! and the H200 comparison with concurrent-GEMM measurements (`nmcp goldyloc validate
//! --json`): its stage and its measured-against-model rows, each with issue 39's limit.

use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

use super::figures::{arr, num, FigureError, Headline, Unit};
use super::{figure, Section, Stage, StageResult};
use crate::t3::plot::PlotResult;

/// The section's title.
pub const TITLE: &str = "validation: GPU model against hardware data";

/// Name of the MI100 library stage (its JSON is `data/mi100-library.json`).
pub const MI100_STAGE: &str = "mi100-library";

/// The MI100 library stage, reading the rocBLAS data in `data`.
pub fn mi100_stage(data: &Path) -> Stage {
    Stage {
        name: MI100_STAGE,
        what: "validation: MI100 isolated tuning against rocBLAS' MI100 tuning",
        args: vec![
            "goldyloc".into(),
            "library".into(),
            "--data".into(),
            data.display().to_string(),
            "--json".into(),
        ],
    }
}

/// Adds the MI100 scatter and rows to the validation section of `sections` (creating the
/// section if it is not there yet), when `results` hold the MI100 stage.
///
/// # Errors
/// The stage's JSON lacks a key, or the plot cannot be written.
pub fn add_mi100(
    sections: &mut Vec<Section>,
    results: &[StageResult],
    out: &Path,
) -> Result<(), String> {
    let Some(r) = results.iter().find(|r| r.stage.name == MI100_STAGE) else {
        return Ok(());
    };
    let fig = figure(
        out,
        "mi100-library.svg",
        &library_scatter(&r.json).map_err(|e| e.0)?,
        "MI100: the model's isolated efficiency (its tuned winner, % of the preset's matrix \
         peak) against the efficiency rocBLAS stores for its own winner at the same size"
            .into(),
    )?;
    let headlines = mi100_headlines(&r.json).map_err(|e| e.0)?;
    add_to_section(sections, r, headlines, vec![fig]);
    Ok(())
}

/// Appends a stage's command, rows and figures to the validation section, creating it
/// when it is not there yet.
fn add_to_section(
    sections: &mut Vec<Section>,
    r: &StageResult,
    headlines: Vec<Headline>,
    figures: Vec<super::Figure>,
) {
    let cmd = format!("nmcp {}", r.stage.args.join(" "));
    match sections.iter_mut().find(|s| s.title == TITLE) {
        Some(s) => {
            s.commands.push(cmd);
            s.headlines.extend(headlines);
            s.figures.extend(figures);
        }
        None => sections.push(Section {
            title: TITLE,
            commands: vec![cmd],
            headlines,
            figures,
        }),
    }
}

/// A row of the validation section: a model figure against hardware data (no
/// dissertation value; the measurement goes in `baseline`).
fn validation_row(
    figure: String,
    ours: f64,
    unit: Unit,
    config: String,
    baseline: String,
) -> Headline {
    Headline {
        chapter: TITLE,
        figure,
        dissertation: None,
        ours,
        unit,
        config,
        baseline,
    }
}

/// Name of the H200 validation stage (its JSON is `data/h200-validate.json`).
pub const H200_STAGE: &str = "h200-validate";

/// The H200 validation stage, reading the measurement file `data`, with the model's
/// contention options `model_args` (e.g. `--latency loaded`).
pub fn h200_stage(data: &Path, model_args: &[String]) -> Stage {
    let mut args: Vec<String> = vec![
        "goldyloc".into(),
        "validate".into(),
        "--gpu".into(),
        "h200".into(),
        "--data".into(),
        data.display().to_string(),
        "--json".into(),
    ];
    args.extend(model_args.iter().cloned());
    Stage {
        name: H200_STAGE,
        what: "validation: H200 model against concurrent-GEMM measurements",
        args,
    }
}

/// Adds the H200 rows to the validation section when `results` hold the H200 stage.
///
/// # Errors
/// The stage's JSON lacks a key.
pub fn add_h200(sections: &mut Vec<Section>, results: &[StageResult]) -> Result<(), String> {
    let Some(r) = results.iter().find(|r| r.stage.name == H200_STAGE) else {
        return Ok(());
    };
    let headlines = h200_headlines(&r.json).map_err(|e| e.0)?;
    add_to_section(sections, r, headlines, Vec::new());
    Ok(())
}

/// The H200 rows: isolated error, rank correlation and winner agreement; Default over
/// Sequential and GO over Default at every n and the best-CD majority share, each the
/// model next to the measurement and issue 39's acceptance limit.
///
/// # Errors
/// A key is missing from the validate JSON.
pub fn h200_headlines(doc: &Value) -> Result<Vec<Headline>, FigureError> {
    const W: &str = "goldyloc validate JSON";
    let gemms = num(doc, W, "gemms")?;
    let config = format!("H200 preset, Triton catalogue, {gemms:.0} GEMMs of the file");
    let row = |figure: String, ours: f64, unit: Unit, baseline: String| {
        validation_row(figure, ours, unit, config.clone(), baseline)
    };
    let mut v = vec![
        row(
            "H200 isolated: median |model - measured| / measured".into(),
            num(doc, W, "isolated.median_abs_error")?,
            Unit::Percent,
            format!(
                "limit 15 %; geomean model/measured {:.3}",
                num(doc, W, "isolated.geomean_ratio")?
            ),
        ),
        row(
            "H200 isolated: mean rank correlation of the configurations".into(),
            num(doc, W, "isolated.spearman")?,
            Unit::Times,
            "1 = the same order as measured".into(),
        ),
        row(
            "H200 isolated: winner agreement".into(),
            num(doc, W, "isolated.winner_agreement")?,
            Unit::Percent,
            "share of GEMMs whose modelled winner is the measured one".into(),
        ),
    ];
    for (key, what, limit) in [
        ("default_over_sequential", "Default over Sequential", 0.04),
        ("go_over_default", "GO kernels over Default", 0.03),
    ] {
        for n in ["2", "4", "8", "16"] {
            let measured = num(doc, W, &format!("{key}.{n}.measured"))?;
            v.push(row(
                format!("H200 {what}, n = {n} (geomean)"),
                num(doc, W, &format!("{key}.{n}.model"))?,
                Unit::Times,
                format!("measured {measured:.3}; limit +-{limit}"),
            ));
        }
    }
    let agreed = num(doc, W, "agreed_gemms")?;
    for n in ["2", "4", "8", "16"] {
        let measured = num(doc, W, &format!("go_over_default_agreed.{n}.measured"))?;
        v.push(row(
            format!(
                "H200 GO kernels over Default, n = {n}, the {agreed:.0} GEMMs whose isolated \
                 winner the model gets right (geomean)"
            ),
            num(doc, W, &format!("go_over_default_agreed.{n}.model"))?,
            Unit::Times,
            format!("measured {measured:.3} on the same GEMMs; no limit (a diagnostic)"),
        ));
    }
    for n in ["2", "4", "8", "16"] {
        let measured = num(doc, W, &format!("concurrent.{n}.slowdown.measured"))?;
        v.push(row(
            format!("H200 n = {n} concurrent copies over one isolated copy (geomean)"),
            num(doc, W, &format!("concurrent.{n}.slowdown.model"))?,
            Unit::Times,
            format!(
                "measured {measured:.3}; median |makespan error| {:.1} %",
                100.0 * num(doc, W, &format!("concurrent.{n}.median_abs_error"))?
            ),
        ));
    }
    v.push(row(
        "H200 best CD for 16: majority share".into(),
        num(doc, W, "best_cd16.model_majority_share")?,
        Unit::Percent,
        format!(
            "measured {:.0} %; limit +-15 points; per-GEMM agreement {:.0} %",
            100.0 * num(doc, W, "best_cd16.measured_majority_share")?,
            100.0 * num(doc, W, "best_cd16.agreement")?
        ),
    ));
    Ok(v)
}

/// The rows of the MI100 comparison: per ref and FP32 / FP16, the median efficiency
/// error and the tuner's agreement; per ref and logic type, the distinct winners.
///
/// # Errors
/// A key is missing from the library JSON.
pub fn mi100_headlines(doc: &Value) -> Result<Vec<Headline>, FigureError> {
    const W: &str = "goldyloc library JSON";
    let mut v = Vec::new();
    let row = |figure: String, ours: f64, unit: Unit, baseline: String| {
        validation_row(
            figure,
            ours,
            unit,
            "MI100 preset, isolated tuning over the catalog".into(),
            baseline,
        )
    };
    for (i, g) in arr(doc, W, "by_family")?.iter().enumerate() {
        let p = |k: &str| format!("by_family.{i}.{k}");
        let who = format!(
            "{} {}",
            g["tag"].as_str().unwrap_or("?"),
            g["dtype"].as_str().unwrap_or("?")
        );
        if !g["efficiency"].is_null() {
            v.push(row(
                format!("MI100 vs rocBLAS {who}: median |efficiency error|"),
                num(doc, W, &p("efficiency.median_abs_rel_error"))?,
                Unit::Percent,
                format!(
                    "{} rows; library median {:.1} %, model {:.1} %",
                    num(doc, W, &p("efficiency.rows"))?,
                    num(doc, W, &p("efficiency.library_median"))?,
                    num(doc, W, &p("efficiency.model_median"))?
                ),
            ));
        }
        let rows = num(doc, W, &p("agreement.rows"))?;
        for (k, what) in [
            ("tile", "macro tile"),
            ("depth_u", "DepthU"),
            ("split_u", "GlobalSplitU"),
            ("joint", "tile, DepthU and GSU"),
        ] {
            v.push(row(
                format!("MI100 vs rocBLAS {who}: tuner agrees on {what}"),
                num(doc, W, &p(&format!("agreement.{k}")))?,
                Unit::Percent,
                format!("{rows} rows"),
            ));
        }
    }
    for (i, g) in arr(doc, W, "by_type")?.iter().enumerate() {
        let p = |k: &str| format!("by_type.{i}.distinct.{k}");
        let gemms = num(doc, W, &p("gemms"))?;
        v.push(row(
            format!(
                "MI100 vs rocBLAS {} {}: distinct model winners as a share of the GEMMs \
                 (model's granularity)",
                g["tag"].as_str().unwrap_or("?"),
                g["dtype"].as_str().unwrap_or("?")
            ),
            num(doc, W, &p("model_kernels"))? / gemms.max(1.0),
            Unit::Percent,
            format!(
                "library {:.0} of {gemms:.0} at the same granularity ({:.0} solutions); \
                 tiles: model {:.0}, library {:.0}",
                num(doc, W, &p("library_kernels"))?,
                num(doc, W, &p("library_solutions"))?,
                num(doc, W, &p("model_tiles"))?,
                num(doc, W, &p("library_tiles"))?
            ),
        ));
    }
    Ok(v)
}

/// One point of the scatter: (library %, model %), its family and ref.
type Point = (f64, f64, String, String);

/// `mi100-library.svg`: model efficiency against the library's, one colour per FP32 /
/// FP16, a filled circle for HEAD and a cross for rocm-4.1.0, with the diagonal.
///
/// # Errors
/// A key is missing from the library JSON, or plotting failed.
pub fn library_scatter(doc: &Value) -> Result<String, FigureError> {
    const W: &str = "goldyloc library JSON";
    let mut pts: Vec<Point> = Vec::new();
    for (i, r) in arr(doc, W, "rows")?.iter().enumerate() {
        let lib = num(doc, W, &format!("rows.{i}.row.efficiency"))?;
        if lib <= 0.0 {
            continue;
        }
        let fam = if r["row"]["dtype"].as_str() == Some("f32") {
            "FP32"
        } else {
            "FP16"
        };
        pts.push((
            lib,
            num(doc, W, &format!("rows.{i}.model.efficiency"))?,
            fam.into(),
            r["row"]["tag"].as_str().unwrap_or("?").into(),
        ));
    }
    let mut title = "MI100: model vs rocBLAS efficiency".to_string();
    for (i, g) in arr(doc, W, "by_family")?.iter().enumerate() {
        if !g["efficiency"].is_null() {
            title.push_str(&format!(
                "; {} {} med |err| {:.0} %",
                g["tag"].as_str().unwrap_or("?"),
                g["dtype"].as_str().unwrap_or("?"),
                100.0
                    * num(
                        doc,
                        W,
                        &format!("by_family.{i}.efficiency.median_abs_rel_error")
                    )?
            ));
        }
    }
    let mut svg = String::new();
    draw_scatter(&mut svg, &title, &pts).map_err(|e| FigureError(format!("plot: {e}")))?;
    Ok(svg)
}

fn draw_scatter(svg: &mut String, title: &str, pts: &[Point]) -> PlotResult {
    let root = SVGBackend::with_string(svg, (860, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = pts
        .iter()
        .map(|p| p.0.max(p.1))
        .fold(100.0f64, f64::max)
        .ceil();
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 14))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..top, 0f64..top)?;
    chart
        .configure_mesh()
        .x_desc("rocBLAS stored efficiency, % of peak")
        .y_desc("model isolated efficiency, % of peak")
        .draw()?;
    let grey = RGBColor(120, 120, 120);
    chart
        .draw_series(LineSeries::new([(0.0, 0.0), (top, top)], grey))?
        .label("model = library")
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], grey));
    let pal = &crate::t3::plot::COLOURS;
    for (fi, fam) in ["FP32", "FP16"].iter().enumerate() {
        let c = pal[1 + fi % (pal.len() - 1)];
        for tag in ["HEAD", "rocm-4.1.0"] {
            let sel: Vec<(f64, f64)> = pts
                .iter()
                .filter(|p| p.2 == *fam && p.3 == tag)
                .map(|p| (p.0, p.1))
                .collect();
            if sel.is_empty() {
                continue;
            }
            let label = format!("{fam} {tag} ({})", sel.len());
            if tag == "HEAD" {
                chart
                    .draw_series(sel.iter().map(|p| Circle::new(*p, 3, c.filled())))?
                    .label(label)
                    .legend(move |(x, y)| Circle::new((x + 8, y), 3, c.filled()));
            } else {
                chart
                    .draw_series(sel.iter().map(|p| Cross::new(*p, 3, c.stroke_width(1))))?
                    .label(label)
                    .legend(move |(x, y)| Cross::new((x + 8, y), 3, c.stroke_width(1)));
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod h200_tests {
    use super::*;

    fn doc() -> Value {
        let pair = |m: f64, o: f64| serde_json::json!({"measured": m, "model": o});
        serde_json::json!({
            "gemms": 32,
            "isolated": {"median_abs_error": 0.21, "spearman": 0.79,
                         "winner_agreement": 0.58, "geomean_ratio": 0.86},
            "default_over_sequential": {"2": pair(0.98, 1.04), "4": pair(1.02, 1.08),
                                        "8": pair(1.06, 1.08), "16": pair(1.07, 1.09)},
            "go_over_default": {"2": pair(1.02, 1.07), "4": pair(1.04, 1.10),
                                "8": pair(1.05, 1.11), "16": pair(1.07, 1.13)},
            "go_over_default_agreed": {"2": pair(1.01, 1.01), "4": pair(1.01, 1.02),
                                       "8": pair(1.03, 1.03), "16": pair(1.04, 1.04)},
            "agreed_gemms": 18,
            "concurrent": {
                "2": {"median_abs_error": 0.11, "slowdown": pair(1.85, 1.84)},
                "4": {"median_abs_error": 0.11, "slowdown": pair(3.48, 3.50)},
                "8": {"median_abs_error": 0.12, "slowdown": pair(6.75, 6.90)},
                "16": {"median_abs_error": 0.13, "slowdown": pair(13.2, 14.0)}},
            "best_cd16": {"model_majority_share": 0.72, "measured_majority_share": 0.59,
                          "agreement": 0.56}
        })
    }

    #[test]
    fn every_figure_is_a_row_with_its_measurement_and_limit() {
        let rows = h200_headlines(&doc()).expect("rows");
        assert_eq!(rows.len(), 3 + 8 + 8 + 1);
        let slow16 = rows
            .iter()
            .find(|r| r.figure.starts_with("H200 n = 16 concurrent"))
            .expect("row");
        assert_eq!(slow16.ours, 14.0);
        assert!(slow16.baseline.contains("measured 13.200") && slow16.baseline.contains("13.0 %"));
        let ds2 = rows
            .iter()
            .find(|r| r.figure == "H200 Default over Sequential, n = 2 (geomean)")
            .expect("row");
        assert_eq!(ds2.ours, 1.04);
        assert!(ds2.baseline.contains("measured 0.980") && ds2.baseline.contains("0.04"));
        let maj = rows.last().expect("row");
        assert!(maj.baseline.contains("measured 59 %"), "{}", maj.baseline);
    }

    #[test]
    fn a_missing_key_is_an_error_naming_it() {
        let mut d = doc();
        d["go_over_default"]["8"] = Value::Null;
        let e = h200_headlines(&d).expect_err("missing");
        assert!(e.0.contains("go_over_default.8"), "{}", e.0);
    }
}
