//! Timelines on the command line: the `--trace` / `--vcd` flags and the two writers.
//!
//! `--trace FILE.json` writes Chrome trace-event JSON (`traceEvents` with `M` names, `X`
//! spans, `i` instants and `C` counters; `ts` in microseconds), which Perfetto
//! (ui.perfetto.dev) and `chrome://tracing` open. `--vcd FILE.vcd` writes a Value Change
//! Dump (1 ps timescale) for GTKWave or Surfer: one module per process, per track a
//! busy wire and an in-flight count (spans), a running count (instants), a real
//! (counters), or an open wire and a row vector (banks). What is recorded where:
//! `docs/decisions/timeline.md`.

use std::collections::HashMap;
use std::path::PathBuf;

use nmcp_emulator::sim::Tick;
use nmcp_emulator::timeline::{
    Timeline, TimelineConfig, TimelineEvent, TrackKind, DEFAULT_MAX_EVENTS,
};
use serde_json::{json, Value};

use crate::cmd::io::write_file;

crate::scenario::parsed!(mod window = parse_window => (u64, u64));

/// The timeline flags a subcommand flattens in.
#[derive(clap::Args, Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct TimelineArgs {
    /// Write a timeline as Chrome trace-event JSON (open it in ui.perfetto.dev).
    #[arg(long, value_name = "FILE.json")]
    pub trace: Option<PathBuf>,
    /// Write a timeline as a VCD (bank, queue and tracker activity; GTKWave, Surfer).
    #[arg(long, value_name = "FILE.vcd")]
    pub vcd: Option<PathBuf>,
    /// Record only what overlaps [START, END) of simulated time, in ns.
    #[arg(long, value_name = "START_NS:END_NS", value_parser = parse_window)]
    #[serde(default, deserialize_with = "window::option")]
    pub trace_window: Option<(u64, u64)>,
    /// Keep at most N events; past that the timeline is truncated (with a message).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EVENTS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub trace_max_events: u64,
    /// Interval between samples of sampled counters (memory-controller queues), ns.
    #[arg(long, value_name = "NS", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub trace_sample_ns: u64,
}

/// `START_NS:END_NS`, integers, `END > START`.
pub fn parse_window(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected START_NS:END_NS (e.g. 0:5000)"))?;
    let num = |t: &str, what: &str| {
        t.trim()
            .replace('_', "")
            .parse::<u64>()
            .map_err(|e| format!("{s:?}: {what} {t:?}: {e} (whole ns)"))
    };
    let (start, end) = (num(a, "start")?, num(b, "end")?);
    if end <= start {
        return Err(format!(
            "{s:?}: the window is empty (end {end} ns must be after start {start} ns)"
        ));
    }
    if end.checked_mul(1000).is_none() {
        return Err(format!("{s:?}: end {end} ns is too large"));
    }
    Ok((start, end))
}

impl TimelineArgs {
    /// Whether a timeline is asked for.
    pub fn wanted(&self) -> bool {
        self.trace.is_some() || self.vcd.is_some()
    }

    /// The recorder's settings, if a timeline is asked for.
    pub fn config(&self) -> Option<TimelineConfig> {
        self.wanted().then(|| TimelineConfig {
            max_events: self.trace_max_events,
            window: self.trace_window.map(|(s, e)| (s * 1000, e * 1000)),
            sample_ps: self.trace_sample_ns.saturating_mul(1000),
        })
    }

    /// Writes the files asked for (atomically); says on stderr when the timeline was
    /// truncated.
    ///
    /// # Errors
    /// A file that cannot be written.
    pub fn write(&self, tl: &Timeline) -> Result<(), String> {
        if let Some((dropped, at)) = tl.truncated() {
            eprintln!(
                "timeline truncated at {} events at t = {:.3} ns ({dropped} more dropped); narrow --trace-window or raise --trace-max-events",
                tl.config().max_events,
                at as f64 / 1000.0
            );
        }
        if let Some(p) = &self.trace {
            write_file(p, &chrome_json(tl))?;
        }
        if let Some(p) = &self.vcd {
            write_file(
                p,
                &vcd_bytes(tl).map_err(|e| format!("{}: {e}", p.display()))?,
            )?;
        }
        Ok(())
    }
}

/// The file's metadata: the run's pairs plus the recording's bounds and truncation.
fn metadata(tl: &Timeline) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in tl.meta() {
        m.insert(k.clone(), Value::String(v.clone()));
    }
    let c = tl.config();
    m.insert("max_events".into(), json!(c.max_events));
    m.insert("sample_ns".into(), json!(c.sample_ps as f64 / 1000.0));
    m.insert(
        "window_ns".into(),
        c.window.map_or(Value::Null, |(s, e)| {
            json!([s as f64 / 1000.0, e as f64 / 1000.0])
        }),
    );
    m.insert("events".into(), json!(tl.events().len()));
    let t = tl.truncated();
    m.insert("truncated".into(), json!(t.is_some()));
    m.insert("dropped_events".into(), json!(t.map_or(0, |x| x.0)));
    m.insert(
        "truncated_at_ns".into(),
        t.map_or(Value::Null, |x| json!(x.1 as f64 / 1000.0)),
    );
    Value::Object(m)
}

fn us(ps: Tick) -> f64 {
    ps as f64 / 1e6
}

/// Lane of each span of one track: overlapping spans go to separate lanes (a viewer
/// nests spans of one thread, so partly overlapping ones need their own rows).
fn lanes(spans: &[(usize, &TimelineEvent)]) -> Vec<(usize, usize)> {
    let mut order: Vec<&(usize, &TimelineEvent)> = spans.iter().collect();
    order.sort_by_key(|(i, e)| (e.start, *i));
    let mut ends: Vec<Tick> = Vec::new();
    let mut out = Vec::with_capacity(spans.len());
    for (i, e) in order {
        let lane = match ends.iter().position(|&end| end <= e.start) {
            Some(l) => l,
            None => {
                ends.push(0);
                ends.len() - 1
            }
        };
        ends[lane] = e.end;
        out.push((*i, lane));
    }
    out
}

/// How one event is written: its phase and thread.
#[derive(Debug, Clone, Copy)]
enum Out {
    Span {
        pid: u64,
        tid: u64,
    },
    Instant {
        pid: u64,
        tid: u64,
    },
    /// A counter, with the index of its JSON-quoted name.
    Counter {
        pid: u64,
        name: usize,
    },
}

/// The timeline as Chrome trace-event JSON, written as it goes (no document tree: a
/// timeline of millions of events stays a few bytes per event beyond the output).
pub fn chrome_json(tl: &Timeline) -> Vec<u8> {
    use std::io::Write;
    let tracks = tl.tracks();
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let names: Vec<String> = tl.names().iter().map(|n| quote(n)).collect();
    let mut out: Vec<u8> = Vec::with_capacity(64 + 120 * tl.events().len());
    // traceEvents first (what every reader looks for), the rest after it.
    out.extend_from_slice(b"{\"traceEvents\":[");
    let mut first = true;
    let mut sep = |out: &mut Vec<u8>| {
        if !first {
            out.push(b',');
        }
        first = false;
    };
    // Processes in order of their first track; a pid each.
    let mut pids: HashMap<&str, u64> = HashMap::new();
    for t in tracks {
        if !pids.contains_key(t.process.as_str()) {
            let pid = pids.len() as u64 + 1;
            pids.insert(&t.process, pid);
            sep(&mut out);
            let _ = write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":{}}}}},\
                 {{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{pid}}}}}",
                quote(&t.process)
            );
        }
    }
    // Events per track, in recording order.
    let mut per: Vec<Vec<(usize, &TimelineEvent)>> = vec![Vec::new(); tracks.len()];
    for (i, e) in tl.events().iter().enumerate() {
        if let Some(v) = per.get_mut(e.track.0 as usize) {
            v.push((i, e));
        }
    }
    let mut next_tid: HashMap<u64, u64> = HashMap::new();
    let mut counter_names: Vec<String> = Vec::new();
    // (time, recording index, how).
    let mut body: Vec<(Tick, usize, Out)> = Vec::with_capacity(tl.events().len());
    for (k, t) in tracks.iter().enumerate() {
        let pid = pids.get(t.process.as_str()).copied().unwrap_or(0);
        let mut new_thread = |name: &str, out: &mut Vec<u8>| {
            let tid = next_tid.entry(pid).or_insert(0);
            *tid += 1;
            sep(out);
            let _ = write!(
                out,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}},\
                 {{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{tid}}}}}",
                quote(name)
            );
            *tid
        };
        let evs = &per[k];
        match t.kind {
            TrackKind::Spans => {
                let lanes = lanes(evs);
                let n_lanes = lanes.iter().map(|l| l.1 + 1).max().unwrap_or(1);
                let tids: Vec<u64> = (0..n_lanes)
                    .map(|l| {
                        if l == 0 {
                            new_thread(&t.thread, &mut out)
                        } else {
                            new_thread(&format!("{} ({})", t.thread, l + 1), &mut out)
                        }
                    })
                    .collect();
                for (i, lane) in lanes {
                    let e = &tl.events()[i];
                    body.push((
                        e.start,
                        i,
                        Out::Span {
                            pid,
                            tid: tids[lane],
                        },
                    ));
                }
            }
            TrackKind::Instants => {
                let tid = new_thread(&t.thread, &mut out);
                body.extend(
                    evs.iter()
                        .map(|&(i, e)| (e.start, i, Out::Instant { pid, tid })),
                );
            }
            TrackKind::Counter | TrackKind::BankRow => {
                let name = if t.kind == TrackKind::BankRow {
                    format!("{} row", t.thread)
                } else {
                    t.thread.clone()
                };
                counter_names.push(quote(&name));
                let name = counter_names.len() - 1;
                body.extend(
                    evs.iter()
                        .map(|&(i, e)| (e.start, i, Out::Counter { pid, name })),
                );
            }
        }
    }
    body.sort_unstable_by_key(|(t, i, _)| (*t, *i));
    let events = tl.events();
    for (_, i, how) in body {
        let e = &events[i];
        let name = names.get(e.name as usize).map_or("\"\"", String::as_str);
        sep(&mut out);
        let _ = match how {
            Out::Span { pid, tid } => write!(
                out,
                "{{\"ph\":\"X\",\"name\":{name},\"pid\":{pid},\"tid\":{tid},\"ts\":{},\"dur\":{}}}",
                us(e.start),
                us(e.end - e.start)
            ),
            Out::Instant { pid, tid } => write!(
                out,
                "{{\"ph\":\"i\",\"s\":\"t\",\"name\":{name},\"pid\":{pid},\"tid\":{tid},\"ts\":{}}}",
                us(e.start)
            ),
            Out::Counter { pid, name } => write!(
                out,
                "{{\"ph\":\"C\",\"name\":{},\"pid\":{pid},\"tid\":0,\"ts\":{},\"args\":{{\"value\":{}}}}}",
                counter_names[name],
                us(e.start),
                json_num(e.value)
            ),
        };
    }
    let _ = writeln!(
        out,
        "],\"displayTimeUnit\":\"ns\",\"metadata\":{{\"nmcp\":{}}}}}",
        metadata(tl)
    );
    out
}

/// A number as JSON (non-finite values, which JSON lacks, as null).
fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".into()
    }
}

/// A VCD identifier: letters, digits and `_` (spaces and punctuation become `_`).
fn vcd_name(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// One variable's value at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Change {
    Bit(bool),
    /// A 32-bit vector; `None` = unknown (x).
    Word(Option<u32>),
    Real(f64),
}

fn word(v: Option<u32>) -> Vec<vcd::Value> {
    match v {
        None => vec![vcd::Value::X],
        Some(v) => (0..32)
            .rev()
            .map(|b| {
                if v >> b & 1 == 1 {
                    vcd::Value::V1
                } else {
                    vcd::Value::V0
                }
            })
            .collect(),
    }
}

/// The timeline as a VCD file.
///
/// # Errors
/// An I/O error of the in-memory writer (none expected).
pub fn vcd_bytes(tl: &Timeline) -> std::io::Result<Vec<u8>> {
    use vcd::{IdCode, TimescaleUnit, VarType};
    let tracks = tl.tracks();
    let mut per: Vec<Vec<&TimelineEvent>> = vec![Vec::new(); tracks.len()];
    for e in tl.events() {
        if let Some(v) = per.get_mut(e.track.0 as usize) {
            v.push(e);
        }
    }
    let mut w = vcd::Writer::new(Vec::new());
    w.timescale(1, TimescaleUnit::PS)?;
    w.comment(&format!("nmcp timeline: {}", metadata(tl)))?;
    // Variables, grouped by process in order of first appearance.
    let mut processes: Vec<&str> = Vec::new();
    for t in tracks {
        if !processes.contains(&t.process.as_str()) {
            processes.push(&t.process);
        }
    }
    let mut changes: Vec<(Tick, IdCode, Change)> = Vec::new();
    let mut initial: Vec<(IdCode, Change)> = Vec::new();
    w.add_module("nmcp")?;
    for p in processes {
        w.add_module(&vcd_name(p))?;
        for (k, t) in tracks.iter().enumerate().filter(|(_, t)| t.process == p) {
            let name = vcd_name(&t.thread);
            let evs = &per[k];
            match t.kind {
                TrackKind::Spans => {
                    let busy = w.add_var(VarType::Wire, 1, &name, None)?;
                    let n = w.add_var(VarType::Integer, 32, &format!("{name}_n"), None)?;
                    initial.push((busy, Change::Bit(false)));
                    initial.push((n, Change::Word(Some(0))));
                    // -1 before +1 at equal times: back-to-back spans stay busy.
                    let mut d: Vec<(Tick, i32)> = evs
                        .iter()
                        .filter(|e| e.end > e.start)
                        .flat_map(|e| [(e.start, 1), (e.end, -1)])
                        .collect();
                    d.sort_unstable();
                    let mut level = 0i64;
                    let mut i = 0;
                    while i < d.len() {
                        let at = d[i].0;
                        while i < d.len() && d[i].0 == at {
                            level += i64::from(d[i].1);
                            i += 1;
                        }
                        let lv = u32::try_from(level.max(0)).unwrap_or(u32::MAX);
                        changes.push((at, busy, Change::Bit(lv > 0)));
                        changes.push((at, n, Change::Word(Some(lv))));
                    }
                }
                TrackKind::Instants => {
                    let n = w.add_var(VarType::Integer, 32, &format!("{name}_count"), None)?;
                    initial.push((n, Change::Word(Some(0))));
                    let mut ts: Vec<Tick> = evs.iter().map(|e| e.start).collect();
                    ts.sort_unstable();
                    for (c, at) in ts.iter().enumerate() {
                        let c = u32::try_from(c + 1).unwrap_or(u32::MAX);
                        changes.push((*at, n, Change::Word(Some(c))));
                    }
                }
                TrackKind::Counter => {
                    let v = w.add_var(VarType::Real, 64, &name, None)?;
                    let mut evs = evs.clone();
                    evs.sort_by_key(|e| e.start);
                    for e in evs {
                        changes.push((e.start, v, Change::Real(e.value)));
                    }
                }
                TrackKind::BankRow => {
                    let open = w.add_var(VarType::Wire, 1, &format!("{name}_open"), None)?;
                    let row = w.add_var(VarType::Reg, 32, &format!("{name}_row"), None)?;
                    initial.push((open, Change::Bit(false)));
                    initial.push((row, Change::Word(None)));
                    let mut evs = evs.clone();
                    evs.sort_by_key(|e| e.start);
                    for e in evs {
                        let r = (e.value >= 0.0).then_some(e.value as u32);
                        changes.push((e.start, open, Change::Bit(r.is_some())));
                        changes.push((e.start, row, Change::Word(r)));
                    }
                }
            }
        }
        w.upscope()?;
    }
    w.upscope()?;
    w.enddefinitions()?;
    let put = |w: &mut vcd::Writer<Vec<u8>>, id: IdCode, c: Change| match c {
        Change::Bit(b) => w.change_scalar(id, if b { vcd::Value::V1 } else { vcd::Value::V0 }),
        Change::Word(v) => w.change_vector(id, word(v)),
        Change::Real(r) => w.change_real(id, r),
    };
    w.timestamp(0)?;
    w.begin(vcd::SimulationCommand::Dumpvars)?;
    for &(id, c) in &initial {
        put(&mut w, id, c)?;
    }
    w.end()?;
    // Stable: a variable's changes at one time keep their order (the last one wins).
    changes.sort_by_key(|c| c.0);
    let mut last_t = None;
    for (at, id, c) in changes {
        if last_t != Some(at) {
            if at != 0 || last_t.is_some() {
                w.timestamp(at)?;
            }
            last_t = Some(at);
        }
        put(&mut w, id, c)?;
    }
    Ok(w.writer().clone())
}

/// Writes what `tl` holds to the files `args` name, if any.
///
/// # Errors
/// A file that cannot be written.
pub fn write_if_asked(args: &TimelineArgs, tl: Option<&Timeline>) -> Result<(), String> {
    match tl {
        Some(t) if args.wanted() => args.write(t),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmcp_emulator::timeline::TrackKind;

    fn sample() -> Timeline {
        let mut t = Timeline::new(TimelineConfig::default());
        let s = t.track("GPU 0", "DMA", TrackKind::Spans);
        let i = t.track("GPU 0", "tracker fired", TrackKind::Instants);
        let c = t.track("GPU 0 memory", "PC 0 queue", TrackKind::Counter);
        let b = t.track("GPU 0 HBM PC 0", "bank 0.1", TrackKind::BankRow);
        t.span(s, "DMA -> GPU 1", 1_000, 5_000);
        t.span(s, "DMA -> GPU 1", 2_000, 6_000);
        t.span(s, "DMA -> GPU 1", 6_000, 7_000);
        t.instant(i, "fired", 1_500);
        t.counter(c, 0, 3.0);
        t.counter(c, 4_000, 1.0);
        t.counter(b, 100, 7.0);
        t.counter(b, 900, -1.0);
        t.set_meta("model", "test");
        t
    }

    #[test]
    fn windows_parse_or_say_why_not() {
        assert_eq!(parse_window("0:5000"), Ok((0, 5000)));
        assert_eq!(parse_window(" 1_000 : 2_000 "), Ok((1000, 2000)));
        assert!(parse_window("5").unwrap_err().contains("START_NS:END_NS"));
        assert!(parse_window("5:3").unwrap_err().contains("empty"));
        assert!(parse_window("a:3").unwrap_err().contains("start"));
        assert!(parse_window("0:-1").unwrap_err().contains("end"));
    }

    #[test]
    fn chrome_json_spreads_overlapping_spans_over_lanes() {
        let v: Value = serde_json::from_slice(&chrome_json(&sample())).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let threads: Vec<&str> = evs
            .iter()
            .filter(|e| e["name"] == "thread_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(threads, vec!["DMA", "DMA (2)", "tracker fired"]);
        let x: Vec<(f64, f64, u64)> = evs
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                (
                    e["ts"].as_f64().unwrap(),
                    e["dur"].as_f64().unwrap(),
                    e["tid"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            x,
            vec![(0.001, 0.004, 1), (0.002, 0.004, 2), (0.006, 0.001, 1)]
        );
        let rows: Vec<f64> = evs
            .iter()
            .filter(|e| e["name"] == "bank 0.1 row")
            .map(|e| e["args"]["value"].as_f64().unwrap())
            .collect();
        assert_eq!(rows, vec![7.0, -1.0]);
        assert_eq!(v["metadata"]["nmcp"]["model"], "test");
        assert_eq!(v["metadata"]["nmcp"]["truncated"], false);
    }

    #[test]
    fn vcd_parses_back_with_its_variables() {
        let bytes = vcd_bytes(&sample()).unwrap();
        let mut p = vcd::Parser::new(&bytes[..]);
        let h = p.parse_header().unwrap();
        assert_eq!(h.timescale, Some((1, vcd::TimescaleUnit::PS)));
        for path in [
            ["nmcp", "GPU_0", "DMA"],
            ["nmcp", "GPU_0", "DMA_n"],
            ["nmcp", "GPU_0", "tracker_fired_count"],
            ["nmcp", "GPU_0_memory", "PC_0_queue"],
            ["nmcp", "GPU_0_HBM_PC_0", "bank_0_1_open"],
        ] {
            assert!(h.find_var(&path).is_some(), "{path:?}");
        }
        let dma = h.find_var(&["nmcp", "GPU_0", "DMA_n"]).unwrap().code;
        let mut t = 0;
        let mut levels = Vec::new();
        for c in p {
            match c.unwrap() {
                vcd::Command::Timestamp(x) => {
                    assert!(x >= t, "time goes back");
                    t = x;
                }
                vcd::Command::ChangeVector(id, v) if id == dma => {
                    let n = v
                        .iter()
                        .fold(0u32, |a, b| a * 2 + u32::from(b == vcd::Value::V1));
                    levels.push((t, n));
                }
                _ => {}
            }
        }
        // Initial 0, then 1, 2, 1, and at 6000 one ends as the next starts.
        assert_eq!(
            levels,
            vec![
                (0, 0),
                (1_000, 1),
                (2_000, 2),
                (5_000, 1),
                (6_000, 1),
                (7_000, 0)
            ]
        );
    }
}
