//! The one error type of mx and its exit-code contract ([`Exit`]): the
//! original tool's 0, 1 and 2, and 130 for a run cut short by ctrl-c. The
//! man pages, README.md and docs/fleet.md say them in [`Exit::MEANINGS`]'s
//! words (a test holds the docs to them).
//!
//! Every refusal is one line, printed by `main` as `mx: <message>`, that names the
//! file, line, host or value at fault and, where there is one, the fix.

use std::fmt;

/// How mx exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Exit {
    /// Done, and nothing wrong was found.
    Success = 0,
    /// Done, and problems were found.
    Problems = 1,
    /// Bad input, refused before anything touched a host.
    Refused = 2,
    /// `mx run` cut short by ctrl-c (128 + SIGINT, as a shell reports it).
    Interrupted = 130,
}

impl Exit {
    /// Each status and what it means, in the words every document uses.
    pub const MEANINGS: [(Exit, &'static str); 4] = [
        (Exit::Success, "done, and nothing wrong was found"),
        (
            Exit::Problems,
            "done, and problems were found: a host that failed a step or could not be \
             reached, a check over the NIC caps, a run that lost packets past its \
             threshold, a refusal to clean without an answer",
        ),
        (
            Exit::Refused,
            "bad input: a switch, a value, a matrix cell or a file that cannot be \
             right, named in one `mx: ...` line; nothing touched a host",
        ),
        (
            Exit::Interrupted,
            "cut short by ctrl-c: every flow ended and what ran summarized (a second \
             ctrl-c gives up waiting for the fleet)",
        ),
    ];

    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The contract in one sentence: `0 done, ...; 1 ...; 2 ...; 130 ...`.
    pub fn contract() -> String {
        Exit::MEANINGS
            .iter()
            .map(|(exit, meaning)| format!("{} {meaning}", exit.code()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Exit status for "ran, found problems".
pub const EXIT_PROBLEMS: u8 = Exit::Problems.code();
/// Exit status for usage and data errors.
pub const EXIT_REFUSED: u8 = Exit::Refused.code();
/// Exit status of a run cut short by ctrl-c.
pub const EXIT_INTERRUPTED: u8 = Exit::Interrupted.code();

/// An error that ends the command: a one-line message and the exit code it
/// maps to, or the quiet end of a reader gone away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    message: String,
    /// The exit status; `None`: the reader of our output went away.
    code: Option<u8>,
}

impl Error {
    /// Bad input: a usage or data error (exit 2).
    pub fn refused(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: Some(EXIT_REFUSED),
        }
    }

    /// The command ran but the outcome is a failure (exit 1).
    pub fn problems(message: impl Into<String>) -> Self {
        Error {
            message: message.into(),
            code: Some(EXIT_PROBLEMS),
        }
    }

    /// An I/O failure on a named file: refused, naming the file and the cause.
    pub fn io(path: &std::path::Path, what: &str, err: &std::io::Error) -> Self {
        Error::refused(format!("{}: {what}: {err}", path.display()))
    }

    /// The reader of our output went away (`mx gen -o - | head`): not an error,
    /// exit 0 quietly, as ripgrep does.
    pub fn is_broken_pipe(&self) -> bool {
        self.code.is_none()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The exit status (0 for a reader gone away: nothing went wrong).
    pub fn code(&self) -> u8 {
        self.code.unwrap_or(Exit::Success.code())
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
                code: None,
            }
        } else {
            Error::refused(format!("cannot write the output: {e}"))
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
