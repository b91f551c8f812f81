//! Checkpoint and resume: a run killed with SIGKILL after a checkpoint, resumed with
//! `nmcp resume`, prints exactly what an uninterrupted run prints; damaged checkpoints
//! are refused with what is wrong.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_nmcp-cli");

/// A small T3 study: 8 sub-layers of about a second each.
const STUDY: [&str; 9] = [
    "t3",
    "--h",
    "512",
    "--tokens",
    "1024",
    "--tp",
    "2,4",
    "--sublayers",
    "OP,FC-2,FC-1,IP",
];

fn run(args: &[&str]) -> std::process::Output {
    Command::new(BIN).args(args).output().expect("runs nmcp")
}

/// Runs nmcp and asserts it succeeded.
fn run_ok(args: &[&str]) -> std::process::Output {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Kills `args` after its first checkpoint in `ck`, resumes it, and asserts the resume
/// succeeded: (killed before finishing, the resume's output, its stderr).
fn kill_and_resume(args: &[&str], ck: &Path) -> (bool, std::process::Output, String) {
    let killed_early = kill_after_first_checkpoint(args, ck);
    let resumed = run(&["resume", ck.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&resumed.stderr).to_string();
    assert!(resumed.status.success(), "{err}");
    (killed_early, resumed, err)
}

#[test]
fn a_killed_t3_study_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let mut whole: Vec<&str> = STUDY.to_vec();
    whole.push("--json");
    let reference = run_ok(&whole);

    let mut args = whole.clone();
    args.extend(["--checkpoint-every", "1"]);
    let killed_early = kill_after_first_checkpoint(&args, &ck);

    let resumed = run(&["resume", ck.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{err}");
    assert!(err.contains("units loaded"), "{err}");
    if killed_early {
        // Not every unit was loaded: the rest ran after the resume.
        assert!(!err.contains("8 of 8 units"), "{err}");
    }
    assert_eq!(
        String::from_utf8_lossy(&resumed.stdout),
        String::from_utf8_lossy(&reference.stdout)
    );
}

/// Kills `args` (with `--checkpoint-dir ck`) with SIGKILL as soon as its first checkpoint
/// exists; whether it was still running then.
fn kill_after_first_checkpoint(args: &[&str], ck: &Path) -> bool {
    let mut args = args.to_vec();
    args.extend(["--checkpoint-dir", ck.to_str().unwrap()]);
    let mut child = Command::new(BIN)
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let file = ck.join("checkpoint.nmcp");
    let started = Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no checkpoint written"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap().code().is_none()
}

/// `nmcp mem --json` without the wall-clock figures (a measurement of the process).
fn mem_json(stdout: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(stdout).expect("JSON");
    let o = v.as_object_mut().unwrap();
    assert!(o.remove("wall_seconds").is_some());
    assert!(o.remove("requests_per_second").is_some());
    v
}

/// A DRAMsim3 trace of `n` requests (random addresses, 30 % writes, paced arrivals).
fn write_trace(path: &Path, n: u64) {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "# generated for checkpoint_cli.rs").unwrap();
    let (mut x, mut cycle) = (0x9e37_79b9_7f4a_7c15u64, 0u64);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cycle += x % 3;
        let op = if x % 10 < 3 { "W" } else { "R" };
        writeln!(f, "{:#x} {op} {cycle}", (x >> 8) & ((1 << 30) - 64)).unwrap();
    }
    f.flush().unwrap();
}

#[test]
fn a_killed_mem_trace_run_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    write_trace(&trace, 1_500_000);
    let t = trace.to_str().unwrap();
    let args = [
        "mem",
        "--trace",
        t,
        "--json",
        "--checkpoint-every",
        "100000",
    ];
    let reference = run_ok(&args[..4]);
    let ck = dir.path().join("ck");
    let (killed_early, resumed, err) = kill_and_resume(&args, &ck);
    assert!(err.contains("mid-run state"), "{err}");
    assert_eq!(mem_json(&resumed.stdout), mem_json(&reference.stdout));
    assert!(
        killed_early,
        "the run ended before it could be killed: make the trace longer"
    );

    // The same checkpoint against a changed trace is refused, naming the trace.
    std::fs::write(&trace, "0x40 R 0\n").unwrap();
    let o = run(&["resume", ck.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("the trace changed since the checkpoint"),
        "{err}"
    );
}

#[test]
fn a_killed_synthetic_mem_run_resumes_and_threads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "mem",
        "--pattern",
        "random",
        "--write-ratio",
        "0.25",
        "--requests",
        "1500000",
        "--json",
        "--checkpoint-every",
        "100000",
    ];
    let reference = run(&args[..8]);
    assert!(reference.status.success());
    let ck = dir.path().join("ck");
    let killed_early = kill_after_first_checkpoint(&args, &ck);
    let resumed = run(&["resume", ck.to_str().unwrap()]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert_eq!(mem_json(&resumed.stdout), mem_json(&reference.stdout));
    assert!(killed_early, "the run ended before it could be killed");

    let d = dir.path().join("ck2");
    let o = run(&[
        "mem",
        "--threads",
        "2",
        "--checkpoint-dir",
        d.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("only the serial run"));
}

/// A JSON report without the fields that are wall-clock measurements of the process.
fn without_seconds(stdout: &[u8]) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.retain(|k, _| !k.ends_with("seconds"));
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value = serde_json::from_slice(stdout).expect("JSON");
    strip(&mut v);
    v
}

#[test]
fn a_killed_goldyloc_tuning_resumes_without_retuning_finished_chunks() {
    let dir = tempfile::tempdir().unwrap();
    let lib_ref = dir.path().join("ref.json");
    let lib = dir.path().join("lib.json");
    let tune = |out: &Path| {
        vec![
            "goldyloc".to_string(),
            "tune".into(),
            "--quick".into(),
            "--no-cache".into(),
            "--json".into(),
            "--out".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let a = tune(&lib_ref);
    let reference = run_ok(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let ck = dir.path().join("ck");
    let a = tune(&lib);
    let killed_early =
        kill_after_first_checkpoint(&a.iter().map(String::as_str).collect::<Vec<_>>(), &ck);
    let resumed = run(&["resume", ck.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{err}");
    assert!(err.contains("units loaded"), "{err}");
    if killed_early {
        // Some chunks were loaded, not all: the rest were tuned after the resume.
        assert!(
            !err.contains(": 0 of") && !err.contains("9 of 9 units"),
            "{err}"
        );
    }
    assert_eq!(
        without_seconds(&resumed.stdout),
        without_seconds(&reference.stdout)
    );
    assert_eq!(
        std::fs::read(&lib).unwrap(),
        std::fs::read(&lib_ref).unwrap()
    );
}

#[test]
fn a_killed_lamb_sweep_resumes_to_the_uninterrupted_output() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["lamb", "--ts-sweep", "--breakdown", "--json"];
    let reference = run_ok(&args);
    let ck = dir.path().join("ck");
    let (killed_early, resumed, err) = kill_and_resume(&args, &ck);
    assert!(err.contains("units loaded"), "{err}");
    if killed_early {
        assert!(!err.contains(": 0 of 2 units"), "{err}");
    }
    let strip = |out: &[u8]| {
        let mut v: serde_json::Value = serde_json::from_slice(out).unwrap();
        let o = v.as_object_mut().unwrap();
        assert!(o.remove("wall_seconds").is_some());
        assert!(o.remove("dram_commands_per_second").is_some());
        v
    };
    assert_eq!(strip(&resumed.stdout), strip(&reference.stdout));
}

/// A checkpoint of each mechanism: T3 study, memory trace run, GOLDYLOC tuning, LAMB.
const WRITERS: [&[&str]; 4] = [
    &[
        "t3",
        "--h",
        "512",
        "--tokens",
        "1024",
        "--tp",
        "2",
        "--sublayers",
        "OP",
        "--json",
    ],
    &[
        "mem",
        "--requests",
        "50000",
        "--pattern",
        "random",
        "--checkpoint-every",
        "20000",
    ],
    &["goldyloc", "tune", "--quick", "--no-cache", "--json"],
    &["lamb", "--ts-sweep", "--json"],
];

fn write_checkpoint(args: &[&str], dir: &Path) {
    let mut args = args.to_vec();
    args.extend(["--checkpoint-dir", dir.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn damaged_checkpoints_of_every_mechanism_are_refused_with_what_is_wrong() {
    for writer in WRITERS {
        refused_when_damaged(writer);
    }
}

fn refused_when_damaged(writer: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    write_checkpoint(writer, &ck);
    let file = ck.join("checkpoint.nmcp");
    let good = std::fs::read(&file).unwrap();
    let resume = || run(&["resume", ck.to_str().unwrap()]);
    let o = resume();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_vec(), "CRC-32"),
        ("empty", Vec::new(), "too short"),
        (
            "flipped byte",
            {
                let mut b = good.clone();
                b[20] ^= 1;
                b
            },
            "CRC-32",
        ),
        (
            "not a checkpoint",
            b"hello, this is a text file".to_vec(),
            "NMCPCKPT",
        ),
        (
            "other format version",
            {
                let mut b = good.clone();
                b[8] = 7;
                b
            },
            "format version 7",
        ),
    ];
    for (what, bytes, says) in cases {
        std::fs::write(&file, &bytes).unwrap();
        let o = resume();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{writer:?} {what}: accepted");
        assert!(err.contains(says), "{writer:?} {what}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{what}: {err}"
        );
        // Refused whole: the damaged file is left as it was, nothing written over it.
        assert_eq!(std::fs::read(&file).unwrap(), bytes, "{what}");
    }
    std::fs::remove_file(&file).unwrap();
    let o = resume();
    assert!(String::from_utf8_lossy(&o.stderr).contains("checkpoint.nmcp"));
}

#[test]
fn commands_that_cannot_checkpoint_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["t3", "rs", "--bytes", "1M", "--checkpoint-dir", d]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not checkpoint"));
    let o = run(&["presets", "--checkpoint-dir", d]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("only the `nmcp t3` study"));
}

/// Row `checkpoint-unfinished-overwrite`: a fresh run (not `nmcp resume`) pointed at a
/// directory that holds another run's unfinished checkpoint is refused and the checkpoint
/// left as it was.
#[test]
fn a_fresh_run_does_not_overwrite_an_unfinished_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let ck = dir.path().join("ck");
    let args = ["lamb", "--ts-sweep", "--json"];
    let mut tries = 0;
    while !kill_after_first_checkpoint(&args, &ck) {
        // It finished before the kill: that checkpoint is complete, and may be replaced.
        tries += 1;
        assert!(
            tries < 5,
            "the run always finished before it could be killed"
        );
        std::fs::remove_dir_all(&ck).unwrap();
    }
    let file = ck.join("checkpoint.nmcp");
    let before = std::fs::read(&file).unwrap();
    let mut fresh = args.to_vec();
    fresh.extend(["--checkpoint-dir", ck.to_str().unwrap()]);
    let o = run(&fresh);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("holds an unfinished run"), "{err}");
    assert!(err.contains("nmcp resume"), "{err}");
    assert_eq!(std::fs::read(&file).unwrap(), before);
}
