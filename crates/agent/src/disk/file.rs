//! The data file every disk read and write lands in (`disk.dat`):
//! real, incompressible data, never sparse (a sparse file reads back for
//! free), written once and reused by later runs, and refused, with nothing
//! written, when it would all but fill its filesystem.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::sys::statfs::{FsType, HUGETLBFS_MAGIC, TMPFS_MAGIC, statfs};

use mx_base::error::{Error, Result};
use mx_matrix::load::DISK_BLOCK;

/// The data file's default size (`--disk-size`).
pub const DEFAULT_SIZE: u64 = 1 << 30;
/// The smallest data file: a few hundred blocks, so random offsets still
/// spread.
pub const MIN_SIZE: u64 = 1 << 20;
/// Share of the filesystem's free space the file may take: the headroom is
/// in proportion, so a small tmpfs still takes a small file.
const MOST_OF_FREE: f64 = 0.95;
/// Bytes written per call while preparing.
const CHUNK: usize = 1 << 20;

/// Parses `--disk-size`: bytes, or a number with K, M, G or T (binary, an
/// optional `B` or `iB`, fractions allowed), rounded down to whole blocks;
/// at least [`MIN_SIZE`].
pub fn parse_size(text: &str) -> std::result::Result<u64, String> {
    let wants = || format!("--disk-size wants a size like 1G, 512M or 4096K (got '{text}')");
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let unit_at = lower
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(unit_at);
    let scale: u64 = match unit.trim_end_matches("ib").trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(wants()),
    };
    let value: f64 = number.trim().parse().map_err(|_| wants())?;
    if !(value.is_finite() && value >= 0.0) || value * scale as f64 > u64::MAX as f64 / 2.0 {
        return Err(wants());
    }
    let bytes = (value * scale as f64) as u64 / DISK_BLOCK * DISK_BLOCK;
    if bytes < MIN_SIZE {
        return Err(format!(
            "--disk-size must be at least 1.0 MiB: the I/O goes to random blocks of it (got '{text}')"
        ));
    }
    Ok(bytes)
}

/// A size as the logs say it: `1.0 GiB`, `512.0 MiB`.
pub fn size_text(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 40) as f64 {
        format!("{:.1} TiB", b / (1u64 << 40) as f64)
    } else if b >= (1u64 << 30) as f64 {
        format!("{:.1} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// What [`prepare`] found or did.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub path: PathBuf,
    pub size: u64,
    /// How long writing it took; `None`: an earlier run's file of this size
    /// was there, and is used again.
    pub took: Option<std::time::Duration>,
    /// The filesystem keeps its files in memory (tmpfs and the like): the
    /// I/O there is memory, not a device. Its name, when so.
    pub memory_fs: Option<&'static str>,
}

impl Prepared {
    /// The log lines: the original's (`disk: wrote 2.0 MiB to FILE in 0.1s
    /// (RATE sequential); later runs reuse it`, `disk: reusing FILE (2.0 MiB,
    /// already prepared)`), then a memory filesystem called out on its own.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = vec![match self.took {
            None => format!(
                "disk: reusing {} ({}, already prepared)",
                self.path.display(),
                size_text(self.size)
            ),
            Some(took) => {
                let seconds = took.as_secs_f64();
                format!(
                    "disk: wrote {} to {} in {:.1}s ({} sequential); later runs reuse it",
                    size_text(self.size),
                    self.path.display(),
                    seconds,
                    mx_base::units::byte_rate(self.size as f64 / seconds.max(1e-6))
                )
            }
        }];
        if let Some(fs) = self.memory_fs {
            lines.push(format!(
                "disk: {} sits on {fs}, a memory filesystem: its I/O is memory, not a device",
                self.path.display()
            ));
        }
        lines
    }
}

/// Makes sure `path` is a data file of `size` bytes: reuses one of that size
/// that is really allocated (at least half its blocks: a sparse file reads
/// back for free), else writes a new one beside it and renames it into place.
/// Refuses, writing nothing, when the file would take more than 95% of the
/// filesystem's free space.
pub fn prepare(path: &Path, size: u64) -> Result<Prepared> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let memory_fs = memory_filesystem(&dir);
    let prepared = |took| Prepared {
        path: path.to_path_buf(),
        size,
        took,
        memory_fs,
    };
    let existing = std::fs::metadata(path).ok();
    if let Some(meta) = &existing
        && meta.is_file()
        && meta.len() == size
        && meta.blocks() * 512 >= size / 2
    {
        return Ok(prepared(None));
    }
    // The file it replaces frees its blocks: they count as free, and it goes
    // before the new one is written (beside it, both might not fit).
    let replaced = existing
        .filter(|m| m.is_file())
        .map_or(0, |m| m.blocks() * 512);
    if let Some(free) = free_bytes(&dir)?.map(|f| f + replaced)
        && size as f64 > MOST_OF_FREE * free as f64
    {
        return Err(Error::refused(format!(
            "{}: a {} data file would leave its filesystem all but full ({} free) -- pass a smaller --disk-size, or free space",
            path.display(),
            size_text(size),
            size_text(free)
        )));
    }
    if replaced > 0 {
        std::fs::remove_file(path).map_err(|e| Error::io(path, "cannot replace", &e))?;
    }
    let temp = dir.join(format!(
        "{}.{}.tmp",
        path.file_name()
            .map_or("disk.dat".into(), |n| n.to_string_lossy()),
        std::process::id()
    ));
    let began = std::time::Instant::now();
    let written = write_data(&temp, size).and_then(|()| {
        std::fs::rename(&temp, path).map_err(|e| Error::io(path, "cannot put in place", &e))
    });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(prepared(Some(began.elapsed())))
}

/// Writes `size` bytes of data to a new file at `path`, and syncs it. Every
/// 4 KiB block starts with its index (big-endian u64) and the rest is
/// pseudo-random: no two blocks alike, nothing a device could compress or
/// deduplicate.
fn write_data(path: &Path, size: u64) -> Result<()> {
    let mut file: File = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| Error::io(path, "cannot create", &e))?;
    let mut random = rand_mt::Mt64::new(size ^ u64::from(std::process::id()));
    let mut chunk = vec![0u8; CHUNK];
    let block = DISK_BLOCK as usize;
    let mut index: u64 = 0;
    let mut left = size;
    while left > 0 {
        let take = (left as usize).min(CHUNK);
        for block_bytes in chunk[..take].chunks_mut(block) {
            for word in block_bytes.chunks_mut(8) {
                word.copy_from_slice(&random.next_u64().to_ne_bytes()[..word.len()]);
            }
            block_bytes[..8].copy_from_slice(&index.to_be_bytes());
            index += 1;
        }
        file.write_all(&chunk[..take])
            .map_err(|e| Error::io(path, "cannot write", &e))?;
        left -= take as u64;
    }
    file.sync_all()
        .map_err(|e| Error::io(path, "cannot sync", &e))
}

/// Bytes an unprivileged writer may still use on the filesystem of `dir`;
/// `None` for one that reports no size at all (ramfs grows until memory runs
/// out, and says it has 0 blocks).
pub(crate) fn free_bytes(dir: &Path) -> Result<Option<u64>> {
    let stats = nix::sys::statvfs::statvfs(dir)
        .map_err(|errno| Error::io(dir, "cannot read the free space of", &errno.into()))?;
    Ok(
        (stats.blocks() > 0)
            .then(|| stats.blocks_available() as u64 * stats.fragment_size() as u64),
    )
}

/// The name of `dir`'s filesystem when it keeps files in memory.
fn memory_filesystem(dir: &Path) -> Option<&'static str> {
    /// ramfs's magic (linux/magic.h); nix names tmpfs and hugetlbfs only.
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let kind: FsType = statfs(dir).ok()?.filesystem_type();
    if kind == TMPFS_MAGIC {
        // devtmpfs reports tmpfs's magic too.
        Some("tmpfs")
    } else if kind == HUGETLBFS_MAGIC {
        Some("hugetlbfs")
    } else if kind.0 as i64 == RAMFS_MAGIC {
        Some("ramfs")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_units_rounded_down_to_blocks() {
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4096K"), Ok(4 << 20));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("2mb"), Ok(2 << 20));
        assert_eq!(parse_size("1048577"), Ok(1 << 20));
        assert!(
            parse_size("1 X")
                .unwrap_err()
                .contains("wants a size like 1G")
        );
        assert!(
            parse_size("-1G")
                .unwrap_err()
                .contains("wants a size like 1G")
        );
        assert!(parse_size("").unwrap_err().contains("wants a size like 1G"));
        assert!(
            parse_size("1023K")
                .unwrap_err()
                .contains("at least 1.0 MiB")
        );
    }

    #[test]
    fn a_prepared_file_is_real_data_reused_and_replaced_when_resized() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.dat");
        let first = prepare(&path, MIN_SIZE).unwrap();
        assert!(first.took.is_some());
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len() as u64, MIN_SIZE);
        let block = DISK_BLOCK as usize;
        for (i, b) in bytes.chunks(block).enumerate() {
            assert_eq!(u64::from_be_bytes(b[..8].try_into().unwrap()), i as u64);
        }
        // Every block different past its index: nothing to compress.
        assert_ne!(bytes[8..block], bytes[block + 8..2 * block]);
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.blocks() * 512 >= MIN_SIZE, "not sparse");
        let modified = meta.modified().unwrap();
        assert!(prepare(&path, MIN_SIZE).unwrap().took.is_none());
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified
        );
        assert!(prepare(&path, 2 * MIN_SIZE).unwrap().took.is_some());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * MIN_SIZE);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temp file left behind");
    }

    #[test]
    fn a_sparse_file_of_the_right_size_is_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.dat");
        File::create(&path).unwrap().set_len(MIN_SIZE).unwrap();
        assert!(prepare(&path, MIN_SIZE).unwrap().took.is_some());
        assert!(std::fs::metadata(&path).unwrap().blocks() * 512 >= MIN_SIZE);
    }

    #[test]
    fn a_file_too_big_for_the_filesystem_is_refused_with_nothing_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.dat");
        let free = free_bytes(dir.path()).unwrap().unwrap();
        let too_big = (free / DISK_BLOCK + 1) * DISK_BLOCK;
        let e = prepare(&path, too_big).unwrap_err().to_string();
        assert!(e.contains("would leave its filesystem all but full"), "{e}");
        assert!(e.contains("free"), "{e}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
