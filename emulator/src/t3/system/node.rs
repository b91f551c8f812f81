//! One GPU: its memory system, the lanes of requests waiting for controller room, and
//! the state of its T3 parts (tracker, DMA table, output maps, producer, ring, values).

use std::collections::VecDeque;

use nmcp_firmware::Event;
use nmcp_isa::t3::OutputMap;

use super::blocks::Block;
use super::contention::{by_slot, Contention, ContentionCounters};
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

/// How a pseudo-channel's waiting requests (a compute lane and a communication lane)
/// enter its controller's read and write queues, which the classes share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Ingress {
    /// Oldest request first across both lanes (a lane whose front meets a full queue
    /// does not hold up the other): one front end that sees requests in the order they
    /// come, so a communication burst takes the queue slots it reaches first and the
    /// producer's later reads wait for room (dissertation 8.3.5: communication "can
    /// occupy DRAM queues, stalling the compute kernel's critical memory reads"). T3's
    /// arbitration (round-robin between the classes) starts only once requests are in
    /// the queues.
    Arrival,
    /// The producer's lane first, then communication's: compute has priority into the
    /// queues (`--compute-first-ingress`; the dissertation's T3 has no such priority).
    ComputeFirst,
    /// MCA's admission (8.3.5): compute first; a communication request enters a queue
    /// only while that queue holds fewer than `threshold` entries ("only issues
    /// communication-related accesses if occupancy is below a threshold", keeping room
    /// for the compute stream), or once it has waited `starvation` cycles, or after the
    /// producer kernel ended (the communication stream is drained at the boundary).
    Mca {
        /// Queue entries (all classes) below which communication enters.
        threshold: usize,
        /// Cycles a communication request may wait before it enters anyway.
        starvation: Cycle,
    },
}

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

impl Ingress {
    /// The ingress of a fused run with MCA at `mca` entries (`None`: T3's), or compute
    /// first in every run when `compute_first`.
    pub fn of(compute_first: bool, mca: Option<usize>, starvation: Cycle) -> Ingress {
        match mca {
            _ if compute_first => Ingress::ComputeFirst,
            Some(threshold) => Ingress::Mca {
                threshold,
                starvation,
            },
            None => Ingress::Arrival,
        }
    }
}

/// One GPU.
#[derive(Debug)]
pub struct GpuNode {
    pub(super) index: u32,
    pub(super) mem: MemorySystem,
    pub(super) mapping: AddressMapping,
    /// Per lane (`2 x pseudo-channel`, + 1 for communication): waiting requests with
    /// their block and their place in this GPU's arrival order.
    pub(super) pending: Vec<VecDeque<(Request, u32, u64)>>,
    /// Requests queued so far (the arrival order [`Ingress::Arrival`] follows).
    pub(super) arrivals: u64,
    /// How lanes enter the controller queues.
    pub(super) ingress: Ingress,
    /// What the communication does to the producer's reads (a diagnostic).
    pub(super) contention: ContentionCounters,
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
    /// Of `inflight`, the compute-class reads (the producer's operand loads).
    pub(super) inflight_reads: u64,
    pub(super) occupancy_sum: f64,
    /// Time-summed `inflight_reads`, for the reads' occupancy.
    pub(super) read_occupancy_sum: f64,
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
            arrivals: 0,
            ingress: Ingress::Arrival,
            contention: ContentionCounters::default(),
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
            inflight_reads: 0,
            read_occupancy_sum: 0.0,
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
            q.push_back((req, block, self.arrivals));
            self.arrivals += 1;
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
        let now = self.mem.now();
        self.fill(now);
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

    /// Moves waiting requests into controller queues while they have room, each
    /// pseudo-channel's two lanes in the order [`Ingress`] says (separate lanes, so
    /// neither blocks the other's head).
    pub(super) fn fill(&mut self, now: Cycle) {
        if self.pending_total == 0 {
            return;
        }
        for word in 0..self.lanes_waiting.len() {
            let mut bits = self.lanes_waiting[word];
            while bits != 0 {
                // A pseudo-channel's lanes are a pair of bits in one word (64 is even).
                let lane = word * 64 + bits.trailing_zeros() as usize;
                let pc = lane / 2;
                bits &= !(3u64 << ((lane % 64) & !1));
                self.fill_pc(pc, now);
                for l in [2 * pc, 2 * pc + 1] {
                    if self.pending.get(l).is_some_and(VecDeque::is_empty) {
                        self.lanes_waiting[word] &= !(1u64 << (l % 64));
                    }
                }
            }
        }
    }

    /// Fills pseudo-channel `pc`'s controller from its two lanes.
    fn fill_pc(&mut self, pc: usize, now: Cycle) {
        let (compute, comm) = (2 * pc, 2 * pc + 1);
        match self.ingress {
            Ingress::ComputeFirst | Ingress::Mca { .. } => {
                while self.submit_front(compute, now) {}
                while self.submit_front(comm, now) {}
            }
            Ingress::Arrival => {
                let mut open = [true, true];
                loop {
                    let seq = |l: usize, o: bool| {
                        self.pending
                            .get(l)
                            .and_then(VecDeque::front)
                            .filter(|_| o)
                            .map(|e| e.2)
                    };
                    let lane = match (seq(compute, open[0]), seq(comm, open[1])) {
                        (Some(a), Some(b)) => {
                            if a < b {
                                compute
                            } else {
                                comm
                            }
                        }
                        (Some(_), None) => compute,
                        (None, Some(_)) => comm,
                        (None, None) => break,
                    };
                    if !self.submit_front(lane, now) {
                        open[lane - compute] = false;
                    }
                }
            }
        }
    }

    /// Submits lane `lane`'s front request; false when it stays waiting (its queue is
    /// full, or MCA's admission holds communication back) or the lane is empty.
    #[inline]
    fn submit_front(&mut self, lane: usize, now: Cycle) -> bool {
        let Some(&(req, block, _)) = self.pending.get(lane).and_then(VecDeque::front) else {
            return false;
        };
        let compute = req.class != TrafficClass::Communication;
        if let Some(by) = self.refused_by.get_mut(lane) {
            if *by != u32::MAX {
                let ctrl = self.mem.controllers().get(*by as usize);
                if ctrl.is_none_or(|c| !c.has_room(req.access, 1)) {
                    if compute {
                        let comm = ctrl.map_or(0, |c| queued(c, req.access)[1]);
                        self.contention.compute_refused(comm);
                    }
                    return false;
                }
                *by = u32::MAX;
            }
        }
        if let Ingress::Mca {
            threshold,
            starvation,
        } = self.ingress
        {
            if !compute && !self.boundary_told && now.saturating_sub(req.arrival) < starvation {
                let held = self
                    .mem
                    .controllers()
                    .get(lane / 2)
                    .map_or(0, |c| queued(c, req.access).iter().sum::<usize>());
                if held >= threshold {
                    return false;
                }
            }
        }
        match self.mem.submit(&req) {
            Ok(id) => {
                if let Some(q) = self.pending.get_mut(lane) {
                    q.pop_front();
                }
                self.pending_total -= 1;
                if req.class == TrafficClass::Compute {
                    self.pending_compute -= 1;
                }
                self.inflight += 1;
                if compute && !req.access.is_write_like() {
                    self.inflight_reads += 1;
                }
                let off = (id.0 - self.purpose_base) as usize;
                while self.purpose.len() <= off {
                    self.purpose.push_back(None);
                }
                self.purpose[off] = Some(block);
                true
            }
            Err(refused) => {
                if compute {
                    let comm = self
                        .mem
                        .controllers()
                        .get(refused.pseudo_channel)
                        .map_or(0, |c| queued(c, req.access)[1]);
                    self.contention.compute_refused(comm);
                }
                if let Some(by) = self.refused_by.get_mut(lane) {
                    *by = u32::try_from(refused.pseudo_channel).unwrap_or(u32::MAX);
                }
                false
            }
        }
    }

    /// Samples the controllers' queues by class (while the producer runs).
    pub(super) fn sample_queues(&mut self) {
        let (mut r, mut w) = ([0u64; 2], [0u64; 2]);
        for c in self.mem.controllers() {
            let (rq, wq) = c.queue_class_lens();
            for (slot, (cr, cw)) in by_slot(&rq).into_iter().zip(by_slot(&wq)).enumerate() {
                r[slot] += cr as u64;
                w[slot] += cw as u64;
            }
        }
        self.contention.sample(r, w);
    }

    /// The contention figures of this GPU.
    pub(super) fn contention(&self, in_flight: (f64, f64)) -> Contention {
        self.contention
            .report(self.mem.controllers().len(), in_flight)
    }
}

/// Entries (compute, communication) of the queue `access` goes to in controller `c`.
fn queued(c: &crate::memctrl::Controller, access: crate::memctrl::Access) -> [usize; 2] {
    let (r, w) = c.queue_class_lens();
    by_slot(if access.is_write_like() { &w } else { &r })
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
    /// The same, the producer's reads alone.
    pub mean_read_occupancy: f64,
    /// Tracker figures.
    pub tracker: crate::t3::tracker::TrackerStats,
    /// Tracker entries left unprogrammed (should be 0).
    pub orphans: u64,
    /// What the communication did to the producer's reads.
    pub contention: Contention,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memctrl::FrFcfs;

    /// A GPU of Table 8.1's memory with `ingress`, and `n` request addresses that all go
    /// to one bank of pseudo-channel 0.
    fn node(ingress: Ingress, n: usize) -> (GpuNode, Vec<u64>) {
        let preset = HbmPreset::builtin(crate::t3::run::T3_PRESET).unwrap();
        let mut g = GpuNode::new(0, &preset, &|| Box::new(FrFcfs)).unwrap();
        g.ingress = ingress;
        let first = g.mapping.decode(0);
        let addrs = (1..)
            .map(|i: u64| i * REQ_BYTES)
            .filter(|&a| {
                let d = g.mapping.decode(a);
                g.mapping.pseudo_channel_index(&d) == 0
                    && (d.bank_group, d.bank) == (first.bank_group, first.bank)
            })
            .take(n)
            .collect();
        (g, addrs)
    }

    fn read(addr: u64, class: TrafficClass, arrival: Cycle) -> Request {
        Request {
            class,
            ..Request::read(addr, REQ_BYTES as u32, arrival)
        }
    }

    fn queued_reads(g: &GpuNode) -> [usize; 2] {
        let c = g.mem.controllers().first().unwrap();
        queued(c, crate::memctrl::Access::Read)
    }

    #[test]
    fn mca_admits_communication_below_its_threshold_or_once_it_starves() {
        let ingress = Ingress::Mca {
            threshold: 3,
            starvation: 100,
        };
        let (mut g, a) = node(ingress, 5);
        for &x in &a[..3] {
            g.push_request(read(x, TrafficClass::Compute, 0), 0);
        }
        g.push_request(read(a[3], TrafficClass::Communication, 0), 0);
        g.fill(0);
        assert_eq!(
            queued_reads(&g),
            [3, 0],
            "three compute entries: at the threshold"
        );
        g.fill(99);
        assert_eq!(queued_reads(&g), [3, 0], "not yet starving");
        g.fill(100);
        assert_eq!(queued_reads(&g), [3, 1], "waited the limit: admitted");
        // After the producer kernel ended, communication enters at once.
        g.push_request(read(a[4], TrafficClass::Communication, 100), 0);
        g.fill(101);
        assert_eq!(queued_reads(&g), [3, 1]);
        g.boundary_told = true;
        g.fill(102);
        assert_eq!(queued_reads(&g), [3, 2]);
        assert_eq!(g.pending_total, 0);
    }

    #[test]
    fn arrival_order_gives_a_queue_slot_to_the_older_request_whatever_its_class() {
        for (ingress, winner) in [
            (Ingress::Arrival, TrafficClass::Communication),
            (Ingress::ComputeFirst, TrafficClass::Compute),
        ] {
            let depth = 32;
            let (mut g, a) = node(ingress, depth + 2);
            // Fill the read queue but one slot with compute reads.
            for &x in &a[..depth - 1] {
                g.push_request(read(x, TrafficClass::Compute, 0), 0);
            }
            g.fill(0);
            assert_eq!(queued_reads(&g), [depth - 1, 0]);
            // A communication read arrives, then a compute read: one slot for the two.
            g.push_request(read(a[depth - 1], TrafficClass::Communication, 1), 0);
            g.push_request(read(a[depth], TrafficClass::Compute, 1), 0);
            g.fill(1);
            let want = if winner == TrafficClass::Compute {
                [depth, 0]
            } else {
                [depth - 1, 1]
            };
            assert_eq!(queued_reads(&g), want, "{ingress:?}");
            assert_eq!(g.pending_total, 1, "{ingress:?}");
        }
    }
}
