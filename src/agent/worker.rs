//! One worker thread: its responder socket, its shard of the flow sockets, and
//! the single event loop that drives them.
//!
//! Each pass of the loop: report an interval whose late packets have had their
//! time; close the interval in progress if its tick is due (and switch layers
//! on a layered matrix); send what every flow's pacer allows, in batches; wait
//! on epoll until the next thing is due (at most `MAX_WAIT`); then read every
//! ready socket in batches: requests are answered in one sendmmsg per batch,
//! replies are timed and counted. Nothing on this path allocates, locks or
//! formats.
//!
//! Until the run's start instant ([`RunClock`]) the worker only answers:
//! the fleet's flows begin together, once every responder is listening. After
//! the end instant it answers for the grace period, then exits.
//!
//! Counting: every request is counted in the interval it was sent in, on both
//! sides (the sender by its own clock, the receiver by the interval tag the
//! request carries), and every reply in the interval of its request. An
//! interval is therefore reported only after a hold, when the replies
//! to its last requests are back ([`crate::report::hold_seconds`], and
//! [`slots`]).

use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use rustc_hash::FxHashMap;
use socket2::Socket;

use super::budget::Budget;
use super::clock::{ARMED_TIMEOUT, Awaited, RunClock, Start};
use super::counters::{Batch, FlowReport, RxCounts, SocketDrops, TxCounts};
use super::disk::engine::{Answer, Disk};
use super::disk::stats::DiskStats;
use super::pacing::Pacer;
use super::pair_rtt::{PairRtts, RttRun};
use super::plan::{AgentPlan, FlowSpec};
use super::sequence::{Arrival, SeqWindow};
use super::slots::{self, RxSlot, TX_SLOTS};
use super::udp::{self, BATCH, RecvBatch, SendBatch};
use super::wire::{self, HEADER_LEN, Header, KIND_REPLY, KIND_REQUEST};
use crate::units::wall_now;

/// Requests one flow may send per pass: bounds a pass so replies get read.
const MAX_SENDS_PER_PASS: usize = super::pacing::MAX_PER_PASS;
/// recvmmsg calls on one socket per pass: 16 x 256 (`udp::BATCH`) = 4,096
/// datagrams, or with GRO 16 x 16 messages of up to 64 (16,384).
const MAX_READS_PER_PASS: usize = 16;
/// Longest epoll wait: how quickly a worker notices the stop flag.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// RTTs above this are not timing anything real (a garbled t_send).
const MAX_RTT_NS: u64 = 100_000_000_000;
/// epoll token of the responder socket; flow sockets use their slot index.
const RESPONDER: u64 = u64::MAX;
/// epoll token of the disk thread's completions.
const DISK: u64 = u64::MAX - 1;

/// How long after its tick an interval is reported (the report's hold).
fn hold(interval: f64) -> Duration {
    Duration::from_secs_f64(crate::report::hold_seconds(interval))
}

/// What one flow socket counted in one interval (its RTTs go to its pair's
/// histograms: [`PairRtts`]).
#[derive(Default)]
struct TxSlot {
    counts: TxCounts,
    rtt_max_ns: u64,
    rtt_min_ns: Option<u64>,
}

impl TxSlot {
    /// Times `n` replies that took `rtt` ns each (a GRO run of replies to
    /// one send batch shares one send time, so one RTT). `last` is the flow
    /// socket's previous RTT, kept across intervals: the jitter is the mean
    /// absolute difference between successive round trips (RFC 3550's
    /// measure, unsmoothed), and within a run the differences are 0.
    fn time(&mut self, last: &mut Option<u64>, rtt: u64, n: u64) {
        let c = &mut self.counts;
        c.rtt_sum_ns += rtt * n;
        c.rtt_count += n;
        self.rtt_max_ns = self.rtt_max_ns.max(rtt);
        self.rtt_min_ns = Some(self.rtt_min_ns.map_or(rtt, |m| m.min(rtt)));
        match last.replace(rtt) {
            Some(before) => {
                c.jitter_sum_ns += rtt.abs_diff(before);
                c.jitter_count += n;
            }
            None => c.jitter_count += n - 1,
        }
    }
}

/// A flow socket: one stream of one pair.
struct Flow {
    spec: FlowSpec,
    layer: Option<u32>,
    socket: Socket,
    pacer: Option<Pacer>,
    /// `--gso`, until the route refuses a super-datagram.
    gso: bool,
    next_seq: u64,
    /// The current interval's counts and the previous one's, by
    /// [`slots::tx_slot`] of the interval number.
    slots: [TxSlot; TX_SLOTS],
    /// The set of RTT histograms this flow's pair records into.
    rtt_set: usize,
    /// The RTT of the last reply timed (ns), for the jitter.
    last_rtt_ns: Option<u64>,
    replies_seen: SeqWindow,
    /// The first interval this flow sends in: it reports from that one on.
    first_interval: u64,
    /// Its layer ended: it sends no more, and closes once its last interval
    /// has been reported.
    draining: bool,
    /// The socket's drop counter at the last interval's close.
    drops_seen: u64,
    /// A refused send was logged already (once per flow is enough).
    said_refused: bool,
}

impl Flow {
    /// What this flow counted in tx slot `tx`, which is left empty; its
    /// target is its matrix rate times `scale` (the interval's rate scale).
    /// It carries its pair's RTTs if no flow of the pair took them yet.
    fn take_report(&mut self, tx: usize, scale: Option<f64>, rtts: &mut PairRtts) -> FlowReport {
        let slot = &mut self.slots[tx];
        FlowReport {
            peer: self.spec.peer,
            layer: self.layer,
            target: self.spec.rate.map(|rate| scaled(rate, scale)),
            counts: std::mem::take(&mut slot.counts),
            rtt: rtts.take(self.rtt_set, tx),
            rtt_max_ns: std::mem::take(&mut slot.rtt_max_ns),
            rtt_min_ns: slot.rtt_min_ns.take(),
        }
    }
}

/// An interval that has closed and waits for its late packets.
struct Pending {
    number: u64,
    tick: f64,
    /// Monotonic ns at which it began (replies to requests sent before are older).
    began_ns: u64,
    report_at: Instant,
    elapsed: f64,
    sending: f64,
    cpu: f64,
    stray: u64,
    drops: SocketDrops,
    behind_ns: u64,
    layer: Option<u32>,
    disk: Option<DiskStats>,
    /// The rate scale the interval ran at.
    scale: Option<f64>,
    gso_pkts: u64,
    gro_pkts: u64,
}

pub struct Worker {
    id: usize,
    plan: Arc<AgentPlan>,
    clock: Arc<RunClock>,
    out: Sender<Batch>,
    epoll: Epoll,
    responder: Option<Socket>,
    responder_drops_seen: u64,
    flows: Vec<Option<Flow>>,
    rtts: PairRtts,
    /// Receive buffers for the responder (requests) and the flows (replies):
    /// coalesced when GRO is on for that side, headers only otherwise.
    requests_in: Box<RecvBatch>,
    replies_in: Box<RecvBatch>,
    /// Requests and replies on their way out; its padding is what they
    /// carry past the header (file data, for a disk run that reads requests).
    send: Box<SendBatch>,
    replies: Replies,
    /// Requests from each peer, by [`slots::rx_slot`] of the interval number.
    rx: [Vec<RxCounts>; slots::RX_SLOTS],
    /// Sequence windows of the client sockets sending to us, by source ip:port.
    request_windows: FxHashMap<SocketAddr, SeqWindow>,
    stray: u64,
    behind_ns: u64,
    layer: Option<usize>,
    /// The start, once the run has one; until then the worker only answers.
    start: Option<Start>,
    /// The factor every flow's matrix rate is scaled by in the interval in
    /// progress (`mx run --ramp`); `None`: not scaled. It changes only as an
    /// interval opens, so every interval runs at one scale.
    scale: Option<f64>,
    /// The interval in progress: its number (tick / interval), its tick (the
    /// wall-clock label of its end), when the tick is due on the monotonic
    /// clock, and when the interval began (monotonic ns).
    number: u64,
    tick: f64,
    tick_at: Instant,
    began_ns: u64,
    pending: Option<Pending>,
    last_report: Instant,
    last_cpu_ns: u64,
    /// The disk thread, in a disk run.
    disk: Option<Disk>,
    /// The log said the disk queue overflowed (once is enough).
    said_disk_full: bool,
}

impl Worker {
    /// Sets up worker `id`: its responder (a worker that cannot bind stays a
    /// sender, and says so) and the flows of the layer in force. A flow that
    /// cannot be opened is an error: the agent must not run quietly without it.
    pub fn new(
        id: usize,
        plan: Arc<AgentPlan>,
        clock: Arc<RunClock>,
        out: Sender<Batch>,
    ) -> std::io::Result<Worker> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let config = &plan.matrix.config;
        // GRO on a side only where two datagrams fit in one.
        let gro_requests = plan.gso && udp::coalescible(config.tx_size as usize);
        let gro_replies = plan.gso && udp::coalescible(config.rx_size as usize);
        let responder = match udp::responder_socket(plan.listen, plan.responder_buffers) {
            Ok(socket) => {
                // The replies carry the run's class too.
                udp::mark(&socket, config.dscp)?;
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
        let mut worker = Worker {
            id,
            clock,
            out,
            epoll,
            responder,
            responder_drops_seen: 0,
            flows: Vec::new(),
            rtts: PairRtts::default(),
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
                slots: [None; BATCH],
                gso: plan.gso,
            },
            rx: std::array::from_fn(|_| vec![RxCounts::default(); n]),
            request_windows: FxHashMap::default(),
            stray: 0,
            behind_ns: 0,
            layer: None,
            start: None,
            scale: None,
            number: 0,
            tick: 0.0,
            tick_at: Instant::now(),
            began_ns: 0,
            pending: None,
            last_report: Instant::now(),
            last_cpu_ns: udp::thread_cpu_ns(),
            disk: None,
            said_disk_full: false,
            plan,
        };
        worker.start_disk()?;
        worker.layer = worker.plan.schedule().layer_at(wall_now());
        worker.open_layer(worker.layer)?;
        Ok(worker)
    }

    /// Runs until the stop flag or the exit instant; the last batch is partial.
    pub fn run(mut self) {
        let armed_since = Instant::now();
        let mut events = [EpollEvent::empty(); 64];
        loop {
            let now = Instant::now();
            if self.start.is_none() {
                match self.clock.awaited() {
                    Awaited::Begun(start) => self.begin(start),
                    Awaited::Start if now.duration_since(armed_since) <= ARMED_TIMEOUT => {}
                    Awaited::Ended | Awaited::Start => {
                        self.finish(now);
                        return;
                    }
                }
            }
            let now_ns = udp::monotonic_ns();
            let leaving =
                self.clock.stopping() || self.clock.exit_ns().is_some_and(|x| now_ns >= x);
            if let Some(pending) = &self.pending
                && now >= pending.report_at
            {
                // What already arrived belongs in it, even if this worker was
                // held off the CPU past the hold: read everything first.
                self.poll_everything();
                let pending = self.pending.take().expect("checked");
                self.report(pending);
            }
            if leaving && self.pending.is_none() {
                self.finish(now);
                return;
            }
            if self.start.is_some() && !leaving && now >= self.tick_at {
                self.close_interval(now);
            }
            let sending = self.start.is_some_and(|s| now >= s.at)
                && !leaving
                && self.clock.end_ns().is_none_or(|end| now_ns < end);
            let mut next = now + MAX_WAIT;
            if sending {
                next = next.min(self.send_due(now));
            } else if let Some(start) = self.start
                && now < start.at
            {
                // The rate of the first interval may be ordered until it begins.
                self.apply_scale();
                next = next.min(start.at);
            }
            if self.start.is_some() {
                next = next.min(self.tick_at);
            }
            if let Some(pending) = &self.pending {
                next = next.min(pending.report_at);
            }
            if self.plan.busy_poll {
                self.poll_everything();
                continue;
            }
            let wait = next.saturating_duration_since(Instant::now()).min(MAX_WAIT);
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
                    DISK => self.collect_disk(),
                    slot => self.read_replies(slot as usize),
                }
            }
        }
    }

    /// The run has its start: the first interval ends at the first tick, the
    /// pacers start empty at the start instant.
    fn begin(&mut self, start: Start) {
        let interval = self.plan.interval;
        self.start = Some(start);
        self.tick = start.first_tick;
        self.number = slots::interval_number(start.first_tick, interval);
        self.tick_at = start.at + Duration::from_secs_f64((start.first_tick - start.wall).max(0.0));
        self.began_ns = start.at_ns;
        self.last_report = start.at;
        self.last_cpu_ns = udp::thread_cpu_ns();
        self.stray = 0;
        self.behind_ns = 0;
        for slot in &mut self.rx {
            slot.fill(RxCounts::default());
        }
        // The layer in force when the flows begin.
        let layer = self.plan.schedule().layer_at(start.wall);
        if layer != self.layer {
            self.close_flows(|_| true);
            self.layer = layer;
            if let Err(e) = self.open_layer(layer) {
                warn!("mx agent: worker {}: {e}", self.id);
            }
        }
        self.scale = self.clock.rate_for(self.number);
        for flow in self.flows.iter_mut().flatten() {
            flow.first_interval = self.number;
            flow.pacer = flow
                .spec
                .rate
                .map(|rate| Pacer::new(scaled(rate, self.scale), start.at));
            flow.slots = Default::default();
        }
        self.rtts.clear();
        self.read_drops();
    }

    /// Takes up the rate scale ordered for the interval in progress, if it
    /// changed: every live flow's pacer moves to its matrix rate times it.
    /// Called as an interval opens (and while the first waits to begin):
    /// never on the per-packet path.
    fn apply_scale(&mut self) {
        let scale = self.clock.rate_for(self.number);
        if scale == self.scale {
            return;
        }
        self.scale = scale;
        for flow in self.flows.iter_mut().flatten() {
            if let (Some(pacer), Some(rate)) = (flow.pacer.as_mut(), flow.spec.rate) {
                pacer.set_rate(scaled(rate, scale));
            }
        }
    }

    /// Opens the flow sockets of `layer` (the whole row for a fixed matrix).
    fn open_layer(&mut self, layer: Option<usize>) -> std::io::Result<()> {
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
            udp::mark(&socket, self.plan.matrix.config.dscp)?;
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
            let layer = layer.map(|l| l as u32);
            self.flows[slot] = Some(Flow {
                spec,
                layer,
                socket,
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
                first_interval: self.number,
                draining: false,
                drops_seen,
                said_refused: false,
            });
        }
        Ok(())
    }

    /// Closes the flows `which` selects.
    fn close_flows(&mut self, which: impl Fn(&Flow) -> bool) {
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

    /// `--busy-poll`: read every socket every pass, never sleep. Lowest latency
    /// and no wakeups, at the price of a core spinning even when idle.
    fn poll_everything(&mut self) {
        self.collect_disk();
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

    /// The increase of every socket's drop counter since the last call.
    fn read_drops(&mut self) -> SocketDrops {
        let mut drops = SocketDrops::default();
        if let Some(responder) = &self.responder
            && let Some(total) = udp::socket_drops(responder.as_raw_fd())
        {
            drops.requests = total.saturating_sub(self.responder_drops_seen);
            self.responder_drops_seen = total;
        }
        for flow in self.flows.iter_mut().flatten() {
            if let Some(total) = udp::socket_drops(flow.socket.as_raw_fd()) {
                drops.replies += total.saturating_sub(flow.drops_seen);
                flow.drops_seen = total;
            }
        }
        drops
    }

    /// The interval in progress reached its tick: it waits [`hold`] for its
    /// late packets, and the next one begins (in the next layer, on a layered
    /// matrix: the old layer's flows stop sending and close once their last
    /// interval is reported).
    fn close_interval(&mut self, now: Instant) {
        if self.pending.is_some() {
            // Starved for a whole interval: report what came.
            self.poll_everything();
            let pending = self.pending.take().expect("checked");
            self.report(pending);
        }
        let (elapsed, sending) = self.interval_seconds(now);
        let cpu_ns = udp::thread_cpu_ns();
        let cpu = cpu_ns.saturating_sub(self.last_cpu_ns) as f64 / 1e9;
        self.last_report = now;
        self.last_cpu_ns = cpu_ns;
        let drops = self.read_drops();
        let tick = self.tick;
        self.pending = Some(Pending {
            number: self.number,
            tick,
            began_ns: self.began_ns,
            report_at: now + hold(self.plan.interval),
            elapsed,
            sending,
            cpu,
            stray: std::mem::take(&mut self.stray),
            drops,
            behind_ns: std::mem::take(&mut self.behind_ns),
            layer: self.layer.map(|l| l as u32),
            disk: self.disk.as_ref().map(Disk::take_stats),
            scale: self.scale,
            gso_pkts: self.send.take_coalesced(),
            gro_pkts: self.requests_in.take_coalesced() + self.replies_in.take_coalesced(),
        });
        self.number += 1;
        self.began_ns = udp::monotonic_ns();
        self.tick = tick + self.plan.interval;
        // The next tick one interval on, on the monotonic clock: a wall clock
        // stepped by hand or by NTP neither stalls the reports (a step back)
        // nor bursts empty ones (a step forward). The labels keep the timeline
        // the run started on, which is the fleet's: the layers stay in step.
        self.tick_at += Duration::from_secs_f64(self.plan.interval);
        self.apply_scale();
        let layer = self.plan.schedule().layer_at(tick);
        if layer != self.layer {
            for flow in self.flows.iter_mut().flatten() {
                flow.draining = true;
            }
            self.layer = layer;
            if let Err(e) = self.open_layer(layer) {
                warn!("mx agent: worker {}: layer {layer:?}: {e}", self.id);
            }
        }
    }

    /// Seconds since the previous batch, and how many of them flows were
    /// sending: the planned end cuts the interval that holds it short.
    fn interval_seconds(&self, now: Instant) -> (f64, f64) {
        let elapsed = now.duration_since(self.last_report).as_secs_f64();
        let after_end = self.clock.end_ns().map_or(0.0, |end| {
            udp::monotonic_ns().saturating_sub(end) as f64 / 1e9
        });
        (elapsed.max(1e-3), (elapsed - after_end).max(1e-3))
    }

    /// Hands the reporter the batch of a closed interval: the requests each
    /// flow sent in it and the replies to them, the requests its peers sent in
    /// it that arrived. Flows of a finished layer close now.
    fn report(&mut self, p: Pending) {
        let tx = slots::tx_slot(p.number);
        let flows = self
            .flows
            .iter_mut()
            .flatten()
            .filter(|f| f.first_interval <= p.number)
            .map(|f| f.take_report(tx, p.scale, &mut self.rtts))
            .collect();
        self.close_flows(|f| f.draining);
        let rx = take_rx(&mut self.rx[slots::rx_slot(p.number)]);
        let _ = self.out.send(Batch {
            worker: self.id,
            tick: p.tick,
            elapsed: p.elapsed,
            sending: p.sending,
            cpu: p.cpu,
            flows,
            rx,
            stray: p.stray,
            layer: p.layer,
            drops: p.drops,
            behind_ns: p.behind_ns,
            disk: p.disk,
            rate_scale: p.scale,
            gso_pkts: p.gso_pkts,
            gro_pkts: p.gro_pkts,
            last: false,
        });
    }

    /// The worker's last batch: the interval in progress, partial (nothing when
    /// the run never started, or the interval began after the planned end).
    fn finish(&mut self, now: Instant) {
        let began_after_end = self.clock.end_ns().is_some_and(|end| self.began_ns >= end);
        let (flows, rx) = if self.start.is_none() || began_after_end {
            (Vec::new(), Vec::new())
        } else {
            let tx = slots::tx_slot(self.number);
            let flows = self
                .flows
                .iter_mut()
                .flatten()
                .map(|f| f.take_report(tx, self.scale, &mut self.rtts))
                .collect();
            (flows, take_rx(&mut self.rx[slots::rx_slot(self.number)]))
        };
        let (elapsed, sending) = self.interval_seconds(now);
        let cpu = udp::thread_cpu_ns().saturating_sub(self.last_cpu_ns) as f64 / 1e9;
        let drops = self.read_drops();
        let _ = self.out.send(Batch {
            worker: self.id,
            tick: self.tick,
            elapsed,
            sending,
            cpu,
            flows,
            rx,
            stray: std::mem::take(&mut self.stray),
            layer: self.layer.map(|l| l as u32),
            drops,
            behind_ns: self.behind_ns,
            disk: self.disk.as_ref().map(Disk::take_stats),
            rate_scale: self.scale,
            gso_pkts: self.send.take_coalesced(),
            gro_pkts: self.requests_in.take_coalesced() + self.replies_in.take_coalesced(),
            last: true,
        });
    }

    /// Starts the disk thread of a disk run, and fills the request padding
    /// with file data (what a request read from disk carries).
    fn start_disk(&mut self) -> std::io::Result<()> {
        let Some(plan) = self.plan.disk.clone() else {
            return Ok(());
        };
        let disk = Disk::start(self.id, &plan.path, plan.work, self.responder.as_ref())?;
        if !self.plan.busy_poll {
            self.epoll
                .add(disk.wake_fd(), EpollEvent::new(EpollFlags::EPOLLIN, DISK))?;
        }
        if plan.work.request_read > 0 {
            use std::os::unix::fs::FileExt;
            let file = std::fs::File::open(&plan.path)?;
            let _ = file.read_at(self.send.padding_mut(), 0);
        }
        self.disk = Some(disk);
        Ok(())
    }

    /// Takes in what the disk thread finished: counts the replies it sent in
    /// the interval of their requests (when that one is not reported yet),
    /// and lets the responder read again once there is room.
    fn collect_disk(&mut self) {
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
            if n >= current || pending == Some(n) {
                let counts = &mut rx[slots::rx_slot(n)][answer.peer as usize];
                counts.replies += 1;
                counts.reply_bytes += answer.size as u64;
            }
        });
    }

    /// Sends what each live flow may; returns when the next send is due.
    fn send_due(&mut self, now: Instant) -> Instant {
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

    /// Answers every request waiting on the responder socket, a batch at a time.
    fn serve_requests(&mut self) {
        let Some(responder) = self.responder.as_ref() else {
            return;
        };
        let fd = responder.as_raw_fd();
        let hosts = self.plan.matrix.host_count();
        let me = self.plan.me as u16;
        // The largest reply the plan has this host send.
        let most = self.plan.matrix.config.rx_size;
        let pending = self.pending.as_ref().map(|p| p.number);
        let answers_wait = self.disk.as_ref().is_some_and(|d| d.work.answers_wait());
        let scale = self.scale;
        for _ in 0..MAX_READS_PER_PASS {
            let n = match self.requests_in.recv(fd) {
                Ok(n) => n,
                Err(_) => continue,
            };
            if n == 0 {
                return;
            }
            // When this batch arrived, for the budgets: one clock read a batch.
            let now_ns = udp::monotonic_ns();
            self.send.clear();
            // The datagrams of a GRO message share one sender: whether it is
            // a peer (and its budget), and its sequence window, are looked up
            // once per message, not hashed again for each of its (up to 64)
            // datagrams; and its replies after the first go where the first
            // goes, without writing the address again.
            let mut window: Option<&mut SeqWindow> = None;
            let mut budget: Option<&Budget> = None;
            let mut joined = false;
            let mut datagrams = self.requests_in.datagrams();
            while let Some(d) = datagrams.next() {
                if d.starts_message {
                    budget = self.plan.sources.get(&d.from.ip());
                    window = budget.map(|_| self.request_windows.entry(d.from).or_default());
                    joined = false;
                }
                // A GRO message of requests from one send batch of a peer's,
                // in order: counted once, answered with one run of replies
                // whose headers differ only in what they echo.
                if !answers_wait
                    && d.starts_message
                    && let Some(window) = window.as_deref_mut()
                    && let Some(budget) = budget
                    && let Some(m) = datagrams.message()
                    && let Some(first) =
                        wire::decode_run(m.bytes, m.segment, m.count, KIND_REQUEST, false)
                    && usize::from(first.src_index) < hosts
                {
                    window.restart_if_renumbered(first.seq);
                    if window.observe_run(first.seq, m.count as u64) {
                        let n = m.count as u64;
                        // The first `answered` of the run, as far as the
                        // source's budget goes; the rest counted, unanswered.
                        let answered = budget.take(now_ns, n, scale);
                        let peer = usize::from(first.src_index);
                        let (slot, late) = request_slot(first.interval_tag(), self.number, pending);
                        let mut reply = [0u8; HEADER_LEN];
                        let header = Header::reply_to(&first, me, most);
                        header.encode(&mut reply);
                        let reply_size = header.packet_len as usize;
                        let counts = &mut self.rx[slot][peer];
                        counts.over_plan += n - answered;
                        if late {
                            counts.late += n;
                        } else {
                            counts.requests += n;
                            counts.request_bytes += n * m.segment as u64;
                            counts.replies += answered;
                            counts.reply_bytes += answered * reply_size as u64;
                        }
                        if answered == 0 {
                            datagrams.skip_message();
                            continue;
                        }
                        self.replies.answer(
                            fd,
                            &mut self.send,
                            &mut self.rx,
                            peer as u32,
                            (!late).then_some(slot),
                            reply_size,
                            d.from,
                            &mut joined,
                            answered as usize,
                            |k, h| {
                                let request = &m.bytes[k * m.segment..];
                                h.copy_from_slice(&reply);
                                h[wire::ECHOED].copy_from_slice(&request[wire::ECHOED]);
                            },
                        );
                        datagrams.skip_message();
                        continue;
                    }
                }
                let (request, window, budget) =
                    match (Header::decode(d.head), window.as_deref_mut(), budget) {
                        (Some(h), Some(window), Some(budget))
                            if h.kind == KIND_REQUEST
                                && d.len >= HEADER_LEN
                                && usize::from(h.src_index) < hosts =>
                        {
                            (h, window, budget)
                        }
                        _ => {
                            self.stray += 1;
                            continue;
                        }
                    };
                let peer = usize::from(request.src_index);
                window.restart_if_renumbered(request.seq);
                let (slot, late) = request_slot(request.interval_tag(), self.number, pending);
                let counts = &mut self.rx[slot][peer];
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
                let reply = Header::reply_to(&request, me, most);
                let reply_size = reply.packet_len as usize;
                let answered = budget.take(now_ns, 1, scale) == 1;
                if late {
                    counts.late += 1;
                } else {
                    counts.requests += 1;
                    counts.request_bytes += d.len as u64;
                }
                if !answered {
                    counts.over_plan += 1;
                    continue;
                }
                if !late && !answers_wait {
                    // Counted as sent now, taken back by the flush if the
                    // kernel refuses it: no second pass per datagram.
                    counts.replies += 1;
                    counts.reply_bytes += reply_size as u64;
                }
                if answers_wait && let Some(disk) = self.disk.as_mut() {
                    let mut header = [0u8; HEADER_LEN];
                    reply.encode(&mut header);
                    let queued = disk.answer(Answer {
                        to: d.from,
                        header,
                        size: reply_size,
                        peer: peer as u32,
                        interval: (!late).then(|| counted_interval(slot, self.number)),
                    });
                    if !queued && !self.said_disk_full {
                        self.said_disk_full = true;
                        warn!(
                            "mx agent: worker {}: the disk cannot keep up: requests that arrived go unanswered while its queue is full (the status line counts them: unanswered=n)",
                            self.id
                        );
                    }
                    continue;
                }
                self.replies.answer(
                    fd,
                    &mut self.send,
                    &mut self.rx,
                    peer as u32,
                    (!late).then_some(slot),
                    reply_size,
                    d.from,
                    &mut joined,
                    1,
                    |_, h| reply.encode(h),
                );
            }
            self.replies.flush(fd, &mut self.send, &mut self.rx);
            if !self.requests_in.was_full() {
                return;
            }
        }
    }

    /// Reads the replies waiting on flow socket `slot`: counts each in the
    /// interval of its request, times it, orders it.
    fn read_replies(&mut self, slot: usize) {
        let Some(flow) = self.flows.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let fd = flow.socket.as_raw_fd();
        let current = slots::tx_slot(self.number);
        let previous = self
            .pending
            .as_ref()
            .map(|p| (slots::tx_slot(p.number), p.began_ns));
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
            // The interval a reply's request was sent in: this one, the one
            // waiting to be reported, or one already reported (late).
            let interval_of = |t_send: u64| {
                if t_send >= self.began_ns {
                    (current, false)
                } else {
                    match previous {
                        Some((slot, began)) if t_send >= began => (slot, false),
                        _ => (current, true),
                    }
                }
            };
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
                    let (at, late) = interval_of(first.t_send);
                    let s = &mut flow.slots[at];
                    if late {
                        s.counts.late += n;
                    } else {
                        s.counts.replies += n;
                        s.counts.reply_bytes += n * m.segment as u64;
                    }
                    if let Some(rtt) = now_ns.checked_sub(first.t_send).filter(|&r| r < MAX_RTT_NS)
                    {
                        s.time(&mut flow.last_rtt_ns, rtt, n);
                        run.record_n(&mut self.rtts, flow.rtt_set, at, rtt, n);
                    }
                    datagrams.skip_message();
                    continue;
                }
                let reply = match Header::decode(d.head) {
                    Some(h) if h.kind == KIND_REPLY && d.len >= HEADER_LEN => h,
                    _ => {
                        self.stray += 1;
                        continue;
                    }
                };
                let (at, late) = interval_of(reply.t_send);
                let s = &mut flow.slots[at];
                match flow.replies_seen.observe(reply.seq) {
                    Arrival::Duplicate => {
                        s.counts.dup += 1;
                        continue;
                    }
                    Arrival::OutOfOrder => s.counts.ooo += 1,
                    Arrival::InOrder => {}
                }
                if late {
                    s.counts.late += 1;
                } else {
                    s.counts.replies += 1;
                    s.counts.reply_bytes += d.len as u64;
                }
                if let Some(disk) = self.disk.as_mut()
                    && disk.work.reply_write > 0
                {
                    disk.write_reply();
                }
                if let Some(rtt) = now_ns.checked_sub(reply.t_send).filter(|&r| r < MAX_RTT_NS) {
                    s.time(&mut flow.last_rtt_ns, rtt, 1);
                    run.record(&mut self.rtts, flow.rtt_set, at, rtt);
                }
            }
            if !self.replies_in.was_full() {
                break;
            }
        }
        run.flush(&mut self.rtts);
    }
}

/// A flow's matrix rate times the rate scale in force (none: the matrix's).
fn scaled(rate: f64, scale: Option<f64>) -> f64 {
    rate * scale.unwrap_or(1.0)
}

/// Where a request tagged `tag` is counted, with interval `current` in
/// progress and `pending` waiting out its hold: its interval's rx slot, or,
/// when that interval was already reported, the current one's with `true`
/// (counted as late there).
#[inline]
fn request_slot(tag: Option<u8>, current: u64, pending: Option<u64>) -> (usize, bool) {
    match slots::rx_slot_of(tag, current, pending) {
        RxSlot::Counted(slot) => (slot, false),
        RxSlot::Late => (slots::rx_slot(current), true),
    }
}

/// The number of the interval whose rx slot is `slot`, with interval
/// `current` in progress: the request was counted in the previous one (while
/// it waits out its hold), this one, or the next ([`slots::rx_slot_of`]).
fn counted_interval(slot: usize, current: u64) -> u64 {
    [current, current + 1, current.saturating_sub(1)]
        .into_iter()
        .find(|&n| slots::rx_slot(n) == slot)
        .unwrap_or(current)
}

/// The non-empty per-peer counts of one rx slot, which is left empty.
fn take_rx(slot: &mut [RxCounts]) -> Vec<(u32, RxCounts)> {
    slot.iter_mut()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(peer, c)| (peer as u32, std::mem::take(c)))
        .collect()
}

/// The responder's side of a send batch: whom each queued reply answers.
struct Replies {
    /// Matrix index of each queued reply in the batch, and the rx slot its
    /// request was counted in, to count what was sent (none for a late
    /// request: an rx row counts the replies to the requests it counts).
    peers: [u32; BATCH],
    slots: [Option<usize>; BATCH],
    /// `--gso`, until a route refuses a super-datagram.
    gso: bool,
}

impl Replies {
    /// Queues `n` replies to `peer` at `to` (the answers to one request, or
    /// to a GRO message of them), whose requests were counted in rx slot
    /// `slot` (which counts the replies as sent already), the `k`-th's header
    /// written by `fill(k, ..)`; sends the batch whenever it fills. `*joined`
    /// says the reply before went to `to` too: its address is then not
    /// written again, and a run of them is queued at once
    /// ([`SendBatch::push_joined_run`]).
    #[allow(clippy::too_many_arguments)]
    fn answer(
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
    fn flush(
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
        counts.send_errors += (outcome.tried - outcome.sent) as u64;
        flow.next_seq += outcome.tried as u64;
        counts.sent += outcome.sent as u64;
        counts.sent_bytes += outcome.sent as u64 * u64::from(tx_size);
        sent += outcome.tried;
        if outcome.tried < k {
            break;
        }
    }
    (sent, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_is_the_mean_difference_of_successive_round_trips() {
        let (mut slot, mut last) = (TxSlot::default(), None);
        // 100, then a run of 3 at 130 (one send time), then 90 us.
        slot.time(&mut last, 100_000, 1);
        slot.time(&mut last, 130_000, 3);
        slot.time(&mut last, 90_000, 1);
        let c = &slot.counts;
        assert_eq!((c.rtt_count, c.rtt_sum_ns), (5, 580_000));
        // Differences: 30, 0, 0, 40 us over the 4 replies that had one before.
        assert_eq!((c.jitter_sum_ns, c.jitter_count), (70_000, 4));
        assert_eq!((slot.rtt_min_ns, slot.rtt_max_ns), (Some(90_000), 130_000));
        // The next interval's first reply is measured against the last one.
        let mut next = TxSlot::default();
        next.time(&mut last, 95_000, 1);
        assert_eq!(
            (next.counts.jitter_sum_ns, next.counts.jitter_count),
            (5_000, 1)
        );
    }
}
