//! Disks in the round trip (`disk=` in the matrix): the data file
//! ([`mod@file`]), block I/O on it ([`device`]), the thread beside each worker
//! that does the I/O so the worker never waits on a device ([`engine`]), and
//! what the I/O did per interval ([`stats`]).

pub mod device;
pub mod engine;
pub mod file;
pub mod stats;

use std::path::PathBuf;

pub use engine::DiskWork;

use mx_matrix::DiskMode;
use mx_matrix::load::DISK_BLOCK;

/// The agent's disk line: `disk: MODE -- <what the mode does> at random
/// 4096-byte-aligned offsets in FILE (SIZE); <how the I/O reaches the
/// device>`, the last clause O_DIRECT's, the buffered fallback's (the
/// filesystem refused O_DIRECT), or a memory filesystem's.
pub(crate) fn banner_line(
    mode: DiskMode,
    sentence: &str,
    prepared: &file::Prepared,
    direct: bool,
) -> String {
    let how = match (prepared.memory_fs, direct) {
        (Some(fs), _) => format!("on {fs}, a memory filesystem, so the I/O is memory, not a device"),
        (None, true) => "O_DIRECT, so every read and write reaches the device".to_string(),
        (None, false) => "buffered, as its filesystem refuses O_DIRECT, each block dropped from the page cache after use, exact bytes counted".to_string(),
    };
    format!(
        "disk: {} -- {sentence} at random {DISK_BLOCK}-byte-aligned offsets in {} ({}); {how}",
        mode.name(),
        prepared.path.display(),
        file::size_text(prepared.size)
    )
}

/// The disk part of an agent's plan: where the data file is, what each
/// packet asks of it on this host, and how many operations each worker
/// keeps in flight (`--disk-depth`).
#[derive(Debug, Clone)]
pub struct DiskPlan {
    pub path: PathBuf,
    pub work: DiskWork,
    pub depth: usize,
}
