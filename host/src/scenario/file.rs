//! A scenario file read: its values (scalars and arrays, with their TOML type), their
//! positions as `FILE:LINE:COLUMN`, and the `command` key.

use std::ops::Range;
use std::path::{Path, PathBuf};

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
    pub(super) fn arg_text(&self) -> String {
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

    pub(super) fn type_name(&self) -> &'static str {
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
