//! The recording and alerting rules: each leg's loss, per pair and into
//! and out of each host, as a share and as a count of packets, from the
//! agents' counters; and the alerts on them.
//!
//! An agent counts per peer: as the sender, requests sent and replies
//! back (`host` the sender, `peer` the receiver); as the receiver, requests
//! received and replies sent (`host` the receiver, `peer` the sender).
//! The pair series relabel both to `src` (who sent the request) and `dst`
//! (who answered it): the forward leg is `src`'s sent against `dst`'s
//! received, the return leg `dst`'s replies sent against `src`'s replies
//! back. Into a host: the forward legs towards it (`dst`) and the return
//! legs towards it (`src`); out of a host, the other way round. A small
//! negative difference (two agents scraped a moment apart) reads 0.

use super::Settings;
use super::yaml::Yaml;
use crate::units;

/// The four counts of a pair, as recorded: (record name part, the agent's
/// counter, whether the agent that counts it is the pair's sender).
const PAIR_COUNTS: [(&str, &str, bool); 4] = [
    ("requests_sent", "mx_requests_sent_total", true),
    ("requests_received", "mx_requests_received_total", false),
    ("replies_sent", "mx_replies_sent_total", false),
    ("replies_received", "mx_replies_received_total", true),
];

/// A leg: its name, and the pair counts it loses between (sent, arrived).
pub const LEGS: [(&str, &str, &str); 2] = [
    ("forward", "requests_sent", "requests_received"),
    ("return", "replies_sent", "replies_received"),
];

/// The host a leg's pair series is into or out of: (direction, the pair
/// label that names the host) for each leg. A forward leg goes into its
/// `dst`; a return leg (the reply) into its `src`.
fn host_label(leg: &str, direction: &str) -> &'static str {
    match (leg, direction) {
        ("forward", "into") | ("return", "out_of") => "dst",
        _ => "src",
    }
}

/// The directions a host's loss is seen from.
pub const DIRECTIONS: [&str; 2] = ["into", "out_of"];

/// `counter` over the window as a pair series (`src`, `dst`): `func` is
/// `rate` or `increase`.
fn pair_expr(func: &str, counter: &str, counted_by_sender: bool, window: &str) -> String {
    let (src, dst) = if counted_by_sender {
        ("host", "peer")
    } else {
        ("peer", "host")
    };
    format!(
        "sum by (src, dst) (label_replace(label_replace({func}({counter}[{window}]), 'src', '$1', '{src}', '(.*)'), 'dst', '$1', '{dst}', '(.*)'))"
    )
}

/// `record` summed per host, the host named by the pair label `by`.
fn per_host(record: &str, by: &str) -> String {
    format!("sum by (host) (label_replace({record}, 'host', '$1', '{by}', '(.*)'))")
}

/// The share lost between `sent` and `arrived` (0 when nothing was sent is
/// no series: not measured).
fn loss_ratio(sent: &str, arrived: &str) -> String {
    format!("clamp_min(1 - {arrived} / ({sent} > 0), 0)")
}

fn record(name: String, expr: String) -> Yaml {
    Yaml::Map(vec![("record", Yaml::Str(name)), ("expr", Yaml::Str(expr))])
}

/// The recording rules.
fn records(s: &Settings) -> Vec<Yaml> {
    let mut rules = Vec::new();
    for func in ["rate", "increase"] {
        for (name, counter, by_sender) in PAIR_COUNTS {
            rules.push(record(
                format!("mx:{name}:{func}"),
                pair_expr(func, counter, by_sender, &s.window),
            ));
        }
    }
    for (leg, sent, arrived) in LEGS {
        rules.push(record(
            format!("mx:{leg}_loss:ratio"),
            loss_ratio(&format!("mx:{sent}:rate"), &format!("mx:{arrived}:rate")),
        ));
        rules.push(record(
            format!("mx:{leg}_lost:increase"),
            format!("clamp_min(mx:{sent}:increase - mx:{arrived}:increase, 0)"),
        ));
        for direction in DIRECTIONS {
            let by = host_label(leg, direction);
            rules.push(record(
                format!("mx:{leg}_loss_{direction}:ratio"),
                loss_ratio(
                    &per_host(&format!("mx:{sent}:rate"), by),
                    &per_host(&format!("mx:{arrived}:rate"), by),
                ),
            ));
            rules.push(record(
                format!("mx:{leg}_lost_{direction}:increase"),
                per_host(&format!("mx:{leg}_lost:increase"), by),
            ));
            rules.push(record(
                format!("mx:{leg}_sent_{direction}:increase"),
                per_host(&format!("mx:{sent}:increase"), by),
            ));
        }
    }
    for (q, name) in [(0.5, "p50"), (0.99, "p99"), (0.999, "p999")] {
        rules.push(record(
            format!("mx:rtt_{name}:seconds"),
            format!(
                "histogram_quantile({q}, sum by (host, le) (rate(mx_host_rtt_seconds_bucket[{}])))",
                s.window
            ),
        ));
    }
    rules
}

/// `{{ with query }}`: the value of the series `record{labels}` as a whole
/// count, in an alert's text.
fn count_of(record: &str, labels: &[&str]) -> String {
    let selector: Vec<String> = labels.iter().map(|l| format!("{l}='%s'")).collect();
    let args: Vec<String> = labels.iter().map(|l| format!("$labels.{l}")).collect();
    format!(
        "{{{{ with printf \"{record}{{{}}}\" {} | query }}}}{{{{ . | first | value | printf \"%.0f\" }}}}{{{{ end }}}}",
        selector.join(","),
        args.join(" ")
    )
}

fn alert(
    name: &str,
    expr: String,
    s: &Settings,
    labels: Vec<(&'static str, Yaml)>,
    summary: String,
    description: String,
) -> Yaml {
    let mut all = vec![("severity", Yaml::str("warning"))];
    all.extend(labels);
    Yaml::Map(vec![
        ("alert", Yaml::str(name)),
        ("expr", Yaml::Str(expr)),
        ("for", Yaml::str(s.alert_for.clone())),
        ("labels", Yaml::Map(all)),
        (
            "annotations",
            Yaml::Map(vec![
                ("summary", Yaml::Str(summary)),
                ("description", Yaml::Str(description)),
            ]),
        ),
    ])
}

/// The words of a leg: what it carries, and where it runs.
fn leg_words(leg: &str) -> (&'static str, &'static str, &'static str) {
    match leg {
        // (packets, from, to)
        "forward" => ("requests", "src", "dst"),
        _ => ("replies", "dst", "src"),
    }
}

/// The alerting rules.
fn alerts(s: &Settings) -> Vec<Yaml> {
    let pct = units::g(s.loss_ratio * 100.0);
    let ratio = units::g(s.loss_ratio);
    let mut rules = Vec::new();
    for (leg, sent, _) in LEGS {
        let (packets, from, to) = leg_words(leg);
        let name = format!("Mx{}LegLoss", capitalized(leg));
        let lost = count_of(&format!("mx:{leg}_lost:increase"), &["src", "dst"]);
        let of = count_of(&format!("mx:{sent}:increase"), &["src", "dst"]);
        rules.push(alert(
            &name,
            format!(
                "mx:{leg}_loss:ratio > {ratio} and on (src, dst) mx:{leg}_lost:increase >= {}",
                s.min_lost
            ),
            s,
            vec![("leg", Yaml::str(leg))],
            format!(
                "{packets} from {{{{ $labels.{from} }}}} to {{{{ $labels.{to} }}}} are lost: {{{{ $value | humanizePercentage }}}} ({leg} leg of {{{{ $labels.src }}}} -> {{{{ $labels.dst }}}})"
            ),
            format!(
                "{lost} of {of} {packets} lost over the last {} (alerting over {pct}% and at least {} packets)",
                s.window, s.min_lost
            ),
        ));
        for direction in DIRECTIONS {
            let where_ = if direction == "into" {
                "into"
            } else {
                "out of"
            };
            let place = if direction == "into" {
                "the wire into it or its receive path (NIC, kernel, socket)"
            } else {
                "its transmit path or the wire out of it"
            };
            let lost = count_of(&format!("mx:{leg}_lost_{direction}:increase"), &["host"]);
            let of = count_of(&format!("mx:{leg}_sent_{direction}:increase"), &["host"]);
            rules.push(alert(
                &format!(
                    "Mx{}Loss{}Host",
                    capitalized(leg),
                    if direction == "into" { "Into" } else { "OutOf" }
                ),
                format!(
                    "mx:{leg}_loss_{direction}:ratio > {ratio} and on (host) mx:{leg}_lost_{direction}:increase >= {}",
                    s.min_lost
                ),
                s,
                vec![("leg", Yaml::str(leg))],
                format!(
                    "{packets} {where_} {{{{ $labels.host }}}} are lost: {{{{ $value | humanizePercentage }}}} of them, from its peers together"
                ),
                format!(
                    "{lost} of {of} {packets} {where_} {{{{ $labels.host }}}} lost over the last {}: look at {place}",
                    s.window
                ),
            ));
        }
    }
    rules.push(alert(
        "MxAgentGone",
        format!("up{{job=\"{}\"}} == 0", s.job),
        s,
        vec![],
        "the agent on {{ $labels.mx_host }} does not answer its scrapes".to_string(),
        "{{ $labels.instance }}: the agent stopped, or its host or the way to it is down; its peers' flows into it read as loss meanwhile -- `mx status` says which".to_string(),
    ));
    rules.push(alert(
        "MxAgentNotReporting",
        "time() - mx_last_interval_end_timestamp_seconds > 3 * mx_interval_seconds + 60".to_string(),
        s,
        vec![],
        "the agent on {{ $labels.host }} answers but writes no interval".to_string(),
        "its newest interval ended {{ $value | humanizeDuration }} ago: an agent stuck or short of CPU -- `mx logs` says more".to_string(),
    ));
    rules.push(alert(
        "MxRttP99High",
        format!("mx:rtt_p99:seconds > {}", units::g(s.rtt_p99_seconds)),
        s,
        vec![],
        format!(
            "round trips from {{{{ $labels.host }}}}: p99 {{{{ $value | humanizeDuration }}}} over {}",
            units::g(s.rtt_p99_seconds * 1e3) + " ms"
        ),
        format!("the p99 of every round trip its requests made over the last {}", s.window),
    ));
    rules
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `rules.yml`: the groups `mx-records` and `mx-alerts`.
pub fn rules_yml(s: &Settings, source: &str) -> String {
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
    fn the_forward_leg_is_the_sender_s_sent_against_the_receiver_s_received() {
        let sent = pair_expr("rate", "mx_requests_sent_total", true, "5m");
        assert_eq!(
            sent,
            "sum by (src, dst) (label_replace(label_replace(rate(mx_requests_sent_total[5m]), 'src', '$1', 'host', '(.*)'), 'dst', '$1', 'peer', '(.*)'))"
        );
        let received = pair_expr("rate", "mx_requests_received_total", false, "5m");
        assert!(received.contains("'src', '$1', 'peer'"), "{received}");
        // Into a host: its forward legs by dst, its return legs by src.
        assert_eq!(host_label("forward", "into"), "dst");
        assert_eq!(host_label("return", "into"), "src");
        assert_eq!(host_label("forward", "out_of"), "src");
        assert_eq!(host_label("return", "out_of"), "dst");
    }

    #[test]
    fn an_alert_says_how_many_of_how_many_were_lost() {
        let text = rules_yml(&settings(), "matrix.csv");
        assert!(text.contains("\"MxForwardLossIntoHost\""), "{text}");
        assert!(
            text.contains(
                "{{ with printf \\\"mx:forward_lost_into:increase{host='%s'}\\\" $labels.host | query }}{{ . | first | value | printf \\\"%.0f\\\" }}{{ end }} of "
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mx:forward_loss:ratio > 0.01 and on (src, dst) mx:forward_lost:increase >= 3"
            ),
            "{text}"
        );
    }
}
