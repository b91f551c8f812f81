//! Near-memory compute: the per-bank ALUs ([`alu`]), the per-pseudo-channel engine that
//! expands macro-commands into DRAM commands ([`engine`]), and a memory system in NMC
//! mode that runs the firmware ([`system`]).

pub mod alu;
pub mod engine;
mod policy;
mod script;
mod stats;
pub mod system;
