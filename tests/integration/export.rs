//! `mx export` on hand-written reports: the overlay arithmetic, and overlays
//! whose number was not measured are absent, never zero.

use crate::summarize::{Reports, mesh_reports, mesh_reports_with, row};
use crate::util::Sandbox;
use matrix_orchestrator::report::Dir;

/// Samples of a TSV export: (test, target, value, extras).
pub(crate) fn samples(tsv: &str) -> Vec<(String, String, String, String)> {
    tsv.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("!test"))
        .map(|l| {
            let f: Vec<&str> = l.splitn(4, '\t').collect();
            (
                f[0].into(),
                f[1].into(),
                f[2].into(),
                f.get(3).unwrap_or(&"").to_string(),
            )
        })
        .collect()
}

pub(crate) fn value(tsv: &str, test: &str, target: &str) -> Option<String> {
    samples(tsv)
        .into_iter()
        .find(|s| s.0 == test && s.1 == target)
        .map(|s| s.2)
}

fn export(sb: &Sandbox, extra: &[&str]) -> String {
    let mut args = vec!["export", "--no-collect", "--window", "0"];
    args.extend_from_slice(extra);
    let run = sb.mx(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

#[test]
fn overlay_arithmetic_on_a_sick_receiver() {
    let sb = Sandbox::new();
    let into_d = |_: &str, dst: &str| if dst == "d" { 0.8 } else { 1.0 };
    mesh_reports(&["a", "b", "c", "d"], into_d, into_d).write(&sb);
    let out = export(&sb, &["--nic-gbps", "10"]);
    // a: 3 flows x 1000 sent, 2 x 1000 + 800 back.
    assert_eq!(value(&out, "mx_pps", "a").as_deref(), Some("3000"));
    assert_eq!(value(&out, "mx_rep_pps", "a").as_deref(), Some("2800"));
    assert_eq!(value(&out, "mx_loss", "a").as_deref(), Some("6.667"));
    // Forward: d counted 800 of a's 1000; the rest of the loss is none.
    assert_eq!(
        value(&out, "mx_forward_loss", "a").as_deref(),
        Some("6.667")
    );
    assert_eq!(value(&out, "mx_return_loss", "a").as_deref(), Some("0"));
    // d served 3 x 800; egress = its requests + its replies on the wire.
    assert_eq!(value(&out, "mx_served_pps", "d").as_deref(), Some("2400"));
    // (3000 + 2400) x (64 + 66) x 8 bits = 5.616 Mb/s.
    assert_eq!(
        value(&out, "mx_egress_gbps", "d").as_deref(),
        Some("0.005616")
    );
    assert_eq!(value(&out, "mx_line_util", "d").as_deref(), Some("0.05616"));
    assert_eq!(value(&out, "mx_achieved", "a").as_deref(), Some("100"));
    assert_eq!(value(&out, "mx_rel_median", "a").as_deref(), Some("100"));
    assert_eq!(value(&out, "mx_rtt_p99", "a").as_deref(), Some("400"));
    assert_eq!(value(&out, "mx_peers", "a").as_deref(), Some("3"));
    assert_eq!(value(&out, "mx_intervals", "a").as_deref(), Some("3"));
    assert_eq!(value(&out, "mx_state", "a").as_deref(), Some("REPORTING"));
    assert!(out.contains("!test\tmx_egress_gbps\tunit=Gb/s higher=good decimals=2 short=EGR label=\"Egress on the wire\" min=0 max=10\n"), "{out}");
    assert!(out.contains("!test\tmx_rel_median\tunit=% higher=good palette=rdbu min=0 max=200 agg=median decimals=0 short=REL label=\"Packet rate vs fleet median\"\n"));
    assert!(out.starts_with("# mx "), "{out}");
    assert!(out.contains("# NIC line rate 10 Gb/s: mx_line_util included\n"));
}

#[test]
fn overlays_not_measured_are_absent_not_zero() {
    let sb = Sandbox::new();
    let mut r = Reports::default();
    // Unpaced (no target), and b never reports rx rows: nothing about what
    // arrived at b, nor anything b served.
    for ts in [100, 101] {
        r.tx(ts, "a", "b", None, 1000.0, 990.0, 50.0, 100.0);
        r.tx(ts, "b", "a", None, 1000.0, 1000.0, 50.0, 100.0);
        r.rx(ts, "a", "b", 1000.0, 1000.0);
        r.host(ts, "a", 0.0, 1000.0, 990.0, 5.0, 5.0, 5.0, 1);
        let mut h = row(ts, "b", Dir::Host, "*");
        h.pps = Some(1000.0);
        h.rep_pps = Some(1000.0);
        r.push(h);
    }
    r.write(&sb);
    let out = export(&sb, &[]);
    for absent in ["mx_served_pps", "mx_egress_gbps"] {
        assert_eq!(value(&out, absent, "b"), None, "{absent} for b");
        assert!(value(&out, absent, "a").is_some(), "{absent} for a");
    }
    // a's forward leg needs b's rx rows: unknown, so absent.
    assert_eq!(value(&out, "mx_forward_loss", "a"), None);
    assert_eq!(value(&out, "mx_return_loss", "a"), None);
    assert_eq!(value(&out, "mx_forward_loss", "b").as_deref(), Some("0"));
    // Unpaced: no target, no mx_achieved; b's host rows carry no CPU.
    assert!(!out.contains("mx_achieved"));
    assert_eq!(value(&out, "mx_cpu", "b"), None);
    assert_eq!(value(&out, "mx_cpu", "a").as_deref(), Some("5"));
    // A fixed matrix has no coverage overlay.
    assert!(!out.contains("mx_coverage"));
}

#[test]
fn silent_and_never_reporting_hosts_have_a_state() {
    let sb = Sandbox::new();
    sb.write(
        "servers.txt",
        "a=198.18.0.1\nb=198.18.0.2\nc=198.18.0.3\nd=198.18.0.4\n",
    );
    assert_eq!(sb.mx(&["gen"]).code, 0);
    let mut r = Reports::default();
    // c reported only early on; d never did.
    r.tx(10, "c", "a", Some(10000.0), 10000.0, 10000.0, 50.0, 100.0);
    for ts in [200, 201] {
        r.tx(ts, "a", "b", Some(10000.0), 10000.0, 10000.0, 50.0, 100.0);
        r.tx(ts, "b", "a", Some(10000.0), 10000.0, 10000.0, 50.0, 100.0);
    }
    r.write(&sb);
    let run = sb.mx(&["export", "--no-collect", "--window", "30"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.stdout;
    assert_eq!(value(&out, "mx_state", "c").as_deref(), Some("SILENT"));
    assert_eq!(value(&out, "mx_state", "d").as_deref(), Some("NO-DATA"));
    assert!(
        out.contains("# 1 host(s) went quiet before the window: c\n"),
        "{out}"
    );
    assert!(out.contains("# 1 host(s) in the matrix never reported at all: d\n"));
}

#[test]
fn peers_fold_names_json_run_and_no_meta() {
    let sb = Sandbox::new();
    mesh_reports(&["a", "b"], |_, _| 1.0, |_, _| 0.9).write(&sb);
    sb.write("hosts.map", "# exceptions only\na rack1-u01\n");
    let out = export(
        &sb,
        &[
            "--peers",
            "--names",
            "hosts.map",
            "--target-prefix",
            "DH1/",
            "--run",
            "n7",
        ],
    );
    // A fixed matrix folds the per-flow samples into mx_pps (summed by the viewer).
    assert!(out.contains("!test\tmx_pps\tunit=pps higher=good decimals=0 short=PPS label=\"Requests sent\" agg=sum\n"), "{out}");
    assert!(
        out.contains("mx_pps\tDH1/rack1-u01\t1000\tpeer=DH1/b\trun=n7\n"),
        "{out}"
    );
    assert!(
        out.contains("mx_loss\tDH1/b\t10\tpeer=DH1/rack1-u01\trun=n7\n"),
        "{out}"
    );
    let json = export(&sb, &["--json", "--no-meta"]);
    // The header's `#` lines come first, then the samples.
    let first_sample = json.lines().find(|l| !l.starts_with('#')).unwrap();
    let v: serde_json::Value = serde_json::from_str(first_sample).unwrap();
    assert_eq!(v["test"], "mx_pps");
    assert_eq!(v["value"], 1000.0);
    assert!(!json.contains("!test"));
    let run = sb.mx(&["export", "--no-collect", "--run", "two words"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--run 'two words'"), "{}", run.stderr);
    sb.write("bad.map", "a b c\n");
    let run = sb.mx(&["export", "--no-collect", "--names", "bad.map"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: bad.map line 1: want `mxname target`, got 'a b c'\n"
    );
}

#[test]
fn raw_samples_per_interval_and_append() {
    let sb = Sandbox::new();
    mesh_reports(&["a", "b"], |_, _| 1.0, |_, _| 1.0).write(&sb);
    let out = export(&sb, &["--raw"]);
    assert!(out.contains("mx_pps\ta\t1000\tts=100\n"), "{out}");
    assert!(out.contains("mx_pps\ta\t1000\tts=102\n"));
    assert!(out.contains("mx_cpu\tb\t10\tts=101\n"));
    // -o with --append adds to the file.
    assert_eq!(
        sb.mx(&["export", "--no-collect", "--window", "0", "-o", "r.tsv"])
            .code,
        0
    );
    let once = sb.read("r.tsv");
    assert_eq!(
        sb.mx(&[
            "export",
            "--no-collect",
            "--window",
            "0",
            "-o",
            "r.tsv",
            "--append"
        ])
        .code,
        0
    );
    assert_eq!(sb.read("r.tsv"), format!("{once}{once}"));
}

/// Every line of a `--json` export as a JSON object (panics on any that is not).
fn json_lines(out: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    out.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match serde_json::from_str(l) {
            Ok(serde_json::Value::Object(o)) => o,
            other => panic!("not a JSON object: {l:?} ({other:?})"),
        })
        .collect()
}

#[test]
fn json_every_line_past_the_header_parses_and_overlays_are_objects_too() {
    let sb = Sandbox::new();
    sb.write(
        "servers.txt",
        "a=198.18.0.1\nb=198.18.0.2\nc=198.18.0.3\nd=198.18.0.4\n",
    );
    assert_eq!(sb.mx(&["gen"]).code, 0);
    let mut r = Reports::default();
    // c reported only early on; d never did.
    r.tx(10, "c", "a", Some(10000.0), 10000.0, 10000.0, 50.0, 100.0);
    for ts in [200, 201] {
        r.tx(ts, "a", "b", Some(10000.0), 10000.0, 9000.0, 50.0, 100.0);
        r.tx(ts, "b", "a", Some(10000.0), 10000.0, 10000.0, 50.0, 100.0);
        r.rx(ts, "b", "a", 10000.0, 9000.0);
        r.rx(ts, "a", "b", 10000.0, 10000.0);
    }
    r.write(&sb);
    let args = [
        "export",
        "--no-collect",
        "--window",
        "30",
        "--json",
        "--nic-gbps",
        "10",
        "--peers",
        "--run",
        "n7",
    ];
    let run = sb.mx(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = json_lines(&run.stdout);
    // The header: the TSV's `#` lines, first, as the original writes them
    // (scripts that read its NDJSON skip them; an object would be a sample).
    let tsv_args: Vec<&str> = args.iter().copied().filter(|a| *a != "--json").collect();
    let tsv = sb.mx(&tsv_args).stdout;
    let header: Vec<&str> = tsv.lines().take_while(|l| l.starts_with('#')).collect();
    let json_header: Vec<&str> = run
        .stdout
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect();
    assert_eq!(json_header, header, "{}", run.stdout);
    assert!(
        json_header[0].ends_with(&format!(
            "2 host(s), last 30s, {} sample(s)",
            lines.iter().filter(|o| o.contains_key("test")).count()
        )),
        "{}",
        json_header[0]
    );
    assert!(
        json_header
            .iter()
            .any(|l| l.contains("never reported at all: d")),
        "{json_header:?}"
    );
    assert_eq!(
        run.stdout.lines().filter(|l| l.starts_with('#')).count(),
        header.len(),
        "the # lines are the header's alone"
    );
    // The overlays: one object each, with their meta as strings, quotes gone.
    let overlays: Vec<_> = lines.iter().filter(|o| o.contains_key("!test")).collect();
    let loss = overlays
        .iter()
        .find(|o| o["!test"] == "mx_loss")
        .expect("an mx_loss object");
    assert_eq!(loss["unit"], "%");
    assert_eq!(loss["higher"], "bad");
    assert_eq!(loss["decimals"], "2");
    assert_eq!(loss["short"], "LOSS");
    assert_eq!(loss["label"], "Round-trip loss");
    let egress = overlays
        .iter()
        .find(|o| o["!test"] == "mx_egress_gbps")
        .unwrap();
    assert_eq!(egress["max"], "10");
    let mut tests: Vec<&str> = lines
        .iter()
        .filter_map(|o| o.get("test").and_then(|t| t.as_str()))
        .collect();
    tests.sort_unstable();
    tests.dedup();
    assert_eq!(overlays.len(), tests.len(), "one object per overlay");
    // The samples, numbers as numbers, states as text, tags under "meta".
    let state_d = lines
        .iter()
        .find(|o| o.get("test").is_some_and(|t| t == "mx_state") && o["target"] == "d")
        .unwrap();
    assert_eq!(state_d["value"], "NO-DATA");
    let flow = lines
        .iter()
        .find(|o| {
            o.get("test").is_some_and(|t| t == "mx_pps")
                && o["target"] == "a"
                && o.contains_key("meta")
        })
        .unwrap();
    assert_eq!(flow["value"], 10000.0);
    assert_eq!(flow["meta"], serde_json::json!({"peer": "b", "run": "n7"}));
    // Without the overlay objects every line still parses, the header stays.
    let run = sb.mx(&[&args[..], &["--no-meta"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lines = json_lines(&run.stdout);
    assert!(run.stdout.starts_with("# mx "), "{}", run.stdout);
    assert!(lines.iter().all(|o| o.contains_key("test")));
    // The TSV keeps its # lines.
    let run = sb.mx(&args[..args.len() - 6]);
    assert!(run.stdout.starts_with("# mx "), "{}", run.stdout);
}

/// The stderr notes after export's summary line.
fn notes(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .skip_while(|l| !l.contains(" sample(s) over "))
        .skip(1)
        .collect()
}

#[test]
fn export_says_which_host_lost_which_overlay_and_why() {
    let sb = Sandbox::new();
    let mut r = Reports::default();
    for ts in [100, 101] {
        // h1 -> h2, h2 -> h1 h3 h4, h3 -> h1, h4 -> h1.
        for (src, dst) in [
            ("h1", "h2"),
            ("h2", "h1"),
            ("h2", "h3"),
            ("h2", "h4"),
            ("h3", "h1"),
            ("h4", "h1"),
        ] {
            r.tx(ts, src, dst, Some(1000.0), 1000.0, 1000.0, 50.0, 100.0);
        }
        // h1 and h2 count what arrives; h3 and h4 write no rx rows at all.
        for (host, peer) in [("h1", "h2"), ("h1", "h3"), ("h1", "h4"), ("h2", "h1")] {
            r.rx(ts, host, peer, 1000.0, 1000.0);
        }
    }
    r.write(&sb);
    let run = sb.mx(&["export", "--no-collect", "--window", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        notes(&run.stderr),
        [
            "[mx] export: h3 has no mx_served_pps / mx_egress_gbps: its report holds no rx rows in the window (no requests counted arriving from any peer)",
            "[mx] export: h4 has no mx_served_pps / mx_egress_gbps: its report holds no rx rows in the window (no requests counted arriving from any peer)",
            "[mx] export: h2 has no mx_forward_loss / mx_return_loss: the loss split is unknown (2 peers h3, h4 wrote no rx row about it)",
        ],
        "{}",
        run.stderr
    );
    // The notes name the overlays as exported: prefix, and line_util with --nic-gbps.
    let run = sb.mx(&[
        "export",
        "--no-collect",
        "--window",
        "0",
        "--test-prefix",
        "fab_",
        "--nic-gbps",
        "25",
    ]);
    assert!(
        run.stderr.contains(
            "[mx] export: h3 has no fab_served_pps / fab_egress_gbps / fab_line_util: its report"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr
            .contains("h2 has no fab_forward_loss / fab_return_loss:")
    );
    // And they are true: those samples are absent.
    for (test, host) in [("mx_served_pps", "h3"), ("mx_forward_loss", "h2")] {
        assert_eq!(value(&export(&sb, &[]), test, host), None);
    }
    assert!(value(&export(&sb, &[]), "mx_forward_loss", "h1").is_some());
}

#[test]
fn export_notes_the_silent_hosts_and_a_layered_peers_counts_give_the_split() {
    let sb = Sandbox::new();
    sb.write(
        "servers.txt",
        "a=198.18.0.1\nb=198.18.0.2\nc=198.18.0.3\nd=198.18.0.4\n",
    );
    let mut r = Reports::default();
    r.tx(10, "c", "a", Some(1000.0), 1000.0, 1000.0, 50.0, 100.0);
    for ts in [100, 101] {
        let mut tx = row(ts, "a", Dir::Tx, "b");
        tx.pps = Some(1000.0);
        tx.rep_pps = Some(1000.0);
        tx.layer = Some(0);
        r.push(tx);
        r.host(ts, "a", 1000.0, 1000.0, 1000.0, 5.0, 5.0, 5.0, 1);
        // b counts a's requests but writes no host row: its counts alone
        // give a's forward leg (no rate of b's is needed).
        r.rx(ts, "b", "a", 1000.0, 1000.0);
    }
    r.write(&sb);
    let run = sb.mx(&["export", "--no-collect", "--window", "30"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = notes(&run.stderr);
    assert!(seen.contains(&"[mx] export: a has no mx_served_pps / mx_egress_gbps: its report holds no rx rows in the window (no requests counted arriving from any peer)"), "{seen:?}");
    assert!(
        !seen.iter().any(|l| l.contains("a has no mx_forward_loss")),
        "{seen:?}"
    );
    assert_eq!(
        value(&run.stdout, "mx_forward_loss", "a").as_deref(),
        Some("0"),
        "{}",
        run.stdout
    );
    let silent = seen
        .iter()
        .find(|l| l.starts_with("[mx] export: c has only mx_state=SILENT: its last row (ts 10, "))
        .unwrap_or_else(|| panic!("{seen:?}"));
    assert!(silent.ends_with(") is before the window"), "{silent}");
    // With the matrix, a host that never reported is named too.
    assert_eq!(sb.mx(&["gen"]).code, 0);
    let run = sb.mx(&["export", "--no-collect", "--window", "30"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        notes(&run.stderr).contains(
            &"[mx] export: d has only mx_state=NO-DATA: it is in the matrix and never reported"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn export_notes_past_ten_of_a_kind_are_summed_up() {
    let sb = Sandbox::new();
    let servers: String = (1..=14)
        .map(|i| format!("h{i:02}=198.18.0.{i}\n"))
        .collect();
    sb.write("servers.txt", &servers);
    assert_eq!(sb.mx(&["gen"]).code, 0);
    mesh_reports(&["h01", "h02"], |_, _| 1.0, |_, _| 1.0).write(&sb);
    let run = sb.mx(&["export", "--no-collect", "--window", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let seen = notes(&run.stderr);
    assert_eq!(seen.len(), 11, "{seen:?}");
    assert_eq!(
        seen[0],
        "[mx] export: h03 has only mx_state=NO-DATA: it is in the matrix and never reported"
    );
    assert_eq!(
        seen[10],
        "[mx] export: and 2 more host(s) the same way: h13, h14"
    );
}

#[test]
fn text_that_would_break_the_results_line_is_refused_naming_whitespace_or_quote() {
    let sb = Sandbox::new();
    mesh_reports(&["a", "b"], |_, _| 1.0, |_, _| 1.0).write(&sb);
    for flag in ["--test-prefix", "--target-prefix", "--run"] {
        for (text, shown, holds) in [
            ("two words", "two words", "whitespace (a space)"),
            ("tab\there", "tab\\there", "whitespace (a tab)"),
            ("cr\rhere", "cr\\rhere", "whitespace (a carriage return)"),
            ("lf\nhere", "lf\\nhere", "whitespace (a line feed)"),
            ("say\"hi", "say\"hi", "a quote (\")"),
        ] {
            let run = sb.mx(&["export", "--no-collect", flag, text]);
            assert_eq!(run.code, 2, "{flag} {text:?}");
            assert!(
                run.stderr
                    .starts_with(&format!("mx: {flag} '{shown}' holds {holds}, ")),
                "{flag} {text:?}: {}",
                run.stderr
            );
            assert!(run.stderr.ends_with(" -- choose one without\n"));
            assert_eq!(run.stdout, "");
        }
    }
    let run = sb.mx(&["export", "--no-collect", "--test-prefix", "mx 1."]);
    assert_eq!(
        run.stderr,
        "mx: --test-prefix 'mx 1.' holds whitespace (a space), which separates the fields of a results line -- choose one without\n"
    );
    // A --names target can only hold a quote (the file is split on whitespace).
    sb.write("q.map", "# exceptions\na rack\"1\n");
    let run = sb.mx(&["export", "--no-collect", "--names", "q.map"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: q.map line 2: target 'rack\"1' holds a quote (\"), which opens a quoted value in a results line -- choose a target without\n"
    );
    // A host name from a report that no matrix could hold.
    let sb = Sandbox::new();
    mesh_reports(&["a", "x y"], |_, _| 1.0, |_, _| 1.0).write(&sb);
    let run = sb.mx(&["export", "--no-collect", "--window", "0"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr.lines().last().unwrap_or(""),
        "mx: host name 'x y' holds whitespace (a space), which separates the fields of a results line -- no matrix host can be named so: check the reports in reports/"
    );
}

#[test]
fn rtt_overlays_say_whether_they_are_exact_or_a_worst_interval() {
    // Reports with each interval's RTT histogram on the host rows: exact.
    let sb = Sandbox::new();
    let all = |_: &str, _: &str| 1.0;
    mesh_reports_with(&["a", "b"], all, all, |_, row| {
        row.rtt_hist = Some("100000:1000".to_string())
    })
    .write(&sb);
    let out = export(&sb, &[]);
    assert!(
        out.contains("short=P99 label=\"RTT p99 of this host's replies\""),
        "{out}"
    );
    // 100 us, to the histogram's ~1%.
    let p99: f64 = value(&out, "mx_rtt_p99", "a").unwrap().parse().unwrap();
    assert!((p99 - 100.0).abs() < 1.0, "{p99}");
    // Without histograms (the original's reports), the worst flow's worst
    // interval: an upper bound, labelled as one.
    let sb = Sandbox::new();
    mesh_reports(&["a", "b"], all, all).write(&sb);
    let out = export(&sb, &[]);
    assert!(
        out.contains("short=P99 label=\"RTT p99, worst flow's worst interval\""),
        "{out}"
    );
    // Per flow (--peers folds into rtt_p99), always a flow's worst interval.
    let out = export(&sb, &["--peers"]);
    assert!(
        out.contains("label=\"RTT p99, each flow's worst interval\""),
        "{out}"
    );
}
