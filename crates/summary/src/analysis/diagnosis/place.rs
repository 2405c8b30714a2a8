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
use super::Place;
use super::count;

/// An agent this far behind its send schedule did not get the CPU it needed.
pub const STARVED_BEHIND_MS: f64 = 20.0;
/// A disk that held the busiest worker this share of its time (mean
/// `disk_busy_pct`) can be what a host's loss or shortfall waits on.
pub const DISK_SUSPECT_PCT: f64 = 20.0;
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
    pub fn of_all(set: &ReportSet) -> BTreeMap<u32, HostEvidence> {
        let interval = set.interval.unwrap_or(1).max(1) as f64;
        let mut all: BTreeMap<u32, HostEvidence> = set
            .hosts
            .iter()
            .map(|(&id, h)| {
                let nic = &h.nic;
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
                        rx_gap: nic.rx_gap(),
                        tx_gap: nic.tx_gap(),
                        rx_left_out: nic.left_out(false),
                        tx_left_out: nic.left_out(true),
                        sndbuf_errors: nic.sndbuf_errors.unwrap_or(0.0),
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

    /// What a starved agent's own figures say, for a sentence: "was
    /// throttled 420 ms by its cgroup's CPU quota and fell up to 310 ms
    /// behind its send schedule".
    pub fn starvation(&self) -> Option<String> {
        let throttled = (self.throttled_ms > 0.0).then(|| {
            format!(
                "was throttled {:.0} ms by its cgroup's CPU quota",
                self.throttled_ms
            )
        });
        let behind = (self.behind_ms >= STARVED_BEHIND_MS).then(|| {
            format!(
                "fell up to {:.0} ms behind its send schedule",
                self.behind_ms
            )
        });
        match (throttled, behind) {
            (Some(t), Some(b)) => Some(format!("{t} and {b}")),
            (t, b) => t.or(b),
        }
    }

    /// Its disk held its busiest worker long enough to stop it reading.
    pub fn disk_waits(&self) -> Option<f64> {
        self.disk_busy.filter(|&b| b >= DISK_SUSPECT_PCT)
    }

    /// Why its interface's packet counts cannot be set against its agent's.
    fn uncounted(&self, host: &str) -> String {
        if self.nic_counted {
            format!(
                "{}'s packet counts cannot be set against its agent's (the traffic was coalesced: GSO/GRO, which a software interface counts per message)",
                self.nic_name(host)
            )
        } else {
            format!(
                "{host}'s report carries no interface counts to set against its agent's (an older agent, or an interface it could not find)"
            )
        }
    }

    /// `h2's interface (eth0)`.
    fn nic_name(&self, host: &str) -> String {
        match self.nic.as_deref() {
            Some(n) => format!("{host}'s interface ({n})"),
            None => format!("{host}'s interface"),
        }
    }
}

/// Where, by a host's counts, its loss on one side happened, with the
/// sentence that says why and the figures it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub places: Vec<Place>,
    pub why: String,
    pub figures: Vec<(&'static str, f64)>,
    /// The place itself tells the legs apart: an agent's responder socket
    /// overflows with requests, its flow sockets with replies, so a loss
    /// on one leg alone needs no filter to explain it.
    pub explains_legs: bool,
}

impl Located {
    fn new(places: Vec<Place>, why: String, figures: Vec<(&'static str, f64)>) -> Located {
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
    if let Some(why) = h.starvation().filter(|_| own_reads > 0.0) {
        figures.push(("behind_ms", h.behind_ms));
        figures.push(("throttled_ms", h.throttled_ms));
        return starved_reader(h, name, &why, figures);
    }
    if share(sockets) {
        return sockets_overflowed(h, name, figures);
    }
    if share(h.nic_rx_drops) {
        return Located::new(
            vec![Place::ReceivePath],
            format!(
                "{} counted {} rx drops: {name}'s NIC or its driver dropped them before the kernel saw them -- look at its ring size (`ethtool -g`) and interrupt load",
                h.nic_name(name),
                count(h.nic_rx_drops)
            ),
            figures,
        );
    }
    let rx_lost = lost * (1.0 - h.rx_left_out);
    let gap_explains = h.rx_gap.is_some_and(|gap| explains(gap, rx_lost));
    if let Some(busy) = h.disk_waits().filter(|_| !gap_explains) {
        return Located::new(
            vec![Place::Disk, Place::Wire],
            format!(
                "{name}'s busiest worker spent {busy:.0}% of its time in disk I/O: a responder waiting on its disk stops reading, and requests are likely lost on {name} itself, though its kernel counted no drop -- compare a run without --disk to tell the disk's share from the wire's"
            ),
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

/// What its sockets counted of the packets lost into it, for a sentence:
/// drops at its full sockets, and reads too late to count. Late replies
/// are its own late reads only when its agent was starved (else its peers
/// may have answered late).
fn counted_into(h: &HostEvidence, name: &str) -> String {
    let dropped = h.request_drops + h.reply_drops;
    let late = h.late_requests + if h.starved() { h.late_replies } else { 0.0 };
    let mut parts = Vec::new();
    if dropped > 0.0 {
        parts.push(format!(
            "the kernel dropped {} of them at {name}'s full sockets",
            count(dropped)
        ));
    }
    if late > 0.0 {
        parts.push(format!(
            "its agent read {} of them too late to count",
            count(late)
        ));
    }
    parts.join(" and ")
}

/// An agent that did not get the CPU to read: its CPU, or its CPU or its
/// disk when its busiest worker waited on the disk too.
fn starved_reader(
    h: &HostEvidence,
    name: &str,
    why: &str,
    figures: Vec<(&'static str, f64)>,
) -> Located {
    let counted = counted_into(h, name);
    match h.disk_waits() {
        Some(busy) => Located::new(
            vec![Place::Cpu, Place::Disk],
            format!(
                "{name}'s agent {why}, and its busiest worker spent {busy:.0}% of its time in disk I/O; {counted}: {name}'s CPU or its disk, not the network -- a run without --disk tells which"
            ),
            figures,
        ),
        None => Located::new(
            vec![Place::Cpu],
            format!(
                "{name}'s agent {why}; {counted}: {name}'s CPU, not the network -- give its agent the CPU it needs (a quota, other load on that box), then rerun"
            ),
            figures,
        ),
    }
    .by_the_agent()
}

/// Its sockets overflowed with CPU to spare: its receive path, or its disk
/// when its answers waited on it (requests queue meanwhile).
fn sockets_overflowed(h: &HostEvidence, name: &str, figures: Vec<(&'static str, f64)>) -> Located {
    let counted = counted_into(h, name);
    match h.disk_waits() {
        Some(busy) => Located::new(
            vec![Place::Disk],
            format!(
                "{counted}, while its busiest worker spent {busy:.0}% of its time in disk I/O: requests queue in its sockets while its answers wait on the disk: {name}'s disk, not the network -- a faster disk, more `mx start --workers` (one I/O in flight each), or a lower --pps"
            ),
            figures,
        ),
        None => Located::new(
            vec![Place::ReceivePath],
            format!(
                "{counted}, with CPU to spare: {name}'s receive path (its sockets' buffers), not the network -- raise `mx start --rcvbuf 16777216` or `--workers`, or find what else loads {name}"
            ),
            figures,
        ),
    }
    .by_the_agent()
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
    match h.rx_gap {
        Some(gap) if explains(gap, lost) => Located::new(
            vec![Place::ReceivePath],
            format!(
                "{} counted {} more packets arriving than its agent read: they were dropped inside {name}, after its NIC -- a host firewall (nftables, iptables) or its IP stack: `nft list ruleset` and `netstat -su` on {name}",
                h.nic_name(name),
                count(gap)
            ),
            figures,
        ),
        Some(gap) if gap < CLEARED_SHARE * lost => Located::new(
            vec![Place::Wire],
            format!(
                "{} counted no more than its agent read, and its kernel dropped none: they were lost before {name}'s NIC -- on the wire: {name}'s cable, its switch port or the switch (the port's error and discard counters)",
                h.nic_name(name)
            ),
            figures,
        ),
        Some(gap) => Located::new(
            vec![Place::Wire, Place::ReceivePath],
            format!(
                "{} counted {} more packets arriving than its agent read, short of what was lost: some were dropped inside {name} after its NIC (a host firewall), the rest before it, on the wire -- `nft list ruleset` on {name}, and its switch port's counters",
                h.nic_name(name),
                count(gap),
            ),
            figures,
        ),
        None => Located::new(
            vec![Place::Wire, Place::ReceivePath],
            format!(
                "{name}'s kernel counted no drop, and {}: on the wire before {name}'s NIC, or inside {name} after it (a host firewall), the evidence fits both{}",
                h.uncounted(name),
                if h.nic_counted {
                    " -- a run with `--no-gso` tells them apart"
                } else {
                    ""
                }
            ),
            figures,
        ),
    }
}

/// Loss out of `h` that its own counts put in its transmit path: what its
/// kernel dropped or would not take, what its interface never sent.
fn capped_egress(h: &HostEvidence, name: &str, figures: Vec<(&'static str, f64)>) -> Located {
    let left = h.egress_bps.map_or(String::new(), |bps| {
        format!("; {} sent {}", h.nic_name(name), crate::units::bits(bps))
    });
    let refused = if h.unanswered > 0.0 {
        format!(
            ", it would not take {} of the replies {name} owed (its socket's send buffer full),",
            count(h.unanswered)
        )
    } else {
        String::new()
    };
    Located::new(
        vec![Place::TransmitPath],
        format!(
            "{name}'s kernel dropped {} datagrams on their way out (UDP SndbufErrors: a full qdisc){refused} and {} fewer packets left {} than its agent handed the kernel{left}: a rate cap or a full queue on {name}'s egress -- `tc -s qdisc show` on {name}",
            count(h.sndbuf_errors),
            count(h.tx_gap.unwrap_or(0.0)),
            h.nic_name(name)
        ),
        figures,
    )
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
    let unsent = h.tx_gap.unwrap_or(0.0).max(kept_back);
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
        && let Some(why) = h.starvation()
    {
        figures.push(("behind_ms", h.behind_ms));
        return Located::new(
            vec![Place::Cpu],
            format!(
                "{name}'s agent {why}, and its kernel counted no drop on the way out: the {} packets fewer that left {} than its agent counted handing the kernel were handed late, or never, by an agent that did not get the CPU -- its CPU, not the network",
                count(unsent),
                h.nic_name(name)
            ),
            figures,
        )
        .by_the_agent();
    }
    if explained {
        return capped_egress(h, name, figures);
    }
    if let Some(why) = h.starvation().filter(|_| share(h.late_answers, answers)) {
        figures.push(("behind_ms", h.behind_ms));
        figures.push(("late_answers_pkts", h.late_answers));
        return Located::new(
            vec![Place::Cpu],
            format!(
                "{name}'s agent {why}, and {} of the replies it owed came back after their interval was written: {name} answered late -- its CPU, not the network",
                count(h.late_answers)
            ),
            figures,
        )
        .by_the_agent();
    }
    match h.tx_gap {
        Some(gap) if gap < CLEARED_SHARE * tx_lost => Located::new(
            vec![Place::Wire],
            format!(
                "{} sent everything its agent handed the kernel: they were lost after {name}'s NIC -- on the wire: {name}'s cable, its switch port or the switch (the port's error and discard counters)",
                h.nic_name(name)
            ),
            figures,
        ),
        // Counted, short of the loss: part on the host, the rest beyond it.
        Some(gap) if kept_back > 0.0 || gap > 0.0 => Located::new(
            vec![Place::Wire, Place::TransmitPath],
            format!(
                "{name}'s kernel dropped or would not take {} packets on their way out and {} fewer packets left {} than its agent handed the kernel, short of the {} lost: some in {name}'s transmit path, the rest beyond it, on the wire -- `tc -s qdisc show` on {name}, and its switch port's counters",
                count(kept_back),
                count(gap),
                h.nic_name(name),
                count(lost)
            ),
            figures,
        ),
        _ => Located::new(
            vec![Place::Wire, Place::TransmitPath],
            format!(
                "{name}'s kernel counted no drop on the way out, and {}: in {name}'s transmit path or on the wire beyond it, the evidence fits both{}",
                h.uncounted(name),
                if h.nic_counted {
                    " -- a run with `--no-gso` tells them apart"
                } else {
                    ""
                }
            ),
            figures,
        ),
    }
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
        assert_eq!(
            counted_into(&h, "h2"),
            "the kernel dropped 3 of them at h2's full sockets and its agent read 10 of them too late to count"
        );
        let starved = HostEvidence {
            behind_ms: STARVED_BEHIND_MS,
            ..h
        };
        assert_eq!(
            counted_into(&starved, "h2"),
            "the kernel dropped 3 of them at h2's full sockets and its agent read 15 of them too late to count"
        );
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
            located.why.contains(
                "it would not take 87,205 of the replies h2 owed (its socket's send buffer full)"
            ),
            "{}",
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
            located.why.starts_with(
                "h2's kernel dropped or would not take 55,130 packets on their way out and 33,721 fewer packets left h2's interface than its agent handed the kernel, short of the 120,324 lost"
            ),
            "{}",
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
