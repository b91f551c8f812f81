//! Engine throughput benchmarks. (Filled in by issue 2.)
fn main() {}
