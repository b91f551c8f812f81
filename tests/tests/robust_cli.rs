//! Faults around the CLI that a table row cannot set up (docs/BAD_INPUT.md): standard
//! output full or closed, pipes as inputs, `.npy` tensors that are not finite, an update
//! in place of its own inputs, presets whose products would wrap, and caps on a sweep that
//! must reach its points.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn run_in(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(NMCP)
        .args(args)
        .current_dir(dir)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("runs the CLI");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn no_panic(err: &str) {
    assert!(
        !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
        "a panic: {err}"
    );
}

fn write_npy(path: &Path, shape: &[u64], data: &[f32]) {
    use npyz::WriterBuilder;
    let f = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(f)
        .begin_nd()
        .unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// Row `stdout-full`: a full device is an error naming stdout, exit 1, no panic.
#[test]
fn a_full_stdout_is_an_error_message_not_a_panic() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    for args in [
        &["presets"][..],
        &["mem", "--requests", "1000", "--json"][..],
        &["disasm", "--word", "0x2e041200"][..],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap();
        let o = Command::new(NMCP)
            .args(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        no_panic(&err);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("stdout: cannot write: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

/// Row `stdout-closed`: a reader that goes away (`| head`) ends the run quietly: exit 0
/// or the conventional SIGPIPE, never a panic or an error message.
#[test]
fn a_closed_stdout_ends_quietly() {
    for args in [&["presets"][..], &["mem", "--requests", "1000"][..]] {
        let mut child = Command::new(NMCP)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        no_panic(&err);
        assert!(!err.contains("error"), "{args:?}: {err}");
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            assert!(
                o.status.code() == Some(0) || o.status.signal() == Some(13),
                "{args:?}: {:?} {err}",
                o.status
            );
        }
    }
}

fn mkfifo(path: &Path) -> bool {
    Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Row `input-pipe`: a pipe is read once as it streams; a checkpointed trace, which is
/// read again on resume, must be a regular file and a pipe is refused without waiting.
#[test]
fn pipes_are_streamed_once_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fifo = d.join("p.toml");
    if !mkfifo(&fifo) {
        return;
    }
    let preset = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../emulator/presets/hbm2-2000.toml"
    ))
    .unwrap();
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let mut f = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
            f.write_all(preset.as_bytes()).unwrap();
        })
    };
    let (code, out, err) = run_in(d, &["presets", "--check", fifo.to_str().unwrap()]);
    writer.join().unwrap();
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("ok: preset `hbm2-2000`"), "{out}");

    let trace = d.join("t");
    assert!(mkfifo(&trace));
    let (code, _, err) = run_in(
        d,
        &[
            "mem",
            "--trace",
            trace.to_str().unwrap(),
            "--checkpoint-dir",
            "ck",
        ],
    );
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("t: not a regular file"), "{err}");
}

/// Rows `npy-not-finite` and `lamb-output-is-input`: NaN in a tensor names file and
/// element; an update in place of its inputs is refused and leaves them as they were.
#[test]
fn lamb_tensors_must_be_finite_and_outputs_must_not_replace_inputs() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let inp = d.join("in");
    std::fs::create_dir(&inp).unwrap();
    let mut w: Vec<f32> = (0..64).map(|i| i as f32 * 0.01).collect();
    let g: Vec<f32> = vec![1e-3; 64];
    write_npy(&inp.join("a.w.npy"), &[64], &w);
    write_npy(&inp.join("a.g.npy"), &[64], &g);
    let before = std::fs::read(inp.join("a.w.npy")).unwrap();
    let i = inp.to_str().unwrap();
    let (code, _, err) = run_in(d, &["lamb", "--input", i, "--output", i]);
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a.w.npy: is an input of this run"), "{err}");
    assert_eq!(std::fs::read(inp.join("a.w.npy")).unwrap(), before);

    w[17] = f32::NAN;
    write_npy(&inp.join("a.w.npy"), &[64], &w);
    let (code, _, err) = run_in(d, &["lamb", "--input", i]);
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("a.w.npy: element 17 is NaN"), "{err}");
}

/// Row `preset-file-out-of-bounds`: organisation sizes whose products would wrap a u32
/// (2^16 bank groups of 2^16 banks: 2^32 = 0) are refused by field, not divided by.
#[test]
fn a_preset_whose_products_would_wrap_is_refused_by_field() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let preset = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../emulator/presets/hbm2-2000.toml"
    ))
    .unwrap();
    let bad = preset
        .replacen("bank_groups = 4", "bank_groups = 65536", 1)
        .replacen("banks_per_group = 4", "banks_per_group = 65536", 1);
    assert_ne!(bad, preset);
    std::fs::write(d.join("p.toml"), bad).unwrap();
    let (code, _, err) = run_in(d, &["mem", "--preset-file", "p.toml", "--requests", "10"]);
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("organisation.bank_groups`: is 65536; at most 64"),
        "{err}"
    );
}

/// Row `sweep-caps`: `--max-events` on `nmcp sweep` binds every point (run in a child).
#[test]
fn caps_on_a_sweep_reach_its_points() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("s.toml"),
        "command = \"mem\"\n[base]\nrequests = 5000\n[grid]\nsize = [64, 32]\n",
    )
    .unwrap();
    let (code, _, err) = run_in(d, &["sweep", "s.toml", "--out", "o", "--max-events", "100"]);
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--max-events=100"), "{err}");
    assert!(err.contains("event cap reached"), "{err}");
    assert!(err.contains("2 of 2 points failed"), "{err}");
}

/// Row `dump-fuzz`: every queue dump of the fuzz corpus (`fuzz/corpus/queue_dump`: the
/// campaign's minimised inputs and every crash reproducer) through `nmcp aql decode`:
/// decoded (exit 0) or refused with a message (exit 1), never a panic.
#[test]
fn queue_dumps_of_the_fuzz_corpus_decode_or_are_refused() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/corpus/queue_dump"
    ));
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("fuzz/corpus/queue_dump")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for f in files {
        let (code, _, err) = run_in(dir, &["aql", "decode", f.to_str().unwrap()]);
        no_panic(&err);
        assert!(
            code == Some(0) || (code == Some(1) && err.contains("nmcp: error: ")),
            "{}: {code:?} {err}",
            f.display()
        );
    }
}

/// Row `mem-idle-stretch`: a trace whose second request arrives 10^15 cycles later is
/// stopped by `--max-events` (the refreshes of the gap count), not simulated for days.
#[test]
fn an_idle_stretch_counts_against_the_event_cap() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("t"), "0x0 R 0\n0x40 R 1000000000000000\n").unwrap();
    let start = std::time::Instant::now();
    let (code, _, err) = run_in(d, &["mem", "--trace", "t", "--max-events", "1000"]);
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("event cap reached"), "{err}");
    assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
}

/// Row `options-random`: `nmcp mem` with random option values (sizes in and out of
/// their bounds, floats including NaN and infinities) under an event cap either runs to
/// completion, stops at the cap with its message, or is refused with an error (exit 2
/// for an option, 1 for the run); never a panic, never a hang.
mod random_options {
    use super::{no_panic, NMCP};
    use proptest::prelude::*;

    fn float() -> impl Strategy<Value = String> {
        prop_oneof![
            (0.0f64..=1.0).prop_map(|x| x.to_string()),
            any::<f64>().prop_map(|x| x.to_string()),
            Just("nan".into()),
            Just("inf".into()),
        ]
    }

    fn size() -> impl Strategy<Value = String> {
        prop_oneof![
            (0u64..=64).prop_map(|x| x.to_string()),
            (0u32..64).prop_map(|k| (1u64 << k).to_string()),
            Just(u64::MAX.to_string()),
            Just("-1".into()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn mem_runs_within_its_caps_or_refuses(
            depth in size(),
            write_ratio in float(),
            requests in size(),
            threads in prop_oneof![Just("1".to_string()), Just("2".to_string()), size()],
            window in size(),
            request_size in prop_oneof![Just("32".to_string()), Just("64".to_string()), size()],
        ) {
            let o = std::process::Command::new(NMCP)
                .args([
                    "mem", "--max-events", "2000",
                    "--queue-depth", &depth,
                    "--write-ratio", &write_ratio,
                    "--requests", &requests,
                    "--threads", &threads,
                    "--window", &window,
                    "--size", &request_size,
                    "--json",
                ])
                .env_remove("RUST_BACKTRACE")
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            no_panic(&err);
            match o.status.code() {
                Some(0) => {
                    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                    prop_assert!(v["reads"].as_u64().is_some(), "{v}");
                }
                Some(1) => prop_assert!(err.contains("nmcp: error: "), "{err}"),
                Some(2) => prop_assert!(err.contains("error: "), "{err}"),
                other => prop_assert!(false, "exit {other:?}: {err}"),
            }
        }
    }
}

/// Row `output-is-a-link-or-pipe`: an output path that is a symbolic link replaces the
/// file it names and leaves the link a link; one that is a named pipe is written into
/// (its reader gets the bytes), not replaced by a regular file; a link to nothing is
/// refused.
#[cfg(unix)]
#[test]
fn outputs_through_links_and_pipes_reach_their_target() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("target.csv"), "old").unwrap();
    std::os::unix::fs::symlink("target.csv", d.join("link.csv")).unwrap();
    let (code, _, err) = run_in(
        d,
        &["mem", "--requests", "20", "--command-trace", "link.csv"],
    );
    no_panic(&err);
    assert_eq!(code, Some(0), "{err}");
    let meta = std::fs::symlink_metadata(d.join("link.csv")).unwrap();
    assert!(meta.file_type().is_symlink(), "the link was replaced");
    let written = std::fs::read_to_string(d.join("target.csv")).unwrap();
    assert!(
        written.contains(",ACT,") && written.contains("END_OF_SIMULATION"),
        "{written}"
    );

    std::os::unix::fs::symlink("missing.csv", d.join("dangling.csv")).unwrap();
    let (code, _, err) = run_in(
        d,
        &["mem", "--requests", "20", "--command-trace", "dangling.csv"],
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("dangling.csv: is a symbolic link to nothing"),
        "{err}"
    );

    let fifo = d.join("fifo.csv");
    let made = Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return;
    }
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    let (code, _, err) = run_in(
        d,
        &["mem", "--requests", "20", "--command-trace", "fifo.csv"],
    );
    assert_eq!(code, Some(0), "{err}");
    let got = reader.join().unwrap();
    assert!(got.contains("END_OF_SIMULATION"), "the reader got {got:?}");
    let meta = std::fs::symlink_metadata(&fifo).unwrap();
    assert!(
        std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()),
        "the pipe was replaced by a file"
    );
}

/// Rows `device-too-small` and `cp-replay-step-cap`: a device smaller than the system
/// area its top holds is refused saying so, and a replay that stops at `--max-steps` with
/// packets pending prints its report and then fails naming the cap.
#[test]
fn replay_device_and_step_cap_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (code, _, err) = run_in(
        d,
        &["cp", "gen-dump", "--queues", "1", "--gemms", "1", "q.bin"],
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run_in(
        d,
        &[
            "cp", "replay", "q.bin", "--engine", "fixed", "--cd", "1", "--device", "0:4096",
        ],
    );
    no_panic(&err);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("device memory of 4096 bytes is smaller than the 16777216-byte system area"),
        "{err}"
    );
    let (code, out, err) = run_in(
        d,
        &[
            "cp",
            "replay",
            "q.bin",
            "--engine",
            "fixed",
            "--cd",
            "1",
            "--max-steps",
            "1",
            "--json",
        ],
    );
    no_panic(&err);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("\"truncated\":true"), "{out}");
    assert!(
        err.contains("q.bin: replay stopped at --max-steps 1 with")
            && err.contains("packets pending; raise --max-steps"),
        "{err}"
    );
    let (code, _, _) = run_in(
        d,
        &[
            "cp", "replay", "q.bin", "--engine", "fixed", "--cd", "1", "--json",
        ],
    );
    assert_eq!(code, Some(0));
}
