//! `nmcp`: run the firmware and the hardware model from the command line.
//!
//! The CLI lives in this library so that the `nmcp` binary and the workspace's
//! integration tests (which build their own copy of the binary) share one definition.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `print!` for command output, through [`cmd::io::write_stdout`]: a full or closed
/// stdout is reported once at the end of the command instead of panicking.
macro_rules! stdout {
    ($($arg:tt)*) => {
        $crate::cmd::io::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` for command output (see [`stdout!`]).
macro_rules! stdoutln {
    () => {
        $crate::cmd::io::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cmd::io::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod board;
pub mod checkpoint;
mod cmd;
pub mod cp_replay;
mod goldyloc;
mod lamb;
pub mod limits;
mod mem;
mod reproduce;
mod scenario;
mod sweep;
mod t3;
mod timeline;

/// The CLI's clap description (for scenario files and sweeps), built: global options are
/// on every subcommand.
pub(crate) fn cli_command() -> clap::Command {
    let mut c = <Cli as clap::CommandFactory>::command();
    c.build();
    c
}

/// Firmware emulator for a GPU command processor and near-memory compute in HBM.
#[derive(Parser, Debug)]
#[command(name = "nmcp", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    globals: GlobalOptions,
}

scenario::parsed!(mod sim_time = limits::parse_sim_time => u64);
scenario::parsed!(mod memory_cap = limits::parse_memory => usize);

/// Options every command takes (and so keys of every scenario).
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct GlobalOptions {
    /// Write a checkpoint every N finished units of work into --checkpoint-dir (T3:
    /// sub-layers; goldyloc: tuning chunks; lamb: runs of the sweep; mem: N accepted
    /// requests, default 1000000); `nmcp resume DIR` continues a killed run from it.
    #[arg(long, global = true, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    checkpoint_every: Option<u32>,
    /// Directory of the checkpoint (see --checkpoint-every; default every 1 unit).
    #[arg(long, global = true, value_name = "DIR")]
    checkpoint_dir: Option<std::path::PathBuf>,
    /// Stop each simulation once it passes this simulated time (e.g. 10ms, 500us), with
    /// an error saying where it was. Applies to `nmcp t3` and `nmcp mem` (request arrival
    /// times) so far.
    #[arg(long, global = true, value_name = "TIME", value_parser = limits::parse_sim_time)]
    #[serde(default, deserialize_with = "sim_time::option")]
    max_sim_time: Option<u64>,
    /// Stop each simulation after this many events (T3: scheduled events and memory
    /// completions; `nmcp mem`: requests admitted plus the refreshes of the idle stretches
    /// before them, so that a long gap in a trace binds too).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_events: Option<u64>,
    /// Cap the process's heap (e.g. 4G): an allocation past it stops the run with a
    /// message giving the cap and the use.
    #[arg(long, global = true, value_name = "BYTES", value_parser = limits::parse_memory)]
    #[serde(default, deserialize_with = "memory_cap::option")]
    max_memory: Option<usize>,
}

impl scenario::Options for GlobalOptions {
    const RELATIONS: &'static [scenario::Relation] = &[scenario::Relation::Requires(
        "checkpoint-every",
        "checkpoint-dir",
    )];
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a memory trace or a synthetic pattern through the HBM model.
    Mem(mem::MemOptions),
    /// LAMB optimizer steps on near-memory compute, next to an ideal GPU.
    Lamb(lamb::options::LambOptions),
    /// List the built-in HBM presets, or check a preset file.
    Presets(cmd::presets::PresetsArgs),
    /// Assemble NMC instructions and macro-commands from text.
    Asm(cmd::asm::AsmArgs),
    /// Disassemble NMC instruction words or macro-commands.
    Disasm(cmd::asm::DisasmArgs),
    /// GOLDYLOC offline flow: tune, train, eval.
    Goldyloc(cmd::goldyloc::GoldylocArgs),
    /// Decode AQL packets (queue dumps).
    Aql(cmd::aql::AqlArgs),
    /// Run queue dumps through the firmware command processor.
    Cp(cmd::cp::CpArgs),
    /// The firmware on a RISC-V board under QEMU: run, compare, check budgets.
    Board(cmd::board::BoardArgs),
    /// T3: fused GEMM + reduce-scatter across simulated GPUs (the Table 8.2 sub-layer
    /// study; `check` with real data; `rs` a plain ring reduce-scatter).
    T3(cmd::t3::T3Args),
    /// Regenerate the dissertation's figures (LAMB, GOLDYLOC, T3) into report/: index.html,
    /// README.md, SVG plots, each next to the dissertation's number.
    Reproduce(cmd::reproduce::ReproduceArgs),
    /// Speed and memory figures: DRAM requests/s, NMC commands/s, LAMB step, GEMM
    /// workgroups/s, T3 set, CP instructions, peak RSS (docs/PERFORMANCE.md).
    Bench(cmd::bench::BenchArgs),
    /// Scenario files: `nmcp scenario init <command>` writes a commented template.
    Scenario(scenario::ScenarioArgs),
    /// Run a parameter grid over any command in parallel, sharded; merge the results.
    Sweep(sweep::SweepArgs),
    /// Continue a run killed after writing a checkpoint (--checkpoint-dir): the same
    /// command line, finished units loaded, the rest run; output as if never stopped.
    Resume(ResumeArgs),
}

impl Command {
    /// The typed options of the command run (what the merge fills in).
    fn options(&mut self) -> &mut dyn scenario::Typed {
        match self {
            Command::Mem(a) => a,
            Command::Lamb(a) => a,
            Command::Presets(a) => a,
            Command::Asm(a) => a,
            Command::Disasm(a) => a,
            Command::Goldyloc(a) => a.options(),
            Command::Aql(a) => a.options(),
            Command::Cp(a) => a.options(),
            Command::Board(a) => a.options(),
            Command::T3(a) => a.options(),
            Command::Reproduce(a) => a,
            Command::Bench(a) => a,
            Command::Scenario(a) => a.options(),
            Command::Sweep(a) => a.options(),
            Command::Resume(a) => a,
        }
    }
}

/// `nmcp resume`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ResumeArgs {
    /// The run's --checkpoint-dir.
    dir: std::path::PathBuf,
}

impl scenario::Options for ResumeArgs {}

/// Resolves a command line (binary name first) into the typed CLI, the one way every
/// run gets its options: clap parses the command line, a scenario file's options are
/// merged under it, serde fills the command's typed options from the merged table, and
/// the command's relations are checked. Also gives the run as words (for checkpoints).
///
/// # Errors
/// What is wrong, already worded (see [`scenario::Failure`]).
fn resolve(argv: Vec<std::ffi::OsString>) -> Result<(Cli, Vec<String>), scenario::Failure> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let root = cli_command();
    let parsed = scenario::parse(&root, scenario::augment(Cli::command()), argv)?;
    let cli = Cli::from_arg_matches(&parsed.matches).map_err(scenario::Failure::Clap)?;
    typed(&root, cli, &parsed, true)
}

/// The typed CLI after the merge of `parsed` (see [`resolve`]); the relations are
/// checked unless the options are a scenario alone, which the command line may complete.
fn typed(
    root: &clap::Command,
    mut cli: Cli,
    parsed: &scenario::Parsed,
    relations_checked: bool,
) -> Result<(Cli, Vec<String>), scenario::Failure> {
    use scenario::{Options as _, Typed as _};
    let leaf = cli.command.options();
    let relations: Vec<scenario::Relation> = leaf
        .relations()
        .iter()
        .chain(GlobalOptions::RELATIONS)
        .copied()
        .collect();
    let merged = parsed.merge(root, &relations);
    let cmd = scenario::find_command(root, &parsed.path).unwrap_or(root);
    let fail = |m: String| {
        scenario::Failure::Message(match &merged.file_note {
            Some(n) => format!("{m}\n{n}"),
            None => m,
        })
    };
    let shown = parsed.path.join(" ");
    if relations_checked {
        scenario::check(cmd, &relations, &merged.given).map_err(fail)?;
    }
    leaf.take(&merged.table)
        .map_err(|e| fail(format!("`nmcp {shown}`: {e}")))?;
    cli.globals
        .take(&merged.table)
        .map_err(|e| fail(format!("`nmcp {shown}`: {e}")))?;
    Ok((cli, merged.words))
}

/// Checks a scenario's options for the command `path` as a run would (each value by its
/// parser, then merged, typed and its relations checked) and gives the run as words
/// (`nmcp scenario show`, each point of a sweep). A command with a required positional
/// argument (which no scenario gives) is checked as far as its options go.
///
/// # Errors
/// What is wrong, with file, line and column where it has them.
pub(crate) fn check_scenario(
    path: &[String],
    file: scenario::FileOptions,
    relations: bool,
) -> Result<Vec<String>, String> {
    use clap::{CommandFactory as _, FromArgMatches as _};
    let root = cli_command();
    let argv = std::iter::once("nmcp".to_string()).chain(path.iter().cloned());
    let Ok(matches) = Cli::command().try_get_matches_from(argv) else {
        let cmd = scenario::find_command(&root, path).ok_or("no such command")?;
        let values = scenario::validate(cmd, &path.join(" "), &file.entries)?;
        let mut words = path.to_vec();
        for (k, v) in &values {
            if let Some(a) = cmd.get_arguments().find(|a| scenario::arg_key(a) == *k) {
                words.extend(scenario::option_words(a, v));
            }
        }
        return Ok(words);
    };
    let message = |f: scenario::Failure| match f {
        scenario::Failure::Message(m) => m,
        scenario::Failure::Clap(e) => e.to_string(),
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|e| e.to_string())?;
    let parsed = scenario::parsed(&root, matches, Some(file)).map_err(message)?;
    typed(&root, cli, &parsed, relations)
        .map(|(_, w)| w)
        .map_err(message)
}

/// Parses the process arguments and runs the subcommand; the exit code says whether it
/// worked, the message on stderr what went wrong.
pub fn run_cli() -> ExitCode {
    // `--config FILE` / `--scenario FILE` (any subcommand) is applied here, generically.
    let (cli, argv) = match resolve(std::env::args_os().collect()) {
        Ok(v) => v,
        Err(f) => return f.report(),
    };
    let result = prepare(cli, argv)
        .and_then(dispatch)
        .and_then(|()| cmd::io::finish_stdout().map_err(Into::into));
    cmd::bench::report_usage_if_asked();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nmcp: error: {e}");
            if e.is::<cmd::UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Records what the command line asks of limits and checkpoints. For `nmcp resume`, the
/// command line stored in the checkpoint, parsed, is the command to run (with its own
/// caps), and the resumed directory is where the checkpoint goes on being written.
fn prepare(cli: Cli, argv: Vec<String>) -> Result<Cli, Box<dyn std::error::Error>> {
    let (cli, resume_dir, argv) = if let Command::Resume(r) = &cli.command {
        let resume = checkpoint::resume(&r.dir)?;
        eprintln!("nmcp: {}", resume.note);
        let (stored, _) = resolve(
            std::iter::once("nmcp".into())
                .chain(resume.argv.iter().map(Into::into))
                .collect(),
        )
        .map_err(|f| {
            let e = match f {
                scenario::Failure::Message(m) => m,
                scenario::Failure::Clap(e) => e.to_string(),
            };
            format!(
                "{}: the stored command line does not parse: {e}",
                r.dir.join(checkpoint::FILE_NAME).display()
            )
        })?;
        if matches!(stored.command, Command::Resume(_)) {
            return Err("a checkpoint cannot store `nmcp resume`".into());
        }
        (stored, Some(r.dir.clone()), resume.argv)
    } else {
        (cli, None, argv)
    };
    if let Some(b) = cli.globals.max_memory {
        limits::set_memory_cap(b);
    }
    let t3 = matches!(cli.command, Command::T3(_));
    // A sweep passes its caps on to each point (`limits::child_cap_args`).
    let capped = t3 || matches!(cli.command, Command::Mem(_) | Command::Sweep(_));
    if (cli.globals.max_sim_time.is_some() || cli.globals.max_events.is_some()) && !capped {
        return Err(Box::new(cmd::UsageError(
            "--max-sim-time / --max-events: only `nmcp t3`, `nmcp mem` and `nmcp sweep` take simulation caps so far"
                .into(),
        )));
    }
    limits::set_sim_limits(nmcp_emulator::sim::Limits {
        max_sim_ps: cli.globals.max_sim_time,
        max_events: cli.globals.max_events,
    });
    let checkpoints = t3
        || matches!(
            cli.command,
            Command::Mem(_) | Command::Goldyloc(_) | Command::Lamb(_)
        );
    if cli.globals.checkpoint_dir.is_some() && !checkpoints {
        return Err(Box::new(cmd::UsageError(
            "--checkpoint-dir: only the `nmcp t3` study, `nmcp mem`, `nmcp goldyloc` and `nmcp lamb` checkpoint so far".into(),
        )));
    }
    checkpoint::set_request(checkpoint::Request {
        resume: resume_dir.is_some(),
        dir: resume_dir.or_else(|| cli.globals.checkpoint_dir.clone()),
        every: cli.globals.checkpoint_every,
        argv,
    });
    Ok(cli)
}

fn dispatch(cli: Cli) -> Result<(), Box<dyn std::error::Error>> {
    match cli.command {
        Command::Mem(a) => cmd::mem::run(a),
        Command::Presets(a) => cmd::presets::run(a),
        Command::Lamb(a) => cmd::lamb::run(a),
        Command::Asm(a) => cmd::asm::run_asm(a),
        Command::Disasm(a) => cmd::asm::run_disasm(a),
        Command::Goldyloc(a) => cmd::goldyloc::run(a),
        Command::Aql(a) => cmd::aql::run(a),
        Command::Cp(a) => cmd::cp::run(a),
        Command::Board(a) => cmd::board::run(a),
        Command::T3(a) => cmd::t3::run(a),
        Command::Reproduce(a) => cmd::reproduce::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Scenario(a) => scenario::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Resume(_) => Err("nmcp resume: nothing to resume".into()),
    }
}
