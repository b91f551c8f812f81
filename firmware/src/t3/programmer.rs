//! The T3 programmer: turns a [`T3Job`] into output maps and one tracked region per
//! tracked stage (docs/decisions/t3-firmware.md). The tracker and the DMA engine derive
//! every WF tile's entry and every block's DMA from the region (dissertation 8.3.4's
//! pre-programmed `dma_map`), so the firmware's work is per stage, not per tile.
//!
//! - [`T3Programmer::start`] maps every stage's output (one `map_output` each), sets the
//!   producer's dispatch start to stage 1's chunk, and programs the tracked stages' regions
//!   in stage order into the free slots (at most [`REGION_SLOTS`] live).
//! - Each `RegionDone` frees its slot and programs the next stage's region if one is
//!   left; when every tracked stage's region completed the job is `Done`.
//! - Bounded work: at most [`MAX_RECORDS_PER_EVENT`] regions per call; with work left,
//!   [`T3Programmer::has_pending_work`] asks the platform for an `Event::Deferred`.
//! - A live slot refused (`SetFull`) keeps the region pending; it is retried on the next
//!   event (never dropped, never skipped).

use core::fmt;

use nmcp_isa::t3::REGION_SLOTS;

use super::geometry::{T3Geometry, T3Job, T3JobError};
use super::plan::{first_tracked_stage, stage_plan, stage_region};
use crate::platform::{DmaError, MapError, TrackerController, TrackerError};
use crate::{Event, Platform};

/// Records (regions) programmed per event at most; output maps at `start` are not
/// bounded by it (one per stage, at most 64).
pub const MAX_RECORDS_PER_EVENT: u32 = 64;
/// DMA engines of a T3 GPU (the hardware spreads a region's blocks over them).
pub const DMA_ENGINES: u8 = 4;

/// Why T3 programming stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum T3Fault {
    /// The job is not runnable.
    Job(T3JobError),
    /// A job is already running.
    Busy,
    /// The platform refused an output map.
    Map(MapError),
    /// The tracker refused an entry (other than a full set, which is retried).
    Tracker(TrackerError),
    /// A DMA engine refused a descriptor (other than a full table, which is retried).
    Dma(DmaError),
    /// A DMA the engine had accepted failed.
    DmaFailed {
        /// Descriptor id.
        id: u16,
        /// The error.
        error: DmaError,
    },
    /// `TrackerFired` for an entry: the programmer programs regions, never entries.
    UnknownEntry(u16),
    /// `DmaDone` for a descriptor: region DMAs report through their region.
    UnknownDma(u16),
    /// `RegionDone` for a slot that holds no live region.
    UnknownRegion(u8),
    /// A geometry value the validated job guarantees was missing (a firmware bug).
    Internal,
}

impl fmt::Display for T3Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Job(e) => write!(f, "T3 job: {e}"),
            Self::Busy => f.write_str("a T3 job is already running"),
            Self::Map(e) => write!(f, "output map: {e}"),
            Self::Tracker(e) => write!(f, "tracker: {e}"),
            Self::Dma(e) => write!(f, "DMA: {e}"),
            Self::DmaFailed { id, error } => write!(f, "DMA {id} failed: {error}"),
            Self::UnknownEntry(id) => write!(f, "tracker entry {id} fired unexpectedly"),
            Self::UnknownDma(id) => write!(f, "DMA {id} completed unexpectedly"),
            Self::UnknownRegion(s) => write!(f, "region slot {s} completed unexpectedly"),
            Self::Internal => f.write_str("T3 geometry inconsistency"),
        }
    }
}

impl core::error::Error for T3Fault {}

/// Work counters for charging the firmware's time (like `SequencerWork`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct T3Work {
    /// Records programmed: output maps, the dispatch start, regions (attempts refused
    /// with a live slot count too).
    pub records: u32,
    /// T3 events handled (`RegionDone`, `Deferred` while running).
    pub events: u32,
}

/// Where the job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum T3State {
    /// No job.
    #[default]
    Idle,
    /// Programming and tracking.
    Running,
    /// The final chunk is complete and every DMA landed.
    Done,
    /// Stopped by a fault.
    Failed(T3Fault),
}

/// The T3 state machine. No allocation; its size does not depend on the job.
#[derive(Debug, Default)]
pub struct T3Programmer {
    geom: Option<T3Geometry>,
    state: T3State,
    /// The next tracked stage whose region is not programmed yet (`N + 1`: none left).
    next_stage: u8,
    /// Bit `s`: slot `s` holds a live region.
    live: u16,
    /// Stopped at the work bound with work left.
    pending: bool,
    /// Waiting for a slot the tracker still holds.
    blocked: bool,
    dma_errors: u32,
    work: T3Work,
}

impl T3Programmer {
    /// Where the job is.
    pub fn state(&self) -> T3State {
        self.state
    }

    /// The running (or last) job's geometry.
    pub fn geometry(&self) -> Option<&T3Geometry> {
        self.geom.as_ref()
    }

    /// Whether the final chunk is complete and every DMA landed.
    pub fn is_done(&self) -> bool {
        self.state == T3State::Done
    }

    /// The fault that stopped the job.
    pub fn fault(&self) -> Option<T3Fault> {
        match self.state {
            T3State::Failed(f) => Some(f),
            _ => None,
        }
    }

    /// DMAs that reported an error status.
    pub fn dma_errors(&self) -> u32 {
        self.dma_errors
    }

    /// Work done so far (cumulative over jobs).
    pub fn work(&self) -> T3Work {
        self.work
    }

    /// The last handler stopped at [`MAX_RECORDS_PER_EVENT`] with regions left: deliver
    /// an `Event::Deferred`.
    pub fn has_pending_work(&self) -> bool {
        self.state == T3State::Running && self.pending
    }

    /// Waiting for a live slot (retried on the next T3 event).
    pub fn is_blocked(&self) -> bool {
        self.state == T3State::Running && self.blocked
    }

    /// Slots holding a live region (bit `s` = slot `s`).
    pub fn live_slots(&self) -> u16 {
        self.live
    }

    /// Forgets the job (a running one's hardware state is left as is).
    pub fn reset(&mut self) {
        *self = Self {
            work: self.work,
            ..Self::default()
        };
    }

    fn fail(&mut self, f: T3Fault) -> T3Fault {
        warn!("T3 fault");
        self.state = T3State::Failed(f);
        f
    }

    /// Starts a job: maps every stage's output, sets the dispatch start, and programs the
    /// tracked stages' regions into the free slots (up to the work bound).
    ///
    /// # Errors
    /// [`T3Fault::Busy`] while a job runs; [`T3Fault::Job`]; platform refusals
    /// ([`T3Fault::Map`], [`T3Fault::Tracker`]), after which the programmer is `Failed`.
    pub fn start<P: Platform>(&mut self, job: &T3Job, p: &mut P) -> Result<(), T3Fault> {
        if self.state == T3State::Running {
            return Err(T3Fault::Busy);
        }
        let g = T3Geometry::new(job).map_err(T3Fault::Job)?;
        self.reset();
        self.geom = Some(g);
        self.state = T3State::Running;
        self.begin(&g, p).map_err(|f| self.fail(f))
    }

    fn begin<P: Platform>(&mut self, g: &T3Geometry, p: &mut P) -> Result<(), T3Fault> {
        let j = g.job();
        let mut first_wg = None;
        for k in 1..=j.gpus {
            let plan = stage_plan(g, k).ok_or(T3Fault::Internal)?;
            if let Some(map) = plan.map {
                self.work.records = self.work.records.saturating_add(1);
                p.map_output(&map).map_err(T3Fault::Map)?;
                first_wg = first_wg.or(Some(map.wg_first));
            }
        }
        self.work.records = self.work.records.saturating_add(1);
        p.set_dispatch_start(first_wg.ok_or(T3Fault::Internal)?)
            .map_err(T3Fault::Map)?;
        self.next_stage = first_tracked_stage(j.collective, j.gpus);
        debug!("T3 started: {} GPUs, rank {}", j.gpus, j.rank);
        self.pump(p)
    }

    /// Routes a T3 event (`RegionDone`, `Deferred`; `TrackerFired` and `DmaDone` are
    /// faults: the programmer never programs entries or descriptors); others are
    /// ignored, as are T3 events while no job runs.
    ///
    /// # Errors
    /// [`T3Fault::UnknownRegion`], [`T3Fault::UnknownEntry`], [`T3Fault::UnknownDma`],
    /// [`T3Fault::DmaFailed`] and platform refusals; the programmer is then `Failed`.
    pub fn on_event<P: Platform>(&mut self, event: &Event, p: &mut P) -> Result<(), T3Fault> {
        if self.state != T3State::Running {
            return Ok(());
        }
        let r = match *event {
            Event::RegionDone { slot } => self.count_event().on_region_done(slot, p),
            Event::Deferred => self.count_event().pump(p),
            Event::TrackerFired { entry } => Err(T3Fault::UnknownEntry(entry)),
            Event::DmaDone { id, status, .. } => match status {
                Err(error) => {
                    self.dma_errors = self.dma_errors.saturating_add(1);
                    Err(T3Fault::DmaFailed { id, error })
                }
                Ok(()) => Err(T3Fault::UnknownDma(id)),
            },
            _ => Ok(()),
        };
        r.map_err(|f| self.fail(f))
    }

    fn count_event(&mut self) -> &mut Self {
        self.work.events = self.work.events.saturating_add(1);
        self
    }

    fn on_region_done<P: Platform>(&mut self, slot: u8, p: &mut P) -> Result<(), T3Fault> {
        let bit = 1u16.checked_shl(u32::from(slot)).unwrap_or(0);
        if bit == 0 || self.live & bit == 0 {
            return Err(T3Fault::UnknownRegion(slot));
        }
        self.live &= !bit;
        debug!("T3 region {} complete", slot);
        self.pump(p)?;
        let gpus = self.geom.as_ref().ok_or(T3Fault::Internal)?.job().gpus;
        if self.live == 0 && self.next_stage > gpus {
            self.state = T3State::Done;
            self.pending = false;
            debug!("T3 done");
        }
        Ok(())
    }

    /// Programs the next stages' regions into free slots until the work bound, a live
    /// slot, or no stage is left.
    fn pump<P: Platform>(&mut self, p: &mut P) -> Result<(), T3Fault> {
        self.pending = false;
        self.blocked = false;
        if self.state != T3State::Running {
            return Ok(());
        }
        let g = *self.geom.as_ref().ok_or(T3Fault::Internal)?;
        let gpus = g.job().gpus;
        let mut budget = MAX_RECORDS_PER_EVENT;
        while self.next_stage <= gpus {
            let k = self.next_stage;
            if stage_plan(&g, k).and_then(|pl| pl.track).is_none() {
                // Every step after the first tracked one is tracked; skip defensively.
                self.next_stage = k.saturating_add(1);
                continue;
            }
            let free = !self.live & slot_mask();
            if free == 0 {
                return Ok(());
            }
            if budget == 0 {
                self.pending = true;
                return Ok(());
            }
            budget -= 1;
            let slot = u8::try_from(free.trailing_zeros()).map_err(|_| T3Fault::Internal)?;
            let region = stage_region(&g, k, slot).ok_or(T3Fault::Internal)?;
            self.work.records = self.work.records.saturating_add(1);
            match TrackerController::program_region(p, &region) {
                Ok(()) => {
                    self.live |= 1 << slot;
                    self.next_stage = k.saturating_add(1);
                    trace!("T3 stage {} in region {}", k, slot);
                }
                Err(TrackerError::SetFull) => {
                    self.blocked = true;
                    return Ok(());
                }
                Err(e) => return Err(T3Fault::Tracker(e)),
            }
        }
        Ok(())
    }
}

/// Bits of the slots the tracker has.
const fn slot_mask() -> u16 {
    match 1u16.checked_shl(REGION_SLOTS as u32) {
        Some(b) => b.wrapping_sub(1),
        None => u16::MAX,
    }
}
