//! The same scenario and seed give bit-identical output across runs and across thread
//! counts (SPEC 8): every parallel path's result is keyed by its input, not by which
//! thread finished first.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nmcp-cli");

fn stdout(args: &[&str]) -> String {
    let o = Command::new(BIN).args(args).output().expect("runs nmcp");
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn t3_study_is_identical_across_runs_and_job_counts() {
    let base = [
        "t3",
        "--h",
        "512",
        "--tokens",
        "1024",
        "--tp",
        "2,4",
        "--sublayers",
        "OP,FC-1",
        "--json",
    ];
    let one = stdout(&[&base[..], &["--jobs", "1"]].concat());
    let again = stdout(&[&base[..], &["--jobs", "1"]].concat());
    let two = stdout(&[&base[..], &["--jobs", "2"]].concat());
    let three = stdout(&[&base[..], &["--jobs", "3", "--seed", "1"]].concat());
    assert_eq!(one, again);
    assert_eq!(one, two);
    assert_eq!(one, three);
    assert!(one.contains("\"total_seconds\""));
    // A given MCA threshold frees T3-MCA from waiting for the isolated GEMM: a
    // different schedule, the same rows.
    let fixed = [&base[..], &["--mca-threshold", "10"]].concat();
    let fixed_one = stdout(&[&fixed[..], &["--jobs", "1"]].concat());
    let fixed_two = stdout(&[&fixed[..], &["--jobs", "2"]].concat());
    assert_eq!(fixed_one, fixed_two);
    assert!(fixed_one.contains("\"t3-mca\""));
}

/// GOLDYLOC's quick evaluation (tuning, training and the seven configurations, every
/// rayon-parallel step recomputed: `--no-cache`) with one and with two threads.
#[test]
fn goldyloc_eval_is_identical_across_thread_counts() {
    let run = |threads: &str| {
        let o = Command::new(BIN)
            .args(["goldyloc", "eval", "--quick", "--no-cache", "--json"])
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("runs nmcp");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let one = run("1");
    assert_eq!(one, run("2"));
    assert!(one.contains("\"over_default\""), "no over_default figures");
}
