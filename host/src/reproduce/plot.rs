//! The report's own plots (the per-application GOLDYLOC bars and the T3 speedup and
//! traffic plots come from the subcommands' `--svg`): LAMB speedup against TS size per
//! bank-ALU issue model, where LAMB's NMC time goes (the columns' share is the banks'
//! data-bus utilisation), and GOLDYLOC's predictor accuracy and speedup next to the
//! majority class and the dissertation.

use plotters::prelude::*;
use serde_json::Value;

use super::figures::{arr, num, FigureError};
use crate::t3::plot::{bar_series, legend_and_present};

use crate::t3::plot::PlotResult;

/// The i-th series colour: the shared palette past its grey (kept for baselines).
fn colour(i: usize) -> RGBColor {
    let p = &crate::t3::plot::COLOURS;
    p[1 + i % (p.len() - 1)]
}

fn err(e: Box<dyn std::error::Error>) -> FigureError {
    FigureError(format!("plot: {e}"))
}

/// `lamb-ts.svg`: speedup over the ideal GPU at peak against TS entries (log scale), one
/// line per ALU model, the physical bound and the dissertation's two points.
///
/// # Errors
/// A key is missing from the LAMB JSON, or plotting failed.
pub fn lamb_ts(doc: &Value) -> Result<String, FigureError> {
    const W: &str = "lamb JSON";
    let physical = num(doc, W, "physical_bound")?;
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for (i, m) in arr(doc, W, "alu_models")?.iter().enumerate() {
        let name = m["name"].as_str().unwrap_or("?").to_string();
        let mut pts = Vec::new();
        for (j, _) in arr(doc, W, &format!("alu_models.{i}.ts_sweep"))?
            .iter()
            .enumerate()
        {
            let p = |k: &str| format!("alu_models.{i}.ts_sweep.{j}.{k}");
            pts.push((
                num(doc, W, &p("ts_entries"))?.log2(),
                num(doc, W, &p("speedup_vs_ideal_100"))?,
            ));
        }
        lines.push((name, pts));
    }
    let mut svg = String::new();
    draw_lamb_ts(&mut svg, &lines, physical).map_err(err)?;
    Ok(svg)
}

fn draw_lamb_ts(svg: &mut String, lines: &[(String, Vec<(f64, f64)>)], bound: f64) -> PlotResult {
    let root = SVGBackend::with_string(svg, (820, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let xs = lines.iter().flat_map(|l| l.1.iter().map(|p| p.0));
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let (x0, x1) = if x0 <= x1 { (x0, x1) } else { (2.0, 8.0) };
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "BERT-Large LAMB on NMC: speedup over the ideal GPU at peak",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x0 - 0.2..x1 + 0.2, 0f64..bound * 1.1)?;
    chart
        .configure_mesh()
        .x_desc("TS entries per bank ALU")
        .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
        .y_desc("speedup")
        .draw()?;
    for (i, (name, pts)) in lines.iter().enumerate() {
        let c = colour(i);
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], c.stroke_width(2)));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
    }
    let grey = RGBColor(90, 90, 90);
    chart
        .draw_series(LineSeries::new(
            [(x0 - 0.2, bound), (x1 + 0.2, bound)],
            grey.stroke_width(1),
        ))?
        .label(format!("physical bound {bound:.0}x"))
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], grey));
    let black = RGBColor(0, 0, 0);
    chart
        .draw_series(
            [(4f64, 3.8), (6f64, 4.7)]
                .into_iter()
                .map(|p| Cross::new(p, 6, black.stroke_width(2))),
        )?
        .label("dissertation (3.8x at TS 16, 4.7x at 4x TS)")
        .legend(move |(x, y)| Cross::new((x + 8, y), 5, black.stroke_width(2)));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.85))
        .draw()?;
    root.present()?;
    Ok(())
}

/// The time categories of `alu_models[].time`, in stacking order, with legend names.
const LAMB_TIME: [(&str, &str); 5] = [
    ("columns", "columns (data bus busy)"),
    ("row_switches", "row switches"),
    ("refresh", "refresh"),
    ("alu_stalls", "ALU stalls"),
    ("reductions_and_other", "host reductions, firmware, other"),
];

/// `lamb-time.svg`: where the NMC step's time goes per ALU model, as shares.
///
/// # Errors
/// A key is missing from the LAMB JSON, or plotting failed.
pub fn lamb_time(doc: &Value) -> Result<String, FigureError> {
    const W: &str = "lamb JSON";
    let mut bars = Vec::new();
    for (i, m) in arr(doc, W, "alu_models")?.iter().enumerate() {
        let total = num(doc, W, &format!("alu_models.{i}.nmc_seconds"))?;
        let mut parts = Vec::new();
        for (k, _) in LAMB_TIME {
            parts.push(num(doc, W, &format!("alu_models.{i}.time.{k}"))? / total.max(1e-30));
        }
        bars.push((m["name"].as_str().unwrap_or("?").to_string(), parts));
    }
    let mut svg = String::new();
    draw_stacked(&mut svg, &bars).map_err(err)?;
    Ok(svg)
}

fn draw_stacked(svg: &mut String, bars: &[(String, Vec<f64>)]) -> PlotResult {
    let root = SVGBackend::with_string(svg, (820, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = bars.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Where the NMC LAMB step's time goes (share of the step)",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n, 0f64..1.45)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("share of NMC time")
        .draw()?;
    for (b, (name, _)) in bars.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(b as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            name.clone(),
            (px - 4 * name.len() as i32, py + 10),
            ("sans-serif", 13),
        ))?;
    }
    for (k, (_, legend)) in LAMB_TIME.iter().enumerate() {
        let c = colour(k);
        let rects: Vec<Rectangle<(f64, f64)>> = bars
            .iter()
            .enumerate()
            .map(|(b, (_, parts))| {
                let base: f64 = parts.iter().take(k).sum();
                let top = base + parts.get(k).copied().unwrap_or(0.0);
                let x = b as f64;
                Rectangle::new([(x + 0.2, base), (x + 0.8, top)], c.filled())
            })
            .collect();
        bar_series(&mut chart, rects, *legend, c)?;
    }
    legend_and_present(&mut chart, &root, SeriesLabelPosition::UpperRight)
}

/// One group of bars: a label and `(legend, value)` pairs.
pub type BarGroup = (String, Vec<(String, f64)>);

/// Grouped bars (one group per label, one bar per series), e.g. predictor accuracy per
/// number of GEMMs next to the majority class and the dissertation.
///
/// # Errors
/// Plotting failed.
pub fn grouped(title: &str, y_desc: &str, groups: &[BarGroup]) -> Result<String, FigureError> {
    let mut svg = String::new();
    draw_grouped(&mut svg, title, y_desc, groups).map_err(err)?;
    Ok(svg)
}

fn draw_grouped(svg: &mut String, title: &str, y_desc: &str, groups: &[BarGroup]) -> PlotResult {
    let root = SVGBackend::with_string(svg, (820, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = groups.len().max(1) as f64;
    let series: Vec<String> = groups
        .first()
        .map(|g| g.1.iter().map(|s| s.0.clone()).collect())
        .unwrap_or_default();
    let ymax = groups
        .iter()
        .flat_map(|g| g.1.iter().map(|s| s.1))
        .fold(0.0, f64::max)
        * 1.35;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n, 0f64..ymax.max(1e-9))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y_desc)
        .draw()?;
    for (gi, (label, _)) in groups.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(gi as f64 + 0.5, 0.0));
        root.draw(&Text::new(
            label.clone(),
            (px - 3 * label.len() as i32, py + 10),
            ("sans-serif", 13),
        ))?;
    }
    let k = series.len().max(1) as f64;
    for (si, name) in series.iter().enumerate() {
        let c = colour(si);
        let rects: Vec<Rectangle<(f64, f64)>> = groups
            .iter()
            .enumerate()
            .filter_map(|(gi, g)| {
                let v = g.1.get(si)?.1;
                let x0 = gi as f64 + 0.1 + 0.8 * si as f64 / k;
                Some(Rectangle::new([(x0, 0.0), (x0 + 0.8 / k, v)], c.filled()))
            })
            .collect();
        bar_series(&mut chart, rects, name.clone(), c)?;
    }
    legend_and_present(&mut chart, &root, SeriesLabelPosition::UpperLeft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_bars_draw_one_rect_per_value() {
        let g = vec![
            ("2".to_string(), vec![("a".into(), 1.0), ("b".into(), 0.5)]),
            ("4".to_string(), vec![("a".into(), 0.7), ("b".into(), 0.2)]),
        ];
        let svg = grouped("t", "y", &g).unwrap_or_default();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(80)]);
        // four bars and two legend swatches
        assert!(svg.matches("<rect").count() >= 6, "{svg}");
    }
}
