//! The T3 programmer: turns a [`T3Job`] into output maps, tracker entries and DMA
//! descriptors, lazily (docs/decisions/t3-firmware.md).
//!
//! - [`T3Programmer::start`] maps every stage's output (one `map_output` each), sets the
//!   producer's dispatch start to stage 1's chunk, and programs the first tracked stage.
//! - Two tracked stages are *live* at a time, `lo` and `hi` (consecutive). `lo` is
//!   programmed in full; `hi` gets one entry per entry of `lo` that fired (in WF-index
//!   order), and the rest once `lo` is complete. When every entry of `lo` fired and every
//!   DMA it programmed reported `DmaDone`, `hi` becomes `lo` and the next tracked stage
//!   becomes `hi`. The tracker allocates on a miss and merges on programming, so an entry
//!   programmed late loses nothing.
//! - Ids: entry id = `parity * 0x8000 + WF index in the chunk` (`parity` = the tracked
//!   stage's ordinal mod 2, so the two live stages never share an id); a DMA descriptor's
//!   id is the id of the entry of its block's first WF tile.
//! - Bounded work: at most [`MAX_RECORDS_PER_EVENT`] records per call; with work left,
//!   [`T3Programmer::has_pending_work`] asks the platform for an `Event::Deferred`.
//! - A full tracker set or DMA table keeps the record pending; it is retried on the next
//!   event (never dropped, never skipped).

use core::fmt;

use nmcp_isa::t3::{peer_address, DmaDescriptor, DmaTrigger, TrackerEntry, TRACKER_NO_DMA};

use super::geometry::{Rect, T3Geometry, T3Job, T3JobError};
use super::plan::{first_tracked_stage, stage_plan, Track};
use crate::platform::{DmaController, DmaError, MapError, TrackerController, TrackerError};
use crate::{Event, Platform};

/// Records (tracker entries, DMA descriptors) programmed per event at most; output maps
/// at `start` are not bounded by it (one per stage, at most 64).
pub const MAX_RECORDS_PER_EVENT: u32 = 64;
/// DMA engines the programmer spreads descriptors over, round-robin.
pub const DMA_ENGINES: u8 = 4;
/// Id offset of odd tracked stages.
const HALF: u16 = 0x8000;

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
    /// `TrackerFired` for an entry no live stage holds (or one more firing than it has).
    UnknownEntry(u16),
    /// `DmaDone` for a descriptor no live stage programmed.
    UnknownDma(u16),
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
            Self::Internal => f.write_str("T3 geometry inconsistency"),
        }
    }
}

impl core::error::Error for T3Fault {}

/// Work counters for charging the firmware's time (like `SequencerWork`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct T3Work {
    /// Records programmed: output maps, the dispatch start, tracker entries, DMA
    /// descriptors (attempts refused with a full table count too).
    pub records: u32,
    /// T3 events handled (`TrackerFired`, `DmaDone`, `Deferred` while running).
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

/// One live tracked stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Live {
    stage: u8,
    track: Track,
    wg_first: u32,
    /// Id offset: 0 or [`HALF`].
    parity: u16,
    /// Non-empty WF tiles (entries to program).
    count: u32,
    /// WF indices in the chunk (`wg_count * wfs`).
    indices: u32,
    /// Next WF index to program.
    cursor: u32,
    /// Where the cursor is, kept incrementally (no division per record).
    at: Walk,
    /// The DMA of the cursor's block is programmed; its entry is not yet.
    dma_placed: bool,
    programmed: u32,
    fired: u32,
    dmas: u32,
    dmas_done: u32,
}

impl Live {
    fn new(g: &T3Geometry, stage: u8) -> Result<Option<Self>, T3Fault> {
        let j = g.job();
        if stage > j.gpus {
            return Ok(None);
        }
        let plan = stage_plan(g, stage).ok_or(T3Fault::Internal)?;
        let track = plan.track.ok_or(T3Fault::Internal)?;
        let (wg_first, wg_count) = g.chunk_wgs(plan.chunk).ok_or(T3Fault::Internal)?;
        let (tr0, tc0, width) = g.chunk_tile_box(plan.chunk).ok_or(T3Fault::Internal)?;
        let ordinal = stage.saturating_sub(first_tracked_stage(j.collective, j.gpus));
        Ok(Some(Self {
            stage,
            track,
            wg_first,
            parity: if ordinal % 2 == 1 { HALF } else { 0 },
            count: g.chunk_wf_tiles(plan.chunk).ok_or(T3Fault::Internal)?,
            indices: wg_count
                .checked_mul(u32::from(j.wfs_per_wg))
                .ok_or(T3Fault::Internal)?,
            cursor: 0,
            at: Walk {
                wg: wg_first,
                wf: 0,
                tr: tr0,
                tc: tc0,
                tc0,
                tc_end: tc0.checked_add(width).ok_or(T3Fault::Internal)?,
                tile: g.tile_rect(tr0, tc0),
            },
            dma_placed: false,
            programmed: 0,
            fired: 0,
            dmas: 0,
            dmas_done: 0,
        }))
    }

    fn complete(&self) -> bool {
        self.programmed == self.count && self.fired == self.count && self.dmas_done == self.dmas
    }

    /// Moves the cursor to the next WF index (the next WF of the workgroup, or the first
    /// WF of the next tile of the chunk's box, row-major).
    fn step(&mut self, g: &T3Geometry) {
        self.cursor += 1;
        let a = &mut self.at;
        a.wf += 1;
        if a.wf < g.job().wfs_per_wg {
            return;
        }
        a.wf = 0;
        a.wg = a.wg.saturating_add(1);
        a.tc += 1;
        if a.tc >= a.tc_end {
            a.tc = a.tc0;
            a.tr = a.tr.saturating_add(1);
        }
        a.tile = g.tile_rect(a.tr, a.tc);
    }
}

/// The cursor's workgroup, WF and tile, walked with running indices: WG ids are
/// row-major over the chunk's box of tiles (docs/decisions/t3-firmware.md, "Cost").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
struct Walk {
    wg: u32,
    wf: u8,
    tr: u32,
    tc: u32,
    /// The box's first and past-the-last tile column.
    tc0: u32,
    tc_end: u32,
    /// The workgroup's tile, clipped to the array.
    tile: Rect,
}

/// What one programming step did.
enum Step {
    /// A record went to the hardware.
    Programmed,
    /// An empty WF tile was passed over.
    Skipped,
    /// A full set or table: wait for an event.
    Blocked,
}

/// The T3 state machine. No allocation; its size does not depend on the job.
#[derive(Debug, Default)]
pub struct T3Programmer {
    geom: Option<T3Geometry>,
    state: T3State,
    lo: Option<Live>,
    hi: Option<Live>,
    next_engine: u8,
    /// Stopped at the work bound with work left.
    pending: bool,
    /// Waiting for a full tracker set or DMA table to drain.
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

    /// DMAs that completed with an error status.
    pub fn dma_errors(&self) -> u32 {
        self.dma_errors
    }

    /// Work done so far (cumulative over jobs).
    pub fn work(&self) -> T3Work {
        self.work
    }

    /// The last handler stopped at [`MAX_RECORDS_PER_EVENT`] with records left: deliver
    /// an `Event::Deferred`.
    pub fn has_pending_work(&self) -> bool {
        self.state == T3State::Running && self.pending
    }

    /// Waiting for a full tracker set or DMA table (retried on the next T3 event).
    pub fn is_blocked(&self) -> bool {
        self.state == T3State::Running && self.blocked
    }

    /// The tracked stages being programmed: `(lo, hi)` stage numbers.
    pub fn live_stages(&self) -> (Option<u8>, Option<u8>) {
        (
            self.lo.as_ref().map(|l| l.stage),
            self.hi.as_ref().map(|l| l.stage),
        )
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
    /// first tracked stage (up to the work bound).
    ///
    /// # Errors
    /// [`T3Fault::Busy`] while a job runs; [`T3Fault::Job`]; platform refusals
    /// ([`T3Fault::Map`], [`T3Fault::Tracker`], [`T3Fault::Dma`]), after which the
    /// programmer is `Failed`.
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
        let first = first_tracked_stage(j.collective, j.gpus);
        self.lo = Live::new(g, first)?;
        self.hi = Live::new(g, first.saturating_add(1))?;
        debug!("T3 started: {} GPUs, rank {}", j.gpus, j.rank);
        self.pump(p)
    }

    /// Routes a T3 event (`TrackerFired`, `DmaDone`, `Deferred`); others are ignored, as
    /// are T3 events while no job runs.
    ///
    /// # Errors
    /// [`T3Fault::DmaFailed`], [`T3Fault::UnknownEntry`], [`T3Fault::UnknownDma`] and
    /// platform refusals; the programmer is then `Failed`.
    pub fn on_event<P: Platform>(&mut self, event: &Event, p: &mut P) -> Result<(), T3Fault> {
        if self.state != T3State::Running {
            return Ok(());
        }
        let r = match *event {
            Event::TrackerFired { entry } => self.count_event().on_fired(entry, p),
            Event::DmaDone { id, status, .. } => self.count_event().on_dma_done(id, status, p),
            Event::Deferred => self.count_event().pump(p),
            _ => Ok(()),
        };
        r.map_err(|f| self.fail(f))
    }

    fn count_event(&mut self) -> &mut Self {
        self.work.events = self.work.events.saturating_add(1);
        self
    }

    /// The live stage whose ids carry `id`'s parity.
    fn live_of(&mut self, id: u16) -> Option<&mut Live> {
        let parity = id & HALF;
        if self.lo.as_ref().is_some_and(|l| l.parity == parity) {
            self.lo.as_mut()
        } else if self.hi.as_ref().is_some_and(|l| l.parity == parity) {
            self.hi.as_mut()
        } else {
            None
        }
    }

    fn on_fired<P: Platform>(&mut self, entry: u16, p: &mut P) -> Result<(), T3Fault> {
        let live = self
            .live_of(entry)
            .filter(|l| u32::from(entry & !HALF) < l.indices && l.fired < l.programmed)
            .ok_or(T3Fault::UnknownEntry(entry))?;
        live.fired += 1;
        trace!("T3 entry {} fired", entry);
        self.advance()?;
        self.pump(p)
    }

    fn on_dma_done<P: Platform>(
        &mut self,
        id: u16,
        status: Result<(), DmaError>,
        p: &mut P,
    ) -> Result<(), T3Fault> {
        if let Err(error) = status {
            self.dma_errors = self.dma_errors.saturating_add(1);
            return Err(T3Fault::DmaFailed { id, error });
        }
        let live = self
            .live_of(id)
            .filter(|l| l.dmas_done < l.dmas)
            .ok_or(T3Fault::UnknownDma(id))?;
        live.dmas_done += 1;
        self.advance()?;
        self.pump(p)
    }

    /// Moves the window past every complete `lo`.
    fn advance(&mut self) -> Result<(), T3Fault> {
        // By reference: a live stage is not copied per event.
        while let Some(done) = self.lo.as_ref().filter(|l| l.complete()).map(|l| l.stage) {
            let g = self.geom.as_ref().ok_or(T3Fault::Internal)?;
            self.lo = self.hi.take();
            self.hi = match self.lo.as_ref() {
                Some(l) => Live::new(g, l.stage.saturating_add(1))?,
                None => None,
            };
            debug!("T3 stage {} complete", done);
        }
        if self.lo.is_none() {
            self.state = T3State::Done;
            self.pending = false;
            debug!("T3 done");
        }
        Ok(())
    }

    /// Programs records until the work bound, a full table, or nothing is due.
    fn pump<P: Platform>(&mut self, p: &mut P) -> Result<(), T3Fault> {
        self.pending = false;
        self.blocked = false;
        if self.state != T3State::Running {
            return Ok(());
        }
        // Disjoint borrows: the live stage is programmed in place, not copied.
        let Self {
            geom,
            lo,
            hi,
            next_engine,
            work,
            pending,
            blocked,
            ..
        } = self;
        let g = geom.as_ref().ok_or(T3Fault::Internal)?;
        let mut budget = MAX_RECORDS_PER_EVENT;
        loop {
            // lo is always due in full; hi one entry per lo firing, in full once lo is.
            let lo_due = lo.as_ref().is_some_and(|l| l.cursor < l.indices);
            let hi_credit = match lo.as_ref() {
                Some(l) if l.fired == l.count => u32::MAX,
                Some(l) => l.fired,
                None => 0,
            };
            let hi_due = hi
                .as_ref()
                .is_some_and(|h| h.cursor < h.indices && h.programmed < hi_credit);
            let live = match (lo_due, hi_due) {
                (true, _) => lo.as_mut(),
                (false, true) => hi.as_mut(),
                (false, false) => return Ok(()),
            };
            let Some(live) = live else {
                return Err(T3Fault::Internal);
            };
            if budget == 0 {
                *pending = true;
                return Ok(());
            }
            budget -= 1;
            match program_one(g, live, next_engine, work, p)? {
                Step::Programmed | Step::Skipped => {}
                Step::Blocked => {
                    *blocked = true;
                    return Ok(());
                }
            }
        }
    }
}

/// Programs the next record of `l`: its block's DMA descriptor (before the block's first
/// entry), or the entry at the cursor.
fn program_one<P: Platform>(
    g: &T3Geometry,
    l: &mut Live,
    next_engine: &mut u8,
    work: &mut T3Work,
    p: &mut P,
) -> Result<Step, T3Fault> {
    let j = g.job();
    let idx = l.cursor;
    let (wg, wf) = (l.at.wg, l.at.wf);
    let tile = l.at.tile;
    let rect = g.bands_of(&tile, wf, 1);
    if rect.is_empty() {
        l.step(g);
        return Ok(Step::Skipped);
    }
    let id16 = |i: u32| {
        u16::try_from(i)
            .map(|i| i | l.parity)
            .map_err(|_| T3Fault::Internal)
    };
    let id = id16(idx)?;
    let block = j.wf_tiles_per_dma_block;
    let block_first = wf - wf.checked_rem(block).ok_or(T3Fault::Internal)?;
    let dma_id = match l.track.dma {
        None => TRACKER_NO_DMA,
        Some(target) => {
            let block_id = id16(idx - u32::from(wf - block_first))?;
            // The block's DMA goes in before its first non-empty WF tile's entry; its id
            // is that of the block's first WF index (unique even when that tile is empty).
            let first_nonempty = g.nonempty_bands(&tile, block_first, wf - block_first) == 0;
            if first_nonempty && !l.dma_placed {
                let b = g.bands_of(&tile, block_first, block);
                let src = g.address(b.row0, b.col0);
                let desc = DmaDescriptor {
                    id: block_id,
                    op: target.op,
                    trigger: DmaTrigger::Tracker(block_id),
                    fires: g.nonempty_bands(&tile, block_first, block),
                    src,
                    dst: peer_address(target.peer, src),
                    rows: u16::try_from(b.rows).map_err(|_| T3Fault::Internal)?,
                    cols: u16::try_from(b.cols).map_err(|_| T3Fault::Internal)?,
                    ld_bytes: g.ld_bytes(),
                    elem_bytes: u8::try_from(g.elem_bytes()).map_err(|_| T3Fault::Internal)?,
                    dst_wg_id: wg,
                    dst_wf_id: block_first,
                };
                work.records = work.records.saturating_add(1);
                let engine = *next_engine;
                match DmaController::program(p, engine, &desc) {
                    Ok(()) => {
                        *next_engine = (engine + 1) % DMA_ENGINES;
                        l.dma_placed = true;
                        l.dmas += 1;
                        return Ok(Step::Programmed);
                    }
                    Err(DmaError::TableFull) => return Ok(Step::Blocked),
                    Err(e) => return Err(T3Fault::Dma(e)),
                }
            }
            block_id
        }
    };
    let threshold = T3Geometry::elements(&rect)
        .checked_mul(u64::from(l.track.updates_per_element))
        .and_then(|t| u32::try_from(t).ok())
        .ok_or(T3Fault::Internal)?;
    let entry = TrackerEntry {
        id,
        wg_id: wg,
        wf_id: wf,
        start_address: g.address(rect.row0, rect.col0),
        threshold,
        dma_id,
    };
    work.records = work.records.saturating_add(1);
    match TrackerController::program(p, &entry) {
        Ok(()) => {
            l.step(g);
            l.programmed += 1;
            l.dma_placed = false;
            Ok(Step::Programmed)
        }
        Err(TrackerError::SetFull) => Ok(Step::Blocked),
        Err(e) => Err(T3Fault::Tracker(e)),
    }
}
