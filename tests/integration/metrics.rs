//! `mx start --metrics PORT`: every agent serves its counts on /metrics
//! (OpenMetrics text), read here over real HTTP from real agents on
//! loopback, and checked against the report rows the same agents wrote.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::fleet_local::fleet_dir_with;
use crate::util::Sandbox;

/// `GET path` from `addr`: (status code, body).
pub fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("{addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a response");
    let code = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        code,
        if chunked {
            unchunked(body)
        } else {
            body.to_string()
        },
    )
}

/// An HTTP/1.1 chunked body, joined (as Prometheus sends a long answer).
fn unchunked(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

/// The samples of an OpenMetrics text: `name{label="v",...}` (labels as
/// written) -> value.
pub fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (key, value) = l.rsplit_once(' ').expect(l);
            (key.to_string(), value.parse().expect(l))
        })
        .collect()
}

/// Two scrapes in a row that agree: the agent between two intervals.
fn settled(addr: &str) -> BTreeMap<String, f64> {
    let mut last = samples(&http_get(addr, "/metrics").1);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(150));
        let now = samples(&http_get(addr, "/metrics").1);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the metrics of {addr} never held still");
}

/// A host's report rows, as column -> cell.
fn rows(sb: &Sandbox, host: &str) -> Vec<BTreeMap<String, String>> {
    let text = sb.read(&format!("hosts/{host}/var/tmp/mx/report.csv"));
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().trim_end().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .zip(l.trim_end().split(','))
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect()
        })
        .collect()
}

#[test]
fn agent_metrics_count_what_the_report_rows_count_per_peer_and_host() {
    let hosts = ["h1", "h2", "h3"];
    let sb = fleet_dir_with(78, &hosts, &["--pps", "200"]);
    let port = "19478";
    let start = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--metrics",
        port,
    ]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let addr = |i: usize| format!("127.78.0.{}:{port}", i + 1);
    // A few whole intervals on every host (bounded).
    let began = Instant::now();
    while hosts.iter().enumerate().any(|(i, _)| {
        let m = samples(&http_get(&addr(i), "/metrics").1);
        m.get(&format!(
            "mx_host_rtt_seconds_count{{host=\"{}\"}}",
            hosts[i]
        ))
        .is_none_or(|n| *n < 1200.0)
    }) {
        assert!(began.elapsed() < Duration::from_secs(30), "no intervals");
        std::thread::sleep(Duration::from_millis(300));
    }
    for (i, host) in hosts.iter().enumerate() {
        let m = settled(&addr(i));
        let end = m[&format!("mx_last_interval_end_timestamp_seconds{{host=\"{host}\"}}")];
        let written: Vec<_> = rows(&sb, host)
            .into_iter()
            .filter(|r| r["ts"].parse::<f64>().unwrap() <= end)
            .collect();
        let sum = |dir: &str, peer: &str, column: &str| -> f64 {
            written
                .iter()
                .filter(|r| r["dir"] == dir && r["peer"] == peer)
                .filter_map(|r| r[column].parse::<f64>().ok())
                .sum()
        };
        for peer in hosts.iter().filter(|p| *p != host) {
            let at = |name: &str| {
                let key = format!("{name}{{host=\"{host}\",peer=\"{peer}\"}}");
                *m.get(&key).unwrap_or_else(|| panic!("{key} in {m:?}"))
            };
            // The counters are the report's interval counts, summed.
            assert_eq!(at("mx_requests_sent_total"), sum("tx", peer, "pkts"));
            assert_eq!(at("mx_replies_received_total"), sum("tx", peer, "rep_pkts"));
            assert_eq!(at("mx_requests_received_total"), sum("rx", peer, "pkts"));
            assert_eq!(at("mx_replies_sent_total"), sum("rx", peer, "rep_pkts"));
            assert_eq!(at("mx_reply_duplicates_total"), sum("tx", peer, "dup_pkts"));
            assert_eq!(
                at("mx_requests_over_plan_total"),
                sum("rx", peer, "over_plan")
            );
            // Both legs as the sender tells them from its replies' counts.
            for (counter, column) in [
                ("mx_requests_settled_total", "settled_pkts"),
                ("mx_forward_lost_total", "fwd_lost_pkts"),
                ("mx_return_lost_total", "ret_lost_pkts"),
            ] {
                assert_eq!(at(counter), sum("tx", peer, column), "{counter}");
            }
            assert!(at("mx_requests_settled_total") >= 300.0, "{host} -> {peer}");
            assert_eq!(
                at("mx_forward_lost_total") + at("mx_return_lost_total"),
                0.0
            );
            assert_eq!(at("mx_target_requests_per_second"), 200.0);
            // On loopback no router counts a TTL down: 0 routers each way.
            assert_eq!(at("mx_reply_hops"), 0.0);
            assert_eq!(at("mx_request_hops"), 0.0);
            // At 200 a second for a few seconds, every request back.
            assert!(at("mx_requests_sent_total") >= 400.0, "{host} -> {peer}");
            assert_eq!(
                at("mx_replies_received_total"),
                at("mx_requests_sent_total"),
                "loopback loses nothing: {host} -> {peer}"
            );
            // Every reply's round trip is in the peer's histogram.
            let rtt = |suffix: &str, le: &str| {
                let key =
                    format!("mx_peer_rtt_seconds_{suffix}{{host=\"{host}\",{le}peer=\"{peer}\"}}");
                *m.get(&key).unwrap_or_else(|| panic!("{key}"))
            };
            assert_eq!(rtt("count", ""), at("mx_replies_received_total"));
            assert_eq!(rtt("bucket", "le=\"+Inf\","), rtt("count", ""));
        }
        // The host's histogram holds what its host rows' histograms hold.
        let hist_count: f64 = written
            .iter()
            .filter(|r| r["dir"] == "host")
            .flat_map(|r| {
                r["rtt_hist"]
                    .split(';')
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .filter_map(|b| b.split_once(':').map(|(_, n)| n.parse::<f64>().unwrap()))
            .sum();
        assert_eq!(
            m[&format!("mx_host_rtt_seconds_count{{host=\"{host}\"}}")],
            hist_count
        );
        // Not a disk run: no disk series at all, never a 0 that reads as
        // measured.
        assert!(!m.keys().any(|k| k.starts_with("mx_disk_")), "{m:?}");
        assert_eq!(m[&format!("mx_interval_seconds{{host=\"{host}\"}}")], 1.0);
    }
    // The content type Prometheus asks for; another path is not found.
    let (code, body) = http_get(&addr(0), "/metrics");
    assert_eq!(code, 200);
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(
        body.contains("# TYPE mx_peer_rtt_seconds histogram"),
        "{body}"
    );
    assert_eq!(http_get(&addr(0), "/").0, 404);
    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
}

#[test]
fn agent_metrics_a_bad_port_is_refused_before_any_host_and_a_taken_one_names_its_host() {
    let sb = fleet_dir_with(79, &["h1", "h2"], &["--pps", "100"]);
    let want = "want the port to serve /metrics on (9464), or ADDR:PORT (10.0.0.1:9464, [::]:9464)";
    for (bad, says) in [
        (
            "0",
            "port 0 is no port: give 1 to 65535 (9464 is Prometheus's custom)",
        ),
        ("70000", "a port is 1 to 65535"),
        ("nine", want),
        ("127.0.0.1", want),
    ] {
        let run = sb.mx(&["start", "--local", "hosts", "--metrics", bad]);
        assert_eq!(run.code, 2, "{bad}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.stderr, format!("mx: --metrics '{bad}': {says}\n"));
        assert!(!sb.file("hosts").exists(), "nothing touched a host");
    }
    // MX_METRICS is --metrics.
    let run = sb.mx_env(&["start", "--local", "hosts"], &[("MX_METRICS", "nine")]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.starts_with("mx: --metrics 'nine'"),
        "{}",
        run.stderr
    );
    // The port taken on h1's address: h1's agent says so, and the start
    // fails naming it.
    let _taken = std::net::TcpListener::bind("127.79.0.1:19479").unwrap();
    let run = sb.mx(&["start", "--local", "hosts", "--metrics", "19479"]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("--metrics: cannot serve metrics on 127.79.0.1:19479"),
        "{}",
        run.stdout
    );
    let _ = sb.mx(&["stop", "--local", "hosts"]);
}

#[test]
fn monitor_writes_targets_rules_a_config_and_a_dashboard_promtool_passes() {
    let sb = fleet_dir_with(80, &["h1", "h2", "h3"], &["--pps", "10"]);
    for (args, want) in [
        (
            &["--window", "30s", "--scrape-interval", "15s"][..],
            "mx: --window 30s holds fewer than 4 scrapes at --scrape-interval 15s",
        ),
        (
            &["--alert-for", "5"][..],
            "mx: --alert-for '5': want a Prometheus duration",
        ),
        (&["--loss-pct", "0"][..], "'0': want a percentage above 0"),
        (
            &["--rtt-p99", "5"][..],
            "mx: --rtt-p99 '5': want a positive duration",
        ),
        (
            &["--metrics", "0"][..],
            "mx: --metrics '0': port 0 is no port",
        ),
    ] {
        let run = sb.mx(&[&["monitor"][..], args].concat());
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        // The first line says it (clap adds its --help hint under its own).
        let first = run.stderr.lines().next().unwrap_or_default();
        assert!(first.contains(want), "{args:?}: {}", run.stderr);
        assert!(!sb.file("monitor").exists(), "nothing written: {args:?}");
    }
    let run = sb.mx(&["monitor", "--metrics", "9464"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Next: Prometheus on what it wrote; and how the agents serve, with the
    // flags that find this fleet.
    assert!(
        run.stdout.contains(
            "[mx] next: promtool check config monitor/prometheus.yml\n[mx]       prometheus --config.file=monitor/prometheus.yml\n"
        ),
        "{}",
        run.stdout
    );
    let local = sb.mx_env(&["monitor", "--metrics", "9464"], &[("MX_LOCAL", "hosts")]);
    assert!(
        local.stdout.contains(
            "the agents serve /metrics when started with it: mx start --local hosts --interval 5 --metrics 9464 (a fleet running without it: mx stop --local hosts first)"
        ),
        "{}",
        local.stdout
    );
    let targets: serde_json::Value =
        serde_json::from_str(&sb.read("monitor/targets.json")).unwrap();
    let want: Vec<serde_json::Value> = (1..=3)
        .map(|i| {
            serde_json::json!({
                "targets": [format!("127.80.0.{i}:9464")],
                "labels": {"mx_host": format!("h{i}")}
            })
        })
        .collect();
    assert_eq!(targets, serde_json::Value::Array(want));
    // Each host sends to 2 peers and hears from 2.
    let per_host = 47 + 2 * 24 + 2 * 7;
    assert!(
        run.stdout.contains(&format!(
            "series: at most {per_host} a host, {} in all",
            3 * per_host
        )),
        "{}",
        run.stdout
    );
    for (what, file) in [("rules", "rules.yml"), ("config", "prometheus.yml")] {
        crate::util::promtool(&["check", what, file], &sb.file("monitor"));
    }
    let dashboard: serde_json::Value =
        serde_json::from_str(&sb.read("monitor/dashboard.json")).unwrap();
    let exprs = matrix_orchestrator::monitor::dashboard::expressions(&dashboard);
    assert!(
        exprs.iter().any(|e| e == "mx:forward_loss:ratio")
            && exprs.iter().any(|e| e == "mx:return_loss:ratio"),
        "{exprs:?}"
    );
}

#[test]
fn agent_report_kept_to_its_bound_through_its_cuts_and_summarized_whole() {
    let hosts = ["h1", "h2", "h3", "h4", "h5", "h6"];
    let sb = fleet_dir_with(81, &hosts, &["--pps", "50"]);
    let start = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--keep-report",
        "64K",
    ]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let report = |h: &str| sb.file(&format!("hosts/{h}/var/tmp/mx/report.csv"));
    // A host writes about 5 KB a second, so each report passes 64 KiB and
    // is cut back to its newest half every few seconds: watched until every
    // host has cut its report twice (under a minute and a half).
    let cuts = |h: &str| {
        sb.read(&format!("hosts/{h}/var/tmp/mx/agent.log"))
            .matches("report: past --keep-report")
            .count()
    };
    let mut largest = 0;
    let began = Instant::now();
    while hosts.iter().any(|h| cuts(h) < 2) {
        assert!(
            began.elapsed() < Duration::from_secs(90),
            "every host cuts its report twice: {:?}",
            hosts.map(cuts)
        );
        for h in hosts {
            largest = largest.max(std::fs::metadata(report(h)).map_or(0, |m| m.len()));
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    // Within the bound, give or take the one interval written before a cut.
    assert!(
        largest <= (64 << 10) + 8192,
        "a report grew to {largest} bytes"
    );
    // The summary reads every host's kept rows: its span runs from where
    // every kept report begins to the newest interval.
    let summary = sb.mx(&["summarize", "--local", "hosts", "--window", "0", "--json"]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    let doc: serde_json::Value = serde_json::from_str(&summary.stdout).unwrap();
    let labels = |h: &str| -> Vec<i64> {
        sb.read(&format!("reports/{h}.csv"))
            .lines()
            .skip(1)
            .filter_map(|row| row.split(',').next()?.parse().ok())
            .collect()
    };
    let first_kept = hosts.iter().map(|h| labels(h)[0]).max().unwrap();
    let newest = hosts
        .iter()
        .map(|h| *labels(h).last().unwrap())
        .min()
        .unwrap();
    let span = &doc["span"];
    let (first, last) = (
        span["first_ts"].as_i64().unwrap(),
        span["last_ts"].as_i64().unwrap(),
    );
    assert!(
        (0..=2).contains(&(first - first_kept)),
        "the span begins where every kept report does ({first_kept}): {span}"
    );
    assert!(
        newest - last <= 1,
        "and runs to the newest ({newest}): {span}"
    );
    assert_eq!(
        span["intervals"].as_i64().unwrap(),
        last - first + 1,
        "{span}"
    );
    // And it is said: the reports were cut, no host came up late.
    let text = sb.mx(&["summarize", "--no-collect", "--window", "0"]);
    assert!(
        text.stdout
            .contains("keep only their newest rows (cut to the agents' --keep-report)"),
        "{}",
        text.stdout
    );
    assert!(!text.stdout.contains("came up late"), "{}", text.stdout);
    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
}

#[test]
fn agent_metrics_reload_of_an_edited_matrix_rewrites_the_targets() {
    let sb = fleet_dir_with(82, &["h1", "h2"], &["--pps", "10"]);
    let start = sb.mx(&[
        "start",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--metrics",
        "19482",
    ]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    assert_eq!(sb.mx(&["monitor", "--metrics", "19482"]).code, 0);
    // A third host joins the matrix.
    sb.write(
        "servers.txt",
        "h1=127.82.0.1\nh2=127.82.0.2\nh3=127.82.0.3\n",
    );
    assert_eq!(sb.mx(&["gen", "--pps", "10"]).code, 0);
    let reload = sb.mx(&["reload", "--local", "hosts"]);
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    assert!(
        reload.stdout.contains(
            "[mx] monitor/targets.json rewritten for the new matrix: 3 targets on port 19482"
        ),
        "{}",
        reload.stdout
    );
    let targets: serde_json::Value =
        serde_json::from_str(&sb.read("monitor/targets.json")).unwrap();
    assert_eq!(targets[2]["targets"][0], "127.82.0.3:19482");
    // And the new host's agent serves there.
    let began = Instant::now();
    while std::net::TcpStream::connect("127.82.0.3:19482").is_err() {
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "h3 serves no metrics"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(http_get("127.82.0.3:19482", "/metrics").0, 200);
    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
}

/// The route-change alert as Prometheus evaluates it (`promtool test
/// rules` on the rules `mx monitor` writes): a way whose replies crossed 2
/// routers, then 3, fires from the first evaluation that sees the change
/// and stops once it has left the window; a way that held its length, and
/// one whose requests held theirs, never fire.
#[test]
fn monitor_s_route_change_alert_fires_on_a_changed_length_and_only_then() {
    let sb = fleet_dir_with(86, &["h1", "h2", "h3"], &["--pps", "10"]);
    let run = sb.mx(&["monitor", "--metrics", "9464"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let description = "the most routers the datagrams from h3 crossed to h1 changed 1 time(s) over the last 5m: a link or router on the way went down or came back, or a route was moved; a loss then fits the change as well -- `mx trace` shows each stream's path now";
    let fired = format!(
        "          - exp_labels: {{severity: warning, host: h1, peer: h3}}
            exp_annotations:
              summary: the route from h3 to h1 changed its length
              description: \"{}\"
",
        description.replace('"', "\\\"")
    );
    // Scrapes every 15 s: 2 routers for 5 minutes, then 3.
    let tests = format!(
        "  - interval: 15s
    input_series:
      - series: 'mx_reply_hops{{host=\"h1\",peer=\"h3\"}}'
        values: '2x20 3x40'
      - series: 'mx_reply_hops{{host=\"h1\",peer=\"h2\"}}'
        values: '0x60'
      - series: 'mx_request_hops{{host=\"h1\",peer=\"h3\"}}'
        values: '2x60'
    alert_rule_test:
      - eval_time: 4m
        alertname: MxRouteChanged
        exp_alerts: []
      - eval_time: 5m30s
        alertname: MxRouteChanged
        exp_alerts:
{fired}      - eval_time: 9m
        alertname: MxRouteChanged
        exp_alerts:
{fired}      - eval_time: 11m
        alertname: MxRouteChanged
        exp_alerts: []
"
    );
    promtool_test_rules(&sb, "route_test.yml", &tests);
}

/// Runs `promtool test rules` on the rules `mx monitor` wrote in `sb`, with
/// the test groups `groups` (each `  - interval: ...`), saved as `name`
/// beside them; rules evaluated every 15 s.
fn promtool_test_rules(sb: &Sandbox, name: &str, groups: &str) {
    let tests = format!("rule_files:\n  - rules.yml\nevaluation_interval: 15s\ntests:\n{groups}");
    std::fs::write(sb.file(&format!("monitor/{name}")), tests).unwrap();
    crate::util::promtool(&["test", "rules", name], &sb.file("monitor"));
}

/// The RTT alert beside an agent short of CPU, as Prometheus evaluates the
/// rules `mx monitor` writes (`promtool test rules`): h1's agent runs 45 ms
/// behind its send schedule, and both hosts' round trips have a p99 near
/// 99 ms. h1's own RTT alert waits (its round trips time its own delay) and
/// `MxAgentBehind` names it instead; h2's fires, naming h1 as the other
/// cause its round trips fit. With every agent on schedule, both hosts'
/// RTT alerts fire and name no agent.
#[test]
fn monitor_s_rtt_alert_leaves_a_starved_agent_s_own_delay_to_it() {
    let sb = fleet_dir_with(141, &["h1", "h2", "h3"], &["--pps", "10"]);
    let run = sb.mx(&["monitor", "--metrics", "9464"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Scrapes every 15 s: 100 round trips a scrape, each 1 to 100 ms.
    let series = |behind_h1: &str| {
        let mut text = String::new();
        for host in ["h1", "h2"] {
            for (le, values) in [("0.001", "0x40"), ("0.1", "0+100x40"), ("+Inf", "0+100x40")] {
                text.push_str(&format!(
                    "      - series: 'mx_host_rtt_seconds_bucket{{host=\"{host}\",le=\"{le}\"}}'\n        values: '{values}'\n"
                ));
            }
        }
        text.push_str(&format!(
            "      - series: 'mx_behind_schedule_seconds{{host=\"h1\"}}'\n        values: '{behind_h1}x40'\n      - series: 'mx_behind_schedule_seconds{{host=\"h2\"}}'\n        values: '0.002x40'\n"
        ));
        text
    };
    let rtt = |host: &str, behind: &str| {
        format!(
            "          - exp_labels: {{severity: warning, host: {host}}}
            exp_annotations:
              summary: 'round trips from {host}: p99 99.01ms over 10 ms'
              description: 'the p99 of every round trip its requests made over the last 5m{behind}'
"
        )
    };
    let behind = "; and agents fell behind their send schedule meanwhile, whose own delay is in every round trip to and from them: h1 45ms";
    let tests = format!(
        "  - interval: 15s
    input_series:
{starved}    alert_rule_test:
      - eval_time: 6m
        alertname: MxRttP99High
        exp_alerts:
{h2_only}      - eval_time: 6m
        alertname: MxAgentBehind
        exp_alerts:
          - exp_labels: {{severity: warning, host: h1}}
            exp_annotations:
              summary: the agent on h1 runs 45ms behind its send schedule
              description: \"20 ms behind or more in every interval for 5m: it is not getting the CPU it needs (another process, a CPU quota, the hypervisor: mx_cpu_steal_ratio), so it sends and answers late; every round trip to and from it carries that delay, which is its own, not the network's (its own RTT alert waits until it catches up) -- `mx status` says more\"
  - interval: 15s
    input_series:
{on_schedule}    alert_rule_test:
      - eval_time: 6m
        alertname: MxRttP99High
        exp_alerts:
{both}      - eval_time: 6m
        alertname: MxAgentBehind
        exp_alerts: []
",
        starved = series("0.045"),
        on_schedule = series("0.003"),
        h2_only = rtt("h2", behind),
        both = rtt("h1", "") + &rtt("h2", ""),
    );
    promtool_test_rules(&sb, "rtt_test.yml", &tests);
}
