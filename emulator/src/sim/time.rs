//! The time axis and clock domains.

/// A point on the one time axis, in picoseconds.
pub type Tick = u64;

/// Picoseconds per nanosecond.
pub const PS_PER_NS: u64 = 1_000;

/// A clock: converts its cycles to ticks and back without drift.
///
/// The conversion goes through the frequency in hertz with 128-bit intermediates, so a
/// 1.5 GHz clock (period 666.6 ps) places cycle 3 at exactly 2000 ps rather than
/// accumulating a rounded period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClockDomain {
    hz: u64,
}

impl ClockDomain {
    /// A clock of `hz` hertz (at least 1).
    pub const fn from_hz(hz: u64) -> Self {
        ClockDomain {
            hz: if hz == 0 { 1 } else { hz },
        }
    }

    /// A clock with a period of `ns` nanoseconds (e.g. a DRAM preset's tCK), rounded to
    /// the nearest hertz.
    pub fn from_period_ns(ns: f64) -> Self {
        let hz = if ns > 0.0 { (1e9 / ns).round() as u64 } else { 1 };
        Self::from_hz(hz)
    }

    /// The frequency.
    pub const fn hz(&self) -> u64 {
        self.hz
    }

    /// The tick at which cycle `c` of this clock begins (rounded up to a whole
    /// picosecond, so an event scheduled for a cycle never fires before it).
    #[inline]
    pub const fn tick_of(&self, c: u64) -> Tick {
        let num = c as u128 * 1_000_000_000_000u128;
        let hz = self.hz as u128;
        let t = num.div_ceil(hz);
        if t > u64::MAX as u128 {
            u64::MAX
        } else {
            t as u64
        }
    }

    /// The last cycle that has begun at tick `t` (rounded down).
    #[inline]
    pub const fn cycle_at(&self, t: Tick) -> u64 {
        let c = t as u128 * self.hz as u128 / 1_000_000_000_000u128;
        if c > u64::MAX as u128 {
            u64::MAX
        } else {
            c as u64
        }
    }

    /// The first cycle that begins at or after tick `t` (rounded up).
    #[inline]
    pub const fn cycle_at_or_after(&self, t: Tick) -> u64 {
        let c = (t as u128 * self.hz as u128).div_ceil(1_000_000_000_000u128);
        if c > u64::MAX as u128 {
            u64::MAX
        } else {
            c as u64
        }
    }

    /// Ticks that `cycles` cycles last (rounded up).
    #[inline]
    pub const fn ticks(&self, cycles: u64) -> Tick {
        self.tick_of(cycles)
    }
}

/// Nanoseconds (as the GPU model and reports use them) to ticks, rounded up so an event
/// is never delivered before the time the model computed for it.
#[inline]
pub fn ns_to_tick(ns: f64) -> Tick {
    if ns <= 0.0 {
        0
    } else {
        (ns * PS_PER_NS as f64).ceil() as Tick
    }
}

/// Ticks to nanoseconds for reports.
#[inline]
pub fn tick_to_ns(t: Tick) -> f64 {
    t as f64 / PS_PER_NS as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dram_clock_is_exact_at_one_ghz() {
        let c = ClockDomain::from_period_ns(1.0);
        assert_eq!(c.hz(), 1_000_000_000);
        assert_eq!(c.tick_of(31), 31_000);
        assert_eq!(c.cycle_at(31_999), 31);
        assert_eq!(c.cycle_at_or_after(31_001), 32);
    }

    #[test]
    fn cp_clock_does_not_drift() {
        let c = ClockDomain::from_hz(1_500_000_000);
        assert_eq!(c.tick_of(3), 2_000);
        assert_eq!(c.tick_of(1), 667, "rounded up: never early");
        assert_eq!(c.tick_of(3_000_000_000), 2_000_000_000_000);
        for k in [0u64, 1, 2, 7, 1_000_003] {
            assert_eq!(c.cycle_at(c.tick_of(k)), k);
            assert_eq!(c.cycle_at_or_after(c.tick_of(k)), k);
        }
    }

    #[test]
    fn nanoseconds_round_up() {
        assert_eq!(ns_to_tick(0.0), 0);
        assert_eq!(ns_to_tick(1.0), 1_000);
        assert_eq!(ns_to_tick(1.0001), 1_001);
        assert!((tick_to_ns(1_500) - 1.5).abs() < 1e-12);
    }
}
