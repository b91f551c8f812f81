//! User-mode AQL queues in device memory, the producer protocol, completion signals, and
//! the queue-dump file format that `nmcp aql decode` and `nmcp cp replay` read.
//!
//! Rings, index words and signals live in the node's one [`DeviceMemory`].

use std::fmt;

use nmcp_firmware::cp::QueueConfig;

pub use crate::memory::DeviceMemory;
use nmcp_firmware::platform::MemoryError;
use nmcp_isa::aql::{self, DeviceRange, PacketType, AQL_PACKET_BYTES};

/// Why a producer could not enqueue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueError {
    /// The ring holds `size` unconsumed packets.
    Full {
        /// Ring size in packets.
        size: u32,
    },
    /// The queue's memory is not mapped.
    Memory(MemoryError),
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full { size } => write!(f, "queue full ({size} packets)"),
            Self::Memory(e) => write!(f, "queue memory: {e}"),
        }
    }
}

impl std::error::Error for QueueError {}

impl From<MemoryError> for QueueError {
    fn from(e: MemoryError) -> Self {
        Self::Memory(e)
    }
}

/// The header word that marks a ring slot as free / not yet published.
pub const INVALID_HEADER: u16 = PacketType::Invalid as u16;

/// Lays out `count` queues of `size_packets` each in `[base, base + system_area_bytes)`:
/// per queue a ring followed by a 64-byte block holding the read index (+0), write index
/// (+8) and doorbell (+16), and initialises every slot to INVALID.
///
/// # Errors
/// [`MemoryError::OutOfRange`] if the area does not fit.
pub fn layout_queues(
    mem: &mut DeviceMemory,
    base: u64,
    count: usize,
    size_packets: u32,
) -> Result<Vec<QueueConfig>, MemoryError> {
    let ring_bytes = u64::from(size_packets) * AQL_PACKET_BYTES as u64;
    let stride = ring_bytes + AQL_PACKET_BYTES as u64;
    let mut out = Vec::with_capacity(count);
    for q in 0..count as u64 {
        let ring_base = base + q * stride;
        let ctl = ring_base + ring_bytes;
        let qc = QueueConfig {
            ring_base,
            size_packets,
            read_index_addr: ctl,
            write_index_addr: ctl + 8,
            doorbell_addr: ctl + 16,
        };
        for slot in 0..u64::from(size_packets) {
            mem.write(qc.packet_addr(slot), &INVALID_HEADER.to_le_bytes())?;
        }
        mem.write_u64(qc.read_index_addr, 0)?;
        mem.write_u64(qc.write_index_addr, 0)?;
        mem.write_u64(qc.doorbell_addr, 0)?;
        out.push(qc);
    }
    Ok(out)
}

/// Bytes [`layout_queues`] needs.
pub fn queue_area_bytes(count: usize, size_packets: u32) -> u64 {
    count as u64 * (u64::from(size_packets) + 1) * AQL_PACKET_BYTES as u64
}

/// The producer protocol of SPEC 5.1: reserve a slot by bumping the write index, write
/// the packet body, then publish by writing the header last. Returns the dispatch id.
/// The caller rings the doorbell.
///
/// # Errors
/// [`QueueError::Full`], [`QueueError::Memory`].
pub fn enqueue(
    mem: &mut DeviceMemory,
    q: &QueueConfig,
    packet: &[u8; AQL_PACKET_BYTES],
) -> Result<u64, QueueError> {
    let write = mem.read_u64(q.write_index_addr)?;
    let read = mem.read_u64(q.read_index_addr)?;
    if write.wrapping_sub(read) >= u64::from(q.size_packets) {
        return Err(QueueError::Full {
            size: q.size_packets,
        });
    }
    mem.write_u64(q.write_index_addr, write + 1)?;
    let slot = q.packet_addr(write);
    mem.write(slot + 2, &packet[2..])?;
    mem.write(slot, &packet[..2])?;
    Ok(write)
}

// ---------------------------------------------------------------------------------------
// Queue dumps
// ---------------------------------------------------------------------------------------

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
                nmcp_firmware::cp::MAX_QUEUES
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
        if data.len() % AQL_PACKET_BYTES != 0 {
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
                    if a >= nmcp_firmware::cp::MAX_QUEUES as u64 {
                        return Err(DumpError::QueueIndex { offset, queue: a });
                    }
                    queue = a as u8;
                }
                Some((DIRECTIVE_MEM, a, b)) => {
                    let records = b.div_ceil(AQL_PACKET_BYTES as u64);
                    let span = records * AQL_PACKET_BYTES as u64;
                    let end = (at as u64).checked_add(span);
                    if end.is_none_or(|e| e > len) || a.checked_add(b).is_none() {
                        return Err(DumpError::MemTruncated { offset, bytes: b });
                    }
                    dump.memory.push(MemSection {
                        addr: a,
                        bytes: data[at..at + b as usize].to_vec(),
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

/// Builders for well-formed packets and extension records (sample dumps, tests).
pub mod sample {
    use nmcp_isa::aql::{
        encode, AqlPacket, BarrierPacket, KernelDispatchPacket, PacketHeader, PacketType,
        AQL_PACKET_BYTES, BARRIER_DEP_SIGNALS,
    };
    use nmcp_isa::gemm_ext::GemmExt;

    /// Address stride between the three kernel objects of [`gemm_ext`].
    pub const KO_STRIDE: u64 = 0x100;

    /// The sample GEMM record ([`nmcp_isa::gemm_ext::sample_record`]: 128x128, 128x64,
    /// 64x64 for CD 1-2, 4, 8-16) with its kernels at `ko_base`, `+KO_STRIDE`,
    /// `+2*KO_STRIDE`.
    pub fn gemm_ext(m: u32, n: u32, k: u32, ko_base: u64) -> GemmExt {
        nmcp_isa::gemm_ext::sample_record(m, n, k, ko_base, KO_STRIDE)
    }

    /// A 1-D kernel-dispatch packet.
    pub fn dispatch(
        kernel_object: u64,
        grid: u32,
        workgroup: u16,
        gemm_ext_address: u64,
        completion_signal: u64,
    ) -> KernelDispatchPacket {
        KernelDispatchPacket {
            header: PacketHeader::new(PacketType::KernelDispatch),
            dimensions: 1,
            workgroup_size: [workgroup, 1, 1],
            grid_size: [grid, 1, 1],
            private_segment_size: 0,
            group_segment_size: 0,
            kernel_object,
            kernarg_address: 0,
            gemm_ext_address,
            completion_signal,
        }
    }

    /// The dispatch packet of a GEMM whose record is at `ext_addr`: the isolated kernel
    /// object, and a grid of one 256-thread workgroup per 128x128 tile.
    pub fn gemm_dispatch(ext: &GemmExt, ext_addr: u64, signal: u64) -> [u8; AQL_PACKET_BYTES] {
        let ko = ext.kernels.first().map_or(0, |k| k.kernel_object);
        let tiles = ext.m.div_ceil(128) * ext.n.div_ceil(128);
        encode(&AqlPacket::KernelDispatch(dispatch(
            ko,
            tiles.max(1) * 256,
            256,
            ext_addr,
            signal,
        )))
    }

    /// A barrier packet (AND when `and`).
    pub fn barrier(and: bool, deps: &[u64], signal: u64) -> [u8; AQL_PACKET_BYTES] {
        let mut dep_signal = [0u64; BARRIER_DEP_SIGNALS];
        for (d, s) in dep_signal.iter_mut().zip(deps) {
            *d = *s;
        }
        let t = if and {
            PacketType::BarrierAnd
        } else {
            PacketType::BarrierOr
        };
        let p = BarrierPacket {
            header: PacketHeader::new(t),
            dep_signal,
            completion_signal: signal,
        };
        encode(&if and {
            AqlPacket::BarrierAnd(p)
        } else {
            AqlPacket::BarrierOr(p)
        })
    }
}

/// A demonstration dump: GEMMs of a few sizes and one non-GEMM kernel on each queue, a
/// barrier-AND on queue 0 that waits for queue 1's first GEMM, and optionally one
/// malformed packet of every kind the CP rejects.
pub mod demo {
    use nmcp_firmware::cp::RejectCode;
    use nmcp_isa::aql::{encode, AqlPacket, DeviceRange, AQL_PACKET_BYTES};
    use nmcp_isa::gemm_ext::{GemmExt, GEMM_EXT_BYTES};

    use super::sample;
    use super::{DumpPacket, MemSection, QueueDump};

    /// Where the demo places kernel objects (one 4 KiB page per GEMM size).
    pub const KO_BASE: u64 = 0x1000_0000;
    /// Where the demo places GEMM extension records.
    pub const EXT_BASE: u64 = 0x1100_0000;
    /// Where the demo places completion signals (8 bytes apart).
    pub const SIGNAL_BASE: u64 = 0x1200_0000;
    /// The kernel object of the demo's non-GEMM kernel.
    pub const NON_GEMM_KO: u64 = 0x1010_0000;
    /// GEMM sizes (M, N, K) the demo cycles through.
    pub const SIZES: [(u32, u32, u32); 3] =
        [(1024, 1024, 1024), (4096, 1024, 512), (512, 512, 4096)];

    /// The device range the demo assumes (the emulator's default).
    pub const DEVICE: DeviceRange = DeviceRange {
        base: 0x1000_0000,
        len: 0x1000_0000,
    };

    /// What a demo packet should end as.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Expect {
        /// Runs and completes with signal 0.
        Runs,
        /// A barrier that resolves with signal 0.
        Resolves,
        /// Rejected with this code.
        Rejected(RejectCode),
    }

    struct Builder {
        dump: QueueDump,
        expect: Vec<Expect>,
        next_ext: u64,
        next_signal: u64,
    }

    impl Builder {
        fn ext(&mut self, bytes: &[u8]) -> u64 {
            let addr = EXT_BASE + self.next_ext * 0x100;
            self.next_ext += 1;
            self.dump.memory.push(MemSection {
                addr,
                bytes: bytes.to_vec(),
            });
            addr
        }

        fn signal(&mut self) -> u64 {
            let s = SIGNAL_BASE + self.next_signal * 8;
            self.next_signal += 1;
            s
        }

        fn push(&mut self, queue: u8, bytes: [u8; AQL_PACKET_BYTES], e: Expect) {
            self.dump.packets.push(DumpPacket {
                offset: 0,
                queue,
                bytes,
            });
            self.expect.push(e);
        }

        fn gemm(&mut self, queue: u8, size: usize) -> u64 {
            let (m, n, k) = SIZES[size % SIZES.len()];
            let ext = sample::gemm_ext(m, n, k, KO_BASE + size as u64 * 0x1000);
            let addr = self.ext(&ext.encode());
            let sig = self.signal();
            self.push(queue, sample::gemm_dispatch(&ext, addr, sig), Expect::Runs);
            sig
        }
    }

    /// The dump and, per packet in dump order, what it should end as. Queue count is
    /// clamped to 1..=32.
    pub fn dump(queues: u8, gemms_per_queue: u32, malformed: bool) -> (QueueDump, Vec<Expect>) {
        let queues = queues.clamp(1, 32);
        let mut b = Builder {
            dump: QueueDump {
                device: Some(DEVICE),
                ..QueueDump::default()
            },
            expect: Vec::new(),
            next_ext: 0,
            next_signal: 0,
        };
        let mut first_gemm_signal = Vec::new();
        for q in 0..queues {
            for i in 0..gemms_per_queue {
                let s = b.gemm(q, (usize::from(q) + i as usize) % SIZES.len());
                if i == 0 {
                    first_gemm_signal.push(s);
                }
            }
            let sig = b.signal();
            let p = encode(&AqlPacket::KernelDispatch(sample::dispatch(
                NON_GEMM_KO,
                64 * 256,
                256,
                0,
                sig,
            )));
            b.push(q, p, Expect::Runs);
        }
        if queues > 1 {
            if let Some(&dep) = first_gemm_signal.get(1) {
                let sig = b.signal();
                b.push(0, sample::barrier(true, &[dep], sig), Expect::Resolves);
                b.gemm(0, 0);
            }
        }
        if malformed {
            add_malformed(&mut b, queues);
        }
        // Group packets by queue (stable), as a per-queue dump would be.
        let mut order: Vec<usize> = (0..b.dump.packets.len()).collect();
        order.sort_by_key(|&i| b.dump.packets[i].queue);
        let packets = order.iter().map(|&i| b.dump.packets[i].clone()).collect();
        let expect = order.iter().map(|&i| b.expect[i]).collect();
        b.dump.packets = packets;
        (b.dump, expect)
    }

    fn add_malformed(b: &mut Builder, queues: u8) {
        let good = sample::gemm_ext(1024, 1024, 1024, KO_BASE);
        let mut q = 0u8;
        let mut next_q = || {
            q = (q + 1) % queues;
            q
        };
        // Bad header type (7 is not an hsa_packet_type_t).
        let sig = b.signal();
        let mut p = encode(&AqlPacket::KernelDispatch(sample::dispatch(
            NON_GEMM_KO,
            256,
            256,
            0,
            sig,
        )));
        p[0] = 7;
        b.push(next_q(), p, Expect::Rejected(RejectCode::UnknownPacketType));
        // Zero grid; workgroup larger than the grid; kernel object outside memory.
        for (ko, grid, wg, code) in [
            (NON_GEMM_KO, 0, 256, RejectCode::ZeroGridSize),
            (NON_GEMM_KO, 256, 512, RejectCode::WorkgroupExceedsGrid),
            (0x10, 256, 256, RejectCode::AddressOutOfRange),
        ] {
            let sig = b.signal();
            let p = encode(&AqlPacket::KernelDispatch(sample::dispatch(
                ko, grid, wg, 0, sig,
            )));
            b.push(next_q(), p, Expect::Rejected(code));
        }
        // Extension with bad magic, version, kernel count; KO index out of range; a
        // kernel object outside memory.
        let mut cases: Vec<([u8; GEMM_EXT_BYTES], RejectCode)> = Vec::new();
        let mut e = good.encode();
        e[0] ^= 0xFF;
        cases.push((e, RejectCode::ExtMagic));
        let mut e = good.encode();
        e[4] = 2;
        cases.push((e, RejectCode::ExtVersion));
        let mut e = good.encode();
        e[6] = 4;
        cases.push((e, RejectCode::ExtKernelCount));
        let mut two: GemmExt = good.clone();
        two.kernels.truncate(2);
        cases.push((two.encode(), RejectCode::ExtKernelIndex));
        let mut far = good.clone();
        if let Some(k) = far.kernels.get_mut(2) {
            k.kernel_object = 0x4000_0000;
        }
        cases.push((far.encode(), RejectCode::KernelObjectOutOfRange));
        for (bytes, code) in cases {
            let addr = b.ext(&bytes);
            let sig = b.signal();
            b.push(
                next_q(),
                sample::gemm_dispatch(&good, addr, sig),
                Expect::Rejected(code),
            );
        }
        // Extension address outside device memory.
        let sig = b.signal();
        b.push(
            next_q(),
            sample::gemm_dispatch(&good, 0x4000_0000, sig),
            Expect::Rejected(RejectCode::AddressOutOfRange),
        );
    }
}
