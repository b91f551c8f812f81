//! NMC macro-command: what the firmware issues and a per-channel engine expands into DRAM
//! commands.
//!
//! A scalar command processor cannot issue a DRAM command every few nanoseconds on every
//! channel, so one macro-command describes a whole streaming pass over a tensor slice and
//! the memory-side engine generates ACT/PRE/column commands under full DRAM timing.
//!
//! # Binary layout (version 1, little-endian)
//!
//! ```text
//! offset size field
//!  0     4    magic "NMCM"
//!  4     2    version (1)
//!  6     1    phase count P (1..=8)
//!  7     1    program length N (1..=32)
//!  8     2    first pseudo-channel
//! 10     2    pseudo-channel count
//! 12     1    mode: 0 all-bank, 1 single-bank
//! 13     1    bank group (0 in all-bank mode)
//! 14     1    bank (0 in all-bank mode)
//! 15     1    chunk (columns per row visit)
//! 16     4    col_start
//! 20     4    col_count
//! 24     8*P  phases: base_row u32, first u8, len u8, reserved u16 (0)
//! 24+8P  4*N  instruction words
//! ```
//!
//! Decoding checks the layout and then [`MacroCommand::validate`], so a decoded command is
//! always executable; encoding validates too, so nothing invalid reaches the wire.

use core::fmt;

use heapless::Vec;

use crate::le::{LeReader, LeWriter, OutOfBounds};

use super::encoding::{DecodeError, INSTR_BYTES};
use super::instr::Instr;
use super::operand::MAX_JUMP_TAKEN;

/// Phases per macro-command.
pub const MAX_PHASES: usize = 8;
/// Instructions per macro-command (the engine's instruction store).
pub const MAX_PROGRAM: usize = 32;
/// Largest chunk (columns per row visit); the engine also bounds it by TS capacity.
pub const MAX_CHUNK: u8 = 64;
/// Magic of the binary form, little-endian "NMCM".
pub const MACRO_MAGIC: u32 = u32::from_le_bytes(*b"NMCM");
/// Layout version this crate writes and reads.
pub const MACRO_VERSION: u16 = 1;
/// Bytes before the phase table.
pub const MACRO_HEADER_BYTES: usize = 24;
/// Bytes per phase-table entry.
pub const PHASE_BYTES: usize = 8;
/// Largest encoded macro-command.
pub const MAX_MACRO_BYTES: usize =
    MACRO_HEADER_BYTES + MAX_PHASES * PHASE_BYTES + MAX_PROGRAM * INSTR_BYTES;
/// Most instructions one block can execute for one column: every instruction once, plus
/// every loop body re-run at most [`MAX_JUMP_TAKEN`] times (bodies are disjoint).
pub const MAX_STEPS_PER_BLOCK: usize = MAX_PROGRAM * (MAX_JUMP_TAKEN as usize + 1);

const MODE_ALL_BANK: u8 = 0;
const MODE_SINGLE_BANK: u8 = 1;

/// A run of pseudo-channels the command is broadcast to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelRange {
    /// First pseudo-channel.
    pub first: u16,
    /// Number of pseudo-channels, >= 1.
    pub count: u16,
}

/// Which banks of each pseudo-channel execute the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BankMode {
    /// Every bank, in lockstep (broadcast column commands).
    AllBank,
    /// One bank (the engine checks the numbers against the device geometry).
    SingleBank {
        /// Bank group.
        bank_group: u8,
        /// Bank within the group.
        bank: u8,
    },
}

/// One pass of a chunk over one array: which row region it opens and which instructions it
/// runs per column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Phase {
    /// Bank-local row of the array's first element.
    pub base_row: u32,
    /// Index of the phase's first instruction in the program.
    pub first: u8,
    /// Number of instructions, >= 1.
    pub len: u8,
}

/// "Apply this short instruction sequence over these columns in these banks".
///
/// Execution, per bank (all banks of all named pseudo-channels in lockstep in all-bank
/// mode): the columns `col_start .. col_start + col_count` (bank-local linear column
/// indices, `row * cols_per_row + col`) are cut into chunks of `chunk` columns (the last
/// may be shorter). For each chunk, for each phase in order, for each column `k` of the
/// chunk (`c = chunk start + k`): the bank's row is
/// `phase.base_row + (col_start + c) / cols_per_row`, its column
/// `(col_start + c) % cols_per_row`, and the instructions
/// `program[first .. first + len]` run with MEM = that column and TS slot `s` = TS entry
/// `s * chunk + k`. A JUMP repeats part of the block for the same column; EXIT ends the
/// block for that column. So every phase of a chunk sees the same column positions, which
/// is what page-aligned allocation guarantees for arrays of one tensor, and TS carries
/// values from one phase to the next.
///
/// The program is the concatenation of the phase blocks in phase order (see
/// [`MacroCommand::validate`]); `first` is kept so the engine can index blocks directly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct MacroCommand {
    /// Pseudo-channels.
    pub channels: ChannelRange,
    /// All-bank or single-bank.
    pub mode: BankMode,
    /// Bank-local linear column index of the first element.
    pub col_start: u32,
    /// Columns (32-byte units) to process per bank, >= 1.
    pub col_count: u32,
    /// Columns per row visit, 1..=[`MAX_CHUNK`].
    pub chunk: u8,
    /// The phases, in execution order, >= 1.
    pub phases: Vec<Phase, MAX_PHASES>,
    /// The instruction store.
    pub program: Vec<Instr, MAX_PROGRAM>,
}

/// Why a macro-command cannot execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ValidationError {
    /// The channel count is 0.
    NoChannels,
    /// first + count exceeds the 16-bit channel space.
    ChannelOverflow {
        /// First channel.
        first: u16,
        /// Count.
        count: u16,
    },
    /// col_count is 0.
    NoColumns,
    /// col_start + col_count exceeds the 32-bit column space.
    ColumnOverflow {
        /// col_start.
        col_start: u32,
        /// col_count.
        col_count: u32,
    },
    /// chunk is 0 or above [`MAX_CHUNK`].
    ChunkOutOfRange {
        /// The chunk.
        chunk: u8,
    },
    /// No phases.
    NoPhases,
    /// No instructions.
    EmptyProgram,
    /// A phase has no instructions.
    EmptyPhase {
        /// Phase index.
        phase: u8,
    },
    /// A phase does not start where the previous one ended.
    PhaseNotContiguous {
        /// Phase index.
        phase: u8,
        /// Where it had to start.
        expected_first: u8,
        /// Where it starts.
        first: u8,
    },
    /// The phases do not cover the whole program.
    ProgramNotCovered {
        /// Instructions covered by the phases.
        covered: u16,
        /// Program length.
        len: u8,
    },
    /// A JUMP lands before the first instruction of its phase.
    JumpOutsidePhase {
        /// Program index of the JUMP.
        index: u8,
        /// Phase index.
        phase: u8,
    },
    /// A loop body contains another JUMP (loops nest at most one level).
    NestedLoop {
        /// Program index of the outer JUMP.
        index: u8,
        /// Program index of the inner JUMP.
        inner: u8,
    },
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NoChannels => f.write_str("channel count is 0"),
            Self::ChannelOverflow { first, count } => {
                write!(f, "channels {first}+{count} exceed 65535")
            }
            Self::NoColumns => f.write_str("col_count is 0"),
            Self::ColumnOverflow {
                col_start,
                col_count,
            } => write!(f, "col_start {col_start} + col_count {col_count} overflow"),
            Self::ChunkOutOfRange { chunk } => {
                write!(f, "chunk {chunk} outside 1..={MAX_CHUNK}")
            }
            Self::NoPhases => f.write_str("no phases"),
            Self::EmptyProgram => f.write_str("empty program"),
            Self::EmptyPhase { phase } => write!(f, "phase {phase} has no instructions"),
            Self::PhaseNotContiguous {
                phase,
                expected_first,
                first,
            } => write!(
                f,
                "phase {phase} starts at instruction {first}, must start at {expected_first} \
                 (phases are the program's consecutive blocks)"
            ),
            Self::ProgramNotCovered { covered, len } => write!(
                f,
                "phases cover {covered} instructions, the program has {len}"
            ),
            Self::JumpOutsidePhase { index, phase } => {
                write!(f, "jump at instruction {index} leaves phase {phase}")
            }
            Self::NestedLoop { index, inner } => write!(
                f,
                "jump at instruction {index} loops over the jump at {inner} (loops do not nest)"
            ),
        }
    }
}

impl core::error::Error for ValidationError {}

/// Why bytes are not a macro-command. Offsets are from the start of the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum MacroDecodeError {
    /// The buffer ends before the command does.
    Truncated {
        /// Bytes the command needs (so far as known).
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// Wrong magic at offset 0.
    BadMagic {
        /// What was found.
        found: u32,
    },
    /// Unknown version at offset 4.
    BadVersion {
        /// What was found.
        found: u16,
    },
    /// Phase count at offset 6 above [`MAX_PHASES`].
    TooManyPhases {
        /// The count.
        count: u8,
    },
    /// Program length at offset 7 above [`MAX_PROGRAM`].
    ProgramTooLong {
        /// The length.
        len: u8,
    },
    /// Unknown mode at offset 12.
    BadMode {
        /// The value.
        value: u8,
    },
    /// A reserved byte is not zero.
    ReservedNotZero {
        /// Byte offset.
        offset: usize,
    },
    /// An instruction word does not decode.
    Instr {
        /// Byte offset of the word.
        offset: usize,
        /// Program index.
        index: u8,
        /// Why.
        error: DecodeError,
    },
    /// Bytes follow the command.
    TrailingBytes {
        /// Length of the command.
        len: usize,
        /// Bytes after it.
        extra: usize,
    },
    /// The layout is fine but the command cannot execute.
    Invalid(ValidationError),
}

impl fmt::Display for MacroDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Truncated { needed, available } => write!(
                f,
                "macro-command truncated: needs {needed} bytes, {available} present"
            ),
            Self::BadMagic { found } => write!(
                f,
                "offset 0: bad macro-command magic {found:#010x} (expected {MACRO_MAGIC:#010x} \"NMCM\")"
            ),
            Self::BadVersion { found } => write!(
                f,
                "offset 4: macro-command version {found}, this build reads {MACRO_VERSION}"
            ),
            Self::TooManyPhases { count } => {
                write!(f, "offset 6: {count} phases, at most {MAX_PHASES}")
            }
            Self::ProgramTooLong { len } => {
                write!(f, "offset 7: {len} instructions, at most {MAX_PROGRAM}")
            }
            Self::BadMode { value } => write!(
                f,
                "offset 12: mode {value}, expected 0 (all-bank) or 1 (single-bank)"
            ),
            Self::ReservedNotZero { offset } => {
                write!(f, "offset {offset}: reserved byte is not zero")
            }
            Self::Instr {
                offset,
                index,
                error,
            } => write!(f, "offset {offset}: instruction {index}: {error}"),
            Self::TrailingBytes { len, extra } => write!(
                f,
                "offset {len}: {extra} bytes after the end of the macro-command"
            ),
            Self::Invalid(e) => write!(f, "invalid macro-command: {e}"),
        }
    }
}

impl core::error::Error for MacroDecodeError {}

/// Why a macro-command could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum MacroEncodeError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The command cannot execute.
    Invalid(ValidationError),
}

impl fmt::Display for MacroEncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BufferTooSmall { needed, available } => write!(
                f,
                "macro-command needs {needed} bytes, buffer has {available}"
            ),
            Self::Invalid(e) => write!(f, "invalid macro-command: {e}"),
        }
    }
}

impl core::error::Error for MacroEncodeError {}

/// A JUMP that goes back past the start of its block, or a block that runs longer than
/// [`MAX_STEPS_PER_BLOCK`]; neither happens in a validated macro-command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ControlError {
    /// The JUMP at this block index targets an instruction before the block.
    JumpOutOfBlock {
        /// Index within the block.
        index: u8,
    },
    /// The block ran more steps than a valid block can.
    StepLimit,
}

impl fmt::Display for ControlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::JumpOutOfBlock { index } => {
                write!(f, "jump at block index {index} leaves the block")
            }
            Self::StepLimit => write!(f, "block exceeded {MAX_STEPS_PER_BLOCK} steps"),
        }
    }
}

impl core::error::Error for ControlError {}

/// The instructions one block executes for one column, in order, with JUMP and EXIT
/// resolved (they are not yielded). Loops follow the HBM-PIM command-RAM convention: a
/// JUMP's counter is loaded with `taken` when first reached, decremented each time the
/// jump is taken, and the JUMP falls through (clearing the counter) when it reaches 0.
/// Bounded by [`MAX_STEPS_PER_BLOCK`] even for an unvalidated block.
#[derive(Debug, Clone)]
pub struct BlockSteps<'a> {
    block: &'a [Instr],
    pc: usize,
    /// (block index of the active JUMP, jumps still to take)
    active: Option<(usize, u8)>,
    steps: usize,
    done: bool,
}

impl<'a> BlockSteps<'a> {
    /// Steps through `block`.
    pub fn new(block: &'a [Instr]) -> Self {
        Self {
            block,
            pc: 0,
            active: None,
            steps: 0,
            done: false,
        }
    }
}

impl<'a> Iterator for BlockSteps<'a> {
    type Item = Result<&'a Instr, ControlError>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let Some(instr) = self.block.get(self.pc) else {
                self.done = true;
                return None;
            };
            self.steps += 1;
            if self.steps > MAX_STEPS_PER_BLOCK {
                self.done = true;
                return Some(Err(ControlError::StepLimit));
            }
            match *instr {
                Instr::Exit => {
                    self.done = true;
                    return None;
                }
                Instr::Jump { back, taken } => {
                    let remaining = match self.active {
                        Some((at, rem)) if at == self.pc => rem,
                        _ => taken.get(),
                    };
                    if remaining == 0 {
                        self.active = None;
                        self.pc += 1;
                    } else {
                        let Some(target) = self.pc.checked_sub(usize::from(back.get())) else {
                            self.done = true;
                            let index = u8::try_from(self.pc).unwrap_or(u8::MAX);
                            return Some(Err(ControlError::JumpOutOfBlock { index }));
                        };
                        self.active = Some((self.pc, remaining - 1));
                        self.pc = target;
                    }
                }
                _ => {
                    self.pc += 1;
                    return Some(Ok(instr));
                }
            }
        }
        None
    }
}

/// A field read past the end of the buffer. Decoding checks lengths before it reads, so
/// this names the field's end as what the command needs.
impl From<OutOfBounds> for MacroDecodeError {
    fn from(e: OutOfBounds) -> Self {
        Self::Truncated {
            needed: e.at.saturating_add(e.width),
            available: e.len,
        }
    }
}

impl MacroCommand {
    /// Checks that the command can execute: non-zero counts, no overflow, chunk in range,
    /// phases are the program's consecutive blocks in order and cover it exactly, every
    /// JUMP lands inside its own phase, and no loop body contains another JUMP (so a
    /// block runs at most [`MAX_STEPS_PER_BLOCK`] steps per column).
    ///
    /// # Errors
    /// The first [`ValidationError`] found.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let ch = self.channels;
        if ch.count == 0 {
            return Err(ValidationError::NoChannels);
        }
        if u32::from(ch.first) + u32::from(ch.count) > u32::from(u16::MAX) + 1 {
            return Err(ValidationError::ChannelOverflow {
                first: ch.first,
                count: ch.count,
            });
        }
        if self.col_count == 0 {
            return Err(ValidationError::NoColumns);
        }
        if self.col_start.checked_add(self.col_count).is_none() {
            return Err(ValidationError::ColumnOverflow {
                col_start: self.col_start,
                col_count: self.col_count,
            });
        }
        if self.chunk == 0 || self.chunk > MAX_CHUNK {
            return Err(ValidationError::ChunkOutOfRange { chunk: self.chunk });
        }
        if self.phases.is_empty() {
            return Err(ValidationError::NoPhases);
        }
        if self.program.is_empty() {
            return Err(ValidationError::EmptyProgram);
        }
        let mut next: u16 = 0;
        for (pi, phase) in self.phases.iter().enumerate() {
            let pi = pi as u8; // < MAX_PHASES
            if phase.len == 0 {
                return Err(ValidationError::EmptyPhase { phase: pi });
            }
            if u16::from(phase.first) != next {
                return Err(ValidationError::PhaseNotContiguous {
                    phase: pi,
                    expected_first: u8::try_from(next).unwrap_or(u8::MAX),
                    first: phase.first,
                });
            }
            next += u16::from(phase.len);
            let block = self
                .block(phase)
                .ok_or(ValidationError::ProgramNotCovered {
                    covered: next,
                    len: self.program.len() as u8,
                })?;
            check_loops(block, phase.first, pi)?;
        }
        if usize::from(next) != self.program.len() {
            return Err(ValidationError::ProgramNotCovered {
                covered: next,
                len: self.program.len() as u8,
            });
        }
        Ok(())
    }

    /// The instructions of `phase`, if it lies inside the program.
    pub fn block(&self, phase: &Phase) -> Option<&[Instr]> {
        let first = usize::from(phase.first);
        self.program.get(first..first + usize::from(phase.len))
    }

    /// The highest TS slot any instruction names; the engine needs
    /// `(max_ts_slot + 1) * chunk` TS entries per bank.
    pub fn max_ts_slot(&self) -> Option<u8> {
        self.program.iter().filter_map(Instr::max_ts_slot).max()
    }

    /// TS entries per bank the command needs.
    pub fn ts_entries_needed(&self) -> usize {
        self.max_ts_slot()
            .map_or(0, |s| (usize::from(s) + 1) * usize::from(self.chunk))
    }

    /// Column slots one column of `phase` occupies: the slot costs of the instructions its
    /// block executes, loops unrolled. `None` if the phase is outside the program or its
    /// control flow is invalid.
    pub fn phase_slots_per_column(&self, phase: &Phase) -> Option<u32> {
        BlockSteps::new(self.block(phase)?).try_fold(0u32, |acc, step| {
            step.ok().map(|i| acc.saturating_add(i.column_slots()))
        })
    }

    /// Number of chunks the columns are cut into.
    pub fn chunk_count(&self) -> u32 {
        if self.chunk == 0 {
            return 0;
        }
        self.col_count.div_ceil(u32::from(self.chunk))
    }

    /// Bytes of the binary form.
    pub fn encoded_len(&self) -> usize {
        MACRO_HEADER_BYTES + self.phases.len() * PHASE_BYTES + self.program.len() * INSTR_BYTES
    }

    /// Writes the binary form into `buf`, returning its length.
    ///
    /// # Errors
    /// [`MacroEncodeError::Invalid`] if [`validate`](Self::validate) fails,
    /// [`MacroEncodeError::BufferTooSmall`] if `buf` is shorter than
    /// [`encoded_len`](Self::encoded_len).
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, MacroEncodeError> {
        self.validate().map_err(MacroEncodeError::Invalid)?;
        let needed = self.encoded_len();
        if buf.len() < needed {
            return Err(MacroEncodeError::BufferTooSmall {
                needed,
                available: buf.len(),
            });
        }
        let (mode, bank_group, bank) = match self.mode {
            BankMode::AllBank => (MODE_ALL_BANK, 0, 0),
            BankMode::SingleBank { bank_group, bank } => (MODE_SINGLE_BANK, bank_group, bank),
        };
        let available = buf.len();
        self.write_fields(&mut LeWriter::new(buf), mode, bank_group, bank)
            .map_err(|_| MacroEncodeError::BufferTooSmall { needed, available })?;
        Ok(needed)
    }

    /// Writes the header, the phases and the program front to back (the layout has no
    /// gaps; reserved bytes are written as zero).
    fn write_fields(
        &self,
        w: &mut LeWriter<'_>,
        mode: u8,
        bank_group: u8,
        bank: u8,
    ) -> Result<(), OutOfBounds> {
        w.put_u32(MACRO_MAGIC)?;
        w.put_u16(MACRO_VERSION)?;
        w.put_u8(self.phases.len() as u8)?;
        w.put_u8(self.program.len() as u8)?;
        w.put_u16(self.channels.first)?;
        w.put_u16(self.channels.count)?;
        w.put_bytes(&[mode, bank_group, bank, self.chunk])?;
        w.put_u32(self.col_start)?;
        w.put_u32(self.col_count)?;
        for p in &self.phases {
            w.put_u32(p.base_row)?;
            w.put_bytes(&[p.first, p.len, 0, 0])?;
        }
        for i in &self.program {
            w.put_u32(i.encode())?;
        }
        Ok(())
    }

    /// Reads a macro-command that fills `buf` exactly.
    ///
    /// # Errors
    /// See [`decode_prefix`](Self::decode_prefix); also
    /// [`MacroDecodeError::TrailingBytes`].
    pub fn decode(buf: &[u8]) -> Result<Self, MacroDecodeError> {
        let (cmd, len) = Self::decode_prefix(buf)?;
        if len != buf.len() {
            return Err(MacroDecodeError::TrailingBytes {
                len,
                extra: buf.len() - len,
            });
        }
        Ok(cmd)
    }

    /// Reads a macro-command from the start of `buf`, returning it and its length.
    ///
    /// # Errors
    /// [`MacroDecodeError`] saying what is wrong and at which byte offset.
    pub fn decode_prefix(buf: &[u8]) -> Result<(Self, usize), MacroDecodeError> {
        let truncated = |needed| MacroDecodeError::Truncated {
            needed,
            available: buf.len(),
        };
        let r = LeReader::new(buf);
        if buf.len() < 4 {
            return Err(truncated(MACRO_HEADER_BYTES));
        }
        let magic = r.u32_at(0)?;
        if magic != MACRO_MAGIC {
            return Err(MacroDecodeError::BadMagic { found: magic });
        }
        if buf.len() < MACRO_HEADER_BYTES {
            return Err(truncated(MACRO_HEADER_BYTES));
        }
        let version = r.u16_at(4)?;
        if version != MACRO_VERSION {
            return Err(MacroDecodeError::BadVersion { found: version });
        }
        let phase_count = r.u8_at(6)?;
        if usize::from(phase_count) > MAX_PHASES {
            return Err(MacroDecodeError::TooManyPhases { count: phase_count });
        }
        let program_len = r.u8_at(7)?;
        if usize::from(program_len) > MAX_PROGRAM {
            return Err(MacroDecodeError::ProgramTooLong { len: program_len });
        }
        let len = MACRO_HEADER_BYTES
            + usize::from(phase_count) * PHASE_BYTES
            + usize::from(program_len) * INSTR_BYTES;
        if buf.len() < len {
            return Err(truncated(len));
        }
        let mode = match r.u8_at(12)? {
            MODE_ALL_BANK => {
                for offset in [13, 14] {
                    if r.u8_at(offset)? != 0 {
                        return Err(MacroDecodeError::ReservedNotZero { offset });
                    }
                }
                BankMode::AllBank
            }
            MODE_SINGLE_BANK => BankMode::SingleBank {
                bank_group: r.u8_at(13)?,
                bank: r.u8_at(14)?,
            },
            value => return Err(MacroDecodeError::BadMode { value }),
        };
        let mut phases = Vec::new();
        let mut at = MACRO_HEADER_BYTES;
        for _ in 0..phase_count {
            for offset in [at + 6, at + 7] {
                if r.u8_at(offset)? != 0 {
                    return Err(MacroDecodeError::ReservedNotZero { offset });
                }
            }
            let phase = Phase {
                base_row: r.u32_at(at)?,
                first: r.u8_at(at + 4)?,
                len: r.u8_at(at + 5)?,
            };
            phases
                .push(phase)
                .map_err(|_| MacroDecodeError::TooManyPhases { count: phase_count })?;
            at += PHASE_BYTES;
        }
        let mut program = Vec::new();
        for index in 0..program_len {
            let instr = Instr::decode(r.u32_at(at)?).map_err(|error| MacroDecodeError::Instr {
                offset: at,
                index,
                error,
            })?;
            program
                .push(instr)
                .map_err(|_| MacroDecodeError::ProgramTooLong { len: program_len })?;
            at += INSTR_BYTES;
        }
        let cmd = Self {
            channels: ChannelRange {
                first: r.u16_at(8)?,
                count: r.u16_at(10)?,
            },
            mode,
            col_start: r.u32_at(16)?,
            col_count: r.u32_at(20)?,
            chunk: r.u8_at(15)?,
            phases,
            program,
        };
        cmd.validate().map_err(MacroDecodeError::Invalid)?;
        Ok((cmd, len))
    }
}

/// Checks the JUMPs of one block: each lands inside the block, and no loop body holds
/// another JUMP.
fn check_loops(block: &[Instr], first: u8, phase: u8) -> Result<(), ValidationError> {
    for (j, instr) in block.iter().enumerate() {
        let Instr::Jump { back, .. } = instr else {
            continue;
        };
        let index = first.saturating_add(j as u8);
        let Some(target) = j.checked_sub(usize::from(back.get())) else {
            return Err(ValidationError::JumpOutsidePhase { index, phase });
        };
        if let Some(inner) = block
            .get(target..j)
            .into_iter()
            .flatten()
            .position(|i| matches!(i, Instr::Jump { .. }))
        {
            return Err(ValidationError::NestedLoop {
                index,
                inner: first.saturating_add((target + inner) as u8),
            });
        }
    }
    Ok(())
}
