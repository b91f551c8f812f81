//! Firmware for a GPU command processor (CP) with near-memory compute (NMC) in HBM.
//!
//! The firmware is an event-driven state machine ([`Firmware::handle`]): the hardware (or
//! the emulator, or a board binary) delivers an [`Event`]; the handler runs to completion,
//! does bounded work, and reaches hardware only through the traits in [`platform`]. Calls
//! into the platform return a `Result` at once; their completions come back later as
//! events (Tock's split-phase style). Everything the firmware keeps is bounded at compile
//! time; overflow is an error, never a panic.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
#![warn(missing_docs)]

#[macro_use]
mod fmt;

pub mod cp;
pub mod event;
mod firmware;
pub mod nmc;
pub mod platform;
pub mod t3;

pub use event::Event;
pub use firmware::{Firmware, FirmwareError};
pub use platform::Platform;
