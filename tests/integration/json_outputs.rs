//! `--json` on `check` and `status` (`summarize` and `compare` are tested
//! beside their text): one document each, versioned by its `schema` key,
//! blank as null, never 0.

use std::time::Duration;

use crate::fleet_local::fleet_dir_with;
use crate::util::{Sandbox, assert_golden};

const MESH: &str = include_str!("../golden/gen_mesh.csv");

#[test]
fn check_json_is_the_checks_figures_with_the_same_exit_code() {
    let sb = Sandbox::new();
    sb.write("matrix.csv", MESH);
    let run = sb.mx(&["check", "--json", "--nic-gbps", "0.2", "--nic-mpps", "0.05"]);
    assert_eq!(run.code, 1, "over the caps: {}", run.stderr);
    assert_golden("check_over.json", &run.stdout);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["schema"], "mx.check/1");
    assert_eq!(doc["admissible"], false);

    let within = sb.mx(&["check", "--json", "--nic-gbps", "25"]);
    assert_eq!(within.code, 0);
    let doc: serde_json::Value = serde_json::from_str(&within.stdout).unwrap();
    assert_eq!(doc["admissible"], true);
    // No caps given: nothing to judge, said as null.
    let nocaps = sb.mx(&["check", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&nocaps.stdout).unwrap();
    assert!(doc["admissible"].is_null(), "{doc}");

    // Nothing paced: no load, no offer, no worker count -- null, not 0.
    sb.write(
        "matrix.csv",
        "# tx_size=64 rx_size=64 port=5300\nsrc,a,b\na,,max\nb,max,\n",
    );
    let unpaced = sb.mx(&["check", "--json", "--nic-gbps", "1"]);
    assert_eq!(unpaced.code, 0, "{}", unpaced.stderr);
    let doc: serde_json::Value = serde_json::from_str(&unpaced.stdout).unwrap();
    assert_eq!(doc["unpaced_flows"], 2);
    for key in ["fleet_offered_pps", "admissible", "workers_needed"] {
        assert!(doc[key].is_null(), "{key}: {doc}");
    }
    assert!(doc["hosts"][0]["packets_pps"].is_null(), "{doc}");
    assert_eq!(doc["hosts"][0]["unpaced"], true);
}

fn status(sb: &Sandbox) -> serde_json::Value {
    let run = sb.mx(&["status", "--local", "hosts", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let doc: serde_json::Value =
        serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {}", run.stdout));
    assert_eq!(doc["schema"], "mx.status/1");
    doc
}

#[test]
fn agent_status_json_reads_each_hosts_newest_row_and_its_state() {
    let sb = fleet_dir_with(122, &["h1", "h2"], &["--pps", "1000"]);
    let doc = status(&sb);
    for h in doc["hosts"].as_array().unwrap() {
        assert_eq!(h["state"], "not-deployed", "{h}");
        assert!(h["row"].is_null());
    }
    let start = sb.mx(&["start", "--local", "hosts", "--interval", "1"]);
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    // Until each host has written a whole interval (bounded).
    let began = std::time::Instant::now();
    let doc = loop {
        let doc = status(&sb);
        let steady = doc["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["row"]["phase"] == "steady");
        if steady {
            break doc;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "{doc}");
        std::thread::sleep(Duration::from_millis(300));
    };
    for h in doc["hosts"].as_array().unwrap() {
        assert_eq!(h["state"], "running", "{h}");
        let row = &h["row"];
        // One peer at 1000 pps: the row's own numbers, not the status text.
        assert_eq!(row["target_pps"], 1000.0, "{h}");
        let sent = row["sent_pps"].as_f64().unwrap();
        assert!((sent - 1000.0).abs() < 100.0, "{h}");
        assert!(row["rtt_p99_us"].as_f64().unwrap() > 0.0, "{h}");
        assert!(row["age_s"].as_f64().unwrap() < 10.0, "{h}");
        // Counted, and a clean run at its plan refuses nothing.
        assert_eq!(row["over_plan"], 0, "{h}");
        assert_eq!(h["runs_this_matrix"], true, "{h}");
    }
    let own = sb.mx(&["status", "--local", "hosts"]);
    assert!(!own.stdout.contains("ANOTHER MATRIX"), "{}", own.stdout);

    // Another directory whose matrix is 2 kpps a pair, on the same hosts
    // (the same remote directory): its status says the agents run another
    // matrix than its own, in words and in the document.
    let other = fleet_dir_with(122, &["h1", "h2"], &["--pps", "2000"]);
    let hosts = sb.file("hosts");
    let hosts = hosts.to_str().unwrap();
    let text = other.mx(&["status", "--local", hosts]);
    assert_eq!(text.code, 0, "{}{}", text.stdout, text.stderr);
    assert_eq!(
        text.stdout.matches(" -- ANOTHER MATRIX\n").count(),
        2,
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(
            "[mx] ANOTHER MATRIX: the agents of h1, h2 run another matrix than matrix.csv"
        ),
        "{}",
        text.stdout
    );
    let json = other.mx(&["status", "--local", hosts, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect(&json.stdout);
    for h in doc["hosts"].as_array().unwrap() {
        assert_eq!(h["runs_this_matrix"], false, "{h}");
    }

    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
    let doc = status(&sb);
    for h in doc["hosts"].as_array().unwrap() {
        assert!(h["runs_this_matrix"].is_null(), "no agent runs: {h}");
        assert_eq!(h["state"], "not-running", "{h}");
        assert!(h["row"].is_object(), "the last row stays readable: {h}");
    }
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}
