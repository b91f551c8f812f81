//! The command line with a scenario applied: `--config` / `--scenario` on every command
//! node, the command line walked through clap's command tree, the file's options placed
//! before the user's (the command line wins), then clap's parse.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Arg, ArgAction, Command};

use super::*;

/// Adds `--config FILE` (where the command has no `--config` of its own) and
/// `--scenario FILE` to every command node, for `--help`; both are taken out of the
/// arguments before clap parses them ([`expand`]).
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
    /// Ids of the options given on the command line.
    given: Vec<clap::Id>,
    /// `--help`, `-h`, `--version`, `-V` or `help` seen.
    help: bool,
}

/// Walks the command line through clap's command tree (built, so global options are on
/// every subcommand): which subcommand, which options given, where `--config` is.
pub(super) fn walk(root: &Command, argv: &[OsString]) -> Result<Walk, String> {
    let mut w = Walk {
        path: Vec::new(),
        path_end: argv.len().min(1),
        config: None,
        given: Vec::new(),
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
                if matches!(
                    a.get_action(),
                    ArgAction::Help
                        | ArgAction::HelpLong
                        | ArgAction::HelpShort
                        | ArgAction::Version
                ) {
                    w.help = true;
                }
                w.given.push(a.get_id().clone());
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
                if matches!(
                    a.get_action(),
                    ArgAction::Help
                        | ArgAction::HelpLong
                        | ArgAction::HelpShort
                        | ArgAction::Version
                ) {
                    w.help = true;
                }
                w.given.push(a.get_id().clone());
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

/// The command line after a scenario is applied.
pub struct Expanded {
    /// The arguments clap parses (the scenario options taken out, the file's put in).
    pub argv: Vec<OsString>,
    /// The scenario file and the words it contributed, for error notes.
    pub from_file: Option<(PathBuf, Vec<String>)>,
    /// Notes for stderr (file options dropped because of a conflicting command-line one).
    pub notes: Vec<String>,
}

/// Applies `--config FILE` / `--scenario FILE`: the file's options go right after the
/// subcommand's name, before the user's own arguments; an option the user gave, or one
/// that conflicts with one the user gave, is dropped from the file's.
///
/// # Errors
/// Everything [`load`] and [`to_args`] report; a `command` that does not match the
/// command line; no subcommand on either.
pub fn expand(root: &Command, argv: Vec<OsString>) -> Result<Expanded, String> {
    let w = walk(root, &argv)?;
    let Some((file, words)) = w.config else {
        return Ok(Expanded {
            argv,
            from_file: None,
            notes: Vec::new(),
        });
    };
    let strip = |v: &[OsString], from: usize, to: usize| -> Vec<OsString> {
        v.iter()
            .enumerate()
            .filter(|(k, _)| *k >= from && *k < to && !words.contains(k))
            .map(|(_, a)| a.clone())
            .collect()
    };
    if w.help {
        return Ok(Expanded {
            argv: strip(&argv, 0, argv.len()),
            from_file: None,
            notes: Vec::new(),
        });
    }
    let scenario = load(&file)?;
    let shown_file = file.display().to_string();
    let path = match &scenario.command {
        None => w.path.clone(),
        Some((p, loc)) => {
            if p.len() < w.path.len() || p.get(..w.path.len()) != Some(&w.path[..]) {
                return Err(format!(
                    "{loc}: the scenario is for `nmcp {}`, the command line runs `nmcp {}`",
                    p.join(" "),
                    w.path.join(" ")
                ));
            }
            p.clone()
        }
    };
    let cmd = leaf(root, &path, &shown_file).map_err(|e| {
        if path.is_empty() {
            format!("{shown_file}: name the subcommand on the command line or with `command = \"...\"` in the file")
        } else {
            e
        }
    })?;
    // The command line with the file's subcommand words in place, walked again: options
    // given before the subcommand's name (`nmcp --config f.toml --seed 2`) are then seen
    // as the subcommand's.
    let mut base = strip(&argv, 0, w.path_end);
    base.extend(path.iter().skip(w.path.len()).map(OsString::from));
    let insert_at = base.len();
    base.extend(strip(&argv, w.path_end, argv.len()));
    let w2 = walk(root, &base)?;
    let given: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| w2.given.contains(a.get_id()) || w.given.contains(a.get_id()))
        .collect();
    let dropped = std::cell::RefCell::new(Vec::new());
    let skip = |a: &Arg| -> bool {
        if given.iter().any(|g| g.get_id() == a.get_id()) {
            return true;
        }
        let conflicting = given.iter().find(|g| {
            cmd.get_arg_conflicts_with(a)
                .iter()
                .any(|c| c.get_id() == g.get_id())
                || cmd
                    .get_arg_conflicts_with(g)
                    .iter()
                    .any(|c| c.get_id() == a.get_id())
        });
        if let Some(g) = conflicting {
            dropped.borrow_mut().push(format!(
                "nmcp: note: {shown_file}: `{}` left out: --{} on the command line conflicts with it",
                a.get_long().unwrap_or_default(),
                g.get_long().unwrap_or_default()
            ));
            return true;
        }
        false
    };
    let file_args = to_args(cmd, &path.join(" "), &scenario.entries, &skip)?;
    let notes = dropped.into_inner();
    let mut out: Vec<OsString> = base.get(..insert_at).unwrap_or(&[]).to_vec();
    out.extend(file_args.iter().map(OsString::from));
    out.extend(base.get(insert_at..).unwrap_or(&[]).iter().cloned());
    Ok(Expanded {
        argv: out,
        from_file: Some((file, file_args)),
        notes,
    })
}

/// Parses the process's command line into `T` after applying a scenario file; on a
/// usage error prints it (with the options the file contributed) and returns the exit
/// code. Also returns the arguments as run (for checkpoints and `nmcp resume`).
///
/// # Errors
/// The exit code to return (the message is already printed).
pub fn parse_command_line<T: clap::Parser>(
    args: impl IntoIterator<Item = OsString>,
) -> Result<(T, Vec<String>), std::process::ExitCode> {
    let mut root = T::command();
    root.build();
    let argv: Vec<OsString> = args.into_iter().collect();
    let expanded = match expand(&root, argv) {
        Ok(e) => e,
        Err(msg) => {
            eprintln!("nmcp: error: {msg}");
            return Err(std::process::ExitCode::from(2));
        }
    };
    for n in &expanded.notes {
        eprintln!("{n}");
    }
    let matches = match augment(T::command()).try_get_matches_from(&expanded.argv) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            if let (true, Some((file, words))) = (e.use_stderr(), &expanded.from_file) {
                eprintln!(
                    "note: the options from {}: {}",
                    file.display(),
                    if words.is_empty() {
                        "(none)".to_string()
                    } else {
                        words.join(" ")
                    }
                );
            }
            let code = u8::try_from(e.exit_code()).unwrap_or(2);
            return Err(std::process::ExitCode::from(code));
        }
    };
    let parsed = match T::from_arg_matches(&matches) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.print();
            return Err(std::process::ExitCode::from(2));
        }
    };
    let run: Vec<String> = expanded
        .argv
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    Ok((parsed, run))
}
