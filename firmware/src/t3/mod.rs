//! T3 programming: tracker entries and DMA descriptors from a collective and a GEMM
//! shape. (Owned by the T3 issue; nothing here yet.)
