//! The data file opened for the run's I/O: every read and write moves whole
//! blocks at a random block-aligned offset, with O_DIRECT so the page cache
//! cannot absorb it. Where the filesystem refuses O_DIRECT (tmpfs, some
//! network and overlay filesystems: a probe at open finds out), the I/O is
//! buffered instead, with random-access advice, each write synced, and each
//! block dropped from the cache after use, so the next touch of it goes to
//! the device again.

use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

use nix::fcntl::{PosixFadviseAdvice, posix_fadvise};

use mx_matrix::load::DISK_BLOCK;

/// An I/O buffer O_DIRECT can use: its start aligned to a block. Built from
/// an ordinary vector, one block longer, by starting at its first aligned
/// byte.
pub(crate) struct AlignedBuf {
    bytes: Vec<u8>,
    start: usize,
    len: usize,
}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (a whole number of blocks).
    pub fn new(len: usize) -> AlignedBuf {
        let bytes = vec![0u8; len + DISK_BLOCK as usize];
        let start = bytes.as_ptr().align_offset(DISK_BLOCK as usize);
        AlignedBuf { bytes, start, len }
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[self.start..self.start + self.len]
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.len]
    }
}

/// One finished read or write: the bytes counted, how long it took, and
/// whether the kernel took it.
#[derive(Debug, Clone, Copy)]
pub struct Op {
    pub bytes: u64,
    pub nanos: u64,
    pub ok: bool,
}

/// The data file, open for random block I/O.
pub(crate) struct Device {
    file: File,
    blocks: u64,
    /// O_DIRECT took: whole blocks move and are counted. Else buffered:
    /// exact bytes move and are counted, and are dropped from the cache.
    pub direct: bool,
    random: rand_mt::Mt64,
}

impl Device {
    /// Opens `path` for the run: with O_DIRECT when a probe (one block read
    /// and written back) succeeds, else buffered.
    pub fn open(path: &Path, seed: u64) -> std::io::Result<Device> {
        let size = std::fs::metadata(path)?.len();
        let blocks = size / DISK_BLOCK;
        if blocks == 0 {
            return Err(std::io::Error::other("the data file holds no whole block"));
        }
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok()
            .filter(probe);
        let (file, direct) = match direct {
            Some(file) => (file, true),
            None => (open_buffered(path)?, false),
        };
        Ok(Device {
            file,
            blocks,
            direct,
            random: rand_mt::Mt64::new(seed),
        })
    }

    /// Another handle of the same file, for another thread: the same mode,
    /// its own random offsets from `seed` (reads and writes name their
    /// offset, so the two share no position).
    pub fn try_clone(&self, seed: u64) -> std::io::Result<Device> {
        Ok(Device {
            file: self.file.try_clone()?,
            blocks: self.blocks,
            direct: self.direct,
            random: rand_mt::Mt64::new(seed),
        })
    }

    /// Reads `len` bytes at a random block into `buf` (at least `len`
    /// rounded up to a block long). A failed read leaves zeros.
    pub fn read(&mut self, buf: &mut AlignedBuf, len: usize) -> Op {
        let (offset, moved) = self.place(len);
        let started = Instant::now();
        let target = &mut buf.as_mut_slice()[..moved];
        let ok = self.file.read_exact_at(target, offset).is_ok();
        if !ok {
            target.fill(0);
        }
        self.finish(started, offset, moved, len, ok)
    }

    /// Writes `len` bytes of `buf` at a random block. A buffered write is
    /// synced before it counts as done: it reaches the device, as an
    /// O_DIRECT write does, and a clean page can be dropped from the cache (a
    /// dirty one cannot).
    pub fn write(&mut self, buf: &AlignedBuf, len: usize) -> Op {
        let (offset, moved) = self.place(len);
        let started = Instant::now();
        let ok = self
            .file
            .write_all_at(&buf.as_slice()[..moved], offset)
            .and_then(|()| {
                if self.direct {
                    Ok(())
                } else {
                    self.file.sync_data()
                }
            })
            .is_ok();
        self.finish(started, offset, moved, len, ok)
    }

    /// A random block-aligned offset with room for `len` bytes, and the bytes
    /// the I/O moves there: whole blocks with O_DIRECT, else exactly `len`.
    fn place(&mut self, len: usize) -> (u64, usize) {
        let span = (len as u64).div_ceil(DISK_BLOCK).max(1);
        let choices = self.blocks.saturating_sub(span) + 1;
        let offset = self.random.next_u64() % choices * DISK_BLOCK;
        let moved = if self.direct {
            (span * DISK_BLOCK) as usize
        } else {
            len
        };
        (offset, moved)
    }

    fn finish(&self, started: Instant, offset: u64, moved: usize, len: usize, ok: bool) -> Op {
        let nanos = started.elapsed().as_nanos() as u64;
        if !self.direct {
            // Out of the page cache, so the next touch of it is the device's.
            // Whole blocks: the kernel keeps a page the range only partly
            // covers.
            let span = (len as u64).div_ceil(DISK_BLOCK).max(1) * DISK_BLOCK;
            let _ = posix_fadvise(
                self.file.as_fd(),
                offset as libc::off_t,
                span as libc::off_t,
                PosixFadviseAdvice::POSIX_FADV_DONTNEED,
            );
        }
        Op {
            bytes: if ok { moved as u64 } else { 0 },
            nanos,
            ok,
        }
    }
}

/// The file for buffered I/O: random access, so the kernel reads no more
/// than each I/O asks (no readahead to serve the next one from memory).
fn open_buffered(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let _ = posix_fadvise(file.as_fd(), 0, 0, PosixFadviseAdvice::POSIX_FADV_RANDOM);
    Ok(file)
}

/// Whether O_DIRECT I/O works on `file`: one aligned block read, and written
/// back unchanged.
fn probe(file: &File) -> bool {
    let mut buf = AlignedBuf::new(DISK_BLOCK as usize);
    file.read_exact_at(buf.as_mut_slice(), 0).is_ok()
        && file.write_all_at(buf.as_slice(), 0).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffers_start_on_a_block() {
        for len in [4096, 8192, 65536] {
            let buf = AlignedBuf::new(len);
            assert_eq!(buf.as_slice().as_ptr() as usize % DISK_BLOCK as usize, 0);
            assert_eq!(buf.as_slice().len(), len);
        }
    }

    /// Bytes of `path` in the page cache, as util-linux's fincore sees them.
    fn cached_bytes(path: &Path) -> u64 {
        let out = std::process::Command::new("fincore")
            .args(["--bytes", "--noheadings", "--output", "RES"])
            .arg(path)
            .output()
            .expect("fincore (util-linux)");
        String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
    }

    #[test]
    fn buffered_io_drops_each_block_from_the_cache_after_use() {
        // On the test's own filesystem (a real page cache, unlike tmpfs),
        // with the buffered path forced: the fallback where O_DIRECT is refused.
        let dir =
            tempfile::tempdir_in(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target")).unwrap();
        let path = dir.path().join("disk.dat");
        super::super::file::prepare(&path, 4 << 20).unwrap();
        let whole = File::open(&path).unwrap();
        posix_fadvise(whole.as_fd(), 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
        let mut device = Device {
            file: open_buffered(&path).unwrap(),
            blocks: (4 << 20) / DISK_BLOCK,
            direct: false,
            random: rand_mt::Mt64::new(3),
        };
        let mut buf = AlignedBuf::new(4096);
        for _ in 0..200 {
            assert!(device.read(&mut buf, 4000).ok);
            assert!(device.write(&buf, 4000).ok);
        }
        // 200 reads and writes touched ~180 of 1024 blocks: without the drop
        // after use they would all sit in the cache.
        let cached = cached_bytes(&path);
        assert!(cached <= 8 * DISK_BLOCK, "{cached} bytes still cached");
    }

    #[test]
    fn reads_and_writes_land_on_random_blocks_inside_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.dat");
        super::super::file::prepare(&path, 1 << 20).unwrap();
        let mut device = Device::open(&path, 7).unwrap();
        let mut buf = AlignedBuf::new(8192);
        let mut indexes = std::collections::BTreeSet::new();
        for _ in 0..64 {
            let op = device.read(&mut buf, 100);
            assert!(op.ok);
            // A block's own index sits in its first bytes: the read landed on
            // a block boundary.
            let index = u64::from_be_bytes(buf.as_slice()[..8].try_into().unwrap());
            assert!(index < 256);
            indexes.insert(index);
            let expected = if device.direct { 4096 } else { 100 };
            assert_eq!(op.bytes, expected);
        }
        assert!(indexes.len() > 32, "offsets spread: {}", indexes.len());
        let op = device.write(&buf, 5000);
        assert!(op.ok);
        assert_eq!(op.bytes, if device.direct { 8192 } else { 5000 });
    }
}
