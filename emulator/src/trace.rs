//! Request sources: trace files in the formats users of other simulators already have,
//! and seeded synthetic generators.
//!
//! * DRAMsim3 style: `ADDR OP CYCLE` per line, OP one of `R`, `W`, `READ`, `WRITE`; the
//!   cycle is the arrival cycle and must not decrease.
//! * Ramulator style: `OP ADDR` per line, OP one of `LD`, `ST`; no timing, so every
//!   request arrives at cycle 0 and enters as fast as the queues accept it.
//!
//! Every request is a compute-class read or write with no source.
//!
//! Addresses are hex with `0x` or decimal. `#` starts a comment; blank lines are skipped.
//! Every error names the line and column (1-based) and what was expected there.

use std::fmt;
use std::str::FromStr;

use rand::RngCore;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::hbm::Cycle;
use crate::memctrl::Request;

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceFormat {
    /// `ADDR R|W CYCLE`.
    DramSim3,
    /// `LD|ST ADDR`.
    Ramulator,
}

impl FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dramsim3" => Ok(TraceFormat::DramSim3),
            "ramulator" => Ok(TraceFormat::Ramulator),
            other => Err(format!(
                "unknown trace format `{other}` (expected dramsim3 or ramulator)"
            )),
        }
    }
}

/// A malformed trace line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// What was expected and what was found.
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for TraceError {}

/// Whitespace-separated tokens of a line with their 1-based columns.
fn tokens(line: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut rest = line;
    let mut offset = 0usize;
    std::iter::from_fn(move || {
        let start = rest.find(|c: char| !c.is_whitespace())?;
        let after = &rest[start..];
        let len = after.find(char::is_whitespace).unwrap_or(after.len());
        let tok = &after[..len];
        let col = line[..offset + start].chars().count() + 1;
        offset += start + len;
        rest = &after[len..];
        Some((col, tok))
    })
}

fn strip_comment(line: &str) -> &str {
    match line.find('#') {
        Some(i) => &line[..i],
        None => line,
    }
}

fn parse_number(tok: &str) -> Option<u64> {
    match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => tok.parse().ok(),
    }
}

/// Guesses the format from the first line that is not blank or a comment.
pub fn detect_format(text: &str) -> Option<TraceFormat> {
    let line = text
        .lines()
        .map(strip_comment)
        .find(|l| !l.trim().is_empty())?;
    let first = tokens(line).next()?.1.to_ascii_uppercase();
    Some(if first == "LD" || first == "ST" {
        TraceFormat::Ramulator
    } else {
        TraceFormat::DramSim3
    })
}

/// Parses a whole trace into requests of `size` bytes. With `format` `None` the format is
/// detected from the first line.
pub fn parse_trace(
    text: &str,
    format: Option<TraceFormat>,
    size: u32,
) -> Result<Vec<Request>, TraceError> {
    let format = format
        .or_else(|| detect_format(text))
        .unwrap_or(TraceFormat::DramSim3);
    let mut out = Vec::new();
    let mut last_cycle: Cycle = 0;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = strip_comment(raw);
        let mut toks = tokens(line);
        let Some(first) = toks.next() else { continue };
        let end_col = line.trim_end().chars().count() + 1;
        let err = |col: usize, message: String| TraceError {
            line: line_no,
            col,
            message,
        };
        let addr_of = |(col, tok): (usize, &str)| {
            parse_number(tok).ok_or_else(|| {
                err(
                    col,
                    format!("expected an address (hex with 0x, or decimal), found `{tok}`"),
                )
            })
        };
        let req = match format {
            TraceFormat::DramSim3 => {
                let addr = addr_of(first)?;
                let (op_col, op) = toks
                    .next()
                    .ok_or_else(|| err(end_col, "expected R or W after the address".into()))?;
                let write = match op.to_ascii_uppercase().as_str() {
                    "R" | "READ" => false,
                    "W" | "WRITE" => true,
                    _ => return Err(err(op_col, format!("expected R or W, found `{op}`"))),
                };
                let (cyc_col, cyc) = toks
                    .next()
                    .ok_or_else(|| err(end_col, "expected the arrival cycle after R/W".into()))?;
                let arrival = parse_number(cyc).ok_or_else(|| {
                    err(
                        cyc_col,
                        format!("expected the arrival cycle (a number), found `{cyc}`"),
                    )
                })?;
                if arrival < last_cycle {
                    return Err(err(
                        cyc_col,
                        format!(
                            "arrival cycle {arrival} is before the previous line's {last_cycle}"
                        ),
                    ));
                }
                last_cycle = arrival;
                if write {
                    Request::write(addr, size, arrival)
                } else {
                    Request::read(addr, size, arrival)
                }
            }
            TraceFormat::Ramulator => {
                let (op_col, op) = first;
                let write = match op.to_ascii_uppercase().as_str() {
                    "LD" => false,
                    "ST" => true,
                    _ => return Err(err(op_col, format!("expected LD or ST, found `{op}`"))),
                };
                let a = toks
                    .next()
                    .ok_or_else(|| err(end_col, "expected an address after LD/ST".into()))?;
                let addr = addr_of(a)?;
                if write {
                    Request::write(addr, size, 0)
                } else {
                    Request::read(addr, size, 0)
                }
            }
        };
        if let Some((col, extra)) = toks.next() {
            return Err(err(col, format!("expected end of line, found `{extra}`")));
        }
        out.push(req);
    }
    Ok(out)
}

/// Synthetic access pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Consecutive addresses from 0, wrapping at the device capacity.
    Stream,
    /// Uniformly random aligned addresses over the whole device.
    Random,
}

impl FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "stream" => Ok(Pattern::Stream),
            "random" => Ok(Pattern::Random),
            other => Err(format!(
                "unknown pattern `{other}` (expected stream or random)"
            )),
        }
    }
}

/// A seeded request generator; every request arrives at cycle 0 (the front end's
/// back-pressure sets the pace).
#[derive(Debug, Clone)]
pub struct Synthetic {
    pattern: Pattern,
    remaining: u64,
    index: u64,
    size: u32,
    slots: u64,
    write_ratio: f64,
    rng: Xoshiro256PlusPlus,
}

impl Synthetic {
    /// `count` requests of `size` bytes over a device of `capacity` bytes (a power of two),
    /// a fraction `write_ratio` of them writes.
    pub fn new(
        pattern: Pattern,
        count: u64,
        size: u32,
        capacity: u64,
        write_ratio: f64,
        seed: u64,
    ) -> Self {
        Synthetic {
            pattern,
            remaining: count,
            index: 0,
            size,
            slots: (capacity / u64::from(size.max(1))).max(1),
            write_ratio,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

impl Iterator for Synthetic {
    type Item = Request;

    #[inline]
    fn next(&mut self) -> Option<Request> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let slot = match self.pattern {
            Pattern::Stream => self.index % self.slots,
            Pattern::Random => self.rng.next_u64() % self.slots,
        };
        self.index += 1;
        let write = self.write_ratio > 0.0
            && (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < self.write_ratio;
        let addr = slot * u64::from(self.size);
        Some(if write {
            Request::write(addr, self.size, 0)
        } else {
            Request::read(addr, self.size, 0)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memctrl::Access;

    #[test]
    fn both_formats_parse_and_detect() {
        let d = "# comment\n\n0x40 R 0\n128 WRITE 5 # trailing\n";
        let r = parse_trace(d, None, 64).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[1], Request::write(128, 64, 5));
        let m = "LD 0x1000\nST 64\n";
        assert_eq!(detect_format(m), Some(TraceFormat::Ramulator));
        let r = parse_trace(m, None, 32).unwrap();
        assert_eq!(r[0], Request::read(0x1000, 32, 0));
        assert_eq!(r[1].access, Access::Write);
    }

    #[test]
    fn errors_give_line_and_column() {
        let e = parse_trace("0x40 R 0\n0x80 X 3\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (2, 6));
        assert!(e.message.contains("expected R or W"), "{e}");
        let e = parse_trace("0x40 R 9\n  0x80 R 3\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (2, 10));
        let e = parse_trace("0x40 R\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (1, 7));
        let e = parse_trace("LD 0xZZ\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (1, 4));
        let e = parse_trace("LD 0x10 R\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (1, 9));
    }

    #[test]
    fn generators_are_deterministic_and_aligned() {
        let a: Vec<_> = Synthetic::new(Pattern::Random, 100, 64, 1 << 32, 0.3, 7).collect();
        let b: Vec<_> = Synthetic::new(Pattern::Random, 100, 64, 1 << 32, 0.3, 7).collect();
        assert_eq!(a, b);
        assert!(a.iter().all(|r| r.addr % 64 == 0 && r.addr < 1 << 32));
        let writes = a.iter().filter(|r| r.access == Access::Write).count();
        assert!((10..=50).contains(&writes), "{writes}");
        let s: Vec<_> = Synthetic::new(Pattern::Stream, 3, 32, 1 << 32, 0.0, 0).collect();
        assert_eq!(s.iter().map(|r| r.addr).collect::<Vec<_>>(), [0, 32, 64]);
    }
}
