//! The hardware model around the nmcp firmware.
//!
//! Modules follow the hardware: [`hbm`] (organisation, timing, address mapping, bank
//! state), [`memctrl`] (per-pseudo-channel controllers: requests with kind, class and
//! source, FR-FCFS, refresh, statistics), [`nmc`] (per-bank ALUs and the per-channel
//! macro-command engine that issues through the controller), [`memory`] (the bytes device
//! memory holds), [`trace`] (request sources), [`gpu`] (queues, dispatcher, GEMM model),
//! [`lamb`] (LAMB model, reference and ideal-GPU baseline). [`sim`] is the one time axis
//! and event queue; [`node`] is one GPU (firmware + hardware); [`system`] holds N nodes
//! and owns time. [`energy`] turns their counters into joules.
#![warn(missing_docs)]

pub mod energy;
pub mod gpu;
pub mod hbm;
pub mod lamb;
pub mod memctrl;
pub mod memory;
pub mod nmc;
pub mod node;
pub mod sim;
pub mod system;
pub mod t3;
pub mod timeline;
pub mod trace;
