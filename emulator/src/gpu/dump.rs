//! The queue-dump file format that `nmcp aql decode` and `nmcp cp replay` read: raw
//! 64-byte AQL packets with directive records that say which queue they belong to, memory
//! sections (extension records, signals) and the device range.

use std::fmt;

use nmcp_isa::aql::{self, DeviceRange, AQL_PACKET_BYTES};

/// Marker of a dump directive record, bytes 4..8.
pub const DIRECTIVE_MAGIC: [u8; 4] = *b"NMCP";
/// Directive: following packets belong to queue `a`.
pub const DIRECTIVE_QUEUE: u16 = 1;
/// Directive: `b` bytes of device memory at address `a` follow, padded to whole records.
pub const DIRECTIVE_MEM: u16 = 2;
/// Directive: device memory is `[a, a + b)`.
pub const DIRECTIVE_DEVICE: u16 = 3;

/// One packet of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpPacket {
    /// File offset of the record.
    pub offset: u64,
    /// Queue it belongs to.
    pub queue: u8,
    /// The raw packet.
    pub bytes: [u8; AQL_PACKET_BYTES],
}

/// A device-memory section of a dump (GEMM extension records, kernel arguments...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemSection {
    /// Device address.
    pub addr: u64,
    /// Contents.
    pub bytes: Vec<u8>,
}

/// A queue dump: raw 64-byte AQL packets, optionally interleaved with directive records.
///
/// The file is a sequence of 64-byte records, so a plain dump of one ring is a valid
/// dump (all packets on queue 0). A directive is a vendor-specific packet (header 0)
/// with `NMCP` at bytes 4..8, a u16 kind at byte 2 and u64 arguments `a` at 8 and `b` at
/// 16: `QUEUE a` switches the queue of the following packets, `MEM a b` is followed by
/// `ceil(b / 64)` records holding `b` bytes for device address `a`, `DEVICE a b` sets the
/// device-memory range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueDump {
    /// Device-memory range, if the dump gives one.
    pub device: Option<DeviceRange>,
    /// Memory sections.
    pub memory: Vec<MemSection>,
    /// Packets in file order.
    pub packets: Vec<DumpPacket>,
}

/// Why a dump does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DumpError {
    /// The length is not a whole number of records.
    Length {
        /// File length.
        len: u64,
        /// Offset of the incomplete trailing record.
        offset: u64,
    },
    /// A directive with an unknown kind.
    UnknownDirective {
        /// Record offset.
        offset: u64,
        /// The kind.
        kind: u16,
    },
    /// A `QUEUE` directive beyond the queue limit.
    QueueIndex {
        /// Record offset.
        offset: u64,
        /// The index.
        queue: u64,
    },
    /// A `MEM` directive whose data runs past the end of the file, or whose range wraps.
    MemTruncated {
        /// Record offset.
        offset: u64,
        /// Bytes announced.
        bytes: u64,
    },
}

impl fmt::Display for DumpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Length { len, offset } => write!(
                f,
                "dump length {len} is not a multiple of {AQL_PACKET_BYTES}: incomplete record at offset {offset}"
            ),
            Self::UnknownDirective { offset, kind } => {
                write!(f, "unknown directive kind {kind} at offset {offset}")
            }
            Self::QueueIndex { offset, queue } => write!(
                f,
                "QUEUE directive at offset {offset} names queue {queue}, limit {}",
                nmcp_isa::aql::MAX_QUEUES
            ),
            Self::MemTruncated { offset, bytes } => write!(
                f,
                "MEM directive at offset {offset} announces {bytes} bytes past the end of the file"
            ),
        }
    }
}

impl std::error::Error for DumpError {}

fn directive(record: &[u8; AQL_PACKET_BYTES]) -> Option<(u16, u64, u64)> {
    if aql::raw_header(record) != 0 || record[4..8] != DIRECTIVE_MAGIC {
        return None;
    }
    let kind = u16::from_le_bytes([record[2], record[3]]);
    let a = u64::from_le_bytes(record[8..16].try_into().unwrap_or([0; 8]));
    let b = u64::from_le_bytes(record[16..24].try_into().unwrap_or([0; 8]));
    Some((kind, a, b))
}

fn directive_record(kind: u16, a: u64, b: u64) -> [u8; AQL_PACKET_BYTES] {
    let mut r = [0u8; AQL_PACKET_BYTES];
    r[2..4].copy_from_slice(&kind.to_le_bytes());
    r[4..8].copy_from_slice(&DIRECTIVE_MAGIC);
    r[8..16].copy_from_slice(&a.to_le_bytes());
    r[16..24].copy_from_slice(&b.to_le_bytes());
    r
}

impl QueueDump {
    /// Parses a dump.
    ///
    /// # Errors
    /// [`DumpError`] naming the offset.
    pub fn parse(data: &[u8]) -> Result<Self, DumpError> {
        let len = data.len() as u64;
        if !data.len().is_multiple_of(AQL_PACKET_BYTES) {
            return Err(DumpError::Length {
                len,
                offset: len - len % AQL_PACKET_BYTES as u64,
            });
        }
        let mut dump = Self::default();
        let mut queue = 0u8;
        let mut at = 0usize;
        while at < data.len() {
            let offset = at as u64;
            let mut rec = [0u8; AQL_PACKET_BYTES];
            rec.copy_from_slice(&data[at..at + AQL_PACKET_BYTES]);
            at += AQL_PACKET_BYTES;
            match directive(&rec) {
                None => dump.packets.push(DumpPacket {
                    offset,
                    queue,
                    bytes: rec,
                }),
                Some((DIRECTIVE_QUEUE, a, _)) => {
                    if a >= nmcp_isa::aql::MAX_QUEUES as u64 {
                        return Err(DumpError::QueueIndex { offset, queue: a });
                    }
                    queue = a as u8;
                }
                Some((DIRECTIVE_MEM, a, b)) => {
                    // `b` is input: every step is checked (a length near 2^64 must not
                    // wrap to a short span).
                    let span = b
                        .div_ceil(AQL_PACKET_BYTES as u64)
                        .checked_mul(AQL_PACKET_BYTES as u64);
                    let end = span.and_then(|s| (at as u64).checked_add(s));
                    let (Some(span), Some(end)) = (span, end) else {
                        return Err(DumpError::MemTruncated { offset, bytes: b });
                    };
                    let bytes = usize::try_from(b)
                        .ok()
                        .and_then(|b| data.get(at..at.checked_add(b)?));
                    let (true, Some(bytes), Some(_)) = (end <= len, bytes, a.checked_add(b)) else {
                        return Err(DumpError::MemTruncated { offset, bytes: b });
                    };
                    dump.memory.push(MemSection {
                        addr: a,
                        bytes: bytes.to_vec(),
                    });
                    at += span as usize;
                }
                Some((DIRECTIVE_DEVICE, a, b)) => {
                    dump.device = Some(DeviceRange { base: a, len: b });
                }
                Some((kind, _, _)) => return Err(DumpError::UnknownDirective { offset, kind }),
            }
        }
        Ok(dump)
    }

    /// Serialises the dump: DEVICE, MEM sections, then packets with a QUEUE directive
    /// wherever the queue changes (none while it stays 0 from the start).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(d) = self.device {
            out.extend_from_slice(&directive_record(DIRECTIVE_DEVICE, d.base, d.len));
        }
        for m in &self.memory {
            out.extend_from_slice(&directive_record(
                DIRECTIVE_MEM,
                m.addr,
                m.bytes.len() as u64,
            ));
            out.extend_from_slice(&m.bytes);
            let pad = (AQL_PACKET_BYTES - m.bytes.len() % AQL_PACKET_BYTES) % AQL_PACKET_BYTES;
            out.extend(std::iter::repeat_n(0u8, pad));
        }
        let mut queue = 0u8;
        for p in &self.packets {
            if p.queue != queue {
                out.extend_from_slice(&directive_record(DIRECTIVE_QUEUE, u64::from(p.queue), 0));
                queue = p.queue;
            }
            out.extend_from_slice(&p.bytes);
        }
        out
    }

    /// `len` bytes at `addr` if one memory section holds them all.
    pub fn lookup(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.memory.iter().find_map(|m| {
            let off = addr.checked_sub(m.addr)? as usize;
            m.bytes.get(off..off.checked_add(len)?)
        })
    }
}
