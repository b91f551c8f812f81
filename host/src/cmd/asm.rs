//! `nmcp asm` and `nmcp disasm`: NMC text <-> binary.
//!
//! The binary is a small container ("NMCB", little-endian) so one file can hold loose
//! instruction words and macro-commands in source order:
//!
//! ```text
//! offset size
//!  0     4    magic "NMCB"
//!  4     2    version (1)
//!  6     2    record count
//!  8     ...  records: kind u8 (1 = instruction words, 2 = macro-command),
//!             3 reserved zero bytes, payload length u32, payload
//! ```
//!
//! An instruction-word record holds consecutive loose instructions as LE u32 words; a
//! macro-command record holds one macro-command in its own binary form ("NMCM").
//! `disasm` also reads a bare macro-command file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use nmcp_isa::asm::{write_instr, write_macro, Assembler, Item};
use nmcp_isa::nmc::{Instr, MacroCommand, INSTR_BYTES, MACRO_MAGIC, MAX_MACRO_BYTES};

use super::CmdResult;

/// Container magic, little-endian "NMCB".
pub const CONTAINER_MAGIC: u32 = u32::from_le_bytes(*b"NMCB");
/// Container version.
pub const CONTAINER_VERSION: u16 = 1;
/// Bytes before the first record.
const CONTAINER_HEADER_BYTES: usize = 8;
/// Bytes of a record header.
const RECORD_HEADER_BYTES: usize = 8;
/// Record kind: instruction words.
const KIND_WORDS: u8 = 1;
/// Record kind: one macro-command.
const KIND_MACRO: u8 = 2;

/// Arguments of `nmcp asm`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AsmArgs {
    /// Source text: instructions and/or `.macro` ... `.end` blocks.
    pub file: PathBuf,
    /// Output file [default: FILE with extension .nmcb; with --hex: standard output].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Write hex text instead of binary: one instruction word per line (8 hex digits,
    /// with its disassembly as a `;` comment) and one `macro HEXBYTES` line per
    /// macro-command.
    #[arg(long)]
    pub hex: bool,
}

/// Arguments of `nmcp disasm`.
#[derive(clap::Args, Debug, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DisasmArgs {
    /// Binary file: an NMCB container (from `nmcp asm`) or a bare macro-command.
    #[arg()]
    pub file: Option<PathBuf>,
    /// Instruction word(s) to disassemble, hexadecimal (0x...) or decimal.
    #[arg(long, value_parser = parse_word)]
    #[serde(default, deserialize_with = "word::many")]
    pub word: Vec<u32>,
    /// Output file [default: standard output].
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

fn parse_word(s: &str) -> Result<u32, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(&hex.replace('_', ""), 16),
        None => t.parse::<u32>(),
    };
    parsed.map_err(|e| format!("{s:?} is not a 32-bit word: {e}"))
}

/// Runs `nmcp asm`.
pub fn run_asm(args: AsmArgs) -> CmdResult {
    let name = args.file.display().to_string();
    let text = super::io::read_input_text(&args.file)?;
    let items = Assembler::new(&text)
        .collect::<Result<Vec<Item>, _>>()
        .map_err(|e| format!("{name}:{e}"))?;
    if args.hex {
        let out = hex_text(&items)?;
        return write_out(args.output.as_deref(), out.as_bytes());
    }
    let bytes = container(&items)?;
    let path = args
        .output
        .unwrap_or_else(|| args.file.with_extension("nmcb"));
    super::io::write_file(&path, &bytes)?;
    Ok(())
}

/// Runs `nmcp disasm`.
pub fn run_disasm(args: DisasmArgs) -> CmdResult {
    let mut out = String::new();
    if let Some(file) = &args.file {
        let name = file.display().to_string();
        let bytes = super::io::read_input(file, super::io::MAX_BINARY_INPUT)?;
        disassemble(&bytes, &mut out).map_err(|e| format!("{name}: {e}"))?;
    }
    for w in &args.word {
        let i = Instr::decode(*w).map_err(|e| format!("word {w:#010x}: {e}"))?;
        write_instr(&mut out, &i)?;
        out.push('\n');
    }
    write_out(args.output.as_deref(), out.as_bytes())
}

fn write_out(path: Option<&Path>, bytes: &[u8]) -> CmdResult {
    match path {
        Some(p) => super::io::write_file(p, bytes)?,
        None => super::io::write_stdout_bytes(bytes),
    }
    Ok(())
}

fn macro_bytes(m: &MacroCommand) -> Result<Vec<u8>, String> {
    let mut buf = [0u8; MAX_MACRO_BYTES];
    let n = m.encode(&mut buf).map_err(|e| e.to_string())?;
    Ok(buf[..n].to_vec())
}

/// Groups consecutive loose instructions into one record each.
fn records(items: &[Item]) -> Result<Vec<(u8, Vec<u8>)>, String> {
    let mut recs: Vec<(u8, Vec<u8>)> = Vec::new();
    for item in items {
        match item {
            Item::Instr(i) => {
                let w = i.encode().to_le_bytes();
                match recs.last_mut() {
                    Some((KIND_WORDS, payload)) => payload.extend_from_slice(&w),
                    _ => recs.push((KIND_WORDS, w.to_vec())),
                }
            }
            Item::Macro(m) => recs.push((KIND_MACRO, macro_bytes(m)?)),
        }
    }
    Ok(recs)
}

/// The NMCB container of `items`.
pub fn container(items: &[Item]) -> Result<Vec<u8>, String> {
    let recs = records(items)?;
    let count = u16::try_from(recs.len())
        .map_err(|_| format!("{} records, a container holds at most 65535", recs.len()))?;
    let mut out = Vec::new();
    out.extend_from_slice(&CONTAINER_MAGIC.to_le_bytes());
    out.extend_from_slice(&CONTAINER_VERSION.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    for (kind, payload) in recs {
        let len = u32::try_from(payload.len()).map_err(|_| "record too large".to_string())?;
        out.extend_from_slice(&[kind, 0, 0, 0]);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&payload);
    }
    Ok(out)
}

fn hex_text(items: &[Item]) -> Result<String, String> {
    let mut out = String::new();
    for item in items {
        match item {
            Item::Instr(i) => {
                let _ = write!(out, "{:08x}  ; ", i.encode());
                let _ = write_instr(&mut out, i);
                out.push('\n');
            }
            Item::Macro(m) => {
                out.push_str("macro ");
                for b in macro_bytes(m)? {
                    let _ = write!(out, "{b:02x}");
                }
                out.push('\n');
            }
        }
    }
    Ok(out)
}

fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Writes the text of a container or bare macro-command; errors name the byte offset.
pub fn disassemble(bytes: &[u8], out: &mut String) -> Result<(), String> {
    let magic = read_u32(bytes, 0).ok_or_else(|| {
        format!(
            "offset 0: file has {} bytes, too short for a container or macro-command",
            bytes.len()
        )
    })?;
    if magic == MACRO_MAGIC {
        let m = MacroCommand::decode(bytes).map_err(|e| e.to_string())?;
        let _ = write_macro(out, &m);
        return Ok(());
    }
    if magic != CONTAINER_MAGIC {
        return Err(format!(
            "offset 0: magic {magic:#010x} is neither \"NMCB\" (container) nor \"NMCM\" (macro-command)"
        ));
    }
    let header = bytes
        .get(..CONTAINER_HEADER_BYTES)
        .ok_or_else(|| format!("offset {}: truncated container header", bytes.len()))?;
    let version = u16::from_le_bytes([header[4], header[5]]);
    if version != CONTAINER_VERSION {
        return Err(format!(
            "offset 4: container version {version}, this build reads {CONTAINER_VERSION}"
        ));
    }
    let count = u16::from_le_bytes([header[6], header[7]]);
    let mut at = CONTAINER_HEADER_BYTES;
    for rec in 0..count {
        let h = bytes.get(at..at + RECORD_HEADER_BYTES).ok_or_else(|| {
            format!(
                "offset {at}: record {rec}: truncated record header (file ends at {})",
                bytes.len()
            )
        })?;
        let kind = h[0];
        if h[1..4] != [0, 0, 0] {
            return Err(format!(
                "offset {}: record {rec}: reserved bytes not zero",
                at + 1
            ));
        }
        let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
        let start = at + RECORD_HEADER_BYTES;
        let payload = start
            .checked_add(len)
            .and_then(|end| bytes.get(start..end))
            .ok_or_else(|| {
                format!(
                    "offset {start}: record {rec}: payload of {len} bytes runs past the end of the file ({} bytes)",
                    bytes.len()
                )
            })?;
        match kind {
            KIND_WORDS => {
                if !len.is_multiple_of(INSTR_BYTES) {
                    return Err(format!(
                        "offset {}: record {rec}: {len} bytes is not a whole number of instruction words",
                        at + 4
                    ));
                }
                for (n, w) in payload.chunks_exact(INSTR_BYTES).enumerate() {
                    let word = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    let off = start + n * INSTR_BYTES;
                    let i = Instr::decode(word)
                        .map_err(|e| format!("offset {off}: word {word:#010x}: {e}"))?;
                    let _ = write_instr(out, &i);
                    out.push('\n');
                }
            }
            KIND_MACRO => {
                let m = MacroCommand::decode(payload).map_err(|e| {
                    format!("record {rec} (macro-command at offset {start}): {e}")
                })?;
                let _ = write_macro(out, &m);
            }
            other => {
                return Err(format!(
                    "offset {at}: record {rec}: unknown kind {other} (1 = instruction words, 2 = macro-command)"
                ))
            }
        }
        at = start + len;
    }
    if at != bytes.len() {
        return Err(format!(
            "offset {at}: {} bytes after the last record",
            bytes.len() - at
        ));
    }
    Ok(())
}

crate::scenario::parsed!(mod word = parse_word => u32);

impl crate::scenario::Options for AsmArgs {}

impl crate::scenario::Options for DisasmArgs {
    const RELATIONS: &'static [crate::scenario::Relation] = &[
        crate::scenario::Relation::RequiredUnless("file", "word"),
        crate::scenario::Relation::Conflicts("file", "word"),
    ];
}
