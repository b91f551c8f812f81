//! The `nmcp` CLI, built inside this package so its integration tests can run it.

/// The same allocator as the `nmcp` binary, so `--max-memory` works here too.
#[global_allocator]
static ALLOCATOR: nmcp_host::limits::CappedAllocator = nmcp_host::limits::CappedAllocator;

fn main() -> std::process::ExitCode {
    nmcp_host::run_cli()
}
