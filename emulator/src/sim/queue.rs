//! The one event queue: a min-heap ordered by (tick, priority, sequence).
//!
//! Equal ticks are ordered by a caller-given priority (lower first), then by insertion
//! order, so a run never depends on the heap's internal layout: the same scenario and seed
//! deliver the same events in the same order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::Tick;

/// An event with its delivery key.
#[derive(Debug, Clone)]
pub struct Scheduled<E> {
    /// When.
    pub at: Tick,
    /// Order among events of the same tick (lower first).
    pub priority: u8,
    /// Insertion order (ties of tick and priority).
    pub seq: u64,
    /// The event.
    pub event: E,
}

impl<E> PartialEq for Scheduled<E> {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key()
    }
}
impl<E> Eq for Scheduled<E> {}
impl<E> PartialOrd for Scheduled<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Scheduled<E> {
    /// Reversed: the heap's maximum is the earliest event.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key().cmp(&self.key())
    }
}

impl<E> Scheduled<E> {
    #[inline]
    fn key(&self) -> (Tick, u8, u64) {
        (self.at, self.priority, self.seq)
    }
}

/// A deterministic priority queue of timed events.
#[derive(Debug, Clone)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Scheduled<E>>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
        }
    }

    /// Schedules `event` at `at` with priority 0.
    pub fn push(&mut self, at: Tick, event: E) {
        self.push_with(at, 0, event);
    }

    /// Schedules `event` at `at`; among events of one tick, lower `priority` comes first.
    pub fn push_with(&mut self, at: Tick, priority: u8, event: E) {
        self.seq += 1;
        self.push_keyed(at, priority, self.seq, event);
    }

    /// Schedules `event` at `at` with `priority`, ordered among events of the same tick
    /// and priority by `key` instead of by insertion. A queue filled from several
    /// sources that run in an order of their own (the T3 system's GPUs, stepped one
    /// window at a time) gives each source its own sequence in `key`, so the delivery
    /// order does not depend on which source ran first.
    pub fn push_keyed(&mut self, at: Tick, priority: u8, key: u64, event: E) {
        self.heap.push(Scheduled {
            at,
            priority,
            seq: key,
            event,
        });
    }

    /// The earliest event's tick.
    pub fn peek_tick(&self) -> Option<Tick> {
        self.heap.peek().map(|s| s.at)
    }

    /// The earliest event.
    pub fn peek(&self) -> Option<&Scheduled<E>> {
        self.heap.peek()
    }

    /// Removes and returns the earliest event.
    pub fn pop(&mut self) -> Option<Scheduled<E>> {
        self.heap.pop()
    }

    /// Removes and returns the earliest event if it is due at or before `until`.
    pub fn pop_due(&mut self, until: Tick) -> Option<Scheduled<E>> {
        if self.heap.peek().is_some_and(|s| s.at <= until) {
            self.heap.pop()
        } else {
            None
        }
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_ticks_follow_priority_then_insertion() {
        let mut q = EventQueue::new();
        q.push_with(10, 1, "b1");
        q.push_with(10, 0, "a1");
        q.push_with(5, 9, "early");
        q.push_with(10, 1, "b2");
        q.push_with(10, 0, "a2");
        let order: Vec<_> = std::iter::from_fn(|| q.pop().map(|s| s.event)).collect();
        assert_eq!(order, ["early", "a1", "a2", "b1", "b2"]);
    }

    #[test]
    fn pop_due_respects_the_limit() {
        let mut q = EventQueue::new();
        q.push(7, 'x');
        assert!(q.pop_due(6).is_none());
        assert_eq!(q.pop_due(7).map(|s| s.event), Some('x'));
        assert!(q.is_empty());
    }
}
