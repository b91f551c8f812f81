//! GOLDYLOC command processor: inspect the packets at every queue head, predict how many
//! independent GEMMs to run together, swap in the kernel object tuned for that degree.
//!
//! On every event that can move a queue head (doorbell, kernel dispatched, kernel
//! completed, timer) the CP scans the active queues from a rotating start, reads each
//! head packet through `DeviceMemory` and classifies it:
//! malformed packets are completed with an error value ([`RejectReason`]) and the queue
//! moves on; barrier packets complete once their dependencies allow; non-GEMM kernels
//! dispatch at once with their own kernel object; GEMMs (kernels with a valid extension
//! record) go to [`decide`]. Dispatched GEMMs form a group; no new group starts until every
//! member has completed (CD 1 serialises), which is what "leave the rest queued" means.

pub mod decision;
pub mod features;
pub mod predictor;
pub mod queue;
pub mod reject;
pub mod work;

mod config;
mod dispatch;
mod log;
mod scan;
mod shape;
mod state;
mod steady;

use core::fmt;

pub use decision::{
    decide, decide_by_problem, decide_first_size, decide_masks, Decision, GemmCandidate,
    ProblemKey, MAX_CANDIDATES, MAX_CD,
};
pub use features::{CuResources, FeatureError, FEATURE_COUNT};
pub use predictor::{CdPredictor, CLASS_COUNT};
pub use reject::{RejectCode, RejectReason};
pub use work::{CpCostModel, CpWork};

use heapless::{Deque, Vec};
use nmcp_isa::aql::{
    self, AqlPacket, DeviceRange, PacketType, QueueConfig, QueueTable, AQL_PACKET_BYTES,
    KERNEL_DESCRIPTOR_BYTES, MAX_QUEUES,
};
use nmcp_isa::gemm_ext::{
    checked_workgroups, GemmExt, CONCURRENCY_DEGREES, GEMM_EXT_BYTES, MAX_KERNEL_OBJECTS,
};

use crate::platform::{
    DevAddr, DeviceMemory, DispatchError, DispatchRequest, KernelDispatcher, MappedFifo,
    MemoryError,
};
use crate::Event;
use queue::{low_id, QueueState, HEAD_KERNEL, HEAD_NONE, NO_KEY};

pub use config::{CpConfig, CpError, FromCpErrors};
pub use log::{CpAction, CpRecord, LOG_CAPACITY, REJECT_CAPACITY};
pub use shape::MAX_SHAPES;

use config::*;
use dispatch::*;
use log::*;
use shape::*;
use state::*;
use steady::*;

/// Packets the CP classifies in one event handler; the rest waits for the next event
/// ([`CommandProcessor::has_pending_work`] tells the platform to send one).
pub const MAX_PACKETS_PER_EVENT: usize = 32;

/// Queues, in priority order, a steady-state decision looks at at least
/// ([`CpState::decide_steady`]) before it leaves the rest to a follow-up event, after
/// the group is dispatched. Half the queues: a prediction of up to 8 with two GEMM sizes
/// interleaved is fixed within it.
pub const DECISION_PREFIX_QUEUES: usize = 16;

/// The command processor's state.
#[derive(Debug, Default)]
pub struct CommandProcessor {
    /// Meaningful only while `state.configured` (kept in place rather than in an
    /// `Option`, so [`CommandProcessor::configure_in_place`] needs no temporary).
    config: CpConfig,
    state: CpState,
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
        let rings = check_config(&config)?;
        self.config = config;
        // `reset` derives the rings' 32-bit window from `rings` too (the steady lane's
        // check of the members' signals needs it: without it the lane never dispatches).
        self.state.reset(rings);
        self.state.configured = true;
        Ok(())
    }

    /// [`CommandProcessor::configure`] without moving a configuration or a state
    /// through the stack (a board with 16 KiB of RAM, docs/decisions/board.md): `fill`
    /// writes the new configuration over the current one (or over an empty one with
    /// the untrained predictor), which is then checked, and all queue state is
    /// forgotten in place.
    ///
    /// # Errors
    /// [`CpError::BadQueue`] for an unusable queue descriptor; the CP is then left
    /// unconfigured (it ignores events until configured again).
    pub fn configure_in_place(&mut self, fill: impl FnOnce(&mut CpConfig)) -> Result<(), CpError> {
        self.state.configured = false;
        fill(&mut self.config);
        let rings = check_config(&self.config)?;
        self.state.reset(rings);
        self.state.configured = true;
        Ok(())
    }

    /// Forgets all queue state but keeps the GEMM shapes learnt so far (their validated
    /// records and predictions), as after the host re-creates its queues between two
    /// training iterations with the same GEMMs. Only valid while the records stay where
    /// they were ([`CommandProcessor::configure`] forgets them).
    pub fn restart_queues(&mut self) {
        let s = &mut self.state;
        s.queues.restart();
        s.mapped = 0;
        s.dirty = 0;
        s.waiting = 0;
        s.dispatching = 0;
        s.in_group = 0;
        s.kernel_heads = 0;
        s.shape_heads = [0; MAX_SHAPES];
        s.last_masks = [0; MAX_SHAPES];
        s.completions_this_scan = 0;
        s.gemm_group_in_flight = 0;
        s.rr_start = 0;
        s.pending = false;
    }

    /// Makes queue `queue` the first the next scan visits (the highest priority; the
    /// CP rotates it after every decision). Out-of-range queues are ignored.
    pub fn set_rotation(&mut self, queue: u8) {
        if self.state.configured && usize::from(queue) < self.config.queues.len() {
            self.state.rr_start = queue;
        }
    }

    /// GEMM shapes in the shape table.
    pub fn shapes_known(&self) -> usize {
        self.state.shapes.len()
    }

    /// The configuration, if any.
    pub fn config(&self) -> Option<&CpConfig> {
        self.state.configured.then_some(&self.config)
    }

    /// Work done so far.
    pub fn work(&self) -> CpWork {
        let mut work = self.state.work;
        let mut tally = self.state.tally;
        tally.fold_into(&mut work);
        work
    }

    /// The oldest undrained log record.
    pub fn pop_record(&mut self) -> Option<CpRecord> {
        let s = &mut self.state;
        let e = s.log.pop_front()?;
        let id = u64::from(e.id[0]) | (u64::from(e.id[1]) << 32);
        let action = match e.kind() {
            LOG_REJECTED => CpAction::Rejected(
                // Always there: a rejection's reason leaves only with its entry.
                s.rejects
                    .pop_front()
                    .unwrap_or(RejectReason::DispatchRefused),
            ),
            LOG_BARRIER => CpAction::BarrierResolved,
            flags => CpAction::Dispatched {
                kernel_object: u64::from(e.ko[0]) | (u64::from(e.ko[1]) << 32),
                gemm: flags & LOG_GEMM != 0,
                cd: (e.meta >> 16) as u8,
                predicted_cd: (e.meta >> 24) as u8,
                swapped: flags & LOG_SWAPPED != 0,
            },
        };
        Some(CpRecord {
            queue: e.queue(),
            dispatch_id: id,
            action,
        })
    }

    /// Log records dropped because nobody drained the log.
    pub fn records_dropped(&self) -> u64 {
        self.state.log_dropped
    }

    /// The last handler stopped at [`MAX_PACKETS_PER_EVENT`]; deliver another event
    /// (`Event::Deferred`) to continue.
    pub fn has_pending_work(&self) -> bool {
        self.state.pending
    }

    /// Reacts to a queue event. An unconfigured CP ignores events.
    ///
    /// # Errors
    /// [`CpError::Memory`] or [`CpError::Dispatch`] from the platform; the CP stays
    /// consistent.
    pub fn on_event<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        event: &Event,
        p: &mut P,
    ) -> Result<(), E> {
        let Some(cfg) = self.state.configured.then_some(&self.config) else {
            return Ok(());
        };
        // (The handler is counted by the scan, in the tally.)
        let s = &mut self.state;
        match *event {
            Event::Doorbell { queue } => {
                // Only the rung queues: this one and those in the platform's doorbell
                // bitmap (rung while this event waited); the others' write indices have
                // not moved.
                s.dirty |= p.take_doorbells() | 1u32.checked_shl(u32::from(queue)).unwrap_or(0);
            }
            Event::KernelDispatched { queue, dispatch_id } => {
                let qi = usize::from(queue);
                if let Some(q) = s.queues.get(qi) {
                    let b = bit(qi);
                    s.dirty |= b;
                    // While a queue is dispatching, its next id is the one after the
                    // dispatched packet (the scan does not visit it, nothing advances it).
                    if s.dispatching & b != 0 && q.next_id.wrapping_sub(1) == dispatch_id {
                        s.dispatching &= !b;
                    }
                    // Under head-change semantics a member stops holding the group back
                    // once its workgroups are all placed.
                    if cfg.release_group_on_dispatch
                        && s.in_group & b != 0
                        && q.group_id == low_id(dispatch_id)
                    {
                        s.in_group &= !b;
                        s.gemm_group_in_flight = s.gemm_group_in_flight.saturating_sub(1);
                    }
                }
            }
            Event::KernelCompleted {
                queue, dispatch_id, ..
            } => {
                let qi = usize::from(queue);
                if let Some(q) = s.queues.get_mut(qi) {
                    let b = bit(qi);
                    q.outstanding = q.outstanding.saturating_sub(1);
                    s.dirty |= b;
                    // A group of CD GEMMs runs together; the next group starts when the
                    // whole group has completed (CD 1 serialises).
                    if s.in_group & b != 0 && q.group_id == low_id(dispatch_id) {
                        s.in_group &= !b;
                        s.gemm_group_in_flight = s.gemm_group_in_flight.saturating_sub(1);
                    }
                }
                // A completion signal changed: waiting barriers may resolve.
                s.mark_waiting_dirty();
            }
            // A handler stopped with work left (its packet budget, a rejection's next
            // packet, barriers to look at again, queues a fixed decision did not need):
            // that work is the dirty queues already.
            Event::Deferred => {}
            _ => s.dirty = u32::MAX,
        }
        s.scan(cfg, p)
    }
}
