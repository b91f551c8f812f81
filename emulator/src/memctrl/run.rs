//! The run drivers: a whole request stream admitted in arrival order and run to drain,
//! optionally with a checkpoint hook after each accepted request.

use crate::hbm::Cycle;

use super::{MemorySystem, Request, RunReport};

impl MemorySystem {
    /// Runs a request stream (in arrival order) until every request is served, calling
    /// `progress` with the count of requests accepted every 2^16 requests. A driver over
    /// [`submit`](Self::submit) and the stepping calls.
    pub fn run<I>(&mut self, requests: I, progress: impl FnMut(u64)) -> RunReport
    where
        I: IntoIterator<Item = Request>,
    {
        self.run_checkpointed(requests, progress, None, |_, _| true)
    }

    /// [`MemorySystem::run`] with a hook called after each accepted request with the count
    /// accepted so far: the state there ([`MemorySystem::state`]) together with the
    /// position of the stream after that request is a complete checkpoint. The hook
    /// returns `false` to stop the run (the report is then of the part run).
    ///
    /// `resumed` says that this system was [`restore`](Self::restore)d from a state taken
    /// in the hook after that many requests, and `requests` continues right after them: the
    /// run carries on exactly as the interrupted one would have (same report).
    pub fn run_checkpointed<I, H>(
        &mut self,
        requests: I,
        mut progress: impl FnMut(u64),
        resumed: Option<u64>,
        mut hook: H,
    ) -> RunReport
    where
        I: IntoIterator<Item = Request>,
        H: FnMut(&Self, u64) -> bool,
    {
        let mut source = requests.into_iter();
        let mut head = source.next();
        let mut accepted = resumed.unwrap_or(0);
        // A state is taken in the middle of admitting requests at the current cycle: a
        // resumed run re-enters there, without stepping the controllers first.
        let mut step_first = resumed.is_none();
        // No completions are handed out: skip recording what they would carry.
        let keep_meta = std::mem::replace(&mut self.keep_meta, false);
        loop {
            // Step whatever is due now.
            if step_first {
                self.advance(self.now, None);
            }
            step_first = true;
            // Admit everything that has arrived and fits, in order.
            let go_on = self.admit_arrived(
                &mut head,
                &mut accepted,
                &mut progress,
                || source.next(),
                &mut hook,
            );
            if !go_on {
                progress(accepted);
                return self.finish_run(keep_meta);
            }
            let Some(next) = self.next_cycle(head.as_ref()) else {
                break;
            };
            self.now = next.max(self.now);
        }
        progress(accepted);
        self.finish_run(keep_meta)
    }

    /// Admits `head` and the requests after it (`next`), in order, while they have arrived
    /// and their queues take them: counts them in `accepted`, reports every 65,536th to
    /// `progress`, and asks `go_on` after each; `false` when `go_on` stopped it (`head` then
    /// still holds the request it admitted last). The front end of both run loops
    /// (`run_checkpointed`, `run_parallel`).
    #[inline]
    pub(super) fn admit_arrived(
        &mut self,
        head: &mut Option<Request>,
        accepted: &mut u64,
        progress: &mut impl FnMut(u64),
        mut next: impl FnMut() -> Option<Request>,
        mut go_on: impl FnMut(&Self, u64) -> bool,
    ) -> bool {
        while let Some(r) = *head {
            if r.arrival > self.now || self.submit(&r).is_err() {
                break;
            }
            *accepted += 1;
            if *accepted & 0xFFFF == 0 {
                progress(*accepted);
            }
            if !go_on(self, *accepted) {
                return false;
            }
            *head = next();
        }
        true
    }

    /// The cycle a run loop steps to next: the controllers' next event or the next
    /// request's arrival (`head`, the first request not yet admitted); `None` when the run
    /// is over (no request left and every queue empty, or nothing can happen any more —
    /// the latter cannot occur with a well-formed preset).
    #[inline]
    pub(super) fn next_cycle(&self, head: Option<&Request>) -> Option<Cycle> {
        let mut next = self.next;
        match head {
            Some(r) if r.arrival > self.now => next = next.min(r.arrival),
            Some(_) => {}
            None if self.all_idle() => return None,
            None => {}
        }
        (next != Cycle::MAX).then_some(next)
    }

    /// The end of `run` and `run_parallel`: metadata recording restored, every controller
    /// closed at the last completion, the report.
    pub(super) fn finish_run(&mut self, keep_meta: bool) -> RunReport {
        self.keep_meta = keep_meta;
        let end = self.last_completion.max(self.now);
        for c in &mut self.controllers {
            c.finish(end);
        }
        self.report(end)
    }
}
