//! The general path's decision and dispatch: the GEMM group decided on the classified
//! heads, its members checked and patched, non-GEMM kernels and rejections at dispatch.

use super::*;

/// Pass one of [`CpState::dispatch_group`] over the members of `chosen` (a [`rotate`]d
/// mask from `start` over `n` queues): reads and checks each member's kernel object and
/// completion signal in the mapped `view` (as 64-byte packets), patches the kernel
/// object decided for `cdi` and appends the member's request to `reqs`. Returns the
/// masks (bit `i` for request `i`) of swapped kernel objects, members that failed the
/// checks and members outside the view. Out of line, and in 32-bit words: few values
/// live across its loop (rv32imac has 31 registers; a 64-bit value takes two).
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_members(
    shapes: &[Shape],
    queues: &[QueueState; MAX_QUEUES],
    mapped: u32,
    rings: (DevAddr, u64),
    mut view: Option<&mut [u32]>,
    (chosen, start, n): (u32, usize, usize),
    cdi: usize,
    reqs: &mut Vec<DispatchRequest, { MAX_CD as usize }>,
) -> (u32, u32, u32) {
    let mut masks = MemberMasks::default();
    // The previous member's shape and what its record lists (`Listed`).
    let mut cur_head = HEAD_NONE;
    let mut cur_shape: Option<&Shape> = None;
    let mut listed = Listed::default();
    let mut rb = 1u32;
    let mut m = chosen;
    while m != 0 && !reqs.is_full() {
        let q = unrotate(m.trailing_zeros() as usize, start, n);
        m &= m.wrapping_sub(1);
        let Some(qs) = queues.get(q) else {
            continue;
        };
        if qs.head != cur_head {
            cur_head = qs.head;
            cur_shape = shapes.get(usize::from(cur_head));
            listed = Listed::default();
        }
        let Some(shape) = cur_shape else {
            // Not a GEMM head (cannot happen): not dispatched.
            continue;
        };
        let packet = view
            .as_mut()
            .filter(|_| mapped & bit(q) != 0)
            .and_then(|v| {
                v.as_chunks_mut::<PACKET_WORDS>()
                    .0
                    .get_mut(qs.view_slot as usize)
            });
        let checked = packet
            .map(|pk| check_member(pk, shape, cdi, &mut listed, |s| in_rings(rings, join(s))));
        masks.push::<false>(reqs, q, qs.next_id, rb, checked);
        rb <<= 1;
    }
    (masks.swaps, masks.bad, masks.unread)
}

/// The masks a gather returns, bit `i` for request `i`: swapped kernel objects, members
/// that failed the checks, members whose packet is not in the view.
#[derive(Default)]
pub(super) struct MemberMasks {
    pub(super) swaps: u32,
    pub(super) bad: u32,
    pub(super) unread: u32,
}

impl MemberMasks {
    /// Folds member `rb`'s [`check_member`] (`None`: its packet is not in the view; counted
    /// as unread, or as bad when `UNREAD_IS_BAD`) into the masks and appends its request,
    /// which carries the decided kernel object, or its own or 0 when it failed or was not
    /// read. Both gathers ([`gather_members`], [`gather_uniform`]) inline it.
    #[inline(always)]
    pub(super) fn push<const UNREAD_IS_BAD: bool>(
        &mut self,
        reqs: &mut Vec<DispatchRequest, { MAX_CD as usize }>,
        q: usize,
        dispatch_id: u64,
        rb: u32,
        checked: Option<(bool, bool, u64)>,
    ) {
        let mut kernel_object = 0;
        if let Some((ok, swapped, ko)) = checked {
            kernel_object = ko;
            if !ok {
                self.bad |= rb;
            } else if swapped {
                self.swaps |= rb;
            }
        } else if UNREAD_IS_BAD {
            self.bad |= rb;
        } else {
            self.unread |= rb;
        }
        let _ = reqs.push(DispatchRequest {
            queue: q as u8,
            dispatch_id,
            kernel_object,
        });
    }
}

/// A kernel object the GEMM packets of one shape carry that its record lists (`own`,
/// valid when `known`), and the one decided for it: a group of one shape whose packets
/// carry the same kernel object walks the record's list once.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Listed {
    pub(super) known: bool,
    pub(super) own: [u32; 2],
    pub(super) decided: [u32; 2],
}

/// One group member's dispatch-time checks and patch on its packet `pk` (a GEMM of
/// `shape`): its kernel object is one the record lists and its completion signal (two
/// words) does not `overlap` the queue rings; then the kernel object decided for CD
/// index `cdi` is written when it differs. Returns whether the member passed, whether
/// its kernel object was swapped, and the kernel object its request carries (its own
/// when it failed).
#[inline(always)]
pub(super) fn check_member(
    pk: &mut [u32; PACKET_WORDS],
    shape: &Shape,
    cdi: usize,
    listed: &mut Listed,
    overlaps: impl Fn([u32; 2]) -> bool,
) -> (bool, bool, u64) {
    let [.., k0, k1, _, _, _, _, s0, s1] = pk;
    let k = [u32::from_le(*k0), u32::from_le(*k1)];
    if !(listed.known && k == listed.own) {
        *listed = match shape.decide(join(k), cdi) {
            Some(ko) => Listed {
                known: true,
                own: k,
                decided: [ko as u32, (ko >> 32) as u32],
            },
            None => Listed::default(),
        };
    }
    if !listed.known || overlaps([u32::from_le(*s0), u32::from_le(*s1)]) {
        return (false, false, join(k));
    }
    let d = listed.decided;
    let swapped = d != k;
    if swapped {
        *k0 = d[0].to_le();
        *k1 = d[1].to_le();
    }
    (true, swapped, join(d))
}

impl CpState {
    /// Dispatches non-GEMM heads, then decides and dispatches a GEMM group if none is
    /// still running. The decision is [`decide_by_problem`]'s rule over the candidates
    /// in priority order (the rotation), computed on the head masks: one mask per GEMM
    /// problem, so a homogeneous set costs a few word operations, not a pass over
    /// per-queue records. Out of line: its group's requests are not on the stack while
    /// the queues are classified.
    #[inline(never)]
    pub(super) fn dispatch_heads<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        n: usize,
    ) -> Result<(), E> {
        let start = usize::from(self.rr_start);
        let mut k = rotate(self.kernel_heads, start, n);
        while k != 0 {
            let q = unrotate(k.trailing_zeros() as usize, start, n);
            k &= k.wrapping_sub(1);
            let Some(&QueueState {
                next_id, head_ko, ..
            }) = self.queues.get(q)
            else {
                continue;
            };
            if !self.dispatch_one::<_, E>(p, q, next_id, head_ko, false, 1, 1, false)? {
                return Ok(());
            }
        }
        if self.gemm_group_in_flight > 0 {
            return Ok(());
        }
        let Some((chosen, cd, predicted)) = self.decide_now(start, n) else {
            return Ok(());
        };
        let baseline = cd == 0;
        let cd_index = (!baseline).then(|| GemmExt::cd_index(cd));
        let (cd, predicted) = if baseline { (1, 1) } else { (cd, predicted) };
        self.dispatch_group(cfg, p, chosen, start, n, cd_index, cd, predicted)
    }

    /// The GEMM decision over the classified heads ([`decide_by_problem`]'s rule on the
    /// head masks): the chosen queues ([`rotate`]d from `start`), the CD (0: a lone
    /// candidate, which runs its own kernel object) and the prediction; `None` without
    /// candidates. Counts the decision and moves the rotation on.
    #[inline(always)]
    pub(super) fn decide_now(&mut self, start: usize, n: usize) -> Option<(u32, u8, u8)> {
        let ns = self.shapes.len().min(MAX_SHAPES);
        // Per problem (the index of its first shape, below `ns`; a shape's problem id
        // is never above its own index): its candidates. Entry `i` of the scratch is
        // meaningful only where shape `i` is the first of its problem (set here before
        // any later shape of the problem adds to it).
        let problem_heads = &mut self.problem_heads;
        let mut all = 0u32;
        for (i, (shape, &heads)) in self
            .shapes
            .iter()
            .zip(&self.shape_heads)
            .take(ns)
            .enumerate()
        {
            all |= heads;
            let pid = usize::from(shape.problem_id);
            if let Some(m) = problem_heads.get_mut(pid) {
                if pid == i {
                    *m = heads;
                } else {
                    *m |= heads;
                }
            }
        }
        let all_queues = all;
        let all = rotate(all, start, n);
        if all == 0 {
            return None;
        }
        // The prediction of a problem is its first candidate's (in priority order):
        // its first shape's when that shape holds all its candidates.
        let first_pred = |m: u32| -> u8 {
            let q = unrotate(m.trailing_zeros() as usize, start, n);
            self.queues
                .get(q)
                .and_then(|qs| self.shapes.get(usize::from(qs.head)))
                .map_or(1, |sh| sh.predicted)
        };
        Some(if all & all.wrapping_sub(1) == 0 {
            // Nothing to decide: the packet runs with its own kernel object.
            (all, 0, 1)
        } else if let Some((chosen, cd, pred)) = self.first_size(start, n, all, all_queues) {
            self.decision_taken(start, n);
            (chosen, cd, pred)
        } else {
            let groups = self
                .problem_heads
                .iter()
                .zip(self.shapes.iter().zip(&self.shape_heads))
                .take(ns)
                .enumerate()
                .map(|(i, (&m, (shape, &own)))| {
                    if usize::from(shape.problem_id) != i || m == 0 {
                        (0, 1)
                    } else if m == own {
                        (rotate(m, start, n), shape.predicted)
                    } else {
                        let r = rotate(m, start, n);
                        (r, first_pred(r))
                    }
                });
            let (chosen, cd, predicted, _) = decide_masks(all, groups);
            self.decision_taken(start, n);
            (chosen, cd, predicted)
        })
    }

    /// Dispatches the GEMM group `chosen` (a [`rotate`]d mask from `start`), each member
    /// with the kernel object its record tuned for `cd_index` (its own for `None`).
    ///
    /// One pass over the members, through one borrow of the mapped view when there is
    /// one, reads the two fields that matter only for a packet that runs and checks them
    /// (its kernel object is one the record lists, its completion signal lies outside
    /// the queue rings), patches the kernel object when the decided one differs and
    /// builds the member's request; members outside the view get the same through the
    /// platform's word reads and writes. The requests then go to the dispatcher in one
    /// [`KernelDispatcher::dispatch_group`] call, in priority order, and the queue
    /// bookkeeping and the log follow for the accepted ones. A member that fails the
    /// checks is rejected exactly as the general path's full decode rejects it
    /// ([`CpState::reject_at_dispatch`]) and the rest of the group still dispatches, with
    /// the CD decided (the group is one smaller). When the dispatcher is busy, the
    /// members not yet accepted stay classified heads.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dispatch_group<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        chosen: u32,
        start: usize,
        n: usize,
        cd_index: Option<usize>,
        cd: u8,
        predicted: u8,
    ) -> Result<(), E> {
        const G: usize = MAX_CD as usize;
        // Per member (in priority order) its request; bit i of the masks: request i's
        // kernel object was swapped, it failed the checks (its `kernel_object` is then
        // the packet's own), it is still to be read word by word.
        let mut reqs: Vec<DispatchRequest, G> = Vec::new();
        let rings = self.rings;
        let cdi = cd_index.unwrap_or(usize::MAX);
        let (mut swaps, mut bad, mut unread) = {
            let view_base = self.view_base;
            let view = p
                .mapped_words_mut()
                .filter(|&(base, _)| base == view_base)
                .map(|(_, w)| w);
            // The common case: every member in the view and of one shape, and the rings
            // inside one 4 GiB-aligned window (their check in 32-bit words).
            let first = self
                .queues
                .get(unrotate(chosen.trailing_zeros() as usize, start, n))
                .map_or(HEAD_NONE, |qs| qs.head);
            let queues = unrotate_mask(chosen, start, n);
            let uniform = self
                .shapes
                .get(usize::from(first))
                .zip(self.shape_heads.get(usize::from(first)))
                .filter(|&(_, &heads)| queues & !(heads & self.mapped) == 0)
                .map(|(shape, _)| shape);
            match (
                view,
                uniform,
                self.ring_window_ok.then_some(self.ring_window),
            ) {
                (Some(words), Some(shape), Some(window)) => {
                    let (swaps, bad) = gather_uniform(
                        &self.queues,
                        words,
                        (chosen, start, n),
                        shape,
                        cdi,
                        window,
                        &mut reqs,
                    );
                    (swaps, bad, 0)
                }
                (view, _, _) => gather_members(
                    &self.shapes,
                    &self.queues,
                    self.mapped,
                    self.rings,
                    view,
                    (chosen, start, n),
                    cdi,
                    &mut reqs,
                ),
            }
        };
        while unread != 0 {
            // Members outside the view: word reads and writes through the platform.
            let i = unread.trailing_zeros() as usize;
            unread &= unread.wrapping_sub(1);
            let Some(r) = reqs.get(i).copied() else {
                continue;
            };
            let q = usize::from(r.queue);
            let (Some(qs), Some(qc)) = (self.queues.get(q), cfg.queues.get(q)) else {
                bad |= bit(i);
                continue;
            };
            let Some(shape) = self.shapes.get(usize::from(qs.head)) else {
                bad |= bit(i);
                continue;
            };
            let addr = qc.packet_addr(r.dispatch_id);
            let ko_addr = addr.wrapping_add(aql::offset::KERNEL_OBJECT as u64);
            let own = read_u64(p, &mut self.tally, ko_addr)?;
            let signal = read_u64(
                p,
                &mut self.tally,
                addr.wrapping_add(aql::offset::COMPLETION_SIGNAL as u64),
            )?;
            self.tally.reads = self.tally.reads.wrapping_sub(4);
            let mut kernel_object = own;
            if !shape.lists(own) || in_rings(rings, signal) {
                bad |= bit(i);
            } else {
                let ko = shape.ko_per_cd.get(cdi).copied().unwrap_or(own);
                if ko != own {
                    p.write_u32(ko_addr, ko as u32)?;
                    p.write_u32(ko_addr.wrapping_add(4), (ko >> 32) as u32)?;
                    swaps |= bit(i);
                    kernel_object = ko;
                }
            }
            if let Some(r) = reqs.get_mut(i) {
                r.kernel_object = kernel_object;
            }
        }
        self.dispatch_requests(cfg, p, &reqs, swaps, bad, cd, predicted)
    }

    /// The second half of [`CpState::dispatch_group`]: the group's requests `reqs` (bit
    /// `i` of `swaps`: request `i`'s kernel object was swapped; of `bad`: it failed the
    /// dispatch-time checks) go to the dispatcher in priority order, runs of members that
    /// passed in one call each, the failed ones rejected; then the bookkeeping.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn dispatch_requests<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        reqs: &[DispatchRequest],
        swaps: u32,
        bad: u32,
        cd: u8,
        predicted: u8,
    ) -> Result<(), E> {
        let len = reqs.len();
        // Every member's read: kernel object and signal (4 words); every swap: 2 writes.
        let t = &mut self.tally;
        t.reads = t.reads.wrapping_add(4 * len as u32);
        // (Software popcounts on rv32imac: a group swaps none or all in the common case.)
        let swapped = if swaps == 0 {
            0
        } else if swaps == active_mask(len) {
            len as u32
        } else {
            swaps.count_ones()
        };
        t.writes = t.writes.wrapping_add(2 * swapped);
        // The requests, in priority order: runs of members that passed the checks in
        // one call each (the whole group when every member did).
        let mut done = 0u32;
        let mut count = 0u32;
        let mut i = 0usize;
        while i < len {
            let Some(&r) = reqs.get(i) else {
                break;
            };
            if bad & bit(i) != 0 {
                self.reject_at_dispatch::<_, E>(
                    cfg,
                    p,
                    usize::from(r.queue),
                    r.dispatch_id,
                    r.kernel_object,
                )?;
                i += 1;
                continue;
            }
            let later = bad.checked_shr(i as u32).unwrap_or(0);
            let end = if later == 0 {
                len
            } else {
                i + later.trailing_zeros() as usize
            };
            let run = reqs.get(i..end).unwrap_or_default();
            let (accepted, result) = p.dispatch_group(run);
            let accepted = accepted.min(run.len());
            count = count.wrapping_add(accepted as u32);
            done |= self.dispatched_members(
                run.get(..accepted).unwrap_or_default(),
                swaps.checked_shr(i as u32).unwrap_or(0),
                cd,
                predicted,
            );
            i += accepted;
            match result {
                Ok(()) => {}
                Err(DispatchError::Busy) => break,
                Err(DispatchError::BadPacket) => {
                    if let Some(&r) = reqs.get(i) {
                        self.reject_head::<_, E>(
                            p,
                            usize::from(r.queue),
                            r.dispatch_id,
                            RejectReason::DispatchRefused,
                        )?;
                    }
                    i += 1;
                }
                Err(e) => return Err(e.into()),
            }
            if accepted == 0 && result.is_ok() {
                break;
            }
        }
        self.tally.dispatches = self.tally.dispatches.wrapping_add(count);
        let ns = self.shapes.len().min(MAX_SHAPES);
        for h in self.shape_heads.iter_mut().take(ns) {
            *h &= !done;
        }
        self.dispatching |= done;
        self.dirty |= done;
        self.in_group |= done;
        self.gemm_group_in_flight = self.gemm_group_in_flight.saturating_add(count as u8);
        Ok(())
    }

    /// The bookkeeping of GEMM group members `run`, accepted by the dispatcher (bit `j`
    /// of `swaps`: member `j`'s kernel object was swapped): each queue's ids,
    /// outstanding count and next packet, and its log entry. Returns the queues' bits.
    /// Out of line: few values live across its loop.
    #[inline(never)]
    pub(super) fn dispatched_members(
        &mut self,
        run: &[DispatchRequest],
        mut swaps: u32,
        cd: u8,
        predicted: u8,
    ) -> u32 {
        let mut done = 0u32;
        for r in run {
            let qi = usize::from(r.queue);
            if let Some(qs) = self.queues.get_mut(qi) {
                qs.dispatched(r.dispatch_id);
            }
            let flags = LOG_DISPATCHED | LOG_GEMM | if swaps & 1 != 0 { LOG_SWAPPED } else { 0 };
            swaps >>= 1;
            self.log_entry(LogEntry::dispatch(
                r.dispatch_id,
                r.kernel_object,
                LogEntry::meta(flags, cd, predicted) | u32::from(r.queue),
            ));
            done |= bit(qi);
        }
        done
    }

    /// Rejects the GEMM packet `id` at queue `qi`'s head (its own kernel object `own`)
    /// that failed the dispatch-time checks ([`CpState::dispatch_group`]): with the
    /// reason the full decode gives it (the general path's, so the same code as had it
    /// been checked when classified), completed with `-code`, logged, and the queue
    /// moves on to its next packet in a follow-up event.
    #[inline(never)]
    pub(super) fn reject_at_dispatch<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        qi: usize,
        id: u64,
        own: u64,
    ) -> Result<(), E> {
        let addr = cfg.queues.get(qi).map_or(0, |qc| qc.packet_addr(id));
        let reason = match self.classify_full::<_, E>(cfg, 0, addr, p)? {
            Class::Reject(r) => r,
            // The decode finds nothing wrong only if the packet changed since it was
            // read; it failed the listing or the ring check then.
            _ => RejectReason::KernelNotListed { address: own },
        };
        self.reject_head(p, qi, id, reason)
    }

    /// Completes queue `qi`'s head packet `id` with `reason`'s error value (logged); the
    /// queue's next packet (and any barrier on this signal) is looked at in a follow-up
    /// event.
    pub(super) fn reject_head<P: KernelDispatcher, E: FromCpErrors>(
        &mut self,
        p: &mut P,
        qi: usize,
        id: u64,
        reason: RejectReason,
    ) -> Result<(), E> {
        let queue = qi as u8;
        p.complete_without_dispatch(queue, id, reason.signal_value())?;
        self.completed(queue, id, CpAction::Rejected(reason));
        if let Some(q) = self.queues.get_mut(qi) {
            q.set_next(id.wrapping_add(1));
        }
        self.set_head(qi, HEAD_NONE);
        self.dirty |= bit(qi);
        self.mark_waiting_dirty();
        self.pending = true;
        Ok(())
    }

    /// One dispatch request (the kernel object already in the packet); `Ok(false)` when
    /// the dispatcher is busy (retry on a later event).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn dispatch_one<P: KernelDispatcher, E: FromCpErrors>(
        &mut self,
        p: &mut P,
        qi: usize,
        dispatch_id: u64,
        kernel_object: u64,
        gemm: bool,
        cd: u8,
        predicted_cd: u8,
        swapped: bool,
    ) -> Result<bool, E> {
        let queue = qi as u8;
        let qb = bit(qi);
        let req = DispatchRequest {
            queue,
            dispatch_id,
            kernel_object,
        };
        match p.dispatch(&req) {
            Ok(()) => {}
            Err(DispatchError::Busy) => return Ok(false),
            Err(DispatchError::BadPacket) => {
                // The dispatcher found what classification does not re-check on a later
                // packet of a known shape: the packet is rejected like any malformed one
                // (completed with its error code), and the queue moves on.
                self.reject_head::<_, E>(p, qi, dispatch_id, RejectReason::DispatchRefused)?;
                return Ok(true);
            }
            Err(e) => return Err(e.into()),
        }
        self.tally.dispatches = self.tally.dispatches.wrapping_add(1);
        if let Some(q) = self.queues.get_mut(qi) {
            if gemm {
                q.group_id = low_id(dispatch_id);
            }
            q.outstanding = q.outstanding.wrapping_add(1);
            q.set_next(dispatch_id.wrapping_add(1));
        }
        self.set_head(qi, HEAD_NONE);
        self.dispatching |= qb;
        self.dirty |= qb;
        if gemm {
            self.in_group |= qb;
            self.gemm_group_in_flight = self.gemm_group_in_flight.saturating_add(1);
        }
        self.log(
            queue,
            dispatch_id,
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
