//! The text, CSV and SVG output of `nmcp goldyloc tune | eval` (the evaluation's tables next
//! to the dissertation's, the CP's charge, the energy per GEMM set).

use super::CmdResult;
use crate::goldyloc::energy::GoldylocEnergy;
use crate::goldyloc::eval::{EvalReport, CONFIGS, HETERO_CONFIGS};
use nmcp_isa::gemm_ext::CONCURRENCY_DEGREES;
use std::path::Path;

/// The dissertation's predictor accuracy (%) and GOLDYLOC over Default (%) at n = 2, 4, 8, 16.
const PAPER_ACCURACY: [f64; 4] = [82.0, 70.0, 62.0, 47.0];
const PAPER_GOLDYLOC_OVER_DEFAULT: [f64; 4] = [5.0, 10.0, 11.0, 12.0];

pub(super) fn print_strict_rc(st: &crate::goldyloc::tune::StrictRcStudy) {
    stdoutln!(
        "stricter constraints GPU/8 and GPU/16 (7.6.3; offline, profiled times): {} of {} GEMMs get a new candidate",
        st.gemms_with_new_candidates, st.gemms
    );
    stdoutln!("  CD   GO speedup over serial: GPU,/2,/4   +/8,/16   gain   GEMMs won by /8,/16   max gain");
    for r in &st.rows {
        stdoutln!(
            "  {:>2} {:>34.3}x {:>8.3}x {:>+5.2} % {:>19.1} % {:>9.3}x",
            r.cd,
            r.speedup_base,
            r.speedup_strict,
            (r.speedup_strict / r.speedup_base - 1.0) * 100.0,
            r.strict_wins_share * 100.0,
            r.max_gain
        );
    }
    stdoutln!("  (dissertation 7.6.3: GPU/8 and GPU/16 \"gave little benefit\"; no figure)");
}

/// Per scenario, Default's joules over each configuration's next to its time ratio.
pub(super) fn print_energy(e: &GoldylocEnergy) {
    stdoutln!();
    stdoutln!(
        "energy per GEMM set (memory {}; geomean of Default's joules over the configuration's, time ratio in brackets; dissertation: not evaluated)",
        e.preset
    );
    for s in &e.scenarios {
        let cells: Vec<String> = e
            .configs
            .iter()
            .zip(s.default_over.iter().zip(&s.default_time_over))
            .map(|(c, (j, t))| format!("{c} {j:.3} ({t:.3})"))
            .collect();
        stdoutln!("  n={:<3} {}", s.n, cells.join(", "));
    }
}

pub(super) fn print_accuracy(r: &EvalReport) {
    stdoutln!(
        "predictor accuracy per scenario: {}-fold cross-validation by GEMM size (each GEMM predicted by the fixed-point model of the fold that never saw its size), seeds {:?}",
        crate::goldyloc::train::FOLDS,
        r.cross_validation_seeds
    );
    stdoutln!("  available   GEMMs   accuracy (seeds: min-max)   majority class   near ties: predictor / majority   dissertation");
    for (s, paper) in r.scenarios.iter().zip(PAPER_ACCURACY) {
        let lo = s
            .predictor_accuracy_seeds
            .iter()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let hi = s
            .predictor_accuracy_seeds
            .iter()
            .copied()
            .fold(0.0, f64::max);
        stdoutln!(
            "  {:>9} {:>7} {:>9.1} % ({:>4.1}-{:>4.1} %) {:>15.1} % {:>16.1} % / {:>6.1} % {:>13.0} %",
            s.n,
            s.scored_gemms,
            s.accuracy * 100.0,
            lo * 100.0,
            hi * 100.0,
            s.majority_baseline_accuracy * 100.0,
            s.near_tie_accuracy * 100.0,
            s.majority_near_tie_accuracy * 100.0,
            paper
        );
    }
    stdoutln!(
        "fixed point vs f64 agreement: {:.2} % of the dataset ({} disagreements)",
        r.fixed_point_agreement_all * 100.0,
        r.disagreements.len()
    );
    for (g, a, b) in r.disagreements.iter().take(20) {
        stdoutln!("    {g}: f64 says CD {a}, fixed point CD {b}");
    }
}

pub(super) fn print_scenarios(report: &EvalReport) {
    for s in &report.scenarios {
        stdoutln!(
            "\n== {} independent GEMMs: geomean speedup per app over Sequential ==",
            s.n
        );
        stdout!("{:<12}{:>6}", "app", "gemms");
        for name in CONFIGS {
            stdout!("{:>12}", short(name));
        }
        stdoutln!();
        for a in &s.apps {
            stdout!("{:<12}{:>6}", a.app, a.gemms);
            for v in &a.over_sequential {
                stdout!("{v:>12.3}");
            }
            stdoutln!();
        }
        stdout!("{:<12}{:>6}", "geomean", "");
        for v in &s.all_over_sequential {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        stdout!("{:<12}{:>6}", "max", "");
        for v in &s.max_over_sequential {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        stdout!("{:<12}{:>6}", "over Default", "");
        for v in &s.all_over_default {
            stdout!("{v:>12.3}");
        }
        stdoutln!();
        if let (Some(room), Some(taken)) = (
            s.best_constant_cd_over_go_kernels,
            s.goldyloc_over_best_constant_cd,
        ) {
            stdoutln!(
                "best constant CD per GEMM in the loop (--cd-sweep): {:+.2} % over GO-Kernels; GOLDYLOC reaches {:.2} % of its speed",
                (room - 1.0) * 100.0,
                taken * 100.0
            );
        }
        stdoutln!(
            "GOLDYLOC vs Default: improve {:.0} %, unchanged {:.0} %, degrade {:.0} % (dissertation, all scenarios: 64/29/7 %)",
            s.split[0] * 100.0,
            s.split[1] * 100.0,
            s.split[2] * 100.0
        );
        stdoutln!("confusion matrix (rows = best CD, columns = predicted CD), test set:");
        stdout!("        ");
        for cd in CONCURRENCY_DEGREES {
            stdout!("{cd:>6}");
        }
        stdoutln!();
        for (cd, row) in CONCURRENCY_DEGREES.iter().zip(&s.confusion) {
            stdout!("  {cd:>4}  ");
            for v in row {
                stdout!("{v:>6}");
            }
            stdoutln!();
        }
    }
}

pub(super) fn print_end_to_end(report: &EvalReport) {
    if report.end_to_end.is_empty() {
        return;
    }
    stdoutln!("\n== End to end: iteration speedup over Default from the GEMM share (1 / (1 - f + f / s)) ==");
    for e in &report.end_to_end {
        stdoutln!(
            "  {:<5} {:>2} GEMMs: f = {:.2}, GEMMs {:.3}x -> iteration {:+.1} % (dissertation: {})",
            e.app,
            e.n,
            e.gemm_share,
            e.gemm_speedup,
            (e.speedup - 1.0) * 100.0,
            e.dissertation
        );
    }
    let mut sources: Vec<&str> = report
        .end_to_end
        .iter()
        .map(|e| e.share_source.as_str())
        .collect();
    sources.dedup();
    for s in sources {
        stdoutln!("  f: {s}");
    }
}

pub(super) fn print_cp_charges(report: &EvalReport) {
    stdoutln!("\n== CP time per decision (firmware replay, steady state, board-calibrated CpCostModel at 1.5 GHz, 31-cycle memory) ==");
    stdoutln!("(the evaluation above runs the same firmware in the loop: its time delays a dispatch only where it lies on the critical path)");
    stdoutln!("dissertation: ~0.32 us to read/write 32 queues, 8 us per inspect+predict+write");
    for ch in &report.cp_charges {
        stdoutln!(
            "  {:>2} GEMMs at CD {:>2}: {:>7} cycles, {:>3} decisions, {:>5} memory accesses, {:>7.3} us busy, {:.3} us per decision",
            ch.n,
            ch.cd,
            ch.cycles,
            ch.decisions,
            ch.mem_accesses,
            ch.busy_ns / 1e3,
            ch.per_decision_ns / 1e3
        );
    }
}

pub(super) fn print_hetero(report: &EvalReport) {
    stdoutln!("\n== heterogeneous mixes (n/2 + n/2 of two sizes), geomean over Default ==");
    stdout!("{:<8}{:>7}", "n", "pairs");
    for name in HETERO_CONFIGS {
        stdout!("{:>12}", short(name));
    }
    stdoutln!("{:>10}", "mixed");
    for h in &report.hetero {
        stdoutln!(
            "{:<8}{:>7}{:>12.3}{:>12.3}{:>12.3}{:>12.3}{:>9.0}%",
            h.n,
            h.pairs,
            h.over_default[0],
            h.over_default[1],
            h.over_default[2],
            h.over_default[3],
            h.mixed_share * 100.0
        );
    }
    stdoutln!("dissertation: GO-Kernels +3-10 %, GOLDYLOC +15 % over Default at 16");
}

pub(super) fn print_vs_dissertation(report: &EvalReport) {
    stdoutln!("\n== next to the dissertation ==");
    stdoutln!("{:<44}{:>10}{:>14}", "", "model", "dissertation");
    for (s, paper) in report.scenarios.iter().zip(PAPER_GOLDYLOC_OVER_DEFAULT) {
        let def = s.all_over_sequential.get(1).copied().unwrap_or(1.0);
        let paper_def = match s.n {
            2 => "+10 %",
            16 => "+7 %",
            _ => "-",
        };
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("Default over Sequential, {} GEMMs", s.n),
            (def - 1.0) * 100.0,
            paper_def
        );
        let go = s.all_over_default.get(2).copied().unwrap_or(1.0);
        let paper_go = match s.n {
            2 => "+5 %",
            4 | 8 => "+9 %",
            _ => "+10 %",
        };
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("GO-Kernels over Default, {} GEMMs", s.n),
            (go - 1.0) * 100.0,
            paper_go
        );
        let oracle = s.all_over_default.get(4).copied().unwrap_or(1.0);
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("Oracle over Default, {} GEMMs", s.n),
            (oracle - 1.0) * 100.0,
            "-"
        );
        stdoutln!(
            "{:<44}{:>10}{:>14}",
            format!("improve/unchanged/degrade, {} GEMMs", s.n),
            format!(
                "{:.0}/{:.0}/{:.0} %",
                s.split[0] * 100.0,
                s.split[1] * 100.0,
                s.split[2] * 100.0
            ),
            "64/29/7 %"
        );
        let gl = s.all_over_default.get(3).copied().unwrap_or(1.0);
        stdoutln!(
            "{:<44}{:>+9.1}%{:>13}%",
            format!("GOLDYLOC over Default, {} GEMMs", s.n),
            (gl - 1.0) * 100.0,
            format!("+{paper}")
        );
        stdoutln!(
            "{:<44}{:>+9.1}%{:>14}",
            format!("GOLDYLOC over GO-Kernels, {} GEMMs", s.n),
            (gl / go - 1.0) * 100.0,
            "+3 % geomean"
        );
        stdoutln!(
            "{:<44}{:>10}{:>14}",
            format!("GEMMs whose size the predictor never saw, {}", s.n),
            format!(
                "{}/{}",
                s.held_out_gemms,
                s.apps.iter().map(|a| a.gemms).sum::<usize>()
            ),
            "-"
        );
    }
}

pub(super) fn short(name: &str) -> &str {
    match name {
        "Sequential" => "Seq",
        "CU-Partition" => "CU-Part",
        "Resource-Partition" => "Res-Part",
        other => other,
    }
}

pub(super) fn write_csv(dir: &Path, r: &EvalReport) -> CmdResult {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("goldyloc_gemms.csv");
    let mut w = csv::Writer::from_path(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = vec![
        "app".to_string(),
        "gemm".into(),
        "n".into(),
        "predicted_cd".into(),
        "oracle_cd".into(),
    ];
    header.extend(CONFIGS.iter().map(|c| format!("{c}_ns")));
    w.write_record(&header)?;
    for g in &r.gemms {
        let mut row = vec![
            g.app.clone(),
            g.gemm.clone(),
            g.n.to_string(),
            g.predicted_cd.to_string(),
            g.oracle_cd.to_string(),
        ];
        row.extend(g.time_ns.iter().map(|t| format!("{t:.1}")));
        w.write_record(&row)?;
    }
    w.flush()?;
    let path = dir.join("goldyloc_apps.csv");
    let mut w = csv::Writer::from_path(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header = vec!["n".to_string(), "app".into(), "gemms".into()];
    header.extend(CONFIGS.iter().map(|c| format!("{c}_over_sequential")));
    w.write_record(&header)?;
    for s in &r.scenarios {
        for a in &s.apps {
            let mut row = vec![s.n.to_string(), a.app.clone(), a.gemms.to_string()];
            row.extend(a.over_sequential.iter().map(|v| format!("{v:.4}")));
            w.write_record(&row)?;
        }
    }
    w.flush()?;
    Ok(())
}

pub(super) fn write_svg(dir: &Path, r: &EvalReport) -> CmdResult {
    use plotters::prelude::*;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let colours = [
        RGBColor(120, 120, 120),
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
    ];
    for s in &r.scenarios {
        let path = dir.join(format!("goldyloc_{}gemms.svg", s.n));
        let root = SVGBackend::new(&path, (1100, 480)).into_drawing_area();
        root.fill(&WHITE)?;
        let apps = s.apps.len().max(1);
        let ymax = s
            .apps
            .iter()
            .flat_map(|a| a.over_sequential.iter().copied())
            .fold(1.0, f64::max)
            * 1.1;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{} independent GEMMs: geomean speedup over Sequential", s.n),
                ("sans-serif", 20),
            )
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(50)
            .build_cartesian_2d(0f64..apps as f64, 0f64..ymax)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_desc("speedup")
            .draw()?;
        // App names centred under their bar groups, in pixel coordinates.
        for (ai, a) in s.apps.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(ai as f64 + 0.5, 0.0));
            root.draw(&Text::new(
                a.app.clone(),
                (px - 4 * a.app.len() as i32, py + 10),
                ("sans-serif", 14),
            ))?;
        }
        let bars = CONFIGS.len() as f64;
        for (ci, colour) in colours.iter().enumerate() {
            let series: Vec<Rectangle<(f64, f64)>> = s
                .apps
                .iter()
                .enumerate()
                .filter_map(|(ai, a)| {
                    let v = *a.over_sequential.get(ci)?;
                    let x0 = ai as f64 + 0.1 + 0.8 * ci as f64 / bars;
                    Some(Rectangle::new(
                        [(x0, 0.0), (x0 + 0.8 / bars, v)],
                        colour.filled(),
                    ))
                })
                .collect();
            chart
                .draw_series(series)?
                .label(CONFIGS.get(ci).copied().unwrap_or(""))
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        root.present()?;
    }
    Ok(())
}
