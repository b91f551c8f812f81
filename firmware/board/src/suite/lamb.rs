//! The LAMB suite: whole LAMB steps of 1, 4 and 8 tensors and variants, the marginal
//! cost of a tensor, and the stack line that closes the report.

use core::fmt::Write;

use nmcp_firmware::nmc::NmcSequencer;
use nmcp_firmware::FirmwareError;

use crate::board::Board;
use crate::report::{measured, Measured, Meter, RunError, MAX_LAMB_EVENTS};
use crate::scenario::{self, LambScenario};
use crate::Blobs;

/// The LAMB steps (one, four and eight tensors, and the variants) and the per-tensor
/// cost.
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
    Ok(())
}

/// The report's last line: the stack the regions used ([`Meter`]'s stack figures).
///
/// # Errors
/// [`RunError::Output`] if the report cannot be written.
pub fn report_stack(meter: &mut impl Meter, out: &mut impl Write) -> Result<(), RunError> {
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
    // As `Firmware` runs them: the sequencer's errors built as `FirmwareError`.
    let started: Result<(), FirmwareError> = seq.start_lamb(job, board);
    acc(meter.stop());
    started?;
    let mut events = 1u32;
    for _ in 0..MAX_LAMB_EVENTS {
        let Some(ev) = board.next_nmc_event(s.reduction_sum) else {
            break;
        };
        meter.start();
        // What `Firmware::handle` does with NMC completions.
        let r: Result<(), FirmwareError> = seq.on_event(&ev, board);
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
