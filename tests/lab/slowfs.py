#!/usr/bin/python3
"""A slow device for the disk depth tests: a FUSE filesystem at MOUNT that
passes every call through to the directory BACKING, and holds each read and
write DELAY_MS before doing it. Each call runs in a thread of its own, so
calls overlap as a device that serves many operations at once does (an SSD,
an array): one operation in flight gets 1000/DELAY_MS a second, eight get
eight times that.

  slowfs.py BACKING MOUNT DELAY_MS COUNTS

COUNTS is a JSON file, rewritten after each read or write:
{"reads": {"<unix second>": n, ...}, "writes": {...}}, the calls that
reached the filesystem in each wall-clock second. Runs in the foreground
until unmounted (umount MOUNT).
"""

import errno
import json
import os
import sys
import threading
import time

from fusepy import FUSE, FuseOSError, Operations


class SlowFs(Operations):
    def __init__(self, backing, delay_s, counts_path):
        self.backing = backing
        self.delay_s = delay_s
        self.counts_path = counts_path
        self.lock = threading.Lock()
        self.counts = {"reads": {}, "writes": {}}

    def _path(self, path):
        return os.path.join(self.backing, path.lstrip("/"))

    def _count(self, kind):
        second = str(int(time.time()))
        with self.lock:
            per = self.counts[kind]
            per[second] = per.get(second, 0) + 1
            tmp = self.counts_path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.counts, f)
            os.replace(tmp, self.counts_path)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except OSError as e:
            raise FuseOSError(e.errno or errno.EIO)

    def access(self, path, amode):
        if not os.access(self._path(path), amode):
            raise FuseOSError(errno.EACCES)

    def getattr(self, path, fh=None):
        st = self._call(os.lstat, self._path(path))
        keys = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                "st_nlink", "st_size", "st_uid", "st_blocks")
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path, fh):
        return [".", ".."] + self._call(os.listdir, self._path(path))

    def statfs(self, path):
        st = self._call(os.statvfs, self._path(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(st, k) for k in keys}

    def chmod(self, path, mode):
        self._call(os.chmod, self._path(path), mode)

    def chown(self, path, uid, gid):
        self._call(os.chown, self._path(path), uid, gid)

    def utimens(self, path, times=None):
        self._call(os.utime, self._path(path), times)

    def mkdir(self, path, mode):
        self._call(os.mkdir, self._path(path), mode)

    def rmdir(self, path):
        self._call(os.rmdir, self._path(path))

    def unlink(self, path):
        self._call(os.unlink, self._path(path))

    def rename(self, old, new):
        self._call(os.rename, self._path(old), self._path(new))

    def truncate(self, path, length, fh=None):
        self._call(os.truncate, self._path(path), length)

    # The backing file is opened without O_DIRECT (its filesystem may
    # refuse it): the kernel's FUSE side honours the caller's O_DIRECT, so
    # each of the caller's reads and writes is one call here.
    def open(self, path, flags):
        return self._call(os.open, self._path(path), flags & ~os.O_DIRECT)

    def create(self, path, mode, fi=None):
        flags = os.O_RDWR | os.O_CREAT | os.O_TRUNC
        return self._call(os.open, self._path(path), flags, mode)

    def read(self, path, size, offset, fh):
        time.sleep(self.delay_s)
        data = self._call(os.pread, fh, size, offset)
        self._count("reads")
        return data

    def write(self, path, data, offset, fh):
        time.sleep(self.delay_s)
        n = self._call(os.pwrite, fh, data, offset)
        self._count("writes")
        return n

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        return self._call(os.fsync, fh)

    def release(self, path, fh):
        return self._call(os.close, fh)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    backing, mount, delay_ms, counts = sys.argv[1:]
    fs = SlowFs(os.path.abspath(backing), float(delay_ms) / 1000.0, os.path.abspath(counts))
    FUSE(fs, mount, foreground=True, nothreads=False, allow_other=False, big_writes=True)


if __name__ == "__main__":
    main()
