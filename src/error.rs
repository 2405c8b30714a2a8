//! The one error type of mx and its exit-code contract.
//!
//! mx keeps the original tool's exit codes:
//! - 0: success;
//! - 1: mx ran and found a problem (a host over its NIC caps, a fleet step that
//!   failed on some host);
//! - 2: the input was refused (a usage error, a malformed matrix or server list,
//!   a value out of range). Nothing has been changed when 2 is returned.
//!
//! Every refusal is one line, printed by `main` as `mx: <message>`, that names the
//! file, line, host or value at fault and, where there is one, the fix.

use std::fmt;

/// Exit status for "ran, found problems".
pub const EXIT_PROBLEMS: u8 = 1;
/// Exit status for usage and data errors.
pub const EXIT_REFUSED: u8 = 2;

/// An error that ends the command: a one-line message and the exit code it maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    code: u8,
}

impl Error {
    /// Bad input: a usage or data error (exit 2).
    pub fn refused(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: EXIT_REFUSED,
        }
    }

    /// The command ran but the outcome is a failure (exit 1).
    pub fn problems(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: EXIT_PROBLEMS,
        }
    }

    /// An I/O failure on a named file: refused, naming the file and the cause.
    pub fn io(path: &std::path::Path, what: &str, err: &std::io::Error) -> Self {
        Error::refused(format!("{}: {what}: {err}", path.display()))
    }

    /// The reader of our output went away (`mx gen -o - | head`): not an error,
    /// exit 0 quietly, as ripgrep does.
    pub fn is_broken_pipe(&self) -> bool {
        self.code == 0
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn code(&self) -> u8 {
        self.code
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// Failing to write standard output: a closed pipe ends the command quietly.
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Error {
                message: String::new(),
                code: 0,
            }
        } else {
            Error::refused(format!("cannot write the output: {e}"))
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
