//! LAMB on near-memory compute: a lazy generator of NMC macro-commands.
//!
//! The host places every tensor's five arrays (g, w, m, v, u) at the start of a row
//! stripe (row bytes x every bank of the device), so element `i` of every array of a
//! tensor sits in the same bank at the same column, in different rows (dissertation
//! 6.2.2). It writes one [`TensorDesc`] per tensor into device memory and starts a
//! [`LambJob`]. The sequencer then walks the step as a state machine, emitting a few
//! macro-commands per tensor as engine queue space allows, so its RAM use does not grow
//! with the model:
//!
//! 1. `sqacc g` over every tensor, then one cross-bank reduction: the global gradient
//!    norm. From it the firmware computes the clip divisor and writes the stage-1 scalars.
//! 2. Per tensor: stage 1 (m, v, u), `sqacc w`, reduction, `sqacc u`, reduction. The next
//!    tensor's stage 1 is queued while the reductions travel to the host and back.
//! 3. When both norms of a tensor are back: write `-lr * ratio` and run stage 2.
//!
//! Scalar registers: `s0` wd, `s1` b1, `s2` 1-b1, `s3` b2, `s4` 1-b2,
//! `s5` bc1/sqrt(bc2), `s6` eps/sqrt(bc2) (written once per step, after the global norm),
//! and `s7`, the per-command operand: the clip divisor before each stage 1, `-lr * ratio`
//! before each stage 2. The engines execute commands and register writes in order, so a
//! stage 1 queued behind another tensor's stage 2 still sees its own `s7`.
//!
//! Numerics: m and v are computed with the reference's operations in the reference's
//! order (`b1*m + (1-b1)*g'`, `b2*v + ((1-b2)*g')*g'`, with `g' = g / clip` a correctly
//! rounded DIV), so they are bit-identical to an FP32 implementation of SPEC 4.1: m
//! suffers cancellation, and any other rounding would show as a large relative error
//! there. The update u folds the bias corrections into two scalars
//! (`m*bc1 / (sqrt(v*bc2) + eps) = m*(bc1/sqrt(bc2)) / (sqrt(v) + eps/sqrt(bc2))`), which
//! is exact algebra and only changes roundings of a quantity without cancellation. When
//! the clip divisor is 1 the DIV is still issued (exact, and keeps the timing independent
//! of the data, as Apex's kernel also always divides).

use core::fmt;

use heapless::{Deque, Vec};
use nmcp_isa::le::{LeReader, LeWriter, OutOfBounds};
use nmcp_isa::nmc::{
    BankMode, BinaryOp, ChannelRange, DType, Instr, Loc, MacroCommand, Phase, ReduceOp, ScalarReg,
    SpecialOp, Src, SrcImm, TsSlot, MAX_CHUNK,
};

use crate::platform::DeviceMemory;
use crate::platform::{DevAddr, NmcController, NmcError, NmcTicket};
use crate::FirmwareError;
#[cfg(not(feature = "small-tables"))]
use nmcp_isa::nmc::EncodedMacroCommand;

/// Bytes of one [`TensorDesc`] in device memory.
pub const TENSOR_DESC_BYTES: usize = 32;
/// Reductions that may be in flight at once.
pub const MAX_PENDING_REDUCTIONS: usize = 8;
/// Tensors whose stage 1 may run ahead of their stage 2.
pub const LOOKAHEAD: u32 = 4;

/// Where one tensor's arrays live: bank-local first rows (every array starts at column 0
/// of a row stripe) and its element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorDesc {
    /// FP32 elements.
    pub elements: u64,
    /// First row of the gradients.
    pub g_row: u32,
    /// First row of the weights.
    pub w_row: u32,
    /// First row of the first moment.
    pub m_row: u32,
    /// First row of the second moment.
    pub v_row: u32,
    /// First row of the update.
    pub u_row: u32,
}

impl TensorDesc {
    /// Little-endian layout: elements u64 @0, g/w/m/v/u rows u32 @8/12/16/20/24, zero u32
    /// @28.
    pub fn encode(&self) -> [u8; TENSOR_DESC_BYTES] {
        let mut b = [0u8; TENSOR_DESC_BYTES];
        // The fields fill the 32 bytes exactly (a unit test checks this returns Ok).
        let _ = self.write_fields(&mut LeWriter::new(&mut b));
        b
    }

    fn write_fields(&self, w: &mut LeWriter<'_>) -> Result<(), OutOfBounds> {
        w.put_u64(self.elements)?;
        for row in [
            self.g_row, self.w_row, self.m_row, self.v_row, self.u_row, 0,
        ] {
            w.put_u32(row)?;
        }
        Ok(())
    }

    /// Decodes and checks the reserved word.
    ///
    /// # Errors
    /// [`SequencerError::BadDescriptor`] if the reserved word is not zero or the tensor is
    /// empty.
    pub fn decode(b: &[u8; TENSOR_DESC_BYTES], index: u32) -> Result<Self, SequencerError> {
        Self::read_fields(&mut LeReader::new(b))
            .ok()
            .filter(|(d, reserved)| *reserved == 0 && d.elements != 0)
            .map(|(d, _)| d)
            .ok_or(SequencerError::BadDescriptor { index })
    }

    /// The descriptor and its reserved word, front to back.
    fn read_fields(r: &mut LeReader<'_>) -> Result<(Self, u32), OutOfBounds> {
        let d = Self {
            elements: r.u64()?,
            g_row: r.u32()?,
            w_row: r.u32()?,
            m_row: r.u32()?,
            v_row: r.u32()?,
            u_row: r.u32()?,
        };
        Ok((d, r.u32()?))
    }
}

/// The device as the sequencer needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NmcGeometry {
    /// Pseudo-channels (all of them run every command).
    pub pseudo_channels: u16,
    /// Banks per pseudo-channel.
    pub banks_per_pc: u16,
    /// Columns per row.
    pub cols_per_row: u32,
    /// Bytes per column access.
    pub column_bytes: u32,
    /// TS entries per bank ALU.
    pub ts_entries: u16,
    /// Macro-commands the engine keeps in flight together, each in its own job context
    /// (1, or 0, for every engine setup but `masa-2jobs-split`, which has 2; `masa-2jobs`
    /// keeps two jobs in flight too but gives each the whole TS). With more than one the
    /// sequencer sizes every program to its context's share of the TS
    /// ([`Self::job_ts_entries`]) so that any two jobs fit the TS together.
    pub job_contexts: u16,
    /// Independent columns the bank ALU needs in flight to run at its rate (its
    /// dependent-operation latency in operations); 0 or 1 when a one-column chunk does.
    /// The TS is split between job contexts only if stage 1 keeps at least this chunk.
    pub alu_chunk: u16,
}

impl NmcGeometry {
    /// Columns each bank processes for a tensor of `elements` FP32 values.
    pub fn columns_per_bank(&self, elements: u64) -> u64 {
        let stripe = u64::from(self.column_bytes)
            * u64::from(self.pseudo_channels)
            * u64::from(self.banks_per_pc);
        // Saturating: a corrupted descriptor's element count must not panic here; the
        // sequencer refuses a tensor whose columns do not fit a command.
        let bytes = elements.saturating_mul(4);
        if stripe.is_power_of_two() {
            // Every real geometry: a shift instead of a 64-bit division (`__udivdi3` on
            // RV32, a few hundred instructions). Same result as the division below.
            let shift = stripe.trailing_zeros();
            (bytes >> shift) + u64::from(bytes & (stripe - 1) != 0)
        } else {
            bytes.div_ceil(stripe.max(1))
        }
    }

    /// TS entries one macro-command may use: the TS split evenly between the job
    /// contexts ([`Self::job_contexts`]), so that stage 1 and stage 2 (or either and a
    /// norm) fit the TS together; the whole TS with one context, or when a share would
    /// not hold [`Self::alu_chunk`] columns of every stage-1 program (a smaller chunk
    /// would slow the ALU down; jobs that both use the TS then cannot overlap, as with
    /// one context).
    pub fn job_ts_entries(&self) -> u16 {
        let share = self.ts_entries / self.job_contexts.max(1);
        if share / Stage1Program::MAX_SLOTS >= self.alu_chunk.max(1) {
            share
        } else {
            self.ts_entries
        }
    }

    /// Bytes of one row stripe: one row in every bank of the device.
    pub fn stripe_bytes(&self) -> u64 {
        u64::from(self.cols_per_row)
            .saturating_mul(u64::from(self.column_bytes))
            .saturating_mul(u64::from(self.pseudo_channels))
            .saturating_mul(u64::from(self.banks_per_pc))
    }

    /// Row stripes one array of `elements` FP32 values occupies: at least one, so every
    /// array starts on its own stripe.
    pub fn rows_per_array(&self, elements: u64) -> u64 {
        elements
            .saturating_mul(4)
            .div_ceil(self.stripe_bytes().max(1))
            .max(1)
    }

    fn channels(&self) -> ChannelRange {
        ChannelRange {
            first: 0,
            count: self.pseudo_channels,
        }
    }
}

/// One tensor placed by [`lay_out`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TensorPlacement {
    /// The descriptor the host writes for the sequencer.
    pub desc: TensorDesc,
    /// First row after the tensor's arrays: where the next tensor starts.
    pub next_row: u32,
}

/// The one row-stripe layout of a tensor: its five arrays (g, w, m, v, u), in that order,
/// in consecutive runs of [`NmcGeometry::rows_per_array`] row stripes from `first_row`.
/// Hosts (the emulator, the board) lay out a model by calling this once per tensor, each
/// from the previous tensor's `next_row`.
///
/// Returns `None` if a row number does not fit in `u32`.
pub fn lay_out(geometry: &NmcGeometry, elements: u64, first_row: u32) -> Option<TensorPlacement> {
    let rows = u32::try_from(geometry.rows_per_array(elements)).ok()?;
    let mut row = first_row;
    let mut next = || {
        let r = row;
        row = row.checked_add(rows)?;
        Some(r)
    };
    let desc = TensorDesc {
        elements,
        g_row: next()?,
        w_row: next()?,
        m_row: next()?,
        v_row: next()?,
        u_row: next()?,
    };
    Some(TensorPlacement {
        desc,
        next_row: row,
    })
}

/// LAMB hyperparameters as the firmware applies them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LambParams {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Added to sqrt(v_hat).
    pub eps: f32,
    /// Weight decay (0 drops the weight read from stage 1).
    pub weight_decay: f32,
    /// Clipping threshold of the global gradient norm, or a non-positive value for none.
    pub max_grad_norm: f32,
    /// Bias correction on.
    pub bias_correction: bool,
    /// Step number for the bias correction (>= 1).
    pub step: u32,
    /// Upper clamp of the trust ratio, or a non-positive value for none.
    pub trust_clamp: f32,
}

/// Which stage-1 program the sequencer runs. Both compute the same values with the same
/// operations in the same order (bit-identical results); they differ in how many TS slots
/// a column needs, hence in the chunk (columns per row visit) a TS size allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Stage1Program {
    /// g', m, v and a scratch slot: chunk = TS / 4 (16 entries: 4 columns).
    #[default]
    FourSlot,
    /// The scratch's role moves: v takes g''s slot once g' is dead (its last use is
    /// `(1-b2) g' * g'`), so a column needs g'/v, m and one scratch: chunk = TS / 3
    /// (16 entries: 5 columns, 64 entries: 21).
    ThreeSlot,
}

impl Stage1Program {
    /// The most TS slots a column of any stage-1 program occupies.
    pub const MAX_SLOTS: u16 = 4;

    /// TS slots one column of stage 1 occupies.
    pub const fn slots(self) -> u16 {
        match self {
            Self::FourSlot => 4,
            Self::ThreeSlot => 3,
        }
    }

    /// Name used on command lines and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::FourSlot => "four-slot",
            Self::ThreeSlot => "three-slot",
        }
    }
}

/// One LAMB step to run.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LambJob {
    /// Device address of the first [`TensorDesc`].
    pub table: DevAddr,
    /// Number of tensors.
    pub tensors: u32,
    /// Device geometry.
    pub geometry: NmcGeometry,
    /// Hyperparameters.
    pub params: LambParams,
    /// The stage-1 program.
    pub program: Stage1Program,
}

/// Errors of the NMC sequencer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SequencerError {
    /// A bounded table overflowed.
    Capacity,
    /// A job is already running.
    Busy,
    /// Tensor descriptor `index` is malformed.
    BadDescriptor {
        /// Position in the table.
        index: u32,
    },
    /// The geometry cannot run the programs (e.g. fewer TS entries than slots used).
    Geometry,
    /// A tensor is larger than a macro-command can address.
    TooLarge {
        /// Position in the table.
        index: u32,
    },
    /// A reduction result arrived for a ticket the sequencer did not ask for.
    UnexpectedResult,
    /// The job names no tensors.
    NoTensors,
}

impl fmt::Display for SequencerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("sequencer capacity exceeded"),
            Self::Busy => f.write_str("a LAMB step is already running"),
            Self::BadDescriptor { index } => write!(f, "tensor descriptor {index} is malformed"),
            Self::Geometry => f.write_str("geometry cannot hold the LAMB programs' TS slots"),
            Self::TooLarge { index } => write!(f, "tensor {index} exceeds a macro-command's range"),
            Self::UnexpectedResult => f.write_str("reduction result for an unknown ticket"),
            Self::NoTensors => f.write_str("the LAMB job names no tensors"),
        }
    }
}

impl core::error::Error for SequencerError {}

/// Which norm a pending reduction carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Norm {
    Global,
    Weight(u32),
    Update(u32),
}

/// What the step is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Idle,
    /// Emitting `sqacc g` for tensor `next`.
    GradNorm {
        next: u32,
    },
    /// Waiting for the global norm.
    AwaitGlobal,
    /// Per-tensor pipeline.
    Tensors,
    /// Every command is queued; waiting for the last `NmcDone`.
    Draining,
    Done,
}

/// Per-tensor pipeline cursor: which sub-step of the front tensor comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Front {
    tensor: u32,
    sub: u8,
}

/// A tensor in the lookahead window: its descriptor (read once, at the front) and its
/// norms as they come back.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Window {
    desc: TensorDesc,
    weight_sq: Option<f32>,
    update_sq: Option<f32>,
}

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

/// Which program a submission uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    SumOfSquares,
    Stage1,
    Stage2,
}

/// The step's three programs, built and encoded once per step; a submission only writes
/// the tensor's rows and column count into one of them, in its binary form (building a
/// command costs ~1,000 instructions of moves on RV32; validating and encoding one, ~470
/// plus ~37 per instruction word; patching the encoded form, a few dozen).
#[cfg(not(feature = "small-tables"))]
#[derive(Debug, Clone)]
struct Templates {
    /// Where a program is built before it is encoded.
    scratch: MacroCommand,
    sum_of_squares: EncodedMacroCommand,
    stage1: EncodedMacroCommand,
    stage2: EncodedMacroCommand,
}

#[cfg(not(feature = "small-tables"))]
impl Default for Templates {
    fn default() -> Self {
        Self {
            scratch: programs::empty(),
            sum_of_squares: EncodedMacroCommand::empty(),
            stage1: EncodedMacroCommand::empty(),
            stage2: EncodedMacroCommand::empty(),
        }
    }
}

#[cfg(not(feature = "small-tables"))]
impl Templates {
    /// Builds and encodes the step's programs in place.
    fn build(&mut self, job: &LambJob) -> Result<(), SequencerError> {
        // A placeholder tensor: rows and columns are patched per submission.
        let t = TensorDesc {
            elements: 1,
            ..TensorDesc::default()
        };
        let g = &job.geometry;
        let decay = job.params.weight_decay != 0.0;
        let s = &mut self.scratch;
        programs::sum_of_squares_into(s, g, &t, 0, 0)?;
        encode(&mut self.sum_of_squares, s)?;
        programs::stage1_into(s, g, &t, 0, decay, job.program)?;
        encode(&mut self.stage1, s)?;
        programs::stage2_into(s, g, &t, 0)?;
        encode(&mut self.stage2, s)
    }

    /// Submits the program of `kind` for tensor `t` (`row`: the array a sum of squares
    /// reads): its rows and column count written into the encoded template, then the
    /// bytes to the platform. Returns its instruction words and the platform's answer.
    fn submit<P: NmcController>(
        &mut self,
        kind: Kind,
        g: &NmcGeometry,
        t: &TensorDesc,
        row: u32,
        index: u32,
        p: &mut P,
    ) -> Result<(usize, Result<NmcTicket, NmcError>), SequencerError> {
        let decay = self.stage1.phase_count() == 5;
        let cmd = match kind {
            Kind::SumOfSquares => &mut self.sum_of_squares,
            Kind::Stage2 => &mut self.stage2,
            Kind::Stage1 => &mut self.stage1,
        };
        let phases = cmd.phase_count();
        for (phase, r) in rows_of(kind, decay, t, row)
            .into_iter()
            .enumerate()
            .take(phases)
        {
            cmd.set_base_row(phase, r)
                .map_err(|_| SequencerError::Geometry)?;
        }
        // Never fails: a decoded descriptor has elements, so at least one column, and
        // `col_start` is 0.
        cmd.set_col_count(programs::cols(g, t, index)?)
            .map_err(|_| SequencerError::TooLarge { index })?;
        Ok((cmd.program_len(), p.submit_encoded(cmd)))
    }
}

/// The `small-tables` build (a 16 KiB-RAM board): one template slot instead of three,
/// rebuilt when a submission needs another program than the one it holds (~1 000
/// instructions per rebuild, about three per tensor), so the sequencer keeps ~940 B less
/// RAM. The slot is not kept encoded: an encoded copy would cost 216 B of the board's
/// 12 KiB, and with a rebuild per submission there is little encoding to save. The
/// commands are the same as the three-slot build's.
#[cfg(feature = "small-tables")]
#[derive(Debug, Clone)]
struct Templates {
    slot: MacroCommand,
    /// The program `slot` holds.
    built: Option<Kind>,
    decay: bool,
    program: Stage1Program,
}

#[cfg(feature = "small-tables")]
impl Default for Templates {
    fn default() -> Self {
        Self {
            slot: programs::empty(),
            built: None,
            decay: false,
            program: Stage1Program::default(),
        }
    }
}

#[cfg(feature = "small-tables")]
impl Templates {
    /// Notes the step's program choices; the slot is built on first use.
    fn build(&mut self, job: &LambJob) -> Result<(), SequencerError> {
        self.built = None;
        self.decay = job.params.weight_decay != 0.0;
        self.program = job.program;
        Ok(())
    }

    /// Submits the program of `kind` for tensor `t` (`row`: the array a sum of squares
    /// reads): its instruction words and the platform's answer.
    fn submit<P: NmcController>(
        &mut self,
        kind: Kind,
        g: &NmcGeometry,
        t: &TensorDesc,
        row: u32,
        index: u32,
        p: &mut P,
    ) -> Result<(usize, Result<NmcTicket, NmcError>), SequencerError> {
        if self.built != Some(kind) {
            // A placeholder tensor, as in the three-slot build: rows and columns are
            // patched below.
            let ph = TensorDesc {
                elements: 1,
                ..TensorDesc::default()
            };
            self.built = None;
            let s = &mut self.slot;
            match kind {
                Kind::SumOfSquares => programs::sum_of_squares_into(s, g, &ph, 0, 0)?,
                Kind::Stage1 => programs::stage1_into(s, g, &ph, 0, self.decay, self.program)?,
                Kind::Stage2 => programs::stage2_into(s, g, &ph, 0)?,
            }
            self.built = Some(kind);
        }
        let cmd = &mut self.slot;
        for (phase, r) in cmd.phases.iter_mut().zip(rows_of(kind, self.decay, t, row)) {
            phase.base_row = r;
        }
        cmd.col_count = programs::cols(g, t, index)?;
        Ok((cmd.program.len(), p.submit(cmd)))
    }
}

/// Encodes a built program into its template (a program the sequencer built that does not
/// validate means the geometry cannot run it, e.g. a chunk beyond the engine's limit).
#[cfg(not(feature = "small-tables"))]
fn encode(into: &mut EncodedMacroCommand, cmd: &MacroCommand) -> Result<(), SequencerError> {
    into.encode_from(cmd).map_err(|_| SequencerError::Geometry)
}

/// Each phase's base row of a `kind` program for tensor `t` (`row`: the array a sum of
/// squares reads); rows past the program's phases are 0 and unused.
fn rows_of(kind: Kind, decay: bool, t: &TensorDesc, row: u32) -> [u32; 5] {
    match kind {
        Kind::SumOfSquares => [row, 0, 0, 0, 0],
        Kind::Stage2 => [t.u_row, t.w_row, 0, 0, 0],
        // Phases g, m, v, (w,) u: the weight phase only with weight decay.
        Kind::Stage1 if decay => [t.g_row, t.m_row, t.v_row, t.w_row, t.u_row],
        Kind::Stage1 => [t.g_row, t.m_row, t.v_row, t.u_row, 0],
    }
}

/// The LAMB state machine.
#[derive(Debug)]
pub struct LambSequencer {
    job: Option<LambJob>,
    /// The job's tensor count, table and channels, copied out of `job` at the start (so
    /// the handlers do not copy the 72-byte job each time).
    tensors: u32,
    table: DevAddr,
    channels: ChannelRange,
    stage: Stage,
    front: Front,
    /// Next tensor whose stage 2 is due.
    s2_next: u32,
    window: [Window; LOOKAHEAD as usize + 1],
    pending: Deque<(NmcTicket, Norm), MAX_PENDING_REDUCTIONS>,
    last_ticket: Option<NmcTicket>,
    global_norm: f32,
    clip: f32,
    /// Whether the front tensor's descriptor is in its window slot (read once, used by
    /// six emissions, stage 2 included).
    front_read: bool,
    templates: Templates,
    work: SequencerWork,
    /// An engine refused a call for want of room since the last `NmcDone` pumped: only
    /// then can a completion let the pipeline go on (everything else it waits for comes
    /// with `PartialsReady`).
    refused: bool,
}

impl Default for LambSequencer {
    fn default() -> Self {
        Self {
            job: None,
            tensors: 0,
            table: 0,
            channels: ChannelRange { first: 0, count: 0 },
            stage: Stage::Idle,
            front: Front::default(),
            s2_next: 0,
            window: [Window::default(); LOOKAHEAD as usize + 1],
            pending: Deque::new(),
            last_ticket: None,
            global_norm: 0.0,
            clip: 1.0,
            front_read: false,
            templates: Templates::default(),
            work: SequencerWork::default(),
            refused: false,
        }
    }
}

fn ts(s: u8) -> Result<Loc, SequencerError> {
    TsSlot::new(s).map(Loc::Ts).ok_or(SequencerError::Capacity)
}

fn sreg(r: u8) -> Result<Src, SequencerError> {
    ScalarReg::new(r)
        .map(Src::Sreg)
        .ok_or(SequencerError::Capacity)
}

fn src(l: Loc) -> Src {
    Src::from(l)
}

fn bin(op: BinaryOp, dst: Loc, a: Src, b: Src) -> Instr {
    Instr::Binary {
        op,
        dtype: DType::F32,
        dst,
        src0: a,
        src1: SrcImm::from(b),
    }
}

fn mov(dst: Loc, s: Loc) -> Instr {
    Instr::Mov {
        dtype: DType::F32,
        dst,
        src: s,
    }
}

/// The macro-commands of one step, as pure functions of the tensor and geometry.
pub mod programs {
    use super::*;

    /// TS slots the default stage-1 program ([`Stage1Program::FourSlot`]) uses.
    pub const STAGE1_SLOTS: u16 = Stage1Program::FourSlot.slots();

    /// An empty command (no phases, no program) to build into.
    pub fn empty() -> MacroCommand {
        MacroCommand {
            channels: ChannelRange { first: 0, count: 0 },
            mode: BankMode::AllBank,
            col_start: 0,
            col_count: 0,
            chunk: 1,
            phases: Vec::new(),
            program: Vec::new(),
        }
    }

    /// Builds a command in place (no command-sized temporaries on the stack).
    struct Builder<'a> {
        cmd: &'a mut MacroCommand,
    }

    impl<'a> Builder<'a> {
        fn new(cmd: &'a mut MacroCommand) -> Self {
            cmd.phases.clear();
            cmd.program.clear();
            Self { cmd }
        }

        fn phase(&mut self, row: u32, instrs: &[Instr]) -> Result<(), SequencerError> {
            let first =
                u8::try_from(self.cmd.program.len()).map_err(|_| SequencerError::Capacity)?;
            let len = u8::try_from(instrs.len()).map_err(|_| SequencerError::Capacity)?;
            self.cmd
                .program
                .extend_from_slice(instrs)
                .map_err(|_| SequencerError::Capacity)?;
            self.cmd
                .phases
                .push(Phase {
                    base_row: row,
                    first,
                    len,
                })
                .map_err(|_| SequencerError::Capacity)
        }

        fn finish(self, g: &NmcGeometry, cols: u32, chunk: u16) {
            // A chunk longer than a row cannot save an activation (every phase crosses
            // into the next row anyway), so it is capped at the row as well as at the
            // command's limit.
            let row = u16::try_from(g.cols_per_row).unwrap_or(u16::MAX);
            let cap = u16::from(MAX_CHUNK).min(row).max(1);
            self.cmd.chunk = u8::try_from(chunk.clamp(1, cap)).unwrap_or(MAX_CHUNK);
            self.cmd.channels = g.channels();
            self.cmd.mode = BankMode::AllBank;
            self.cmd.col_start = 0;
            self.cmd.col_count = cols;
        }
    }

    #[inline(always)]
    pub(super) fn cols(g: &NmcGeometry, t: &TensorDesc, index: u32) -> Result<u32, SequencerError> {
        u32::try_from(g.columns_per_bank(t.elements))
            .map_err(|_| SequencerError::TooLarge { index })
    }

    /// `sqacc mem` over one array starting at `row`.
    pub fn sum_of_squares(
        g: &NmcGeometry,
        t: &TensorDesc,
        row: u32,
        index: u32,
    ) -> Result<MacroCommand, SequencerError> {
        let mut c = empty();
        sum_of_squares_into(&mut c, g, t, row, index)?;
        Ok(c)
    }

    /// [`sum_of_squares`], built into `cmd`.
    pub fn sum_of_squares_into(
        cmd: &mut MacroCommand,
        g: &NmcGeometry,
        t: &TensorDesc,
        row: u32,
        index: u32,
    ) -> Result<(), SequencerError> {
        let cols = cols(g, t, index)?;
        let mut b = Builder::new(cmd);
        b.phase(
            row,
            &[Instr::Reduce {
                op: ReduceOp::SqAcc,
                dtype: DType::F32,
                src: Loc::Mem,
            }],
        )?;
        b.finish(g, cols, u16::from(MAX_CHUNK));
        Ok(())
    }

    /// Stage 1: m, v and u (with weight decay when `with_decay`); g is divided by `s7`.
    /// `program` picks the TS slots (the instructions, their operands' order and so the
    /// results are the same for both; see [`Stage1Program`]).
    pub fn stage1(
        g: &NmcGeometry,
        t: &TensorDesc,
        index: u32,
        with_decay: bool,
        program: Stage1Program,
    ) -> Result<MacroCommand, SequencerError> {
        let mut c = empty();
        stage1_into(&mut c, g, t, index, with_decay, program)?;
        Ok(c)
    }

    /// [`stage1`], built into `cmd`.
    pub fn stage1_into(
        cmd: &mut MacroCommand,
        g: &NmcGeometry,
        t: &TensorDesc,
        index: u32,
        with_decay: bool,
        program: Stage1Program,
    ) -> Result<(), SequencerError> {
        let cols = cols(g, t, index)?;
        // g0: g'; m1: m, then the update; v2: v; p2: (1-b2) g' (in v's slot when v has its
        // own, in the scratch when v reuses g''s slot, which it may only overwrite with the
        // product that is g''s last use); x3: scratch.
        let (g0, m1, v2, p2, x3) = match program {
            Stage1Program::FourSlot => (ts(0)?, ts(1)?, ts(2)?, ts(2)?, ts(3)?),
            Stage1Program::ThreeSlot => (ts(0)?, ts(1)?, ts(0)?, ts(2)?, ts(2)?),
        };
        let mem = Loc::Mem;
        let mut b = Builder::new(cmd);
        // Always a division, as Apex does (`g / clip` with clip = 1 when not clipping):
        // exact either way, and the step's timing does not depend on the data.
        let load_g = Instr::Div {
            dst: g0,
            src0: src(mem),
            src1: sreg(7)?,
        };
        b.phase(t.g_row, &[load_g])?;
        b.phase(
            t.m_row,
            &[
                bin(BinaryOp::Mul, m1, src(mem), sreg(1)?),
                bin(BinaryOp::Mul, x3, src(g0), sreg(2)?),
                bin(BinaryOp::Add, m1, src(m1), src(x3)),
                mov(mem, m1),
            ],
        )?;
        b.phase(
            t.v_row,
            &[
                bin(BinaryOp::Mul, p2, src(g0), sreg(4)?),
                bin(BinaryOp::Mul, v2, src(p2), src(g0)),
                bin(BinaryOp::Mul, x3, src(mem), sreg(3)?),
                bin(BinaryOp::Add, v2, src(x3), src(v2)),
                mov(mem, v2),
                Instr::Special {
                    op: SpecialOp::Sqrt,
                    dst: v2,
                    src: v2,
                },
                bin(BinaryOp::Add, v2, src(v2), sreg(6)?),
                bin(BinaryOp::Mul, m1, src(m1), sreg(5)?),
                Instr::Div {
                    dst: m1,
                    src0: src(m1),
                    src1: src(v2),
                },
            ],
        )?;
        if with_decay {
            b.phase(
                t.w_row,
                &[
                    bin(BinaryOp::Mul, x3, src(mem), sreg(0)?),
                    bin(BinaryOp::Add, m1, src(m1), src(x3)),
                ],
            )?;
        }
        b.phase(t.u_row, &[mov(mem, m1)])?;
        let chunk = g.job_ts_entries() / program.slots();
        if chunk == 0 {
            return Err(SequencerError::Geometry);
        }
        b.finish(g, cols, chunk);
        Ok(())
    }

    /// Stage 2: w += s7 * u.
    pub fn stage2(
        g: &NmcGeometry,
        t: &TensorDesc,
        index: u32,
    ) -> Result<MacroCommand, SequencerError> {
        let mut c = empty();
        stage2_into(&mut c, g, t, index)?;
        Ok(c)
    }

    /// [`stage2`], built into `cmd`.
    pub fn stage2_into(
        cmd: &mut MacroCommand,
        g: &NmcGeometry,
        t: &TensorDesc,
        index: u32,
    ) -> Result<(), SequencerError> {
        let cols = cols(g, t, index)?;
        let x0 = ts(0)?;
        let mem = Loc::Mem;
        let mut b = Builder::new(cmd);
        b.phase(t.u_row, &[bin(BinaryOp::Mul, x0, src(mem), sreg(7)?)])?;
        b.phase(
            t.w_row,
            &[bin(BinaryOp::Add, x0, src(mem), src(x0)), mov(mem, x0)],
        )?;
        let entries = g.job_ts_entries();
        if entries == 0 {
            return Err(SequencerError::Geometry);
        }
        b.finish(g, cols, entries);
        Ok(())
    }
}

/// The clip divisor for a global gradient norm.
pub fn clip_divisor(p: &LambParams, global_norm: f32) -> f32 {
    if p.max_grad_norm > 0.0 && global_norm > p.max_grad_norm {
        global_norm / p.max_grad_norm
    } else {
        1.0
    }
}

/// Scalar registers s0..s6 of a step (see the module documentation).
pub fn stage1_scalars(p: &LambParams) -> [f32; 7] {
    let (bc1, bc2) = if p.bias_correction {
        let t = p.step.max(1) as f32;
        (
            1.0 / (1.0 - libm::powf(p.beta1, t)),
            1.0 / (1.0 - libm::powf(p.beta2, t)),
        )
    } else {
        (1.0, 1.0)
    };
    let sq_bc2 = libm::sqrtf(bc2);
    [
        p.weight_decay,
        p.beta1,
        1.0 - p.beta1,
        p.beta2,
        1.0 - p.beta2,
        bc1 / sq_bc2,
        p.eps / sq_bc2,
    ]
}

/// The trust ratio from the squared norms.
pub fn trust_ratio(p: &LambParams, weight_sq: f32, update_sq: f32) -> f32 {
    let (w, u) = (libm::sqrtf(weight_sq), libm::sqrtf(update_sq));
    let r = if w > 0.0 && u > 0.0 { w / u } else { 1.0 };
    if p.trust_clamp > 0.0 {
        r.min(p.trust_clamp)
    } else {
        r
    }
}

impl LambSequencer {
    /// Whether the last started step has finished.
    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Abandons the running step after an engine failed a command it had accepted, and
    /// returns the error to report: the sequencer is idle again and a new step may start.
    pub fn abort(&mut self, e: crate::platform::NmcError) -> FirmwareError {
        warn!("LAMB step abandoned: {}", e);
        self.job = None;
        self.stage = Stage::Idle;
        self.pending.clear();
        e.into()
    }

    /// Whether a step is running.
    pub fn is_running(&self) -> bool {
        !matches!(self.stage, Stage::Idle | Stage::Done)
    }

    /// The global gradient norm of the last step (valid once the step passed stage 1).
    pub fn global_norm(&self) -> f32 {
        self.global_norm
    }

    /// Work done so far (all steps).
    pub fn work(&self) -> SequencerWork {
        self.work
    }

    /// Starts a step and emits as many commands as the engines take.
    ///
    /// # Errors
    /// [`SequencerError::Busy`] if a step is running; [`SequencerError::NoTensors`],
    /// [`SequencerError::Geometry`] for a job that cannot run; platform errors other than
    /// `Busy`.
    pub fn start<P: NmcController + DeviceMemory>(
        &mut self,
        job: LambJob,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        if self.is_running() {
            return Err(SequencerError::Busy.into());
        }
        debug!("LAMB step {} over {} tensors", job.params.step, job.tensors);
        if job.tensors == 0 {
            return Err(SequencerError::NoTensors.into());
        }
        if job.geometry.job_ts_entries() < job.program.slots() {
            return Err(SequencerError::Geometry.into());
        }
        // Field by field, not `*self = Self { .. }`: the templates stay in place (no
        // kilobyte temporaries on a 2 KiB stack).
        self.job = None;
        self.templates.build(&job)?;
        self.tensors = job.tensors;
        self.table = job.table;
        self.channels = job.geometry.channels();
        self.job = Some(job);
        self.stage = Stage::GradNorm { next: 0 };
        self.front = Front::default();
        self.s2_next = 0;
        self.window = [Window::default(); LOOKAHEAD as usize + 1];
        self.pending.clear();
        self.last_ticket = None;
        self.global_norm = 0.0;
        self.clip = 1.0;
        self.front_read = false;
        self.refused = false;
        self.work.steps = self.work.steps.saturating_add(1);
        self.work.handlers = self.work.handlers.saturating_add(1);
        self.pump(p)
    }

    fn read_desc<P: DeviceMemory>(
        &mut self,
        index: u32,
        p: &mut P,
    ) -> Result<TensorDesc, FirmwareError> {
        let mut b = [0u8; TENSOR_DESC_BYTES];
        let addr = self
            .table
            .checked_add(u64::from(index) * TENSOR_DESC_BYTES as u64)
            .ok_or(SequencerError::BadDescriptor { index })?;
        p.read(addr, &mut b)?;
        self.work.bytes_read = self
            .work
            .bytes_read
            .saturating_add(TENSOR_DESC_BYTES as u32);
        Ok(TensorDesc::decode(&b, index)?)
    }

    /// Submits program `kind` for tensor `t`; `Ok(false)` when the engine is full (retry
    /// on the next event).
    fn submit<P: NmcController>(
        &mut self,
        kind: Kind,
        t: &TensorDesc,
        row: u32,
        index: u32,
        p: &mut P,
    ) -> Result<bool, FirmwareError> {
        let Some(job) = self.job.as_ref() else {
            return Err(SequencerError::UnexpectedResult.into());
        };
        let (words, answer) = self
            .templates
            .submit(kind, &job.geometry, t, row, index, p)?;
        let words = u32::try_from(words).unwrap_or(u32::MAX);
        match answer {
            Ok(ticket) => {
                self.last_ticket = Some(ticket);
                self.work.macro_commands = self.work.macro_commands.saturating_add(1);
                self.work.program_words = self.work.program_words.saturating_add(words);
                Ok(true)
            }
            Err(crate::platform::NmcError::Busy) => {
                self.refused = true;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn reduce<P: NmcController>(&mut self, norm: Norm, p: &mut P) -> Result<bool, FirmwareError> {
        if self.pending.is_full() {
            return Ok(false);
        }
        match p.reduce_partials(self.channels) {
            Ok(t) => {
                self.pending
                    .push_back((t, norm))
                    .map_err(|_| SequencerError::Capacity)?;
                self.last_ticket = Some(t);
                self.work.reductions = self.work.reductions.saturating_add(1);
                Ok(true)
            }
            Err(crate::platform::NmcError::Busy) => {
                self.refused = true;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn write_scalar<P: NmcController>(
        &mut self,
        reg: u8,
        v: f32,
        p: &mut P,
    ) -> Result<bool, FirmwareError> {
        match p.write_scalar(self.channels, reg, v.to_bits()) {
            Ok(()) => {
                self.work.scalar_writes = self.work.scalar_writes.saturating_add(1);
                Ok(true)
            }
            Err(crate::platform::NmcError::Busy) => {
                self.refused = true;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn slot(&mut self, tensor: u32) -> Option<&mut Window> {
        self.window.get_mut((tensor % (LOOKAHEAD + 1)) as usize)
    }

    /// Handles `NmcDone` and `PartialsReady` for this sequencer.
    ///
    /// # Errors
    /// [`SequencerError::UnexpectedResult`] for a result nobody asked for; platform errors.
    pub fn on_done<P: NmcController + DeviceMemory>(
        &mut self,
        ticket: NmcTicket,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.work.handlers = self.work.handlers.saturating_add(1);
        if self.stage == Stage::Draining && self.last_ticket == Some(ticket) {
            self.stage = Stage::Done;
            return Ok(());
        }
        if !self.refused {
            // Nothing waits for the room this completion frees: the pipeline is waiting
            // for reduction results (they pump when they arrive) or has emitted all it
            // may. Most completions are these (about four per tensor).
            self.work.idle_handlers = self.work.idle_handlers.saturating_add(1);
            return Ok(());
        }
        self.refused = false;
        self.pump(p)
    }

    /// Handles a reduction result.
    ///
    /// # Errors
    /// [`SequencerError::UnexpectedResult`] for a ticket that is not the oldest pending
    /// reduction; platform errors.
    pub fn on_partials<P: NmcController + DeviceMemory>(
        &mut self,
        ticket: NmcTicket,
        sum: f32,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.work.handlers = self.work.handlers.saturating_add(1);
        let Some(&(t, norm)) = self.pending.front() else {
            return Err(SequencerError::UnexpectedResult.into());
        };
        if t != ticket {
            return Err(SequencerError::UnexpectedResult.into());
        }
        self.pending.pop_front();
        match norm {
            Norm::Global => {
                self.global_norm = libm::sqrtf(sum.max(0.0));
                let params = self
                    .job
                    .map(|j| j.params)
                    .ok_or(SequencerError::UnexpectedResult)?;
                self.clip = clip_divisor(&params, self.global_norm);
                debug!(
                    "global gradient norm {}, clip divisor {}",
                    self.global_norm, self.clip
                );
                for (reg, v) in (0u8..).zip(stage1_scalars(&params)) {
                    // Scalar writes queue behind nothing but reductions here; the engines
                    // always accept them (they are ordered markers, not commands).
                    if !self.write_scalar(reg, v, p)? {
                        return Err(SequencerError::Capacity.into());
                    }
                }
                self.stage = Stage::Tensors;
            }
            Norm::Weight(i) => {
                if let Some(s) = self.slot(i) {
                    s.weight_sq = Some(sum);
                }
            }
            Norm::Update(i) => {
                if let Some(s) = self.slot(i) {
                    s.update_sq = Some(sum);
                }
            }
        }
        self.pump(p)
    }

    /// Emits whatever can be emitted now.
    fn pump<P: NmcController + DeviceMemory>(&mut self, p: &mut P) -> Result<(), FirmwareError> {
        if self.job.is_none() {
            return Ok(());
        }
        // Every iteration either emits one thing or returns, and the number of things a
        // step emits is bounded by 8 per tensor plus 8, so this loop is bounded.
        loop {
            match self.stage {
                Stage::Idle | Stage::Done | Stage::AwaitGlobal | Stage::Draining => return Ok(()),
                Stage::GradNorm { next } => {
                    if next == self.tensors {
                        if !self.reduce(Norm::Global, p)? {
                            return Ok(());
                        }
                        self.stage = Stage::AwaitGlobal;
                        continue;
                    }
                    let t = self.read_desc(next, p)?;
                    if !self.submit(Kind::SumOfSquares, &t, t.g_row, next, p)? {
                        return Ok(());
                    }
                    self.stage = Stage::GradNorm { next: next + 1 };
                }
                Stage::Tensors => {
                    if !self.step_tensors(p)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// One emission of the per-tensor pipeline; `Ok(false)` when nothing can be emitted.
    fn step_tensors<P: NmcController + DeviceMemory>(
        &mut self,
        p: &mut P,
    ) -> Result<bool, FirmwareError> {
        // Stage 2 of the oldest tensor as soon as its norms are back.
        if self.s2_next < self.front.tensor {
            let i = self.s2_next;
            let norms = self.slot(i).map(|s| (s.weight_sq, s.update_sq));
            if let Some((Some(wsq), Some(usq))) = norms {
                let operand = match &self.job {
                    Some(j) => -j.params.lr * trust_ratio(&j.params, wsq, usq),
                    None => return Err(SequencerError::UnexpectedResult.into()),
                };
                if !self.write_scalar(7, operand, p)? {
                    return Ok(false);
                }
                // The descriptor was read when the tensor was at the front.
                let desc = self.slot(i).map(|s| s.desc).unwrap_or_default();
                if !self.submit(Kind::Stage2, &desc, 0, i, p)? {
                    // The scalar write is idempotent; it is simply repeated next time.
                    return Ok(false);
                }
                if let Some(s) = self.slot(i) {
                    *s = Window::default();
                }
                self.s2_next += 1;
                if self.s2_next == self.tensors {
                    self.stage = Stage::Draining;
                }
                return Ok(true);
            }
        }
        // Otherwise run ahead with the next tensor's stage 1 and norms.
        let i = self.front.tensor;
        if i >= self.tensors || i - self.s2_next >= LOOKAHEAD {
            return Ok(false);
        }
        if !self.front_read {
            let d = self.read_desc(i, p)?;
            if let Some(s) = self.slot(i) {
                s.desc = d;
            }
            self.front_read = true;
        }
        let t = self.slot(i).map(|s| s.desc).unwrap_or_default();
        let ok = match self.front.sub {
            0 => {
                // The scalar write is idempotent: if the engine is full, both are simply
                // repeated on the next event.
                self.write_scalar(7, self.clip, p)? && self.submit(Kind::Stage1, &t, 0, i, p)?
            }
            1 => self.submit(Kind::SumOfSquares, &t, t.w_row, i, p)?,
            2 => self.reduce(Norm::Weight(i), p)?,
            3 => self.submit(Kind::SumOfSquares, &t, t.u_row, i, p)?,
            _ => self.reduce(Norm::Update(i), p)?,
        };
        if !ok {
            return Ok(false);
        }
        if self.front.sub >= 4 {
            self.front = Front {
                tensor: i + 1,
                sub: 0,
            };
            self.front_read = false;
        } else {
            self.front.sub += 1;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_desc_layout_round_trips_and_rejects_reserved_and_empty() {
        let d = TensorDesc {
            elements: 0x1_0000_0001,
            g_row: 1,
            w_row: 2,
            m_row: 3,
            v_row: 4,
            u_row: 0xffff_ffff,
        };
        let mut b = [0xaau8; TENSOR_DESC_BYTES];
        assert_eq!(d.write_fields(&mut LeWriter::new(&mut b)), Ok(()));
        assert_eq!(b, d.encode());
        assert_eq!(b[..8], [1, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(b[24..], [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(TensorDesc::decode(&b, 0), Ok(d));
        b[28] = 1;
        assert_eq!(
            TensorDesc::decode(&b, 5),
            Err(SequencerError::BadDescriptor { index: 5 })
        );
        let empty = TensorDesc { elements: 0, ..d };
        assert_eq!(
            TensorDesc::decode(&empty.encode(), 6),
            Err(SequencerError::BadDescriptor { index: 6 })
        );
    }

    const G: NmcGeometry = NmcGeometry {
        pseudo_channels: 16,
        banks_per_pc: 16,
        cols_per_row: 32,
        column_bytes: 32,
        ts_entries: 16,
        job_contexts: 1,
        alu_chunk: 1,
    };

    /// A patched template is the command built from scratch for that tensor, for every
    /// program, with and without weight decay, tensor after tensor.
    /// A platform that keeps the last command submitted (the three-slot build sends the
    /// encoded bytes: the trait's default decodes them into `submit`).
    #[derive(Default)]
    struct Captured(Option<MacroCommand>);

    impl NmcController for Captured {
        fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
            self.0 = Some(cmd.clone());
            Ok(NmcTicket(0))
        }
        fn write_scalar(
            &mut self,
            _: crate::platform::ChannelSet,
            _: u8,
            _: u32,
        ) -> Result<(), NmcError> {
            Ok(())
        }
        fn reduce_partials(
            &mut self,
            _: crate::platform::ChannelSet,
        ) -> Result<NmcTicket, NmcError> {
            Ok(NmcTicket(0))
        }
    }

    /// Also: the bytes a submission sends (patched in place in the three-slot build)
    /// decode to exactly the command built afresh for that tensor.
    #[test]
    fn patched_templates_equal_freshly_built_commands() {
        for program in [Stage1Program::FourSlot, Stage1Program::ThreeSlot] {
            for wd in [0.0, 0.01] {
                let job = LambJob {
                    table: 0,
                    tensors: 3,
                    geometry: G,
                    params: LambParams {
                        lr: 1e-3,
                        beta1: 0.9,
                        beta2: 0.999,
                        eps: 1e-6,
                        weight_decay: wd,
                        max_grad_norm: 1.0,
                        bias_correction: true,
                        step: 1,
                        trust_clamp: 0.0,
                    },
                    program,
                };
                let mut t = Templates::default();
                t.build(&job).unwrap();
                let mut p = Captured::default();
                let mut sent = |t: &mut Templates, kind, d: &TensorDesc, row, i| {
                    let (words, answer) = t.submit(kind, &G, d, row, i, &mut p).unwrap();
                    assert_eq!(answer, Ok(NmcTicket(0)));
                    let cmd = p.0.take().unwrap();
                    assert_eq!(words, cmd.program.len());
                    cmd
                };
                let mut row = 0;
                for (i, elements) in [1u64, 65_537, 3 << 20].into_iter().enumerate() {
                    let d = lay_out(&G, elements, row).unwrap();
                    row = d.next_row;
                    let d = d.desc;
                    let i = i as u32;
                    let fresh = programs::stage1(&G, &d, i, wd != 0.0, program).unwrap();
                    assert_eq!(sent(&mut t, Kind::Stage1, &d, 0, i), fresh);
                    let fresh = programs::stage2(&G, &d, i).unwrap();
                    assert_eq!(sent(&mut t, Kind::Stage2, &d, 0, i), fresh);
                    let fresh = programs::sum_of_squares(&G, &d, d.w_row, i).unwrap();
                    assert_eq!(sent(&mut t, Kind::SumOfSquares, &d, d.w_row, i), fresh);
                }
            }
        }
    }

    #[test]
    fn three_slot_stage1_uses_three_slots_and_longer_chunks() {
        let d = lay_out(&G, 1 << 20, 0).unwrap().desc;
        let four = programs::stage1(&G, &d, 0, true, Stage1Program::FourSlot).unwrap();
        let three = programs::stage1(&G, &d, 0, true, Stage1Program::ThreeSlot).unwrap();
        assert_eq!((four.chunk, three.chunk), (4, 5));
        assert_eq!(four.program.len(), three.program.len());
        let max_slot = |c: &MacroCommand| {
            c.program
                .iter()
                .flat_map(|i| {
                    let mut v = std::vec::Vec::new();
                    if let Instr::Binary {
                        dst, src0, src1, ..
                    } = *i
                    {
                        v.extend([Src::from(dst), src0]);
                        if let SrcImm::Ts(t) = src1 {
                            v.push(Src::Ts(t));
                        }
                    }
                    v
                })
                .filter_map(|s| match s {
                    Src::Ts(t) => Some(t.get()),
                    _ => None,
                })
                .max()
                .unwrap()
        };
        assert_eq!(max_slot(&four), 3);
        assert_eq!(max_slot(&three), 2);
    }

    #[test]
    fn lay_out_puts_five_arrays_on_consecutive_stripes() {
        // A stripe is 32 x 32 x 16 x 16 B = 256 KiB = 65536 FP32 values.
        assert_eq!(G.stripe_bytes(), 1 << 18);
        let p = lay_out(&G, 65_537, 3).unwrap();
        let d = p.desc;
        assert_eq!(
            (d.g_row, d.w_row, d.m_row, d.v_row, d.u_row),
            (3, 5, 7, 9, 11)
        );
        assert_eq!(p.next_row, 13);
        // Even an empty tensor owns one stripe per array.
        assert_eq!(lay_out(&G, 0, 0).unwrap().next_row, 5);
        assert_eq!(lay_out(&G, 1, u32::MAX - 4), None);
    }
}
