//! The one event core every model runs on: one time axis ([`Tick`], picoseconds), clock
//! domains that convert their cycles to it exactly, one event queue with a deterministic
//! order for equal ticks, and the [`Component`] protocol (next wake-up, advance until)
//! that the memory system, the NMC engines, the GPU model and T3's DMA engines and links
//! implement.
//!
//! Why picoseconds: DRAM tCK (1 ns at 2 Gb/s HBM2), the CP clock (1.5 GHz = 666.6 ps), the
//! GPU clock (1.4 GHz) and a link's latency (500 ns) must be comparable without floating
//! point, so that two runs of one scenario order every event identically. A `u64` of
//! picoseconds spans 213 days of simulated time.

pub mod component;
pub mod limits;
pub mod queue;
pub mod time;

pub use component::Component;
pub use limits::{LimitReached, Limits};
pub use queue::{EventQueue, Scheduled};
pub use time::{ClockDomain, Tick, PS_PER_NS};
