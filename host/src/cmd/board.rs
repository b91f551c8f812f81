//! `nmcp board run` / `nmcp board check`: the options; the work (building, QEMU, the
//! comparison with the expected report and the budgets) is in [`crate::board`].

use std::path::PathBuf;

use clap::Subcommand;

use super::CmdResult;
use crate::board::{check_report, extract_report, workspace_root, Machine};

/// Arguments of `nmcp board`.
#[derive(clap::Args, Debug)]
pub struct BoardArgs {
    #[command(subcommand)]
    command: BoardCommand,
}

#[derive(Subcommand, Debug)]
enum BoardCommand {
    /// Build the board binary (release, riscv32imac), run it on QEMU with
    /// `-icount shift=0`, compare its report with `firmware/board/expected/<machine>.txt`
    /// and check `firmware/board/budgets.toml`.
    Run(RunArgs),
    /// Check a report captured elsewhere (a board's serial console, a QEMU run) against
    /// `firmware/board/expected/<machine>.txt`, virt's CP decisions and the machine's
    /// instruction and cycle budgets. The report is read from the line
    /// `nmcp-board machine=...` to `exit status=...`; anything around it is ignored.
    Check(CheckArgs),
}

#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RunArgs {
    /// Machine to link for and emulate.
    #[arg(long, value_enum, default_value = "virt")]
    machine: Machine,
    /// Re-record the expected output from this run (budgets are still checked).
    #[arg(long)]
    bless: bool,
    /// Also fail when a measurement differs from the expected file.
    #[arg(long)]
    strict: bool,
    /// Use this ELF instead of building one.
    #[arg(long, value_name = "ELF")]
    elf: Option<PathBuf>,
    /// Workspace root (default: the one this binary was built from).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// QEMU executable.
    #[arg(long, default_value = "qemu-system-riscv32")]
    qemu: String,
}

#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
struct CheckArgs {
    /// The captured report (e.g. `cat /dev/ttyACM0 > report.txt` on a HiFive1 Rev B).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The machine the report came from.
    #[arg(long, value_enum)]
    machine: Machine,
    /// Also fail when a measurement differs from the expected file.
    #[arg(long)]
    strict: bool,
    /// Workspace root (default: the one this binary was built from).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
}

/// Runs `nmcp board`.
pub fn run(args: BoardArgs) -> CmdResult {
    match args.command {
        BoardCommand::Run(a) => run_board(a),
        BoardCommand::Check(a) => check_file(a),
    }
}

fn check_file(a: CheckArgs) -> CmdResult {
    let root = workspace_root(a.root.as_deref());
    // A console capture may hold bytes from before the board's reset: read lossily.
    let text = super::io::read_input(&a.file, super::io::MAX_TEXT_INPUT)?;
    let text = String::from_utf8_lossy(&text);
    let report = extract_report(&text).ok_or_else(|| {
        format!(
            "{}: no `nmcp-board machine=` line: not a board report (was the console \
             opened before the board was reset?)",
            a.file.display()
        )
    })?;
    if !report.lines().any(|l| l.starts_with("exit status=")) {
        return Err(format!(
            "{}: the report stops before its `exit status=` line (capture cut short?)",
            a.file.display()
        )
        .into());
    }
    check_report(&root, a.machine, &report, a.strict, false, None)
}

fn run_board(a: RunArgs) -> CmdResult {
    let root = workspace_root(a.root.as_deref());
    let elf = match &a.elf {
        Some(e) => e.clone(),
        None => crate::board::build(&root, a.machine)?,
    };
    let bar = super::io::spinner(
        format!(
            "running the board image on QEMU {}",
            a.machine.qemu_machine()
        ),
        false,
    );
    let report = crate::board::run_qemu(&a.qemu, a.machine.qemu_machine(), &elf);
    bar.finish_and_clear();
    // A serial console's lines end in "\r\n".
    let report = report?.replace('\r', "");
    stdout!("{report}");
    let bytes = super::io::read_input(&elf, super::io::MAX_BINARY_INPUT)?;
    let sizes =
        crate::board::section_sizes(&bytes).map_err(|e| format!("{}: {e}", elf.display()))?;
    check_report(&root, a.machine, &report, a.strict, a.bless, Some(&sizes))
}

impl crate::scenario::Options for RunArgs {}
impl crate::scenario::Options for CheckArgs {}

impl BoardArgs {
    /// The typed options of the command run.
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            BoardCommand::Run(a) => a,
            BoardCommand::Check(a) => a,
        }
    }
}
