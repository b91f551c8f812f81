//! Tracker entries, DMA descriptors and output maps: decode or reject any bytes, and
//! round-trip what decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::t3::{DmaDescriptor, OutputMap, TrackerEntry};

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = TrackerEntry::decode(data) {
        assert_eq!(TrackerEntry::decode(&t.encode()), Ok(t));
    }
    if let Ok(d) = DmaDescriptor::decode(data) {
        assert_eq!(DmaDescriptor::decode(&d.encode()), Ok(d));
    }
    if let Ok(m) = OutputMap::decode(data) {
        assert_eq!(OutputMap::decode(&m.encode()), Ok(m));
    }
});
