//! The loss findings in words: into or out of a host, between a pair, the
//! fabric's, round trips with no leg known.

use crate::analysis::diagnosis::Direction;
use crate::analysis::diagnosis::says::{
    BusyDisk, FabricLeg, LegLoss, LegName, LinkLoss, LinkName, PairWay, PathFlow, PoolWay,
    RoundTrip, Why,
};
use crate::render::words::{count, name_list, pct, pct_range};

use super::place;

/// A starved host's loss both ways, one cause: what it did not read in
/// time (`into`, said), and what it handed out late or never (`out_of`).
pub(crate) fn starved(into: &str, out_of: &str) -> String {
    format!("{into}. The same agent lost what went out of its host too: {out_of}")
}

/// Packets lost into or out of `name`.
#[allow(clippy::too_many_arguments)]
pub fn host(
    name: &str,
    direction: Direction,
    (requests, replies): (&LegLoss, &LegLoss),
    (lossy_requests, lossy_replies): (bool, bool),
    lost: f64,
    place_tells_legs: bool,
    why: &Why,
) -> String {
    let into = direction == Direction::Into;
    let req_others = name_list(&requests.peers);
    let rep_others = name_list(&replies.peers);
    // Into h: requests of x -> h, replies of h -> x. Out of h: requests of
    // h -> x, replies of x -> h.
    let req_flows = if into {
        format!("{req_others} -> {name}")
    } else {
        format!("{name} -> {req_others}")
    };
    let rep_flows = if into {
        format!("{name} -> {rep_others}")
    } else {
        format!("{rep_others} -> {name}")
    };
    let way = if into { "into" } else { "out of" };
    let req_part = format!(
        "{} of the requests of every flow {} it ({req_flows})",
        pct_range(requests.loss_pct.iter().copied()),
        if into { "into" } else { "from" }
    );
    let rep_part = format!(
        "{} of the replies {} ({rep_flows}, on the way back)",
        pct_range(replies.loss_pct.iter().copied()),
        if into {
            "to every flow it sends"
        } else {
            "it sends back to every flow into it"
        }
    );
    // One leg alone, where the place does not explain it: something tells
    // requests from replies (their port, their size).
    let picked = |what: &str| {
        if place_tells_legs {
            String::new()
        } else {
            format!(" -- something that tells them apart drops them: {what}")
        }
    };
    let what = match (lossy_requests, lossy_replies) {
        (true, true) => format!(
            "packets {way} {name} are lost: {req_part} and {rep_part}, {} packets in all",
            count(lost)
        ),
        (true, false) => format!(
            "requests {way} {name} are lost, and only requests: {req_part}, while {}{}",
            if into {
                "the replies it gets back arrive whole"
            } else {
                "the replies it sends arrive whole"
            },
            picked("their port (a firewall or ACL rule on the agents' port), or their size")
        ),
        _ => format!(
            "replies {way} {name} are lost, and only replies: {rep_part}, while {}{}",
            if into {
                "the requests it gets arrive whole"
            } else {
                "the requests it sends arrive whole"
            },
            picked("their source port (a firewall or ACL rule), or their size")
        ),
    };
    format!("{what}; {}", place::why(why))
}

/// Packets lost between `a` and `b` alone, each way.
pub fn pair(a: &str, b: &str, ways: &[PairWay]) -> String {
    let parts: Vec<String> = ways
        .iter()
        .map(|way| {
            let (from, to) = (&way.from, &way.to);
            let legs: Vec<String> = way
                .legs
                .iter()
                .map(|&(leg, rate)| match leg {
                    LegName::Requests => {
                        format!("{} of the requests of {from} -> {to}", pct(rate) + "%")
                    }
                    LegName::Replies => {
                        format!("{} of the replies of {to} -> {from}", pct(rate) + "%")
                    }
                })
                .collect();
            format!(
                "packets from {from} to {to} are lost: {} ({} packets); {}",
                legs.join(" and "),
                count(way.lost),
                place::why(&way.why)
            )
        })
        .collect();
    format!("between {a} and {b} alone: {}", parts.join(". And "))
}

/// The flows a path finding names, at most this many (the rest counted).
const PATH_FLOWS_SHOWN: usize = 5;

/// Loss on some streams of each flow, sparing the rest: a path's.
pub fn paths(leg: LegName, flows: &[PathFlow], one_receiver: Option<&str>) -> String {
    let what = match leg {
        LegName::Requests => "requests",
        LegName::Replies => "replies",
    };
    let shown: Vec<String> = flows
        .iter()
        .take(PATH_FLOWS_SHOWN)
        .map(|f| {
            let ports: Vec<String> = f.lossy_ports.iter().map(u16::to_string).collect();
            let (n, of) = (f.lossy_ports.len(), f.streams);
            format!(
                "{n} of the {of} streams of {} -> {} {} {}% ({} packets; port{} {}), the other {} none",
                f.from,
                f.to,
                if n == 1 { "loses" } else { "lose" },
                pct(f.lost_pct),
                count(f.lost),
                if n == 1 { "" } else { "s" },
                ports.join(", "),
                of - n
            )
        })
        .collect();
    let more = flows.len().saturating_sub(PATH_FLOWS_SHOWN);
    let mut text = format!(
        "{what} lost on some paths alone: {}{}. A stream's port is the one its requests leave from and its replies come back to. A fabric hashes each stream's ports to one of its equal-cost paths, and every stream of a host's flow crosses that host alike: the loss sits on a link or switch port of the paths these streams take, not in the hosts -- mx trace sweeps their paths and names the link they share",
        shown.join("; "),
        if more > 0 {
            format!("; and {more} more flows")
        } else {
            String::new()
        }
    );
    if let Some(host) = one_receiver {
        text.push_str(&format!(
            ". Or a receive queue of {host}'s NIC, into which all of them go: its NIC hashes the same ports to its queues (RSS) -- compare its queues' drop counters (ethtool -S)"
        ));
    }
    text
}

/// Streams named in a link's evidence; the rest are counted.
const LINK_STREAMS_SHOWN: usize = 4;

/// The link (or links) the traced paths put the loss on.
pub fn link(l: &LinkLoss) -> String {
    let LinkLoss {
        links,
        decided_by_probes: decided,
        probes,
        lossy_streams: lossy,
        clean_streams: clean,
        lost,
        sent,
        traced,
    } = l;
    let (lost, sent) = (*lost, *sent);
    let arrow = |l: &LinkName| format!("{} -> {}", l.from, l.to);
    let mut shown: Vec<String> = lossy.iter().take(LINK_STREAMS_SHOWN).cloned().collect();
    if lossy.len() > LINK_STREAMS_SHOWN {
        shown.push(format!("{} more", lossy.len() - LINK_STREAMS_SHOWN));
    }
    let evidence = format!(
        "The {} lossy streams whose paths were traced ({}; {} of {} packets lost, {}%)",
        lossy.len(),
        shown.join(", "),
        count(lost),
        count(sent),
        pct(if sent > 0.0 { lost / sent * 100.0 } else { 0.0 })
    );
    let clean = format!("none of the {clean} clean streams traced ({traced} legs in all)");
    let look = |l: &LinkName| {
        format!(
            "look at that link: the port of {} it leaves by, the port of {} it comes in by, and the cable or optic between (their error and discard counters)",
            l.from, l.to
        )
    };
    match (links.as_slice(), *decided) {
        ([one], _) => format!(
            "loss on one link of the fabric: {}. {evidence} all cross it, and {clean} does -- {}",
            arrow(one),
            look(one)
        ),
        (_, Some(i)) => {
            let (l, p) = (&links[i], &probes[i]);
            let others: Vec<String> = links
                .iter()
                .enumerate()
                .filter(|&(j, _)| j != i)
                .map(|(_, l)| arrow(l))
                .collect();
            let near = if p.near_sent > 0 {
                format!(
                    "against {}% ({} of {}) of those that expired at {}",
                    pct(share(p.near_unanswered, p.near_sent)),
                    p.near_unanswered,
                    p.near_sent,
                    l.from
                )
            } else {
                format!("and {} is the host they left", l.from)
            };
            format!(
                "loss on one link of the fabric: {}. {evidence} cross it and {} alike, and {clean} crosses either; the probes tell them apart: {}% ({} of {}) of the probes that expired at {} went unanswered, {near} -- {}",
                arrow(l),
                others.join(", "),
                pct(share(p.far_unanswered, p.far_sent)),
                p.far_unanswered,
                p.far_sent,
                l.to,
                look(l)
            )
        }
        (_, None) => {
            let names: Vec<String> = links.iter().map(arrow).collect();
            format!(
                "loss on one of {} links of the fabric that these paths cannot tell apart: {}. {evidence} cross all of them, and {clean} crosses any, nor do the probes single one out -- a stream that crosses one and not the others (a host behind another leaf or spine) would tell them apart, as would their ports' discard counters",
                links.len(),
                names.join(", ")
            )
        }
    }
}

/// Loss between two pools alone.
pub fn pools(ways: &[PoolWay], clean_outside: usize) -> String {
    let (a, b) = match ways {
        [first, ..] => (first.from.as_str(), first.to.as_str()),
        [] => ("?", "?"),
    };
    let parts: Vec<String> = ways
        .iter()
        .map(|w| {
            if w.lossy_legs == 0 {
                format!("from {} to {} none", w.from, w.to)
            } else {
                format!(
                    "what crosses from {} to {} loses {}% ({} of its {} legs, {} packets)",
                    w.from,
                    w.to,
                    pct(w.lost_pct),
                    w.lossy_legs,
                    w.legs,
                    count(w.lost)
                )
            }
        })
        .collect();
    format!(
        "loss between pool {a} and pool {b} alone: {}; the {clean_outside} legs inside the pools or to others, carrying enough to have shown it, lose none. It spans the hosts of both pools and spares what stays inside them: the loss sits between the racks -- their uplinks, the fabric ports they cross, or the fabric between them (with --streams, mx trace names the link)",
        parts.join(", ")
    )
}

/// `part` of `whole` in percent (0 of nothing).
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64 * 100.0
    }
}

/// Loss everywhere; a busy disk fits as well.
pub fn fabric(legs: &[FabricLeg], disk: Option<&BusyDisk>) -> String {
    let parts: Vec<String> = legs
        .iter()
        .map(|l| {
            let what = match l.leg {
                LegName::Requests => "requests",
                LegName::Replies => "replies",
            };
            format!(
                "the typical flow loses {}% of its {what} ({} across the flows)",
                pct(l.typical_pct),
                pct_range(l.flows_pct.iter().copied())
            )
        })
        .collect();
    let mut text = format!(
        "loss everywhere: {}, and no host or pair stands out from it. It is the fabric's as a whole (a shared link or switch, a policer every path crosses), or every host's alike -- compare the switches' discard counters, and a run across fewer hops",
        parts.join("; ")
    );
    if let Some(BusyDisk {
        host: name,
        busy_pct: busy,
    }) = disk
    {
        text.push_str(&format!(
            ". Or the disk: {name}'s busiest worker spent {busy:.0}% of its time in disk I/O, and replies wait for it (one it holds past its interval's report counts as lost) -- compare a run without --disk to tell the disk's share from the fabric's"
        ));
    }
    text
}

/// Flows that lose round trips, with no leg known.
pub(crate) fn round_trips(flows: &[RoundTrip]) -> String {
    let flows: Vec<String> = flows
        .iter()
        .map(|f| format!("{} -> {} ({}%)", f.src, f.dst, pct(f.loss_pct)))
        .collect();
    format!(
        "{} lose replies: their receivers wrote no rx rows (reports without them), so which leg lost them is not known -- collect the receivers' reports",
        name_list(&flows)
    )
}
