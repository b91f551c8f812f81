//! What every subcommand needs for input and output: buffered output written at once,
//! dump files read with the file name in errors, and address ranges parsed.

use std::path::{Path, PathBuf};

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

/// Writes a command's output; a closed pipe (`| head`) is not an error.
pub fn emit(text: &str) -> CmdResult {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
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
    Ok(DeviceRange {
        base: num(b)?,
        len: num(l)?,
    })
}

/// Reads and parses a dump file, with the file name in any error.
pub fn read_dump(file: &PathBuf) -> Result<QueueDump, Box<dyn std::error::Error>> {
    let data = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    QueueDump::parse(&data).map_err(|e| format!("{}: {e}", file.display()).into())
}

/// Writes `bytes` to `path` whole or not at all: into a temporary file in the same
/// directory, flushed to disk, then renamed over `path`, so a run that is killed or fails
/// never leaves a half-written output (SPEC 8).
///
/// # Errors
/// The I/O error.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
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
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// [`write_atomic`] with the path in the error.
///
/// # Errors
/// `PATH: cannot write: ...`.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_atomic(path, bytes).map_err(|e| format!("{}: cannot write: {e}", path.display()))
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
