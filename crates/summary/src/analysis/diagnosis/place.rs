//! Where a host's loss happened, from what its own kernel counted: on the
//! wire, or inside the host (its receive path, its transmit path, its CPU).
//!
//! What each host reports beside its traffic (report.csv's host rows):
//! - its interface's packet counts: what left the host and what reached
//!   it, against what its agent handed the kernel and what it read. A
//!   packet the interface counted arriving that the agent never read died
//!   in the host, after its NIC (a host firewall, the IP stack); one the
//!   agent handed over that the interface never sent died in its transmit
//!   path (a qdisc's rate cap or full queue);
//! - the kernel's own drop counters: UDP SndbufErrors (a datagram dropped
//!   on its way out), the interface's rx and tx drops, and the drops at the
//!   agent's full sockets;
//! - whether its agent had the CPU: how far it fell behind its send
//!   schedule, its cgroup's throttling, the hypervisor's steal.
//!
//! Set against the packets lost into or out of the host, counts that cover
//! at least half of them put the loss in the host;
//! interface counts that match the agent's put it on the wire. Where the
//! counts cannot be compared (coalesced GSO/GRO traffic on a software
//! interface) and nothing else was counted, both places are named.

use std::collections::BTreeMap;

use super::super::aggregate::ReportSet;
use super::super::figures::Context;
use super::Place;
use super::says::{Nic, Starvation, Why};

pub(crate) use mx_report::STARVED_BEHIND_MS;
/// A disk that held the busiest worker this share of its time (mean
/// `disk_busy_pct`) can be what a host's loss or shortfall waits on.
pub(crate) const DISK_SUSPECT_PCT: f64 = 20.0;
/// A host's own counts explain a loss when they cover at least this share.
const EXPLAINED_SHARE: f64 = 0.5;
/// Interface counts that leave this share of a loss unexplained do not
/// clear the host either: both places are named.
const CLEARED_SHARE: f64 = 0.2;

/// What one host counted over the span.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostEvidence {
    pub id: u32,
    /// Datagrams the kernel dropped at its agent's full sockets: requests
    /// (its responder) and replies (its flow sockets).
    pub request_drops: f64,
    pub reply_drops: f64,
    /// Requests its agent read after their interval was written.
    pub late_requests: f64,
    /// Replies to its own requests that came back after their interval was
    /// written (it read them late, or its peer answered late).
    pub late_replies: f64,
    /// Replies it sent that came back to its peers late (it answered late,
    /// or they read late).
    pub late_answers: f64,
    /// Its interface: name, rx drops, tx drops, and the gaps between its
    /// counts and the agent's (`None`: not comparable or not measured).
    pub nic: Option<String>,
    /// Its host rows carry its interface's counts.
    pub nic_counted: bool,
    pub nic_rx_drops: f64,
    pub nic_tx_drops: f64,
    pub rx_gap: Option<f64>,
    pub tx_gap: Option<f64>,
    /// The share of its intervals each gap leaves out: those in which its
    /// agent read (`rx`) or sent (`tx`) coalesced. A gap is set against
    /// the loss of the intervals it covers, not of the whole run.
    pub rx_left_out: f64,
    pub tx_left_out: f64,
    /// UDP SndbufErrors: datagrams dropped on their way out.
    pub sndbuf_errors: f64,
    /// Its kernel's neighbour tables: times full, resolutions that got no
    /// answer; and whether its traffic is IPv6 (the table is NDP's).
    pub neigh_table_fulls: f64,
    pub neigh_res_failed: f64,
    pub ipv6: bool,
    /// Replies it owed that its kernel would not take (its socket's send
    /// buffer full: a queue on its way out held what it had sent).
    pub unanswered: f64,
    /// Bits per second its interface sent (its byte counter: frames
    /// without preamble, FCS and gap).
    pub egress_bps: Option<f64>,
    /// The longest its agent was behind its send schedule (ms), its
    /// cgroup's throttling (ms), the most steal in one interval (%).
    pub behind_ms: f64,
    pub throttled_ms: f64,
    pub steal_pct: f64,
    /// Disk runs: the busiest worker's mean share of time in disk I/O.
    pub disk_busy: Option<f64>,
}

impl HostEvidence {
    /// Every host's evidence, by id.
    pub(crate) fn of_all(set: &ReportSet, ctx: &Context) -> BTreeMap<u32, HostEvidence> {
        let interval = set.interval.unwrap_or(1).max(1) as f64;
        let mut all: BTreeMap<u32, HostEvidence> = set
            .hosts
            .iter()
            .map(|(&id, h)| {
                let nic = &h.nic;
                let header = ctx.ip(id).counted_header_bytes();
                let seconds = nic.intervals as f64 * interval;
                (
                    id,
                    HostEvidence {
                        id,
                        request_drops: h.req_drops.unwrap_or(0.0),
                        unanswered: h.unanswered,
                        reply_drops: h.rep_drops.unwrap_or(0.0),
                        nic: nic.name.clone(),
                        nic_counted: nic.measured(),
                        nic_rx_drops: h.nic_rx_drops.unwrap_or(0.0),
                        nic_tx_drops: nic.tx_drops,
                        rx_gap: nic.rx_gap(header),
                        tx_gap: nic.tx_gap(header),
                        rx_left_out: nic.left_out(false, header),
                        tx_left_out: nic.left_out(true, header),
                        sndbuf_errors: nic.sndbuf_errors.unwrap_or(0.0),
                        neigh_table_fulls: h.neigh_table_fulls.unwrap_or(0.0),
                        neigh_res_failed: h.neigh_res_failed.unwrap_or(0.0),
                        ipv6: ctx.ip(id) == mx_base::units::Ip::V6,
                        egress_bps: (seconds > 0.0 && nic.measured())
                            .then(|| nic.tx_bytes * 8.0 / seconds),
                        behind_ms: h.behind_ms.unwrap_or(0.0),
                        throttled_ms: h.throttled_ms.unwrap_or(0.0),
                        steal_pct: h.steal_pct.unwrap_or(0.0),
                        disk_busy: h.disk.busy.get(),
                        ..HostEvidence::default()
                    },
                )
            })
            .collect();
        fn entry(all: &mut BTreeMap<u32, HostEvidence>, id: u32) -> &mut HostEvidence {
            all.entry(id).or_insert_with(|| HostEvidence {
                id,
                ..HostEvidence::default()
            })
        }
        for (&(src, dst), p) in &set.tx {
            // Late replies: the sender read them late, or its receiver
            // answered late; each side's own CPU says which.
            entry(&mut all, src).late_replies += p.late;
            entry(&mut all, dst).late_answers += p.late;
        }
        for (&(host, _), p) in &set.rx {
            entry(&mut all, host).late_requests += p.late;
        }
        all
    }

    /// The agent did not get the CPU it needed.
    pub fn starved(&self) -> bool {
        self.behind_ms >= STARVED_BEHIND_MS || self.throttled_ms > 0.0
    }

    /// What a starved agent's own figures say (`None`: it was not starved):
    /// its cgroup's throttling, and how far it fell behind its schedule.
    pub(crate) fn starvation(&self) -> Option<Starvation> {
        let throttled_ms = (self.throttled_ms > 0.0).then_some(self.throttled_ms);
        let behind_ms = (self.behind_ms >= STARVED_BEHIND_MS).then_some(self.behind_ms);
        (throttled_ms.is_some() || behind_ms.is_some()).then_some(Starvation {
            throttled_ms,
            behind_ms,
        })
    }

    /// Its disk held its busiest worker long enough to stop it reading.
    pub(crate) fn disk_waits(&self) -> Option<f64> {
        self.disk_busy.filter(|&b| b >= DISK_SUSPECT_PCT)
    }

    /// Its interface, as the words name it.
    fn nic(&self, host: &str) -> Nic {
        Nic {
            host: host.to_string(),
            name: self.nic.clone(),
            counted: self.nic_counted,
        }
    }
}

/// Where, by a host's counts, its loss on one side happened, why (what
/// the counts say) and the figures it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub places: Vec<Place>,
    pub why: Why,
    pub figures: Vec<(&'static str, f64)>,
    /// The place itself tells the legs apart: an agent's responder socket
    /// overflows with requests, its flow sockets with replies, so a loss
    /// on one leg alone needs no filter to explain it.
    pub explains_legs: bool,
}

impl Located {
    fn new(places: Vec<Place>, why: Why, figures: Vec<(&'static str, f64)>) -> Located {
        Located {
            places,
            why,
            figures,
            explains_legs: false,
        }
    }

    fn by_the_agent(mut self) -> Located {
        self.explains_legs = true;
        self
    }
}

/// Loss of `lost` packets on their way into `h` (`name`): the first place
/// its counts explain, in order: its agent's CPU, its sockets (or the disk
/// its answers waited on), its NIC's rx drops, its disk, and last what its
/// interface counted arriving against what its agent read.
pub fn into(h: &HostEvidence, name: &str, lost: f64) -> Located {
    let share = |n: f64| explains(n, lost);
    let sockets = h.request_drops + h.reply_drops + h.late_requests;
    let own_reads = sockets + if h.starved() { h.late_replies } else { 0.0 };
    let mut figures = vec![
        ("socket_drops_pkts", h.request_drops + h.reply_drops),
        ("late_reads_pkts", h.late_requests),
        ("nic_rx_drops_pkts", h.nic_rx_drops),
    ];
    if let Some(gap) = h.rx_gap {
        figures.push(("nic_rx_unread_pkts", gap));
    }
    // An agent that could not run: anything its sockets counted is its (with
    // GRO one drop can be a batch of up to 64 datagrams).
    if let Some(starved) = h.starvation().filter(|_| own_reads > 0.0) {
        figures.push(("behind_ms", h.behind_ms));
        figures.push(("throttled_ms", h.throttled_ms));
        return starved_reader(h, name, starved, figures);
    }
    if share(sockets) {
        return sockets_overflowed(h, name, figures);
    }
    if share(h.nic_rx_drops) {
        return Located::new(
            vec![Place::ReceivePath],
            Why::NicRxDrops {
                nic: h.nic(name),
                drops: h.nic_rx_drops,
            },
            figures,
        );
    }
    let rx_lost = lost * (1.0 - h.rx_left_out);
    let gap_explains = h.rx_gap.is_some_and(|gap| explains(gap, rx_lost));
    if let Some(busy) = h.disk_waits().filter(|_| !gap_explains) {
        return Located::new(
            vec![Place::Disk, Place::Wire],
            Why::DiskHeldReads {
                host: name.to_string(),
                busy_pct: busy,
            },
            figures,
        )
        .by_the_agent();
    }
    unread_or_wire(h, name, lost, figures)
}

/// A host's count of `n` packets explains a loss of `lost` when it covers
/// at least [`EXPLAINED_SHARE`] of it (no loss, nothing to explain).
fn explains(n: f64, lost: f64) -> bool {
    lost > 0.0 && n >= EXPLAINED_SHARE * lost
}

/// What its sockets counted of the packets lost into it: drops at its full
/// sockets, and reads too late to count. Late replies are its own late
/// reads only when its agent was starved (else its peers may have answered
/// late).
fn counted_into(h: &HostEvidence) -> (f64, f64) {
    let dropped = h.request_drops + h.reply_drops;
    let late = h.late_requests + if h.starved() { h.late_replies } else { 0.0 };
    (dropped, late)
}

/// An agent that did not get the CPU to read: its CPU, or its CPU or its
/// disk when its busiest worker waited on the disk too.
fn starved_reader(
    h: &HostEvidence,
    name: &str,
    starved: Starvation,
    figures: Vec<(&'static str, f64)>,
) -> Located {
    let (dropped, late) = counted_into(h);
    let disk_busy_pct = h.disk_waits();
    let places = match disk_busy_pct {
        Some(_) => vec![Place::Cpu, Place::Disk],
        None => vec![Place::Cpu],
    };
    let why = Why::StarvedReader {
        host: name.to_string(),
        starved,
        dropped,
        late,
        disk_busy_pct,
    };
    Located::new(places, why, figures).by_the_agent()
}

/// Its sockets overflowed with CPU to spare: its receive path, or its disk
/// when its answers waited on it (requests queue meanwhile).
fn sockets_overflowed(h: &HostEvidence, name: &str, figures: Vec<(&'static str, f64)>) -> Located {
    let (dropped, late) = counted_into(h);
    let disk_busy_pct = h.disk_waits();
    let places = match disk_busy_pct {
        Some(_) => vec![Place::Disk],
        None => vec![Place::ReceivePath],
    };
    let why = Why::SocketsOverflowed {
        host: name.to_string(),
        dropped,
        late,
        disk_busy_pct,
    };
    Located::new(places, why, figures).by_the_agent()
}

/// Nothing the host's kernel counted explains the loss: set what its
/// interface counted arriving against what its agent read. A gap that
/// explains it is inside the host; one under [`CLEARED_SHARE`] clears it
/// (the wire); in between, or with no comparable counts, both are named.
fn unread_or_wire(
    h: &HostEvidence,
    name: &str,
    lost: f64,
    figures: Vec<(&'static str, f64)>,
) -> Located {
    // The loss of the intervals the gap covers, at the run's mean.
    let lost = lost * (1.0 - h.rx_left_out);
    let nic = h.nic(name);
    let (places, why) = match h.rx_gap {
        Some(gap) if explains(gap, lost) => (
            vec![Place::ReceivePath],
            Why::DroppedAfterNic { nic, unread: gap },
        ),
        Some(gap) if gap < CLEARED_SHARE * lost => (vec![Place::Wire], Why::LostBeforeNic { nic }),
        Some(gap) => (
            vec![Place::Wire, Place::ReceivePath],
            Why::PartlyAfterNic { nic, unread: gap },
        ),
        None => (
            vec![Place::Wire, Place::ReceivePath],
            Why::IntoUncompared { nic },
        ),
    };
    Located::new(places, why, figures)
}

/// Loss out of `h` that its own counts put in its transmit path: what its
/// kernel dropped or would not take, what its interface never sent.
fn capped_egress(h: &HostEvidence, name: &str, figures: Vec<(&'static str, f64)>) -> Located {
    Located::new(
        vec![Place::TransmitPath],
        Why::CappedEgress {
            nic: h.nic(name),
            sndbuf_errors: h.sndbuf_errors,
            unanswered: h.unanswered,
            unsent: h.tx_gap.unwrap_or(0.0),
            egress_bps: h.egress_bps,
        },
        figures,
    )
}

/// Loss out of `h` whose kernel's drops on the way out explain it, while
/// its neighbour table was full or could not resolve: a host that cannot
/// resolve a peer's link-layer address drops what it sends there, and
/// counts it in UDP SndbufErrors as a full qdisc's drops are (`None`: the
/// tables counted nothing, and the drops are its egress's).
fn unresolved(
    h: &HostEvidence,
    name: &str,
    lost: f64,
    figures: &[(&'static str, f64)],
) -> Option<Located> {
    let counted = h.neigh_table_fulls > 0.0 || h.neigh_res_failed > 0.0;
    if !counted || !explains(h.sndbuf_errors, lost) {
        return None;
    }
    let mut figures = figures.to_vec();
    figures.push(("neigh_table_fulls", h.neigh_table_fulls));
    figures.push(("neigh_res_failed", h.neigh_res_failed));
    let why = Why::NeighbourTable {
        host: name.to_string(),
        ipv6: h.ipv6,
        dropped: h.sndbuf_errors,
        table_fulls: h.neigh_table_fulls,
        res_failed: h.neigh_res_failed,
    };
    Some(Located::new(vec![Place::NeighbourTable], why, figures))
}

/// Loss of `lost` packets on their way out of `h` (`name`), `answers` of
/// them replies it sent.
pub fn out_of(h: &HostEvidence, name: &str, lost: f64, answers: f64) -> Located {
    let share = |n: f64, of: f64| of > 0.0 && n >= EXPLAINED_SHARE * of;
    // What its kernel dropped, and the replies it would not take: both lost
    // on the host, before its interface.
    let dropped = h.sndbuf_errors + h.nic_tx_drops;
    let kept_back = dropped + h.unanswered;
    let mut figures = vec![
        ("udp_sndbuf_errors_pkts", h.sndbuf_errors),
        ("nic_tx_drops_pkts", h.nic_tx_drops),
    ];
    if h.unanswered > 0.0 {
        figures.push(("unanswered_replies_pkts", h.unanswered));
    }
    if let Some(gap) = h.tx_gap {
        figures.push(("nic_tx_unsent_pkts", gap));
    }
    if let Some(bps) = h.egress_bps {
        figures.push(("egress_bps", bps));
    }
    // The gap covers only the intervals its agent sent uncoalesced: it is
    // set against their share of the loss, the host's own counts against all.
    let tx_lost = lost * (1.0 - h.tx_left_out);
    let explained = share(kept_back, lost) || h.tx_gap.is_some_and(|gap| share(gap, tx_lost));
    // A starved agent counts a reply as handed to the kernel when it queues
    // it, and hands it over when it next gets the CPU, an interval later or
    // more: its interface's count lags its own, and a burst of replies can
    // fill its socket's buffer. With no drop the kernel counted, that is
    // its CPU, not its egress.
    if dropped == 0.0
        && explained
        && let Some(starved) = h.starvation()
    {
        figures.push(("behind_ms", h.behind_ms));
        let why = Why::StarvedSender {
            nic: h.nic(name),
            starved,
            unsent: h.tx_gap.unwrap_or(0.0).max(kept_back),
        };
        return Located::new(vec![Place::Cpu], why, figures).by_the_agent();
    }
    if explained {
        if let Some(located) = unresolved(h, name, lost, &figures) {
            return located;
        }
        return capped_egress(h, name, figures);
    }
    if let Some(starved) = h.starvation().filter(|_| share(h.late_answers, answers)) {
        figures.push(("behind_ms", h.behind_ms));
        figures.push(("late_answers_pkts", h.late_answers));
        let why = Why::AnsweredLate {
            host: name.to_string(),
            starved,
            late_answers: h.late_answers,
        };
        return Located::new(vec![Place::Cpu], why, figures).by_the_agent();
    }
    let nic = h.nic(name);
    let (places, why) = match h.tx_gap {
        Some(gap) if gap < CLEARED_SHARE * tx_lost => {
            (vec![Place::Wire], Why::LostAfterNic { nic })
        }
        // Counted, short of the loss: part on the host, the rest beyond it.
        Some(gap) if kept_back > 0.0 || gap > 0.0 => (
            vec![Place::Wire, Place::TransmitPath],
            Why::PartlyOnHost {
                nic,
                kept_back,
                unsent: gap,
                lost,
            },
        ),
        _ => (
            vec![Place::Wire, Place::TransmitPath],
            Why::OutUncompared { nic },
        ),
    };
    Located::new(places, why, figures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_explains_a_loss_from_half_of_it_and_no_loss_is_never_explained() {
        assert!(explains(50.0, 100.0));
        assert!(!explains(49.0, 100.0));
        assert!(!explains(0.0, 0.0));
    }

    #[test]
    fn late_replies_are_a_hosts_own_late_reads_only_when_its_agent_starved() {
        let h = HostEvidence {
            request_drops: 3.0,
            late_requests: 10.0,
            late_replies: 5.0,
            ..HostEvidence::default()
        };
        // 3 dropped, 10 read late: its peers may have answered the 5
        // replies late.
        assert_eq!(counted_into(&h), (3.0, 10.0));
        let starved = HostEvidence {
            behind_ms: STARVED_BEHIND_MS,
            ..h
        };
        assert_eq!(counted_into(&starved), (3.0, 15.0));
    }

    #[test]
    fn an_unread_gap_is_the_host_from_half_the_loss_and_clears_it_under_a_fifth() {
        let places = |gap: Option<f64>| {
            let h = HostEvidence {
                rx_gap: gap,
                nic_counted: true,
                ..HostEvidence::default()
            };
            unread_or_wire(&h, "h2", 100.0, Vec::new()).places
        };
        assert_eq!(places(Some(50.0)), vec![Place::ReceivePath]);
        assert_eq!(places(Some(19.0)), vec![Place::Wire]);
        assert_eq!(places(Some(20.0)), vec![Place::Wire, Place::ReceivePath]);
        assert_eq!(places(None), vec![Place::Wire, Place::ReceivePath]);
    }

    #[test]
    fn drops_on_the_way_out_while_the_neighbour_table_was_full_are_the_table_not_the_qdisc() {
        // 120 hosts of a flat L2 domain past gc_thresh3: the kernel dropped
        // 288 of the 320 requests h39 sent, and its table was full.
        let full = HostEvidence {
            sndbuf_errors: 288.0,
            tx_gap: Some(288.0),
            nic_counted: true,
            neigh_table_fulls: 26_409.0,
            ..HostEvidence::default()
        };
        let located = out_of(&full, "h39", 288.0, 0.0);
        assert_eq!(located.places, vec![Place::NeighbourTable]);
        assert!(
            matches!(
                located.why,
                Why::NeighbourTable {
                    dropped: 288.0,
                    table_fulls: 26_409.0,
                    ipv6: false,
                    ..
                }
            ),
            "{:?}",
            located.why
        );
        assert!(located.figures.contains(&("neigh_table_fulls", 26_409.0)));
        // Resolutions that got no answer count too.
        let failed = HostEvidence {
            neigh_table_fulls: 0.0,
            neigh_res_failed: 40.0,
            ..full.clone()
        };
        assert_eq!(
            out_of(&failed, "h39", 288.0, 0.0).places,
            vec![Place::NeighbourTable]
        );
        // The same drops with tables that counted nothing: a full qdisc.
        let qdisc = HostEvidence {
            neigh_table_fulls: 0.0,
            ..full
        };
        assert_eq!(
            out_of(&qdisc, "h39", 288.0, 0.0).places,
            vec![Place::TransmitPath]
        );
    }

    #[test]
    fn replies_a_host_would_not_take_behind_a_full_qdisc_are_its_transmit_path() {
        // A capped egress under a starved agent: the qdisc dropped 55,130,
        // the socket's full buffer refused 87,205 replies, and the
        // interface's gap (33,721) alone explains under half of 120,324.
        let capped = HostEvidence {
            sndbuf_errors: 55_130.0,
            unanswered: 87_205.0,
            tx_gap: Some(33_721.0),
            nic_counted: true,
            behind_ms: 117.0,
            ..HostEvidence::default()
        };
        let located = out_of(&capped, "h2", 120_324.0, 100_000.0);
        assert_eq!(located.places, vec![Place::TransmitPath]);
        assert!(
            matches!(
                located.why,
                Why::CappedEgress {
                    sndbuf_errors: 55_130.0,
                    unanswered: 87_205.0,
                    unsent: 33_721.0,
                    ..
                }
            ),
            "{:?}",
            located.why
        );
        assert!(
            located
                .figures
                .contains(&("unanswered_replies_pkts", 87_205.0))
        );
        // Without the refused replies, its counts fall short of the loss:
        // the host's part and the wire's, with the counts said (not "no
        // drop", not "coalesced").
        let short = HostEvidence {
            unanswered: 0.0,
            ..capped.clone()
        };
        let located = out_of(&short, "h2", 120_324.0, 100_000.0);
        assert_eq!(located.places, vec![Place::Wire, Place::TransmitPath]);
        assert!(
            matches!(
                located.why,
                Why::PartlyOnHost {
                    kept_back: 55_130.0,
                    unsent: 33_721.0,
                    lost: 120_324.0,
                    ..
                }
            ),
            "{:?}",
            located.why
        );
        // A starved agent whose kernel dropped nothing: its replies were
        // held back by its CPU, not its egress.
        let starved = HostEvidence {
            sndbuf_errors: 0.0,
            tx_gap: Some(0.0),
            ..capped
        };
        let located = out_of(&starved, "h2", 120_324.0, 100_000.0);
        assert_eq!(located.places, vec![Place::Cpu]);
    }
}
