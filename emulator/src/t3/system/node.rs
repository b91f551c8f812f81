//! One GPU: its memory system, the lanes of requests waiting for controller room, and
//! the state of its T3 parts (tracker, DMA table, output maps, producer, ring, values).

use std::collections::VecDeque;

use nmcp_firmware::Event;
use nmcp_isa::t3::OutputMap;

use super::blocks::Block;
use super::dma::DmaEngine;
use super::producer::Producer;
use super::regions::Regions;
use super::ring::Ring;
use super::tap::{Tapped, TrackerTap};
use super::values::NodeValues;
use crate::hbm::{AddressMapping, Cycle, HbmPreset};
use crate::memctrl::{
    Arbiter, ControllerConfig, MemCompletion, MemorySystem, Request, TrafficClass,
};
use crate::t3::tracker::Tracker;

/// Bytes per memory request.
pub(super) const REQ_BYTES: u64 = 64;

/// Counts of one GPU's DRAM traffic by kind (bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindBytes {
    /// Producer input reads.
    pub gemm_reads: u64,
    /// Producer plain output stores.
    pub gemm_writes: u64,
    /// Collective reads (ring kernels, DMA reads).
    pub rs_reads: u64,
    /// Collective plain writes.
    pub rs_writes: u64,
    /// Near-memory updates (producer stores and incoming).
    pub updates: u64,
    /// Tracker spill read-modify-writes.
    pub spill: u64,
}

/// One GPU.
#[derive(Debug)]
pub struct GpuNode {
    pub(super) index: u32,
    pub(super) mem: MemorySystem,
    pub(super) mapping: AddressMapping,
    pub(super) pending: Vec<VecDeque<(Request, u32)>>,
    /// Bit `l % 64` of word `l / 64` set when lane `l` of `pending` holds requests, so a
    /// fill visits only those (in lane order, as a walk over every lane would).
    pub(super) lanes_waiting: Vec<u64>,
    /// Per lane, the pseudo-channel whose full queue refused the lane's front request at
    /// its last try (`u32::MAX`: none). While that queue still has no room for one entry
    /// of the request's kind, a submit would be refused again (every placement needs at
    /// least one entry there, and a refused submit changes nothing), so it is not made:
    /// the retries decoded the address twice per lane per fill.
    pub(super) refused_by: Vec<u32>,
    pub(super) pending_total: usize,
    /// Of `pending_total`, the producer's (compute-class) requests: only these hold the
    /// producer back (communication reaches the controllers through the DMA engines'
    /// and links' own queues).
    pub(super) pending_compute: usize,
    /// Block of each request id still in flight (ids are dense from 0).
    pub(super) purpose: VecDeque<Option<u32>>,
    pub(super) purpose_base: u64,
    pub(super) blocks: Vec<Option<Block>>,
    pub(super) free_blocks: Vec<u32>,
    pub(super) tracker: Tracker,
    pub(super) tracking: bool,
    /// The DMA engines and their descriptor table.
    pub(super) dma: DmaEngine,
    /// The tracked regions' progress.
    pub(super) regions: Regions,
    pub(super) maps: Vec<OutputMap>,
    pub(super) dispatch_start: u32,
    pub(super) producer: Option<Producer>,
    pub(super) ring: Option<Ring>,
    /// The arrays as values (functional runs).
    pub(super) values: NodeValues,
    pub(super) bytes: KindBytes,
    /// Time-summed requests in flight (accepted, not finished), for occupancy.
    pub(super) inflight: u64,
    pub(super) occupancy_sum: f64,
    pub(super) occupancy_cycles: f64,
    /// When the last of this GPU's expected tracker entries fired and its DMAs landed.
    pub(super) finished_at: Option<Cycle>,
    pub(super) fw_events: Vec<(Cycle, Event)>,
    /// Every tracker firing: (cycle, workgroup, wavefront, DMA id).
    pub(super) fire_log: Vec<(Cycle, u32, u8, u16)>,
    /// Whether the controllers were told the producer kernel ended (MCA then drains
    /// communication).
    pub(super) boundary_told: bool,
    /// Requests finished in the current slice.
    pub(super) done_buf: Vec<MemCompletion>,
    /// Columns with a source issued in the current slice.
    pub(super) tap_buf: Vec<Tapped>,
    /// Controllers due by the current slice's end (the ones whose taps are polled).
    pub(super) due_buf: Vec<usize>,
}

impl GpuNode {
    /// This GPU's tracker.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    pub(super) fn new(
        index: u32,
        preset: &HbmPreset,
        arbiter: &dyn Fn() -> Box<dyn Arbiter>,
    ) -> Result<Self, String> {
        let mapping = AddressMapping::parse(&preset.controller.mapping, preset)
            .map_err(|e| format!("{}: mapping: {e}", preset.name))?;
        let mut mem = MemorySystem::new(
            preset,
            mapping.clone(),
            ControllerConfig::from_preset(preset),
        );
        mem.set_arbiter(|_| arbiter());
        mem.set_observers(|_| Box::new(TrackerTap::default()));
        let pcs = preset.pseudo_channels() as usize;
        Ok(Self {
            index,
            mem,
            mapping,
            pending: vec![VecDeque::new(); 2 * pcs],
            lanes_waiting: vec![0; (2 * pcs).div_ceil(64)],
            refused_by: vec![u32::MAX; 2 * pcs],
            pending_total: 0,
            pending_compute: 0,
            purpose: VecDeque::new(),
            purpose_base: 0,
            blocks: Vec::new(),
            free_blocks: Vec::new(),
            tracker: Tracker::default(),
            tracking: false,
            dma: DmaEngine::default(),
            regions: Regions::default(),
            maps: Vec::new(),
            dispatch_start: 0,
            producer: None,
            ring: None,
            values: NodeValues::default(),
            bytes: KindBytes::default(),
            inflight: 0,
            occupancy_sum: 0.0,
            occupancy_cycles: 0.0,
            finished_at: None,
            fw_events: Vec::new(),
            fire_log: Vec::new(),
            boundary_told: false,
            done_buf: Vec::new(),
            tap_buf: Vec::new(),
            due_buf: Vec::new(),
        })
    }

    pub(super) fn new_block(&mut self, b: Block) -> u32 {
        if let Some(i) = self.free_blocks.pop() {
            self.blocks[i as usize] = Some(b);
            i
        } else {
            self.blocks.push(Some(b));
            (self.blocks.len() - 1) as u32
        }
    }

    /// Queues a request for controller room.
    pub(super) fn push_request(&mut self, req: Request, block: u32) {
        // The first column the request touches (a 32 B request may be a block's second).
        let a = self.mapping.decode(req.addr & !(REQ_BYTES / 2 - 1));
        let pc = self.mapping.pseudo_channel_index(&a);
        let lane = 2 * pc + usize::from(req.class != TrafficClass::Compute);
        if let Some(q) = self.pending.get_mut(lane) {
            q.push_back((req, block));
            if let Some(w) = self.lanes_waiting.get_mut(lane / 64) {
                *w |= 1u64 << (lane % 64);
            }
            self.pending_total += 1;
            if req.class == TrafficClass::Compute {
                self.pending_compute += 1;
            }
        }
    }

    /// The part of a slice that touches only this GPU: queue waiting requests, run the
    /// memory to `end`, collect finished requests and the tracker taps' columns.
    pub(super) fn advance_memory(&mut self, end: Cycle) {
        self.fill();
        self.done_buf.clear();
        // Only controllers due by `end` are stepped (a controller's wake moves later only
        // when it is stepped), so only their taps can hold columns: the others were
        // emptied when they last stepped. Polling 64 boxed observers per GPU every slice
        // cost more than the columns they held.
        self.due_buf.clear();
        self.due_buf.extend(
            self.mem
                .wakes()
                .iter()
                .enumerate()
                .filter(|&(_, &w)| w <= end)
                .map(|(i, _)| i),
        );
        self.mem.advance_until(end, &mut self.done_buf);
        let ctrls = self.mem.controllers_mut();
        for &i in &self.due_buf {
            if let Some(t) = ctrls
                .get_mut(i)
                .and_then(|c| c.observer_as_mut::<TrackerTap>())
            {
                self.tap_buf.append(&mut t.issued);
            }
        }
    }

    /// Moves waiting requests into controller queues while they have room: per
    /// pseudo-channel, the producer's lane first, then communication's (separate ingress
    /// queues, so neither blocks the other's head).
    pub(super) fn fill(&mut self) {
        if self.pending_total == 0 {
            return;
        }
        for word in 0..self.lanes_waiting.len() {
            let mut bits = self.lanes_waiting[word];
            while bits != 0 {
                let pc = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.fill_lane(pc);
                if self.pending[pc].is_empty() {
                    self.lanes_waiting[word] &= !(1u64 << (pc % 64));
                }
            }
        }
    }

    /// Submits lane `pc`'s waiting requests, oldest first, until one meets a full queue.
    #[inline]
    fn fill_lane(&mut self, pc: usize) {
        while let Some(&(req, block)) = self.pending[pc].front() {
            if let Some(by) = self.refused_by.get_mut(pc) {
                if *by != u32::MAX {
                    let full = self
                        .mem
                        .controllers()
                        .get(*by as usize)
                        .is_none_or(|c| !c.has_room(req.access, 1));
                    if full {
                        break;
                    }
                    *by = u32::MAX;
                }
            }
            match self.mem.submit(&req) {
                Ok(id) => {
                    self.pending[pc].pop_front();
                    self.pending_total -= 1;
                    if req.class == TrafficClass::Compute {
                        self.pending_compute -= 1;
                    }
                    self.inflight += 1;
                    let off = (id.0 - self.purpose_base) as usize;
                    while self.purpose.len() <= off {
                        self.purpose.push_back(None);
                    }
                    self.purpose[off] = Some(block);
                }
                Err(refused) => {
                    if let Some(by) = self.refused_by.get_mut(pc) {
                        *by = u32::try_from(refused.pseudo_channel).unwrap_or(u32::MAX);
                    }
                    break;
                }
            }
        }
    }
}

/// Totals of one GPU after a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeTotals {
    /// DRAM bytes by kind.
    pub bytes: KindBytes,
    /// Producer finished (last store done), ns.
    pub gemm_done_ns: Option<f64>,
    /// Collective finished, ns.
    pub collective_done_ns: Option<f64>,
    /// Mean requests in flight per pseudo-channel while the producer ran.
    pub mean_occupancy: f64,
    /// Tracker figures.
    pub tracker: crate::t3::tracker::TrackerStats,
    /// Tracker entries left unprogrammed (should be 0).
    pub orphans: u64,
}
