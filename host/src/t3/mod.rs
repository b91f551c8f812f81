//! What `nmcp t3` prints and writes: JSON rows, the human report with geomeans next to
//! the dissertation's figures, the traffic summary, the `check` output directory.
//! The runs themselves are `nmcp_emulator::t3`'s.

pub mod e2e;
pub mod lines;
pub mod machine;
pub mod npy;
pub(crate) mod options;
pub mod plot;
pub mod select;
pub mod study;

use std::fmt::Write as _;
use std::path::Path;

use nmcp_emulator::energy::EnergyReport;
use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::t3::energy::sublayer_energy;
use nmcp_emulator::t3::run::T3_PRESET;
use nmcp_emulator::t3::{
    CheckOutput, CheckRun, Scenario, Simulate, SubLayer, SubLayerResult, TrafficBytes,
};
use nmcp_isa::gemm_ext::GemmDataType;
use serde::Serialize;

/// Dissertation 8.5 speedups over Sequential (geomean, max), as fractions (+0.35 = +35 %).
pub const DISSERTATION_SPEEDUP: [(Scenario, f64, f64); 3] = [
    (Scenario::IdealOverlap, 0.35, 0.50),
    (Scenario::T3, 0.20, 0.39),
    (Scenario::T3Mca, 0.30, 0.47),
];

/// Dissertation data-movement reduction of T3-MCA vs Sequential (mean, max).
pub const DISSERTATION_TRAFFIC: (f64, f64) = (0.22, 0.36);

/// Dissertation ratio of Sequential's RS reads to T3-MCA's.
pub const DISSERTATION_RS_READ_RATIO: f64 = 2.4;

/// The scenarios of the traffic table and plot.
pub const TRAFFIC_SCENARIOS: [Scenario; 3] = [Scenario::Sequential, Scenario::T3, Scenario::T3Mca];

/// One JSON row: one sub-layer under one configuration.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Row {
    /// Model name.
    pub model: String,
    /// `OP`, `FC-2`, `FC-1`, `IP`.
    pub sublayer: String,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// [`Scenario::name`].
    pub config: &'static str,
    /// GEMM (or fused GEMM + RS) time.
    pub gemm_seconds: f64,
    /// Exposed reduce-scatter time.
    pub rs_seconds: f64,
    /// The isolated reduce-scatter the scenario is built from (0 for fused ones).
    pub rs_alone_seconds: f64,
    /// All-gather time.
    pub ag_seconds: f64,
    /// End to end.
    pub total_seconds: f64,
    /// Sequential's total over this one's.
    pub speedup_vs_sequential: f64,
    /// The T3 firmware's CP time in the fused run (busiest GPU; 0 without firmware).
    pub firmware_seconds: f64,
    /// DRAM bytes by kind, per GPU.
    pub bytes: TrafficBytes,
    /// Output rows.
    pub m: u32,
    /// Output columns.
    pub n: u32,
    /// Reduction dimension per GPU.
    pub k: u32,
    /// GPUs in the ring.
    pub gpus: u32,
    /// `all-gpus` or `shortcut`.
    pub simulate: &'static str,
    /// Energy per GPU (`t3::energy::sublayer_energy`).
    pub energy: EnergyReport,
    /// What the communication did to the producer's DRAM reads (GPU 0): sequential's
    /// isolated GEMM, and the fused runs (absent for the ideal rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contention: Option<nmcp_emulator::t3::system::Contention>,
}

/// The name of a [`Simulate`] in JSON and reports.
pub const fn simulate_name(s: Simulate) -> &'static str {
    match s {
        Simulate::AllGpus => "all-gpus",
        Simulate::Shortcut => "shortcut",
    }
}

impl Row {
    /// The row of `r`, run on `gpus` GPUs (0 = the sub-layer's TP) simulated as `simulate`,
    /// its GEMM in `dtype` on `preset`'s memory.
    pub fn new(
        r: &SubLayerResult,
        gpus: u32,
        simulate: Simulate,
        preset: &HbmPreset,
        dtype: GemmDataType,
    ) -> Self {
        let sl = &r.sublayer;
        Self {
            model: sl.model.clone(),
            sublayer: sl.name.to_string(),
            tp: sl.tp,
            config: r.scenario.name(),
            gemm_seconds: r.gemm_seconds,
            rs_seconds: r.rs_seconds,
            rs_alone_seconds: r.rs_alone_seconds,
            ag_seconds: r.ag_seconds,
            total_seconds: r.total_seconds,
            speedup_vs_sequential: r.speedup_vs_sequential,
            firmware_seconds: r.firmware_seconds,
            bytes: r.bytes,
            m: sl.m,
            n: sl.n,
            k: sl.k,
            gpus: if gpus == 0 { sl.tp } else { gpus },
            simulate: simulate_name(simulate),
            energy: sublayer_energy(preset, r, dtype),
            contention: r.contention,
        }
    }
}

/// The rows of `results`, in order, their energy on the T3 preset's memory with the GEMM
/// in `dtype`.
pub fn rows(
    results: &[SubLayerResult],
    gpus: u32,
    simulate: Simulate,
    dtype: GemmDataType,
) -> Vec<Row> {
    // A built-in preset: it loads (the preset tests check every one).
    let preset = HbmPreset::builtin(T3_PRESET).unwrap_or_else(|e| panic!("{T3_PRESET}: {e}"));
    results
        .iter()
        .map(|r| Row::new(r, gpus, simulate, &preset, dtype))
        .collect()
}

/// Geometric mean of the positive, finite values; `None` if there are none.
pub fn geomean(xs: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (n, sum) = xs
        .into_iter()
        .filter(|x| x.is_finite() && *x > 0.0)
        .fold((0usize, 0.0f64), |(n, s), x| (n + 1, s + x.ln()));
    (n > 0).then(|| (sum / n as f64).exp())
}

/// `"mega-gpt-2 OP TP8"`.
pub fn label(sl: &SubLayer) -> String {
    format!("{} {} TP{}", sl.model, sl.name, sl.tp)
}

/// One sub-layer with its result per scenario (in [`Scenario::ALL`] order).
#[derive(Debug, Clone)]
pub struct Group<'a> {
    /// The sub-layer.
    pub sublayer: &'a SubLayer,
    /// Its results, by [`Scenario::ALL`] index.
    pub by_scenario: [Option<&'a SubLayerResult>; 5],
}

impl<'a> Group<'a> {
    /// The result under `s`.
    pub fn get(&self, s: Scenario) -> Option<&'a SubLayerResult> {
        self.by_scenario[scenario_index(s)]
    }
}

/// Index of `s` in [`Scenario::ALL`].
pub fn scenario_index(s: Scenario) -> usize {
    Scenario::ALL.iter().position(|&c| c == s).unwrap_or(0)
}

/// `results` grouped by sub-layer, in first-seen order.
pub fn groups(results: &[SubLayerResult]) -> Vec<Group<'_>> {
    let mut out: Vec<Group<'_>> = Vec::new();
    for r in results {
        let i = match out.iter().position(|g| *g.sublayer == r.sublayer) {
            Some(i) => i,
            None => {
                out.push(Group {
                    sublayer: &r.sublayer,
                    by_scenario: [None; 5],
                });
                out.len() - 1
            }
        };
        out[i].by_scenario[scenario_index(r.scenario)] = Some(r);
    }
    out
}

/// Geomean and max speedup over Sequential of one scenario.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpeedupSummary {
    /// The scenario.
    pub scenario: Scenario,
    /// Geomean of `speedup_vs_sequential` over the sub-layers.
    pub geomean: f64,
    /// Largest.
    pub max: f64,
}

/// Per scenario, geomean and max of `speedup_vs_sequential` over every sub-layer.
pub fn speedup_summary(results: &[SubLayerResult]) -> Vec<SpeedupSummary> {
    Scenario::ALL
        .into_iter()
        .filter_map(|s| {
            let xs: Vec<f64> = results
                .iter()
                .filter(|r| r.scenario == s)
                .map(|r| r.speedup_vs_sequential)
                .collect();
            Some(SpeedupSummary {
                scenario: s,
                geomean: geomean(xs.iter().copied())?,
                max: xs.iter().copied().fold(f64::NAN, f64::max),
            })
        })
        .collect()
}

/// T3-MCA's data movement against Sequential's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TrafficSummary {
    /// Mean over sub-layers of `1 - mca total / sequential total` (0.22 = 22 % less).
    pub mean_reduction: f64,
    /// Largest such reduction.
    pub max_reduction: f64,
    /// Geomean over sub-layers of `sequential rs_reads / t3-mca rs_reads` (`None` when
    /// T3-MCA reads nothing for the RS anywhere).
    pub rs_read_ratio: Option<f64>,
    /// Sub-layers counted.
    pub sublayers: usize,
}

/// The data-movement summary of `results` (`None` without Sequential and T3-MCA pairs).
pub fn traffic_summary(results: &[SubLayerResult]) -> Option<TrafficSummary> {
    let mut red = Vec::new();
    let mut ratios = Vec::new();
    for g in groups(results) {
        let (Some(s), Some(m)) = (g.get(Scenario::Sequential), g.get(Scenario::T3Mca)) else {
            continue;
        };
        let st = s.bytes.total();
        if st > 0 {
            red.push(1.0 - m.bytes.total() as f64 / st as f64);
        }
        if m.bytes.rs_reads > 0 {
            ratios.push(s.bytes.rs_reads as f64 / m.bytes.rs_reads as f64);
        }
    }
    if red.is_empty() {
        return None;
    }
    Some(TrafficSummary {
        mean_reduction: red.iter().sum::<f64>() / red.len() as f64,
        max_reduction: red.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        rs_read_ratio: geomean(ratios),
        sublayers: red.len(),
    })
}

fn us(s: f64) -> String {
    format!("{:.1}", s * 1e6)
}

fn mb(b: u64) -> String {
    format!("{:.2}", b as f64 / 1e6)
}

fn pct(x: f64) -> String {
    format!("{:+.0} %", x * 100.0)
}

/// What the report says about how the runs were made.
#[derive(Debug, Clone)]
pub struct ReportContext {
    /// GPUs (0 = each sub-layer's TP).
    pub gpus: u32,
    /// All GPUs or the shortcut.
    pub simulate: Simulate,
    /// GPU model name.
    pub gpu: String,
    /// Data type name.
    pub dtype: &'static str,
    /// The GEMM's data type (its FLOPs' energy rate).
    pub gemm_dtype: GemmDataType,
    /// Wall time of all the runs.
    pub wall_seconds: f64,
}

/// The human report: a time table per model x TP, the geomeans next to the dissertation,
/// the traffic table and its summary.
pub fn report(results: &[SubLayerResult], ctx: &ReportContext) -> String {
    let mut o = String::new();
    let gs = groups(results);
    let mut blocks: Vec<(String, u32)> = Vec::new();
    for g in &gs {
        let key = (g.sublayer.model.clone(), g.sublayer.tp);
        if !blocks.contains(&key) {
            blocks.push(key);
        }
    }
    let _ = writeln!(
        o,
        "T3: fused GEMM + reduce-scatter, {} GPU, {}, {} simulated",
        ctx.gpu,
        ctx.dtype,
        simulate_name(ctx.simulate)
    );
    for (model, tp) in &blocks {
        let members: Vec<&Group<'_>> = gs
            .iter()
            .filter(|g| &g.sublayer.model == model && g.sublayer.tp == *tp)
            .collect();
        let first = members[0].sublayer;
        let gpus = if ctx.gpus == 0 { *tp } else { ctx.gpus };
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{model}, TP {tp} (H {}, {} tokens, {gpus} GPUs)",
            first.h, first.tokens
        );
        let _ = writeln!(
            o,
            "{:<30} {:^69} | {:^55}",
            "", "total time (µs)", "speedup over sequential"
        );
        let _ = write!(o, "{:<9} {:>20}", "sub-layer", "M x N x K");
        for s in Scenario::ALL {
            let _ = write!(o, " {:>13}", s.name());
        }
        let _ = write!(o, " |");
        for s in &Scenario::ALL[1..] {
            let _ = write!(o, " {:>13}", s.name());
        }
        let _ = writeln!(o);
        for g in members {
            let sl = g.sublayer;
            let _ = write!(
                o,
                "{:<9} {:>20}",
                sl.name,
                format!("{} x {} x {}", sl.m, sl.n, sl.k)
            );
            for s in Scenario::ALL {
                let t = g.get(s).map_or("-".into(), |r| us(r.total_seconds));
                let _ = write!(o, " {t:>13}");
            }
            let _ = write!(o, " |");
            for s in &Scenario::ALL[1..] {
                let x = g
                    .get(*s)
                    .map_or("-".into(), |r| format!("{:.2}x", r.speedup_vs_sequential));
                let _ = write!(o, " {x:>13}");
            }
            let _ = writeln!(o);
        }
    }
    speedup_section(&mut o, results, gs.len());
    firmware_section(&mut o, &gs);
    end_to_end_section(&mut o, results);
    traffic_section(&mut o, &gs, results);
    energy_section(&mut o, &gs, ctx.gemm_dtype);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "{} sub-layer(s) x {} configurations simulated in {:.1} s wall",
        gs.len(),
        Scenario::ALL.len(),
        ctx.wall_seconds
    );
    o
}

/// The T3 firmware's CP time per fused GEMM (the busiest GPU's handlers, charged through
/// the node's cost model) and its share of the fused run.
fn firmware_section(o: &mut String, gs: &[Group<'_>]) {
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "T3 firmware on the CP per GEMM (busiest GPU, µs; share of the fused run)"
    );
    let _ = writeln!(
        o,
        "{:<24} {:>22} {:>22}",
        "sub-layer",
        Scenario::T3.name(),
        Scenario::T3Mca.name()
    );
    for g in gs {
        let sl = g.sublayer;
        let _ = write!(o, "{:<24}", format!("{} {} TP{}", sl.model, sl.name, sl.tp));
        for s in [Scenario::T3, Scenario::T3Mca] {
            let cell = g.get(s).map_or("-".into(), |r| {
                let share = r.firmware_seconds / r.total_seconds.max(f64::MIN_POSITIVE);
                format!("{} ({:.0} %)", us(r.firmware_seconds), 100.0 * share)
            });
            let _ = write!(o, " {cell:>22}");
        }
        let _ = writeln!(o);
    }
}

/// Energy per GPU of Sequential, T3 and T3-MCA per sub-layer, and T3-MCA's saving
/// (`t3::energy`; the dissertation does not evaluate energy).
fn energy_section(o: &mut String, gs: &[Group<'_>], dtype: GemmDataType) {
    let Ok(preset) = HbmPreset::builtin(T3_PRESET) else {
        return;
    };
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "energy per GPU (mJ: DRAM / GPU / total){:>30}",
        "T3-MCA saves"
    );
    let mut savings = Vec::new();
    for g in gs {
        let _ = write!(o, "  {:<22}", label(g.sublayer));
        let mut totals = [None; 3];
        for (i, s) in TRAFFIC_SCENARIOS.iter().enumerate() {
            let Some(r) = g.get(*s) else {
                let _ = write!(o, " {:>26}", "-");
                continue;
            };
            let e = sublayer_energy(&preset, r, dtype);
            totals[i] = Some(e.total_j);
            let _ = write!(
                o,
                " {:>26}",
                format!(
                    "{}: {:.2}/{:.2}/{:.2}",
                    s.name(),
                    e.sum_of("dram_") * 1e3,
                    e.sum_of("gpu_") * 1e3,
                    e.total_j * 1e3
                )
            );
        }
        if let (Some(seq), Some(mca)) = (totals[0], totals[2]) {
            let saving = 1.0 - mca / seq;
            savings.push(saving);
            let _ = write!(o, " {:>8}", pct(saving));
        }
        let _ = writeln!(o);
    }
    if !savings.is_empty() {
        let mean = savings.iter().sum::<f64>() / savings.len() as f64;
        let _ = writeln!(
            o,
            "  mean saving of T3-MCA over sequential: {} (dissertation: not evaluated)",
            pct(mean)
        );
    }
}

fn speedup_section(o: &mut String, results: &[SubLayerResult], n: usize) {
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "speedup over sequential, {n} sub-layer(s): {:>10} {:>10}   {:>22}",
        "geomean", "max", "dissertation geomean/max"
    );
    for s in speedup_summary(results) {
        if s.scenario == Scenario::Sequential {
            continue;
        }
        let d = DISSERTATION_SPEEDUP
            .iter()
            .find(|d| d.0 == s.scenario)
            .map_or("-".to_string(), |d| format!("{} / {}", pct(d.1), pct(d.2)));
        let _ = writeln!(
            o,
            "  {:<38} {:>10} {:>10}   {d:>22}",
            s.scenario.name(),
            pct(s.geomean - 1.0),
            pct(s.max - 1.0)
        );
    }
}

/// The rows as the end-to-end model takes them.
pub fn sublayer_times(results: &[SubLayerResult]) -> Vec<e2e::SubLayerTime> {
    results
        .iter()
        .map(|r| e2e::SubLayerTime {
            model: r.sublayer.model.clone(),
            sublayer: r.sublayer.name.to_string(),
            tp: r.sublayer.tp,
            scenario: r.scenario,
            total_seconds: r.total_seconds,
            gemm_seconds: r.gemm_seconds,
        })
        .collect()
}

/// Dissertation 8.5.3 end-to-end speedups (geomean, max) of T3 and T3-MCA.
const DISSERTATION_E2E: [(e2e::Phase, Scenario, f64, f64); 4] = [
    (e2e::Phase::Training, Scenario::T3, 0.07, 0.09),
    (e2e::Phase::Training, Scenario::T3Mca, 0.10, 0.12),
    (e2e::Phase::Prompt, Scenario::T3, 0.09, 0.12),
    (e2e::Phase::Prompt, Scenario::T3Mca, 0.12, 0.15),
];

fn end_to_end_section(o: &mut String, results: &[SubLayerResult]) {
    let times = sublayer_times(results);
    for phase in [e2e::Phase::Training, e2e::Phase::Prompt] {
        let e = e2e::end_to_end(&times, phase);
        if e.is_empty() {
            continue;
        }
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "end to end, {} (chapter 8's method: the all-reduce sub-layers replaced in the baseline layer; other GEMMs at the isolated GEMMs' rate per FLOP, non-GEMM {:.1} % of the baseline)",
            phase.name(),
            100.0 * e2e::NON_GEMM_SHARE
        );
        for s in Scenario::ALL {
            if s == Scenario::Sequential {
                continue;
            }
            let xs: Vec<f64> = e
                .iter()
                .filter(|x| x.scenario == s)
                .map(|x| x.speedup)
                .collect();
            let (Some(g), m) = (
                geomean(xs.iter().copied()),
                xs.iter().copied().fold(f64::NAN, f64::max),
            ) else {
                continue;
            };
            let d = DISSERTATION_E2E
                .iter()
                .find(|d| d.0 == phase && d.1 == s)
                .map_or("-".to_string(), |d| format!("{} / {}", pct(d.2), pct(d.3)));
            let _ = writeln!(
                o,
                "  {:<38} {:>10} {:>10}   {d:>22}",
                s.name(),
                pct(g - 1.0),
                pct(m - 1.0)
            );
        }
        for x in e.iter().filter(|x| x.scenario == Scenario::Sequential) {
            let _ = writeln!(
                o,
                "    {} TP {}: all-reduce sub-layers {:.0} % of the baseline {}, {:.1} ms",
                x.model,
                x.tp,
                100.0 * x.sublayer_share,
                phase.name(),
                1e3 * x.seconds
            );
        }
    }
}

fn traffic_section(o: &mut String, gs: &[Group<'_>], results: &[SubLayerResult]) {
    let _ = writeln!(o);
    let _ = writeln!(o, "DRAM traffic per GPU (MB)");
    let _ = writeln!(
        o,
        "{:<24} {:<10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8}",
        "sub-layer",
        "config",
        "gemm reads",
        "gemm writes",
        "rs reads",
        "rs writes",
        "updates",
        "ag",
        "total",
        "vs seq"
    );
    for g in gs {
        let seq = g.get(Scenario::Sequential).map(|r| r.bytes.total());
        for s in TRAFFIC_SCENARIOS {
            let Some(r) = g.get(s) else { continue };
            let b = &r.bytes;
            let vs = match seq {
                Some(_) if s == Scenario::Sequential => String::new(),
                Some(t) if t > 0 => pct(b.total() as f64 / t as f64 - 1.0),
                _ => "-".into(),
            };
            let _ = writeln!(
                o,
                "{:<24} {:<10} {:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>10} {:>8}",
                label(g.sublayer),
                s.name(),
                mb(b.gemm_reads),
                mb(b.gemm_writes),
                mb(b.rs_reads),
                mb(b.rs_writes),
                mb(b.updates),
                mb(b.ag),
                mb(b.total()),
                vs
            );
        }
    }
    // Near-memory reductions in the ring alone, per TP (the dissertation: 7 % at TP 8, 3 %
    // at TP 16; only the final step's read and write go away, the links dominate).
    let mut tps: Vec<u32> = results.iter().map(|r| r.sublayer.tp).collect();
    tps.sort_unstable();
    tps.dedup();
    for tp in tps {
        let pick = |c: Scenario| {
            results
                .iter()
                .filter(|r| r.sublayer.tp == tp && r.scenario == c && r.rs_alone_seconds > 0.0)
                .map(|r| {
                    (
                        (r.sublayer.model.clone(), r.sublayer.name),
                        r.rs_alone_seconds,
                    )
                })
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let (base, nmc) = (pick(Scenario::Sequential), pick(Scenario::IdealRsNmc));
        let ratios: Vec<f64> = base
            .iter()
            .filter_map(|(k, b)| nmc.get(k).map(|n| b / n))
            .collect();
        if let Some(g) = geomean(ratios) {
            let _ = writeln!(
                o,
                "reduce-scatter with near-memory updates, TP {tp}: {} faster than the ring kernel (dissertation: 7 % at TP 8, 3 % at TP 16)",
                pct(g - 1.0)
            );
        }
    }
    if let Some(t) = traffic_summary(results) {
        let _ = writeln!(
            o,
            "data movement, t3-mca vs sequential: {} mean, {} max (dissertation: {} mean, {} max)",
            pct(-t.mean_reduction),
            pct(-t.max_reduction),
            pct(-DISSERTATION_TRAFFIC.0),
            pct(-DISSERTATION_TRAFFIC.1)
        );
        let ratio = t.rs_read_ratio.map_or("-".into(), |r| format!("{r:.2}x"));
        let _ = writeln!(
            o,
            "RS reads, sequential / t3-mca (geomean): {ratio} fewer (dissertation: {DISSERTATION_RS_READ_RATIO}x)"
        );
    }
}

/// The `layout.json` of a check run.
pub fn layout_json(run: &CheckRun, out: &CheckOutput) -> serde_json::Value {
    serde_json::json!({
        "gpus": run.gpus,
        "m": run.m,
        "n": run.n,
        "blocks": out.blocks,
    })
}

/// Writes `partial_g.npy`, `reduced_g.npy` for every GPU and `layout.json` into `dir`.
///
/// # Errors
/// A shape that does not match the run, a value the type cannot hold, an I/O failure;
/// each names the file or GPU.
pub fn write_check_dir(
    dir: &Path,
    run: &CheckRun,
    dtype: GemmDataType,
    out: &CheckOutput,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    if out.partials.len() != out.reduced.len() || out.blocks.len() != out.reduced.len() {
        return Err(format!(
            "check output has {} partials, {} reduced blocks, {} block descriptions",
            out.partials.len(),
            out.reduced.len(),
            out.blocks.len()
        ));
    }
    for (g, p) in out.partials.iter().enumerate() {
        let path = dir.join(format!("partial_{g}.npy"));
        npy::write_typed(&path, dtype, &[u64::from(run.m), u64::from(run.n)], p)?;
    }
    for (i, (r, b)) in out.reduced.iter().zip(&out.blocks).enumerate() {
        let rows = u64::from(b.rows[1].saturating_sub(b.rows[0]));
        let cols = u64::from(b.cols[1].saturating_sub(b.cols[0]));
        let path = dir.join(format!("reduced_{}.npy", b.gpu));
        if b.gpu as usize != i {
            return Err(format!("block {i} describes GPU {}", b.gpu));
        }
        npy::write_typed(&path, dtype, &[rows, cols], r)?;
    }
    let path = dir.join("layout.json");
    let text = serde_json::to_string_pretty(&layout_json(run, out)).map_err(|e| e.to_string())?;
    crate::cmd::io::write_file(&path, (text + "\n").as_bytes())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use nmcp_emulator::t3::{sublayers, Block};

    /// Hand-built results for two sub-layers under all five scenarios.
    pub(crate) fn sample() -> Vec<SubLayerResult> {
        let mut out = Vec::new();
        for sl in sublayers("mega-gpt-2", 3072, 16384, 8).into_iter().take(2) {
            let seq_total = 100e-6;
            for (i, s) in Scenario::ALL.into_iter().enumerate() {
                let total = seq_total / (1.0 + 0.1 * i as f64);
                let b = 1_000_000u64;
                out.push(SubLayerResult {
                    sublayer: sl.clone(),
                    scenario: s,
                    gemm_seconds: total * 0.7,
                    rs_seconds: total * 0.2,
                    ag_seconds: total * 0.1,
                    total_seconds: total,
                    speedup_vs_sequential: seq_total / total,
                    rs_alone_seconds: 0.0,
                    firmware_seconds: 0.0,
                    contention: None,
                    bytes: TrafficBytes {
                        gemm_reads: 4 * b,
                        gemm_writes: if i == 0 { b } else { 0 },
                        rs_reads: if i == 0 { 3 * b } else { b + b / 4 },
                        rs_writes: if i == 0 { b } else { 0 },
                        updates: if i == 0 { 0 } else { 2 * b },
                        ag: b / 2,
                    },
                });
            }
        }
        out
    }

    #[test]
    fn json_rows_have_every_key_and_the_config_names() {
        let rs = rows(&sample(), 0, Simulate::AllGpus, GemmDataType::F16);
        assert_eq!(rs.len(), 10);
        let v = serde_json::to_value(&rs).unwrap();
        let keys = [
            "model",
            "sublayer",
            "tp",
            "config",
            "gemm_seconds",
            "rs_seconds",
            "rs_alone_seconds",
            "ag_seconds",
            "total_seconds",
            "speedup_vs_sequential",
            "firmware_seconds",
            "bytes",
            "m",
            "n",
            "k",
            "gpus",
            "simulate",
            "energy",
        ];
        for row in v.as_array().unwrap() {
            let o = row.as_object().unwrap();
            for k in keys {
                assert!(o.contains_key(k), "missing {k} in {row}");
            }
            // `contention` only where a simulation ran the producer (none in the sample).
            assert_eq!(
                o.len(),
                keys.len() + usize::from(o.contains_key("contention")),
                "{row}"
            );
            let total = o["energy"]["total_j"].as_f64().unwrap();
            assert!(total.is_finite() && total > 0.0, "energy.total_j in {row}");
            let b = o["bytes"].as_object().unwrap();
            for k in [
                "gemm_reads",
                "gemm_writes",
                "rs_reads",
                "rs_writes",
                "updates",
                "ag",
            ] {
                assert!(b[k].is_u64(), "bytes.{k} in {row}");
            }
            assert_eq!(row["gpus"], 8);
            assert_eq!(row["simulate"], "all-gpus");
            assert_eq!(row["model"], "mega-gpt-2");
        }
        let configs: Vec<&str> = v.as_array().unwrap()[..5]
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
        assert_eq!(v[0]["sublayer"], "OP");
        assert_eq!(v[5]["sublayer"], "FC-2");
        assert_eq!(v[5]["k"], 3072 * 4 / 8);
        let shortcut = rows(&sample(), 16, Simulate::Shortcut, GemmDataType::F16);
        assert_eq!(shortcut[0].gpus, 16);
        assert_eq!(shortcut[0].simulate, "shortcut");
    }

    #[test]
    fn geomean_of_known_values() {
        assert!((geomean([2.0, 8.0]).unwrap() - 4.0).abs() < 1e-12);
        assert!((geomean([1.0, 1.0, 1.0]).unwrap() - 1.0).abs() < 1e-12);
        assert!((geomean([1.2]).unwrap() - 1.2).abs() < 1e-12);
        // Non-positive and non-finite values are left out; nothing left is None.
        assert!((geomean([3.0, 0.0, f64::NAN, 3.0]).unwrap() - 3.0).abs() < 1e-12);
        assert_eq!(geomean([]), None);
        assert_eq!(geomean([0.0, -1.0]), None);
    }

    #[test]
    fn summaries_from_hand_built_results() {
        let r = sample();
        let s = speedup_summary(&r);
        assert_eq!(s.len(), 5);
        assert!((s[0].geomean - 1.0).abs() < 1e-12);
        assert!((s[2].geomean - 1.2).abs() < 1e-9, "{:?}", s[2]);
        assert!((s[4].max - 1.4).abs() < 1e-9);
        let t = traffic_summary(&r).unwrap();
        // sequential 9.5 MB, t3-mca 7.75 MB per sub-layer.
        assert!(
            (t.mean_reduction - (1.0 - 7.75 / 9.5)).abs() < 1e-9,
            "{t:?}"
        );
        assert!((t.rs_read_ratio.unwrap() - 3.0 / 1.25).abs() < 1e-9);
        assert_eq!(t.sublayers, 2);
    }

    #[test]
    fn report_shows_tables_geomeans_and_the_dissertation() {
        let ctx = ReportContext {
            gpus: 0,
            simulate: Simulate::AllGpus,
            gpu: "t3-table-8.1".into(),
            dtype: "f16",
            gemm_dtype: GemmDataType::F16,
            wall_seconds: 1.5,
        };
        let text = report(&sample(), &ctx);
        for want in [
            "mega-gpt-2, TP 8",
            "OP",
            "FC-2",
            "ideal-rs-nmc",
            "dissertation",
            "+35 % / +50 %",
            "+20 %",
            "DRAM traffic",
            "rs reads",
            "2.40x",
            "(dissertation: 2.4x)",
            "(dissertation: -22 % mean, -36 % max)",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
    }

    #[test]
    fn check_dir_has_npy_files_and_layout() {
        let run = CheckRun {
            gpus: 2,
            m: 2,
            n: 4,
            k: 8,
            scenario: Scenario::T3,
        };
        let p0: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let p1: Vec<f32> = (0..8).map(|i| 0.5 * i as f32).collect();
        let sum: Vec<f32> = p0.iter().zip(&p1).map(|(a, b)| a + b).collect();
        let out = CheckOutput {
            reduced: vec![sum[..4].to_vec(), sum[4..].to_vec()],
            partials: vec![p0, p1],
            blocks: vec![
                Block {
                    gpu: 0,
                    rows: [0, 1],
                    cols: [0, 4],
                },
                Block {
                    gpu: 1,
                    rows: [1, 2],
                    cols: [0, 4],
                },
            ],
            mismatches: 0,
            first_mismatch: None,
            seconds: 1e-6,
        };
        let dir = tempfile::tempdir().unwrap();
        write_check_dir(dir.path(), &run, GemmDataType::F16, &out).unwrap();
        let layout: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("layout.json")).unwrap())
                .unwrap();
        assert_eq!(
            layout,
            serde_json::json!({
                "gpus": 2, "m": 2, "n": 4,
                "blocks": [
                    {"gpu": 0, "rows": [0, 1], "cols": [0, 4]},
                    {"gpu": 1, "rows": [1, 2], "cols": [0, 4]},
                ]
            })
        );
        for (name, shape) in [
            ("partial_0.npy", vec![2, 4]),
            ("partial_1.npy", vec![2, 4]),
            ("reduced_0.npy", vec![1, 4]),
            ("reduced_1.npy", vec![1, 4]),
        ] {
            let bytes = std::fs::read(dir.path().join(name)).unwrap();
            let f = npyz::NpyFile::new(&bytes[..]).unwrap();
            assert_eq!(f.dtype().descr(), "'<f2'", "{name}");
            assert_eq!(f.shape(), &shape[..], "{name}");
        }
        let bytes = std::fs::read(dir.path().join("reduced_1.npy")).unwrap();
        let back: Vec<half::f16> = npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap();
        let back: Vec<f32> = back.iter().map(|h| h.to_f32()).collect();
        assert_eq!(back, out.reduced[1]);
        // A reduced block that does not match its description is refused.
        let mut bad = out.clone();
        bad.reduced[0].pop();
        assert!(write_check_dir(dir.path(), &run, GemmDataType::F32, &bad).is_err());
    }
}
