//! One worker thread: its responder socket, its shard of the flow sockets, and
//! the single event loop that drives them.
//!
//! Each pass of the loop: report if a tick is due (and switch layers on a
//! layered matrix); send what every flow's pacer allows, in batches; wait on
//! epoll until the next send is due (at most [`MAX_WAIT`]); then read every ready
//! socket in batches: requests are answered in one sendmmsg per batch, replies
//! are timed and counted. Nothing on this path allocates, locks or formats.

use std::net::SocketAddrV4;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use rustc_hash::FxHashMap;
use socket2::Socket;

use super::counters::{Batch, FlowReport, RxCounts, TxCounts};
use super::pacing::Pacer;
use super::plan::{AgentPlan, FlowSpec};
use super::rtt::FlowRtt;
use super::sequence::{self, Arrival, SeqWindow};
use super::udp::{self, BATCH, RecvBatch, SendBatch};
use crate::wire::{HEADER_LEN, Header, KIND_REPLY, KIND_REQUEST};

/// Requests one flow may send per pass: bounds a pass so replies get read.
const MAX_SENDS_PER_PASS: usize = 512;
/// Batches read from one socket per pass (16 x 64 = 1024 datagrams).
const MAX_READS_PER_PASS: usize = 16;
/// Longest epoll wait: how quickly a worker notices the stop flag.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// RTTs above this are not timing anything real (a garbled t_send).
const MAX_RTT_NS: u64 = 100_000_000_000;
/// epoll token of the responder socket; flow sockets use their slot index.
const RESPONDER: u64 = u64::MAX;

/// A flow socket: one stream of one pair.
struct Flow {
    spec: FlowSpec,
    layer: Option<u32>,
    socket: Socket,
    pacer: Option<Pacer>,
    /// `--gso`, until the route refuses a super-datagram.
    gso: bool,
    next_seq: u64,
    counts: TxCounts,
    rtt: FlowRtt,
    rtt_max_ns: u64,
    replies_seen: SeqWindow,
    /// Set when its layer ended: no more sends; closed at `close_at` (a tick).
    draining: bool,
    close_at: f64,
}

/// Wall-clock seconds since the Unix epoch.
pub fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The instant at which the wall clock will read `wall` (now if already past).
fn instant_at(wall: f64) -> Instant {
    let ahead = wall - wall_now();
    Instant::now() + Duration::from_secs_f64(ahead.max(0.0))
}

pub struct Worker {
    id: usize,
    plan: Arc<AgentPlan>,
    stop: Arc<AtomicBool>,
    out: Sender<Batch>,
    epoll: Epoll,
    responder: Option<Socket>,
    flows: Vec<Option<Flow>>,
    /// Receive buffers for the responder (requests) and the flows (replies):
    /// coalesced when GRO is on for that side, headers only otherwise.
    requests_in: Box<RecvBatch>,
    replies_in: Box<RecvBatch>,
    send: Box<SendBatch>,
    replies: Replies,
    padding: Box<[u8]>,
    rx: Vec<RxCounts>,
    /// Sequence windows of the client sockets sending to us, by source ip:port.
    request_windows: FxHashMap<SocketAddrV4, SeqWindow>,
    stray: u64,
    layer: Option<usize>,
    tick: f64,
    /// When `tick` is due, on the monotonic clock.
    tick_at: Instant,
    last_report: Instant,
    last_cpu_ns: u64,
}

impl Worker {
    /// Sets up worker `id`: its responder (a worker that cannot bind stays a
    /// sender, and says so) and the flows of the layer in force.
    pub fn new(
        id: usize,
        plan: Arc<AgentPlan>,
        stop: Arc<AtomicBool>,
        out: Sender<Batch>,
    ) -> std::io::Result<Worker> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let config = &plan.matrix.config;
        // GRO on a side only where two datagrams fit in one.
        let gro_requests = plan.gso && udp::coalescible(config.tx_size as usize);
        let gro_replies = plan.gso && udp::coalescible(config.rx_size as usize);
        let responder = match udp::responder_socket(plan.listen, plan.responder_buffers) {
            Ok(socket) => {
                if gro_requests && let Err(e) = udp::enable_gro(&socket) {
                    warn!("mx agent: worker {id}: no UDP_GRO on this kernel ({e})");
                }
                if !plan.busy_poll {
                    epoll.add(
                        socket.as_fd(),
                        EpollEvent::new(EpollFlags::EPOLLIN, RESPONDER),
                    )?;
                }
                Some(socket)
            }
            Err(e) => {
                warn!(
                    "mx agent: worker {id} not listening on {} ({e})",
                    plan.listen
                );
                None
            }
        };
        let n = plan.matrix.host_count();
        let tick = plan.first_tick;
        let mut worker = Worker {
            id,
            stop,
            out,
            epoll,
            responder,
            flows: Vec::new(),
            requests_in: if gro_requests {
                RecvBatch::coalesced()
            } else {
                RecvBatch::headers()
            },
            replies_in: if gro_replies {
                RecvBatch::coalesced()
            } else {
                RecvBatch::headers()
            },
            send: SendBatch::new(),
            replies: Replies {
                peers: [0; BATCH],
                gso: plan.gso,
            },
            padding: udp::padding(),
            rx: vec![RxCounts::default(); n],
            request_windows: FxHashMap::default(),
            stray: 0,
            layer: None,
            tick,
            tick_at: instant_at(tick),
            last_report: Instant::now(),
            last_cpu_ns: udp::thread_cpu_ns(),
            plan,
        };
        worker.layer = worker.plan.schedule().layer_at(wall_now());
        worker.open_layer(worker.layer);
        Ok(worker)
    }

    /// Runs until the stop flag or the deadline; the last batch is partial.
    pub fn run(mut self) {
        self.last_cpu_ns = udp::thread_cpu_ns();
        let mut events = [EpollEvent::empty(); 64];
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) || self.plan.deadline.is_some_and(|d| now >= d) {
                // Labelled with the end of the interval it belongs to.
                self.report(self.tick, now, true);
                return;
            }
            if now >= self.tick_at {
                self.on_tick(now);
            }
            let next_due = self.send_due(now);
            if self.plan.busy_poll {
                self.poll_everything();
                continue;
            }
            let wait = next_due
                .min(self.tick_at)
                .saturating_duration_since(Instant::now())
                .min(MAX_WAIT);
            // epoll waits in whole milliseconds. Round up: rounding down would
            // spin a core until the send is due. A send that comes up to 1 ms
            // late finds the tokens waiting and goes out in the same batch.
            let timeout = EpollTimeout::from(wait.as_micros().div_ceil(1000) as u16);
            let ready = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(e) => {
                    warn!("mx agent: worker {} died: epoll: {e}", self.id);
                    return;
                }
            };
            for event in &events[..ready] {
                match event.data() {
                    RESPONDER => self.serve_requests(),
                    slot => self.read_replies(slot as usize),
                }
            }
        }
    }

    /// Opens the flow sockets of `layer` (the whole row for a fixed matrix).
    fn open_layer(&mut self, layer: Option<usize>) {
        let now = Instant::now();
        for spec in self.plan.flows_for(self.id, layer) {
            let Some(peer_addr) = self.plan.peer_addrs[spec.peer as usize] else {
                let peer = &self.plan.matrix.hosts()[spec.peer as usize];
                warn!(
                    "mx agent: worker {} cannot reach {} ({}:{}): the address did not resolve",
                    self.id, peer.name, peer.addr, peer.port
                );
                continue;
            };
            let socket =
                match udp::client_socket(self.plan.local_ip, peer_addr, self.plan.client_buffers) {
                    Ok(socket) => socket,
                    Err(e) => {
                        let peer = &self.plan.matrix.hosts()[spec.peer as usize];
                        warn!(
                            "mx agent: worker {} cannot reach {} ({peer_addr}): {e}",
                            self.id, peer.name
                        );
                        continue;
                    }
                };
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
            if self.plan.busy_poll {
                // Polled directly every pass: no epoll registration, so no
                // readiness callback on every arriving datagram either.
            } else if let Err(e) = self.epoll.add(
                socket.as_fd(),
                EpollEvent::new(EpollFlags::EPOLLIN, slot as u64),
            ) {
                warn!("mx agent: worker {}: epoll add: {e}", self.id);
                continue;
            }
            self.flows[slot] = Some(Flow {
                spec,
                layer: layer.map(|l| l as u32),
                socket,
                pacer: spec.rate.map(|rate| Pacer::new(rate, now)),
                gso: self.plan.gso,
                next_seq: 1,
                counts: TxCounts::default(),
                rtt: FlowRtt::default(),
                rtt_max_ns: 0,
                replies_seen: SeqWindow::default(),
                draining: false,
                close_at: 0.0,
            });
        }
    }

    /// `--busy-poll`: read every socket every pass, never sleep. Lowest latency
    /// and no wakeups, at the price of a core spinning even when idle.
    fn poll_everything(&mut self) {
        self.serve_requests();
        for slot in 0..self.flows.len() {
            self.read_replies(slot);
        }
    }

    /// Flow sockets this worker holds (live and draining).
    pub fn flow_count(&self) -> usize {
        self.flows.iter().flatten().count()
    }

    fn free_slot(&mut self) -> usize {
        if let Some(i) = self.flows.iter().position(Option::is_none) {
            i
        } else {
            self.flows.push(None);
            self.flows.len() - 1
        }
    }

    /// A report tick: send the interval's batch, close drained flows, and on a
    /// layered matrix switch to the layer of the new interval.
    fn on_tick(&mut self, now: Instant) {
        let tick = self.tick;
        self.report(tick, now, false);
        for slot in self.flows.iter_mut() {
            if slot
                .as_ref()
                .is_some_and(|f| f.draining && f.close_at <= tick + 1e-6)
            {
                let flow = slot.take().expect("checked");
                if !self.plan.busy_poll {
                    let _ = self.epoll.delete(flow.socket.as_fd());
                }
            }
        }
        let layer = self.plan.schedule().layer_at(tick);
        if layer != self.layer {
            // Keep the old sockets one interval for replies still in flight.
            let close_at = tick + self.plan.interval;
            for flow in self.flows.iter_mut().flatten() {
                if !flow.draining {
                    flow.draining = true;
                    flow.close_at = close_at;
                }
            }
            self.layer = layer;
            self.open_layer(layer);
        }
        self.tick = tick + self.plan.interval;
        // The next tick one interval on, on the monotonic clock: a wall clock
        // stepped by hand or by NTP neither stalls the reports (a step back)
        // nor bursts empty ones (a step forward). The labels keep the timeline
        // the run started on, which is the fleet's: the layers stay in step.
        self.tick_at += Duration::from_secs_f64(self.plan.interval);
    }

    /// Moves this interval's counters into a batch for the reporter.
    fn report(&mut self, tick: f64, now: Instant, last: bool) {
        let elapsed = now.duration_since(self.last_report).as_secs_f64().max(1e-3);
        let cpu_ns = udp::thread_cpu_ns();
        let cpu = (cpu_ns - self.last_cpu_ns) as f64 / 1e9;
        self.last_report = now;
        self.last_cpu_ns = cpu_ns;
        let mut flows = Vec::new();
        for flow in self.flows.iter_mut().flatten() {
            let counts = std::mem::take(&mut flow.counts);
            // A draining flow reports only the replies it caught.
            if flow.draining && counts.replies == 0 && counts.rtt_count == 0 && counts.dup == 0 {
                continue;
            }
            flows.push(FlowReport {
                peer: flow.spec.peer,
                layer: flow.layer,
                draining: flow.draining,
                target: if flow.draining { None } else { flow.spec.rate },
                counts,
                rtt: flow.rtt.take(),
                rtt_max_ns: std::mem::take(&mut flow.rtt_max_ns),
            });
        }
        let rx = self
            .rx
            .iter_mut()
            .enumerate()
            .filter(|(_, c)| !c.is_empty())
            .map(|(peer, c)| (peer as u32, std::mem::take(c)))
            .collect();
        let batch = Batch {
            worker: self.id,
            tick,
            elapsed,
            cpu,
            flows,
            rx,
            stray: std::mem::take(&mut self.stray),
            layer: self.layer.map(|l| l as u32),
            last,
        };
        // The reporter is gone only when the agent is shutting down.
        let _ = self.out.send(batch);
    }

    /// Sends what each live flow may; returns when the next send is due.
    fn send_due(&mut self, now: Instant) -> Instant {
        let mut next_due = now + MAX_WAIT;
        let me = self.plan.me as u16;
        let (tx_size, rx_size) = (
            self.plan.matrix.config.tx_size,
            self.plan.matrix.config.rx_size,
        );
        for flow in self.flows.iter_mut().flatten() {
            if flow.draining {
                continue;
            }
            let allowed = match flow.pacer.as_mut() {
                Some(pacer) => pacer.available(now, MAX_SENDS_PER_PASS),
                None => MAX_SENDS_PER_PASS,
            };
            let sent = send_requests(
                flow,
                &mut self.send,
                &self.padding,
                allowed,
                me,
                tx_size,
                rx_size,
            );
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

    /// Answers every request waiting on the responder socket, a batch at a time.
    fn serve_requests(&mut self) {
        let Some(responder) = self.responder.as_ref() else {
            return;
        };
        let fd = responder.as_raw_fd();
        let hosts = self.plan.matrix.host_count();
        let me = self.plan.me as u16;
        for _ in 0..MAX_READS_PER_PASS {
            let n = match self.requests_in.recv(fd) {
                Ok(n) => n,
                Err(_) => continue,
            };
            if n == 0 {
                return;
            }
            self.send.clear();
            for d in self.requests_in.datagrams() {
                let request = match Header::decode(d.head) {
                    Some(h)
                        if h.kind == KIND_REQUEST
                            && d.len >= HEADER_LEN
                            && usize::from(h.src_index) < hosts
                            && self.plan.allowed_sources.contains(d.from.ip()) =>
                    {
                        h
                    }
                    _ => {
                        self.stray += 1;
                        continue;
                    }
                };
                let peer = usize::from(request.src_index);
                let window = self.request_windows.entry(d.from).or_default();
                if request.seq == 1 && window.highest() > sequence::WINDOW {
                    // A new socket on a reused port numbers from 1 again. (A
                    // 1 arriving twice early on is a duplicate, not a restart.)
                    *window = SeqWindow::default();
                }
                let counts = &mut self.rx[peer];
                match window.observe(request.seq) {
                    Arrival::Duplicate => {
                        // Not answered: a duplicated request is the forward
                        // leg's doing, and stays counted on this side alone.
                        counts.dup += 1;
                        continue;
                    }
                    Arrival::OutOfOrder => counts.ooo += 1,
                    Arrival::InOrder => {}
                }
                counts.requests += 1;
                counts.request_bytes += d.len as u64;
                if self.send.is_full() {
                    self.replies
                        .flush(fd, &mut self.send, &self.padding, &mut self.rx);
                }
                let reply = Header::reply_to(&request, me);
                self.replies.queue(
                    &mut self.send,
                    peer as u32,
                    reply.packet_len as usize,
                    d.from,
                    |h| reply.encode(h),
                );
            }
            self.replies
                .flush(fd, &mut self.send, &self.padding, &mut self.rx);
            if !self.requests_in.was_full() {
                return;
            }
        }
    }

    /// Reads the replies waiting on flow socket `slot`: counts, times, orders them.
    fn read_replies(&mut self, slot: usize) {
        let Some(flow) = self.flows.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let fd = flow.socket.as_raw_fd();
        for _ in 0..MAX_READS_PER_PASS {
            let n = match self.replies_in.recv(fd) {
                Ok(n) => n,
                // ECONNREFUSED: an ICMP port-unreachable from an absent
                // responder, reported once on the connected socket. Read on.
                Err(_) => continue,
            };
            if n == 0 {
                return;
            }
            let now_ns = udp::monotonic_ns();
            for d in self.replies_in.datagrams() {
                let reply = match Header::decode(d.head) {
                    Some(h) if h.kind == KIND_REPLY && d.len >= HEADER_LEN => h,
                    _ => {
                        self.stray += 1;
                        continue;
                    }
                };
                match flow.replies_seen.observe(reply.seq) {
                    Arrival::Duplicate => {
                        flow.counts.dup += 1;
                        continue;
                    }
                    Arrival::OutOfOrder => flow.counts.ooo += 1,
                    Arrival::InOrder => {}
                }
                flow.counts.replies += 1;
                flow.counts.reply_bytes += d.len as u64;
                if let Some(rtt) = now_ns.checked_sub(reply.t_send).filter(|&r| r < MAX_RTT_NS) {
                    flow.counts.rtt_sum_ns += rtt;
                    flow.counts.rtt_count += 1;
                    flow.rtt_max_ns = flow.rtt_max_ns.max(rtt);
                    flow.rtt.record(rtt);
                }
            }
            if !self.replies_in.was_full() {
                return;
            }
        }
    }
}

/// The responder's side of a send batch: whom each queued reply answers.
struct Replies {
    /// Matrix index of each queued reply in the batch, to count what was sent.
    peers: [u32; BATCH],
    /// `--gso`, until a route refuses a super-datagram.
    gso: bool,
}

impl Replies {
    fn queue(
        &mut self,
        batch: &mut SendBatch,
        peer: u32,
        size: usize,
        to: SocketAddrV4,
        fill: impl FnOnce(&mut [u8; HEADER_LEN]),
    ) {
        self.peers[batch.len()] = peer;
        batch.push(size, Some(to), fill);
    }

    /// Sends the queued replies and counts those the kernel took; the rest
    /// (a full send buffer) are lost here, and show as fewer replies sent
    /// than requests arrived.
    fn flush(&mut self, fd: RawFd, batch: &mut SendBatch, padding: &[u8], rx: &mut [RxCounts]) {
        batch.send(fd, padding, &mut self.gso);
        for i in (0..batch.len()).filter(|&i| batch.was_sent(i)) {
            let counts = &mut rx[self.peers[i] as usize];
            counts.replies += 1;
            counts.reply_bytes += batch.size(i) as u64;
        }
        batch.clear();
    }
}

/// Sends up to `allowed` requests on `flow`, a batch per sendmmsg; returns how
/// many were offered to the kernel (taken, or refused and counted as send
/// errors): what the pacer spends. Every request of a batch carries the clock
/// read just before the call that sends it.
fn send_requests(
    flow: &mut Flow,
    batch: &mut SendBatch,
    padding: &[u8],
    allowed: usize,
    me: u16,
    tx_size: u32,
    rx_size: u32,
) -> usize {
    let fd = flow.socket.as_raw_fd();
    let mut sent = 0;
    while sent < allowed {
        let k = (allowed - sent).min(BATCH);
        batch.clear();
        let t_send = udp::monotonic_ns();
        for j in 0..k as u64 {
            let header = Header::request(me, tx_size, rx_size, flow.next_seq + j, t_send);
            batch.push(tx_size as usize, None, |h| header.encode(h));
        }
        let outcome = batch.send(fd, padding, &mut flow.gso);
        // A refused request used its sequence number and its pacing token
        // (retrying it at once would burst), but it never left: not sent.
        flow.counts.send_errors += (outcome.tried - outcome.sent) as u64;
        flow.next_seq += outcome.tried as u64;
        flow.counts.sent += outcome.sent as u64;
        flow.counts.sent_bytes += outcome.sent as u64 * u64::from(tx_size);
        sent += outcome.tried;
        if outcome.tried < k {
            break;
        }
    }
    sent
}
