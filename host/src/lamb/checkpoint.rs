//! The checkpointed driver of `nmcp lamb` (`--checkpoint-every N --checkpoint-dir D`,
//! `nmcp resume D`): `cmd/lamb.rs` calls [`run`] instead of `experiment::run`.
//!
//! A unit is one extra engine setup of `--alu-models` (every one after the first) with its
//! TS sweep: the experiment run with that setup alone, timing only, which computes exactly
//! the figures the combined run reports for it (the same timed run, sweep and data
//! movement; `nmcp_emulator::lamb::experiment::run`). The first setup, which runs the main
//! (possibly functional) step, the breakdown and the top-level figures, runs last and is
//! not a unit: a kill during it redoes it. Units are finer than that only inside
//! `experiment.rs` (one TS point each), which this helper does not change.

use std::sync::Mutex;
use std::time::Instant;

use nmcp_emulator::lamb::experiment::{
    self, AluModelReport, DataMovement, EngineSetup, LambExperiment, LambOutcome, TimeSplit, Timing,
};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{CheckpointError, Session};

/// [`AluModelReport`] without its setup (which is re-parsed from the command line), in a
/// form postcard reads back.
#[derive(Debug, Serialize, Deserialize)]
struct ModelUnit {
    name: String,
    ts_entries: usize,
    nmc_seconds: f64,
    speedup: [f64; 3],
    program_bound: f64,
    column_commands: u64,
    dram_commands: u64,
    /// columns, row switches, refresh, ALU stalls, reductions and other, subarray selects.
    time: [f64; 6],
    row_cycle_bound: f64,
    analytic_speedup: f64,
    job_bound: Option<f64>,
    /// (TS entries, NMC seconds, speedup vs ideal 100 / 90 / 80 %).
    ts_sweep: Vec<(usize, f64, f64, f64, f64)>,
    /// (definition, setup, ratio).
    movement: Vec<(String, String, f64)>,
}

impl ModelUnit {
    fn of(m: &AluModelReport, movement: &[DataMovement]) -> Self {
        ModelUnit {
            name: m.name.clone(),
            ts_entries: m.ts_entries,
            nmc_seconds: m.nmc_seconds,
            speedup: m.speedup,
            program_bound: m.program_bound,
            column_commands: m.column_commands,
            dram_commands: m.dram_commands,
            time: [
                m.time.columns,
                m.time.row_switches,
                m.time.refresh,
                m.time.alu_stalls,
                m.time.reductions_and_other,
                m.time.subarray_selects,
            ],
            row_cycle_bound: m.row_cycle_bound,
            analytic_speedup: m.analytic_speedup,
            job_bound: m.job_bound,
            ts_sweep: m
                .ts_sweep
                .iter()
                .map(|t| {
                    (
                        t.ts_entries,
                        t.nmc_seconds,
                        t.speedup_vs_ideal_100,
                        t.speedup_vs_ideal_90,
                        t.speedup_vs_ideal_80,
                    )
                })
                .collect(),
            movement: movement
                .iter()
                .map(|d| (d.definition.clone(), d.setup.clone(), d.ratio))
                .collect(),
        }
    }

    fn into_report(self, setup: EngineSetup) -> (AluModelReport, Vec<DataMovement>) {
        let [columns, row_switches, refresh, alu_stalls, reductions_and_other, subarray_selects] =
            self.time;
        let report = AluModelReport {
            name: self.name,
            setup,
            ts_entries: self.ts_entries,
            nmc_seconds: self.nmc_seconds,
            speedup: self.speedup,
            program_bound: self.program_bound,
            column_commands: self.column_commands,
            dram_commands: self.dram_commands,
            time: TimeSplit {
                columns,
                row_switches,
                refresh,
                alu_stalls,
                subarray_selects,
                reductions_and_other,
            },
            row_cycle_bound: self.row_cycle_bound,
            analytic_speedup: self.analytic_speedup,
            job_bound: self.job_bound,
            ts_sweep: self
                .ts_sweep
                .into_iter()
                .map(|(ts_entries, nmc_seconds, a, b, c)| Timing {
                    ts_entries,
                    nmc_seconds,
                    speedup_vs_ideal_100: a,
                    speedup_vs_ideal_90: b,
                    speedup_vs_ideal_80: c,
                })
                .collect(),
        };
        let movement = self
            .movement
            .into_iter()
            .map(|(definition, setup, ratio)| DataMovement {
                definition,
                setup,
                ratio,
            })
            .collect();
        (report, movement)
    }
}

fn lock(s: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `experiment::run`, checkpointed per extra engine setup when the command line asks
/// (otherwise exactly `experiment::run`). The outcome equals the uninterrupted run's but
/// for the wall-clock figures.
///
/// # Errors
/// The experiment's error, or a checkpoint that cannot be written or does not fit.
pub fn run(
    e: &LambExperiment,
    progress: &mut dyn FnMut(),
) -> Result<LambOutcome, Box<dyn std::error::Error>> {
    let units = u32::try_from(e.setups.len().saturating_sub(1)).unwrap_or(u32::MAX);
    let Some(session) = Session::start("lamb", units)? else {
        return Ok(experiment::run(e, progress)?);
    };
    let wall = Instant::now();
    let mut extra = Vec::new();
    for (k, setup) in e.setups.iter().enumerate().skip(1) {
        let unit = u32::try_from(k - 1).unwrap_or(u32::MAX);
        let loaded: Option<ModelUnit> = lock(&session).get(unit)?;
        let done = match loaded {
            Some(u) => u,
            None => {
                let alone = LambExperiment {
                    setups: vec![*setup],
                    functional: false,
                    input: None,
                    breakdown: false,
                    timeline: None,
                    ..e.clone()
                };
                let out = experiment::run(&alone, progress)?;
                let m = out.report.alu_models.first().ok_or_else(|| {
                    CheckpointError::Mismatch("a LAMB run reported no engine setup".into())
                })?;
                let u = ModelUnit::of(m, &out.report.data_movement);
                lock(&session).put(unit, &u)?;
                u
            }
        };
        extra.push((*setup, done));
    }
    let first = LambExperiment {
        setups: e.setups.iter().take(1).copied().collect(),
        ..e.clone()
    };
    let mut out = experiment::run(&first, progress)?;
    for (setup, u) in extra {
        let (m, movement) = u.into_report(setup);
        out.report.alu_models.push(m);
        out.report.data_movement.extend(movement);
    }
    // Wall-clock figures of this process, over all of it.
    let wall_s = wall.elapsed().as_secs_f64();
    out.report.wall_seconds = wall_s;
    out.report.dram_commands_per_second = out.report.dram_commands as f64 / wall_s;
    lock(&session).write()?;
    Ok(out)
}
