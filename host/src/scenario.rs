//! Scenario files: `--config FILE.toml` on every subcommand, and `nmcp scenario init`.
//!
//! A scenario is flat TOML: an optional `command = "t3 cu-split"` naming the subcommand,
//! then one key per long option of that subcommand (kebab-case, as on the command line).
//! It is turned into command-line arguments once, generically, from clap's own
//! description of the CLI, before clap parses: the file's options go right after the
//! subcommand's name, before the user's own arguments, and an option given on the command
//! line (or one that conflicts with it) drops the file's. See `docs/decisions/scenario.md`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgAction, Command};

/// The id of the `--config FILE` option added to every command node (help only: the
/// scenario options are taken out of the argument list before clap parses it).
const CONFIG_ID: &str = "nmcp_scenario_config";
/// The id of the `--scenario FILE` spelling (the only one for a command with its own
/// `--config`, such as `nmcp t3 check`).
const SCENARIO_ID: &str = "nmcp_scenario_alias";

/// Subcommands a scenario cannot drive (they take no simulation options).
const NOT_SCENARIO_COMMANDS: [&str; 3] = ["help", "resume", "scenario"];

/// A scalar scenario value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    /// A TOML string.
    Str(String),
    /// A TOML integer.
    Int(i128),
    /// A TOML float.
    Float(f64),
    /// A TOML boolean.
    Bool(bool),
}

impl Scalar {
    /// The value as a command-line word.
    fn arg_text(&self) -> String {
        match self {
            Scalar::Str(s) => s.clone(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        }
    }

    /// A canonical TOML-like rendering (strings quoted, floats with a point): what the
    /// sweep's point hash is made of.
    pub(crate) fn canonical(&self) -> String {
        match self {
            Scalar::Str(s) => serde_json::Value::String(s.clone()).to_string(),
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => format!("{f:?}"),
            Scalar::Bool(b) => b.to_string(),
        }
    }

    /// The value as JSON (integers that fit 64 bits as numbers, others as strings).
    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Scalar::Str(s) => serde_json::Value::String(s.clone()),
            Scalar::Int(i) => {
                if let Ok(v) = i64::try_from(*i) {
                    v.into()
                } else if let Ok(v) = u64::try_from(*i) {
                    v.into()
                } else {
                    serde_json::Value::String(i.to_string())
                }
            }
            Scalar::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or_else(|| serde_json::Value::String(f.to_string())),
            Scalar::Bool(b) => serde_json::Value::Bool(*b),
        }
    }

    fn type_name(&self) -> &'static str {
        match self {
            Scalar::Str(_) => "a string",
            Scalar::Int(_) => "an integer",
            Scalar::Float(_) => "a float",
            Scalar::Bool(_) => "a boolean",
        }
    }
}

/// A scenario value: one scalar or an array of them (for options taking several values).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// One value.
    One(Scalar),
    /// An array (each element with its location).
    Many(Vec<(Scalar, Loc)>),
}

impl Value {
    /// Canonical rendering (see [`Scalar::canonical`]).
    pub(crate) fn canonical(&self) -> String {
        match self {
            Value::One(s) => s.canonical(),
            Value::Many(v) => {
                let items: Vec<String> = v.iter().map(|(s, _)| s.canonical()).collect();
                format!("[{}]", items.join(", "))
            }
        }
    }

    /// As JSON.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        match self {
            Value::One(s) => s.to_json(),
            Value::Many(v) => {
                serde_json::Value::Array(v.iter().map(|(s, _)| s.to_json()).collect())
            }
        }
    }
}

/// Where something is in a file: `path:line:column` (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loc(pub(crate) String);

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A TOML file's text and name, to turn byte spans into `path:line:column`.
pub(crate) struct Source {
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

impl Source {
    /// Reads a file.
    ///
    /// # Errors
    /// `PATH: cannot read: ...`.
    pub(crate) fn read(path: &Path) -> Result<Self, String> {
        let text = crate::cmd::io::read_input_text(path)?;
        Ok(Source {
            path: path.to_path_buf(),
            text,
        })
    }

    /// The location of a byte span's start.
    pub(crate) fn loc(&self, span: &Range<usize>) -> Loc {
        let start = span.start.min(self.text.len());
        let before = self.text.get(..start).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Loc(format!("{}:{line}:{col}", self.path.display()))
    }

    /// Parses the text as a TOML table with spans.
    ///
    /// # Errors
    /// TOML syntax errors, with the file, line and column.
    pub(crate) fn parse(&self) -> Result<toml::Spanned<toml::de::DeTable<'_>>, String> {
        // toml's own error message shows the line and a caret.
        if let Err(e) = toml::from_str::<toml::Table>(&self.text) {
            let msg = e.to_string();
            return Err(match e.span() {
                Some(span) => format!("{}: {}", self.loc(&span), msg.trim_end()),
                None => format!("{}: {}", self.path.display(), msg.trim_end()),
            });
        }
        toml::de::DeTable::parse(&self.text)
            .map_err(|e| format!("{}: {}", self.path.display(), e.to_string().trim_end()))
    }
}

/// One `key = value` of a scenario.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// The option's long name.
    pub(crate) key: String,
    /// Where the key is.
    pub(crate) key_loc: Loc,
    /// The value.
    pub(crate) value: Value,
    /// Where the value is.
    pub(crate) value_loc: Loc,
}

/// Converts a TOML value into a scenario value (scalars, or an array of scalars).
///
/// # Errors
/// Tables, datetimes and nested arrays, with their location.
pub(crate) fn convert(
    src: &Source,
    key: &str,
    v: &toml::Spanned<toml::de::DeValue<'_>>,
) -> Result<Value, String> {
    use toml::de::DeValue;
    let scalar = |v: &toml::Spanned<DeValue<'_>>| -> Result<Scalar, String> {
        let loc = src.loc(&v.span());
        match v.get_ref() {
            DeValue::String(s) => Ok(Scalar::Str(s.to_string())),
            DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
                .map(Scalar::Int)
                .map_err(|e| format!("{loc}: `{key}`: integer {i}: {e}")),
            DeValue::Float(f) => {
                let t = f.as_str().replace('_', "");
                let t = t.trim_start_matches('+');
                t.parse::<f64>()
                    .map(Scalar::Float)
                    .map_err(|e| format!("{loc}: `{key}`: float {t}: {e}"))
            }
            DeValue::Boolean(b) => Ok(Scalar::Bool(*b)),
            DeValue::Datetime(_) => Err(format!(
                "{loc}: `{key}`: a date/time is not an option value (quote it to pass it as a string)"
            )),
            DeValue::Array(_) => Err(format!(
                "{loc}: `{key}`: nested arrays are not option values"
            )),
            DeValue::Table(_) => Err(format!(
                "{loc}: `{key}`: a table is not an option value (a scenario is flat: `key = value` lines, `command = \"...\"` names the subcommand)"
            )),
        }
    };
    match v.get_ref() {
        DeValue::Array(items) => {
            let mut out = Vec::new();
            for item in items.iter() {
                out.push((scalar(item)?, src.loc(&item.span())));
            }
            Ok(Value::Many(out))
        }
        _ => scalar(v).map(Value::One),
    }
}

/// A scenario file, read.
pub(crate) struct Scenario {
    /// The subcommand path it names (`command = "..."`), with the location.
    pub(crate) command: Option<(Vec<String>, Loc)>,
    /// The options, in file order.
    pub(crate) entries: Vec<Entry>,
}

/// Splits `"t3 cu-split"` into its words.
pub(crate) fn command_words(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

/// Reads a scenario file: `command` (optional) and flat option keys.
///
/// # Errors
/// Unreadable file, TOML syntax, a non-string `command`, tables and other values that are
/// not option values; each with the file, line and column.
pub(crate) fn load(path: &Path) -> Result<Scenario, String> {
    let src = Source::read(path)?;
    let table = src.parse()?;
    let mut command = None;
    let mut entries = Vec::new();
    let mut items: Vec<_> = table.get_ref().iter().collect();
    items.sort_by_key(|(k, _)| k.span().start);
    for (k, v) in items {
        let key = k.get_ref().to_string();
        let key_loc = src.loc(&k.span());
        if key == "command" {
            match v.get_ref().as_str() {
                Some(s) if !command_words(s).is_empty() => {
                    command = Some((command_words(s), key_loc));
                }
                _ => {
                    return Err(format!(
                        "{}: `command` must be a string naming the subcommand, e.g. \"mem\" or \"t3 cu-split\"",
                        src.loc(&v.span())
                    ))
                }
            }
            continue;
        }
        let value = convert(&src, &key, v)?;
        entries.push(Entry {
            key,
            key_loc,
            value,
            value_loc: src.loc(&v.span()),
        });
    }
    Ok(Scenario { command, entries })
}

/// Whether the argument is a scenario key: a long option other than help and version.
fn is_key(a: &Arg) -> bool {
    a.get_long().is_some()
        && !matches!(
            a.get_action(),
            ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
        )
        && a.get_id() != CONFIG_ID
        && a.get_id() != SCENARIO_ID
}

/// The scenario keys of a command: its long options, in clap's order.
pub(crate) fn keys(cmd: &Command) -> Vec<&Arg> {
    cmd.get_arguments().filter(|a| is_key(a)).collect()
}

/// The option of a command with this long name.
pub(crate) fn find_key<'c>(cmd: &'c Command, key: &str) -> Option<&'c Arg> {
    keys(cmd).into_iter().find(|a| a.get_long() == Some(key))
}

/// Edit distance (for "did you mean").
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev.get(j).copied().unwrap_or(0) + usize::from(ca != *cb);
            let del = prev.get(j + 1).copied().unwrap_or(0) + 1;
            let ins = cur.get(j).copied().unwrap_or(0) + 1;
            cur.push(sub.min(del).min(ins));
        }
        prev = cur;
    }
    prev.last().copied().unwrap_or(0)
}

/// "unknown key" with the closest keys and the list of valid ones.
pub(crate) fn unknown_key(cmd: &Command, shown: &str, key: &str, loc: &Loc) -> String {
    let all: Vec<&str> = keys(cmd).iter().filter_map(|a| a.get_long()).collect();
    let mut near: Vec<(usize, &str)> = all
        .iter()
        .map(|k| (distance(key, k), *k))
        .filter(|(d, k)| *d <= 2 || k.contains(key) || key.contains(k))
        .collect();
    near.sort();
    let hint = match near.first() {
        Some((_, k)) => format!("; did you mean `{k}`?"),
        None => String::new(),
    };
    format!(
        "{loc}: unknown key `{key}` for `nmcp {shown}`{hint}\n  valid keys: {}",
        all.join(", ")
    )
}

/// How an option takes values.
fn takes_many(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|r| r.max_values() > 1)
}

/// Checks one value against the option's own value parser (the same check clap makes on
/// the command line), so that a bad value is reported at its line and column.
fn check_value(a: &Arg, long: &str, text: &str, loc: &Loc) -> Result<(), String> {
    // A positional probe (its error names the value, e.g. `<PATTERN>`) with the
    // option's parser, action, arity and delimiter.
    let mut probe = Arg::new("v")
        .required(true)
        .value_parser(a.get_value_parser().clone())
        .action(a.get_action().clone())
        .value_delimiter(a.get_value_delimiter())
        .allow_hyphen_values(true);
    if let Some(range) = a.get_num_args() {
        probe = probe.num_args(range);
    }
    if let Some(names) = a.get_value_names() {
        probe = probe.value_names(names.iter().cloned());
    }
    let cmd = Command::new("nmcp")
        .no_binary_name(true)
        .disable_help_flag(true)
        .arg(probe);
    match cmd.try_get_matches_from([text]) {
        Ok(_) => Ok(()),
        Err(e) => {
            let rendered = e.render().to_string();
            let body = rendered.split("\n\n").next().unwrap_or(&rendered);
            let body = body.trim().trim_start_matches("error: ");
            Err(format!("{loc}: `{long}`: {body}"))
        }
    }
}

/// Turns scenario entries into command-line words for the command `cmd` (shown as
/// `nmcp {shown}`), leaving out the entries `skip` says the command line overrides.
///
/// # Errors
/// Unknown keys (with the nearest and all valid keys), wrong types (a boolean for a flag,
/// a scalar for an option taking one value), values the option's parser rejects; each
/// with the file, line and column.
pub(crate) fn to_args(
    cmd: &Command,
    shown: &str,
    entries: &[Entry],
    skip: &dyn Fn(&Arg) -> bool,
) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for e in entries {
        let Some(a) = find_key(cmd, &e.key) else {
            return Err(unknown_key(cmd, shown, &e.key, &e.key_loc));
        };
        let long = e.key.as_str();
        let loc = &e.value_loc;
        match a.get_action() {
            ArgAction::SetTrue | ArgAction::SetFalse => {
                let Value::One(Scalar::Bool(b)) = &e.value else {
                    return Err(format!(
                        "{loc}: `{long}` is a flag: give true or false, not {}",
                        describe(&e.value)
                    ));
                };
                if skip(a) {
                    continue;
                }
                let set = matches!(a.get_action(), ArgAction::SetTrue);
                if *b == set {
                    out.push(format!("--{long}"));
                }
            }
            ArgAction::Count => {
                let Value::One(Scalar::Int(n)) = &e.value else {
                    return Err(format!(
                        "{loc}: `{long}` counts occurrences: give a non-negative integer, not {}",
                        describe(&e.value)
                    ));
                };
                let n = usize::try_from(*n)
                    .map_err(|_| format!("{loc}: `{long}`: {n} is not a count"))?;
                if skip(a) {
                    continue;
                }
                out.extend(std::iter::repeat_n(format!("--{long}"), n));
            }
            act if act.takes_values() => {
                let values: Vec<(&Scalar, &Loc)> = match &e.value {
                    Value::One(s) => vec![(s, loc)],
                    Value::Many(v) => {
                        if !takes_many(a) {
                            return Err(format!("{loc}: `{long}` takes one value, not an array"));
                        }
                        if v.is_empty() {
                            return Err(format!(
                                "{loc}: `{long}`: an empty array; give at least one value or remove the key"
                            ));
                        }
                        v.iter().map(|(s, l)| (s, l)).collect()
                    }
                };
                for (s, l) in &values {
                    check_value(a, long, &s.arg_text(), l)?;
                }
                if skip(a) {
                    continue;
                }
                if matches!(a.get_action(), ArgAction::Append) || values.len() == 1 {
                    for (s, _) in values {
                        out.push(format!("--{long}={}", s.arg_text()));
                    }
                } else {
                    out.push(format!("--{long}"));
                    out.extend(values.iter().map(|(s, _)| s.arg_text()));
                }
            }
            _ => {
                return Err(format!(
                    "{}: `{long}` cannot be set from a scenario",
                    e.key_loc
                ))
            }
        }
    }
    Ok(out)
}

fn describe(v: &Value) -> String {
    match v {
        Value::One(s) => format!("{} ({})", s.type_name(), s.canonical()),
        Value::Many(_) => format!("an array ({})", v.canonical()),
    }
}

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
struct Walk {
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
fn walk(root: &Command, argv: &[OsString]) -> Result<Walk, String> {
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
fn value_words(a: &Arg, rest: &[OsString]) -> usize {
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
fn keys_own(cmd: &Command) -> Vec<&Arg> {
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

/// Splits a line into lines of at most `width` characters at spaces (a longer word stays
/// whole).
fn wrap(line: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for word in line.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push(cur);
    out
}

/// Quotes a string as a TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Renders an option's default (or an example) as a TOML value.
fn toml_default(a: &Arg) -> Option<String> {
    let defaults: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|d| d.to_string_lossy().into_owned())
        .collect();
    if defaults.is_empty() {
        return None;
    }
    let one = |d: &str| -> String {
        let numeric = d.parse::<i128>().is_ok()
            || (d.parse::<f64>().is_ok_and(f64::is_finite)
                && d.chars().all(|c| c.is_ascii_digit() || ".-+eE".contains(c)));
        if numeric && !d.starts_with('+') && !d.starts_with('.') {
            let is_float = d.contains('.') || d.contains('e') || d.contains('E');
            // A float option whose default prints as an integer (0) gets a point, so
            // the template's TOML type matches what the option expects.
            if !is_float && value_is_float(a) {
                format!("{d}.0")
            } else {
                d.to_string()
            }
        } else if d == "true" || d == "false" {
            d.to_string()
        } else {
            toml_str(d)
        }
    };
    if takes_many(a) && defaults.len() > 1 {
        Some(format!(
            "[{}]",
            defaults
                .iter()
                .map(|d| one(d))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    } else {
        defaults.first().map(|d| one(d))
    }
}

/// Whether an option parses floats (its parser's type is `f64` or `f32`).
fn value_is_float(a: &Arg) -> bool {
    let t = a.get_value_parser().type_id();
    let f64_parser: clap::builder::ValueParser = clap::value_parser!(f64).into();
    let f32_parser: clap::builder::ValueParser = clap::value_parser!(f32).into();
    t == f64_parser.type_id() || t == f32_parser.type_id()
}

/// Writes the commented template of a command's scenario: every option with its help
/// line and its default, commented out, generated from the CLI's own definition.
///
/// # Errors
/// An unknown subcommand path or one that only groups subcommands.
pub fn template(root: &Command, path: &[String]) -> Result<String, String> {
    let cmd = leaf(root, path, "scenario init")?;
    let shown = path.join(" ");
    let mut t = String::new();
    let about = cmd.get_about().map(|s| s.to_string()).unwrap_or_default();
    let _ = writeln!(t, "# nmcp scenario for `nmcp {shown}`: {}", about.trim());
    let _ = writeln!(
        t,
        "# Run: nmcp {shown} --config THIS.toml   (options on the command line win over the file)"
    );
    let _ = writeln!(
        t,
        "# Generated by `nmcp scenario init {shown}` (nmcp {}) from the command's own options.",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(
        t,
        "# Every option is listed, commented out; `# key = value` shows the default, uncomment to change it."
    );
    let _ = writeln!(
        t,
        "# Keys are the long option names; flags take true/false; options taking several values take arrays."
    );
    let positionals: Vec<String> = cmd
        .get_positionals()
        .map(|p| {
            p.get_value_names()
                .and_then(|n| n.first())
                .map_or_else(|| p.get_id().to_string(), |n| n.to_string())
        })
        .collect();
    if !positionals.is_empty() {
        let _ = writeln!(
            t,
            "# Positional arguments ({}) stay on the command line.",
            positionals.join(", ")
        );
    }
    let _ = writeln!(t);
    let _ = writeln!(t, "command = {}", toml_str(&shown));
    for a in keys(cmd) {
        let Some(long) = a.get_long() else { continue };
        if a.is_hide_set() {
            continue;
        }
        let _ = writeln!(t);
        let help = a
            .get_long_help()
            .or_else(|| a.get_help())
            .map(|s| s.to_string())
            .unwrap_or_default();
        for line in help.lines() {
            let line = line.trim_end();
            if line.is_empty() {
                let _ = writeln!(t, "#");
            } else {
                for w in wrap(line, 86) {
                    let _ = writeln!(t, "# {w}");
                }
            }
        }
        let possible: Vec<String> = a
            .get_possible_values()
            .iter()
            .filter(|p| !p.is_hide_set())
            .map(|p| p.get_name().to_string())
            .collect();
        if !possible.is_empty() && !help.contains("possible values") {
            let _ = writeln!(t, "# Values: {}.", possible.join(", "));
        }
        if a.is_global_set() {
            let _ = writeln!(t, "# (An option of every nmcp command.)");
        }
        match a.get_action() {
            ArgAction::SetTrue => {
                let _ = writeln!(t, "# {long} = false");
            }
            ArgAction::SetFalse => {
                let _ = writeln!(t, "# {long} = true");
            }
            ArgAction::Count => {
                let _ = writeln!(t, "# {long} = 0");
            }
            _ => match toml_default(a) {
                Some(d) => {
                    let _ = writeln!(t, "# {long} = {d}");
                }
                None => {
                    let name = a
                        .get_value_names()
                        .and_then(|n| n.first())
                        .map_or_else(|| "VALUE".to_string(), |n| n.to_string());
                    let example = if takes_many(a) {
                        format!("[<{name}>, ...]")
                    } else {
                        format!("<{name}>")
                    };
                    let _ = writeln!(t, "# {long} = {example}   (no default)");
                }
            },
        }
    }
    Ok(t)
}

/// The subcommand paths a scenario can drive (for `nmcp scenario init --list`).
pub fn commands(root: &Command) -> Vec<String> {
    fn rec(cmd: &Command, prefix: &mut Vec<String>, out: &mut Vec<String>) {
        for sub in cmd.get_subcommands() {
            if NOT_SCENARIO_COMMANDS.contains(&sub.get_name()) {
                continue;
            }
            prefix.push(sub.get_name().to_string());
            if !(sub.has_subcommands() && keys_own(sub).is_empty()) {
                out.push(prefix.join(" "));
            }
            rec(sub, prefix, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    rec(root, &mut Vec::new(), &mut out);
    out
}

/// Arguments of `nmcp scenario`.
#[derive(clap::Args, Debug)]
pub struct ScenarioArgs {
    #[command(subcommand)]
    command: ScenarioCommand,
}

#[derive(clap::Subcommand, Debug)]
enum ScenarioCommand {
    /// Write a commented template of a command's scenario (every option, its help line
    /// and its default), e.g. `nmcp scenario init t3 cu-split --output cu.toml`.
    Init(InitArgs),
    /// Print the command line a scenario file stands for (checks every key and value).
    Show(ShowArgs),
}

/// `nmcp scenario init`.
#[derive(clap::Args, Debug)]
struct InitArgs {
    /// The subcommand, e.g. `mem`, `lamb`, `t3`, `t3 cu-split`, `goldyloc eval`
    /// (`--list` lists them).
    #[arg(num_args = 1.., required_unless_present = "list")]
    command: Vec<String>,
    /// Write the template here instead of standard output (an existing file is kept
    /// unless --force).
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Overwrite --output if it exists.
    #[arg(long, requires = "output")]
    force: bool,
    /// List the subcommands a scenario can drive.
    #[arg(long, conflicts_with = "command")]
    list: bool,
}

/// `nmcp scenario show`.
#[derive(clap::Args, Debug)]
struct ShowArgs {
    /// The scenario file (it must name its command: `command = "..."`).
    file: PathBuf,
}

/// A word as a POSIX shell would need it (single-quoted unless plain).
fn shell_word(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,+-@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}

/// Runs `nmcp scenario`.
///
/// # Errors
/// Unknown subcommands, files that cannot be written, scenario errors.
pub(crate) fn run(a: ScenarioArgs) -> Result<(), Box<dyn std::error::Error>> {
    let root = crate::cli_command();
    match a.command {
        ScenarioCommand::Init(i) => {
            if i.list {
                let mut out = commands(&root).join("\n");
                out.push('\n');
                return crate::cmd::io::emit(&out);
            }
            let path: Vec<String> = i.command.iter().flat_map(|w| command_words(w)).collect();
            let text = template(&root, &path)
                .map_err(|e| Box::new(crate::cmd::UsageError(e)) as Box<dyn std::error::Error>)?;
            match i.output {
                None => crate::cmd::io::emit(&text),
                Some(out) => {
                    if out.exists() && !i.force {
                        return Err(format!(
                            "{}: exists; pass --force to overwrite it",
                            out.display()
                        )
                        .into());
                    }
                    crate::cmd::io::write_file(&out, text.as_bytes())?;
                    eprintln!("nmcp: wrote {}", out.display());
                    Ok(())
                }
            }
        }
        ScenarioCommand::Show(s) => {
            let sc = load(&s.file)?;
            let Some((path, _)) = &sc.command else {
                return Err(format!(
                    "{}: no `command = \"...\"`: `scenario show` needs the file to name its subcommand",
                    s.file.display()
                )
                .into());
            };
            let cmd = leaf(&root, path, &s.file.display().to_string())?;
            let args = to_args(cmd, &path.join(" "), &sc.entries, &|_| false)?;
            let mut words = vec!["nmcp".to_string()];
            words.extend(path.iter().cloned());
            words.extend(args);
            let quoted: Vec<String> = words.iter().map(|w| shell_word(w)).collect();
            crate::cmd::io::emit(&format!("{}\n", quoted.join(" ")))
        }
    }
}

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
