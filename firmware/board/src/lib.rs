//! The firmware on a RISC-V board: canned scenarios fed through an in-RAM platform, each
//! firmware operation measured and reported as one text line.
//!
//! This library is target-independent so the host can test it (`cargo test -p
//! nmcp-board` runs the same scenarios on x86 and checks the functional fields against
//! the committed QEMU output); `src/main.rs` adds the RISC-V pieces: `mcycle`/`minstret`,
//! a GPIO pin around every measured region, semihosting output and exit.
//!
//! Report lines are `name key=value ...`. The keys in [`MEASURED_KEYS`] are measurements
//! (present only when a [`Meter`] measured); every other field is a functional result that
//! must be the same on every machine.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![warn(missing_docs)]

pub mod board;
pub mod scenario;

use core::fmt::{self, Write};

use nmcp_firmware::cp::{decide, CpAction, CpCostModel, CpWork, GemmCandidate, MAX_QUEUES};
use nmcp_firmware::nmc::NmcSequencer;
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};

pub use board::{
    Board, BoardStats, LayoutError, BACKED_WINDOW_BYTES, BOARD_QUEUES, DEVICE_BASE,
    LAMB_WINDOW_BYTES, WINDOW_BYTES,
};
use scenario::LambScenario;

/// Field keys that carry measurements rather than functional results.
pub const MEASURED_KEYS: [&str; 5] = [
    "instructions",
    "cycles",
    "peak_bytes",
    "high_water_bytes",
    "startup_bytes",
];
/// Events one LAMB step may take before the board gives up (8 per tensor plus a few,
/// with margin).
pub const MAX_LAMB_EVENTS: usize = 64 * scenario::MAX_TENSORS;

/// Instructions and cycles of one measured region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measured {
    /// Retired instructions (`minstret`).
    pub instructions: u64,
    /// Cycles (`mcycle`; equal to instructions under QEMU `-icount shift=0`).
    pub cycles: u64,
}

impl Measured {
    fn add(self, o: Self) -> Self {
        Self {
            instructions: self.instructions.saturating_add(o.instructions),
            cycles: self.cycles.saturating_add(o.cycles),
        }
    }
}

/// Measures regions of code. The host's meter measures nothing.
pub trait Meter {
    /// Starts a region (the board raises its GPIO pin first).
    fn start(&mut self);
    /// Ends the region started last; `None` when this meter cannot measure.
    fn stop(&mut self) -> Option<Measured>;
    /// Deepest stack use of any region so far, below its caller's frame, bytes; `None`
    /// when unknown.
    fn stack_peak(&mut self) -> Option<u64>;
    /// Deepest stack use since the firmware was initialised, measured from the top of
    /// the stack (every frame of the harness, layout and firmware included), bytes;
    /// `None` when unknown.
    fn stack_high_water(&mut self) -> Option<u64> {
        None
    }
    /// Deepest stack use of the start-up (the firmware's initialisation), measured from
    /// the top of the stack, bytes; `None` when unknown.
    fn stack_startup(&mut self) -> Option<u64> {
        None
    }
}

/// A meter that measures nothing (host runs).
#[derive(Debug, Default)]
pub struct NoMeter;

impl Meter for NoMeter {
    fn start(&mut self) {}
    fn stop(&mut self) -> Option<Measured> {
        None
    }
    fn stack_peak(&mut self) -> Option<u64> {
        None
    }
}

/// Why a board run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// A scenario blob did not decode.
    Decode(postcard::Error),
    /// A scenario does not fit the board.
    Layout(LayoutError),
    /// The firmware returned an error.
    Firmware(FirmwareError),
    /// The LAMB step did not finish within [`MAX_LAMB_EVENTS`] events.
    LambStuck,
    /// Writing a report line failed.
    Output,
    /// The CP wrote this many dispatch requests naming a queue the board does not have
    /// into the dispatcher's FIFO ([`BoardStats::stray_requests`]).
    StrayRequests(u32),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(e) => write!(f, "scenario blob: {e}"),
            Self::Layout(e) => write!(f, "scenario layout: {e}"),
            Self::Firmware(e) => write!(f, "firmware: {e}"),
            Self::LambStuck => write!(f, "LAMB step not done after {MAX_LAMB_EVENTS} events"),
            Self::Output => f.write_str("report output failed"),
            Self::StrayRequests(n) => write!(
                f,
                "the CP pushed {n} dispatch request(s) naming no board queue (1..={BOARD_QUEUES})"
            ),
        }
    }
}

impl core::error::Error for RunError {}

impl From<FirmwareError> for RunError {
    fn from(e: FirmwareError) -> Self {
        Self::Firmware(e)
    }
}
impl From<LayoutError> for RunError {
    fn from(e: LayoutError) -> Self {
        Self::Layout(e)
    }
}
impl From<fmt::Error> for RunError {
    fn from(_: fmt::Error) -> Self {
        Self::Output
    }
}

/// Writes ` instructions=N cycles=N` when measured.
fn measured(out: &mut impl Write, m: Option<Measured>) -> fmt::Result {
    match m {
        Some(m) => write!(out, " instructions={} cycles={}", m.instructions, m.cycles),
        None => Ok(()),
    }
}

/// The scenario blobs a run decodes.
#[derive(Debug, Clone, Copy)]
pub struct Blobs<'a> {
    /// A postcard-encoded [`scenario::CpScenario`].
    pub cp: &'a [u8],
    /// A postcard-encoded one-tensor [`LambScenario`].
    pub lamb_1t: &'a [u8],
    /// A postcard-encoded four-tensor [`LambScenario`].
    pub lamb_4t: &'a [u8],
    /// The further LAMB scenarios of [`scenario::lamb_scenarios`] after the first two
    /// (8 tensors, 4 without weight decay, 4 with the three-slot program), in that order;
    /// fewer (or none) simply skips the rest.
    pub lamb_more: &'a [&'a [u8]],
}

/// Runs every scenario and writes the report lines.
///
/// # Errors
/// [`RunError`] if a scenario does not decode or fit, or the firmware fails.
pub fn run_all(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blobs: &Blobs<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    run_small(fw, board, meter, blobs, out)?;
    // Last: board-side benchmarks of the decision's parts (their candidates sit on the
    // stack, so they do not count towards the firmware's stack peak above).
    run_parts(board, meter, blobs.cp, out)?;
    run_decide(board, meter, blobs.cp, out)?;
    Ok(())
}

/// What a board with 16 KiB of RAM runs: the CP decisions and the LAMB suite (not the
/// parts benchmarks, whose candidates and configuration sit on the stack).
///
/// # Errors
/// [`RunError`] if a scenario does not decode or fit, or the firmware fails.
pub fn run_small(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blobs: &Blobs<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    run_cp(fw, board, meter, blobs.cp, out)?;
    run_lamb_suite(&mut fw.nmc, board, meter, blobs, out)
}

/// The LAMB steps (one and four tensors), the per-tensor cost, the T3 placeholder and
/// the stack peak: everything a board without room for the CP's state can run.
///
/// # Errors
/// [`RunError`] if a scenario does not decode or fit, or the firmware fails.
#[inline(never)]
pub fn run_lamb_suite(
    seq: &mut NmcSequencer,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blobs: &Blobs<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    let l1: LambScenario = postcard::from_bytes(blobs.lamb_1t).map_err(RunError::Decode)?;
    let l4: LambScenario = postcard::from_bytes(blobs.lamb_4t).map_err(RunError::Decode)?;
    let m1 = run_lamb(seq, board, meter, "lamb_1t", &l1, out)?;
    let m4 = run_lamb(seq, board, meter, "lamb_4t", &l4, out)?;
    // The marginal cost of a tensor: the fixed part of a step (global norm, scalars)
    // cancels in the difference.
    write!(out, "lamb_per_tensor")?;
    let extra = l4.tensors.len().saturating_sub(l1.tensors.len()).max(1) as u64;
    let per = match (m1, m4) {
        (Some(a), Some(b)) => Some(Measured {
            instructions: b.instructions.saturating_sub(a.instructions) / extra,
            cycles: b.cycles.saturating_sub(a.cycles) / extra,
        }),
        _ => None,
    };
    measured(out, per)?;
    writeln!(out)?;
    for (blob, (name, _)) in blobs
        .lamb_more
        .iter()
        .zip(scenario::lamb_scenarios().iter().skip(2))
    {
        let s: LambScenario = postcard::from_bytes(blob).map_err(RunError::Decode)?;
        run_lamb(seq, board, meter, name, &s, out)?;
    }
    writeln!(out, "t3_program_gemm skipped=no-t3-firmware")?;
    write!(out, "stack")?;
    if let Some(peak) = meter.stack_peak() {
        write!(out, " peak_bytes={peak}")?;
    }
    if let Some(hw) = meter.stack_high_water() {
        write!(out, " high_water_bytes={hw}")?;
    }
    if let Some(st) = meter.stack_startup() {
        write!(out, " startup_bytes={st}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// The CP decisions: the canned scenario first seen (`cp_decision_32q_cold`: every
/// GEMM record read, validated and predicted) and again with the same GEMMs on fresh
/// queues (`cp_decision_32q`, the steady state of a training loop: the CP knows the
/// shapes), then the same steady state for 2, 4, 8 and 16 GEMMs of one shape
/// (`cp_decision_<n>g`) and a heterogeneous set (`cp_decision_hetero`: 16 queues over
/// every shape of the scenario).
///
/// # Errors
/// [`RunError`] from layout or firmware.
#[inline(never)]
pub fn run_cp(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    out: &mut impl Write,
) -> Result<(), RunError> {
    // The blob is decoded field by field as each layout writes it (`lay_out_blob`), so
    // no scenario sits on the stack while the CP runs.
    let all = Variant::ALL;
    // `CpScenario::queues` comes first and postcard encodes a `u8` as itself.
    let q = blob.first().copied().unwrap_or(0);
    let mut done = Dispatched::new();
    let cold = format_args!("cp_decision_{q}q_cold");
    run_cp_decision(fw, board, meter, blob, all, &mut done, true, cold, out)?;
    let name = format_args!("cp_decision_{q}q");
    run_cp_decision(fw, board, meter, blob, all, &mut done, false, name, out)?;
    for n in [2u8, 4, 8, 16] {
        let one = Variant {
            queues: Some(n),
            shapes: 1,
        };
        let cold = format_args!("cp_decision_{n}g_cold");
        run_cp_decision(fw, board, meter, blob, one, &mut done, true, cold, out)?;
        let name = format_args!("cp_decision_{n}g");
        run_cp_decision(fw, board, meter, blob, one, &mut done, false, name, out)?;
    }
    let hetero = Variant {
        queues: Some(16),
        shapes: usize::MAX,
    };
    let (nothing, discard) = (format_args!(""), &mut Discard);
    run_cp_decision(
        fw, board, meter, blob, hetero, &mut done, true, nothing, discard,
    )?;
    let name = format_args!("cp_decision_hetero");
    run_cp_decision(fw, board, meter, blob, hetero, &mut done, false, name, out)?;
    // The steady decision of the first line again, on the general path (no mapped view:
    // every word through `read_u32`, as the emulator's CP reads): what the cost model
    // charges a general visit and a general dispatch is measured here.
    run_cp_decision(
        fw, board, meter, blob, all, &mut done, true, nothing, discard,
    )?;
    let mapped = board.set_mapped(false);
    let name = format_args!("cp_decision_{q}q_general");
    let general = run_cp_decision(fw, board, meter, blob, all, &mut done, false, name, out);
    board.set_mapped(mapped);
    general
}

/// Which part of the canned CP scenario a decision runs: its queue count (`None`: the
/// scenario's) and its first `shapes` GEMM shapes.
#[derive(Debug, Clone, Copy)]
struct Variant {
    queues: Option<u8>,
    shapes: usize,
}

impl Variant {
    /// The whole scenario.
    const ALL: Self = Self {
        queues: None,
        shapes: usize::MAX,
    };
}

/// Takes one postcard-encoded value off the front of `rest`.
///
/// # Errors
/// [`RunError::Decode`].
fn take<'a, T: serde::Deserialize<'a>>(rest: &mut &'a [u8]) -> Result<T, RunError> {
    let (v, r) = postcard::take_from_bytes(rest).map_err(RunError::Decode)?;
    *rest = r;
    Ok(v)
}

/// Lays out the CP scenario `blob`, cut to `v`, in the window as dispatch id `id`; with
/// `cold`, the window is reset first and the CP configured in place for it. Returns the
/// variant's queue count.
///
/// # Errors
/// [`RunError`] from decoding, layout or configuration.
#[inline(never)]
fn lay_out_variant(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    blob: &[u8],
    v: Variant,
    id: u64,
    cold: bool,
) -> Result<u8, RunError> {
    if cold {
        board.reset();
        let mut laid = Ok((0, 0));
        fw.cp
            .configure_in_place(|cfg| laid = lay_out_blob(board, blob, v, id, Some(cfg)))
            .map_err(|e| RunError::Firmware(e.into()))?;
        Ok(laid?.0)
    } else {
        Ok(lay_out_blob(board, blob, v, id, None)?.0)
    }
}

/// Lays out the CP scenario `blob`, cut to `v`, in the window as dispatch id `id` and
/// fills `cfg` (queues, device, resources, predictor) when given. Returns the queue
/// count and the number of shapes laid out.
///
/// The blob is decoded as it is laid out, one field at a time: postcard writes a
/// [`scenario::CpScenario`] as its fields in order (`queues` a byte, `ring_packets` a varint, the
/// `shapes` as a varint count and then each record, then the predictor's arrays), so
/// `postcard::take_from_bytes` can read them one after another from the same bytes. At
/// most one [`GemmExt`] and one predictor row are on the stack, never a whole
/// `CpScenario` (1.3 KiB, and ~9 KiB of decoding frames on RV32 when decoded at once).
///
/// # Errors
/// [`RunError`] from decoding or layout.
fn lay_out_blob(
    board: &mut Board<'_>,
    blob: &[u8],
    v: Variant,
    id: u64,
    cfg: Option<&mut nmcp_firmware::cp::CpConfig>,
) -> Result<(u8, usize), RunError> {
    let mut rest = blob;
    let queues = take::<u8>(&mut rest)?;
    let queues = v.queues.unwrap_or(queues);
    let ring_packets: u32 = take(&mut rest)?;
    let n = usize::try_from(take::<u32>(&mut rest)?).unwrap_or(usize::MAX);
    let used = n.min(v.shapes);
    board.begin_cp(queues, ring_packets, used)?;
    let mut laid: heapless::Vec<board::LaidShape, { scenario::MAX_SHAPES }> = heapless::Vec::new();
    for si in 0..n {
        // Every record is read (the predictor follows them); the variant's are laid out.
        let mut g: GemmExt = take(&mut rest)?;
        if si < used {
            let l = board.lay_out_cp_shape(si, &mut g)?;
            laid.push(l).map_err(|_| LayoutError::NoShapes)?;
        }
    }
    match cfg {
        Some(cfg) => {
            board.lay_out_cp_queues(queues, ring_packets, &laid, id, Some(&mut *cfg))?;
            take_predictor(cfg, &mut rest)?;
        }
        None => board.lay_out_cp_queues(queues, ring_packets, &laid, id, None)?,
    }
    Ok((queues, laid.len()))
}

/// Reads the predictor's weights ([`scenario::PredictorWeights`], the rest of a CP
/// scenario blob) into the CP's configuration, one array at a time.
///
/// # Errors
/// [`RunError::Decode`].
fn take_predictor(c: &mut nmcp_firmware::cp::CpConfig, rest: &mut &[u8]) -> Result<(), RunError> {
    let p = &mut c.predictor;
    p.min_q16 = take(rest)?;
    p.inv_range_q32 = take(rest)?;
    for row in p.weight_q16.iter_mut() {
        *row = take(rest)?;
    }
    p.bias_q16 = take(rest)?;
    Ok(())
}

/// Runs the CP until nothing is left: every dispatched kernel reports dispatched and
/// completed, which lets the CP dispatch the next group.
#[inline(never)]
fn drain_cp(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    done: &mut Dispatched,
) -> Result<(), RunError> {
    for _ in 0..4 * MAX_QUEUES {
        while let Some(r) = fw.cp.pop_record() {
            if let CpAction::Dispatched { .. } = r.action {
                push_done(done, r.queue, r.dispatch_id)?;
            }
        }
        if done.is_empty() && !fw.cp.has_pending_work() {
            return Ok(());
        }
        for &(queue, id) in done.iter() {
            let dispatch_id = u64::from(id);
            // The packet processor is done with the packet: INVALID goes back into its
            // slot and the read index moves on.
            board
                .consume(queue, dispatch_id)
                .map_err(|e| RunError::Firmware(FirmwareError::Dispatch(e)))?;
            fw.handle(Event::KernelDispatched { queue, dispatch_id }, board)?;
            // The next group's dispatches (the stats are cleared after the drain).
            board.settle();
        }
        for &(queue, id) in done.iter() {
            let ev = Event::KernelCompleted {
                queue,
                dispatch_id: u64::from(id),
                status: Ok(()),
            };
            fw.handle(ev, board)?;
            board.settle();
        }
        done.clear();
        if fw.cp.has_pending_work() {
            fw.handle(Event::Deferred, board)?;
            board.settle();
        }
    }
    Err(RunError::Firmware(FirmwareError::Cp(
        nmcp_firmware::cp::CpError::Capacity,
    )))
}

/// Kernels one decision (or one round of [`drain_cp`]) dispatched: (queue, dispatch id).
/// The harness's ids are small (the layout publishes ids 0 and 1, the CP counts on from
/// there), so 32 bits. On the HiFive1 build the list holds 16 (one GEMM group: the
/// board's scenarios are all GEMMs, and a group has at most CD 16 members): 128 bytes
/// of stack; more is an error, never a silent drop.
type Dispatched = heapless::Vec<(u8, u32), MAX_DISPATCHED>;

/// Capacity of [`Dispatched`].
const MAX_DISPATCHED: usize = if cfg!(feature = "hifive1") {
    16
} else {
    MAX_QUEUES
};

/// Appends a dispatched kernel to `done`.
///
/// # Errors
/// [`RunError::Firmware`] (`CpError::Capacity`) for an id past 32 bits or a full list.
fn push_done(done: &mut Dispatched, queue: u8, dispatch_id: u64) -> Result<(), RunError> {
    let capacity = RunError::Firmware(FirmwareError::Cp(nmcp_firmware::cp::CpError::Capacity));
    let id = u32::try_from(dispatch_id).map_err(|_| capacity)?;
    done.push((queue, id))
        .map_err(|_| RunError::Firmware(FirmwareError::Cp(nmcp_firmware::cp::CpError::Capacity)))
}

/// A writer that drops everything (the warm-up runs).
struct Discard;

impl Write for Discard {
    fn write_str(&mut self, _: &str) -> fmt::Result {
        Ok(())
    }
}

/// One CP decision: a doorbell over the variant's queues with a GEMM at every head.
/// `cold` configures the CP afresh (no shape known); otherwise the previous decision's
/// kernels (`done`) are drained, the queues restart and the CP keeps the shapes of the
/// previous run. `done` then holds this decision's dispatches.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn run_cp_decision(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    v: Variant,
    done: &mut Dispatched,
    cold: bool,
    name: fmt::Arguments<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    let queues = prepare_cp_decision(fw, board, blob, v, done, cold)?;
    let before = fw.cp.work();
    // Every queue's producer rang its doorbell; one event reaches the CP, which reads
    // the doorbell bitmap.
    board.ring(u32::MAX >> (32 - u32::from(queues.clamp(1, 32))));
    let doorbell = Event::Doorbell {
        queue: queues.saturating_sub(1),
    };
    meter.start();
    fw.handle(doorbell, board)?;
    let m = meter.stop();
    report_cp_decision(fw, board, &before, queues, m, done, name, out)?;
    if fw.cp.has_pending_work() {
        // The decision was fixed before every queue was looked at: the rest are
        // classified in the follow-up event the platform sends, measured on its own.
        let before = fw.cp.work();
        meter.start();
        fw.handle(Event::Deferred, board)?;
        let m = meter.stop();
        report_followup(fw, board, &before, m, name, out)?;
    }
    Ok(())
}

/// Writes the line of a decision's follow-up event (`{name}_followup`): what it cost and
/// what it looked at. It dispatches nothing while the decision's group runs.
///
/// # Errors
/// [`RunError`] from the output.
#[inline(never)]
fn report_followup(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    before: &CpWork,
    m: Option<Measured>,
    name: fmt::Arguments<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    board.settle();
    let work = fw.cp.work().since(before);
    write!(out, "{name}_followup")?;
    measured(out, m)?;
    work_fields(out, &work)?;
    writeln!(out)?;
    Ok(())
}

/// A CP report line's work fields (` mem_accesses=... model_cycles=...`).
///
/// # Errors
/// [`RunError`] from the output.
fn work_fields(out: &mut impl Write, work: &CpWork) -> Result<(), RunError> {
    write!(
        out,
        " mem_accesses={} bytes_read={} predictions={} visits={} mapped_visits={} decoded={} \
         dispatches={} mapped_dispatches={} decisions={} model_cycles={}",
        work.mem_accesses,
        work.bytes_read,
        work.predictions,
        work.queue_visits,
        work.mapped_visits,
        work.packets_decoded,
        work.dispatches,
        work.mapped_dispatches,
        work.decisions,
        work.cycles(&CpCostModel::default()),
    )?;
    Ok(())
}

/// Lays out a decision's queues (see [`run_cp_decision`]) and returns their count;
/// `done` is then empty. Out of line, so its frames are gone when the CP runs.
///
/// # Errors
/// [`RunError`] from layout or firmware.
#[inline(never)]
fn prepare_cp_decision(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    blob: &[u8],
    v: Variant,
    done: &mut Dispatched,
    cold: bool,
) -> Result<u8, RunError> {
    let queues = if cold {
        lay_out_variant(fw, board, blob, v, 0, true)?
    } else {
        // The previous run's GEMMs all dispatch and complete (the CP decides the rest
        // of them group by group), then every queue gets the next iteration's GEMM.
        drain_cp(fw, board, done)?;
        let q = lay_out_variant(fw, board, blob, v, 1, false)?;
        board.clear_stats();
        // The same priority as the first run, so the same shape decides.
        fw.cp.set_rotation(0);
        q
    };
    done.clear();
    Ok(queues)
}

/// Writes a decision's report line: its dispatches (kept in `done`), the CP's work
/// since `before`, and the dispatch hash. Out of line, so its frame is not on the
/// stack while the CP runs.
///
/// # Errors
/// [`RunError`] from the CP's log or the output.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn report_cp_decision(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    before: &CpWork,
    queues: u8,
    m: Option<Measured>,
    done: &mut Dispatched,
    name: fmt::Arguments<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    board.settle();
    if board.stats.stray_requests > 0 {
        return Err(RunError::StrayRequests(board.stats.stray_requests));
    }
    let work = fw.cp.work().since(before);
    let (mut dispatched, mut swapped, mut cd, mut predicted) = (0u32, 0u32, 0u8, 0u8);
    while let Some(r) = fw.cp.pop_record() {
        if let CpAction::Dispatched {
            swapped: sw,
            cd: c,
            predicted_cd,
            ..
        } = r.action
        {
            push_done(done, r.queue, r.dispatch_id)?;
            dispatched += 1;
            swapped += u32::from(sw);
            cd = c;
            predicted = predicted_cd;
        }
    }
    write!(out, "{name}")?;
    measured(out, m)?;
    write!(
        out,
        " gemms={queues} dispatched={dispatched} cd={cd} predicted={predicted} swapped={swapped}"
    )?;
    work_fields(out, &work)?;
    writeln!(out, " dispatch_hash={:#010x}", board.stats.dispatch_hash)?;
    Ok(())
}

/// The per-GEMM steps of a queue scan, each measured alone on queue 0's head: decoding
/// the AQL packet, decoding the GEMM extension record, and computing the candidate
/// (features and kernel map).
///
/// # Errors
/// [`RunError`] from layout or decoding.
pub fn run_parts(
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    out: &mut impl Write,
) -> Result<(), RunError> {
    use nmcp_firmware::platform::DeviceMemory;
    use nmcp_isa::aql::{self, AQL_PACKET_BYTES};
    board.reset();
    let mut cfg = nmcp_firmware::cp::CpConfig::empty();
    lay_out_blob(board, blob, Variant::ALL, 0, Some(&mut cfg))?;
    let bad = |_| RunError::Layout(LayoutError::NoShapes);
    let mut pkt = [0u8; AQL_PACKET_BYTES];
    let ring = cfg.queues.first().map_or(0, |q| q.ring_base);
    board
        .read(ring, &mut pkt)
        .map_err(|e| RunError::Firmware(e.into()))?;
    let mut ext_bytes = [0u8; GEMM_EXT_BYTES];
    board
        .read(DEVICE_BASE + board::map::GEMM_EXTS as u64, &mut ext_bytes)
        .map_err(|e| RunError::Firmware(e.into()))?;

    meter.start();
    let packet = aql::decode(core::hint::black_box(&pkt));
    let m = meter.stop();
    packet.map_err(|_| RunError::Layout(LayoutError::Window))?;
    write!(out, "part_aql_decode")?;
    measured(out, m)?;
    writeln!(out)?;

    meter.start();
    let ext = GemmExt::decode(core::hint::black_box(&ext_bytes));
    let m = meter.stop();
    let ext = ext.map_err(bad)?;
    write!(out, "part_gemm_ext_decode")?;
    measured(out, m)?;
    writeln!(out)?;

    meter.start();
    let cand = GemmCandidate::new(core::hint::black_box(&ext), &cfg.resources);
    let m = meter.stop();
    let cand = cand.map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
    write!(out, "part_gemm_candidate")?;
    measured(out, m)?;
    writeln!(out, " ko_cd8={:#x}", cand.kernel_object_for(8))?;

    meter.start();
    let cd = cfg
        .predictor
        .predict_cd(core::hint::black_box(&cand.features));
    let m = meter.stop();
    write!(out, "part_predict")?;
    measured(out, m)?;
    writeln!(out, " cd={cd}")?;
    Ok(())
}

/// The decision function alone over the candidates of the CP scenario (no queue scan,
/// no device memory): how much of a decision is the predictor.
///
/// # Errors
/// [`RunError`] from layout or candidate construction.
pub fn run_decide(
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blob: &[u8],
    out: &mut impl Write,
) -> Result<(), RunError> {
    board.reset();
    let mut cfg = nmcp_firmware::cp::CpConfig::empty();
    let (queues, shapes) = lay_out_blob(board, blob, Variant::ALL, 0, Some(&mut cfg))?;
    let mut cands: heapless::Vec<GemmCandidate, MAX_QUEUES> = heapless::Vec::new();
    for q in 0..usize::from(queues) {
        let mut b = [0u8; GEMM_EXT_BYTES];
        let shape = q % shapes.max(1);
        let addr =
            DEVICE_BASE + (board::map::GEMM_EXTS + shape * board::map::GEMM_EXT_STRIDE) as u64;
        nmcp_firmware::platform::DeviceMemory::read(board, addr, &mut b)
            .map_err(|e| RunError::Firmware(e.into()))?;
        let ext = GemmExt::decode(&b).map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
        let c = GemmCandidate::new(&ext, &cfg.resources)
            .map_err(|_| RunError::Layout(LayoutError::NoShapes))?;
        let _ = cands.push(c);
    }
    let mut work = CpWork::default();
    meter.start();
    let d = decide(&cands, &cfg.predictor, &mut work);
    let m = meter.stop();
    write!(out, "decide_{}", cands.len())?;
    measured(out, m)?;
    writeln!(
        out,
        " cd={} predicted={} mixed={} predictions={} predictor_macs={}",
        d.cd, d.predicted, d.mixed, work.predictions, work.predictor_macs
    )?;
    Ok(())
}

/// One LAMB step: start, then every NMC completion until the sequencer is done. The
/// measurement is the sum over the firmware's handlers (the board's completion loop is
/// not counted).
///
/// # Errors
/// [`RunError`] from layout or firmware, or [`RunError::LambStuck`].
#[inline(never)]
pub fn run_lamb(
    seq: &mut NmcSequencer,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    name: &str,
    s: &LambScenario,
    out: &mut impl Write,
) -> Result<Option<Measured>, RunError> {
    board.reset();
    let job = board.lay_out_lamb(s)?;
    let work_before = seq.lamb.work();
    let mut total: Option<Measured> = None;
    let mut acc = |m: Option<Measured>| {
        if let Some(m) = m {
            total = Some(total.unwrap_or_default().add(m));
        }
    };
    meter.start();
    let started = seq.start_lamb(job, board);
    acc(meter.stop());
    started?;
    let mut events = 1u32;
    for _ in 0..MAX_LAMB_EVENTS {
        let Some(ev) = board.next_nmc_event(s.reduction_sum) else {
            break;
        };
        meter.start();
        // What `Firmware::handle` does with NMC completions.
        let r = seq.on_event(&ev, board);
        acc(meter.stop());
        r?;
        events += 1;
    }
    if !seq.lamb.is_done() {
        return Err(RunError::LambStuck);
    }
    let st = board.stats;
    // The board's own hashing inside the platform calls is not the firmware's work.
    let total = total.map(|m| Measured {
        instructions: m.instructions.saturating_sub(st.bookkeeping_ticks),
        cycles: m.cycles.saturating_sub(st.bookkeeping_ticks),
    });
    let work = seq.lamb.work().since(&work_before);
    write!(out, "{name}")?;
    measured(out, total)?;
    writeln!(
        out,
        " events={events} idle_events={} macro_commands={} scalar_writes={} reductions={} \
         descriptors={} program_words={} global_norm_milli={} nmc_hash={:#010x}",
        work.idle_handlers,
        st.macro_commands,
        st.scalar_writes,
        st.reductions,
        work.descriptors(),
        work.program_words,
        // Integer thousandths: no float formatting code in the board's flash.
        (seq.lamb.global_norm() * 1000.0) as u32,
        st.nmc_hash,
    )?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob<T: serde::Serialize>(v: &T) -> std::vec::Vec<u8> {
        let mut buf = [0u8; scenario::MAX_SCENARIO_BYTES];
        postcard::to_slice(v, &mut buf).unwrap().to_vec()
    }

    fn more_blobs() -> std::vec::Vec<std::vec::Vec<u8>> {
        scenario::lamb_scenarios()
            .iter()
            .skip(2)
            .map(|(_, s)| blob(s))
            .collect()
    }

    fn more_refs(more: &[std::vec::Vec<u8>]) -> std::vec::Vec<&[u8]> {
        more.iter().map(|b| b.as_slice()).collect()
    }

    /// Drops the measurement fields (and nothing else) from a report.
    fn functional(report: &str) -> std::vec::Vec<String> {
        report
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with("nmcp-board") && !l.starts_with("exit"))
            .map(|l| {
                l.split(' ')
                    .filter(|f| {
                        !MEASURED_KEYS
                            .iter()
                            .any(|k| f.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
                    })
                    .collect::<std::vec::Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    fn host_report() -> String {
        host_report_on(true)
    }

    fn host_report_on(mapped: bool) -> String {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let board = Board::new(&mut mem, || 0);
        let mut board = if mapped { board } else { board.unmapped() };
        let mut fw = Box::<Firmware>::default();
        let (cp, l1, l4) = (
            blob(&scenario::canned_cp()),
            blob(&scenario::canned_lamb(1)),
            blob(&scenario::canned_lamb(4)),
        );
        let more = more_blobs();
        let blobs = Blobs {
            cp: &cp,
            lamb_1t: &l1,
            lamb_4t: &l4,
            lamb_more: &more_refs(&more),
        };
        let mut out = String::new();
        run_all(&mut fw, &mut board, &mut NoMeter, &blobs, &mut out).unwrap();
        out
    }

    #[test]
    fn predictor_shape_matches_firmware() {
        assert_eq!(
            scenario::PREDICTOR_FEATURES,
            nmcp_firmware::cp::FEATURE_COUNT
        );
        assert_eq!(scenario::PREDICTOR_CLASSES, nmcp_firmware::cp::CLASS_COUNT);
    }

    /// The firmware decides the same on x86 as on RISC-V: the functional fields of a host
    /// run equal those of the committed QEMU output.
    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn host_run_matches_committed_qemu_output() {
        let host = host_report();
        let qemu = include_str!("../expected/virt.txt");
        assert_eq!(functional(&host), functional(qemu), "host report:\n{host}");
    }

    /// The CP's word-wise fast path over mapped memory and its general path (reads
    /// through the trait, full decode) decide the same: identical functional fields.
    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn fast_and_general_paths_decide_the_same() {
        let fast = host_report_on(true);
        let general = host_report_on(false);
        let cp = |r: &str| {
            functional(r)
                .into_iter()
                // The decisions (only the fast path stops at a fixed decision and
                // looks at the rest in a follow-up event) and their fields; the paths
                // count their reads and visits differently.
                .filter(|l| l.starts_with("cp_decision") && !l.contains("_followup"))
                .map(|l| {
                    l.split(' ')
                        .filter(|f| {
                            ![
                                "mem_accesses",
                                "bytes_read",
                                "model_cycles",
                                "visits",
                                "mapped_visits",
                                "mapped_dispatches",
                                "decoded",
                            ]
                            .iter()
                            .any(|k| f.starts_with(&format!("{k}=")))
                        })
                        .collect::<std::vec::Vec<_>>()
                        .join(" ")
                })
                .collect::<std::vec::Vec<_>>()
        };
        assert_eq!(cp(&fast).len(), 12);
        assert_eq!(cp(&fast), cp(&general));
    }

    /// The CP cost model (`CpCostModel::default()`, per-kind instruction counts) against
    /// every measured CP decision of the committed QEMU report: within 10 %. `nmcp board
    /// run --bless` re-records the report; a firmware change that moves a decision's
    /// cost by more than that fails here until the model is refitted.
    #[test]
    fn cost_model_matches_board_figures() {
        let model = CpCostModel::default();
        let qemu = include_str!("../expected/virt.txt");
        let mut n = 0;
        for line in qemu.lines().filter(|l| l.starts_with("cp_decision")) {
            let f = |k: &str| -> u64 {
                line.split(' ')
                    .find_map(|x| x.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                    .and_then(|v| v.parse().ok())
                    .expect("field missing or not a number")
            };
            let work = CpWork {
                handlers: 1,
                queue_visits: f("visits"),
                mapped_visits: f("mapped_visits"),
                packets_decoded: f("decoded"),
                predictions: f("predictions"),
                dispatches: f("dispatches"),
                mapped_dispatches: f("mapped_dispatches"),
                decisions: f("decisions"),
                ..CpWork::default()
            };
            let measured = f("instructions") as f64;
            let modelled = work.instructions(&model) as f64;
            let err = (modelled - measured).abs() / measured;
            assert!(err <= 0.10, "{line}: model {modelled} vs board {measured}");
            n += 1;
        }
        assert_eq!(
            n, 13,
            "every CP decision line checked, the follow-up and the general path's"
        );
    }

    /// The NMC sequencer's cost model (`SequencerCostModel::default()`) against every
    /// measured LAMB step of the committed QEMU report (1, 4, 8 tensors; without weight
    /// decay; three-slot program): within 10 %.
    #[test]
    fn sequencer_cost_model_matches_board_figures() {
        use nmcp_firmware::nmc::{SequencerCostModel, SequencerWork};
        let model = SequencerCostModel::default();
        let qemu = include_str!("../expected/virt.txt");
        let mut n = 0;
        for line in qemu
            .lines()
            .filter(|l| l.starts_with("lamb_") && l.contains(" events="))
        {
            let f = |k: &str| -> u32 {
                line.split(' ')
                    .find_map(|x| x.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                    .and_then(|v| v.parse().ok())
                    .expect("field missing or not a number")
            };
            let work = SequencerWork {
                steps: 1,
                handlers: f("events"),
                idle_handlers: f("idle_events"),
                macro_commands: f("macro_commands"),
                program_words: f("program_words"),
                scalar_writes: f("scalar_writes"),
                reductions: f("reductions"),
                bytes_read: f("descriptors") * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES as u32,
            };
            let measured = f64::from(f("instructions"));
            let modelled = work.instructions(&model) as f64;
            let err = (modelled - measured).abs() / measured;
            assert!(err <= 0.10, "{line}: model {modelled} vs board {measured}");
            n += 1;
        }
        assert_eq!(n, 5, "every LAMB step line checked");
    }

    /// The first decision of the board's CP scenario `blob` over all its queues (the
    /// CP configured afresh); returns its dispatches.
    fn first_decision(fw: &mut Firmware, board: &mut Board<'_>, blob: &[u8]) -> Dispatched {
        let all = Variant {
            queues: None,
            shapes: usize::MAX,
        };
        let mut done = Dispatched::new();
        let mut out = String::new();
        let x = format_args!("x");
        run_cp_decision(
            fw,
            board,
            &mut NoMeter,
            blob,
            all,
            &mut done,
            true,
            x,
            &mut out,
        )
        .unwrap();
        done
    }

    /// The canned 32-queue scenario's second iteration laid out on a board over `mem`
    /// (mapped view or not), the CP having decided and drained the first: every queue
    /// holds a GEMM of a known shape, not yet rung.
    fn second_iteration(
        mem: &mut [u8],
        mapped: bool,
    ) -> (Board<'_>, Box<Firmware>, scenario::CpScenario) {
        let board = Board::new(mem, || 0);
        let mut board = if mapped { board } else { board.unmapped() };
        let mut fw = Box::<Firmware>::default();
        let s = scenario::canned_cp();
        let b = blob(&s);
        let mut done = first_decision(&mut fw, &mut board, &b);
        drain_cp(&mut fw, &mut board, &mut done).unwrap();
        board.lay_out_cp_at(&s, 1).unwrap();
        (board, fw, s)
    }

    /// A doorbell makes the CP look at the rung queues only (its own and the bitmap's),
    /// not at all 32.
    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn a_doorbell_visits_only_the_rung_queues() {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let mut fw = Box::<Firmware>::default();
        let s = blob(&scenario::canned_cp());
        first_decision(&mut fw, &mut board, &s);
        let before = fw.cp.work();
        fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
        assert_eq!(fw.cp.work().since(&before).queue_visits, 1);
        let before = fw.cp.work();
        board.ring((1 << 7) | (1 << 9));
        fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
        assert_eq!(fw.cp.work().since(&before).queue_visits, 3);
        // The bitmap was read and cleared.
        let before = fw.cp.work();
        fw.handle(Event::Doorbell { queue: 5 }, &mut board).unwrap();
        assert_eq!(fw.cp.work().since(&before).queue_visits, 1);
    }

    /// The dispatcher takes a pushed group without walking it and checks each entry's
    /// queue when it takes the entries (`Board::settle`): an entry naming no board queue
    /// is counted in `stray_requests`, neither hashed nor a dispatch; a valid one is
    /// both. A `from` beyond the FIFO is refused.
    #[test]
    fn a_stray_fifo_entry_is_counted_when_the_dispatcher_takes_it() {
        use nmcp_firmware::platform::{DispatchError, DispatchRequest, KernelDispatcher};
        let mut mem = vec![0u8; WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let fresh = board.stats.dispatch_hash;
        let push = |board: &mut Board<'_>, queue: usize| {
            let f = board
                .mapped_fifo()
                .expect("a word-aligned window is offered");
            let from = f.fifo.len();
            f.fifo
                .push(DispatchRequest {
                    queue: queue as u8,
                    dispatch_id: 7,
                    kernel_object: 0x1000,
                })
                .unwrap();
            from
        };
        let from = push(&mut board, BOARD_QUEUES);
        assert_eq!(board.dispatch_pushed(from), Ok(()));
        assert_eq!(
            board.dispatch_pushed(from + 2),
            Err(DispatchError::Unsupported)
        );
        board.settle();
        assert_eq!(board.stats.stray_requests, 1);
        assert_eq!(board.stats.dispatches, 0);
        assert_eq!(board.stats.dispatch_hash, fresh);
        let from = push(&mut board, BOARD_QUEUES - 1);
        assert_eq!(board.dispatch_pushed(from), Ok(()));
        board.settle();
        assert_eq!(board.stats.stray_requests, 1);
        assert_eq!(board.stats.dispatches, 1);
        assert_ne!(board.stats.dispatch_hash, fresh);
    }

    /// The fast path takes a valid header at a queue's head as a published packet
    /// (without reading the write index), because the packet processor writes INVALID
    /// back into every slot it consumes (`Board::consume`). With one-packet rings the
    /// next packet's slot is the one just consumed: rung again with nothing new
    /// published, the CP dispatches nothing (were the old header still there, it would
    /// dispatch every GEMM a second time); once the next iteration is published, the
    /// same decision as the first.
    #[test]
    fn a_consumed_slot_is_not_taken_for_a_new_packet() {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let mut fw = Box::<Firmware>::default();
        let s = scenario::canned_cp_one_deep();
        let b = blob(&s);
        let mut done = first_decision(&mut fw, &mut board, &b);
        let first = done.len();
        assert_eq!(first, 8);
        drain_cp(&mut fw, &mut board, &mut done).unwrap();
        assert!(fw.cp.pop_record().is_none());
        // Every slot was consumed; nothing new is published.
        board.settle();
        let before = board.stats.dispatches;
        board.ring(u32::MAX);
        fw.handle(Event::Doorbell { queue: 31 }, &mut board)
            .unwrap();
        assert!(
            fw.cp.pop_record().is_none(),
            "a consumed packet was dispatched again"
        );
        board.settle();
        assert_eq!(board.stats.dispatches, before);
        // The next iteration, in the same slots.
        board.lay_out_cp_at(&s, 1).unwrap();
        fw.cp.set_rotation(0);
        board.ring(u32::MAX);
        fw.handle(Event::Doorbell { queue: 31 }, &mut board)
            .unwrap();
        let mut ids = vec![];
        while let Some(r) = fw.cp.pop_record() {
            if let CpAction::Dispatched { cd, .. } = r.action {
                assert_eq!(cd, 8);
                ids.push(r.dispatch_id);
            }
        }
        assert_eq!(ids, vec![1; 8]);
    }

    /// A GEMM of a known shape is classified from its header word and record address
    /// alone; its kernel object is checked when it is dispatched. One its record does
    /// not list is rejected then, with the reason the full decode gives it, and the rest
    /// of the group still runs at the decided CD (one member fewer) — on the fast path
    /// (mapped view) and on the general path alike.
    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn an_unlisted_kernel_object_is_rejected_at_dispatch_and_the_group_goes_on() {
        use nmcp_firmware::cp::{RejectCode, RejectReason};
        use nmcp_firmware::platform::DeviceMemory;
        for mapped in [true, false] {
            let mut mem = vec![0u8; WINDOW_BYTES];
            let (mut board, mut fw, s) = second_iteration(&mut mem, mapped);
            // Queue 2's packet (id 1: ring slot 1) names a kernel descriptor no record
            // lists.
            let ring_bytes = s.ring_packets as usize * 64;
            let ko_addr = DEVICE_BASE + (board::map::RINGS + 2 * ring_bytes + 64 + 32) as u64;
            let bogus = DEVICE_BASE + board::map::KERNELS as u64 + 11 * 64;
            board.write(ko_addr, &bogus.to_le_bytes()).unwrap();
            fw.cp.set_rotation(0);
            board.ring(u32::MAX);
            fw.handle(Event::Doorbell { queue: 31 }, &mut board)
                .unwrap();
            let (mut dispatched, mut rejected) = (vec![], vec![]);
            while let Some(r) = fw.cp.pop_record() {
                match r.action {
                    CpAction::Dispatched { cd, swapped, .. } => {
                        dispatched.push((r.queue, cd, swapped))
                    }
                    CpAction::Rejected(reason) => rejected.push((r.queue, reason)),
                    CpAction::BarrierResolved => {}
                }
            }
            assert_eq!(
                rejected,
                vec![(2, RejectReason::KernelNotListed { address: bogus })],
                "mapped={mapped}"
            );
            let queues: Vec<u8> = dispatched.iter().map(|d| d.0).collect();
            assert_eq!(queues, vec![0, 4, 6, 8, 10, 12, 14], "mapped={mapped}");
            assert!(dispatched.iter().all(|&(_, cd, sw)| cd == 8 && sw));
            let signal = DEVICE_BASE
                + (board::map::QUEUE_WORDS
                    + 2 * board::map::QUEUE_WORDS_STRIDE
                    + board::map::SIGNAL) as u64;
            let mut v = [0u8; 8];
            board.read(signal, &mut v).unwrap();
            assert_eq!(
                i64::from_le_bytes(v),
                RejectCode::KernelNotListed.signal_value()
            );
            // The queue's next event looks at its next packet.
            assert!(fw.cp.has_pending_work());
        }
    }

    /// The same for the LAMB part of the HiFive1 build's report.
    #[test]
    fn host_lamb_suite_matches_committed_sifive_e_output() {
        let mut mem = vec![0u8; board::LAMB_WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let mut seq = NmcSequencer::default();
        let (l1, l4) = (
            blob(&scenario::canned_lamb(1)),
            blob(&scenario::canned_lamb(4)),
        );
        let more = more_blobs();
        let blobs = Blobs {
            cp: &[],
            lamb_1t: &l1,
            lamb_4t: &l4,
            lamb_more: &more_refs(&more),
        };
        let mut out = String::new();
        run_lamb_suite(&mut seq, &mut board, &mut NoMeter, &blobs, &mut out).unwrap();
        // The LAMB part of the report (its CP lines: `small_cp_decides_like_...`).
        let qemu: std::vec::Vec<String> = functional(include_str!("../expected/sifive_e.txt"))
            .into_iter()
            .filter(|l| !l.starts_with("cp_decision"))
            .collect();
        assert_eq!(functional(&out), qemu, "host report:\n{out}");
    }

    /// The HiFive1 configuration of the CP (`--features hifive1`: the firmware's small
    /// tables, one-packet rings, the compact window) decides exactly what the virt build
    /// decides: every CP line's decision fields and dispatch hash
    /// equal the committed virt run's. Run with
    /// `cargo test -p nmcp-board --features hifive1 --lib small_cp`.
    #[cfg(feature = "hifive1")]
    #[test]
    fn small_cp_decides_like_committed_virt_output() {
        assert_eq!(board::BACKED_WINDOW_BYTES, 3024);
        let mut mem = vec![0u32; board::BACKED_WINDOW_BYTES / 4];
        // SAFETY: u32 to bytes, same allocation and length in bytes.
        let bytes = unsafe {
            core::slice::from_raw_parts_mut(mem.as_mut_ptr().cast::<u8>(), mem.len() * 4)
        };
        let mut board = Board::new(bytes, || 0);
        let mut fw = Box::<Firmware>::default();
        let cp = blob(&scenario::canned_cp_one_deep());
        let mut out = String::new();
        run_cp(&mut fw, &mut board, &mut NoMeter, &cp, &mut out).unwrap();
        // The decisions and the work that led to them (the same packets read, the same
        // fast-path visits), not the model cycles of the one-deep rings' layout.
        const DECISION: [&str; 14] = [
            "gemms",
            "dispatched",
            "cd",
            "predicted",
            "swapped",
            "mem_accesses",
            "bytes_read",
            "predictions",
            "visits",
            "mapped_visits",
            "decoded",
            "dispatches",
            "mapped_dispatches",
            "dispatch_hash",
        ];
        let decisions = |report: &str| -> std::vec::Vec<String> {
            report
                .lines()
                .filter(|l| l.starts_with("cp_decision"))
                .map(|l| {
                    l.split(' ')
                        .filter(|f| {
                            !f.contains('=')
                                || DECISION
                                    .iter()
                                    .any(|k| f.strip_prefix(k).is_some_and(|r| r.starts_with('=')))
                        })
                        .collect::<std::vec::Vec<_>>()
                        .join(" ")
                })
                .collect()
        };
        let virt = decisions(include_str!("../expected/virt.txt"));
        assert_eq!(virt.len(), 13);
        assert_eq!(decisions(&out), virt, "host report:\n{out}");
        // And every functional field of the committed sifive_e run's CP lines.
        let sifive: std::vec::Vec<String> = functional(include_str!("../expected/sifive_e.txt"))
            .into_iter()
            .filter(|l| l.starts_with("cp_decision"))
            .collect();
        assert_eq!(sifive.len(), 13);
        let host: std::vec::Vec<String> = functional(&out);
        assert_eq!(host, sifive, "host report:\n{out}");
    }

    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn cp_scenario_decides_cd8_for_the_first_shape() {
        let host = host_report();
        let line = host
            .lines()
            .find(|l| l.starts_with("cp_decision_32q"))
            .unwrap();
        // 16 GEMMs of the 3072-row shape ask for CD 8: eight run, each with its GPU/4
        // kernel patched in.
        assert!(
            line.contains(" dispatched=8 cd=8 predicted=8 swapped=8 "),
            "{line}"
        );
    }

    #[test]
    #[cfg_attr(
        feature = "hifive1",
        ignore = "virt's layout (two-packet rings, full window)"
    )]
    fn lamb_scenarios_emit_five_commands_and_two_reductions_per_tensor() {
        let host = host_report();
        for (name, t) in [("lamb_1t", 1u32), ("lamb_4t", 4)] {
            let line = host.lines().find(|l| l.starts_with(name)).unwrap();
            // Per tensor: sqacc g, stage 1, sqacc w, sqacc u, stage 2.
            assert!(
                line.contains(&format!("macro_commands={}", 5 * t)),
                "{line}"
            );
            // One global reduction plus two per tensor.
            assert!(
                line.contains(&format!("reductions={}", 1 + 2 * t)),
                "{line}"
            );
        }
    }

    #[test]
    fn malformed_blob_is_an_error() {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let mut fw = Box::<Firmware>::default();
        let l = blob(&scenario::canned_lamb(1));
        let blobs = Blobs {
            cp: &[0xFF, 0xFF],
            lamb_1t: &l,
            lamb_4t: &l,
            lamb_more: &[],
        };
        let mut out = String::new();
        let e = run_all(&mut fw, &mut board, &mut NoMeter, &blobs, &mut out).unwrap_err();
        assert!(matches!(e, RunError::Decode(_)), "{e}");
    }

    #[test]
    fn oversized_scenarios_are_rejected() {
        let mut mem = vec![0u8; WINDOW_BYTES];
        let mut board = Board::new(&mut mem, || 0);
        let mut s = scenario::canned_cp();
        s.ring_packets = 64;
        assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Ring(64));
        s.ring_packets = 3;
        assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Ring(3));
        let mut s = scenario::canned_cp();
        s.queues = 33;
        assert_eq!(board.lay_out_cp(&s).unwrap_err(), LayoutError::Queues(33));
    }

    /// What a queue's packet of the next iteration holds instead of its GEMM, for
    /// [`mapped_and_general_paths_agree`].
    #[derive(Debug, Clone, Copy)]
    pub(crate) enum Twist {
        /// The GEMM as laid out.
        None,
        /// A kernel object no record lists.
        UnlistedKernel,
        /// A completion signal inside the queue rings.
        SignalInRings,
        /// The barrier bit (the queue has nothing outstanding: it resolves at once).
        Barrier,
        /// Not published yet (INVALID header).
        Unpublished,
        /// The other shape's record (its kernel objects are the same sample map's).
        OtherRecord,
        /// A reserved packet type.
        ReservedType,
    }

    fn twist() -> impl proptest::strategy::Strategy<Value = Twist> {
        use proptest::prelude::*;
        prop_oneof![
            Just(Twist::UnlistedKernel),
            Just(Twist::SignalInRings),
            Just(Twist::Barrier),
            Just(Twist::Unpublished),
            Just(Twist::OtherRecord),
            Just(Twist::ReservedType),
        ]
    }

    /// Every CP record (queue, dispatch id, action) of a steady-state iteration of the
    /// canned scenario with `twists` applied to the queues' packets, the rotation at
    /// `rotation` and the doorbells of `rung` rung, run until the CP is idle: every
    /// dispatched kernel placed and completed, every pending follow-up sent, and then
    /// every doorbell rung once more. On the mapped view or the general path. The
    /// dispatcher's latch holds `busy` other requests at the first doorbell, so it
    /// refuses (`Busy`) what does not fit until the next event; and it refuses the first
    /// `refusals` groups pushed into its FIFO whole (only the mapped view's steady lane
    /// pushes; the general path never sees these refusals).
    pub(crate) fn records_of(
        mapped: bool,
        twists: &[Twist],
        rotation: u8,
        rung: u32,
        busy: usize,
        refusals: u32,
    ) -> std::vec::Vec<(u8, u64, String)> {
        use nmcp_firmware::platform::{DeviceMemory, KernelDispatcher};
        use nmcp_isa::aql::{self, AQL_PACKET_BYTES};
        let mut mem = vec![0u8; WINDOW_BYTES];
        let (mut board, mut fw, s) = second_iteration(&mut mem, mapped);
        let ring_bytes = s.ring_packets as usize * AQL_PACKET_BYTES;
        let packet = |q: usize| DEVICE_BASE + (board::map::RINGS + q * ring_bytes + 64) as u64;
        for (q, &t) in twists.iter().enumerate() {
            let at = packet(q);
            let word = |b: &mut Board<'_>, off: usize| -> u32 {
                let mut w = [0u8; 4];
                b.read(at + off as u64, &mut w).unwrap();
                u32::from_le_bytes(w)
            };
            let put =
                |b: &mut Board<'_>, off: usize, v: &[u8]| b.write(at + off as u64, v).unwrap();
            match t {
                Twist::None => {}
                Twist::UnlistedKernel => {
                    let bogus = DEVICE_BASE + board::map::KERNELS as u64 + 11 * 64;
                    put(&mut board, aql::offset::KERNEL_OBJECT, &bogus.to_le_bytes());
                }
                Twist::SignalInRings => {
                    let inside = DEVICE_BASE + board::map::RINGS as u64 + 8;
                    put(
                        &mut board,
                        aql::offset::COMPLETION_SIGNAL,
                        &inside.to_le_bytes(),
                    );
                }
                Twist::Barrier => {
                    let h = word(&mut board, 0) | 1 << 8;
                    put(&mut board, 0, &h.to_le_bytes());
                }
                Twist::Unpublished => {
                    let h = (word(&mut board, 0) & !0xFF) | 1;
                    put(&mut board, 0, &h.to_le_bytes());
                }
                Twist::OtherRecord => {
                    // Queues alternate the two shapes: the neighbour's record.
                    let other = packet(q ^ 1) + aql::offset::GEMM_EXT_ADDRESS as u64;
                    let mut e = [0u8; 8];
                    board.read(other, &mut e).unwrap();
                    put(&mut board, aql::offset::GEMM_EXT_ADDRESS, &e);
                }
                Twist::ReservedType => {
                    let h = (word(&mut board, 0) & !0xFF) | 7;
                    put(&mut board, 0, &h.to_le_bytes());
                }
            }
        }
        fw.cp.set_rotation(rotation);
        board.ring(rung);
        board.refuse_pushed(refusals);
        for _ in 0..busy {
            let other = nmcp_firmware::platform::DispatchRequest {
                queue: 0,
                dispatch_id: 0,
                kernel_object: 0,
            };
            board.dispatch(&other).unwrap();
        }
        let mut events = vec![Event::Doorbell { queue: 31 }];
        let mut records = vec![];
        let mut rang_all = false;
        for _ in 0..1000 {
            let Some(ev) = events.pop() else {
                if fw.cp.has_pending_work() {
                    events.push(Event::Deferred);
                } else if !rang_all {
                    rang_all = true;
                    board.ring(u32::MAX);
                    events.push(Event::Doorbell { queue: 31 });
                } else {
                    // What the dispatcher took, in order (the prefilled requests too).
                    let st = &board.stats;
                    records.push((
                        u8::MAX,
                        u64::from(st.dispatches),
                        format!("{:#x}", st.dispatch_hash),
                    ));
                    return records;
                }
                continue;
            };
            fw.handle(ev, &mut board).unwrap();
            board.settle();
            let mut placed = vec![];
            while let Some(r) = fw.cp.pop_record() {
                if let CpAction::Dispatched { .. } = r.action {
                    placed.push((r.queue, r.dispatch_id));
                }
                records.push((r.queue, r.dispatch_id, format!("{:?}", r.action)));
            }
            // Completions after placements, the first placed kernel's last (the events
            // are a stack).
            for &(queue, dispatch_id) in &placed {
                events.push(Event::KernelCompleted {
                    queue,
                    dispatch_id,
                    status: Ok(()),
                });
            }
            for &(queue, dispatch_id) in placed.iter().rev() {
                board.consume(queue, dispatch_id).unwrap();
                events.push(Event::KernelDispatched { queue, dispatch_id });
            }
        }
        unreachable!("the CP did not go idle within 1000 events");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// The mapped view's fast paths (the steady-state decision on cached keys and its
        /// one-pass gather among them) against the general path (reads through the
        /// trait): on random twists of the queues' packets, rotations, doorbell sets, a
        /// dispatcher that refuses part of a group and one that refuses pushed groups
        /// whole, the same records for every queue,
        /// in the same order per queue, with the same CDs, predictions and kernel objects,
        /// and the same requests taken by the dispatcher, in the same order.
        #[test]
        #[cfg_attr(
            feature = "hifive1",
            ignore = "virt's layout (two-packet rings, full window)"
        )]
        fn mapped_and_general_paths_agree(
            // A few queues twisted (none in a fifth of the cases: the steady state).
            twisted in proptest::collection::vec((0usize..32, twist()), 0..5),
            rotation in 0u8..32,
            rung in proptest::prop_oneof![
                proptest::strategy::Just(u32::MAX),
                proptest::prelude::any::<u32>(),
            ],
            busy in proptest::prop_oneof![
                proptest::strategy::Just(0usize),
                20usize..32,
            ],
            // Groups the FIFO refuses whole (the lane's undo after a refusal).
            refusals in 0u32..3,
        ) {
            let mut twists = [Twist::None; 32];
            for &(q, t) in &twisted {
                twists[q] = t;
            }
            let sorted = |mut r: std::vec::Vec<(u8, u64, String)>| {
                // Per queue in order (a stable sort keeps each queue's own order).
                r.sort_by_key(|x| x.0);
                r
            };
            let fast = records_of(true, &twists, rotation, rung, busy, refusals);
            let general = records_of(false, &twists, rotation, rung, busy, refusals);
            // Every published packet has an outcome.
            let published = twists.iter().filter(|t| !matches!(t, Twist::Unpublished)).count();
            proptest::prop_assert!(fast.len() >= published, "{fast:?}");
            proptest::prop_assert_eq!(sorted(fast), sorted(general));
        }
    }
}
