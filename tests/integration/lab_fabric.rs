//! The leaf-spine fabric lab (tests/lab/fabric.sh): hosts behind two leaves,
//! two spines, ECMP on the 5-tuple, the fleet driven over ssh on a
//! management network while its traffic crosses the fabric. A fault on one
//! directed link shows where it is: on the legs whose packets cross it, and
//! nowhere else; and the summary reads it as some paths' loss, not a host's.

use crate::lab::Lab;
use crate::util::{findings_of, steady_intervals, wait_for, wait_for_steady};
use serde_json::Value;
use std::time::Duration;

/// h1 and h2 behind l1, h3 and h4 behind l2.
fn leaf(host: &str) -> u8 {
    if matches!(host, "h1" | "h2") { 1 } else { 2 }
}

/// The summary of the last `window` seconds, as `--json` gives it.
fn summary(lab: &Lab, sb: &crate::util::Sandbox, window: &str) -> Value {
    let summary = lab.mx(sb, &["summarize", "--window", window, "--json"]);
    assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
    serde_json::from_str(&summary.stdout).unwrap()
}

/// Each flow's (src, dst, forward loss %, return loss %) in a summary.
fn legs(doc: &Value) -> Vec<(String, String, f64, f64)> {
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 12, "{doc}");
    flows
        .iter()
        .map(|f| {
            let pct = |key: &str| {
                f[key]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{key} measured: {f}"))
            };
            (
                f["src"].as_str().unwrap().to_string(),
                f["dst"].as_str().unwrap().to_string(),
                pct("forward_loss_pct"),
                pct("return_loss_pct"),
            )
        })
        .collect()
}

#[test]
#[ignore = "needs root: a fabric of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_fabric_a_drop_on_one_spine_link_is_loss_only_on_the_legs_that_cross_it() {
    let lab = Lab::fabric(135, 2);
    let sb = lab.controller("1000");
    // 16 source ports a pair: each pair's streams hash over both spines.
    let start = lab.mx(
        &sb,
        &["start", "--interval", "1", "--no-gso", "--streams", "16"],
    );
    assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
    let reports = lab.reports();
    wait_for_steady(&reports, 3);
    let clean = summary(&lab, &sb, "2");
    for (src, dst, fwd, ret) in legs(&clean) {
        assert_eq!((fwd, ret), (0.0, 0.0), "{src} -> {dst}: a clean fabric");
    }
    // A clean fabric: no loss found, nothing blamed.
    assert_eq!(findings_of(&clean, "loss"), Vec::<&Value>::new(), "{clean}");

    // 20% of what spine 2 receives from leaf 1: requests from l1's hosts to
    // l2's, and l1's replies to l2's requests, on the streams that hash to
    // s2 (about half); nothing inside a leaf, nothing from l2 to l1.
    lab.fabric_drop("s2", "s2-l1", "in", 20.0);
    let before: Vec<usize> = reports.iter().map(|p| steady_intervals(p)).collect();
    wait_for(
        "five steady intervals since the fault",
        Duration::from_secs(30),
        || {
            let now: Vec<usize> = reports.iter().map(|p| steady_intervals(p)).collect();
            if now.iter().zip(&before).all(|(n, b)| *n >= b + 5) {
                Ok(())
            } else {
                Err(format!("{now:?}, from {before:?}"))
            }
        },
    );
    // One summary read for both checks: a second, collected a moment
    // later, ends on another interval.
    let doc = summary(&lab, &sb, "4");
    for (src, dst, fwd, ret) in legs(&doc) {
        let (from, to) = (leaf(&src), leaf(&dst));
        let what = format!("{src} (l{from}) -> {dst} (l{to}): forward {fwd}%, return {ret}%");
        eprintln!("{what}");
        match (from, to) {
            // Requests l1 -> l2 cross s2-l1 in; their replies do not.
            (1, 2) => assert!(fwd > 1.0 && fwd < 20.0 && ret == 0.0, "{what}"),
            // Replies l1 -> l2 cross it; the requests do not.
            (2, 1) => assert!(fwd == 0.0 && ret > 1.0 && ret < 20.0, "{what}"),
            // Inside a leaf: no spine at all.
            _ => assert_eq!((fwd, ret), (0.0, 0.0), "{what}"),
        }
    }
    // The summary reads it as some paths' loss, on both legs, every one
    // from a host of l1 to a host of l2 (the way the link carries), with
    // the ports of the streams that take s2; no host is blamed.
    let loss = findings_of(&doc, "loss");
    let texts: Vec<&str> = loss.iter().map(|f| f["text"].as_str().unwrap()).collect();
    eprintln!("{texts:#?}");
    assert_eq!(loss.len(), 2, "{texts:#?}");
    for (f, leg) in loss.iter().zip(["requests", "replies"]) {
        let text = f["text"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("{leg} lost on some paths alone: ")),
            "{text}"
        );
        for b in f["blames"].as_array().unwrap() {
            let (from, to) = (b["host"].as_str().unwrap(), b["peer"].as_str().unwrap());
            assert_eq!(b["where"], "path", "{f}");
            assert_eq!((leaf(from), leaf(to)), (1, 2), "{f}");
        }
        let flows = f["detail"]["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 4, "every pair from l1 to l2: {f}");
        for flow in flows {
            let lossy = flow["lossy_ports"].as_array().unwrap().len();
            assert!((1..16).contains(&lossy), "{flow}");
        }
    }
    lab.fabric_heal();
    lab.stop_and_clean(&sb);
}

/// Runs `f` in a thread inside network namespace `ns`: what it opens is
/// that namespace's (a socket of a lab host).
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let file = std::fs::File::open(format!("/run/netns/{ns}")).unwrap();
                nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                f()
            })
            .join()
            .unwrap()
    })
}

#[test]
#[ignore = "needs root: a fabric of network namespaces (CI runs it: --run-ignored all)"]
fn lab_fabric_a_trace_of_one_tuple_names_its_links_and_keeps_its_path() {
    use mx_udp::trace::{Hop, trace};
    use std::net::{Ipv4Addr, SocketAddrV4};
    // Taken down when it goes out of scope, at the end.
    let _fabric = Lab::fabric(136, 2);
    let at = |last: u8| Ipv4Addr::new(198, 18, 136, last);
    let h3 = SocketAddrV4::new(at(65), 5300);
    let path = |port: u16| {
        in_netns("mx136h1", || {
            let from = SocketAddrV4::new(at(1), port);
            trace(from, h3, 8, Duration::from_secs(2), b"mx probe").unwrap()
        })
    };
    // Each link answers from the interface the probe came in by: l1's
    // hosts' bridge, then the spine's side of l1's uplink, then l2's side
    // of that spine's link to it; then h3's Port Unreachable.
    let via = |spine_side: u8, leaf_side: u8| {
        [
            Hop::Router(at(62)),
            Hop::Router(at(spine_side)),
            Hop::Router(at(leaf_side)),
            Hop::Reached {
                from: at(65),
                icmp: (3, 3),
            },
        ]
    };
    let (via_s1, via_s2) = (via(129, 132), via(131, 134));
    let mut spines = std::collections::BTreeSet::new();
    for port in 41000..41016u16 {
        let first = path(port);
        assert!(first == via_s1 || first == via_s2, "port {port}: {first:?}");
        // The same tuple, the same path: as a switch hashes it.
        assert_eq!(path(port), first, "port {port} again");
        spines.insert(first == via_s1);
    }
    assert_eq!(spines.len(), 2, "16 source ports hash over both spines");
}

/// 10% of what spine 2 receives from leaf 1, run as a user runs it: `mx
/// run` finds the loss on some paths alone, sweeps those streams' paths
/// both ways once the agents have ended, and the summary names the link
/// l1 -> s2 (by the address of s2's port on it), the probes telling it
/// from s2 -> l2, which the same streams cross; no host is blamed.
#[test]
#[ignore = "needs root: a fabric of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_fabric_a_run_traces_its_lossy_streams_and_names_the_link() {
    use matrix_orchestrator::report::paths::{self, HopKind, Leg};
    let lab = Lab::fabric(137, 2);
    let sb = lab.controller("1000");
    lab.fabric_drop("s2", "s2-l1", "in", 10.0);
    let run = lab.mx(
        &sb,
        &[
            "run",
            "--for",
            "10",
            "--interval",
            "1",
            "--no-gso",
            "--streams",
            "16",
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // The flows from l1 to l2 lose requests, those from l2 to l1 replies:
    // 8 flows of 16 streams, each swept both ways.
    assert!(
        run.stderr.contains(
            "[mx] trace: 128 streams, both ways: 256 sweeps from 4 hosts, 10 probes a TTL, at most 30s a host each way"
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("[mx] trace: 256 of 256 legs swept"),
        "{}",
        run.stderr
    );
    let at = |last: u8| format!("198.18.137.{last}");
    let traced = paths::read(&sb.file("reports").join(paths::FILE))
        .unwrap()
        .expect("paths.trace beside the reports");
    assert_eq!(traced.paths.len(), 256);
    for p in &traced.paths {
        let hops = p.hops.as_ref().unwrap();
        let kinds: Vec<&HopKind> = hops.iter().map(|h| &h.kind).collect();
        // Out of the leaf the leg leaves by, over a spine, into the other
        // leaf, then the host (its agent gone: its port unreachable).
        let (first, spines) = if leaf(&p.from) == 1 {
            (at(62), [at(129), at(131)])
        } else {
            (at(126), [at(133), at(135)])
        };
        assert_eq!(kinds.len(), 4, "{p:?}");
        assert_eq!(kinds[0], &HopKind::Router(first), "{p:?}");
        assert!(
            spines
                .iter()
                .any(|s| kinds[1] == &HopKind::Router(s.clone())),
            "{p:?}"
        );
        assert!(matches!(kinds[3], HopKind::Reached(_)), "{p:?}");
        let leg_lossy = (leaf(&p.from), p.leg) == (1, Leg::Requests)
            || (leaf(&p.from), p.leg) == (1, Leg::Replies);
        assert!(leg_lossy || leaf(&p.from) == 2, "{p:?}");
    }
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let loss = findings_of(&doc, "loss");
    let texts: Vec<&str> = loss.iter().map(|f| f["text"].as_str().unwrap()).collect();
    eprintln!("{texts:#?}");
    let on_links: Vec<&&Value> = loss
        .iter()
        .filter(|f| f["blames"][0]["where"] == "link")
        .collect();
    assert_eq!(on_links.len(), 1, "{texts:#?}");
    let link = on_links[0];
    let blames = link["blames"].as_array().unwrap();
    assert_eq!(blames.len(), 1, "{link}");
    assert_eq!(
        (blames[0]["host"].as_str(), blames[0]["peer"].as_str()),
        (Some(at(62).as_str()), Some(at(131).as_str())),
        "l1 -> s2: {link}"
    );
    let text = link["text"].as_str().unwrap();
    assert!(
        text.starts_with(&format!(
            "loss on one link of the fabric: {} -> {}. The ",
            at(62),
            at(131)
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("cross it and {} -> {} alike", at(131), at(134))),
        "{text}"
    );
    assert!(text.contains("the probes tell them apart: "), "{text}");
    // Every loss finding names a path or the link, never a host's place.
    for f in &loss {
        for b in f["blames"].as_array().unwrap() {
            assert!(b["where"] == "path" || b["where"] == "link", "{f}");
        }
    }
    // The page draws the traced paths, the named link in red.
    let report = lab.mx(&sb, &["report", "--no-collect", "--output", "report.html"]);
    assert_eq!(report.code, 0, "{}{}", report.stdout, report.stderr);
    let page = sb.read("report.html");
    assert!(page.contains("<h2>Traced paths</h2>"), "no paths section");
    let named = format!(
        "<title>{} -&gt; {}: the link the loss sits on (",
        at(62),
        at(131)
    );
    assert_eq!(page.matches(&named).count(), 1, "the named link, once");
    assert_eq!(page.matches("class=\"named-link\"").count(), 1);
    assert!(
        page.contains(&format!("{} -&gt; {} · link", at(62), at(131))),
        "its chip"
    );
    lab.fabric_heal();
    let clean = lab.mx(&sb, &["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
}

/// Both of leaf 1's uplinks drop 10% of what they carry to the spines:
/// every leg from l1's hosts to l2's loses (requests of the flows that
/// way, replies of those the other), none inside a leaf. With the leaves
/// as the matrix's pools, the summary says it once, between pool l1 and
/// pool l2, and blames no host.
#[test]
#[ignore = "needs root: a fabric of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_fabric_loss_between_two_racks_is_between_their_pools() {
    let lab = Lab::fabric(138, 2);
    let sb = lab.controller("1000");
    // The leaves as pools: comment lines of the matrix, above its grid.
    let matrix = sb.read("matrix.csv");
    let grid_at = matrix.find("src\\dst").expect("the grid's header");
    sb.write(
        "matrix.csv",
        &format!(
            "{}# pool l1: h1 h2\n# pool l2: h3 h4\n{}",
            &matrix[..grid_at],
            &matrix[grid_at..]
        ),
    );
    lab.fabric_drop("l1", "l1-s1", "out", 10.0);
    lab.fabric_drop("l1", "l1-s2", "out", 10.0);
    let run = lab.mx(
        &sb,
        &["run", "--for", "8", "--interval", "1", "--no-gso", "--json"],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let loss = findings_of(&doc, "loss");
    let texts: Vec<&str> = loss.iter().map(|f| f["text"].as_str().unwrap()).collect();
    eprintln!("{texts:#?}");
    assert_eq!(loss.len(), 1, "{texts:#?}");
    let blames = loss[0]["blames"].as_array().unwrap();
    assert_eq!(blames.len(), 1, "{texts:#?}");
    assert_eq!(
        (
            blames[0]["host"].as_str(),
            blames[0]["direction"].as_str(),
            blames[0]["peer"].as_str(),
            blames[0]["where"].as_str()
        ),
        (
            Some("l1"),
            Some("between"),
            Some("l2"),
            Some("between pools")
        )
    );
    let text = texts[0];
    assert!(
        text.starts_with(
            "loss between pool l1 and pool l2 alone: what crosses from l1 to l2 loses "
        ),
        "{text}"
    );
    // 4 flows each way across, two legs each: the 8 legs from l1 to l2
    // all lose, none of the 8 back; the 8 legs inside the leaves (4 flows)
    // are spared.
    assert!(text.contains("(8 of its 8 legs, "), "{text}");
    assert!(
        text.contains(", from l2 to l1 none; the 8 legs inside the pools"),
        "{text}"
    );
    let detail = &loss[0]["detail"]["ways"][0];
    let pct = detail["lost_pct"].as_f64().unwrap();
    assert!((6.0..14.0).contains(&pct), "10% dropped: {detail}");
    lab.fabric_heal();
    let clean = lab.mx(&sb, &["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
}

/// The same fault on one spine link, with one stream a flow (the
/// default): each flow hashes to one spine, so the flows that take s2 lose
/// (which ones is the fabric's draw of their ports), each read as its
/// pair's loss on the path between; with one stream a flow that is as far
/// as the counts can tell, and the finding says so and suggests --streams.
/// No path or link is named: there are no two streams of a flow to compare.
#[test]
#[ignore = "needs root: a fabric of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_fabric_one_stream_a_flow_says_how_far_it_can_tell_and_suggests_streams() {
    let lab = Lab::fabric(139, 2);
    let sb = lab.controller("1000");
    lab.fabric_drop("s2", "s2-l1", "in", 20.0);
    // Each of the 8 legs that can cross s2's port from l1 takes it by a
    // draw of its ports, one in two: none does once in 256 runs, and then
    // a second run draws again.
    let mut doc = Value::Null;
    for _ in 0..2 {
        let run = lab.mx(
            &sb,
            &["run", "--for", "8", "--interval", "1", "--no-gso", "--json"],
        );
        assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("[mx] trace:"), "{}", run.stderr);
        doc = serde_json::from_str(&run.stdout).unwrap();
        if !findings_of(&doc, "loss").is_empty() {
            break;
        }
    }
    let loss = findings_of(&doc, "loss");
    let texts: Vec<&str> = loss.iter().map(|f| f["text"].as_str().unwrap()).collect();
    eprintln!("{texts:#?}");
    assert!(!loss.is_empty(), "{doc}");
    for f in &loss {
        let text = f["text"].as_str().unwrap();
        assert!(text.starts_with("between h"), "{text}");
        assert!(
            text.contains(
                "Its flows ran one stream each, so a fabric's equal-cost paths between them cannot be told apart: --streams 8 sends each flow from 8 ports over up to 8 paths, and tells the one that loses"
            ),
            "{text}"
        );
        for b in f["blames"].as_array().unwrap() {
            let (a, z) = (b["host"].as_str().unwrap(), b["peer"].as_str().unwrap());
            assert_ne!(leaf(a), leaf(z), "a pair across the spines: {f}");
            assert_ne!(b["where"], "link", "{f}");
            assert_ne!(b["where"], "path", "{f}");
        }
    }
    lab.fabric_heal();
    let clean = lab.mx(&sb, &["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
}

/// A route that changes mid-run: the leaves joined by a link of their own
/// (more specific routes than the spines'), cut in the middle of a run.
/// Every way between the leaves crossed 2 routers (l1, l2), then 3 (a
/// spine between): the receivers' rows read it from the TTL of what
/// arrived, the summary names the route change of each of those 8 ways
/// and of no other, and a trace after the run finds them over a spine.
#[test]
#[ignore = "needs root: a fabric of network namespaces with sshd (CI runs it: --run-ignored all)"]
fn agent_fabric_a_link_cut_mid_run_is_a_route_change_of_the_ways_that_crossed_it() {
    use crate::agents::{RowExt, rows_of};
    use matrix_orchestrator::report::paths::{self, HopKind};
    let lab = Lab::fabric(140, 2);
    let sb = lab.controller("1000");
    lab.fabric_shortcut(true);
    let run = std::thread::scope(|s| {
        let running = s.spawn(|| {
            lab.mx(
                &sb,
                &[
                    "run",
                    "--for",
                    "12",
                    "--interval",
                    "1",
                    "--no-trace",
                    "--json",
                ],
            )
        });
        // Three whole intervals over the shortcut, then the cut: the run
        // has about eight more.
        wait_for_steady(&lab.reports(), 3);
        lab.fabric_shortcut(false);
        running.join().expect("mx run")
    });
    assert!(run.code <= 1, "{}{}", run.stdout, run.stderr);
    // Each receiver's rows: h1's replies from h3 (tx) and requests from h3
    // (rx) crossed 2 routers in the first whole intervals, 3 in the last;
    // h2's from h1, on its own leaf, none throughout.
    let rows = rows_of(&sb.read("reports/h1.csv"));
    for dir in ["tx", "rx"] {
        let hops: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.s("dir") == dir && r.s("peer") == "h3")
            .filter_map(|r| Some((r.f("hops")?, r.f("hops_max")?)))
            .collect();
        assert!(hops.len() >= 8, "h1's {dir} rows from h3: {hops:?}");
        assert_eq!(hops[1], (2.0, 2.0), "{dir} before the cut: {hops:?}");
        assert_eq!(hops[hops.len() - 2], (3.0, 3.0), "{dir} after: {hops:?}");
    }
    let rows = rows_of(&sb.read("reports/h2.csv"));
    let same_leaf: Vec<f64> = rows
        .iter()
        .filter(|r| r.s("dir") != "host" && r.s("peer") == "h1")
        .filter_map(|r| r.f("hops_max"))
        .collect();
    assert!(
        !same_leaf.is_empty() && same_leaf.iter().all(|&h| h == 0.0),
        "{same_leaf:?}"
    );
    // The summary: the route changes of the 8 ways between the leaves,
    // from 2 routers to 3, and no other way's.
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", run.stdout, run.stderr));
    let routes = findings_of(&doc, "route");
    let texts: Vec<&str> = routes.iter().map(|f| f["text"].as_str().unwrap()).collect();
    eprintln!("{texts:#?}");
    let mut ways: Vec<(String, String)> = Vec::new();
    for f in &routes {
        let hops = f["detail"]["hops"].as_array().unwrap();
        let (first, last) = (&hops[0], &hops[hops.len() - 1]);
        assert_eq!(
            (first["fewest"].as_u64(), first["most"].as_u64()),
            (Some(2), Some(2)),
            "{f}"
        );
        assert_eq!(
            (last["fewest"].as_u64(), last["most"].as_u64()),
            (Some(3), Some(3)),
            "{f}"
        );
        for b in f["blames"].as_array().unwrap() {
            assert_eq!(b["where"], "route", "{f}");
            ways.push((
                b["host"].as_str().unwrap().into(),
                b["peer"].as_str().unwrap().into(),
            ));
        }
        assert!(
            f["text"]
                .as_str()
                .unwrap()
                .contains(" (by the TTL they arrived with). "),
            "{f}"
        );
    }
    ways.sort();
    let mut between: Vec<(String, String)> = Vec::new();
    for a in ["h1", "h2", "h3", "h4"] {
        for b in ["h1", "h2", "h3", "h4"] {
            if a != b && leaf(a) != leaf(b) {
                between.push((a.into(), b.into()));
            }
        }
    }
    assert_eq!(ways, between, "{texts:#?}");
    // The paths now: every way between the leaves over a spine.
    let trace = lab.mx(&sb, &["trace", "--all", "--no-collect"]);
    assert_eq!(trace.code, 0, "{}{}", trace.stdout, trace.stderr);
    let traced = paths::read(&sb.file("reports").join(paths::FILE))
        .unwrap()
        .expect("paths.trace beside the reports");
    let at = |last: u8| HopKind::Router(format!("198.18.140.{last}"));
    let mut crossing = 0;
    for p in &traced.paths {
        let Some(to) = Some(p.to.as_str()).filter(|to| leaf(to) != leaf(&p.from)) else {
            continue;
        };
        crossing += 1;
        let hops = p.hops.as_ref().unwrap();
        let spines = if leaf(&p.from) == 1 {
            [at(129), at(131)]
        } else {
            [at(133), at(135)]
        };
        assert_eq!(hops.len(), 4, "{} -> {to}: {p:?}", p.from);
        assert!(spines.contains(&hops[1].kind), "over a spine: {p:?}");
    }
    assert_eq!(
        crossing, 16,
        "8 ways between the leaves, each flow's two legs"
    );
    let clean = lab.mx(&sb, &["clean", "--yes"]);
    assert_eq!(clean.code, 0, "{}", clean.stdout);
}
