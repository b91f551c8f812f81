//! Near-memory-compute ISA: the bank-ALU instruction word and the macro-command that a
//! per-channel NMC engine expands into DRAM commands.

pub mod instr;
pub mod macro_cmd;

pub use instr::*;
pub use macro_cmd::*;
