//! Always on, against a real Prometheus: Debian's `prometheus` scrapes a
//! lab of real sshd hosts whose agents run `mx start --metrics`, with the
//! targets, rules and dashboard `mx monitor` wrote, while 5% of the
//! requests into h2 are dropped. What Prometheus records and alerts on is
//! read back over its HTTP API.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agents::PORT;
use crate::lab::Lab;
use crate::metrics::http_get;
use crate::util::Sandbox;

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
            "needs Debian's prometheus (.ci/run installs it)"
        );
        let data = tempfile::tempdir().unwrap();
        let addr = format!("127.0.0.1:{port}");
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

fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool").args(args).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}: {text}");
    text
}

#[test]
#[ignore = "needs root: a lab of network namespaces with sshd, and Debian's prometheus (CI runs it: --run-ignored all)"]
fn agent_lab_prometheus_records_5_percent_into_a_host_and_alerts_on_it_alone() {
    let lab = Lab::up(133, 4);
    let sb: Sandbox = lab.controller("200");
    let monitor = lab.mx(
        &sb,
        &[
            "monitor",
            "--metrics",
            "19533",
            "--scrape-interval",
            "1s",
            "--window",
            "15s",
            "--alert-for",
            "5s",
            "--loss-pct",
            "3",
        ],
    );
    assert_eq!(monitor.code, 0, "{}{}", monitor.stdout, monitor.stderr);
    let dir = sb.file("monitor");
    let rules = dir.join("rules.yml");
    assert!(
        promtool(&["check", "rules", rules.to_str().unwrap()]).contains("SUCCESS"),
        "promtool passes the rules"
    );
    promtool(&[
        "check",
        "config",
        dir.join("prometheus.yml").to_str().unwrap(),
    ]);

    // Requests entering h2 (the agents' port): 5% dropped in h2; one
    // datagram per trip, as nftables drops a whole GSO run at once.
    lab.exec(
        2,
        &["nft", "-f", "-"],
        &format!(
            "table inet mxfault {{\n  chain c {{\n    type filter hook input priority 0;\n    udp dport {PORT} numgen random mod 10000 < 500 drop\n  }}\n}}\n"
        ),
    );
    let start = lab.mx(
        &sb,
        &["start", "--interval", "1", "--no-gso", "--metrics", "19533"],
    );
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let prometheus = Prometheus::start(&dir.join("prometheus.yml"), 19133);

    // Every host's forward loss into it, once a window of scrapes is in.
    let began = Instant::now();
    let into = loop {
        std::thread::sleep(Duration::from_secs(2));
        let into = prometheus.by("mx:forward_loss_into:ratio", "host");
        if into.len() == 4 && began.elapsed() > Duration::from_secs(25) {
            break into;
        }
        assert!(began.elapsed() < Duration::from_secs(90), "{into:?}");
    };
    eprintln!("forward loss into each host: {into:?}");
    for (host, ratio) in &into {
        if host == "h2" {
            assert!((ratio - 0.05).abs() <= 0.01, "into h2: {ratio}");
        } else {
            assert!(*ratio < 0.005, "into {host}: {ratio}");
        }
    }
    // The return legs carry no fault.
    for (host, ratio) in prometheus.by("mx:return_loss_into:ratio", "host") {
        assert!(ratio < 0.005, "replies into {host}: {ratio}");
    }
    // h2's alert fires; no clean host's does.
    let began = Instant::now();
    loop {
        let firing = prometheus.by(
            "ALERTS{alertname=\"MxForwardLossIntoHost\",alertstate=\"firing\"}",
            "host",
        );
        if !firing.is_empty() {
            let hosts: Vec<&str> = firing.iter().map(|(h, _)| h.as_str()).collect();
            assert_eq!(hosts, ["h2"]);
            break;
        }
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "h2's alert never fired"
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    for alert in prometheus.query("ALERTS") {
        let labels = &alert["metric"];
        let named = [labels["host"].as_str(), labels["dst"].as_str()];
        assert!(
            named.iter().flatten().all(|h| *h == "h2"),
            "an alert names a clean host: {alert}"
        );
    }
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
    lab.stop_and_clean(&sb);
}
