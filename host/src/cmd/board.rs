//! `nmcp board run`: build the RISC-V board binary, run it under QEMU, and check its
//! report against the committed expected output and the budgets.
//!
//! The report is one line per operation, `name key=value ...`. Keys in
//! [`MEASURED_KEYS`] are measurements: they are checked against
//! `firmware/board/budgets.toml`, and a change from the expected file is shown (and fails
//! only with `--strict`), because any firmware change anywhere moves them. Every other
//! field is a functional result (decisions, command hashes) and must match exactly.
//! Section sizes of the ELF (flash and static RAM) are checked against the same file.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Subcommand;

use super::CmdResult;

/// Target triple of the board binary.
pub const BOARD_TARGET: &str = "riscv32imac-unknown-none-elf";
/// Keys of report fields that are measurements: the board crate's own list.
pub use nmcp_board::MEASURED_KEYS;
/// Longest a QEMU run may take; the binary runs for a fraction of a second.
const QEMU_TIMEOUT: Duration = Duration::from_secs(60);

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

/// The machine the binary is linked for and QEMU emulates.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Machine {
    /// QEMU `virt`: everything in RAM at 0x8000_0000; all scenarios.
    Virt,
    /// SiFive HiFive1 / QEMU `sifive_e`: flash at 0x2040_0000, 16 KiB RAM; the CP
    /// decisions (checked against virt's) and the LAMB scenarios.
    #[value(name = "sifive_e")]
    SifiveE,
    /// SiFive HiFive1 Rev B / QEMU `sifive_e,revb=on`: flash at 0x2001_0000 (after the
    /// Rev B bootloader), the core on its 16 MHz crystal, the report on UART0 at 115 200
    /// baud; the HiFive1 scenarios.
    #[value(name = "sifive_e_revb")]
    SifiveERevb,
}

impl Machine {
    /// The report's `machine=`, the expected file's stem and the budgets' table.
    fn name(self) -> &'static str {
        match self {
            Self::Virt => "virt",
            Self::SifiveE => "sifive_e",
            Self::SifiveERevb => "sifive_e_revb",
        }
    }

    /// QEMU's `-machine` argument.
    fn qemu_machine(self) -> &'static str {
        match self {
            Self::Virt => "virt",
            Self::SifiveE => "sifive_e",
            Self::SifiveERevb => "sifive_e,revb=on",
        }
    }

    /// Cargo features of `nmcp-board` for this machine.
    fn features(self) -> &'static [&'static str] {
        match self {
            Self::Virt => &[],
            Self::SifiveE => &["--features", "hifive1"],
            Self::SifiveERevb => &["--features", "hifive1-revb"],
        }
    }
}

#[derive(clap::Args, Debug)]
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

#[derive(clap::Args, Debug)]
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

/// The workspace root: `root` or the one this binary was built from.
fn workspace_root(root: Option<&Path>) -> PathBuf {
    let root = root
        .map(Path::to_path_buf)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    root.canonicalize().unwrap_or(root)
}

/// The report inside captured console text: from the `nmcp-board machine=` line to the
/// `exit status=` line (both kept), carriage returns dropped. `None` without a header.
fn extract_report(text: &str) -> Option<String> {
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
        None => build(&root, a.machine)?,
    };
    let bar = super::io::spinner(
        format!(
            "running the board image on QEMU {}",
            a.machine.qemu_machine()
        ),
        false,
    );
    let report = run_qemu(&a.qemu, a.machine.qemu_machine(), &elf);
    bar.finish_and_clear();
    // A serial console's lines end in "\r\n".
    let report = report?.replace('\r', "");
    stdout!("{report}");
    let bytes = super::io::read_input(&elf, super::io::MAX_BINARY_INPUT)?;
    let sizes = section_sizes(&bytes).map_err(|e| format!("{}: {e}", elf.display()))?;
    check_report(&root, a.machine, &report, a.strict, a.bless, Some(&sizes))
}

/// Checks a report of `machine` against its expected file (or re-records it with
/// `bless`), virt's CP decisions, and the budgets (the byte budgets of the ELF only when
/// its `sizes` are known).
fn check_report(
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
        super::io::write_file(&expected_path, report.as_bytes())?;
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

/// Builds the board binary one package at a time (so no other crate's features unify
/// into it) and returns the ELF's path.
fn build(root: &Path, machine: Machine) -> Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .current_dir(root)
        .args([
            "build",
            "-p",
            "nmcp-board",
            "--target",
            BOARD_TARGET,
            "--release",
        ])
        .args(machine.features())
        .status()
        .map_err(|e| format!("cannot run {cargo}: {e}"))?;
    if !status.success() {
        return Err(format!("building the board binary failed ({status})"));
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    Ok(target_dir
        .join(BOARD_TARGET)
        .join("release")
        .join("nmcp-board"))
}

/// Runs the ELF on a QEMU machine; returns its semihosting output.
fn run_qemu(qemu: &str, machine: &str, elf: &Path) -> Result<String, String> {
    let mut child = Command::new(qemu)
        .args([
            "-machine",
            machine,
            "-nographic",
            "-semihosting-config",
            "enable=on,target=native",
            "-icount",
            "shift=0",
            "-bios",
            "none",
            "-kernel",
        ])
        .arg(elf)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run {qemu}: {e} (on Debian: apt-get install qemu-system-misc)")
        })?;
    let deadline = Instant::now() + QEMU_TIMEOUT;
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(s) => break s,
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{qemu} did not exit within {} s",
                    QEMU_TIMEOUT.as_secs()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut s) = child.stdout.take() {
        s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    }
    if let Some(mut s) = child.stderr.take() {
        s.read_to_string(&mut err).map_err(|e| e.to_string())?;
    }
    if !status.success() {
        return Err(format!("board binary exited with {status}:\n{out}{err}"));
    }
    Ok(out)
}

/// The value of `key=` in a report line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|f| f.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// A report line: its name, then its fields in order.
fn parse_line(line: &str) -> (&str, Vec<(&str, &str)>) {
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let name = parts.next().unwrap_or("");
    let fields = parts
        .map(|f| f.split_once('=').unwrap_or((f, "")))
        .collect();
    (name, fields)
}

fn is_measured(key: &str) -> bool {
    MEASURED_KEYS.contains(&key)
}

/// Compares a report with the expected one: names and functional fields exactly,
/// measurements as information (failures only when `strict`).
fn compare(expected: &str, actual: &str, strict: bool, failures: &mut Vec<String>) {
    let (e, a): (Vec<_>, Vec<_>) = (expected.lines().collect(), actual.lines().collect());
    if e.len() != a.len() {
        failures.push(format!(
            "report has {} lines, expected {} (re-record with --bless if intended)",
            a.len(),
            e.len()
        ));
    }
    for (i, (el, al)) in e.iter().zip(&a).enumerate() {
        let (en, ef) = parse_line(el);
        let (an, af) = parse_line(al);
        let functional = |f: &[(&str, &str)]| -> Vec<String> {
            f.iter()
                .filter(|(k, _)| !is_measured(k))
                .map(|(k, v)| format!("{k}={v}"))
                .collect()
        };
        if en != an || functional(&ef) != functional(&af) {
            failures.push(format!(
                "line {}: output differs\n  expected: {el}\n  actual:   {al}",
                i + 1
            ));
            continue;
        }
        for (k, ev) in ef.iter().filter(|(k, _)| is_measured(k)) {
            let av = af.iter().find(|(ak, _)| ak == k).map(|(_, v)| *v);
            if av == Some(*ev) {
                continue;
            }
            let (old, new) = (
                ev.parse::<f64>().ok(),
                av.and_then(|v| v.parse::<f64>().ok()),
            );
            let change = match (old, new) {
                (Some(o), Some(n)) if o > 0.0 => format!(" ({:+.1} %)", (n - o) / o * 100.0),
                _ => String::new(),
            };
            let msg = format!("{an} {k}: {ev} -> {}{change}", av.unwrap_or("(missing)"));
            if strict {
                failures.push(format!("measurement changed: {msg}"));
            } else {
                stdoutln!("note: measurement changed: {msg}");
            }
        }
    }
}

/// Report lines every machine must decide exactly as virt does.
const CP_LINES_REQUIRED: [&str; 2] = ["cp_decision_32q_cold", "cp_decision_32q"];

/// Checks that every CP decision line (`cp_decision*`) of `report` has the functional
/// fields of the same line in virt's expected report, and that the report has the lines
/// of [`CP_LINES_REQUIRED`].
fn compare_cp_decisions(virt: &str, report: &str, failures: &mut Vec<String>) {
    let functional = |l: &str| -> Vec<String> {
        parse_line(l)
            .1
            .iter()
            .filter(|(k, _)| !is_measured(k))
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    };
    let before = failures.len();
    let mut seen = Vec::new();
    for line in report
        .lines()
        .filter(|l| parse_line(l).0.starts_with("cp_decision"))
    {
        let name = parse_line(line).0;
        seen.push(name);
        match virt.lines().find(|l| parse_line(l).0 == name) {
            Some(v) if functional(v) == functional(line) => {}
            Some(v) => failures.push(format!(
                "{name} decides differently from virt\n  virt:   {v}\n  actual: {line}"
            )),
            None => failures.push(format!("{name}: virt's expected report has no such line")),
        }
    }
    for name in CP_LINES_REQUIRED {
        if !seen.contains(&name) {
            failures.push(format!("report has no {name} line to compare with virt's"));
        }
    }
    if failures.len() == before {
        stdoutln!("CP decisions: {} lines equal to virt's", seen.len());
    }
}

/// The budgets of one machine.
#[derive(Debug, Default)]
struct Budgets {
    /// Per report line: the most instructions it may report.
    instructions: BTreeMap<String, u64>,
    /// Per report line: the most `mcycle` cycles it may report (the machine's clock is
    /// stated next to the table; under QEMU `-icount shift=0` cycles count instructions).
    cycles: BTreeMap<String, u64>,
    /// `flash`, `ram`, `stack`: the most bytes.
    bytes: BTreeMap<String, u64>,
}

impl Budgets {
    fn load(path: &Path, machine: &str) -> Result<Self, String> {
        let text = super::io::read_input_text(path)?;
        Self::parse(&text, machine).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn parse(text: &str, machine: &str) -> Result<Self, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let m = table
            .get(machine)
            .and_then(|v| v.as_table())
            .ok_or_else(|| format!("no [{machine}] table"))?;
        let mut b = Self::default();
        for (section, dst) in [
            ("instructions", &mut b.instructions),
            ("cycles", &mut b.cycles),
            ("bytes", &mut b.bytes),
        ] {
            let Some(t) = m.get(section) else { continue };
            let t = t
                .as_table()
                .ok_or_else(|| format!("[{machine}.{section}] is not a table"))?;
            for (k, v) in t {
                let n = v
                    .as_integer()
                    .and_then(|n| u64::try_from(n).ok())
                    .ok_or_else(|| {
                        format!("[{machine}.{section}] {k}: expected a non-negative integer")
                    })?;
                dst.insert(k.clone(), n);
            }
        }
        for k in b.bytes.keys() {
            if !["flash", "ram", "stack", "ram_total"].contains(&k.as_str()) {
                return Err(format!(
                    "[{machine}.bytes] {k}: unknown (flash, ram, stack or ram_total)"
                ));
            }
        }
        Ok(b)
    }
}

/// What the ELF needs of a board.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Sizes {
    /// Loadable, non-writable sections plus `.data`'s initial image.
    flash: u64,
    /// Writable allocated sections except the stack region (`.data`, `.bss`, ...).
    ram: u64,
}

const SHF_WRITE: u32 = 0x1;
const SHF_ALLOC: u32 = 0x2;
const SHT_PROGBITS: u32 = 1;
const SHT_NOBITS: u32 = 8;

/// Section sizes from an ELF32 little-endian file's section headers.
fn section_sizes(b: &[u8]) -> Result<Sizes, String> {
    let u16_at = |o: usize| -> Result<u64, String> {
        b.get(o..o + 2)
            .map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])))
            .ok_or_else(|| format!("truncated ELF at byte {o}"))
    };
    let u32_at = |o: usize| -> Result<u64, String> {
        b.get(o..o + 4)
            .map(|s| u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]])))
            .ok_or_else(|| format!("truncated ELF at byte {o}"))
    };
    if b.get(..4) != Some(b"\x7fELF") {
        return Err("not an ELF file (bad magic at byte 0)".into());
    }
    if b.get(4) != Some(&1) || b.get(5) != Some(&1) {
        return Err("not a 32-bit little-endian ELF (bytes 4-5)".into());
    }
    let shoff = u32_at(0x20)? as usize;
    let shentsize = u16_at(0x2E)? as usize;
    let shnum = u16_at(0x30)? as usize;
    let shstrndx = u16_at(0x32)? as usize;
    if shentsize < 40 {
        return Err(format!("section header size {shentsize} < 40 (byte 0x2e)"));
    }
    let sh = |i: usize| shoff + i * shentsize;
    let strtab = u32_at(sh(shstrndx) + 0x10)? as usize;
    let name = |off: usize| -> String {
        let s = b.get(strtab + off..).unwrap_or(&[]);
        let end = s.iter().position(|&c| c == 0).unwrap_or(0);
        String::from_utf8_lossy(&s[..end]).into_owned()
    };
    let mut sizes = Sizes::default();
    for i in 0..shnum {
        let h = sh(i);
        let (ty, flags, size) = (u32_at(h + 4)?, u32_at(h + 8)? as u32, u32_at(h + 0x14)?);
        if flags & SHF_ALLOC == 0 {
            continue;
        }
        let writable = flags & SHF_WRITE != 0;
        let n = name(u32_at(h)? as usize);
        if ty == SHT_PROGBITS as u64 {
            sizes.flash += size;
        }
        // `.stack` (and `.heap`) are riscv-rt's placeholders for the rest of RAM.
        if writable && (ty == SHT_PROGBITS as u64 || ty == SHT_NOBITS as u64) && n != ".stack" {
            sizes.ram += size;
        }
    }
    Ok(sizes)
}

fn check_budgets(b: &Budgets, report: &str, sizes: &Sizes, failures: &mut Vec<String>) {
    let over = |failures: &mut Vec<String>, what: String, value: u64, budget: u64| {
        let verdict = if value > budget { "OVER" } else { "ok" };
        stdoutln!("budget {what}: {value} / {budget} {verdict}");
        if value > budget {
            failures.push(format!("{what} = {value} exceeds its budget {budget}"));
        }
    };
    for (key, table) in [("instructions", &b.instructions), ("cycles", &b.cycles)] {
        for (name, &budget) in table {
            match report
                .lines()
                .find(|l| parse_line(l).0 == name)
                .and_then(|l| field(l, key))
                .and_then(|v| v.parse::<u64>().ok())
            {
                Some(v) => over(failures, format!("{name} {key}"), v, budget),
                None => failures.push(format!(
                    "budget names {name}, but the report has no `{name} {key}=` line"
                )),
            }
        }
    }
    let stack = report
        .lines()
        .find_map(|l| {
            (parse_line(l).0 == "stack")
                .then(|| field(l, "peak_bytes"))
                .flatten()
        })
        .and_then(|v| v.parse::<u64>().ok());
    let stack_field = |key: &str| {
        report
            .lines()
            .find(|l| parse_line(l).0 == "stack")
            .and_then(|l| field(l, key))
            .and_then(|v| v.parse::<u64>().ok())
    };
    // Static RAM plus the deepest the stack went from its top, start-up included.
    let ram_total = match (
        stack_field("high_water_bytes"),
        stack_field("startup_bytes"),
    ) {
        (Some(h), Some(s)) => Some(sizes.ram + h.max(s)),
        _ => None,
    };
    for (k, &budget) in &b.bytes {
        let v = match k.as_str() {
            "flash" => Some(sizes.flash),
            "ram" => Some(sizes.ram),
            "ram_total" => ram_total,
            _ => stack,
        };
        match v {
            Some(v) => over(failures, format!("{k} bytes"), v, budget),
            None => failures.push(format!("budget names {k} bytes, but the report has none")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "nmcp-board machine=virt\n\
        op_a instructions=100 cycles=100 cd=8\n\
        stack peak_bytes=4000\n";

    #[test]
    fn cp_decisions_must_equal_virts() {
        let virt = "nmcp-board machine=virt\n\
            cp_decision_32q_cold instructions=9 cd=8 dispatch_hash=0x1\n\
            cp_decision_32q instructions=9 cd=8 dispatch_hash=0x2\n";
        let same = "nmcp-board machine=sifive_e\n\
            cp_decision_32q_cold instructions=7 cd=8 dispatch_hash=0x1\n\
            cp_decision_32q instructions=5 cd=8 dispatch_hash=0x2\n";
        let mut f = Vec::new();
        compare_cp_decisions(virt, same, &mut f);
        assert!(f.is_empty(), "{f:?}");
        let other = same.replace("dispatch_hash=0x2", "dispatch_hash=0x3");
        compare_cp_decisions(virt, &other, &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("decides differently"), "{f:?}");
        let mut f = Vec::new();
        compare_cp_decisions(virt, "nmcp-board machine=sifive_e\n", &mut f);
        assert_eq!(f.len(), 2, "both required lines missing: {f:?}");
    }

    #[test]
    fn functional_difference_fails_measurement_difference_notes() {
        let mut f = Vec::new();
        compare(REPORT, &REPORT.replace("=100", "=120"), false, &mut f);
        assert!(f.is_empty(), "{f:?}");
        compare(REPORT, &REPORT.replace("=100", "=120"), true, &mut f);
        assert_eq!(f.len(), 2, "{f:?}");
        f.clear();
        compare(REPORT, &REPORT.replace("cd=8", "cd=4"), false, &mut f);
        assert_eq!(f.len(), 1);
        assert!(f[0].contains("line 2"), "{f:?}");
    }

    #[test]
    fn a_captured_console_yields_the_report_between_header_and_exit() {
        let console = "garbage\r\n> nmcp-board machine=sifive_e_revb core_clock_hz=16000000\r\n\
                       op_a instructions=100 cycles=130 cd=8\r\nexit status=0\r\nafter\r\n";
        assert_eq!(
            extract_report(console).as_deref(),
            Some(
                "nmcp-board machine=sifive_e_revb core_clock_hz=16000000\n\
                 op_a instructions=100 cycles=130 cd=8\nexit status=0\n"
            )
        );
        assert_eq!(extract_report("no report here\n"), None);
    }

    /// The committed Rev B report, as a serial console shows it (`\r\n`, noise before
    /// and after), passes `board check`; with one decision changed it fails.
    #[test]
    fn a_console_capture_of_the_committed_revb_report_checks() {
        let root = workspace_root(None);
        let path = root.join("firmware/board/expected/sifive_e_revb.txt");
        let committed = std::fs::read_to_string(path).unwrap();
        let console = format!("boot noise\r\n{}after\r\n", committed.replace('\n', "\r\n"));
        let report = extract_report(&console).unwrap();
        assert_eq!(report, committed);
        let m = Machine::SifiveERevb;
        assert!(check_report(&root, m, &report, true, false, None).is_ok());
        let bad = report.replacen(" cd=8 ", " cd=4 ", 1);
        assert!(check_report(&root, m, &bad, false, false, None).is_err());
    }

    #[test]
    fn cycle_budgets_are_checked_like_instruction_budgets() {
        let b = Budgets::parse("[virt.cycles]\nop_a = 120\n", "virt").unwrap();
        let mut f = vec![];
        check_budgets(&b, REPORT, &Sizes::default(), &mut f);
        assert!(f.is_empty(), "{f:?}");
        let slow = REPORT.replace("cycles=100", "cycles=121");
        check_budgets(&b, &slow, &Sizes::default(), &mut f);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].contains("op_a cycles"), "{f:?}");
    }

    #[test]
    fn budgets_fail_when_exceeded() {
        let b = Budgets::parse(
            "[virt.instructions]\nop_a = 99\n[virt.bytes]\nstack = 4000\nram = 10\n",
            "virt",
        )
        .unwrap();
        let mut f = Vec::new();
        check_budgets(&b, REPORT, &Sizes { flash: 0, ram: 11 }, &mut f);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().any(|m| m.contains("op_a instructions = 100")));
        assert!(f.iter().any(|m| m.contains("ram bytes = 11")));
        assert!(Budgets::parse("[virt.bytes]\nheap = 1\n", "virt").is_err());
        // `ram_total`: static RAM plus the deeper of the run's and the start-up's stack.
        let b = Budgets::parse("[virt.bytes]\nram_total = 1500\n", "virt").unwrap();
        let report = "stack peak_bytes=10 high_water_bytes=900 startup_bytes=1200\n";
        let mut f = Vec::new();
        check_budgets(&b, report, &Sizes { flash: 0, ram: 300 }, &mut f);
        assert!(f.is_empty(), "{f:?}");
        check_budgets(&b, report, &Sizes { flash: 0, ram: 301 }, &mut f);
        assert!(
            f.iter().any(|m| m.contains("ram_total bytes = 1501")),
            "{f:?}"
        );
        let mut f = Vec::new();
        check_budgets(&b, REPORT, &Sizes { flash: 0, ram: 1 }, &mut f);
        assert_eq!(f.len(), 1, "no high-water in the report: {f:?}");
        assert!(Budgets::parse("[other]\n", "virt").is_err());
    }

    /// A minimal ELF32 with `.text` (PROGBITS, AX), `.data` (PROGBITS, WA), `.bss`
    /// (NOBITS, WA), `.stack` (NOBITS, WA) and a non-alloc `.comment`.
    fn synthetic_elf() -> Vec<u8> {
        let names = b"\0.text\0.data\0.bss\0.stack\0.comment\0.shstrtab\0";
        let name_at = |n: &str| {
            names
                .windows(n.len())
                .position(|w| w == n.as_bytes())
                .unwrap() as u32
        };
        let mut b = vec![0u8; 52];
        b[..6].copy_from_slice(b"\x7fELF\x01\x01");
        let strtab_off = b.len() as u32;
        b.extend_from_slice(names);
        let shoff = b.len() as u32;
        // (name, type, flags, size)
        let sections: [(u32, u32, u32, u32); 7] = [
            (0, 0, 0, 0),
            (name_at(".text"), SHT_PROGBITS, SHF_ALLOC | 0x4, 1000),
            (name_at(".data"), SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, 16),
            (name_at(".bss"), SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 300),
            (name_at(".stack"), SHT_NOBITS, SHF_ALLOC | SHF_WRITE, 9999),
            (name_at(".comment"), SHT_PROGBITS, 0, 77),
            (name_at(".shstrtab"), 3, 0, names.len() as u32),
        ];
        for (i, (name, ty, flags, size)) in sections.into_iter().enumerate() {
            let mut h = [0u8; 40];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&ty.to_le_bytes());
            h[8..12].copy_from_slice(&flags.to_le_bytes());
            let off = if i == 6 { strtab_off } else { 0 };
            h[0x10..0x14].copy_from_slice(&off.to_le_bytes());
            h[0x14..0x18].copy_from_slice(&size.to_le_bytes());
            b.extend_from_slice(&h);
        }
        b[0x20..0x24].copy_from_slice(&shoff.to_le_bytes());
        b[0x2E..0x30].copy_from_slice(&40u16.to_le_bytes());
        b[0x30..0x32].copy_from_slice(&7u16.to_le_bytes());
        b[0x32..0x34].copy_from_slice(&6u16.to_le_bytes());
        b
    }

    #[test]
    fn elf_reader_sums_flash_and_ram_sections() {
        let sizes = section_sizes(&synthetic_elf()).unwrap();
        // Flash: .text + .data's image; RAM: .data + .bss, not the .stack placeholder.
        assert_eq!(
            sizes,
            Sizes {
                flash: 1016,
                ram: 316
            }
        );
        let truncated = &synthetic_elf()[..100];
        assert!(section_sizes(truncated).unwrap_err().contains("truncated"));
    }

    #[test]
    fn elf_reader_rejects_non_elf() {
        assert!(section_sizes(b"not an elf").unwrap_err().contains("magic"));
        assert!(section_sizes(b"\x7fELF\x02\x01")
            .unwrap_err()
            .contains("32-bit"));
    }
}
