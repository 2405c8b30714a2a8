//! What a finding says, as data: the hosts, the direction, the counts and
//! the shares each sentence of WHAT TO DO NEXT is written from. The
//! analysis decides which of these a run's evidence fits; `render::findings`
//! writes the words, the same for the text, the page and `--json`, which
//! carries these fields beside the words (as `detail`).
//!
//! Units are in the names: `_pct` a percentage (0-100), `_pps` packets a
//! second, `_ms` and `_us` milli- and microseconds, `_s` seconds, `_bps`
//! bits a second; a bare count is packets (or datagrams).

use serde::Serialize;

use super::Direction;

/// Which leg of a flow: its requests, or the replies to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LegName {
    Requests,
    Replies,
}

/// What a starved agent's own figures say: its cgroup's throttling, and
/// how far it fell behind its send schedule (each only where it counts).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Starvation {
    pub throttled_ms: Option<f64>,
    pub behind_ms: Option<f64>,
}

/// A host's disk, and the share of its time its busiest worker spent in
/// disk I/O.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BusyDisk {
    pub host: String,
    pub busy_pct: f64,
}

/// A host's interface, as a sentence names it (`h2's interface (eth0)`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Nic {
    pub host: String,
    /// Its name, where the agent found it.
    pub name: Option<String>,
    /// Its host rows carry its packet counts (else an older agent, or an
    /// interface it could not find).
    pub counted: bool,
}

/// Why a host's loss on one side sits where it does: what its kernel, its
/// interface and its agent counted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Why {
    /// Into a host whose agent did not get the CPU to read: its sockets
    /// dropped `dropped` and it read `late` too late to count; with its
    /// disk busy, the disk fits as well.
    StarvedReader {
        host: String,
        starved: Starvation,
        dropped: f64,
        late: f64,
        disk_busy_pct: Option<f64>,
    },
    /// Into a host with CPU to spare whose sockets overflowed (or whose
    /// answers waited on its disk).
    SocketsOverflowed {
        host: String,
        dropped: f64,
        late: f64,
        disk_busy_pct: Option<f64>,
    },
    /// Into a host whose NIC counted rx drops.
    NicRxDrops { nic: Nic, drops: f64 },
    /// Into a host whose responder waited on its disk, with no drop counted.
    DiskHeldReads { host: String, busy_pct: f64 },
    /// Its interface counted `unread` more arriving than its agent read:
    /// dropped inside it, after its NIC.
    DroppedAfterNic { nic: Nic, unread: f64 },
    /// Its interface counted no more than its agent read: lost before it.
    LostBeforeNic { nic: Nic },
    /// Its interface counted `unread` more than its agent read, short of
    /// the loss: part inside, the rest on the wire.
    PartlyAfterNic { nic: Nic, unread: f64 },
    /// Into a host whose counts cannot be compared: both places.
    IntoUncompared { nic: Nic },
    /// Out of a starved host whose kernel dropped nothing: `unsent`
    /// handed late or never.
    StarvedSender {
        nic: Nic,
        starved: Starvation,
        unsent: f64,
    },
    /// Out of a host whose kernel dropped `sndbuf_errors`, would not take
    /// `unanswered` replies, and whose interface sent `unsent` fewer than
    /// handed: its egress.
    CappedEgress {
        nic: Nic,
        sndbuf_errors: f64,
        unanswered: f64,
        unsent: f64,
        egress_bps: Option<f64>,
    },
    /// Out of a host whose kernel dropped `dropped` datagrams on their way
    /// out (UDP SndbufErrors) while its neighbour table was full
    /// `table_fulls` times and `res_failed` resolutions got no answer: it
    /// could not resolve its peers. `ipv6`: the table is NDP's, not ARP's.
    NeighbourTable {
        host: String,
        ipv6: bool,
        dropped: f64,
        table_fulls: f64,
        res_failed: f64,
    },
    /// Out of a starved host whose replies came back late: it answered late.
    AnsweredLate {
        host: String,
        starved: Starvation,
        late_answers: f64,
    },
    /// Its interface sent everything handed: lost after it.
    LostAfterNic { nic: Nic },
    /// Its kernel kept back `kept_back` and its interface sent `unsent`
    /// fewer, short of the `lost`: part on the host, the rest beyond.
    PartlyOnHost {
        nic: Nic,
        kept_back: f64,
        unsent: f64,
        lost: f64,
    },
    /// Out of a host whose counts cannot be compared: both places.
    OutUncompared { nic: Nic },
    /// Between two hosts whose other flows are clean: the path between.
    /// `streams`: the fewest streams (source ports) of its lossy flows.
    /// One: its equal-cost paths cannot be told apart; more: every one of
    /// them lost on the leg; 0: nothing to say of them (the reports count
    /// none apart, or some streams lost nothing).
    PathBetween {
        from: String,
        to: String,
        streams: usize,
    },
}

/// One leg of a host's flows: the peers at their other end, and the
/// percent each of its flows lost.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct LegLoss {
    pub peers: Vec<String>,
    pub loss_pct: Vec<f64>,
}

/// One way between a pair: its legs' loss, the packets lost, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairWay {
    pub from: String,
    pub to: String,
    /// Each lossy leg of the flows this way, with the percent it lost.
    pub legs: Vec<(LegName, f64)>,
    pub lost: f64,
    pub why: Why,
}

/// One flow whose loss on a leg sits on some of its streams: the way its
/// packets went (`from` -> `to`), the lossy streams' source ports (of the
/// flow's sender), of how many, and what those lost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathFlow {
    pub from: String,
    pub to: String,
    pub lossy_ports: Vec<u16>,
    pub streams: usize,
    pub lost: f64,
    pub lost_pct: f64,
}

/// The link (or links) the traced paths put a loss on: one, or several the
/// same lossy streams cross (the probes' answers singling one out where
/// they can).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkLoss {
    /// In path order.
    pub links: Vec<LinkName>,
    /// Which of `links` the probes put the loss on, where they tell.
    pub decided_by_probes: Option<usize>,
    /// The probes at each link's ends, as `links`.
    pub probes: Vec<ProbeCount>,
    /// The lossy streams crossing it (`h1:40001 -> h3` for requests,
    /// `h3 -> h1:40001` for replies).
    pub lossy_streams: Vec<String>,
    /// Traced streams that lost nothing of enough packets to show it: none
    /// crosses these links.
    pub clean_streams: usize,
    /// What the lossy streams lost on their legs, of what they carried.
    pub lost: f64,
    pub sent: f64,
    /// Legs traced in all.
    pub traced: usize,
}

/// One way across between two pools: the legs whose packets travel from
/// pool `from` to pool `to` (requests of flows that way, replies of flows
/// the other), how many lost beyond the noise, and what they lost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolWay {
    pub from: String,
    pub to: String,
    pub lossy_legs: usize,
    pub legs: usize,
    pub lost: f64,
    pub lost_pct: f64,
}

/// A way whose route changed: from one host to another.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct RouteWay {
    pub from: String,
    pub to: String,
}

/// A directed link of a traced path: from a device (a host by its name, a
/// router by the address that answered) to the next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkName {
    pub from: String,
    pub to: String,
}

/// The probes the lossy streams' sweeps sent to a link's far end and near
/// end, and of them, those that went unanswered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProbeCount {
    pub far_sent: u64,
    pub far_unanswered: u64,
    pub near_sent: u64,
    pub near_unanswered: u64,
}

/// One leg as the whole fabric lost it: the typical flow's loss, and
/// every flow's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricLeg {
    pub leg: LegName,
    pub typical_pct: f64,
    pub flows_pct: Vec<f64>,
}

/// A flow that lost its round trip where no receiver's rows say which leg.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundTrip {
    pub src: String,
    pub dst: String,
    pub loss_pct: f64,
}

/// A host that sent less than its rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShortHost {
    pub host: String,
    pub sent_pps: f64,
    pub target_pps: f64,
}

/// Why hosts sent less than their rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum ShortWhy {
    /// Their agents could not keep their schedule (a disk held one of
    /// them: named first).
    Starved {
        behind_ms: f64,
        throttled_ms: f64,
        disk: Option<BusyDisk>,
    },
    /// Their busiest core was at `core_pct` or more.
    HotCore { core_pct: f64 },
    /// Their kernels dropped `dropped` datagrams on their way out.
    Egress { dropped: f64 },
    /// Their kernels dropped `dropped` datagrams on their way out while
    /// their neighbour tables were full `table_fulls` times and
    /// `res_failed` resolutions got no answer.
    Unresolved {
        dropped: f64,
        table_fulls: f64,
        res_failed: f64,
    },
    /// A disk held them (theirs or their peers').
    Disk { disk: BusyDisk },
    /// Nothing they counted says why.
    Unknown,
}

/// How a host went away before the run's end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Gone {
    /// Its report ends with no end marked.
    Stopped,
    /// Its report ends with no end marked, and its rows say its agent was
    /// short of CPU.
    StoppedStarved {
        behind_ms: f64,
        throttled_ms: Option<f64>,
    },
    /// mx could not reach it to collect its report.
    Unreachable,
    /// No report of its own; its peers last heard from it.
    Silent,
}

/// Where the round trip's tail sits.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum TailSpread {
    /// On half the hosts or more: `tail_intervals` of `intervals` flow
    /// intervals, on `hosts` of `of`.
    Fleet {
        tail_intervals: u64,
        intervals: u64,
        hosts: usize,
        of: usize,
    },
    /// On the flows to and from these hosts alone.
    Hosts { hosts: Vec<String> },
}

/// What the tail fits.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "cause", rename_all = "snake_case")]
pub enum TailCause {
    /// A disk run: `host`'s disk `io` p99 (its worst interval), and whether
    /// it makes the tail or is a small part of it.
    Disk {
        host: String,
        io: String,
        disk_p99_us: f64,
        makes_the_tail: bool,
    },
    /// Every agent kept its schedule, the tail on most hosts: the fabric.
    FabricQueues,
    /// The agents kept their schedule, the tail on a few hosts: their
    /// links, or (`queued`) the full qdisc of those that dropped.
    LinkQueues { queued: Vec<String> },
    /// Agents that ran late (behind, held off by a quota, robbed by the
    /// hypervisor); on most hosts the network's queues fit as well.
    AgentsLate {
        hosts: Vec<String>,
        behind_ms: f64,
        throttled: bool,
        steal_pct: Option<f64>,
        fleet_wide: bool,
    },
}

/// What one finding says.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "says", rename_all = "snake_case")]
pub enum Says {
    /// Packets lost into or out of one host: the legs that lose (its
    /// requests, its replies, each with its flows), and why there.
    HostLoss {
        host: String,
        direction: Direction,
        requests: LegLoss,
        replies: LegLoss,
        /// Which legs stand out: both, or one alone.
        lossy_requests: bool,
        lossy_replies: bool,
        lost: f64,
        /// The place tells the legs apart itself (an agent's sockets).
        place_tells_legs: bool,
        why: Why,
    },
    /// A starved agent's loss into its host and out of it (two
    /// `host_loss`), one cause said once.
    StarvedHost { into: Box<Says>, out_of: Box<Says> },
    /// Packets lost between two hosts alone, each way.
    PairLoss {
        a: String,
        b: String,
        ways: Vec<PairWay>,
    },
    /// Loss on one leg that sits on some streams of each flow, sparing the
    /// others: a path's (a link, a switch port). Where every such flow goes
    /// into one host, a receive queue of its NIC (hashed by the same ports)
    /// fits too.
    PathLoss {
        leg: LegName,
        flows: Vec<PathFlow>,
        one_receiver: Option<String>,
    },
    /// The link the lossy streams' traced paths share and the clean ones'
    /// avoid (`mx trace`).
    LinkLoss(LinkLoss),
    /// Loss on the legs that cross between two pools (racks) alone, each
    /// way across; the legs inside them and to other pools spared.
    PoolLoss {
        ways: Vec<PoolWay>,
        /// Legs outside the two pools' crossing that carried enough to have
        /// shown the loss, and lost none of it.
        clean_outside: usize,
    },
    /// Loss everywhere, no host or pair standing out; a busy disk fits too.
    FabricLoss {
        legs: Vec<FabricLeg>,
        disk: Option<BusyDisk>,
    },
    /// Flows losing round trips whose receivers wrote no rx rows.
    RoundTrips { flows: Vec<RoundTrip> },
    /// Hosts that sent less than their rate, and why.
    Short {
        hosts: Vec<ShortHost>,
        why: ShortWhy,
    },
    /// The busiest agent worker near a full core: the tool's ceiling.
    BusyWorker {
        host: String,
        agent_cpu_pct: f64,
        /// The fleet's share of its target, when it fell short.
        fleet_sent_pct: Option<f64>,
        /// What one worker sends or answers a second.
        worker_pps: f64,
    },
    /// What would lift a busy worker: more workers, or (capped at flows
    /// + 1) more streams.
    MoreWorkers {
        host: String,
        workers: u32,
        peers: usize,
    },
    /// Hosts mostly waiting on the disk.
    DiskBound {
        hosts: usize,
        host: String,
        busy_pct: f64,
        /// Its disk's operations a second and their mean time (µs).
        iops: Option<(f64, Option<f64>)>,
        workers: Option<u32>,
        /// Operations each worker kept in flight (`None`: a report from
        /// before `--disk-depth`, one each).
        depth: Option<u32>,
    },
    /// A layered run short of a full rotation.
    Coverage {
        measured: usize,
        total: usize,
        rotation_s: f64,
    },
    /// Nothing to fix: `landing` every flow at its target.
    AllClear { landing: bool, ramp: String },
    /// A host gone before the run's end: its last row (epoch seconds),
    /// how long before the end, and its flow intervals left out.
    Gone {
        host: String,
        last_ts: i64,
        before_end_s: i64,
        left_out: u64,
        gone: Gone,
    },
    /// Hosts never heard from.
    NeverHeard { hosts: Vec<String> },
    /// Requests a receiver refused by plan, from its sources (most
    /// refused first: what the first sent and got back).
    Refused {
        receiver: String,
        sources: Vec<String>,
        sent_pps: f64,
        back_pps: f64,
        headroom_pct: f64,
        refused: f64,
    },
    /// Ways whose datagrams crossed another number of routers from
    /// interval `at` (epoch seconds) on: `hops` the ranges they went
    /// through, in order (from the first to the last), changing `changes`
    /// times at most (a route that flaps).
    RouteChange {
        ways: Vec<RouteWay>,
        hops: Vec<crate::analysis::routes::Hops>,
        at: i64,
        changes: u32,
    },
    /// The round trip's tail: p50 and p99, where it sits, what it fits.
    Tail {
        p50_us: f64,
        p99_us: f64,
        spread: TailSpread,
        cause: TailCause,
    },
}
