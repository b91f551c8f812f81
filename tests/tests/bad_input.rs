//! The bad-input catalogue (docs/BAD_INPUT.md), row by row: every malformed input the CLI
//! accepts gets an error that says what and where, the exit code of its kind (2 for a
//! usage error clap or a command finds in an option, 1 for a bad file or a run that
//! cannot go on), no Rust backtrace or panic, and no output file left behind. The
//! catalogue and this table must list the same rows (checked below).

use std::path::Path;
use std::process::Command;

const NMCP: &str = env!("CARGO_BIN_EXE_nmcp-cli");

/// One malformed input. `{d}` in `args` is the case's temporary directory, where
/// `files` are written first.
struct Case {
    id: &'static str,
    files: &'static [(&'static str, &'static [u8])],
    args: &'static [&'static str],
    code: i32,
    says: &'static [&'static str],
}

const CASES: &[Case] = &[
    // ----- memory traces (nmcp mem --trace) -----
    Case {
        id: "trace-bad-op",
        files: &[("t", b"0x10 R 5\n0x20 Q 6\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:2:6", "expected R or W", "`Q`"],
    },
    Case {
        id: "trace-bad-address",
        files: &[("t", b"zz R 5\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:1:1", "expected an address"],
    },
    Case {
        id: "trace-missing-cycle",
        files: &[("t", b"0x10 R\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:1:7", "arrival cycle"],
    },
    Case {
        id: "trace-cycle-goes-back",
        files: &[("t", b"0x10 R 9\n0x20 R 3\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:2:", "before the previous line"],
    },
    Case {
        id: "trace-ramulator-bad-op",
        files: &[("t", b"LD 0x10\nXX 0x20\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:2:1", "expected LD or ST"],
    },
    Case {
        id: "trace-not-utf8",
        files: &[("t", b"\xff\xfe\x00garbage\n")],
        args: &["mem", "--trace", "{d}/t"],
        code: 1,
        says: &["t:1:1", "expected an address"],
    },
    Case {
        id: "trace-missing-file",
        files: &[],
        args: &["mem", "--trace", "{d}/nope"],
        code: 1,
        says: &["nope", "No such file"],
    },
    Case {
        id: "trace-is-a-directory",
        files: &[],
        args: &["mem", "--trace", "{d}"],
        code: 1,
        says: &["directory"],
    },
    Case {
        id: "mem-requests-absurd",
        files: &[],
        args: &["mem", "--requests", "99999999999999"],
        code: 2,
        says: &["above 2^34", "use a trace file"],
    },
    Case {
        id: "mem-event-cap",
        files: &[],
        args: &["mem", "--max-events", "1000"],
        code: 1,
        says: &["event cap reached", "cap 1000", "1000 requests finished"],
    },
    // ----- HBM presets and mappings -----
    Case {
        id: "preset-unknown-name",
        files: &[],
        args: &["mem", "--preset", "hbm9"],
        code: 1,
        says: &["no preset named `hbm9`", "hbm2-2000"],
    },
    Case {
        id: "preset-file-unknown-key",
        files: &[("p.toml", b"name = \"x\"\nbogus = 1\n")],
        args: &["presets", "--check", "{d}/p.toml"],
        code: 1,
        says: &["p.toml", "line 2, column 1"],
    },
    Case {
        id: "preset-file-bad-type",
        files: &[("p.toml", b"[timing]\ntRCD = \"x\"\n")],
        args: &["mem", "--preset-file", "{d}/p.toml"],
        code: 1,
        says: &["p.toml", "line 2"],
    },
    Case {
        id: "mapping-bad-token",
        files: &[],
        args: &["mem", "--mapping", "xx"],
        code: 1,
        says: &["--mapping xx", "token 1 `xx`"],
    },
    // ----- NMC assembly and binaries -----
    Case {
        id: "asm-unknown-instruction",
        files: &[("a.s", b"addi r1 r2\n")],
        args: &["asm", "{d}/a.s"],
        code: 1,
        says: &["a.s:1:1", "unknown instruction"],
    },
    Case {
        id: "asm-bad-operand",
        files: &[("a.s", b"ADD GRF_A[0], BANK, 99\n")],
        args: &["asm", "{d}/a.s"],
        code: 1,
        says: &["a.s:1:4", "type suffix"],
    },
    Case {
        id: "asm-unfinished-macro",
        files: &[("a.s", b".macro\naddi\n")],
        args: &["asm", "{d}/a.s"],
        code: 1,
        says: &["a.s:1:"],
    },
    Case {
        id: "disasm-bad-magic",
        files: &[("x.bin", b"0123456789abcdef")],
        args: &["disasm", "{d}/x.bin"],
        code: 1,
        says: &["x.bin: offset 0: magic"],
    },
    Case {
        id: "disasm-truncated",
        files: &[("x.bin", b"NMCB\x01\x00")],
        args: &["disasm", "{d}/x.bin"],
        code: 1,
        says: &["x.bin: offset 6", "truncated"],
    },
    Case {
        id: "disasm-bad-word",
        files: &[],
        args: &["disasm", "--word", "0xffffffff"],
        code: 1,
        says: &["word 0xffffffff"],
    },
    // ----- AQL queue dumps -----
    Case {
        id: "dump-partial-record",
        files: &[("q.bin", &[0u8; 100])],
        args: &["aql", "decode", "{d}/q.bin"],
        code: 1,
        says: &["q.bin", "not a multiple of 64", "offset 64"],
    },
    Case {
        id: "replay-partial-record",
        files: &[("q.bin", &[0u8; 100])],
        args: &["cp", "replay", "--cd", "1", "{d}/q.bin"],
        code: 1,
        says: &["q.bin", "offset 64"],
    },
    Case {
        id: "replay-bad-device-range",
        files: &[],
        args: &["cp", "replay", "--device", "zz", "x"],
        code: 2,
        says: &["--device", "BASE:LEN"],
    },
    // ----- GOLDYLOC GEMM lists -----
    Case {
        id: "gemms-field-count",
        files: &[("g.csv", b"M,N,K\n1,2\n")],
        args: &["goldyloc", "tune", "--quick", "--gemms", "{d}/g.csv"],
        code: 1,
        says: &["g.csv: line 2", "expected 6 or 7 fields"],
    },
    Case {
        id: "gemms-zero-dimension",
        files: &[("g.csv", b"64,64,0,N,N,f16\n")],
        args: &["goldyloc", "tune", "--quick", "--gemms", "{d}/g.csv"],
        code: 1,
        says: &["g.csv: line 1, column 3", "not a positive integer"],
    },
    Case {
        id: "gemms-bad-dtype",
        files: &[("g.csv", b"64,64,64,N,N,f8\n")],
        args: &["goldyloc", "tune", "--quick", "--gemms", "{d}/g.csv"],
        code: 1,
        says: &["g.csv: line 1, column 6", "`f8`"],
    },
    // ----- LAMB -----
    Case {
        id: "lamb-input-empty-dir",
        files: &[],
        args: &["lamb", "--input", "{d}"],
        code: 1,
        says: &["no NAME.w.npy files"],
    },
    Case {
        id: "lamb-ts-zero",
        files: &[],
        args: &["lamb", "--ts", "0"],
        code: 1,
        says: &["--ts 0", "1..=1024"],
    },
    Case {
        id: "lamb-functional-too-large",
        files: &[],
        args: &[
            "lamb",
            "--layers",
            "100000",
            "--d-model",
            "100000",
            "--functional",
        ],
        code: 1,
        says: &["rows per bank"],
    },
    // ----- T3 -----
    Case {
        id: "t3-tp-below-two",
        files: &[],
        args: &["t3", "--tp", "1"],
        code: 2,
        says: &["--tp", "at least 2"],
    },
    Case {
        id: "t3-unknown-sublayer",
        files: &[],
        args: &["t3", "--sublayers", "XX"],
        code: 2,
        says: &["unknown sub-layer", "FC-2"],
    },
    Case {
        id: "t3-unknown-model",
        files: &[],
        args: &["t3", "--models", "gpt-9"],
        code: 2,
        says: &["unknown model", "mega-gpt-2"],
    },
    Case {
        id: "t3-link-zero",
        files: &[],
        args: &["t3", "--link-gbps", "0"],
        code: 2,
        says: &["--link-gbps", "positive"],
    },
    Case {
        id: "t3-rs-zero-bytes",
        files: &[],
        args: &["t3", "rs", "--bytes", "0"],
        code: 2,
        says: &["nothing to reduce"],
    },
    Case {
        id: "timeline-window-empty",
        files: &[],
        args: &["t3", "--trace", "{d}/t.json", "--trace-window", "5:3"],
        code: 2,
        says: &[
            "--trace-window",
            "the window is empty",
            "end 3 ns must be after start 5 ns",
        ],
    },
    Case {
        id: "timeline-window-malformed",
        files: &[],
        args: &["lamb", "--vcd", "{d}/t.vcd", "--trace-window", "5"],
        code: 2,
        says: &["--trace-window", "expected START_NS:END_NS"],
    },
    Case {
        id: "timeline-window-not-a-number",
        files: &[],
        args: &["t3", "--trace", "{d}/t.json", "--trace-window", "a:9"],
        code: 2,
        says: &["--trace-window", "start \"a\"", "whole ns"],
    },
    Case {
        id: "timeline-max-events-zero",
        files: &[],
        args: &["lamb", "--trace", "{d}/t.json", "--trace-max-events", "0"],
        code: 2,
        says: &["--trace-max-events", "0"],
    },
    Case {
        id: "timeline-several-sublayers",
        files: &[],
        args: &[
            "t3",
            "--h",
            "256",
            "--tokens",
            "256",
            "--tp",
            "4",
            "--trace",
            "{d}/t.json",
        ],
        code: 2,
        says: &[
            "record one sub-layer's runs",
            "4 are selected",
            "--sublayers",
        ],
    },
    Case {
        id: "t3-check-too-few-tiles",
        files: &[],
        args: &["t3", "check", "--m", "3", "--n", "3", "--gpus", "4"],
        code: 2,
        says: &["fewer than the GPUs"],
    },
    Case {
        id: "t3-check-too-large",
        files: &[],
        args: &["t3", "check", "--m", "8192", "--n", "8192", "--k", "8192"],
        code: 2,
        says: &["too large for a functional check"],
    },
    Case {
        id: "t3-shortcut-unequal-chunks",
        files: &[],
        args: &[
            "t3",
            "--h",
            "382",
            "--tokens",
            "32",
            "--tp",
            "2",
            "--sublayers",
            "OP",
            "--shortcut",
        ],
        code: 2,
        says: &["symmetric shortcut needs"],
    },
    // ----- checkpoints and caps -----
    Case {
        id: "resume-no-checkpoint",
        files: &[],
        args: &["resume", "{d}"],
        code: 1,
        says: &["checkpoint.nmcp", "No such file"],
    },
    Case {
        id: "resume-not-a-checkpoint",
        files: &[("checkpoint.nmcp", b"hello, this is text")],
        args: &["resume", "{d}"],
        code: 1,
        says: &["not a usable checkpoint", "NMCPCKPT"],
    },
    Case {
        id: "checkpoint-unsupported-command",
        files: &[],
        args: &["presets", "--checkpoint-dir", "{d}"],
        code: 2,
        says: &["only the `nmcp t3` study, `nmcp mem`"],
    },
    Case {
        id: "checkpoint-mem-threads",
        files: &[],
        args: &["mem", "--threads", "2", "--checkpoint-dir", "{d}"],
        code: 1,
        says: &["checkpoints only the serial run"],
    },
    Case {
        id: "max-sim-time-no-unit",
        files: &[],
        args: &["t3", "--max-sim-time", "10"],
        code: 2,
        says: &["give a unit"],
    },
    Case {
        id: "max-memory-bad-size",
        files: &[],
        args: &["t3", "--max-memory", "12x"],
        code: 2,
        says: &["--max-memory"],
    },
    // ----- the run's files, sizes and numbers (every command) -----
    Case {
        id: "output-is-input",
        files: &[("a.s", b"fma.f32 ts0, mem, s1, ts0\n")],
        args: &["asm", "{d}/a.s", "-o", "{d}/a.s"],
        code: 1,
        says: &["a.s: is an input of this run", "refusing to overwrite it"],
    },
    Case {
        id: "output-is-a-directory",
        files: &[],
        args: &["cp", "gen-dump", "{d}"],
        code: 1,
        says: &["is a directory; name a file for the output"],
    },
    Case {
        id: "input-endless",
        files: &[],
        args: &["presets", "--check", "/dev/zero"],
        code: 1,
        says: &["/dev/zero: larger than 67108864 bytes"],
    },
    Case {
        id: "float-not-finite",
        files: &[],
        args: &["lamb", "--lr", "nan"],
        code: 2,
        says: &["--lr", "NaN: must be a finite number"],
    },
    Case {
        id: "float-out-of-range",
        files: &[],
        args: &["lamb", "--beta2", "1"],
        code: 2,
        says: &["--beta2", "must be in [0, 1)"],
    },
    Case {
        id: "float-beyond-f32",
        files: &[],
        args: &["lamb", "--eps", "1e39"],
        code: 2,
        says: &["--eps", "beyond the f32 range"],
    },
    Case {
        id: "size-above-bound",
        files: &[],
        args: &["cp", "gen-dump", "{d}/q.bin", "--gemms", "4000000000"],
        code: 2,
        says: &["--gemms", "4000000000 is not in 1..=4096"],
    },
    Case {
        id: "size-zero-that-would-hang",
        files: &[],
        args: &["mem", "--threads", "2", "--window", "0"],
        code: 2,
        says: &["--window", "0 is not in 1..=4294967296"],
    },
    Case {
        id: "gemms-above-bound",
        files: &[("g.csv", b"64,64,64,0,0,f16\n1,1,4294967296,0,0,f16\n")],
        args: &["goldyloc", "eval", "--quick", "--gemms", "{d}/g.csv"],
        code: 1,
        says: &["g.csv: line 2, column 3", "K 4294967296 is above 1048576"],
    },
    Case {
        id: "output-dir-missing",
        files: &[],
        args: &[
            "mem",
            "--requests",
            "10",
            "--command-trace",
            "{d}/nodir/c.csv",
        ],
        code: 1,
        says: &["c.csv: cannot write: the directory", "nodir does not exist"],
    },
    Case {
        id: "float-duration-above-bound",
        files: &[],
        args: &[
            "t3",
            "rs",
            "--gpus",
            "4",
            "--bytes",
            "1024",
            "--link-latency-ns",
            "1e300",
        ],
        code: 2,
        says: &["--link-latency-ns", "ns: above 1 s"],
    },
    Case {
        id: "float-bandwidth-out-of-range",
        files: &[],
        args: &[
            "t3",
            "rs",
            "--gpus",
            "4",
            "--bytes",
            "1024",
            "--link-gbps",
            "1e-300",
        ],
        code: 2,
        says: &["--link-gbps", "GB/s: must be in [0.01, 1000000]"],
    },
    Case {
        id: "t3-custom-model-too-large",
        files: &[],
        args: &[
            "t3",
            "--shortcut",
            "--h",
            "4294967295",
            "--tokens",
            "4294967295",
            "--tp",
            "2",
        ],
        code: 2,
        says: &["--h", "not in 1..=131072"],
    },
    Case {
        id: "device-range-wraps",
        files: &[],
        args: &[
            "cp",
            "replay",
            "{d}/q.bin",
            "--device",
            "0xffffffffff000000:0x2000000",
        ],
        code: 2,
        says: &["--device", "BASE + LEN is past the 64-bit address space"],
    },
    Case {
        id: "mem-nothing-to-run",
        files: &[("t", b"# only a comment\n")],
        args: &["mem", "--trace", "{d}/t", "--json"],
        code: 1,
        says: &["t: holds no requests (an empty trace)"],
    },
    Case {
        id: "mem-requests-zero",
        files: &[],
        args: &["mem", "--requests", "0"],
        code: 2,
        says: &["--requests", "0 requests: nothing to simulate"],
    },
    Case {
        id: "sweep-jobs-above-bound",
        files: &[("s.toml", b"command = \"mem\"\n[grid]\nsize = [32]\n")],
        args: &["sweep", "{d}/s.toml", "--jobs", "4294967295"],
        code: 2,
        says: &["--jobs", "4294967295 is not in 0..=1024"],
    },
    Case {
        id: "sweep-out-is-a-file",
        files: &[("s.toml", b"command = \"mem\"\n[grid]\nsize = [32]\n")],
        args: &["sweep", "{d}/s.toml", "--out", "{d}/s.toml"],
        code: 1,
        says: &["s.toml: is a file; a sweep's results go in a directory"],
    },
    Case {
        id: "sim-caps-on-a-command-without-them",
        files: &[],
        args: &["lamb", "--max-events", "10"],
        code: 2,
        says: &["only `nmcp t3`, `nmcp mem` and `nmcp sweep`"],
    },
];

fn run(case: &Case, dir: &Path) -> (Option<i32>, String, String) {
    let d = dir.to_str().expect("utf-8 temp path");
    let args: Vec<String> = case.args.iter().map(|a| a.replace("{d}", d)).collect();
    let o = Command::new(NMCP)
        .args(&args)
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

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn every_catalogued_bad_input_gets_its_error() {
    let mut failures = Vec::new();
    for case in CASES {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in case.files {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let before = listing(dir.path());
        let (code, _out, err) = run(case, dir.path());
        let mut why = Vec::new();
        if code != Some(case.code) {
            why.push(format!("exit code {code:?}, expected {}", case.code));
        }
        for s in case.says {
            if !err.contains(s) {
                why.push(format!("stderr lacks {s:?}"));
            }
        }
        for bad in ["panicked", "backtrace", "RUST_BACKTRACE"] {
            if err.contains(bad) {
                why.push(format!("stderr has {bad:?}"));
            }
        }
        if listing(dir.path()) != before {
            why.push(format!("left files: {:?}", listing(dir.path())));
        }
        if !why.is_empty() {
            failures.push(format!(
                "{}: {}\n  stderr: {}",
                case.id,
                why.join("; "),
                err.trim()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_catalogue_lists_exactly_these_rows() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let doc =
        std::fs::read_to_string(format!("{root}/docs/BAD_INPUT.md")).expect("docs/BAD_INPUT.md");
    // Rows: | `id` | input | malformed variant | error | test |
    let rows: Vec<(String, String)> = doc
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = cells[1].trim_matches('`').to_string();
            let test = cells[cells.len() - 2].to_string();
            (id, test)
        })
        .collect();
    for c in CASES {
        assert!(
            rows.iter()
                .any(|(id, t)| id == c.id && t.contains("bad_input.rs")),
            "docs/BAD_INPUT.md has no row `{}` tested in bad_input.rs",
            c.id
        );
    }
    for (id, test) in &rows {
        if test.contains("bad_input.rs") {
            assert!(
                CASES.iter().any(|c| c.id == id),
                "row `{id}`: no such case here"
            );
            continue;
        }
        // Elsewhere: `path/to/file.rs::test_name`, and the file has that test.
        let spec = test.trim_matches('`');
        let (file, name) = spec
            .split_once("::")
            .unwrap_or_else(|| panic!("row `{id}`: test column {test:?} is not FILE::TEST"));
        let text = std::fs::read_to_string(format!("{root}/{file}"))
            .unwrap_or_else(|e| panic!("row `{id}`: {file}: {e}"));
        assert!(
            text.contains(&format!("fn {name}(")),
            "row `{id}`: {file} has no fn {name}"
        );
    }
}
