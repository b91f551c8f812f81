//! The hardware model around the nmcp firmware.
//!
//! Modules follow the hardware: [`hbm`] (organisation, timing, address mapping, bank
//! state), [`memctrl`] (per-pseudo-channel controllers: queues, FR-FCFS, refresh,
//! statistics), [`nmc`] (per-bank ALUs and the per-channel macro-command engine),
//! [`memory`] (the bytes device memory holds), [`trace`] (request sources), [`gpu`] (GPU
//! host, GEMM model), [`lamb`] (LAMB model, reference and ideal-GPU baseline).
#![warn(missing_docs)]

pub mod gpu;
pub mod hbm;
pub mod lamb;
pub mod memctrl;
pub mod memory;
pub mod nmc;
pub mod sim;
pub mod trace;
