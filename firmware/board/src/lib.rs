//! The firmware on a RISC-V board: canned scenarios fed through an in-RAM platform, each
//! firmware operation measured and reported as one text line.
//!
//! This library is target-independent so the host can test it (`cargo test -p
//! nmcp-board` runs the same scenarios on x86 and checks the functional fields against
//! the committed QEMU output); `src/main.rs` adds the RISC-V pieces: `mcycle`/`minstret`,
//! a GPIO pin around every measured region, semihosting output and exit.
//!
//! The crate's rooms: [`report`] (the line format, the [`Meter`], [`RunError`]),
//! [`layout`] (a CP scenario blob laid out as it is decoded), [`suite`] (the measured
//! CP, parts and LAMB suites), [`board`] (the platform over a RAM window) and
//! [`scenario`] (the canned scenarios). Its tests are in `firmware/board/tests/`.
//!
//! Report lines are `name key=value ...`. The keys in [`MEASURED_KEYS`] are measurements
//! (present only when a [`Meter`] measured); every other field is a functional result that
//! must be the same on every machine.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    test,
    allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]
#![warn(missing_docs)]

pub mod board;
pub mod layout;
pub mod report;
pub mod scenario;
pub mod suite;

use core::fmt::Write;

use nmcp_firmware::Firmware;

pub use board::{
    Board, BoardStats, LayoutError, BACKED_WINDOW_BYTES, BOARD_QUEUES, DEVICE_BASE,
    LAMB_WINDOW_BYTES, WINDOW_BYTES,
};
pub use report::{Measured, Meter, NoMeter, RunError, MAX_LAMB_EVENTS, MEASURED_KEYS};
pub use suite::cp::run_cp;
pub use suite::lamb::{report_stack, run_lamb, run_lamb_suite};
pub use suite::parts::{run_decide, run_parts};
pub use suite::t3::{run_t3, T3_GEMM};

/// The scenario blobs a run decodes.
#[derive(Debug, Clone, Copy)]
pub struct Blobs<'a> {
    /// A postcard-encoded [`scenario::CpScenario`].
    pub cp: &'a [u8],
    /// A postcard-encoded one-tensor [`LambScenario`].
    pub lamb_1t: &'a [u8],
    /// A postcard-encoded four-tensor [`LambScenario`].
    pub lamb_4t: &'a [u8],
    /// The further LAMB scenarios of [`scenario::lamb_scenarios`] after the first two
    /// (8 tensors, 4 without weight decay, 4 with the three-slot program), in that order;
    /// fewer (or none) simply skips the rest.
    pub lamb_more: &'a [&'a [u8]],
}

/// Runs every scenario and writes the report lines.
///
/// # Errors
/// [`RunError`] if a scenario does not decode or fit, or the firmware fails.
pub fn run_all(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blobs: &Blobs<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    run_small(fw, board, meter, blobs, out)?;
    // Last: board-side benchmarks of the decision's parts (their candidates sit on the
    // stack, so they do not count towards the firmware's stack peak above).
    run_parts(board, meter, blobs.cp, out)?;
    run_decide(board, meter, blobs.cp, out)?;
    Ok(())
}

/// What a board with 16 KiB of RAM runs: the CP decisions and the LAMB suite (not the
/// parts benchmarks, whose candidates and configuration sit on the stack).
///
/// # Errors
/// [`RunError`] if a scenario does not decode or fit, or the firmware fails.
pub fn run_small(
    fw: &mut Firmware,
    board: &mut Board<'_>,
    meter: &mut impl Meter,
    blobs: &Blobs<'_>,
    out: &mut impl Write,
) -> Result<(), RunError> {
    run_cp(fw, board, meter, blobs.cp, out)?;
    run_lamb_suite(&mut fw.nmc, board, meter, blobs, out)?;
    run_t3(&mut fw.t3, board, meter, out)?;
    report_stack(meter, out)
}
