//! A macro-command kept in its binary form, patched in place between submissions.
//!
//! A sequencer that runs the same program over many tensors (LAMB: three programs, four
//! submissions per tensor) changes only each phase's base row and the column count from
//! one submission to the next. Building, validating and encoding the whole command every
//! time cost the CP ~590 rv32imac instructions plus ~37 per instruction word (board
//! profile, docs/calibration.md); with the command encoded once per step, a submission
//! writes five or six 32-bit fields and the platform copies the bytes to the engine's
//! command window.
//!
//! The invariant that makes the patching safe: the bytes always decode to a command that
//! passes [`MacroCommand::validate`]. They are produced by [`MacroCommand::encode`] (which
//! validates), and the setters only touch fields validation constrains locally (a phase's
//! base row: any value; the column count: non-zero, no overflow past `col_start`), checking
//! those constraints themselves.

use core::fmt;

use super::macro_cmd::{
    MacroCommand, MacroEncodeError, ValidationError, MACRO_HEADER_BYTES, MAX_MACRO_BYTES,
    PHASE_BYTES,
};

/// Offset of `col_start` in the binary form.
const COL_START_AT: usize = 16;
/// Offset of `col_count` in the binary form.
const COL_COUNT_AT: usize = 20;
/// Offset of the phase count.
const PHASE_COUNT_AT: usize = 6;
/// Offset of the program length.
const PROGRAM_LEN_AT: usize = 7;

/// Why a field of an [`EncodedMacroCommand`] could not be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PatchError {
    /// Nothing has been encoded yet.
    Empty,
    /// The command has fewer phases.
    NoSuchPhase {
        /// The phase asked for.
        phase: usize,
        /// Phases the command has.
        count: usize,
    },
    /// The new value would make the command invalid (zero columns, or columns past
    /// `u32::MAX`).
    Invalid(ValidationError),
}

impl fmt::Display for PatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => f.write_str("no macro-command encoded yet"),
            Self::NoSuchPhase { phase, count } => {
                write!(f, "phase {phase} of a macro-command with {count} phases")
            }
            Self::Invalid(e) => write!(f, "patched macro-command would be invalid: {e}"),
        }
    }
}

impl core::error::Error for PatchError {}

/// A validated macro-command in its binary form (see [`super::macro_cmd`] for the layout),
/// with setters for the fields that change between submissions of one program.
///
/// Word-aligned, so that copying it to a command window is a word copy.
#[derive(Clone, PartialEq, Eq)]
#[repr(C, align(4))]
pub struct EncodedMacroCommand {
    bytes: [u8; MAX_MACRO_BYTES],
    /// Bytes in use; 0 before the first [`Self::encode_from`].
    len: u8,
}

impl fmt::Debug for EncodedMacroCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodedMacroCommand")
            .field("bytes", &self.as_bytes())
            .finish()
    }
}

impl Default for EncodedMacroCommand {
    fn default() -> Self {
        Self::empty()
    }
}

// The length fits the `u8` it is kept in.
const _: () = assert!(MAX_MACRO_BYTES <= u8::MAX as usize);

impl EncodedMacroCommand {
    /// Nothing encoded: [`Self::as_bytes`] is empty and every setter fails.
    pub const fn empty() -> Self {
        Self {
            bytes: [0; MAX_MACRO_BYTES],
            len: 0,
        }
    }

    /// `cmd`, validated and encoded.
    ///
    /// # Errors
    /// [`MacroEncodeError::Invalid`] if `cmd` does not validate.
    pub fn new(cmd: &MacroCommand) -> Result<Self, MacroEncodeError> {
        let mut e = Self::empty();
        e.encode_from(cmd)?;
        Ok(e)
    }

    /// Replaces the contents with `cmd`, validated and encoded, in place (no temporaries:
    /// firmware stacks are small).
    ///
    /// # Errors
    /// [`MacroEncodeError::Invalid`] if `cmd` does not validate; the contents are then
    /// empty.
    pub fn encode_from(&mut self, cmd: &MacroCommand) -> Result<(), MacroEncodeError> {
        self.len = 0;
        let n = cmd.encode(&mut self.bytes)?;
        // `encode` wrote at most `MAX_MACRO_BYTES`, which fits (asserted above).
        self.len = n as u8;
        Ok(())
    }

    /// The binary form (empty before the first encode).
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..usize::from(self.len)).unwrap_or(&[])
    }

    /// Phases of the command (0 when empty).
    pub fn phase_count(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            usize::from(self.bytes[PHASE_COUNT_AT])
        }
    }

    /// Instruction words of the command (0 when empty).
    pub fn program_len(&self) -> usize {
        if self.len == 0 {
            0
        } else {
            usize::from(self.bytes[PROGRAM_LEN_AT])
        }
    }

    /// Sets phase `phase`'s base row.
    ///
    /// # Errors
    /// [`PatchError::Empty`], [`PatchError::NoSuchPhase`].
    pub fn set_base_row(&mut self, phase: usize, row: u32) -> Result<(), PatchError> {
        let count = self.phase_count();
        if self.len == 0 {
            return Err(PatchError::Empty);
        }
        if phase >= count {
            return Err(PatchError::NoSuchPhase { phase, count });
        }
        self.put_u32(MACRO_HEADER_BYTES + phase * PHASE_BYTES, row);
        Ok(())
    }

    /// Sets the column count, with the checks [`MacroCommand::validate`] makes of it.
    ///
    /// # Errors
    /// [`PatchError::Empty`]; [`PatchError::Invalid`] with
    /// [`ValidationError::NoColumns`] or [`ValidationError::ColumnOverflow`].
    pub fn set_col_count(&mut self, col_count: u32) -> Result<(), PatchError> {
        if self.len == 0 {
            return Err(PatchError::Empty);
        }
        if col_count == 0 {
            return Err(PatchError::Invalid(ValidationError::NoColumns));
        }
        let col_start = self.get_u32(COL_START_AT);
        if col_start.checked_add(col_count).is_none() {
            return Err(PatchError::Invalid(ValidationError::ColumnOverflow {
                col_start,
                col_count,
            }));
        }
        self.put_u32(COL_COUNT_AT, col_count);
        Ok(())
    }

    fn get_u32(&self, at: usize) -> u32 {
        let mut w = [0u8; 4];
        if let Some(b) = self.bytes.get(at..at + 4) {
            w.copy_from_slice(b);
        }
        u32::from_le_bytes(w)
    }

    /// Writes a field inside the header or phase table (callers pass offsets below
    /// `MACRO_HEADER_BYTES + MAX_PHASES * PHASE_BYTES`, always inside `bytes`).
    fn put_u32(&mut self, at: usize, v: u32) {
        if let Some(b) = self.bytes.get_mut(at..at + 4) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nmc::{BankMode, ChannelRange, Instr, Phase, MAX_PHASES, MAX_PROGRAM};
    use proptest::prelude::*;

    fn command(phases: u8, col_start: u32) -> MacroCommand {
        let mut program = heapless::Vec::<Instr, MAX_PROGRAM>::new();
        let mut ph = heapless::Vec::<Phase, MAX_PHASES>::new();
        for p in 0..phases {
            program.push(Instr::Nop).unwrap();
            ph.push(Phase {
                base_row: u32::from(p) * 10,
                first: p,
                len: 1,
            })
            .unwrap();
        }
        MacroCommand {
            channels: ChannelRange { first: 0, count: 4 },
            mode: BankMode::AllBank,
            col_start,
            col_count: 7,
            chunk: 4,
            phases: ph,
            program,
        }
    }

    #[test]
    fn an_empty_command_refuses_every_patch() {
        let mut e = EncodedMacroCommand::empty();
        assert!(e.as_bytes().is_empty());
        assert_eq!(e.set_base_row(0, 1), Err(PatchError::Empty));
        assert_eq!(e.set_col_count(1), Err(PatchError::Empty));
        assert_eq!((e.phase_count(), e.program_len()), (0, 0));
    }

    #[test]
    fn an_invalid_command_is_not_encoded_and_leaves_it_empty() {
        let mut e = EncodedMacroCommand::new(&command(2, 0)).unwrap();
        let mut bad = command(2, 0);
        bad.col_count = 0;
        assert_eq!(
            e.encode_from(&bad),
            Err(MacroEncodeError::Invalid(ValidationError::NoColumns))
        );
        assert!(e.as_bytes().is_empty());
    }

    #[test]
    fn patches_are_checked_as_validation_checks_them() {
        let mut e = EncodedMacroCommand::new(&command(3, u32::MAX - 9)).unwrap();
        let before = e.clone();
        assert_eq!(
            e.set_base_row(3, 5),
            Err(PatchError::NoSuchPhase { phase: 3, count: 3 })
        );
        assert_eq!(
            e.set_col_count(0),
            Err(PatchError::Invalid(ValidationError::NoColumns))
        );
        assert_eq!(
            e.set_col_count(10),
            Err(PatchError::Invalid(ValidationError::ColumnOverflow {
                col_start: u32::MAX - 9,
                col_count: 10
            }))
        );
        // A refused patch changes nothing.
        assert_eq!(e, before);
        assert_eq!(e.set_col_count(9), Ok(()));
    }

    proptest! {
        /// The patched bytes are exactly what encoding the command with those fields set
        /// gives, so they always decode to a valid command.
        #[test]
        fn patched_bytes_equal_a_fresh_encoding(
            phases in 1u8..=8,
            rows in proptest::collection::vec(any::<u32>(), 8),
            cols in 1u32..=u32::MAX - 100,
            col_start in 0u32..100,
        ) {
            let mut cmd = command(phases, col_start);
            let mut e = EncodedMacroCommand::new(&cmd).unwrap();
            for (i, r) in rows.iter().take(usize::from(phases)).enumerate() {
                e.set_base_row(i, *r).unwrap();
                cmd.phases[i].base_row = *r;
            }
            e.set_col_count(cols).unwrap();
            cmd.col_count = cols;
            let fresh = EncodedMacroCommand::new(&cmd).unwrap();
            prop_assert_eq!(e.as_bytes(), fresh.as_bytes());
            prop_assert_eq!(MacroCommand::decode(e.as_bytes()), Ok(cmd.clone()));
            prop_assert_eq!(e.phase_count(), usize::from(phases));
            prop_assert_eq!(e.program_len(), cmd.program.len());
        }
    }
}
