//! `nmcp`: run the firmware and the hardware model from the command line.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod goldyloc;

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
    /// List the built-in HBM presets, or check a preset file.
    Presets(cmd::presets::PresetsArgs),
    /// Assemble NMC instructions and macro-commands from text.
    Asm(cmd::asm::AsmArgs),
    /// Disassemble NMC instruction words or macro-commands.
    Disasm(cmd::asm::DisasmArgs),
    /// GOLDYLOC offline flow: tune, train, eval.
    Goldyloc(cmd::goldyloc::GoldylocArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Mem(a) => cmd::mem::run(a),
        Command::Presets(a) => cmd::presets::run(a),
        Command::Asm(a) => cmd::asm::run_asm(a),
        Command::Disasm(a) => cmd::asm::run_disasm(a),
        Command::Goldyloc(a) => cmd::goldyloc::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nmcp: error: {e}");
            ExitCode::FAILURE
        }
    }
}
