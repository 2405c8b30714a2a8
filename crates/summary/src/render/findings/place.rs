//! Why a host's loss sits where it does, in words: what its kernel, its
//! interface and its agent counted ([`Why`]).

use crate::analysis::diagnosis::says::{Nic, Starvation, Why};
use crate::render::words::count;

/// The sentence for `why`.
pub fn why(why: &Why) -> String {
    match why {
        Why::StarvedSender { .. }
        | Why::CappedEgress { .. }
        | Why::NeighbourTable { .. }
        | Why::AnsweredLate { .. }
        | Why::LostAfterNic { .. }
        | Why::PartlyOnHost { .. }
        | Why::OutUncompared { .. }
        | Why::PathBetween { .. } => out_of(why),
        Why::StarvedReader { .. }
        | Why::SocketsOverflowed { .. }
        | Why::NicRxDrops { .. }
        | Why::DiskHeldReads { .. }
        | Why::DroppedAfterNic { .. }
        | Why::LostBeforeNic { .. }
        | Why::PartlyAfterNic { .. }
        | Why::IntoUncompared { .. } => into(why),
    }
}

/// Loss into a host: what its sockets, its NIC and its agent counted.
fn into(why: &Why) -> String {
    match why {
        Why::StarvedReader {
            host: name,
            starved,
            dropped,
            late,
            disk_busy_pct,
        } => {
            let why = starvation(starved);
            let counted = counted_into(name, *dropped, *late);
            match disk_busy_pct {
                Some(busy) => format!(
                    "{name}'s agent {why}, and its busiest worker spent {busy:.0}% of its time in disk I/O; {counted}: {name}'s CPU or its disk, not the network -- a run without --disk tells which"
                ),
                None => format!(
                    "{name}'s agent {why}; {counted}: {name}'s CPU, not the network -- give its agent the CPU it needs (a quota, other load on that box), then rerun"
                ),
            }
        }
        Why::SocketsOverflowed {
            host: name,
            dropped,
            late,
            disk_busy_pct,
        } => {
            let counted = counted_into(name, *dropped, *late);
            match disk_busy_pct {
                Some(busy) => format!(
                    "{counted}, while its busiest worker spent {busy:.0}% of its time in disk I/O: requests queue in its sockets while its answers wait on the disk: {name}'s disk, not the network -- a faster disk, more `mx start --workers` (one I/O in flight each), or a lower --pps"
                ),
                None => format!(
                    "{counted}, with CPU to spare: {name}'s receive path (its sockets' buffers), not the network -- raise `mx start --rcvbuf 16777216` or `--workers`, or find what else loads {name}"
                ),
            }
        }
        Why::NicRxDrops { nic, drops } => format!(
            "{} counted {} rx drops: {}'s NIC or its driver dropped them before the kernel saw them -- look at its ring size (`ethtool -g`) and interrupt load",
            nic_name(nic),
            count(*drops),
            nic.host
        ),
        Why::DiskHeldReads {
            host: name,
            busy_pct: busy,
        } => format!(
            "{name}'s busiest worker spent {busy:.0}% of its time in disk I/O: a responder waiting on its disk stops reading, and requests are likely lost on {name} itself, though its kernel counted no drop -- compare a run without --disk to tell the disk's share from the wire's"
        ),
        Why::DroppedAfterNic { nic, unread } => {
            let name = &nic.host;
            format!(
                "{} counted {} more packets arriving than its agent read: they were dropped inside {name}, after its NIC -- a host firewall (nftables, iptables) or its IP stack: `nft list ruleset` and `netstat -su` on {name}",
                nic_name(nic),
                count(*unread)
            )
        }
        Why::LostBeforeNic { nic } => {
            let name = &nic.host;
            format!(
                "{} counted no more than its agent read, and its kernel dropped none: they were lost before {name}'s NIC -- on the wire: {name}'s cable, its switch port or the switch (the port's error and discard counters)",
                nic_name(nic)
            )
        }
        Why::PartlyAfterNic { nic, unread } => {
            let name = &nic.host;
            format!(
                "{} counted {} more packets arriving than its agent read, short of what was lost: some were dropped inside {name} after its NIC (a host firewall), the rest before it, on the wire -- `nft list ruleset` on {name}, and its switch port's counters",
                nic_name(nic),
                count(*unread),
            )
        }
        Why::IntoUncompared { nic } => {
            let name = &nic.host;
            format!(
                "{name}'s kernel counted no drop, and {}: on the wire before {name}'s NIC, or inside {name} after it (a host firewall), the evidence fits both{}",
                uncounted(nic),
                gso_tells(nic)
            )
        }
        _ => unreachable!("out of a host: {why:?}"),
    }
}

/// Loss out of a host, or between a pair: what its kernel and its
/// interface counted.
fn out_of(why: &Why) -> String {
    match why {
        Why::StarvedSender {
            nic,
            starved,
            unsent,
        } => format!(
            "{}'s agent {}, and its kernel counted no drop on the way out: the {} packets fewer that left {} than its agent counted handing the kernel were handed late, or never, by an agent that did not get the CPU -- its CPU, not the network",
            nic.host,
            starvation(starved),
            count(*unsent),
            nic_name(nic)
        ),
        Why::CappedEgress {
            nic,
            sndbuf_errors,
            unanswered,
            unsent,
            egress_bps,
        } => capped(nic, *sndbuf_errors, *unanswered, *unsent, *egress_bps),
        Why::NeighbourTable {
            host,
            ipv6,
            dropped,
            table_fulls,
            res_failed,
        } => unresolved(host, *ipv6, *dropped, *table_fulls, *res_failed),
        Why::AnsweredLate {
            host: name,
            starved,
            late_answers,
        } => format!(
            "{name}'s agent {}, and {} of the replies it owed came back after their interval was written: {name} answered late -- its CPU, not the network",
            starvation(starved),
            count(*late_answers)
        ),
        Why::LostAfterNic { nic } => {
            let name = &nic.host;
            format!(
                "{} sent everything its agent handed the kernel: they were lost after {name}'s NIC -- on the wire: {name}'s cable, its switch port or the switch (the port's error and discard counters)",
                nic_name(nic)
            )
        }
        Why::PartlyOnHost {
            nic,
            kept_back,
            unsent,
            lost,
        } => {
            let name = &nic.host;
            format!(
                "{name}'s kernel dropped or would not take {} packets on their way out and {} fewer packets left {} than its agent handed the kernel, short of the {} lost: some in {name}'s transmit path, the rest beyond it, on the wire -- `tc -s qdisc show` on {name}, and its switch port's counters",
                count(*kept_back),
                count(*unsent),
                nic_name(nic),
                count(*lost)
            )
        }
        Why::OutUncompared { nic } => {
            let name = &nic.host;
            format!(
                "{name}'s kernel counted no drop on the way out, and {}: in {name}'s transmit path or on the wire beyond it, the evidence fits both{}",
                uncounted(nic),
                gso_tells(nic)
            )
        }
        Why::PathBetween { from, to, streams } => {
            let mut text = format!(
                "{from}'s and {to}'s other flows are clean, so it is this path: a link or a switch between them, a route, an ACL -- compare the path's hops (traceroute, the switches' counters)"
            );
            match streams {
                1 => text.push_str(
                    ". Its flows ran one stream each, so a fabric's equal-cost paths between them cannot be told apart: --streams 8 sends each flow from 8 ports over up to 8 paths, and tells the one that loses",
                ),
                0 => {}
                n => text.push_str(&format!(
                    ". All {n} streams of its flows lost alike: on a part every path between them shares"
                )),
            }
            text
        }
        _ => unreachable!("into a host: {why:?}"),
    }
}

/// What a starved agent's own figures say: "was throttled 420 ms by its
/// cgroup's CPU quota and fell up to 310 ms behind its send schedule".
pub(crate) fn starvation(s: &Starvation) -> String {
    let throttled = s
        .throttled_ms
        .map(|t| format!("was throttled {t:.0} ms by its cgroup's CPU quota"));
    let behind = s
        .behind_ms
        .map(|b| format!("fell up to {b:.0} ms behind its send schedule"));
    match (throttled, behind) {
        (Some(t), Some(b)) => format!("{t} and {b}"),
        (t, b) => t.or(b).unwrap_or_default(),
    }
}

/// What a host's sockets counted of the packets lost into it: drops at its
/// full sockets, and reads too late to count.
fn counted_into(name: &str, dropped: f64, late: f64) -> String {
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

/// A host whose egress (its qdisc, a rate cap) dropped or held back what
/// its agent handed the kernel.
fn capped(
    nic: &Nic,
    sndbuf_errors: f64,
    unanswered: f64,
    unsent: f64,
    egress_bps: Option<f64>,
) -> String {
    let name = &nic.host;
    let left = egress_bps.map_or(String::new(), |bps| {
        format!("; {} sent {}", nic_name(nic), mx_base::units::bits(bps))
    });
    let refused = if unanswered > 0.0 {
        format!(
            ", it would not take {} of the replies {name} owed (its socket's send buffer full),",
            count(unanswered)
        )
    } else {
        String::new()
    };
    format!(
        "{name}'s kernel dropped {} datagrams on their way out (UDP SndbufErrors: a full qdisc){refused} and {} fewer packets left {} than its agent handed the kernel{left}: a rate cap or a full queue on {name}'s egress -- `tc -s qdisc show` on {name}",
        count(sndbuf_errors),
        count(unsent),
        nic_name(nic)
    )
}

/// A host whose kernel dropped what it sent while its neighbour table was
/// full or could not resolve.
fn unresolved(name: &str, ipv6: bool, dropped: f64, table_fulls: f64, res_failed: f64) -> String {
    let (table, family) = if ipv6 {
        ("NDP", "ipv6")
    } else {
        ("ARP", "ipv4")
    };
    format!(
        "{name}'s kernel dropped {} datagrams on their way out (UDP SndbufErrors) while {}: {name} could not resolve its peers' link-layer addresses, so it could not send to them -- not its qdisc: raise net.{family}.neigh.default.gc_thresh3 (and gc_thresh1, gc_thresh2) on {name}'s machine past the neighbours it resolves (`ip -s ntable show` on {name}: its entries and bound); on a flat L2 domain of thousands of hosts, route between smaller ones",
        count(dropped),
        neighbour_counts("its", table, table_fulls, res_failed)
    )
}

/// What the neighbour tables counted, in words: `its neighbour table was
/// full 26,409 times (...) and 12 ARP resolutions got no answer`.
pub(super) fn neighbour_counts(
    whose: &str,
    table: &str,
    table_fulls: f64,
    res_failed: f64,
) -> String {
    let mut counted = Vec::new();
    if table_fulls > 0.0 {
        counted.push(format!(
            "{whose} neighbour table was full {} times (the machine's count: \"neighbor table overflow\" in its kernel log)",
            count(table_fulls)
        ));
    }
    if res_failed > 0.0 {
        counted.push(format!(
            "{} {table} resolutions got no answer",
            count(res_failed)
        ));
    }
    counted.join(" and ")
}

/// `h2's interface (eth0)`.
fn nic_name(nic: &Nic) -> String {
    match nic.name.as_deref() {
        Some(n) => format!("{}'s interface ({n})", nic.host),
        None => format!("{}'s interface", nic.host),
    }
}

/// Why its interface's packet counts cannot be set against its agent's.
fn uncounted(nic: &Nic) -> String {
    if nic.counted {
        format!(
            "{}'s packet counts cannot be set against its agent's (the traffic was coalesced: GSO/GRO, which a software interface counts per message)",
            nic_name(nic)
        )
    } else {
        format!(
            "{}'s report carries no interface counts to set against its agent's (an older agent, or an interface it could not find)",
            nic.host
        )
    }
}

/// What tells the two places apart, where the interface counted.
fn gso_tells(nic: &Nic) -> &'static str {
    if nic.counted {
        " -- a run with `--no-gso` tells them apart"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn late_reads_and_socket_drops_are_said_apart_and_only_when_counted() {
        assert_eq!(
            counted_into("h2", 3.0, 10.0),
            "the kernel dropped 3 of them at h2's full sockets and its agent read 10 of them too late to count"
        );
        assert_eq!(
            counted_into("h2", 0.0, 15.0),
            "its agent read 15 of them too late to count"
        );
    }

    #[test]
    fn a_starved_agent_says_its_throttling_and_its_lag_each_when_there() {
        let both = Starvation {
            throttled_ms: Some(420.0),
            behind_ms: Some(310.0),
        };
        assert_eq!(
            starvation(&both),
            "was throttled 420 ms by its cgroup's CPU quota and fell up to 310 ms behind its send schedule"
        );
        let behind = Starvation {
            throttled_ms: None,
            ..both
        };
        assert_eq!(
            starvation(&behind),
            "fell up to 310 ms behind its send schedule"
        );
    }
}
