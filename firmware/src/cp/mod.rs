//! GOLDYLOC command processor: inspect the packets at every queue head, predict how many
//! independent GEMMs to run together, swap in the kernel object tuned for that degree.
//!
//! On every event that can move a queue head (doorbell, kernel dispatched, kernel
//! completed, timer) the CP scans the active queues from a rotating start, reads each
//! head packet through `DeviceMemory` and classifies it:
//! malformed packets are completed with an error value ([`RejectReason`]) and the queue
//! moves on; barrier packets complete once their dependencies allow; non-GEMM kernels
//! dispatch at once with their own kernel object; GEMMs (kernels with a valid extension
//! record) go to [`decide`]. Dispatched GEMMs form a group; no new group starts while a
//! member is still placing workgroups, which is what "leave the rest queued" means.

pub mod decision;
pub mod features;
pub mod predictor;
pub mod queue;
pub mod reject;
pub mod work;

use core::fmt;

pub use decision::{decide, Decision, GemmCandidate, ProblemKey, MAX_CANDIDATES, MAX_CD};
pub use features::{CuResources, FeatureError, FEATURE_COUNT};
pub use predictor::{CdPredictor, CLASS_COUNT};
pub use queue::{QueueConfig, MAX_QUEUES};
pub use reject::{RejectCode, RejectReason};
pub use work::{CpCostModel, CpWork};

use heapless::{Deque, Vec};
use nmcp_isa::aql::{
    self, AqlPacket, DeviceRange, PacketType, AQL_PACKET_BYTES, KERNEL_DESCRIPTOR_BYTES,
};
use nmcp_isa::gemm_ext::{checked_workgroups, GemmExt, GEMM_EXT_BYTES};

use crate::platform::{
    DevAddr, DeviceMemory, DispatchError, DispatchRequest, KernelDispatcher, MemoryError,
};
use crate::{Event, FirmwareError};
use queue::{CachedHead, QueueState};

/// Packets the CP classifies in one event handler; the rest waits for the next event
/// ([`CommandProcessor::has_pending_work`] tells the platform to send one).
pub const MAX_PACKETS_PER_EVENT: usize = 32;
/// Records kept for the platform to drain ([`CommandProcessor::pop_record`]): enough for
/// one handler's packets plus one dispatch per queue.
pub const LOG_CAPACITY: usize = MAX_PACKETS_PER_EVENT + MAX_QUEUES;

/// Errors of the command processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CpError {
    /// A bounded table overflowed.
    Capacity,
    /// A queue descriptor is unusable (size not a power of two, or ring / index words
    /// outside device memory).
    BadQueue {
        /// Queue index.
        queue: u8,
    },
}

impl fmt::Display for CpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capacity => f.write_str("CP table capacity exceeded"),
            Self::BadQueue { queue } => write!(
                f,
                "queue {queue}: size not a power of two or ring/index words outside device memory"
            ),
        }
    }
}

impl core::error::Error for CpError {}

/// Everything the CP needs to know about its GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpConfig {
    /// Active queues, index = queue id.
    pub queues: Vec<QueueConfig, MAX_QUEUES>,
    /// Device memory every address must fall in.
    pub device: DeviceRange,
    /// Per-CU resources, for occupancy and waves.
    pub resources: CuResources,
    /// The trained predictor.
    pub predictor: CdPredictor,
}

/// What the CP did with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CpAction {
    /// Dispatched.
    Dispatched {
        /// Kernel object it runs with.
        kernel_object: u64,
        /// The packet had a GEMM extension.
        gemm: bool,
        /// Concurrency degree of the decision (1 for baseline and non-GEMMs).
        cd: u8,
        /// Predicted CD (1 when nothing was predicted).
        predicted_cd: u8,
        /// The kernel object was swapped for a globally-optimized one.
        swapped: bool,
    },
    /// Completed with an error value.
    Rejected(RejectReason),
    /// A barrier packet whose dependencies resolved; completed with 0.
    BarrierResolved,
}

/// One line of the CP's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CpRecord {
    /// Queue.
    pub queue: u8,
    /// Dispatch id.
    pub dispatch_id: u64,
    /// What happened.
    pub action: CpAction,
}

/// A head packet that can run.
#[derive(Debug, Clone, Copy)]
struct Head {
    queue: u8,
    dispatch_id: u64,
    kernel_object: u64,
    /// It is a GEMM (its candidate is in the queue's cache).
    gemm: bool,
}

/// What a head packet needs.
enum Class {
    Run(Head, Option<GemmCandidate>),
    Reject(RejectReason),
    BarrierDone,
    Wait,
}

/// The command processor's state.
#[derive(Debug, Default)]
pub struct CommandProcessor {
    config: Option<CpConfig>,
    state: CpState,
}

#[derive(Debug, Default)]
struct CpState {
    queues: [QueueState; MAX_QUEUES],
    heads: Vec<Head, MAX_QUEUES>,
    completions_this_scan: u32,
    gemm_group_in_flight: u8,
    rr_start: u8,
    work: CpWork,
    log: Deque<CpRecord, LOG_CAPACITY>,
    log_dropped: u64,
    pending: bool,
}

impl CommandProcessor {
    /// Bytes of CP state (for RAM budgets).
    pub const STATE_BYTES: usize = core::mem::size_of::<Self>();

    /// A CP configured for `config`.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor.
    pub fn new(config: CpConfig) -> Result<Self, CpError> {
        let mut cp = Self::default();
        cp.configure(config)?;
        Ok(cp)
    }

    /// (Re)configures the CP and forgets all queue state.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor; the old configuration
    /// stays.
    pub fn configure(&mut self, config: CpConfig) -> Result<(), CpError> {
        for (i, q) in config.queues.iter().enumerate() {
            if !q.is_valid(&config.device) {
                return Err(CpError::BadQueue { queue: i as u8 });
            }
        }
        self.config = Some(config);
        self.state = CpState::default();
        Ok(())
    }

    /// The configuration, if any.
    pub fn config(&self) -> Option<&CpConfig> {
        self.config.as_ref()
    }

    /// Work done so far.
    pub fn work(&self) -> CpWork {
        self.state.work
    }

    /// The oldest undrained log record.
    pub fn pop_record(&mut self) -> Option<CpRecord> {
        self.state.log.pop_front()
    }

    /// Log records dropped because nobody drained the log.
    pub fn records_dropped(&self) -> u64 {
        self.state.log_dropped
    }

    /// The last handler stopped at [`MAX_PACKETS_PER_EVENT`]; deliver another event
    /// (e.g. `Timer`) to continue.
    pub fn has_pending_work(&self) -> bool {
        self.state.pending
    }

    /// Reacts to a queue event. An unconfigured CP ignores events.
    ///
    /// # Errors
    /// Any [`FirmwareError`] from the platform; the CP stays consistent.
    pub fn on_event<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        event: &Event,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        let Some(cfg) = self.config.as_ref() else {
            return Ok(());
        };
        let s = &mut self.state;
        match *event {
            Event::Doorbell { .. } => {
                // Doorbells of other queues may have been rung while this one was
                // waiting to be handled (a hardware CP reads a doorbell bitmap): look at
                // every queue's write index.
                for q in s.queues.iter_mut() {
                    q.dirty = true;
                }
            }
            Event::KernelDispatched { queue, dispatch_id } => {
                if let Some(q) = s.queues.get_mut(usize::from(queue)) {
                    q.dirty = true;
                    if q.dispatching == Some(dispatch_id) {
                        q.dispatching = None;
                        if q.dispatching_gemm {
                            q.dispatching_gemm = false;
                            s.gemm_group_in_flight = s.gemm_group_in_flight.saturating_sub(1);
                        }
                    }
                }
            }
            Event::KernelCompleted { queue, .. } => {
                if let Some(q) = s.queues.get_mut(usize::from(queue)) {
                    q.outstanding = q.outstanding.saturating_sub(1);
                    q.dirty = true;
                }
                // A completion signal changed: waiting barriers may resolve.
                s.mark_waiting_dirty();
            }
            _ => {
                for q in s.queues.iter_mut() {
                    q.dirty = true;
                }
            }
        }
        s.scan(cfg, p)
    }
}

fn read<P: DeviceMemory>(
    p: &mut P,
    work: &mut CpWork,
    addr: DevAddr,
    buf: &mut [u8],
) -> Result<(), MemoryError> {
    work.mem_accesses = work.mem_accesses.saturating_add(1);
    work.bytes_read = work.bytes_read.saturating_add(buf.len() as u64);
    p.read(addr, buf)
}

fn read_u64<P: DeviceMemory>(
    p: &mut P,
    work: &mut CpWork,
    addr: DevAddr,
) -> Result<u64, MemoryError> {
    let mut b = [0u8; 8];
    read(p, work, addr, &mut b)?;
    Ok(u64::from_le_bytes(b))
}

impl CpState {
    fn log(&mut self, queue: u8, dispatch_id: u64, action: CpAction) {
        let rec = CpRecord {
            queue,
            dispatch_id,
            action,
        };
        if self.log.is_full() {
            let _ = self.log.pop_front();
            self.log_dropped = self.log_dropped.saturating_add(1);
        }
        let _ = self.log.push_back(rec);
    }

    fn mark_waiting_dirty(&mut self) {
        for q in self.queues.iter_mut().filter(|q| q.waiting) {
            q.dirty = true;
        }
    }

    fn scan<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        self.pending = false;
        self.heads.clear();
        self.completions_this_scan = 0;
        let n = cfg.queues.len();
        let mut budget = MAX_PACKETS_PER_EVENT;
        let start = usize::from(self.rr_start);
        for k in 0..n {
            let qi = (start + k) % n;
            if let Some(head) = self.head_of(cfg, qi, p, &mut budget)? {
                // heads has one slot per queue: cannot overflow.
                let _ = self.heads.push(head);
            }
        }
        if self.completions_this_scan > 0 && self.queues.iter().any(|q| q.waiting) {
            // This scan completed packets whose signals a barrier (possibly in a queue
            // already visited) may wait on: look again in a follow-up event.
            self.mark_waiting_dirty();
            self.pending = true;
        }
        self.dispatch_heads(cfg, p)
    }

    /// Walks queue `qi` from its head until a packet that must run or wait; rejects and
    /// resolves packets on the way.
    fn head_of<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        qi: usize,
        p: &mut P,
        budget: &mut usize,
    ) -> Result<Option<Head>, FirmwareError> {
        let (Some(qc), Some(&qs)) = (cfg.queues.get(qi), self.queues.get(qi)) else {
            return Ok(None);
        };
        if qs.dispatching.is_some() {
            return Ok(None);
        }
        let queue = qi as u8;
        let cached_head = |c: CachedHead| Head {
            queue,
            dispatch_id: c.dispatch_id,
            kernel_object: c.kernel_object,
            gemm: c.gemm.is_some(),
        };
        if !qs.dirty {
            return Ok(qs.cached.map(cached_head));
        }
        self.work.queue_visits = self.work.queue_visits.saturating_add(1);
        let read_id = read_u64(p, &mut self.work, qc.read_index_addr)?;
        let write_id = read_u64(p, &mut self.work, qc.write_index_addr)?;
        let mut id = read_id.max(qs.next_id);
        // Bounded: at most the per-event budget of packets.
        while id < write_id {
            let class = match qs.cached {
                Some(c) if c.dispatch_id == id => Class::Run(cached_head(c), c.gemm),
                _ => {
                    if *budget == 0 {
                        self.pending = true;
                        return Ok(None);
                    }
                    *budget -= 1;
                    self.classify(cfg, qc, qs, queue, id, p)?
                }
            };
            match class {
                Class::Wait => {
                    self.set_queue(qi, true, None);
                    return Ok(None);
                }
                Class::Run(h, gemm) => {
                    let cache = CachedHead {
                        dispatch_id: h.dispatch_id,
                        kernel_object: h.kernel_object,
                        gemm,
                    };
                    self.set_queue(qi, false, Some(cache));
                    return Ok(Some(cached_head(cache)));
                }
                Class::Reject(reason) => {
                    p.complete_without_dispatch(queue, id, reason.signal_value())?;
                    self.completed(queue, id, CpAction::Rejected(reason));
                }
                Class::BarrierDone => {
                    p.complete_without_dispatch(queue, id, 0)?;
                    self.completed(queue, id, CpAction::BarrierResolved);
                }
            }
            id = id.saturating_add(1);
            if let Some(q) = self.queues.get_mut(qi) {
                q.next_id = id;
            }
        }
        self.set_queue(qi, false, None);
        Ok(None)
    }

    /// Records a scan's verdict on a queue: clean until the next event that touches it.
    fn set_queue(&mut self, qi: usize, waiting: bool, cached: Option<CachedHead>) {
        if let Some(q) = self.queues.get_mut(qi) {
            q.dirty = false;
            q.waiting = waiting;
            q.cached = cached;
        }
    }

    fn completed(&mut self, queue: u8, id: u64, action: CpAction) {
        self.work.completions = self.work.completions.saturating_add(1);
        self.completions_this_scan = self.completions_this_scan.saturating_add(1);
        self.log(queue, id, action);
    }

    fn classify<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        qc: &QueueConfig,
        qs: QueueState,
        queue: u8,
        id: u64,
        p: &mut P,
    ) -> Result<Class, FirmwareError> {
        let mut bytes = [0u8; AQL_PACKET_BYTES];
        read(p, &mut self.work, qc.packet_addr(id), &mut bytes)?;
        self.work.packets_inspected = self.work.packets_inspected.saturating_add(1);
        if aql::raw_header(&bytes) & 0xFF == PacketType::Invalid as u16 {
            // Not published yet: the producer writes the header last.
            return Ok(Class::Wait);
        }
        let packet = match aql::decode(&bytes) {
            Ok(pk) => pk,
            Err(e) => return Ok(Class::Reject(RejectReason::Packet(e))),
        };
        if packet.header().barrier && qs.outstanding > 0 {
            return Ok(Class::Wait);
        }
        match packet {
            AqlPacket::Invalid(_) => Ok(Class::Wait),
            AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
                if let Err(e) = b.validate(&cfg.device) {
                    return Ok(Class::Reject(RejectReason::Packet(e)));
                }
                let and = matches!(packet, AqlPacket::BarrierAnd(_));
                let (mut any_zero, mut all_zero, mut failed) = (false, true, None);
                let mut deps = 0;
                for (i, &sig) in b.dep_signal.iter().enumerate() {
                    if sig == 0 {
                        continue;
                    }
                    deps += 1;
                    let v = read_u64(p, &mut self.work, sig)? as i64;
                    any_zero |= v == 0;
                    all_zero &= v == 0;
                    if v < 0 && failed.is_none() {
                        failed = Some(RejectReason::DependencyFailed {
                            index: i as u8,
                            value: v,
                        });
                    }
                }
                let satisfied = deps == 0 || if and { all_zero } else { any_zero };
                Ok(match failed {
                    Some(r) if and || !satisfied => Class::Reject(r),
                    _ if satisfied => Class::BarrierDone,
                    _ => Class::Wait,
                })
            }
            AqlPacket::KernelDispatch(k) => {
                if let Err(e) = k.validate(&cfg.device, GEMM_EXT_BYTES as u64) {
                    return Ok(Class::Reject(RejectReason::Packet(e)));
                }
                let gemm = if k.gemm_ext_address == 0 {
                    None
                } else {
                    let mut ext_bytes = [0u8; GEMM_EXT_BYTES];
                    if let Err(e) = read(p, &mut self.work, k.gemm_ext_address, &mut ext_bytes) {
                        return Ok(Class::Reject(RejectReason::Memory(e)));
                    }
                    let ext = match GemmExt::decode(&ext_bytes) {
                        Ok(x) => x,
                        Err(e) => return Ok(Class::Reject(RejectReason::Extension(e))),
                    };
                    if let Some((index, km)) = ext.kernels.iter().enumerate().find(|(_, km)| {
                        !cfg.device
                            .contains(km.kernel_object, KERNEL_DESCRIPTOR_BYTES)
                    }) {
                        return Ok(Class::Reject(RejectReason::KernelObject {
                            index: index as u8,
                            address: km.kernel_object,
                        }));
                    }
                    if !ext
                        .kernels
                        .iter()
                        .any(|km| km.kernel_object == k.kernel_object)
                    {
                        return Ok(Class::Reject(RejectReason::KernelNotListed {
                            address: k.kernel_object,
                        }));
                    }
                    if let Some(index) = ext
                        .kernels
                        .iter()
                        .position(|km| checked_workgroups(&ext, km).is_none())
                    {
                        return Ok(Class::Reject(RejectReason::GridTooLarge {
                            index: index as u8,
                        }));
                    }
                    match GemmCandidate::new(&ext, &cfg.resources) {
                        Ok(c) => Some(c),
                        Err(e) => return Ok(Class::Reject(RejectReason::Features(e))),
                    }
                };
                Ok(Class::Run(
                    Head {
                        queue,
                        dispatch_id: id,
                        kernel_object: k.kernel_object,
                        gemm: gemm.is_some(),
                    },
                    gemm,
                ))
            }
        }
    }

    /// Dispatches non-GEMM heads, then decides and dispatches a GEMM group if none is
    /// still placing workgroups.
    fn dispatch_heads<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
    ) -> Result<(), FirmwareError> {
        let heads = core::mem::take(&mut self.heads);
        for h in heads.iter().filter(|h| !h.gemm) {
            if !self.dispatch_one(cfg, p, h, h.kernel_object, false, 1, 1)? {
                return Ok(());
            }
        }
        if self.gemm_group_in_flight > 0 {
            return Ok(());
        }
        // The candidates stay in the queue caches; the decision borrows them.
        let mut cands: Vec<&GemmCandidate, MAX_QUEUES> = Vec::new();
        let mut gemm_heads: Vec<Head, MAX_QUEUES> = Vec::new();
        for h in heads.iter().filter(|h| h.gemm) {
            let cand = self
                .queues
                .get(usize::from(h.queue))
                .and_then(|q| q.cached.as_ref())
                .and_then(|c| c.gemm.as_ref());
            if let Some(c) = cand {
                let _ = cands.push(c);
                let _ = gemm_heads.push(*h);
            }
        }
        if cands.is_empty() {
            return Ok(());
        }
        let d = decide(&cands, &cfg.predictor, &mut self.work);
        let mut plan: Vec<(Head, u64), MAX_QUEUES> = Vec::new();
        for &i in d.chosen.iter() {
            let i = usize::from(i);
            if let (Some(h), Some(c)) = (gemm_heads.get(i), cands.get(i)) {
                let ko = if d.baseline {
                    h.kernel_object
                } else {
                    c.kernel_object_for(d.cd)
                };
                let _ = plan.push((*h, ko));
            }
        }
        drop(cands);
        if !d.baseline {
            let n = cfg.queues.len().max(1);
            self.rr_start = ((usize::from(self.rr_start) + 1) % n) as u8;
        }
        for (h, ko) in plan {
            if !self.dispatch_one(cfg, p, &h, ko, true, d.cd, d.predicted)? {
                break;
            }
        }
        Ok(())
    }

    /// One dispatch; `Ok(false)` when the dispatcher is busy (retry on a later event).
    #[allow(clippy::too_many_arguments)]
    fn dispatch_one<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        h: &Head,
        kernel_object: u64,
        gemm: bool,
        cd: u8,
        predicted_cd: u8,
    ) -> Result<bool, FirmwareError> {
        let qi = usize::from(h.queue);
        let swapped = kernel_object != h.kernel_object;
        if swapped {
            let addr = cfg
                .queues
                .get(qi)
                .map_or(0, |qc| qc.packet_addr(h.dispatch_id));
            self.work.mem_accesses = self.work.mem_accesses.saturating_add(1);
            self.work.bytes_written = self.work.bytes_written.saturating_add(8);
            p.write(
                addr.saturating_add(aql::offset::KERNEL_OBJECT as u64),
                &kernel_object.to_le_bytes(),
            )?;
        }
        let req = DispatchRequest {
            queue: h.queue,
            dispatch_id: h.dispatch_id,
            kernel_object,
        };
        match p.dispatch(&req) {
            Ok(()) => {}
            Err(DispatchError::Busy) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        self.work.dispatches = self.work.dispatches.saturating_add(1);
        if let Some(q) = self.queues.get_mut(qi) {
            q.dispatching = Some(h.dispatch_id);
            q.dispatching_gemm = gemm;
            q.outstanding = q.outstanding.saturating_add(1);
            q.next_id = h.dispatch_id.saturating_add(1);
            q.cached = None;
            q.dirty = true;
        }
        if gemm {
            self.gemm_group_in_flight = self.gemm_group_in_flight.saturating_add(1);
        }
        self.log(
            h.queue,
            h.dispatch_id,
            CpAction::Dispatched {
                kernel_object,
                gemm,
                cd,
                predicted_cd,
                swapped,
            },
        );
        Ok(true)
    }
}
