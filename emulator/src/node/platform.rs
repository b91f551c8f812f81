//! The firmware's view of its node: a borrow of the node's hardware blocks for the length
//! of one handler, implementing every platform trait.
//!
//! The view is a split borrow (the firmware is borrowed next to it, not lent out), so N
//! nodes in one system each hand their firmware a view of their own parts. Device memory
//! accesses take effect at once; hardware calls are checked at once (the split-phase
//! rule: `Ok` promises a completion event) and take effect when the handler ends.

use nmcp_firmware::platform::{
    ChannelSet, Clock, Cycle, DevAddr, DeviceMemory, DispatchError, DispatchRequest,
    KernelDispatcher, MappedFifo, MemoryError, NmcController, NmcError, NmcTicket, NoDmaController,
    NoOutputMapController, NoTrackerController,
};
use nmcp_isa::nmc::MacroCommand;

use super::{Launched, NmcOp, NodeParts};
use crate::gpu::dispatch::launch_from_packet;
use crate::gpu::queue::INVALID_HEADER;
use crate::gpu::{KernelEngine, KernelLaunch};
use crate::nmc::system::NmcBlock;
use crate::sim::Tick;

/// One node's hardware as one handler sees it.
#[derive(Debug)]
pub struct NodePlatform<'a, E: KernelEngine> {
    parts: &'a mut NodeParts<E>,
    now: Tick,
}

impl<'a, E: KernelEngine> NodePlatform<'a, E> {
    /// The view for a handler starting at `now`.
    pub fn new(parts: &'a mut NodeParts<E>, now: Tick) -> Self {
        Self { parts, now }
    }

    fn check_head(&self, queue: u8, id: u64) -> Result<nmcp_isa::aql::QueueConfig, DispatchError> {
        let p = &self.parts;
        let qc = *p
            .queues
            .get(usize::from(queue))
            .ok_or(DispatchError::NoSuchQueue)?;
        let read = p
            .memory
            .read_u64(qc.read_index_addr)
            .map_err(|_| DispatchError::NoSuchQueue)?;
        let write = p
            .memory
            .read_u64(qc.write_index_addr)
            .map_err(|_| DispatchError::NoSuchQueue)?;
        if read != id || id >= write {
            return Err(DispatchError::NotAtHead);
        }
        Ok(qc)
    }

    fn nmc(&mut self) -> Result<&mut NmcBlock, NmcError> {
        self.parts.nmc.as_mut().ok_or(NmcError::Unsupported)
    }

    /// Submits queued in this handler, which hold queue entries from its end on.
    fn submits_pending(&self) -> usize {
        self.parts
            .nmc_ops
            .iter()
            .filter(|o| matches!(o, NmcOp::Submit(..)))
            .count()
    }
}

impl<E: KernelEngine> Clock for NodePlatform<'_, E> {
    fn now(&self) -> Cycle {
        self.parts.cp_clock.cycle_at(self.now)
    }

    fn hz(&self) -> u64 {
        self.parts.cp_clock.hz()
    }
}

impl<E: KernelEngine> DeviceMemory for NodePlatform<'_, E> {
    fn read(&mut self, addr: DevAddr, buf: &mut [u8]) -> Result<(), MemoryError> {
        self.parts.memory.read(addr, buf)
    }

    fn write(&mut self, addr: DevAddr, data: &[u8]) -> Result<(), MemoryError> {
        self.parts.memory.write(addr, data)
    }

    /// The queues' area as words (`DeviceMemory::map_words`, set up by the node): the
    /// view the CP's fast path reads, as the board's window is.
    fn mapped_words(&self) -> Option<(DevAddr, &[u32])> {
        self.parts
            .mapped
            .then(|| self.parts.memory.mapped_words())
            .flatten()
    }

    fn mapped_words_mut(&mut self) -> Option<(DevAddr, &mut [u32])> {
        if !self.parts.mapped {
            return None;
        }
        self.parts.memory.mapped_words_mut()
    }
}

impl<E: KernelEngine> NodePlatform<'_, E> {
    /// The checks of a dispatch and its launch, nothing changed yet.
    fn prepare(&self, req: &DispatchRequest) -> Result<KernelLaunch, DispatchError> {
        let qc = self.check_head(req.queue, req.dispatch_id)?;
        let p = &*self.parts;
        if p.dispatching
            .get(usize::from(req.queue))
            .is_some_and(|d| d.is_some())
        {
            return Err(DispatchError::Busy);
        }
        launch_from_packet(
            &p.memory,
            qc.packet_addr(req.dispatch_id),
            req.kernel_object,
            p.non_gemm_workgroup_ns,
        )
    }

    /// Starts a prepared dispatch.
    fn commit(&mut self, req: &DispatchRequest, launch: KernelLaunch) {
        let p = &mut *self.parts;
        let tag = p.next_tag;
        p.next_tag += 1;
        p.launched.insert(
            tag,
            Launched {
                queue: req.queue,
                dispatch_id: req.dispatch_id,
            },
        );
        if let Some(d) = p.dispatching.get_mut(usize::from(req.queue)) {
            *d = Some(req.dispatch_id);
        }
        if let Some(o) = p.outcomes.get_mut(&(req.queue, req.dispatch_id)) {
            o.dispatches += 1;
            o.kernel_object = Some(req.kernel_object);
        }
        p.pending_launches.push((tag, launch));
    }
}

impl<E: KernelEngine> KernelDispatcher for NodePlatform<'_, E> {
    fn dispatch(&mut self, req: &DispatchRequest) -> Result<(), DispatchError> {
        let launch = self.prepare(req)?;
        self.commit(req, launch);
        Ok(())
    }

    /// The mapped view with the dispatcher's request FIFO (the steady lane writes a
    /// group's requests straight into it), as the board offers them.
    fn mapped_fifo(&mut self) -> Option<MappedFifo<'_>> {
        let p = &mut *self.parts;
        if !p.mapped {
            return None;
        }
        let (base, words) = p.memory.mapped_words_mut()?;
        Some(MappedFifo {
            base,
            words,
            fifo: &mut p.fifo,
        })
    }

    /// Dispatches the pushed group whole or not at all: every request is checked (head,
    /// busy queue, one request per queue, its packet) before any starts; then they start
    /// in order and leave the FIFO.
    fn dispatch_pushed(&mut self, from: usize) -> Result<(), DispatchError> {
        let reqs: Vec<DispatchRequest> = self
            .parts
            .fifo
            .get(from..)
            .ok_or(DispatchError::Unsupported)?
            .to_vec();
        let mut launches = Vec::with_capacity(reqs.len());
        let mut seen = 0u64;
        for r in &reqs {
            let bit = 1u64 << (r.queue & 63);
            if seen & bit != 0 {
                return Err(DispatchError::Busy);
            }
            seen |= bit;
            launches.push(self.prepare(r)?);
        }
        for (r, l) in reqs.iter().zip(launches) {
            self.commit(r, l);
        }
        self.parts.fifo.truncate(from);
        Ok(())
    }

    /// The doorbells rung up to now (their own events may still be queued behind this
    /// handler): a hardware CP's doorbell-pending bitmap.
    fn take_doorbells(&mut self) -> u32 {
        let now = self.now;
        let mut mask = 0u32;
        self.parts.doorbells_rung.retain(|&(at, q)| {
            if at <= now {
                mask |= 1u32 << (q & 31);
                false
            } else {
                true
            }
        });
        mask
    }

    fn complete_without_dispatch(
        &mut self,
        queue: u8,
        dispatch_id: u64,
        value: i64,
    ) -> Result<(), DispatchError> {
        let qc = self.check_head(queue, dispatch_id)?;
        let p = &mut *self.parts;
        if let Some(sig) = p.completion_signal_of(queue, dispatch_id) {
            // Success (a resolved barrier) decrements like a kernel's completion; a
            // rejection stores its negative error code (a consumer waiting for <= 0 wakes
            // either way and tells them apart by the sign).
            let _ = if value == 0 {
                p.memory.decrement_signal(sig).map(|_| ())
            } else {
                p.memory.write_signal(sig, value)
            };
        }
        let _ = p.memory.write_u64(qc.read_index_addr, dispatch_id + 1);
        let _ = p
            .memory
            .write(qc.packet_addr(dispatch_id), &INVALID_HEADER.to_le_bytes());
        if let Some(o) = p.outcomes.get_mut(&(queue, dispatch_id)) {
            o.completions += 1;
            o.completion_value = Some(value);
        }
        p.completed_in_handler.push((queue, dispatch_id));
        Ok(())
    }
}

impl<E: KernelEngine> NmcController for NodePlatform<'_, E> {
    fn submit(&mut self, cmd: &MacroCommand) -> Result<NmcTicket, NmcError> {
        let now = self.parts.dram_clock.cycle_at_or_after(self.now);
        let pending = self.submits_pending();
        let nmc = self.nmc()?;
        nmc.precheck(cmd)?;
        if nmc.queue_room(now) <= pending {
            return Err(NmcError::Busy);
        }
        let t = self.parts.ticket();
        self.parts
            .nmc_ops
            .push(NmcOp::Submit(t, Box::new(cmd.clone())));
        Ok(t)
    }

    fn write_scalar(&mut self, channels: ChannelSet, reg: u8, bits: u32) -> Result<(), NmcError> {
        self.nmc()?.precheck_scalar(channels, reg)?;
        self.parts.nmc_ops.push(NmcOp::Scalar(channels, reg, bits));
        Ok(())
    }

    fn reduce_partials(&mut self, channels: ChannelSet) -> Result<NmcTicket, NmcError> {
        self.nmc()?.precheck_reduce(channels)?;
        let t = self.parts.ticket();
        self.parts.nmc_ops.push(NmcOp::Reduce(t, channels));
        Ok(t)
    }
}

// DMA engines, the store tracker and output mapping arrive with T3; until then the node
// has none (the shared absent double answers `Unsupported`).
impl<E: KernelEngine> NoDmaController for NodePlatform<'_, E> {}
impl<E: KernelEngine> NoTrackerController for NodePlatform<'_, E> {}
impl<E: KernelEngine> NoOutputMapController for NodePlatform<'_, E> {}
