//! WHAT TO DO NEXT in words: each [`Finding`]'s sentence, written from what
//! it says as data ([`Says`]), and its blames in a few words. The text, the
//! page and `--json` all take their words from here.

mod agents;
mod latency;
mod loss;
mod place;
mod rate;
mod routes;

use crate::analysis::diagnosis::{Blame, Direction, Finding, Place, Says};
use crate::document::FindingDoc;

/// The finding's sentence.
pub fn text(f: &Finding) -> String {
    said(&f.says)
}

/// What `says` says, in words.
fn said(says: &Says) -> String {
    match says {
        Says::HostLoss {
            host,
            direction,
            requests,
            replies,
            lossy_requests,
            lossy_replies,
            lost,
            place_tells_legs,
            why,
        } => loss::host(
            host,
            *direction,
            (requests, replies),
            (*lossy_requests, *lossy_replies),
            *lost,
            *place_tells_legs,
            why,
        ),
        Says::StarvedHost { into, out_of } => loss::starved(&said(into), &said(out_of)),
        Says::PairLoss { a, b, ways } => loss::pair(a, b, ways),
        Says::PathLoss {
            leg,
            flows,
            one_receiver,
        } => loss::paths(*leg, flows, one_receiver.as_deref()),
        Says::LinkLoss(link) => loss::link(link),
        Says::PoolLoss {
            ways,
            clean_outside,
        } => loss::pools(ways, *clean_outside),
        Says::FabricLoss { legs, disk } => loss::fabric(legs, disk.as_ref()),
        Says::RoundTrips { flows } => loss::round_trips(flows),
        Says::Short { hosts, why } => rate::short(hosts, why),
        Says::BusyWorker {
            host,
            agent_cpu_pct,
            fleet_sent_pct,
            worker_pps,
        } => rate::busy_worker(host, *agent_cpu_pct, *fleet_sent_pct, *worker_pps),
        Says::MoreWorkers {
            host,
            workers,
            peers,
        } => rate::more_workers(host, *workers, *peers),
        Says::DiskBound {
            hosts,
            host,
            busy_pct,
            iops,
            workers,
            depth,
        } => rate::disk_bound(*hosts, host, *busy_pct, *iops, *workers, *depth),
        Says::Coverage {
            measured,
            total,
            rotation_s,
        } => rate::coverage(*measured, *total, *rotation_s),
        Says::AllClear { landing, ramp } => rate::all_clear(*landing, ramp),
        Says::Gone {
            host,
            last_ts,
            before_end_s,
            left_out,
            gone,
        } => agents::gone(host, *last_ts, *before_end_s, *left_out, gone),
        Says::NeverHeard { hosts } => agents::never_heard(hosts),
        Says::Refused {
            receiver,
            sources,
            sent_pps,
            back_pps,
            headroom_pct,
            refused,
        } => agents::refused(
            receiver,
            sources,
            (*sent_pps, *back_pps),
            *headroom_pct,
            *refused,
        ),
        Says::Tail {
            p50_us,
            p99_us,
            spread,
            cause,
        } => latency::tail(*p50_us, *p99_us, spread, cause),
        Says::RouteChange {
            ways,
            hops,
            at,
            changes,
        } => routes::changed(ways, hops, *at, *changes),
    }
}

/// Each finding as the JSON document carries it: its words beside its data.
pub fn docs(findings: &[Finding]) -> Vec<FindingDoc> {
    findings
        .iter()
        .map(|f| FindingDoc::of(f, text(f)))
        .collect()
}

/// Serializes findings as [`docs`] writes them (a ramp step's findings).
pub(crate) fn serialize_docs<S: serde::Serializer>(
    findings: &[Finding],
    to: S,
) -> Result<S::Ok, S::Error> {
    to.collect_seq(findings.iter().map(|f| FindingDoc::of(f, text(f))))
}

/// A blame in a few words: `the wire into h2`, `h2's transmit path`.
pub fn blame(b: &Blame) -> String {
    let host = b.host.as_deref().unwrap_or("a host");
    let way = match (b.direction, b.peer.as_deref()) {
        (Some(Direction::Between), Some(peer)) => format!("between {host} and {peer}"),
        (Some(d), _) => format!("{} {host}", d.as_str()),
        (None, _) => format!("at {host}"),
    };
    match b.place {
        Place::Wire => format!("the wire {way}"),
        Place::ReceivePath => format!("{host}'s receive path"),
        Place::TransmitPath => format!("{host}'s transmit path"),
        Place::NeighbourTable => format!("{host}'s neighbour table"),
        Place::Cpu => format!("{host}'s CPU"),
        Place::Disk => format!("{host}'s disk"),
        Place::AgentStopped => format!("{host}'s agent, stopped"),
        Place::Unreachable => format!("{host}, out of reach"),
        Place::FabricWide => "the fabric as a whole".to_string(),
        Place::Path => format!("a path {way}"),
        Place::Pools => format!(
            "between pool {host} and pool {}",
            b.peer.as_deref().unwrap_or("another")
        ),
        Place::Link => format!(
            "the link {host} -> {}",
            b.peer.as_deref().unwrap_or("the next device")
        ),
        Place::Plan => format!(
            "{host} sending past {}'s plan",
            b.peer.as_deref().unwrap_or("its receiver")
        ),
        Place::Route => format!(
            "the route from {host} to {}",
            b.peer.as_deref().unwrap_or("its peer")
        ),
    }
}

/// The places a finding names, in a few words: `the wire into h2 or h2's
/// receive path`, `h1's CPU`, `the fabric as a whole` (`None` for a finding
/// that blames nothing).
pub fn brief(f: &Finding) -> Option<String> {
    let mut unique: Vec<String> = Vec::new();
    for w in f.blames.iter().map(blame) {
        if !unique.contains(&w) {
            unique.push(w);
        }
    }
    (!unique.is_empty()).then(|| unique.join(" or "))
}

#[cfg(test)]
mod tests;
