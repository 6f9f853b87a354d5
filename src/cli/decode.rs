//! `dvcq decode` (being written).

use super::CliError;
use std::process::ExitCode;

/// Arguments of `dvcq decode`.
#[derive(Debug, clap::Args)]
pub struct DecodeArgs {}

impl DecodeArgs {
    /// Runs the subcommand.
    pub fn run(&self) -> Result<ExitCode, CliError> {
        Err(CliError("decode is not implemented yet".into()))
    }
}
