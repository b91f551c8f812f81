//! The LAMB state machine ([`LambSequencer`]): walks a step tensor by tensor, emitting
//! macro-commands as engine queue space allows, and reacts to completions and partial sums.

use super::*;

/// Reductions that may be in flight at once.
pub const MAX_PENDING_REDUCTIONS: usize = 8;
/// Tensors whose stage 1 may run ahead of their stage 2.
pub const LOOKAHEAD: u32 = 4;

/// The NMC sequencer's own refusals. Its handlers return them, and the errors of the two
/// platform blocks it is bound on ([`NmcController`], [`DeviceMemory`]), as the caller's
/// error type ([`FromSequencerErrors`]); only the top floor (`crate::firmware`) knows that
/// type is `FirmwareError`.
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

/// The error type the sequencer's handlers return: any error that its refusals
/// ([`SequencerError`]) and the platform errors it meets ([`MemoryError`], [`NmcError`])
/// convert into; the top floor's `FirmwareError` in the firmware, which reports each
/// platform error by its block.
///
/// The handlers build `E` where an error arises, so the top floor gets its own error with
/// no conversion on the way out: the sequencer's code is the code it would be returning
/// `FirmwareError`. Measured on RV32 (docs/decisions/cp.md, "Errors"): returning
/// a `SequencerError` that also wrapped the platform errors, converted at the top, moved
/// the LAMB steps by +1.0 to +1.7 % (LLVM lays out `pump`'s loop around it differently).
pub trait FromSequencerErrors: From<SequencerError> + From<MemoryError> + From<NmcError> {}

impl<E: From<SequencerError> + From<MemoryError> + From<NmcError>> FromSequencerErrors for E {}

/// Which norm a pending reduction carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Norm {
    Global,
    Weight(u32),
    Update(u32),
}

/// What the step is waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
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
pub(super) struct Front {
    pub(super) tensor: u32,
    pub(super) sub: u8,
}

/// A tensor in the lookahead window: its descriptor (read once, at the front) and its
/// norms as they come back.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Window {
    pub(super) desc: TensorDesc,
    pub(super) weight_sq: Option<f32>,
    pub(super) update_sq: Option<f32>,
}

/// The LAMB state machine.
#[derive(Debug)]
pub struct LambSequencer {
    pub(super) job: Option<LambJob>,
    /// The job's tensor count, table and channels, copied out of `job` at the start (so
    /// the handlers do not copy the 72-byte job each time).
    pub(super) tensors: u32,
    pub(super) table: DevAddr,
    pub(super) channels: ChannelRange,
    pub(super) stage: Stage,
    pub(super) front: Front,
    /// Next tensor whose stage 2 is due.
    pub(super) s2_next: u32,
    pub(super) window: [Window; LOOKAHEAD as usize + 1],
    pub(super) pending: Deque<(NmcTicket, Norm), MAX_PENDING_REDUCTIONS>,
    pub(super) last_ticket: Option<NmcTicket>,
    pub(super) global_norm: f32,
    pub(super) clip: f32,
    /// Whether the front tensor's descriptor is in its window slot (read once, used by
    /// six emissions, stage 2 included).
    pub(super) front_read: bool,
    pub(super) templates: Templates,
    pub(super) work: SequencerWork,
    /// An engine refused a call for want of room since the last `NmcDone` pumped: only
    /// then can a completion let the pipeline go on (everything else it waits for comes
    /// with `PartialsReady`).
    pub(super) refused: bool,
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

impl LambSequencer {
    /// Whether the last started step has finished.
    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done
    }

    /// Abandons the running step after an engine failed a command it had accepted, and
    /// returns the error to report: the sequencer is idle again and a new step may start.
    pub fn abort<E: From<NmcError>>(&mut self, e: NmcError) -> E {
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
    pub fn start<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        job: LambJob,
        p: &mut P,
    ) -> Result<(), E> {
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
        self.pump::<_, E>(p)
    }

    pub(super) fn read_desc<P: DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        index: u32,
        p: &mut P,
    ) -> Result<TensorDesc, E> {
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
    pub(super) fn submit<P: NmcController, E: FromSequencerErrors>(
        &mut self,
        kind: Kind,
        t: &TensorDesc,
        row: u32,
        index: u32,
        p: &mut P,
    ) -> Result<bool, E> {
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

    pub(super) fn reduce<P: NmcController, E: FromSequencerErrors>(
        &mut self,
        norm: Norm,
        p: &mut P,
    ) -> Result<bool, E> {
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

    pub(super) fn write_scalar<P: NmcController, E: FromSequencerErrors>(
        &mut self,
        reg: u8,
        v: f32,
        p: &mut P,
    ) -> Result<bool, E> {
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

    pub(super) fn slot(&mut self, tensor: u32) -> Option<&mut Window> {
        self.window.get_mut((tensor % (LOOKAHEAD + 1)) as usize)
    }

    /// Handles `NmcDone` and `PartialsReady` for this sequencer.
    ///
    /// # Errors
    /// [`SequencerError::UnexpectedResult`] for a result nobody asked for; platform errors.
    pub fn on_done<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        ticket: NmcTicket,
        p: &mut P,
    ) -> Result<(), E> {
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
        self.pump::<_, E>(p)
    }

    /// Handles a reduction result.
    ///
    /// # Errors
    /// [`SequencerError::UnexpectedResult`] for a ticket that is not the oldest pending
    /// reduction; platform errors.
    pub fn on_partials<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        ticket: NmcTicket,
        sum: f32,
        p: &mut P,
    ) -> Result<(), E> {
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
                    if !self.write_scalar::<_, E>(reg, v, p)? {
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
        self.pump::<_, E>(p)
    }

    /// Emits whatever can be emitted now.
    pub(super) fn pump<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        p: &mut P,
    ) -> Result<(), E> {
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
                        if !self.reduce::<_, E>(Norm::Global, p)? {
                            return Ok(());
                        }
                        self.stage = Stage::AwaitGlobal;
                        continue;
                    }
                    let t = self.read_desc::<_, E>(next, p)?;
                    if !self.submit::<_, E>(Kind::SumOfSquares, &t, t.g_row, next, p)? {
                        return Ok(());
                    }
                    self.stage = Stage::GradNorm { next: next + 1 };
                }
                Stage::Tensors => {
                    if !self.step_tensors::<_, E>(p)? {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// One emission of the per-tensor pipeline; `Ok(false)` when nothing can be emitted.
    pub(super) fn step_tensors<P: NmcController + DeviceMemory, E: FromSequencerErrors>(
        &mut self,
        p: &mut P,
    ) -> Result<bool, E> {
        // Stage 2 of the oldest tensor as soon as its norms are back.
        if self.s2_next < self.front.tensor {
            let i = self.s2_next;
            let norms = self.slot(i).map(|s| (s.weight_sq, s.update_sq));
            if let Some((Some(wsq), Some(usq))) = norms {
                let operand = match &self.job {
                    Some(j) => -j.params.lr * trust_ratio(&j.params, wsq, usq),
                    None => return Err(SequencerError::UnexpectedResult.into()),
                };
                if !self.write_scalar::<_, E>(7, operand, p)? {
                    return Ok(false);
                }
                // The descriptor was read when the tensor was at the front.
                let desc = self.slot(i).map(|s| s.desc).unwrap_or_default();
                if !self.submit::<_, E>(Kind::Stage2, &desc, 0, i, p)? {
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
            let d = self.read_desc::<_, E>(i, p)?;
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
                self.write_scalar::<_, E>(7, self.clip, p)?
                    && self.submit::<_, E>(Kind::Stage1, &t, 0, i, p)?
            }
            1 => self.submit::<_, E>(Kind::SumOfSquares, &t, t.w_row, i, p)?,
            2 => self.reduce::<_, E>(Norm::Weight(i), p)?,
            3 => self.submit::<_, E>(Kind::SumOfSquares, &t, t.u_row, i, p)?,
            _ => self.reduce::<_, E>(Norm::Update(i), p)?,
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
