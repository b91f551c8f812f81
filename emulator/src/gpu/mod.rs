//! The GPU around the command processor: queues, the workgroup dispatcher and the kernel
//! timing model.
//!
//! The boundary between the CP side (queues, packets, the platform the firmware sees) and
//! the timing side (how long workgroups take when kernels share CUs, LLC and HBM) is the
//! [`KernelEngine`] trait: the CP side launches kernels into it and collects events.

pub mod catalog;
pub mod config;
pub mod fixture;
pub mod gemm;
pub mod queue;
pub mod sim;
pub mod system;
pub mod workload;

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
