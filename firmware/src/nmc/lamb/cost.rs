//! The sequencer's work and its cost model: what it counts ([`SequencerWork`]) and what each
//! count costs on a firmware core ([`SequencerCostModel`]).

use super::*;

/// Work counters for charging the firmware's time. They count up across steps (a new
/// step does not reset them), so the work of a handler is a plain difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SequencerWork {
    /// Steps started.
    pub steps: u32,
    /// Handler calls: `start` and every `NmcDone` / `PartialsReady` the sequencer saw.
    pub handlers: u32,
    /// Of `handlers`, the `NmcDone`s that found nothing waiting for room in an engine
    /// and returned at once (a completion only frees room; results arrive as
    /// `PartialsReady`).
    pub idle_handlers: u32,
    /// Macro-commands submitted.
    pub macro_commands: u32,
    /// Instruction words in the submitted macro-commands (what encoding them costs).
    pub program_words: u32,
    /// Scalar-register writes.
    pub scalar_writes: u32,
    /// Reductions requested.
    pub reductions: u32,
    /// Descriptor bytes read from device memory.
    pub bytes_read: u32,
}

impl SequencerWork {
    /// Field-wise `self - earlier` (saturating).
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            steps: self.steps.saturating_sub(earlier.steps),
            handlers: self.handlers.saturating_sub(earlier.handlers),
            idle_handlers: self.idle_handlers.saturating_sub(earlier.idle_handlers),
            macro_commands: self.macro_commands.saturating_sub(earlier.macro_commands),
            program_words: self.program_words.saturating_sub(earlier.program_words),
            scalar_writes: self.scalar_writes.saturating_sub(earlier.scalar_writes),
            reductions: self.reductions.saturating_sub(earlier.reductions),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
        }
    }

    /// Descriptors read.
    pub fn descriptors(&self) -> u32 {
        self.bytes_read / TENSOR_DESC_BYTES as u32
    }
}

/// What the sequencer's work costs: rv32imac instructions per operation kind, measured on
/// the board (`nmcp board run`, lines `lamb_*` of `firmware/board/expected/virt.txt`), plus
/// the CP's memory stall per device access. The split: `instr_per_command`,
/// `instr_per_word`, `instr_per_descriptor`, `instr_per_scalar_write` and
/// `instr_per_reduction` are per-call instruction counts of the functions doing that work
/// in a QEMU profile of the measured regions (`scripts/board-profile.py --lamb 3`: the
/// patch of the encoded template and the platform call; the copy per word;
/// `TensorDesc::decode` and the read; the platform's `write_scalar` / `reduce_partials`,
/// net of the board's hashing); `instr_per_step` and `instr_per_handler` are a
/// least-squares fit (relative) of the remainder over the five board lines
/// (docs/calibration.md). `sequencer_cost_model_matches_board_figures` (nmcp-board)
/// checks the model against every line within 10 %.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SequencerCostModel {
    /// Instructions per step (`start`: building and encoding the three program
    /// templates, the scalars).
    pub instr_per_step: u64,
    /// Instructions per handler call (event dispatch, the pipeline's bookkeeping).
    pub instr_per_handler: u64,
    /// Instructions per idle handler call (an `NmcDone` nothing waited for: the event
    /// dispatch and one test).
    pub instr_per_idle_handler: u64,
    /// Instructions per macro-command (patching rows and column count into the encoded
    /// template, copying its header and phases into the NMC command window).
    pub instr_per_command: u64,
    /// Instructions per instruction word copied into the command window.
    pub instr_per_word: u64,
    /// Instructions per scalar-register write.
    pub instr_per_scalar_write: u64,
    /// Instructions per reduction request.
    pub instr_per_reduction: u64,
    /// Instructions per tensor descriptor read and decoded.
    pub instr_per_descriptor: u64,
    /// Stall cycles per device access (descriptor read, MMIO command, scalar write or
    /// reduction request) on top of its instructions: the CP model's 31-cycle latency
    /// less the access's own instruction (the board's RAM has no latency to measure).
    pub stall_per_access: u64,
}

impl SequencerCostModel {
    /// A model that charges nothing.
    pub const FREE: Self = Self {
        instr_per_step: 0,
        instr_per_handler: 0,
        instr_per_idle_handler: 0,
        instr_per_command: 0,
        instr_per_word: 0,
        instr_per_scalar_write: 0,
        instr_per_reduction: 0,
        instr_per_descriptor: 0,
        stall_per_access: 0,
    };
}

impl Default for SequencerCostModel {
    /// Fitted to the board (docs/calibration.md, "NMC sequencer cost").
    fn default() -> Self {
        Self {
            instr_per_step: 4_855,
            instr_per_handler: 576,
            instr_per_idle_handler: 30,
            instr_per_command: 355,
            instr_per_word: 6,
            instr_per_scalar_write: 30,
            instr_per_reduction: 32,
            instr_per_descriptor: 130,
            stall_per_access: 30,
        }
    }
}

impl SequencerWork {
    /// Instructions of this work under `m`.
    pub fn instructions(&self, m: &SequencerCostModel) -> u64 {
        let n = |c: u32, per: u64| u64::from(c).saturating_mul(per);
        let busy = self.handlers.saturating_sub(self.idle_handlers);
        n(self.steps, m.instr_per_step)
            .saturating_add(n(busy, m.instr_per_handler))
            .saturating_add(n(self.idle_handlers, m.instr_per_idle_handler))
            .saturating_add(n(self.macro_commands, m.instr_per_command))
            .saturating_add(n(self.program_words, m.instr_per_word))
            .saturating_add(n(self.scalar_writes, m.instr_per_scalar_write))
            .saturating_add(n(self.reductions, m.instr_per_reduction))
            .saturating_add(n(self.descriptors(), m.instr_per_descriptor))
    }

    /// Device accesses: descriptor reads and NMC platform calls.
    pub fn accesses(&self) -> u64 {
        u64::from(self.descriptors())
            .saturating_add(u64::from(self.macro_commands))
            .saturating_add(u64::from(self.scalar_writes))
            .saturating_add(u64::from(self.reductions))
    }

    /// CP cycles of this work under `m` (one instruction per cycle plus the stalls).
    pub fn cycles(&self, m: &SequencerCostModel) -> u64 {
        self.instructions(m)
            .saturating_add(self.accesses().saturating_mul(m.stall_per_access))
    }
}
