//! Scenario files (SPEC 9, issue 14 item 3): `--config FILE` on every subcommand,
//! `nmcp scenario init` templates generated from the CLI itself, the command line winning
//! over the file, and bad files reported with file, line and column.

mod common;
use common::run;

/// A run's JSON without its wall-clock figures (they differ from run to run; every
/// simulated figure is compared).
fn simulated(json: &str) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for k in [
                    "wall_seconds",
                    "requests_per_second",
                    "dram_commands_per_second",
                ] {
                    m.remove(k);
                }
                m.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let mut v: serde_json::Value =
        serde_json::from_str(json).unwrap_or_else(|e| panic!("not JSON ({e}): {json}"));
    strip(&mut v);
    v
}

/// The template with every option that has a default uncommented (`# key = value`
/// lines not marked "(no default)").
fn live_defaults(template: &str) -> String {
    template
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if !l.ends_with("(no default)")
                    && rest.split_once(" = ").is_some_and(|(k, _)| {
                        !k.is_empty()
                            && k.chars()
                                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    }) =>
            {
                rest.to_string()
            }
            _ => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every command a scenario can drive: its template, as written and with every default
/// uncommented, reads back through `nmcp scenario show` (every key and default value
/// checked by the option's own parser).
#[test]
fn every_template_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let (code, list, err) = run(d, &["scenario", "init", "--list"]);
    assert_eq!(code, Some(0), "{err}");
    let commands: Vec<&str> = list.lines().collect();
    for want in [
        "mem",
        "lamb",
        "t3",
        "t3 cu-split",
        "goldyloc eval",
        "cp replay",
    ] {
        assert!(commands.contains(&want), "{want} missing from {commands:?}");
    }
    for c in &commands {
        let words: Vec<&str> = c.split(' ').collect();
        let file = format!("{}.toml", c.replace(' ', "_"));
        let mut args = vec!["scenario", "init"];
        args.extend(&words);
        args.extend(["--output", &file]);
        let (code, _, err) = run(d, &args);
        assert_eq!(code, Some(0), "{c}: {err}");
        let template = std::fs::read_to_string(d.join(&file)).unwrap();
        assert!(
            template.contains(&format!("command = \"{c}\"")),
            "{template}"
        );
        let (code, shown, err) = run(d, &["scenario", "show", &file]);
        assert_eq!(code, Some(0), "{c}: {err}");
        assert_eq!(shown.trim(), format!("nmcp {c}"), "a template sets nothing");

        let live = format!("live_{file}");
        std::fs::write(d.join(&live), live_defaults(&template)).unwrap();
        let (code, shown, err) = run(d, &["scenario", "show", &live]);
        assert_eq!(code, Some(0), "{c}: {err}\n{}", live_defaults(&template));
        assert!(shown.starts_with(&format!("nmcp {c}")), "{shown}");
    }
    // The template names every option with its help line and default.
    let mem = std::fs::read_to_string(d.join("mem.toml")).unwrap();
    assert!(mem.contains("# Synthetic pattern"), "{mem}");
    assert!(mem.contains("# Values: stream, random."), "{mem}");
    assert!(mem.contains("# pattern = \"stream\""), "{mem}");
    assert!(mem.contains("# requests = 1000000"), "{mem}");
    assert!(mem.contains("# write-ratio = 0.0"), "{mem}");
    assert!(mem.contains("# json = false"), "{mem}");
    assert!(
        mem.contains("# queue-depth = <QUEUE_DEPTH>   (no default)"),
        "{mem}"
    );
    // --output does not overwrite without --force.
    let (code, _, err) = run(d, &["scenario", "init", "mem", "--output", "mem.toml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("exists; pass --force"), "{err}");
}

/// For the commands fast enough to run in a test: the template as written, and with every
/// default uncommented, gives the same result as no scenario at all.
#[test]
fn templates_give_the_same_result_as_no_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // (command, arguments on the command line that keep the run short: they win over the
    // file's defaults).
    let cases: [(&str, &[&str]); 5] = [
        ("mem", &["--requests", "3000"]),
        ("lamb", &[]),
        (
            "t3",
            &[
                "--h",
                "512",
                "--tokens",
                "1024",
                "--tp",
                "4",
                "--sublayers",
                "OP",
            ],
        ),
        ("t3 check", &[]),
        ("t3 rs", &["--bytes", "1M"]),
    ];
    for (c, extra) in cases {
        let words: Vec<&str> = c.split(' ').collect();
        let mut init = vec!["scenario", "init"];
        init.extend(&words);
        let (code, template, err) = run(d, &init);
        assert_eq!(code, Some(0), "{err}");
        let file = format!("{}.toml", c.replace(' ', "_"));
        let live = format!("live_{file}");
        std::fs::write(d.join(&file), &template).unwrap();
        std::fs::write(d.join(&live), live_defaults(&template)).unwrap();

        let mut plain = words.clone();
        plain.extend(extra);
        plain.push("--json");
        let (code, want, err) = run(d, &plain);
        assert_eq!(code, Some(0), "{c}: {err}");
        let want = simulated(&want);
        // t3 check has its own --config (the T3 variant): --scenario is the spelling there.
        let flag = if c == "t3 check" {
            "--scenario"
        } else {
            "--config"
        };
        for f in [&file, &live] {
            let mut with = words.clone();
            with.extend([flag, f.as_str()]);
            with.extend(extra);
            with.push("--json");
            let (code, got, err) = run(d, &with);
            assert_eq!(code, Some(0), "{c} with {f}: {err}");
            assert_eq!(simulated(&got), want, "{c} with {f}");
        }
    }
}

#[test]
fn the_command_line_wins_and_the_file_can_name_the_command() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(
        d.join("s.toml"),
        "# a study\ncommand = \"mem\"\npattern = \"random\"\nrequests = 3000\nsize = 32\nseed = 5\n",
    )
    .unwrap();
    let direct = |args: &[&str]| {
        let (code, out, err) = run(d, args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        simulated(&out)
    };
    let from_file = direct(&["mem", "--config", "s.toml", "--json"]);
    assert_eq!(
        from_file,
        direct(&[
            "mem",
            "--pattern",
            "random",
            "--requests",
            "3000",
            "--size",
            "32",
            "--seed",
            "5",
            "--json"
        ])
    );
    // The file names the command: `nmcp --config s.toml` runs `nmcp mem`.
    assert_eq!(from_file, direct(&["--config", "s.toml", "--json"]));
    // --config=FILE and --scenario FILE are the same.
    assert_eq!(from_file, direct(&["mem", "--config=s.toml", "--json"]));
    assert_eq!(
        from_file,
        direct(&["mem", "--scenario", "s.toml", "--json"])
    );
    // An option on the command line wins over the file's, wherever it is written.
    let stream = direct(&[
        "mem",
        "--pattern",
        "stream",
        "--requests",
        "3000",
        "--size",
        "32",
        "--seed",
        "5",
        "--json",
    ]);
    assert_ne!(stream, from_file);
    assert_eq!(
        stream,
        direct(&["mem", "--config", "s.toml", "--pattern", "stream", "--json"])
    );
    assert_eq!(
        stream,
        direct(&["mem", "--pattern=stream", "--config", "s.toml", "--json"])
    );
    assert_eq!(
        stream,
        direct(&["--config", "s.toml", "--pattern", "stream", "--json"])
    );
    // An option that conflicts with one of the file's drops the file's, with a note.
    std::fs::write(d.join("t.trace"), "0x0 R 0\n0x40 R 1\n0x80 W 2\n").unwrap();
    let (code, out, err) = run(
        d,
        &["mem", "--config", "s.toml", "--trace", "t.trace", "--json"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("`pattern` left out: --trace on the command line conflicts with it"),
        "{err}"
    );
    assert_eq!(simulated(&out)["requests"], 3, "{out}");
    // Global options are keys too.
    std::fs::write(
        d.join("cap.toml"),
        "command = \"mem\"\nrequests = 100000\nmax-events = 10\n",
    )
    .unwrap();
    let (code, _, err) = run(d, &["--config", "cap.toml"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("event cap reached"), "{err}");
    // t3 check's own --config (the T3 variant) still works.
    let (code, out, err) = run(d, &["t3", "check", "--config", "sequential", "--json"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("sequential"), "{out}");
}

#[test]
fn bad_scenarios_say_file_line_column_and_the_valid_keys() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let cases: [(&str, &[&str], &str); 9] = [
        (
            "command = \"mem\"\npatern = \"random\"\n",
            &["mem"],
            "s.toml:2:1: unknown key `patern` for `nmcp mem`; did you mean `pattern`?\n  valid keys: preset, preset-file, trace,",
        ),
        (
            "pattern = \"zigzag\"\n",
            &["mem"],
            "s.toml:1:11: `pattern`: invalid value 'zigzag' for '<PATTERN>'\n  [possible values: stream, random]",
        ),
        (
            "requests = \"many\"\n",
            &["mem"],
            "s.toml:1:12: `requests`: invalid value 'many'",
        ),
        (
            "json = 1\n",
            &["mem"],
            "s.toml:1:8: `json` is a flag: give true or false, not an integer (1)",
        ),
        (
            "size = [32, 64]\n",
            &["mem"],
            "s.toml:1:8: `size` takes one value, not an array",
        ),
        (
            "[mem]\nsize = 32\n",
            &["mem"],
            "s.toml:1:1: `mem`: a table is not an option value",
        ),
        (
            "pattern = \"random\n",
            &["mem"],
            "s.toml:1:18: TOML parse error at line 1, column 18",
        ),
        (
            "command = \"mem\"\n",
            &["t3", "rs"],
            "s.toml:1:1: the scenario is for `nmcp mem`, the command line runs `nmcp t3 rs`",
        ),
        (
            "command = \"memory\"\n",
            &[],
            "s.toml: `memory` is not a subcommand of `nmcp`; valid: mem, lamb,",
        ),
    ];
    for (text, cmd, want) in cases {
        std::fs::write(d.join("s.toml"), text).unwrap();
        let mut args = cmd.to_vec();
        args.extend(["--config", "s.toml"]);
        let (code, out, err) = run(d, &args);
        assert_eq!(code, Some(2), "{text}: {err}");
        assert!(out.is_empty(), "{out}");
        assert!(err.contains(want), "{text}:\n{err}\nwanted: {want}");
    }
    // Two of the file's own options that conflict: clap's message, and what the file gave.
    std::fs::write(
        d.join("s.toml"),
        "preset = \"hbm2-2000\"\npreset-file = \"p.toml\"\n",
    )
    .unwrap();
    let (code, _, err) = run(d, &["mem", "--config", "s.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cannot be used with"), "{err}");
    assert!(
        err.contains("note: the options from s.toml: --preset=hbm2-2000 --preset-file=p.toml"),
        "{err}"
    );
    let (code, _, err) = run(d, &["mem", "--config", "missing.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("missing.toml: cannot read"), "{err}");
    let (code, _, err) = run(d, &["scenario", "init", "goldyloc"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("`nmcp goldyloc` needs a subcommand: tune, train, eval"),
        "{err}"
    );
}

/// A checkpointed run stores the command line with the file's options in it, so that
/// `nmcp resume` does not depend on the scenario file any more.
#[test]
fn a_checkpoint_stores_the_expanded_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("s.toml"), "requests = 3000\npattern = \"random\"\n").unwrap();
    let (code, out, err) = run(
        d,
        &[
            "mem",
            "--config",
            "s.toml",
            "--checkpoint-dir",
            "ck",
            "--checkpoint-every",
            "1000",
            "--json",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    std::fs::remove_file(d.join("s.toml")).unwrap();
    let (code, resumed, err) = run(d, &["resume", "ck"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("--requests=3000"), "{err}");
    assert_eq!(simulated(&resumed), simulated(&out));
}
