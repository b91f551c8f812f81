//! The `nmcp` binary.

/// Counts allocations so that `--max-memory` can cap them.
#[global_allocator]
static ALLOCATOR: nmcp_host::limits::CappedAllocator = nmcp_host::limits::CappedAllocator;

fn main() -> std::process::ExitCode {
    nmcp_host::run_cli()
}
