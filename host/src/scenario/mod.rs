//! Scenario files: `--config FILE.toml` on every subcommand, and `nmcp scenario init`.
//!
//! A scenario is flat TOML: an optional `command = "t3 cu-split"` naming the subcommand,
//! then one key per long option of that subcommand (kebab-case, as on the command line).
//! It is turned into command-line arguments once, generically, from clap's own
//! description of the CLI, before clap parses: the file's options go right after the
//! subcommand's name, before the user's own arguments, and an option given on the command
//! line (or one that conflicts with it) drops the file's. See `docs/decisions/scenario.md`.

mod expand;
mod file;
mod keys;
mod template;

pub(crate) use expand::*;
pub(crate) use file::*;
pub(crate) use keys::*;
pub(crate) use template::*;

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

    /// The file's options and the user's are parsed by clap as one set of explicit
    /// arguments, so clap's relations between options hold across the two: a file option
    /// meets a requirement of a command-line option and the other way round, and a file
    /// option whose requirement neither gives is refused. (clap checks `requires` and
    /// `conflicts_with` only between explicit arguments, never against default values, so
    /// a merge that applied the file as defaults, or parsed it apart, would lose these.)
    #[test]
    fn relations_between_options_hold_across_the_file_and_the_command_line() {
        use clap::CommandFactory as _;
        let dir = tempfile::tempdir().unwrap();
        let parse = |file: &str, args: &[&str]| {
            let path = dir.path().join("s.toml");
            std::fs::write(&path, file).unwrap();
            let mut argv: Vec<std::ffi::OsString> = vec!["nmcp".into()];
            argv.extend(args.iter().map(Into::into));
            argv.extend(["--config".into(), path.into_os_string()]);
            let expanded = expand(&crate::cli_command(), argv).unwrap();
            augment(crate::Cli::command()).try_get_matches_from(expanded.argv)
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
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
        // The global `--checkpoint-every` from the file, its directory on the command line.
        assert!(parse("checkpoint-every = 5\n", &["mem", "--checkpoint-dir", "ck"]).is_ok());
        let e = parse("checkpoint-every = 5\n", &["mem"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::MissingRequiredArgument);
    }

    /// The premise of the design (docs/decisions/scenario.md): clap checks `requires` only
    /// between explicit arguments, so a file applied as default values would neither meet
    /// a command-line option's requirement nor be held to its own.
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
