//! The `nmcp` CLI, built inside this package so its integration tests can run it.

fn main() -> std::process::ExitCode {
    nmcp_host::run_cli()
}
