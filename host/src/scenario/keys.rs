//! Scenario keys against clap's options: which long options are keys, the unknown-key
//! message with its suggestion, every value checked by the option's own parser and typed
//! for the merge, and a table value written back as command-line words.

use clap::{Arg, ArgAction, Command};

use super::*;

/// Whether the argument asks for help or the version.
pub(super) fn is_help(a: &Arg) -> bool {
    matches!(
        a.get_action(),
        ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version
    )
}

/// Whether the argument is a scenario key: a long option other than help and version.
pub(super) fn is_key(a: &Arg) -> bool {
    a.get_long().is_some() && !is_help(a) && a.get_id() != CONFIG_ID && a.get_id() != SCENARIO_ID
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
pub(super) fn distance(a: &str, b: &str) -> usize {
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
pub(super) fn takes_many(a: &Arg) -> bool {
    matches!(a.get_action(), ArgAction::Append)
        || a.get_num_args().is_some_and(|r| r.max_values() > 1)
}

/// Checks one value against the option's own value parser (the same check clap makes on
/// the command line), so that a bad value is reported at its line and column.
pub(super) fn check_value(a: &Arg, long: &str, text: &str, loc: &Loc) -> Result<(), String> {
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

/// Checks scenario entries against the command `cmd` (shown as `nmcp {shown}`) and
/// gives each as its table value (see [`typed_words`]), in file order.
///
/// # Errors
/// Unknown keys (with the nearest and all valid keys), wrong types (a boolean for a flag,
/// a scalar for an option taking one value), values the option's parser rejects; each
/// with the file, line and column.
pub(crate) fn validate(
    cmd: &Command,
    shown: &str,
    entries: &[Entry],
) -> Result<Vec<(String, toml::Value)>, String> {
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
                let on = *b == matches!(a.get_action(), ArgAction::SetTrue);
                out.push((e.key.clone(), toml::Value::Boolean(on)));
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
                let words: Vec<String> = values.iter().map(|(s, _)| s.arg_text()).collect();
                out.push((e.key.clone(), typed_words(a, &words)));
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

/// A table value as the text of one command-line word.
fn word_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The command-line words for one option's table value: `--json` for a set flag,
/// `--key=value` (once per value for an option that appends), `--key a b` for one that
/// takes several values at once; a positional's values as they are.
pub(crate) fn option_words(a: &Arg, value: &toml::Value) -> Vec<String> {
    let values: Vec<String> = match value {
        toml::Value::Array(items) => items.iter().map(word_text).collect(),
        toml::Value::Boolean(b) if matches!(a.get_action(), ArgAction::SetTrue) => {
            return if *b {
                vec![format!("--{}", arg_key(a))]
            } else {
                Vec::new()
            };
        }
        toml::Value::Boolean(b) if matches!(a.get_action(), ArgAction::SetFalse) => {
            return if *b {
                Vec::new()
            } else {
                vec![format!("--{}", arg_key(a))]
            };
        }
        other => vec![word_text(other)],
    };
    let Some(long) = a.get_long() else {
        return values;
    };
    if matches!(a.get_action(), ArgAction::Append) || values.len() == 1 {
        values.iter().map(|v| format!("--{long}={v}")).collect()
    } else {
        let mut out = vec![format!("--{long}")];
        out.extend(values);
        out
    }
}

pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::One(s) => format!("{} ({})", s.type_name(), s.canonical()),
        Value::Many(_) => format!("an array ({})", v.canonical()),
    }
}
