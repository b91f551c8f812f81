//! Property tests of the AQL packet and GEMM extension codecs.

// Tests may unwrap and index: a panic is a test failure (the crate denies these in
// Cargo.toml for its library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_isa::aql::{
    decode, encode, AqlError, AqlPacket, BarrierPacket, DeviceRange, FenceScope,
    KernelDispatchPacket, PacketHeader, PacketType, AQL_PACKET_BYTES,
};
use nmcp_isa::gemm_ext::{
    GemmDataType, GemmExt, GemmExtError, KernelMeta, GEMM_EXT_BYTES, GEMM_EXT_MAGIC,
    MAX_KERNEL_OBJECTS,
};
use proptest::prelude::*;

fn scope() -> impl Strategy<Value = FenceScope> {
    prop_oneof![
        Just(FenceScope::None),
        Just(FenceScope::Agent),
        Just(FenceScope::System)
    ]
}

fn header(t: PacketType) -> impl Strategy<Value = PacketHeader> {
    (any::<bool>(), scope(), scope()).prop_map(move |(barrier, a, r)| PacketHeader {
        packet_type: t,
        barrier,
        acquire_fence_scope: a,
        release_fence_scope: r,
    })
}

fn packet() -> impl Strategy<Value = AqlPacket> {
    let dispatch = (
        header(PacketType::KernelDispatch),
        0u8..4,
        any::<[u16; 3]>(),
        any::<[u32; 3]>(),
        any::<(u32, u32)>(),
        any::<[u64; 4]>(),
    )
        .prop_map(|(header, dimensions, wg, grid, (ps, gs), a)| {
            AqlPacket::KernelDispatch(KernelDispatchPacket {
                header,
                dimensions,
                workgroup_size: wg,
                grid_size: grid,
                private_segment_size: ps,
                group_segment_size: gs,
                kernel_object: a[0],
                kernarg_address: a[1],
                gemm_ext_address: a[2],
                completion_signal: a[3],
            })
        });
    let barrier = |t: PacketType| {
        (header(t), any::<[u64; 5]>(), any::<u64>()).prop_map(move |(header, dep, c)| {
            let p = BarrierPacket {
                header,
                dep_signal: dep,
                completion_signal: c,
            };
            if t == PacketType::BarrierAnd {
                AqlPacket::BarrierAnd(p)
            } else {
                AqlPacket::BarrierOr(p)
            }
        })
    };
    prop_oneof![
        dispatch,
        barrier(PacketType::BarrierAnd),
        barrier(PacketType::BarrierOr),
        header(PacketType::Invalid).prop_map(AqlPacket::Invalid),
    ]
}

fn meta() -> impl Strategy<Value = KernelMeta> {
    (
        1u64..u64::MAX,
        1u16..=256,
        1u16..=256,
        1u16..=64,
        1u16..=1024,
        any::<u32>(),
        any::<u16>(),
        1u8..=8,
    )
        .prop_map(|(ko, t0, t1, u, wg, lds, v, sk)| KernelMeta {
            kernel_object: ko,
            macro_tile_0: t0,
            macro_tile_1: t1,
            depth_u: u,
            workgroup_size: wg,
            lds_bytes: lds,
            vgprs_per_thread: v,
            split_k: sk,
        })
}

fn gemm_ext() -> impl Strategy<Value = GemmExt> {
    (
        (1u32.., 1u32.., 1u32.., 1u32..),
        any::<(bool, bool)>(),
        prop_oneof![
            Just(GemmDataType::F16),
            Just(GemmDataType::Bf16),
            Just(GemmDataType::F32)
        ],
        prop::collection::vec(meta(), 1..=MAX_KERNEL_OBJECTS),
        any::<[u8; 5]>(),
    )
        .prop_map(|((m, n, k, batch), (ta, tb), dtype, kernels, cd)| {
            let count = kernels.len() as u8;
            GemmExt {
                m,
                n,
                k,
                batch,
                trans_a: ta,
                trans_b: tb,
                dtype,
                kernels: heapless::Vec::from_slice(&kernels).unwrap(),
                cd_choice: cd.map(|c| c % count),
            }
        })
}

proptest! {
    #[test]
    fn packet_round_trips(p in packet()) {
        let bytes = encode(&p);
        prop_assert_eq!(decode(&bytes), Ok(p));
        // Re-encoding a decoded packet gives the same bytes (except an Invalid slot,
        // whose body is not interpreted).
        if !matches!(p, AqlPacket::Invalid(_)) {
            prop_assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
        }
    }

    #[test]
    fn any_64_bytes_decode_or_error(bytes in any::<[u8; AQL_PACKET_BYTES]>()) {
        if let Ok(AqlPacket::KernelDispatch(p)) = decode(&bytes) {
            let dev = DeviceRange { base: 0x1000, len: 1 << 30 };
            let _ = p.validate(&dev, GEMM_EXT_BYTES as u64);
            let _ = p.workgroups();
            prop_assert_eq!(encode(&AqlPacket::KernelDispatch(p)), bytes);
        }
    }

    #[test]
    fn gemm_ext_round_trips(g in gemm_ext()) {
        prop_assert_eq!(g.validate(), Ok(()));
        prop_assert_eq!(GemmExt::decode(&g.encode()), Ok(g));
    }

    #[test]
    fn any_bytes_decode_as_gemm_ext_or_error(
        mut bytes in prop::collection::vec(any::<u8>(), 0..GEMM_EXT_BYTES + 8),
        magic in any::<bool>(),
    ) {
        if magic && bytes.len() >= 8 {
            bytes[..4].copy_from_slice(&GEMM_EXT_MAGIC.to_le_bytes());
            bytes[4..6].copy_from_slice(&1u16.to_le_bytes());
            bytes[6] %= 4;
        }
        if let Ok(g) = GemmExt::decode(&bytes) {
            prop_assert_eq!(g.validate(), Ok(()));
        }
    }

    #[test]
    fn corrupted_gemm_ext_names_its_offset(g in gemm_ext(), at in 0usize..GEMM_EXT_BYTES, x in 1u8..) {
        let mut b = g.encode();
        b[at] ^= x;
        if let Err(e) = GemmExt::decode(&b) {
            // The error points at a field that overlaps the corrupted byte or precedes it
            // (a count change can invalidate a later field first).
            prop_assert!(e.offset() < GEMM_EXT_BYTES);
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn bad_header_type_is_named() {
    let mut b = [0u8; AQL_PACKET_BYTES];
    b[0] = 7;
    assert_eq!(decode(&b), Err(AqlError::UnknownPacketType { value: 7 }));
    b[0] = 4;
    assert_eq!(
        decode(&b),
        Err(AqlError::UnsupportedPacketType { value: 4 })
    );
}

#[test]
fn gemm_ext_errors_name_field_and_offset() {
    let g = GemmExt {
        m: 64,
        n: 64,
        k: 64,
        batch: 1,
        trans_a: false,
        trans_b: true,
        dtype: GemmDataType::F16,
        kernels: heapless::Vec::from_slice(&[KernelMeta {
            kernel_object: 0x1000,
            macro_tile_0: 64,
            macro_tile_1: 64,
            depth_u: 16,
            workgroup_size: 256,
            lds_bytes: 8192,
            vgprs_per_thread: 64,
            split_k: 1,
        }])
        .unwrap(),
        cd_choice: [0; 5],
    };
    let good = g.encode();
    let mut b = good;
    b[0] = b'X';
    assert!(matches!(
        GemmExt::decode(&b),
        Err(GemmExtError::BadMagic { .. })
    ));
    let mut b = good;
    b[4] = 9;
    assert_eq!(
        GemmExt::decode(&b),
        Err(GemmExtError::UnsupportedVersion { found: 9 })
    );
    let mut b = good;
    b[6] = 4;
    assert_eq!(
        GemmExt::decode(&b),
        Err(GemmExtError::KernelCount { found: 4 })
    );
    let mut b = good;
    b[6] = 0;
    assert_eq!(
        GemmExt::decode(&b),
        Err(GemmExtError::KernelCount { found: 0 })
    );
    let mut b = good;
    b[25 + 3] = 1;
    let e = GemmExt::decode(&b).unwrap_err();
    assert_eq!(
        e,
        GemmExtError::CdChoiceOutOfRange {
            cd_index: 3,
            value: 1,
            kernel_count: 1
        }
    );
    assert!(e.to_string().contains("byte 28"), "{e}");
    let mut b = good;
    b[8..12].copy_from_slice(&0u32.to_le_bytes());
    let e = GemmExt::decode(&b).unwrap_err();
    assert!(e.to_string().contains("m at byte 8"), "{e}");
    let mut b = good;
    b[32 + 22] = 0; // kernels[0].split_k
    let e = GemmExt::decode(&b).unwrap_err();
    assert!(
        e.to_string().contains("kernels[0].split_k at byte 54"),
        "{e}"
    );
    assert!(matches!(
        GemmExt::decode(&good[..50]),
        Err(GemmExtError::Truncated { len: 50 })
    ));
}
