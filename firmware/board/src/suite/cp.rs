//! The CP decision suite: every `cp_decision_*` line (cold, steady, per group size,
//! heterogeneous, general path), the board playing the packet processor between
//! decisions.

use core::fmt::{self, Write};

use nmcp_firmware::cp::{CpAction, CpCostModel, CpWork};
use nmcp_firmware::{Event, Firmware, FirmwareError};
use nmcp_isa::aql::MAX_QUEUES;

use crate::board::Board;
use crate::layout::{lay_out_variant, Variant};
use crate::report::{measured, Discard, Measured, Meter, RunError};

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

/// Runs the CP until nothing is left: every dispatched kernel reports dispatched and
/// completed, which lets the CP dispatch the next group.
#[inline(never)]
pub fn drain_cp(
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
pub type Dispatched = heapless::Vec<(u8, u32), MAX_DISPATCHED>;

/// Capacity of [`Dispatched`].
pub const MAX_DISPATCHED: usize = if cfg!(feature = "hifive1") {
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

/// One CP decision: a doorbell over the variant's queues with a GEMM at every head.
/// `cold` configures the CP afresh (no shape known); otherwise the previous decision's
/// kernels (`done`) are drained, the queues restart and the CP keeps the shapes of the
/// previous run. `done` then holds this decision's dispatches.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub fn run_cp_decision(
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
