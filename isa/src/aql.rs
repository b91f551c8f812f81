//! HSA AQL packets, byte-exact with `hsa.h`. (Filled in by the AQL work of issue 2.)
