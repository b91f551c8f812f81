//! `--trace` (Chrome trace-event JSON) and `--vcd` end to end: a 4-GPU T3 run and a LAMB
//! run, parsed back (serde_json, the `vcd` crate's parser) with their expected tracks;
//! the bounds (window, event cap with its message); results unchanged by recording.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

/// A small 4-GPU T3 sub-layer, every GPU simulated (no `--shortcut`).
const T3: [&str; 9] = [
    "t3",
    "--h",
    "256",
    "--tokens",
    "256",
    "--tp",
    "4",
    "--sublayers",
    "OP",
];

/// A small LAMB step (one layer, d_model 64), one engine setup.
const LAMB: [&str; 7] = [
    "lamb",
    "--layers",
    "1",
    "--d-model",
    "64",
    "--alu-models",
    "column-triggered",
];

fn nmcp(args: &[&str]) -> Output {
    Command::new(NMCP)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {NMCP}: {e}"))
}

fn ok(args: &[&str]) -> Output {
    let out = nmcp(args);
    assert!(
        out.status.success(),
        "nmcp {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn with(base: &[&str], more: &[&str]) -> Vec<String> {
    base.iter().chain(more).map(|s| s.to_string()).collect()
}

fn run(args: &[String]) -> Output {
    let v: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&v)
}

fn path(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// A parsed trace: per (process, thread) the events of each phase.
struct Trace {
    doc: Value,
    /// (process, thread or counter name) -> events (non-metadata), in file order.
    tracks: BTreeMap<(String, String), Vec<Value>>,
}

fn read_trace(file: &str) -> Trace {
    let text = std::fs::read_to_string(file).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let evs = doc["traceEvents"].as_array().expect("traceEvents").clone();
    let mut procs = HashMap::new();
    let mut threads = HashMap::new();
    for e in &evs {
        if e["ph"] == "M" {
            let name = e["args"]["name"].as_str().map(str::to_string);
            match e["name"].as_str() {
                Some("process_name") => {
                    procs.insert(e["pid"].as_u64().unwrap(), name.unwrap());
                }
                Some("thread_name") => {
                    threads.insert(
                        (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()),
                        name.unwrap(),
                    );
                }
                _ => {}
            }
        }
    }
    let mut tracks: BTreeMap<(String, String), Vec<Value>> = BTreeMap::new();
    for e in evs {
        let ph = e["ph"].as_str().unwrap().to_string();
        if ph == "M" {
            continue;
        }
        assert!(
            ["X", "i", "C"].contains(&ph.as_str()),
            "unexpected phase {ph}"
        );
        let pid = e["pid"].as_u64().unwrap();
        let p = procs.get(&pid).expect("every pid is named").clone();
        let t = if ph == "C" {
            e["name"].as_str().unwrap().to_string()
        } else {
            let tid = e["tid"].as_u64().unwrap();
            let name = threads.get(&(pid, tid)).expect("every tid is named");
            // Overlapping spans of one track sit on lanes "NAME (2)", ...
            match name.rfind(" (") {
                Some(i)
                    if name.ends_with(')')
                        && name[i + 2..name.len() - 1].parse::<u32>().is_ok() =>
                {
                    name[..i].to_string()
                }
                _ => name.clone(),
            }
        };
        tracks.entry((p, t)).or_default().push(e);
    }
    Trace { doc, tracks }
}

impl Trace {
    fn get(&self, process: &str, thread: &str) -> &[Value] {
        self.tracks
            .get(&(process.to_string(), thread.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    fn count(&self, process: &str, thread: &str, ph: &str) -> usize {
        self.get(process, thread)
            .iter()
            .filter(|e| e["ph"] == ph)
            .count()
    }

    /// Every span has `dur >= 0`, timestamps are finite and >= 0, and each track's
    /// events come in time order.
    fn check_well_formed(&self) {
        for (k, evs) in &self.tracks {
            let mut last = f64::NEG_INFINITY;
            for e in evs {
                let ts = e["ts"].as_f64().expect("ts");
                assert!(ts.is_finite() && ts >= 0.0, "{k:?}: ts {ts}");
                assert!(ts >= last, "{k:?}: {ts} after {last}");
                last = ts;
                if e["ph"] == "X" {
                    let d = e["dur"].as_f64().expect("dur");
                    assert!(d >= 0.0, "{k:?}: dur {d}");
                }
            }
        }
    }

    fn meta(&self) -> &Value {
        &self.doc["metadata"]["nmcp"]
    }

    fn events(&self) -> usize {
        self.tracks.values().map(Vec::len).sum()
    }
}

/// The VCD's variables by (scope path, name) and the number of value changes of each.
fn read_vcd(file: &str) -> (vcd::Header, HashMap<String, usize>) {
    let bytes = std::fs::read(file).unwrap();
    let mut p = vcd::Parser::new(&bytes[..]);
    let h = p.parse_header().expect("VCD header");
    assert_eq!(h.timescale, Some((1, vcd::TimescaleUnit::PS)));
    let mut codes: HashMap<vcd::IdCode, String> = HashMap::new();
    fn walk(items: &[vcd::ScopeItem], path: &str, codes: &mut HashMap<vcd::IdCode, String>) {
        for i in items {
            match i {
                vcd::ScopeItem::Scope(s) => {
                    walk(&s.items, &format!("{path}{}/", s.identifier), codes);
                }
                vcd::ScopeItem::Var(v) => {
                    codes.insert(v.code, format!("{path}{}", v.reference));
                }
                _ => {}
            }
        }
    }
    walk(&h.items, "", &mut codes);
    let mut changes: HashMap<String, usize> = codes.values().map(|n| (n.clone(), 0)).collect();
    let mut t = 0;
    for c in p {
        let c = c.expect("VCD body");
        let id = match c {
            vcd::Command::Timestamp(x) => {
                assert!(x >= t, "VCD time goes back: {x} after {t}");
                t = x;
                continue;
            }
            vcd::Command::ChangeScalar(id, _)
            | vcd::Command::ChangeVector(id, _)
            | vcd::Command::ChangeReal(id, _) => id,
            _ => continue,
        };
        let name = codes.get(&id).expect("a change names a declared variable");
        *changes.get_mut(name).unwrap() += 1;
    }
    (h, changes)
}

#[test]
fn a_4_gpu_t3_run_traces_kernels_dma_cp_and_queues_and_keeps_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let (json, vcd) = (path(dir.path(), "t3.json"), path(dir.path(), "t3.vcd"));
    let plain = run(&with(&T3, &["--json"]));
    let traced = run(&with(&T3, &["--json", "--trace", &json, "--vcd", &vcd]));
    assert_eq!(plain.stdout, traced.stdout, "recording changed the results");
    let t = read_trace(&json);
    t.check_well_formed();
    assert_eq!(t.meta()["truncated"], false);
    assert_eq!(t.meta()["gpus"], "4");
    assert_eq!(t.meta()["simulated_gpus"], "4");
    for run in ["t3", "t3-mca"] {
        for g in 0..4 {
            let p = format!("{run}: GPU {g}");
            let kernels = t.get(&p, "kernels");
            assert_eq!(kernels.len(), 1, "{p}: one producer kernel");
            assert_eq!(kernels[0]["name"], "GEMM (producer)");
            assert!(kernels[0]["dur"].as_f64().unwrap() > 0.0);
            assert!(t.count(&p, "DMA", "X") > 0, "{p}: DMA transfers");
            assert!(t.count(&p, "link out", "X") > 0, "{p}: link transfers");
            assert!(t.count(&p, "CP (firmware)", "i") > 0, "{p}: firmware runs");
            assert!(
                t.count(&p, "tracker fired", "i") > 0,
                "{p}: tracker firings"
            );
            assert!(
                t.count(&p, "workgroups running", "C") > 1,
                "{p}: WG counter"
            );
            let m = format!("{p} memory");
            let queued: f64 = (0..32)
                .flat_map(|pc| t.get(&m, &format!("PC {pc} queue")))
                .map(|e| e["args"]["value"].as_f64().unwrap())
                .fold(0.0, f64::max);
            assert!(queued > 0.0, "{m}: some controller queue holds requests");
            assert!(t.count(&m, "requests in flight", "C") > 1);
        }
    }
    // The firmware's handlers: the job's start and the tracked regions' completions.
    let cp: Vec<&str> = t
        .get("t3: GPU 1", "CP (firmware)")
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    for want in ["start_t3", "RegionDone"] {
        assert!(cp.contains(&want), "{want} missing from {cp:?}");
    }
    let (h, changes) = read_vcd(&vcd);
    for v in [
        ["nmcp", "t3__GPU_0", "kernels"],
        ["nmcp", "t3__GPU_3", "DMA_n"],
        ["nmcp", "t3__GPU_2", "tracker_fired_count"],
        ["nmcp", "t3__GPU_1", "tracker_live_entries"],
        ["nmcp", "t3__GPU_0_memory", "PC_0_queue"],
    ] {
        assert!(h.find_var(&v).is_some(), "{v:?} missing from the VCD");
    }
    assert!(changes["nmcp/t3__GPU_3/DMA"] > 2);
    assert!(changes["nmcp/t3__GPU_2/tracker_fired_count"] > 2);
    assert!(changes["nmcp/t3_mca__GPU_1/tracker_live_entries"] > 1);
    eprintln!(
        "T3 trace {} B, VCD {} B, {} events",
        std::fs::metadata(&json).unwrap().len(),
        std::fs::metadata(&vcd).unwrap().len(),
        t.events()
    );
}

/// The LAMB report minus its wall-clock figures.
fn lamb_figures(out: &Output) -> Value {
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("wall_seconds");
    o.remove("dram_commands_per_second");
    v
}

#[test]
fn a_lamb_run_traces_nmc_commands_banks_and_the_queue_and_keeps_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let (json, vcd) = (path(dir.path(), "lamb.json"), path(dir.path(), "lamb.vcd"));
    let plain = run(&with(&LAMB, &["--json"]));
    let traced = run(&with(&LAMB, &["--json", "--trace", &json, "--vcd", &vcd]));
    assert_eq!(lamb_figures(&plain), lamb_figures(&traced));
    let t = read_trace(&json);
    t.check_well_formed();
    assert_eq!(t.meta()["model"], "lamb");
    assert_eq!(t.meta()["truncated"], false);
    let cp = t.get("GPU 0", "CP (firmware)");
    assert!(cp.iter().any(|e| e["name"] == "start_lamb"));
    assert!(cp.iter().any(|e| e["name"] == "NmcDone"));
    assert!(
        cp.iter().any(|e| e["dur"].as_f64().unwrap() > 0.0),
        "the CP is busy"
    );
    let engine = t.get("GPU 0 NMC", "PC 0 engine");
    assert!(engine
        .iter()
        .any(|e| e["name"].as_str().unwrap().starts_with("macro AllBank")));
    assert!(engine.iter().any(|e| e["name"] == "accumulator read-out"));
    let queue = t.get("GPU 0 NMC", "macro-command queue");
    assert!(queue
        .iter()
        .any(|e| e["args"]["value"].as_f64().unwrap() >= 1.0));
    assert_eq!(
        queue.last().unwrap()["args"]["value"],
        0.0,
        "the queue drains"
    );
    let rows = t.get("GPU 0 HBM PC 0", "bank 0.0 row");
    assert!(rows
        .iter()
        .any(|e| e["args"]["value"].as_f64().unwrap() >= 0.0));
    assert!(rows.iter().any(|e| e["args"]["value"] == -1.0));
    let (h, changes) = read_vcd(&vcd);
    for v in [
        ["nmcp", "GPU_0_NMC", "PC_0_engine"],
        ["nmcp", "GPU_0_NMC", "macro_command_queue"],
        ["nmcp", "GPU_0", "CP__firmware_"],
        ["nmcp", "GPU_0_HBM_PC_0", "bank_3_3_open"],
        ["nmcp", "GPU_0_HBM_PC_0", "bank_3_3_row"],
    ] {
        assert!(h.find_var(&v).is_some(), "{v:?} missing from the VCD");
    }
    for bank in 0..16 {
        let name = format!("nmcp/GPU_0_HBM_PC_0/bank_{}_{}_open", bank / 4, bank % 4);
        assert!(changes[&name] > 2, "{name}: {}", changes[&name]);
    }
    assert!(changes["nmcp/GPU_0_NMC/PC_0_engine"] > 2);
    assert!(changes["nmcp/GPU_0_NMC/macro_command_queue"] > 2);
    eprintln!(
        "LAMB trace {} B, VCD {} B, {} events",
        std::fs::metadata(&json).unwrap().len(),
        std::fs::metadata(&vcd).unwrap().len(),
        t.events()
    );
}

#[test]
fn a_tiny_event_cap_truncates_with_a_message_and_a_flag() {
    let dir = tempfile::tempdir().unwrap();
    let json = path(dir.path(), "t.json");
    let out = run(&with(
        &LAMB,
        &["--json", "--trace", &json, "--trace-max-events", "10"],
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("timeline truncated at 10 events at t = ")
            && err.contains("narrow --trace-window or raise --trace-max-events"),
        "{err}"
    );
    let t = read_trace(&json);
    assert_eq!(t.events(), 10);
    assert_eq!(t.meta()["truncated"], true);
    assert!(t.meta()["dropped_events"].as_u64().unwrap() > 0);
    assert!(t.meta()["truncated_at_ns"].as_f64().is_some());
}

#[test]
fn a_window_keeps_only_what_overlaps_it() {
    let dir = tempfile::tempdir().unwrap();
    let json = path(dir.path(), "w.json");
    run(&with(
        &T3,
        &["--trace", &json, "--trace-window", "1000:2000"],
    ));
    let t = read_trace(&json);
    assert!(t.events() > 0);
    for evs in t.tracks.values() {
        for e in evs {
            let ts = e["ts"].as_f64().unwrap();
            let end = ts + e["dur"].as_f64().unwrap_or(0.0);
            assert!(
                (1.0..2.0).contains(&ts) && end <= 2.0 + 1e-9,
                "{e} outside [1, 2) us"
            );
        }
    }
    assert_eq!(t.meta()["window_ns"], serde_json::json!([1000.0, 2000.0]));
}

#[test]
fn bad_timeline_flags_are_usage_errors() {
    for (args, want) in [
        (
            vec!["t3", "--trace", "x.json", "--trace-window", "5:3"],
            "empty",
        ),
        (
            vec!["t3", "--trace", "x.json", "--trace-window", "5"],
            "START_NS:END_NS",
        ),
        (
            vec!["lamb", "--vcd", "x.vcd", "--trace-window", "a:9"],
            "start",
        ),
        (
            vec!["t3", "--trace", "x.json", "--trace-max-events", "0"],
            "--trace-max-events",
        ),
    ] {
        let out = nmcp(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains(want), "{args:?}: {e}");
        assert!(!Path::new("x.json").exists() && !Path::new("x.vcd").exists());
    }
    // The study records one sub-layer.
    let out = nmcp(&[
        "t3", "--h", "256", "--tokens", "256", "--tp", "4", "--trace", "x.json",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("one sub-layer") && e.contains("4 are selected"),
        "{e}"
    );
}

/// GOLDYLOC's side: a queue dump replayed through the firmware CP on the GEMM model,
/// traced: the CP's busy spans, one instant per decision and a span per kernel, with the
/// same replay result as without the trace.
#[test]
fn a_cp_replay_traces_cp_decisions_and_kernels_and_keeps_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let dump = path(dir.path(), "q.bin");
    ok(&["cp", "gen-dump", &dump, "--queues", "4", "--gemms", "4"]);
    let (json, vcd) = (path(dir.path(), "cp.json"), path(dir.path(), "cp.vcd"));
    let base = ["cp", "replay", dump.as_str(), "--cd", "2", "--json"];
    let plain = run(&with(&base, &[]));
    let traced = run(&with(&base, &["--trace", &json, "--vcd", &vcd]));
    assert_eq!(plain.stdout, traced.stdout, "tracing changed the replay");
    let t = read_trace(&json);
    t.check_well_formed();
    let summary: Value = String::from_utf8_lossy(&plain.stdout)
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_default();
    let dispatched = summary["summary"]["dispatched"].as_u64().unwrap_or(0) as usize;
    assert!(dispatched > 0, "{summary}");
    assert!(t.count("GPU 0", "CP (firmware)", "X") > 0, "no CP spans");
    let decisions = t.get("GPU 0", "CP decisions");
    assert!(
        decisions
            .iter()
            .any(|e| e["name"].as_str().unwrap_or("").contains("Dispatched")),
        "no decisions"
    );
    let kernels = t.count("GPU 0", "kernels", "X");
    assert_eq!(kernels, dispatched, "one kernel span per dispatched packet");
    let (h, changes) = read_vcd(&vcd);
    assert!(h.find_var(&["nmcp", "GPU_0", "kernels"]).is_some());
    assert!(changes["nmcp/GPU_0/kernels"] > 1);
}
