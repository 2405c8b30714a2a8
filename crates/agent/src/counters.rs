//! What a worker counts, and the batch it hands the reporter once per interval.
//!
//! Counters are plain integers owned by one worker thread: no atomics, no locks
//! on the hot path. At each report tick the worker moves them into a [`Batch`]
//! (resetting its own) and sends it down a channel: one message per worker per
//! interval.

use super::legs::LegCounts;
use mx_report::rtt::Compact;

/// The TTLs datagrams arrived with in an interval: the fewest and the most
/// routers the paths they came by crossed ([`Ttls::hops`]). Counted once a
/// message (a GRO message's datagrams share one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ttls {
    /// The lowest and highest TTL seen; 0 and 0 when none was read.
    low: u8,
    high: u8,
}

impl Ttls {
    /// A datagram arrived with `ttl` (0: not read, and not counted).
    #[inline]
    pub fn saw(&mut self, ttl: u8) {
        if ttl == 0 {
            return;
        }
        if self.low == 0 || ttl < self.low {
            self.low = ttl;
        }
        self.high = self.high.max(ttl);
    }

    pub fn add(&mut self, other: &Ttls) {
        self.saw(other.low);
        self.saw(other.high);
    }

    /// The fewest and the most routers crossed (`None`: no TTL read).
    pub fn hops(&self) -> Option<(u8, u8)> {
        (self.high > 0).then(|| {
            let (a, b) = (
                mx_udp::hops_of_ttl(self.high),
                mx_udp::hops_of_ttl(self.low),
            );
            (a.min(b), a.max(b))
        })
    }
}

/// One flow socket's traffic in an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxCounts {
    /// Requests handed to the kernel.
    pub sent: u64,
    pub sent_bytes: u64,
    /// Replies received (first arrivals only; duplicates are counted apart).
    pub replies: u64,
    pub reply_bytes: u64,
    pub rtt_sum_ns: u64,
    pub rtt_count: u64,
    /// Σ |RTT - the socket's previous RTT| over the replies of the interval
    /// that had one before them, and how many did: their ratio is the jitter.
    pub jitter_sum_ns: u64,
    pub jitter_count: u64,
    pub dup: u64,
    pub ooo: u64,
    /// Sends the kernel refused (e.g. ECONNREFUSED after an ICMP unreachable).
    pub send_errors: u64,
    /// Replies that came back after the interval of their request had been
    /// reported: counted as lost there, and here (not in `replies`).
    pub late: u64,
    /// The TTLs the replies arrived with: the path back from the peer.
    pub ttls: Ttls,
}

/// Requests from one peer and the replies sent back to it, in an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxCounts {
    /// Requests that arrived (first arrivals; duplicates are dropped, counted apart).
    pub requests: u64,
    pub request_bytes: u64,
    /// Replies the kernel took.
    pub replies: u64,
    pub reply_bytes: u64,
    pub dup: u64,
    pub ooo: u64,
    /// Requests tagged with an interval this host had already reported:
    /// answered, but counted here instead of in `requests`.
    pub late: u64,
    /// Requests left unanswered because their source had spent its budget
    /// (agent::budget): counted in `requests` (or `late`), never replied to.
    pub over_plan: u64,
    /// The TTLs the requests arrived with: the path from the peer.
    pub ttls: Ttls,
}

impl RxCounts {
    pub fn is_empty(&self) -> bool {
        self.requests == 0
            && self.replies == 0
            && self.dup == 0
            && self.late == 0
            && self.over_plan == 0
    }

    pub fn add(&mut self, o: &RxCounts) {
        self.requests += o.requests;
        self.request_bytes += o.request_bytes;
        self.replies += o.replies;
        self.reply_bytes += o.reply_bytes;
        self.dup += o.dup;
        self.ooo += o.ooo;
        self.late += o.late;
        self.over_plan += o.over_plan;
        self.ttls.add(&o.ttls);
    }
}

/// One flow socket's report for an interval: the requests it sent in the
/// interval, and the replies to those requests (whenever they came back
/// before the interval was reported).
#[derive(Debug, Clone)]
pub struct FlowReport {
    pub peer: u32,
    /// The flow socket's source port: which of the pair's streams it is.
    pub sport: u16,
    pub layer: Option<u32>,
    /// Target rate of this socket (`None`: unpaced).
    pub target: Option<f64>,
    pub counts: TxCounts,
    pub rtt: Compact,
    /// Largest RTT of the interval, ns (the original kept a running maximum
    /// since the socket opened, which could predate any window summarized).
    pub rtt_max_ns: u64,
    /// Smallest RTT of the interval, ns (`None`: no reply timed).
    pub rtt_min_ns: Option<u64>,
    /// What its replies' counts settled since its last report, each leg
    /// apart (`None`: no counted reply yet, or a peer that counts nothing).
    pub legs: Option<LegCounts>,
}

/// Datagrams the kernel dropped at this worker's sockets because their
/// receive buffers were full (each socket's drop counter, the one SO_RXQ_OVFL
/// reports): requests at the responder, replies at the flow sockets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SocketDrops {
    pub requests: u64,
    pub replies: u64,
}

/// What one worker measured over one interval.
#[derive(Debug, Clone)]
pub struct Batch {
    pub worker: usize,
    /// Wall-clock tick (Unix seconds) this batch ends at.
    pub tick: f64,
    /// Seconds since this worker's previous batch, on the monotonic clock.
    pub elapsed: f64,
    /// Seconds of that in which flows were sending: short of `elapsed` in
    /// the interval that holds the planned end, whose rest only waited for
    /// replies. Rates are per second of sending, so a run that ends inside
    /// an interval does not read as a slower one.
    pub sending: f64,
    /// Seconds of the interval's own span in the run: from its start (the
    /// previous tick, or the flows' start) to its tick or the run's end. The
    /// requests a responder counts for an interval are those their sender
    /// sent in it, by the interval each carries, so their rates are over
    /// this span, not over the worker's own time: a worker held off its core
    /// across a tick closes the interval late, and the next one (the last,
    /// when the end came first) has that much less time, or none.
    pub span: f64,
    /// CPU seconds the worker thread used in that time.
    pub cpu: f64,
    pub flows: Vec<FlowReport>,
    pub rx: Vec<(u32, RxCounts)>,
    /// Datagrams that were not ours: too short, bad magic or kind, unknown
    /// index, or a source that is not a matrix host. Never answered.
    pub stray: u64,
    /// The layer the worker's live flows belong to.
    pub layer: Option<u32>,
    pub drops: SocketDrops,
    /// The longest the worker was behind its send schedule in the interval:
    /// a flow's batch was due and the worker did not get to it for this long.
    pub behind_ns: u64,
    /// What the worker's disk did in the interval (disk runs only).
    pub disk: Option<crate::disk::stats::DiskStats>,
    /// The rate scale its flows ran at (`mx run --ramp`); `None`: the
    /// matrix's rates.
    pub rate_scale: Option<f64>,
    /// Datagrams the worker sent in GSO messages of several, and read in
    /// GRO messages of several: a software interface counts such a message
    /// as one packet.
    pub gso_pkts: u64,
    pub gro_pkts: u64,
    /// The worker's last batch (stop, exit): a partial interval.
    pub last: bool,
}
