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

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("--pattern=random"), "--pattern=random");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
