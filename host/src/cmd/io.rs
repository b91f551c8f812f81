//! What every subcommand needs for input and output: buffered output written at once,
//! dump files read with the file name in errors, and address ranges parsed.

use std::path::PathBuf;

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
