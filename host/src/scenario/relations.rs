//! Relations between a command's options (one needs another, two exclude each other):
//! data next to each command's typed options, checked once on the merged options.
//!
//! They are not clap's `requires`/`conflicts_with`: clap checks those only between
//! arguments given on one command line, so a file merged outside clap would escape them.
//! Checked here on the set of keys given anywhere (file or command line), they hold
//! across the two sources by construction.

use clap::{Arg, Command};

/// One relation between two options, by key (long name, or the positional's id in
/// kebab-case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// The first, when given, needs the second given too.
    Requires(&'static str, &'static str),
    /// The two cannot both be given.
    Conflicts(&'static str, &'static str),
    /// The first must be given unless the second is.
    RequiredUnless(&'static str, &'static str),
}

/// The key of an argument: its long name, or a positional's id in kebab-case.
pub(crate) fn arg_key(a: &Arg) -> String {
    a.get_long()
        .map_or_else(|| a.get_id().as_str().replace('_', "-"), str::to_string)
}

/// An option as clap shows it in its own messages (`--preset <PRESET>`, `<FILE>`).
fn shown(cmd: &Command, key: &str) -> String {
    cmd.get_arguments()
        .find(|a| arg_key(a) == key)
        .map_or_else(|| format!("--{key}"), |a| a.to_string())
}

/// Whether two keys exclude each other (either way round).
pub(crate) fn conflict(relations: &[Relation], a: &str, b: &str) -> bool {
    relations.iter().any(
        |r| matches!(r, Relation::Conflicts(x, y) if (*x == a && *y == b) || (*x == b && *y == a)),
    )
}

/// Checks the relations on the keys given (from the file or the command line), in
/// clap's wording.
///
/// # Errors
/// The first relation broken.
pub(crate) fn check(cmd: &Command, relations: &[Relation], given: &[String]) -> Result<(), String> {
    let has = |k: &str| given.iter().any(|g| g == k);
    for r in relations {
        match *r {
            Relation::Conflicts(a, b) if has(a) && has(b) => {
                return Err(format!(
                    "the argument '{}' cannot be used with '{}'",
                    shown(cmd, a),
                    shown(cmd, b)
                ));
            }
            Relation::Requires(a, b) if has(a) && !has(b) => {
                return Err(format!(
                    "the following required arguments were not provided:\n  {}\n  (needed by '{}')",
                    shown(cmd, b),
                    shown(cmd, a)
                ));
            }
            Relation::RequiredUnless(a, b) if !has(a) && !has(b) => {
                return Err(format!(
                    "the following required arguments were not provided:\n  {}",
                    shown(cmd, a)
                ));
            }
            _ => {}
        }
    }
    Ok(())
}
