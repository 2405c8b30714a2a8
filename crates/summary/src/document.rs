//! The summary as one JSON document (`mx summarize --json`): every figure
//! the text shows, for scripts, and what `mx compare` reads back.
//!
//! The schema is versioned by its `schema` key (`mx.summary/1`): a key is
//! only ever added within a version; renaming or removing one makes a new
//! version. Units are in the key names (`_pps`, `_bps` bits per second,
//! `_pct` 0..=100, `_us` microseconds, `_ts` Unix seconds of an interval's
//! end). A figure that was not measured is `null`, never 0, as blank is in
//! the text. docs/json.md documents every key.
//!
//! `intervals` is the fleet per interval of the span: what `compare`
//! resamples to tell a real change from interval-to-interval noise.

use serde::{Deserialize, Serialize};

use super::analysis::aggregate::{IntervalAgg, ReportSet};
use std::collections::BTreeMap;

use super::analysis::diagnosis::{Blame, Finding, Kind, Says};
use super::analysis::figures::{self, Context, Figures, FlowFigures, HostFigures, percent};
use super::analysis::spread::{FlowSpread, Spread};
use mx_base::units;
use mx_report::rtt::MergedRtt;

/// The `schema` of this version of the document.
pub const SCHEMA: &str = "mx.summary/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub schema: String,
    /// The mx that wrote it.
    pub mx_version: String,
    pub span: SpanDoc,
    pub run: RunDoc,
    pub fleet: FleetDoc,
    pub spread: SpreadDoc,
    pub pools: Vec<PoolDoc>,
    /// Worst delivery first, as the host table.
    pub hosts: Vec<HostDoc>,
    /// Every flow that sent in the span, worst delivery first.
    pub flows: Vec<FlowDoc>,
    pub intervals: Vec<IntervalDoc>,
    /// WHAT TO DO NEXT, one string per hint: the findings' texts.
    pub advice: Vec<String>,
    /// WHAT TO DO NEXT as data: each finding's kind, text, the hosts it
    /// blames (host, direction, peer, where) and the figures it rests on.
    #[serde(default)]
    pub findings: Vec<FindingDoc>,
}

/// One finding: its words, whom it blames, the figures it rests on, and
/// (`detail`) what it says as data, from which the words were written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingDoc {
    pub kind: Kind,
    pub text: String,
    pub blames: Vec<Blame>,
    pub figures: BTreeMap<String, f64>,
    /// Written, never read back (`compare` reads the figures): absent from
    /// documents written before it was added, and from any read back.
    #[serde(default, skip_deserializing, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Says>,
}

impl FindingDoc {
    /// The finding with its `text` (its words: `render::findings` writes
    /// them; the document does not).
    pub fn of(f: &Finding, text: String) -> FindingDoc {
        FindingDoc {
            kind: f.kind,
            text,
            blames: f.blames.clone(),
            figures: f.figures.clone(),
            detail: Some(f.says.clone()),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpanDoc {
    /// The first and last interval summarized (each labelled by its end).
    pub first_ts: Option<i64>,
    pub last_ts: Option<i64>,
    pub intervals: usize,
    pub interval_s: i64,
    /// Edge intervals left out (hosts starting or stopping).
    pub left_out: usize,
    /// False when no interval had every host sending (the edges are in).
    pub steady: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunDoc {
    pub hosts: usize,
    pub flows: usize,
    pub request_bytes: u32,
    pub reply_bytes: u32,
    pub layered: bool,
    /// The class the agents marked with (`EF`, `CS1`, `AF41`, a number);
    /// null for the default class or when the matrix was not there.
    pub dscp: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetDoc {
    pub requests_pps: f64,
    pub requests_wire_bps: f64,
    pub requests_payload_bps: f64,
    /// Requests the receivers counted; null when none wrote rx rows.
    pub delivered_pps: Option<f64>,
    pub replies_pps: f64,
    pub replies_wire_bps: f64,
    pub replies_payload_bps: f64,
    /// Null when the flows were unpaced (no target).
    pub target_pps: Option<f64>,
    /// Null when nothing was sent.
    pub loss_pct: Option<f64>,
    pub forward_loss_pct: Option<f64>,
    pub return_loss_pct: Option<f64>,
    pub rtt: RttDoc,
    /// Requests and replies that arrived twice, and out of order (packets).
    #[serde(default)]
    pub dup_pkts: f64,
    #[serde(default)]
    pub ooo_pkts: f64,
    /// Requests the receivers left unanswered by plan (their senders sent
    /// past the matrix rate): packets, never counted as loss; null when no
    /// report counts them.
    #[serde(default)]
    pub refused_pkts: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RttDoc {
    pub avg_us: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub p999_us: Option<f64>,
    /// True: the percentiles are exact, from the hosts' histograms; false:
    /// they are the worst flow's worst interval's (an upper bound).
    pub exact: bool,
    pub max_us: Option<f64>,
    /// The smallest round trip, and the mean absolute difference between a
    /// flow's successive round trips (RFC 3550's jitter, unsmoothed).
    #[serde(default)]
    pub min_us: Option<f64>,
    #[serde(default)]
    pub jitter_us: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadDoc {
    pub flows: usize,
    /// Requests delivered per flow, over the flows whose receiver reported.
    pub delivered: Option<SpreadFigures>,
    /// Replies back per flow.
    pub back: Option<SpreadFigures>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpreadFigures {
    pub flows: usize,
    pub mean_pps: f64,
    /// Population standard deviation.
    pub sd_pps: f64,
    pub min_pps: f64,
    pub median_pps: f64,
    pub max_pps: f64,
    pub jain: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolDoc {
    pub from: String,
    pub to: String,
    /// The pools' hosts.
    pub from_hosts: Vec<String>,
    pub to_hosts: Vec<String>,
    pub senders: usize,
    pub receivers: usize,
    pub flows: usize,
    pub figures: FleetDoc,
    pub spread: SpreadDoc,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostDoc {
    pub host: String,
    pub sent_pps: f64,
    pub back_pps: f64,
    pub serving_pps: f64,
    pub egress_wire_bps: f64,
    pub loss_pct: Option<f64>,
    pub forward_loss_pct: Option<f64>,
    pub return_loss_pct: Option<f64>,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub rtt_exact: bool,
    pub cpu_pct: Option<f64>,
    pub cpu_core_pct: Option<f64>,
    pub agent_cpu_pct: Option<f64>,
    /// What its interface sent, bits per second (its byte counter).
    #[serde(default)]
    pub nic_egress_bps: Option<f64>,
    /// Packets its agent handed the kernel that its interface never sent
    /// (lost in its transmit path), and packets its interface received
    /// that its agent never read (lost in its receive path).
    #[serde(default)]
    pub tx_unsent_pkts: Option<f64>,
    #[serde(default)]
    pub rx_unread_pkts: Option<f64>,
    /// Requests it left unanswered by plan, as a responder (packets); null
    /// when its report does not count them.
    #[serde(default)]
    pub over_plan_pkts: Option<f64>,
    #[serde(flatten)]
    pub arrival: ArrivalDoc,
}

/// How a host's or a flow's packets arrived: the smallest round trip, the
/// jitter (the mean difference between successive round trips), and the
/// packets that arrived twice or out of order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ArrivalDoc {
    #[serde(default)]
    pub rtt_min_us: Option<f64>,
    #[serde(default)]
    pub jitter_us: Option<f64>,
    #[serde(default)]
    pub dup_pkts: f64,
    #[serde(default)]
    pub ooo_pkts: f64,
}

impl ArrivalDoc {
    fn of(rtt_min: Option<f64>, jitter: Option<f64>, dup: f64, ooo: f64) -> ArrivalDoc {
        ArrivalDoc {
            rtt_min_us: ro(rtt_min),
            jitter_us: ro(jitter),
            dup_pkts: r(dup),
            ooo_pkts: r(ooo),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowDoc {
    pub src: String,
    pub dst: String,
    pub sent_pps: f64,
    pub back_pps: f64,
    /// Requests its receiver counted; null when the receiver wrote nothing.
    pub delivered_pps: Option<f64>,
    pub loss_pct: f64,
    /// Its worst interval's percentiles.
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub layer: Option<u32>,
    /// Its requests that never reached the receiver, and of those that
    /// did, the replies that never came back (null: the receiver wrote
    /// nothing).
    #[serde(default)]
    pub forward_loss_pct: Option<f64>,
    #[serde(default)]
    pub return_loss_pct: Option<f64>,
    #[serde(flatten)]
    pub arrival: ArrivalDoc,
    /// Its streams (`--streams`), each by its source port, over the span;
    /// absent where the reports count no stream apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub streams: Vec<StreamDoc>,
}

/// One stream of a flow over the span: its packets, and both legs where
/// its replies carried the responder's count (null where none did).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamDoc {
    pub sport: u16,
    pub sent_pkts: u64,
    pub back_pkts: u64,
    pub settled_pkts: Option<u64>,
    pub forward_lost_pkts: Option<u64>,
    pub return_lost_pkts: Option<u64>,
}

impl StreamDoc {
    fn of(s: &mx_report::streams::StreamCounts) -> StreamDoc {
        StreamDoc {
            sport: s.sport,
            sent_pkts: s.sent,
            back_pkts: s.replies,
            settled_pkts: s.legs.map(|l| l.settled),
            forward_lost_pkts: s.legs.map(|l| l.forward_lost),
            return_lost_pkts: s.legs.map(|l| l.return_lost),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalDoc {
    /// Its end, Unix seconds.
    pub ts: i64,
    /// Packets in the interval, fleet-wide: requests sent, replies back, and
    /// requests the receivers counted (null: no receiver reported it).
    pub requests: f64,
    pub replies: f64,
    pub delivered: Option<f64>,
    /// Exact, from the host rows' histograms of the interval (null without).
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
}

impl IntervalDoc {
    /// Round-trip loss over the interval's requests (null: none sent).
    pub fn loss_pct(&self) -> Option<f64> {
        loss(self.requests, self.replies)
    }

    /// Requests that did not reach their receiver (null: not counted).
    pub fn forward_loss_pct(&self) -> Option<f64> {
        loss(self.requests, self.delivered?.max(self.replies))
    }
}

/// Percent of `sent` that did not make it to `made`; None when nothing was sent.
pub fn loss(sent: f64, made: f64) -> Option<f64> {
    (sent > 0.0).then(|| (100.0 - percent(made.min(sent), sent)).max(0.0))
}

/// The document of one summary.
/// The document of one summary; `findings` with their words.
pub fn document(
    set: &ReportSet,
    ctx: &Context,
    figs: &Figures,
    findings: Vec<FindingDoc>,
) -> Document {
    let span = &set.span;
    let name = |id: u32| set.name(id).to_string();
    Document {
        schema: SCHEMA.to_string(),
        mx_version: env!("CARGO_PKG_VERSION").to_string(),
        span: SpanDoc {
            first_ts: span.first(),
            last_ts: span.last(),
            intervals: span.keep.len(),
            interval_s: set.interval.unwrap_or(1).max(1),
            left_out: span.left_out,
            steady: !span.no_steady,
        },
        run: RunDoc {
            hosts: figs.hosts.len(),
            flows: set.tx.len(),
            request_bytes: ctx.tx_size,
            reply_bytes: ctx.rx_size,
            layered: ctx.layered,
            dscp: ctx.dscp().map(|d| d.label()),
        },
        fleet: fleet_doc(&figs.fleet, ctx),
        spread: spread_doc(&figs.spread),
        pools: figs
            .pools
            .iter()
            .map(|p| PoolDoc {
                from: p.from.clone(),
                to: p.to.clone(),
                from_hosts: p.from_hosts.clone(),
                to_hosts: p.to_hosts.clone(),
                senders: p.senders,
                receivers: p.receivers,
                flows: p.flows,
                figures: fleet_doc(&p.fleet, ctx),
                spread: spread_doc(&p.spread),
            })
            .collect(),
        hosts: figs.hosts.iter().map(|h| host_doc(h, name(h.id))).collect(),
        flows: figs
            .flows
            .iter()
            .map(|f| flow_doc(f, name(f.host), name(f.peer)))
            .collect(),
        intervals: set
            .intervals
            .iter()
            .map(|(&ts, i)| interval_doc(ts, i))
            .collect(),
        advice: findings.iter().map(|f| f.text.clone()).collect(),
        findings,
    }
}

fn fleet_doc(f: &figures::Fleet, ctx: &Context) -> FleetDoc {
    let (requests_wire_bps, replies_wire_bps) = figures::wire(f, ctx);
    let (p50, p99, p999, exact) = match (f.exact, f.worst_flow) {
        (Some((p50, p99, p999)), _) => (Some(p50), Some(p99), Some(p999), true),
        (None, Some((_, _, p50, p99))) => (p50, Some(p99), None, false),
        (None, None) => (None, None, None, false),
    };
    FleetDoc {
        requests_pps: r(f.requests),
        requests_wire_bps: r(requests_wire_bps),
        requests_payload_bps: r(f.request_payload),
        delivered_pps: ro(f.delivered),
        replies_pps: r(f.replies),
        replies_wire_bps: r(replies_wire_bps),
        replies_payload_bps: r(f.reply_payload),
        target_pps: ro((f.target > 0.0).then_some(f.target)),
        loss_pct: ro(f.packets.delivery().map(|_| f.round_trip_loss())),
        forward_loss_pct: ro(f.forward_loss()),
        return_loss_pct: ro(f.return_loss()),
        rtt: RttDoc {
            avg_us: ro(f.rtt_avg),
            p50_us: ro(p50),
            p99_us: ro(p99),
            p999_us: ro(p999),
            exact,
            max_us: ro(f.rtt_max),
            min_us: ro(f.rtt_min),
            jitter_us: ro(f.jitter),
        },
        dup_pkts: r(f.dup),
        ooo_pkts: r(f.ooo),
        refused_pkts: ro(f.refused_counted.then_some(f.packets.refused)),
    }
}

fn spread_doc(s: &FlowSpread) -> SpreadDoc {
    let figures = |s: Spread| SpreadFigures {
        flows: s.flows,
        mean_pps: r(s.mean),
        sd_pps: r(s.sd),
        min_pps: r(s.min),
        median_pps: r(s.median),
        max_pps: r(s.max),
        jain: ro(s.jain),
    };
    SpreadDoc {
        flows: s.flows,
        delivered: s.delivered.map(figures),
        back: s.back.map(figures),
    }
}

fn host_doc(h: &HostFigures, host: String) -> HostDoc {
    let sent = h.packets.delivery().is_some();
    HostDoc {
        host,
        sent_pps: r(h.sent),
        back_pps: r(h.back),
        serving_pps: r(h.serving),
        egress_wire_bps: r(h.egress_bits),
        loss_pct: ro(sent.then_some(h.loss)),
        forward_loss_pct: ro(h.forward_loss()),
        return_loss_pct: ro(h.return_loss()),
        rtt_p50_us: ro(h.rtt_p50),
        rtt_p99_us: ro(h.rtt_p99),
        rtt_exact: h.rtt_exact,
        cpu_pct: ro(h.cpu),
        cpu_core_pct: ro(h.cpu_core),
        agent_cpu_pct: ro(h.agent_cpu),
        nic_egress_bps: ro(h.nic_egress_bits),
        tx_unsent_pkts: ro(h.tx_unsent),
        rx_unread_pkts: ro(h.rx_unread),
        over_plan_pkts: ro(h.over_plan),
        arrival: ArrivalDoc::of(h.rtt_min, h.jitter, h.dup, h.ooo),
    }
}

fn flow_doc(f: &FlowFigures, src: String, dst: String) -> FlowDoc {
    FlowDoc {
        src,
        dst,
        sent_pps: r(f.sent),
        back_pps: r(f.back),
        delivered_pps: ro(f.arrived),
        loss_pct: r(f.loss),
        rtt_p50_us: ro(f.p50),
        rtt_p99_us: ro(f.p99),
        layer: f.layer,
        forward_loss_pct: ro(f.forward_loss()),
        return_loss_pct: ro(f.return_loss()),
        arrival: ArrivalDoc::of(f.rtt_min, f.jitter, f.dup, f.ooo),
        streams: f.streams.iter().map(StreamDoc::of).collect(),
    }
}

fn interval_doc(ts: i64, i: &IntervalAgg) -> IntervalDoc {
    let rtt = (!i.rtt.is_empty()).then(|| MergedRtt::of_buckets(&i.rtt));
    IntervalDoc {
        ts,
        requests: r(i.sent),
        replies: r(i.back),
        delivered: ro(i.arrived),
        rtt_p50_us: ro(rtt.as_ref().and_then(|h| h.quantile_us(0.5))),
        rtt_p99_us: ro(rtt.as_ref().and_then(|h| h.quantile_us(0.99))),
    }
}

/// The document as pretty JSON.
pub fn to_json(doc: &Document) -> String {
    // Plain data of strings and finite numbers: serializing cannot fail.
    let mut text = serde_json::to_string_pretty(doc).expect("a summary document serializes");
    text.push('\n');
    text
}

/// A figure as the documents carry it ([`units::six_places`]).
pub fn r(v: f64) -> f64 {
    units::six_places(v)
}

pub(crate) fn ro(v: Option<f64>) -> Option<f64> {
    v.map(r)
}
