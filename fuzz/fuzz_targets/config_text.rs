//! The text and file formats a user hands the CLI besides traces and assembly: GEMM lists
//! (CSV), address-mapping strings against every built-in preset, and checkpoint files.
//! Any input parses or gives an error, never a panic; a checkpoint that parses was
//! written by this nmcp (CRC-checked), so random bytes essentially never do.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nmcp_emulator::gpu::workload::parse_gemm_csv;
use nmcp_emulator::hbm::config::BUILTIN_PRESETS;
use nmcp_emulator::hbm::{AddressMapping, HbmPreset};

fuzz_target!(|data: &[u8]| {
    let _ = nmcp_host::checkpoint::parse(std::path::Path::new("fuzz"), data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(list) = parse_gemm_csv(text) {
        for (shape, count) in list {
            assert!(count > 0, "{shape:?}");
        }
    }
    for (name, _) in BUILTIN_PRESETS {
        if let Ok(p) = HbmPreset::builtin(name) {
            let _ = AddressMapping::parse(text, &p);
        }
    }
});
