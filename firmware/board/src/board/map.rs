//! Window layout (offsets from [`DEVICE_BASE`]). The LAMB part comes first so a board
//! with little RAM can back just [`LAMB_WINDOW_BYTES`] for it.
//!
//! Virt: per queue 32 bytes of words (read index, write index, doorbell, completion
//! signal), 128 bytes per extension record, two packets per ring. HiFive1 (compact, for
//! 16 KiB of RAM): 24 bytes of words per queue (no doorbell word: the CP learns of
//! doorbells from the dispatcher's bitmap and never reads a doorbell word, so the
//! doorbells sit in an unbacked tail, [`DOORBELLS`]), records packed at their encoded
//! size, one packet per ring. The kernel descriptors stay where virt has them, so the
//! kernel objects (and the dispatch hash over them) are the same on both machines.

use super::*;
/// LAMB tensor descriptor table.
pub const TENSOR_TABLE: usize = 0;
/// The NMC engines' command register window: one encoded macro-command.
pub const NMC_COMMAND: usize = 0x100;
/// Kernel descriptors: 64 bytes each, [`MAX_KERNEL_OBJECTS`] per GEMM shape.
pub const KERNELS: usize = 0x200;
/// Per queue: read index, write index, (virt: doorbell,) completion signal (u64
/// each).
pub const QUEUE_WORDS: usize = 0x500;
/// Bytes of one queue's words.
pub const QUEUE_WORDS_STRIDE: usize = if SMALL { 24 } else { 32 };
/// Offset of the read index in a queue's words.
pub const READ_INDEX: usize = 0;
/// Offset of the write index in a queue's words.
pub const WRITE_INDEX: usize = 8;
/// Offset of the completion signal in a queue's words.
pub const SIGNAL: usize = if SMALL { 16 } else { 24 };
/// End of the queues' words.
const QUEUE_WORDS_END: usize = QUEUE_WORDS + BOARD_QUEUES * QUEUE_WORDS_STRIDE;
/// GEMM extension records, one per shape (shared by the queues running it): after
/// the queue words on virt, after the rings on the HiFive1 build (whose records, 104
/// bytes each, would leave the rings off a 64-byte boundary).
pub const GEMM_EXTS: usize = QUEUE_WORDS_END + if SMALL { RING_BYTES } else { 0 };
/// Extension records the window holds: the scenario's maximum on virt, 2 on the
/// HiFive1 build (the canned scenario's two shapes; a scenario with more does not
/// lay out there: [`LayoutError::NoShapes`]).
pub const RECORD_SLOTS: usize = if SMALL {
    2
} else {
    crate::scenario::MAX_SHAPES
};
/// Bytes reserved per extension record.
pub const GEMM_EXT_STRIDE: usize = if SMALL { super::GEMM_EXT_BYTES } else { 128 };
/// Queue rings, on a 64-byte boundary as AQL requires (the CP maps a ring only
/// when it is).
pub const RINGS: usize = QUEUE_WORDS_END
    + if SMALL {
        0
    } else {
        RECORD_SLOTS * GEMM_EXT_STRIDE
    };
/// Bytes of ring space: two packets per queue (the HiFive1 build: one).
pub const RING_BYTES: usize = if SMALL { 0x800 } else { 0x1000 };
/// HiFive1: the queues' doorbell words, 8 bytes each, after the rings and not backed
/// by RAM (virt keeps each in its queue's words).
pub const DOORBELLS: usize = QUEUE_WORDS_END + RING_BYTES + RECORD_SLOTS * GEMM_EXT_STRIDE;

/// Window offset of queue `q`'s doorbell word.
pub const fn doorbell(q: usize) -> usize {
    if SMALL {
        DOORBELLS + q * 8
    } else {
        QUEUE_WORDS + q * QUEUE_WORDS_STRIDE + 16
    }
}

const _: () = assert!(
    TENSOR_TABLE + MAX_TENSORS * nmcp_firmware::nmc::lamb::TENSOR_DESC_BYTES <= NMC_COMMAND
);
const _: () = assert!(NMC_COMMAND + super::MAX_MACRO_BYTES <= KERNELS);
const _: () = assert!(
    KERNELS
        + crate::scenario::MAX_SHAPES
            * super::MAX_KERNEL_OBJECTS
            * super::KERNEL_DESCRIPTOR_BYTES as usize
        <= QUEUE_WORDS
);
const _: () = assert!(SIGNAL + 8 <= QUEUE_WORDS_STRIDE && WRITE_INDEX + 8 <= SIGNAL);
const _: () =
    assert!(super::GEMM_EXT_BYTES <= GEMM_EXT_STRIDE && GEMM_EXT_STRIDE.is_multiple_of(8));
const _: () = assert!(LAMB_WINDOW_BYTES <= BACKED_WINDOW_BYTES);
const _: () = assert!(RINGS.is_multiple_of(64) && GEMM_EXTS.is_multiple_of(8));
// Virt's layout is the one its expected output was recorded with.
const _: () = assert!(SMALL || (GEMM_EXTS == 0x900 && RINGS == 0xB00));
