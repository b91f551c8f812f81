//! The `nmcp` binary.

/// Counts allocations so that `--max-memory` can cap them.
#[global_allocator]
static ALLOCATOR: nmcp_host::limits::CappedAllocator = nmcp_host::limits::CappedAllocator;

fn main() -> std::process::ExitCode {
    // Rust ignores SIGPIPE, so a `println!` into a closed pipe (`nmcp mem | head`) would
    // panic; with the default action the process ends quietly, as Unix tools do.
    #[cfg(unix)]
    // SAFETY: called first thing in `main`, before any thread exists; setting a signal's
    // disposition to its default has no other precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    nmcp_host::run_cli()
}
