//! The board's implementation of the firmware's platform traits, over a RAM window that
//! stands in for the GPU's device memory and the NMC engines' MMIO.
//!
//! On silicon each call would be a few MMIO loads and stores; here it is the same amount
//! of work on RAM, so the instruction counts measured around a handler include a
//! realistic platform cost. Completions are not simulated in time: the board queues the
//! NMC requests it accepted and [`Board::next_nmc_event`] hands back their completion
//! events in order, which is all the sequencer needs.

use heapless::Deque;
use nmcp_firmware::cp::{CpConfig, CuResources};
use nmcp_firmware::nmc::{lay_out, LambJob, LambParams, NmcGeometry, Stage1Program};
use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle, DevAddr, DeviceMemory, DispatchError, DispatchRequest,
    KernelDispatcher, MappedFifo, MemoryError, NmcController, NmcError, NmcTicket,
};
use nmcp_firmware::Event;
use nmcp_isa::aql::QueueConfig;
use nmcp_isa::aql::{self, AqlPacket, DeviceRange, KernelDispatchPacket, PacketHeader, PacketType};
use nmcp_isa::aql::{AQL_PACKET_BYTES, KERNEL_DESCRIPTOR_BYTES};
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES, MAX_KERNEL_OBJECTS};
use nmcp_isa::nmc::{EncodedMacroCommand, MacroCommand, MAX_MACRO_BYTES};

use crate::scenario::{CpScenario, LambScenario, PredictorWeights, MAX_TENSORS};

/// Device address of window byte 0 (what the firmware sees as the start of device memory).
pub const DEVICE_BASE: DevAddr = 0x1000_0000;
/// The HiFive1 build (16 KiB of RAM): the compact CP layout of [`map`].
const SMALL: bool = cfg!(feature = "hifive1");
/// Bytes of the device-memory window for every scenario (the device range the CP is
/// configured with).
pub const WINDOW_BYTES: usize = if SMALL {
    map::DOORBELLS + BOARD_QUEUES * 8
} else {
    map::RINGS + map::RING_BYTES
};
/// Window offset of the first byte RAM backs while a CP scenario is laid out: on the
/// HiFive1 build the queue words ([`map::QUEUE_WORDS`]); below them lie the LAMB area and
/// the kernel descriptors, which the CP never reads (it only checks that a kernel object
/// lies in device memory). Zero on virt, where RAM backs the whole window.
pub const CP_BACKED_START: usize = if SMALL { map::QUEUE_WORDS } else { 0 };
/// Bytes of RAM backing the window: on the HiFive1 build the CP's queue words, records
/// and rings ([`CP_BACKED_START`] up to [`map::DOORBELLS`]; a LAMB scenario uses its
/// first [`LAMB_WINDOW_BYTES`] from window offset 0), on virt the whole window. An
/// access to an unbacked part fails with `MemoryError::OutOfRange`.
pub const BACKED_WINDOW_BYTES: usize = if SMALL {
    map::DOORBELLS - map::QUEUE_WORDS
} else {
    WINDOW_BYTES
};
/// Bytes of the window the LAMB scenarios use (its start), for a board with little RAM.
pub const LAMB_WINDOW_BYTES: usize = map::KERNELS;
/// NMC requests (commands and reductions) the engine model holds before it says `Busy`.
pub const NMC_QUEUE_DEPTH: usize = 8;
/// Scalar registers per bank ALU.
pub const SCALAR_REGS: u8 = 8;
/// Queues the board's queue block serves.
pub const BOARD_QUEUES: usize = nmcp_isa::aql::MAX_QUEUES;

/// Window layout: offsets from [`DEVICE_BASE`], virt's and the HiFive1's compact one.
pub mod map;
/// The T3 blocks (store tracker, DMA engines, output mapping) of the T3 line.
mod t3;

/// What the queue layout needs of a GEMM shape whose record is written
/// ([`Board::lay_out_cp_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaidShape {
    /// The record's first kernel object (rebased into the descriptor area): what a
    /// queue's packet names.
    pub kernel_object: DevAddr,
    /// Workgroups of 128x128 tiles (the packet's grid).
    pub tiles: u32,
}

/// Why a scenario cannot be laid out or run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// More queues than the board serves, or none.
    Queues(u8),
    /// Ring size not a power of two, or all rings together exceed the ring space.
    Ring(u32),
    /// A scenario with no GEMM shapes, or a shape with no kernel.
    NoShapes,
    /// A LAMB scenario with no tensors.
    NoTensors,
    /// A write fell outside the window (a layout bug).
    Window,
}

impl core::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Queues(n) => write!(f, "{n} queues: the board serves 1..={BOARD_QUEUES}"),
            Self::Ring(n) => write!(f, "ring of {n} packets: not a power of two or too big"),
            Self::NoShapes => f.write_str("CP scenario has no usable GEMM shape"),
            Self::NoTensors => f.write_str("LAMB scenario has no tensors"),
            Self::Window => f.write_str("layout write outside the device window"),
        }
    }
}

impl core::error::Error for LayoutError {}

/// An NMC request the engine accepted and has not completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NmcPending {
    Command(NmcTicket),
    Reduction(NmcTicket),
}

/// What the platform was asked to do, for the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BoardStats {
    /// Kernels dispatched.
    pub dispatches: u32,
    /// Requests the CP wrote into the dispatcher's FIFO ([`KernelDispatcher::mapped_fifo`])
    /// naming a queue the board does not have: found when the dispatcher takes the
    /// entries ([`Board::settle`]), as a hardware FIFO would, neither hashed nor counted
    /// as dispatches. Any is a firmware fault the report refuses.
    pub stray_requests: u32,
    /// Packets completed without a dispatch.
    pub completions: u32,
    /// Macro-commands accepted.
    pub macro_commands: u32,
    /// Scalar-register writes.
    pub scalar_writes: u32,
    /// Cross-bank reductions requested.
    pub reductions: u32,
    /// FNV-1a over every dispatch request (queue, id, kernel object).
    pub dispatch_hash: u32,
    /// FNV-1a over every encoded macro-command and scalar write.
    pub nmc_hash: u32,
    /// Clock ticks (`mcycle`; instructions under QEMU `-icount shift=0`) the board spent
    /// on its own NMC bookkeeping (`nmc_hash`) inside the platform calls: not firmware or
    /// driver work, so the LAMB lines subtract it from their measurement.
    pub bookkeeping_ticks: u64,
    /// T3 output maps and dispatch starts accepted.
    pub t3_maps: u32,
    /// T3 tracked regions accepted.
    pub t3_regions: u32,
    /// T3 regions refused with a live slot (`SetFull`; the firmware retries them).
    pub t3_refused: u32,
    /// FNV-1a over every encoded output map, dispatch start and tracked region, in the
    /// order programmed (timed into `bookkeeping_ticks`, like `nmc_hash`).
    pub t3_hash: u32,
}

const FNV_OFFSET: u32 = 0x811c_9dc5;
const FNV_PRIME: u32 = 0x0100_0193;

fn fnv(mut h: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        h = (h ^ u32::from(b)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// FNV-1a over little-endian 32-bit words (a short tail zero-padded): as strong a check
/// of the encoded commands as byte-wise FNV at a quarter of the instructions. It runs
/// inside the measured `submit`; its ticks are counted in
/// [`BoardStats::bookkeeping_ticks`] and taken out of the LAMB measurements.
fn fnv_words(mut h: u32, bytes: &[u8]) -> u32 {
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        let w = <[u8; 4]>::try_from(w).map_or(0, u32::from_le_bytes);
        h = (h ^ w).wrapping_mul(FNV_PRIME);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut w = [0u8; 4];
        for (d, s) in w.iter_mut().zip(tail) {
            *d = *s;
        }
        h = (h ^ u32::from_le_bytes(w)).wrapping_mul(FNV_PRIME);
    }
    h
}

/// The rate `Clock::hz` reports unless told otherwise: QEMU with `-icount shift=0` retires
/// one instruction per nanosecond, so its `mcycle` counts at 1 GHz.
pub const DEFAULT_CLOCK_HZ: u64 = 1_000_000_000;

/// Dispatches the board latches between two [`Board::settle`] calls before it reports
/// `Busy`: its dispatcher's request FIFO, which the CP's steady lane fills in place
/// ([`KernelDispatcher::mapped_fifo`]). 32 on virt; 8 on the HiFive1 build (16 KiB of
/// RAM), where the harness settles after every handler and the board's scenarios
/// dispatch groups of at most 8 (a larger group goes out in parts, as at any full FIFO:
/// the CP keeps the rest for a later event).
pub const MAX_LATCHED_DISPATCHES: usize = if SMALL { 8 } else { 32 };

/// `mem` as 32-bit words (a trailing partial word left out).
///
/// # Safety
/// `mem` starts on a 4-byte boundary ([`Board`]'s `word_aligned`). Every bit pattern is
/// a valid `u32`, the words cover only `mem`'s bytes, and the result borrows `mem`.
#[inline(always)]
unsafe fn words(mem: &[u8]) -> &[u32] {
    // SAFETY: as the function's contract says.
    unsafe { core::slice::from_raw_parts(mem.as_ptr().cast::<u32>(), mem.len() / 4) }
}

/// [`words`], mutable.
///
/// # Safety
/// As [`words`].
#[inline(always)]
unsafe fn words_mut(mem: &mut [u8]) -> &mut [u32] {
    // SAFETY: as the function's contract says.
    unsafe { core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u32>(), mem.len() / 4) }
}

/// The platform: a device-memory window plus queue, dispatch and NMC blocks.
pub struct Board<'a> {
    mem: &'a mut [u8],
    /// `mem` starts on a 4-byte boundary (always on the board; a host test's buffer may
    /// not), so it can be offered as words ([`words_mut`]). Found once: a
    /// hardware CP knows its memory map, and the board should not make it pay per call.
    word_aligned: bool,
    clock: fn() -> Cycle,
    clock_hz: u64,
    nmc: Deque<NmcPending, NMC_QUEUE_DEPTH>,
    next_ticket: u32,
    /// Offer the window to the CP as mapped words ([`DeviceMemory::mapped_words`]).
    mapped: bool,
    /// Doorbells rung and not yet read by the CP (bit per queue).
    doorbells: u32,
    /// Window offset of backing byte 0: [`CP_BACKED_START`] while a CP scenario is laid
    /// out, 0 for a LAMB scenario.
    backed_from: u64,
    /// Ring size in packets of the CP scenario laid out ([`Board::begin_cp`]; every
    /// queue's ring is this size), so the packet processor's side ([`Board::consume`])
    /// finds a packet's slot.
    ring_packets: u32,
    /// Dispatch requests not yet folded into `stats` ([`Board::settle`]).
    dispatched: heapless::Vec<DispatchRequest, MAX_LATCHED_DISPATCHES>,
    /// Pushed groups ([`KernelDispatcher::dispatch_pushed`]) still to refuse with `Busy`
    /// ([`Board::refuse_pushed`]; host tests only: the board binary's dispatcher never
    /// refuses a valid group, and pays nothing for the hook).
    #[cfg(any(test, feature = "fault-injection"))]
    refuse_pushed: u32,
    /// The T3 blocks' state (the tracker's pending entries live in `mem`).
    t3: t3::T3Model,
    /// What the firmware asked for.
    pub stats: BoardStats,
}

impl<'a> Board<'a> {
    /// The command window holds a command of `len` bytes: hashes it (the board's own
    /// bookkeeping, timed so the LAMB lines can leave it out) and queues its completion.
    #[inline(always)]
    fn command_written(&mut self, len: usize) -> Result<NmcTicket, NmcError> {
        let bytes = self
            .mem
            .get(map::NMC_COMMAND..map::NMC_COMMAND + len)
            .ok_or(NmcError::Unsupported)?;
        let t0 = (self.clock)();
        self.stats.nmc_hash = fnv_words(self.stats.nmc_hash, bytes);
        let ticks = (self.clock)().saturating_sub(t0);
        self.stats.bookkeeping_ticks = self.stats.bookkeeping_ticks.saturating_add(ticks);
        let t = self.ticket();
        self.nmc
            .push_back(NmcPending::Command(t))
            .map_err(|_| NmcError::Busy)?;
        self.stats.macro_commands = self.stats.macro_commands.saturating_add(1);
        Ok(t)
    }

    /// A board over `mem` (the window, [`WINDOW_BYTES`] or more), reading time from
    /// `clock`.
    pub fn new(mem: &'a mut [u8], clock: fn() -> Cycle) -> Self {
        Self {
            word_aligned: mem.as_ptr().align_offset(4) == 0,
            mem,
            clock,
            clock_hz: DEFAULT_CLOCK_HZ,
            nmc: Deque::new(),
            next_ticket: 0,
            mapped: true,
            doorbells: 0,
            backed_from: 0,
            ring_packets: 1,
            dispatched: heapless::Vec::new(),
            #[cfg(any(test, feature = "fault-injection"))]
            refuse_pushed: 0,
            t3: t3::T3Model::default(),
            stats: BoardStats {
                dispatch_hash: FNV_OFFSET,
                nmc_hash: FNV_OFFSET,
                t3_hash: FNV_OFFSET,
                ..BoardStats::default()
            },
        }
    }

    /// Folds the dispatches latched since the last call into [`BoardStats`]
    /// (`dispatches`, `dispatch_hash`: FNV-1a over queue, dispatch id and kernel object).
    pub fn settle(&mut self) {
        for req in self.dispatched.iter() {
            if usize::from(req.queue) >= BOARD_QUEUES {
                self.stats.stray_requests = self.stats.stray_requests.saturating_add(1);
                continue;
            }
            let mut h = fnv(self.stats.dispatch_hash, &[req.queue]);
            h = fnv(h, &req.dispatch_id.to_le_bytes());
            self.stats.dispatch_hash = fnv(h, &req.kernel_object.to_le_bytes());
            self.stats.dispatches = self.stats.dispatches.saturating_add(1);
        }
        self.dispatched.clear();
    }

    /// Makes the dispatcher refuse (`Busy`) the next `groups` groups the CP pushes into
    /// its FIFO ([`KernelDispatcher::dispatch_pushed`]): fault injection for the CP's
    /// undo of a refused group (host tests).
    #[cfg(any(test, feature = "fault-injection"))]
    pub fn refuse_pushed(&mut self, groups: u32) {
        self.refuse_pushed = groups;
    }

    /// Rings the doorbells of the queues in `mask` (one bit per queue): the CP sees them
    /// through `KernelDispatcher::take_doorbells` with the next `Doorbell` event.
    pub fn ring(&mut self, mask: u32) {
        self.doorbells |= mask;
    }

    /// The window is offered to the CP as mapped words.
    #[inline(always)]
    fn offers_words(&self) -> bool {
        self.mapped && self.word_aligned
    }

    /// Latches an accepted dispatch request: what a dispatcher's doorbell register would
    /// hold; hashed after the measured region ([`Board::settle`]), so the report's hash
    /// costs the firmware nothing.
    ///
    /// # Errors
    /// [`DispatchError::Busy`] when [`MAX_LATCHED_DISPATCHES`] are latched.
    #[inline(always)]
    fn latch(&mut self, req: &DispatchRequest) -> Result<(), DispatchError> {
        self.dispatched.push(*req).map_err(|_| DispatchError::Busy)
    }

    /// Forgets latched dispatches and zeroes the counters (the window stays).
    pub fn clear_stats(&mut self) {
        self.dispatched.clear();
        self.stats = BoardStats {
            dispatch_hash: FNV_OFFSET,
            nmc_hash: FNV_OFFSET,
            t3_hash: FNV_OFFSET,
            ..BoardStats::default()
        };
    }

    /// Resets the window and the counters.
    pub fn reset(&mut self) {
        self.dispatched.clear();
        self.doorbells = 0;
        self.mem.fill(0);
        self.nmc.clear();
        self.next_ticket = 0;
        self.t3 = t3::T3Model::default();
        self.stats = BoardStats {
            dispatch_hash: FNV_OFFSET,
            nmc_hash: FNV_OFFSET,
            t3_hash: FNV_OFFSET,
            ..BoardStats::default()
        };
    }

    /// Offset into the backing RAM of device address `addr` (wrapping: an address below
    /// the backed part gives a huge offset, which no bounds check passes).
    #[inline(always)]
    fn backed(&self, addr: DevAddr) -> u64 {
        addr.wrapping_sub(DEVICE_BASE)
            .wrapping_sub(self.backed_from())
    }

    /// [`Board::backed_from`]'s field; a constant 0 on virt, so its accesses cost what
    /// they did before the HiFive1 build's compact window.
    #[inline(always)]
    fn backed_from(&self) -> u64 {
        if SMALL {
            self.backed_from
        } else {
            0
        }
    }

    fn window(&mut self, addr: DevAddr, len: usize) -> Result<&mut [u8], MemoryError> {
        let raw = addr
            .checked_sub(DEVICE_BASE)
            .ok_or(MemoryError::OutOfRange)?;
        let off = raw
            .checked_sub(self.backed_from())
            .ok_or(MemoryError::OutOfRange)?;
        let off = usize::try_from(off).map_err(|_| MemoryError::OutOfRange)?;
        let end = off.checked_add(len).ok_or(MemoryError::OutOfRange)?;
        self.mem.get_mut(off..end).ok_or(MemoryError::OutOfRange)
    }

    /// [`DeviceMemory::read_u32`] off the fast path (kept out of line so the compiler
    /// does not merge it with the aligned load).
    #[inline(never)]
    fn read_u32_slow(&mut self, addr: DevAddr) -> Result<u32, MemoryError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.window(addr, 4)?);
        Ok(u32::from_le_bytes(b))
    }

    #[inline(never)]
    fn write_u32_slow(&mut self, addr: DevAddr, value: u32) -> Result<(), MemoryError> {
        self.window(addr, 4)?.copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    fn put(&mut self, off: usize, bytes: &[u8]) -> Result<(), LayoutError> {
        self.write(DEVICE_BASE + off as u64, bytes)
            .map_err(|_| LayoutError::Window)
    }

    /// The same board without a mapped view: the CP reads word by word through
    /// [`DeviceMemory::read_u32`] (its general path).
    #[must_use]
    pub fn unmapped(mut self) -> Self {
        self.mapped = false;
        self
    }

    /// Offers the window as mapped words or not ([`Board::unmapped`] in place); returns
    /// whether it did before.
    pub fn set_mapped(&mut self, mapped: bool) -> bool {
        core::mem::replace(&mut self.mapped, mapped)
    }

    /// The same board with a clock of `hz` hertz (e.g. a HiFive1's core clock).
    #[must_use]
    pub fn with_clock_hz(mut self, hz: u64) -> Self {
        self.clock_hz = hz;
        self
    }

    /// The oldest outstanding NMC request's completion: `NmcDone` for a command,
    /// `PartialsReady` carrying `reduction_sum` for a reduction.
    pub fn next_nmc_event(&mut self, reduction_sum: f32) -> Option<Event> {
        Some(match self.nmc.pop_front()? {
            NmcPending::Command(ticket) => Event::NmcDone {
                ticket,
                status: Ok(()),
            },
            NmcPending::Reduction(ticket) => Event::PartialsReady {
                ticket,
                sum: reduction_sum,
                status: Ok(()),
            },
        })
    }

    fn ticket(&mut self) -> NmcTicket {
        let t = NmcTicket(self.next_ticket);
        self.next_ticket = self.next_ticket.wrapping_add(1);
        t
    }

    /// Writes the CP scenario into the window (kernel descriptors, extension records,
    /// one GEMM packet at the head of every queue, published indices) and returns the
    /// CP's configuration.
    ///
    /// # Errors
    /// [`LayoutError`] if the scenario does not fit the board.
    pub fn lay_out_cp(&mut self, s: &CpScenario) -> Result<CpConfig, LayoutError> {
        self.lay_out_cp_at(s, 0)
    }

    /// [`Board::lay_out_cp`] with the GEMMs published as dispatch id `id` (ring slot
    /// `id % ring_packets`; read index `id`, write index `id + 1`): the next iteration
    /// of a training loop on the same queues.
    ///
    /// # Errors
    /// [`LayoutError`] if the scenario does not fit the board.
    pub fn lay_out_cp_at(&mut self, s: &CpScenario, id: u64) -> Result<CpConfig, LayoutError> {
        let mut s = s.clone();
        let mut cfg = CpConfig::empty();
        self.lay_out_cp_into(&mut s, id, Some(&mut cfg))?;
        Ok(cfg)
    }

    /// [`Board::lay_out_cp_at`] in place: rebases the kernel objects of `s`'s shapes into
    /// the descriptor area (so `s` is consumed) and writes the CP's configuration into
    /// `cfg` when given (left unchanged otherwise). The same steps as the board's
    /// streamed layout (`lay_out_variant` in the crate root): [`Board::begin_cp`],
    /// [`Board::lay_out_cp_shape`] per shape, [`Board::lay_out_cp_queues`] and
    /// [`set_predictor`].
    ///
    /// # Errors
    /// [`LayoutError`] if the scenario does not fit the board.
    pub fn lay_out_cp_into(
        &mut self,
        s: &mut CpScenario,
        id: u64,
        cfg: Option<&mut CpConfig>,
    ) -> Result<(), LayoutError> {
        self.begin_cp(s.queues, s.ring_packets, s.shapes.len())?;
        let mut laid: heapless::Vec<LaidShape, { crate::scenario::MAX_SHAPES }> =
            heapless::Vec::new();
        for (si, g) in s.shapes.iter_mut().enumerate() {
            let l = self.lay_out_cp_shape(si, g)?;
            laid.push(l).map_err(|_| LayoutError::NoShapes)?;
        }
        let mut cfg = cfg;
        self.lay_out_cp_queues(s.queues, s.ring_packets, &laid, id, cfg.as_deref_mut())?;
        if let Some(c) = cfg {
            set_predictor(c, &s.predictor);
        }
        Ok(())
    }

    /// Starts a CP layout: checks the queue count, ring size and shape count (1..=
    /// [`map::RECORD_SLOTS`]) and backs the CP's part of the
    /// window ([`CP_BACKED_START`]).
    ///
    /// # Errors
    /// [`LayoutError`] if the scenario does not fit the board.
    pub fn begin_cp(
        &mut self,
        queues: u8,
        ring_packets: u32,
        shapes: usize,
    ) -> Result<(), LayoutError> {
        let n = usize::from(queues);
        if n == 0 || n > BOARD_QUEUES {
            return Err(LayoutError::Queues(queues));
        }
        let ring_bytes = (ring_packets as usize).saturating_mul(AQL_PACKET_BYTES);
        if !ring_packets.is_power_of_two() || ring_bytes.saturating_mul(n) > map::RING_BYTES {
            return Err(LayoutError::Ring(ring_packets));
        }
        if shapes == 0 || shapes > map::RECORD_SLOTS {
            return Err(LayoutError::NoShapes);
        }
        self.backed_from = CP_BACKED_START as u64;
        self.ring_packets = ring_packets;
        Ok(())
    }

    /// The packet processor's side of a packet it is done with (its workgroups placed,
    /// or completed without a dispatch): INVALID is written back into the packet's
    /// header and the read index moves past it, as HSA's packet processor does (a slot
    /// the producer has not published again holds INVALID, never an old packet's
    /// header, so the CP may take a valid header at its head as published). The
    /// harness calls it before it tells the CP `KernelDispatched`.
    ///
    /// # Errors
    /// [`DispatchError::NoSuchQueue`] for a queue the board does not have.
    pub fn consume(&mut self, queue: u8, dispatch_id: u64) -> Result<(), DispatchError> {
        let q = usize::from(queue);
        if q >= BOARD_QUEUES {
            return Err(DispatchError::NoSuchQueue);
        }
        let ring_bytes = (self.ring_packets as usize).saturating_mul(AQL_PACKET_BYTES);
        let slot = (dispatch_id & u64::from(self.ring_packets.wrapping_sub(1))) as usize
            * AQL_PACKET_BYTES;
        let header = map::RINGS + q * ring_bytes + slot;
        let words = map::QUEUE_WORDS + q * map::QUEUE_WORDS_STRIDE + map::READ_INDEX;
        self.put(header, &(PacketType::Invalid as u16).to_le_bytes())
            .and_then(|()| self.put(words, &dispatch_id.saturating_add(1).to_le_bytes()))
            .map_err(|_| DispatchError::NoSuchQueue)
    }

    /// Rebases shape `si`'s kernel objects (placeholders) into the descriptor area and
    /// writes its extension record (one per shape, shared by every queue running it:
    /// records live with the GO library's code objects).
    ///
    /// # Errors
    /// [`LayoutError::NoShapes`] for a shape with no kernel or an index past
    /// [`map::RECORD_SLOTS`].
    pub fn lay_out_cp_shape(
        &mut self,
        si: usize,
        g: &mut GemmExt,
    ) -> Result<LaidShape, LayoutError> {
        if g.kernels.is_empty() || si >= map::RECORD_SLOTS {
            return Err(LayoutError::NoShapes);
        }
        for (ki, k) in g.kernels.iter_mut().enumerate() {
            let slot = si * MAX_KERNEL_OBJECTS + ki;
            k.kernel_object =
                DEVICE_BASE + (map::KERNELS + slot * KERNEL_DESCRIPTOR_BYTES as usize) as u64;
        }
        self.put(map::GEMM_EXTS + si * map::GEMM_EXT_STRIDE, &g.encode())?;
        Ok(LaidShape {
            kernel_object: g.kernels.first().map_or(0, |k| k.kernel_object),
            tiles: g.m.div_ceil(128).saturating_mul(g.n.div_ceil(128)).max(1),
        })
    }

    /// One GEMM packet at the head of every queue (queue `q` runs shape
    /// `q % shapes.len()`, published as dispatch id `id`), its indices and signal; with
    /// `cfg`, its queue descriptors, device range, resources and concurrency control
    /// (the predictor is [`set_predictor`]'s).
    ///
    /// # Errors
    /// [`LayoutError`] if the queues do not fit the board.
    pub fn lay_out_cp_queues(
        &mut self,
        queues: u8,
        ring_packets: u32,
        shapes: &[LaidShape],
        id: u64,
        cfg: Option<&mut CpConfig>,
    ) -> Result<(), LayoutError> {
        let ring_bytes = (ring_packets as usize).saturating_mul(AQL_PACKET_BYTES);
        if shapes.is_empty() {
            return Err(LayoutError::NoShapes);
        }
        let addr = |off: usize| DEVICE_BASE + off as u64;
        let n_shapes = shapes.len();
        let mut cfg = cfg;
        if let Some(c) = cfg.as_deref_mut() {
            c.queues.clear();
        }
        for q in 0..usize::from(queues) {
            let si = q % n_shapes;
            let g = shapes.get(si).ok_or(LayoutError::NoShapes)?;
            let words = map::QUEUE_WORDS + q * map::QUEUE_WORDS_STRIDE;
            let ring = map::RINGS + q * ring_bytes;
            let packet = AqlPacket::KernelDispatch(KernelDispatchPacket {
                header: PacketHeader::new(PacketType::KernelDispatch),
                dimensions: 1,
                workgroup_size: [256, 1, 1],
                grid_size: [g.tiles.saturating_mul(256), 1, 1],
                private_segment_size: 0,
                group_segment_size: 0,
                kernel_object: g.kernel_object,
                kernarg_address: 0,
                gemm_ext_address: addr(map::GEMM_EXTS + si * map::GEMM_EXT_STRIDE),
                completion_signal: addr(words + map::SIGNAL),
            });
            // A power of two (`begin_cp`): the slot is the id's low bits.
            let slot = (id & u64::from(ring_packets.wrapping_sub(1))) as usize * AQL_PACKET_BYTES;
            self.put(ring + slot, &aql::encode(&packet))?;
            // Read index id, write index id + 1 (one packet published), doorbell id + 1
            // (virt; unbacked on the HiFive1 build), signal 1.
            self.put(words + map::READ_INDEX, &id.to_le_bytes())?;
            self.put(words + map::WRITE_INDEX, &(id + 1).to_le_bytes())?;
            if !SMALL {
                self.put(map::doorbell(q), &(id + 1).to_le_bytes())?;
            }
            self.put(words + map::SIGNAL, &1u64.to_le_bytes())?;
            if let Some(c) = cfg.as_deref_mut() {
                c.queues
                    .push(QueueConfig {
                        ring_base: addr(ring),
                        size_packets: ring_packets,
                        read_index_addr: addr(words + map::READ_INDEX),
                        write_index_addr: addr(words + map::WRITE_INDEX),
                        doorbell_addr: addr(map::doorbell(q)),
                    })
                    .map_err(|_| LayoutError::Queues(queues))?;
            }
        }
        if let Some(c) = cfg {
            c.device = DeviceRange {
                base: DEVICE_BASE,
                len: WINDOW_BYTES as u64,
            };
            c.resources = CuResources::MI100;
            c.concurrency_control = true;
        }
        Ok(())
    }

    /// Writes the LAMB scenario's tensor table (each tensor's five arrays in consecutive
    /// row stripes) and returns the job.
    ///
    /// # Errors
    /// [`LayoutError`] if the scenario does not fit the board.
    pub fn lay_out_lamb(&mut self, s: &LambScenario) -> Result<LambJob, LayoutError> {
        if s.tensors.is_empty() {
            return Err(LayoutError::NoTensors);
        }
        self.backed_from = 0;
        let geometry = NmcGeometry {
            pseudo_channels: s.pseudo_channels,
            banks_per_pc: s.banks_per_pc,
            cols_per_row: s.cols_per_row,
            column_bytes: s.column_bytes,
            ts_entries: s.ts_entries,
            job_contexts: 1,
            alu_chunk: 1,
        };
        let mut row = 0u32;
        for (i, t) in s.tensors.iter().enumerate() {
            let placed = lay_out(&geometry, t.elements, row).ok_or(LayoutError::Window)?;
            row = placed.next_row;
            let desc = placed.desc;
            let off = map::TENSOR_TABLE + i * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES;
            self.put(off, &desc.encode())?;
        }
        Ok(LambJob {
            table: DEVICE_BASE + map::TENSOR_TABLE as u64,
            tensors: s.tensors.len() as u32,
            geometry,
            params: LambParams {
                lr: s.lr,
                beta1: s.beta1,
                beta2: s.beta2,
                eps: s.eps,
                weight_decay: s.weight_decay,
                max_grad_norm: s.max_grad_norm,
                bias_correction: true,
                step: s.step,
                trust_clamp: 0.0,
            },
            program: if s.three_slot {
                Stage1Program::ThreeSlot
            } else {
                Stage1Program::FourSlot
            },
        })
    }
}

/// Copies a scenario's predictor weights into the CP's configuration.
pub fn set_predictor(c: &mut CpConfig, w: &PredictorWeights) {
    c.predictor.min_q16 = w.min_q16;
    c.predictor.inv_range_q32 = w.inv_range_q32;
    c.predictor.weight_q16 = w.weight_q16;
    c.predictor.bias_q16 = w.bias_q16;
}

impl Clock for Board<'_> {
    fn now(&self) -> Cycle {
        (self.clock)()
    }

    fn hz(&self) -> u64 {
        self.clock_hz
    }
}

impl DeviceMemory for Board<'_> {
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError> {
        buf.copy_from_slice(self.window(addr, buf.len())?);
        Ok(())
    }

    fn write(&mut self, addr: DevAddr, data: &[u8]) -> Result<(), MemoryError> {
        self.window(addr, data.len())?.copy_from_slice(data);
        Ok(())
    }

    /// One bounds check and one load (the window is word-aligned on the board; an
    /// unaligned window or address takes the byte path, out of line).
    #[inline]
    fn read_u32(&mut self, addr: DevAddr) -> Result<u32, MemoryError> {
        let off = self.backed(addr);
        let p = self.mem.as_ptr().wrapping_add(off as usize);
        if off < self.mem.len().saturating_sub(3) as u64 && p as usize & 3 == 0 {
            // SAFETY: `off + 4 <= len` (checked above) and `p` is 4-byte aligned.
            Ok(u32::from_le(unsafe { p.cast::<u32>().read() }))
        } else {
            self.read_u32_slow(addr)
        }
    }

    #[inline]
    fn write_u32(&mut self, addr: DevAddr, value: u32) -> Result<(), MemoryError> {
        let off = self.backed(addr);
        let p = self.mem.as_mut_ptr().wrapping_add(off as usize);
        if off < self.mem.len().saturating_sub(3) as u64 && p as usize & 3 == 0 {
            // SAFETY: `off + 4 <= len` (checked above) and `p` is 4-byte aligned.
            unsafe { p.cast::<u32>().write(value.to_le()) };
            Ok(())
        } else {
            self.write_u32_slow(addr, value)
        }
    }

    /// The window as words, when it is word-aligned (always on the board; a host test's
    /// buffer may not be, and then the CP reads word by word).
    #[inline]
    fn mapped_words(&self) -> Option<(DevAddr, &[u32])> {
        // The view is the backed part (on the HiFive1 build, from the queue words on).
        let base = DEVICE_BASE + self.backed_from();
        // SAFETY: `word_aligned` was found for this `mem` (`Board::new`).
        self.offers_words()
            .then(|| (base, unsafe { words(self.mem) }))
    }

    #[inline]
    fn mapped_words_mut(&mut self) -> Option<(DevAddr, &mut [u32])> {
        let base = DEVICE_BASE + self.backed_from();
        // SAFETY: `word_aligned` was found for this `mem` (`Board::new`).
        self.offers_words()
            .then(|| (base, unsafe { words_mut(self.mem) }))
    }
}

impl KernelDispatcher for Board<'_> {
    fn dispatch(&mut self, req: &DispatchRequest) -> Result<(), DispatchError> {
        if usize::from(req.queue) >= BOARD_QUEUES {
            return Err(DispatchError::NoSuchQueue);
        }
        self.latch(req)
    }

    /// A whole GEMM group per call (a dispatcher that takes a group per command).
    #[inline]
    fn dispatch_group(&mut self, reqs: &[DispatchRequest]) -> (usize, Result<(), DispatchError>) {
        for (i, r) in reqs.iter().enumerate() {
            if usize::from(r.queue) >= BOARD_QUEUES {
                return (i, Err(DispatchError::NoSuchQueue));
            }
            if let Err(e) = self.latch(r) {
                return (i, Err(e));
            }
        }
        (reqs.len(), Ok(()))
    }

    fn take_doorbells(&mut self) -> u32 {
        core::mem::take(&mut self.doorbells)
    }

    /// The window as words and the latch FIFO, which the CP's steady lane fills in place.
    #[inline]
    fn mapped_fifo(&mut self) -> Option<MappedFifo<'_>> {
        let base = DEVICE_BASE + self.backed_from();
        if !self.offers_words() {
            return None;
        }
        Some(MappedFifo {
            base,
            // SAFETY: `word_aligned` was found for this `mem` (`Board::new`); the FIFO
            // is another field.
            words: unsafe { words_mut(self.mem) },
            fifo: &mut self.dispatched,
        })
    }

    /// Accepts the pushed group: the entries are in the FIFO already, and the dispatcher
    /// checks each one's queue when it takes it ([`Board::settle`], which counts a stray
    /// one in [`BoardStats::stray_requests`]), as a hardware dispatcher reads its FIFO,
    /// not while the CP waits.
    #[inline]
    fn dispatch_pushed(&mut self, from: usize) -> Result<(), DispatchError> {
        #[cfg(any(test, feature = "fault-injection"))]
        if self.refuse_pushed > 0 {
            self.refuse_pushed -= 1;
            return Err(DispatchError::Busy);
        }
        if from > self.dispatched.len() {
            return Err(DispatchError::Unsupported);
        }
        Ok(())
    }

    /// Stores `value` into the queue's completion-signal word and advances its read
    /// index (the board's queues hold one packet each, so the packet's own signal is the
    /// queue's).
    fn complete_without_dispatch(
        &mut self,
        queue: u8,
        dispatch_id: u64,
        value: i64,
    ) -> Result<(), DispatchError> {
        if usize::from(queue) >= BOARD_QUEUES {
            return Err(DispatchError::NoSuchQueue);
        }
        let words =
            DEVICE_BASE + (map::QUEUE_WORDS + usize::from(queue) * map::QUEUE_WORDS_STRIDE) as u64;
        let store = |b: &mut Self, a: DevAddr, v: &[u8]| {
            b.write(a, v).map_err(|_| DispatchError::NoSuchQueue)
        };
        store(self, words + map::SIGNAL as u64, &value.to_le_bytes())?;
        self.consume(queue, dispatch_id)?;
        self.stats.completions = self.stats.completions.saturating_add(1);
        Ok(())
    }
}

impl NmcController for Board<'_> {
    /// Encodes the command into the engines' command window, as a driver would write it
    /// to MMIO.
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        if self.nmc.is_full() {
            return Err(NmcError::Busy);
        }
        let slot = self
            .mem
            .get_mut(map::NMC_COMMAND..map::NMC_COMMAND + MAX_MACRO_BYTES)
            .ok_or(NmcError::OutOfRange)?;
        let len = cmd.encode(slot).map_err(|_| NmcError::Unsupported)?;
        self.command_written(len)
    }

    /// Copies the already-encoded command into the engines' command window.
    fn submit_encoded(&mut self, cmd: &EncodedMacroCommand) -> Result<NmcTicket, NmcError> {
        if self.nmc.is_full() {
            return Err(NmcError::Busy);
        }
        let bytes = cmd.as_bytes();
        let slot = self
            .mem
            .get_mut(map::NMC_COMMAND..map::NMC_COMMAND + bytes.len())
            .ok_or(NmcError::OutOfRange)?;
        slot.copy_from_slice(bytes);
        self.command_written(bytes.len())
    }

    fn write_scalar(&mut self, channels: ChannelSet, reg: u8, bits: u32) -> Result<(), NmcError> {
        if reg >= SCALAR_REGS {
            return Err(NmcError::NoSuchRegister);
        }
        let t0 = (self.clock)();
        let h = fnv(self.stats.nmc_hash, &channels.first.to_le_bytes());
        let h = fnv(h, &channels.count.to_le_bytes());
        let h = fnv(h, &[reg]);
        self.stats.nmc_hash = fnv(h, &bits.to_le_bytes());
        let ticks = (self.clock)().saturating_sub(t0);
        self.stats.bookkeeping_ticks = self.stats.bookkeeping_ticks.saturating_add(ticks);
        self.stats.scalar_writes = self.stats.scalar_writes.saturating_add(1);
        Ok(())
    }

    fn reduce_partials(&mut self, _channels: ChannelSet) -> Result<NmcTicket, NmcError> {
        if self.nmc.is_full() {
            return Err(NmcError::Busy);
        }
        let t = self.ticket();
        self.nmc
            .push_back(NmcPending::Reduction(t))
            .map_err(|_| NmcError::Busy)?;
        self.stats.reductions = self.stats.reductions.saturating_add(1);
        Ok(t)
    }
}
