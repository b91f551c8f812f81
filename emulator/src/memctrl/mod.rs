//! The memory system: one [`Controller`] per pseudo-channel behind an address mapping, a
//! front end that accepts requests with arrival cycles and applies back-pressure, and the
//! engine loop that runs a request stream to drain.
//!
//! # Requests
//! A [`Request`] says what it does ([`Access`]: read, write, near-memory update), which
//! traffic it belongs to ([`TrafficClass`]) and who sent it ([`Source`]). Controllers
//! arbitrate between classes through an [`Arbiter`] (default: class-blind FR-FCFS) and
//! report issued column commands to an attached [`ControllerObserver`]. Statistics count
//! bytes and requests by access kind and class.
//!
//! # Stepping
//! [`MemorySystem::submit`] offers a request at the current cycle (or refuses it with
//! [`Backpressure`]); [`MemorySystem::next_wake`] says when anything next happens;
//! [`MemorySystem::advance_until`] runs up to a cycle and hands back each finished request
//! as a [`MemCompletion`]. The same protocol on the common time axis is
//! [`Component`] (ticks converted through the preset's tCK). [`MemorySystem::run`] is a
//! driver over these calls for a whole request stream.
//!
//! # Engine
//! Discrete-event over cycles: each controller reports the next cycle at which it can do
//! anything, and the loop jumps straight to the earliest of those and of the next arrival.
//! A streaming run is busy nearly every cycle, so this costs no more than cycle stepping;
//! random traffic, refresh and long gates (tRFC, tRC) leave many idle cycles that are
//! skipped. The per-request path allocates nothing: request slots come from a free list
//! sized to what the queues can hold, and queue entries are 32-byte values in per-bank
//! vectors that keep their capacity.

pub mod arbiter;
pub mod controller;
pub mod observer;
mod parallel;
mod pending;
pub mod refresh;
mod report;
pub mod request;
mod run;
pub mod scheduler;
mod state;
pub mod stats;
mod system;

pub use arbiter::{Arbiter, ArbiterView, ClassSet, FrFcfs, Grant, Issued, Mca, RoundRobin};
pub use controller::{
    Completion, Controller, ControllerConfig, ControllerState, LoggedCommand, RequestPart,
};
pub use observer::{ColumnLog, ControllerObserver, IssuedColumn};
pub use parallel::{Stepping, MIN_PARALLEL_WINDOW};
pub use report::RunReport;
pub use request::{Access, Request, RequestId, Source, TrafficClass};
pub use state::MemoryState;
pub use stats::{ByKindClass, LogHistogram, Occupancy, RowClass};
pub use system::{Backpressure, MemCompletion, MemorySystem};
