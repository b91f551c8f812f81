//! Sparse device memory. (Filled in by issue 2.)
