//! A pseudo-channel's power state for the energy model: how long at least one bank has
//! been open (active standby, IDD3N, against precharged standby, IDD2N) and how many banks
//! were precharged. Updated on row commands only, which are the only ones that change it.

use serde::{Deserialize, Serialize};

use super::Cycle;

/// Active-standby time and precharge count of one pseudo-channel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PowerState {
    /// Closed active periods, summed (cycles).
    active: u64,
    /// Start of the open active period, if a bank is open.
    since: Option<Cycle>,
    /// Banks (or subarrays) precharged.
    pub precharges: u64,
}

impl PowerState {
    /// A row command at `at` took the pseudo-channel from `was_open` to `is_open`.
    #[inline]
    pub fn track(&mut self, was_open: bool, is_open: bool, at: Cycle) {
        match (was_open, is_open) {
            (false, true) => self.since = Some(at),
            (true, false) => {
                if let Some(s) = self.since.take() {
                    self.active += at.saturating_sub(s);
                }
            }
            _ => {}
        }
    }

    /// Active-standby cycles up to `now` (an open period counts up to `now`).
    pub fn active_cycles(&self, now: Cycle) -> u64 {
        self.active + self.since.map_or(0, |s| now.saturating_sub(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_open_periods_up_to_now() {
        let mut p = PowerState::default();
        p.track(false, true, 10);
        p.track(true, true, 15);
        assert_eq!(p.active_cycles(12), 2);
        p.track(true, false, 30);
        p.track(false, true, 100);
        assert_eq!(p.active_cycles(130), 20 + 30);
    }
}
