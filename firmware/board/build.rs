//! Off-target (host builds, clippy, tests) there is nothing to do. On the board target:
//! put the machine's `memory.x` where riscv-rt's `link.x` includes it, link the binary
//! with `link.x`, and serialise the canned scenarios with postcard into `OUT_DIR`.

// A build script runs on the host: failing loudly with a message is the right answer here.
#![allow(clippy::expect_used)]

use std::{env, fs, path::PathBuf};

#[path = "src/scenario.rs"]
#[allow(dead_code)]
mod scenario;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/scenario.rs");
    println!("cargo:rerun-if-changed=memory-virt.x");
    println!("cargo:rerun-if-changed=memory-hifive1-reva.x");
    println!("cargo:rerun-if-changed=memory-hifive1-revb.x");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // One memory layout per board revision.
    let memory = if env::var_os("CARGO_FEATURE_HIFIVE1_REVB").is_some() {
        "memory-hifive1-revb.x"
    } else if env::var_os("CARGO_FEATURE_HIFIVE1").is_some() {
        "memory-hifive1-reva.x"
    } else {
        "memory-virt.x"
    };
    fs::copy(memory, out.join("memory.x")).expect("copy memory.x");
    println!("cargo:rustc-link-search={}", out.display());
    // Scoped to this crate's binaries: library check builds for the target never see it.
    println!("cargo:rustc-link-arg-bins=-Tlink.x");
    if env::var_os("CARGO_FEATURE_DEFMT").is_some() {
        // defmt's linker script (shipped with the defmt crate) keeps its string table.
        println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
    }

    let mut buf = [0u8; scenario::MAX_SCENARIO_BYTES];
    let write =
        |name: &str, bytes: &[u8]| fs::write(out.join(name), bytes).expect("write scenario");
    write(
        "cp_32q.postcard",
        postcard::to_slice(&scenario::canned_cp(), &mut buf).expect("cp scenario fits"),
    );
    write(
        "cp_32q_one_deep.postcard",
        postcard::to_slice(&scenario::canned_cp_one_deep(), &mut buf).expect("cp scenario fits"),
    );
    for (name, s) in scenario::lamb_scenarios() {
        write(
            &format!("{name}.postcard"),
            postcard::to_slice(&s, &mut buf).expect("lamb scenario fits"),
        );
    }
}
