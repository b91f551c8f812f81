//! The GPU around the command processor: queues, the workgroup dispatcher and the kernel
//! timing model.
//!
//! The boundary between the CP side (queues, packets, the platform the firmware sees) and
//! the timing side (how long workgroups take when kernels share CUs, LLC and HBM) is the
//! [`KernelEngine`] trait: the CP side launches kernels into it and collects events.

pub mod catalog;
pub mod config;
pub mod dispatch;
pub mod dump;
pub mod fixed_engine;
pub mod fixture;
pub mod gemm;
pub mod h200;
pub mod llc_channel;
pub mod loaded_latency;
pub mod mem_port;
pub mod partitioned;
pub mod queue;
pub mod rate_share;
pub mod runs;
pub mod search;
pub mod sim;
pub mod workload;

pub use fixed_engine::FixedTimeEngine;
pub use partitioned::PartitionedGpu;

use nmcp_isa::gemm_ext::{GemmExt, KernelMeta};

/// Time on the GPU side, in nanoseconds.
pub type Nanos = f64;

/// One kernel launch as the dispatcher hands it to the timing model.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelLaunch {
    /// The GEMM problem and kernel, or `None` for a non-GEMM kernel.
    pub gemm: Option<(GemmExt, KernelMeta)>,
    /// Workgroups to dispatch (for a GEMM this equals `features::workgroups`).
    pub workgroups: u64,
    /// Threads per workgroup.
    pub workgroup_size: u16,
    /// For a non-GEMM kernel: time one workgroup takes running alone on a CU.
    pub workgroup_time: Nanos,
    /// The packet's barrier bit: it waited at its queue's head for the queue's earlier
    /// kernels, so the GPU could fetch and set it up while they ran (see
    /// [`sim::GpuSim`]'s launch overlap).
    pub barrier: bool,
}

/// What the timing model reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GpuEvent {
    /// The kernel's last workgroup was placed on a CU (the queue head may move on).
    AllDispatched {
        /// The tag given at launch.
        tag: u64,
        /// When.
        at: Nanos,
    },
    /// The kernel's last workgroup finished.
    Completed {
        /// The tag given at launch.
        tag: u64,
        /// When.
        at: Nanos,
    },
}

/// A model of kernels executing on the GPU, advanced by the caller.
pub trait KernelEngine {
    /// Starts dispatching a kernel's workgroups at time `now`. Workgroups of all running
    /// kernels are placed round-robin into free CU slots, as the hardware dispatcher does.
    fn launch(&mut self, now: Nanos, tag: u64, launch: &KernelLaunch);

    /// When the next event will happen if nothing else is launched; `None` when idle.
    fn next_event(&self) -> Option<Nanos>;

    /// Advances to `until`, appending every event up to and including it, in time order.
    fn advance(&mut self, until: Nanos, out: &mut Vec<GpuEvent>);
}

/// The GPU model of a node that runs no kernels (an NMC-only node): it has no CUs, and a
/// kernel launched on it is reported placed and finished at once. The node's CP has no
/// queues in that configuration, so nothing launches in practice.
#[derive(Debug, Clone, Default)]
pub struct NoGpu {
    pending: Vec<GpuEvent>,
}

impl KernelEngine for NoGpu {
    fn launch(&mut self, now: Nanos, tag: u64, _launch: &KernelLaunch) {
        self.pending.push(GpuEvent::AllDispatched { tag, at: now });
        self.pending.push(GpuEvent::Completed { tag, at: now });
    }

    fn next_event(&self) -> Option<Nanos> {
        self.pending.first().map(|e| match *e {
            GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => at,
        })
    }

    fn advance(&mut self, _until: Nanos, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.pending);
    }
}
