//! A fixed-time kernel engine: a test double of the GPU for testing the CP.

use super::{GpuEvent, KernelEngine, KernelLaunch, Nanos};
use crate::sim::time::ns_to_tick;
use crate::sim::EventQueue;

#[derive(Debug, Clone)]
struct RunningKernel {
    tag: u64,
    to_place: u64,
    in_flight: u64,
    workgroup_ns: Nanos,
}

/// Workgroups of one kernel placed together, finishing together.
#[derive(Debug, Clone, Copy)]
struct WgDone {
    at: Nanos,
    tag: u64,
    count: u64,
}

/// A test double of the GPU: `cus x slots_per_cu` workgroup slots; every workgroup of a
/// GEMM takes `gemm_workgroup_ns`, every workgroup of another kernel its launch's
/// `workgroup_time`; free slots are filled round-robin across the running kernels, one
/// workgroup at a time, as the hardware dispatcher does. No sharing effects: enough to
/// test the CP, not to evaluate GOLDYLOC.
#[derive(Debug, Clone)]
pub struct FixedTimeEngine {
    slots: u64,
    free: u64,
    gemm_workgroup_ns: Nanos,
    kernels: Vec<RunningKernel>,
    rr: usize,
    done: EventQueue<WgDone>,
    pending: Vec<GpuEvent>,
    now: Nanos,
    placed: u64,
}

impl FixedTimeEngine {
    /// `cus x slots_per_cu` slots; GEMM workgroups take `gemm_workgroup_ns`.
    pub fn new(cus: u32, slots_per_cu: u32, gemm_workgroup_ns: Nanos) -> Self {
        let slots = u64::from(cus) * u64::from(slots_per_cu);
        Self {
            slots,
            free: slots,
            gemm_workgroup_ns,
            kernels: Vec::new(),
            rr: 0,
            done: EventQueue::new(),
            pending: Vec::new(),
            now: 0.0,
            placed: 0,
        }
    }

    /// Workgroup slots of the whole GPU.
    pub fn slots(&self) -> u64 {
        self.slots
    }

    /// Workgroups placed so far.
    pub fn workgroups_placed(&self) -> u64 {
        self.placed
    }

    /// Kernels currently running.
    pub fn running(&self) -> usize {
        self.kernels.len()
    }

    /// Fills free slots round-robin across the kernels with workgroups left, one
    /// workgroup per kernel per turn; the turns of one call are batched into one
    /// completion entry per kernel (they start, and so end, together).
    fn place(&mut self, now: Nanos) {
        let n = self.kernels.len();
        if n == 0 || self.free == 0 {
            return;
        }
        let mut grant = vec![0u64; n];
        loop {
            let wanting: Vec<usize> = (0..n)
                .map(|i| (self.rr + i) % n)
                .filter(|&i| self.kernels[i].to_place > grant[i])
                .collect();
            if wanting.is_empty() || self.free == 0 {
                break;
            }
            let share = (self.free / wanting.len() as u64).max(1);
            for i in wanting {
                let g = share
                    .min(self.kernels[i].to_place - grant[i])
                    .min(self.free);
                grant[i] += g;
                self.free -= g;
                if self.free == 0 {
                    break;
                }
            }
        }
        self.rr = (self.rr + 1) % n;
        for (kern, g) in self.kernels.iter_mut().zip(grant) {
            if g == 0 {
                continue;
            }
            kern.to_place -= g;
            kern.in_flight += g;
            self.placed += g;
            let at = now + kern.workgroup_ns;
            self.done.push(
                ns_to_tick(at),
                WgDone {
                    at,
                    tag: kern.tag,
                    count: g,
                },
            );
            if kern.to_place == 0 {
                self.pending.push(GpuEvent::AllDispatched {
                    tag: kern.tag,
                    at: now,
                });
            }
        }
    }
}

impl KernelEngine for FixedTimeEngine {
    fn launch(&mut self, now: Nanos, tag: u64, launch: &KernelLaunch) {
        self.now = self.now.max(now);
        if launch.workgroups == 0 {
            self.pending.push(GpuEvent::AllDispatched { tag, at: now });
            self.pending.push(GpuEvent::Completed { tag, at: now });
            return;
        }
        let workgroup_ns = if launch.gemm.is_some() {
            self.gemm_workgroup_ns
        } else {
            launch.workgroup_time
        };
        self.kernels.push(RunningKernel {
            tag,
            to_place: launch.workgroups,
            in_flight: 0,
            workgroup_ns,
        });
        self.place(now);
    }

    fn next_event(&self) -> Option<Nanos> {
        let p = self.pending.first().map(|e| match *e {
            GpuEvent::AllDispatched { at, .. } | GpuEvent::Completed { at, .. } => at,
        });
        let d = self.done.peek().map(|w| w.event.at);
        match (p, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn advance(&mut self, until: Nanos, out: &mut Vec<GpuEvent>) {
        out.append(&mut self.pending);
        while let Some(w) = self.done.peek().map(|s| s.event) {
            if w.at > until {
                break;
            }
            self.done.pop();
            self.now = w.at;
            self.free += w.count;
            if let Some(i) = self.kernels.iter().position(|k| k.tag == w.tag) {
                let k = &mut self.kernels[i];
                k.in_flight -= w.count;
                if k.in_flight == 0 && k.to_place == 0 {
                    self.pending.push(GpuEvent::Completed {
                        tag: w.tag,
                        at: w.at,
                    });
                    self.kernels.remove(i);
                    if self.rr > i {
                        self.rr -= 1;
                    }
                }
            }
            self.place(w.at);
            out.append(&mut self.pending);
        }
        self.now = self.now.max(until);
    }
}
