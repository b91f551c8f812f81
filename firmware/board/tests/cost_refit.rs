//! Refits the CP cost model (`CpCostModel`'s fitted per-kind instruction counts) from the
//! committed board reports of both machines, prints the fit and every line's residual,
//! and fails when the committed constants stray from the fit or a line from the model
//! (docs/calibration.md, "CP cost of a handler (formula)"; the fit: docs/decisions/cp.md). Run with `--nocapture` to see the table:
//! `cargo test -p nmcp-board --test cost_refit -- --nocapture`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_firmware::cp::CpCostModel;

/// The reports fitted: QEMU `virt` and `sifive_e` (the Rev B image runs the same code as
/// `sifive_e`; its CP lines are the same numbers, so it would only count them twice).
const REPORTS: [(&str, &str); 2] = [
    ("virt", include_str!("../expected/virt.txt")),
    ("sifive_e", include_str!("../expected/sifive_e.txt")),
];

/// The fitted kinds, in `CpCostModel`'s order.
const KINDS: [&str; 7] = [
    "handler",
    "decision",
    "mapped_visit",
    "visit",
    "mapped_dispatch",
    "dispatch",
    "shape",
];

/// A committed constant may differ from the fit by this much of the fitted value, or by
/// [`ABS_TOLERANCE`] instructions, whichever is larger (a kind that is a few
/// instructions per item moves by a few between builds without mattering).
const REL_TOLERANCE: f64 = 0.05;
/// See [`REL_TOLERANCE`].
const ABS_TOLERANCE: f64 = 10.0;
/// Every line's model (committed constants) within this of its measurement.
const LINE_BOUND: f64 = 0.10;

/// One measured CP line: its work counts per kind and its instructions.
struct Line {
    name: String,
    counts: [f64; 7],
    instructions: f64,
}

fn field(line: &str, key: &str) -> u64 {
    line.split(' ')
        .find_map(|x| x.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{line}: field {key} missing or not a number"))
}

fn lines() -> Vec<Line> {
    let mut out = Vec::new();
    for (machine, report) in REPORTS {
        for l in report.lines().filter(|l| l.starts_with("cp_decision")) {
            let f = |k| field(l, k) as f64;
            out.push(Line {
                name: format!("{machine}:{}", l.split(' ').next().unwrap_or("")),
                counts: [
                    1.0,
                    f("decisions"),
                    f("mapped_visits"),
                    f("visits") - f("mapped_visits"),
                    f("mapped_dispatches"),
                    f("dispatches") - f("mapped_dispatches"),
                    f("predictions"),
                ],
                instructions: f("instructions"),
            });
        }
    }
    out
}

/// The committed constants as the fit's vector.
fn committed(m: &CpCostModel) -> [f64; 7] {
    [
        m.instr_per_handler,
        m.instr_per_decision,
        m.instr_per_mapped_visit,
        m.instr_per_visit,
        m.instr_per_mapped_dispatch,
        m.instr_per_dispatch,
        m.instr_per_shape,
    ]
    .map(|v| v as f64)
}

/// Least squares of the relative error (each line weighted by 1 / its measurement, so
/// a 700-instruction line counts as much as a 40,000 one), by the normal equations and
/// Gaussian elimination with partial pivoting.
fn fit(lines: &[Line]) -> [f64; 7] {
    const K: usize = 7;
    let mut a = [[0.0f64; K + 1]; K];
    for l in lines {
        let w = 1.0 / l.instructions;
        let row = l.counts.map(|c| c * w);
        let y = l.instructions * w;
        for i in 0..K {
            for j in 0..K {
                a[i][j] += row[i] * row[j];
            }
            a[i][K] += row[i] * y;
        }
    }
    for c in 0..K {
        let p = (c..K)
            .max_by(|&x, &y| a[x][c].abs().total_cmp(&a[y][c].abs()))
            .unwrap();
        a.swap(c, p);
        assert!(
            a[c][c].abs() > 1e-12,
            "kind {} is not determined by the lines",
            KINDS[c]
        );
        let pivot = a[c];
        for (r, row) in a.iter_mut().enumerate() {
            if r != c {
                let f = row[c] / pivot[c];
                for (x, p) in row.iter_mut().zip(pivot).skip(c) {
                    *x -= f * p;
                }
            }
        }
    }
    std::array::from_fn(|i| a[i][K] / a[i][i])
}

fn model(x: &[f64; 7], counts: &[f64; 7]) -> f64 {
    x.iter().zip(counts).map(|(a, b)| a * b).sum()
}

#[test]
fn cp_cost_model_refits_from_both_machines() {
    let lines = lines();
    assert_eq!(lines.len(), 26, "13 CP lines per machine");
    let x = fit(&lines);
    let cur = committed(&CpCostModel::default());
    println!("{:<16} {:>10} {:>10}", "kind", "fit", "committed");
    for ((k, f), c) in KINDS.iter().zip(x).zip(cur) {
        println!("{k:<16} {f:>10.1} {c:>10.0}");
    }
    println!(
        "{:<36} {:>9} {:>9} {:>8} {:>9} {:>8}",
        "line", "measured", "fit", "resid", "committed", "resid"
    );
    let mut worst = (0.0f64, String::new());
    for l in &lines {
        let (f, c) = (model(&x, &l.counts), model(&cur, &l.counts));
        let (rf, rc) = (
            (f - l.instructions) / l.instructions,
            (c - l.instructions) / l.instructions,
        );
        println!(
            "{:<36} {:>9.0} {:>9.0} {:>+7.1}% {:>9.0} {:>+7.1}%",
            l.name,
            l.instructions,
            f,
            100.0 * rf,
            c,
            100.0 * rc
        );
        if rc.abs() > worst.0 {
            worst = (rc.abs(), l.name.clone());
        }
    }
    for ((k, f), c) in KINDS.iter().zip(x).zip(cur) {
        let tol = (REL_TOLERANCE * f.abs()).max(ABS_TOLERANCE);
        assert!(
            (c - f).abs() <= tol,
            "CpCostModel's instr_per_{k} = {c} is {:.0} from the board fit {f:.1} \
             (tolerance {tol:.0}): refit (docs/calibration.md)",
            (c - f).abs()
        );
    }
    assert!(
        worst.0 <= LINE_BOUND,
        "{}: the committed model is {:.1} % off the board (bound {:.0} %)",
        worst.1,
        100.0 * worst.0,
        100.0 * LINE_BOUND
    );
}

/// The fit recovers known constants from lines made with them (the solver, not the
/// data, under test).
#[test]
fn the_fit_recovers_the_constants_it_was_given() {
    let truth = [500.0, 3.0, 30.0, 400.0, 60.0, 190.0, 11_000.0];
    let lines: Vec<Line> = lines()
        .into_iter()
        .map(|mut l| {
            l.instructions = model(&truth, &l.counts);
            l
        })
        .collect();
    let x = fit(&lines);
    for (a, b) in x.iter().zip(truth) {
        assert!((a - b).abs() < 1e-6 * b.max(1.0), "{x:?} vs {truth:?}");
    }
}
