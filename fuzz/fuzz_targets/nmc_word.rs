//! Any 32-bit word either decodes to an instruction that re-encodes to the same word, or
//! is rejected; decoding never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_isa::nmc::Instr;

fuzz_target!(|word: u32| {
    if let Ok(instr) = Instr::decode(word) {
        assert_eq!(instr.encode(), word, "{instr:?}");
        // The text form of a decodable word assembles back to it.
        let text = instr.to_string();
        assert_eq!(nmcp_isa::asm::parse_instr(&text), Ok(instr), "{text}");
    }
});
