//! What the disks did in one interval: per direction, operations, bytes,
//! summed latency and a latency histogram (for the p99); the time spent in
//! I/O (for `disk_busy_pct`), and the operations that failed or could not be
//! queued. A worker's disk thread adds to one of these; the worker takes it
//! at each tick, and the reporter merges the workers' into the host row.

use hdrhistogram::Histogram;

use super::device::Op;

/// Latencies are kept in microseconds, 1 us to 100 s, 2 significant digits
/// (1% resolution: the p99 column has no more).
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000, 2).expect("valid bounds")
}

/// One direction (reads or writes).
#[derive(Debug, Clone)]
pub struct DirStats {
    pub ops: u64,
    pub bytes: u64,
    pub nanos: u64,
    pub latency_us: Histogram<u64>,
}

impl Default for DirStats {
    fn default() -> Self {
        DirStats {
            ops: 0,
            bytes: 0,
            nanos: 0,
            latency_us: histogram(),
        }
    }
}

impl DirStats {
    fn add(&mut self, op: &Op) {
        self.ops += 1;
        self.bytes += op.bytes;
        self.nanos += op.nanos;
        let _ = self.latency_us.record((op.nanos / 1000).max(1));
    }

    fn merge(&mut self, other: &DirStats) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.nanos += other.nanos;
        let _ = self.latency_us.add(&other.latency_us);
    }

    /// Operations per second over `seconds`.
    pub fn iops(&self, seconds: f64) -> f64 {
        self.ops as f64 / seconds
    }

    /// MB per second (10^6 bytes) over `seconds`.
    pub fn mb_s(&self, seconds: f64) -> f64 {
        self.bytes as f64 / seconds / 1e6
    }

    /// Mean latency in microseconds; `None` without an operation.
    pub fn avg_us(&self) -> Option<f64> {
        (self.ops > 0).then(|| self.nanos as f64 / self.ops as f64 / 1000.0)
    }

    pub fn p99_us(&self) -> Option<f64> {
        (self.ops > 0).then(|| self.latency_us.value_at_quantile(0.99) as f64)
    }
}

/// A worker's disk work in one interval.
#[derive(Debug, Clone, Default)]
pub struct DiskStats {
    pub read: DirStats,
    pub write: DirStats,
    /// Operations the kernel refused (a failed read sends zeros).
    pub errors: u64,
    /// Writes of a received payload the disk thread was too far behind to
    /// take: the network side never waits for a disk, so they are counted
    /// instead of done.
    pub skipped: u64,
    /// Requests that arrived while the disk queue was full: not answered.
    pub unanswered: u64,
}

impl DiskStats {
    pub(crate) fn add_read(&mut self, op: &Op) {
        self.read.add(op);
        self.errors += u64::from(!op.ok);
    }

    pub(crate) fn add_write(&mut self, op: &Op) {
        self.write.add(op);
        self.errors += u64::from(!op.ok);
    }

    pub fn merge(&mut self, other: &DiskStats) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.errors += other.errors;
        self.skipped += other.skipped;
        self.unanswered += other.unanswered;
    }

    /// Seconds spent in I/O.
    pub(crate) fn busy_seconds(&self) -> f64 {
        (self.read.nanos + self.write.nanos) as f64 / 1e9
    }
}
