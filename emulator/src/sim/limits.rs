//! User-set caps on a simulation (SPEC 8): simulated time and events. A run that reaches
//! one stops with [`LimitReached`], which says which cap, its value and what the run had
//! reached, instead of running away on a mistyped size.

use std::fmt;

use super::{Tick, PS_PER_NS};

/// Caps on one simulation; `None` = no cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Limits {
    /// Simulated time, picoseconds.
    pub max_sim_ps: Option<Tick>,
    /// Events handled (scheduled events plus memory requests completed).
    pub max_events: Option<u64>,
}

/// A cap a run reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LimitReached {
    /// Simulated time passed `limit_ps`; the run was at `at_ps`.
    SimTime {
        /// The cap.
        limit_ps: Tick,
        /// Where the run was.
        at_ps: Tick,
    },
    /// More than `limit` events; the run had handled `events` by `at_ps`.
    Events {
        /// The cap.
        limit: u64,
        /// Events handled.
        events: u64,
        /// Simulated time then.
        at_ps: Tick,
    },
}

fn ms(ps: Tick) -> f64 {
    ps as f64 / (PS_PER_NS as f64 * 1e6)
}

impl fmt::Display for LimitReached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SimTime { limit_ps, at_ps } => write!(
                f,
                "simulated-time cap reached: {:.6} ms simulated, cap {:.6} ms (--max-sim-time)",
                ms(*at_ps),
                ms(*limit_ps)
            ),
            Self::Events {
                limit,
                events,
                at_ps,
            } => write!(
                f,
                "event cap reached: {events} events handled by {:.6} ms simulated, cap {limit} (--max-events)",
                ms(*at_ps)
            ),
        }
    }
}

impl std::error::Error for LimitReached {}

impl Limits {
    /// Whether a run at `now_ps` that has handled `events` may go on.
    ///
    /// # Errors
    /// The cap reached.
    pub fn check(&self, now_ps: Tick, events: u64) -> Result<(), LimitReached> {
        if let Some(limit_ps) = self.max_sim_ps {
            if now_ps > limit_ps {
                return Err(LimitReached::SimTime {
                    limit_ps,
                    at_ps: now_ps,
                });
            }
        }
        if let Some(limit) = self.max_events {
            if events > limit {
                return Err(LimitReached::Events {
                    limit,
                    events,
                    at_ps: now_ps,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cap_stops_just_past_it_and_says_what_was_reached() {
        let l = Limits {
            max_sim_ps: Some(1_000_000),
            max_events: Some(10),
        };
        assert!(l.check(1_000_000, 10).is_ok());
        let e = l.check(1_000_001, 0).unwrap_err();
        assert!(matches!(
            e,
            LimitReached::SimTime {
                at_ps: 1_000_001,
                ..
            }
        ));
        assert!(e.to_string().contains("cap 0.001000 ms"), "{e}");
        let e = l.check(5, 11).unwrap_err();
        assert!(e.to_string().contains("11 events"), "{e}");
        assert!(Limits::default().check(u64::MAX, u64::MAX).is_ok());
    }
}
