//! Binary formats shared by the firmware, the emulator and the host tools.
//!
//! Everything here is a pure function of bytes: encoders, decoders and validators for
//! the near-memory-compute (NMC) bank-ALU instruction word ([`nmc`]), the NMC
//! macro-command that a per-channel engine expands into DRAM commands ([`nmc`]), the
//! HSA AQL packets a GPU command processor reads ([`aql`]), the GEMM extension record that
//! rides along a kernel-dispatch packet ([`gemm_ext`]), and the T3 tracker / DMA
//! descriptors ([`t3`]). No I/O, no allocation, no panics on any input.
#![cfg_attr(not(test), no_std)]
#![cfg_attr(
    test,
    allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
#![warn(missing_docs)]

#[macro_use]
mod fmt;

pub mod aql;
pub mod asm;
pub mod gemm_ext;
pub mod le;
pub mod nmc;
pub mod t3;
