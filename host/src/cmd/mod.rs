//! One module per subcommand.

pub mod aql;
pub mod asm;
pub mod bench;
pub mod board;
pub mod cp;
pub mod goldyloc;
pub mod goldyloc_library;
mod goldyloc_print;
pub mod goldyloc_validate;
pub mod io;
pub mod lamb;
pub mod mem;
pub mod model_options;
pub mod numbers;
pub mod presets;
pub mod reproduce;
pub mod t3;

/// What a subcommand returns on failure: a message that says what and where.
pub type CmdResult = Result<(), Box<dyn std::error::Error>>;

/// A bad option value or combination that clap's own checks cannot see: reported like
/// clap's usage errors, with exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
