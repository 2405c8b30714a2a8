//! Always on, against a real Prometheus: Debian's `prometheus` scrapes a
//! lab of real sshd hosts whose agents run `mx start --metrics` at the
//! documented always-on rate, with the targets, rules and dashboard `mx
//! monitor` wrote: clean from the start, then with 5% of the requests into
//! h2 dropped, then through a reload, and one agent killed. What Prometheus
//! records and alerts on is read back over its HTTP API.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agents::PORT;
use crate::lab::Lab;
use crate::metrics::http_get;
use crate::util::{Sandbox, promtool};

/// A Prometheus on a loopback port, with `config`; killed when dropped.
struct Prometheus {
    child: Child,
    addr: String,
    _data: tempfile::TempDir,
}

impl Prometheus {
    fn start(config: &Path, port: u16) -> Prometheus {
        assert!(
            Path::new("/usr/bin/prometheus").exists(),
            "needs Debian's prometheus (tests/run installs it)"
        );
        let data = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{port}");
        // Ours must be what answers there: a Prometheus left behind (by a
        // test run killed midway) would answer for it, with its own alerts.
        assert!(
            std::net::TcpListener::bind(&addr).is_ok(),
            "{addr} is taken: another Prometheus (left by a killed run?) holds it"
        );
        let child = Command::new("/usr/bin/prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.path().display()))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Prometheus {
            child,
            addr,
            _data: data,
        };
        let began = Instant::now();
        while std::net::TcpStream::connect(&p.addr).is_err() {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "prometheus never listened"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// An instant query's result vector.
    fn query(&self, promql: &str) -> Vec<Value> {
        let (code, body) = http_get(
            &self.addr,
            &format!("/api/v1/query?query={}", encode(promql)),
        );
        let doc: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(code, 200, "{promql}: {body}");
        doc["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `record`'s value for each value of `label`.
    fn by(&self, record: &str, label: &str) -> Vec<(String, f64)> {
        self.query(record)
            .iter()
            .map(|s| {
                let name = s["metric"][label].as_str().unwrap_or_default().to_string();
                let value = s["value"][1].as_str().unwrap().parse().unwrap();
                (name, value)
            })
            .collect()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A query string's percent-encoding.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One alert as Prometheus holds it: its name, labels, state and description.
#[derive(Debug)]
struct Alert {
    name: String,
    labels: Value,
    state: String,
    description: String,
}

impl Prometheus {
    /// Every alert pending or firing now.
    fn alerts(&self) -> Vec<Alert> {
        let (code, body) = http_get(&self.addr, "/api/v1/alerts");
        assert_eq!(code, 200, "{body}");
        let doc: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        doc["data"]["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|a| Alert {
                name: a["labels"]["alertname"].as_str().unwrap_or("").to_string(),
                state: a["state"].as_str().unwrap_or("").to_string(),
                description: a["annotations"]["description"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                labels: a["labels"].clone(),
            })
            .collect()
    }
}

/// A control: the rules as they were before the senders told both legs,
/// each share one agent's counter over another's (the receiver's requests
/// received over the sender's requests sent). On a clean fleet, at the
/// always-on rate, their shares read tens of percent while the window
/// fills, and they fire: the configuration below is one in which rules of
/// that kind do, and mx's must not.
fn control_rules(window: &str) -> String {
    let sent_to = |func: &str| {
        format!(
            "sum by (host) (label_replace({func}(mx_requests_sent_total[{window}]), 'host', '$1', 'peer', '(.*)'))"
        )
    };
    let received =
        |func: &str| format!("sum by (host) ({func}(mx_requests_received_total[{window}]))");
    format!(
        "groups:\n- name: control\n  rules:\n  - alert: ControlCrossTargetLossIntoHost\n    expr: \"(1 - {} / {} > 0.01) and on (host) ({} - {} >= 3)\"\n    for: 30s\n",
        received("rate"),
        sent_to("rate"),
        sent_to("increase"),
        received("increase"),
    )
}

/// Polls Prometheus's alerts every 5 s for `span`: each poll's alerts of
/// mx (the control's apart, and `MxAgentBehind`) must all pass `allowed`;
/// returns whether the control was pending or firing at any poll, and the
/// last poll's alerts. `MxAgentBehind` is this machine's CPU, truly
/// measured: the lab's agents share two cores with the other tests' busy
/// ones, and a 10-a-second flow can wait tens of ms for a core; these
/// tests hold the loss and gone alerts, whatever the CPU does.
fn watch(
    prometheus: &Prometheus,
    span: Duration,
    what: &str,
    allowed: impl Fn(&Alert) -> bool,
    mut done: impl FnMut(&[Alert]) -> bool,
) -> (bool, Vec<Alert>) {
    let began = Instant::now();
    let mut control = false;
    loop {
        let alerts = prometheus.alerts();
        control |= alerts.iter().any(|a| a.name.starts_with("Control"));
        let ours: Vec<Alert> = alerts
            .into_iter()
            .filter(|a| !a.name.starts_with("Control") && a.name != "MxAgentBehind")
            .collect();
        for a in &ours {
            assert!(
                allowed(a),
                "{what}, {:.0} s in: {a:?}\nall: {ours:?}",
                began.elapsed().as_secs_f64()
            );
        }
        if done(&ours) || began.elapsed() >= span {
            return (control, ours);
        }
        std::thread::sleep(Duration::from_secs(5));
    }
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd, and Debian's prometheus (CI runs it: --run-ignored all)"]
fn agent_lab_prometheus_at_the_always_on_rate_is_quiet_when_clean_and_names_the_one_host_loss_goes_into()
 {
    let lab = Lab::up(133, 4);
    // The documented always-on rate and interval, the rules over a minute
    // (CI's time: the documented 5m is bench/always_on.py --alerts).
    // The RTT alert's line is the operator's, and here it is set out of
    // reach: this test holds the loss and gone alerts. On a 2-core machine
    // whose other tests run busy agents, a 10-a-second flow's p99 is the
    // scheduler's (a flow waits tens of ms for a core), truly measured and
    // not the network's; at the default 10ms it went pending on a clean
    // fleet one run in five.
    let sb: Sandbox = lab.controller("10");
    let monitor = lab.mx(
        &sb,
        &[
            "monitor",
            "--metrics",
            "19533",
            "--scrape-interval",
            "5s",
            "--window",
            "1m",
            "--alert-for",
            "30s",
            "--rtt-p99",
            "1s",
        ],
    );
    assert_eq!(monitor.code, 0, "{}{}", monitor.stdout, monitor.stderr);
    let dir = sb.file("monitor");
    let rules = dir.join("rules.yml");
    assert!(
        promtool(&["check", "rules", rules.to_str().unwrap()], &dir).contains("SUCCESS"),
        "promtool passes the rules"
    );
    let rule_text = std::fs::read_to_string(&rules).unwrap();
    let rtt_line = rule_text
        .lines()
        .find(|l| l.contains("mx:rtt_p99:seconds >"))
        .unwrap_or_else(|| panic!("an RTT rule: {rule_text}"));
    assert!(
        rtt_line.contains("mx:rtt_p99:seconds > 1 unless on (host) "),
        "the RTT line as given: {rtt_line}"
    );
    promtool(
        &[
            "check",
            "config",
            dir.join("prometheus.yml").to_str().unwrap(),
        ],
        &dir,
    );
    // mx's config, with the control's rules beside mx's.
    std::fs::write(dir.join("control.yml"), control_rules("1m")).unwrap();
    let config = std::fs::read_to_string(dir.join("prometheus.yml")).unwrap();
    let with_control = config.replace("- \"rules.yml\"", "- \"rules.yml\"\n  - \"control.yml\"");
    assert_ne!(with_control, config, "{config}");
    std::fs::write(dir.join("prometheus-test.yml"), with_control).unwrap();

    let start = lab.mx(&sb, &["start", "--interval", "5", "--metrics", "19533"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let prometheus = Prometheus::start(&dir.join("prometheus-test.yml"), 19133);

    // Clean, from the start on: two minutes, twice the window, without a
    // loss alert; while the control's cross-host shares fire.
    let (control, _) = watch(
        &prometheus,
        Duration::from_secs(120),
        "a clean fleet",
        |_| false,
        |_| false,
    );
    assert!(
        control,
        "the control never fired: this configuration does not show what mx's rules are for"
    );
    let settled = prometheus.by("mx:forward_settled:increase", "src");
    assert_eq!(
        settled.len(),
        12,
        "every pair settles requests: {settled:?}"
    );
    assert!(settled.iter().all(|(_, n)| *n > 300.0), "{settled:?}");

    // 5% of the requests into h2 dropped in h2: its "into" alert fires,
    // and no other, at any moment.
    let fault = format!(
        "table inet mxfault {{\n  chain c {{\n    type filter hook input priority 0;\n    udp dport {PORT} numgen random mod 10000 < 500 drop\n  }}\n}}\n"
    );
    lab.exec(2, &["nft", "-f", "-"], &fault);
    let into_h2 = |a: &Alert| a.name == "MxLossIntoHost" && a.labels["host"] == "h2";
    // As the fault begins and ends, h2's legs cross the line seconds apart
    // (each sender is scraped at its own instant, its counts published an
    // interval at a time): the first across may go pending as the pair's
    // for those seconds, and resolves long before it could fire.
    let h2_leg_for_a_moment =
        |a: &Alert| a.name == "MxLossBetween" && a.labels["to"] == "h2" && a.state == "pending";
    let (_, fired) = watch(
        &prometheus,
        Duration::from_secs(150),
        "5% into h2",
        |a| into_h2(a) || h2_leg_for_a_moment(a),
        |alerts| alerts.iter().any(|a| a.state == "firing"),
    );
    let firing: Vec<&Alert> = fired.iter().filter(|a| a.state == "firing").collect();
    assert_eq!(firing.len(), 1, "{fired:?}");
    let alert = firing[0];
    assert!(into_h2(alert), "{alert:?}");
    eprintln!("{}", alert.description);
    let words: Vec<&str> = alert.description.split_whitespace().collect();
    let lost: f64 = words[0].parse().unwrap();
    let of: f64 = words[2].parse().unwrap();
    assert!(
        alert.description.contains("requests and ")
            && alert
                .description
                .contains(" replies into h2 lost over the last 1m"),
        "{}",
        alert.description
    );
    assert!(
        lost >= 3.0 && (0.02..=0.09).contains(&(lost / of)),
        "{}",
        alert.description
    );
    let into = prometheus.by("mx:forward_loss_into:ratio", "host");
    for (host, ratio) in &into {
        if host != "h2" {
            assert_eq!(*ratio, 0.0, "into {host}: {into:?}");
        }
    }

    // Healed, and a reload of an edited matrix (h1 sends h3 twice as many):
    // the agents it restarts begin their counts again, and no loss alert
    // is made of that; h2's fades once its window is past.
    lab.exec(2, &["nft", "delete", "table", "inet", "mxfault"], "");
    let matrix = sb.read("matrix.csv");
    let mut lines: Vec<String> = matrix.lines().map(str::to_string).collect();
    let h1 = lines.iter().position(|l| l.starts_with("h1")).unwrap();
    let mut cells: Vec<String> = lines[h1].split(',').map(str::to_string).collect();
    cells[3] = "20".to_string();
    lines[h1] = cells.join(",");
    sb.write("matrix.csv", &(lines.join("\n") + "\n"));
    let reload = lab.mx(&sb, &["reload"]);
    assert_eq!(reload.code, 0, "{}{}", reload.stdout, reload.stderr);
    // Then h4's agent killed 30 s in: its scrapes fail and its peers' flows
    // to it settle nothing, so it is MxAgentGone, and only that. (An agent
    // the reload restarts may miss a scrape: pending, never firing.)
    let killed = std::sync::atomic::AtomicBool::new(false);
    let quiet = |a: &Alert| {
        let gone = a.name == "MxAgentGone";
        into_h2(a)
            || h2_leg_for_a_moment(a)
            || (gone && (a.labels["mx_host"] == "h4" || a.state == "pending"))
    };
    let began = Instant::now();
    let (_, last) = watch(
        &prometheus,
        Duration::from_secs(100),
        "after the reload",
        quiet,
        |_| {
            if began.elapsed() > Duration::from_secs(30)
                && !killed.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                for pid in lab.agents(4) {
                    let _ = Command::new("kill").args(["-9", &pid]).status();
                }
            }
            false
        },
    );
    let h4_gone: Vec<&Alert> = last
        .iter()
        .filter(|a| a.name == "MxAgentGone" && a.labels["mx_host"] == "h4")
        .collect();
    assert!(
        !h4_gone.is_empty() && last.len() == h4_gone.len(),
        "h4's agent gone, and nothing else (h2's faded): {last:?}"
    );

    // Every expression of the dashboard returns data.
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("dashboard.json")).unwrap())
            .unwrap();
    let exprs = matrix_orchestrator::monitor::dashboard::expressions(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for expr in exprs {
        assert!(!prometheus.query(&expr).is_empty(), "no data: {expr}");
    }
    drop(prometheus);
    // h4's agent is gone: clean leaves nothing on any host.
    assert_eq!(lab.mx(&sb, &["clean", "--yes"]).code, 0);
    for i in 1..=4 {
        assert!(lab.agents(i).is_empty(), "h{i}: no agent runs");
    }
}
