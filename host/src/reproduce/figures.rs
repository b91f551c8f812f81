//! The headline figures of each chapter, read from the JSON the mechanisms' own
//! subcommands print (`nmcp lamb --json`, `nmcp goldyloc eval --json`, `nmcp t3 --json`),
//! each next to the dissertation's number and the baseline or bound that makes it a claim.
//!
//! The dissertation's numbers are here and nowhere in the models: they are what a figure is
//! compared with, never an input.

use serde_json::Value;

/// One figure of the report: ours next to the dissertation's.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Headline {
    /// `ch. 6 LAMB`, `ch. 7 GOLDYLOC`, `ch. 8 T3`.
    pub chapter: &'static str,
    /// What is measured.
    pub figure: String,
    /// The dissertation's value (`None`: it reports none for this setup).
    pub dissertation: Option<f64>,
    /// Ours.
    pub ours: f64,
    /// How the values print.
    pub unit: Unit,
    /// The configuration that produced ours.
    pub config: String,
    /// The baseline or bound printed next to ours (majority class, physical bound, ideal).
    pub baseline: String,
}

impl Headline {
    /// Ours over the dissertation's.
    pub fn ratio(&self) -> Option<f64> {
        self.dissertation
            .filter(|d| *d != 0.0)
            .map(|d| self.ours / d)
    }
}

/// How a figure prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Unit {
    /// A speedup or reduction factor: `3.80x`.
    Times,
    /// A share: `22.0 %`.
    Percent,
    /// Energy: `1.234 mJ`.
    Joules,
    /// Energy per bit: `3.10 pJ/bit`.
    PjPerBit,
    /// A time in microseconds: `8.00 µs`.
    Micros,
}

impl Unit {
    /// `v` in this unit.
    pub fn show(self, v: f64) -> String {
        match self {
            Unit::Times => format!("{v:.2}x"),
            Unit::Percent => format!("{:.1} %", v * 100.0),
            Unit::Joules => nmcp_emulator::energy::report::joules(v),
            Unit::PjPerBit => format!("{v:.2} pJ/bit"),
            Unit::Micros => format!("{v:.2} µs"),
        }
    }
}

/// What went wrong reading a mechanism's JSON: which document and which path.
#[derive(Debug)]
pub struct FigureError(pub String);

impl std::fmt::Display for FigureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FigureError {}

/// The value at a dotted path (`alu_models.0.speedup.2`) of `doc` (named `what`).
pub fn at<'a>(doc: &'a Value, what: &str, path: &str) -> Result<&'a Value, FigureError> {
    let mut v = doc;
    for key in path.split('.') {
        // A number indexes an array; in an object it is a key like any other (the
        // validate JSON keys its scenarios "2", "4", ...).
        let next = match (key.parse::<usize>(), v.is_array()) {
            (Ok(i), true) => v.get(i),
            _ => v.get(key),
        };
        v = next.ok_or_else(|| FigureError(format!("{what}: no `{path}` (stopped at `{key}`)")))?;
    }
    Ok(v)
}

/// The number at `path` of `doc`.
pub fn num(doc: &Value, what: &str, path: &str) -> Result<f64, FigureError> {
    at(doc, what, path)?
        .as_f64()
        .ok_or_else(|| FigureError(format!("{what}: `{path}` is not a number")))
}

/// The array at `path` of `doc`.
pub fn arr<'a>(doc: &'a Value, what: &str, path: &str) -> Result<&'a [Value], FigureError> {
    at(doc, what, path)?
        .as_array()
        .map(Vec::as_slice)
        .ok_or_else(|| FigureError(format!("{what}: `{path}` is not an array")))
}

/// Geometric mean (`None` for no values or a non-positive one).
pub fn geomean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || xs.iter().any(|x| *x <= 0.0) {
        return None;
    }
    Some((xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp())
}

/// Chapter 6: BERT-Large LAMB on NMC on the setup that models the dissertation's
/// hardware (the run's first ALU model, `column-triggered` on `lamb-ch6`), and the
/// data-movement reduction. The run's other ALU models are extensions
/// ([`lamb_extensions`]).
///
/// # Errors
/// A key the report needs is missing from `nmcp lamb --ts-sweep --json`.
pub fn lamb(doc: &Value) -> Result<Vec<Headline>, FigureError> {
    let mut out = Vec::new();
    if !arr(doc, LAMB_W, "alu_models")?.is_empty() {
        out.extend(lamb_setup(doc, 0)?.primary_rows());
    }
    out.extend(lamb_data_movement(doc)?);
    Ok(out)
}

const LAMB_W: &str = "lamb JSON";
const LAMB_CH: &str = "ch. 6 LAMB";
/// The dissertation's LAMB speedups (6.4): over the ideal GPU at peak at baseline TS,
/// with 4x the TS entries, and with 4x the TS entries over a GPU at 80 % of peak.
const LAMB_DISS: [f64; 3] = [3.8, 4.7, 5.8];

/// One ALU model (and engine policy) of a `nmcp lamb` run: its speedups at baseline TS and
/// at 4x the TS entries, and the bounds it is held to.
struct LambSetup {
    /// `column-triggered`, `pipelined+masa, SARP`, ...
    name: String,
    model: String,
    preset: String,
    setup: String,
    ts: u64,
    /// Over the ideal GPU at peak, baseline TS.
    at_peak: f64,
    /// Over the ideal GPU at peak and at 80 % of peak, 4x the TS entries (when swept).
    ts4: Option<(f64, f64)>,
    physical: f64,
    program: f64,
    /// The engine policy's own floor, where it has one.
    job_bound: Option<f64>,
}

/// The `i`th ALU model of a `nmcp lamb --json` document.
fn lamb_setup(doc: &Value, i: usize) -> Result<LambSetup, FigureError> {
    const W: &str = LAMB_W;
    let p = |k: &str| format!("alu_models.{i}.{k}");
    let s = |path: &str| -> Result<String, FigureError> {
        Ok(at(doc, W, path)?.as_str().unwrap_or("?").to_string())
    };
    let preset = s("preset")?;
    let setup = s(&p("name"))?;
    // The same setup on a refresh-access-parallel preset is a different design point.
    let name = if preset.ends_with("-sarp") {
        format!("{setup}, SARP")
    } else {
        setup.clone()
    };
    let ts = num(doc, W, &p("ts_entries"))? as u64;
    let m = &arr(doc, W, "alu_models")?[i];
    let ts4 = m
        .get("ts_sweep")
        .and_then(Value::as_array)
        .and_then(|sw| {
            sw.iter()
                .find(|e| e.get("ts_entries").and_then(Value::as_u64) == Some(ts * 4))
        })
        .and_then(|e| {
            Some((
                e.get("speedup_vs_ideal_100")?.as_f64()?,
                e.get("speedup_vs_ideal_80")?.as_f64()?,
            ))
        });
    Ok(LambSetup {
        name,
        model: s("model")?,
        preset,
        setup,
        ts,
        at_peak: num(doc, W, &p("speedup.0"))?,
        ts4,
        physical: num(doc, W, "physical_bound")?,
        program: num(doc, W, &p("program_bound"))?,
        job_bound: m.get("job_bound").and_then(Value::as_f64),
    })
}

impl LambSetup {
    fn config(&self, ts: u64) -> String {
        format!("{}, {}, {}, TS {ts}", self.model, self.preset, self.setup)
    }

    fn bounds(&self) -> String {
        let floor = self
            .job_bound
            .map_or(String::new(), |b| format!("; its policy's floor {b:.2}x"));
        format!(
            "physical bound {:.1}x; this program {:.2}x{floor}",
            self.physical, self.program
        )
    }

    /// The dissertation's three LAMB figures, each paired with the same setup: baseline TS
    /// against the ideal GPU at peak, and 4x the TS entries against the GPU at peak and
    /// at 80 % of peak (the dissertation's 5.8x is a 4x-TS point).
    fn primary_rows(&self) -> Vec<Headline> {
        let name = &self.name;
        let mut out = vec![Headline {
            chapter: LAMB_CH,
            figure: format!("LAMB step, NMC over ideal GPU at peak ({name})"),
            dissertation: Some(LAMB_DISS[0]),
            ours: self.at_peak,
            unit: Unit::Times,
            config: self.config(self.ts),
            baseline: self.bounds(),
        }];
        if let Some((peak, p80)) = self.ts4 {
            for (figure, diss, ours) in [
                (
                    format!("LAMB step with 4x the TS entries, over ideal GPU at peak ({name})"),
                    LAMB_DISS[1],
                    peak,
                ),
                (
                    format!(
                        "LAMB step with 4x the TS entries, over a GPU at 80 % of peak ({name})"
                    ),
                    LAMB_DISS[2],
                    p80,
                ),
            ] {
                out.push(Headline {
                    chapter: LAMB_CH,
                    figure,
                    dissertation: Some(diss),
                    ours,
                    unit: Unit::Times,
                    config: self.config(self.ts * 4),
                    baseline: format!("physical bound {:.1}x", self.physical),
                });
            }
        }
        out
    }

    /// One summary row: baseline TS against the ideal GPU at peak, with the two 4x-TS
    /// figures and the bounds beside it.
    fn summary_row(&self) -> Headline {
        let ts4 = self.ts4.map_or(String::new(), |(peak, p80)| {
            format!(
                "4x TS: {peak:.2}x at peak ({:.1}x), {p80:.2}x at 80 % ({:.1}x); ",
                LAMB_DISS[1], LAMB_DISS[2]
            )
        });
        Headline {
            chapter: LAMB_CH,
            figure: format!("LAMB step, NMC over ideal GPU at peak ({})", self.name),
            dissertation: Some(LAMB_DISS[0]),
            ours: self.at_peak,
            unit: Unit::Times,
            config: self.config(self.ts),
            baseline: format!("{ts4}{}", self.bounds()),
        }
    }
}

/// The ALU models and engine policies beyond the dissertation's (every model of `doc`
/// after the first when `skip_first`, else all), one summary row each.
///
/// # Errors
/// A key the report needs is missing from `nmcp lamb --ts-sweep --json`.
pub fn lamb_extensions(doc: &Value, skip_first: bool) -> Result<Vec<Headline>, FigureError> {
    let n = arr(doc, LAMB_W, "alu_models")?.len();
    (usize::from(skip_first)..n)
        .map(|i| Ok(lamb_setup(doc, i)?.summary_row()))
        .collect()
}

/// The definition of data movement the report pairs with the dissertation's ~13x besides
/// the data pins alone, fixed in advance: everything that crosses the DRAM interface, the
/// command pins included (`nmcp lamb`'s second definition).
pub const DATA_MOVEMENT_WITH_COMMANDS: &str =
    "data + every DRAM command at 4 B on the command pins";

/// Chapter 6's data-movement reduction under two definitions fixed in advance: the data
/// pins only (ours), and the data and command pins together.
///
/// # Errors
/// A key the report needs is missing from `nmcp lamb --json`, or the run lacks the
/// data-and-command definition.
pub fn lamb_data_movement(doc: &Value) -> Result<Vec<Headline>, FigureError> {
    const W: &str = LAMB_W;
    const CH: &str = LAMB_CH;
    let mut out = Vec::new();
    let defs = arr(doc, W, "data_movement")?;
    let ratio = |i: usize| num(doc, W, &format!("data_movement.{i}.ratio"));
    let def = |i: usize| -> String {
        let d = defs[i]["definition"].as_str().unwrap_or("?");
        let s = defs[i]["setup"].as_str().unwrap_or("?");
        format!("{d} ({s})")
    };
    if defs.is_empty() {
        return Ok(out);
    }
    out.push(Headline {
        chapter: CH,
        figure: "data movement GPU-DRAM, reduction".into(),
        dissertation: Some(13.0),
        ours: ratio(0)?,
        unit: Unit::Times,
        config: def(0),
        baseline: "ideal GPU's minimal LAMB traffic".into(),
    });
    let with_commands = defs
        .iter()
        .position(|d| d["definition"].as_str() == Some(DATA_MOVEMENT_WITH_COMMANDS))
        .ok_or_else(|| {
            FigureError(format!(
                "{W}: no data_movement definition {DATA_MOVEMENT_WITH_COMMANDS:?}"
            ))
        })?;
    out.push(Headline {
        chapter: CH,
        figure: "data movement GPU-DRAM, reduction, command pins counted".into(),
        dissertation: Some(13.0),
        ours: ratio(with_commands)?,
        unit: Unit::Times,
        config: def(with_commands),
        baseline: "ideal GPU's minimal LAMB traffic".into(),
    });
    Ok(out)
}

/// Index of GOLDYLOC in the configuration arrays of `nmcp goldyloc eval --json`
/// (`goldyloc::eval::CONFIGS`) and of its heterogeneous ones (`HETERO_CONFIGS`).
fn config_index(names: &[&str], name: &str) -> Result<usize, FigureError> {
    names
        .iter()
        .position(|n| *n == name)
        .ok_or_else(|| FigureError(format!("no configuration {name}")))
}

/// Chapter 7: GOLDYLOC over its baselines, per number of independent GEMMs; `label` names
/// the data type of the run (`FP32`, `FP16`).
///
/// # Errors
/// A key the report needs is missing from `nmcp goldyloc eval --json`.
pub fn goldyloc(doc: &Value, label: &str) -> Result<Vec<Headline>, FigureError> {
    use crate::goldyloc::eval::{CONFIGS, HETERO_CONFIGS};
    const W: &str = "goldyloc JSON";
    const CH: &str = "ch. 7 GOLDYLOC";
    let gl = config_index(&CONFIGS, "GOLDYLOC")?;
    let gpu = at(doc, W, "gpu")?.as_str().unwrap_or("?").to_string();
    let gemms = num(doc, W, "gemm_count")?;
    let cfg = |n: f64| format!("{gpu}, {label}, {gemms} GEMMs, {n} at a time");
    let mut out = Vec::new();
    let mut over_go = Vec::new();
    let mut max_seq: f64 = 0.0;
    for (i, _) in arr(doc, W, "scenarios")?.iter().enumerate() {
        let p = |k: &str| format!("scenarios.{i}.{k}");
        let n = num(doc, W, &p("n"))?;
        let dflt = num(doc, W, &p("speedup_over_sequential.default"))?;
        let diss_default = match n as u32 {
            2 => Some(1.10),
            16 => Some(1.07),
            _ => None,
        };
        out.push(Headline {
            chapter: CH,
            figure: format!("Default over Sequential, {n} GEMMs"),
            dissertation: diss_default,
            ours: dflt,
            unit: Unit::Times,
            config: cfg(n),
            baseline: "Sequential = 1".into(),
        });
        let g = num(doc, W, &p("speedup_over_default.goldyloc"))?;
        let go = num(doc, W, &p("speedup_over_default.go_kernels"))?;
        let oracle = num(doc, W, &p("speedup_over_default.oracle"))?;
        over_go.push(g / go);
        out.push(Headline {
            chapter: CH,
            figure: format!("GOLDYLOC over Default, {n} GEMMs"),
            dissertation: match n as u32 {
                2 => Some(1.05),
                4 => Some(1.10),
                8 => Some(1.11),
                16 => Some(1.12),
                _ => None,
            },
            ours: g,
            unit: Unit::Times,
            config: cfg(n),
            baseline: format!("GO-Kernels {go:.3}x; Oracle CD {oracle:.3}x"),
        });
        let acc = num(doc, W, &p("predictor_accuracy"))?;
        let maj = num(doc, W, &p("majority_baseline_accuracy"))?;
        out.push(Headline {
            chapter: CH,
            figure: format!("predictor accuracy, {n} GEMMs (held out by size)"),
            dissertation: match n as u32 {
                2 => Some(0.82),
                4 => Some(0.70),
                8 => Some(0.62),
                16 => Some(0.47),
                _ => None,
            },
            ours: acc,
            unit: Unit::Percent,
            config: cfg(n),
            baseline: format!("majority class {:.1} %", maj * 100.0),
        });
        max_seq = max_seq.max(num(doc, W, &p(&format!("max_over_sequential.{gl}")))?);
    }
    if let Some(v) = geomean(&over_go) {
        out.push(Headline {
            chapter: CH,
            figure: "GOLDYLOC over GO-Kernels, geomean over 2/4/8/16".into(),
            dissertation: Some(1.03),
            ours: v,
            unit: Unit::Times,
            config: format!("{gpu}, {label}"),
            baseline: "GO-Kernels = 1".into(),
        });
    }
    out.push(Headline {
        chapter: CH,
        figure: "GOLDYLOC over Sequential, largest".into(),
        dissertation: Some(2.5),
        ours: max_seq,
        unit: Unit::Times,
        config: format!("{gpu}, {label}, any n"),
        baseline: "Sequential = 1".into(),
    });
    // Improve / unchanged / degrade against Default, averaged over the scenarios (the
    // dissertation gives one distribution for its 410 GEMMs).
    let splits: Vec<&Value> = arr(doc, W, "scenarios")?
        .iter()
        .filter_map(|s| s.get("split"))
        .collect();
    if !splits.is_empty() {
        for (i, (what, diss)) in [("improved", 0.64), ("unchanged", 0.29), ("degraded", 0.07)]
            .into_iter()
            .enumerate()
        {
            let xs: Vec<f64> = splits.iter().filter_map(|s| s.get(i)?.as_f64()).collect();
            out.push(Headline {
                chapter: CH,
                figure: format!("share of GEMMs {what} by GOLDYLOC vs Default (mean over n)"),
                dissertation: Some(diss),
                ours: xs.iter().sum::<f64>() / xs.len().max(1) as f64,
                unit: Unit::Percent,
                config: format!("{gpu}, {label}, band +-2 %"),
                baseline: "Default".into(),
            });
        }
    }
    // End to end from the GEMM share: GNMT at the 8 parallel GEMMs the dissertation
    // gives; BERT at every n (the dissertation gives 5-12 % without its n).
    if let Some(rows) = doc.get("end_to_end").and_then(Value::as_array) {
        for r in rows {
            let (Some(app), Some(n)) = (r["app"].as_str(), r["n"].as_u64()) else {
                continue;
            };
            let (figure, diss) = match (app, n) {
                ("gnmt", 8) => (
                    "GNMT iteration over Default, 8 GEMMs".to_string(),
                    Some(1.14),
                ),
                ("bert", _) => (
                    format!(
                        "BERT iteration over Default, {n} GEMMs (dissertation 5-12 %, n not given)"
                    ),
                    None,
                ),
                _ => continue,
            };
            let f = r["gemm_share"].as_f64().unwrap_or(f64::NAN);
            out.push(Headline {
                chapter: CH,
                figure,
                dissertation: diss,
                ours: r["speedup"].as_f64().unwrap_or(f64::NAN),
                unit: Unit::Times,
                config: format!(
                    "{gpu}, {label}, n = {n}, GEMM share f = {f:.2}, GEMMs {:.3}x",
                    r["gemm_speedup"].as_f64().unwrap_or(f64::NAN)
                ),
                baseline: format!(
                    "all GEMM time removed: {:.2}x",
                    1.0 / (1.0 - f.max(0.0)).max(1e-9)
                ),
            });
        }
    }
    let hg = config_index(&HETERO_CONFIGS, "GOLDYLOC")?;
    for (i, h) in arr(doc, W, "hetero")?.iter().enumerate() {
        if h.get("n").and_then(Value::as_u64) != Some(16) {
            continue;
        }
        out.push(Headline {
            chapter: CH,
            figure: "heterogeneous GEMMs, GOLDYLOC over Default, 16 GEMMs".into(),
            dissertation: Some(1.15),
            ours: num(doc, W, &format!("hetero.{i}.over_default.{hg}"))?,
            unit: Unit::Times,
            config: format!("{gpu}, {label}, mixes of two sizes"),
            baseline: "Default = 1".into(),
        });
    }
    Ok(out)
}

/// The rows of one configuration of `nmcp t3 --json`, in order.
fn t3_rows<'a>(rows: &'a [Value], config: &str) -> impl Iterator<Item = &'a Value> + 'a {
    let config = config.to_string();
    rows.iter()
        .filter(move |r| r.get("config").and_then(Value::as_str) == Some(config.as_str()))
}

/// End-to-end training and prompt-phase speedups of T3 and T3-MCA (geomean over the
/// model x TP pairs whose sub-layers are all present; `crate::t3::e2e`).
fn t3_end_to_end(rows: &[Value], cfg: &str, out: &mut Vec<Headline>) {
    use crate::t3::e2e::{end_to_end, Phase, SubLayerTime};
    use nmcp_emulator::t3::Scenario;
    let times: Vec<SubLayerTime> = rows
        .iter()
        .filter_map(|r| {
            let config = r["config"].as_str()?;
            Some(SubLayerTime {
                model: r["model"].as_str()?.to_string(),
                sublayer: r["sublayer"].as_str()?.to_string(),
                tp: u32::try_from(r["tp"].as_u64()?).ok()?,
                scenario: Scenario::ALL.into_iter().find(|s| s.name() == config)?,
                total_seconds: r["total_seconds"].as_f64()?,
                gemm_seconds: r["gemm_seconds"].as_f64()?,
            })
        })
        .collect();
    for (phase, s, name, diss) in [
        (
            Phase::Training,
            Scenario::T3,
            "T3 end-to-end training",
            1.07,
        ),
        (
            Phase::Training,
            Scenario::T3Mca,
            "T3-MCA end-to-end training",
            1.10,
        ),
        (Phase::Prompt, Scenario::T3, "T3 prompt phase", 1.09),
        (Phase::Prompt, Scenario::T3Mca, "T3-MCA prompt phase", 1.12),
    ] {
        let xs: Vec<f64> = end_to_end(&times, phase)
            .into_iter()
            .filter(|e| e.scenario == s)
            .map(|e| e.speedup)
            .collect();
        if let Some(g) = geomean(&xs) {
            out.push(Headline {
                chapter: "ch. 8 T3",
                figure: format!("{name}, geomean"),
                dissertation: Some(diss),
                ours: g,
                unit: Unit::Times,
                config: format!("{cfg}; {} model x TP pairs", xs.len()),
                baseline: "Sequential's iteration (ch. 8 method, docs/decisions/t3.md)".into(),
            });
        }
    }
}

/// `(model, sublayer, tp)` of a row.
fn t3_key(r: &Value) -> (String, String, u64) {
    (
        r["model"].as_str().unwrap_or("").to_string(),
        r["sublayer"].as_str().unwrap_or("").to_string(),
        r["tp"].as_u64().unwrap_or(0),
    )
}

/// Total DRAM bytes of a row.
fn t3_bytes(r: &Value) -> f64 {
    r["bytes"]
        .as_object()
        .map(|b| b.values().filter_map(Value::as_f64).sum())
        .unwrap_or(0.0)
}

/// Chapter 8: the fused GEMM + reduce-scatter over the sub-layers of the study.
///
/// # Errors
/// The rows of `nmcp t3 --json` lack a configuration or a key.
pub fn t3(rows: &[Value]) -> Result<Vec<Headline>, FigureError> {
    const CH: &str = "ch. 8 T3";
    let Some(first) = rows.first() else {
        return Err(FigureError("t3 JSON: no rows".into()));
    };
    let simulate = first["simulate"].as_str().unwrap_or("?").to_string();
    let sublayers = t3_rows(rows, "sequential").count();
    let cfg = format!("{sublayers} sub-layers, {simulate}");
    let speed = |c: &str| -> Result<(f64, f64), FigureError> {
        let xs: Vec<f64> = t3_rows(rows, c)
            .filter_map(|r| r["speedup_vs_sequential"].as_f64())
            .collect();
        let g = geomean(&xs).ok_or_else(|| FigureError(format!("t3 JSON: no {c} rows")))?;
        Ok((g, xs.iter().copied().fold(f64::NAN, f64::max)))
    };
    let ideal = speed("ideal-overlap")?;
    let mut out = Vec::new();
    for (c, name, diss) in [
        ("t3", "T3", (1.20, 1.39)),
        ("t3-mca", "T3-MCA", (1.30, 1.47)),
        ("ideal-overlap", "Ideal GEMM-RS overlap", (1.35, 1.50)),
    ] {
        let (g, m) = speed(c)?;
        let baseline = if c == "ideal-overlap" {
            "Sequential = 1".to_string()
        } else {
            format!("ideal overlap {:.2}x geomean", ideal.0)
        };
        out.push(Headline {
            chapter: CH,
            figure: format!("{name} over Sequential, geomean"),
            dissertation: Some(diss.0),
            ours: g,
            unit: Unit::Times,
            config: cfg.clone(),
            baseline: baseline.clone(),
        });
        out.push(Headline {
            chapter: CH,
            figure: format!("{name} over Sequential, largest"),
            dissertation: Some(diss.1),
            ours: m,
            unit: Unit::Times,
            config: cfg.clone(),
            baseline,
        });
    }
    // Data movement of T3-MCA against Sequential, sub-layer by sub-layer.
    let mut reduction = Vec::new();
    let mut rs_reads = Vec::new();
    let mut gemm_reads = Vec::new();
    for s in t3_rows(rows, "sequential") {
        let Some(m) = t3_rows(rows, "t3-mca").find(|m| t3_key(m) == t3_key(s)) else {
            continue;
        };
        let (bs, bm) = (t3_bytes(s), t3_bytes(m));
        if bs > 0.0 {
            reduction.push(1.0 - bm / bs);
        }
        let ratio = |k: &str| {
            let (a, b) = (s["bytes"][k].as_f64()?, m["bytes"][k].as_f64()?);
            (b > 0.0).then(|| a / b)
        };
        rs_reads.extend(ratio("rs_reads"));
        gemm_reads.extend(ratio("gemm_reads"));
    }
    if !reduction.is_empty() {
        let mean = reduction.iter().sum::<f64>() / reduction.len() as f64;
        let max = reduction.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        for (figure, diss, ours) in [
            ("DRAM traffic saved by T3-MCA, mean", 0.22, mean),
            ("DRAM traffic saved by T3-MCA, largest", 0.36, max),
        ] {
            out.push(Headline {
                chapter: CH,
                figure: figure.into(),
                dissertation: Some(diss),
                ours,
                unit: Unit::Percent,
                config: cfg.clone(),
                baseline: "Sequential's bytes".into(),
            });
        }
    }
    for (figure, diss, xs) in [
        ("RS reads, Sequential over T3-MCA, geomean", 2.4, &rs_reads),
        (
            "GEMM reads, Sequential over T3-MCA, geomean",
            1.6,
            &gemm_reads,
        ),
    ] {
        if let Some(v) = geomean(xs) {
            out.push(Headline {
                chapter: CH,
                figure: figure.into(),
                dissertation: Some(diss),
                ours: v,
                unit: Unit::Times,
                config: cfg.clone(),
                baseline: "Sequential's bytes".into(),
            });
        }
    }
    t3_end_to_end(rows, &cfg, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_name_the_document_and_where_they_stopped() {
        let d = json!({"a": [{"b": 2.5}]});
        assert_eq!(num(&d, "doc", "a.0.b").ok(), Some(2.5));
        let e = num(&d, "doc", "a.1.b")
            .err()
            .map(|e| e.0)
            .unwrap_or_default();
        assert!(
            e.contains("doc") && e.contains("a.1.b") && e.contains("`1`"),
            "{e}"
        );
    }

    #[test]
    fn t3_figures_pair_sublayers_and_compute_reductions() {
        let row = |c: &str, sub: &str, sp: f64, rs: f64| {
            json!({"model": "m", "sublayer": sub, "tp": 8, "config": c, "simulate": "shortcut",
                   "speedup_vs_sequential": sp,
                   "bytes": {"gemm_reads": 100.0, "rs_reads": rs, "other": 100.0}})
        };
        let mut rows = Vec::new();
        for (sub, f) in [("OP", 1.0f64), ("FC-2", 4.0)] {
            rows.push(row("sequential", sub, 1.0, 200.0));
            rows.push(row("t3", sub, 1.1 * f.sqrt(), 100.0));
            rows.push(row("t3-mca", sub, 1.2, 200.0 / f));
            rows.push(row("ideal-overlap", sub, 1.5, 0.0));
        }
        let h = t3(&rows).unwrap_or_default();
        let get = |f: &str| h.iter().find(|x| x.figure == f).map(|x| x.ours);
        // geomean of 1.1 and 2.2
        let g = get("T3 over Sequential, geomean").unwrap_or(0.0);
        assert!((g - (1.1f64 * 2.2).sqrt()).abs() < 1e-12, "{g}");
        // totals 400 -> 400 (OP) and 400 -> 250 (FC-2): mean 18.75 %, max 37.5 %
        let mean = get("DRAM traffic saved by T3-MCA, mean").unwrap_or(0.0);
        assert!((mean - 0.1875).abs() < 1e-12, "{mean}");
        let rs = get("RS reads, Sequential over T3-MCA, geomean").unwrap_or(0.0);
        assert!((rs - 2.0).abs() < 1e-12, "{rs}");
    }

    #[test]
    fn geomean_refuses_empty_and_non_positive() {
        assert_eq!(geomean(&[]), None);
        assert_eq!(geomean(&[1.0, 0.0]), None);
        assert!((geomean(&[2.0, 8.0]).unwrap_or(0.0) - 4.0).abs() < 1e-12);
    }
}
