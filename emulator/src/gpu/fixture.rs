//! Fixtures: well-formed packets and records ([`sample`]), a demonstration dump with
//! one malformed packet of every kind ([`demo`]), and a dump of real GEMMs from a GO
//! library (the records `nmcp goldyloc tune` writes, [`go_dump`]). Test and example inputs,
//! also behind `nmcp cp gen-dump`.

use nmcp_isa::aql::{self, AqlPacket, DeviceRange};
use nmcp_isa::gemm_ext::workgroups;
use nmcp_isa::gemm_ext::GemmExt;

use super::catalog::KERNEL_OBJECT_BASE;
use super::dump::{DumpPacket, MemSection, QueueDump};

/// Device range of dumps with real GO-library GEMMs: starts at the catalog's kernel
/// objects, so the CP's "kernel object inside device memory" check holds for them.
pub const GO_DEVICE: DeviceRange = DeviceRange {
    base: KERNEL_OBJECT_BASE,
    len: 0x1000_0000,
};
/// Extension records of a GO dump (256 B apart).
const GO_EXT_BASE: u64 = KERNEL_OBJECT_BASE + 0x0100_0000;
/// Completion signals of a GO dump (8 B apart).
const GO_SIGNAL_BASE: u64 = KERNEL_OBJECT_BASE + 0x0200_0000;

/// A dump of real GEMMs: GEMM `i` on every queue is `library[offset + i]` (wrapping),
/// dispatched with its isolated kernel object and a grid of its isolated kernel's
/// workgroups (the CP derives the workgroups of the kernel it picks from the record).
pub fn go_dump(library: &[GemmExt], queues: u8, gemms: u32, offset: usize) -> QueueDump {
    let mut dump = QueueDump {
        device: Some(GO_DEVICE),
        ..QueueDump::default()
    };
    let mut next_signal = 0u64;
    for i in 0..gemms as usize {
        let Some(ext) = library.get((offset + i) % library.len().max(1)) else {
            break;
        };
        let ext_addr = GO_EXT_BASE + i as u64 * 0x100;
        dump.memory.push(MemSection {
            addr: ext_addr,
            bytes: ext.encode().to_vec(),
        });
        let Some(k) = ext.kernels.first() else {
            continue;
        };
        let wg = k.workgroup_size.max(1);
        let groups = workgroups(ext, k).min(u64::from(u32::MAX / u32::from(wg)));
        let grid = u32::try_from(groups).unwrap_or(1).max(1) * u32::from(wg);
        for q in 0..queues {
            let sig = GO_SIGNAL_BASE + next_signal * 8;
            next_signal += 1;
            let p = AqlPacket::KernelDispatch(sample::dispatch(
                k.kernel_object,
                grid,
                wg,
                ext_addr,
                sig,
            ));
            dump.packets.push(DumpPacket {
                offset: 0,
                queue: q,
                bytes: aql::encode(&p),
            });
        }
    }
    // Per-queue order, as a ring dump would be.
    dump.packets.sort_by_key(|p| p.queue);
    dump
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
    use crate::gpu::dump::{DumpPacket, MemSection, QueueDump};

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
