//! NMC macro-command. (Filled in by the ISA work of issue 2.)

/// Placeholder until the ISA work lands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MacroCommand {}
