//! What every subcommand needs for input and output: the run's files (every input read
//! once, bounded in size and remembered; every output written whole or not at all and
//! never over an input), standard output whose failures are reported rather than
//! panicking, dump files read with the file name in errors, and address ranges parsed.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nmcp_emulator::gpu::queue::QueueDump;
use nmcp_isa::aql::DeviceRange;

use super::CmdResult;

/// Appends a line to a `String` buffer (output is written at once by [`emit`]).
macro_rules! outln {
    ($out:expr, $($arg:tt)*) => {{
        let _ = writeln!($out, $($arg)*);
    }};
}
pub(crate) use outln;

/// Writes a command's output (see [`write_stdout`]).
pub fn emit(text: &str) -> CmdResult {
    write_stdout(format_args!("{text}"));
    Ok(())
}

/// The first error writing standard output, if any (later writes are skipped).
static STDOUT_ERROR: Mutex<Option<std::io::Error>> = Mutex::new(None);

/// Writes to standard output. `println!` panics when stdout cannot be written (a full
/// device, a closed descriptor); every command's output goes through here instead
/// (`stdoutln!`), and the first failure is kept for [`finish_stdout`] to report once
/// the command is done.
pub fn write_stdout(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut failed = STDOUT_ERROR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if failed.is_none() {
        if let Err(e) = std::io::stdout().lock().write_fmt(args) {
            *failed = Some(e);
        }
    }
}

/// [`write_stdout`] for bytes (binary output such as `nmcp asm -o -`).
pub fn write_stdout_bytes(bytes: &[u8]) {
    use std::io::Write;
    let mut failed = STDOUT_ERROR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if failed.is_none() {
        if let Err(e) = std::io::stdout().lock().write_all(bytes) {
            *failed = Some(e);
        }
    }
}

/// Flushes standard output and says whether everything written reached it: `Ok` also
/// when the reader closed the pipe (`nmcp ... | head` ends quietly, as Unix tools do;
/// with SIGPIPE at its default action the process usually ends on the signal first),
/// `Err` with the reason for any other failure (e.g. `No space left on device`).
///
/// # Errors
/// `stdout: cannot write: ...`.
pub fn finish_stdout() -> Result<(), String> {
    use std::io::Write;
    let mut failed = STDOUT_ERROR
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if failed.is_none() {
        if let Err(e) = std::io::stdout().lock().flush() {
            *failed = Some(e);
        }
    }
    match failed.as_ref() {
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(format!("stdout: cannot write: {e}"))
        }
        _ => Ok(()),
    }
}

/// The largest text input read whole (TOML, CSV, JSON, assembly): 64 MiB, far above any
/// real preset, scenario, GEMM list or predictor, low enough that `/dev/zero` or an
/// endless pipe is refused in well under a second.
pub const MAX_TEXT_INPUT: u64 = 64 << 20;

/// The largest binary input read whole (queue dumps, NMC binaries, `.npy` arrays): 4 GiB
/// (a GPT-3-size tensor's largest array is under 1 GiB). `--max-memory` caps lower.
pub const MAX_BINARY_INPUT: u64 = 4 << 30;

/// What identifies an input file: its canonical path, and on Unix its device and inode
/// (so a hard link or another spelling of the same file is recognised too).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileId {
    path: PathBuf,
    inode: Option<(u64, u64)>,
}

fn file_id(path: &Path) -> Option<FileId> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    };
    #[cfg(not(unix))]
    let inode = {
        let _ = meta;
        None
    };
    Some(FileId {
        path: std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        inode,
    })
}

/// Every file this run reads, in the order first read, with the name the user gave.
static INPUTS: Mutex<Vec<(FileId, PathBuf)>> = Mutex::new(Vec::new());

/// Records `path` as an input of this run: [`write_file`] then refuses to replace it.
/// Readers that stream a file (traces) call this; [`read_input`] calls it itself.
pub fn note_input(path: &Path) {
    if let Some(id) = file_id(path) {
        let mut inputs = INPUTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !inputs.iter().any(|(i, _)| *i == id) {
            inputs.push((id, path.to_path_buf()));
        }
    }
}

/// The input `path` names, if it is one (same canonical path, or same device and inode).
fn input_named_by(path: &Path) -> Option<PathBuf> {
    let id = file_id(path)?;
    let inputs = INPUTS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    inputs
        .iter()
        .find(|(i, _)| i.path == id.path || (i.inode.is_some() && i.inode == id.inode))
        .map(|(_, given)| given.clone())
}

/// Refuses an output path that would replace a file this run reads, names a directory
/// or a symbolic link to nothing, or lies in a directory that does not exist.
///
/// # Errors
/// `OUT: is an input of this run (read as IN); write the output elsewhere`, `OUT: is a
/// directory ...`, `OUT: is a symbolic link to nothing ...`, `OUT: cannot write: the
/// directory D does not exist; create it first`.
pub fn check_output(path: &Path) -> Result<(), String> {
    if let Some(input) = input_named_by(path) {
        return Err(format!(
            "{}: is an input of this run (read as {}); refusing to overwrite it: write the output elsewhere",
            path.display(),
            input.display()
        ));
    }
    if path.is_dir() {
        return Err(format!(
            "{}: is a directory; name a file for the output",
            path.display()
        ));
    }
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) && !path.exists() {
        return Err(format!(
            "{}: is a symbolic link to nothing (its target is missing); name a file for the output",
            path.display()
        ));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let why = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(format!(
            "{}: cannot write: the directory {} {why}; create it first",
            path.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Where an output goes: a symbolic link is followed to its target (so the link stays
/// a link and the file it names is replaced), and an existing pipe, device or socket is
/// written in place (`--out /dev/stdout`, `>(gzip > f)`), since renaming a file over it
/// would destroy it and its reader would get nothing.
enum Destination {
    /// A regular file (or none yet): staged and renamed, whole or not at all.
    File(PathBuf),
    /// A pipe, device or socket: opened and written.
    Stream(PathBuf),
}

fn destination(path: &Path) -> Destination {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
        }
        _ => path.to_path_buf(),
    };
    match std::fs::metadata(&target) {
        Ok(m) if !m.is_file() && !m.is_dir() => Destination::Stream(target),
        _ => Destination::File(target),
    }
}

/// Writes `bytes` to `path` as [`destination`] says.
fn write_to(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    match destination(path) {
        Destination::File(p) => write_atomic(&p, bytes),
        Destination::Stream(p) => {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).open(p)?;
            f.write_all(bytes)?;
            f.flush()
        }
    }
}

/// Reads a whole input file once, at most `limit` bytes, and records it as an input.
/// A pipe or device is read once as it streams (so `<(cmd)` works); a directory, or
/// anything longer than `limit` (e.g. `/dev/zero`), is refused.
///
/// # Errors
/// `PATH: cannot read: ...`, `PATH: is a directory`, `PATH: larger than LIMIT bytes`.
pub fn read_input(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let what = |e: &dyn std::fmt::Display| format!("{}: cannot read: {e}", path.display());
    let file = std::fs::File::open(path).map_err(|e| what(&e))?;
    let meta = file.metadata().map_err(|e| what(&e))?;
    if meta.is_dir() {
        return Err(format!("{}: is a directory, not a file", path.display()));
    }
    let too_large = || {
        format!(
            "{}: larger than {limit} bytes, the limit for this input (is it the right file?)",
            path.display()
        )
    };
    if meta.is_file() && meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| what(&e))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    note_input(path);
    Ok(bytes)
}

/// [`read_input`] of a text file ([`MAX_TEXT_INPUT`]), as UTF-8.
///
/// # Errors
/// As [`read_input`]; `PATH: byte N: not UTF-8 text`.
pub fn read_input_text(path: &Path) -> Result<String, String> {
    let bytes = read_input(path, MAX_TEXT_INPUT)?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: byte {}: not UTF-8 text",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

/// Parses `BASE:LEN`, each hex (`0x...`) or decimal.
pub fn parse_range(s: &str) -> Result<DeviceRange, String> {
    let num = |t: &str| {
        let t = t.trim();
        match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            Some(h) => u64::from_str_radix(&h.replace('_', ""), 16),
            None => t.replace('_', "").parse(),
        }
        .map_err(|e| format!("{t:?}: {e}"))
    };
    let (b, l) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected BASE:LEN"))?;
    let (base, len) = (num(b)?, num(l)?);
    if len == 0 {
        return Err(format!("{s:?}: LEN 0 is an empty device"));
    }
    if base.checked_add(len).is_none() {
        return Err(format!(
            "{s:?}: BASE + LEN is past the 64-bit address space"
        ));
    }
    Ok(DeviceRange { base, len })
}

/// Reads and parses a dump file, with the file name in any error.
pub fn read_dump(file: &Path) -> Result<QueueDump, Box<dyn std::error::Error>> {
    let data = read_input(file, MAX_BINARY_INPUT)?;
    QueueDump::parse(&data).map_err(|e| format!("{}: {e}", file.display()).into())
}

/// Writes `bytes` to `path` whole or not at all: into a temporary file in the same
/// directory, flushed to disk, then renamed over `path`, so a run that is killed or fails
/// never leaves a half-written output (SPEC 8).
///
/// # Errors
/// The I/O error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    stage(path, bytes)?.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// `bytes` in a temporary file in `path`'s directory, flushed to disk, ready to be
/// renamed over `path`.
fn stage(path: &Path, bytes: &[u8]) -> std::io::Result<tempfile::NamedTempFile> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    // A temporary file is private (0600); the result is an ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))?;
    }
    tmp.as_file().sync_all()?;
    Ok(tmp)
}

/// The one way a command writes an output file: refused if it would replace an input of
/// the run or has no directory to go in ([`check_output`]), else [`write_atomic`] to the
/// file (a symbolic link's target), or written into an existing pipe or device
/// ([`destination`]); the path is in any error.
///
/// # Errors
/// `PATH: is an input of this run ...`, `PATH: cannot write: ...`.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    check_output(path)?;
    write_to(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))
}

/// Writes several output files all or none: each is checked ([`check_output`]) and
/// written to a temporary file next to it first, and only when every one is on disk are
/// they renamed into place (a failure before that leaves every old file as it was).
///
/// # Errors
/// As [`write_file`], naming the file.
pub fn write_files(files: &[(PathBuf, Vec<u8>)]) -> Result<(), String> {
    for (path, _) in files {
        check_output(path)?;
    }
    let mut staged = Vec::with_capacity(files.len());
    let mut streams = Vec::new();
    for (path, bytes) in files {
        match destination(path) {
            Destination::File(target) => {
                let tmp = stage(&target, bytes)
                    .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
                staged.push((tmp, target, path));
            }
            Destination::Stream(_) => streams.push((path, bytes)),
        }
    }
    for (tmp, target, path) in staged {
        tmp.persist(&target)
            .map_err(|e| format!("{}: cannot write: {}", path.display(), e.error))?;
    }
    for (path, bytes) in streams {
        write_to(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

/// A spinner on stderr with the elapsed time, for a step of a second or more that has no
/// countable parts (hidden when stderr is not a terminal, or when `hidden`, e.g. `--json`).
pub fn spinner(
    msg: impl Into<std::borrow::Cow<'static, str>>,
    hidden: bool,
) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new_spinner();
    if hidden || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
        return bar;
    }
    if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar.set_message(msg);
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}
