//! Finished requests waiting for their last data beat, handed out in time order.
//!
//! The same order as a [`crate::sim::EventQueue`] of [`MemCompletion`]s (by cycle, then
//! by insertion). A request finishes a fixed data latency after its last column command
//! (CL + BL for a read, CWL + BL for a write or update) and the controllers are stepped
//! in time order, so completions arrive almost sorted: a new one belongs at the back or
//! a few places before it (a read queued after a write of a later cycle). The queue is
//! therefore a deque kept sorted by (cycle, insertion), inserting from the back; no
//! heap sift per completion (the binary heap this replaces was 7-8 % of an all-GPU T3
//! run). Any arrival order still gives the exact (cycle, insertion) order: an entry
//! that belongs far ahead costs a longer walk, never a different result.

use std::collections::VecDeque;

use super::MemCompletion;
use crate::hbm::Cycle;

/// A min-queue of completions keyed by (cycle, insertion order).
#[derive(Debug, Clone, Default)]
pub(crate) struct CompletionQueue {
    /// (cycle, completion), sorted by cycle; equal cycles in insertion order.
    queue: VecDeque<(Cycle, MemCompletion)>,
}

impl CompletionQueue {
    /// Queues `c` to be handed out at cycle `at`: after every queued completion of a
    /// cycle at or before `at` (insertion order among equal cycles), before the rest.
    #[inline]
    pub(crate) fn push(&mut self, at: Cycle, c: MemCompletion) {
        let mut i = self.queue.len();
        while i > 0 && self.queue.get(i - 1).is_some_and(|&(t, _)| t > at) {
            i -= 1;
        }
        if i == self.queue.len() {
            self.queue.push_back((at, c));
        } else {
            self.queue.insert(i, (at, c));
        }
    }

    /// The earliest completion if it is due at or before `until`, with its cycle.
    #[inline]
    pub(crate) fn pop_due(&mut self, until: Cycle) -> Option<(Cycle, MemCompletion)> {
        if self.queue.front()?.0 > until {
            return None;
        }
        self.queue.pop_front()
    }

    /// The cycle of the earliest completion.
    #[inline]
    pub(crate) fn peek_tick(&self) -> Option<Cycle> {
        self.queue.front().map(|r| r.0)
    }

    /// Whether nothing waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memctrl::{Access, RequestId, TrafficClass};

    fn c(id: u64) -> MemCompletion {
        MemCompletion {
            id: RequestId(id),
            addr: 0,
            access: Access::Read,
            class: TrafficClass::Compute,
            source: None,
            arrival: 0,
            accepted: 0,
            finish: 0,
        }
    }

    #[test]
    fn hands_out_by_cycle_then_insertion_whatever_the_push_order() {
        // A pseudo-random push order with many equal cycles, against a stable sort.
        let mut q = CompletionQueue::default();
        let mut want = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for id in 0..500u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = x % 40;
            q.push(at, c(id));
            want.push((at, id));
        }
        want.sort_by_key(|&(at, _)| at);
        assert_eq!(q.peek_tick(), want.first().map(|w| w.0));
        let mut got = Vec::new();
        while let Some((at, m)) = q.pop_due(39) {
            got.push((at, m.id.0));
        }
        assert!(q.is_empty());
        assert_eq!(got, want);
    }

    #[test]
    fn nothing_is_handed_out_before_its_cycle() {
        let mut q = CompletionQueue::default();
        q.push(10, c(1));
        q.push(5, c(2));
        assert_eq!(q.pop_due(4), None);
        assert_eq!(q.pop_due(5).map(|(t, m)| (t, m.id.0)), Some((5, 2)));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(10).map(|(t, m)| (t, m.id.0)), Some((10, 1)));
    }
}
