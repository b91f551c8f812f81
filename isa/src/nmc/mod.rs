//! Near-memory-compute ISA: the bank-ALU instruction word and the macro-command that a
//! per-channel NMC engine expands into DRAM commands.
//!
//! [`instr`] holds the instruction set itself, [`operand`] its operand types, [`encoding`]
//! the 32-bit word, [`cost`] the ALU cost model; everything is re-exported here, so
//! `nmcp_isa::nmc::X` names any of them.

pub mod cost;
pub mod encoded;
pub mod encoding;
pub mod instr;
pub mod macro_cmd;
pub mod operand;

pub use cost::*;
pub use encoded::*;
pub use encoding::*;
pub use instr::*;
pub use macro_cmd::*;
pub use operand::*;
