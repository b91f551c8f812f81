//! The `nmcp t3` study as a library driver: the selected sub-layers run on `--jobs`
//! threads (`nmcp_emulator::t3::plan`), a sub-layer with an earlier one's shape and
//! operand layout taken from it rather than simulated again (its twin), each sub-layer's
//! rows a checkpoint unit (`--checkpoint-dir`, `nmcp resume`), or one sub-layer recorded
//! as a timeline.

use std::io::IsTerminal;
use std::sync::Mutex;

use indicatif::ProgressBar;
use nmcp_emulator::t3::{self, Scenario, SubLayer, SubLayerResult, T3Error, T3Options};
use nmcp_emulator::timeline::{Timeline, TimelineConfig};

use crate::checkpoint;
use crate::cmd::UsageError;

/// An emulator error as a command error: a bad configuration (an option or shape the
/// emulator refuses) is a usage error (exit code 2), anything else a failure.
pub fn t3_error(e: T3Error, context: &str) -> Box<dyn std::error::Error> {
    match e {
        T3Error::Config(_) => Box::new(UsageError(format!("{context}{e}"))),
        _ => format!("{context}{e}").into(),
    }
}

/// Runs the study of `sls` with `opts`: every sub-layer's rows in order and, when `trace`
/// asks for one (one sub-layer only), its timeline. `bar` counts finished sub-layers.
pub fn run(
    opts: &T3Options,
    sls: &[SubLayer],
    jobs: usize,
    trace: Option<TimelineConfig>,
    bar: &ProgressBar,
) -> Result<(Vec<SubLayerResult>, Option<Timeline>), Box<dyn std::error::Error>> {
    let timeline = Mutex::new(None);
    // Each sub-layer (its five configurations) is one unit of the checkpoint.
    let session = checkpoint::Session::start("t3", sls.len() as u32)?;
    if trace.is_some() && session.is_some() {
        return Err(UsageError(
            "--trace/--vcd record a run as it happens; they do not combine with --checkpoint-dir"
                .into(),
        )
        .into());
    }
    // A sub-layer with the shape and operand layout of an earlier one is not simulated
    // again: a run depends only on those and the options, so its results are the
    // earlier one's under its own name. (FC-1 and FC-2 share a shape, K = 4H/TP, but
    // not the layout, unless --flat-operand-layout.)
    let twin: Vec<Option<usize>> = sls
        .iter()
        .enumerate()
        .map(|(i, sl)| {
            sls.get(..i)?
                .iter()
                .position(|o| same_shape(o, sl, opts.producer_memory.operand_layout))
        })
        .collect();
    let mut per: Vec<Option<Vec<SubLayerResult>>> = vec![None; sls.len()];
    // Sub-layers to simulate: not a twin, not already in the checkpoint.
    let mut todo: Vec<usize> = Vec::new();
    for (i, sl) in sls.iter().enumerate() {
        if twin.get(i).is_some_and(Option::is_some) {
            continue;
        }
        let stored = match &session {
            Some(s) => lock(s).get::<Vec<StoredResult>>(i as u32)?,
            None => None,
        };
        match stored {
            Some(v) => {
                per[i] = Some(v.into_iter().map(|x| x.into_result(sl)).collect());
                bar.inc(1);
            }
            None => todo.push(i),
        }
    }
    let at = |sl: &SubLayer| format!("{} (M {} N {} K {}): ", super::label(sl), sl.m, sl.n, sl.k);
    if let (Some(c), Some(&i)) = (trace, todo.first()) {
        // One sub-layer (checked above), its fused runs recorded.
        let sl = &sls[i];
        let (r, t) = t3::run_sublayer_traced(opts, sl, c).map_err(|e| t3_error(e, &at(sl)))?;
        *timeline
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(t);
        per[i] = Some(r);
        bar.inc(1);
    } else {
        // `--jobs N` runs N simulations at once (each single-threaded): each sub-layer's
        // GEMM, rings and fused runs are separate parts, longest expected first
        // (`t3::plan`); a sub-layer's rows are checkpointed as soon as its parts are done.
        let done = |i: usize, rows: &[SubLayerResult]| -> Result<(), checkpoint::CheckpointError> {
            if let Some(s) = &session {
                let v: Vec<StoredResult> = rows.iter().map(StoredResult::from).collect();
                lock(s).put(i as u32, &v)?;
            }
            if let Some(sl) = sls.get(i) {
                bar.set_message(super::label(sl));
            }
            bar.inc(1);
            Ok(())
        };
        match t3::plan::run_study(opts, sls, &todo, jobs, done) {
            Ok(ran) => {
                for (i, r) in ran.into_iter().enumerate() {
                    if let (Some(r), Some(p)) = (r, per.get_mut(i)) {
                        *p = Some(r);
                    }
                }
            }
            Err(t3::plan::StudyFailure::T3 { sublayer, error }) => {
                let where_ = sls.get(sublayer).map(at).unwrap_or_default();
                return Err(t3_error(error, &where_));
            }
            Err(t3::plan::StudyFailure::Callback(e)) => return Err(e.into()),
        }
    }
    for (i, sl) in sls.iter().enumerate() {
        if let Some(Some(j)) = twin.get(i) {
            let v: Vec<SubLayerResult> = per[*j]
                .iter()
                .flatten()
                .map(|r| SubLayerResult {
                    sublayer: sl.clone(),
                    ..r.clone()
                })
                .collect();
            if let Some(s) = &session {
                let stored: Vec<StoredResult> = v.iter().map(StoredResult::from).collect();
                lock(s).put(i as u32, &stored)?;
            }
            bar.inc(1);
            per[i] = Some(v);
        }
    }
    let results: Vec<SubLayerResult> = per.into_iter().flatten().flatten().collect();
    if let Some(s) = &session {
        lock(s).write()?;
    }
    let timeline = timeline
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Ok((results, timeline))
}

/// Whether two sub-layers are the same simulation (shape and TP; the names may differ).
/// Whether two sub-layers run the same simulations: the same shape and, when the
/// producer reads in the operands' layout, the same layout.
fn same_shape(a: &SubLayer, b: &SubLayer, layout_matters: bool) -> bool {
    (a.h, a.tokens, a.tp, a.m, a.n, a.k) == (b.h, b.tokens, b.tp, b.m, b.n, b.k)
        && (!layout_matters || a.operand_layout() == b.operand_layout())
}

fn lock(s: &Mutex<checkpoint::Session>) -> std::sync::MutexGuard<'_, checkpoint::Session> {
    // A panic while holding the lock cannot leave a half-written unit map.
    s.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One configuration's result as a checkpoint stores it: everything but the sub-layer,
/// which the resumed run's own list supplies.
#[derive(serde::Serialize, serde::Deserialize)]
struct StoredResult {
    scenario: Scenario,
    gemm_seconds: f64,
    rs_seconds: f64,
    ag_seconds: f64,
    total_seconds: f64,
    speedup_vs_sequential: f64,
    rs_alone_seconds: f64,
    bytes: t3::TrafficBytes,
    firmware_seconds: f64,
    #[serde(default)]
    contention: Option<t3::system::Contention>,
}

impl From<&SubLayerResult> for StoredResult {
    fn from(r: &SubLayerResult) -> Self {
        Self {
            scenario: r.scenario,
            gemm_seconds: r.gemm_seconds,
            rs_seconds: r.rs_seconds,
            ag_seconds: r.ag_seconds,
            total_seconds: r.total_seconds,
            speedup_vs_sequential: r.speedup_vs_sequential,
            rs_alone_seconds: r.rs_alone_seconds,
            bytes: r.bytes,
            firmware_seconds: r.firmware_seconds,
            contention: r.contention,
        }
    }
}

impl StoredResult {
    fn into_result(self, sl: &SubLayer) -> SubLayerResult {
        SubLayerResult {
            sublayer: sl.clone(),
            scenario: self.scenario,
            gemm_seconds: self.gemm_seconds,
            rs_seconds: self.rs_seconds,
            ag_seconds: self.ag_seconds,
            total_seconds: self.total_seconds,
            speedup_vs_sequential: self.speedup_vs_sequential,
            rs_alone_seconds: self.rs_alone_seconds,
            bytes: self.bytes,
            firmware_seconds: self.firmware_seconds,
            contention: self.contention,
        }
    }
}

/// The study's progress bar: finished sub-layers, hidden with `--json` or off a terminal.
pub fn progress(len: u64, hidden: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    if hidden || !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    } else if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} sub-layers {elapsed} {msg}")
    {
        bar.set_style(style);
    }
    bar
}
