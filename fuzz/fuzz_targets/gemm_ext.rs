//! Any byte string decodes to a valid GEMM extension record or is rejected; a decoded
//! record re-encodes to a record that decodes equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::gemm_ext::GemmExt;

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = GemmExt::decode(data) {
        let bytes = g.encode();
        assert_eq!(GemmExt::decode(&bytes), Ok(g));
    }
});
