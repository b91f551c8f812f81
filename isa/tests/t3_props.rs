//! Property tests of the T3 tracker-entry, DMA-descriptor and output-map codecs.

// Tests may unwrap and index: a panic is a test failure (the crate denies these in
// Cargo.toml for its library code).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use nmcp_isa::aql::DeviceRange;
use nmcp_isa::gemm_ext::GemmDataType;
use nmcp_isa::t3::{
    peer_address, split_peer, DmaDescriptor, DmaOp, DmaTrigger, OutputMap, T3Error, TrackerEntry,
    DMA_DESCRIPTOR_BYTES, OUTPUT_MAP_BYTES, TRACKER_ENTRY_BYTES, TRACKER_NO_DMA,
};
use proptest::prelude::*;

fn entry() -> impl Strategy<Value = TrackerEntry> {
    (
        any::<u16>(),
        any::<u32>(),
        0u8..8,
        any::<u64>(),
        1u32..,
        any::<u16>(),
    )
        .prop_map(
            |(id, wg_id, wf_id, start_address, threshold, dma_id)| TrackerEntry {
                id,
                wg_id,
                wf_id,
                start_address,
                threshold,
                dma_id,
            },
        )
}

fn op() -> impl Strategy<Value = DmaOp> {
    prop_oneof![
        Just(DmaOp::Store),
        Just(DmaOp::Update(GemmDataType::F16)),
        Just(DmaOp::Update(GemmDataType::Bf16)),
        Just(DmaOp::Update(GemmDataType::F32)),
    ]
}

fn descriptor() -> impl Strategy<Value = DmaDescriptor> {
    let trigger = prop_oneof![
        Just((DmaTrigger::None, 0u8)),
        (any::<u16>(), 1u8..).prop_map(|(e, f)| (DmaTrigger::Tracker(e), f))
    ];
    (
        (0u16..0xFFFF, op(), trigger, 0u64..1 << 40, 0u8..64),
        (
            1u16..,
            1u16..,
            0u32..4096,
            any::<bool>(),
            any::<u32>(),
            0u8..8,
        ),
    )
        .prop_map(
            |((id, op, (trigger, fires), src, peer), (rows, cols, pad, wide, wg, wf))| {
                let elem_bytes = match op {
                    DmaOp::Update(t) => t.bytes() as u8,
                    DmaOp::Store if wide => 4,
                    DmaOp::Store => 2,
                };
                DmaDescriptor {
                    id,
                    op,
                    trigger,
                    fires,
                    src,
                    dst: peer_address(peer, src),
                    rows,
                    cols,
                    ld_bytes: u32::from(cols) * u32::from(elem_bytes) + pad,
                    elem_bytes,
                    dst_wg_id: wg,
                    dst_wf_id: wf,
                }
            },
        )
}

fn output_map() -> impl Strategy<Value = OutputMap> {
    (
        any::<u32>(),
        1u32..1 << 20,
        prop::option::of(op()),
        prop::option::of((0u8..255, op())),
    )
        .prop_filter("written somewhere", |(_, _, l, r)| {
            l.is_some() || r.is_some()
        })
        .prop_map(|(first, count, local, remote)| OutputMap {
            wg_first: first.min(u32::MAX - count),
            wg_count: count,
            local,
            remote,
        })
}

proptest! {
    #[test]
    fn tracker_entry_round_trips(e in entry()) {
        prop_assert_eq!(TrackerEntry::decode(&e.encode()), Ok(e.clone()));
        prop_assert!(e.set_index() < 256);
        prop_assert_eq!(e.tag().0 * 256 + e.set_index(), e.wg_id);
    }

    #[test]
    fn dma_descriptor_round_trips(d in descriptor()) {
        prop_assert_eq!(DmaDescriptor::decode(&d.encode()), Ok(d.clone()));
        prop_assert_eq!(
            d.bytes(),
            u64::from(d.rows) * u64::from(d.cols) * u64::from(d.elem_bytes)
        );
        prop_assert!(d.span() >= d.bytes() / u64::from(d.rows));
    }

    #[test]
    fn output_map_round_trips(m in output_map()) {
        prop_assert_eq!(OutputMap::decode(&m.encode()), Ok(m));
        prop_assert!(m.contains(m.wg_first));
        prop_assert!(!m.contains(m.wg_end()));
    }

    #[test]
    fn peer_aperture_round_trips(peer in 0u8..255, local in 0u64..1 << 56) {
        prop_assert_eq!(split_peer(peer_address(peer, local)), (Some(peer), local));
        prop_assert_eq!(split_peer(local), (None, local));
    }

    #[test]
    fn any_bytes_decode_or_error(b in prop::collection::vec(any::<u8>(), 0..56)) {
        if let Ok(e) = TrackerEntry::decode(&b) {
            prop_assert_eq!(e.validate(), Ok(()));
            prop_assert_eq!(&e.encode()[..], &b[..TRACKER_ENTRY_BYTES]);
        }
        if let Ok(d) = DmaDescriptor::decode(&b) {
            prop_assert_eq!(d.validate(), Ok(()));
            prop_assert_eq!(&d.encode()[..], &b[..DMA_DESCRIPTOR_BYTES]);
        }
        if let Ok(m) = OutputMap::decode(&b) {
            prop_assert_eq!(m.validate(), Ok(()));
            prop_assert_eq!(&m.encode()[..], &b[..OUTPUT_MAP_BYTES]);
        }
    }

    #[test]
    fn mutated_descriptors_decode_or_error(d in descriptor(), at in 0usize..48, v in any::<u8>()) {
        let mut b = d.encode();
        b[at] = v;
        if let Ok(d) = DmaDescriptor::decode(&b) {
            prop_assert_eq!(&d.encode()[..], &b[..]);
        }
    }
}

fn sample() -> DmaDescriptor {
    DmaDescriptor {
        id: 9,
        op: DmaOp::Update(GemmDataType::F32),
        trigger: DmaTrigger::Tracker(4),
        fires: 1,
        src: 0x1000,
        dst: peer_address(1, 0x1000),
        rows: 4,
        cols: 8,
        ld_bytes: 64,
        elem_bytes: 4,
        dst_wg_id: 3,
        dst_wf_id: 0,
    }
}

#[test]
fn malformed_records_name_field_and_offset() {
    let mut e = TrackerEntry {
        id: 1,
        wg_id: 0x1234,
        wf_id: 8,
        start_address: 0x1000,
        threshold: 512,
        dma_id: 3,
    };
    assert!(matches!(
        e.validate(),
        Err(T3Error::WfIdOutOfRange {
            value: 8,
            offset: 8,
            ..
        })
    ));
    e.wf_id = 7;
    e.threshold = 0;
    let err = TrackerEntry::decode(&e.encode()).unwrap_err();
    assert!(err.to_string().contains("threshold at byte 12"), "{err}");

    let d = sample();
    assert_eq!(d.validate(), Ok(()));
    assert_eq!(d.bytes(), 128);
    assert_eq!(d.span(), 3 * 64 + 32);
    // Same memory, overlapping bounding ranges.
    let local = DmaDescriptor {
        dst: 0x1010,
        ..d.clone()
    };
    assert_eq!(local.validate(), Err(T3Error::Overlap));
    // The same local offset in a peer's memory does not overlap.
    let mismatch = DmaDescriptor {
        elem_bytes: 2,
        ..d.clone()
    };
    assert_eq!(
        mismatch.validate(),
        Err(T3Error::ElementMismatch {
            elem_bytes: 2,
            dtype_bytes: 4
        })
    );
    let narrow = DmaDescriptor {
        ld_bytes: 31,
        ..d.clone()
    };
    let err = narrow.validate().unwrap_err();
    assert!(err.to_string().contains("ld_bytes at byte 28"), "{err}");
    let err = DmaDescriptor {
        rows: 0,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("rows at byte 24"), "{err}");
    let err = DmaDescriptor {
        cols: 0,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("cols at byte 26"), "{err}");
    let err = DmaDescriptor {
        fires: 0,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("fires at byte 5"), "{err}");
    let err = DmaDescriptor {
        trigger: DmaTrigger::None,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("at byte 5"), "{err}");
    let err = DmaDescriptor {
        op: DmaOp::Store,
        elem_bytes: 3,
        ld_bytes: 64,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("elem_bytes at byte 32"), "{err}");
    let err = DmaDescriptor {
        dst_wf_id: 8,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("dst_wf_id at byte 33"), "{err}");
    assert!(DmaDescriptor {
        id: TRACKER_NO_DMA,
        ..d.clone()
    }
    .validate()
    .is_err());
    // A range that runs past the top of the peer's aperture wraps its address space.
    let err = DmaDescriptor {
        dst: peer_address(1, (1 << 56) - 64),
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("dst at byte 16"), "{err}");
    let err = DmaDescriptor {
        src: u64::MAX - 8,
        ..d.clone()
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("src at byte 8"), "{err}");

    let mut b = d.encode();
    b[2] = 7;
    let err = DmaDescriptor::decode(&b).unwrap_err();
    assert!(err.to_string().contains("op at byte 2"), "{err}");
    let mut b = d.encode();
    b[34] = 1;
    let err = DmaDescriptor::decode(&b).unwrap_err();
    assert!(err.to_string().contains("reserved0 at byte 34"), "{err}");
    let mut b = d.encode();
    b[47] = 1;
    let err = DmaDescriptor::decode(&b).unwrap_err();
    assert!(err.to_string().contains("reserved1 at byte 40"), "{err}");

    // Mapping is checked on the local offsets, over the whole strided span.
    let map = DeviceRange {
        base: 0x1000,
        len: 0x100,
    };
    assert_eq!(d.check_mapped(&map, &map), Ok(()));
    let small = DeviceRange {
        base: 0x1000,
        len: 0xDF,
    };
    assert!(matches!(
        d.check_mapped(&map, &small),
        Err(T3Error::OutOfRange { field: "dst", .. })
    ));
    assert!(matches!(
        d.check_mapped(&small, &map),
        Err(T3Error::OutOfRange { field: "src", .. })
    ));
}

#[test]
fn malformed_output_maps_name_field_and_offset() {
    let m = OutputMap {
        wg_first: 10,
        wg_count: 5,
        local: Some(DmaOp::Update(GemmDataType::F16)),
        remote: Some((3, DmaOp::Store)),
    };
    assert_eq!(OutputMap::decode(&m.encode()), Ok(m));
    let err = OutputMap { wg_count: 0, ..m }.validate().unwrap_err();
    assert!(err.to_string().contains("wg_count at byte 4"), "{err}");
    let err = OutputMap {
        wg_first: u32::MAX,
        ..m
    }
    .validate()
    .unwrap_err();
    assert!(matches!(err, T3Error::RangeOverflow { .. }), "{err}");
    let err = OutputMap {
        local: None,
        remote: None,
        ..m
    }
    .validate()
    .unwrap_err();
    assert!(err.to_string().contains("at byte 8"), "{err}");
    let mut b = m.encode();
    b[8] = 3;
    let err = OutputMap::decode(&b).unwrap_err();
    assert!(err.to_string().contains("local_op at byte 8"), "{err}");
    let mut b = m.encode();
    b[11] = 1;
    let err = OutputMap::decode(&b).unwrap_err();
    assert!(err.to_string().contains("remote_dtype at byte 11"), "{err}");
    let mut b = OutputMap { remote: None, ..m }.encode();
    b[12] = 1;
    let err = OutputMap::decode(&b).unwrap_err();
    assert!(err.to_string().contains("remote_peer"), "{err}");
    let mut b = m.encode();
    b[15] = 1;
    let err = OutputMap::decode(&b).unwrap_err();
    assert!(err.to_string().contains("reserved0 at byte 13"), "{err}");
    assert_eq!(
        OutputMap::decode(&b[..15]).unwrap_err(),
        T3Error::Truncated { len: 15, need: 16 }
    );
}

mod regions {
    use super::*;
    use nmcp_isa::t3::{RegionAction, TrackRegion, TRACK_REGION_BYTES};

    fn region() -> impl Strategy<Value = TrackRegion> {
        let action = prop_oneof![
            Just(RegionAction::Notify),
            (
                any::<bool>(),
                0u8..255,
                prop::sample::select(vec![1u8, 2, 4, 8])
            )
                .prop_map(|(update, peer, wf_tiles_per_block)| RegionAction::Dma {
                    op: if update {
                        DmaOp::Update(GemmDataType::F16)
                    } else {
                        DmaOp::Store
                    },
                    peer,
                    wf_tiles_per_block,
                }),
        ];
        (
            (
                0u8..16,
                any::<u32>(),
                1u32..1 << 20,
                any::<u32>(),
                any::<u32>(),
                1u32..,
            ),
            (
                1u32..1 << 16,
                1u32..1 << 16,
                1u16..,
                1u16..,
                0u64..1 << 40,
                1u32..,
                1u32..,
            ),
            action,
        )
            .prop_map(
                |((slot, wg_first, wg_count, tile_row0, tile_col0, box_cols), rest, action)| {
                    let (m, n, tile_m, tile_n, base, updates_per_element, wf_tiles) = rest;
                    TrackRegion {
                        slot,
                        wg_first: wg_first.min(u32::MAX - wg_count),
                        wg_count,
                        tile_row0,
                        tile_col0,
                        box_cols,
                        m,
                        n,
                        tile_m,
                        tile_n,
                        // A block of 8 WF tiles needs 8 WFs per workgroup.
                        wfs_per_wg: 8,
                        elem_bytes: 2,
                        base,
                        updates_per_element,
                        wf_tiles,
                        action,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn region_round_trips(r in region()) {
            prop_assert_eq!(r.validate(), Ok(()));
            prop_assert_eq!(TrackRegion::decode(&r.encode()), Ok(r));
        }

        /// Any byte string decodes to a valid region or a named error, never a panic;
        /// a decoded region encodes back to the same bytes.
        #[test]
        fn region_decode_is_total(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            match TrackRegion::decode(&bytes) {
                Ok(r) => prop_assert_eq!(&r.encode()[..], &bytes[..TRACK_REGION_BYTES]),
                Err(e) => prop_assert!(!e.to_string().is_empty()),
            }
        }
    }

    #[test]
    fn bad_fields_are_named() {
        let mut b = TrackRegion {
            slot: 0,
            wg_first: 0,
            wg_count: 1,
            tile_row0: 0,
            tile_col0: 0,
            box_cols: 1,
            m: 1,
            n: 1,
            tile_m: 1,
            tile_n: 1,
            wfs_per_wg: 1,
            elem_bytes: 2,
            base: 0,
            updates_per_element: 1,
            wf_tiles: 1,
            action: RegionAction::Notify,
        }
        .encode();
        b[0] = 16;
        assert!(matches!(
            TrackRegion::decode(&b),
            Err(T3Error::BadEnum { field: "slot", .. })
        ));
        b[0] = 0;
        b[44..48].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            TrackRegion::decode(&b),
            Err(T3Error::Zero {
                field: "wf_tiles",
                ..
            })
        ));
        assert!(matches!(
            TrackRegion::decode(&b[..55]),
            Err(T3Error::Truncated { need: 56, .. })
        ));
    }
}
