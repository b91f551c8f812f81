//! The steady lane: the GEMM decision and its dispatch from the queues' cached keys, in one
//! pass over directly mapped memory, undone whole when anything does not hold.

use super::*;

/// What [`CpState::steady_group`] did.
pub(super) enum Steady {
    /// Not the steady state, or it did not hold: nothing decided or dispatched, every
    /// queue the lane looked at still dirty (a head it set is set again by the general
    /// path, which classifies every dirty queue and decides).
    No,
    /// Decided and the group handed to the dispatcher.
    Dispatched,
}

/// [`CpState::decide_steady`]'s answer.
pub(super) struct SteadyDecision {
    /// Chosen queues ([`rotate`]d), CD and prediction, as [`decide_first_size`]'s.
    pub(super) decided: (u32, u8, u8),
    /// The dirty queues of the decision's range: their keys are to be checked.
    pub(super) check: u32,
    /// How many (`check`'s bits).
    pub(super) due: u32,
    /// The chosen queues in queue order.
    pub(super) members: u32,
    /// The members' shape when they are all expected to be one.
    pub(super) shape: Option<u8>,
    /// The first candidate in priority order: the group's first member.
    pub(super) first: usize,
}

/// [`gather_members`]' common case: every member of `chosen` is in the view `packets`
/// and is a GEMM of `shape`, and the rings lie in one 4 GiB-aligned window (`window`,
/// [`rings_window`]). The same checks, patch and requests, with the shape's kernel
/// object decided once per kernel object the packets carry (once for the whole group
/// when they carry the same). Returns the swapped and failed masks.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_uniform(
    queues: &[QueueState; MAX_QUEUES],
    words: &mut [u32],
    (chosen, start, n): (u32, usize, usize),
    shape: &Shape,
    cdi: usize,
    [ring_lo, ring_hi, ring_len]: [u32; 3],
    reqs: &mut Vec<DispatchRequest, { MAX_CD as usize }>,
) -> (u32, u32) {
    let mut masks = MemberMasks::default();
    let mut listed = Listed::default();
    let mut rb = 1u32;
    let mut m = chosen;
    while m != 0 && !reqs.is_full() {
        let q = unrotate(m.trailing_zeros() as usize, start, n);
        m &= m.wrapping_sub(1);
        let Some(qs) = queues.get(q) else {
            continue;
        };
        let packet = words
            .as_chunks_mut::<PACKET_WORDS>()
            .0
            .get_mut(qs.view_slot as usize);
        let checked = packet.map(|pk| {
            check_member(pk, shape, cdi, &mut listed, |s| {
                s[1] == ring_hi && s[0].wrapping_sub(ring_lo) < ring_len
            })
        });
        masks.push::<true>(reqs, q, qs.next_id, rb, checked);
        rb <<= 1;
    }
    (masks.swaps, masks.bad)
}

impl CpState {
    /// The GEMM decision and its dispatch in the steady state, on directly mapped
    /// memory, in one pass over the queues it needs.
    ///
    /// Every dirty queue is expected to hold, at its head, a GEMM of the shape its cached
    /// key names (`QueueState::last_shape`); the clean ones keep their classified heads.
    /// The decision is taken on those expected heads first ([`decide_first_size`] on the
    /// masks, no queue read), which tells how far in priority order it depends on them:
    /// up to its `p`-th member when the first candidate's prediction `p` is in `2..16`
    /// and its size has `p` candidates, everywhere otherwise (at least the first
    /// [`DECISION_PREFIX_QUEUES`] positions: fewer would save little and leave more for
    /// the follow-up). The dirty queues in that range have their keys checked (the
    /// members' where their packets are read for the dispatch); when every one holds,
    /// the expected heads are the heads and the decision is the one a scan of every
    /// queue takes. The dirty queues beyond the range are looked at in a follow-up event
    /// (`pending`).
    ///
    /// Why the queues beyond the range cannot change it: they come later in priority
    /// order, so they change neither the first candidate nor the first `p` of its size;
    /// with another size among all the candidates there are more than `p` of them, so
    /// [`decide_first_size`] takes those `p` whatever the later queues hold.
    ///
    /// The members (one shape, one kernel object, checked as at any dispatch) are
    /// patched, booked, logged and their requests written into the dispatcher's FIFO
    /// ([`KernelDispatcher::mapped_fifo`]) as they are read; the dispatcher then takes
    /// the group whole ([`KernelDispatcher::dispatch_pushed`]) or refuses it.
    /// [`Steady::No`] when anything else holds (no FIFO, a key, the general rule
    /// [`decide_masks`], members of several shapes or kernel objects, a member failing
    /// its checks, no room in the log or the FIFO, a refused group): whatever was done
    /// to the members is undone ([`CpState::undo_steady`]), the queues settled so far
    /// stay settled, and the general path classifies every queue still dirty and
    /// decides. The caller checks that no group is in flight, no non-GEMM head waits,
    /// and every queue of `todo` is in the view. Inline in its one caller,
    /// [`CpState::steady_or_general`], whose frame is the lane's.
    #[inline(always)]
    pub(super) fn steady_group<P: DeviceMemory + KernelDispatcher>(
        &mut self,
        p: &mut P,
        todo: u32,
        n: usize,
    ) -> Steady {
        let Some(SteadyDecision {
            decided: d,
            check,
            due,
            members: unrotated,
            shape: uniform,
            first: q0,
        }) = self.decide_steady(todo, n)
        else {
            return Steady::No;
        };
        let (chosen, cd, pred) = d;
        let start = usize::from(self.rr_start);
        // Until every key of the range has held the decision rests on expected heads: any
        // way out before that is `Steady::No` (the general path classifies what is still
        // dirty, every queue of the range among them, and decides again).
        let (Some(first), Some([ring_lo, ring_hi, ring_len])) =
            (uniform, self.ring_window_ok.then_some(self.ring_window))
        else {
            return Steady::No;
        };
        let (Some(shape), Some(MappedFifo { base, words, fifo })) =
            (self.shapes.get(usize::from(first)), p.mapped_fifo())
        else {
            return Steady::No;
        };
        if base != self.view_base {
            return Steady::No;
        }
        let packets = words.as_chunks_mut::<PACKET_WORDS>().0;
        // Room in the log for every member's record: the bookkeeping below is undone
        // when the group does not go out, and a dropped record could not be.
        if u32::from(cd)
            > (LOG_CAPACITY as u32).wrapping_sub(self.log.tail.wrapping_sub(self.log.head))
        {
            return Steady::No;
        }
        let cdi = GemmExt::cd_index(cd);
        // The kernel object the members carry (the first's; every other must carry the
        // same) and the one decided for it.
        let Some(own) = self
            .queues
            .get(q0)
            .and_then(|qs| packets.get(qs.view_slot as usize))
            .map(|pk| [u32::from_le(pk[W_KO]), u32::from_le(pk[W_KO + 1])])
        else {
            return Steady::No;
        };
        let Some(ko) = shape.decide_inline(join(own), cdi) else {
            return Steady::No;
        };
        let decided = [ko as u32, (ko >> 32) as u32];
        let swapped = decided != own;
        let kind = LOG_DISPATCHED | LOG_GEMM | if swapped { LOG_SWAPPED } else { 0 };
        let meta = LogEntry::meta(kind, cd, pred);
        // Where this group's requests start in the dispatcher's FIFO.
        let from = fifo.len();
        // (Through `black_box`: where the table sits more than 2 KiB into the state, as
        // on the HiFive1 build, LLVM's loop strength reduction otherwise gives every field
        // the walks touch an induction variable of its own, a dozen adds per queue and
        // the rest spilled.)
        let Some((wrapped, first_part)) = core::hint::black_box(self.queues.get_mut(..n))
            .and_then(|qs| qs.split_at_mut_checked(start))
        else {
            return Steady::No;
        };
        // The log's records go in at `tail`, written back after the walks (the room was
        // checked above).
        let log = &mut self.log.buf;
        let mut tail = self.log.tail;
        // Queue `qs`'s part (`member` or only due); `false` when a check fails. (A macro:
        // both walks below inline it.)
        macro_rules! visit {
            ($qs:expr, $member:expr) => {{
                let (qs, member): (&mut QueueState, bool) = ($qs, $member);
                'visit: {
                    let Some(
                        &mut [header, _, _, _, _, _, _, _, ref mut k0, ref mut k1, _, _, e0, e1, s0, s1],
                    ) = packets.get_mut(qs.view_slot as usize)
                    else {
                        break 'visit false;
                    };
                    if u32::from_le(header) != qs.key_word
                        || u32::from_le(e0) != qs.key_ext[0]
                        || u32::from_le(e1) != qs.key_ext[1]
                    {
                        break 'visit false;
                    }
                    if !member {
                        qs.head = qs.last_shape;
                        break 'visit true;
                    }
                    if [u32::from_le(*k0), u32::from_le(*k1)] != own
                        // The completion signal must not overlap the rings (`rings_window`).
                        || (u32::from_le(s1) == ring_hi && u32::from_le(s0).wrapping_sub(ring_lo) < ring_len)
                    {
                        break 'visit false;
                    }
                    let id = qs.next_id;
                    if fifo
                        .push(DispatchRequest {
                            queue: qs.index,
                            dispatch_id: id,
                            kernel_object: ko,
                        })
                        .is_err()
                    {
                        break 'visit false;
                    }
                    *k0 = decided[0].to_le();
                    *k1 = decided[1].to_le();
                    qs.dispatched(id);
                    LogRing::put(log, tail, LogEntry::dispatch(id, ko, meta | u32::from(qs.index)));
                    tail = tail.wrapping_add(1);
                    true
                }
            }};
        }
        // The queues of the range in priority order, from `start` to the last queue and
        // then from queue 0 (two plain walks: no wrap-around per step): bit 0 of `v` is
        // the queue being visited (a member, or its key due: dirty), of `m` its being a
        // member. A member is checked, patched, booked, logged and its request pushed
        // into the dispatcher's FIFO as it is read, another dirty queue's head is set as
        // its key holds (one pass that knows where everything is); when a later check
        // fails, the members' part is undone (`undo_steady`; the heads set stay dirty:
        // the general path sets them again). Every member's key is checked, the clean
        // ones' too (a clean head's key is its shape's: a mismatch only sends the
        // decision the general way).
        let mut m = chosen;
        let mut v = m | rotate(check, start, n);
        let mut failed = false;
        // One walk over a part of the table (`$done`: the label to leave both walks by).
        macro_rules! walk {
            ($done:lifetime, $part:expr) => {
                for qs in $part.iter_mut() {
                    if v == 0 {
                        break $done;
                    }
                    let (visited, member) = (v & 1 != 0, m & 1 != 0);
                    v >>= 1;
                    m >>= 1;
                    if visited && !visit!(qs, member) {
                        failed = true;
                        break $done;
                    }
                }
            };
        }
        'walk: {
            walk!('walk, first_part);
            walk!('walk, wrapped);
        }
        self.log.tail = tail;
        let pushed = fifo.len().wrapping_sub(from);
        if failed {
            let booked = fifo
                .get(from..)
                .unwrap_or_default()
                .iter()
                .fold(0, |b, r| b | bit(usize::from(r.queue)));
            fifo.truncate(from);
            self.undo_steady(booked, first, Some(packets), own);
            return Steady::No;
        }
        if p.dispatch_pushed(from).is_err() {
            // Refused whole: taken back, and the decision goes the general way (which
            // meets the refusal again and handles it as at any dispatch).
            let view = p.mapped_fifo();
            let packets = view.map(|MappedFifo { words, fifo, .. }| {
                fifo.truncate(from);
                words.as_chunks_mut::<PACKET_WORDS>().0
            });
            self.undo_steady(unrotated, first, packets, own);
            return Steady::No;
        }
        // Every key held: the expected heads are the heads. The other dirty queues of the
        // range are classified heads now, the members dispatched.
        let others = check & !unrotated;
        let ns = self.shapes.len().min(MAX_SHAPES);
        for (heads, &last) in self.shape_heads.iter_mut().zip(&self.last_masks).take(ns) {
            *heads |= others & last;
        }
        self.dirty = (self.dirty & !check) | unrotated;
        self.waiting &= !check;
        // (The scan cleared `pending` just before calling the lane.)
        self.pending = todo & !check != 0;
        // As the fast path counts them: 3 words per key read (the clean members' too),
        // each dirty queue's a mapped visit and a packet inspected.
        // (Every member is due or clean: the keys read are the due queues' and the clean
        // members'.)
        let count = pushed as u32;
        // (Usually every member is due.)
        let clean_members = if unrotated & !check == 0 {
            0
        } else {
            (unrotated & !check).count_ones()
        };
        self.tally.count_key_visits(due);
        // As `dispatch_requests` counts: per member 4 words read, per swap 2 written.
        let t = &mut self.tally;
        t.reads = t.reads.wrapping_add(3 * clean_members + 4 * count);
        if swapped {
            t.writes = t.writes.wrapping_add(2 * count);
        }
        t.dispatches = t.dispatches.wrapping_add(count);
        t.mapped_dispatches = t.mapped_dispatches.wrapping_add(count);
        self.decision_taken(start, n);
        if let Some(h) = self.shape_heads.get_mut(usize::from(first)) {
            *h &= !unrotated;
        }
        self.dispatching |= unrotated;
        self.in_group |= unrotated;
        // (No group was in flight: the scan's condition for the lane.)
        self.gemm_group_in_flight = count as u8;
        Steady::Dispatched
    }

    /// Undoes [`CpState::steady_group`]'s bookkeeping of the members `booked` (bit mask),
    /// the last records it logged: each queue's next packet, outstanding count and
    /// classified head (`head`, the group's shape) as they were, and its packet's kernel
    /// object back to `own` when the view is given. Rare: a member that fails the
    /// checks, or a dispatcher that refuses the group.
    #[inline(never)]
    pub(super) fn undo_steady(
        &mut self,
        booked: u32,
        head: u8,
        mut packets: Option<&mut [[u32; PACKET_WORDS]]>,
        own: [u32; 2],
    ) {
        let mut b = booked;
        while b != 0 {
            let q = b.trailing_zeros() as usize;
            b &= b.wrapping_sub(1);
            if let Some(qs) = self.queues.get_mut(q) {
                qs.outstanding = qs.outstanding.wrapping_sub(1);
                qs.set_next(qs.next_id.wrapping_sub(1));
                qs.head = head;
                if let Some(pk) = packets
                    .as_deref_mut()
                    .and_then(|pk| pk.get_mut(qs.view_slot as usize))
                {
                    pk[W_KO] = own[0].to_le();
                    pk[W_KO + 1] = own[1].to_le();
                }
            }
        }
        self.log.tail = self.log.tail.wrapping_sub(booked.count_ones());
    }

    /// [`CpState::steady_group`]'s decision on the expected heads: no queue read, no state
    /// changed.
    #[inline(always)]
    pub(super) fn decide_steady(&self, todo: u32, n: usize) -> Option<SteadyDecision> {
        let start = usize::from(self.rr_start);
        let ns = self.shapes.len().min(MAX_SHAPES);
        // A shape's expected heads: its classified heads that stay, and the dirty queues
        // its key names.
        let expected = |heads: u32, last: u32| (heads & !todo) | (last & todo);
        // Every candidate, and the dirty queues with a key.
        let mut all = 0u32;
        let mut keyed = 0u32;
        for (&heads, &last) in self.shape_heads.iter().zip(&self.last_masks).take(ns) {
            all |= expected(heads, last);
            keyed |= last;
        }
        // The first candidate in priority order: the first at or after `start`, else the
        // first from queue 0. (A lone candidate runs its own kernel object:
        // `decide_now`'s.)
        let after = all & !active_mask(start);
        let q = if after != 0 { after } else { all }.trailing_zeros() as usize;
        if all & all.wrapping_sub(1) == 0 {
            return None;
        }
        let first = self.queues.get(q).map(|qs| {
            if todo & bit(q) != 0 {
                qs.last_shape
            } else {
                qs.head
            }
        })?;
        let fi = usize::from(first);
        let (shape, &heads, &last) = (
            self.shapes.get(fi)?,
            self.shape_heads.get(fi)?,
            self.last_masks.get(fi)?,
        );
        let pred = shape.predicted;
        let own = expected(heads, last);
        // The candidates of the first's problem (its own, when no other shape shares it).
        let group = if shape.sole {
            own
        } else {
            let pid = shape.problem_id;
            let mut group = 0u32;
            for ((sh, &heads), &last) in self
                .shapes
                .iter()
                .zip(&self.shape_heads)
                .zip(&self.last_masks)
                .take(ns)
            {
                if sh.problem_id == pid {
                    group |= expected(heads, last);
                }
            }
            group
        };
        let all_r = rotate(all, start, n);
        let group_r = if group == all {
            all_r
        } else {
            rotate(group, start, n)
        };
        // How far the decision depends on the heads: through its `pred`-th member,
        // when there is one (then the decision is its first `pred` members).
        let mut range = n;
        let mut early = None;
        if (2..MAX_CD).contains(&pred) {
            // (The `pred - 1` lowest members cleared, two per step: `pred` is below
            // `MAX_CD`, so this is a few steps on a register count.)
            let mut rest = group_r;
            let mut k = u32::from(pred) - 1;
            while k >= 2 {
                rest &= rest.wrapping_sub(1);
                rest &= rest.wrapping_sub(1);
                k -= 2;
            }
            if k != 0 {
                rest &= rest.wrapping_sub(1);
            }
            if rest != 0 {
                range = (rest.trailing_zeros() as usize + 1)
                    .max(DECISION_PREFIX_QUEUES)
                    .min(n);
                early = Some((group_r & !(rest & rest.wrapping_sub(1)), pred, pred));
            }
        }
        let window = unrotate_mask(active_mask(range), start, n);
        let check = todo & window;
        if check & !keyed != 0 {
            return None;
        }
        // (The window holds `range` queues: usually every one is dirty, and no bits
        // need counting.)
        let due = if check == window {
            range as u32
        } else {
            check.count_ones()
        };
        let decided = match early {
            Some(d) => d,
            None => decide_first_size(all_r, group_r, pred)?,
        };
        let members = unrotate_mask(decided.0, start, n);
        // The group is one shape (`first`'s, expected): its members' keys name it, or
        // their heads are classified as it (so when the problem is the shape's alone).
        let uniform = shape.sole || members & !own == 0;
        Some(SteadyDecision {
            decided,
            check,
            due,
            members,
            shape: uniform.then_some(first),
            first: q,
        })
    }
}
