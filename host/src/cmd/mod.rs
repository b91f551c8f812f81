//! One module per subcommand.

pub mod aql;
pub mod asm;
pub mod board;
pub mod cp;
pub mod goldyloc;
pub mod io;
pub mod lamb;
pub mod mem;
pub mod presets;

/// What a subcommand returns on failure: a message that says what and where.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;
