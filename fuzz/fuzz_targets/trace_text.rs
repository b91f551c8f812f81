//! Memory-trace text (DRAMsim3 and Ramulator formats) and HBM preset TOML: any input
//! parses or gives an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_emulator::hbm::HbmPreset;
use nmcp_emulator::trace::parse_trace;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_trace(text, None, 64);
        let _ = HbmPreset::from_toml(text);
    }
});
