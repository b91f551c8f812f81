//! `nmcp goldyloc library`: the MI100 model's isolated tuning against rocBLAS' own tuning
//! of the MI100 (`crate::goldyloc::library`): efficiency scatter, tuner agreement and
//! distinct winners, as tables, JSON or an SVG scatter.

use super::CmdResult;
use crate::goldyloc::library::{self, Group, LibraryReport};
use crate::goldyloc::Context;
use nmcp_emulator::gpu::catalog::{Catalog, CatalogSpace};
use nmcp_emulator::gpu::config::GpuConfig;
use std::path::PathBuf;

/// Arguments of `nmcp goldyloc library`.
#[derive(clap::Args, Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LibraryArgs {
    /// The rocBLAS MI100 data directory (`matched.csv` and `winners.json`), e.g.
    /// ../shared/data/mi100-rocblas/.
    #[arg(long)]
    data: PathBuf,
    /// GPU preset the model tunes on (the library's GPU is the MI100).
    #[arg(long, default_value = "mi100")]
    gpu: String,
    /// Kernel catalog: `standard` (the one GOLDYLOC tunes with) or `library` (standard
    /// plus DepthU 64 and the macro tiles the library's winners use).
    #[arg(long, default_value = "standard")]
    catalog: String,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the efficiency scatter (`mi100-library.svg`) into this directory.
    #[arg(long)]
    svg: Option<PathBuf>,
}

/// The catalog a `--catalog` name stands for.
fn catalog(name: &str) -> Result<Catalog, String> {
    match name {
        "standard" => Ok(Catalog::standard()),
        "library" => Ok(Catalog::generate(&CatalogSpace::LIBRARY)),
        other => Err(format!(
            "--catalog `{other}`: expected `standard` or `library`"
        )),
    }
}

/// Runs `nmcp goldyloc library`.
pub fn run(a: &LibraryArgs) -> CmdResult {
    let gpu = GpuConfig::preset(&a.gpu)?;
    let mut ctx = Context::new(gpu, None, false);
    ctx.catalog = catalog(&a.catalog)?;
    let started = std::time::Instant::now();
    let report = library::run(&ctx, &a.data)?;
    let secs = started.elapsed().as_secs_f64();
    let doc = serde_json::to_value(&report)?;
    if let Some(dir) = &a.svg {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let svg = crate::reproduce::validation::library_scatter(&doc).map_err(|e| e.0)?;
        super::io::write_file(&dir.join("mi100-library.svg"), svg.as_bytes())?;
    }
    if a.json {
        stdoutln!("{}", serde_json::to_string(&doc)?);
        return Ok(());
    }
    print_report(&report, secs);
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:.0} %", 100.0 * x)
}

fn print_group(g: &Group) {
    let a = &g.agreement;
    let eff = g.efficiency.map_or_else(
        || "      -                      ".to_string(),
        |e| {
            format!(
                "{:>4} {:>6.1} {:>6.1} {:>7.0} % {:>+7.1}",
                e.rows,
                e.library_median,
                e.model_median,
                100.0 * e.median_abs_rel_error,
                e.median_diff_points
            )
        },
    );
    stdoutln!(
        "{:<11} {:<11} {:>4} {:>6} {:>6} {:>6} {:>6} | {eff}",
        g.tag,
        g.dtype,
        a.rows,
        pct(a.tile),
        pct(a.depth_u),
        pct(a.split_u),
        pct(a.joint)
    );
}

fn print_report(r: &LibraryReport, secs: f64) {
    stdoutln!(
        "GPU {} ({:.3} GHz), {} catalog kernels, {} matched rows; tuned in {secs:.1} s",
        r.gpu,
        r.clock_ghz,
        r.catalog_kernels,
        r.rows.len()
    );
    stdoutln!(
        "\nTuner agreement with the library (share of rows) | efficiency (% of the preset's peak)"
    );
    let head = format!(
        "{:<11} {:<11} {:>4} {:>6} {:>6} {:>6} {:>6} | {:>4} {:>6} {:>6} {:>9} {:>7}",
        "ref",
        "type",
        "rows",
        "tile",
        "DepthU",
        "GSU",
        "joint",
        "rows",
        "lib",
        "model",
        "med|err|",
        "med d"
    );
    stdoutln!("{head}");
    for g in &r.by_family {
        print_group(g);
    }
    stdoutln!("{head}");
    for g in &r.by_type {
        print_group(g);
    }
    stdoutln!("\nDistinct winners on the matched GEMMs of each logic type");
    stdoutln!(
        "{:<11} {:<11} {:>5} | {:>13} {:>15} | {:>11} {:>13} | {:>14}",
        "ref",
        "type",
        "GEMMs",
        "model kernels",
        "library kernels",
        "model tiles",
        "library tiles",
        "lib. solutions"
    );
    for g in &r.by_type {
        if let Some(d) = g.distinct {
            stdoutln!(
                "{:<11} {:<11} {:>5} | {:>13} {:>15} | {:>11} {:>13} | {:>14}",
                g.tag,
                g.dtype,
                d.gemms,
                d.model_kernels,
                d.library_kernels,
                d.model_tiles,
                d.library_tiles,
                d.library_solutions
            );
        }
    }
    stdoutln!(
        "\nkernels: (MT0, MT1, U, threads, GSU, prefetch, LDS pad, StaggerU mapping); tiles: \
         (MT0, MT1, DepthU, GSU). Efficiency rows: those with a stored value (> 0)."
    );
}
