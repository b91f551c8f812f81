//! `nmcp bench`: the speed and memory figures of `docs/PERFORMANCE.md`, measured the way a
//! user runs the tool. Each case is the subcommand itself in a child process (so its peak
//! RSS is its own), which reports its CPU time and peak RSS on exit when
//! `NMCP_REPORT_USAGE=1` is set ([`report_usage_if_asked`]); the GEMM model's throughput is
//! timed in this process; the CP decision's instruction count is the board record committed
//! with this build (`firmware/board/expected/virt.txt`, checked by `nmcp board run` in CI).
//!
//! Figures are wall and CPU seconds on whatever machine runs it: on a shared machine read
//! the CPU seconds. `cargo bench` (criterion, `emulator/benches/`) measures the same
//! engines without the CLI around them.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::Serialize;

use super::io::emit;
use super::CmdResult;

/// Arguments of `nmcp bench`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct BenchArgs {
    /// Shorter T3 case (one sub-layer instead of the Table 8.2 default set).
    #[arg(long)]
    quick: bool,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
}

/// The environment variable that makes a run print its usage on exit.
pub const USAGE_ENV: &str = "NMCP_REPORT_USAGE";

/// The line prefix of that report on stderr.
const USAGE_PREFIX: &str = "nmcp-usage:";

/// Peak resident set (KiB) and CPU seconds of this process, from `/proc/self` (Linux).
fn own_usage() -> Option<(u64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some((hwm, ticks / 100.0))
}

/// With `NMCP_REPORT_USAGE=1`, prints `nmcp-usage: peak_rss_kib=N cpu_seconds=S` on
/// stderr (called by the CLI on exit).
pub fn report_usage_if_asked() {
    if std::env::var(USAGE_ENV).is_ok_and(|v| v == "1") {
        if let Some((kib, cpu)) = own_usage() {
            eprintln!("{USAGE_PREFIX} peak_rss_kib={kib} cpu_seconds={cpu:.2}");
        }
    }
}

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What was run.
    pub case: String,
    /// The command line (or where the figure comes from).
    pub command: String,
    /// The throughput or count and its unit.
    pub value: f64,
    /// Unit of `value`.
    pub unit: &'static str,
    /// Wall seconds of the case.
    pub wall_seconds: f64,
    /// CPU seconds of the case (`None` when not measured).
    pub cpu_seconds: Option<f64>,
    /// Peak RSS of the case's process in MiB (`None` when not measured).
    pub peak_rss_mib: Option<f64>,
}

/// Runs `nmcp args` as a child with usage reporting; returns its JSON, wall seconds, and
/// its CPU seconds and peak RSS.
/// A child's JSON, its wall seconds, and its peak RSS (KiB) and CPU seconds if reported.
type ChildRun = (serde_json::Value, f64, Option<(u64, f64)>);

fn child(args: &[&str]) -> Result<ChildRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find nmcp: {e}"))?;
    let line = format!("nmcp {}", args.join(" "));
    let started = Instant::now();
    let o = Command::new(exe)
        .args(args)
        .env(USAGE_ENV, "1")
        .output()
        .map_err(|e| format!("{line}: {e}"))?;
    let wall = started.elapsed().as_secs_f64();
    let err = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(format!("{line}: failed ({}): {err}", o.status));
    }
    let usage = err.lines().find_map(|l| {
        let rest = l.strip_prefix(USAGE_PREFIX)?;
        let mut kib = None;
        let mut cpu = None;
        for kv in rest.split_whitespace() {
            match kv.split_once('=') {
                Some(("peak_rss_kib", v)) => kib = v.parse().ok(),
                Some(("cpu_seconds", v)) => cpu = v.parse().ok(),
                _ => {}
            }
        }
        Some((kib?, cpu?))
    });
    let json = serde_json::from_slice(&o.stdout)
        .map_err(|e| format!("{line}: output is not JSON: {e}"))?;
    Ok((json, wall, usage))
}

fn field(v: &serde_json::Value, key: &str, line: &str) -> Result<f64, String> {
    v.get(key)
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| format!("{line}: no number `{key}` in its JSON"))
}

fn measured(
    case: &str,
    args: &[&str],
    unit: &'static str,
    value: impl Fn(&serde_json::Value) -> Result<f64, String>,
) -> Result<Figure, String> {
    let (json, wall, usage) = child(args)?;
    Ok(Figure {
        case: case.into(),
        command: format!("nmcp {}", args.join(" ")),
        value: value(&json)?,
        unit,
        wall_seconds: wall,
        cpu_seconds: usage.map(|u| u.1),
        peak_rss_mib: usage.map(|u| u.0 as f64 / 1024.0),
    })
}

/// Workgroups per second of the GEMM model: 16 concurrent 4096 x 4096 x 1024 FP16 GEMMs
/// on MI100 with one 64 x 64 kernel, repeated for at least a second.
fn gemm_workgroups_per_second() -> Result<Figure, String> {
    use nmcp_emulator::gpu::catalog::Catalog;
    use nmcp_emulator::gpu::config::GpuConfig;
    use nmcp_emulator::gpu::gemm::{Calibration, GemmShape};
    use nmcp_emulator::gpu::sim::makespan;
    use nmcp_isa::gemm_ext::GemmDataType;
    let gpu = GpuConfig::mi100();
    let cal = Calibration::default();
    let cat = Catalog::standard();
    let kernel = cat
        .kernels()
        .iter()
        .find(|k| (k.mt0, k.mt1, k.split_u) == (64, 64, 1))
        .or_else(|| cat.kernels().first())
        .copied()
        .ok_or("the kernel catalog is empty")?;
    let shape = GemmShape::new(4096, 4096, 1024, false, true, GemmDataType::F16);
    let runs = vec![(shape, kernel); 16];
    let started = Instant::now();
    let mut wgs = 0u64;
    while started.elapsed().as_secs_f64() < 1.0 {
        let r = makespan(&gpu, &cal, &runs).ok_or("the GEMM model refused the benchmark case")?;
        wgs += r.1;
    }
    let wall = started.elapsed().as_secs_f64();
    Ok(Figure {
        case: "GEMM model, 16 concurrent GEMMs".into(),
        command: "in process: gpu::sim::makespan, 16 x (4096 x 4096 x 1024 FP16), MT 64x64".into(),
        value: wgs as f64 / wall,
        unit: "workgroups/s",
        wall_seconds: wall,
        cpu_seconds: None,
        peak_rss_mib: None,
    })
}

/// The board record this build was made with.
const BOARD_RECORD: &str = crate::board::VIRT_RECORD;

/// Retired rv32imac instructions of the committed board line `name`.
fn board_instructions(name: &str) -> Result<Figure, String> {
    let n = crate::board::record_value(BOARD_RECORD, name, "instructions")?;
    Ok(Figure {
        case: format!("CP firmware, {name}"),
        command: format!(
            "{} (QEMU virt -icount shift=0; re-measure: nmcp board run)",
            Path::new("firmware/board/expected/virt.txt").display()
        ),
        value: n,
        unit: "instructions",
        wall_seconds: 0.0,
        cpu_seconds: None,
        peak_rss_mib: None,
    })
}

/// Runs `nmcp bench`.
pub fn run(a: BenchArgs) -> CmdResult {
    let t3_args: &[&str] = if a.quick {
        &[
            "t3",
            "--shortcut",
            "--json",
            "--models",
            "mega-gpt-2",
            "--tp",
            "8",
            "--sublayers",
            "OP",
        ]
    } else {
        &["t3", "--shortcut", "--json"]
    };
    let rps = |v: &serde_json::Value| field(v, "requests_per_second", "nmcp mem");
    let cases: Vec<Box<dyn Fn() -> Result<Figure, String>>> = vec![
        Box::new(move || {
            measured(
                "DRAM, 1 M x 64 B stream",
                &["mem", "--json"],
                "requests/s",
                rps,
            )
        }),
        Box::new(move || {
            measured(
                "DRAM, 1 M x 64 B random",
                &["mem", "--pattern", "random", "--json"],
                "requests/s",
                rps,
            )
        }),
        Box::new(|| {
            measured(
                "NMC, BERT-Large LAMB step (column-triggered)",
                &["lamb", "--alu-models", "column-triggered", "--json"],
                "DRAM commands/s",
                |v| field(v, "dram_commands_per_second", "nmcp lamb"),
            )
        }),
        Box::new(|| {
            measured(
                "NMC, BERT-Large LAMB step wall time",
                &["lamb", "--alu-models", "column-triggered", "--json"],
                "s",
                |v| field(v, "wall_seconds", "nmcp lamb"),
            )
        }),
        Box::new(gemm_workgroups_per_second),
        Box::new(move || {
            measured(
                if a.quick {
                    "T3, one Table 8.2 sub-layer (shortcut)"
                } else {
                    "T3, Table 8.2 default set (shortcut)"
                },
                t3_args,
                "sub-layers",
                |v| {
                    let rows = v.as_array().map_or(0, Vec::len);
                    Ok((rows / 5) as f64)
                },
            )
        }),
        Box::new(|| board_instructions("cp_decision_32q")),
        Box::new(|| board_instructions("lamb_per_tensor")),
    ];
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    if a.json || !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut figs = Vec::new();
    for c in &cases {
        figs.push(c()?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    if a.json {
        return emit(&(serde_json::to_string_pretty(&figs)? + "\n"));
    }
    let mut s = String::from(
        "case                                            value                 wall s   cpu s  peak RSS\n",
    );
    for f in &figs {
        let v = if f.value.fract() == 0.0 && f.value < 1e7 {
            format!("{:.0}", f.value)
        } else if f.value >= 1e4 {
            format!("{:.3e}", f.value)
        } else {
            format!("{:.3}", f.value)
        };
        s.push_str(&format!(
            "{:<47} {:>9} {:<13} {:>7.2} {:>7} {:>9}\n",
            f.case,
            v,
            f.unit,
            f.wall_seconds,
            f.cpu_seconds.map_or("-".into(), |c| format!("{c:.2}")),
            f.peak_rss_mib.map_or("-".into(), |m| format!("{m:.1} MiB")),
        ));
    }
    s.push_str("\ncommands:\n");
    for f in &figs {
        s.push_str(&format!("  {}: {}\n", f.case, f.command));
    }
    emit(&s)
}

impl crate::scenario::Options for BenchArgs {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_board_record_names_the_cp_decision() {
        let f = board_instructions("cp_decision_32q").unwrap_or_else(|e| panic!("{e}"));
        assert!(f.value > 0.0 && f.unit == "instructions");
        assert!(board_instructions("no_such_line").is_err());
    }

    #[test]
    fn own_usage_reads_proc() {
        if cfg!(target_os = "linux") {
            let (kib, cpu) = own_usage().unwrap_or((0, -1.0));
            assert!(kib > 0 && cpu >= 0.0, "{kib} {cpu}");
        }
    }
}
