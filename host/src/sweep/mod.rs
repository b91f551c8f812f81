//! `nmcp sweep FILE`: a parameter grid over any subcommand's options, each point run as
//! `nmcp <command> ... --json` in its own process, in parallel, sharded for a cluster,
//! results keyed by a hash of their inputs; `nmcp sweep merge` combines them into one
//! table. See `docs/decisions/sweep.md`.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Command;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rayon::prelude::*;
use serde_json::{json, Value as Json};

use crate::cmd::io::write_file;
use crate::cmd::{CmdResult, UsageError};
use crate::scenario::{self, Entry, Loc, Source, Value};

mod file;
mod merge;

use file::load;
use merge::merge;

/// Format tag of a sweep directory's manifest (`sweep.json`).
const MANIFEST_FORMAT: &str = "nmcp-sweep/1";
/// Format tag of a point's result file.
const POINT_FORMAT: &str = "nmcp-sweep-point/1";
/// Refuse grids larger than this (a typo in a grid, not a study).
const MAX_POINTS: u128 = 10_000_000;

/// The version that computed a result: the crate version and, when the binary was built
/// in a git checkout, `git describe` at build time. Part of every point's hash.
pub(crate) fn version() -> String {
    match option_env!("NMCP_GIT_DESCRIBE") {
        Some(g) => format!("{}+{g}", env!("CARGO_PKG_VERSION")),
        None => env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// Arguments of `nmcp sweep`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct SweepArgs {
    #[command(subcommand)]
    command: Option<SweepCommand>,
    #[command(flatten)]
    run: RunArgs,
}

/// `nmcp sweep FILE`: run a sweep.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RunArgs {
    /// The sweep file: `command`, `[base]` options, `[grid]` arrays, optional `seeds`.
    #[arg(required = true, value_name = "SWEEP.toml")]
    file: Option<PathBuf>,
    /// Results directory: `sweep.json` (the points) and `points/<hash>.json` (default:
    /// `<file stem>-sweep` in the current directory).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Run only the points whose index mod N is I (I from 0), e.g. a Slurm array task's
    /// `$SLURM_ARRAY_TASK_ID/N`.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    #[serde(default, deserialize_with = "shard::option")]
    shard: Option<(u64, u64)>,
    /// Points run at once (0: one per core; at most 1024, and never more than the
    /// points to run).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=1024))]
    jobs: u16,
    /// Print the points (index, hash, parameters, done or not) and run nothing.
    #[arg(long)]
    list: bool,
}

#[derive(clap::Subcommand, Debug)]
enum SweepCommand {
    /// Combine the results in one or more sweep directories (e.g. one per shard) into one
    /// table: a row per point in index order; columns = the grid's keys, then every
    /// scalar of the JSON result under its dotted path.
    Merge(MergeArgs),
}

/// `nmcp sweep merge`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct MergeArgs {
    /// Sweep directories (`--out` of `nmcp sweep`), all of the same sweep.
    #[arg(required = true, num_args = 1.., value_name = "DIR")]
    dirs: Vec<PathBuf>,
    /// The table: `.csv` or `.json` (by extension).
    #[arg(long, short, value_name = "FILE")]
    output: PathBuf,
    /// Leave out result columns at these dotted paths and under them (e.g.
    /// `wall_seconds`: wall-clock figures differ from run to run).
    #[arg(long, value_delimiter = ',', value_name = "PATH")]
    #[serde(default)]
    drop: Vec<String>,
    /// Write the table even if some points have no result (they are listed on stderr).
    #[arg(long)]
    partial: bool,
}

crate::scenario::parsed!(mod shard = parse_shard => (u64, u64));

impl crate::scenario::Options for RunArgs {}
impl crate::scenario::Options for MergeArgs {}

impl SweepArgs {
    /// The typed options of the command run.
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            None => &mut self.run,
            Some(SweepCommand::Merge(a)) => a,
        }
    }
}

/// Parses `I/N`.
fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("{s:?}: expected I/N, e.g. 0/4"))?;
    let i: u64 = i
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: shard index {i:?} is not a number"))?;
    let n: u64 = n
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: shard count {n:?} is not a number"))?;
    if n == 0 || i >= n {
        return Err(format!(
            "{s:?}: need 0 <= I < N (I counts from 0, as Slurm array task ids do)"
        ));
    }
    Ok((i, n))
}

/// One grid axis: a key and its values.
struct Axis {
    key: String,
    values: Vec<(Value, Loc)>,
}

/// A sweep file, read and checked.
struct Sweep {
    /// The subcommand path.
    command: Vec<String>,
    /// Options every point has.
    base: Vec<Entry>,
    /// The grid (file order; the first axis varies slowest), `seed` last if `seeds`.
    axes: Vec<Axis>,
}

/// One point of a sweep.
struct Point {
    index: u64,
    /// The grid's keys and this point's values, in axis order.
    params: Vec<(String, Value)>,
    /// The command-line words of the point's options (without `--json`).
    args: Vec<String>,
    hash: String,
}

/// 64-bit FNV-1a.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hash that names a point's result: FNV-1a 64 of the format tag, the version, the
/// subcommand and the point's whole scenario (base and grid values, seed included), keys
/// sorted, values in canonical form.
fn point_hash(command: &[String], entries: &[(String, Value)]) -> String {
    let mut sorted: Vec<&(String, Value)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut text = format!("{POINT_FORMAT}\n{}\n{}\n", version(), command.join(" "));
    for (k, v) in sorted {
        text.push_str(k);
        text.push('=');
        text.push_str(&v.canonical());
        text.push('\n');
    }
    format!("{:016x}", fnv1a64(text.as_bytes()))
}

fn usage(msg: String) -> Box<dyn std::error::Error> {
    Box::new(UsageError(msg))
}

/// Enumerates the points: the cartesian product of the axes, the first axis varying
/// slowest and `seeds` (last) fastest; index 0 is every axis's first value.
fn points(sweep: &Sweep, root: &Command) -> Result<Vec<Point>, String> {
    scenario::find_command(root, &sweep.command)
        .ok_or_else(|| format!("no command `{}`", sweep.command.join(" ")))?;
    let shown = sweep.command.join(" ");
    let total: usize = sweep.axes.iter().map(|a| a.values.len()).product();
    let mut out = Vec::with_capacity(total);
    let mut odometer = vec![0usize; sweep.axes.len()];
    for index in 0..total {
        let mut entries = sweep.base.clone();
        let mut params = Vec::new();
        for (axis, &k) in sweep.axes.iter().zip(&odometer) {
            let (v, loc) = axis
                .values
                .get(k)
                .ok_or_else(|| format!("grid `{}`: value {k} missing", axis.key))?;
            params.push((axis.key.clone(), v.clone()));
            entries.push(Entry {
                key: axis.key.clone(),
                key_loc: loc.clone(),
                value: v.clone(),
                value_loc: loc.clone(),
            });
        }
        // The point's options typed and checked as a run would take them; its words
        // are the child's command line.
        let words = crate::check_scenario(
            &sweep.command,
            scenario::FileOptions {
                shown: shown.clone(),
                entries: entries.clone(),
            },
            false,
        )?;
        let args = words.get(sweep.command.len()..).unwrap_or(&[]).to_vec();
        let all: Vec<(String, Value)> = entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect();
        out.push(Point {
            index: index as u64,
            hash: point_hash(&sweep.command, &all),
            params,
            args,
        });
        // Advance: the last axis fastest.
        for (pos, axis) in sweep.axes.iter().enumerate().rev() {
            if let Some(d) = odometer.get_mut(pos) {
                *d += 1;
                if *d < axis.values.len() {
                    break;
                }
                *d = 0;
            }
        }
    }
    Ok(out)
}

fn params_json(p: &Point) -> Json {
    let mut m = serde_json::Map::new();
    for (k, v) in &p.params {
        m.insert(k.clone(), v.to_json());
    }
    Json::Object(m)
}

fn params_text(p: &Point) -> String {
    p.params
        .iter()
        .map(|(k, v)| format!("{k} = {}", v.canonical()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The manifest every run of a sweep writes into its directory (the same for every
/// shard): the points in index order with their hashes and parameters.
fn manifest(sweep: &Sweep, pts: &[Point], file: &Path) -> Json {
    json!({
        "format": MANIFEST_FORMAT,
        "command": sweep.command.join(" "),
        "version": version(),
        "sweep_file": file.display().to_string(),
        "keys": sweep.axes.iter().map(|a| a.key.clone()).collect::<Vec<_>>(),
        "points": pts.iter().map(|p| json!({
            "index": p.index,
            "hash": p.hash,
            "params": params_json(p),
        })).collect::<Vec<_>>(),
    })
}

/// What happened to one point.
enum Outcome {
    Done,
    Failed(String),
}

/// Runs one point in a child process and stores its result.
fn run_point(exe: &Path, sweep: &Sweep, p: &Point, points_dir: &Path) -> Outcome {
    let mut argv: Vec<String> = sweep.command.clone();
    argv.extend(p.args.iter().cloned());
    argv.push("--json".into());
    let takes_sim_caps = matches!(
        sweep.command.first().map(String::as_str),
        Some("t3" | "mem")
    );
    argv.extend(crate::limits::child_cap_args(takes_sim_caps));
    let out = match std::process::Command::new(exe)
        .args(&argv)
        .stdin(Stdio::null())
        .output()
    {
        Ok(o) => o,
        Err(e) => return Outcome::Failed(format!("cannot start {}: {e}", exe.display())),
    };
    let stderr = String::from_utf8_lossy(&out.stderr).trim_end().to_string();
    let shown = format!("nmcp {}", argv.join(" "));
    if !out.status.success() {
        let code = out.status.code().map_or_else(
            || "killed by a signal".to_string(),
            |c| format!("exit code {c}"),
        );
        return Outcome::Failed(format!("`{shown}`: {code}\n{}", indent(&stderr)));
    }
    let result: Json = match serde_json::from_slice(&out.stdout) {
        Ok(j) => j,
        Err(e) => {
            return Outcome::Failed(format!(
                "`{shown}`: its output is not JSON ({e})\n{}",
                indent(&stderr)
            ))
        }
    };
    let doc = json!({
        "format": POINT_FORMAT,
        "hash": p.hash,
        "index": p.index,
        "command": sweep.command.join(" "),
        "version": version(),
        "params": params_json(p),
        "argv": argv,
        "result": result,
    });
    let text = match serde_json::to_string_pretty(&doc) {
        Ok(t) => t + "\n",
        Err(e) => return Outcome::Failed(format!("cannot encode the result: {e}")),
    };
    match write_file(
        &points_dir.join(format!("{}.json", p.hash)),
        text.as_bytes(),
    ) {
        Ok(()) => Outcome::Done,
        Err(e) => Outcome::Failed(e),
    }
}

fn indent(s: &str) -> String {
    if s.is_empty() {
        return "    (nothing on stderr)".into();
    }
    s.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `nmcp sweep`.
///
/// # Errors
/// A bad sweep file (with line and column), an unwritable directory, failed points (each
/// reported on stderr with its parameters and the command's stderr; the others are kept).
pub(crate) fn run(a: SweepArgs) -> CmdResult {
    if let Some(SweepCommand::Merge(m)) = a.command {
        return merge(&m);
    }
    let a = a.run;
    let Some(file) = a.file else {
        return Err(usage("nmcp sweep: give the sweep file".into()));
    };
    let root = crate::cli_command();
    let sweep = load(&file, &root).map_err(usage)?;
    let pts = points(&sweep, &root).map_err(usage)?;
    let dir = a.out.unwrap_or_else(|| {
        let stem = file
            .file_stem()
            .map_or_else(|| "sweep".into(), |s| s.to_string_lossy().into_owned());
        PathBuf::from(format!("{stem}-sweep"))
    });
    let points_dir = dir.join("points");
    let (shard_i, shard_n) = a.shard.unwrap_or((0, 1));
    let mine: Vec<&Point> = pts
        .iter()
        .filter(|p| p.index % shard_n == shard_i)
        .collect();
    let done = |p: &Point| points_dir.join(format!("{}.json", p.hash)).is_file();
    if a.list {
        let mut out = String::new();
        for p in &mine {
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\n",
                p.index,
                p.hash,
                if done(p) { "done" } else { "to run" },
                params_text(p)
            ));
        }
        return crate::cmd::io::emit(&out);
    }
    if dir.exists() && !dir.is_dir() {
        return Err(format!(
            "--out {}: is a file; a sweep's results go in a directory (name a new or existing one)",
            dir.display()
        )
        .into());
    }
    std::fs::create_dir_all(&points_dir)
        .map_err(|e| format!("{}: cannot create: {e}", points_dir.display()))?;
    let text = serde_json::to_string_pretty(&manifest(&sweep, &pts, &file))? + "\n";
    write_file(&dir.join("sweep.json"), text.as_bytes())?;
    let (skipped, todo): (Vec<&Point>, Vec<&Point>) = mine.iter().partition(|p| done(p));
    let shard = if shard_n > 1 {
        format!(" (shard {shard_i}/{shard_n}: {} of them)", mine.len())
    } else {
        String::new()
    };
    eprintln!(
        "nmcp sweep: {} points{shard}; {} already done (skipped), {} to run, in {}",
        pts.len(),
        skipped.len(),
        todo.len(),
        dir.display()
    );
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the nmcp binary: {e}"))?;
    let bar = ProgressBar::new(todo.len() as u64);
    if std::io::stderr().is_terminal() && !todo.is_empty() {
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} sweep [{bar:30}] {pos}/{len} points  {elapsed_precise} (eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    let jobs = if a.jobs == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    } else {
        usize::from(a.jobs)
    }
    .clamp(1, todo.len().max(1));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs)
        .build()
        .map_err(|e| format!("cannot start {jobs} threads: {e}"))?;
    let outcomes: Vec<(&Point, Outcome)> = pool.install(|| {
        todo.par_iter()
            .map(|p| {
                let o = run_point(&exe, &sweep, p, &points_dir);
                bar.inc(1);
                (*p, o)
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut failed = 0usize;
    for (p, o) in &outcomes {
        if let Outcome::Failed(msg) = o {
            failed += 1;
            eprintln!(
                "nmcp sweep: point {} ({}) failed: {msg}",
                p.index,
                params_text(p)
            );
        }
    }
    eprintln!(
        "nmcp sweep: {} ran, {failed} failed, {} skipped; results in {}",
        outcomes.len() - failed,
        skipped.len(),
        points_dir.display()
    );
    if failed > 0 {
        return Err(format!(
            "{failed} of {} points failed (listed above); the others are stored, and a re-run runs only the failed ones",
            outcomes.len()
        )
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::merge::{cell, flatten};
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // From the FNV reference (http://www.isthe.com/chongo/tech/comp/fnv/).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn shards_are_i_of_n_from_zero() {
        assert_eq!(parse_shard("0/4"), Ok((0, 4)));
        assert_eq!(parse_shard("3/4"), Ok((3, 4)));
        assert!(parse_shard("4/4").is_err());
        assert!(parse_shard("0/0").is_err());
        assert!(parse_shard("1").is_err());
        assert!(parse_shard("a/2").is_err());
    }

    #[test]
    fn the_hash_depends_on_every_input_but_not_on_key_order() {
        let v = |s: &str| Value::One(scenario::Scalar::Str(s.into()));
        let cmd = vec!["mem".to_string()];
        let a = point_hash(
            &cmd,
            &[("pattern".into(), v("random")), ("seed".into(), v("1"))],
        );
        let b = point_hash(
            &cmd,
            &[("seed".into(), v("1")), ("pattern".into(), v("random"))],
        );
        assert_eq!(a, b);
        assert_eq!(a.len(), 16);
        let c = point_hash(
            &cmd,
            &[("pattern".into(), v("stream")), ("seed".into(), v("1"))],
        );
        assert_ne!(a, c);
        let d = point_hash(
            &["t3".to_string()],
            &[("pattern".into(), v("random")), ("seed".into(), v("1"))],
        );
        assert_ne!(a, d);
        // An integer and a float of the same value are different scenarios.
        let i = point_hash(
            &cmd,
            &[("size".into(), Value::One(scenario::Scalar::Int(64)))],
        );
        let f = point_hash(
            &cmd,
            &[("size".into(), Value::One(scenario::Scalar::Float(64.0)))],
        );
        assert_ne!(i, f);
    }

    #[test]
    fn flatten_names_leaves_by_dotted_paths() {
        let mut out = Vec::new();
        flatten(
            "",
            &json!({"a": 1, "b": {"c": [true, null]}, "d": "x"}),
            &mut out,
        );
        let paths: Vec<&str> = out.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["a", "b.c.0", "b.c.1", "d"]);
        assert_eq!(cell(&out[2].1), "");
    }
}
