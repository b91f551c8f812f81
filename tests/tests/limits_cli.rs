//! User-set caps (SPEC 8): a run that reaches one stops with an error saying which cap,
//! its value and what was reached; no backtrace, no output half-written.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(BIN)
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("runs nmcp");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const T3: [&str; 9] = [
    "t3",
    "--h",
    "512",
    "--tokens",
    "1024",
    "--tp",
    "4",
    "--sublayers",
    "OP",
];

#[test]
fn simulated_time_cap_stops_the_run_and_says_where() {
    let (code, out, err) = run(&[&T3[..], &["--max-sim-time", "2us", "--json"]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("simulated-time cap reached"), "{err}");
    assert!(err.contains("cap 0.002000 ms"), "{err}");
    assert!(err.contains("OP TP4"), "names the sub-layer: {err}");
}

#[test]
fn event_cap_stops_the_run_and_says_how_many() {
    let (code, _, err) = run(&[&T3[..], &["--max-events", "1000"]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("event cap reached") && err.contains("cap 1000"),
        "{err}"
    );
}

#[test]
fn memory_cap_stops_the_run_with_the_cap_and_the_use() {
    // Four 2048 x 2048 f32 partial outputs: 64 MiB.
    let (code, out, err) = run(&[
        "t3",
        "check",
        "--gpus",
        "4",
        "--m",
        "2048",
        "--n",
        "2048",
        "--k",
        "1",
        "--max-memory",
        "32M",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("memory cap reached (--max-memory 32 MiB)"),
        "{err}"
    );
    assert!(err.contains("bytes refused"), "{err}");
    assert!(!err.contains("backtrace"), "{err}");
}

#[test]
fn caps_a_run_stays_under_change_nothing() {
    let plain = run(&[&T3[..], &["--json"]].concat());
    let capped = run(&[
        &T3[..],
        &[
            "--json",
            "--max-sim-time",
            "1s",
            "--max-events",
            "100000000",
            "--max-memory",
            "4G",
        ],
    ]
    .concat());
    assert_eq!(plain.0, Some(0), "{}", plain.2);
    assert_eq!(plain.1, capped.1);
}

#[test]
fn caps_are_refused_where_not_supported_and_when_malformed() {
    let (code, _, err) = run(&["presets", "--max-events", "10"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("only `nmcp t3`"), "{err}");
    for (flag, value, says) in [
        ("--max-sim-time", "10", "give a unit"),
        ("--max-sim-time", "5 fortnights", "unknown unit"),
        ("--max-memory", "12x", "bytes"),
        ("--max-events", "0", "0"),
    ] {
        let (code, _, err) = run(&["presets", flag, value]);
        assert_eq!(code, Some(2), "{flag} {value}: {err}");
        assert!(err.contains(says), "{flag} {value}: {err}");
    }
}
