//! The measured suites the board runs: the CP decisions, the decision's parts alone, and
//! the LAMB steps.

pub mod cp;
pub mod lamb;
pub mod parts;
