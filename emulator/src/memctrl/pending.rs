//! Finished requests waiting for their last data beat, handed out in time order.
//!
//! The same order as a [`crate::sim::EventQueue`] of [`MemCompletion`]s (by cycle, then
//! by insertion), but the heap holds only a 24-byte key per completion while the
//! completions sit in a slab: a sift moves keys, not 64-byte records (the queue was 8 %
//! of an all-GPU T3 run).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::MemCompletion;
use crate::hbm::Cycle;

/// A min-queue of completions keyed by (cycle, insertion order).
#[derive(Debug, Clone, Default)]
pub(crate) struct CompletionQueue {
    /// (cycle, insertion number, slab index), earliest first.
    heap: BinaryHeap<Reverse<(Cycle, u64, u32)>>,
    slab: Vec<MemCompletion>,
    free: Vec<u32>,
    seq: u64,
}

impl CompletionQueue {
    /// Queues `c` to be handed out at cycle `at`.
    #[inline]
    pub(crate) fn push(&mut self, at: Cycle, c: MemCompletion) {
        let idx = match self.free.pop() {
            Some(i) => {
                if let Some(s) = self.slab.get_mut(i as usize) {
                    *s = c;
                }
                i
            }
            None => {
                self.slab.push(c);
                // The slab holds at most the requests in flight, far below 2^32.
                u32::try_from(self.slab.len() - 1).unwrap_or(u32::MAX)
            }
        };
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, idx)));
    }

    /// The earliest completion if it is due at or before `until`, with its cycle.
    #[inline]
    pub(crate) fn pop_due(&mut self, until: Cycle) -> Option<(Cycle, MemCompletion)> {
        let &Reverse((at, _, idx)) = self.heap.peek()?;
        if at > until {
            return None;
        }
        self.heap.pop();
        let c = *self.slab.get(idx as usize)?;
        self.free.push(idx);
        Some((at, c))
    }

    /// The cycle of the earliest completion.
    #[inline]
    pub(crate) fn peek_tick(&self) -> Option<Cycle> {
        self.heap.peek().map(|r| r.0 .0)
    }

    /// Whether nothing waits.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}
