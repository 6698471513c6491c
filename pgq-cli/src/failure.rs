//! How a command fails, and the exit code that says so.

use std::fmt;
use std::process::ExitCode;

/// A command that did not do what was asked.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The command line was wrong; nothing was touched. Exit code 2, as clap's own errors.
    Usage(String),
    /// The work failed, or was refused by the database. Exit code 1.
    Failed(String),
}

impl Failure {
    pub(crate) fn exit_code(&self) -> ExitCode {
        match self {
            Failure::Usage(_) => ExitCode::from(2),
            Failure::Failed(_) => ExitCode::from(1),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(message) | Failure::Failed(message) => f.write_str(message),
        }
    }
}

impl From<pgq_core::Error> for Failure {
    fn from(err: pgq_core::Error) -> Self {
        match err {
            pgq_core::Error::InvalidFilter(_)
            | pgq_core::Error::InvalidQueue { .. }
            | pgq_core::Error::InvalidSchema { .. } => Failure::Usage(err.to_string()),
            _ => Failure::Failed(err.to_string()),
        }
    }
}

impl From<std::io::Error> for Failure {
    fn from(err: std::io::Error) -> Self {
        Failure::Failed(format!("cannot write the output: {err}"))
    }
}

/// What a command returns: its exit code, or why it failed.
pub(crate) type Outcome = Result<ExitCode, Failure>;
