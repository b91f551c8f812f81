//! A run's options resolved: `--config` / `--scenario` on every command node, the command
//! line parsed by clap, the scenario file's options checked and merged into one table
//! under the command line's (the command line wins), words for checkpoints and notes.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::*;

/// Adds `--config FILE` (where the command has no `--config` of its own) and
/// `--scenario FILE` to every command node; [`walk`] finds them, clap accepts them.
pub(crate) fn augment(cmd: Command) -> Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    let own_config = cmd.get_arguments().any(|a| a.get_long() == Some("config"));
    let mut cmd = cmd;
    if !own_config {
        cmd = cmd.arg(
            Arg::new(CONFIG_ID)
                .long("config")
                .value_name("FILE")
                .action(ArgAction::Set)
                .help("Take options from a scenario TOML file (`nmcp scenario init` writes one); the command line wins")
                .display_order(900),
        );
    }
    cmd = cmd.arg(
        Arg::new(SCENARIO_ID)
            .long("scenario")
            .value_name("FILE")
            .action(ArgAction::Set)
            .help(if own_config {
                "Take options from a scenario TOML file (`nmcp scenario init` writes one); the command line wins"
            } else {
                "Same as --config FILE"
            })
            .hide(!own_config)
            .display_order(901),
    );
    for n in names {
        cmd = cmd.mut_subcommand(n, augment);
    }
    cmd
}

/// What the command line says before a scenario is applied.
pub(super) struct Walk {
    /// Subcommand names from the command line.
    path: Vec<String>,
    /// Index (into argv) just after the last subcommand name.
    path_end: usize,
    /// The scenario file and the argv indices of its option's words.
    config: Option<(PathBuf, Vec<usize>)>,
    /// `--help`, `-h`, `--version`, `-V` or `help` seen.
    help: bool,
}

/// Walks the command line through clap's command tree (built, so global options are on
/// every subcommand): which subcommand, where `--config` is, whether help is asked.
pub(super) fn walk(root: &Command, argv: &[OsString]) -> Result<Walk, String> {
    let mut w = Walk {
        path: Vec::new(),
        path_end: argv.len().min(1),
        config: None,
        help: false,
    };
    let mut cmd = root;
    let mut i = 1;
    while let Some(tok) = argv.get(i) {
        let Some(t) = tok.to_str() else {
            i += 1;
            continue;
        };
        if t == "--" {
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let own_config = cmd.get_arguments().any(|a| a.get_long() == Some("config"));
            if name == "scenario" || (name == "config" && !own_config) {
                let (file, words) = match inline {
                    Some(v) => (PathBuf::from(v), vec![i]),
                    None => match argv.get(i + 1) {
                        Some(v) => (PathBuf::from(v), vec![i, i + 1]),
                        None => return Err(format!("--{name}: give the scenario file")),
                    },
                };
                if w.config.is_some() {
                    return Err(format!(
                        "--{name} {}: one scenario file per run",
                        file.display()
                    ));
                }
                i += words.len();
                w.config = Some((file, words));
                continue;
            }
            let arg = cmd.get_arguments().find(|a| {
                a.get_long() == Some(name)
                    || a.get_all_aliases().is_some_and(|al| al.contains(&name))
            });
            i += 1;
            if let Some(a) = arg {
                w.help |= is_help(a);
                if inline.is_none() && a.get_action().takes_values() {
                    i += value_words(a, &argv[i.min(argv.len())..]);
                }
            }
            continue;
        }
        if t.len() > 1 && t.starts_with('-') && !t.starts_with("--") {
            // Short options, possibly clustered (`-qv`) or with a value (`-ofile`).
            let chars: Vec<char> = t.chars().skip(1).collect();
            i += 1;
            for (k, c) in chars.iter().enumerate() {
                let arg = cmd.get_arguments().find(|a| {
                    a.get_short() == Some(*c)
                        || a.get_all_short_aliases().is_some_and(|al| al.contains(c))
                });
                let Some(a) = arg else { break };
                w.help |= is_help(a);
                if a.get_action().takes_values() {
                    if k + 1 == chars.len() {
                        i += value_words(a, &argv[i.min(argv.len())..]);
                    }
                    break;
                }
            }
            continue;
        }
        i += 1;
        if let Some(sub) = cmd.find_subcommand(t) {
            if sub.get_name() == "help" {
                w.help = true;
            }
            w.path.push(sub.get_name().to_string());
            w.path_end = i;
            cmd = sub;
        }
    }
    Ok(w)
}

/// How many words after an option are its values.
pub(super) fn value_words(a: &Arg, rest: &[OsString]) -> usize {
    let max = a.get_num_args().map_or(1, |r| r.max_values());
    let min = a.get_num_args().map_or(1, |r| r.min_values());
    let mut n = 0;
    for w in rest {
        if n >= max {
            break;
        }
        let dash = w
            .to_str()
            .is_some_and(|s| s.starts_with('-') && s.len() > 1);
        if n >= min && dash {
            break;
        }
        n += 1;
    }
    n
}

/// Finds a command by its subcommand path.
pub(crate) fn find_command<'c>(root: &'c Command, path: &[String]) -> Option<&'c Command> {
    let mut cmd = root;
    for p in path {
        cmd = cmd.find_subcommand(p)?;
    }
    Some(cmd)
}

/// Finds the command a scenario or sweep names, and checks that it can be run from one.
///
/// # Errors
/// An unknown subcommand (with the valid ones), or a command that only groups
/// subcommands.
pub(crate) fn leaf<'c>(
    root: &'c Command,
    path: &[String],
    loc: &str,
) -> Result<&'c Command, String> {
    let mut cmd = root;
    for (k, p) in path.iter().enumerate() {
        let names: Vec<&str> = cmd
            .get_subcommands()
            .map(Command::get_name)
            .filter(|n| !NOT_SCENARIO_COMMANDS.contains(n))
            .collect();
        match cmd.find_subcommand(p) {
            Some(sub) if !NOT_SCENARIO_COMMANDS.contains(&sub.get_name()) => cmd = sub,
            _ => {
                let at = if k == 0 {
                    "nmcp".to_string()
                } else {
                    format!("nmcp {}", path.get(..k).unwrap_or(&[]).join(" "))
                };
                return Err(format!(
                    "{loc}: `{p}` is not a subcommand of `{at}`; valid: {}",
                    names.join(", ")
                ));
            }
        }
    }
    if path.is_empty() {
        return Err(format!("{loc}: name the subcommand"));
    }
    if cmd.has_subcommands() && keys_own(cmd).is_empty() {
        let names: Vec<&str> = cmd
            .get_subcommands()
            .map(Command::get_name)
            .filter(|n| *n != "help")
            .collect();
        return Err(format!(
            "{loc}: `nmcp {}` needs a subcommand: {}",
            path.join(" "),
            names.join(", ")
        ));
    }
    Ok(cmd)
}

/// A command's own (not global) scenario keys.
pub(super) fn keys_own(cmd: &Command) -> Vec<&Arg> {
    keys(cmd)
        .into_iter()
        .filter(|a| !a.is_global_set())
        .collect()
}

/// Why a command line did not resolve.
pub(crate) enum Failure {
    /// A scenario or relation error: printed as `nmcp: error: ...`, exit code 2.
    Message(String),
    /// clap's own (usage errors, `--help`, `--version`), printed by clap.
    Clap(clap::Error),
}

impl From<String> for Failure {
    fn from(m: String) -> Self {
        Failure::Message(m)
    }
}

impl Failure {
    /// Prints the failure and gives the exit code.
    pub(crate) fn report(self) -> std::process::ExitCode {
        match self {
            Failure::Message(m) => {
                eprintln!("nmcp: error: {m}");
                std::process::ExitCode::from(2)
            }
            Failure::Clap(e) => {
                let _ = e.print();
                std::process::ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
            }
        }
    }
}

/// The options a scenario file gives: the file as shown and its entries.
pub(crate) struct FileOptions {
    /// The file's name as given.
    pub(crate) shown: String,
    /// Its `key = value` entries.
    pub(crate) entries: Vec<Entry>,
}

/// A command line parsed by clap, before the merge.
pub(crate) struct Parsed {
    /// clap's matches of the whole command line.
    pub(crate) matches: ArgMatches,
    /// The subcommand path run.
    pub(crate) path: Vec<String>,
    /// Every option clap has a value for (a default or the command line's), typed.
    table: toml::Table,
    /// The keys given on the command line.
    given: Vec<String>,
    /// The scenario file's options, checked and typed, in file order.
    file: Option<(String, Vec<(String, toml::Value)>)>,
}

/// A run's options after the merge.
pub(crate) struct Merged {
    /// Every option of the command under its key: the command line's, else the file's,
    /// else the default.
    pub(crate) table: toml::Table,
    /// The keys given on the command line or by the file (what the relations look at).
    pub(crate) given: Vec<String>,
    /// The run as a command line (subcommand, the options given, positionals): what a
    /// checkpoint stores and `nmcp resume` runs.
    pub(crate) words: Vec<String>,
    /// The file's options as words, for a note under an error.
    pub(crate) file_note: Option<String>,
}

/// The table of what clap read for the command `cmd` (defaults and the command line)
/// and the keys given on the command line.
fn clap_table(cmd: &Command, m: &ArgMatches) -> (toml::Table, Vec<String>) {
    let mut table = toml::Table::new();
    let mut given = Vec::new();
    for a in cmd
        .get_arguments()
        .filter(|a| is_key(a) || a.is_positional())
    {
        let id = a.get_id().as_str();
        let key = arg_key(a);
        let words: Vec<String> = match m.try_get_raw(id) {
            Ok(Some(raw)) => raw.map(|r| r.to_string_lossy().into_owned()).collect(),
            _ => Vec::new(),
        };
        if words.is_empty() {
            continue;
        }
        table.insert(key.clone(), typed_words(a, &words));
        if m.value_source(id) == Some(ValueSource::CommandLine) {
            given.push(key);
        }
    }
    (table, given)
}

/// Parses a command line (binary name first) with clap, after reading the scenario file
/// `--config FILE` / `--scenario FILE` names. The file may name the subcommand
/// (`command = "..."`): the command line's must be the same or a prefix of it, and the
/// file's words complete it.
///
/// # Errors
/// The scenario file's errors (each with file, line and column), clap's usage errors.
pub(crate) fn parse(
    root: &Command,
    augmented: Command,
    argv: Vec<OsString>,
) -> Result<Parsed, Failure> {
    let w = walk(root, &argv)?;
    let mut argv = argv;
    let mut file = None;
    if let (Some((path, _)), false) = (&w.config, w.help) {
        let scenario = load(path)?;
        let shown = path.display().to_string();
        let full = match &scenario.command {
            None => w.path.clone(),
            Some((p, loc)) => {
                if p.len() < w.path.len() || p.get(..w.path.len()) != Some(&w.path[..]) {
                    return Err(Failure::Message(format!(
                        "{loc}: the scenario is for `nmcp {}`, the command line runs `nmcp {}`",
                        p.join(" "),
                        w.path.join(" ")
                    )));
                }
                p.clone()
            }
        };
        leaf(root, &full, &shown).map_err(|e| {
            if full.is_empty() {
                format!("{shown}: name the subcommand on the command line or with `command = \"...\"` in the file")
            } else {
                e
            }
        })?;
        let tail = argv.split_off(w.path_end.min(argv.len()));
        argv.extend(full.iter().skip(w.path.len()).map(OsString::from));
        argv.extend(tail);
        file = Some(FileOptions {
            shown,
            entries: scenario.entries,
        });
    }
    let matches = augmented
        .try_get_matches_from(&argv)
        .map_err(Failure::Clap)?;
    parsed(root, matches, file)
}

/// The parse of `matches` with the options of `file` checked against its command.
///
/// # Errors
/// The file's keys and values (with file, line and column).
pub(crate) fn parsed(
    root: &Command,
    matches: ArgMatches,
    file: Option<FileOptions>,
) -> Result<Parsed, Failure> {
    let mut path = Vec::new();
    let mut cmd = root;
    let mut m = &matches;
    while let Some((name, sub)) = m.subcommand() {
        path.push(name.to_string());
        cmd = cmd.find_subcommand(name).unwrap_or(cmd);
        m = sub;
    }
    let (table, given) = clap_table(cmd, m);
    let file = match file {
        None => None,
        Some(f) => Some((f.shown, validate(cmd, &path.join(" "), &f.entries)?)),
    };
    Ok(Parsed {
        path,
        table,
        given,
        file,
        matches,
    })
}

impl Parsed {
    /// Merges the file's options under the command line's: an option given on the
    /// command line keeps its value, and a file option that conflicts with one given on
    /// the command line is left out with a note on stderr.
    pub(crate) fn merge(&self, root: &Command, relations: &[Relation]) -> Merged {
        let cmd = find_command(root, &self.path).unwrap_or(root);
        let mut table = self.table.clone();
        let mut given = self.given.clone();
        let mut file_note = None;
        if let Some((shown, values)) = &self.file {
            let mut file_words = Vec::new();
            for (key, value) in values {
                if let Some(a) = cmd.get_arguments().find(|a| arg_key(a) == *key) {
                    file_words.extend(option_words(a, value));
                }
                if self.given.contains(key) {
                    continue;
                }
                if let Some(g) = self.given.iter().find(|g| conflict(relations, key, g)) {
                    eprintln!(
                        "nmcp: note: {shown}: `{key}` left out: --{g} on the command line conflicts with it"
                    );
                    continue;
                }
                table.insert(key.clone(), value.clone());
                given.push(key.clone());
            }
            file_note = Some(format!(
                "note: the options from {shown}: {}",
                if file_words.is_empty() {
                    "(none)".to_string()
                } else {
                    file_words.join(" ")
                }
            ));
        }
        let mut words = self.path.clone();
        let mut positionals = Vec::new();
        for a in cmd.get_arguments() {
            let key = arg_key(a);
            let Some(v) = table.get(&key).filter(|_| given.contains(&key)) else {
                continue;
            };
            if a.is_positional() {
                positionals.extend(option_words(a, v));
            } else {
                words.extend(option_words(a, v));
            }
        }
        words.extend(positionals);
        Merged {
            table,
            given,
            words,
            file_note,
        }
    }
}
