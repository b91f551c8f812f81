//! The CP time of each simulated T3 GPU's firmware: one handler at a time, each charged
//! through the node's cost model (`node::cost`, the CP's clock and the T3 programmer's
//! cost per record), so what a handler programs reaches the hardware at its end.

use crate::hbm::Cycle;
use crate::node::cost::{FirmwareCost, FirmwareWork};

/// Per GPU, when its CP is next free and how long it has been busy (ns; a T3 run's
/// clock).
#[derive(Debug, Clone)]
pub struct FirmwareClock {
    cost: FirmwareCost,
    free_at: Vec<Cycle>,
    busy_ns: Vec<Cycle>,
}

impl FirmwareClock {
    /// `gpus` idle CPs charging `cost`.
    pub fn new(gpus: usize, cost: FirmwareCost) -> Self {
        Self {
            cost,
            free_at: vec![0; gpus],
            busy_ns: vec![0; gpus],
        }
    }

    /// When GPU `g`'s CP finishes the handler it runs (0 when idle from the start).
    pub fn free_at(&self, g: usize) -> Cycle {
        self.free_at.get(g).copied().unwrap_or(0)
    }

    /// Charges `work`, a handler GPU `g`'s CP started at `at`; returns its end (whole
    /// ns, rounded up: a handler of any work takes at least 1 ns).
    pub fn charge(&mut self, g: usize, at: Cycle, work: &FirmwareWork) -> Cycle {
        let cycles = self.cost.cycles(work);
        let hz = self.cost.cp.clock_hz.max(1);
        let ns = (u128::from(cycles) * 1_000_000_000).div_ceil(u128::from(hz));
        let ns = Cycle::try_from(ns).unwrap_or(Cycle::MAX);
        let end = at.saturating_add(ns);
        if let Some(f) = self.free_at.get_mut(g) {
            *f = end;
        }
        if let Some(b) = self.busy_ns.get_mut(g) {
            *b = b.saturating_add(ns);
        }
        end
    }

    /// The busiest GPU's total handler time, ns.
    pub fn busiest_ns(&self) -> f64 {
        self.busy_ns.iter().copied().max().unwrap_or(0) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_firmware::t3::T3Work;

    #[test]
    fn handlers_end_after_their_charged_time_and_add_up() {
        let cost = FirmwareCost::default();
        let mut c = FirmwareClock::new(2, cost);
        let w = FirmwareWork {
            t3: T3Work {
                records: 3,
                events: 1,
            },
            ..FirmwareWork::default()
        };
        let cycles = cost.cycles(&w);
        let ns = (cycles * 1_000_000_000).div_ceil(cost.cp.clock_hz);
        assert!(ns > 0);
        assert_eq!(c.charge(1, 100, &w), 100 + ns);
        assert_eq!(c.free_at(1), 100 + ns);
        assert_eq!(c.free_at(0), 0);
        c.charge(1, 500 + ns, &w);
        assert_eq!(c.busiest_ns(), (2 * ns) as f64);
        let mut free = FirmwareClock::new(1, FirmwareCost::free());
        assert_eq!(free.charge(0, 7, &w), 7);
    }
}
