//! The memory system: one [`Controller`] per pseudo-channel behind an address mapping, a
//! front end that accepts requests with arrival cycles and applies back-pressure, and the
//! engine loop that runs a request stream to drain.
//!
//! # Engine
//! Discrete-event over cycles: each controller reports the next cycle at which it can do
//! anything, and the loop jumps straight to the earliest of those and of the next arrival.
//! A streaming run is busy nearly every cycle, so this costs no more than cycle stepping;
//! random traffic, refresh and long gates (tRFC, tRC) leave many idle cycles that are
//! skipped. The per-request path allocates nothing: request slots come from a free list
//! sized to what the queues can hold, and queue entries are 32-byte values in per-bank
//! vectors that keep their capacity.

pub mod controller;
pub mod refresh;
pub mod request;
pub mod scheduler;
pub mod stats;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::hbm::bank::ALL_COMMAND_KINDS;
use crate::hbm::{AddressMapping, Cycle, HbmPreset};

pub use controller::{Completion, Controller, ControllerConfig, LoggedCommand, RequestPart};
pub use stats::{LogHistogram, Occupancy, RowClass};

/// One memory request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Byte address; aligned down to the request size.
    pub addr: u64,
    /// Write (otherwise read).
    pub write: bool,
    /// Bytes: 32 or 64.
    pub size: u32,
    /// Cycle the request reaches the front end.
    pub arrival: Cycle,
}

/// The queue a request needs is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backpressure {
    /// The pseudo-channel whose queue is full.
    pub pseudo_channel: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// Cycle the front end accepted the request into a controller queue.
    arrival: Cycle,
    done_at: Cycle,
    parts_left: u8,
    write: bool,
}

/// A device of controllers behind an address mapping.
#[derive(Debug, Clone)]
pub struct MemorySystem {
    preset: HbmPreset,
    mapping: AddressMapping,
    cfg: ControllerConfig,
    controllers: Vec<Controller>,
    wake: Vec<Cycle>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    done: Vec<Completion>,
    now: Cycle,
    read_latency: LogHistogram,
    reads: u64,
    writes: u64,
    last_completion: Cycle,
}

/// Figures of a finished run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    /// Preset name.
    pub preset: String,
    /// Address mapping string.
    pub mapping: String,
    /// Page policy.
    pub page_policy: String,
    /// Refresh mode.
    pub refresh: String,
    /// Queue depth per pseudo-channel (each of read and write).
    pub queue_depth: usize,
    /// Pseudo-channels simulated.
    pub pseudo_channels: usize,
    /// Requests served.
    pub requests: u64,
    /// Read requests served.
    pub reads: u64,
    /// Write requests served.
    pub writes: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Cycles from the start to the last data beat.
    pub cycles: Cycle,
    /// Simulated time in ns.
    pub simulated_ns: f64,
    /// Achieved bandwidth, GB/s.
    pub bandwidth_gbps: f64,
    /// The preset's pin bandwidth, GB/s.
    pub peak_gbps: f64,
    /// Achieved / peak, in percent.
    pub percent_of_peak: f64,
    /// Read latency, cycles: from acceptance into a controller queue (time spent waiting
    /// in front of a full queue is excluded) to the last data beat.
    pub read_latency_mean: f64,
    /// Minimum read latency, cycles.
    pub read_latency_min: u64,
    /// Median read latency, cycles (bucketed, see [`LogHistogram`]).
    pub read_latency_p50: u64,
    /// 99th-percentile read latency, cycles (bucketed).
    pub read_latency_p99: u64,
    /// Maximum read latency, cycles.
    pub read_latency_max: u64,
    /// Queue entries that hit an open row.
    pub row_hits: u64,
    /// Queue entries that found the bank precharged.
    pub row_misses: u64,
    /// Queue entries that found another row open.
    pub row_conflicts: u64,
    /// Commands issued, by mnemonic.
    pub commands: BTreeMap<String, u64>,
    /// Mean read-queue length per pseudo-channel.
    pub read_queue_mean: f64,
    /// Mean write-queue length per pseudo-channel.
    pub write_queue_mean: f64,
    /// Time-weighted read-queue occupancy, summed over pseudo-channels: cycles at each length.
    pub read_queue_histogram: Vec<u64>,
    /// Time-weighted write-queue occupancy, summed over pseudo-channels.
    pub write_queue_histogram: Vec<u64>,
    /// Fraction of time banks had a row open, averaged over all banks.
    pub bank_utilisation: f64,
    /// Fraction of time the data buses carried data.
    pub data_bus_utilisation: f64,
}

impl MemorySystem {
    /// A device with the preset's geometry, the given mapping and controller settings.
    pub fn new(preset: &HbmPreset, mapping: AddressMapping, cfg: ControllerConfig) -> Self {
        let n = preset.pseudo_channels() as usize;
        let controllers = (0..n)
            .map(|_| Controller::new(preset, cfg.clone()))
            .collect();
        let capacity = n * cfg.queue_depth * 2;
        MemorySystem {
            preset: preset.clone(),
            mapping,
            controllers,
            wake: vec![Cycle::MAX; n],
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            done: Vec::with_capacity(64),
            now: 0,
            read_latency: LogHistogram::new(),
            reads: 0,
            writes: 0,
            last_completion: 0,
            cfg,
        }
    }

    /// The controllers, one per pseudo-channel.
    pub fn controllers(&self) -> &[Controller] {
        &self.controllers
    }

    /// Mutable access to one controller (e.g. to switch on its command log).
    pub fn controller_mut(&mut self, pc: usize) -> Option<&mut Controller> {
        self.controllers.get_mut(pc)
    }

    /// The address mapping.
    pub fn mapping(&self) -> &AddressMapping {
        &self.mapping
    }

    /// The preset.
    pub fn preset(&self) -> &HbmPreset {
        &self.preset
    }

    /// Every controller, mutable (an NMC engine drives its pseudo-channel's controller).
    pub fn controllers_mut(&mut self) -> &mut [Controller] {
        &mut self.controllers
    }

    /// The preset and mapping next to mutable controllers (an NMC engine drives the
    /// controllers while its functional store decodes addresses through the mapping).
    pub fn split_for_nmc(&mut self) -> (&HbmPreset, &AddressMapping, &mut [Controller]) {
        (&self.preset, &self.mapping, &mut self.controllers)
    }

    /// Makes sure controller `pc` is stepped at `at` (after an NMC engine handed its
    /// pseudo-channel back).
    pub fn wake_at(&mut self, pc: usize, at: Cycle) {
        if let Some(w) = self.wake.get_mut(pc) {
            *w = (*w).min(at);
        }
    }

    /// Current cycle.
    pub fn now(&self) -> Cycle {
        self.now
    }

    /// Read latencies recorded so far.
    pub fn read_latency(&self) -> &LogHistogram {
        &self.read_latency
    }

    /// Offers a request to the front end at the current cycle. A 64-byte request whose two
    /// halves fall into one row becomes one queue entry of two column accesses; otherwise
    /// each half is queued where the mapping sends it. Either every part is queued or none.
    pub fn try_submit(&mut self, req: &Request) -> Result<(), Backpressure> {
        let now = self.now.max(req.arrival);
        let col_bytes = self.mapping.column_bytes();
        let size = if u64::from(req.size) > col_bytes {
            2 * col_bytes
        } else {
            col_bytes
        };
        let base = req.addr & !(size - 1);
        let a = self.mapping.decode(base);
        let pa = self.mapping.pseudo_channel_index(&a);
        let second = (size > col_bytes).then(|| self.mapping.decode(base + col_bytes));
        let merged = match second {
            Some(b) => {
                b.stack == a.stack
                    && b.channel == a.channel
                    && b.pc == a.pc
                    && b.bank_group == a.bank_group
                    && b.bank == a.bank
                    && b.row == a.row
                    && b.col == a.col + 1
            }
            None => true,
        };
        // Check room before queuing anything.
        match (second, merged) {
            (Some(b), false) => {
                let pb = self.mapping.pseudo_channel_index(&b);
                let need_a = if pa == pb { 2 } else { 1 };
                if !self
                    .controllers
                    .get(pa)
                    .is_some_and(|c| c.has_room(req.write, need_a))
                {
                    return Err(Backpressure { pseudo_channel: pa });
                }
                if !self
                    .controllers
                    .get(pb)
                    .is_some_and(|c| c.has_room(req.write, 1))
                {
                    return Err(Backpressure { pseudo_channel: pb });
                }
            }
            _ => {
                if !self
                    .controllers
                    .get(pa)
                    .is_some_and(|c| c.has_room(req.write, 1))
                {
                    return Err(Backpressure { pseudo_channel: pa });
                }
            }
        }
        let parts: u8 = if merged { 1 } else { 2 };
        let slot = Slot {
            arrival: now,
            done_at: 0,
            parts_left: parts,
            write: req.write,
        };
        let tag = match self.free.pop() {
            Some(t) => {
                self.slots[t as usize] = slot;
                t
            }
            None => {
                self.slots.push(slot);
                (self.slots.len() - 1) as u32
            }
        };
        let bursts = if merged && second.is_some() { 2 } else { 1 };
        self.enqueue_part(now, pa, &a, req.write, tag, bursts);
        if let (Some(b), false) = (second, merged) {
            let pb = self.mapping.pseudo_channel_index(&b);
            self.enqueue_part(now, pb, &b, req.write, tag, 1);
        }
        Ok(())
    }

    fn enqueue_part(
        &mut self,
        now: Cycle,
        pc: usize,
        d: &crate::hbm::DramAddr,
        write: bool,
        tag: u32,
        bursts: u8,
    ) {
        let bank = self.mapping.bank_index(d);
        if let Some(c) = self.controllers.get_mut(pc) {
            let part = RequestPart {
                write,
                tag,
                bank,
                row: d.row,
                col: d.col,
                bursts,
            };
            if let Some(ready) = c.enqueue(now, part) {
                if let Some(w) = self.wake.get_mut(pc) {
                    *w = (*w).min(ready);
                }
            }
        }
    }

    fn collect(&mut self) {
        for c in self.done.drain(..) {
            let Some(s) = self.slots.get_mut(c.tag as usize) else {
                continue;
            };
            s.done_at = s.done_at.max(c.at);
            s.parts_left -= 1;
            if s.parts_left == 0 {
                if s.write {
                    self.writes += 1;
                } else {
                    self.reads += 1;
                    self.read_latency.record(s.done_at - s.arrival);
                }
                self.last_completion = self.last_completion.max(s.done_at);
                self.free.push(c.tag);
            }
        }
    }

    /// Steps every controller due at the current cycle and returns the next cycle any of
    /// them wants.
    fn step_controllers(&mut self) -> Cycle {
        let now = self.now;
        let mut next = Cycle::MAX;
        for (c, w) in self.controllers.iter_mut().zip(self.wake.iter_mut()) {
            if *w <= now {
                *w = c.step(now, &mut self.done);
            }
            next = next.min(*w);
        }
        self.collect();
        next
    }

    fn all_idle(&self) -> bool {
        self.controllers.iter().all(Controller::is_idle)
    }

    /// Runs a request stream (in arrival order) until every request is served, calling
    /// `progress` with the count of requests accepted every 2^16 requests.
    pub fn run<I>(&mut self, requests: I, mut progress: impl FnMut(u64)) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        let mut source = requests.into_iter();
        let mut head = source.next();
        let mut accepted = 0u64;
        loop {
            let next_wake = self.step_controllers();
            // Admit everything that has arrived and fits, in order.
            while let Some(r) = head {
                if r.arrival > self.now || self.try_submit(&r).is_err() {
                    break;
                }
                accepted += 1;
                if accepted & 0xFFFF == 0 {
                    progress(accepted);
                }
                head = source.next();
            }
            let mut next = next_wake.min(self.wake.iter().copied().min().unwrap_or(Cycle::MAX));
            if let Some(r) = head {
                if r.arrival > self.now {
                    next = next.min(r.arrival);
                }
            } else if self.all_idle() {
                break;
            }
            if next == Cycle::MAX {
                // Nothing can happen any more (cannot occur with a well-formed preset).
                break;
            }
            self.now = next.max(self.now);
        }
        progress(accepted);
        let end = self.last_completion.max(self.now);
        for c in &mut self.controllers {
            c.finish(end);
        }
        self.report(end)
    }

    /// Figures of the run so far, taking `end` as its last cycle.
    pub fn report(&self, end: Cycle) -> RunReport {
        let p = &self.preset;
        let tck = p.organisation.tck_ns;
        let mut row = (0, 0, 0);
        let mut commands: BTreeMap<String, u64> = BTreeMap::new();
        let mut rq = Occupancy::new(self.cfg.queue_depth);
        let mut wq = Occupancy::new(self.cfg.queue_depth);
        let mut bytes = 0u64;
        let (mut open, mut banks, mut bursts) = (0u64, 0u64, 0u64);
        for c in &self.controllers {
            let s = c.stats();
            row.0 += s.row_hits;
            row.1 += s.row_misses;
            row.2 += s.row_conflicts;
            bytes += s.bytes_read + s.bytes_written;
            rq.merge(&s.read_queue);
            wq.merge(&s.write_queue);
            let counts = c.pseudo_channel().command_counts();
            for k in ALL_COMMAND_KINDS {
                let n = counts[k as usize];
                if n > 0 {
                    *commands.entry(k.mnemonic().to_string()).or_default() += n;
                }
            }
            for o in c.pseudo_channel().bank_open_cycles(end) {
                open += o;
                banks += 1;
            }
            bursts += s.bytes_read / u64::from(p.organisation.bytes_per_column)
                + s.bytes_written / u64::from(p.organisation.bytes_per_column);
        }
        let simulated_ns = end as f64 * tck;
        let bandwidth = if end == 0 {
            0.0
        } else {
            bytes as f64 / simulated_ns
        };
        let peak = p.peak_gbps();
        let n = self.controllers.len().max(1) as f64;
        let span = (end.max(1) as f64) * n;
        RunReport {
            preset: p.name.clone(),
            mapping: self.mapping.text().to_string(),
            page_policy: format!("{:?}", self.cfg.page_policy).to_lowercase(),
            refresh: match self.cfg.refresh {
                crate::hbm::config::RefreshMode::AllBank => "all-bank".into(),
                crate::hbm::config::RefreshMode::PerBank => "per-bank".into(),
                crate::hbm::config::RefreshMode::Off => "off".into(),
            },
            queue_depth: self.cfg.queue_depth,
            pseudo_channels: self.controllers.len(),
            requests: self.reads + self.writes,
            reads: self.reads,
            writes: self.writes,
            bytes,
            cycles: end,
            simulated_ns,
            bandwidth_gbps: bandwidth,
            peak_gbps: peak,
            percent_of_peak: if peak > 0.0 {
                100.0 * bandwidth / peak
            } else {
                0.0
            },
            read_latency_mean: self.read_latency.mean(),
            read_latency_min: self.read_latency.min(),
            read_latency_p50: self.read_latency.quantile(0.5),
            read_latency_p99: self.read_latency.quantile(0.99),
            read_latency_max: self.read_latency.max(),
            row_hits: row.0,
            row_misses: row.1,
            row_conflicts: row.2,
            commands,
            read_queue_mean: rq.mean(),
            write_queue_mean: wq.mean(),
            read_queue_histogram: rq.cycles,
            write_queue_histogram: wq.cycles,
            bank_utilisation: if banks == 0 {
                0.0
            } else {
                open as f64 / (banks as f64 * end.max(1) as f64)
            },
            data_bus_utilisation: (bursts * u64::from(p.timing.bl)) as f64 / span,
        }
    }
}
