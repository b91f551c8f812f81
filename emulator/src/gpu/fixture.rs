//! Queue dumps built from data: a dump of real GEMMs from a GO library (the records
//! `nmcp goldyloc tune` writes), each dispatched with its isolated kernel. The canned
//! sample and demo dumps are in [`super::queue`].

use nmcp_firmware::cp::features::workgroups;
use nmcp_isa::aql::{self, AqlPacket, DeviceRange};
use nmcp_isa::gemm_ext::GemmExt;

use super::catalog::KERNEL_OBJECT_BASE;
use super::queue::{sample, DumpPacket, MemSection, QueueDump};

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
