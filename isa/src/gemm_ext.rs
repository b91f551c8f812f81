//! GEMM extension record referenced from a kernel-dispatch packet. (Filled in by issue 2.)
