//! The checkpoint state of a [`MemorySystem`]: what changes between two requests of a
//! run, taken out whole and restored into a system built the same way.

use serde::{Deserialize, Serialize};

use crate::hbm::Cycle;

use super::system::{ChannelBuses, Slot};
use super::{ByKindClass, Controller, ControllerState, LogHistogram, MemorySystem};

/// The changing state of a [`MemorySystem`] between two requests of
/// [`MemorySystem::run_checkpointed`], for a checkpoint (postcard-serialised by `nmcp
/// mem`): every controller's queues, banks, refresh and statistics, the front end's
/// request slots, the clock and the run's figures so far. The preset, mapping and
/// controller settings are not in it: the system it is restored into is built from the
/// same command line, and [`MemorySystem::restore`] checks that the shapes agree.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MemoryState {
    controllers: Vec<ControllerState>,
    wake: Vec<Cycle>,
    next: Cycle,
    slots: Vec<Slot>,
    free: Vec<u32>,
    now: Cycle,
    read_latency: LogHistogram,
    finished: ByKindClass,
    next_id: u64,
    last_completion: Cycle,
    buses: Vec<ChannelBuses>,
}

impl MemoryState {
    /// The cycle the state was taken at.
    pub fn now(&self) -> Cycle {
        self.now
    }
}

impl MemorySystem {
    /// The changing state, for a checkpoint: call it from the hook of
    /// [`MemorySystem::run_checkpointed`] (between two requests of a run).
    ///
    /// # Errors
    /// Why the state cannot be saved: a controller with a stateful arbiter, an observer
    /// or a command log, or completions not yet handed out (outside `run`).
    pub fn state(&self) -> Result<MemoryState, String> {
        if !self.pending.is_empty() || !self.done.is_empty() || self.keep_meta {
            return Err("completions are waiting to be handed out: a state can be taken only inside `run_checkpointed`".into());
        }
        Ok(MemoryState {
            controllers: self
                .controllers
                .iter()
                .map(Controller::state)
                .collect::<Result<_, _>>()?,
            wake: self.wake.clone(),
            next: self.next,
            slots: self.slots.clone(),
            free: self.free.clone(),
            now: self.now,
            read_latency: self.read_latency.clone(),
            finished: self.finished,
            next_id: self.next_id,
            last_completion: self.last_completion,
            buses: self.buses.clone(),
        })
    }

    /// Takes over a state from [`MemorySystem::state`] of a system built with the same
    /// preset, mapping and settings (then resume with
    /// [`run_checkpointed`](Self::run_checkpointed)). Refused whole, leaving this system
    /// as it was, when its shape does not fit (controller, bank or channel counts, queue
    /// lengths, slot references).
    ///
    /// # Errors
    /// What does not fit.
    pub fn restore(&mut self, state: MemoryState) -> Result<(), String> {
        let n = self.controllers.len();
        let slots = state.slots.len();
        if state.controllers.len() != n || state.wake.len() != n {
            return Err(format!(
                "the saved state has {} pseudo-channels, this system {n}",
                state.controllers.len()
            ));
        }
        if state.buses.len() != self.buses.len()
            || state.buses.iter().any(|b| b.first >= self.pcs_per_channel)
        {
            return Err("the saved state's shared command buses do not fit this system".into());
        }
        if state.free.iter().any(|&t| t as usize >= slots) || !state.read_latency.is_well_formed() {
            return Err("the saved state's front end is inconsistent".into());
        }
        let mut restored = self.controllers.clone();
        for (c, s) in restored.iter_mut().zip(state.controllers) {
            c.restore(s, slots)?;
        }
        self.controllers = restored;
        self.wake = state.wake;
        self.next = state.next;
        self.slots = state.slots;
        self.free = state.free;
        self.now = state.now;
        self.read_latency = state.read_latency;
        self.finished = state.finished;
        self.next_id = state.next_id;
        self.last_completion = state.last_completion;
        self.buses = state.buses;
        Ok(())
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use crate::hbm::config::{CommandBus, PagePolicy, RefreshMode};
    use crate::hbm::mapping::STREAM_MAPPING;
    use crate::hbm::{AddressMapping, HbmPreset};
    use crate::memctrl::ControllerConfig;
    use crate::trace::{Pattern, Synthetic};

    fn system(bus: CommandBus, refresh: RefreshMode, page: PagePolicy, look: u32) -> MemorySystem {
        let mut p = HbmPreset::builtin("hbm2-2000").unwrap();
        p.organisation.command_bus = bus;
        p.controller.activated_per_bank = look;
        let mut cfg = ControllerConfig::with_depth(&p, 16);
        cfg.refresh = refresh;
        cfg.page_policy = page;
        let mapping = AddressMapping::named(STREAM_MAPPING, &p).unwrap();
        MemorySystem::new(&p, mapping, cfg)
    }

    fn stream(n: u64) -> Synthetic {
        Synthetic::new(Pattern::Random, n, 64, 1 << 30, 0.3, 7)
    }

    /// A run stopped at any accepted request and continued from its state (in a system
    /// built afresh) ends with exactly the uninterrupted run's report.
    #[test]
    fn a_run_restored_from_any_point_ends_as_the_uninterrupted_one() {
        const N: u64 = 30_000;
        let setups = [
            (
                CommandBus::Shared,
                RefreshMode::AllBank,
                PagePolicy::Open,
                0,
            ),
            (
                CommandBus::PerPseudoChannel,
                RefreshMode::PerBank,
                PagePolicy::Closed,
                1,
            ),
        ];
        for (bus, refresh, page, look) in setups {
            let whole = system(bus, refresh, page, look).run(stream(N), |_| {});
            let mut states = Vec::new();
            let points = [1, 4_999, 17_000, N];
            let mut sys = system(bus, refresh, page, look);
            let stopped = sys.run_checkpointed(
                stream(N),
                |_| {},
                None,
                |s, n| {
                    if points.contains(&n) {
                        states.push((n, s.state().unwrap()));
                    }
                    true
                },
            );
            assert_eq!(stopped, whole, "{bus:?}: the hook changed the run");
            assert_eq!(states.len(), points.len());
            for (n, state) in states {
                let mut sys = system(bus, refresh, page, look);
                sys.restore(state).unwrap();
                let mut rest = stream(N);
                for _ in 0..n {
                    rest.next();
                }
                let resumed = sys.run_checkpointed(rest, |_| {}, Some(n), |_, _| true);
                assert_eq!(resumed, whole, "{bus:?} {refresh:?}: resumed after {n}");
            }
        }
    }

    #[test]
    fn a_state_of_another_shape_is_refused_and_changes_nothing() {
        let mut a = system(
            CommandBus::Shared,
            RefreshMode::AllBank,
            PagePolicy::Open,
            0,
        );
        let mut state = None;
        a.run_checkpointed(
            stream(2_000),
            |_| {},
            None,
            |s, n| {
                if n == 1_000 {
                    state = Some(s.state().unwrap());
                }
                true
            },
        );
        let state = state.unwrap();
        let mut b = system(
            CommandBus::PerPseudoChannel,
            RefreshMode::AllBank,
            PagePolicy::Open,
            0,
        );
        let before = b.report(0);
        let e = b.restore(state.clone()).unwrap_err();
        assert!(e.contains("buses"), "{e}");
        assert_eq!(b.report(0), before);
        let mut c = system(
            CommandBus::Shared,
            RefreshMode::PerBank,
            PagePolicy::Open,
            0,
        );
        let e = c.restore(state).unwrap_err();
        assert!(e.contains("does not fit"), "{e}");
    }
}
