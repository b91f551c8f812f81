//! Lexing of one assembler line: tokens that remember their column, comma-separated
//! operands, dot-separated mnemonic suffixes, integers.

use super::AsmErrorKind;

/// A piece of a line and where it starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tok<'a> {
    pub(super) text: &'a str,
    /// 1-based column.
    pub(super) col: u32,
}

/// Error position inside a line: the line is filled in by the caller.
pub(super) type KindAt = (u32, AsmErrorKind);

impl<'a> Tok<'a> {
    pub(super) fn err(&self, kind: AsmErrorKind) -> KindAt {
        (self.col, kind)
    }

    /// Sub-token starting `skip` bytes in.
    pub(super) fn skip(&self, skip: usize) -> Tok<'a> {
        Tok {
            text: self.text.get(skip..).unwrap_or(""),
            col: self.col + skip as u32,
        }
    }

    /// Trims whitespace, keeping the column right.
    pub(super) fn trim(&self) -> Tok<'a> {
        let start = self.text.len() - self.text.trim_start().len();
        Tok {
            text: self.text.trim(),
            col: self.col + start as u32,
        }
    }

    /// Splits at the first occurrence of `c` (the separator is dropped).
    pub(super) fn split_once(&self, c: char) -> Option<(Tok<'a>, Tok<'a>)> {
        let (a, b) = self.text.split_once(c)?;
        let bcol = self.col + (a.len() + c.len_utf8()) as u32;
        Some((
            Tok {
                text: a,
                col: self.col,
            },
            Tok { text: b, col: bcol },
        ))
    }

    /// Splits at the first whitespace.
    pub(super) fn split_word(&self) -> (Tok<'a>, Tok<'a>) {
        match self.text.find(char::is_whitespace) {
            Some(i) => {
                let (a, b) = self.text.split_at(i);
                (
                    Tok {
                        text: a,
                        col: self.col,
                    },
                    Tok {
                        text: b,
                        col: self.col + i as u32,
                    }
                    .trim(),
                )
            }
            None => (
                *self,
                Tok {
                    text: "",
                    col: self.col + self.text.len() as u32,
                },
            ),
        }
    }
}

/// Iterates over comma-separated operands, tracking the position of each.
pub(super) struct Operands<'a> {
    rest: Option<Tok<'a>>,
    /// Column just past the line's text, for "missing operand" errors.
    end_col: u32,
}

impl<'a> Operands<'a> {
    pub(super) fn new(rest: Tok<'a>) -> Self {
        let end_col = rest.col + rest.text.len() as u32;
        Self {
            rest: if rest.text.is_empty() {
                None
            } else {
                Some(rest)
            },
            end_col,
        }
    }

    /// The next operand, or an error saying `what` was expected.
    pub(super) fn next(&mut self, what: &'static str) -> Result<Tok<'a>, KindAt> {
        let Some(rest) = self.rest else {
            return Err((self.end_col, AsmErrorKind::Expected(what)));
        };
        let (tok, rest) = match rest.split_once(',') {
            Some((a, b)) => (a, Some(b)),
            None => (rest, None),
        };
        self.rest = rest;
        let tok = tok.trim();
        if tok.text.is_empty() {
            return Err(tok.err(AsmErrorKind::Expected(what)));
        }
        Ok(tok)
    }

    /// The next operand if there is one.
    pub(super) fn optional(&mut self, what: &'static str) -> Result<Option<Tok<'a>>, KindAt> {
        if self.rest.is_none() {
            return Ok(None);
        }
        self.next(what).map(Some)
    }

    pub(super) fn finish(&self) -> Result<(), KindAt> {
        match self.rest {
            None => Ok(()),
            Some(r) => Err((r.col.saturating_sub(1), AsmErrorKind::ExtraOperand)),
        }
    }
}

/// Parses an integer: optional sign, decimal or `0x` hexadecimal.
pub(super) fn parse_int(tok: Tok<'_>) -> Result<i64, KindAt> {
    let t = tok.text;
    let (neg, digits) = match t.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
            i64::from_str_radix(hex, 16).ok()
        }
        Some(_) => None,
        None if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse::<i64>().ok()
        }
        None => None,
    };
    let value = value.ok_or(tok.err(AsmErrorKind::BadNumber))?;
    Ok(if neg { -value } else { value })
}

pub(super) fn int_in(tok: Tok<'_>, min: i64, max: i64) -> Result<i64, KindAt> {
    let v = parse_int(tok)?;
    if v < min || v > max {
        return Err(tok.err(AsmErrorKind::OutOfRange { min, max }));
    }
    Ok(v)
}

/// The dot-separated parts of a mnemonic.
pub(super) struct Suffixes<'a> {
    rest: Option<Tok<'a>>,
}

impl<'a> Suffixes<'a> {
    pub(super) fn new(head: Tok<'a>) -> Self {
        Self { rest: Some(head) }
    }

    pub(super) fn peek(&self) -> Option<Tok<'a>> {
        self.rest.map(|r| r.split_once('.').map_or(r, |(a, _)| a))
    }

    pub(super) fn next(&mut self) -> Option<Tok<'a>> {
        let r = self.rest?;
        match r.split_once('.') {
            Some((a, b)) => {
                self.rest = Some(b);
                Some(a)
            }
            None => {
                self.rest = None;
                Some(r)
            }
        }
    }
}

/// Removes a `;` comment.
pub(super) fn strip_comment(line: &str) -> &str {
    line.split_once(';').map_or(line, |(code, _)| code)
}
