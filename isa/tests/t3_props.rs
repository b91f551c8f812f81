//! Property tests of the T3 tracker-entry and DMA-descriptor codecs.

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
    DmaDescriptor, DmaOp, DmaTrigger, T3Error, TrackerEntry, DMA_DESCRIPTOR_BYTES,
    TRACKER_ENTRY_BYTES,
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

fn descriptor() -> impl Strategy<Value = DmaDescriptor> {
    let op = prop_oneof![
        Just(DmaOp::Store),
        Just(DmaOp::Update(GemmDataType::F16)),
        Just(DmaOp::Update(GemmDataType::Bf16)),
        Just(DmaOp::Update(GemmDataType::F32)),
    ];
    let trigger = prop_oneof![
        Just(DmaTrigger::None),
        any::<u16>().prop_map(DmaTrigger::Tracker)
    ];
    (any::<u16>(), 0u64..1 << 40, 1u32..1 << 20, op, trigger).prop_map(
        |(id, src, elems, op, trigger)| DmaDescriptor {
            id,
            src,
            // Destination in a disjoint window so the ranges never overlap.
            dst: src + (1 << 41),
            bytes: elems * 4,
            op,
            trigger,
        },
    )
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
        prop_assert_eq!(DmaDescriptor::decode(&d.encode()), Ok(d));
    }

    #[test]
    fn any_bytes_decode_or_error(b in prop::collection::vec(any::<u8>(), 0..40)) {
        if let Ok(e) = TrackerEntry::decode(&b) {
            prop_assert_eq!(e.validate(), Ok(()));
            prop_assert_eq!(&e.encode()[..], &b[..TRACKER_ENTRY_BYTES]);
        }
        if let Ok(d) = DmaDescriptor::decode(&b) {
            prop_assert_eq!(d.validate(), Ok(()));
            prop_assert_eq!(&d.encode()[..], &b[..DMA_DESCRIPTOR_BYTES]);
        }
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
    assert_eq!(e.validate(), Err(T3Error::WfIdOutOfRange { value: 8 }));
    e.wf_id = 7;
    e.threshold = 0;
    let err = TrackerEntry::decode(&e.encode()).unwrap_err();
    assert!(err.to_string().contains("threshold at byte 12"), "{err}");

    let d = DmaDescriptor {
        id: 9,
        src: 0x1000,
        dst: 0x1800,
        bytes: 0x1000,
        op: DmaOp::Update(GemmDataType::F32),
        trigger: DmaTrigger::Tracker(4),
    };
    assert_eq!(d.validate(), Err(T3Error::Overlap));
    let d = DmaDescriptor {
        dst: 0x9000,
        bytes: 6,
        ..d
    };
    assert_eq!(
        d.validate(),
        Err(T3Error::UnalignedUpdate {
            bytes: 6,
            element: 4
        })
    );
    let d = DmaDescriptor { bytes: 8, ..d };
    let mut b = d.encode();
    b[2] = 7;
    let err = DmaDescriptor::decode(&b).unwrap_err();
    assert!(err.to_string().contains("op at byte 2"), "{err}");
    let map = DeviceRange {
        base: 0x1000,
        len: 0x100,
    };
    assert!(matches!(
        d.check_mapped(&map, &map),
        Err(T3Error::OutOfRange { field: "dst", .. })
    ));
}
