//! Writing files so that nothing is lost or half-written: every file mx
//! writes whole goes to a temp file beside it, renamed over the old one
//! only when complete.

use std::io;
use std::path::Path;

use crate::error::{Error, Result};

/// Writes a file through `fill` into `<path>.<pid>.tmp` and renames it over `path`.
/// On any failure the temp file is removed and `path` is left as it was.
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::refused(format!("{}: not a file name", path.display())))?;
    let mut tmp_name = file_name.to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut out = io::BufWriter::with_capacity(1 << 20, file);
        fill(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?;
        // No fsync: rename-over-existing is atomic for every reader, and ext4/xfs
        // flush the data before the rename reaches disk (auto_da_alloc).
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, "cannot write", &e)
    })
}
