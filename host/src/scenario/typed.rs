//! Typed options: every value (default, command line, file) put into a TOML table under
//! its key with the type its option parses to, then deserialised by serde into the
//! command's options struct; adapters for options with their own clap value parser.

use std::any::TypeId;

use clap::{Arg, ArgAction};
use serde::de::{DeserializeOwned, Deserializer, Error as _};

use super::*;

/// A command's typed options: serde reads them from the merged table (keys are the long
/// names, kebab-case), and their relations are the command's own check.
pub(crate) trait Options: DeserializeOwned + 'static {
    /// How the options depend on each other (checked on the keys given anywhere).
    const RELATIONS: &'static [Relation] = &[];
}

/// [`Options`] behind a reference, whatever the command: what the merge fills in.
pub(crate) trait Typed {
    /// Replaces the options with the table's (every key of the command is in it).
    ///
    /// # Errors
    /// A value serde cannot read into its field.
    fn take(&mut self, table: &toml::Table) -> Result<(), String>;
    /// The command's relations.
    fn relations(&self) -> &'static [Relation];
}

impl<T: Options> Typed for T {
    fn take(&mut self, table: &toml::Table) -> Result<(), String> {
        *self = toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        Ok(())
    }

    fn relations(&self) -> &'static [Relation] {
        T::RELATIONS
    }
}

/// Whether an option takes several values (an array in the table).
pub(crate) fn is_many(a: &Arg) -> bool {
    takes_many(a) || a.get_value_delimiter().is_some()
}

fn parses_to<T: 'static>(a: &Arg) -> bool {
    a.get_value_parser().type_id() == TypeId::of::<T>()
}

/// One word as the TOML value its option parses to: an integer for integer options, a
/// float for float options, a boolean for flags, a string otherwise (and for a word the
/// plain type does not read, such as `64M` for a size: its field's adapter parses it).
pub(crate) fn typed_word(a: &Arg, text: &str) -> toml::Value {
    let int = parses_to::<u8>(a)
        || parses_to::<u16>(a)
        || parses_to::<u32>(a)
        || parses_to::<u64>(a)
        || parses_to::<usize>(a)
        || parses_to::<i32>(a)
        || parses_to::<i64>(a);
    if int {
        if let Ok(i) = text.parse::<i64>() {
            return toml::Value::Integer(i);
        }
    } else if parses_to::<f64>(a) || parses_to::<f32>(a) {
        if let Ok(f) = text.parse::<f64>() {
            return toml::Value::Float(f);
        }
    } else if parses_to::<bool>(a) {
        if let Ok(b) = text.parse::<bool>() {
            return toml::Value::Boolean(b);
        }
    }
    toml::Value::String(text.to_string())
}

/// An option's words (as clap read them, or a file's values) as its table value: an
/// array for an option taking several values, else the one value.
pub(crate) fn typed_words(a: &Arg, words: &[String]) -> toml::Value {
    if matches!(a.get_action(), ArgAction::SetTrue | ArgAction::SetFalse) {
        let on = words.last().is_some_and(|w| w == "true");
        return toml::Value::Boolean(on);
    }
    if is_many(a) {
        let mut items = Vec::new();
        for w in words {
            match a.get_value_delimiter() {
                Some(d) => items.extend(w.split(d).map(|p| typed_word(a, p))),
                None => items.push(typed_word(a, w)),
            }
        }
        return toml::Value::Array(items);
    }
    words
        .last()
        .map_or(toml::Value::Array(Vec::new()), |w| typed_word(a, w))
}

/// A scalar (string, integer, float or boolean) as the word an option's parser takes.
struct Word(String);

impl<'de> serde::Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Word;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or a number")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Word, E> {
                Ok(Word(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Word, E> {
                Ok(Word(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Word, E> {
                Ok(Word(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Word, E> {
                Ok(Word(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Word, E> {
                Ok(Word(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// Reads one value through the option's own parser (the function clap calls), from a
/// string or a TOML-native number.
///
/// # Errors
/// The parser's message.
pub(crate) fn parse_one<'de, D, T, E>(d: D, parse: fn(&str) -> Result<T, E>) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    E: std::fmt::Display,
{
    let w = <Word as serde::Deserialize>::deserialize(d)?;
    parse(&w.0).map_err(D::Error::custom)
}

/// [`parse_one`] for an optional value.
///
/// # Errors
/// The parser's message.
pub(crate) fn parse_option<'de, D, T, E>(
    d: D,
    parse: fn(&str) -> Result<T, E>,
) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    E: std::fmt::Display,
{
    let w = <Option<Word> as serde::Deserialize>::deserialize(d)?;
    w.map(|w| parse(&w.0).map_err(D::Error::custom)).transpose()
}

/// [`parse_one`] for each value of an array.
///
/// # Errors
/// The parser's message.
pub(crate) fn parse_many<'de, D, T, E>(
    d: D,
    parse: fn(&str) -> Result<T, E>,
) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    E: std::fmt::Display,
{
    let ws = <Vec<Word> as serde::Deserialize>::deserialize(d)?;
    ws.iter()
        .map(|w| parse(&w.0).map_err(D::Error::custom))
        .collect()
}

/// [`parse_many`] for an optional list.
///
/// # Errors
/// The parser's message.
pub(crate) fn parse_option_many<'de, D, T, E>(
    d: D,
    parse: fn(&str) -> Result<T, E>,
) -> Result<Option<Vec<T>>, D::Error>
where
    D: Deserializer<'de>,
    E: std::fmt::Display,
{
    let ws = <Option<Vec<Word>> as serde::Deserialize>::deserialize(d)?;
    ws.map(|ws| {
        ws.iter()
            .map(|w| parse(&w.0).map_err(D::Error::custom))
            .collect()
    })
    .transpose()
}

/// serde adapters for an option with its own clap value parser: `parsed!(mod bytes =
/// parse_bytes => u64);` gives `bytes::one`, `bytes::option`, `bytes::many` and `bytes::option_many`, each
/// calling the parser (one source of truth for ranges and spellings), for
/// `#[serde(deserialize_with = "bytes::one")]` (with `default` on optional fields).
macro_rules! parsed {
    ($vis:vis mod $m:ident = $parse:path => $t:ty) => {
        #[allow(dead_code)]
        $vis mod $m {
            #[allow(unused_imports)]
            use super::*;
            fn parse(s: &str) -> Result<$t, String> {
                $parse(s).map_err(|e| e.to_string())
            }
            pub(crate) fn one<'de, D: serde::Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                $crate::scenario::parse_one(d, parse)
            }
            pub(crate) fn option<'de, D: serde::Deserializer<'de>>(
                d: D,
            ) -> Result<Option<$t>, D::Error> {
                $crate::scenario::parse_option(d, parse)
            }
            pub(crate) fn many<'de, D: serde::Deserializer<'de>>(
                d: D,
            ) -> Result<Vec<$t>, D::Error> {
                $crate::scenario::parse_many(d, parse)
            }
            pub(crate) fn option_many<'de, D: serde::Deserializer<'de>>(
                d: D,
            ) -> Result<Option<Vec<$t>>, D::Error> {
                $crate::scenario::parse_option_many(d, parse)
            }
        }
    };
}
pub(crate) use parsed;
