//! One module per sub-command. Each takes its parsed arguments and a writer for
//! standard output, prints what the user sees, and returns the exit code (or an
//! [`Error`](crate::error::Error) that `main` prints as one `mx: ...` line).

pub mod check;
pub mod demo;
pub mod generate;
pub mod help;
pub mod hints;
