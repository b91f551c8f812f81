//! The shape table: the GEMM extension records the CP has validated, with their kernel
//! maps and predictions, and the classification of a head packet against it.

use super::*;

/// GEMM shapes (extension records) the CP remembers: their validated kernel map and
/// their predicted CD. A training step has a handful of distinct GEMMs; one per queue
/// head means a full set of heads never evicts a shape another head still uses. With
/// the `small-tables` feature (a 16 KiB-RAM board, whose window holds two GEMM records)
/// 2: more distinct shapes at the heads than that evict one another (each eviction
/// re-reads, re-validates and re-predicts a record), which costs time, not correctness.
pub const MAX_SHAPES: usize = if cfg!(feature = "small-tables") {
    2
} else {
    MAX_QUEUES
};

/// A GEMM extension record the CP has validated, keyed by its device address, with the
/// prediction for its features. Records are immutable while the CP runs (they live with
/// the GO library's code objects, like the kernel descriptors they point at); a new
/// configuration forgets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    /// Device address of the record.
    pub(super) ext_addr: u64,
    /// Header and setup word of the first packet validated with this record, barrier bit
    /// cleared: a later packet with the same word and record skips the full decode.
    pub(super) packet_word: u32,
    /// Index of the first shape of the same GEMM problem (the heterogeneous rule's
    /// "same size").
    pub(super) problem_id: u8,
    /// No other shape has this one's problem (its candidates are its problem's).
    pub(super) sole: bool,
    /// A kernel object the record lists: the first packet validated with it carried
    /// this one (before that packet, the record's first). A producer keeps putting the
    /// same one in its packets, so the steady lane's check that a packet's kernel
    /// object is listed is one comparison.
    pub(super) seen_ko: u64,
    /// Kernel objects the record lists (`kos[..n_kos]`).
    pub(super) kos: [u64; MAX_KERNEL_OBJECTS],
    pub(super) n_kos: u8,
    /// Kernel object the record tuned for each entry of [`CONCURRENCY_DEGREES`].
    pub(super) ko_per_cd: [u64; CONCURRENCY_DEGREES.len()],
    /// Predicted CD.
    pub(super) predicted: u8,
    pub(super) problem: ProblemKey,
}

impl Shape {
    /// The kernel object a packet of this shape carrying `own` runs with for CD index
    /// `cdi` (its own for none), or `None` when the record does not list `own`.
    #[inline(never)]
    pub(super) fn decide(&self, own: u64, cdi: usize) -> Option<u64> {
        self.decide_inline(own, cdi)
    }

    /// [`Shape::decide`] where it is taken once per handler (the steady lane): inline,
    /// no call and no result through memory.
    #[inline(always)]
    pub(super) fn decide_inline(&self, own: u64, cdi: usize) -> Option<u64> {
        (own == self.seen_ko || self.lists(own))
            .then(|| self.ko_per_cd.get(cdi).copied().unwrap_or(own))
    }

    #[inline(always)]
    pub(super) fn lists(&self, ko: u64) -> bool {
        self.kos
            .iter()
            .take(usize::from(self.n_kos))
            .any(|&k| k == ko)
    }
}

/// What a head packet needs.
pub(super) enum Class {
    /// A GEMM of shape (index) `.0`.
    Gemm(u8),
    /// A non-GEMM kernel with this kernel object.
    Kernel(u64),
    Reject(RejectReason),
    BarrierDone,
    Wait,
}

impl CpState {
    pub(super) fn find_shape(&self, ext_addr: u64) -> Option<u8> {
        self.shapes
            .iter()
            .position(|s| s.ext_addr == ext_addr)
            .map(|i| i as u8)
    }

    /// Classifies the packet `id`. The common case, a GEMM whose extension record the
    /// CP has validated before, costs three word reads (header, record address): the
    /// header type and the record address are checked before anything is decoded, and
    /// the record is not read again; the kernel object and the completion signal are
    /// checked only if the packet is dispatched (`dispatch_gemm`). Everything else takes
    /// the full decode.
    pub(super) fn classify<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        qc: &QueueConfig,
        outstanding: u32,
        id: u64,
        p: &mut P,
    ) -> Result<Class, E> {
        let addr = qc.packet_addr(id);
        let word = read_u32(p, &mut self.tally, addr)?;
        self.tally.inspected = self.tally.inspected.wrapping_add(1);
        let ptype = word & 0xFF;
        if ptype == PacketType::Invalid as u32 {
            // Not published yet: the producer writes the header last.
            return Ok(Class::Wait);
        }
        if ptype == PacketType::KernelDispatch as u32 {
            let ext_addr = read_u64(
                p,
                &mut self.tally,
                addr.wrapping_add(aql::offset::GEMM_EXT_ADDRESS as u64),
            )?;
            if ext_addr != 0 {
                if let Some(si) = self.find_shape(ext_addr) {
                    let known = self
                        .shapes
                        .get(usize::from(si))
                        .is_some_and(|s| s.packet_word == word & !BARRIER_BIT);
                    if known {
                        // Classified; its kernel object and signal are checked if it is
                        // dispatched (`dispatch_gemm`).
                        if word & BARRIER_BIT != 0 && outstanding > 0 {
                            return Ok(Class::Wait);
                        }
                        return Ok(Class::Gemm(si));
                    }
                }
            }
        }
        self.classify_full(cfg, outstanding, addr, p)
    }

    /// The full decode and validation of the packet at `addr`.
    pub(super) fn classify_full<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        outstanding: u32,
        addr: DevAddr,
        p: &mut P,
    ) -> Result<Class, E> {
        let mut bytes = [0u8; AQL_PACKET_BYTES];
        read(p, &mut self.work, addr, &mut bytes)?;
        self.work.packets_decoded = self.work.packets_decoded.wrapping_add(1);
        if aql::raw_header(&bytes) & 0xFF == PacketType::Invalid as u16 {
            return Ok(Class::Wait);
        }
        let packet = match aql::decode(&bytes) {
            Ok(pk) => pk,
            Err(e) => return Ok(Class::Reject(RejectReason::Packet(e))),
        };
        if packet.header().barrier && outstanding > 0 {
            return Ok(Class::Wait);
        }
        match packet {
            AqlPacket::Invalid(_) => Ok(Class::Wait),
            AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
                if let Err(e) = b.validate(&cfg.device) {
                    return Ok(Class::Reject(RejectReason::Packet(e)));
                }
                if b.completion_signal != 0 && in_rings(self.rings, b.completion_signal) {
                    return Ok(Class::Reject(ring_signal(b.completion_signal)));
                }
                let and = matches!(packet, AqlPacket::BarrierAnd(_));
                let (mut any_zero, mut all_zero, mut failed) = (false, true, None);
                let mut deps = 0;
                for (i, &sig) in b.dep_signal.iter().enumerate() {
                    if sig == 0 {
                        continue;
                    }
                    deps += 1;
                    let v = read_u64(p, &mut self.tally, sig)? as i64;
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
                if k.completion_signal != 0 && in_rings(self.rings, k.completion_signal) {
                    return Ok(Class::Reject(ring_signal(k.completion_signal)));
                }
                if k.gemm_ext_address == 0 || !cfg.concurrency_control {
                    return Ok(Class::Kernel(k.kernel_object));
                }
                let si = match self.find_shape(k.gemm_ext_address) {
                    Some(si) => si,
                    None => match self.learn_shape(cfg, k.gemm_ext_address, p) {
                        Ok(si) => si,
                        Err(reason) => return Ok(Class::Reject(reason)),
                    },
                };
                let Some(shape) = self.shapes.get_mut(usize::from(si)) else {
                    return Ok(Class::Reject(RejectReason::KernelNotListed {
                        address: k.kernel_object,
                    }));
                };
                if !shape.lists(k.kernel_object) {
                    return Ok(Class::Reject(RejectReason::KernelNotListed {
                        address: k.kernel_object,
                    }));
                }
                let word = u32::from_le_bytes([
                    bytes.first().copied().unwrap_or(0),
                    bytes.get(1).copied().unwrap_or(0),
                    bytes.get(2).copied().unwrap_or(0),
                    bytes.get(3).copied().unwrap_or(0),
                ]);
                if shape.packet_word == 0 {
                    shape.packet_word = word & !BARRIER_BIT;
                    shape.seen_ko = k.kernel_object;
                }
                Ok(Class::Gemm(si))
            }
        }
    }

    /// Reads, validates and predicts a GEMM extension record seen for the first time,
    /// and enters it in the shape table (evicting the oldest entry when full).
    pub(super) fn learn_shape<P: DeviceMemory>(
        &mut self,
        cfg: &CpConfig,
        ext_addr: u64,
        p: &mut P,
    ) -> Result<u8, RejectReason> {
        let mut ext_bytes = [0u8; GEMM_EXT_BYTES];
        read(p, &mut self.work, ext_addr, &mut ext_bytes).map_err(RejectReason::Memory)?;
        let ext = GemmExt::decode(&ext_bytes).map_err(RejectReason::Extension)?;
        if let Some((index, km)) = ext.kernels.iter().enumerate().find(|(_, km)| {
            !cfg.device
                .contains(km.kernel_object, KERNEL_DESCRIPTOR_BYTES)
        }) {
            return Err(RejectReason::KernelObject {
                index: index as u8,
                address: km.kernel_object,
            });
        }
        if let Some(index) = ext
            .kernels
            .iter()
            .position(|km| checked_workgroups(&ext, km).is_none())
        {
            return Err(RejectReason::GridTooLarge { index: index as u8 });
        }
        let cand = GemmCandidate::new(&ext, &cfg.resources).map_err(RejectReason::Features)?;
        self.work.predictions = self.work.predictions.saturating_add(1);
        self.work.predictor_macs = self
            .work
            .predictor_macs
            .saturating_add(((CLASS_COUNT + 1) * FEATURE_COUNT) as u64);
        let predicted = cfg.predictor.predict_cd(&cand.features);
        let mut kos = [0u64; MAX_KERNEL_OBJECTS];
        for (d, km) in kos.iter_mut().zip(&ext.kernels) {
            *d = km.kernel_object;
        }
        let shape = Shape {
            ext_addr,
            packet_word: 0,
            problem_id: 0,
            sole: true,
            // (A validated record lists 1..=3 non-zero kernel objects: this one is
            // listed until a packet's replaces it.)
            seen_ko: kos[0],
            kos,
            n_kos: ext.kernels.len() as u8,
            ko_per_cd: cand.ko_per_cd,
            predicted,
            problem: cand.problem,
        };
        let index = if self.shapes.push(shape).is_ok() {
            self.shapes.len().saturating_sub(1) as u8
        } else {
            // Full: replace the oldest entry; heads classified with it are classified
            // again.
            let victim = self.next_victim;
            self.next_victim = ((usize::from(victim) + 1) % MAX_SHAPES) as u8;
            if let Some(slot) = self.shapes.get_mut(usize::from(victim)) {
                *slot = shape;
            }
            let heads = self
                .shape_heads
                .get_mut(usize::from(victim))
                .map_or(0, core::mem::take);
            let mut m = heads;
            while m != 0 {
                let q = m.trailing_zeros() as usize;
                m &= m.wrapping_sub(1);
                if let Some(qs) = self.queues.get_mut(q) {
                    qs.head = HEAD_NONE;
                }
            }
            self.dirty |= heads;
            self.pending |= heads != 0;
            // The fast path's shortcut (same shape and kernel object as last time)
            // must not outlive the record it was validated with.
            if let Some(m) = self.last_masks.get_mut(usize::from(victim)) {
                *m = 0;
            }
            for q in self.queues.iter_mut().filter(|q| q.last_shape == victim) {
                q.last_shape = HEAD_NONE;
                q.key_word = NO_KEY;
            }
            victim
        };
        // Problem ids: the index of the first shape with the same problem.
        for i in 0..self.shapes.len() {
            let Some(problem) = self.shapes.get(i).map(|s| s.problem) else {
                continue;
            };
            let first = self
                .shapes
                .iter()
                .position(|s| s.problem == problem)
                .unwrap_or(i);
            let others = self.shapes.iter().filter(|s| s.problem == problem).count() > 1;
            if let Some(s) = self.shapes.get_mut(i) {
                s.problem_id = first as u8;
                s.sole = !others;
            }
        }
        Ok(index)
    }

    /// The GEMM decision's common case ([`decide_first_size`]): the first candidate's
    /// problem decides alone. `all` is every candidate ([`rotate`]d from `start`, two or
    /// more), `all_queues` the same unrotated; `problem_heads` is set. `None` when the
    /// general rule ([`decide_masks`]) must decide.
    #[inline(always)]
    pub(super) fn first_size(
        &self,
        start: usize,
        n: usize,
        all: u32,
        all_queues: u32,
    ) -> Option<(u32, u8, u8)> {
        // The first candidate's size is its queue's head shape's problem; its
        // prediction is that shape's.
        let q = unrotate(all.trailing_zeros() as usize, start, n);
        let shape = self
            .queues
            .get(q)
            .and_then(|qs| self.shapes.get(usize::from(qs.head)))?;
        let heads = *self.problem_heads.get(usize::from(shape.problem_id))?;
        let group = if heads == all_queues {
            all
        } else {
            rotate(heads, start, n)
        };
        decide_first_size(all, group, shape.predicted)
    }
}
