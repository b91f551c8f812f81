//! Any byte string either decodes to a valid macro-command whose encoding is the same
//! bytes, or is rejected; decoding never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::nmc::{MacroCommand, MAX_MACRO_BYTES};

fuzz_target!(|data: &[u8]| {
    if let Ok(cmd) = MacroCommand::decode(data) {
        assert_eq!(cmd.validate(), Ok(()));
        let mut buf = [0u8; MAX_MACRO_BYTES];
        let n = cmd.encode(&mut buf).expect("a decoded command encodes");
        assert_eq!(&buf[..n], data);
        assert_eq!(MacroCommand::decode(&buf[..n]), Ok(cmd));
    }
});
