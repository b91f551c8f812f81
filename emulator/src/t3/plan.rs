//! The sub-layer study as a set of independent simulations ("parts"), run on a few
//! threads longest-expected-first.
//!
//! A sub-layer's five rows come from six simulations: the producer GEMM alone, three ring
//! collectives alone (reduce-scatter, reduce-scatter with near-memory updates,
//! all-gather), and the two fused runs (T3 and T3-MCA). The rings depend only on the
//! output array and the GPU count, so every sub-layer of a model at one TP shares them;
//! they run once. T3-MCA needs the isolated GEMM's queue occupancy (its threshold) unless
//! a threshold is given, so it starts after that GEMM. Every other part is independent.
//!
//! Scheduling: a free thread takes the ready part with the largest expected cost, where a
//! GEMM that T3-MCA waits for counts its own cost plus T3-MCA's (the longest path it
//! starts). The cost is an a-priori estimate from the shape, the GPU count and the part
//! ([`part_cost`]), never a timing, so the order is the same on every run; and each
//! part's result is a function of its inputs only, so the rows are identical for any
//! thread count and order (`docs/decisions/t3-runs.md`, "Study scheduling").

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::run::Collective;
use super::run::{
    fused, gpus_of, isolated_gemm, layout, mca_threshold_for, model, ring, rows, Phase,
    SubLayerPhases,
};
use super::system::RingKind;
use super::{Simulate, SubLayer, SubLayerResult, T3Error, T3Options};

/// One simulation of the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The producer GEMM alone (Sequential's and the ideals' GEMM; T3-MCA's threshold).
    Gemm,
    /// A ring collective alone over the sub-layer's output array.
    Ring(RingKind),
    /// The fused GEMM + reduce-scatter with round-robin arbitration.
    T3,
    /// The fused GEMM + reduce-scatter with MCA.
    T3Mca,
}

/// Expected cost of simulating `part` of `sl`, in simulated GPU-nanoseconds: the
/// part's compute-bound or link-bound time estimate (the same estimates the stuck limits
/// use) times the GPUs simulated. Only the order of these numbers is used.
pub fn part_cost(opts: &T3Options, sl: &SubLayer, part: Part) -> f64 {
    let gpus = gpus_of(opts, sl.tp);
    let simulated = if opts.simulate == Simulate::Shortcut {
        1.0
    } else {
        f64::from(gpus)
    };
    let Ok(l) = layout(opts, sl.m, sl.n, gpus) else {
        return 0.0;
    };
    let link_ns = l.bytes() as f64 / opts.link.bytes_per_ns;
    let ns = match part {
        Part::Gemm => model(opts, &l, sl, sl.k, true).map_or(0.0, |m| m.compute_bound_ns()),
        Part::Ring(_) => link_ns + f64::from(gpus) * opts.link.latency_ns,
        Part::T3 | Part::T3Mca => {
            let splits = u32::from(opts.split_k.max(1));
            model(opts, &l, sl, sl.k.div_ceil(splits), false).map_or(0.0, |m| m.compute_bound_ns())
                + link_ns
        }
    };
    ns * simulated
}

/// Why the study stopped.
#[derive(Debug)]
pub enum StudyFailure<E> {
    /// A simulation of sub-layer `sublayer` (an index into the list given) failed.
    T3 {
        /// The sub-layer.
        sublayer: usize,
        /// What failed.
        error: T3Error,
    },
    /// The caller's completion callback failed.
    Callback(E),
}

struct Task {
    /// The first sub-layer (in the given order) that uses this part.
    sublayer: usize,
    part: Part,
    /// Scheduling priority (the expected cost of the longest path this part starts).
    priority: f64,
    /// A task that must finish first (T3-MCA's GEMM).
    after: Option<usize>,
    /// Sub-layers whose rows use this part.
    users: Vec<usize>,
}

/// Per sub-layer: the task of each of its six simulations.
#[derive(Clone, Copy)]
struct Slots {
    gemm: usize,
    rs: usize,
    rs_nmc: usize,
    ag: usize,
    t3: usize,
    t3m: usize,
}

struct State<E> {
    results: Vec<Option<Phase>>,
    /// Tasks not yet taken whose dependency is done.
    ready: Vec<usize>,
    /// Tasks waiting for their dependency.
    blocked: Vec<usize>,
    running: usize,
    /// Parts still missing, per sub-layer.
    missing: Vec<usize>,
    failures: Vec<StudyFailure<E>>,
    /// A worker panicked.
    aborted: bool,
}

/// Runs sub-layers `todo` (indices into `sls`) on `jobs` threads, part by part, and
/// returns each one's five rows (`None` for sub-layers not in `todo`). `done` is called
/// with a sub-layer's index and rows as soon as its last part finishes (in whatever
/// order they finish; from the worker thread).
///
/// # Errors
/// [`StudyFailure::T3`] for the first sub-layer (in `sls` order) among those whose
/// simulation failed before the study stopped, else [`StudyFailure::Callback`] if `done`
/// failed. No new part starts after a failure.
pub fn run_study<E, F>(
    opts: &T3Options,
    sls: &[SubLayer],
    todo: &[usize],
    jobs: usize,
    done: F,
) -> Result<Vec<Option<Vec<SubLayerResult>>>, StudyFailure<E>>
where
    E: Send,
    F: Fn(usize, &[SubLayerResult]) -> Result<(), E> + Sync,
{
    let (tasks, slots) = plan(opts, sls, todo);
    let mut state = State {
        results: vec![None; tasks.len()],
        ready: Vec::new(),
        blocked: Vec::new(),
        running: 0,
        missing: vec![0; sls.len()],
        failures: Vec::new(),
        aborted: false,
    };
    for (i, t) in tasks.iter().enumerate() {
        if t.after.is_some() {
            state.blocked.push(i);
        } else {
            state.ready.push(i);
        }
    }
    for &i in todo {
        if let Some(m) = state.missing.get_mut(i) {
            *m = 6;
        }
    }
    let shared = Shared {
        opts,
        sls,
        tasks: &tasks,
        slots: &slots,
        state: Mutex::new(state),
        wake: Condvar::new(),
        done: &done,
    };
    let jobs = jobs.clamp(1, tasks.len().max(1));
    if jobs == 1 {
        shared.work();
    } else {
        std::thread::scope(|s| {
            for _ in 0..jobs {
                s.spawn(|| shared.work());
            }
        });
    }
    let state = shared
        .state
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let mut failures = state.failures;
    failures.sort_by_key(|f| match f {
        StudyFailure::T3 { sublayer, .. } => (0, *sublayer),
        StudyFailure::Callback(_) => (1, 0),
    });
    if let Some(f) = failures.into_iter().next() {
        return Err(f);
    }
    let mut out: Vec<Option<Vec<SubLayerResult>>> = vec![None; sls.len()];
    for &i in todo {
        if let (Some(sl), Some(s), Some(o)) = (sls.get(i), slots.get(i), out.get_mut(i)) {
            *o = phases(&state.results, s).map(|p| rows(sl, &p));
        }
    }
    Ok(out)
}

fn phases(results: &[Option<Phase>], s: &Option<Slots>) -> Option<SubLayerPhases> {
    let s = (*s)?;
    let get = |i: usize| results.get(i).copied().flatten();
    Some(SubLayerPhases {
        gemm: get(s.gemm)?,
        rs: get(s.rs)?,
        rs_nmc: get(s.rs_nmc)?,
        ag: get(s.ag)?,
        t3: get(s.t3)?,
        t3m: get(s.t3m)?,
    })
}

/// The tasks of sub-layers `todo`, rings shared by sub-layers with the same output
/// array and GPU count, and each sub-layer's slots.
fn plan(opts: &T3Options, sls: &[SubLayer], todo: &[usize]) -> (Vec<Task>, Vec<Option<Slots>>) {
    let mut tasks: Vec<Task> = Vec::new();
    let mut slots = vec![None; sls.len()];
    let mut rings: HashMap<(u32, u32, u32, u8), usize> = HashMap::new();
    let add = |tasks: &mut Vec<Task>, i: usize, sl: &SubLayer, part: Part, after| {
        tasks.push(Task {
            sublayer: i,
            part,
            priority: part_cost(opts, sl, part),
            after,
            users: vec![i],
        });
        tasks.len() - 1
    };
    for &i in todo {
        let Some(sl) = sls.get(i) else { continue };
        let gemm = add(&mut tasks, i, sl, Part::Gemm, None);
        let mut ring_task = |tasks: &mut Vec<Task>, kind: RingKind| {
            let key = (sl.m, sl.n, gpus_of(opts, sl.tp), kind as u8);
            if let Some(&t) = rings.get(&key) {
                if let Some(task) = tasks.get_mut(t) {
                    task.users.push(i);
                }
                return t;
            }
            let t = add(tasks, i, sl, Part::Ring(kind), None);
            rings.insert(key, t);
            t
        };
        let rs = ring_task(&mut tasks, RingKind::ReduceScatter);
        let rs_nmc = ring_task(&mut tasks, RingKind::ReduceScatterNmc);
        let ag = ring_task(&mut tasks, RingKind::AllGather);
        let t3 = add(&mut tasks, i, sl, Part::T3, None);
        let after = opts.mca_threshold.is_none().then_some(gemm);
        let t3m = add(&mut tasks, i, sl, Part::T3Mca, after);
        // The GEMM starts T3-MCA's path when T3-MCA waits for it.
        if after.is_some() {
            let tail = tasks.get(t3m).map_or(0.0, |t| t.priority);
            if let Some(g) = tasks.get_mut(gemm) {
                g.priority += tail;
            }
        }
        if let Some(s) = slots.get_mut(i) {
            *s = Some(Slots {
                gemm,
                rs,
                rs_nmc,
                ag,
                t3,
                t3m,
            });
        }
    }
    (tasks, slots)
}

struct Shared<'a, E, F> {
    opts: &'a T3Options,
    sls: &'a [SubLayer],
    tasks: &'a [Task],
    slots: &'a [Option<Slots>],
    state: Mutex<State<E>>,
    wake: Condvar,
    done: &'a F,
}

/// Marks the study aborted if a worker unwinds while running a part, so the others stop
/// waiting for it.
struct Unwinding<'s, 'a, E, F>(&'s Shared<'a, E, F>);

impl<E, F> Drop for Unwinding<'_, '_, E, F> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut st = self.0.lock();
            st.aborted = true;
            st.running = st.running.saturating_sub(1);
            self.0.wake.notify_all();
        }
    }
}

impl<E, F> Shared<'_, E, F> {
    fn lock(&self) -> MutexGuard<'_, State<E>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<E, F> Shared<'_, E, F>
where
    E: Send,
    F: Fn(usize, &[SubLayerResult]) -> Result<(), E> + Sync,
{
    /// The ready task of highest priority (ties: the earlier task), taken off the list.
    fn take(&self, st: &mut State<E>) -> Option<usize> {
        let tasks = self.tasks;
        let prio = |i: usize| tasks.get(i).map_or(0.0, |t| t.priority);
        let best = st
            .ready
            .iter()
            .enumerate()
            .max_by(|(_, &a), (_, &b)| prio(a).total_cmp(&prio(b)).then(b.cmp(&a)))
            .map(|(k, _)| k)?;
        Some(st.ready.swap_remove(best))
    }

    fn work(&self) {
        loop {
            let task = {
                let mut st = self.lock();
                loop {
                    if st.aborted || !st.failures.is_empty() {
                        return;
                    }
                    if let Some(t) = self.take(&mut st) {
                        st.running += 1;
                        break t;
                    }
                    if st.running == 0 {
                        return;
                    }
                    st = self.wake.wait(st).unwrap_or_else(PoisonError::into_inner);
                }
            };
            let guard = Unwinding(self);
            let result = self.run(task);
            std::mem::forget(guard);
            self.finish(task, result);
        }
    }

    fn run(&self, task: usize) -> Result<Phase, T3Error> {
        let Some(t) = self.tasks.get(task) else {
            return Err(T3Error::Config(format!("no study task {task}")));
        };
        let Some(sl) = self.sls.get(t.sublayer) else {
            return Err(T3Error::Config(format!("no sub-layer {}", t.sublayer)));
        };
        let opts = self.opts;
        let shortcut = opts.simulate == Simulate::Shortcut;
        let gpus = gpus_of(opts, sl.tp);
        let started = std::time::Instant::now();
        let r = match t.part {
            Part::Gemm => isolated_gemm(opts, sl, shortcut),
            Part::Ring(kind) => ring(opts, sl.m, sl.n, gpus, kind, shortcut),
            Part::T3 | Part::T3Mca => {
                let mca = if t.part == Part::T3 {
                    None
                } else {
                    Some(self.threshold(task))
                };
                fused(
                    opts,
                    sl,
                    Collective::RingReduceScatter,
                    mca,
                    shortcut,
                    None,
                    None,
                )
                .map(|(p, _)| p)
            }
        };
        if std::env::var_os("NMCP_T3_PART_TIMES").is_some() {
            eprintln!(
                "t3 part: {} {} TP{} {:?}: {:.1} s wall (expected cost {:.3e})",
                sl.model,
                sl.name,
                sl.tp,
                t.part,
                started.elapsed().as_secs_f64(),
                part_cost(opts, sl, t.part)
            );
        }
        r
    }

    /// T3-MCA's threshold: the option, or picked from the sub-layer's isolated GEMM.
    fn threshold(&self, task: usize) -> usize {
        if let Some(t) = self.opts.mca_threshold {
            return t;
        }
        let gemm = self.tasks.get(task).and_then(|t| t.after);
        let st = self.lock();
        let occupancy = gemm
            .and_then(|g| st.results.get(g).copied().flatten())
            .map_or(0.0, |p| p.occupancy);
        mca_threshold_for(occupancy)
    }

    fn finish(&self, task: usize, result: Result<Phase, T3Error>) {
        let mut st = self.lock();
        st.running = st.running.saturating_sub(1);
        let Some(t) = self.tasks.get(task) else {
            return;
        };
        match result {
            Err(error) => st.failures.push(StudyFailure::T3 {
                sublayer: t.sublayer,
                error,
            }),
            Ok(p) => {
                if let Some(r) = st.results.get_mut(task) {
                    *r = Some(p);
                }
                let tasks = self.tasks;
                let (now, still): (Vec<usize>, Vec<usize>) = st
                    .blocked
                    .iter()
                    .partition(|&&b| tasks.get(b).and_then(|x| x.after) == Some(task));
                st.blocked = still;
                st.ready.extend(now);
                for &u in &t.users {
                    let left = st.missing.get_mut(u).map(|m| {
                        *m = m.saturating_sub(1);
                        *m
                    });
                    if left != Some(0) {
                        continue;
                    }
                    let (Some(sl), Some(s)) = (self.sls.get(u), self.slots.get(u)) else {
                        continue;
                    };
                    if let Some(p) = phases(&st.results, s) {
                        let rows = rows(sl, &p);
                        if let Err(e) = (self.done)(u, &rows) {
                            st.failures.push(StudyFailure::Callback(e));
                        }
                    }
                }
            }
        }
        self.wake.notify_all();
    }
}
