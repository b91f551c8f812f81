//! The T3 line: the firmware's programming of one fused GEMM + ring reduce-scatter, from
//! `T3Programmer::start` to its last tracked stage complete, on the board's T3 blocks
//! (`board::t3`).

use core::fmt::Write;

use nmcp_firmware::t3::{Collective, T3Job, T3Programmer};
use nmcp_firmware::Event;

use crate::board::Board;
use crate::report::{measured, Measured, Meter, RunError};

/// The GEMM the line programs: Table 8.2's T-NLG FC-2 sub-layer at TP 8, as GPU 0 of the
/// ring sees it (the output `H x tokens` = 4256 x 8192 f16, 128 x 128 tiles of 4 WFs,
/// the emulator's layout for it). The programming work depends on the output, the TP
/// degree and the collective, not on `k`, so the line stands for all four T-NLG
/// sub-layers at TP 8 (docs/decisions/board.md, "T3").
pub const T3_GEMM: T3Job = T3Job::new(Collective::RingReduceScatter, 8, 0, 4256, 8192);

/// Events one T3 job may take before the run is declared stuck (this GEMM takes 7: one
/// `RegionDone` per tracked stage).
pub const MAX_T3_EVENTS: u32 = 1 << 10;

/// Programs [`T3_GEMM`] and reports `t3_program_gemm` (the sum over `start` and every
/// handler, the board's hashing subtracted) and `t3_per_record` (the same per record
/// programmed).
///
/// # Errors
/// [`RunError`] if the window is too small, the firmware faults, or the job is not done
/// after [`MAX_T3_EVENTS`] events.
#[inline(never)]
pub fn run_t3(
    t3: &mut T3Programmer,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    out: &mut impl Write,
) -> Result<(), RunError> {
    board.reset();
    board.begin_t3()?;
    let job = T3_GEMM;
    let before = t3.work();
    let mut total: Option<Measured> = None;
    let mut acc = |m: Option<Measured>| {
        if let Some(m) = m {
            total = Some(total.unwrap_or_default().add(m));
        }
    };
    meter.start();
    let started = t3.start(&job, board);
    acc(meter.stop());
    started.map_err(|e| RunError::Firmware(e.into()))?;
    let (mut events, mut deferred) = (0u32, 0u32);
    while events < MAX_T3_EVENTS {
        // A deferred call comes at once (the platform posts it a cycle on); completions
        // come after the producer's stores, so the firmware's own work goes first.
        let ev = if t3.has_pending_work() {
            deferred += 1;
            Event::Deferred
        } else if let Some(ev) = board.next_t3_event() {
            ev
        } else {
            break;
        };
        meter.start();
        // What `Firmware::handle` does with T3 events.
        let r = t3.on_event(&ev, board);
        acc(meter.stop());
        r.map_err(|e| RunError::Firmware(e.into()))?;
        events += 1;
    }
    if !t3.is_done() || board.t3_regions_outstanding() != 0 {
        return Err(RunError::T3Stuck);
    }
    let st = board.stats;
    let total = total.map(|m| Measured {
        instructions: m.instructions.saturating_sub(st.bookkeeping_ticks),
        cycles: m.cycles.saturating_sub(st.bookkeeping_ticks),
    });
    let records = t3.work().records.saturating_sub(before.records);
    write!(out, "t3_program_gemm")?;
    measured(out, total)?;
    writeln!(
        out,
        " gpus={} rank={} m={} n={} maps={} regions={} refused={} records={} \
         events={events} deferred={deferred} t3_hash={:#010x}",
        job.gpus,
        job.rank,
        job.m,
        job.n,
        st.t3_maps,
        st.t3_regions,
        st.t3_refused,
        records,
        st.t3_hash,
    )?;
    write!(out, "t3_per_record")?;
    let per = total.map(|m| Measured {
        instructions: m.instructions / u64::from(records.max(1)),
        cycles: m.cycles / u64::from(records.max(1)),
    });
    measured(out, per)?;
    writeln!(out)?;
    Ok(())
}
