//! The measured suites the board runs: the CP decisions, the decision's parts alone, the
//! LAMB steps and the T3 programming of one GEMM.

pub mod cp;
pub mod lamb;
pub mod parts;
pub mod t3;
