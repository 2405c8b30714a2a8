//! Disks in the round trip (`disk=` in the matrix; disk.md): the data file
//! ([`file`]), block I/O on it ([`device`]), the thread beside each worker
//! that does the I/O so the worker never waits on a device ([`engine`]), and
//! what the I/O did per interval ([`stats`]).

pub mod device;
pub mod engine;
pub mod file;
pub mod stats;

use std::path::PathBuf;

pub use engine::DiskWork;

/// The disk part of an agent's plan: where the data file is, and what each
/// packet asks of it on this host.
#[derive(Debug, Clone)]
pub struct DiskPlan {
    pub path: PathBuf,
    pub work: DiskWork,
}
