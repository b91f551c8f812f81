//! SVG plots of `nmcp t3 --svg DIR`: `t3-speedup.svg` (grouped bars of the speedup over
//! Sequential per sub-layer and scenario, with a geomean group) and `t3-traffic.svg`
//! (stacked DRAM bytes by kind for Sequential, T3 and T3-MCA per sub-layer). Drawn with
//! plotters like the GOLDYLOC plots.

use std::path::{Path, PathBuf};

use nmcp_emulator::t3::{Scenario, SubLayerResult, TrafficBytes};
use plotters::prelude::*;

use super::{geomean, groups, TRAFFIC_SCENARIOS};

pub(crate) type PlotResult = Result<(), Box<dyn std::error::Error>>;

/// The chart type of every bar plot here.
pub(crate) type BarChart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Draws one series of bars in `colour` with a legend swatch named `label`.
pub(crate) fn bar_series<'a, DB: DrawingBackend + 'a>(
    chart: &mut BarChart<'a, DB>,
    bars: Vec<Rectangle<(f64, f64)>>,
    label: impl Into<String>,
    colour: RGBColor,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    chart
        .draw_series(bars)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
    Ok(())
}

/// The legend box at `pos`, then the whole plot written out.
pub(crate) fn legend_and_present<'a, DB: DrawingBackend + 'a>(
    chart: &mut BarChart<'a, DB>,
    root: &DrawingArea<DB, plotters::coord::Shift>,
    pos: SeriesLabelPosition,
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(pos)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The palette of every plot nmcp draws (grey first, for the baseline).
pub(crate) const COLOURS: [RGBColor; 6] = [
    RGBColor(120, 120, 120),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
];

/// Bytes by kind, in stacking order, with their legend names.
fn kinds(b: &TrafficBytes) -> [(&'static str, u64); 6] {
    [
        ("GEMM reads", b.gemm_reads),
        ("GEMM writes", b.gemm_writes),
        ("RS reads", b.rs_reads),
        ("RS writes", b.rs_writes),
        ("updates", b.updates),
        ("AG", b.ag),
    ]
}

/// Writes both plots into `dir` (created if missing); returns their paths.
///
/// # Errors
/// The directory or a file cannot be written.
pub fn write_svgs(dir: &Path, results: &[SubLayerResult]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    let speed = dir.join("t3-speedup.svg");
    let mut svg = String::new();
    speedup_svg(&mut svg, results).map_err(|e| format!("{}: {e}", speed.display()))?;
    crate::cmd::io::write_file(&speed, svg.as_bytes())?;
    let traffic = dir.join("t3-traffic.svg");
    let mut svg = String::new();
    traffic_svg(&mut svg, results).map_err(|e| format!("{}: {e}", traffic.display()))?;
    crate::cmd::io::write_file(&traffic, svg.as_bytes())?;
    Ok(vec![speed, traffic])
}

/// Two-line x label of a group, centred under it.
fn group_label<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    (px, py): (i32, i32),
    lines: [&str; 2],
) -> PlotResult
where
    DB::ErrorType: 'static,
{
    for (i, l) in lines.iter().enumerate() {
        root.draw(&Text::new(
            l.to_string(),
            (px - 3 * l.len() as i32, py + 8 + 13 * i as i32),
            ("sans-serif", 11),
        ))?;
    }
    Ok(())
}

fn speedup_svg(svg: &mut String, results: &[SubLayerResult]) -> PlotResult {
    let gs = groups(results);
    let scen = &Scenario::ALL[1..];
    // One row of bars per sub-layer, then the geomean over all of them.
    let mut bars: Vec<([String; 2], Vec<f64>)> = gs
        .iter()
        .map(|g| {
            let sl = g.sublayer;
            let v = scen
                .iter()
                .map(|s| g.get(*s).map_or(0.0, |r| r.speedup_vs_sequential))
                .collect();
            ([sl.model.clone(), format!("{} TP{}", sl.name, sl.tp)], v)
        })
        .collect();
    let gm = scen
        .iter()
        .map(|s| {
            geomean(
                results
                    .iter()
                    .filter(|r| r.scenario == *s)
                    .map(|r| r.speedup_vs_sequential),
            )
            .unwrap_or(0.0)
        })
        .collect();
    bars.push((["geomean".into(), String::new()], gm));
    let n = bars.len();
    let width = (160 + 110 * n as u32).max(700);
    let root = SVGBackend::with_string(svg, (width, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax = bars
        .iter()
        .flat_map(|b| b.1.iter().copied())
        .filter(|x| x.is_finite())
        .fold(1.0, f64::max)
        * 1.45;
    let mut chart = ChartBuilder::on(&root)
        .caption("T3: speedup over Sequential", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(45)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("speedup")
        .draw()?;
    for (i, (l, _)) in bars.iter().enumerate() {
        let p = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        group_label(&root, p, [&l[0], &l[1]])?;
    }
    let w = 0.8 / scen.len() as f64;
    for (ci, s) in scen.iter().enumerate() {
        let colour = COLOURS[(ci + 1) % COLOURS.len()];
        let series: Vec<Rectangle<(f64, f64)>> = bars
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let x0 = i as f64 + 0.1 + w * ci as f64;
                Rectangle::new([(x0, 0.0), (x0 + w, b.1[ci])], colour.filled())
            })
            .collect();
        bar_series(&mut chart, series, s.name(), colour)?;
    }
    // Sequential = 1.
    chart
        .draw_series(std::iter::once(PathElement::new(
            vec![(0.0, 1.0), (n as f64, 1.0)],
            BLACK.stroke_width(1),
        )))?
        .label("sequential = 1")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 10, y)], BLACK));
    legend_and_present(&mut chart, &root, SeriesLabelPosition::UpperRight)
}

fn traffic_svg(svg: &mut String, results: &[SubLayerResult]) -> PlotResult {
    let gs = groups(results);
    let n = gs.len().max(1);
    let width = (160 + 130 * n as u32).max(700);
    let root = SVGBackend::with_string(svg, (width, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let ymax = gs
        .iter()
        .flat_map(|g| TRAFFIC_SCENARIOS.iter().filter_map(|s| g.get(*s)))
        .map(|r| r.bytes.total() as f64 / 1e6)
        .fold(1e-3, f64::max)
        * 1.5;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "T3: DRAM traffic per GPU by kind (bars: sequential, t3, t3-mca)",
            ("sans-serif", 20),
        )
        .margin(10)
        .x_label_area_size(60)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("MB")
        .draw()?;
    let w = 0.8 / TRAFFIC_SCENARIOS.len() as f64;
    for (i, g) in gs.iter().enumerate() {
        for (si, s) in TRAFFIC_SCENARIOS.iter().enumerate() {
            let x = i as f64 + 0.1 + w * (si as f64 + 0.5);
            let (px, py) = chart.backend_coord(&(x, 0.0));
            let short = match s {
                Scenario::Sequential => "seq",
                Scenario::T3 => "t3",
                _ => "mca",
            };
            root.draw(&Text::new(
                short,
                (px - 3 * short.len() as i32, py + 4),
                ("sans-serif", 9),
            ))?;
        }
        let sl = g.sublayer;
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let second = format!("{} TP{}", sl.name, sl.tp);
        group_label(&root, (px, py + 12), [&sl.model, &second])?;
    }
    for k in 0..6 {
        let colour = COLOURS[k];
        let mut series = Vec::new();
        let mut name = "";
        for (i, g) in gs.iter().enumerate() {
            for (si, s) in TRAFFIC_SCENARIOS.iter().enumerate() {
                let Some(r) = g.get(*s) else { continue };
                let ks = kinds(&r.bytes);
                name = ks[k].0;
                let below: u64 = ks[..k].iter().map(|x| x.1).sum();
                let (y0, y1) = (below as f64 / 1e6, (below + ks[k].1) as f64 / 1e6);
                let x0 = i as f64 + 0.1 + w * si as f64;
                series.push(Rectangle::new(
                    [(x0, y0), (x0 + w * 0.9, y1)],
                    colour.filled(),
                ));
            }
        }
        if name.is_empty() {
            name = kinds(&TrafficBytes::default())[k].0;
        }
        bar_series(&mut chart, series, name, colour)?;
    }
    legend_and_present(&mut chart, &root, SeriesLabelPosition::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_svgs_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("plots");
        let paths = write_svgs(&out, &super::super::tests::sample()).unwrap();
        assert_eq!(paths.len(), 2);
        for (p, name) in paths.iter().zip(["t3-speedup.svg", "t3-traffic.svg"]) {
            assert_eq!(p.file_name().unwrap(), name);
            let text = std::fs::read_to_string(p).unwrap();
            assert!(text.contains("<svg"), "{}", p.display());
            assert!(text.contains("mega-gpt-2"), "{}", p.display());
        }
        let speed = std::fs::read_to_string(&paths[0]).unwrap();
        assert!(speed.contains("geomean") && speed.contains("t3-mca"));
        let traffic = std::fs::read_to_string(&paths[1]).unwrap();
        assert!(traffic.contains("RS reads") && traffic.contains("updates"));
    }

    #[test]
    fn empty_results_still_make_valid_svgs() {
        let dir = tempfile::tempdir().unwrap();
        let paths = write_svgs(dir.path(), &[]).unwrap();
        for p in paths {
            assert!(std::fs::read_to_string(p).unwrap().contains("<svg"));
        }
    }
}
