//! T3 tracker entries and DMA descriptors. (Filled in by issue 2.)

/// Placeholder until the descriptor work lands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TrackerEntry {}

/// Placeholder until the descriptor work lands.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DmaDescriptor {}
