//! The sample GEMM extension record shared by the emulator's sample dumps and the board's
//! canned CP scenario, so both exercise the same kernel map.

use heapless::Vec;

use super::{GemmDataType, GemmExt, KernelMeta, MAX_KERNEL_OBJECTS};

/// An f16 `m x n x k` record with a Tensile-like map of three kernels: the isolated
/// 128x128 kernel (tuned on the whole GPU), 128x64 (GPU/2) and 64x64 (GPU/4). CD 1 and 2
/// keep the isolated kernel, CD 4 takes the GPU/2 one, CD 8 and 16 the GPU/4 one, so a
/// CP that raises the concurrency degree visibly swaps kernels. Kernel `i`'s object is
/// `ko_base + i * ko_stride` (a board scenario uses placeholders 0, 1, 2 that its layout
/// rebases; the emulator uses real addresses).
pub fn sample_record(m: u32, n: u32, k: u32, ko_base: u64, ko_stride: u64) -> GemmExt {
    let meta = |i: u64, t0: u16, t1: u16, vgprs: u16| KernelMeta {
        kernel_object: ko_base.wrapping_add(i.wrapping_mul(ko_stride)),
        macro_tile_0: t0,
        macro_tile_1: t1,
        depth_u: 16,
        workgroup_size: 256,
        // A and B tiles of depth U, f16, double-buffered.
        lds_bytes: (u32::from(t0) + u32::from(t1)) * 16 * 2 * 2,
        vgprs_per_thread: vgprs,
        split_k: 1,
    };
    let mut kernels: Vec<KernelMeta, MAX_KERNEL_OBJECTS> = Vec::new();
    for km in [
        meta(0, 128, 128, 128),
        meta(1, 128, 64, 96),
        meta(2, 64, 64, 64),
    ] {
        // Three kernels, capacity MAX_KERNEL_OBJECTS = 3: push cannot fail.
        let _ = kernels.push(km);
    }
    GemmExt {
        m,
        n,
        k,
        batch: 1,
        trans_a: false,
        trans_b: false,
        dtype: GemmDataType::F16,
        kernels,
        cd_choice: [0, 0, 1, 2, 2],
    }
}
