//! `nmcp lamb`: LAMB optimizer steps on near-memory compute, next to an ideal GPU: the
//! run and its report; the options are [`crate::lamb::options::LambOptions`].

use nmcp_emulator::lamb::experiment::TS_SWEEP;

use super::CmdResult;
use crate::lamb::npy_io;
use crate::lamb::options::{experiment, LambOptions, MAX_TS};

/// Runs `nmcp lamb`.
pub fn run(a: LambOptions) -> CmdResult {
    if !(1..=MAX_TS).contains(&a.ts) {
        return Err(format!(
            "--ts {}: TS entries per bank ALU must be 1..={MAX_TS} (every bank holds them; 256 already saturates the LAMB programs)",
            a.ts
        )
        .into());
    }
    let (e, named) = experiment(&a)?;
    if let (Some(dir), None) = (&a.output, &named) {
        return Err(format!("--output {} needs --input tensors to write", dir.display()).into());
    }
    let bar = indicatif::ProgressBar::new((TS_SWEEP.len() * e.setups.len().max(1)) as u64);
    if a.json || !a.ts_sweep {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    // Checkpoint units (--checkpoint-dir): see host/src/lamb/checkpoint.rs.
    let out = crate::lamb::checkpoint::run(&e, &mut || bar.inc(1))?;
    bar.finish_and_clear();
    crate::timeline::write_if_asked(&a.timeline, out.timeline.as_ref())?;
    if let Some(got) = &out.state {
        crate::lamb::finite::check_finite(got, named.as_deref())?;
    }
    if let (Some(dir), Some(mut ts), Some(got)) = (&a.output, named, out.state) {
        for (t, g) in ts.iter_mut().zip(got) {
            t.state.w = g.w;
            t.state.m = g.m;
            t.state.v = g.v;
        }
        npy_io::write_dir(dir, &ts)?;
    }
    if a.json {
        stdoutln!("{}", serde_json::to_string_pretty(&out.report)?);
    } else {
        crate::lamb::text::print_report(&out.report);
    }
    Ok(())
}
