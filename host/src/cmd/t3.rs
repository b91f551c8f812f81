//! `nmcp t3`: the Table 8.2 sub-layer study (no subcommand), `nmcp t3 check` (a fused
//! GEMM + reduce-scatter with real data, written as `.npy`), `nmcp t3 rs` (a plain ring
//! reduce-scatter timed alone).

use std::time::Instant;

use nmcp_emulator::t3::{self, CheckRun, Simulate, SubLayer, TABLE_8_2};

use super::io::emit;
use super::{CmdResult, UsageError};
use crate::checkpoint;
use crate::t3 as report;
use crate::t3::machine::Dtype;
use crate::t3::options::{CheckOptions, CuSplitOptions, RsOptions, StudyOptions};
use crate::t3::select::known_models;
use crate::t3::study::t3_error;

/// Arguments of `nmcp t3`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct T3Args {
    #[command(subcommand)]
    command: Option<T3Command>,
    #[command(flatten)]
    study: StudyOptions,
}

#[derive(clap::Subcommand, Debug)]
enum T3Command {
    /// Fused (or sequential) GEMM + reduce-scatter with real data: every GPU's partial
    /// output and final block as .npy, checked against the element-wise sum.
    Check(CheckOptions),
    /// Time a plain ring reduce-scatter alone, next to the bandwidth-latency model.
    Rs(RsOptions),
    /// Dissertation 8.2.2 (Fig. 8.4): the GEMM and the ring reduce-scatter sharing the
    /// CUs (e.g. 72-8, 64-16), next to each alone and the ideal overlap.
    CuSplit(CuSplitOptions),
}

impl T3Args {
    /// The typed options of the command run (the study's, or the subcommand's).
    pub(crate) fn options(&mut self) -> &mut dyn crate::scenario::Typed {
        match &mut self.command {
            None => &mut self.study,
            Some(T3Command::Check(a)) => a,
            Some(T3Command::Rs(a)) => a,
            Some(T3Command::CuSplit(a)) => a,
        }
    }
}

/// Runs `nmcp t3`.
pub fn run(a: T3Args) -> CmdResult {
    if let Some(c) = &a.command {
        let name = match c {
            T3Command::Check(_) => "t3 check",
            T3Command::Rs(_) => "t3 rs",
            T3Command::CuSplit(_) => "t3 cu-split",
        };
        checkpoint::unsupported(name)?;
    }
    match a.command {
        Some(T3Command::Check(c)) => run_check(&c),
        Some(T3Command::Rs(r)) => run_rs(&r),
        Some(T3Command::CuSplit(c)) => run_cu_split(&c),
        None => run_study(&a.study),
    }
}

/// The sub-layers the study arguments name, in order (model, TP, sub-layer).
fn study_sublayers(a: &StudyOptions) -> Result<Vec<SubLayer>, UsageError> {
    let custom =
        a.h.zip(a.tokens)
            .map(|(h, t)| (a.model_name.as_str(), h, t));
    crate::t3::select::study_sublayers(&a.models, a.tp.as_deref(), &a.sublayers, custom)
        .map_err(UsageError)
}

fn run_study(a: &StudyOptions) -> CmdResult {
    let simulate = if a.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let mut opts = a.machine.options(a.gpus, simulate, a.dtype);
    opts.threads = a.machine.threads_for(a.jobs);
    let sls = study_sublayers(a)?;
    if sls.is_empty() {
        return Err(UsageError("no sub-layers selected".into()).into());
    }
    let trace = a.timeline.config();
    if trace.is_some() && sls.len() != 1 {
        return Err(UsageError(format!(
            "--trace/--vcd record one sub-layer's runs, but {} are selected; pick one with --sublayers and --tp (or --models)",
            sls.len()
        ))
        .into());
    }
    let bar = report::study::progress(sls.len() as u64, a.json);
    let started = Instant::now();
    let (results, timeline) = report::study::run(&opts, &sls, a.jobs as usize, trace, &bar)?;
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    if let Some(dir) = &a.svg {
        report::plot::write_svgs(dir, &results)?;
    }
    crate::timeline::write_if_asked(&a.timeline, timeline.as_ref())?;
    if a.json {
        let rows = report::rows(&results, a.gpus, simulate, a.dtype.gemm());
        emit(&(serde_json::to_string_pretty(&rows)? + "\n"))
    } else {
        let ctx = report::ReportContext {
            gpus: a.gpus,
            simulate,
            gpu: opts.gpu.name.clone(),
            dtype: a.dtype.name(),
            gemm_dtype: a.dtype.gemm(),
            wall_seconds: wall,
        };
        let mut text = report::report(&results, &ctx);
        if let Some(dir) = &a.svg {
            text.push_str(&format!(
                "plots: {}, {}\n",
                dir.join("t3-speedup.svg").display(),
                dir.join("t3-traffic.svg").display()
            ));
        }
        emit(&text)
    }
}

fn run_check(c: &CheckOptions) -> CmdResult {
    let opts = c.machine.options(c.gpus, Simulate::AllGpus, c.dtype);
    let run = CheckRun {
        gpus: c.gpus,
        m: c.m,
        n: c.n,
        k: c.k,
        scenario: c.config,
    };
    let bar = super::io::spinner("t3 check: simulating", false);
    let out = t3::check(&opts, &run).map_err(|e| t3_error(e, "t3 check: "));
    bar.finish_and_clear();
    let out = out?;
    if let Some(dir) = &c.out {
        report::write_check_dir(dir, &run, c.dtype.gemm(), &out)?;
    }
    emit(&report::lines::check(
        c.json,
        &run,
        c.dtype.name(),
        c.out.as_deref(),
        &out,
    )?)?;
    if out.mismatches > 0 {
        return Err(format!(
            "t3 check failed: {} element(s) differ from the sum of the partials; first: {}",
            out.mismatches,
            out.first_mismatch.as_deref().unwrap_or("(not described)")
        )
        .into());
    }
    Ok(())
}

fn run_rs(r: &RsOptions) -> CmdResult {
    let simulate = if r.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let opts = r.machine.options(r.gpus, simulate, r.dtype);
    let bar = super::io::spinner("t3 rs: simulating the ring", r.json);
    let t = t3::time_reduce_scatter(&opts, r.bytes).map_err(|e| t3_error(e, "t3 rs: "));
    bar.finish_and_clear();
    let t = t?;
    emit(&report::lines::rs(r.json, r.gpus, r.bytes, simulate, &t)?)
}

fn run_cu_split(c: &CuSplitOptions) -> CmdResult {
    let simulate = if c.shortcut {
        Simulate::Shortcut
    } else {
        Simulate::AllGpus
    };
    let opts = c.machine.options(0, simulate, Dtype::F16);
    let Some(&(_, h, tokens, _)) = TABLE_8_2.iter().find(|m| m.0 == c.model) else {
        return Err(Box::new(UsageError(format!(
            "--model {}: cu-split takes one model of Table 8.2 ({})",
            c.model,
            known_models()
        ))));
    };
    let sl = t3::sublayers(&c.model, h, tokens, c.tp)
        .into_iter()
        .find(|s| s.name == c.sublayer)
        .ok_or_else(|| UsageError(format!("--sublayer {}: unknown", c.sublayer)))?;
    let mut rows = Vec::new();
    let bar = super::io::spinner("t3 cu-split", c.json);
    for &(g, r) in &c.split {
        bar.set_message(format!(
            "t3 cu-split {g}-{r}: GEMM alone, RS alone, both at once"
        ));
        let row = t3::run::cu_split(&opts, &sl, g, r).map_err(|e| t3_error(e, "t3 cu-split: "));
        if row.is_err() {
            bar.finish_and_clear();
        }
        rows.push(row?);
    }
    bar.finish_and_clear();
    emit(&report::lines::cu_split(
        c.json, &c.model, &sl, c.tp, &rows,
    )?)
}

#[cfg(test)]
#[path = "t3_tests.rs"]
mod tests;
