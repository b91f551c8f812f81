//! The scan of an event handler: which path it takes (the steady lane or the general one)
//! and the general path's classification of every dirty queue head (the word-wise pass
//! over mapped memory first, then the packet-by-packet walk).

use super::*;

/// Computes where queue `qs`'s words sit in the mapped view `words` (device address
/// `base`): 32-bit indices of its write index and ring, and reads its read index on the
/// first visit since configuration. False when they are not (all) in the view.
#[inline(never)]
pub(super) fn map_queue(
    qs: &mut QueueState,
    qc: Option<&QueueConfig>,
    base: DevAddr,
    words: &[u32],
) -> bool {
    let Some(qc) = qc else {
        return false;
    };
    let word = |i: usize| words.get(i).map(|&w| u32::from_le(w));
    let ri = word_index(base, qc.read_index_addr);
    let (Some(wi), Some(ring), Some(lo), Some(hi)) = (
        word_index(base, qc.write_index_addr),
        word_index(base, qc.ring_base),
        ri.and_then(word),
        ri.and_then(|i| word(i.wrapping_add(1))),
    ) else {
        return false;
    };
    let ring_end = ring.saturating_add(qc.size_packets as usize * PACKET_WORDS);
    if ring_end > words.len()
        || wi >= words.len()
        || ring_end > u32::MAX as usize
        || ring % PACKET_WORDS != 0
    {
        return false;
    }
    qs.view_write = wi as u32;
    qs.view_ring = (ring / PACKET_WORDS) as u32;
    qs.ring_mask = qc.size_packets.wrapping_sub(1);
    let mut next = qs.next_id;
    if !qs.synced {
        next = next.max(u64::from(lo) | (u64::from(hi) << 32));
        qs.synced = true;
    }
    qs.set_next(next);
    true
}

impl CpState {
    /// The handler's work once the event has set its masks: the steady lane when it may
    /// run ([`CpState::steady_or_general`]), the general path otherwise. Inline in
    /// `on_event`, which then ends in one call and saves no registers but `ra`.
    #[inline(always)]
    pub(super) fn scan<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
    ) -> Result<(), E> {
        self.pending = false;
        self.completions_this_scan = 0;
        // (The handler is counted by the path it takes, `count_handler`: no call here
        // but the last, so the entry saves no registers.)
        let n = cfg.queues.len().min(MAX_QUEUES);
        let todo = self.dirty & !self.dispatching & active_mask(n);
        // The steady state, on mapped memory: the decision from the queues' cached keys,
        // checked only as far as it depends on them (`steady_group`). It completes no
        // packet, so no barrier needs another look.
        if todo != 0
            && todo & !self.mapped == 0
            && self.gemm_group_in_flight == 0
            && self.kernel_heads == 0
        {
            return self.steady_or_general(cfg, p, todo, n);
        }
        self.scan_general(cfg, p, n, true)
    }

    /// Counts a handler. A handler adds far less than 2^18 to any tally count (a few
    /// thousand words at most), so folding every 2^12 handlers keeps every count below
    /// 2^30.
    #[inline(always)]
    pub(super) fn count_handler(&mut self) {
        self.tally.handlers = self.tally.handlers.wrapping_add(1);
        if self.tally.handlers >= 1 << 12 {
            self.fold_tally();
        }
    }

    /// Adds the tally to the work totals (every 2^12 handlers; out of line).
    #[cold]
    #[inline(never)]
    pub(super) fn fold_tally(&mut self) {
        let mut tally = self.tally;
        tally.fold_into(&mut self.work);
        self.tally = tally;
    }

    /// The steady lane ([`CpState::steady_group`]) and, when it does not dispatch, the
    /// general path. One function for both, whose frame is the handler's: the lane pays
    /// for one prologue. The general path is also reached without it (from
    /// [`CpState::scan`]), so a cold decision's deep calls do not sit under the lane's
    /// frame.
    #[inline(never)]
    pub(super) fn steady_or_general<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        todo: u32,
        n: usize,
    ) -> Result<(), E> {
        self.count_handler();
        if let Steady::Dispatched = self.steady_group(p, todo, n) {
            return Ok(());
        }
        // (Counted above.)
        self.scan_general(cfg, p, n, false)
    }

    /// The rest of a scan ([`CpState::scan`]): every dirty queue classified, then the
    /// decision and the dispatches; the handler counted first when `count`. Out of
    /// line: the steady lane's handler does not save the registers it needs.
    #[inline(never)]
    pub(super) fn scan_general<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        n: usize,
        count: bool,
    ) -> Result<(), E> {
        if count {
            self.count_handler();
        }
        let mut budget = MAX_PACKETS_PER_EVENT;
        // (The dirty queues again, rather than the scan's mask kept live across the
        // steady lane: that costs the steady decision more than this costs here.)
        let todo = self.dirty & !self.dispatching & active_mask(n);
        self.classify_queues::<_, E>(cfg, p, todo, n, &mut budget)?;
        if self.completions_this_scan > 0 && self.waiting != 0 {
            // This scan completed packets whose signals a barrier (possibly in a queue
            // already visited) may wait on: look again in a follow-up event.
            self.mark_waiting_dirty();
            self.pending = true;
        }
        if self.kernel_heads == 0 && self.gemm_group_in_flight > 0 {
            // Nothing `dispatch_heads` could start (its first two steps).
            return Ok(());
        }
        self.dispatch_heads(cfg, p, n)
    }

    /// Classifies the heads of the queues of `todo` (bit mask): the word-wise pass over
    /// directly mapped memory first (queues whose head is a GEMM of a known shape, or
    /// that have nothing new, are settled there), the general path, in priority order
    /// and within the event's packet `budget`, for the rest.
    #[inline(always)]
    pub(super) fn classify_queues<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        p: &mut P,
        todo: u32,
        n: usize,
        budget: &mut usize,
    ) -> Result<(), E> {
        let slow = match p.mapped_words() {
            Some((base, words)) if todo != 0 => {
                if base != self.view_base {
                    // A different view: the queues' indices into it are recomputed.
                    self.view_base = base;
                    self.mapped = 0;
                    for q in self.queues.iter_mut() {
                        q.view_write = u32::MAX;
                    }
                }
                self.fast_scan(cfg, base, words, todo)
            }
            Some(_) => 0,
            None => todo,
        };
        if slow != 0 {
            let start = usize::from(self.rr_start);
            let mut m = rotate(slow, start, n);
            while m != 0 {
                let j = m.trailing_zeros() as usize;
                m &= m.wrapping_sub(1);
                self.head_of::<_, E>(cfg, unrotate(j, start, n), p, budget)?;
            }
        }
        Ok(())
    }

    /// The common case of a scan, on directly mapped memory: for every queue of `todo`,
    /// a head slot whose header word and GEMM record address equal the queue's cached
    /// shape key (`QueueState::key_*`, set when that shape was last classified on the
    /// queue) holds a published GEMM of that shape, which becomes the queue's head:
    /// three loads and three compares, no decode, no other field read, not even the
    /// write index (the header is the publication: see the loop). What only matters for
    /// a packet that runs (its kernel object is one the record lists, its completion
    /// signal lies outside the rings) is checked when it is dispatched
    /// ([`CpState::dispatch_group`]). Every other case (the write index read) is the
    /// second pass's.
    /// Returns the queues (bit mask) that need the general path: anything else at the
    /// head, or words outside the view.
    pub(super) fn fast_scan(
        &mut self,
        cfg: &CpConfig,
        base: DevAddr,
        words: &[u32],
        todo: u32,
    ) -> u32 {
        let packets = words.as_chunks::<PACKET_WORDS>().0;
        let mut slow = 0u32;
        // GEMM heads classified here, queues waiting (unpublished slot or barrier bit),
        // queues with nothing published.
        let mut hits = 0u32;
        let mut waits = 0u32;
        let mut empty = 0u32;
        // Packets with the barrier bit whose key matched, unpublished slots, first
        // visits (read index read).
        let mut settled_barrier = 0u32;
        let mut unpublished = 0u32;
        let mut first_visits = 0u32;
        // Queues whose words are not (all) in the view: the general path, not counted
        // as mapped visits.
        let mut unmapped = 0u32;
        // First visits since configuration (or since the view moved): where each
        // queue's words sit in the view.
        let mut new = todo & !self.mapped;
        while new != 0 {
            let q = new.trailing_zeros() as usize;
            new &= new.wrapping_sub(1);
            let ok = self
                .queues
                .get_mut(q)
                .is_some_and(|qs| map_queue(qs, cfg.queues.get(q).as_ref(), base, words));
            if ok {
                self.mapped |= bit(q);
                first_visits += 1;
            } else {
                unmapped |= bit(q);
            }
        }
        // The common case first, queue by queue (lowest first; the order does not
        // matter: each queue's head is settled on its own): the slot at the head holds a
        // packet whose header word and record address are the queue's key. The header
        // alone says the packet is published: a producer writes it last, and the packet
        // processor writes INVALID back into every slot it consumes (HSA: "a packet
        // processor must not process a packet of this type"), so a slot the producer has
        // not published again holds INVALID, never an older packet's header. The write
        // index is not read here. Anything else (an unpublished slot, the barrier bit, an
        // unknown packet, a head classified otherwise) is `rare`, looked at again below,
        // where the write index is read.
        let mut rare = 0u32;
        let mut m = todo & self.mapped;
        let mut qi = 0usize;
        while m != 0 {
            let this = m & 1 != 0;
            let b = bit(qi);
            let q = qi;
            m >>= 1;
            qi += 1;
            if !this {
                continue;
            }
            let Some(qs) = self.queues.get_mut(q) else {
                break;
            };
            // Inside the ring, which lies inside the view (checked when the indices
            // were computed).
            let Some(&[header, _, _, _, _, _, _, _, _, _, _, _, e0, e1, _, _]) =
                packets.get(qs.view_slot as usize)
            else {
                rare |= b;
                continue;
            };
            if u32::from_le(header) != qs.key_word
                || u32::from_le(e0) != qs.key_ext[0]
                || u32::from_le(e1) != qs.key_ext[1]
            {
                rare |= b;
                continue;
            }
            qs.head = qs.last_shape;
            hits |= b;
        }
        // Write indices read by the second pass (one per queue it visits in the view).
        let mut rare_visits = 0u32;
        // The rest, case by case.
        while rare != 0 {
            let q = rare.trailing_zeros() as usize;
            rare &= rare.wrapping_sub(1);
            let b = bit(q);
            let Some(qs) = self.queues.get_mut(q) else {
                continue;
            };
            let Some(&w_lo) = words.get(qs.view_write as usize) else {
                unmapped |= b;
                continue;
            };
            rare_visits += 1;
            let avail = u32::from_le(w_lo).wrapping_sub(qs.next_id as u32);
            if avail.wrapping_sub(1) > qs.ring_mask {
                // Nothing published, or a garbage index (the general path reads it
                // whole).
                if avail == 0 {
                    empty |= b;
                } else {
                    slow |= b;
                }
                continue;
            }
            if qs.head != HEAD_NONE {
                // Classified before (not by its key) and still at the head.
                continue;
            }
            let Some(&[header, _, _, _, _, _, _, _, _, _, _, _, e0, e1, _, _]) =
                packets.get(qs.view_slot as usize)
            else {
                slow |= b;
                continue;
            };
            let header = u32::from_le(header);
            if header & !BARRIER_BIT != qs.key_word
                || u32::from_le(e0) != qs.key_ext[0]
                || u32::from_le(e1) != qs.key_ext[1]
            {
                if header & 0xFF == PacketType::Invalid as u32 {
                    // Not published yet: the producer writes the header last.
                    unpublished += 1;
                    waits |= b;
                } else {
                    slow |= b;
                }
                continue;
            }
            // The key, with the barrier bit set.
            settled_barrier |= b;
            if qs.outstanding > 0 {
                waits |= b;
                continue;
            }
            qs.head = qs.last_shape;
            hits |= b;
        }
        // The queues of each shape classified here: those whose cached key is that
        // shape's.
        let ns = self.shapes.len().min(MAX_SHAPES);
        if hits != 0 {
            for (heads, &last) in self.shape_heads.iter_mut().zip(&self.last_masks).take(ns) {
                *heads |= hits & last;
            }
        }
        // Per visit 3 words of the head slot (header, record address), per visit of the
        // second pass the write index, per first visit the read index. Packets
        // inspected: every GEMM head and barrier wait classified here, every
        // unpublished slot. (Software popcounts on rv32imac: the common case, every
        // visited queue a GEMM head and no barrier wait, counts once.)
        let visited_mask = todo & !unmapped;
        let visited = visited_mask.count_ones();
        let barrier_waits = waits & settled_barrier;
        let settled = if hits == visited_mask {
            visited
        } else {
            hits.count_ones()
        }
        .wrapping_add(if barrier_waits == 0 {
            0
        } else {
            barrier_waits.count_ones()
        });
        let mut e = empty;
        while e != 0 {
            // Rare: a head classified before whose write index went back.
            let q = e.trailing_zeros() as usize;
            e &= e.wrapping_sub(1);
            self.set_head(q, HEAD_NONE);
        }
        let clean = todo & !(slow | unmapped);
        self.dirty &= !clean;
        self.waiting = (self.waiting & !(empty | hits)) | waits;
        let t = &mut self.tally;
        t.reads = t
            .reads
            .wrapping_add(visited.wrapping_mul(3))
            .wrapping_add(rare_visits)
            .wrapping_add(first_visits.wrapping_mul(2));
        t.inspected = t.inspected.wrapping_add(settled).wrapping_add(unpublished);
        t.mapped_visits = t.mapped_visits.wrapping_add(visited);
        slow | unmapped
    }

    /// Brings queue `qi`'s head up to date: walks from the first unhandled packet until
    /// one that must run or wait, rejecting and resolving packets on the way (recorded in
    /// the queue's state and the head masks).
    pub(super) fn head_of<P: DeviceMemory + KernelDispatcher, E: FromCpErrors>(
        &mut self,
        cfg: &CpConfig,
        qi: usize,
        p: &mut P,
        budget: &mut usize,
    ) -> Result<(), E> {
        let qb = bit(qi);
        let (Some(qc), Some(qs)) = (cfg.queues.get(qi), self.queues.get_mut(qi)) else {
            return Ok(());
        };
        if self.dispatching & qb != 0 || self.dirty & qb == 0 {
            return Ok(());
        }
        self.tally.visits = self.tally.visits.wrapping_add(1);
        if !qs.synced {
            let read_id = read_u64(p, &mut self.tally, qc.read_index_addr)?;
            let next = qs.next_id.max(read_id);
            qs.set_next(next);
            qs.synced = true;
        }
        // Fewer packets than the ring holds can be published: the low word of the write
        // index gives the exact count unless the index is garbage (then read it whole).
        let mut id = qs.next_id;
        let w_lo = read_u32(p, &mut self.tally, qc.write_index_addr)?;
        let avail = w_lo.wrapping_sub(id as u32);
        let write_id = if avail <= qc.size_packets {
            id.wrapping_add(u64::from(avail))
        } else {
            read_u64(p, &mut self.tally, qc.write_index_addr)?
        };
        let queue = qi as u8;
        // Bounded: at most the per-event budget of packets.
        while id < write_id {
            let Some(qs) = self.queues.get(qi) else {
                return Ok(());
            };
            if qs.head != HEAD_NONE {
                self.dirty &= !qb;
                return Ok(());
            }
            if *budget == 0 {
                self.pending = true;
                return Ok(());
            }
            *budget -= 1;
            let outstanding = qs.outstanding;
            let class = self.classify::<_, E>(cfg, &qc, outstanding, id, p)?;
            match class {
                Class::Wait => {
                    self.dirty &= !qb;
                    self.waiting |= qb;
                    self.set_head(qi, HEAD_NONE);
                    return Ok(());
                }
                Class::Gemm(shape) => {
                    self.dirty &= !qb;
                    self.waiting &= !qb;
                    self.set_head(qi, shape);
                    // The queue's shape key: the fast path classifies the next packet
                    // with this header word and record as this shape.
                    let key = self
                        .shapes
                        .get(usize::from(shape))
                        .map_or((NO_KEY, 0), |s| (s.packet_word, s.ext_addr));
                    if let Some(qs) = self.queues.get_mut(qi) {
                        if let Some(m) = self.last_masks.get_mut(usize::from(qs.last_shape)) {
                            *m &= !qb;
                        }
                        if let Some(m) = self.last_masks.get_mut(usize::from(shape)) {
                            *m |= qb;
                        }
                        qs.last_shape = shape;
                        qs.key_word = key.0;
                        qs.key_ext = [key.1 as u32, (key.1 >> 32) as u32];
                    }
                    return Ok(());
                }
                Class::Kernel(ko) => {
                    self.dirty &= !qb;
                    self.waiting &= !qb;
                    self.set_head(qi, HEAD_KERNEL);
                    if let Some(qs) = self.queues.get_mut(qi) {
                        qs.head_ko = ko;
                    }
                    return Ok(());
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
            id = id.wrapping_add(1);
            if let Some(q) = self.queues.get_mut(qi) {
                q.set_next(id);
            }
        }
        self.dirty &= !qb;
        self.waiting &= !qb;
        self.set_head(qi, HEAD_NONE);
        Ok(())
    }
}
