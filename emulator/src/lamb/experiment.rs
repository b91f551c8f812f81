//! The LAMB experiment of `nmcp lamb`: LAMB steps of a model on NMC, timed at DRAM-command
//! level and (functional runs) checked against the FP32 reference, next to the ideal GPU
//! of dissertation 6.4: speedups, the physical and program bounds, data movement, an
//! Amdahl end-to-end estimate, and optionally where the time goes (breakdown) and a TS
//! sweep. [`run`] returns a [`LambReport`]; printing it is the caller's business.

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::hbm::config::RefreshMode;
use crate::hbm::HbmPreset;
use crate::lamb::checked::CheckedRun;
use crate::lamb::energy::{lamb_energy, LambEnergy, NmcSide};
use crate::lamb::reference::{Comparison, LambHyper, TensorState};
use crate::lamb::run::{LambError, LambRun, LambRunConfig};
use crate::lamb::{IdealGpu, ARRAY_PASSES};
use crate::nmc::engine::{AluModel, EngineStats, RowPolicy};
use crate::nmc::system::{NmcSystemConfig, NmcTotals};
use crate::node::FirmwareCost;
use crate::timeline::{Timeline, TimelineConfig};
use nmcp_firmware::nmc::Stage1Program;

/// TS sizes the sweep visits.
pub const TS_SWEEP: [usize; 7] = [4, 8, 16, 32, 64, 128, 256];

/// Fractions of peak bandwidth the ideal GPU is shown at.
pub const GPU_FRACTIONS: [f64; 3] = [1.0, 0.9, 0.8];

/// Bytes one DRAM command occupies on the command pins (row and column command words of
/// HBM2 are two half-cycles of 8 and 6 pins; we count 4 bytes per command, a round upper
/// bound, so the data-movement ratio is not flattered).
pub const COMMAND_BYTES: u64 = 4;

/// One engine configuration the report compares: an ALU issue model and a row-visit
/// policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EngineSetup {
    /// How the bank ALUs issue.
    pub alu_model: AluModel,
    /// How a row visit's column commands are ordered.
    pub row_policy: RowPolicy,
}

impl EngineSetup {
    /// Today's engine: column-triggered, program order.
    pub const COLUMN_TRIGGERED: Self = Self {
        alu_model: AluModel::ColumnTriggered,
        row_policy: RowPolicy::ProgramOrder,
    };

    /// The setups `nmcp lamb` compares by default: column-triggered, pipelined, and
    /// pipelined with staged row visits.
    pub fn defaults() -> Vec<Self> {
        vec![
            Self::COLUMN_TRIGGERED,
            Self {
                alu_model: AluModel::PIPELINED,
                row_policy: RowPolicy::ProgramOrder,
            },
            Self {
                alu_model: AluModel::PIPELINED,
                row_policy: RowPolicy::Staged,
            },
        ]
    }

    /// `model` or `model+policy`, e.g. `pipelined+staged`.
    pub fn name(&self) -> String {
        match self.row_policy {
            RowPolicy::ProgramOrder => self.alu_model.name(),
            p => format!("{}+{}", self.alu_model.name(), p.name()),
        }
    }

    /// Parses a [`Self::name`].
    pub fn parse(s: &str) -> Option<Self> {
        let (m, p) = match s.split_once('+') {
            Some((m, p)) => (m, RowPolicy::parse(p)?),
            None => (s, RowPolicy::ProgramOrder),
        };
        Some(Self {
            alu_model: AluModel::parse(m)?,
            row_policy: p,
        })
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct LambExperiment {
    /// Name of the model in the report.
    pub model: String,
    /// The memory.
    pub preset: HbmPreset,
    /// FP32 elements of every tensor.
    pub elements: Vec<u64>,
    /// Given optimizer state (one per tensor; implies a functional run, and every step
    /// reuses its gradients). Without it a functional run draws random tensors from
    /// `seed`, and new gradients for every later step.
    pub input: Option<Vec<TensorState>>,
    /// Run the bank ALUs on data and compare with the reference.
    pub functional: bool,
    /// Seed of random tensors.
    pub seed: u64,
    /// LAMB steps.
    pub steps: u32,
    /// TS entries per bank ALU.
    pub ts_entries: usize,
    /// Hyperparameters of the first step.
    pub hyper: LambHyper,
    /// GPU-host reduction round trip in ns.
    pub host_reduction_ns: f64,
    /// LAMB's shares of a training iteration (percent) for the end-to-end estimate.
    pub lamb_share: Vec<f64>,
    /// Also time the variants of [`LambReport::breakdown`].
    pub breakdown: bool,
    /// Also time every TS size of [`TS_SWEEP`] (for every engine setup).
    pub ts_sweep: bool,
    /// Engine setups to compare; the first one runs the main (functional, if asked)
    /// step and sets the report's top-level figures. Empty means
    /// [`EngineSetup::COLUMN_TRIGGERED`] alone.
    pub setups: Vec<EngineSetup>,
    /// The firmware's stage-1 program (identical results; different chunks).
    pub program: Stage1Program,
    /// Record a timeline of the main run (the first engine setup) under these settings.
    pub timeline: Option<TimelineConfig>,
}

/// Where one engine's time goes, in seconds of the step(s), averaged over the
/// pseudo-channels (the engines run the same broadcast commands, so they agree closely).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeSplit {
    /// Streaming column commands (including their tCCD and bus-turnaround gaps).
    pub columns: f64,
    /// Row switches: PRE/ACT and tRCD before the first column of a new row.
    pub row_switches: f64,
    /// Refresh: the close before REF, tRFC and the re-opening.
    pub refresh: f64,
    /// The command stream waiting for the pipelined ALU.
    pub alu_stalls: f64,
    /// MASA subarray selects and the wait for the selected subarray's first column
    /// (absent from the JSON when zero: every setup but `+masa`).
    #[serde(skip_serializing_if = "is_zero_f64")]
    pub subarray_selects: f64,
    /// Everything else: host reductions and their round trips, the firmware's own time
    /// where the engines wait for it, mode switches.
    pub reductions_and_other: f64,
}

/// One engine setup's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AluModelReport {
    /// [`EngineSetup::name`].
    pub name: String,
    /// The setup.
    pub setup: EngineSetup,
    /// TS entries per bank ALU.
    pub ts_entries: usize,
    /// NMC time of all steps.
    pub nmc_seconds: f64,
    /// Ideal GPU time over NMC time at 100, 90 and 80 % of peak.
    pub speedup: [f64; 3],
    /// The bound for these programs under this model: no row switches, refresh or host
    /// time, only the column slots and (pipelined) the ALU's own time.
    pub program_bound: f64,
    /// Column commands.
    pub column_commands: u64,
    /// DRAM commands of every kind.
    pub dram_commands: u64,
    /// Where the time goes.
    pub time: TimeSplit,
    /// Ideal GPU at 100 % over the row-cycle floor of the row visits this setup makes
    /// (`EngineStats::visit_floor_cycles`: no schedule of its commands on one row buffer
    /// per bank is faster), without refresh, ALU, host or firmware time.
    pub row_cycle_bound: f64,
    /// Ideal GPU at 100 % over a first-order analytic estimate of the same commands:
    /// tCCD_L per column command and tRP + tRCD per row switch, nothing else (no tRAS,
    /// tWR or turnaround floors, refresh, ALU stalls or host time) — the kind of model
    /// "common DRAM timing parameters" suggests, for comparing with the dissertation.
    pub analytic_speedup: f64,
    /// `masa-decoupled` and `masa-2jobs` only: ideal GPU at 100 % over the job floor
    /// (`EngineStats::job_floor_cycles`: per macro-command its column commands at tCCD_L
    /// or its ALU work, whichever is longer; no row switches, refresh or host time). A
    /// schedule that overlaps the stream and the ALU only within a job cannot beat it.
    /// Under `masa-2jobs` the same per segment (a run of overlapping jobs from an idle
    /// engine to the next; scalar writes drain the engine): the policy cannot beat it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_bound: Option<f64>,
    /// The TS sweep under this setup (empty unless asked for).
    pub ts_sweep: Vec<Timing>,
}

/// One candidate definition of "data movement" and the GPU-over-NMC ratio it gives.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataMovement {
    /// What is counted on the NMC side.
    pub definition: String,
    /// Engine setup the NMC side was measured under.
    pub setup: String,
    /// Ideal-GPU bytes over NMC bytes.
    pub ratio: f64,
}

/// NMC time at one TS size, against the ideal GPU at 100, 90 and 80 % of peak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Timing {
    /// TS entries per bank ALU.
    pub ts_entries: usize,
    /// NMC time of all steps.
    pub nmc_seconds: f64,
    /// Ideal GPU at 100 % over NMC.
    pub speedup_vs_ideal_100: f64,
    /// Ideal GPU at 90 % over NMC.
    pub speedup_vs_ideal_90: f64,
    /// Ideal GPU at 80 % over NMC.
    pub speedup_vs_ideal_80: f64,
}

/// One variant of the breakdown.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Variant {
    /// What was changed.
    pub what: String,
    /// NMC time of all steps.
    pub nmc_seconds: f64,
    /// Ideal GPU at 100 % over NMC.
    pub speedup_vs_ideal_100: f64,
}

/// Everything `nmcp lamb` reports (its JSON output, field for field).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LambReport {
    /// Model name.
    pub model: String,
    /// HBM preset name.
    pub preset: String,
    /// Tensors.
    pub tensors: usize,
    /// FP32 parameters.
    pub parameters: u64,
    /// LAMB steps.
    pub steps: u32,
    /// TS entries per bank ALU.
    pub ts_entries: usize,
    /// The firmware's stage-1 program (`four-slot` or `three-slot`).
    pub program: &'static str,
    /// NMC time of all steps.
    pub nmc_seconds: f64,
    /// NMC cycles (tCK) of all steps.
    pub nmc_cycles: u64,
    /// Ideal GPU time at 100, 90 and 80 % of peak.
    pub ideal_gpu_seconds: [f64; 3],
    /// Ideal GPU time over NMC time, at the same fractions.
    pub speedup: [f64; 3],
    /// Peak HBM bandwidth, GB/s.
    pub peak_gbps: f64,
    /// Bank parallelism over the bus: no NMC program can beat it.
    pub physical_bound: f64,
    /// The bound for these programs, with no row switches at all.
    pub program_bound: f64,
    /// Row activations.
    pub activations: u64,
    /// Column commands.
    pub column_commands: u64,
    /// DRAM commands of every kind.
    pub dram_commands: u64,
    /// Refreshes.
    pub refreshes: u64,
    /// Host reductions.
    pub reductions: u64,
    /// Bytes the ideal GPU moves.
    pub gpu_bytes: u64,
    /// Data bytes NMC moves over the interface (partials, scalars).
    pub nmc_data_bytes: u64,
    /// Command bytes NMC moves ([`COMMAND_BYTES`] per DRAM command).
    pub nmc_command_bytes: u64,
    /// GPU bytes over NMC data bytes.
    pub data_movement_ratio: f64,
    /// GPU bytes over NMC data and command bytes.
    pub data_movement_ratio_with_commands: f64,
    /// (LAMB share in percent, end-to-end speedup) by Amdahl's law.
    pub end_to_end: Vec<(f64, f64)>,
    /// Global gradient norm of the last step.
    pub global_norm: f32,
    /// Worst |nmc - ref| / S over w, m, v (S: running term scale; the documented bound).
    pub max_error_vs_term_scale: Option<f64>,
    /// Worst plain |nmc - ref| / |ref| (large only where an element cancels).
    pub max_plain_rel_error: Option<f64>,
    /// The TS sweep (empty unless asked for).
    pub ts_sweep: Vec<Timing>,
    /// Where the time goes (empty unless asked for).
    pub breakdown: Vec<Variant>,
    /// Every engine setup compared, side by side (the first is the main run's).
    pub alu_models: Vec<AluModelReport>,
    /// Candidate definitions of the dissertation's "~13x less data movement".
    pub data_movement: Vec<DataMovement>,
    /// CP time the LAMB sequencer was charged (its own work: descriptor reads and NMC
    /// calls), seconds, all steps of the main run.
    pub firmware_seconds: f64,
    /// That time as a share of the main run's NMC time (the CP runs ahead of the engines,
    /// so most of it overlaps them; this is its size, not what it adds).
    pub firmware_share: f64,
    /// What it adds: the main setup's NMC time minus the same step(s) with the firmware
    /// free (timing only), seconds.
    pub firmware_exposed_seconds: f64,
    /// Wall-clock time of the experiment.
    pub wall_seconds: f64,
    /// Simulated DRAM commands per wall-clock second.
    pub dram_commands_per_second: f64,
    /// Energy of the main run against the ideal GPU at 100 % of peak.
    pub energy: LambEnergy,
}

/// A report and, for functional runs, the state NMC left in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct LambOutcome {
    /// The figures.
    pub report: LambReport,
    /// w, m and v as read back from device memory (g as last written); `None` for
    /// timing-only runs.
    pub state: Option<Vec<TensorState>>,
    /// The main run's timeline, when [`LambExperiment::timeline`] asked for one.
    pub timeline: Option<Timeline>,
}

/// Random tensors (w in ±0.1, g in ±1e-3, zero moments) of the given sizes.
pub fn random_tensors(elements: &[u64], seed: u64) -> Vec<TensorState> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    elements
        .iter()
        .map(|&n| {
            let w = (0..n).map(|_| rng.random_range(-0.1f32..0.1)).collect();
            let g = (0..n).map(|_| rng.random_range(-1e-3f32..1e-3)).collect();
            TensorState::new(w, g)
        })
        .collect()
}

/// Bank parallelism vs bus: all banks of a pseudo-channel move a column every tCCD_L,
/// the bus moves one column every BL.
pub fn physical_bound(preset: &HbmPreset) -> f64 {
    let t = &preset.timing;
    f64::from(preset.banks_per_pseudo_channel()) * f64::from(t.bl) / f64::from(t.tccd_l)
}

/// The physical bound for programs that execute `column_commands` column slots over
/// `steps` steps of `params` parameters: even with no row switches, NMC needs one
/// tCCD_L slot per executed instruction per column, the GPU one BL per array pass.
pub fn program_bound(preset: &HbmPreset, params: u64, column_commands: u64, steps: u32) -> f64 {
    let o = &preset.organisation;
    let columns_per_pc = params as f64 * 4.0
        / f64::from(o.bytes_per_column)
        / f64::from(preset.banks_per_pseudo_channel())
        / f64::from(preset.pseudo_channels());
    let slots_per_column = column_commands as f64
        / f64::from(preset.pseudo_channels())
        / columns_per_pc
        / f64::from(steps);
    physical_bound(preset) * ARRAY_PASSES.len() as f64 / slots_per_column.max(1e-9)
}

/// The bound for programs under the pipelined model: a column needs its column slots or
/// the ALU's time for it, whichever is longer (in tCCD_L slots), with no row switches.
pub fn program_bound_with_alu(
    preset: &HbmPreset,
    params: u64,
    stats: &EngineStats,
    steps: u32,
) -> f64 {
    let slots = stats.column_commands as f64;
    let alu_slots = stats.alu_busy_cycles as f64 / f64::from(preset.timing.tccd_l);
    program_bound(preset, params, slots.max(alu_slots).round() as u64, steps)
}

/// The first-order analytic time of an engine's commands (see
/// [`AluModelReport::analytic_speedup`]), per pseudo-channel.
fn analytic_seconds(preset: &HbmPreset, e: &EngineStats) -> f64 {
    let t = &preset.timing;
    let cycles = e.column_commands as f64 * f64::from(t.tccd_l)
        + e.activations as f64 * f64::from(t.trp + t.trcdrd);
    cycles / f64::from(preset.pseudo_channels()) * preset.organisation.tck_ns * 1e-9
}

fn is_zero_f64(x: &f64) -> bool {
    *x == 0.0
}

fn time_split(preset: &HbmPreset, e: &EngineStats, total_s: f64) -> TimeSplit {
    let per_pc =
        |c: u64| c as f64 / f64::from(preset.pseudo_channels()) * preset.organisation.tck_ns * 1e-9;
    let (columns, row_switches, refresh, alu_stalls) = (
        per_pc(e.column_cycles),
        per_pc(e.row_cycles),
        per_pc(e.refresh_cycles),
        per_pc(e.alu_stall_cycles),
    );
    let subarray_selects = per_pc(e.subarray_select_cycles);
    TimeSplit {
        columns,
        row_switches,
        refresh,
        alu_stalls,
        subarray_selects,
        reductions_and_other: (total_s
            - columns
            - row_switches
            - refresh
            - alu_stalls
            - subarray_selects)
            .max(0.0),
    }
}

/// The candidate definitions of "data movement" for one setup's totals.
fn data_movement(
    setup: &str,
    gpu_bytes: u64,
    totals: &NmcTotals,
    params: u64,
    steps: u32,
    preset: &HbmPreset,
) -> Vec<DataMovement> {
    let data = (totals.host_read_bytes + totals.host_write_bytes).max(1);
    let column_bytes = u64::from(preset.organisation.bytes_per_column);
    let per_step_array = params * 4 * u64::from(steps);
    let d = |definition: &str, nmc: u64| DataMovement {
        definition: definition.to_string(),
        setup: setup.to_string(),
        ratio: gpu_bytes as f64 / nmc.max(1) as f64,
    };
    vec![
        d("data pins only: partials read, scalars written", data),
        d(
            "data + every DRAM command at 4 B on the command pins",
            data + totals.commands_total * COMMAND_BYTES,
        ),
        d(
            "data + every DRAM command as if it were a 32 B column on the pins",
            data + totals.commands_total * column_bytes,
        ),
        d(
            "data + every column command as a 32 B column (broadcast counted once per pseudo-channel)",
            data + totals.engines.column_commands * column_bytes,
        ),
        d(
            "per pass: the one array pass NMC still needs across the interface (the GPU's gradient write)",
            per_step_array,
        ),
    ]
}

/// End-to-end speedup of an iteration whose LAMB share is `percent`, LAMB being
/// `speedup` times faster (Amdahl).
pub fn end_to_end(percent: f64, speedup: f64) -> f64 {
    let f = percent / 100.0;
    1.0 / (1.0 - f + f / speedup)
}

impl LambExperiment {
    fn setups(&self) -> Vec<EngineSetup> {
        if self.setups.is_empty() {
            vec![EngineSetup::COLUMN_TRIGGERED]
        } else {
            self.setups.clone()
        }
    }

    fn config(&self, ts_entries: usize, functional: bool) -> LambRunConfig {
        self.config_for(self.setups()[0], ts_entries, functional)
    }

    fn config_for(&self, setup: EngineSetup, ts_entries: usize, functional: bool) -> LambRunConfig {
        LambRunConfig {
            system: NmcSystemConfig {
                ts_entries,
                functional,
                parallel: !functional,
                host_reduction_ns: self.host_reduction_ns,
                alu_model: setup.alu_model,
                row_policy: setup.row_policy,
                // The sequencer broadcasts every call to all channels.
                mirror_broadcast: !functional,
                ..NmcSystemConfig::default()
            },
            hyper: self.hyper,
            program: self.program,
            ..LambRunConfig::default()
        }
    }

    /// NMC seconds of all steps, timing only.
    fn timed(&self, preset: &HbmPreset, config: LambRunConfig) -> Result<f64, LambError> {
        Ok(self.timed_run(preset, config)?.0)
    }

    /// NMC seconds of all steps, timing only, and the run's totals.
    fn timed_run(
        &self,
        preset: &HbmPreset,
        config: LambRunConfig,
    ) -> Result<(f64, NmcTotals), LambError> {
        let mut r = LambRun::new(preset.clone(), &self.elements, config)?;
        let cycles = (0..self.steps)
            .map(|_| r.step().map(|o| o.cycles))
            .sum::<Result<u64, _>>()?;
        Ok((
            cycles as f64 * preset.organisation.tck_ns * 1e-9,
            r.totals(),
        ))
    }

    /// The breakdown variants: refresh off, the sequencer free, no host latency, TS 256,
    /// and the bounds. `nmc_s` and `free_s` are the step as configured and with the
    /// sequencer free, already simulated by the caller.
    fn breakdown(
        &self,
        gpu_s: f64,
        program_bound: f64,
        nmc_s: f64,
        free_s: f64,
    ) -> Result<Vec<Variant>, LambError> {
        let variant = |what: &str, nmc_seconds: f64| Variant {
            what: what.to_string(),
            nmc_seconds,
            speedup_vs_ideal_100: gpu_s / nmc_seconds,
        };
        let mut no_ref = self.preset.clone();
        no_ref.refresh.mode = RefreshMode::Off;
        let mut c = self.config(self.ts_entries, false);
        let mut out = vec![
            variant("as configured", nmc_s),
            variant("without refresh", self.timed(&no_ref, c.clone())?),
        ];
        let free = LambRunConfig {
            cost: FirmwareCost::free(),
            ..c.clone()
        };
        out.push(variant("with the sequencer's CP time free", free_s));
        out.push(variant(
            "  ... and without refresh",
            self.timed(&no_ref, free)?,
        ));
        c.system.host_reduction_ns = 0.0;
        out.push(variant(
            "without host round-trip latency",
            self.timed(&self.preset, c.clone())?,
        ));
        c.system.ts_entries = 256;
        out.push(variant(
            "  ... and TS 256 (chunks of a whole row), no refresh",
            self.timed(&no_ref, c)?,
        ));
        let physical = physical_bound(&self.preset);
        out.push(Variant {
            what: "no row switches at all (program bound)".into(),
            nmc_seconds: gpu_s / program_bound,
            speedup_vs_ideal_100: program_bound,
        });
        out.push(Variant {
            what: "only memory-touching instructions cost a slot (physical bound)".into(),
            nmc_seconds: gpu_s / physical,
            speedup_vs_ideal_100: physical,
        });
        Ok(out)
    }

    /// The chunks (stage 1, stage 2) the firmware's programs use at `ts` TS entries under
    /// `setup`, and, when the engine keeps two jobs in flight, the TS entries the pair
    /// stage 1 + stage 2 can use together (which decides whether they overlap): two TS
    /// sizes with the same key run the same macro-commands the same way, so the same
    /// cycles.
    fn chunks(&self, setup: EngineSetup, ts: usize) -> (usize, usize, usize) {
        let cap = usize::from(nmcp_isa::nmc::MAX_CHUNK)
            .min(self.preset.organisation.columns_per_row as usize)
            .max(1);
        let two_jobs = setup.row_policy.two_jobs();
        let geometry = nmcp_firmware::nmc::lamb::NmcGeometry {
            pseudo_channels: 1,
            banks_per_pc: 1,
            cols_per_row: self.preset.organisation.columns_per_row,
            column_bytes: self.preset.organisation.bytes_per_column,
            ts_entries: ts.min(usize::from(u16::MAX)) as u16,
            job_contexts: crate::nmc::engine::job_contexts(setup.row_policy),
            alu_chunk: crate::nmc::engine::alu_chunk(&self.preset, setup.alu_model),
        };
        let job_ts = usize::from(geometry.job_ts_entries());
        let slots = usize::from(self.program.slots());
        let (c1, c2) = ((job_ts / slots).clamp(1, cap), job_ts.clamp(1, cap));
        (c1, c2, if two_jobs { ts.min(slots * c1 + c2) } else { 0 })
    }

    /// The TS sweep of `setup`; `progress` is called after each size. `known` is an NMC
    /// time already measured at `known.0` TS entries: sizes whose programs are identical
    /// to it (or to an earlier size of the sweep) reuse the time instead of re-running.
    fn sweep(
        &self,
        setup: EngineSetup,
        gpu_s: [f64; 3],
        known: (usize, f64),
        progress: &mut dyn FnMut(),
    ) -> Result<Vec<Timing>, LambError> {
        let mut out = Vec::with_capacity(TS_SWEEP.len());
        let mut seen = vec![(self.chunks(setup, known.0), known.1)];
        for ts in TS_SWEEP {
            let key = self.chunks(setup, ts);
            let s = match seen.iter().find(|(k, _)| *k == key) {
                Some(&(_, s)) => s,
                None => {
                    let s = self.timed(&self.preset, self.config_for(setup, ts, false))?;
                    seen.push((key, s));
                    s
                }
            };
            out.push(Timing {
                ts_entries: ts,
                nmc_seconds: s,
                speedup_vs_ideal_100: gpu_s[0] / s,
                speedup_vs_ideal_90: gpu_s[1] / s,
                speedup_vs_ideal_80: gpu_s[2] / s,
            });
            progress();
        }
        Ok(out)
    }
}

/// The steps of the main run: cycles, the last global norm, and for functional runs the
/// comparison with the reference and the final state.
struct MainRun {
    run: LambRun,
    cycles: u64,
    global_norm: f32,
    checked: Option<(Comparison, Vec<TensorState>)>,
}

fn main_run(e: &LambExperiment) -> Result<MainRun, LambError> {
    let functional = e.functional || e.input.is_some();
    let mut run = LambRun::new(
        e.preset.clone(),
        &e.elements,
        e.config(e.ts_entries, functional),
    )?;
    if let Some(c) = e.timeline {
        run.enable_timeline(c);
    }
    let (mut cycles, mut global_norm) = (0, 0.0);
    if !functional {
        let mut run = run;
        for _ in 0..e.steps {
            let out = run.step()?;
            cycles += out.cycles;
            global_norm = out.global_norm;
        }
        return Ok(MainRun {
            run,
            cycles,
            global_norm,
            checked: None,
        });
    }
    let state = match &e.input {
        Some(s) => s.clone(),
        None => random_tensors(&e.elements, e.seed),
    };
    let mut checked = CheckedRun::new(run, state, e.hyper)?;
    for s in 0..e.steps {
        let grads = (s > 0 && e.input.is_none()).then(|| {
            random_tensors(&e.elements, e.seed.wrapping_add(u64::from(s)))
                .into_iter()
                .map(|t| t.g)
                .collect()
        });
        let out = checked.step(grads)?.nmc;
        cycles += out.cycles;
        global_norm = out.global_norm;
    }
    let comparison = checked.compare()?;
    let state = checked.read_state()?;
    Ok(MainRun {
        run: checked.into_run(),
        cycles,
        global_norm,
        checked: Some((comparison, state)),
    })
}

/// Runs the experiment. `progress` is called once per TS-sweep point (for a progress
/// bar; [`TS_SWEEP`] has the count).
///
/// # Errors
/// [`LambError`] from laying out or running the model, or
/// [`LambError::Data`] if `input` does not match `elements`.
pub fn run(e: &LambExperiment, progress: &mut dyn FnMut()) -> Result<LambOutcome, LambError> {
    let wall = Instant::now();
    let mut main = main_run(e)?;
    let timeline = main.run.take_timeline().map(|mut t| {
        t.set_meta("model", "lamb");
        t.set_meta("lamb_model", &e.model);
        t.set_meta("preset", &e.preset.name);
        t.set_meta("engine_setup", &e.setups()[0].name());
        t.set_meta(
            "mirrored",
            if e.functional || e.input.is_some() {
                "no"
            } else {
                "pseudo-channel 0 stands for all"
            },
        );
        t
    });
    let params: u64 = e.elements.iter().sum();
    let preset = &e.preset;
    let nmc_s = main.cycles as f64 * preset.organisation.tck_ns * 1e-9;
    let gpu = IdealGpu {
        peak_bytes_per_s: preset.peak_gbps() * 1e9,
    };
    let gpu_s = GPU_FRACTIONS.map(|f| gpu.seconds(params, f) * f64::from(e.steps));
    let speedup = gpu_s.map(|g| g / nmc_s);
    let totals = main.run.totals();
    let cp_seconds = main.run.cp_cycles() as f64 / FirmwareCost::default().cp.clock_hz as f64;
    let physical = physical_bound(preset);
    let setups = e.setups();
    let bound_of = |setup: &EngineSetup, t: &NmcTotals| match setup.alu_model {
        AluModel::ColumnTriggered => {
            program_bound(preset, params, t.engines.column_commands, e.steps)
        }
        AluModel::Pipelined { .. } => program_bound_with_alu(preset, params, &t.engines, e.steps),
    };
    let program = bound_of(&setups[0], &totals);
    let free_firmware = LambRunConfig {
        cost: FirmwareCost::free(),
        ..e.config(e.ts_entries, false)
    };
    let free_s = e.timed(preset, free_firmware)?;
    let exposed = nmc_s - free_s;
    let breakdown = if e.breakdown {
        e.breakdown(gpu_s[0], program, nmc_s, free_s)?
    } else {
        Vec::new()
    };
    let gpu_bytes = IdealGpu::bytes(params) * u64::from(e.steps);
    let mut alu_models = Vec::with_capacity(setups.len());
    let mut movement = Vec::new();
    for (i, setup) in setups.iter().enumerate() {
        let (seconds, t) = if i == 0 {
            (nmc_s, totals)
        } else {
            e.timed_run(preset, e.config_for(*setup, e.ts_entries, false))?
        };
        let ts_sweep = if e.ts_sweep {
            e.sweep(*setup, gpu_s, (e.ts_entries, seconds), progress)?
        } else {
            Vec::new()
        };
        movement.extend(data_movement(
            &setup.name(),
            gpu_bytes,
            &t,
            params,
            e.steps,
            preset,
        ));
        alu_models.push(AluModelReport {
            name: setup.name(),
            setup: *setup,
            ts_entries: e.ts_entries,
            nmc_seconds: seconds,
            speedup: gpu_s.map(|g| g / seconds),
            program_bound: bound_of(setup, &t),
            column_commands: t.engines.column_commands,
            dram_commands: t.commands_total,
            time: time_split(preset, &t.engines, seconds),
            analytic_speedup: gpu_s[0] / analytic_seconds(preset, &t.engines),
            row_cycle_bound: gpu_s[0]
                / (t.engines.visit_floor_cycles as f64 / f64::from(preset.pseudo_channels())
                    * preset.organisation.tck_ns
                    * 1e-9),
            job_bound: (t.engines.job_floor_cycles > 0).then(|| {
                gpu_s[0]
                    / (t.engines.job_floor_cycles as f64 / f64::from(preset.pseudo_channels())
                        * preset.organisation.tck_ns
                        * 1e-9)
            }),
            ts_sweep,
        });
    }
    let ts_sweep = alu_models
        .first()
        .map(|m| m.ts_sweep.clone())
        .unwrap_or_default();
    let nmc_data = totals.host_read_bytes + totals.host_write_bytes;
    let nmc_cmd = totals.commands_total * COMMAND_BYTES;
    let (comparison, state) = main
        .checked
        .map_or((None, None), |(c, s)| (Some(c), Some(s)));
    let energy = lamb_energy(
        preset,
        &NmcSide {
            activity: main.run.nmc().dram_activity(main.cycles),
            host_bytes: nmc_data,
            seconds: nmc_s,
        },
        params,
        e.steps,
        gpu_s[0],
    );
    let wall_s = wall.elapsed().as_secs_f64();
    let report = LambReport {
        model: e.model.clone(),
        preset: preset.name.clone(),
        tensors: e.elements.len(),
        parameters: params,
        steps: e.steps,
        ts_entries: e.ts_entries,
        program: e.program.name(),
        nmc_seconds: nmc_s,
        nmc_cycles: main.cycles,
        ideal_gpu_seconds: gpu_s,
        speedup,
        peak_gbps: preset.peak_gbps(),
        physical_bound: physical,
        program_bound: program,
        activations: totals.engines.activations,
        column_commands: totals.engines.column_commands,
        dram_commands: totals.commands_total,
        refreshes: totals.engines.refreshes,
        reductions: totals.reductions,
        gpu_bytes,
        nmc_data_bytes: nmc_data,
        nmc_command_bytes: nmc_cmd,
        data_movement_ratio: gpu_bytes as f64 / nmc_data.max(1) as f64,
        data_movement_ratio_with_commands: gpu_bytes as f64 / (nmc_data + nmc_cmd).max(1) as f64,
        end_to_end: e
            .lamb_share
            .iter()
            .map(|&p| (p, end_to_end(p, speedup[0])))
            .collect(),
        global_norm: main.global_norm,
        max_error_vs_term_scale: comparison.map(|c| c.max_error_vs_term_scale),
        max_plain_rel_error: comparison.map(|c| c.max_plain_rel_error),
        ts_sweep,
        breakdown,
        alu_models,
        data_movement: movement,
        firmware_seconds: cp_seconds,
        firmware_share: cp_seconds / nmc_s,
        firmware_exposed_seconds: exposed,
        wall_seconds: wall_s,
        dram_commands_per_second: totals.commands_total as f64 / wall_s,
        energy,
    };
    Ok(LambOutcome {
        report,
        state,
        timeline,
    })
}
