//! Scenario files: `--config FILE.toml` on every subcommand, and `nmcp scenario init`.
//!
//! A scenario is flat TOML: an optional `command = "t3 cu-split"` naming the subcommand,
//! then one key per long option of that subcommand (kebab-case, as on the command line).
//! Every run resolves its options the same way: clap parses the command line, the file's
//! values are checked by the options' own parsers, both are merged into one table (the
//! command line wins), serde deserialises the table into the command's typed options,
//! and the command's relations are checked on the keys given. See
//! `docs/decisions/scenario.md`.

mod file;
mod keys;
mod relations;
mod resolve;
mod template;
mod typed;

pub(crate) use file::*;
pub(crate) use keys::*;
pub(crate) use relations::*;
pub(crate) use resolve::*;
pub(crate) use template::*;
pub(crate) use typed::*;

/// The id of the `--config FILE` option added to every command node (help only: the
/// scenario options are taken out of the argument list before clap parses it).
const CONFIG_ID: &str = "nmcp_scenario_config";
/// The id of the `--scenario FILE` spelling (the only one for a command with its own
/// `--config`, such as `nmcp t3 check`).
const SCENARIO_ID: &str = "nmcp_scenario_alias";

/// Subcommands a scenario cannot drive (they take no simulation options).
const NOT_SCENARIO_COMMANDS: [&str; 3] = ["help", "resume", "scenario"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_and_wrap() {
        assert_eq!(distance("patern", "pattern"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(wrap("aa bb cc", 5), ["aa bb", "cc"]);
        assert_eq!(wrap("a-very-long-word x", 4), ["a-very-long-word", "x"]);
    }

    #[test]
    fn locations_are_one_based_lines_and_columns() {
        let src = Source {
            path: "s.toml".into(),
            text: "a = 1\nbé = 2\n".into(),
        };
        assert_eq!(src.loc(&(0..1)).0, "s.toml:1:1");
        assert_eq!(src.loc(&(10..11)).0, "s.toml:2:4");
    }

    /// The relations are checked on the merged options, so they hold across the file
    /// and the command line: a file option meets a requirement of a command-line option
    /// and the other way round, and a file option whose requirement neither gives is
    /// refused. (clap checks `requires` and `conflicts_with` only between explicit
    /// arguments of one parse, which is why they are the library's, not clap's.)
    #[test]
    fn relations_between_options_hold_across_the_file_and_the_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let parse = |file: &str, args: &[&str]| -> Result<(), String> {
            let path = dir.path().join("s.toml");
            std::fs::write(&path, file).unwrap();
            let mut argv: Vec<std::ffi::OsString> = vec!["nmcp".into()];
            argv.extend(args.iter().map(Into::into));
            argv.extend(["--config".into(), path.into_os_string()]);
            crate::resolve(argv).map(|_| ()).map_err(|f| match f {
                Failure::Message(m) => m,
                Failure::Clap(e) => e.to_string(),
            })
        };
        // `--tokens` requires `--h`: the file's `h` meets it, and the reverse.
        assert!(parse("h = 512\n", &["t3", "--tokens", "1024"]).is_ok());
        assert!(parse("tokens = 1024\n", &["t3", "--h", "512"]).is_ok());
        // `model-name` requires `h`, given on the command line.
        assert!(parse(
            "model-name = \"x\"\n",
            &["t3", "--h", "512", "--tokens", "8"]
        )
        .is_ok());
        // Neither gives what `--format` requires (`--trace`).
        let e = parse("format = \"dramsim3\"\n", &["mem"]).unwrap_err();
        assert!(e.contains("required arguments were not provided"), "{e}");
        assert!(e.contains("--trace <FILE>"), "{e}");
        // The global `--checkpoint-every` from the file, its directory on the command line.
        assert!(parse("checkpoint-every = 5\n", &["mem", "--checkpoint-dir", "ck"]).is_ok());
        let e = parse("checkpoint-every = 5\n", &["mem"]).unwrap_err();
        assert!(e.contains("--checkpoint-dir <DIR>"), "{e}");
        // Two of the file's options that exclude each other.
        let e = parse(
            "preset-file = \"p.toml\"\npreset = \"hbm2-2000\"\n",
            &["mem"],
        )
        .unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
        // A conflict between the command line's options is the same check.
        let e = parse("", &["mem", "--trace", "t", "--requests", "5"]).unwrap_err();
        assert!(
            e.contains("'--requests <REQUESTS>' cannot be used with '--trace <FILE>'"),
            "{e}"
        );
    }

    /// Values typed through the options' own parsers: a size in a string, an integer for
    /// a float, a comma-separated list and a TOML array give the same typed options.
    #[test]
    fn file_values_take_the_command_line_spellings_and_toml_types() {
        let dir = tempfile::tempdir().unwrap();
        let words = |file: &str, args: &[&str]| -> Vec<String> {
            let path = dir.path().join("s.toml");
            std::fs::write(&path, file).unwrap();
            let mut argv: Vec<std::ffi::OsString> = vec!["nmcp".into()];
            argv.extend(args.iter().map(Into::into));
            argv.extend(["--config".into(), path.into_os_string()]);
            match crate::resolve(argv) {
                Ok((_, w)) => w,
                Err(Failure::Message(m)) => panic!("{m}"),
                Err(Failure::Clap(e)) => panic!("{e}"),
            }
        };
        assert_eq!(
            words("bytes = \"64M\"\n", &["t3", "rs"]),
            ["t3", "rs", "--bytes=64M"]
        );
        assert_eq!(
            words("tp = [8, 16]\n", &["t3"]),
            words("tp = \"8,16\"\n", &["t3"])
        );
        assert_eq!(
            words("write-ratio = 0\n", &["mem"]),
            ["mem", "--write-ratio=0.0"]
        );
        // The command line wins, key by key.
        assert_eq!(
            words("seed = 5\nsize = 32\n", &["mem", "--seed", "7"]),
            ["mem", "--size=32", "--seed=7"]
        );
    }

    /// Why the relations are the library's (docs/decisions/scenario.md): clap checks
    /// `requires` only between explicit arguments, so a file applied as default values
    /// would neither meet a command-line option's requirement nor be held to its own.
    #[test]
    fn clap_ignores_default_values_in_requirements() {
        use clap::{Arg, Command};
        let cmd = |h_default: Option<&'static str>, f_default: Option<&'static str>| {
            Command::new("t")
                .arg(Arg::new("h").long("h").default_value(h_default))
                .arg(Arg::new("tokens").long("tokens").requires("h"))
                .arg(
                    Arg::new("format")
                        .long("format")
                        .requires("trace")
                        .default_value(f_default),
                )
                .arg(Arg::new("trace").long("trace"))
        };
        // `h` as a default does not meet `--tokens`' requirement ...
        let e = cmd(Some("512"), None)
            .try_get_matches_from(["t", "--tokens", "8"])
            .unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        // ... and `format` as a default is not held to its own.
        assert!(cmd(None, Some("dramsim3"))
            .try_get_matches_from(["t"])
            .is_ok());
    }

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("--pattern=random"), "--pattern=random");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
