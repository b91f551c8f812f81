//! Observers of issued column commands (Ramulator's `on_issue` plugin hook).
//!
//! An observer attached to a [`Controller`](super::Controller) is told about every RD, WR
//! and UPD the controller issues, with the request's class, sender and address. T3's
//! tracker is one: it counts each wavefront's issued updates, keyed on workgroup and
//! wavefront. With no observer attached the controller keeps no per-request metadata and
//! pays one branch per column command.
//!
//! The controller keeps each queued part's sender and address only while an observer is
//! attached: attach before submitting the requests to be observed (parts queued earlier
//! report no source and address 0).

use std::any::Any;
use std::fmt;

use crate::hbm::{BankId, Cycle};

use super::request::{Access, Source, TrafficClass};

/// One issued column command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssuedColumn {
    /// Issue cycle.
    pub at: Cycle,
    /// Pseudo-channel index in the memory system.
    pub pseudo_channel: usize,
    /// Bank.
    pub bank: BankId,
    /// Row.
    pub row: u32,
    /// Column.
    pub col: u32,
    /// Read (RD), write (WR) or update (UPD).
    pub access: Access,
    /// Traffic class.
    pub class: TrafficClass,
    /// Sender, if the request named one.
    pub source: Option<Source>,
    /// The request's byte address.
    pub addr: u64,
    /// The front end's tag of the request part.
    pub tag: u32,
    /// Whether this was the part's last column command.
    pub last: bool,
}

/// Something that watches a controller issue column commands.
pub trait ControllerObserver: fmt::Debug + Send + ObserverBox {
    /// Called once per issued RD, WR or UPD, in issue order.
    fn on_issue(&mut self, issued: &IssuedColumn);
}

/// Cloning and downcasting boxed observers (implemented for every
/// `ControllerObserver + Clone`).
pub trait ObserverBox {
    /// A boxed copy.
    fn clone_box(&self) -> Box<dyn ControllerObserver>;
    /// For downcasting to the concrete observer.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting to the concrete observer.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: ControllerObserver + Clone + 'static> ObserverBox for T {
    fn clone_box(&self) -> Box<dyn ControllerObserver> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

impl Clone for Box<dyn ControllerObserver> {
    fn clone(&self) -> Self {
        (**self).clone_box()
    }
}

/// An observer that records every issued column command (for tests and debugging).
#[derive(Debug, Clone, Default)]
pub struct ColumnLog {
    /// The commands, in issue order.
    pub issued: Vec<IssuedColumn>,
}

impl ControllerObserver for ColumnLog {
    fn on_issue(&mut self, issued: &IssuedColumn) {
        self.issued.push(*issued);
    }
}
