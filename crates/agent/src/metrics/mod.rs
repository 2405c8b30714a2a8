//! The agent as a Prometheus target (`--metrics [ADDR:]PORT`): what it
//! counted since it started, served as OpenMetrics text on `/metrics`
//! ([`endpoint`]).
//!
//! The reporter publishes each interval here once, from the rows it has
//! just written (the workers never see this module: the hot path stays as
//! it is), and a scrape encodes what was published. The counters are the
//! sums of the report's interval counts, so a rate over a window agrees
//! with the report rows it covers.
//!
//! Every series carries `host` (and `pool`, `dscp` where the matrix has
//! them); a peer's add `peer` (and `peer_pool`). Per host: as a client, per
//! peer it sends to, 9 counters, the target rate, the replies' hop count
//! and a 13-series RTT histogram; as a server, per peer it hears from, 6
//! counters and the requests' hop count; and about 40 series of its own
//! (the interface, the sockets, the CPU, the host histogram; 5 more in a
//! disk run). With `--peers 8` that is about 300 series a host with
//! Prometheus's own: 3 million at 10,000 hosts, which
//! one Prometheus holds (docs/always-on.md; `mx monitor` counts them for a
//! matrix).
//!
//! Both legs of a flow come from its sender alone: of the requests it has
//! settled (`mx_requests_settled_total`, up to its newest reply's number),
//! `mx_forward_lost_total` never reached the peer and
//! `mx_return_lost_total` reached it and were never answered back, by the
//! count each reply carries (`agent::legs`). A loss share is then one
//! target's counter over another of the same target, scraped at one
//! instant: never one agent's count over another's.

pub mod endpoint;
pub mod histogram;

use std::borrow::Cow;
use std::collections::HashMap;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use histogram::RttHistogram;
use mx_matrix::Matrix;
use mx_report::ReportRow;
use mx_report::rtt::MergedRtt;

/// A peer's labels: `peer`, and `peer_pool` where the matrix has pools.
type PeerLabels = Vec<(&'static str, String)>;

type PerPeer = Family<PeerLabels, Counter>;
/// A host series that appears once it has a value: a blank in the report
/// (not measured: no interface found, not a disk run) is no series, never 0.
type Measured<M> = Family<PeerLabels, M>;
type PeerGauge = Family<PeerLabels, Gauge<f64, std::sync::atomic::AtomicU64>>;
type FloatGauge = Gauge<f64, std::sync::atomic::AtomicU64>;
/// A host row's interval count, and its newest figure.
type CountOf = fn(&ReportRow) -> Option<u64>;
type FigureOf = fn(&ReportRow) -> Option<f64>;

/// What this agent counted since it started, by peer and for the host.
pub(crate) struct Metrics {
    registry: Registry,
    /// Each matrix host's labels, by name (the report rows' `peer`).
    peers: HashMap<String, PeerLabels>,
    client: Client,
    server: Server,
    host: Host,
}

/// As a client: per peer it sends requests to.
struct Client {
    counters: Vec<(CountOf, PerPeer)>,
    target: PeerGauge,
    rtt: Family<PeerLabels, RttHistogram>,
    /// The most routers the peer's replies crossed, newest interval.
    hops: PeerGauge,
}

/// As a server: per peer whose requests it answers.
struct Server {
    counters: Vec<(CountOf, PerPeer)>,
    /// The most routers the peer's requests crossed, newest interval.
    hops: PeerGauge,
}

/// A tx row's counts, per peer: name, help, the row's interval count. The
/// legs' counts are blank (no series) where the peer's replies carry no
/// count.
const CLIENT_COUNTERS: [(&str, &str, CountOf); 9] = [
    (
        "mx_requests_sent",
        "Requests this host sent to the peer",
        |r| r.pkts,
    ),
    (
        "mx_replies_received",
        "Replies back from the peer to this host's requests",
        |r| r.rep_pkts,
    ),
    (
        "mx_reply_duplicates",
        "Replies from the peer that came twice",
        |r| r.dup_pkts,
    ),
    (
        "mx_replies_out_of_order",
        "Replies from the peer that came out of order",
        |r| r.ooo_pkts,
    ),
    (
        "mx_replies_late",
        "Replies from the peer that came after their interval was written (counted lost there)",
        |r| r.late_pkts,
    ),
    (
        "mx_send_errors",
        "Requests to the peer the kernel refused to send (never counted sent)",
        |r| r.send_errors,
    ),
    (
        "mx_requests_settled",
        "Requests to the peer whose fate this host knows: up to the newest reply's number",
        |r| r.settled_pkts,
    ),
    (
        "mx_forward_lost",
        "Settled requests to the peer that never reached it, by the count its replies carry",
        |r| r.fwd_lost_pkts,
    ),
    (
        "mx_return_lost",
        "Settled requests that reached the peer and whose replies never came back",
        |r| r.ret_lost_pkts,
    ),
];

/// An rx row's counts, per peer: name, help, the row's interval count.
const SERVER_COUNTERS: [(&str, &str, CountOf); 6] = [
    (
        "mx_requests_received",
        "Requests from the peer that reached this host",
        |r| r.pkts,
    ),
    (
        "mx_replies_sent",
        "Replies this host sent to the peer",
        |r| r.rep_pkts,
    ),
    (
        "mx_request_duplicates",
        "Requests from the peer that came twice",
        |r| r.dup_pkts,
    ),
    (
        "mx_requests_out_of_order",
        "Requests from the peer that came out of order",
        |r| r.ooo_pkts,
    ),
    (
        "mx_requests_late",
        "Requests from the peer that came after their interval was written",
        |r| r.late_pkts,
    ),
    (
        "mx_requests_over_plan",
        "Requests from the peer left unanswered: it sent past what the matrix plans for it here (refused by plan, not lost)",
        |r| r.over_plan,
    ),
];

/// The host's own: its interface, sockets, CPU and disk, and the interval.
struct Host {
    rtt: RttHistogram,
    counters: Vec<(CountOf, Measured<Counter>)>,
    gauges: Vec<(FigureOf, Measured<FloatGauge>)>,
    stray: Counter,
    /// No series until the first interval is written: a 0 would read as an
    /// agent silent since 1970.
    interval_end: Measured<FloatGauge>,
}

/// The host's counters: name, help, and the host row's interval count.
const HOST_COUNTERS: [(&str, &str, CountOf); 14] = [
    (
        "mx_nic_transmit_packets",
        "Packets the interface that carries the traffic sent",
        |r| r.nic_tx_pkts,
    ),
    (
        "mx_nic_transmit_bytes",
        "Bytes the interface that carries the traffic sent",
        |r| r.nic_tx_bytes,
    ),
    (
        "mx_nic_receive_packets",
        "Packets the interface that carries the traffic received",
        |r| r.nic_rx_pkts,
    ),
    (
        "mx_nic_receive_bytes",
        "Bytes the interface that carries the traffic received",
        |r| r.nic_rx_bytes,
    ),
    (
        "mx_nic_transmit_drops",
        "Packets the interface dropped on their way out",
        |r| r.nic_tx_drops,
    ),
    (
        "mx_nic_receive_drops",
        "Packets the interface dropped on their way in",
        |r| r.nic_rx_drops,
    ),
    (
        "mx_socket_request_drops",
        "Requests the kernel dropped at this agent's full responder sockets",
        |r| r.req_drops,
    ),
    (
        "mx_socket_reply_drops",
        "Replies the kernel dropped at this agent's full flow sockets",
        |r| r.rep_drops,
    ),
    (
        "mx_udp_receive_buffer_errors",
        "The host's UDP RcvbufErrors",
        |r| r.udp_rcvbuf_errors,
    ),
    (
        "mx_udp_send_buffer_errors",
        "The host's UDP SndbufErrors: datagrams dropped on their way out",
        |r| r.udp_sndbuf_errors,
    ),
    ("mx_udp_in_errors", "The host's UDP InErrors", |r| {
        r.udp_in_errors
    }),
    (
        "mx_neighbour_table_fulls",
        "Times the kernel's neighbour tables (ARP, NDP) were full: no entry could be made",
        |r| r.neigh_table_fulls,
    ),
    (
        "mx_neighbour_resolutions_failed",
        "Neighbour resolutions (ARP, NDP) that got no answer",
        |r| r.neigh_res_failed,
    ),
    (
        "mx_udp_no_ports",
        "The host's UDP NoPorts: datagrams to a port nothing listens on",
        |r| r.udp_no_ports,
    ),
];

/// The host's gauges of its newest interval: name, help, value.
const HOST_GAUGES: [(&str, &str, FigureOf); 10] = [
    (
        "mx_cpu_ratio",
        "Share of the host's CPU in use over the newest interval",
        |r| r.cpu_pct.map(|p| p / 100.0),
    ),
    (
        "mx_cpu_busiest_core_ratio",
        "The busiest core's share in use over the newest interval",
        |r| r.cpu_max_pct.map(|p| p / 100.0),
    ),
    (
        "mx_agent_busiest_worker_ratio",
        "The busiest agent worker's share of a core over the newest interval",
        |r| r.agent_cpu_pct.map(|p| p / 100.0),
    ),
    (
        "mx_cpu_steal_ratio",
        "Share of the host's CPU time its hypervisor gave to others",
        |r| r.steal_pct.map(|p| p / 100.0),
    ),
    (
        "mx_behind_schedule_seconds",
        "The longest the agent was behind its send schedule in the newest interval",
        |r| r.behind_ms.map(|ms| ms / 1e3),
    ),
    (
        "mx_disk_read_ops_per_second",
        "Reads of the data file a second, newest interval (disk runs)",
        |r| r.disk_rd_iops,
    ),
    (
        "mx_disk_write_ops_per_second",
        "Writes to the data file a second, newest interval (disk runs)",
        |r| r.disk_wr_iops,
    ),
    (
        "mx_disk_read_p99_seconds",
        "p99 of the data file's reads, newest interval (disk runs)",
        |r| r.disk_rd_p99_us.map(|us| us / 1e6),
    ),
    (
        "mx_disk_write_p99_seconds",
        "p99 of the data file's writes, newest interval (disk runs)",
        |r| r.disk_wr_p99_us.map(|us| us / 1e6),
    ),
    (
        "mx_disk_busy_ratio",
        "The busiest worker's share of time in disk I/O, newest interval (disk runs)",
        |r| r.disk_busy_pct.map(|p| p / 100.0),
    ),
];

impl Metrics {
    /// The metrics of host `me` of `matrix`, reporting every `interval`
    /// seconds.
    pub fn new(matrix: &Matrix, me: u32, interval: f64) -> Metrics {
        let hosts = matrix.hosts();
        let pools = matrix.pools();
        let pool_of = pools.pool_of_each(hosts.len());
        let pool_name = |i: usize| pool_of[i].map(|p| pools.pools[p].name.clone());
        let mut labels: Vec<(Cow<'static, str>, Cow<'static, str>)> =
            vec![("host".into(), hosts[me as usize].name.clone().into())];
        if let Some(pool) = pool_name(me as usize) {
            labels.push(("pool".into(), pool.into()));
        }
        if !matrix.config.dscp.is_default() {
            labels.push(("dscp".into(), matrix.config.dscp.value().to_string().into()));
        }
        let peers = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let mut set = vec![("peer", h.name.clone())];
                if let Some(pool) = pool_name(i) {
                    set.push(("peer_pool", pool));
                }
                (h.name.clone(), set)
            })
            .collect();
        let mut registry = Registry::with_labels(labels.into_iter());
        let families = |table: &[(&str, &str, CountOf)]| {
            table
                .iter()
                .map(|&(_, _, of)| (of, PerPeer::default()))
                .collect()
        };
        let client = Client {
            counters: families(&CLIENT_COUNTERS),
            target: PeerGauge::default(),
            rtt: Family::default(),
            hops: PeerGauge::default(),
        };
        let server = Server {
            counters: families(&SERVER_COUNTERS),
            hops: PeerGauge::default(),
        };
        let host = Host {
            rtt: RttHistogram::host(),
            counters: HOST_COUNTERS
                .iter()
                .map(|&(_, _, of)| (of, Measured::default()))
                .collect(),
            gauges: HOST_GAUGES
                .iter()
                .map(|&(_, _, of)| (of, Measured::default()))
                .collect(),
            stray: Counter::default(),
            interval_end: Measured::default(),
        };
        register(&mut registry, &client, &server, &host, interval);
        Metrics {
            registry,
            peers,
            client,
            server,
            host,
        }
    }

    /// The labels of the peer a row names (a name outside the matrix gets
    /// `peer` alone).
    fn peer(&self, name: &str) -> PeerLabels {
        self.peers
            .get(name)
            .cloned()
            .unwrap_or_else(|| vec![("peer", name.to_string())])
    }

    /// Adds a tx row (this host as a client towards its `peer`), and the
    /// round trips behind it.
    pub(crate) fn client_row(&self, row: &ReportRow, rtt: &MergedRtt) {
        let c = &self.client;
        let peer = self.peer(&row.peer);
        add_counts(&c.counters, row, &peer);
        if let Some(target) = row.target_pps {
            c.target.get_or_create(&peer).set(target);
        }
        set_hops(&c.hops, row, &peer);
        c.rtt.get_or_create(&peer).add(rtt);
    }

    /// Adds an rx row (this host as a server for its `peer`).
    pub(crate) fn server_row(&self, row: &ReportRow) {
        let peer = self.peer(&row.peer);
        add_counts(&self.server.counters, row, &peer);
        set_hops(&self.server.hops, row, &peer);
    }

    /// Adds the host row of an interval, and the host's round trips of it.
    pub fn host_row(&self, row: &ReportRow, rtt: &MergedRtt) {
        let h = &self.host;
        let own = PeerLabels::new();
        for (of, counter) in &h.counters {
            if let Some(n) = of(row) {
                counter.get_or_create(&own).inc_by(n);
            }
        }
        for (of, gauge) in &h.gauges {
            if let Some(v) = of(row) {
                gauge.get_or_create(&own).set(v);
            }
        }
        h.stray.inc_by(row.stray_pkts.unwrap_or(0));
        h.rtt.add(rtt);
    }

    /// The agent wrote the rows of the interval ending at `end` (its label,
    /// Unix seconds), whole or partial.
    pub(crate) fn interval_written(&self, end: f64) {
        self.host
            .interval_end
            .get_or_create(&PeerLabels::new())
            .set(end);
    }

    /// Everything, as OpenMetrics text (ending `# EOF`).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

/// Adds each count `row` has to its counter of `peer`; a blank (not
/// measured) makes no series.
fn add_counts(counters: &[(CountOf, PerPeer)], row: &ReportRow, peer: &PeerLabels) {
    for (of, family) in counters {
        if let Some(n) = of(row) {
            family.get_or_create(peer).inc_by(n);
        }
    }
}

/// Registers every metric under its name and help.
/// A row's `hops_max` into its peer's gauge; a row that read no TTL (none
/// arrived) leaves the gauge as it was: no series until one did.
fn set_hops(gauge: &PeerGauge, row: &ReportRow, peer: &PeerLabels) {
    if let Some(hops) = row.hops_max {
        gauge.get_or_create(peer).set(f64::from(hops));
    }
}

fn register(registry: &mut Registry, c: &Client, s: &Server, h: &Host, interval: f64) {
    let tables = [
        (&CLIENT_COUNTERS[..], &c.counters),
        (&SERVER_COUNTERS[..], &s.counters),
    ];
    for (table, families) in tables {
        for ((name, help, _), (_, family)) in table.iter().zip(families) {
            registry.register(*name, *help, family.clone());
        }
    }
    registry.register(
        "mx_target_requests_per_second",
        "The rate the matrix sets for this host's requests to the peer",
        c.target.clone(),
    );
    registry.register(
        "mx_peer_rtt_seconds",
        "Round trips of this host's requests to the peer",
        c.rtt.clone(),
    );
    registry.register(
        "mx_reply_hops",
        "The most routers the peer's replies crossed on their way here, newest interval (by the TTL they arrived with)",
        c.hops.clone(),
    );
    registry.register(
        "mx_request_hops",
        "The most routers the peer's requests crossed on their way here, newest interval (by the TTL they arrived with)",
        s.hops.clone(),
    );
    for ((name, help, _), (_, counter)) in HOST_COUNTERS.iter().zip(&h.counters) {
        registry.register(*name, *help, counter.clone());
    }
    for ((name, help, _), (_, gauge)) in HOST_GAUGES.iter().zip(&h.gauges) {
        registry.register(*name, *help, gauge.clone());
    }
    registry.register(
        "mx_stray_packets",
        "Datagrams that reached the agent's ports and were no request or reply of the matrix",
        h.stray.clone(),
    );
    registry.register(
        "mx_host_rtt_seconds",
        "Round trips of every request this host sent",
        h.rtt.clone(),
    );
    let interval_gauge = FloatGauge::default();
    interval_gauge.set(interval);
    registry.register(
        "mx_interval_seconds",
        "Seconds per report interval",
        interval_gauge,
    );
    registry.register(
        "mx_last_interval_end_timestamp_seconds",
        "When the newest interval this agent wrote ended (Unix seconds): an agent gone quiet stops moving it",
        h.interval_end.clone(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_report::Dir;

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn every_series_names_its_host_and_a_peer_s_its_peer_with_pools_and_dscp_where_set() {
        let m = matrix(
            "# tx_size=64 rx_size=64 port=5300 dscp=34\n# pool tor1: a\n# pool tor2: b\nsrc\\dst,a,b\na,,10\nb,10,\n",
        );
        let metrics = Metrics::new(&m, 0, 5.0);
        let row = ReportRow {
            ts: 100,
            host: "a".to_string(),
            dir: Some(Dir::Tx),
            peer: "b".to_string(),
            pkts: Some(50),
            rep_pkts: Some(49),
            ..ReportRow::default()
        };
        metrics.client_row(&row, &MergedRtt::of_buckets(&[(20_000, 49)]));
        let text = metrics.encode();
        assert!(
            text.contains(
                "mx_requests_sent_total{host=\"a\",pool=\"tor1\",dscp=\"34\",peer=\"b\",peer_pool=\"tor2\"} 50"
            ),
            "{text}"
        );
        assert!(
            text.contains("mx_replies_received_total{host=\"a\",pool=\"tor1\",dscp=\"34\",peer=\"b\",peer_pool=\"tor2\"} 49"),
            "{text}"
        );
        // Without pools or a class: the host and the peer alone.
        let plain = Metrics::new(&matrix("src\\dst,a,b\na,,10\nb,10,\n"), 0, 5.0);
        plain.client_row(&row, &MergedRtt::default());
        assert!(
            plain
                .encode()
                .contains("mx_requests_sent_total{host=\"a\",peer=\"b\"} 50"),
            "{}",
            plain.encode()
        );
    }
}
