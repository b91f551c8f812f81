//! Near-memory compute: the per-bank ALUs ([`alu`]) and, later, the per-channel engine
//! that expands macro-commands into DRAM commands.

pub mod alu;
