//! The fleet's lines: REQUESTS, DELIVERED, REPLIES, TARGET, TOTAL and LOSS,
//! REFUSED, RTT and ORDER, SPREAD across the flows, each pool direction's
//! own lines, and a disk run's DISK lines.

use std::fmt::Write as _;

use crate::analysis::aggregate::ReportSet;
use crate::analysis::figures::{self, Context, percent};
use crate::analysis::spread;
use crate::render::words;
use mx_base::units::{self, bits, byte_rate, micros, pps};
use mx_matrix::DiskMode;

/// REQUESTS, DELIVERED, REPLIES, TARGET, TOTAL and LOSS.
pub(crate) fn fleet_lines(t: &mut String, ctx: &Context, fleet: &figures::Fleet) {
    let (req_wire, rep_wire) = figures::wire(fleet, ctx);
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire{:>16} payload",
        "REQUESTS",
        pps(fleet.requests),
        bits(req_wire),
        bits(fleet.request_payload)
    );
    match fleet.delivered {
        Some(delivered) => {
            let share = if fleet.requests > 0.0 {
                format!("{:.2}%", percent(delivered, fleet.requests))
            } else {
                "-".to_string()
            };
            let _ = writeln!(
                t,
                "  {:<10}{:>14}{share:>9} of what was sent",
                "DELIVERED",
                pps(delivered)
            );
        }
        None => {
            let _ = writeln!(
                t,
                "  {:<10}{:>14}   not reported: no receiver wrote rx rows",
                "DELIVERED", "-"
            );
        }
    }
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire{:>16} payload",
        "REPLIES",
        pps(fleet.replies),
        bits(rep_wire),
        bits(fleet.reply_payload)
    );
    if fleet.target > 0.0 {
        let _ = writeln!(
            t,
            "  {:<10}{:>14}{:>9} achieved",
            "TARGET",
            pps(fleet.target),
            format!("{:.1}%", percent(fleet.requests, fleet.target))
        );
    }
    let _ = writeln!(
        t,
        "  {:<10}{:>14}{:>16} wire, both directions",
        "TOTAL",
        pps(fleet.requests + fleet.replies),
        bits(req_wire + rep_wire)
    );
    let legs = match (fleet.forward_loss(), fleet.return_loss()) {
        (Some(fwd), Some(back)) => format!("({fwd:.2}% forward, {back:.2}% on the way back)"),
        _ => "(forward/return split unknown: no receiver reported)".to_string(),
    };
    let _ = writeln!(
        t,
        "  {:<10}{:>13}   round trip {legs}{}",
        "LOSS",
        format!("{:.2}%", fleet.round_trip_loss()),
        lost_count(&fleet.packets)
    );
}

/// A count of packets, whole.
fn whole(n: f64) -> String {
    format!("{n:.0}")
}

/// Where a share would mislead, the count behind it: few packets lost (a
/// share of a handful moves by a packet), or few sent (a low-rate run,
/// whose 0.00% rests on hundreds, not millions): `: 3 of 600 requests lost
/// (2 forward, 1 on the way back)`. Empty otherwise.
pub(crate) fn lost_count(p: &figures::Packets) -> String {
    const FEW_LOST: f64 = 100.0;
    const FEW_SENT: f64 = 10_000.0;
    let lost = (p.sent - p.back).max(0.0);
    let few = p.sent < FEW_SENT || (lost > 0.0 && lost < FEW_LOST);
    if p.sent <= 0.0 || !few {
        return String::new();
    }
    let legs = match p.arrived {
        Some(arrived) if lost > 0.0 => {
            let forward = (p.sent - arrived).clamp(0.0, lost);
            format!(
                " ({} forward, {} on the way back)",
                whole(forward),
                whole(lost - forward)
            )
        }
        _ => String::new(),
    };
    format!(": {} of {} requests lost{legs}", whole(lost), whole(p.sent))
}

/// Requests the receivers left unanswered by plan, when some were: how many,
/// and the pairs that sent them (most first): refused, not lost.
pub(crate) fn refused_line(t: &mut String, set: &ReportSet, fleet: &figures::Fleet) {
    if fleet.packets.refused <= 0.0 {
        return;
    }
    let mut pairs: Vec<(f64, u32, u32)> = set
        .rx
        .iter()
        .filter(|(_, rx)| rx.over_plan_seen > 0.0)
        .map(|(&(dst, src), rx)| (rx.over_plan_seen, src, dst))
        .collect();
    pairs.sort_by(|a, b| b.0.total_cmp(&a.0));
    let named: Vec<String> = pairs
        .iter()
        .take(3)
        .map(|&(n, src, dst)| format!("{} -> {} {}", set.name(src), set.name(dst), units::ops(n)))
        .collect();
    let more = if pairs.len() > 3 {
        format!(" and {} more pairs", pairs.len() - 3)
    } else {
        String::new()
    };
    let _ = writeln!(
        t,
        "  {:<10}{:>13}   requests refused by plan, not lost: sent past the receiver's matrix rate +{:.0}% ({}{more})",
        "REFUSED",
        units::ops(fleet.packets.refused),
        mx_matrix::load::ANSWER_HEADROOM * 100.0,
        named.join(", ")
    );
}

/// The RTT line: exact fleet-wide percentiles when every host sent its
/// histogram, else the worst flow's worst interval, said to be.
pub(crate) fn rtt_text(set: &ReportSet, fleet: &figures::Fleet) -> String {
    let avg = fleet.rtt_avg.map_or("avg -".to_string(), |a| {
        format!("avg {} over all replies", micros(Some(a)))
    });
    let max = micros(fleet.rtt_max);
    match (fleet.exact, fleet.worst_flow) {
        (Some((p50, p99, p999)), _) => format!(
            "{avg}; p50 {}  p99 {}  p99.9 {} fleet-wide (exact, from every host's histogram); max {max}",
            micros(Some(p50)),
            micros(Some(p99)),
            micros(Some(p999))
        ),
        (None, Some((src, dst, p50, p99))) => format!(
            "{avg}; worst flow p50 {}  p99 {} ({} -> {}, its worst interval); max {max}",
            micros(p50),
            micros(Some(p99)),
            set.name(src),
            set.name(dst)
        ),
        (None, None) => "not measured: no reply came back in the window".to_string(),
    }
}

/// The smallest round trip and the jitter under the RTT line, and the
/// packets that arrived twice or out of order, when any did.
pub(crate) fn extra_rtt_lines(t: &mut String, fleet: &figures::Fleet) {
    if fleet.rtt_min.is_some() || fleet.jitter.is_some() {
        let _ = writeln!(
            t,
            "  {:<10}min {}, jitter {} (the mean difference between a flow's successive round trips)",
            "",
            micros(fleet.rtt_min),
            fleet
                .jitter
                .map_or("-".to_string(), |j| format!("{j:.1}us"))
        );
    }
    if fleet.dup > 0.0 || fleet.ooo > 0.0 {
        let _ = writeln!(
            t,
            "  {:<10}{} packets arrived twice, {} out of order (requests and replies, over the span)",
            "ORDER",
            words::count(fleet.dup),
            words::count(fleet.ooo)
        );
    }
}

/// SPREAD: per flow, the delivered rates across the flows (mean, standard
/// deviation, min, median, max, Jain's index), in pps and wire bits, for
/// the requests that reached their receivers and the replies back.
pub(crate) fn spread_lines(
    t: &mut String,
    indent: &str,
    ctx: &Context,
    fleet: &figures::Fleet,
    spread: &spread::FlowSpread,
) {
    if spread.flows < 2 {
        // One flow has no spread to speak of.
        return;
    }
    let _ = writeln!(
        t,
        "{indent}{:<10}{:<24}{:>11}{:>11}{:>11}{:>11}{:>11}  Jain's index",
        "SPREAD",
        format!("across {} flows", spread.flows),
        "mean",
        "sd",
        "min",
        "median",
        "max"
    );
    let rows = [
        ("requests delivered", spread.delivered, ctx.tx_size),
        ("replies back", spread.back, ctx.rx_size),
    ];
    for (what, s, size) in rows {
        let Some(s) = s else {
            let _ = writeln!(
                t,
                "{indent}  {what:<32}-   not reported: no receiver wrote rx rows"
            );
            continue;
        };
        let label = if s.flows < spread.flows {
            format!("{what} ({} of {})", s.flows, spread.flows)
        } else {
            what.to_string()
        };
        let jain = s.jain.map_or("-".to_string(), |j| format!("{j:.4}"));
        let cells = |s: &spread::Spread, f: fn(f64) -> String| {
            [s.mean, s.sd, s.min, s.median, s.max]
                .map(|v| format!("{:>11}", f(v)))
                .concat()
        };
        let _ = writeln!(t, "{indent}  {label:<32}{}  {jain}", cells(&s, pps));
        let wire = s.scaled(fleet.wire(1.0, size));
        let _ = writeln!(t, "{indent}  {:<32}{}  wire", "", cells(&wire, bits));
    }
    if spread.delivered.is_some_and(|s| s.flows < spread.flows) {
        let _ = writeln!(
            t,
            "{indent}  (requests delivered: the other flows' receivers wrote no rx rows, so what reached them is not known)"
        );
    }
}

/// A pool-to-pool run's directions, each the fleet lines' figures over its
/// flows: what the senders' pool sent, what reached the other pool (and at
/// what wire rate: a capped uplink shows here), loss by leg, and RTT.
pub fn pool_lines(t: &mut String, set: &ReportSet, ctx: &Context, pools: &[figures::PoolFigures]) {
    for pool in pools {
        let f = &pool.fleet;
        let _ = writeln!(
            t,
            "  POOL {} -> {} and back: {} flows, {} sending to {} answering",
            pool.from,
            pool.to,
            pool.flows,
            hosts_count(pool.senders),
            hosts_count(pool.receivers)
        );
        let (req_wire, _) = figures::wire(f, ctx);
        let _ = writeln!(
            t,
            "    {:<10}{:>14}{:>16} wire",
            "REQUESTS",
            pps(f.requests),
            bits(req_wire)
        );
        match f.delivered {
            Some(delivered) => {
                let share = if f.requests > 0.0 {
                    format!("{:.2}%", percent(delivered, f.requests))
                } else {
                    "-".to_string()
                };
                let _ = writeln!(
                    t,
                    "    {:<10}{:>14}{:>16} wire{share:>9} of what was sent reached {}",
                    "DELIVERED",
                    pps(delivered),
                    bits(f.wire(delivered, ctx.tx_size)),
                    pool.to
                );
            }
            None => {
                let _ = writeln!(
                    t,
                    "    {:<10}{:>14}   not reported: no receiver wrote rx rows",
                    "DELIVERED", "-"
                );
            }
        }
        let legs = match (f.forward_loss(), f.return_loss()) {
            (Some(fwd), Some(back)) => format!(
                "({fwd:.2}% on the way to {}, {back:.2}% on the way back)",
                pool.to
            ),
            _ => "(forward/return split unknown: no receiver reported)".to_string(),
        };
        let _ = writeln!(
            t,
            "    {:<10}{:>13}   round trip {legs}",
            "LOSS",
            format!("{:.2}%", f.round_trip_loss())
        );
        let rtt = match f.exact {
            Some((p50, p99, p999)) => format!(
                "p50 {}  p99 {}  p99.9 {} (exact, from the {} hosts' histograms)",
                micros(Some(p50)),
                micros(Some(p99)),
                micros(Some(p999)),
                pool.from
            ),
            None => rtt_text(set, f),
        };
        let _ = writeln!(t, "    {:<10}{rtt}", "RTT");
        spread_lines(t, "    ", ctx, f, &pool.spread);
    }
}

fn hosts_count(n: usize) -> String {
    if n == 1 {
        "1 host".to_string()
    } else {
        format!("{n} hosts")
    }
}

/// DISK READ, DISK WRITE and DISK BUSY, the lines of a disk run, and which
/// disk I/O the RTT holds: a disk run's responder answers only once its disk
/// has done its part, so the round trip is a storage client's, not the
/// network's alone.
pub(crate) fn disk_lines(
    t: &mut String,
    set: &ReportSet,
    ctx: &Context,
    disk: &figures::FleetDisk,
) {
    for (label, d, host) in [
        ("DISK READ", disk.read, disk.read_p99_host),
        ("DISK WRITE", disk.write, disk.write_p99_host),
    ] {
        // A direction no host measured has no line (not a line of zeros).
        let Some(iops) = d.iops else {
            continue;
        };
        // The rows carry each interval's p99, not a histogram: the worst
        // host's is its worst interval's, and said to be.
        let worst = host.map_or(String::new(), |h| {
            format!(" ({}, its worst interval)", set.name(h))
        });
        let _ = writeln!(
            t,
            "  {label:<11}{}   {} IOPS   avg {}, worst host p99 {}{worst}",
            byte_rate(d.bytes_per_s.unwrap_or(0.0)),
            units::ops(iops),
            micros(d.avg_us),
            micros(d.p99_us)
        );
    }
    let (host, busy) = disk.busiest;
    let _ = writeln!(
        t,
        "  DISK BUSY {busy:.0}%   of the busiest worker's time, on {}",
        set.name(host)
    );
    let _ = writeln!(t, "            {}", rtt_disk_sentence(ctx.disk_mode()));
}

/// Which of the responder's disk I/O a disk run's RTT includes (its mode,
/// from the matrix): the requester's own I/O is outside the RTT (a request's
/// read comes before its stamp, a reply's write after its timing).
fn rtt_disk_sentence(mode: Option<DiskMode>) -> &'static str {
    match mode {
        Some(DiskMode::Replies) => {
            "RTT includes the responder's disk read: each reply waits for its payload to be read from the responder's disk, as a storage read would"
        }
        Some(DiskMode::Requests) => {
            "RTT includes the responder's disk write: each reply waits for the request's payload to be written to the responder's disk, as a storage write would"
        }
        Some(DiskMode::Both) => {
            "RTT includes the responder's disk write and read: each reply waits for the request's payload to be written and its own to be read, as storage would"
        }
        Some(DiskMode::Off) | None => {
            "RTT includes the responder's disk I/O: which (read, write or both) is in the run's matrix, not found here"
        }
    }
}
