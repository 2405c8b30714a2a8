//! The recording and alerting rules: each leg's loss, per pair and into
//! and out of each host, as a share and as a count of packets; the pattern
//! the summary's diagnosis reads (a dark column or row of a host); and the
//! alerts on it, one per fault.
//!
//! Every count comes from the flow's sender alone. Its replies carry the
//! responder's count of the requests that arrived, so the sender's target
//! serves, per peer, the requests it has settled
//! (`mx_requests_settled_total`), those of them lost on the way out
//! (`mx_forward_lost_total`) and those lost on the way back
//! (`mx_return_lost_total`). A share is one target's counter over another
//! of the same target, scraped at the same instant and begun at the same
//! instant: no rule divides one agent's count by another's, so a start, a
//! reload, a restart or a missed scrape can skew a share of a real loss for
//! a moment, but never make one out of nothing.
//!
//! A pair series is labelled `src` (who sent the request) and `dst` (who
//! answered it). A leg's packets travel from `src` to `dst` (requests) or
//! from `dst` to `src` (replies), so each leg of a pair is a *cell*: into a
//! host go the forward legs towards it (`dst`) and the return legs of its
//! own flows (`src`); out of it the other way round.
//!
//! The pattern, as the summary reads the grids: a host's side (its cells
//! into it, or out of it, on one leg) is *dark* when at least 2 of its
//! cells, and at least three quarters of them, are lossy (over `--loss-pct`
//! and `--min-lost`). A dark side is the host's fault: *into* it (the wire
//! into it, its receive path) or *out of* it. A lossy cell is the pair's
//! (the packets from one host to the other) when no side of either end
//! *shows* loss: half its cells and more over a quarter of `--loss-pct`, a
//! lower bar for the seconds in which a host's loss begins or ends and its
//! cells cross the line one by one. So one sick receiver is one alert,
//! into it, and never a share of "out of" for each of its senders.

use super::Settings;
use super::yaml::Yaml;
use crate::units;

/// The legs: (name, what travels on it).
const LEGS: [(&str, &str); 2] = [("forward", "requests"), ("return", "replies")];

/// The directions a host's side is seen from.
pub(crate) const DIRECTIONS: [&str; 2] = ["into", "out_of"];

/// The pair label that names the host a leg's cell goes into or out of: a
/// request goes into its `dst`, a reply into its `src`.
fn host_label(leg: &str, direction: &str) -> &'static str {
    match (leg, direction) {
        ("forward", "into") | ("return", "out_of") => "dst",
        _ => "src",
    }
}

/// A share of a host's cells on one side that must be lossy for the side
/// to be dark, and the fewest that make it: as the summary reads a grid.
const DARK_SHARE: f64 = 0.75;
const DARK_CELLS: u32 = 2;
/// A side *shows* loss when at least half its cells (and 2) lose more than
/// a quarter of `--loss-pct`: enough to take a lossy cell of it for the
/// side's, not the pair's. The lower bar is for the moments a side's loss
/// begins and ends, when its cells cross `--loss-pct` a few seconds apart:
/// the first across is no pair of its own.
const SHOWS_SHARE: f64 = 0.5;
const SHOWS_OF_THE_RATIO: f64 = 0.25;

/// `func` of the sender's `counter` over the window, as a pair series.
fn pair_expr(func: &str, counter: &str, window: &str) -> String {
    format!(
        "sum by (src, dst) (label_replace(label_replace({func}({counter}[{window}]), 'src', '$1', 'host', '(.*)'), 'dst', '$1', 'peer', '(.*)'))"
    )
}

/// `expr`, a pair series, summed per host, the host named by its pair
/// label `by`; `agg` is `sum` or `count`.
fn per_host(agg: &str, expr: &str, by: &str) -> String {
    format!("{agg} by (host) (label_replace({expr}, 'host', '$1', '{by}', '(.*)'))")
}

/// The share lost of what was settled (no series where nothing was: not
/// measured).
fn loss_ratio(lost: &str, settled: &str) -> String {
    format!("{lost} / ({settled} > 0)")
}

fn record(name: String, expr: String) -> Yaml {
    Yaml::Map(vec![("record", Yaml::Str(name)), ("expr", Yaml::Str(expr))])
}

/// The recording rules.
fn records(s: &Settings) -> Vec<Yaml> {
    let w = &s.window;
    let ratio = units::g(s.loss_ratio);
    let mut rules = vec![
        record(
            "mx:forward_settled:increase".into(),
            pair_expr("increase", "mx_requests_settled_total", w),
        ),
        record(
            "mx:forward_lost:increase".into(),
            pair_expr("increase", "mx_forward_lost_total", w),
        ),
        record(
            "mx:return_lost:increase".into(),
            pair_expr("increase", "mx_return_lost_total", w),
        ),
        // The replies at stake: the settled requests that arrived.
        record(
            "mx:return_settled:increase".into(),
            "mx:forward_settled:increase - mx:forward_lost:increase".into(),
        ),
    ];
    for (l, _) in LEGS {
        let (lost, settled) = (
            format!("mx:{l}_lost:increase"),
            format!("mx:{l}_settled:increase"),
        );
        rules.push(record(
            format!("mx:{l}_loss:ratio"),
            loss_ratio(&lost, &settled),
        ));
        rules.push(record(
            format!("mx:{l}_lossy:bool"),
            format!(
                "(mx:{l}_loss:ratio > bool {ratio}) * on (src, dst) ({lost} >= bool {})",
                s.min_lost
            ),
        ));
        rules.push(record(
            format!("mx:{l}_touched:bool"),
            format!(
                "mx:{l}_loss:ratio > bool {}",
                units::g(s.loss_ratio * SHOWS_OF_THE_RATIO)
            ),
        ));
        for direction in DIRECTIONS {
            rules.extend(host_side(l, direction, &lost, &settled));
        }
    }
    for (q, name) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
        rules.push(record(
            format!("mx:rtt_{name}:seconds"),
            format!(
                "histogram_quantile({q}, sum by (host, le) (rate(mx_host_rtt_seconds_bucket[{w}])))"
            ),
        ));
    }
    // The furthest each agent fell behind its send schedule in the window:
    // a round trip timed by, or answered by, an agent off its core carries
    // the agent's delay.
    rules.push(record(
        BEHIND_MAX.into(),
        format!("max by (host) (max_over_time(mx_behind_schedule_seconds[{w}]))"),
    ));
    rules
}

/// The record of how far behind its send schedule each agent fell in the
/// window, in seconds.
const BEHIND_MAX: &str = "mx:behind_schedule_max:seconds";

/// [`mx_report::STARVED_BEHIND_MS`] in seconds, as the rules compare it.
fn starved_seconds() -> String {
    units::g(mx_report::STARVED_BEHIND_MS / 1e3)
}

/// The RTT alert: a host's p99 over the line, unless its own agent fell
/// behind its schedule in the window (its round trips then time its own
/// delay); the agents that did are named beside any host's, since every
/// round trip to them carries theirs.
fn rtt_alert(s: &Settings) -> Yaml {
    let starved = starved_seconds();
    let behind_elsewhere = format!(
        "{{{{ with query \"{BEHIND_MAX} >= {starved}\" }}}}; and agents fell behind their send schedule meanwhile, whose own delay is in every round trip to and from them: \
         {{{{ range $i, $s := . }}}}{{{{ if $i }}}}, {{{{ end }}}}{{{{ $s.Labels.host }}}} {{{{ $s.Value | humanizeDuration }}}}{{{{ end }}}}{{{{ end }}}}"
    );
    alert(
        "MxRttP99High",
        format!(
            "mx:rtt_p99:seconds > {} unless on (host) {BEHIND_MAX} >= {starved}",
            units::g(s.rtt_p99_seconds)
        ),
        s,
        format!(
            "round trips from {{{{ $labels.host }}}}: p99 {{{{ $value | humanizeDuration }}}} over {}",
            units::g(s.rtt_p99_seconds * 1e3) + " ms"
        ),
        format!(
            "the p99 of every round trip its requests made over the last {}{behind_elsewhere}",
            s.window
        ),
    )
}

/// An agent behind its send schedule in every interval for `--alert-for`:
/// short of CPU, which its round trips, and its peers' to it, carry.
fn behind_alert(s: &Settings) -> Yaml {
    alert(
        "MxAgentBehind",
        format!(
            "max by (host) (mx_behind_schedule_seconds) >= {}",
            starved_seconds()
        ),
        s,
        "the agent on {{ $labels.host }} runs {{ $value | humanizeDuration }} behind its send schedule".into(),
        format!(
            "{} ms behind or more in every interval for {}: it is not getting the CPU it needs (another process, a CPU quota, the hypervisor: mx_cpu_steal_ratio), so it sends and answers late; every round trip to and from it carries that delay, which is its own, not the network's (its own RTT alert waits until it catches up) -- `mx status` says more",
            units::g(mx_report::STARVED_BEHIND_MS),
            s.alert_for
        ),
    )
}

/// The rules of one host side of one leg (`forward`, `into`): its loss
/// summed over the flows of that side, and whether enough of its cells
/// are dark (`dark`) or show any loss (`shows`) to call it the host's.
fn host_side(l: &str, direction: &str, lost: &str, settled: &str) -> Vec<Yaml> {
    let mut rules = Vec::new();
    let by = host_label(l, direction);
    let side = |what: &str| format!("mx:{l}_{what}_{direction}");
    rules.push(record(
        side("lost") + ":increase",
        per_host("sum", lost, by),
    ));
    rules.push(record(
        side("settled") + ":increase",
        per_host("sum", settled, by),
    ));
    rules.push(record(
        side("loss") + ":ratio",
        loss_ratio(
            &(side("lost") + ":increase"),
            &(side("settled") + ":increase"),
        ),
    ));
    rules.push(record(
        side("lossy") + ":count",
        per_host("sum", &format!("mx:{l}_lossy:bool"), by),
    ));
    rules.push(record(
        side("cells") + ":count",
        per_host("count", &format!("mx:{l}_lossy:bool"), by),
    ));
    rules.push(record(
        side("touched") + ":count",
        per_host("sum", &format!("mx:{l}_touched:bool"), by),
    ));
    let cells = side("cells") + ":count";
    for (what, of, share) in [
        ("dark", "lossy", DARK_SHARE),
        ("shows", "touched", SHOWS_SHARE),
    ] {
        let n = side(of) + ":count";
        rules.push(record(
            side(what) + ":bool",
            format!(
                "({n} >= bool {DARK_CELLS}) * ({n} >= bool {} * {cells})",
                units::g(share)
            ),
        ));
    }
    rules
}

/// `{{ with query }}`: the value of `record{selector}` as a whole count, in
/// an alert's text. `selector` pairs each label of `record` with the
/// alert's label that names its value.
fn count_of(record: &str, selector: &[(&str, &str)]) -> String {
    let labels: Vec<String> = selector.iter().map(|(l, _)| format!("{l}='%s'")).collect();
    let args: Vec<String> = selector
        .iter()
        .map(|(_, from)| format!("$labels.{from}"))
        .collect();
    format!(
        "{{{{ with printf \"{record}{{{}}}\" {} | query }}}}{{{{ . | first | value | printf \"%.0f\" }}}}{{{{ else }}}}0{{{{ end }}}}",
        labels.join(","),
        args.join(" ")
    )
}

fn alert(name: &str, expr: String, s: &Settings, summary: String, description: String) -> Yaml {
    alert_after(name, expr, &s.alert_for, summary, description)
}

/// An alert that fires once `expr` has held for `after` (`0s`: an event,
/// firing as soon as it is seen).
fn alert_after(
    name: &str,
    expr: String,
    after: &str,
    summary: String,
    description: String,
) -> Yaml {
    Yaml::Map(vec![
        ("alert", Yaml::str(name)),
        ("expr", Yaml::Str(expr)),
        ("for", Yaml::str(after.to_string())),
        (
            "labels",
            Yaml::Map(vec![("severity", Yaml::str("warning"))]),
        ),
        (
            "annotations",
            Yaml::Map(vec![
                ("summary", Yaml::Str(summary)),
                ("description", Yaml::Str(description)),
            ]),
        ),
    ])
}

/// The alert of a host's dark side in `direction`: "N of M requests and
/// N of M replies into h lost over the window".
fn host_alert(direction: &str, s: &Settings) -> Yaml {
    let (name, words, place) = match direction {
        "into" => (
            "MxLossIntoHost",
            "into",
            "the wire into it or its receive path (NIC, kernel, socket)",
        ),
        _ => (
            "MxLossOutOfHost",
            "out of",
            "its transmit path (socket, qdisc, NIC) or the wire out of it",
        ),
    };
    let legs: Vec<String> = LEGS
        .iter()
        .map(|(l, packets)| {
            format!(
                "{} of {} {packets}",
                count_of(
                    &format!("mx:{l}_lost_{direction}:increase"),
                    &[("host", "host")]
                ),
                count_of(
                    &format!("mx:{l}_settled_{direction}:increase"),
                    &[("host", "host")]
                ),
            )
        })
        .collect();
    alert(
        name,
        format!("max by (host) ({{__name__=~\"mx:(forward|return)_dark_{direction}:bool\"}}) == 1"),
        s,
        format!("packets {words} {{{{ $labels.host }}}} are lost: from most of its peers alike"),
        format!(
            "{} {words} {{{{ $labels.host }}}} lost over the last {}: look at {place}",
            legs.join(" and "),
            s.window
        ),
    )
}

/// The lossy cells of `leg` that no side of either end showing loss
/// explains, as series labelled `from` and `to` (where its packets travel).
fn unexplained(leg: &str) -> String {
    // A request travels src -> dst, a reply dst -> src.
    let (from, to) = match leg {
        "forward" => ("src", "dst"),
        _ => ("dst", "src"),
    };
    let shows = |direction: &str| {
        let by = host_label(leg, direction);
        format!(
            "unless on ({by}) label_replace(mx:{leg}_shows_{direction}:bool == 1, '{by}', '$1', 'host', '(.*)')"
        )
    };
    format!(
        "label_replace(label_replace(mx:{leg}_lossy:bool == 1 {} {}, 'from', '$1', '{from}', '(.*)'), 'to', '$1', '{to}', '(.*)')",
        shows("into"),
        shows("out_of")
    )
}

/// The alert of a pair's loss no host explains: the packets from one host
/// to the other.
fn pair_alert(s: &Settings) -> Yaml {
    // Requests from `from` to `to` are the forward leg of from -> to; its
    // replies are the return leg of to -> from.
    let requests = [("src", "from"), ("dst", "to")];
    let replies = [("src", "to"), ("dst", "from")];
    alert(
        "MxLossBetween",
        format!(
            "max by (from, to) ({} or {})",
            unexplained("forward"),
            unexplained("return")
        ),
        s,
        "packets from {{ $labels.from }} to {{ $labels.to }} are lost, and no other host's".into(),
        format!(
            "{} of {} requests and {} of {} replies from {{{{ $labels.from }}}} to {{{{ $labels.to }}}} lost over the last {}: the path between them (a link, a switch port, one of several paths), or either end where no other peer shows it",
            count_of("mx:forward_lost:increase", &requests),
            count_of("mx:forward_settled:increase", &requests),
            count_of("mx:return_lost:increase", &replies),
            count_of("mx:return_settled:increase", &replies),
            s.window
        ),
    )
}

/// The alerting rules.
fn alerts(s: &Settings) -> Vec<Yaml> {
    let mut rules: Vec<Yaml> = DIRECTIONS.iter().map(|d| host_alert(d, s)).collect();
    rules.push(pair_alert(s));
    rules.push(alert(
        "MxAgentGone",
        format!("up{{job=\"{}\"}} == 0", s.job),
        s,
        "the agent on {{ $labels.mx_host }} does not answer its scrapes".to_string(),
        "{{ $labels.instance }}: the agent stopped, or its host or the way to it is down; its peers' flows to it settle nothing meanwhile, so no loss is counted for them -- `mx status` says which".to_string(),
    ));
    rules.push(alert(
        "MxAgentNotReporting",
        "time() - mx_last_interval_end_timestamp_seconds > 3 * mx_interval_seconds + 60".to_string(),
        s,
        "the agent on {{ $labels.host }} answers but writes no interval".to_string(),
        "its newest interval ended {{ $value | humanizeDuration }} ago: an agent stuck or short of CPU -- `mx logs` says more".to_string(),
    ));
    rules.push(behind_alert(s));
    rules.push(rtt_alert(s));
    // A route that changed length: an event, said while it is inside the
    // window (waiting `for` on it would outlast a window shorter than it).
    let w = &s.window;
    rules.push(alert_after(
        "MxRouteChanged",
        format!("changes(mx_reply_hops[{w}]) > 0 or changes(mx_request_hops[{w}]) > 0"),
        "0s",
        "the route from {{ $labels.peer }} to {{ $labels.host }} changed its length".to_string(),
        format!(
            "the most routers the datagrams from {{{{ $labels.peer }}}} crossed to {{{{ $labels.host }}}} changed {{{{ $value }}}} time(s) over the last {w}: a link or router on the way went down or came back, or a route was moved; a loss then fits the change as well -- `mx trace` shows each stream's path now"
        ),
    ));
    rules
}

/// `rules.yml`: the groups `mx-records` and `mx-alerts`.
pub(crate) fn rules_yml(s: &Settings, source: &str) -> String {
    let doc = Yaml::Map(vec![(
        "groups",
        Yaml::List(vec![
            Yaml::Map(vec![
                ("name", Yaml::str("mx-records")),
                ("rules", Yaml::List(records(s))),
            ]),
            Yaml::Map(vec![
                ("name", Yaml::str("mx-alerts")),
                ("rules", Yaml::List(alerts(s))),
            ]),
        ]),
    )]);
    format!(
        "# Written by mx monitor from {source}: loss by leg and host over {}, alerts over {}% for {}.\n{}",
        s.window,
        units::g(s.loss_ratio * 100.0),
        s.alert_for,
        doc.render()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn settings() -> Settings {
        Settings {
            port: 9464,
            loss_ratio: 0.01,
            min_lost: 3,
            alert_for: "5m".to_string(),
            rtt_p99_seconds: 0.01,
            window: "5m".to_string(),
            scrape_interval: "15s".to_string(),
            job: "mx".to_string(),
        }
    }

    #[test]
    fn every_leg_is_its_sender_s_counts_alone() {
        let lost = pair_expr("increase", "mx_forward_lost_total", "5m");
        assert_eq!(
            lost,
            "sum by (src, dst) (label_replace(label_replace(increase(mx_forward_lost_total[5m]), 'src', '$1', 'host', '(.*)'), 'dst', '$1', 'peer', '(.*)'))"
        );
        // Into a host: its forward legs by dst, its return legs by src.
        assert_eq!(host_label("forward", "into"), "dst");
        assert_eq!(host_label("return", "into"), "src");
        assert_eq!(host_label("forward", "out_of"), "src");
        assert_eq!(host_label("return", "out_of"), "dst");
        // No rule reads a counter only a receiver keeps.
        let text = rules_yml(&settings(), "matrix.csv");
        for receivers in ["mx_requests_received_total", "mx_replies_sent_total"] {
            assert!(!text.contains(receivers), "{receivers} in:\n{text}");
        }
    }

    #[test]
    fn an_alert_says_how_many_of_how_many_were_lost() {
        let text = rules_yml(&settings(), "matrix.csv");
        assert!(text.contains("\"MxLossIntoHost\""), "{text}");
        assert!(
            text.contains(
                "{{ with printf \\\"mx:forward_lost_into:increase{host='%s'}\\\" $labels.host | query }}{{ . | first | value | printf \\\"%.0f\\\" }}{{ else }}0{{ end }} of "
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "(mx:forward_loss:ratio > bool 0.01) * on (src, dst) (mx:forward_lost:increase >= bool 3)"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_pair_s_replies_travel_the_other_way() {
        let text = unexplained("return");
        // A reply goes from the flow's dst to its src, into the src.
        assert!(
            text.ends_with(", 'from', '$1', 'dst', '(.*)'), 'to', '$1', 'src', '(.*)')"),
            "{text}"
        );
        assert!(
            text.contains("unless on (src) label_replace(mx:return_shows_into:bool == 1, 'src'"),
            "{text}"
        );
    }
}
