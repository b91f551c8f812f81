//! The parallel runner: [`MemorySystem::run_parallel`] steps groups of controllers on
//! threads in speculative windows (the driving thread takes a share itself) and falls back
//! to the serial loop when a window would have stalled the front end; and
//! [`Stepping::choose`], which picks the serial loop where threads cannot pay off.

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

/// Runs every group over the cycles before `end` on `threads` threads, the calling thread
/// one of them (contiguous shares of the groups, so a 2-core machine runs the driver and
/// one helper, not the driver beside two workers). `false` if any group's queue filled.
fn run_groups(groups: &mut [Group], end: Cycle, threads: usize) -> bool {
    // A group whose queue fills ends the share: the window is redone serially anyway.
    let run_all = |gs: &mut [Group]| gs.iter_mut().all(|g| g.run(end));
    let share = groups.len().div_ceil(threads.max(1)).max(1);
    if share >= groups.len() {
        return run_all(groups);
    }
    std::thread::scope(|s| {
        let mut chunks = groups.chunks_mut(share);
        let mine = chunks.next();
        let helpers: Vec<_> = chunks.map(|c| s.spawn(move || run_all(c))).collect();
        let ok = mine.is_none_or(run_all);
        helpers.into_iter().fold(ok, |ok, h| match h.join() {
            Ok(done) => done && ok,
            Err(panic) => std::panic::resume_unwind(panic),
        })
    })
}

/// The shortest window [`Stepping::choose`] runs in parallel: below it the threads' start
/// and join each window cost more than the window's work.
pub const MIN_PARALLEL_WINDOW: Cycle = 1024;

/// How a memory run is stepped: the serial loop, or parallel windows on some threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stepping {
    /// [`MemorySystem::run`], with why threads would not pay off.
    Serial(&'static str),
    /// [`MemorySystem::run_parallel`] on this many threads (the driving one included).
    Parallel(usize),
}

impl Stepping {
    /// The stepping for `requested` threads (0: one per core) on a machine with `cores`,
    /// a system of `groups` independently stepped groups (channels, or pseudo-channels
    /// with their own buses) and windows of `window` cycles. Threads beyond the cores or
    /// the groups only wait, so the count is capped at both; one thread, or windows too
    /// short to cover a thread's start, run the serial loop. Either way the report is the
    /// serial loop's, bit for bit.
    pub fn choose(requested: usize, cores: usize, groups: usize, window: Cycle) -> Stepping {
        let wanted = if requested == 0 { cores } else { requested };
        let threads = wanted.min(cores).min(groups);
        if wanted <= 1 {
            Stepping::Serial("one thread asked for")
        } else if threads <= 1 {
            Stepping::Serial("one core or one channel: a second thread would only wait")
        } else if window < MIN_PARALLEL_WINDOW {
            Stepping::Serial("windows too short to pay for starting threads")
        } else {
            Stepping::Parallel(threads)
        }
    }
}

impl MemorySystem {
    /// Groups of controllers a parallel window steps independently: channels when their
    /// pseudo-channels share the command buses, else pseudo-channels.
    pub fn parallel_groups(&self) -> usize {
        if self.buses.is_empty() {
            self.controllers.len()
        } else {
            self.controllers.len() / self.pcs_per_channel.max(1)
        }
    }

    /// Runs as `stepping` says: [`MemorySystem::run`] or [`MemorySystem::run_parallel`].
    pub fn run_stepped<I>(
        &mut self,
        requests: I,
        stepping: Stepping,
        window: Cycle,
        progress: impl FnMut(u64),
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        match stepping {
            Stepping::Serial(_) => self.run(requests, progress),
            Stepping::Parallel(threads) => self.run_parallel(requests, window, threads, progress),
        }
    }

    /// [`MemorySystem::run`] with the channels (or, with per-pseudo-channel buses, the
    /// pseudo-channels) stepped on `threads` threads (the calling one included) in windows
    /// of `window` cycles. The result is identical to `run`'s: a window is simulated
    /// speculatively with every request admitted at its arrival cycle, and if any request
    /// would have found its queue full (where the serial front end stalls the whole
    /// stream), the window is thrown away and run serially. Paced traces (arrival cycles,
    /// queues rarely full) gain; saturating streams stall all the time and run serially.
    pub fn run_parallel<I>(
        &mut self,
        requests: I,
        window: Cycle,
        threads: usize,
        mut progress: impl FnMut(u64),
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
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
            self.admit_arrived(
                &mut head,
                &mut accepted,
                &mut progress,
                || buffered.pop_front().or_else(|| source.next()),
                |_, _| true,
            );
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
                let ok = run_groups(&mut groups, end, threads);
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
