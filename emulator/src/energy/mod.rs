//! Energy: joules from the counters the model already keeps. The hot paths only count
//! (commands per kind in each pseudo-channel, its active-standby time, bank precharges,
//! NMC ALU lane operations); this module turns counts into joules at report time, under a
//! preset's `[energy]` section (`params`): DRAM per command and state ([`dram`]), the GPU
//! per FLOP, per LLC byte and per second of static power ([`gpu`]), and the `energy`
//! object every `--json` report carries ([`report`]). [`drampower`] writes a command stream
//! in DRAMPower's trace format for cross-checking. Decisions: `docs/decisions/energy.md`.

pub mod dram;
pub mod drampower;
pub mod gpu;
pub mod params;
pub mod report;

pub use dram::{CommandEnergy, DramActivity, DramEnergy, StreamBytes};
pub use gpu::{GpuEnergy, GpuWork};
pub use params::EnergyParams;
pub use report::EnergyReport;
