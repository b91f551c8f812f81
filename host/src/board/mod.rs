//! The board check: a RISC-V board report (from QEMU or a captured serial console)
//! against the committed expected output, virt's CP decisions and the budgets.
//!
//! The report is one line per operation, `name key=value ...`. Keys in
//! [`MEASURED_KEYS`] are measurements: they are checked against
//! `firmware/board/budgets.toml`, and a change from the expected file is shown (and fails
//! only with `--strict`), because any firmware change anywhere moves them. Every other
//! field is a functional result (decisions, command hashes) and must match exactly.
//! Section sizes of the ELF (flash and static RAM) are checked against the same file.
//! `nmcp board` (`cmd/board.rs`) parses its options and calls [`check_report`].

mod budgets;
mod qemu;
mod report;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use crate::cmd::CmdResult;

pub use budgets::{section_sizes, Sizes};
pub use qemu::{build, run_qemu};

use budgets::{check_budgets, Budgets};
use report::{compare, compare_cp_decisions, field};

/// Target triple of the board binary.
pub const BOARD_TARGET: &str = "riscv32imac-unknown-none-elf";
/// Keys of report fields that are measurements: the board crate's own list.
pub use nmcp_board::MEASURED_KEYS;

/// The committed board record of QEMU `virt` this build was made with.
pub const VIRT_RECORD: &str = include_str!("../../../firmware/board/expected/virt.txt");

/// The value of `key=` on the board record's line `name` (e.g. the `instructions` of
/// `cp_decision_32q`).
///
/// # Errors
/// The record has no line `name`, or the line no numeric `key=`.
pub fn record_value(record: &str, name: &str, key: &str) -> Result<f64, String> {
    let line = record
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .ok_or_else(|| format!("board record: no line {name}"))?;
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or_else(|| format!("board record: {name} has no {key}="))
}

/// The machine the binary is linked for and QEMU emulates.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Machine {
    /// QEMU `virt`: everything in RAM at 0x8000_0000; all scenarios.
    Virt,
    /// SiFive HiFive1 / QEMU `sifive_e`: flash at 0x2040_0000, 16 KiB RAM; the CP
    /// decisions (checked against virt's) and the LAMB scenarios.
    #[value(name = "sifive_e")]
    #[serde(rename = "sifive_e")]
    SifiveE,
    /// SiFive HiFive1 Rev B / QEMU `sifive_e,revb=on`: flash at 0x2001_0000 (after the
    /// Rev B bootloader), the core on its 16 MHz crystal, the report on UART0 at 115 200
    /// baud; the HiFive1 scenarios.
    #[value(name = "sifive_e_revb")]
    #[serde(rename = "sifive_e_revb")]
    SifiveERevb,
}

impl Machine {
    /// The report's `machine=`, the expected file's stem and the budgets' table.
    pub fn name(self) -> &'static str {
        match self {
            Self::Virt => "virt",
            Self::SifiveE => "sifive_e",
            Self::SifiveERevb => "sifive_e_revb",
        }
    }

    /// QEMU's `-machine` argument.
    pub fn qemu_machine(self) -> &'static str {
        match self {
            Self::Virt => "virt",
            Self::SifiveE => "sifive_e",
            Self::SifiveERevb => "sifive_e,revb=on",
        }
    }

    /// Cargo features of `nmcp-board` for this machine.
    pub fn features(self) -> &'static [&'static str] {
        match self {
            Self::Virt => &[],
            Self::SifiveE => &["--features", "hifive1"],
            Self::SifiveERevb => &["--features", "hifive1-revb"],
        }
    }
}

/// The workspace root: `root` or the one this binary was built from.
pub fn workspace_root(root: Option<&Path>) -> PathBuf {
    let root = root
        .map(Path::to_path_buf)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    root.canonicalize().unwrap_or(root)
}

/// The report inside captured console text: from the `nmcp-board machine=` line to the
/// `exit status=` line (both kept), carriage returns dropped. `None` without a header.
pub fn extract_report(text: &str) -> Option<String> {
    let mut out = String::new();
    let mut started = false;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        if !started {
            match line.find("nmcp-board machine=") {
                // A console may hold a prompt or noise before the header on its line.
                Some(at) => {
                    started = true;
                    out.push_str(&line[at..]);
                    out.push('\n');
                }
                None => continue,
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if line.starts_with("exit status=") {
            break;
        }
    }
    started.then_some(out)
}

/// Checks a report of `machine` against its expected file (or re-records it with
/// `bless`), virt's CP decisions, and the budgets (the byte budgets of the ELF only when
/// its `sizes` are known).
pub fn check_report(
    root: &Path,
    m: Machine,
    report: &str,
    strict: bool,
    bless: bool,
    sizes: Option<&Sizes>,
) -> CmdResult {
    let board_dir = root.join("firmware").join("board");
    let machine = m.name();
    let reported = report.lines().next().and_then(|l| field(l, "machine"));
    if reported != Some(machine) {
        return Err(format!(
            "board report names machine {reported:?}, expected {machine:?} (wrong ELF?)"
        )
        .into());
    }

    let mut failures = Vec::new();
    let expected_path = board_dir.join("expected").join(format!("{machine}.txt"));
    if bless {
        crate::cmd::io::write_file(&expected_path, report.as_bytes())?;
        stdoutln!("blessed {}", expected_path.display());
    } else {
        let expected = std::fs::read_to_string(&expected_path).map_err(|e| {
            format!(
                "{}: cannot read: {e} (record it with `nmcp board run --bless`)",
                expected_path.display()
            )
        })?;
        compare(&expected, report, strict, &mut failures);
    }
    if m != Machine::Virt {
        // The same CP decisions as virt's committed run, byte for byte.
        let virt_path = board_dir.join("expected").join("virt.txt");
        let virt = std::fs::read_to_string(&virt_path)
            .map_err(|e| format!("{}: cannot read: {e}", virt_path.display()))?;
        compare_cp_decisions(&virt, report, &mut failures);
    }

    let budgets_path = board_dir.join("budgets.toml");
    let mut budgets = Budgets::load(&budgets_path, machine)?;
    if sizes.is_none() {
        // A captured report has no ELF: flash and static RAM are the build's, checked
        // by `nmcp board run`; the stack budget stays (the report measures it).
        budgets.bytes.retain(|k, _| k.as_str() == "stack");
    }
    let sizes = sizes.copied().unwrap_or_default();
    check_budgets(&budgets, report, &sizes, &mut failures);

    if failures.is_empty() {
        stdoutln!("board check: ok ({machine})");
        Ok(())
    } else {
        for f in &failures {
            eprintln!("board check: {f}");
        }
        Err(format!("board check failed: {} problem(s)", failures.len()).into())
    }
}
