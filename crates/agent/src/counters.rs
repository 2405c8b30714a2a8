//! What a worker counts, and the batch it hands the reporter once per interval.
//!
//! Counters are plain integers owned by one worker thread: no atomics, no locks
//! on the hot path. At each report tick the worker moves them into a [`Batch`]
//! (resetting its own) and sends it down a channel: one message per worker per
//! interval.

use super::legs::LegCounts;
use mx_report::rtt::Compact;

/// The least and the greatest of the values seen, where 0 is no value (a
/// TTL not read, an arrival not stamped): 0 and 0 until one is seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bounds<T> {
    low: T,
    high: T,
}

impl<T: Copy + Ord + Default> Bounds<T> {
    /// A value (0: none, and not counted).
    #[inline]
    pub fn saw(&mut self, value: T) {
        let none = T::default();
        if value == none {
            return;
        }
        if self.low == none || value < self.low {
            self.low = value;
        }
        self.high = self.high.max(value);
    }

    pub fn add(&mut self, other: &Bounds<T>) {
        self.saw(other.low);
        self.saw(other.high);
    }

    /// The least and the greatest (`None`: none seen).
    pub fn get(&self) -> Option<(T, T)> {
        (self.high != T::default()).then_some((self.low, self.high))
    }
}

/// The TTLs datagrams arrived with in an interval: the fewest and the most
/// routers the paths they came by crossed ([`Ttls::hops`]). Counted once a
/// message (a GRO message's datagrams share one).
pub type Ttls = Bounds<u8>;

impl Ttls {
    /// The fewest and the most routers crossed (`None`: no TTL read).
    pub fn hops(&self) -> Option<(u8, u8)> {
        self.get().map(|(low, high)| {
            let (a, b) = (mx_udp::hops_of_ttl(high), mx_udp::hops_of_ttl(low));
            (a.min(b), a.max(b))
        })
    }
}

/// When the requests counted in an interval reached the host, by the
/// kernel's stamp on each (CLOCK_REALTIME ns): the first and the last.
pub type Arrivals = Bounds<u64>;

/// An interval's span in the run on the wall clock (ns since the Unix
/// epoch): from its start (the previous tick, or the flows' start) to its
/// tick or the run's end, whichever came first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Span {
    pub from_ns: u64,
    pub to_ns: u64,
}

impl Span {
    /// Seconds over which the requests of one peer counted in the interval
    /// arrived: the span, widened to their first and last arrival, by at
    /// most `slack_ns` either way. The requests counted are those their
    /// sender sent in the interval (by the interval each carries), and a
    /// sender's interval can be wider than this host's: its first, after a
    /// start of its own, runs up to 1.5 intervals; its last ends at its own
    /// end, later than this one's for an agent started (and so ended) after
    /// this one. Never narrowed: requests that stopped coming mid-interval
    /// read as the slower rate they came at. The slack bounds what a wall
    /// clock stepped mid-interval can move an edge.
    pub fn seconds_arriving(&self, arrivals: &Arrivals, slack_ns: u64) -> f64 {
        let (mut from, mut to) = (self.from_ns, self.to_ns.max(self.from_ns));
        if let Some((first, last)) = arrivals.get() {
            from = from.min(first.max(from.saturating_sub(slack_ns)));
            to = to.max(last.min(to.saturating_add(slack_ns)));
        }
        ((to - from) as f64 / 1e9).max(1e-3)
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
    /// When the requests counted in `requests` arrived.
    pub arrivals: Arrivals,
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
        self.arrivals.add(&o.arrivals);
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
    /// The interval's own span in the run. The requests a responder counts
    /// for an interval are those their sender sent in it, by the interval
    /// each carries, so their rates are over the time they arrived in
    /// ([`Span::seconds_arriving`]), not over the worker's own time: a
    /// worker held off its core across a tick closes the interval late, and
    /// the next one (the last, when the end came first) has that much less
    /// time, or none.
    pub span: Span,
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

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn arrived(at: &[u64]) -> Arrivals {
        let mut a = Arrivals::default();
        at.iter().for_each(|&ns| a.saw(ns));
        a
    }

    #[test]
    fn a_span_widens_to_its_requests_arrivals_by_at_most_the_slack() {
        let span = Span {
            from_ns: 100 * S,
            to_ns: 102 * S,
        };
        // None stamped, or all inside: the span itself.
        assert_eq!(span.seconds_arriving(&Arrivals::default(), 2 * S), 2.0);
        assert_eq!(span.seconds_arriving(&arrived(&[101 * S]), 2 * S), 2.0);
        // A sender's interval that began 0.8 s before this one's.
        let earlier = arrived(&[99 * S + S / 5, 101 * S]);
        assert_eq!(span.seconds_arriving(&earlier, 2 * S), 2.8);
        // One that ended 0.5 s after this one's end.
        let later = arrived(&[100 * S, 102 * S + S / 2]);
        assert_eq!(span.seconds_arriving(&later, 2 * S), 2.5);
        // A stamp far off (a wall clock stepped): the slack at most.
        let stepped = arrived(&[90 * S, 101 * S]);
        assert_eq!(span.seconds_arriving(&stepped, 2 * S), 4.0);
        // Never narrowed by requests that came for part of it.
        assert_eq!(span.seconds_arriving(&arrived(&[101 * S]), 0), 2.0);
    }

    #[test]
    fn arrivals_merge_to_the_first_and_the_last() {
        let mut a = arrived(&[5, 3]);
        a.add(&arrived(&[7]));
        a.add(&Arrivals::default());
        assert_eq!(a, arrived(&[3, 7]));
        assert_eq!(arrived(&[0]), Arrivals::default());
    }
}
