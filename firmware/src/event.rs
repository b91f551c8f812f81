//! Events the platform delivers. The bottom floor of the firmware: the CP, the NMC
//! sequencer and T3 all read it; the dispatcher that routes events to them lives at the
//! top, in [`crate::Firmware`].

use crate::platform::{DispatchError, DmaError, NmcError, NmcTicket};

/// Something the hardware reports to the CP. Each one is handled to completion.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Event {
    /// A producer rang the doorbell of `queue` (new packets may be visible).
    Doorbell {
        /// Queue index.
        queue: u8,
    },
    /// The dispatcher placed the last workgroup of a kernel: the queue head moved.
    KernelDispatched {
        /// Queue index.
        queue: u8,
        /// Dispatch id of the packet.
        dispatch_id: u64,
    },
    /// The last workgroup of a kernel finished.
    KernelCompleted {
        /// Queue index.
        queue: u8,
        /// Dispatch id of the packet.
        dispatch_id: u64,
        /// How it ended: `Err` when the dispatcher had to abort a kernel it had accepted
        /// (split-phase rule: an accepted call always completes, possibly with an error).
        status: Result<(), DispatchError>,
    },
    /// A macro-command finished on every channel it targeted.
    NmcDone {
        /// Ticket returned by `submit`.
        ticket: NmcTicket,
        /// How it ended: `Err` when an engine failed a command it had accepted.
        status: Result<(), NmcError>,
    },
    /// The host finished a cross-bank reduction requested with `reduce_partials`.
    PartialsReady {
        /// Ticket returned by `reduce_partials`.
        ticket: NmcTicket,
        /// The sum of every bank's accumulator (meaningful when `status` is `Ok`).
        sum: f32,
        /// How the read-out ended.
        status: Result<(), NmcError>,
    },
    /// A DMA transfer landed (or failed after it was accepted).
    DmaDone {
        /// DMA engine.
        engine: u8,
        /// Descriptor id.
        id: u16,
        /// How it ended.
        status: Result<(), DmaError>,
    },
    /// A tracker entry reached its threshold.
    TrackerFired {
        /// Tracker entry id.
        entry: u16,
    },
    /// Every WF tile of a tracked region completed and every DMA it derived landed; its
    /// slot is free again.
    RegionDone {
        /// The region's slot.
        slot: u8,
    },
    /// A deferred call: the platform re-invokes the firmware because a handler stopped at
    /// its work bound with work left (Tock's deferred call), not a periodic timer.
    Deferred,
}
