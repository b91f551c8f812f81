//! `nmcp`: run the firmware and the hardware model from the command line.
//!
//! The CLI lives in this library so that the `nmcp` binary and the workspace's
//! integration tests (which build their own copy of the binary) share one definition.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod cp_replay;
mod goldyloc;
mod lamb;
mod t3;

/// Firmware emulator for a GPU command processor and near-memory compute in HBM.
#[derive(Parser, Debug)]
#[command(name = "nmcp", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a memory trace or a synthetic pattern through the HBM model.
    Mem(cmd::mem::MemArgs),
    /// LAMB optimizer steps on near-memory compute, next to an ideal GPU.
    Lamb(cmd::lamb::LambArgs),
    /// List the built-in HBM presets, or check a preset file.
    Presets(cmd::presets::PresetsArgs),
    /// Assemble NMC instructions and macro-commands from text.
    Asm(cmd::asm::AsmArgs),
    /// Disassemble NMC instruction words or macro-commands.
    Disasm(cmd::asm::DisasmArgs),
    /// GOLDYLOC offline flow: tune, train, eval.
    Goldyloc(cmd::goldyloc::GoldylocArgs),
    /// Decode AQL packets (queue dumps).
    Aql(cmd::aql::AqlArgs),
    /// Run queue dumps through the firmware command processor.
    Cp(cmd::cp::CpArgs),
    /// The firmware on a RISC-V board under QEMU: run, compare, check budgets.
    Board(cmd::board::BoardArgs),
    /// T3: fused GEMM + reduce-scatter across simulated GPUs (the Table 8.2 sub-layer
    /// study; `check` with real data; `rs` a plain ring reduce-scatter).
    T3(cmd::t3::T3Args),
}

/// Parses the process arguments and runs the subcommand; the exit code says whether it
/// worked, the message on stderr what went wrong.
pub fn run_cli() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mem(a) => cmd::mem::run(a),
        Command::Presets(a) => cmd::presets::run(a),
        Command::Lamb(a) => cmd::lamb::run(a),
        Command::Asm(a) => cmd::asm::run_asm(a),
        Command::Disasm(a) => cmd::asm::run_disasm(a),
        Command::Goldyloc(a) => cmd::goldyloc::run(a),
        Command::Aql(a) => cmd::aql::run(a),
        Command::Cp(a) => cmd::cp::run(a),
        Command::Board(a) => cmd::board::run(a),
        Command::T3(a) => cmd::t3::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nmcp: error: {e}");
            if e.is::<cmd::UsageError>() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
