//! `mx compare` on hand-written report sets whose truth is known: a loss
//! added to every flow is flagged with its interval, the same run twice is
//! within noise, runs of different shapes are refused (and compared with
//! --force), and a file that is not a summary is refused naming it.

use crate::summarize::Reports;
use crate::util::Sandbox;

/// A full mesh of `hosts` at 1000 pps for 8 intervals; each flow's replies
/// come back at `back(src, dst, interval)` of 1000, as do the requests
/// that arrive.
pub fn reports(hosts: &[&str], back: impl Fn(&str, &str, i64) -> f64) -> Reports {
    let mut r = Reports::default();
    for ts in 100..108 {
        for &src in hosts {
            let mut total = 0.0;
            for &dst in hosts.iter().filter(|&&d| d != src) {
                let rep = back(src, dst, ts);
                r.tx(ts, src, dst, Some(1000.0), 1000.0, rep, 50.0, 100.0);
                r.rx(ts, dst, src, rep, rep);
                total += rep;
            }
            let sent = 1000.0 * (hosts.len() - 1) as f64;
            r.host(ts, src, sent, sent, total, 10.0, 20.0, 5.0, 2);
        }
    }
    r
}

/// Writes `reports` as the run directory `dir` of the sandbox.
pub fn write_run(sb: &Sandbox, dir: &str, reports: &Reports) {
    let tmp = Sandbox::new();
    reports.write(&tmp);
    std::fs::create_dir_all(sb.file(dir)).unwrap();
    for entry in std::fs::read_dir(tmp.file("reports")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), sb.file(dir).join(entry.file_name())).unwrap();
    }
}

fn fleet_figure(doc: &serde_json::Value, name: &str) -> serde_json::Value {
    doc["fleet"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no {name}: {doc}"))
}

pub const HOSTS: [&str; 4] = ["a", "b", "c", "d"];

/// Interval-to-interval noise of +-0.3% on every flow, the same in any run.
pub fn noisy(_: &str, _: &str, ts: i64) -> f64 {
    1000.0 - [0.0, 3.0, 1.0, 2.0][(ts % 4) as usize]
}

#[test]
fn a_loss_on_every_flow_is_flagged_and_the_same_run_twice_is_within_noise() {
    let sb = Sandbox::new();
    write_run(&sb, "before", &reports(&HOSTS, noisy));
    // 5% of every flow lost (replies 5% fewer than the noisy baseline).
    write_run(
        &sb,
        "after",
        &reports(&HOSTS, |s, d, ts| noisy(s, d, ts) * 0.95),
    );
    let run = sb.mx(&["compare", "before", "after", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["schema"], "mx.compare/1");
    let loss = fleet_figure(&doc, "loss");
    assert_eq!(loss["verdict"], "worse", "{loss}");
    let change = loss["change"].as_f64().unwrap();
    assert!((change - 5.0).abs() < 0.05, "{loss}");
    assert!(loss["low"].as_f64().unwrap() > 4.5, "{loss}");
    assert_eq!(fleet_figure(&doc, "replies back")["verdict"], "worse");
    // Requests went out alike; RTT is the same in both.
    assert_eq!(fleet_figure(&doc, "requests")["verdict"], "within_noise");
    assert_eq!(fleet_figure(&doc, "rtt p99")["verdict"], "not_measured");
    // 12 flows each lost 5%.
    assert_eq!(doc["flows"].as_array().unwrap().len(), 12);

    let text = sb.mx(&["compare", "before", "after"]);
    assert_eq!(text.code, 0);
    // Its RTT figures are the median interval's, not a run's own p99: said.
    assert!(
        text.stdout.contains(
            "  FLEET (over each run's intervals; rtt: the median of the intervals' own percentiles)\n"
        ),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.lines().any(|l| l.starts_with("  loss ")
            && l.contains("+5.00 pts, 95% +")
            && l.ends_with("worse")),
        "{}",
        text.stdout
    );

    // The same run against itself: nothing moved.
    let same = sb.mx(&["compare", "before", "before", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&same.stdout).unwrap();
    for f in doc["fleet"].as_array().unwrap() {
        assert!(
            f["verdict"] == "within_noise" || f["verdict"] == "not_measured",
            "{f}"
        );
    }
    assert!(doc["flows"].as_array().unwrap().is_empty());
}

#[test]
fn a_saved_summary_compares_as_its_reports_do() {
    let sb = Sandbox::new();
    write_run(&sb, "before", &reports(&HOSTS, noisy));
    write_run(
        &sb,
        "after",
        &reports(&HOSTS, |s, d, ts| noisy(s, d, ts) * 0.95),
    );
    let saved = sb.mx(&[
        "summarize",
        "--no-collect",
        "--window",
        "0",
        "--reports",
        "before",
        "--json",
    ]);
    assert_eq!(saved.code, 0, "{}", saved.stderr);
    sb.write("before.json", &saved.stdout);
    let from_dir = sb.mx(&["compare", "before", "after", "--json"]);
    let from_json = sb.mx(&["compare", "before.json", "after", "--json"]);
    let strip = |s: &str| s.replace("\"before.json\"", "\"before\"");
    assert_eq!(strip(&from_json.stdout), from_dir.stdout);
}

#[test]
fn runs_of_different_shapes_are_refused_unless_forced() {
    let sb = Sandbox::new();
    write_run(&sb, "four", &reports(&HOSTS, noisy));
    write_run(&sb, "five", &reports(&["a", "b", "c", "d", "e"], noisy));
    let run = sb.mx(&["compare", "four", "five"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    for want in [
        "four and five are runs of different shapes",
        "1 host only in B (e)",
        "8 flows only in B (a -> e, b -> e, c -> e and 5 more)",
        "--force",
    ] {
        assert!(run.stderr.contains(want), "{want}: {}", run.stderr);
    }
    let forced = sb.mx(&["compare", "four", "five", "--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    assert!(
        forced
            .stdout
            .contains("shapes differ (compared anyway, --force): 1 host only in B (e)"),
        "{}",
        forced.stdout
    );
}

#[test]
fn what_is_not_a_summary_is_refused_naming_the_file() {
    let sb = Sandbox::new();
    write_run(&sb, "run", &reports(&HOSTS, noisy));
    sb.write("notes.txt", "before the change\n");
    sb.write("other.json", "{\"rows\": []}\n");
    sb.write("future.json", "{\"schema\": \"mx.summary/9\"}\n");
    for (file, want) in [
        ("notes.txt", "notes.txt: not JSON"),
        (
            "other.json",
            "other.json: not an mx summary (no \"schema\" key)",
        ),
        (
            "future.json",
            "future.json: a document of schema mx.summary/9, not mx.summary/1",
        ),
        ("missing", "missing"),
    ] {
        let run = sb.mx(&["compare", file, "run"]);
        assert_eq!(run.code, 2, "{file}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains(want), "{want}: {}", run.stderr);
    }
}
