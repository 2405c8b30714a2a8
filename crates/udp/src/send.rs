//! Sending: datagrams queued into a batch and handed to the kernel with one
//! sendmmsg, each run of equal datagrams to one destination as one GSO
//! super-datagram where the route can segment.
//!
//! A small datagram (up to [`CONTIGUOUS_MAX`] bytes) is laid out whole, a
//! run of them back to back, so the kernel copies one piece per message
//! rather than two per datagram. A larger one is gathered from two pieces:
//! its own 32-byte header and a shared, read-only slice of padding, which is
//! then never copied in user space. Nothing here allocates per packet.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::sys::{MsgVec, RawAddr};
use super::{BATCH, GSO_MAX_SEGMENTS, MAX_UDP_PAYLOAD};
use mx_wire::HEADER_LEN;
use mx_wire::MAX_PACKET_BYTES;

/// Zeros that pad every datagram past its header, shared by all sends.
pub fn padding() -> Box<[u8]> {
    vec![0u8; MAX_PACKET_BYTES as usize].into_boxed_slice()
}

/// Largest datagram sent as one contiguous piece of memory (header and
/// padding copied together into [`SendBatch`]'s frames); larger ones are
/// gathered from their header and the shared padding, uncopied.
///
/// Why: the kernel copies a message's iovecs one by one, and for a small
/// datagram the per-iovec cost is most of it. Two iovecs per 64-byte
/// datagram made `_copy_from_iter` a third of a GSO agent's time (perf, 64 B
/// at 700 kpps per flow); one iovec for a run of 64 datagrams is one copy of
/// 4 KB, as in the raw GSO loop. Past a couple of KB the bytes themselves
/// dominate, and copying the padding here first would copy them twice.
pub const CONTIGUOUS_MAX: usize = 2048;

/// Datagrams queued for one sendmmsg call, each its header and then the
/// batch's padding.
///
/// A datagram of up to [`CONTIGUOUS_MAX`] bytes is written whole into
/// `frames` when pushed, after the one before it, so that a run of them is
/// one piece of memory for the kernel to copy, and a send that the kernel
/// took only part of resumes without laying anything out again. Its padding
/// is written only where `frames` does not already hold it: batches of one
/// size (nearly all of them) lay their padding out once, and each datagram
/// after costs its 32-byte header.
pub struct SendBatch {
    /// `BATCH * CONTIGUOUS_MAX` bytes: the contiguous datagrams, in order.
    frames: Box<[u8]>,
    /// What pads every datagram past its header (zeros, or the file data of
    /// a disk run): [`padding_mut`](Self::padding_mut) changes it.
    padding: Box<[u8]>,
    /// The padding already in `frames`: datagrams of `laid_size` bytes at
    /// `i * laid_size` for every `i < laid_count`.
    laid_size: usize,
    laid_count: usize,
    /// Every datagram pushed since `clear` was `laid_size` bytes and
    /// contiguous: the i-th sits at `i * laid_size`.
    uniform: bool,
    /// Where in `frames` the next contiguous datagram goes.
    next_frame: usize,
    /// Where in `frames` each contiguous datagram is.
    frame_at: [u32; BATCH],
    /// Headers of the datagrams too large for `frames`, gathered with the
    /// padding when sent.
    headers: [[u8; HEADER_LEN]; BATCH],
    sizes: [usize; BATCH],
    /// Each datagram's address; none for a connected socket.
    addrs: [RawAddr; BATCH],
    /// Which entry of `addrs` holds each datagram's destination: its own, or
    /// (pushed with [`push_joined`](Self::push_joined)) the one before's.
    addr_of: [u8; BATCH],
    /// At the first datagram of each run (datagrams of one size to one
    /// destination, as many as one GSO message carries): the run's length.
    /// Runs are cut as datagrams are pushed, so a send reads one entry per
    /// message, not one per datagram (a memcmp of addresses per datagram was
    /// 6% of a GSO agent's own time, a scan of flags per datagram 3%).
    run_len: [u8; BATCH],
    /// The run being extended: its first datagram, and the most it may hold.
    run_from: usize,
    run_most: usize,
    /// The destination of the last datagram pushed.
    previous_to: Option<SocketAddr>,
    /// The messages of one sendmmsg: a message points at a run's frames,
    /// or at each of its datagrams' header and padding.
    messages: MsgVec,
    /// Datagrams carried by each message of the last call.
    segments: [usize; BATCH],
    /// Which datagrams the last `send` got into the kernel.
    sent: [bool; BATCH],
    len: usize,
    /// Datagrams the kernel took in GSO messages of several, since the last
    /// [`take_coalesced`](Self::take_coalesced).
    sent_coalesced: u64,
}

impl SendBatch {
    /// An empty batch whose datagrams are padded with zeros.
    pub fn new() -> Box<SendBatch> {
        // Nothing laid out (`uniform` false, `laid_count` 0).
        Box::new(SendBatch {
            frames: vec![0u8; BATCH * CONTIGUOUS_MAX].into_boxed_slice(),
            padding: padding(),
            laid_size: 0,
            laid_count: 0,
            uniform: false,
            next_frame: 0,
            frame_at: [0; BATCH],
            headers: [[0; HEADER_LEN]; BATCH],
            sizes: [0; BATCH],
            addrs: [RawAddr::NONE; BATCH],
            addr_of: [0; BATCH],
            run_len: [0; BATCH],
            run_from: 0,
            run_most: 0,
            previous_to: None,
            messages: MsgVec::new(),
            segments: [0; BATCH],
            sent: [false; BATCH],
            len: 0,
            sent_coalesced: 0,
        })
    }

    /// The padding, to fill with other bytes (a disk run's file data): what
    /// was laid out with the old bytes is laid out again.
    pub fn padding_mut(&mut self) -> &mut [u8] {
        self.laid_count = 0;
        &mut self.padding
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn is_full(&self) -> bool {
        self.len == BATCH
    }

    pub fn clear(&mut self) {
        self.len = 0;
        self.next_frame = 0;
        self.uniform = true;
    }

    /// Size in bytes of the `i`-th queued datagram.
    pub fn size(&self, i: usize) -> usize {
        assert!(i < self.len);
        self.sizes[i]
    }

    /// Queues a datagram of `size` bytes (32..=65507) whose header is written by
    /// `fill`; `to` is its destination, `None` on a connected socket.
    #[inline]
    pub fn push(
        &mut self,
        size: usize,
        to: Option<SocketAddr>,
        fill: impl FnOnce(&mut [u8; HEADER_LEN]),
    ) {
        let i = self.len;
        let joins = i > 0 && self.previous_to == to && self.sizes[i - 1] == size;
        fill(self.place(size, joins));
        self.addrs[i].set(to);
        self.addr_of[i] = i as u8;
        self.previous_to = to;
    }

    /// Queues a datagram to where the last one pushed goes (the next reply
    /// to one sender): its address is neither written nor compared again.
    #[inline]
    pub fn push_joined(&mut self, size: usize, fill: impl FnOnce(&mut [u8; HEADER_LEN])) {
        assert!(self.len > 0, "a joined datagram follows another");
        let i = self.len;
        let joins = self.sizes[i - 1] == size;
        fill(self.place(size, joins));
        self.addr_of[i] = self.addr_of[i - 1];
    }

    /// Queues `n` datagrams of `size` bytes to where the last one pushed
    /// goes, the `k`-th's header written by `fill(k, ..)`: what `n` calls of
    /// [`push_joined`](Self::push_joined) queue, with the bookkeeping done
    /// once for the `n` (sizes, addresses, runs, frames) rather than datagram
    /// by datagram, where the batch is laid out in `size` already. The
    /// replies to a GRO message of requests, a flow's batch of requests.
    ///
    /// Why: at a few Mpps per flow a worker's core is the limit; queued
    /// this way, the agents' user time per round trip at 2-6 Mpps is a third
    /// less than queued one by one (docs/performance.md).
    pub fn push_joined_run(
        &mut self,
        n: usize,
        size: usize,
        mut fill: impl FnMut(usize, &mut [u8; HEADER_LEN]),
    ) {
        assert!(self.len > 0, "a joined datagram follows another");
        assert!(self.len + n <= BATCH, "send batch is full");
        let i = self.len;
        // One alone gains nothing from the run's bookkeeping (a request
        // answered by itself, `--no-gso`).
        if !(n > 1 && self.uniform && size == self.laid_size && size == self.sizes[i - 1]) {
            for k in 0..n {
                self.push_joined(size, |h| fill(k, h));
            }
            return;
        }
        // Uniform in `size` (so `size <= CONTIGUOUS_MAX`): the k-th goes at
        // `first + k * size`, and every frame below `laid_count` holds its
        // padding.
        let end = i + n;
        self.sizes[i..end].fill(size);
        let to = self.addr_of[i - 1];
        self.addr_of[i..end].fill(to);
        // The open run takes what it has room for; new runs, the rest.
        let mut next = i;
        while next < end {
            if next - self.run_from >= self.run_most {
                self.run_from = next;
                self.run_len[next] = 0;
            }
            let take = (self.run_most - (next - self.run_from)).min(end - next);
            debug_assert!(take > 0, "a run cut with no room taken");
            self.run_len[self.run_from] += take as u8;
            next += take;
        }
        let first = self.next_frame;
        for (k, at) in self.frame_at[i..end].iter_mut().enumerate() {
            *at = (first + k * size) as u32;
        }
        self.next_frame = first + n * size;
        for k in self.laid_count.max(i)..end {
            let at = first + (k - i) * size;
            self.frames[at + HEADER_LEN..at + size]
                .copy_from_slice(&self.padding[..size - HEADER_LEN]);
        }
        self.laid_count = self.laid_count.max(end);
        self.len = end;
        for (k, frame) in self.frames[first..first + n * size]
            .chunks_exact_mut(size)
            .enumerate()
        {
            fill(
                k,
                (&mut frame[..HEADER_LEN])
                    .try_into()
                    .expect("HEADER_LEN bytes"),
            );
        }
    }

    /// Takes the next entry for a datagram of `size` bytes (`joins`: it may
    /// go in the previous one's GSO message): lays out its padding where
    /// `frames` does not hold it yet, and returns where its header goes.
    // Always: called for every datagram, and not inlined it cost a third of
    // its own instructions in saving and restoring registers.
    #[inline(always)]
    fn place(&mut self, size: usize, joins: bool) -> &mut [u8; HEADER_LEN] {
        assert!(self.len < BATCH, "send batch is full");
        assert!((HEADER_LEN..=MAX_PACKET_BYTES as usize).contains(&size));
        let i = self.len;
        self.sizes[i] = size;
        if joins && i - self.run_from < self.run_most {
            self.run_len[self.run_from] += 1;
        } else {
            self.run_from = i;
            self.run_most = (MAX_UDP_PAYLOAD / size).min(GSO_MAX_SEGMENTS);
            self.run_len[i] = 1;
        }
        self.len += 1;
        if size > CONTIGUOUS_MAX {
            // Gathered from its header and the padding: nothing in `frames`,
            // but the next contiguous one is no longer at i * size.
            self.uniform = false;
            return &mut self.headers[i];
        }
        let at = self.next_frame;
        self.next_frame += size;
        self.frame_at[i] = at as u32;
        if self.uniform && size == self.laid_size {
            if i >= self.laid_count {
                // i == laid_count: those before it are laid out.
                self.frames[at + HEADER_LEN..at + size]
                    .copy_from_slice(&self.padding[..size - HEADER_LEN]);
                self.laid_count = i + 1;
            }
        } else {
            self.uniform = false;
            self.frames[at + HEADER_LEN..at + size]
                .copy_from_slice(&self.padding[..size - HEADER_LEN]);
            // Those wholly before `at` keep their padding; this one wrote
            // over the rest.
            if let Some(before) = at.checked_div(self.laid_size) {
                self.laid_count = self.laid_count.min(before);
            }
            if i == 0 {
                // The first of its batch starts a layout of its size.
                (self.laid_size, self.laid_count, self.uniform) = (size, 1, true);
            }
        }
        (&mut self.frames[at..at + HEADER_LEN])
            .try_into()
            .expect("HEADER_LEN bytes")
    }

    /// Sends the queued datagrams, in order, until the kernel would block; the
    /// batch is left as it was (the caller clears it). A datagram the kernel
    /// refuses (EPERM from a firewall drop, ENETUNREACH, ...) is skipped and
    /// the rest still go: one refusal must not take the batch with it.
    /// [`was_sent`](Self::was_sent) tells which went.
    ///
    /// With `*gso`, each run of equal-size datagrams to one destination goes as
    /// one GSO super-datagram (UDP_SEGMENT): one trip down the stack for up to
    /// 64 datagrams, cut apart by the NIC, or kept whole over loopback and
    /// veth to a receiver with UDP_GRO. A route that cannot segment (EINVAL:
    /// segment over the path MTU; EIO: no checksum offload) turns `*gso` off
    /// and the rest goes one datagram per message.
    pub fn send(&mut self, fd: RawFd, gso: &mut bool) -> Sent {
        let mut outcome = Sent::default();
        self.sent[..self.len].fill(false);
        while outcome.tried < self.len {
            let at = outcome.tried;
            match self.send_from(fd, at, *gso) {
                Ok(0) => break,
                Ok(n) => {
                    self.sent[at..at + n].fill(true);
                    outcome.tried += n;
                    outcome.sent += n;
                }
                Err(e) if *gso && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIO)) => {
                    *gso = false;
                }
                Err(e) => {
                    // The first message failed: its datagrams are refused.
                    let refused = self.segments[0];
                    self.sent[at..at + refused].fill(false);
                    outcome.tried += refused;
                    outcome.error.get_or_insert(e);
                }
            }
        }
        outcome
    }

    /// Whether the `i`-th datagram went in the last [`send`](Self::send).
    pub fn was_sent(&self, i: usize) -> bool {
        i < self.len && self.sent[i]
    }

    /// One sendmmsg of the datagrams from `start` on; returns datagrams taken.
    fn send_from(&mut self, fd: RawFd, start: usize, gso: bool) -> io::Result<usize> {
        let mut out = self.messages.start();
        let mut i = start;
        while i < self.len {
            let size = self.sizes[i];
            // Every message but the last a GSO send took ends a run, so
            // with GSO `i` starts one.
            let end = if gso {
                i + usize::from(self.run_len[i])
            } else {
                i + 1
            };
            debug_assert!(end > i && end <= self.len);
            if size <= CONTIGUOUS_MAX {
                // The run in one piece: laid out one after another when pushed.
                let at = self.frame_at[i] as usize;
                out.piece(&self.frames[at..at + (end - i) * size]);
            } else {
                // Two pieces per datagram: its header, then the padding.
                let pad = &self.padding[..size - HEADER_LEN];
                for header in &self.headers[i..end] {
                    out.piece(header);
                    out.piece(pad);
                }
            }
            self.segments[out.messages()] = end - i;
            // Several datagrams: one GSO message of `size`-byte segments.
            let segment = (end - i > 1).then_some(size as u16);
            out.message(&self.addrs[usize::from(self.addr_of[i])], segment);
            i = end;
        }
        let sent = out.send(fd)?;
        self.sent_coalesced += self.segments[..sent]
            .iter()
            .filter(|&&k| k > 1)
            .sum::<usize>() as u64;
        Ok(self.segments[..sent].iter().sum())
    }

    /// Datagrams sent in GSO messages of several since the last call: a
    /// software interface (veth, loopback) counts each such message as one
    /// packet, so its counts and the datagrams compare only where this is 0.
    pub fn take_coalesced(&mut self) -> u64 {
        std::mem::take(&mut self.sent_coalesced)
    }
}

/// What one [`SendBatch::send`] did: the first `tried` datagrams were
/// offered to the kernel, `sent` of them taken; the rest of the batch waits
/// for the socket to drain.
#[derive(Debug, Default)]
pub struct Sent {
    pub tried: usize,
    pub sent: usize,
    /// The first refusal, if any datagram was refused.
    pub error: Option<io::Error>,
}

#[cfg(test)]
mod tests {
    use super::super::testing::{V4, V6, bound, receive, send_requests};
    use super::super::{Buffers, RecvBatch, client_socket, responder_socket};
    use super::*;
    use mx_wire::Header;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_refused_datagram_is_skipped_and_the_rest_still_go() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = bound(&rx);
        let tx = responder_socket(SocketAddr::new(V4, 0), Buffers::default()).unwrap();
        let mut batch = SendBatch::new();
        // The kernel refuses a datagram to port 0 (EINVAL), and only that one.
        let port_zero = SocketAddr::new(V4, 0);
        for (seq, dest) in [(1, to), (2, port_zero), (3, to), (4, to)] {
            batch.push(64, Some(dest), |h| {
                Header::request(1, 64, 64, seq, 7).encode(h)
            });
        }
        let mut gso = false;
        let outcome = batch.send(tx.as_raw_fd(), &mut gso);
        assert_eq!((outcome.tried, outcome.sent), (4, 3));
        assert!(outcome.error.is_some());
        let flags: Vec<bool> = (0..4).map(|i| batch.was_sent(i)).collect();
        assert_eq!(flags, [true, false, true, true]);
        let (got, _) = receive(&rx, &mut RecvBatch::headers(), 3);
        assert_eq!(got, [(64, 1), (64, 3), (64, 4)]);
    }

    #[test]
    fn every_datagram_is_its_header_then_the_padding_laid_out_whole_or_gathered() {
        // Sizes each side of CONTIGUOUS_MAX, with GSO and without, read by a
        // plain socket: byte for byte, the header and then the padding's
        // first bytes (a pattern, so a misplaced copy shows).
        let pattern: Box<[u8]> = (0..MAX_PACKET_BYTES as usize)
            .map(|i| (i % 251) as u8)
            .collect();
        let sizes = [64usize, 64, 64, CONTIGUOUS_MAX, CONTIGUOUS_MAX + 1, 8192];
        for gso in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = client_socket(Some(V4), bound(&rx), Buffers::default()).unwrap();
            let mut batch = SendBatch::new();
            batch.padding_mut().copy_from_slice(&pattern);
            for (i, &size) in sizes.iter().enumerate() {
                batch.push(size, None, |h| {
                    Header::request(1, size as u32, 64, i as u64 + 1, 7).encode(h)
                });
            }
            let mut gso_on = gso;
            let sent = batch.send(tx.as_raw_fd(), &mut gso_on).sent;
            assert_eq!(sent, sizes.len());
            let mut buf = vec![0u8; 65536];
            for (i, &size) in sizes.iter().enumerate() {
                let n = rx.recv(&mut buf).unwrap();
                assert_eq!(n, size, "gso {gso}, datagram {i}");
                let h = Header::decode(&buf[..HEADER_LEN]).unwrap();
                assert_eq!(h.seq, i as u64 + 1);
                assert!(
                    buf[HEADER_LEN..n] == pattern[..n - HEADER_LEN],
                    "gso {gso}, datagram {i}: the padding"
                );
            }
        }
    }

    #[test]
    fn padding_laid_out_by_one_batch_serves_the_next_only_where_it_still_holds() {
        // One batch reused as the agent reuses it: runs of one size, then
        // sizes that write over part of what was laid out, then the first
        // size again (longer than before), new padding bytes, and a
        // datagram too large for the frames first. Every datagram must carry,
        // byte for byte, its header and then the padding in force.
        let pattern = |salt: usize| -> Vec<u8> {
            (0..MAX_PACKET_BYTES as usize)
                .map(|i| ((i + salt) % 251) as u8)
                .collect()
        };
        let batches: [&[usize]; 11] = [
            &[64; 5],
            &[64; 3],
            &[100, 64, 64],
            &[64; 8],
            &[64, 100, 64],
            &[64; 4],
            &[64; 4],
            &[64, 100, 64],
            &[4000, 64, 64],
            &[64; 4],
            &[48, 48, 64, 64, 64],
        ];
        for gso in [false, true] {
            let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = client_socket(Some(V4), bound(&rx), Buffers::default()).unwrap();
            let mut batch = SendBatch::new();
            let mut seq = 0u64;
            let mut buf = vec![0u8; 65536];
            for (b, sizes) in batches.iter().enumerate() {
                // New padding before the seventh batch: all laid out again.
                let salt = if b >= 6 { 7 } else { 0 };
                if b == 6 {
                    batch.padding_mut().copy_from_slice(&pattern(salt));
                } else if b == 0 {
                    batch.padding_mut().copy_from_slice(&pattern(0));
                }
                batch.clear();
                for &size in *sizes {
                    seq += 1;
                    batch.push(size, None, |h| {
                        Header::request(1, size as u32, 64, seq, 7).encode(h)
                    });
                }
                let mut gso_on = gso;
                assert_eq!(batch.send(tx.as_raw_fd(), &mut gso_on).sent, sizes.len());
                let want = pattern(salt);
                for (i, &size) in sizes.iter().enumerate() {
                    let n = rx.recv(&mut buf).unwrap();
                    assert_eq!(n, size, "gso {gso}, batch {b}, datagram {i}");
                    assert_eq!(
                        Header::decode(&buf[..HEADER_LEN]).unwrap().seq,
                        seq - (sizes.len() - 1 - i) as u64
                    );
                    assert!(
                        buf[HEADER_LEN..n] == want[..n - HEADER_LEN],
                        "gso {gso}, batch {b}, datagram {i}: the padding"
                    );
                }
            }
        }
    }

    #[test]
    fn gso_to_a_plain_receiver_arrives_as_single_datagrams() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        send_requests(bound(&rx), &[200; 10], true);
        let (got, _) = receive(&rx, &mut RecvBatch::headers(), 10);
        assert_eq!(got, (1..=10).map(|seq| (200, seq)).collect::<Vec<_>>());
    }

    #[test]
    fn replies_go_to_each_ipv6_sender_and_name_it() {
        // A responder on ::1 answers two senders: each reply goes to its own
        // sender (a run to one destination never takes the other's datagrams),
        // and each sender is read back as the address it sent from.
        let responder = responder_socket(SocketAddr::new(V6, 0), Buffers::default()).unwrap();
        let at = responder.local_addr().unwrap().as_socket().unwrap();
        assert!(at.is_ipv6());
        let (a, b) = (
            UdpSocket::bind("[::1]:0").unwrap(),
            UdpSocket::bind("[::1]:0").unwrap(),
        );
        a.send_to(&[0u8; 32], at).unwrap();
        b.send_to(&[0u8; 32], at).unwrap();
        let mut recv = RecvBatch::headers();
        let mut from = Vec::new();
        while from.len() < 2 {
            recv.recv(responder.as_raw_fd()).unwrap();
            from.extend(recv.datagrams().map(|d| d.from));
        }
        from.sort();
        let mut want = vec![bound(&a), bound(&b)];
        want.sort();
        assert_eq!(from, want);
        let mut batch = SendBatch::new();
        for (seq, to) in [(1, want[0]), (2, want[0]), (3, want[1])] {
            batch.push(64, Some(to), |h| {
                Header::request(1, 64, 64, seq, 7).encode(h)
            });
        }
        let mut gso = true;
        let sent = batch.send(responder.as_raw_fd(), &mut gso);
        assert_eq!(sent.sent, 3);
        let seqs = |s: &UdpSocket, want| {
            s.set_nonblocking(false).unwrap();
            // A reply sent to the wrong socket never comes: fail, not hang.
            s.set_read_timeout(Some(std::time::Duration::from_secs(2)))
                .unwrap();
            let mut buf = [0u8; 128];
            (0..want)
                .map(|_| {
                    let (n, from) = s.recv_from(&mut buf).expect("a reply in 2 s");
                    assert_eq!((n, from), (64, at));
                    Header::decode(&buf[..n]).unwrap().seq
                })
                .collect::<Vec<_>>()
        };
        let first = if bound(&a) == want[0] { &a } else { &b };
        let second = if bound(&a) == want[0] { &b } else { &a };
        assert_eq!(seqs(first, 2), [1, 2]);
        assert_eq!(seqs(second, 1), [3]);
    }

    #[test]
    fn a_joined_run_queues_what_as_many_joined_pushes_queue() {
        // The same datagrams queued two ways: one push_joined each, and
        // push_joined_run. 64-byte runs past the 64 one GSO message carries
        // (and past a batch laid out before in that size), a 2,000-byte run
        // past its 32 (the batch no longer of one size: queued one by one),
        // and a datagram too large for the frames. Both batches send the same
        // messages, and the same datagrams arrive.
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        // 177 datagrams at once: past the default 208 KiB of skbs.
        socket2::SockRef::from(&rx)
            .set_recv_buffer_size(1 << 20)
            .unwrap();
        let responder = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = bound(&rx);
        let pieces: [(usize, usize); 5] = [(64, 100), (64, 30), (2000, 40), (3000, 2), (64, 5)];
        // The messages a GSO send makes of the batch: its runs.
        let runs = |batch: &SendBatch| {
            let (mut runs, mut i) = (Vec::new(), 0);
            while i < batch.len {
                runs.push(batch.run_len[i]);
                i += usize::from(batch.run_len[i]);
            }
            runs
        };
        let queue = |batch: &mut SendBatch, by_run: bool| {
            batch.clear();
            let mut seq = 0u64;
            for (size, n) in pieces {
                let fill = |seq: u64| {
                    move |h: &mut [u8; HEADER_LEN]| {
                        Header::request(1, size as u32, 64, seq, 7).encode(h)
                    }
                };
                seq += 1;
                if batch.is_empty() {
                    batch.push(size, Some(to), fill(seq));
                } else {
                    batch.push_joined(size, fill(seq));
                }
                if by_run {
                    let from = seq;
                    batch.push_joined_run(n - 1, size, |k, h| fill(from + 1 + k as u64)(h));
                    seq += n as u64 - 1;
                } else {
                    for _ in 1..n {
                        seq += 1;
                        batch.push_joined(size, fill(seq));
                    }
                }
            }
            seq
        };
        let mut recv = RecvBatch::headers();
        for gso in [true, false] {
            let mut messages = Vec::new();
            let mut arrived = Vec::new();
            for by_run in [false, true] {
                // The second round finds the frames laid out by the first.
                let mut batch = SendBatch::new();
                for _ in 0..2 {
                    let queued = queue(&mut batch, by_run);
                    assert_eq!(batch.len() as u64, queued);
                    let mut on = gso;
                    let sent = batch.send(responder.as_raw_fd(), &mut on);
                    assert_eq!((sent.sent, on), (batch.len(), gso));
                    messages.push(runs(&batch));
                    let mut got = Vec::new();
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                    while got.len() < batch.len() && std::time::Instant::now() < deadline {
                        recv.recv(rx.as_raw_fd()).unwrap();
                        for d in recv.datagrams() {
                            got.push((d.len, Header::decode(d.head).unwrap().seq));
                        }
                    }
                    arrived.push(got);
                }
            }
            // 130 of 64 bytes in runs of up to 64, 40 of 2,000 in runs of
            // up to 32, then the 3,000-byte pair and the last five.
            for m in &messages {
                assert_eq!(m, &[64, 64, 2, 32, 8, 2, 5], "gso {gso}");
            }
            assert_eq!(arrived[0].len(), 177);
            for got in &arrived[1..] {
                assert_eq!(got, &arrived[0], "gso {gso}");
            }
        }
    }

    #[test]
    fn joined_datagrams_go_where_the_first_of_their_run_went_across_cut_runs() {
        // 40 replies to one receiver, the first addressed, the rest joined:
        // a size change cuts them (seq 30), and with GSO so does the most
        // one super-datagram carries (32 of 2,000 bytes): the later runs go
        // with the first's address. Then a second receiver, addressed, and
        // its joined replies.
        let (a, b) = (
            UdpSocket::bind("127.0.0.1:0").unwrap(),
            UdpSocket::bind("127.0.0.1:0").unwrap(),
        );
        let responder = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fill = |seq: u64, size: usize| {
            move |h: &mut [u8; HEADER_LEN]| Header::request(1, size as u32, 64, seq, 7).encode(h)
        };
        for gso in [true, false] {
            let mut batch = SendBatch::new();
            let mut want_a = Vec::new();
            for seq in 1..=40 {
                let size = if seq == 30 { 100 } else { 2000 };
                if seq == 1 {
                    batch.push(size, Some(bound(&a)), fill(seq, size));
                } else {
                    batch.push_joined(size, fill(seq, size));
                }
                want_a.push((size, seq));
            }
            batch.push(64, Some(bound(&b)), fill(41, 64));
            for seq in 42..=50 {
                batch.push_joined(64, fill(seq, 64));
            }
            let mut on = gso;
            let sent = batch.send(responder.as_raw_fd(), &mut on);
            assert_eq!((sent.sent, on), (50, gso));
            let mut recv = RecvBatch::headers();
            let mut read = |s: &UdpSocket, want: usize| {
                let mut got = Vec::new();
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
                while got.len() < want && std::time::Instant::now() < deadline {
                    recv.recv(s.as_raw_fd()).unwrap();
                    for d in recv.datagrams() {
                        assert_eq!(d.from, bound(&responder));
                        got.push((d.len, Header::decode(d.head).unwrap().seq));
                    }
                }
                got
            };
            assert_eq!(read(&a, 40), want_a, "gso {gso}");
            let want_b: Vec<_> = (41..=50).map(|seq| (64, seq)).collect();
            assert_eq!(read(&b, 10), want_b, "gso {gso}");
        }
    }
}
