//! The `nmcp` binary.

fn main() -> std::process::ExitCode {
    nmcp_host::run_cli()
}
