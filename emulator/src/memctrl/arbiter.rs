//! Arbitration between traffic classes: which classes a controller may schedule from now.
//!
//! The controller keeps one read queue and one write queue (writes and near-memory updates
//! share it and its drain mode); every entry carries its [`TrafficClass`]. Before each
//! scheduling pass the controller asks its [`Arbiter`] for a [`Grant`]: the classes whose
//! entries the pass may serve. FR-FCFS then runs among the granted entries exactly as it
//! does among all of them: oldest row hit first, then the oldest entry's ACT or PRE.
//!
//! A grant has two tiers. The pass first looks among the `first` classes; only when none
//! of their entries has a command that can issue now does it look among `then` (a superset
//! of `first`). That is enough for:
//! * FR-FCFS, class-blind ([`FrFcfs`], the default): every class in the first tier. It
//!   says so through [`Arbiter::class_blind`], and the controller then never calls it.
//! * Round-robin between classes ([`RoundRobin`]): the class whose turn it is first, every
//!   class second (work-conserving); the turn passes on with each column command issued.
//! * T3's MCA ([`Mca`]): compute (and host) traffic first; communication only while the
//!   compute entries in the served queue are fewer than a threshold, first of all once it
//!   has waited longer than an anti-starvation limit (until its next column command), or
//!   after a kernel boundary until the communication entries are drained.
//!
//! An arbiter is told about every command the controller issues ([`Arbiter::on_issue`])
//! and about kernel boundaries ([`Arbiter::kernel_boundary`]). A grant that changes with
//! time alone (a starvation deadline) names that cycle in [`Grant::until`] so the
//! controller wakes up for it; otherwise a grant is recomputed whenever the controller
//! steps, which it does after every enqueue and issue.

use std::fmt;

use crate::hbm::{CommandKind, Cycle};

use super::request::{TrafficClass, TRAFFIC_CLASSES};

/// A set of traffic classes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct ClassSet(u8);

impl ClassSet {
    /// No class.
    pub const NONE: ClassSet = ClassSet(0);
    /// Every class.
    pub const ALL: ClassSet = ClassSet((1 << TRAFFIC_CLASSES) - 1);

    /// The set holding one class.
    #[inline]
    pub const fn of(c: TrafficClass) -> ClassSet {
        ClassSet(1 << c as u8)
    }

    /// This set and `c`.
    #[inline]
    #[must_use]
    pub const fn with(self, c: TrafficClass) -> ClassSet {
        ClassSet(self.0 | 1 << c as u8)
    }

    /// The union.
    #[inline]
    #[must_use]
    pub const fn union(self, o: ClassSet) -> ClassSet {
        ClassSet(self.0 | o.0)
    }

    /// Whether `c` is in the set.
    #[inline]
    pub const fn contains(self, c: TrafficClass) -> bool {
        self.0 & (1 << c as u8) != 0
    }

    /// Whether every class is in the set.
    #[inline]
    pub const fn is_all(self) -> bool {
        self.0 == Self::ALL.0
    }

    /// Whether the set is empty.
    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
}

/// What the controller may schedule: `first` before `then`, until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Grant {
    /// Classes looked at first.
    pub first: ClassSet,
    /// Classes looked at when none of `first` can issue (includes `first`).
    pub then: ClassSet,
    /// The cycle at which the grant may change by itself (`Cycle::MAX`: only when the
    /// queues change or a command issues).
    pub until: Cycle,
}

impl Grant {
    /// Every class, in one tier, for ever: plain FR-FCFS.
    pub const ALL: Grant = Grant {
        first: ClassSet::ALL,
        then: ClassSet::ALL,
        until: Cycle::MAX,
    };

    /// Only `classes`, in one tier.
    pub const fn only(classes: ClassSet) -> Grant {
        Grant {
            first: classes,
            then: classes,
            until: Cycle::MAX,
        }
    }

    /// `first`, then (when none of them can issue) `then` as well.
    pub const fn tiered(first: ClassSet, then: ClassSet) -> Grant {
        Grant {
            first,
            then: then.union(first),
            until: Cycle::MAX,
        }
    }

    /// The same grant, changing by itself at `at`.
    #[must_use]
    pub const fn until(mut self, at: Cycle) -> Grant {
        self.until = at;
        self
    }

    /// The same classes (ignoring `until`).
    #[inline]
    pub fn same_classes(&self, o: &Grant) -> bool {
        self.first == o.first && self.then == o.then
    }
}

/// What an arbiter sees when asked for a grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArbiterView {
    /// The current cycle.
    pub now: Cycle,
    /// Whether the pass serves the write queue (writes and updates) rather than reads.
    pub draining: bool,
    /// Entries in the read queue, by class.
    pub reads: [usize; TRAFFIC_CLASSES],
    /// Entries in the write queue, by class.
    pub writes: [usize; TRAFFIC_CLASSES],
    /// Entries each queue holds.
    pub depth: usize,
}

impl ArbiterView {
    /// Entries of the queue being served, by class.
    #[inline]
    pub fn served(&self) -> &[usize; TRAFFIC_CLASSES] {
        if self.draining {
            &self.writes
        } else {
            &self.reads
        }
    }
}

/// A command the controller issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    /// Issue cycle.
    pub at: Cycle,
    /// The command's kind.
    pub kind: CommandKind,
    /// The class of the queue entry it serves (`None` for refresh and closed-page
    /// precharges).
    pub class: Option<TrafficClass>,
    /// Whether this column command was the entry's last (the entry left the queue).
    pub completes: bool,
}

/// An arbitration policy (see the module documentation).
pub trait Arbiter: fmt::Debug + Send + ArbiterClone {
    /// A short name for reports.
    fn name(&self) -> &'static str;

    /// The classes the next scheduling pass may serve.
    fn grant(&mut self, view: &ArbiterView) -> Grant;

    /// Every command the controller issues (row and column, refresh included).
    fn on_issue(&mut self, _issued: &Issued) {}

    /// A kernel finished (or started): the end of a phase of compute traffic.
    fn kernel_boundary(&mut self, _now: Cycle) {}

    /// True only for a policy that grants every class at all times and keeps no state; the
    /// controller then skips calling it (the default FR-FCFS costs nothing).
    fn class_blind(&self) -> bool {
        false
    }
}

/// Cloning boxed arbiters (implemented for every `Arbiter + Clone`).
pub trait ArbiterClone {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn Arbiter>;
}

impl<T: Arbiter + Clone + 'static> ArbiterClone for T {
    fn clone_box(&self) -> Box<dyn Arbiter> {
        Box::new(self.clone())
    }
}

impl Clone for Box<dyn Arbiter> {
    fn clone(&self) -> Self {
        (**self).clone_box()
    }
}

/// FR-FCFS across classes: every entry competes by age alone (the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct FrFcfs;

impl Arbiter for FrFcfs {
    fn name(&self) -> &'static str {
        "fr-fcfs"
    }

    #[inline]
    fn grant(&mut self, _view: &ArbiterView) -> Grant {
        Grant::ALL
    }

    fn class_blind(&self) -> bool {
        true
    }
}

/// Round-robin between classes: the class whose turn it is goes first (FR-FCFS among its
/// entries); when it has nothing that can issue, any class may (work-conserving). Each
/// column command passes the turn to the next class that has entries in the served queue.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobin {
    turn: usize,
}

impl RoundRobin {
    /// Starts with compute's turn.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Arbiter for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }

    fn grant(&mut self, view: &ArbiterView) -> Grant {
        let served = view.served();
        // Skip classes with nothing queued, so an idle class does not hold the turn.
        let turn = (0..TRAFFIC_CLASSES)
            .map(|k| (self.turn + k) % TRAFFIC_CLASSES)
            .find(|&c| served[c] > 0)
            .unwrap_or(self.turn);
        self.turn = turn;
        Grant::tiered(ClassSet::of(TrafficClass::ALL[turn]), ClassSet::ALL)
    }

    fn on_issue(&mut self, issued: &Issued) {
        if !issued.kind.is_row_command() {
            if let Some(c) = issued.class {
                self.turn = (c.index() + 1) % TRAFFIC_CLASSES;
            }
        }
    }
}

/// T3's memory-controller arbitration: compute and host entries first; communication
/// entries only while fewer than `threshold` compute entries wait in the served queue,
/// ahead of everything once communication has waited `starvation_limit` cycles without a
/// column command (letting it merely compete was not enough: compute row hits kept its
/// row switch from ever winning under FR-FCFS), or after a kernel boundary until no
/// communication entry is queued.
#[derive(Debug, Clone, Copy)]
pub struct Mca {
    /// Compute entries in the served queue below which communication may issue.
    pub threshold: usize,
    /// Cycles communication may wait (queued, not served) before it is let through.
    pub starvation_limit: Cycle,
    waiting_since: Option<Cycle>,
    draining: bool,
}

impl Mca {
    /// A policy with the given threshold and anti-starvation limit.
    pub fn new(threshold: usize, starvation_limit: Cycle) -> Self {
        Mca {
            threshold,
            starvation_limit,
            waiting_since: None,
            draining: false,
        }
    }
}

impl Arbiter for Mca {
    fn name(&self) -> &'static str {
        "mca"
    }

    fn grant(&mut self, view: &ArbiterView) -> Grant {
        let comm = TrafficClass::Communication.index();
        let queued = view.reads[comm] + view.writes[comm];
        if queued == 0 {
            self.waiting_since = None;
            self.draining = false;
        }
        let privileged = ClassSet::of(TrafficClass::Compute).with(TrafficClass::Host);
        if self.draining {
            return Grant::ALL;
        }
        let served = view.served();
        if served[comm] == 0 {
            return Grant::only(privileged);
        }
        let since = *self.waiting_since.get_or_insert(view.now);
        let deadline = since.saturating_add(self.starvation_limit);
        if view.now >= deadline {
            // Starving: communication first (its row switch included), the rest only when
            // none of it can issue this cycle.
            return Grant::tiered(ClassSet::of(TrafficClass::Communication), ClassSet::ALL);
        }
        let grant = if served[TrafficClass::Compute.index()] < self.threshold {
            Grant::tiered(privileged, ClassSet::ALL)
        } else {
            Grant::only(privileged)
        };
        grant.until(deadline)
    }

    fn on_issue(&mut self, issued: &Issued) {
        if !issued.kind.is_row_command() && issued.class == Some(TrafficClass::Communication) {
            self.waiting_since = None;
        }
    }

    fn kernel_boundary(&mut self, _now: Cycle) {
        self.draining = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(now: Cycle, compute: usize, comm: usize) -> ArbiterView {
        ArbiterView {
            now,
            draining: false,
            reads: [compute, comm, 0],
            writes: [0; TRAFFIC_CLASSES],
            depth: 32,
        }
    }

    #[test]
    fn class_sets() {
        let s = ClassSet::of(TrafficClass::Compute).with(TrafficClass::Host);
        assert!(s.contains(TrafficClass::Host) && !s.contains(TrafficClass::Communication));
        assert!(ClassSet::ALL.is_all() && ClassSet::NONE.is_empty());
        assert!(s.union(ClassSet::of(TrafficClass::Communication)).is_all());
    }

    #[test]
    fn mca_holds_communication_back_until_compute_thins_or_it_starves() {
        let mut m = Mca::new(4, 100);
        let comp = ClassSet::of(TrafficClass::Compute).with(TrafficClass::Host);
        let g = m.grant(&view(10, 8, 2));
        assert_eq!((g.first, g.then, g.until), (comp, comp, 110));
        let g = m.grant(&view(20, 3, 2));
        assert_eq!(
            (g.first, g.then),
            (comp, ClassSet::ALL),
            "below the threshold"
        );
        let g = m.grant(&view(110, 8, 2));
        assert_eq!(
            (g.first, g.then),
            (ClassSet::of(TrafficClass::Communication), ClassSet::ALL),
            "starving: communication first"
        );
        m.on_issue(&Issued {
            at: 111,
            kind: CommandKind::Rd,
            class: Some(TrafficClass::Communication),
            completes: true,
        });
        assert_eq!(
            m.grant(&view(112, 8, 1)).until,
            212,
            "the wait starts again"
        );
        m.kernel_boundary(120);
        assert_eq!(
            m.grant(&view(121, 8, 1)),
            Grant::ALL,
            "drain at the boundary"
        );
        m.grant(&view(130, 8, 0));
        assert_eq!(
            m.grant(&view(131, 8, 1)).then,
            comp,
            "drained: back to normal"
        );
    }
}
