//! A timeline recorder: what the hardware did when, for a trace viewer.
//!
//! Named tracks (a *process*, e.g. `GPU 0` or `GPU 0 memory`, and a *thread* in it, e.g.
//! `CP`, `DMA`, `PC 3 queue`), each holding one kind of event: duration spans (begin and
//! end), instants, counters, or a bank's open row. Times are picoseconds on the one time
//! axis ([`Tick`]). The host writes a timeline as Chrome trace-event JSON (Perfetto) or
//! as a VCD (GTKWave, Surfer); see `docs/decisions/timeline.md`.
//!
//! Recording is off unless a model is given a [`Timeline`] (models hold an
//! `Option<Box<Timeline>>`: one branch per hook when off, nothing allocated). It is
//! bounded: at most [`TimelineConfig::max_events`] events are kept; past that the
//! recorder keeps counting what it drops and remembers the time of the first dropped
//! event ([`Timeline::truncated`]). An optional window `[start, end)` keeps only what
//! overlaps it (spans are clipped to it); counters that the models sample (queue
//! occupancy) are sampled every [`TimelineConfig::sample_ps`]. Counter events whose value
//! did not change since the track's last one are not stored. The recorder holds no clock
//! of its own and no randomness: a run records the same events every time.

use std::collections::HashMap;

use crate::sim::Tick;

/// What to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimelineConfig {
    /// Events kept at most; past this the timeline is truncated.
    pub max_events: u64,
    /// Keep only events overlapping `[start, end)` ps.
    pub window: Option<(Tick, Tick)>,
    /// Interval between two samples of a sampled counter, ps (at least 1).
    pub sample_ps: Tick,
}

/// Default bound on events (about 80 MB of memory while recording).
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000;

/// Default sampling interval of sampled counters: 100 ns.
pub const DEFAULT_SAMPLE_PS: Tick = 100_000;

impl Default for TimelineConfig {
    fn default() -> Self {
        Self {
            max_events: DEFAULT_MAX_EVENTS,
            window: None,
            sample_ps: DEFAULT_SAMPLE_PS,
        }
    }
}

/// What a track holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrackKind {
    /// Duration spans (they may overlap; a writer spreads overlapping spans over lanes).
    Spans,
    /// Instants.
    Instants,
    /// A numeric counter.
    Counter,
    /// A DRAM bank: its open row, or -1 when precharged.
    BankRow,
}

/// A named track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Track {
    /// The group it belongs to (a GPU, a memory system).
    pub process: String,
    /// The track's own name within the group.
    pub thread: String,
    /// What it holds.
    pub kind: TrackKind,
}

/// Index of a track in [`Timeline::tracks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TrackId(pub u32);

/// One recorded event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelineEvent {
    /// Its track.
    pub track: TrackId,
    /// Index of its name in [`Timeline::names`] (spans and instants; 0 for counters).
    pub name: u32,
    /// Start (spans) or time (instants, counters), ps.
    pub start: Tick,
    /// End of a span (`>= start`); `start` for the others.
    pub end: Tick,
    /// A counter's value or a bank's row (-1 = closed); 0 otherwise.
    pub value: f64,
}

/// The recorder.
#[derive(Debug, Clone, PartialEq)]
pub struct Timeline {
    config: TimelineConfig,
    tracks: Vec<Track>,
    track_index: HashMap<(String, String), TrackId>,
    names: Vec<String>,
    name_index: HashMap<String, u32>,
    events: Vec<TimelineEvent>,
    /// Last value stored per counter track (dedup).
    last_value: HashMap<TrackId, f64>,
    /// Per counter track, its last value before the window opened (stored at the
    /// window's start, so that a bank opened before the window shows its row in it).
    before: HashMap<TrackId, f64>,
    dropped: u64,
    truncated_at: Option<Tick>,
    next_sample: Tick,
    /// Free-form key/value pairs the writer puts in the file's metadata.
    meta: Vec<(String, String)>,
}

impl Timeline {
    /// An empty timeline recording under `config` (a `sample_ps` of 0 counts as 1).
    pub fn new(config: TimelineConfig) -> Self {
        let config = TimelineConfig {
            sample_ps: config.sample_ps.max(1),
            ..config
        };
        Self {
            config,
            tracks: Vec::new(),
            track_index: HashMap::new(),
            names: vec![String::new()],
            name_index: HashMap::new(),
            events: Vec::new(),
            last_value: HashMap::new(),
            before: HashMap::new(),
            dropped: 0,
            truncated_at: None,
            next_sample: config.window.map_or(0, |w| w.0),
            meta: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &TimelineConfig {
        &self.config
    }

    /// The track `process` / `thread` of `kind`, created on first use. A track's kind is
    /// the one it was created with.
    pub fn track(&mut self, process: &str, thread: &str, kind: TrackKind) -> TrackId {
        if let Some(&id) = self
            .track_index
            .get(&(process.to_string(), thread.to_string()))
        {
            return id;
        }
        let id = TrackId(self.tracks.len() as u32);
        self.tracks.push(Track {
            process: process.to_string(),
            thread: thread.to_string(),
            kind,
        });
        self.track_index
            .insert((process.to_string(), thread.to_string()), id);
        id
    }

    fn intern(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.name_index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.name_index.insert(name.to_string(), i);
        i
    }

    /// Whether `[start, end]` overlaps the window (an instant at `start` when equal).
    fn in_window(&self, start: Tick, end: Tick) -> bool {
        match self.config.window {
            None => true,
            Some((ws, we)) => start < we && (end > ws || (end == start && start >= ws)),
        }
    }

    fn push(&mut self, ev: TimelineEvent) {
        if self.events.len() as u64 >= self.config.max_events {
            self.dropped += 1;
            self.truncated_at.get_or_insert(ev.start);
            return;
        }
        self.events.push(ev);
    }

    /// A span `[start, end)` named `name` on `track` (an `end` before `start` counts as
    /// `start`); clipped to the window.
    pub fn span(&mut self, track: TrackId, name: &str, start: Tick, end: Tick) {
        let end = end.max(start);
        if !self.in_window(start, end) {
            return;
        }
        let (start, end) = match self.config.window {
            Some((ws, we)) => (start.max(ws), end.min(we)),
            None => (start, end),
        };
        let name = self.intern(name);
        self.push(TimelineEvent {
            track,
            name,
            start,
            end,
            value: 0.0,
        });
    }

    /// An instant named `name` on `track` at `at`.
    pub fn instant(&mut self, track: TrackId, name: &str, at: Tick) {
        if !self.in_window(at, at) {
            return;
        }
        let name = self.intern(name);
        self.push(TimelineEvent {
            track,
            name,
            start: at,
            end: at,
            value: 0.0,
        });
    }

    /// A counter (or bank row) `track` takes `value` at `at`; not stored when the track's
    /// last stored value is the same.
    /// With a window, the value a counter held when the window opened is stored at the
    /// window's start (see [`Self::finish`] for counters that do not change in it).
    pub fn counter(&mut self, track: TrackId, at: Tick, value: f64) {
        if let Some((ws, we)) = self.config.window {
            if at < ws {
                self.before.insert(track, value);
                return;
            }
            if at >= we {
                return;
            }
            if let Some(v) = self.before.remove(&track) {
                if at > ws {
                    self.store_counter(track, ws, v);
                }
            }
        }
        self.store_counter(track, at, value);
    }

    /// Stores what counters held when the window opened for those that did not change
    /// in it (at the window's start, in track order). [`Self::take`] calls it.
    pub fn finish(&mut self) {
        let Some((ws, _)) = self.config.window else {
            return;
        };
        let mut held: Vec<(TrackId, f64)> = self.before.drain().collect();
        held.sort_by_key(|h| h.0);
        for (k, v) in held {
            self.store_counter(k, ws, v);
        }
    }

    fn store_counter(&mut self, track: TrackId, at: Tick, value: f64) {
        if self.last_value.get(&track) == Some(&value) {
            return;
        }
        // Past the bound the value still counts as the track's last, so that what is
        // dropped is what would have been stored.
        self.last_value.insert(track, value);
        self.push(TimelineEvent {
            track,
            name: 0,
            start: at,
            end: at,
            value,
        });
    }

    /// Whether a sample of the sampled counters is due at `now` (then the next one is
    /// one interval on). Models call this once per step and sample when it says so.
    pub fn sample_due(&mut self, now: Tick) -> bool {
        if now < self.next_sample {
            return false;
        }
        if let Some((_, we)) = self.config.window {
            if now >= we {
                return false;
            }
        }
        let step = self.config.sample_ps;
        // The next sample point strictly after `now`, on the interval's grid.
        self.next_sample = (now / step + 1).saturating_mul(step);
        true
    }

    /// Adds a key/value pair to the file's metadata (the run's configuration, say).
    pub fn set_meta(&mut self, key: &str, value: &str) {
        if let Some(kv) = self.meta.iter_mut().find(|(k, _)| k == key) {
            kv.1 = value.to_string();
        } else {
            self.meta.push((key.to_string(), value.to_string()));
        }
    }

    /// The metadata pairs, in the order first set.
    pub fn meta(&self) -> &[(String, String)] {
        &self.meta
    }

    /// The tracks, by [`TrackId`].
    pub fn tracks(&self) -> &[Track] {
        &self.tracks
    }

    /// Event names, by [`TimelineEvent::name`] (0 is the empty name).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The events kept, in recording order.
    pub fn events(&self) -> &[TimelineEvent] {
        &self.events
    }

    /// When events were dropped: (events dropped, time of the first dropped event).
    pub fn truncated(&self) -> Option<(u64, Tick)> {
        self.truncated_at.map(|t| (self.dropped, t))
    }

    /// What was recorded so far; this timeline keeps its tracks, names and counters'
    /// last values and goes on recording from empty (with a fresh event bound).
    pub fn take(&mut self) -> Timeline {
        self.finish();
        let events = std::mem::take(&mut self.events);
        let out = Timeline {
            events,
            ..self.clone()
        };
        self.dropped = 0;
        self.truncated_at = None;
        out
    }

    /// Puts `other`'s tracks and events after this one's, with `prefix` before its
    /// process names (a second run next to a first). Its drops count as this one's.
    pub fn absorb(&mut self, other: &Timeline, prefix: &str) {
        let ids: Vec<TrackId> = other
            .tracks
            .iter()
            .map(|t| self.track(&format!("{prefix}{}", t.process), &t.thread, t.kind))
            .collect();
        for e in &other.events {
            let name = other.names.get(e.name as usize).map_or("", String::as_str);
            let name = self.intern(name);
            let track = ids.get(e.track.0 as usize).copied().unwrap_or(e.track);
            self.push(TimelineEvent { track, name, ..*e });
        }
        if let Some((n, at)) = other.truncated() {
            self.dropped += n;
            self.truncated_at = Some(self.truncated_at.map_or(at, |t| t.min(at)));
        }
    }
}

/// The variant name of a `Debug`-printed value: `TrackerFired { entry: 3 }` ->
/// `TrackerFired` (event names for the firmware's handler spans).
pub fn variant_name(debug: &str) -> &str {
    let end = debug
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(debug.len());
    debug.get(..end).unwrap_or(debug)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(max: u64, window: Option<(Tick, Tick)>) -> TimelineConfig {
        TimelineConfig {
            max_events: max,
            window,
            sample_ps: 10,
        }
    }

    #[test]
    fn tracks_are_created_once_and_keep_their_kind() {
        let mut t = Timeline::new(TimelineConfig::default());
        let a = t.track("GPU 0", "CP", TrackKind::Spans);
        let b = t.track("GPU 0", "DMA", TrackKind::Spans);
        assert_ne!(a, b);
        assert_eq!(t.track("GPU 0", "CP", TrackKind::Counter), a);
        assert_eq!(t.tracks()[a.0 as usize].kind, TrackKind::Spans);
        assert_eq!(t.tracks().len(), 2);
    }

    #[test]
    fn the_bound_truncates_and_counts_what_it_drops() {
        let mut t = Timeline::new(cfg(3, None));
        let k = t.track("p", "t", TrackKind::Instants);
        for i in 0..10 {
            t.instant(k, "x", 100 * i);
        }
        assert_eq!(t.events().len(), 3);
        assert_eq!(t.truncated(), Some((7, 300)));
        let mut u = Timeline::new(cfg(3, None));
        let k = u.track("p", "t", TrackKind::Instants);
        u.instant(k, "x", 0);
        assert_eq!(u.truncated(), None);
    }

    #[test]
    fn the_window_keeps_and_clips_what_overlaps_it() {
        let mut t = Timeline::new(cfg(100, Some((100, 200))));
        let s = t.track("p", "s", TrackKind::Spans);
        t.span(s, "before", 0, 100);
        t.span(s, "across", 50, 150);
        t.span(s, "inside", 120, 130);
        t.span(s, "after", 200, 300);
        t.span(s, "over", 0, 1000);
        let names: Vec<(&str, Tick, Tick)> = t
            .events()
            .iter()
            .map(|e| (t.names()[e.name as usize].as_str(), e.start, e.end))
            .collect();
        assert_eq!(
            names,
            vec![
                ("across", 100, 150),
                ("inside", 120, 130),
                ("over", 100, 200)
            ]
        );
        let i = t.track("p", "i", TrackKind::Instants);
        t.instant(i, "in", 100);
        t.instant(i, "out", 200);
        assert_eq!(t.events().len(), 4);
        assert!(t.truncated().is_none());
    }

    #[test]
    fn counters_store_changes_only_and_sampling_follows_the_interval() {
        let mut t = Timeline::new(cfg(100, None));
        let c = t.track("p", "q", TrackKind::Counter);
        for (at, v) in [(0, 1.0), (5, 1.0), (7, 2.0), (9, 2.0), (11, 1.0)] {
            t.counter(c, at, v);
        }
        let vals: Vec<(Tick, f64)> = t.events().iter().map(|e| (e.start, e.value)).collect();
        assert_eq!(vals, vec![(0, 1.0), (7, 2.0), (11, 1.0)]);
        let due: Vec<Tick> = (0..40).filter(|&n| t.sample_due(n)).collect();
        assert_eq!(due, vec![0, 10, 20, 30]);
        let mut w = Timeline::new(cfg(100, Some((25, 45))));
        let due: Vec<Tick> = (0..60).filter(|&n| w.sample_due(n)).collect();
        assert_eq!(due, vec![25, 30, 40]);
    }

    #[test]
    fn a_counter_s_value_when_the_window_opens_is_kept_at_its_start() {
        let mut t = Timeline::new(cfg(100, Some((100, 200))));
        let a = t.track("p", "a", TrackKind::BankRow);
        let b = t.track("p", "b", TrackKind::BankRow);
        let c = t.track("p", "c", TrackKind::Counter);
        t.counter(a, 10, 5.0);
        t.counter(a, 50, 6.0);
        t.counter(a, 150, -1.0);
        t.counter(b, 20, 7.0);
        t.counter(c, 30, 1.0);
        t.counter(c, 100, 2.0);
        t.counter(c, 250, 3.0);
        let got = t.take();
        let vals: Vec<(u32, Tick, f64)> = got
            .events()
            .iter()
            .map(|e| (e.track.0, e.start, e.value))
            .collect();
        assert_eq!(
            vals,
            vec![(0, 100, 6.0), (0, 150, -1.0), (2, 100, 2.0), (1, 100, 7.0)]
        );
    }

    #[test]
    fn absorb_prefixes_processes_and_keeps_names() {
        let mut a = Timeline::new(cfg(100, None));
        let k = a.track("GPU 0", "CP", TrackKind::Spans);
        a.span(k, "Doorbell", 0, 5);
        let mut b = Timeline::new(cfg(1, None));
        let k = b.track("GPU 0", "CP", TrackKind::Spans);
        b.span(k, "NmcDone", 10, 20);
        b.span(k, "NmcDone", 30, 40);
        a.absorb(&b, "run 2: ");
        assert_eq!(a.tracks().len(), 2);
        assert_eq!(a.tracks()[1].process, "run 2: GPU 0");
        let last = a.events()[1];
        assert_eq!(a.names()[last.name as usize], "NmcDone");
        assert_eq!(last.track, TrackId(1));
        assert_eq!(a.truncated(), Some((1, 30)));
    }

    #[test]
    fn variant_names() {
        assert_eq!(variant_name("TrackerFired { entry: 3 }"), "TrackerFired");
        assert_eq!(variant_name("Deferred"), "Deferred");
        assert_eq!(variant_name("NmcDone(Ok)"), "NmcDone");
    }
}
