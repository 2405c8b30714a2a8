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
//! to its last requests are back ([`mx_report::hold_seconds`], and
//! [`slots`]).
//!
//! Files: the loop (`event_loop`); the responder, which answers requests
//! (`responder`); the flows, which send requests and time the replies
//! (`flows`); an interval's close, hold and report (`intervals`); and what
//! counts as what, datagram by datagram (`counting`).

mod counting;
mod event_loop;
mod flows;
mod intervals;
mod responder;

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use rustc_hash::FxHashMap;
use socket2::Socket;

use super::clock::{RunClock, Start};
use super::counters::{Batch, RxCounts};
use super::disk::engine::Disk;
use super::pair_rtt::PairRtts;
use super::plan::AgentPlan;
use super::slots;
use super::udp::{self, RecvBatch, SendBatch};
use flows::Flow;
use intervals::Pending;
use mx_base::units::wall_now;
use responder::Replies;

/// recvmmsg calls on one socket per pass: 16 x 256 (`udp::BATCH`) = 4,096
/// datagrams, or with GRO 16 x 16 messages of up to 64 (16,384).
const MAX_READS_PER_PASS: usize = 16;
/// Longest epoll wait: how quickly a worker notices the stop flag.
const MAX_WAIT: Duration = Duration::from_millis(50);
/// epoll token of the responder socket; flow sockets use their slot index.
const RESPONDER: u64 = u64::MAX;
/// epoll token of the disk thread's completions.
const DISK: u64 = u64::MAX - 1;

/// One worker thread's state: its sockets, the counts of the intervals it
/// keeps open, and the clock it runs by.
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
    /// The client sockets sending to us, by source ip:port: their sequence
    /// windows and counts.
    request_windows: FxHashMap<SocketAddr, responder::RequestFlow>,
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
    /// clock, when the worker began it (monotonic ns: the send that followed
    /// its close), and when it began by the clock (the previous tick's due
    /// instant, or the flows' start), which a worker held off its core
    /// passes late.
    number: u64,
    tick: f64,
    tick_at: Instant,
    began_ns: u64,
    opened_at: Instant,
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
                udp::mark(&socket, config.dscp.tos(), &config.dscp.label())?;
                // The requests' TTL: the hops of the path from each peer.
                udp::count_hops(&socket)?;
                // When each request came: the time its interval's requests
                // arrived in, however late this worker reads them.
                udp::stamp_arrivals(&socket)?;
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
            replies: Replies::new(plan.gso),
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
            opened_at: Instant::now(),
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

    /// Flow sockets this worker holds (live and draining).
    pub fn flow_count(&self) -> usize {
        self.flows.iter().flatten().count()
    }

    /// Starts the disk threads of a disk run, and fills the request padding
    /// with file data (what a request read from disk carries).
    fn start_disk(&mut self) -> std::io::Result<()> {
        let Some(plan) = self.plan.disk.clone() else {
            return Ok(());
        };
        let disk = Disk::start(
            self.id,
            &plan.path,
            plan.work,
            plan.depth,
            self.responder.as_ref(),
        )?;
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
}
