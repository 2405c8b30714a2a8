//! `mx run --ramp` through the local transport: real agents on 127.x, their
//! rate raised on the running fleet, and the flags a ramp refuses.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use matrix_orchestrator::summary::analysis::span::Step;
use matrix_orchestrator::summary::ramp::{self, Thresholds, Verdict};

use crate::agents::Starved;
use crate::fleet_local::{agents_under, fleet_dir_with};
use crate::lab_faults::report_rows;
use crate::summarize::mesh_reports_over;
use crate::util::Sandbox;

/// The cells of `column` over `rows`, as numbers (blank: None).
fn column(rows: &[BTreeMap<String, String>], name: &str) -> Vec<Option<f64>> {
    rows.iter().map(|r| r[name].parse::<f64>().ok()).collect()
}

/// A ramp on the local fleet `hosts`: x1, then x2, 2 s a step.
const X1_THEN_X2: [&str; 11] = [
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
];

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
    let run = sb.mx(&[&X1_THEN_X2[..], &["--min-delivered", "50", "--json"]].concat());
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

    // Summarized afterwards, the reports read as the ramp they are: each
    // step alone, never one average of both rates.
    let summary = sb.mx(&["summarize", "--no-collect", "--min-delivered", "50"]);
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    assert!(
        summary.stdout.starts_with(
            "mx summarize -- a ramp (mx run --ramp): 2 step(s), x1 to x2, each summarized alone"
        ),
        "{}",
        summary.stdout
    );
    for (n, scale, offered) in [("1", "x1", "2.0 kpps"), ("2", "x2", "4.0 kpps")] {
        let row = summary
            .stdout
            .lines()
            .find(|l| l.split_whitespace().take(2).eq([n, scale]))
            .unwrap_or_else(|| panic!("step {n}: {}", summary.stdout));
        assert!(row.contains(offered) && row.ends_with("held"), "{row}");
    }
    assert!(
        summary.stdout.contains("highest rate that held: 4000 pps"),
        "{}",
        summary.stdout
    );
    let json = sb.mx(&[
        "summarize",
        "--no-collect",
        "--min-delivered",
        "50",
        "--json",
    ]);
    let recorded: serde_json::Value = serde_json::from_str(&json.stdout).expect(&json.stdout);
    assert_eq!(recorded["schema"], "mx.ramp/1");
    let offered: Vec<f64> = recorded["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["offered_pps"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [2000.0, 4000.0], "{recorded}");
    assert_eq!(recorded["ramp"]["from"], 1.0);
    assert_eq!(recorded["ramp"]["to"], 2.0);
    assert_eq!(recorded["ramp"]["step"], 1.0);

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
#[ignore = "needs root: a cgroup CPU quota on an agent (CI runs it: --run-ignored all)"]
fn agent_fleet_ramp_tries_a_step_again_when_an_agent_was_short_of_cpu_in_it() {
    crate::util::require_root("a cgroup CPU quota");
    let sb = fleet_dir_with(67, &["h1", "h2"], &["--pps", "1000"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_mx"))
        .args(X1_THEN_X2)
        .args(["--min-delivered", "95", "--json"])
        .current_dir(sb.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mx");
    // h2's agent is held to 1% of a core from the moment it runs until the
    // first step has been judged: a host starved for a few seconds.
    let h2 = sb.file("hosts/h2");
    let deadline = Instant::now() + Duration::from_secs(20);
    let agent = loop {
        if let Some(pid) = agents_under(&h2).first() {
            break pid.clone();
        }
        assert!(Instant::now() < deadline, "h2's agent never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut starved = Some(Starved::hold(&agent, "mx-ramp-starved-67"));
    let mut stderr = String::new();
    for line in BufReader::new(child.stderr.take().unwrap()).lines() {
        let line = line.unwrap();
        if line.starts_with("[mx] step 1 at ") {
            starved = None;
        }
        stderr.push_str(&line);
        stderr.push('\n');
    }
    drop(starved);
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let code = child.wait().unwrap().code();
    eprintln!("{stderr}{stdout}");
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "[mx] step 1 at x1 (2.0 kpps offered, 2 interval(s)): not judged, tried again: delivered "
        ) && stderr.contains("h2's agent was short of CPU (")
            && (stderr.contains("behind its send schedule")
                || stderr.contains("by its cgroup's CPU quota")),
        "{stderr}"
    );
    let doc: serde_json::Value = serde_json::from_str(&stdout).expect(&stdout);
    let steps = doc["steps"].as_array().unwrap();
    let brief: Vec<(f64, &str, &str)> = steps
        .iter()
        .map(|s| {
            (
                s["scale"].as_f64().unwrap(),
                s["kind"].as_str().unwrap(),
                s["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    // Starved, tried again once the host had its CPU back, and on.
    assert_eq!(
        brief,
        vec![
            (1.0, "climb", "tried_again"),
            (1.0, "again", "held"),
            (2.0, "climb", "held")
        ],
        "{stdout}"
    );
    let short = &steps[0]["short_of_cpu"];
    assert_eq!(short.as_array().unwrap().len(), 1, "{short}");
    assert_eq!(short[0]["host"], "h2");
    // (An agent reads its cgroup's throttling from the cgroup it started
    // in: moved after it started, it shows as lateness.)
    assert!(
        short[0]["throttled_ms"].as_f64().unwrap() > 0.0
            || short[0]["behind_ms"].as_f64().unwrap() >= 20.0,
        "{short}"
    );
    assert!(
        steps[1]["short_of_cpu"].as_array().unwrap().is_empty(),
        "{stdout}"
    );
    // A try again is no limit: every step held.
    assert_eq!(doc["highest_held"]["scale"], 2.0);
    assert!(doc["lowest_failed_scale"].is_null(), "{stdout}");
}

#[test]
fn a_steps_loss_its_hosts_counted_themselves_is_not_the_networks() {
    // Every request into d loses 20% on the way in (5% of the fleet's),
    // while d's agent was held off the CPU: 310 ms behind its schedule.
    // With d's kernel counting those requests dropped at its sockets, the
    // loss is d's; without, it is the network's.
    let step = Step {
        scale: 1.0,
        after: 100,
        until: 108,
    };
    let hosts = ["a", "b", "c", "d"];
    let into_d = |_: &str, dst: &str| if dst == "d" { 0.8 } else { 1.0 };
    let figures = |counted: bool| {
        let sb = Sandbox::new();
        let ticks: Vec<i64> = (100..=109).collect();
        mesh_reports_over(&ticks, &hosts, into_d, into_d, |host, row| {
            row.rate_scale = Some(1.0);
            row.req_drops = Some(if counted && host == "d" { 600 } else { 0 });
            row.rep_drops = Some(0);
            row.behind_ms = Some(if host == "d" { 310.0 } else { 1.0 });
        })
        .write(&sb);
        ramp::step_figures(&sb.file("reports"), &step).unwrap()
    };
    let thresholds = Thresholds::parse(Some("97"), None).unwrap();
    let counted = figures(true);
    assert!(counted.intervals >= 6, "{counted:?}");
    let near = |v: Option<f64>, want: f64| v.is_some_and(|v| (v - want).abs() < 0.01);
    assert!(near(counted.loss_pct, 5.0), "{counted:?}");
    assert!(near(counted.wire_loss_pct, 0.0), "{counted:?}");
    let short: Vec<&str> = counted
        .short_of_cpu
        .iter()
        .map(|h| h.host.as_str())
        .collect();
    assert_eq!(short, ["d"], "{counted:?}");
    assert!(
        matches!(ramp::verdict(&counted, &thresholds, 0), Verdict::Again(_)),
        "{counted:?}"
    );
    // Lost where no host counted it: the network's, judged at once, d's
    // CPU named beside it.
    let uncounted = figures(false);
    assert!(near(uncounted.wire_loss_pct, 5.0), "{uncounted:?}");
    match ramp::verdict(&uncounted, &thresholds, 0) {
        Verdict::Failed(why) => assert_eq!(
            why,
            [
                "delivered 95.00% < 97%",
                "d's agent was short of CPU (sent 100.0% of its rate, up to 310 ms behind its send schedule)",
                // These reports carry no interface counts: the wire and d
                // itself both fit.
                "lost: the wire into d or d's receive path"
            ]
        ),
        other => panic!("{other:?}"),
    }
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

/// A clean local fleet at 200 pps a flow, ramped x1, x1.5, x2 at `--interval
/// 1` with the default thresholds: every step holds (the interval a rate
/// begins in, whose first send a pacer can miss, is not judged), the ramp
/// says how many steps and how long before it starts, and the reports read
/// back judge the same intervals to the same verdicts.
#[test]
fn agent_fleet_ramp_on_a_clean_fleet_holds_from_its_first_step_and_reads_back_the_same() {
    let sb = fleet_dir_with(202, &["h1", "h2", "h3"], &["--pps", "200"]);
    let ramp = [
        "run",
        "--local",
        "hosts",
        "--interval",
        "1",
        "--ramp",
        "1:2",
        "--ramp-step",
        "0.5",
        "--ramp-hold",
        "2",
        "--json",
    ];
    let run = sb.mx(&ramp);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains(
            "[mx] ramp: x1 to x2 in steps of 0.5 (3 steps), 3s a step (an interval of 1s for the rate to settle, then 2 judged): 9s at most;"
        ),
        "{}",
        run.stderr
    );
    let live: serde_json::Value = serde_json::from_str(&run.stdout).expect(&run.stdout);
    let verdicts: Vec<&str> = live["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"].as_str().unwrap())
        .collect();
    // A step this busy machine starved, or whose senders fell a few
    // packets short with none lost, is tried again rather than judged;
    // every step judged holds.
    let judged: Vec<&str> = verdicts
        .iter()
        .copied()
        .filter(|v| *v != "tried_again")
        .collect();
    assert_eq!(judged, ["held"; 3], "{live}");
    assert!(verdicts.len() <= 3 + 2, "{live}");
    assert_eq!(live["cut_short"], false);
    assert_eq!(
        sb.read("reports/ramp.steps").lines().count(),
        1 + verdicts.len()
    );

    let json = sb.mx(&["summarize", "--no-collect", "--window", "0", "--json"]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    let read_back: serde_json::Value = serde_json::from_str(&json.stdout).expect(&json.stdout);
    let brief = |doc: &serde_json::Value| -> Vec<serde_json::Value> {
        doc["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                serde_json::json!([
                    s["scale"],
                    s["kind"],
                    s["after_ts"],
                    s["until_ts"],
                    s["intervals"],
                    s["offered_pps"],
                    s["delivered_pct"],
                    s["verdict"],
                    s["why"]
                ])
            })
            .collect()
    };
    assert_eq!(brief(&read_back), brief(&live), "{read_back}\n{live}");
    let text = sb.mx(&["summarize", "--no-collect", "--window", "0"]);
    assert!(
        text.stdout.starts_with(&format!(
            "mx summarize -- a ramp (mx run --ramp): {} step(s), x1 to x2, each summarized alone (one figure over the run would average their rates into one no step ran), on the intervals the ramp judged",
            verdicts.len()
        )),
        "{}",
        text.stdout
    );
}

/// ctrl-c in a ramp ends it as it ends a run: the flows end, the steps so
/// far are printed, the answer says it was cut short, exit 130.
#[test]
fn agent_fleet_ramp_cut_short_by_ctrl_c_prints_its_steps_and_exits_130() {
    let sb = fleet_dir_with(203, &["h1", "h2"], &["--pps", "200"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_mx"))
        .args([
            "run",
            "--local",
            "hosts",
            "--interval",
            "1",
            "--ramp",
            "1:3",
            "--ramp-hold",
            "2",
        ])
        .current_dir(sb.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run mx");
    let mut stdout = String::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        stdout.push_str(&line);
        stdout.push('\n');
        if line.starts_with("[mx] step 1 at x1 ") {
            let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            assert_eq!(rc, 0);
            break;
        }
    }
    for line in lines {
        stdout.push_str(&line.unwrap());
        stdout.push('\n');
    }
    let code = child.wait().unwrap().code();
    assert_eq!(code, Some(130), "{stdout}");
    assert!(
        stdout.contains("[mx] ctrl-c: the ramp was cut short -- the steps so far follow"),
        "{stdout}"
    );
    assert!(
        stdout.contains("cut short by ctrl-c at x1: every step so far held, the highest x1 ("),
        "{stdout}"
    );
    assert!(!stdout.contains("ramp higher"), "{stdout}");
    assert!(
        agents_under(&sb.file("hosts")).is_empty(),
        "the flows ended: {stdout}"
    );
}

#[test]
fn one_ramp_is_suggested_wherever_mx_suggests_one() {
    let want = format!("mx run --ramp {}", ramp::SUGGESTED_RANGE);
    let sb = Sandbox::new();
    let hints = sb.mx(&["hints"]).stdout;
    let docs = ["README.md", "docs/fleet.md", "docs/compare-ramp-report.md"].map(|doc| {
        std::fs::read_to_string(format!("{}/{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    });
    for (place, text) in [
        ("mx hints", &hints),
        ("README.md", &docs[0]),
        ("docs/fleet.md", &docs[1]),
    ] {
        assert!(
            text.contains(&want),
            "{place} suggests another ramp than {want}"
        );
    }
    // Any other range a page names is an example of the flags, never a
    // suggestion of where to start.
    for text in [&hints, &docs[0], &docs[1]] {
        for at in text.match_indices("--ramp ").map(|(i, _)| i) {
            let range = text[at + 7..].split_whitespace().next().unwrap_or_default();
            if range.contains(':') {
                assert!(
                    range.trim_end_matches('`') == ramp::SUGGESTED_RANGE,
                    "--ramp {range}"
                );
            }
        }
    }
}
