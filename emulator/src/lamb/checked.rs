//! A LAMB run on NMC checked step by step against the FP32 reference: the state goes
//! into device memory and into the reference, every step runs on both (new gradients,
//! if any, are written to both first), and at the end the two are compared with
//! [`reference::compare`].

use crate::lamb::reference::{self, Comparison, LambHyper, TensorState, TermScales};
use crate::lamb::run::{LambError, LambRun, StepOutcome};

/// What one checked step produced.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CheckedStep {
    /// The NMC step (cycles, the global norm the firmware computed).
    pub nmc: StepOutcome,
    /// The global gradient norm of the reference.
    pub reference_global_norm: f32,
}

/// A functional [`LambRun`] next to the reference it is checked against.
#[derive(Debug)]
pub struct CheckedRun {
    run: LambRun,
    expect: Vec<TensorState>,
    scales: Vec<TermScales>,
    hyper: LambHyper,
    steps: u32,
}

impl CheckedRun {
    /// Writes `state` into `run`'s device memory and keeps it as the reference. `hyper`
    /// must be the hyperparameters `run` was configured with (the `k`-th step of both
    /// uses `step = hyper.step + k`).
    ///
    /// # Errors
    /// [`LambError::Data`] if the tensors do not match the layout.
    pub fn new(
        mut run: LambRun,
        state: Vec<TensorState>,
        hyper: LambHyper,
    ) -> Result<Self, LambError> {
        run.write_state(&state)?;
        Ok(Self {
            run,
            expect: state,
            scales: Vec::new(),
            hyper,
            steps: 0,
        })
    }

    /// One step on the reference and on NMC; `gradients`, if given, replace g in both
    /// first (otherwise the previous gradients are used again).
    ///
    /// # Errors
    /// [`LambError::Data`] if a gradient length does not match; firmware or engine
    /// errors.
    pub fn step(&mut self, gradients: Option<Vec<Vec<f32>>>) -> Result<CheckedStep, LambError> {
        if let Some(g) = gradients {
            self.run.write_gradients(&g)?;
            for (t, g) in self.expect.iter_mut().zip(g) {
                t.g = g;
            }
        }
        let h = LambHyper {
            step: self.hyper.step.saturating_add(self.steps),
            ..self.hyper
        };
        let reference_global_norm =
            reference::step_tracking(&mut self.expect, &h, &mut self.scales);
        let nmc = self.run.step()?;
        self.steps += 1;
        Ok(CheckedStep {
            nmc,
            reference_global_norm,
        })
    }

    /// The NMC run (totals, layout, firmware).
    pub fn run(&self) -> &LambRun {
        &self.run
    }

    /// The NMC run, giving up the reference.
    pub fn into_run(self) -> LambRun {
        self.run
    }

    /// The reference state after the steps so far.
    pub fn expected(&self) -> &[TensorState] {
        &self.expect
    }

    /// The reference's running term scales (one per tensor once a step has run).
    pub fn scales(&self) -> &[TermScales] {
        &self.scales
    }

    /// The state in device memory: w, m and v read back, g as last written.
    ///
    /// # Errors
    /// [`LambError::Data`] if the layout does not match (it always does).
    pub fn read_state(&self) -> Result<Vec<TensorState>, LambError> {
        let mut got = self.expect.clone();
        self.run.read_state(&mut got)?;
        Ok(got)
    }

    /// Device memory against the reference ([`reference::compare`]).
    ///
    /// # Errors
    /// As [`CheckedRun::read_state`].
    pub fn compare(&self) -> Result<Comparison, LambError> {
        Ok(reference::compare(
            &self.read_state()?,
            &self.expect,
            &self.scales,
        ))
    }
}
