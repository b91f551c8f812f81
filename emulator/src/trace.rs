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
//!
//! [`TraceReader`] streams a file line by line (bytes, no per-line allocation), so a run's
//! memory does not depend on the trace's length.

use std::fmt;
use std::str::FromStr;

use rand::RngCore;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::hbm::Cycle;
use crate::memctrl::Request;

/// A trace file format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Byte offset and bytes of each whitespace-separated token of a line (comment stripped).
#[inline]
fn tokens(line: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut i = 0usize;
    std::iter::from_fn(move || {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= line.len() {
            return None;
        }
        let start = i;
        while i < line.len() && !line[i].is_ascii_whitespace() {
            i += 1;
        }
        Some((start, &line[start..i]))
    })
}

fn strip_comment(line: &[u8]) -> &[u8] {
    match memchr_byte(b'#', line) {
        Some(i) => &line[..i],
        None => line,
    }
}

#[inline]
fn memchr_byte(b: u8, s: &[u8]) -> Option<usize> {
    s.iter().position(|&c| c == b)
}

/// 1-based column (in characters) of byte offset `off` of `line`; only on the error path.
fn column(line: &[u8], off: usize) -> usize {
    String::from_utf8_lossy(&line[..off.min(line.len())])
        .chars()
        .count()
        + 1
}

fn show(tok: &[u8]) -> String {
    String::from_utf8_lossy(tok).into_owned()
}

/// Parses a hex (`0x`) or decimal number; `None` on anything else or overflow.
#[inline]
fn parse_number(tok: &[u8]) -> Option<u64> {
    let (digits, radix) = match tok {
        [b'0', b'x' | b'X', rest @ ..] => (rest, 16u64),
        _ => (tok, 10u64),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in digits {
        let d = match c {
            b'0'..=b'9' => u64::from(c - b'0'),
            b'a'..=b'f' if radix == 16 => u64::from(c - b'a' + 10),
            b'A'..=b'F' if radix == 16 => u64::from(c - b'A' + 10),
            _ => return None,
        };
        v = v.checked_mul(radix)?.checked_add(d)?;
    }
    Some(v)
}

/// The format a first content line implies: `LD`/`ST` first ⇒ Ramulator, else DRAMsim3.
fn format_of(line: &[u8]) -> Option<TraceFormat> {
    let (_, first) = tokens(strip_comment(line)).next()?;
    Some(
        if first.eq_ignore_ascii_case(b"LD") || first.eq_ignore_ascii_case(b"ST") {
            TraceFormat::Ramulator
        } else {
            TraceFormat::DramSim3
        },
    )
}

/// Guesses the format from the first line that is not blank or a comment.
pub fn detect_format(text: &str) -> Option<TraceFormat> {
    text.lines().find_map(|l| format_of(l.as_bytes()))
}

/// Parses one line (`None` for a blank or comment line). `last_cycle` is the previous
/// line's arrival (DRAMsim3 arrivals must not decrease) and is updated.
fn parse_line(
    raw: &[u8],
    line_no: usize,
    format: TraceFormat,
    size: u32,
    last_cycle: &mut Cycle,
) -> Result<Option<Request>, TraceError> {
    let line = strip_comment(raw);
    let mut toks = tokens(line);
    let Some(first) = toks.next() else {
        return Ok(None);
    };
    let err = |off: usize, message: String| TraceError {
        line: line_no,
        col: column(line, off),
        message,
    };
    let end = line.trim_ascii_end().len();
    let addr_of = |(off, tok): (usize, &[u8])| {
        parse_number(tok).ok_or_else(|| {
            err(
                off,
                format!(
                    "expected an address (hex with 0x, or decimal), found `{}`",
                    show(tok)
                ),
            )
        })
    };
    let req = match format {
        TraceFormat::DramSim3 => {
            let addr = addr_of(first)?;
            let (op_off, op) = toks
                .next()
                .ok_or_else(|| err(end, "expected R or W after the address".into()))?;
            let write = if op.eq_ignore_ascii_case(b"R") || op.eq_ignore_ascii_case(b"READ") {
                false
            } else if op.eq_ignore_ascii_case(b"W") || op.eq_ignore_ascii_case(b"WRITE") {
                true
            } else {
                return Err(err(
                    op_off,
                    format!("expected R or W, found `{}`", show(op)),
                ));
            };
            let (cyc_off, cyc) = toks
                .next()
                .ok_or_else(|| err(end, "expected the arrival cycle after R/W".into()))?;
            let arrival = parse_number(cyc).ok_or_else(|| {
                err(
                    cyc_off,
                    format!(
                        "expected the arrival cycle (a number), found `{}`",
                        show(cyc)
                    ),
                )
            })?;
            if arrival < *last_cycle {
                return Err(err(
                    cyc_off,
                    format!(
                        "arrival cycle {arrival} is before the previous line's {}",
                        *last_cycle
                    ),
                ));
            }
            *last_cycle = arrival;
            if write {
                Request::write(addr, size, arrival)
            } else {
                Request::read(addr, size, arrival)
            }
        }
        TraceFormat::Ramulator => {
            let (op_off, op) = first;
            let write = if op.eq_ignore_ascii_case(b"LD") {
                false
            } else if op.eq_ignore_ascii_case(b"ST") {
                true
            } else {
                return Err(err(
                    op_off,
                    format!("expected LD or ST, found `{}`", show(op)),
                ));
            };
            let a = toks
                .next()
                .ok_or_else(|| err(end, "expected an address after LD/ST".into()))?;
            let addr = addr_of(a)?;
            if write {
                Request::write(addr, size, 0)
            } else {
                Request::read(addr, size, 0)
            }
        }
    };
    if let Some((off, extra)) = toks.next() {
        return Err(err(
            off,
            format!("expected end of line, found `{}`", show(extra)),
        ));
    }
    Ok(Some(req))
}

/// A streaming trace reader: yields one request per content line, reading the input a
/// buffer at a time, so memory does not grow with the trace. With no format given, the
/// first content line decides. After an error it yields nothing more.
#[derive(Debug)]
pub struct TraceReader<R> {
    input: R,
    format: Option<TraceFormat>,
    size: u32,
    line: Vec<u8>,
    line_no: usize,
    last_cycle: Cycle,
    done: bool,
    /// Bytes consumed from `input` (the start of the next unread line).
    offset: u64,
}

/// Where a [`TraceReader`] stands between two requests: enough to continue reading the
/// same input from `offset` with [`TraceReader::resume`] (for checkpoints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TracePosition {
    /// Byte offset of the next unread line.
    pub offset: u64,
    /// Lines read so far (error messages go on numbering from here).
    pub line: u64,
    /// The last request's arrival (DRAMsim3 arrivals must not decrease).
    pub last_cycle: Cycle,
    /// The format, once known.
    pub format: Option<TraceFormat>,
}

impl<R: std::io::BufRead> TraceReader<R> {
    /// Reads requests of `size` bytes from `input`.
    pub fn new(input: R, format: Option<TraceFormat>, size: u32) -> Self {
        TraceReader {
            input,
            format,
            size,
            line: Vec::with_capacity(128),
            line_no: 0,
            last_cycle: 0,
            done: false,
            offset: 0,
        }
    }

    /// A reader that continues at `pos`; `input` must already be positioned at
    /// `pos.offset` of the input [`TraceReader::position`] was taken from.
    pub fn resume(input: R, pos: TracePosition, size: u32) -> Self {
        TraceReader {
            input,
            format: pos.format,
            size,
            line: Vec::with_capacity(128),
            line_no: usize::try_from(pos.line).unwrap_or(usize::MAX),
            last_cycle: pos.last_cycle,
            done: false,
            offset: pos.offset,
        }
    }

    /// Where the reader stands: after the last request it yielded.
    pub fn position(&self) -> TracePosition {
        TracePosition {
            offset: self.offset,
            line: self.line_no as u64,
            last_cycle: self.last_cycle,
            format: self.format,
        }
    }

    /// Lines read so far.
    pub fn lines_read(&self) -> usize {
        self.line_no
    }

    /// The format in use (known once the first content line was read, or if given).
    pub fn format(&self) -> Option<TraceFormat> {
        self.format
    }
}

impl<R: std::io::BufRead> Iterator for TraceReader<R> {
    type Item = Result<Request, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            self.line.clear();
            match self.input.read_until(b'\n', &mut self.line) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(n) => self.offset += n as u64,
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError {
                        line: self.line_no + 1,
                        col: 1,
                        message: format!("cannot read: {e}"),
                    }));
                }
            }
            self.line_no += 1;
            let format = match self.format {
                Some(f) => f,
                None => match format_of(&self.line) {
                    Some(f) => {
                        self.format = Some(f);
                        f
                    }
                    None => continue,
                },
            };
            match parse_line(
                &self.line,
                self.line_no,
                format,
                self.size,
                &mut self.last_cycle,
            ) {
                Ok(Some(r)) => return Some(Ok(r)),
                Ok(None) => continue,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Parses a whole trace into requests of `size` bytes. With `format` `None` the format is
/// detected from the first line. (A convenience over [`TraceReader`] for in-memory text.)
pub fn parse_trace(
    text: &str,
    format: Option<TraceFormat>,
    size: u32,
) -> Result<Vec<Request>, TraceError> {
    TraceReader::new(text.as_bytes(), format, size).collect()
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

#[cfg(test)]
mod reader_tests {
    use super::*;

    #[test]
    fn the_reader_streams_the_same_requests_as_whole_text_parsing() {
        let text = "# c\n0x40 R 0\n\n128 write 5\n0X100 w 7 # x\n";
        let direct: Vec<_> = TraceReader::new(
            std::io::BufReader::with_capacity(3, text.as_bytes()),
            None,
            64,
        )
        .collect::<Result<_, _>>()
        .unwrap();
        assert_eq!(
            direct,
            [
                Request::read(0x40, 64, 0),
                Request::write(128, 64, 5),
                Request::write(0x100, 64, 7)
            ]
        );
    }

    #[test]
    fn errors_stop_the_stream_with_line_and_column() {
        let mut r = TraceReader::new("LD 0x10\nLD 0x20\nXX 0x30\nLD 0x40\n".as_bytes(), None, 32);
        assert!(r.next().unwrap().is_ok());
        assert!(r.next().unwrap().is_ok());
        let e = r.next().unwrap().unwrap_err();
        assert_eq!((e.line, e.col), (3, 1));
        assert!(e.message.contains("expected LD or ST"), "{e}");
        assert!(r.next().is_none());
        // Overflow and non-ASCII bytes are errors, with the column counted in characters.
        let e = parse_trace("\u{e9} 0x40 R 0\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (1, 1));
        let e = parse_trace("0x40 R 99999999999999999999999\n", None, 64).unwrap_err();
        assert_eq!((e.line, e.col), (1, 8));
    }
}
