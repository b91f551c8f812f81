//! What a memory request says about itself: its access kind, its traffic class and who
//! sent it.
//!
//! T3 puts two kinds of traffic on the same DRAM queues — a GEMM's compute traffic and
//! the collective's communication traffic — and arbitrates between them, while a tracker
//! counts the near-memory updates each wavefront's stores cause. Neither is possible with a
//! request that only knows "read or write": the controller must see the class to arbitrate,
//! the access kind to issue an op-and-store (`UPD`) instead of a write, and the source to
//! let an observer attribute a store to a workgroup and wavefront.

use nmcp_isa::nmc::DType;

use crate::hbm::Cycle;

/// What a request does at the DRAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A column read.
    Read,
    /// A column write.
    Write,
    /// A near-memory op-and-store: the bank adds the request's data (lanes of this type)
    /// to what the column holds and stores the sum (one `UPD` command; the next column
    /// command to the bank group waits tCCDWL).
    Update(DType),
}

impl Access {
    /// Whether the request carries data to the DRAM (a write or an update): such requests
    /// share the write queue and its drain mode.
    #[inline]
    pub const fn is_write_like(self) -> bool {
        !matches!(self, Access::Read)
    }

    /// Index into per-kind counters: read 0, write 1, update 2.
    #[inline]
    pub const fn index(self) -> usize {
        match self {
            Access::Read => 0,
            Access::Write => 1,
            Access::Update(_) => 2,
        }
    }

    /// Lower-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::Update(_) => "update",
        }
    }
}

/// Access kinds in counter order (the update's data type is not part of the counter key).
pub const ACCESS_KINDS: usize = 3;

/// Which traffic a request belongs to, for arbitration and statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[repr(u8)]
pub enum TrafficClass {
    /// A kernel's own loads and stores (GEMM operands, output tiles).
    #[default]
    Compute = 0,
    /// Collective traffic (reduce-scatter / all-gather reads, DMA writes and updates).
    Communication = 1,
    /// The GPU host or the NMC engines (reduction read-outs, scalar writes, traces).
    Host = 2,
}

impl TrafficClass {
    /// Every class, in counter order.
    pub const ALL: [TrafficClass; 3] = [Self::Compute, Self::Communication, Self::Host];

    /// Index into per-class counters.
    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Lower-case name for reports.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Communication => "communication",
            Self::Host => "host",
        }
    }
}

/// Traffic classes (counter width).
pub const TRAFFIC_CLASSES: usize = 3;

/// Who sent a request: a wavefront of a workgroup of a kernel on one GPU. The T3 tracker
/// keys its entries on the workgroup id and the wavefront id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Source {
    /// GPU (node) index in the system.
    pub gpu: u16,
    /// Workgroup id within its kernel.
    pub workgroup: u32,
    /// Wavefront id within its workgroup.
    pub wavefront: u8,
}

/// The memory system's name for an accepted request, unique within one system (it
/// counts accepted requests from 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RequestId(pub u64);

/// One memory request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Byte address; aligned down to the request size.
    pub addr: u64,
    /// Bytes: 32 or 64.
    pub size: u32,
    /// Read, write or near-memory update.
    pub access: Access,
    /// Traffic class.
    pub class: TrafficClass,
    /// Sender, when one is known (trace replays have none).
    pub source: Option<Source>,
    /// Cycle the request reaches the front end.
    pub arrival: Cycle,
}

impl Request {
    /// A compute-class read with no source (what a trace line or a synthetic stream is).
    pub const fn read(addr: u64, size: u32, arrival: Cycle) -> Self {
        Request {
            addr,
            size,
            access: Access::Read,
            class: TrafficClass::Compute,
            source: None,
            arrival,
        }
    }

    /// A compute-class write with no source.
    pub const fn write(addr: u64, size: u32, arrival: Cycle) -> Self {
        Request {
            addr,
            size,
            access: Access::Write,
            class: TrafficClass::Compute,
            source: None,
            arrival,
        }
    }

    /// A compute-class near-memory update (op-and-store of `dtype` lanes) with no source.
    pub const fn update(addr: u64, size: u32, dtype: DType, arrival: Cycle) -> Self {
        Request {
            addr,
            size,
            access: Access::Update(dtype),
            class: TrafficClass::Compute,
            source: None,
            arrival,
        }
    }

    /// The same request in another class.
    #[must_use]
    pub const fn with_class(mut self, class: TrafficClass) -> Self {
        self.class = class;
        self
    }

    /// The same request from a sender.
    #[must_use]
    pub const fn with_source(mut self, source: Source) -> Self {
        self.source = Some(source);
        self
    }
}
