//! The ground floor of mx: what every other crate stands on and nothing of
//! mx's own beneath it.
//!
//! - [`units`]: number formats, rates, sizes and durations as the user types
//!   and reads them;
//! - [`error`]: the error type and the exit-code contract;
//! - [`files`]: files written whole or not at all;
//! - [`private_dir`]: directories only their owner can touch, checked as
//!   OpenSSH checks `~/.ssh`;
//! - [`input`]: text input read line by line with its file and line named.

#![forbid(unsafe_code)]

pub mod error;
pub mod files;
pub mod input;
pub mod private_dir;
pub mod units;
