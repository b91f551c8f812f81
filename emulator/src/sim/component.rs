//! The protocol every timed model follows inside the one event loop.

use super::Tick;

/// A model that can say when it next needs to run and can be run up to a time.
///
/// The owner of time (a node or the system) asks every component for [`next_wake`],
/// advances the earliest to that tick, routes what it reports, and repeats. A component
/// never runs ahead of the `until` it is given, so inputs that arrive later (a request
/// from another node, a DMA trigger) are seen in time order.
///
/// [`next_wake`]: Component::next_wake
pub trait Component {
    /// What the component reports while it advances (completions, fired triggers...).
    type Output;

    /// The earliest tick at which the component has something to do, if any. Calling
    /// [`advance`](Component::advance) with an earlier `until` does nothing.
    fn next_wake(&self) -> Option<Tick>;

    /// Runs everything due up to and including `until`, appending reports in time order.
    fn advance(&mut self, until: Tick, out: &mut Vec<Self::Output>);
}
