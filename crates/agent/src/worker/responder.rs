//! The responder: answers every request that arrives on the worker's
//! responder socket, one reply each (a GRO message of requests gets one run
//! of replies), as far as the source's budget goes; and counts, per peer
//! and interval, the requests that came and the replies the kernel took.
//!
//! Per sender socket it keeps the sequence window and the running count of
//! the requests that arrived, which each reply carries back
//! ([`wire::COUNTED`]): the sender splits its own loss into the legs from
//! it. A flow silent for [`FORGET_AFTER`] intervals is forgotten (a layer's
//! sockets close at every dwell, and an always-on agent runs for weeks): its
//! sender, if it ever sends again, sees the count start over, and starts
//! its reckoning over (`agent::legs`).

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use rustc_hash::FxHashMap;

use super::super::budget::{Budget, Sources};
use super::super::counters::RxCounts;
use super::super::disk::engine::{Answer, Disk};
use super::super::sequence::SeqWindow;
use super::super::slots::{self, RX_SLOTS};
use super::super::udp::{self, BATCH, Datagram, Datagrams, Message, SendBatch};
use super::super::wire::{self, HEADER_LEN, Header, KIND_REQUEST};
use super::counting::{
    count_answers, count_order, count_requests, counted_interval, request_header, request_slot,
    still_open,
};
use super::{MAX_READS_PER_PASS, Worker};

/// Intervals a sender socket may stay silent before its state is dropped.
pub(super) const FORGET_AFTER: u64 = 12;

/// What the responder keeps of one sender's socket.
#[derive(Debug, Default)]
pub(super) struct RequestFlow {
    seen: SeqWindow,
    /// Requests that arrived from it, duplicates left out, and those of them
    /// left unanswered on purpose (over its budget, or a full disk queue):
    /// what its replies carry ([`Header::counting`]).
    arrived: u64,
    refused: u64,
    /// The interval its newest request arrived in.
    last_interval: u64,
}

impl RequestFlow {
    /// Starts afresh when `seq` renumbers the flow (a new socket on a reused
    /// port: [`SeqWindow::restart_if_renumbered`]), the count with it.
    #[inline]
    fn renumber_if(&mut self, seq: u64) {
        let highest = self.seen.highest();
        self.seen.restart_if_renumbered(seq);
        if self.seen.highest() != highest {
            (self.arrived, self.refused) = (0, 0);
        }
    }

    /// Whether it has been silent long enough to forget, with interval
    /// `number` in progress.
    pub(super) fn forgotten(&self, number: u64) -> bool {
        self.last_interval + FORGET_AFTER < number
    }
}

impl Worker {
    /// Forgets the sender sockets that have gone silent.
    pub(super) fn forget_silent_senders(&mut self) {
        let number = self.number;
        self.request_windows.retain(|_, f| !f.forgotten(number));
    }
}

impl Worker {
    /// Answers every request waiting on the responder socket, a batch at a time.
    pub(super) fn serve_requests(&mut self) {
        let Some(responder) = self.responder.as_ref() else {
            return;
        };
        let fd = responder.as_raw_fd();
        let mut serving = Serving {
            fd,
            id: self.id,
            hosts: self.plan.matrix.host_count(),
            me: self.plan.me as u16,
            most: self.plan.matrix.config.rx_size,
            number: self.number,
            pending: self.pending.as_ref().map(|p| p.number),
            answers_wait: self.disk.as_ref().is_some_and(|d| d.work.answers_wait()),
            scale: self.scale,
            now_ns: 0,
            rx: &mut self.rx,
            send: &mut self.send,
            replies: &mut self.replies,
            disk: self.disk.as_mut(),
            stray: &mut self.stray,
            said_disk_full: &mut self.said_disk_full,
        };
        for _ in 0..MAX_READS_PER_PASS {
            let n = match self.requests_in.recv(fd) {
                Ok(n) => n,
                Err(_) => continue,
            };
            if n == 0 {
                return;
            }
            // When this batch arrived, for the budgets: one clock read a batch.
            serving.now_ns = udp::monotonic_ns();
            serving.send.clear();
            serving.batch(
                self.requests_in.datagrams(),
                &self.plan.sources,
                &mut self.request_windows,
            );
            serving.replies.flush(fd, serving.send, serving.rx);
            if !self.requests_in.was_full() {
                return;
            }
        }
    }

    /// Takes in what the disk thread finished: counts the replies it sent in
    /// the interval of their requests (when that one is not reported yet),
    /// and lets the responder read again once there is room.
    pub(super) fn collect_disk(&mut self) {
        let Some(disk) = self.disk.as_mut() else {
            return;
        };
        let (current, pending) = (self.number, self.pending.as_ref().map(|p| p.number));
        let rx = &mut self.rx;
        disk.collect(|answer, sent| {
            let Some(n) = answer.interval.filter(|_| sent) else {
                return;
            };
            // A reply whose interval was reported already is not counted:
            // its rx row counted the replies to the requests it counted.
            if still_open(n, current, pending) {
                let counts = &mut rx[slots::rx_slot(n)][answer.peer as usize];
                counts.replies += 1;
                counts.reply_bytes += answer.size as u64;
            }
        });
    }
}

/// What serving a batch of requests reads and writes, borrowed from the
/// worker field by field (the batch itself, the sources and the windows are
/// borrowed apart).
struct Serving<'w> {
    fd: RawFd,
    id: usize,
    hosts: usize,
    me: u16,
    /// The largest reply the plan has this host send.
    most: u32,
    /// The interval in progress, and the one waiting out its hold.
    number: u64,
    pending: Option<u64>,
    /// Replies go out through the disk thread (a disk run that writes or
    /// reads for each request).
    answers_wait: bool,
    scale: Option<f64>,
    /// When the batch arrived.
    now_ns: u64,
    rx: &'w mut [Vec<RxCounts>; RX_SLOTS],
    send: &'w mut SendBatch,
    replies: &'w mut Replies,
    disk: Option<&'w mut Disk>,
    stray: &'w mut u64,
    said_disk_full: &'w mut bool,
}

impl Serving<'_> {
    /// Serves the datagrams of one receive batch.
    #[inline]
    fn batch(
        &mut self,
        mut datagrams: Datagrams<'_>,
        sources: &Sources,
        windows: &mut FxHashMap<SocketAddr, RequestFlow>,
    ) {
        // The datagrams of a GRO message share one sender: whether it is
        // a peer (and its budget), and its sequence window, are looked up
        // once per message, not hashed again for each of its (up to 64)
        // datagrams; and its replies after the first go where the first
        // goes, without writing the address again.
        let mut window: Option<&mut RequestFlow> = None;
        let mut budget: Option<&Budget> = None;
        let mut joined = false;
        while let Some(d) = datagrams.next() {
            if d.starts_message {
                budget = sources.get(&d.from.ip());
                window = budget.map(|_| windows.entry(d.from).or_default());
                if let Some(w) = window.as_deref_mut() {
                    w.last_interval = self.number;
                }
                joined = false;
            }
            if !self.answers_wait
                && d.starts_message
                && let Some(window) = window.as_deref_mut()
                && let Some(budget) = budget
                && let Some(m) = datagrams.message()
                && let Some(first) =
                    wire::decode_run(m.bytes, m.segment, m.count, KIND_REQUEST, false)
                && usize::from(first.src_index) < self.hosts
                && self.run(window, budget, &first, &m, d.from, &mut joined)
            {
                datagrams.skip_message();
                continue;
            }
            match (
                request_header(d.head, d.len, self.hosts),
                window.as_deref_mut(),
                budget,
            ) {
                (Some(request), Some(window), Some(budget)) => {
                    self.one(&request, &d, window, budget, &mut joined);
                }
                _ => *self.stray += 1,
            }
        }
    }

    /// A GRO message of requests from one send batch of a peer's, in order:
    /// counted once, answered with one run of replies whose headers differ
    /// only in what they echo. False, having counted nothing, when the
    /// window does not take it as one run: its datagrams go one by one.
    #[inline]
    fn run(
        &mut self,
        flow: &mut RequestFlow,
        budget: &Budget,
        first: &Header,
        m: &Message<'_>,
        from: SocketAddr,
        joined: &mut bool,
    ) -> bool {
        flow.renumber_if(first.seq);
        if !flow.seen.observe_run(first.seq, m.count as u64) {
            return false;
        }
        let n = m.count as u64;
        // The k-th reply of the run carries the count up to its request.
        let arrived_before = flow.arrived;
        flow.arrived += n;
        // The first `answered` of the run, as far as the source's budget
        // goes; the rest counted, unanswered.
        let answered = budget.take(self.now_ns, n, self.scale);
        let peer = usize::from(first.src_index);
        let (slot, late) = request_slot(first.interval_tag(), self.number, self.pending);
        let mut reply = [0u8; HEADER_LEN];
        // Its refusals are the run's last requests: after every reply of it.
        let header =
            Header::reply_to(first, self.me, self.most).counting(arrived_before + 1, flow.refused);
        flow.refused += n - answered;
        header.encode(&mut reply);
        let reply_size = header.packet_len as usize;
        let counts = &mut self.rx[slot][peer];
        counts.ttls.saw(m.ttl);
        count_requests(counts, late, n, n * m.segment as u64, m.arrived_ns);
        count_answers(counts, n, answered, reply_size, !late);
        if answered > 0 {
            self.replies.answer(
                self.fd,
                self.send,
                self.rx,
                peer as u32,
                (!late).then_some(slot),
                reply_size,
                from,
                joined,
                answered as usize,
                |k, h| {
                    let request = &m.bytes[k * m.segment..];
                    h.copy_from_slice(&reply);
                    h[wire::ECHOED].copy_from_slice(&request[wire::ECHOED]);
                    let count = (arrived_before + 1 + k as u64) as u32;
                    h[wire::COUNT].copy_from_slice(&count.to_be_bytes());
                },
            );
        }
        true
    }

    /// One request, datagram `d`: ordered in its sender's window, counted,
    /// and answered if the budget allows.
    #[inline]
    fn one(
        &mut self,
        request: &Header,
        d: &Datagram<'_>,
        flow: &mut RequestFlow,
        budget: &Budget,
        joined: &mut bool,
    ) {
        let (len, from) = (d.len, d.from);
        let peer = usize::from(request.src_index);
        flow.renumber_if(request.seq);
        let (slot, late) = request_slot(request.interval_tag(), self.number, self.pending);
        let counts = &mut self.rx[slot][peer];
        // Even a duplicate came by the path: its TTL counts its hops.
        counts.ttls.saw(d.ttl);
        // A duplicated request is not answered: it is the forward leg's
        // doing, and stays counted on this side alone.
        if !count_order(
            flow.seen.observe(request.seq),
            &mut counts.dup,
            &mut counts.ooo,
        ) {
            return;
        }
        flow.arrived += 1;
        let reply =
            Header::reply_to(request, self.me, self.most).counting(flow.arrived, flow.refused);
        let reply_size = reply.packet_len as usize;
        let answered = budget.take(self.now_ns, 1, self.scale);
        count_requests(counts, late, 1, len as u64, d.arrived_ns);
        // Counted as sent now, taken back by the flush if the kernel
        // refuses it: no second pass per datagram.
        count_answers(counts, 1, answered, reply_size, !late && !self.answers_wait);
        if answered == 0 {
            flow.refused += 1;
            return;
        }
        if self.answers_wait
            && let Some(queued) = self.answer_from_disk(&reply, from, peer, slot, late)
        {
            // A full disk queue leaves it unanswered: the host's disk, not
            // the way back.
            flow.refused += u64::from(!queued);
            return;
        }
        self.replies.answer(
            self.fd,
            self.send,
            self.rx,
            peer as u32,
            (!late).then_some(slot),
            reply_size,
            from,
            joined,
            1,
            |_, h| reply.encode(h),
        );
    }

    /// Hands a reply to the disk thread, which sends it once its work for
    /// the request is done: whether its queue took it; `None` when there is
    /// no disk thread.
    fn answer_from_disk(
        &mut self,
        reply: &Header,
        to: SocketAddr,
        peer: usize,
        slot: usize,
        late: bool,
    ) -> Option<bool> {
        let disk = self.disk.as_deref_mut()?;
        let mut header = [0u8; HEADER_LEN];
        reply.encode(&mut header);
        let queued = disk.answer(Answer {
            to,
            header,
            size: reply.packet_len as usize,
            peer: peer as u32,
            interval: (!late).then(|| counted_interval(slot, self.number)),
        });
        if !queued && !*self.said_disk_full {
            *self.said_disk_full = true;
            warn!(
                "mx agent: worker {}: the disk cannot keep up: requests that arrived go unanswered while its queue is full (the status line counts them: unanswered=n)",
                self.id
            );
        }
        Some(queued)
    }
}

/// The responder's side of a send batch: whom each queued reply answers.
pub(super) struct Replies {
    /// Matrix index of each queued reply in the batch, and the rx slot its
    /// request was counted in, to count what was sent (none for a late
    /// request: an rx row counts the replies to the requests it counts).
    peers: [u32; BATCH],
    slots: [Option<usize>; BATCH],
    /// `--gso`, until a route refuses a super-datagram.
    gso: bool,
}

impl Replies {
    pub(super) fn new(gso: bool) -> Replies {
        Replies {
            peers: [0; BATCH],
            slots: [None; BATCH],
            gso,
        }
    }

    /// Queues `n` replies to `peer` at `to` (the answers to one request, or
    /// to a GRO message of them), whose requests were counted in rx slot
    /// `slot` (which counts the replies as sent already), the `k`-th's header
    /// written by `fill(k, ..)`; sends the batch whenever it fills. `*joined`
    /// says the reply before went to `to` too: its address is then not
    /// written again, and a run of them is queued at once
    /// ([`SendBatch::push_joined_run`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn answer(
        &mut self,
        fd: RawFd,
        batch: &mut SendBatch,
        rx: &mut [Vec<RxCounts>; slots::RX_SLOTS],
        peer: u32,
        slot: Option<usize>,
        size: usize,
        to: SocketAddr,
        joined: &mut bool,
        n: usize,
        mut fill: impl FnMut(usize, &mut [u8; HEADER_LEN]),
    ) {
        let mut done = 0;
        while done < n {
            if batch.is_full() {
                self.flush(fd, batch, rx);
                *joined = false;
            }
            let from = batch.len();
            if !*joined {
                // The first of a message, or of a batch: addressed.
                self.peers[from] = peer;
                self.slots[from] = slot;
                batch.push(size, Some(to), |h| fill(done, h));
                *joined = true;
                done += 1;
                continue;
            }
            let take = (n - done).min(BATCH - from);
            self.peers[from..from + take].fill(peer);
            self.slots[from..from + take].fill(slot);
            batch.push_joined_run(take, size, |k, h| fill(done + k, h));
            done += take;
        }
    }

    /// Sends the queued replies; those the kernel did not take (a full send
    /// buffer) are taken back out of the replies counted, lost here, and
    /// show as fewer replies sent than requests arrived. A route that
    /// refuses GSO turns it off for the responder, and says so once.
    pub(super) fn flush(
        &mut self,
        fd: RawFd,
        batch: &mut SendBatch,
        rx: &mut [Vec<RxCounts>; slots::RX_SLOTS],
    ) {
        let gso = self.gso;
        let outcome = batch.send(fd, &mut self.gso);
        if gso && !self.gso {
            warn!("mx agent: a route refused UDP GSO for replies: one reply per trip from now on");
        }
        if outcome.sent < batch.len() {
            for i in (0..batch.len()).filter(|&i| !batch.was_sent(i)) {
                if let Some(slot) = self.slots[i] {
                    let counts = &mut rx[slot][self.peers[i] as usize];
                    counts.replies -= 1;
                    counts.reply_bytes -= batch.size(i) as u64;
                }
            }
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_matrix::Matrix;
    use mx_udp::RecvBatch;
    use std::net::{IpAddr, UdpSocket};
    use std::time::Duration;

    /// a sends b as much as it likes (`max`); b sends a nothing.
    fn sources(me: u32) -> Sources {
        let text = "# tx_size=64 rx_size=64 port=5300\n\
                    src\\dst,a=127.0.0.1,b=127.0.0.2\n\
                    a=127.0.0.1,,max\n\
                    b=127.0.0.2,,\n";
        let matrix = Matrix::parse(text.as_bytes(), "m.csv").unwrap();
        let addrs: Vec<Option<IpAddr>> =
            matrix.hosts().iter().map(|h| h.addr.parse().ok()).collect();
        Sources::new(&matrix, me, &addrs)
    }

    fn rx_rows() -> [Vec<RxCounts>; RX_SLOTS] {
        std::array::from_fn(|_| vec![RxCounts::default(); 2])
    }

    /// A request of host `src` in interval `interval`, 64 bytes.
    fn request(src: u16, seq: u64, interval: u64) -> [u8; 64] {
        let mut d = [0u8; 64];
        let h = Header::request(src, 64, 64, seq, 1).in_interval(interval);
        h.encode((&mut d[..HEADER_LEN]).try_into().unwrap());
        d
    }

    /// Serves what `senders` send to a responder at `at` as host `me`, with
    /// interval 10 in progress and none waiting: the rows, the strays, and
    /// the replies each sender got back.
    fn serve(
        me: u32,
        at: &str,
        senders: &[(&str, Vec<Vec<u8>>)],
    ) -> ([Vec<RxCounts>; RX_SLOTS], u64, Vec<usize>) {
        let (rx, stray, replies) = serve_replies(me, at, senders);
        (rx, stray, replies.iter().map(Vec::len).collect())
    }

    /// As [`serve`], with the headers of the replies each sender got back.
    fn serve_replies(
        me: u32,
        at: &str,
        senders: &[(&str, Vec<Vec<u8>>)],
    ) -> ([Vec<RxCounts>; RX_SLOTS], u64, Vec<Vec<Header>>) {
        let responder = UdpSocket::bind(at).unwrap();
        let to = responder.local_addr().unwrap();
        let mut sockets = Vec::new();
        let mut total = 0;
        for (from, datagrams) in senders {
            let s = UdpSocket::bind(from).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            for d in datagrams {
                s.send_to(d, to).unwrap();
                total += 1;
            }
            sockets.push(s);
        }
        let (mut rx, mut send, mut replies) = (rx_rows(), SendBatch::new(), Replies::new(false));
        let (mut stray, mut said, mut windows) = (0, false, FxHashMap::default());
        let sources = sources(me);
        let mut batch = RecvBatch::headers();
        let mut serving = Serving {
            fd: responder.as_raw_fd(),
            id: 0,
            hosts: 2,
            me: me as u16,
            most: 64,
            number: 10,
            pending: None,
            answers_wait: false,
            scale: None,
            now_ns: udp::monotonic_ns(),
            rx: &mut rx,
            send: &mut send,
            replies: &mut replies,
            disk: None,
            stray: &mut stray,
            said_disk_full: &mut said,
        };
        let mut read = 0;
        while read < total {
            read += batch.recv(responder.as_raw_fd()).unwrap();
            serving.send.clear();
            serving.batch(batch.datagrams(), &sources, &mut windows);
            serving.replies.flush(serving.fd, serving.send, serving.rx);
        }
        let mut buf = [0u8; 128];
        let got = sockets
            .iter()
            .map(|s| {
                std::iter::from_fn(|| {
                    let n = s.recv(&mut buf).ok()?;
                    Some(Header::decode(&buf[..n]).unwrap())
                })
                .collect()
            })
            .collect();
        (rx, stray, got)
    }

    #[test]
    fn each_reply_carries_the_count_of_its_flow_s_requests_that_arrived_duplicates_left_out() {
        let from_a = [1, 2, 4, 3, 3, 6]
            .iter()
            .map(|&seq| request(0, seq, 10).to_vec())
            .collect();
        // A second socket of the same host is another flow: its own count.
        let from_a_again = [1, 2]
            .iter()
            .map(|&seq| request(0, seq, 10).to_vec())
            .collect();
        let (_, _, got) = serve_replies(
            1,
            "127.0.0.2:0",
            &[("127.0.0.1:0", from_a), ("127.0.0.1:0", from_a_again)],
        );
        let seen: Vec<(u64, Option<u32>)> = got[0]
            .iter()
            .map(|h| (h.seq, h.tally().map(|t| t.arrived)))
            .collect();
        // The duplicate 3 is not answered and not counted; 5 never came.
        assert_eq!(
            seen,
            [
                (1, Some(1)),
                (2, Some(2)),
                (4, Some(3)),
                (3, Some(4)),
                (6, Some(5))
            ]
        );
        let again: Vec<Option<u32>> = got[1]
            .iter()
            .map(|h| h.tally().map(|t| t.arrived))
            .collect();
        assert_eq!(again, [Some(1), Some(2)]);
    }

    #[test]
    fn requests_count_once_in_order_duplicates_apart_late_ones_as_late_and_strays_as_nothing() {
        let mut short = request(0, 99, 10).to_vec();
        short.truncate(HEADER_LEN - 1);
        let mut reply = request(0, 98, 10);
        reply[4] = wire::KIND_REPLY;
        let from_a = vec![
            request(0, 1, 10).to_vec(),
            request(0, 2, 10).to_vec(),
            request(0, 4, 10).to_vec(),
            request(0, 3, 10).to_vec(),
            request(0, 3, 10).to_vec(),
            // Tagged with interval 9, reported already (none waits).
            request(0, 5, 9).to_vec(),
            short,
            reply.to_vec(),
            // An index past the matrix's hosts.
            request(7, 6, 10).to_vec(),
        ];
        // A sender that is no host of the matrix.
        let from_elsewhere = vec![request(0, 1, 10).to_vec()];
        let (rx, stray, got) = serve(
            1,
            "127.0.0.2:0",
            &[("127.0.0.1:0", from_a), ("127.0.0.3:0", from_elsewhere)],
        );
        let a = rx[slots::rx_slot(10)][0];
        assert_eq!((a.requests, a.request_bytes), (4, 4 * 64));
        assert_eq!((a.ooo, a.dup, a.late, a.over_plan), (1, 1, 1, 0));
        // Replies counted as sent: the four in their interval; the late
        // one's is sent, not counted (its row was reported).
        assert_eq!((a.replies, a.reply_bytes), (4, 4 * 64));
        assert_eq!(stray, 4);
        // Answered: the four and the late one; not the duplicate, no stray.
        assert_eq!(got, [5, 0]);
        // Nothing lands in another interval's row, nor on another peer.
        let elsewhere: u64 = rx.iter().flatten().map(|c| c.requests + c.late).sum();
        assert_eq!(elsewhere, 5);
    }

    #[test]
    fn requests_past_the_sources_budget_are_counted_over_plan_and_never_answered() {
        // b's budget towards a is nothing: every request counted, none answered.
        let from_b = (1..=3).map(|seq| request(1, seq, 10).to_vec()).collect();
        let (rx, stray, got) = serve(0, "127.0.0.1:0", &[("127.0.0.2:0", from_b)]);
        let b = rx[slots::rx_slot(10)][1];
        assert_eq!(
            (b.requests, b.over_plan, b.replies, b.reply_bytes),
            (3, 3, 0, 0)
        );
        assert_eq!((stray, got), (0, vec![0]));
    }

    #[test]
    fn replies_the_kernel_refused_are_taken_back_from_the_replies_counted() {
        let responder = UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = responder.as_raw_fd();
        let (mut rx, mut batch, mut replies) = (rx_rows(), SendBatch::new(), Replies::new(false));
        // Counted as sent when queued, as the responder does: two to a
        // good address, one to port 0 (the kernel refuses it), and one late
        // (slot none: never counted, so never taken back).
        let port_zero = "127.0.0.1:0".parse().unwrap();
        let queue = [
            (0, Some(2), peer.local_addr().unwrap(), 2),
            (1, Some(2), port_zero, 1),
            (1, None, port_zero, 1),
        ];
        for (who, slot, to, n) in queue {
            if let Some(slot) = slot {
                rx[slot][who].replies += n as u64;
                rx[slot][who].reply_bytes += 100 * n as u64;
            }
            let mut joined = false;
            replies.answer(
                fd,
                &mut batch,
                &mut rx,
                who as u32,
                slot,
                100,
                to,
                &mut joined,
                n,
                |k, h| Header::request(0, 100, 100, k as u64 + 1, 1).encode(h),
            );
        }
        replies.flush(fd, &mut batch, &mut rx);
        assert_eq!((rx[2][0].replies, rx[2][0].reply_bytes), (2, 200));
        assert_eq!((rx[2][1].replies, rx[2][1].reply_bytes), (0, 0));
        assert!(batch.is_empty(), "the flush leaves the batch empty");
    }
}
