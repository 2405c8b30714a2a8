//! Small text inputs (the server list, export's `--names` map): read whole,
//! after turning away what cannot be one. Each refusal is one line naming the
//! file (exit 2): a directory, a file too big to be a list, binary data.
//!
//! The big inputs stream instead and guard themselves: the matrix caps its
//! line length (`matrix::read`), a report is checked by its first line
//! (`report::read`).

use std::path::Path;

use crate::error::{Error, Result};

/// The largest list read whole: 65,535 hosts of ~300 bytes each is ~20 MB.
pub(crate) const MAX_LIST_BYTES: u64 = 64 << 20;

/// Reads the `what` at `path` (e.g. "server list"); a missing file is refused
/// as `<what> not found: <path><hint>`.
pub fn read_list(path: &Path, what: &str, hint: &str) -> Result<String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::refused(format!(
                "{what} not found: {}{hint}",
                path.display()
            )));
        }
        Err(e) => return Err(Error::io(path, &format!("cannot read the {what}"), &e)),
    };
    if meta.is_dir() {
        return Err(Error::refused(format!(
            "{}: a directory, not a {what}",
            path.display()
        )));
    }
    if meta.len() > MAX_LIST_BYTES {
        return Err(Error::refused(format!(
            "{}: {} bytes is not a {what} (over 64 MiB)",
            path.display(),
            meta.len()
        )));
    }
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(path, &format!("cannot read the {what}"), &e))?;
    if let Some(at) = memchr::memchr(0, &bytes) {
        let line = 1 + memchr::memchr_iter(b'\n', &bytes[..at]).count();
        return Err(Error::refused(format!(
            "{}:{line}: binary data (a NUL byte): not a {what}",
            path.display()
        )));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let line = 1 + memchr::memchr_iter(b'\n', &e.as_bytes()[..at]).count();
        Error::refused(format!(
            "{}:{line}: not UTF-8 text: not a {what}",
            path.display()
        ))
    })
}
