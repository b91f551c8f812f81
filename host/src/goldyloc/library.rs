//! The MI100 model against AMD's own tuning of the MI100 (rocBLAS' Tensile logic files,
//! `../shared/data/mi100-rocblas/`): on every GEMM of the project's list that the library
//! tuned at that exact size, nmcp's isolated winner and its efficiency next to the
//! library's winner and its stored efficiency.
//!
//! Three comparisons, all on the same rows (`matched.csv`):
//! - **efficiency**: the model's tuned winner's isolated time as a percentage of the
//!   preset's matrix peak for the data type (FLOP/cycle/CU x CUs x clock), the way the
//!   library's value is defined (a percentage of the theoretical peak at the engine clock:
//!   the data README, "The `efficiency` value"); rows whose stored value is 0 have none;
//! - **agreement** of the tuner with the library on the macro tile MT0 x MT1, DepthU and
//!   GlobalSplitU, component by component and jointly;
//! - **distinct winners** at the model's granularity (its kernel's whole parameter tuple,
//!   and the tile tuple alone), the library's counted on the same GEMMs from its
//!   solutions' parameters (`winners.json`).

use super::Context;
use nmcp_emulator::gpu::catalog::CatalogKernel;
use nmcp_emulator::gpu::gemm::GemmShape;
use nmcp_emulator::gpu::search::best_isolated;
use nmcp_isa::gemm_ext::GemmDataType;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Bad input: which file, where and what.
#[derive(Debug)]
pub struct LibraryError(pub String);

impl std::fmt::Display for LibraryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LibraryError {}

/// One row of `matched.csv`: a GEMM of the list that a logic file tuned at that size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MatchedRow {
    /// `M_N_K_TT_f32` / `..._f16`.
    pub gemm: String,
    /// The logic file's type: `f32`, `f16-f32acc`, `f16-f32out`, `f16`.
    pub dtype: String,
    /// `NN`, `NT`, `TN`.
    pub layout: String,
    /// Rows of C.
    #[serde(rename = "M")]
    pub m: u32,
    /// Columns of C.
    #[serde(rename = "N")]
    pub n: u32,
    /// Depth.
    #[serde(rename = "K")]
    pub k: u32,
    /// `rocm-4.1.0` or `HEAD`.
    pub tag: String,
    /// Logic file name without `.yaml`.
    pub file: String,
    /// The winner's `SolutionIndex`.
    pub solution: u32,
    /// The winner's macro tile rows.
    #[serde(rename = "MacroTile0")]
    pub mt0: u32,
    /// The winner's macro tile columns.
    #[serde(rename = "MacroTile1")]
    pub mt1: u32,
    /// The winner's DepthU.
    #[serde(rename = "DepthU")]
    pub depth_u: u32,
    /// The winner's GlobalSplitU.
    #[serde(rename = "GlobalSplitU")]
    pub split_u: u32,
    /// The winner's workgroup threads.
    pub threads: u32,
    /// Stored efficiency, % of peak (0: none stored).
    pub efficiency: f64,
}

impl MatchedRow {
    /// FP32 or FP16 (every FP16 logic type accumulates in f32, as the model's f16 kernels do).
    pub fn family(&self) -> &'static str {
        if self.dtype == "f32" {
            "FP32"
        } else {
            "FP16"
        }
    }

    /// The GEMM the model tunes for this row.
    pub fn shape(&self) -> Result<GemmShape, LibraryError> {
        let (ta, tb) = match self.layout.as_str() {
            "NN" => (false, false),
            "NT" => (false, true),
            "TN" => (true, false),
            "TT" => (true, true),
            other => {
                return Err(LibraryError(format!(
                    "{}: layout `{other}` is not NN, NT, TN or TT",
                    self.gemm
                )))
            }
        };
        let dtype = if self.dtype == "f32" {
            GemmDataType::F32
        } else {
            GemmDataType::F16
        };
        if self.m == 0 || self.n == 0 || self.k == 0 {
            return Err(LibraryError(format!("{}: a zero dimension", self.gemm)));
        }
        Ok(GemmShape::new(self.m, self.n, self.k, ta, tb, dtype))
    }

    /// The library's (MT0, MT1, DepthU, GlobalSplitU).
    pub fn tile(&self) -> Tile {
        (self.mt0, self.mt1, self.depth_u, self.split_u)
    }
}

/// (MT0, MT1, DepthU, GlobalSplitU): the granularity the agreement is judged at.
pub type Tile = (u32, u32, u32, u32);

/// A kernel at the model's granularity: (MT0, MT1, U, threads, split-U, prefetch, LDS
/// padding, StaggerU mapping), the parameters a catalog kernel has.
pub type KernelKey = (u32, u32, u32, u32, u32, bool, bool, u32);

/// The model's key of a catalog kernel.
pub fn model_key(k: &CatalogKernel) -> KernelKey {
    (
        u32::from(k.mt0),
        u32::from(k.mt1),
        u32::from(k.depth_u),
        u32::from(k.threads),
        u32::from(k.split_u),
        k.prefetch,
        k.lds_pad,
        u32::from(k.stagger_mapping),
    )
}

/// Reads `matched.csv`.
///
/// # Errors
/// The file cannot be read, or a row does not parse (with its line).
pub fn read_matched(path: &Path) -> Result<Vec<MatchedRow>, LibraryError> {
    let mut r = csv::Reader::from_path(path)
        .map_err(|e| LibraryError(format!("{}: {e}", path.display())))?;
    let mut rows = Vec::new();
    for (i, rec) in r.deserialize::<MatchedRow>().enumerate() {
        let row =
            rec.map_err(|e| LibraryError(format!("{}: row {}: {e}", path.display(), i + 2)))?;
        if !row.efficiency.is_finite() || row.efficiency < 0.0 {
            return Err(LibraryError(format!(
                "{}: row {}: efficiency {} is not a percentage",
                path.display(),
                i + 2,
                row.efficiency
            )));
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(LibraryError(format!("{}: no rows", path.display())));
    }
    Ok(rows)
}

/// The library's solutions at the model's granularity, keyed by (tag, file, SolutionIndex).
pub type Solutions = HashMap<(String, String, u32), KernelKey>;

fn column(cols: &[Value], name: &str, path: &Path) -> Result<usize, LibraryError> {
    cols.iter()
        .position(|c| c.as_str() == Some(name))
        .ok_or_else(|| {
            LibraryError(format!(
                "{}: solution_columns has no `{name}`",
                path.display()
            ))
        })
}

/// A Tensile flag stored as a boolean (older files) or a count (newer ones): on if true or
/// above 0.
fn flag(v: &Value) -> bool {
    v.as_bool()
        .unwrap_or_else(|| v.as_f64().is_some_and(|x| x > 0.0))
}

/// Reads the solutions table of every logic file in `winners.json`.
///
/// # Errors
/// The file cannot be read or parsed, or lacks a column or key (named in the message).
pub fn read_solutions(path: &Path) -> Result<Solutions, LibraryError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| LibraryError(format!("{}: {e}", path.display())))?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| LibraryError(format!("{}: {e}", path.display())))?;
    let cols = doc
        .get("solution_columns")
        .and_then(Value::as_array)
        .ok_or_else(|| LibraryError(format!("{}: no `solution_columns`", path.display())))?;
    let idx = |n| column(cols, n, path);
    let c = [
        idx("SolutionIndex")?,
        idx("MacroTile0")?,
        idx("MacroTile1")?,
        idx("DepthU")?,
        idx("threads")?,
        idx("GlobalSplitU")?,
        idx("PrefetchGlobalRead")?,
        idx("LdsPadA")?,
        idx("LdsPadB")?,
        idx("StaggerUMapping")?,
    ];
    let files = doc
        .get("files")
        .and_then(Value::as_array)
        .ok_or_else(|| LibraryError(format!("{}: no `files`", path.display())))?;
    let mut out = Solutions::new();
    for f in files {
        let s = |k: &str| f.get(k).and_then(Value::as_str).map(str::to_string);
        let (Some(tag), Some(file)) = (s("ref"), s("file")) else {
            return Err(LibraryError(format!(
                "{}: a file entry without `ref` or `file`",
                path.display()
            )));
        };
        let Some(sols) = f.get("solutions").and_then(Value::as_array) else {
            continue; // a missing file (`"missing": true`) has no solutions
        };
        for (i, sol) in sols.iter().enumerate() {
            let get = |j: usize| sol.get(j).unwrap_or(&Value::Null);
            let num = |j: usize| -> Result<u32, LibraryError> {
                get(j)
                    .as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| {
                        LibraryError(format!(
                            "{}: {tag}/{file} solution {i}: column {j} is not a count",
                            path.display()
                        ))
                    })
            };
            let stagger = get(c[9]).as_u64().and_then(|x| u32::try_from(x).ok());
            let key = (
                num(c[1])?,
                num(c[2])?,
                num(c[3])?,
                num(c[4])?,
                num(c[5])?,
                flag(get(c[6])),
                flag(get(c[7])) || flag(get(c[8])),
                stagger.unwrap_or(0),
            );
            out.insert((tag.clone(), file.clone(), num(c[0])?), key);
        }
    }
    Ok(out)
}

/// The model's isolated winner for one GEMM.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelWinner {
    /// The catalog kernel.
    pub kernel: CatalogKernel,
    /// Its isolated time without the launch start-up, ns.
    pub kernel_ns: f64,
    /// 100 x FLOPs / kernel_ns / the preset's peak for the data type.
    pub efficiency: f64,
}

/// One compared row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RowResult {
    /// The library's row.
    pub row: MatchedRow,
    /// The model's winner.
    pub model: ModelWinner,
}

/// Shares of rows where the model's winner has the library's value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    /// Rows compared.
    pub rows: usize,
    /// MT0 x MT1 equal.
    pub tile: f64,
    /// DepthU equal.
    pub depth_u: f64,
    /// GlobalSplitU equal.
    pub split_u: f64,
    /// All three equal.
    pub joint: f64,
}

/// The efficiency comparison of a set of rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EfficiencyError {
    /// Rows with a stored (non-zero) efficiency.
    pub rows: usize,
    /// Median of |model - library| / library.
    pub median_abs_rel_error: f64,
    /// Median of model - library, percentage points (signed: > 0 the model is faster).
    pub median_diff_points: f64,
    /// Median of the library's efficiencies, %.
    pub library_median: f64,
    /// Median of the model's efficiencies on the same rows, %.
    pub model_median: f64,
}

/// Distinct winners on one logic type's matched GEMMs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Distinct {
    /// GEMMs (distinct shapes).
    pub gemms: usize,
    /// The model's distinct kernels (its whole parameter tuple).
    pub model_kernels: usize,
    /// The library's distinct winners at the same granularity.
    pub library_kernels: usize,
    /// The model's distinct (MT0, MT1, DepthU, GlobalSplitU).
    pub model_tiles: usize,
    /// The library's distinct (MT0, MT1, DepthU, GlobalSplitU).
    pub library_tiles: usize,
    /// The library's distinct solutions (file, SolutionIndex).
    pub library_solutions: usize,
}

/// One group of rows: a ref and a data-type family (agreement, efficiency) or logic type
/// (distinct winners).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Group {
    /// `rocm-4.1.0` or `HEAD`.
    pub tag: String,
    /// `FP32` / `FP16`, or a logic type (`f16-f32acc`, ...).
    pub dtype: String,
    /// Tuner agreement.
    pub agreement: Agreement,
    /// Efficiency error (None: no row has a stored efficiency).
    pub efficiency: Option<EfficiencyError>,
    /// Distinct winners (logic-type groups only).
    pub distinct: Option<Distinct>,
}

/// The whole comparison.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LibraryReport {
    /// GPU preset name.
    pub gpu: String,
    /// Catalog kernels searched.
    pub catalog_kernels: usize,
    /// The clock the peak is taken at, GHz.
    pub clock_ghz: f64,
    /// Agreement and efficiency per ref and FP32 / FP16.
    pub by_family: Vec<Group>,
    /// Agreement, efficiency and distinct winners per ref and logic type.
    pub by_type: Vec<Group>,
    /// Every row.
    pub rows: Vec<RowResult>,
}

fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// The tuner's agreement on `rows`.
pub fn agreement(rows: &[&RowResult]) -> Agreement {
    let n = rows.len();
    let share = |f: &dyn Fn(&RowResult) -> bool| {
        if n == 0 {
            0.0
        } else {
            rows.iter().filter(|r| f(r)).count() as f64 / n as f64
        }
    };
    let tile = |r: &RowResult| {
        u32::from(r.model.kernel.mt0) == r.row.mt0 && u32::from(r.model.kernel.mt1) == r.row.mt1
    };
    let depth = |r: &RowResult| u32::from(r.model.kernel.depth_u) == r.row.depth_u;
    let split = |r: &RowResult| u32::from(r.model.kernel.split_u) == r.row.split_u;
    Agreement {
        rows: n,
        tile: share(&tile),
        depth_u: share(&depth),
        split_u: share(&split),
        joint: share(&|r| tile(r) && depth(r) && split(r)),
    }
}

/// The efficiency error on the rows of `rows` that have a stored efficiency.
pub fn efficiency_error(rows: &[&RowResult]) -> Option<EfficiencyError> {
    let with: Vec<&&RowResult> = rows.iter().filter(|r| r.row.efficiency > 0.0).collect();
    if with.is_empty() {
        return None;
    }
    let rel = with
        .iter()
        .map(|r| ((r.model.efficiency - r.row.efficiency) / r.row.efficiency).abs())
        .collect();
    let diff = with
        .iter()
        .map(|r| r.model.efficiency - r.row.efficiency)
        .collect();
    Some(EfficiencyError {
        rows: with.len(),
        median_abs_rel_error: median(rel),
        median_diff_points: median(diff),
        library_median: median(with.iter().map(|r| r.row.efficiency).collect()),
        model_median: median(with.iter().map(|r| r.model.efficiency).collect()),
    })
}

/// Distinct winners over `rows` (one logic type of one ref).
///
/// # Errors
/// A row's solution is not in the solutions table.
pub fn distinct(rows: &[&RowResult], solutions: &Solutions) -> Result<Distinct, LibraryError> {
    let mut gemms = BTreeSet::new();
    let (mut mk, mut lk, mut mt, mut lt, mut ls) = (
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
    );
    for r in rows {
        gemms.insert((r.row.m, r.row.n, r.row.k, r.row.layout.clone()));
        let k = &r.model.kernel;
        mk.insert(model_key(k));
        mt.insert((
            u32::from(k.mt0),
            u32::from(k.mt1),
            u32::from(k.depth_u),
            u32::from(k.split_u),
        ));
        lt.insert(r.row.tile());
        let key = (r.row.tag.clone(), r.row.file.clone(), r.row.solution);
        ls.insert(key.clone());
        let sol = solutions.get(&key).ok_or_else(|| {
            LibraryError(format!(
                "{}: solution {} of {}/{} is not in winners.json",
                r.row.gemm, r.row.solution, r.row.tag, r.row.file
            ))
        })?;
        lk.insert(*sol);
    }
    Ok(Distinct {
        gemms: gemms.len(),
        model_kernels: mk.len(),
        library_kernels: lk.len(),
        model_tiles: mt.len(),
        library_tiles: lt.len(),
        library_solutions: ls.len(),
    })
}

/// Tunes every distinct GEMM of `rows` alone on the context's GPU and catalog.
///
/// # Errors
/// A row is malformed, or no catalog kernel can run one of its GEMMs.
pub fn tune_rows(ctx: &Context, rows: &[MatchedRow]) -> Result<Vec<RowResult>, LibraryError> {
    let mut shapes: Vec<GemmShape> = Vec::new();
    for row in rows {
        let s = row.shape()?;
        if !shapes.contains(&s) {
            shapes.push(s);
        }
    }
    let winners: Vec<Option<(u32, f64)>> = shapes
        .par_iter()
        .map(|s| best_isolated(&ctx.gpu, &ctx.cal, &ctx.catalog, s))
        .collect();
    let by_shape: HashMap<GemmShape, Option<(u32, f64)>> =
        shapes.into_iter().zip(winners).collect();
    rows.iter()
        .map(|row| {
            let shape = row.shape()?;
            let (i, t) = by_shape.get(&shape).copied().flatten().ok_or_else(|| {
                LibraryError(format!("{}: no catalog kernel can run it", row.gemm))
            })?;
            let kernel = *ctx.catalog.get(i as usize).ok_or_else(|| {
                LibraryError(format!("{}: winner {i} not in the catalog", row.gemm))
            })?;
            // Tensile's client times the kernel itself between events recorded around it,
            // so the launch start-up the model charges before the first workgroup is not in
            // the library's number.
            let kernel_ns = (t - ctx.gpu.kernel_start_ns).max(f64::MIN_POSITIVE);
            let flops = 2.0 * f64::from(row.m) * f64::from(row.n) * f64::from(row.k);
            let efficiency = 100.0 * flops / kernel_ns / ctx.gpu.peak_flops_per_ns(shape.dtype);
            Ok(RowResult {
                row: row.clone(),
                model: ModelWinner {
                    kernel,
                    kernel_ns,
                    efficiency,
                },
            })
        })
        .collect()
}

/// Groups `rows` by (tag, key) in a stable order (tags and keys sorted).
fn grouped(
    rows: &[RowResult],
    key: impl Fn(&RowResult) -> String,
) -> BTreeMap<(String, String), Vec<&RowResult>> {
    let mut g: BTreeMap<(String, String), Vec<&RowResult>> = BTreeMap::new();
    for r in rows {
        g.entry((r.row.tag.clone(), key(r))).or_default().push(r);
    }
    g
}

/// The comparison of tuned `results` against the library.
///
/// # Errors
/// A row's solution is missing from `solutions`.
pub fn report(
    ctx: &Context,
    results: Vec<RowResult>,
    solutions: &Solutions,
) -> Result<LibraryReport, LibraryError> {
    let by_family = grouped(&results, |r| r.row.family().to_string())
        .into_iter()
        .map(|((tag, dtype), rs)| Group {
            tag,
            dtype,
            agreement: agreement(&rs),
            efficiency: efficiency_error(&rs),
            distinct: None,
        })
        .collect();
    let by_type = grouped(&results, |r| r.row.dtype.clone())
        .into_iter()
        .map(|((tag, dtype), rs)| {
            Ok(Group {
                agreement: agreement(&rs),
                efficiency: efficiency_error(&rs),
                distinct: Some(distinct(&rs, solutions)?),
                tag,
                dtype,
            })
        })
        .collect::<Result<_, LibraryError>>()?;
    Ok(LibraryReport {
        gpu: ctx.gpu.name.clone(),
        catalog_kernels: ctx.catalog.len(),
        clock_ghz: ctx.gpu.clock_ghz,
        by_family,
        by_type,
        rows: results,
    })
}

/// Reads `dir/matched.csv` and `dir/winners.json`, tunes and compares.
///
/// # Errors
/// Bad input (named in the message) or an untunable GEMM.
pub fn run(ctx: &Context, dir: &Path) -> Result<LibraryReport, LibraryError> {
    let rows = read_matched(&dir.join("matched.csv"))?;
    let solutions = read_solutions(&dir.join("winners.json"))?;
    let results = tune_rows(ctx, &rows)?;
    report(ctx, results, &solutions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_emulator::gpu::catalog::Catalog;

    fn row(gemm: &str, tile: Tile, eff: f64, solution: u32) -> MatchedRow {
        MatchedRow {
            gemm: gemm.into(),
            dtype: "f32".into(),
            layout: "NT".into(),
            m: 512,
            n: 512,
            k: 512,
            tag: "HEAD".into(),
            file: "f".into(),
            solution,
            mt0: tile.0,
            mt1: tile.1,
            depth_u: tile.2,
            split_u: tile.3,
            threads: 256,
            efficiency: eff,
        }
    }

    fn result(row: MatchedRow, kernel: CatalogKernel, eff: f64) -> RowResult {
        RowResult {
            row,
            model: ModelWinner {
                kernel,
                kernel_ns: 1.0,
                efficiency: eff,
            },
        }
    }

    fn kernel(mt0: u16, mt1: u16, u: u16, split: u8) -> CatalogKernel {
        let c = Catalog::standard();
        *c.kernels()
            .iter()
            .find(|k| k.mt0 == mt0 && k.mt1 == mt1 && k.depth_u == u && k.split_u == split)
            .expect("the standard catalog has this tile")
    }

    #[test]
    fn agreement_counts_each_component_and_the_joint_match() {
        let rs = [
            // all three agree
            result(
                row("a", (64, 64, 16, 1), 40.0, 0),
                kernel(64, 64, 16, 1),
                44.0,
            ),
            // tile only
            result(
                row("b", (64, 64, 64, 1), 50.0, 1),
                kernel(64, 64, 32, 2),
                25.0,
            ),
            // DepthU and GSU only
            result(
                row("c", (128, 160, 32, 1), 0.0, 2),
                kernel(128, 128, 32, 1),
                60.0,
            ),
            // nothing
            result(
                row("d", (256, 144, 64, 3), 80.0, 3),
                kernel(128, 64, 16, 1),
                60.0,
            ),
        ];
        let refs: Vec<&RowResult> = rs.iter().collect();
        let a = agreement(&refs);
        assert_eq!(a.rows, 4);
        assert_eq!(
            (a.tile, a.depth_u, a.split_u, a.joint),
            (0.5, 0.5, 0.5, 0.25)
        );
        // Efficiency only where the library stored one (3 rows): relative errors 0.1,
        // 0.5, 0.25; differences +4, -25, -20 points.
        let e = efficiency_error(&refs).expect("rows with an efficiency");
        assert_eq!(e.rows, 3);
        assert!((e.median_abs_rel_error - 0.25).abs() < 1e-12);
        assert!((e.median_diff_points + 20.0).abs() < 1e-12);
        assert!((e.library_median - 50.0).abs() < 1e-12);
    }

    #[test]
    fn distinct_winners_count_both_sides_at_the_same_granularity() {
        let rs = [
            result(
                row("a", (64, 64, 16, 1), 1.0, 0),
                kernel(64, 64, 16, 1),
                1.0,
            ),
            result(
                row("b", (64, 64, 16, 1), 1.0, 1),
                kernel(64, 64, 16, 1),
                1.0,
            ),
            result(
                row("c", (128, 128, 32, 1), 1.0, 2),
                kernel(128, 128, 32, 1),
                1.0,
            ),
        ];
        // Solutions 0 and 1 differ only in prefetch: two library kernels at the model's
        // granularity, one tile.
        let mut sol = Solutions::new();
        let key = |s| ("HEAD".to_string(), "f".to_string(), s);
        sol.insert(key(0), (64, 64, 16, 256, 1, false, false, 0));
        sol.insert(key(1), (64, 64, 16, 256, 1, true, false, 0));
        sol.insert(key(2), (128, 128, 32, 256, 1, true, false, 0));
        let rows: Vec<&RowResult> = rs.iter().collect();
        // Three GEMM names but one shape: one GEMM.
        let d = distinct(&rows, &sol).expect("every solution is known");
        assert_eq!(d.gemms, 1);
        assert_eq!((d.model_kernels, d.library_kernels), (2, 3));
        assert_eq!(
            (d.model_tiles, d.library_tiles, d.library_solutions),
            (2, 2, 3)
        );
        sol.remove(&key(2));
        let e = distinct(&rows, &sol).expect_err("solution 2 is unknown");
        assert!(e.0.contains("solution 2"), "{e}");
    }

    #[test]
    fn a_bad_layout_is_an_error_naming_the_gemm() {
        let mut r = row("x_y", (64, 64, 16, 1), 1.0, 0);
        r.layout = "XX".into();
        let e = r.shape().expect_err("XX is no layout");
        assert!(e.0.contains("x_y") && e.0.contains("XX"), "{e}");
    }
}
