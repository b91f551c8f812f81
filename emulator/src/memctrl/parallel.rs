//! The parallel runner: [`MemorySystem::run_parallel`] steps groups of controllers on
//! rayon threads in speculative windows and falls back to the serial loop when a window
//! would have stalled the front end.

use crate::hbm::Cycle;

use super::system::{step_channel, ChannelBuses, Slot};
use super::{Completion, Controller, MemorySystem, Request, RequestPart, RunReport};

/// One group of controllers a parallel window runs on one thread: a channel when its
/// pseudo-channels share the command buses, else one pseudo-channel.
struct Group<'a> {
    ctrls: &'a mut [Controller],
    wakes: &'a mut [Cycle],
    bus: Option<&'a mut ChannelBuses>,
    /// (arrival, controller within the group, part), in admission order.
    parts: Vec<(Cycle, usize, RequestPart)>,
    done: Vec<Completion>,
}

impl Group<'_> {
    /// Runs the group's controllers over the cycles before `end` as the serial loop
    /// would, enqueuing each part at its arrival. `false` if a part found its queue full
    /// (the serial front end would have stalled there: the window must be redone).
    fn run(&mut self, end: Cycle) -> bool {
        let mut k = 0;
        loop {
            let wmin = self.wakes.iter().copied().min().unwrap_or(Cycle::MAX);
            let arrival = self.parts.get(k).map_or(Cycle::MAX, |p| p.0);
            let now = wmin.min(arrival);
            if now >= end {
                return true;
            }
            if wmin <= now {
                match self.bus.as_deref_mut() {
                    Some(bus) => {
                        step_channel(self.ctrls, self.wakes, bus, now, &mut self.done);
                    }
                    None => {
                        for (c, w) in self.ctrls.iter_mut().zip(self.wakes.iter_mut()) {
                            if *w <= now {
                                *w = c.step(now, &mut self.done);
                            }
                        }
                    }
                }
            }
            while let Some(&(at, i, part)) = self.parts.get(k) {
                if at > now {
                    break;
                }
                match self.ctrls[i].enqueue(now, part) {
                    Some(ready) => self.wakes[i] = self.wakes[i].min(ready),
                    None => return false,
                }
                k += 1;
            }
        }
    }
}

impl MemorySystem {
    /// [`MemorySystem::run`] with the channels (or, with per-pseudo-channel buses, the
    /// pseudo-channels) stepped on the current rayon pool's threads in windows of `window`
    /// cycles. The result is identical to `run`'s: a window is simulated speculatively
    /// with every request admitted at its arrival cycle, and if any request would have
    /// found its queue full (where the serial front end stalls the whole stream), the
    /// window is thrown away and run serially. Paced traces (arrival cycles, queues rarely
    /// full) gain; saturating streams stall all the time and run serially.
    pub fn run_parallel<I>(
        &mut self,
        requests: I,
        window: Cycle,
        mut progress: impl FnMut(u64),
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        use rayon::prelude::*;
        let window = window.max(1);
        let mut source = requests.into_iter();
        let mut buffered: std::collections::VecDeque<Request> = Default::default();
        let mut head = source.next();
        let mut accepted = 0u64;
        let keep_meta = std::mem::replace(&mut self.keep_meta, false);
        let mut serial_until: Cycle = 0;
        let per = if self.buses.is_empty() {
            1
        } else {
            self.pcs_per_channel
        };
        loop {
            // One iteration of the serial loop (as in `run`).
            self.advance(self.now, None);
            while let Some(r) = head {
                if r.arrival > self.now || self.submit(&r).is_err() {
                    break;
                }
                accepted += 1;
                if accepted & 0xFFFF == 0 {
                    progress(accepted);
                }
                head = buffered.pop_front().or_else(|| source.next());
            }
            let Some(next) = self.next_cycle(head.as_ref()) else {
                break;
            };
            // A window can start when nothing is left at this cycle and the stream is not
            // stalled.
            let free = self.next > self.now && head.is_none_or(|r| r.arrival > self.now);
            if free && self.now >= serial_until {
                let start = self.now + 1;
                let end = start + window;
                let backup = self.clone();
                let backup_head = head;
                // The window's requests, their slots, and their parts per group.
                let mut taken = Vec::new();
                while let Some(r) = head {
                    if r.arrival >= end {
                        break;
                    }
                    taken.push(r);
                    head = buffered.pop_front().or_else(|| source.next());
                }
                if head.is_none() {
                    // The stream ends inside the window: the serial loop stops as soon as
                    // every queue is empty, so run the rest serially.
                    self.requeue(&mut head, backup_head, taken, &mut buffered);
                    serial_until = Cycle::MAX;
                    self.now = next.max(self.now);
                    continue;
                }
                let groups_n = self.controllers.len() / per;
                let mut parts: Vec<Vec<(Cycle, usize, RequestPart)>> = vec![Vec::new(); groups_n];
                for r in &taken {
                    self.stage(r, |pc, part| {
                        parts[pc / per].push((r.arrival, pc % per, part));
                    });
                }
                let mut buses: Vec<Option<&mut ChannelBuses>> = if self.buses.is_empty() {
                    (0..groups_n).map(|_| None).collect()
                } else {
                    self.buses.iter_mut().map(Some).collect()
                };
                let mut groups: Vec<Group> = self
                    .controllers
                    .chunks_mut(per)
                    .zip(self.wake.chunks_mut(per))
                    .zip(buses.drain(..))
                    .zip(parts)
                    .map(|(((ctrls, wakes), bus), parts)| Group {
                        ctrls,
                        wakes,
                        bus,
                        parts,
                        done: Vec::new(),
                    })
                    .collect();
                let ok = groups.par_iter_mut().map(|g| g.run(end)).all(|ok| ok);
                if ok {
                    let done: Vec<Completion> = groups.into_iter().flat_map(|g| g.done).collect();
                    self.done = done;
                    self.collect(None);
                    self.now = end - 1;
                    self.next = self.wake.iter().copied().min().unwrap_or(Cycle::MAX);
                    accepted += taken.len() as u64;
                    progress(accepted);
                    self.windows.0 += 1;
                    continue;
                }
                // Speculation failed: restore and run this stretch serially.
                drop(groups);
                let windows = (self.windows.0, self.windows.1 + 1);
                *self = backup;
                self.windows = windows;
                self.requeue(&mut head, backup_head, taken, &mut buffered);
                serial_until = end;
                self.now = next.max(self.now);
                continue;
            }
            self.now = next.max(self.now);
        }
        progress(accepted);
        self.finish_run(keep_meta)
    }

    /// Windows [`MemorySystem::run_parallel`] ran in parallel, and windows it threw away
    /// (a queue filled) and ran serially.
    pub fn parallel_windows(&self) -> (u64, u64) {
        self.windows
    }

    /// Puts requests taken for a window back in front of the stream: `taken[0]` becomes
    /// the head again and the rest, then the old head, come next.
    fn requeue(
        &self,
        head: &mut Option<Request>,
        first: Option<Request>,
        taken: Vec<Request>,
        buffered: &mut std::collections::VecDeque<Request>,
    ) {
        if taken.is_empty() {
            return;
        }
        let mut front: Vec<Request> = taken[1..].to_vec();
        if let Some(h) = *head {
            front.push(h);
        }
        for r in front.into_iter().rev() {
            buffered.push_front(r);
        }
        *head = first;
    }

    /// The front end's work for one request without queuing it: the request's slot and
    /// id, and its parts as (pseudo-channel, part) handed to `queue`. Parts are produced
    /// as [`MemorySystem::submit`] would queue them.
    fn stage(&mut self, req: &Request, mut queue: impl FnMut(usize, RequestPart)) {
        let (a, pa, second, merged) = self.place(req);
        let parts: u8 = if merged { 1 } else { 2 };
        self.next_id += 1;
        let tag = self.take_slot(Slot::new(req.arrival, parts, req));
        let part = |d: &crate::hbm::DramAddr, bursts: u8| RequestPart {
            access: req.access,
            class: req.class,
            source: req.source,
            addr: req.addr,
            tag,
            bank: self.mapping.bank_index(d),
            row: d.row,
            col: d.col,
            bursts,
        };
        let bursts = if merged && second.is_some() { 2 } else { 1 };
        queue(pa, part(&a, bursts));
        if let (Some(b), false) = (second, merged) {
            queue(self.mapping.pseudo_channel_index(&b), part(&b, 1));
        }
    }
}
