//! `mx run --ramp` through the local transport: real agents on 127.x, their
//! rate raised on the running fleet, and the flags a ramp refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::fleet_local::{agents_under, fleet_dir_with};
use crate::lab_faults::report_rows;

/// The cells of `column` over `rows`, as numbers (blank: None).
fn column(rows: &[BTreeMap<String, String>], name: &str) -> Vec<Option<f64>> {
    rows.iter().map(|r| r[name].parse::<f64>().ok()).collect()
}

#[test]
fn agent_fleet_ramp_raises_the_running_agents_rate_and_rows_carry_its_scale() {
    let sb = fleet_dir_with(71, &["h1", "h2"], &["--pps", "1000"]);
    // Every agent pid seen while the ramp runs: a restart would add one.
    let hosts = sb.file("hosts");
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            while !done.load(Ordering::Relaxed) {
                seen.extend(agents_under(&hosts));
                std::thread::sleep(Duration::from_millis(100));
            }
            seen
        })
    };
    let run = sb.mx(&[
        "run",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--ramp",
        "1:2",
        "--ramp-step",
        "1",
        "--ramp-hold",
        "2",
        "--min-delivered",
        "50",
        "--json",
    ]);
    done.store(true, Ordering::Relaxed);
    let pids = watcher.join().unwrap();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        pids.len(),
        2,
        "one agent per host, never restarted: {pids:?}"
    );
    assert!(
        agents_under(&sb.file("hosts")).is_empty(),
        "the ramp ends the flows"
    );
    for h in ["h1", "h2"] {
        let log = sb.read(&format!("hosts/{h}/var/tmp/mx/agent.log"));
        assert_eq!(log.matches("mx agent ").count(), 1, "{log}");
        assert!(
            log.contains("rate: every flow at x2 of its matrix rate"),
            "{log}"
        );
    }
    // Progress on stderr; the document alone on stdout.
    for step in ["1 at x1 (2.0 kpps", "2 at x2 (4.0 kpps"] {
        let want = format!("[mx] step {step} offered");
        assert!(run.stderr.contains(&want), "{want}: {}", run.stderr);
    }
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).expect(&run.stdout);
    assert_eq!(doc["schema"], "mx.ramp/1");
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{doc}");
    for (step, scale) in steps.iter().zip([1.0, 2.0]) {
        assert_eq!(step["scale"], scale);
        assert_eq!(step["intervals"], 2, "{step}");
        assert_eq!(step["offered_pps"], 2000.0 * scale, "{step}");
        assert_eq!(step["verdict"], "held", "{step}");
    }
    assert_eq!(doc["highest_held"]["scale"], 2.0);
    assert!(doc["lowest_failed_scale"].is_null());

    // The rows: each interval at one scale, the target and the rate sent
    // following it, and the scale blank on rx rows (the peer's to say).
    let host_rows = report_rows(&sb, "h1", "host", "*");
    let scales: Vec<Option<f64>> = column(&host_rows, "rate_scale");
    assert!(
        scales.iter().all(|s| *s == Some(1.0) || *s == Some(2.0)),
        "{scales:?}"
    );
    // The whole intervals (the host row says steady: not the end's).
    let steady: BTreeSet<&str> = host_rows
        .iter()
        .filter(|r| r["phase"] == "steady")
        .map(|r| r["ts"].as_str())
        .collect();
    let tx = report_rows(&sb, "h1", "tx", "h2");
    let at = |scale: f64| -> Vec<&BTreeMap<String, String>> {
        tx.iter()
            .filter(|r| r["rate_scale"].parse::<f64>().ok() == Some(scale))
            .filter(|r| steady.contains(r["ts"].as_str()))
            .collect()
    };
    let (one, two) = (at(1.0), at(2.0));
    assert!(one.len() >= 2 && two.len() >= 2, "{tx:?}");
    assert!(one.iter().all(|r| r["target_pps"] == "1000.0"), "{one:?}");
    assert!(two.iter().all(|r| r["target_pps"] == "2000.0"), "{two:?}");
    let mean = |rows: &[&BTreeMap<String, String>]| {
        rows.iter()
            .map(|r| r["pps"].parse::<f64>().unwrap())
            .sum::<f64>()
            / rows.len() as f64
    };
    let (sent1, sent2) = (mean(&one), mean(&two));
    assert!(sent1 > 800.0 && sent1 < 1050.0, "{sent1}");
    assert!(
        sent2 > 1.7 * sent1,
        "x2 sends twice as fast: {sent1} -> {sent2}"
    );
    assert!(
        report_rows(&sb, "h1", "rx", "h2")
            .iter()
            .all(|r| r["rate_scale"].is_empty()),
        "rx rows carry no scale"
    );
}

#[test]
fn a_ramps_bad_flag_values_are_refused_in_one_line_naming_them_before_anything_runs() {
    let sb = fleet_dir_with(72, &["h1", "h2"], &["--pps", "1000"]);
    for (args, want) in [
        (
            &["--ramp", "3:1"][..],
            "mx: --ramp '3:1': TO must be above FROM",
        ),
        (
            &["--ramp", "fast"][..],
            "mx: --ramp 'fast': want two factors",
        ),
        (
            &["--ramp", "1:2", "--ramp-step", "-1"][..],
            "mx: --ramp-step '-1': want a positive factor",
        ),
        (
            &["--ramp", "1:2", "--ramp-hold", "0"][..],
            "mx: --ramp-hold '0': want the seconds",
        ),
        (
            &["--ramp", "1:2", "--min-delivered", "120"][..],
            "mx: --min-delivered '120': want a percentage",
        ),
        (
            &["--ramp", "1:2", "--max-p99", "5"][..],
            "mx: --max-p99 '5': want a positive duration with its unit",
        ),
        (
            &["--ramp", "1:2", "--duration", "9"][..],
            "mx: --ramp runs until it finds the limit",
        ),
        (
            &["--bisect"][..],
            "mx: --bisect is a setting of the ramp: give --ramp FROM:TO",
        ),
        (
            &["--max-p99", "5ms"][..],
            "mx: --max-p99 is a setting of the ramp",
        ),
    ] {
        let run = sb.mx(&[&["run", "--local", "hosts"][..], args].concat());
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.starts_with(want), "{args:?}: {}", run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
    }
    assert!(!sb.file("hosts").exists(), "nothing was deployed");
    // An unpaced flow has no rate to scale.
    let unpaced = fleet_dir_with(72, &["h1", "h2"], &["--pps", "max"]);
    let run = unpaced.mx(&["run", "--local", "hosts", "--ramp", "1:2"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("2 flow(s) of matrix.csv are unpaced (max)"),
        "{}",
        run.stderr
    );
}
