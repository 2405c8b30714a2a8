//! A worker's disk: a pool of `--disk-depth` threads beside each worker
//! that do every read and write the run asks of this host, so that the
//! worker never waits on a device, with that many operations in flight at
//! once (the queue depth the device sees from this worker). The worker
//! hands them jobs through one bounded queue, and learns of their
//! completion through an eventfd in its epoll set. Jobs finish in any
//! order: each is whole in itself.
//!
//! - Answering a request whose reply waits on the disk (the responder's read
//!   of the reply payload, its write of the request payload): the worker
//!   queues the reply, already encoded; a disk thread does the I/O and
//!   sends the reply itself on its own handle of the responder socket. The
//!   round trip includes the responder's disk time, as a storage client's
//!   would, and the worker goes on serving other requests meanwhile.
//! - The requester's read of each request's payload (`requests`): the disk
//!   threads keep reads done ahead; a request goes out only against a read
//!   done for it, so a slow disk shows as requests sent short of target,
//!   never as network time (`t_send` is stamped at the send, after the read).
//! - The requester's write of each reply's payload (`replies`), after the
//!   reply is timed: queued, never waited for. A disk too far behind to take
//!   one has it counted as skipped instead.
//!
//! The queue holds at most [`QUEUE`] jobs, about seconds of work for a slow
//! disk at depth 1. The worker reads and counts every request as it arrives, so the
//! forward leg reads true; a request that finds the queue full goes
//! unanswered and is counted as such (its reply is missing on the way back,
//! and the host's disk figures say why). Reads ahead and reply writes keep
//! `ANSWER_ROOM` free for answers. Writes carry the payload's length of file
//! data with every block stamped unique (the receive path keeps headers only,
//! and a deduplicating array must not skip the write).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nix::sys::eventfd::{EfdFlags, EventFd};
use socket2::{SockAddr, Socket};

use super::device::{AlignedBuf, Device, Op};
use super::stats::DiskStats;
use mx_matrix::load::DISK_BLOCK;
use mx_matrix::{DiskMode, MIN_PACKET_BYTES};
use mx_wire::HEADER_LEN;

/// Jobs queued to one worker's disk threads, at most: deep enough to keep a
/// device busy, shallow enough that a reply never waits behind seconds of
/// I/O.
pub const QUEUE: usize = 1024;
/// Disk threads a worker may have (`--disk-depth`): past this a device's
/// own queue is the bound (NVMe's is 1024 deep, spread over the workers),
/// and the threads cost more than they keep in flight.
pub const MAX_DEPTH: usize = 256;
/// Queue room kept for answers: reads ahead and reply writes leave it free.
const ANSWER_ROOM: usize = mx_udp::BATCH;
/// Payload reads the requester keeps done ahead of its sends.
const READ_AHEAD: usize = 128;

/// The disk work per packet on this host, in payload bytes (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskWork {
    /// Written before answering each request (`requests`).
    pub answer_write: usize,
    /// Read before answering each request, and sent as the reply's payload
    /// (`replies`).
    pub answer_read: usize,
    /// Read before sending each request (`requests`).
    pub request_read: usize,
    /// Written after timing each reply (`replies`).
    pub reply_write: usize,
}

impl DiskWork {
    /// The work of `mode` with requests of `tx_size` and replies of
    /// `rx_size` bytes: the payload past the header, on the side the mode
    /// puts it. A header-only packet costs nothing.
    pub fn of(mode: DiskMode, tx_size: u32, rx_size: u32) -> DiskWork {
        let payload = |size: u32| size.saturating_sub(MIN_PACKET_BYTES) as usize;
        let (requests, replies) = (mode.requests(), mode.replies());
        DiskWork {
            answer_write: if requests { payload(tx_size) } else { 0 },
            answer_read: if replies { payload(rx_size) } else { 0 },
            request_read: if requests { payload(tx_size) } else { 0 },
            reply_write: if replies { payload(rx_size) } else { 0 },
        }
    }

    pub fn is_none(&self) -> bool {
        *self == DiskWork::default()
    }

    /// Answers wait on the disk.
    pub(crate) fn answers_wait(&self) -> bool {
        self.answer_write + self.answer_read > 0
    }

    /// The largest I/O, in whole blocks: the thread's buffer.
    fn buffer_len(&self) -> usize {
        let most = self
            .answer_write
            .max(self.answer_read)
            .max(self.request_read)
            .max(self.reply_write);
        most.div_ceil(DISK_BLOCK as usize).max(1) * DISK_BLOCK as usize
    }
}

/// A reply that waits on the disk.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub to: SocketAddr,
    pub header: [u8; HEADER_LEN],
    /// The reply's size, header included.
    pub size: usize,
    /// The matrix index of the requester, and the interval its request was
    /// counted in (`None`: a late request, whose reply is not counted).
    pub peer: u32,
    pub interval: Option<u64>,
}

enum Job {
    Answer(Answer),
    ReadAhead,
    WriteReply,
}

/// A finished job, back to the worker.
pub enum Done {
    /// The reply went out (`sent`), or the kernel refused it.
    Answered {
        answer: Answer,
        sent: bool,
    },
    /// A request payload read ahead, and what the read took: counted when a
    /// request goes out on it, so an interval's reads are its requests'.
    ReadAhead(Op),
    WriteReply,
}

/// The worker's side of its disk threads.
pub struct Disk {
    pub work: DiskWork,
    jobs: Option<SyncSender<Job>>,
    done: Receiver<Done>,
    wake: Arc<EventFd>,
    stats: Arc<Mutex<DiskStats>>,
    in_flight: usize,
    /// Reads done ahead, oldest first, not yet spent on a request.
    reads_ready: VecDeque<Op>,
    reads_in_flight: usize,
    threads: Vec<JoinHandle<()>>,
}

impl Disk {
    /// Opens the data file and starts worker `id`'s `depth` disk threads
    /// (1..=[`MAX_DEPTH`]), each with its own handle of the file and of
    /// `responder`, the worker's responder socket, which they answer on.
    pub fn start(
        id: usize,
        path: &Path,
        work: DiskWork,
        depth: usize,
        responder: Option<&Socket>,
    ) -> std::io::Result<Disk> {
        let seed = move |thread: usize| {
            (u64::from(std::process::id()) << 32) ^ ((id as u64) << 16) ^ thread as u64
        };
        // Buffered or O_DIRECT, the agent's disk line has said which.
        let device = Device::open(path, seed(0))?;
        let wake = Arc::new(EventFd::from_flags(
            EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
        )?);
        let stats = Arc::new(Mutex::new(DiskStats::default()));
        let (jobs, queue) = sync_channel(QUEUE);
        // The threads take turns at the queue: whichever is free takes the
        // next job (the lock is held only while waiting for one).
        let queue = Arc::new(Mutex::new(queue));
        let (finished, done) = sync_channel(QUEUE);
        let mut threads = Vec::with_capacity(depth);
        for thread in 0..depth.max(1) {
            let mut io = DiskThread {
                device: device.try_clone(seed(thread))?,
                work,
                buf: AlignedBuf::new(work.buffer_len()),
                // Each thread's blocks are stamped from its own range.
                stamp: (thread as u64) << 48,
                socket: responder.map(Socket::try_clone).transpose()?,
                stats: Arc::clone(&stats),
            };
            let (wake, queue, finished) = (Arc::clone(&wake), Arc::clone(&queue), finished.clone());
            let handle = std::thread::Builder::new()
                .name(format!("mx-disk-{id}.{thread}"))
                .spawn(move || {
                    io.fill_random(seed(thread));
                    loop {
                        let job = queue.lock().expect("unpoisoned").recv();
                        let Ok(job) = job else { return };
                        if finished.send(io.run(job)).is_err() {
                            return;
                        }
                        let _ = wake.write(1);
                    }
                })?;
            threads.push(handle);
        }
        let mut disk = Disk {
            work,
            jobs: Some(jobs),
            done,
            wake,
            stats,
            in_flight: 0,
            reads_ready: VecDeque::with_capacity(READ_AHEAD),
            reads_in_flight: 0,
            threads,
        };
        disk.read_ahead();
        Ok(disk)
    }

    /// The eventfd that turns readable when a job finishes: for the
    /// worker's epoll set.
    pub(crate) fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.wake.as_fd()
    }

    /// Queues a reply that waits on the disk. With the queue full, the
    /// request goes unanswered and is counted so: it arrived (its rx row
    /// says so), and the shortfall is this host's disk, never the network.
    pub fn answer(&mut self, answer: Answer) -> bool {
        if self.in_flight < QUEUE {
            self.queue(Job::Answer(answer));
            true
        } else {
            self.stats.lock().expect("unpoisoned").unanswered += 1;
            false
        }
    }

    /// Queues the write of a timed reply's payload, or counts it skipped
    /// when the queue has no room beyond what answers need.
    pub(crate) fn write_reply(&mut self) {
        if QUEUE - self.in_flight > ANSWER_ROOM {
            self.queue(Job::WriteReply);
        } else {
            self.stats.lock().expect("unpoisoned").skipped += 1;
        }
    }

    /// Payload reads done ahead: how many requests may go now.
    pub(crate) fn reads_ready(&self) -> usize {
        self.reads_ready.len()
    }

    /// `n` requests went, each on a read done for it: those reads count now.
    pub(crate) fn spend_reads(&mut self, n: usize) {
        if self.work.request_read > 0 {
            let spent = n.min(self.reads_ready.len());
            if spent > 0 {
                let mut stats = self.stats.lock().expect("unpoisoned");
                for op in self.reads_ready.drain(..spent) {
                    stats.add_read(&op);
                }
            }
            self.read_ahead();
        }
    }

    /// Applies every finished job: answers go to `answered` (to be counted),
    /// reads done ahead become sendable, and more are queued.
    pub fn collect(&mut self, mut answered: impl FnMut(&Answer, bool)) {
        let _ = self.wake.read();
        while let Ok(done) = self.done.try_recv() {
            self.in_flight -= 1;
            match done {
                Done::Answered { answer, sent } => answered(&answer, sent),
                Done::ReadAhead(op) => {
                    self.reads_in_flight -= 1;
                    self.reads_ready.push_back(op);
                }
                Done::WriteReply => {}
            }
        }
        self.read_ahead();
    }

    /// The disk work since the last call.
    pub(crate) fn take_stats(&self) -> DiskStats {
        std::mem::take(&mut *self.stats.lock().expect("unpoisoned"))
    }

    /// Keeps [`READ_AHEAD`] payload reads done or under way, as room allows.
    fn read_ahead(&mut self) {
        if self.work.request_read == 0 {
            return;
        }
        while self.reads_ready.len() + self.reads_in_flight < READ_AHEAD
            && QUEUE - self.in_flight > ANSWER_ROOM
        {
            self.reads_in_flight += 1;
            self.queue(Job::ReadAhead);
        }
    }

    fn queue(&mut self, job: Job) {
        // Never blocks: every queued job is counted in `in_flight`, and the
        // callers keep it under QUEUE.
        if let Some(jobs) = &self.jobs
            && jobs.try_send(job).is_ok()
        {
            self.in_flight += 1;
        }
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        // The threads end when their queue closes, after the jobs in it.
        self.jobs = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One disk thread's state.
struct DiskThread {
    device: Device,
    work: DiskWork,
    buf: AlignedBuf,
    /// Counts the blocks written, stamped into each so no two are alike.
    stamp: u64,
    socket: Option<Socket>,
    stats: Arc<Mutex<DiskStats>>,
}

impl DiskThread {
    fn run(&mut self, job: Job) -> Done {
        match job {
            Job::Answer(answer) => {
                if self.work.answer_write > 0 {
                    self.write(self.work.answer_write);
                }
                if self.work.answer_read > 0 {
                    self.read(self.work.answer_read);
                }
                let sent = self.send(&answer);
                Done::Answered { answer, sent }
            }
            Job::ReadAhead => {
                Done::ReadAhead(self.device.read(&mut self.buf, self.work.request_read))
            }
            Job::WriteReply => {
                self.write(self.work.reply_write);
                Done::WriteReply
            }
        }
    }

    fn read(&mut self, len: usize) {
        let op = self.device.read(&mut self.buf, len);
        self.stats.lock().expect("unpoisoned").add_read(&op);
    }

    fn write(&mut self, len: usize) {
        for block in self.buf.as_mut_slice()[..len].chunks_mut(DISK_BLOCK as usize) {
            let n = block.len().min(8);
            block[..n].copy_from_slice(&self.stamp.to_be_bytes()[..n]);
            self.stamp += 1;
        }
        let op = self.device.write(&self.buf, len);
        self.stats.lock().expect("unpoisoned").add_write(&op);
    }

    /// Sends the reply: its header, then payload bytes from the buffer (what
    /// was just read, with `replies`).
    fn send(&self, answer: &Answer) -> bool {
        let Some(socket) = &self.socket else {
            return false;
        };
        let payload = &self.buf.as_slice()[..answer.size - HEADER_LEN];
        let parts = [
            std::io::IoSlice::new(&answer.header),
            std::io::IoSlice::new(payload),
        ];
        socket
            .send_to_vectored(&parts, &SockAddr::from(answer.to))
            .is_ok()
    }

    /// Fills the buffer with pseudo-random bytes: what a reply carries
    /// before the first read.
    fn fill_random(&mut self, seed: u64) {
        let mut random = rand_mt::Mt64::new(seed);
        for word in self.buf.as_mut_slice().chunks_mut(8) {
            word.copy_from_slice(&random.next_u64().to_ne_bytes()[..word.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_work_follows_the_mode_and_header_only_costs_nothing() {
        let w = DiskWork::of(DiskMode::Replies, 64, 4096);
        assert_eq!((w.answer_read, w.reply_write), (4064, 4064));
        assert_eq!((w.answer_write, w.request_read), (0, 0));
        let w = DiskWork::of(DiskMode::Requests, 1000, 64);
        assert_eq!((w.answer_write, w.request_read), (968, 968));
        assert_eq!((w.answer_read, w.reply_write), (0, 0));
        let w = DiskWork::of(DiskMode::Both, 100, 200);
        assert_eq!(
            (w.answer_write, w.request_read, w.answer_read, w.reply_write),
            (68, 68, 168, 168)
        );
        assert!(DiskWork::of(DiskMode::Both, 32, 32).is_none());
        assert!(DiskWork::of(DiskMode::Off, 9000, 9000).is_none());
        assert!(!DiskWork::of(DiskMode::Replies, 32, 32).answers_wait());
    }
}
