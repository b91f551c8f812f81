//! Any 64 bytes decode to an AQL packet or are rejected, without panicking; a decoded
//! packet re-encodes to bytes that decode to the same packet, and validation never
//! panics either.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::aql::{decode_slice, encode, AqlPacket};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = decode_slice(data) {
        let again = encode(&p);
        assert_eq!(decode_slice(&again), Ok(p));
        if let AqlPacket::KernelDispatch(k) = p {
            let _ = k.workgroups();
        }
    }
});
