//! HBM2 at DRAM-command level: organisation and timing presets ([`config`]), the physical
//! address mapping ([`mapping`]), the command set and bank state ([`bank`]) and the timing
//! state of one pseudo-channel ([`timing`]: its gates, earliest cycles and issue path),
//! which ordinary requests, all-bank NMC commands and per-bank op-and-store updates all go through.

pub mod bank;
pub mod config;
pub mod mapping;
pub mod power_state;
pub mod timing;

pub use bank::{BankId, Command, CommandKind};
pub use config::{HbmPreset, PresetError};
pub use mapping::{AddressMapping, DramAddr, MappingError};
pub use timing::{Gate, PseudoChannel, SharedChannel, TimingError};

/// Time in DRAM clock cycles (tCK) since the start of a run.
pub type Cycle = u64;
