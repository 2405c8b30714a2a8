//! The flows: this worker's sockets to its peers, one stream of one pair
//! each. Opened and closed with the layers, they send the requests their
//! pacers allow, a batch per sendmmsg, and read back the replies: each
//! counted in the interval of its request, ordered, and timed.

use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use nix::sys::epoll::{EpollEvent, EpollFlags};
use socket2::Socket;

use super::super::counters::FlowReport;
use super::super::legs::Legs;
use super::super::pacing::{self, Pacer};
use super::super::pair_rtt::{PairRtts, RttRun};
use super::super::plan::FlowSpec;
use super::super::sequence::SeqWindow;
use super::super::slots::{self, TX_SLOTS};
use super::super::udp::{self, BATCH, SendBatch};
use super::super::wire::{self, Header, KIND_REPLY};
use super::counting::{
    ReplyIntervals, TxSlot, count_order, count_replies, count_sent, reply_header, rtt_ns,
};
use super::{MAX_READS_PER_PASS, MAX_WAIT, Worker};

/// Requests one flow may send per pass: bounds a pass so replies get read.
const MAX_SENDS_PER_PASS: usize = pacing::MAX_PER_PASS;

/// A flow socket: one stream of one pair.
pub(super) struct Flow {
    pub(super) spec: FlowSpec,
    layer: Option<u32>,
    pub(super) socket: Socket,
    /// The socket's own UDP port: the stream's source port, which an ECMP
    /// fabric hashes to pick the stream's path.
    sport: u16,
    pub(super) pacer: Option<Pacer>,
    /// `--gso`, until the route refuses a super-datagram.
    gso: bool,
    next_seq: u64,
    /// The current interval's counts and the previous one's, by
    /// [`slots::tx_slot`] of the interval number.
    pub(super) slots: [TxSlot; TX_SLOTS],
    /// The set of RTT histograms this flow's pair records into.
    rtt_set: usize,
    /// The RTT of the last reply timed (ns), for the jitter.
    last_rtt_ns: Option<u64>,
    replies_seen: SeqWindow,
    /// Both legs, from the counts the replies carry.
    legs: Legs,
    /// The log said its peer's replies carry no count (once is enough).
    pub(super) said_uncounted: bool,
    /// The first interval this flow sends in: it reports from that one on.
    pub(super) first_interval: u64,
    /// Its layer ended: it sends no more, and closes once its last interval
    /// has been reported.
    pub(super) draining: bool,
    /// The socket's drop counter at the last interval's close.
    pub(super) drops_seen: u64,
    /// A refused send was logged already (once per flow is enough).
    said_refused: bool,
}

impl Flow {
    /// What this flow counted in tx slot `tx`, which is left empty; its
    /// target is its matrix rate times `scale` (the interval's rate scale).
    /// It carries its pair's RTTs if no flow of the pair took them yet.
    pub(super) fn take_report(
        &mut self,
        tx: usize,
        scale: Option<f64>,
        rtts: &mut PairRtts,
    ) -> FlowReport {
        let slot = &mut self.slots[tx];
        FlowReport {
            peer: self.spec.peer,
            sport: self.sport,
            layer: self.layer,
            target: self.spec.rate.map(|rate| scaled(rate, scale)),
            counts: std::mem::take(&mut slot.counts),
            rtt: rtts.take(self.rtt_set, tx),
            rtt_max_ns: std::mem::take(&mut slot.rtt_max_ns),
            rtt_min_ns: slot.rtt_min_ns.take(),
            legs: self.legs.take(),
        }
    }

    /// Its peer answers without counting (the original's agent), and the
    /// log has not said so yet.
    pub(super) fn peer_uncounted(&self) -> bool {
        self.legs.uncounted() && !self.said_uncounted
    }

    /// The RTT bookkeeping of `n` replies counted in tx slot `at` that came
    /// back at `now_ns` to requests sent at `t_send` (one send time: one
    /// RTT): the slot's sums, extremes and jitter, and the pair's histograms
    /// through `run`. A garbled `t_send` times nothing ([`rtt_ns`]).
    #[inline]
    fn time(
        &mut self,
        at: usize,
        now_ns: u64,
        t_send: u64,
        n: u64,
        run: &mut RttRun,
        rtts: &mut PairRtts,
    ) {
        if let Some(rtt) = rtt_ns(now_ns, t_send) {
            self.slots[at].time(&mut self.last_rtt_ns, rtt, n);
            run.record_n(rtts, self.rtt_set, at, rtt, n);
        }
    }
}

impl Worker {
    /// Opens the flow sockets of `layer` (the whole row for a fixed matrix).
    pub(super) fn open_layer(&mut self, layer: Option<usize>) -> std::io::Result<()> {
        for spec in self.plan.flows_for(self.id, layer) {
            let peer = &self.plan.matrix.hosts()[spec.peer as usize];
            let Some(peer_addr) = self.plan.peer_addrs[spec.peer as usize] else {
                return Err(std::io::Error::other(format!(
                    "cannot reach {} ({}): the address did not resolve to {}",
                    peer.name,
                    peer.endpoint(),
                    peer.ip().name()
                )));
            };
            let socket =
                udp::client_socket(self.plan.local_ip, peer_addr, self.plan.client_buffers)
                    .map_err(|e| {
                        std::io::Error::other(format!(
                            "cannot reach {} ({peer_addr}): {e}",
                            peer.name
                        ))
                    })?;
            let dscp = self.plan.matrix.config.dscp;
            udp::mark(&socket, dscp.tos(), &dscp.label())?;
            // The replies' TTL: the hops of the path back from the peer.
            udp::count_hops(&socket)?;
            if self.plan.gso
                && udp::coalescible(self.plan.matrix.config.rx_size as usize)
                && let Err(e) = udp::enable_gro(&socket)
            {
                warn!(
                    "mx agent: worker {}: no UDP_GRO on this kernel ({e})",
                    self.id
                );
            }
            let slot = self.free_slot();
            if !self.plan.busy_poll {
                // (--busy-poll polls every socket directly every pass: no
                // epoll registration, so no readiness callback per datagram.)
                self.epoll.add(
                    socket.as_fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, slot as u64),
                )?;
            }
            let drops_seen = udp::socket_drops(socket.as_raw_fd()).unwrap_or(0);
            // Bound by the connect: the kernel picked the port then.
            let sport = socket
                .local_addr()
                .ok()
                .and_then(|a| a.as_socket())
                .map_or(0, |a| a.port());
            let layer = layer.map(|l| l as u32);
            self.flows[slot] = Some(Flow {
                spec,
                layer,
                socket,
                sport,
                pacer: self
                    .start
                    .and(spec.rate)
                    .map(|rate| Pacer::new(scaled(rate, self.scale), Instant::now())),
                gso: self.plan.gso,
                next_seq: 1,
                slots: Default::default(),
                rtt_set: self.rtts.join((spec.peer, layer)),
                last_rtt_ns: None,
                replies_seen: SeqWindow::default(),
                legs: Legs::default(),
                said_uncounted: false,
                first_interval: self.number,
                draining: false,
                drops_seen,
                said_refused: false,
            });
        }
        Ok(())
    }

    /// Closes the flows `which` selects.
    pub(super) fn close_flows(&mut self, which: impl Fn(&Flow) -> bool) {
        for slot in self.flows.iter_mut() {
            if slot.as_ref().is_some_and(&which) {
                let flow = slot.take().expect("checked");
                self.rtts.leave((flow.spec.peer, flow.layer), flow.rtt_set);
                if !self.plan.busy_poll {
                    let _ = self.epoll.delete(flow.socket.as_fd());
                }
            }
        }
    }

    fn free_slot(&mut self) -> usize {
        if let Some(i) = self.flows.iter().position(Option::is_none) {
            i
        } else {
            self.flows.push(None);
            self.flows.len() - 1
        }
    }

    /// Sends what each live flow may; returns when the next send is due.
    pub(super) fn send_due(&mut self, now: Instant) -> Instant {
        let mut next_due = now + MAX_WAIT;
        let me = self.plan.me as u16;
        let (tx_size, rx_size) = (
            self.plan.matrix.config.tx_size,
            self.plan.matrix.config.rx_size,
        );
        let number = self.number;
        let tx = slots::tx_slot(number);
        for flow in self.flows.iter_mut().flatten() {
            if flow.draining {
                continue;
            }
            let allowed = match flow.pacer.as_mut() {
                Some(pacer) => {
                    // How long this flow's batch has been due: a worker that
                    // cannot keep its schedule (no CPU) shows it here.
                    let late = now.saturating_duration_since(pacer.next_due());
                    self.behind_ns = self.behind_ns.max(late.as_nanos() as u64);
                    pacer.available(now, MAX_SENDS_PER_PASS)
                }
                None => MAX_SENDS_PER_PASS,
            };
            // With `requests`, a request goes only against a payload read
            // from disk for it.
            let allowed = match self.disk.as_ref() {
                Some(disk) if disk.work.request_read > 0 => allowed.min(disk.reads_ready()),
                _ => allowed,
            };
            let gso = flow.gso;
            let (sent, refused) = send_requests(
                flow,
                tx,
                number,
                &mut self.send,
                allowed,
                me,
                tx_size,
                rx_size,
            );
            // Said once, off the hot path: what an operator needs to know.
            let peer = &self.plan.matrix.hosts()[flow.spec.peer as usize].name;
            if gso && !flow.gso {
                warn!(
                    "mx agent: worker {}: the route to {peer} refused UDP GSO: one datagram per trip to it from now on",
                    self.id
                );
            }
            if let Some(e) = refused
                && !flow.said_refused
            {
                flow.said_refused = true;
                warn!(
                    "mx agent: worker {}: the kernel refused requests to {peer} ({e}): counted in send_errors, never as sent",
                    self.id
                );
            }
            if let Some(disk) = self.disk.as_mut() {
                disk.spend_reads(sent);
            }
            match flow.pacer.as_mut() {
                Some(pacer) => {
                    pacer.spend(sent);
                    next_due = next_due.min(pacer.next_due());
                }
                // An unpaced flow wants the next pass at once.
                None => next_due = now,
            }
        }
        next_due
    }

    /// Reads the replies waiting on flow socket `slot`: counts each in the
    /// interval of its request, times it, orders it.
    pub(super) fn read_replies(&mut self, slot: usize) {
        let Some(flow) = self.flows.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let fd = flow.socket.as_raw_fd();
        let intervals = ReplyIntervals {
            current: slots::tx_slot(self.number),
            began_ns: self.began_ns,
            previous: self
                .pending
                .as_ref()
                .map(|p| (slots::tx_slot(p.number), p.began_ns)),
        };
        let mut run = RttRun::default();
        // Each reply goes to the disk: taken one by one.
        let runs = self.disk.as_ref().is_none_or(|d| d.work.reply_write == 0);
        for _ in 0..MAX_READS_PER_PASS {
            let n = match self.replies_in.recv(fd) {
                Ok(n) => n,
                // ECONNREFUSED: an ICMP port-unreachable from an absent
                // responder, reported once on the connected socket. Read on.
                Err(_) => continue,
            };
            if n == 0 {
                break;
            }
            let now_ns = udp::monotonic_ns();
            let mut datagrams = self.replies_in.datagrams();
            while let Some(d) = datagrams.next() {
                // A GRO message of replies to one send batch: in order, one
                // send time, one RTT. Counted as one.
                if runs
                    && d.starts_message
                    && let Some(m) = datagrams.message()
                    && let Some(first) =
                        wire::decode_run(m.bytes, m.segment, m.count, KIND_REPLY, true)
                    && flow.replies_seen.observe_run(first.seq, m.count as u64)
                {
                    let n = m.count as u64;
                    flow.legs.replies(first.seq, n, first.tally());
                    let (at, late) = intervals.of(first.t_send);
                    let counts = &mut flow.slots[at].counts;
                    counts.ttls.saw(m.ttl);
                    count_replies(counts, late, n, n * m.segment as u64);
                    flow.time(at, now_ns, first.t_send, n, &mut run, &mut self.rtts);
                    datagrams.skip_message();
                    continue;
                }
                let Some(reply) = reply_header(d.head, d.len) else {
                    self.stray += 1;
                    continue;
                };
                let (at, late) = intervals.of(reply.t_send);
                let counts = &mut flow.slots[at].counts;
                // Even a duplicate came by the path: its TTL counts its hops.
                counts.ttls.saw(d.ttl);
                let arrival = flow.replies_seen.observe(reply.seq);
                if !count_order(arrival, &mut counts.dup, &mut counts.ooo) {
                    continue;
                }
                flow.legs.replies(reply.seq, 1, reply.tally());
                count_replies(counts, late, 1, d.len as u64);
                if let Some(disk) = self.disk.as_mut()
                    && disk.work.reply_write > 0
                {
                    disk.write_reply();
                }
                flow.time(at, now_ns, reply.t_send, 1, &mut run, &mut self.rtts);
            }
            if !self.replies_in.was_full() {
                break;
            }
        }
        run.flush(&mut self.rtts);
    }
}

/// A flow's matrix rate times the rate scale in force (none: the matrix's).
pub(super) fn scaled(rate: f64, scale: Option<f64>) -> f64 {
    rate * scale.unwrap_or(1.0)
}

/// Sends up to `allowed` requests on `flow`, a batch per sendmmsg, counted in
/// slot `tx` and tagged with interval `number`; returns how many were offered
/// to the kernel (taken, or refused and counted as send errors: what the
/// pacer spends), and the first refusal. Every request of a batch carries the
/// clock read just before the call that sends it.
#[allow(clippy::too_many_arguments)]
fn send_requests(
    flow: &mut Flow,
    tx: usize,
    number: u64,
    batch: &mut SendBatch,
    allowed: usize,
    me: u16,
    tx_size: u32,
    rx_size: u32,
) -> (usize, Option<std::io::Error>) {
    let fd = flow.socket.as_raw_fd();
    let counts = &mut flow.slots[tx].counts;
    let mut sent = 0;
    let mut refused = None;
    while sent < allowed {
        let k = (allowed - sent).min(BATCH);
        batch.clear();
        let t_send = udp::monotonic_ns();
        let header = |j: usize| {
            Header::request(me, tx_size, rx_size, flow.next_seq + j as u64, t_send)
                .in_interval(number)
        };
        batch.push(tx_size as usize, None, |h| header(0).encode(h));
        batch.push_joined_run(k - 1, tx_size as usize, |j, h| header(j + 1).encode(h));
        let mut outcome = batch.send(fd, &mut flow.gso);
        if refused.is_none() {
            refused = outcome.error.take();
        }
        // A refused request used its sequence number and its pacing token
        // (retrying it at once would burst), but it never left: not sent.
        count_sent(counts, &outcome, tx_size);
        flow.next_seq += outcome.tried as u64;
        sent += outcome.tried;
        if outcome.tried < k {
            break;
        }
    }
    (sent, refused)
}

#[cfg(test)]
mod tests {
    use super::super::super::counters::TxCounts;
    use super::*;

    fn flow(rtts: &mut PairRtts) -> Flow {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let spec = FlowSpec {
            peer: 1,
            stream: 0,
            rate: None,
        };
        Flow {
            spec,
            layer: None,
            socket: Socket::from(socket),
            sport: 0,
            pacer: None,
            gso: false,
            next_seq: 1,
            slots: Default::default(),
            rtt_set: rtts.join((1, None)),
            last_rtt_ns: None,
            replies_seen: SeqWindow::default(),
            legs: Legs::default(),
            said_uncounted: false,
            first_interval: 0,
            draining: false,
            drops_seen: 0,
            said_refused: false,
        }
    }

    #[test]
    fn replies_are_timed_into_their_slot_and_the_pairs_histogram_alike() {
        let mut rtts = PairRtts::default();
        let mut flow = flow(&mut rtts);
        let mut run = RttRun::default();
        // A run of 3 replies at 100 us, then one at 150 us, in slot 1.
        flow.time(1, 1_000_000, 900_000, 3, &mut run, &mut rtts);
        flow.time(1, 2_000_000, 1_850_000, 1, &mut run, &mut rtts);
        // A garbled send time (in the future) times nothing, anywhere.
        flow.time(1, 2_000_000, 3_000_000, 5, &mut run, &mut rtts);
        run.flush(&mut rtts);
        let c = flow.slots[1].counts;
        assert_eq!((c.rtt_count, c.rtt_sum_ns), (4, 450_000));
        assert_eq!((c.jitter_sum_ns, c.jitter_count), (50_000, 3));
        assert_eq!(flow.last_rtt_ns, Some(150_000));
        let hist = rtts.take(flow.rtt_set, 1);
        assert_eq!(hist.iter().map(|(_, n)| n).sum::<u64>(), 4);
        assert_eq!(flow.slots[0].counts, TxCounts::default());
    }
}
