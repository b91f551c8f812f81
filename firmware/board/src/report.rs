//! The report's format and the measurement interface: the [`Meter`] that measures a
//! region, what it measured ([`Measured`]), the keys that are measurements rather than
//! functional results, and why a run failed ([`RunError`]).

use core::fmt::{self, Write};

use nmcp_firmware::FirmwareError;

use crate::board::{LayoutError, BOARD_QUEUES};
use crate::scenario;

/// Field keys that carry measurements rather than functional results.
pub const MEASURED_KEYS: [&str; 5] = [
    "instructions",
    "cycles",
    "peak_bytes",
    "high_water_bytes",
    "startup_bytes",
];
/// Events one LAMB step may take before the board gives up (8 per tensor plus a few,
/// with margin).
pub const MAX_LAMB_EVENTS: usize = 64 * scenario::MAX_TENSORS;

/// Instructions and cycles of one measured region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Measured {
    /// Retired instructions (`minstret`).
    pub instructions: u64,
    /// Cycles (`mcycle`; equal to instructions under QEMU `-icount shift=0`).
    pub cycles: u64,
}

impl Measured {
    pub(crate) fn add(self, o: Self) -> Self {
        Self {
            instructions: self.instructions.saturating_add(o.instructions),
            cycles: self.cycles.saturating_add(o.cycles),
        }
    }
}

/// Measures regions of code. The host's meter measures nothing.
pub trait Meter {
    /// Starts a region (the board raises its GPIO pin first).
    fn start(&mut self);
    /// Ends the region started last; `None` when this meter cannot measure.
    fn stop(&mut self) -> Option<Measured>;
    /// Deepest stack use of any region so far, below its caller's frame, bytes; `None`
    /// when unknown.
    fn stack_peak(&mut self) -> Option<u64>;
    /// Deepest stack use since the firmware was initialised, measured from the top of
    /// the stack (every frame of the harness, layout and firmware included), bytes;
    /// `None` when unknown.
    fn stack_high_water(&mut self) -> Option<u64> {
        None
    }
    /// Deepest stack use of the start-up (the firmware's initialisation), measured from
    /// the top of the stack, bytes; `None` when unknown.
    fn stack_startup(&mut self) -> Option<u64> {
        None
    }
}

/// A meter that measures nothing (host runs).
#[derive(Debug, Default)]
pub struct NoMeter;

impl Meter for NoMeter {
    fn start(&mut self) {}
    fn stop(&mut self) -> Option<Measured> {
        None
    }
    fn stack_peak(&mut self) -> Option<u64> {
        None
    }
}

/// Why a board run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// A scenario blob did not decode.
    Decode(postcard::Error),
    /// A scenario does not fit the board.
    Layout(LayoutError),
    /// The firmware returned an error.
    Firmware(FirmwareError),
    /// The LAMB step did not finish within [`MAX_LAMB_EVENTS`] events.
    LambStuck,
    /// The T3 job was not done (or a DMA not complete) when the events ran out.
    T3Stuck,
    /// Writing a report line failed.
    Output,
    /// The CP wrote this many dispatch requests naming a queue the board does not have
    /// into the dispatcher's FIFO ([`BoardStats::stray_requests`]).
    StrayRequests(u32),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Decode(e) => write!(f, "scenario blob: {e}"),
            Self::Layout(e) => write!(f, "scenario layout: {e}"),
            Self::Firmware(e) => write!(f, "firmware: {e}"),
            Self::LambStuck => write!(f, "LAMB step not done after {MAX_LAMB_EVENTS} events"),
            Self::T3Stuck => write!(
                f,
                "T3 job not done after {} events",
                crate::suite::t3::MAX_T3_EVENTS
            ),
            Self::Output => f.write_str("report output failed"),
            Self::StrayRequests(n) => write!(
                f,
                "the CP pushed {n} dispatch request(s) naming no board queue (1..={BOARD_QUEUES})"
            ),
        }
    }
}

impl core::error::Error for RunError {}

impl From<FirmwareError> for RunError {
    fn from(e: FirmwareError) -> Self {
        Self::Firmware(e)
    }
}
impl From<LayoutError> for RunError {
    fn from(e: LayoutError) -> Self {
        Self::Layout(e)
    }
}
impl From<fmt::Error> for RunError {
    fn from(_: fmt::Error) -> Self {
        Self::Output
    }
}

/// Writes ` instructions=N cycles=N` when measured.
pub(crate) fn measured(out: &mut impl Write, m: Option<Measured>) -> fmt::Result {
    match m {
        Some(m) => write!(out, " instructions={} cycles={}", m.instructions, m.cycles),
        None => Ok(()),
    }
}

/// A writer that drops everything (the warm-up runs).
pub(crate) struct Discard;

impl Write for Discard {
    fn write_str(&mut self, _: &str) -> fmt::Result {
        Ok(())
    }
}
