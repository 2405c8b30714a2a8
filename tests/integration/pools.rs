//! Pools in the matrix file and on the command line: the `# pool` lines
//! survive hand edits, what cannot be a pool is refused in one line naming
//! the file and line, and gen, check and hints speak of pools.

use std::collections::BTreeSet;

use matrix_orchestrator::matrix::Matrix;
use matrix_orchestrator::matrix::schedule::Schedule;

use crate::agents::{Fleet, RowExt, addr, full_rows};
use crate::util::Sandbox;

const TOR1: &str = "a1=10.0.1.1\na2=10.0.1.2\na3=10.0.1.3\n";
const TOR2: &str = "b1=10.0.2.1\nb2=10.0.2.2\nb3=10.0.2.3\n";

fn pools_sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.write("tor1.txt", TOR1);
    sb.write("tor2.txt", TOR2);
    sb
}

fn gen_pools(sb: &Sandbox, extra: &[&str]) -> crate::util::Run {
    let mut args = vec![
        "gen",
        "--pool",
        "tor1=tor1.txt",
        "--pool",
        "tor2=tor2.txt",
        "--pps",
        "1000",
    ];
    args.extend_from_slice(extra);
    sb.mx(&args)
}

fn pool_names(m: &Matrix) -> Vec<(String, Vec<String>)> {
    m.pools()
        .pools
        .iter()
        .map(|p| {
            let names = p
                .members
                .iter()
                .map(|&h| m.hosts()[h as usize].name.clone())
                .collect();
            (p.name.clone(), names)
        })
        .collect()
}

#[test]
fn pool_lines_survive_hand_edits() {
    let sb = pools_sandbox();
    let run = gen_pools(&sb, &["--between", "tor1", "tor2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(sb.path().join("matrix.csv")).unwrap();
    assert!(text.contains("# pool tor1: a1 a2 a3\n"), "{text}");
    assert!(text.contains("# between=tor1,tor2 duplex=0"), "{text}");
    // A hand edit: a rate changed, a comment added, host b3's column and row
    // deleted, and the grid rows put in another order.
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("b3="))
        .map(|l| {
            if l.starts_with('#') {
                return l.to_string();
            }
            let cells: Vec<&str> = l.trim_end_matches('\r').split(',').collect();
            cells[..cells.len() - 1].join(",")
        })
        .collect();
    lines.push("# edited by hand".into());
    let a1 = lines.iter().position(|l| l.starts_with("a1=")).unwrap();
    lines[a1] = lines[a1].replacen(",1000", ",777", 1);
    let a3 = lines.iter().position(|l| l.starts_with("a3=")).unwrap();
    lines.swap(a1, a3);
    let edited = lines.join("\n");
    let m = Matrix::parse(edited.as_bytes(), "edited.csv").unwrap();
    assert_eq!(
        pool_names(&m),
        [
            (
                "tor1".to_string(),
                vec!["a1".into(), "a2".into(), "a3".into()]
            ),
            ("tor2".to_string(), vec!["b1".into(), "b2".into()]),
        ]
    );
    assert!(m.pools().between.is_some());
    // The deleted host is left out of its pool, with a warning naming the line.
    assert_eq!(m.warnings().len(), 1, "{:?}", m.warnings());
    assert!(
        m.warnings()[0].starts_with("edited.csv:5: pool tor2 names 'b3', which is not a host"),
        "{:?}",
        m.warnings()
    );
    // And `mx check` still reads the pools.
    sb.write("edited.csv", &edited);
    let run = sb.mx(&["check", "--matrix", "edited.csv"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("  pools: tor1 (3 hosts) -> tor2 (2 hosts), no flow inside a pool"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("    tor1 -> tor2: 6 flows, 5.8 kpps offered"),
        "{}",
        run.stdout
    );
}

#[test]
fn check_names_a_flow_edited_into_a_pool() {
    let sb = pools_sandbox();
    assert_eq!(gen_pools(&sb, &[]).code, 0);
    let text = std::fs::read_to_string(sb.path().join("matrix.csv")).unwrap();
    let edited = text.replace("a1=10.0.1.1,,,", "a1=10.0.1.1,,5,");
    assert_ne!(edited, text);
    sb.write("matrix.csv", &edited);
    let run = sb.mx(&["check"]);
    assert!(
        run.stdout
            .contains("but 1 flow stays inside a pool (edited by hand?): a1 -> a2"),
        "{}",
        run.stdout
    );
}

#[test]
fn what_cannot_be_a_pool_is_refused_naming_the_line() {
    let header = "# tx_size=64 rx_size=64 port=5300\n";
    let grid = "src\\dst,a,b,c\na,,1,1\nb,,,\nc,,,\n";
    for (pools, want) in [
        (
            "# pool x: a b\n# pool y: b c\n",
            "m.csv:3: host 'b' is in pool x (line 2) and in pool y: a host belongs to one pool",
        ),
        (
            "# pool x: a\n# pool x: b\n",
            "m.csv:3: pool 'x' is written twice (first on line 2)",
        ),
        (
            "# pool x: a\n# between=x,z\n",
            "m.csv:3: bad between='x,z' in the config header (want two different pools of the '# pool' lines: x)",
        ),
        (
            "# pool x y: a\n",
            "m.csv:2: bad pool name 'x y' (letters, digits, '_', '-' and '.')",
        ),
        (
            "# pool x: nobody\n",
            "m.csv:2: pool x has no host of the matrix",
        ),
        (
            "# pool x: a\n# pool y: b c\n# between=x,y duplex=2\n",
            "m.csv:4: duplex must be 0 or 1",
        ),
    ] {
        let text = format!("{header}{pools}{grid}");
        let err = Matrix::parse(text.as_bytes(), "m.csv").unwrap_err();
        assert_eq!(err.message(), want, "{text}");
    }
}

#[test]
fn a_layered_pool_matrix_whose_pools_were_edited_is_refused() {
    let sb = Sandbox::new();
    sb.write("tor1.txt", "a1\na2\na3\na4\n");
    sb.write("tor2.txt", "b1\nb2\nb3\nb4\n");
    let run = gen_pools(
        &sb,
        &[
            "--peers", "2", "--seed", "7", "--dwell", "10", "-o", "l.csv",
        ],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(sb.path().join("l.csv")).unwrap();
    // Two receivers moved to the other pool: the layer count no longer fits.
    let edited = text
        .replace("# pool tor1: a1 a2 a3 a4", "# pool tor1: a1 a2 a3 a4 b3 b4")
        .replace("# pool tor2: b1 b2 b3 b4", "# pool tor2: b1 b2");
    let err = Matrix::parse(edited.as_bytes(), "l.csv").unwrap_err();
    assert!(
        err.message()
            .contains("layers=2 but its pools at 2 peers per layer partition into 1 layers"),
        "{}",
        err.message()
    );
    // Pools reordered inside a line: same layer count, other layers, and the
    // agent's check that the grid is layer 0 catches it.
    let edited = text.replace("# pool tor2: b1 b2 b3 b4", "# pool tor2: b2 b1 b3 b4");
    let m = Matrix::parse(edited.as_bytes(), "l.csv").unwrap();
    let err = m.check_layer_zero("l.csv").unwrap_err();
    assert!(
        err.message()
            .contains("the grid does not match its layers header"),
        "{}",
        err.message()
    );
    let m = Matrix::parse(text.as_bytes(), "l.csv").unwrap();
    m.check_layer_zero("l.csv").unwrap();
}

#[test]
fn gen_refuses_pool_flags_that_cannot_work() {
    let sb = pools_sandbox();
    sb.write("tor3.txt", "a2=10.0.3.2\n");
    sb.write("same.txt", "c1=10.0.1.1\n");
    for (args, want) in [
        (
            vec!["--between", "tor1", "tor9"],
            "--between tor9: no such pool (pools: tor1, tor2)",
        ),
        (
            vec!["--peers", "4"],
            "--peers must be between 1 and 3 here: a sender's peers are distinct hosts of the other pool, and tor2 has 3 (got 4)",
        ),
        (
            vec!["--pool", "tor3=tor3.txt", "--between", "tor1", "tor3"],
            "host 'a2' is in pool tor1 (tor1.txt) and in pool tor3 (tor3.txt): a host belongs to one pool",
        ),
        (
            vec!["--pool", "tor3=tor3.txt"],
            "3 pools: say which two to test with --between FROM TO",
        ),
        (
            vec!["--between", "tor1", "tor1", "--duplex"],
            "--duplex needs two pools: inside pool tor1 every host already sends and answers",
        ),
        (
            vec!["--peers", "3", "--dwell", "10"],
            "--peers 3 already covers every cross-pool pair: --dwell has nothing to rotate (drop --dwell, or lower --peers)",
        ),
        (
            vec!["--pool", "tor3=same.txt", "--between", "tor1", "tor3"],
            "hosts 'a1' and 'c1' are both at 10.0.1.1:5300",
        ),
    ] {
        let run = gen_pools(&sb, &args);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stdout);
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
    let run = sb.mx(&["gen", "--between", "a", "b"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("--between and --duplex need pools"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_mesh_inside_one_pool_is_what_gen_draws_today() {
    let sb = pools_sandbox();
    let pooled = gen_pools(&sb, &["--between", "tor1", "tor1", "-o", "inside.csv"]);
    assert_eq!(pooled.code, 0, "{}", pooled.stderr);
    sb.write("servers.txt", TOR1);
    let plain = sb.mx(&["gen", "--pps", "1000", "-o", "plain.csv"]);
    assert_eq!(plain.code, 0);
    let inside = std::fs::read_to_string(sb.path().join("inside.csv")).unwrap();
    let plain = std::fs::read_to_string(sb.path().join("plain.csv")).unwrap();
    // The same file, plus the line that records the pool.
    assert_eq!(inside.replace("# pool tor1: a1 a2 a3\n", ""), plain);
    assert!(
        pooled
            .stdout
            .contains("  pool     : the mesh inside pool tor1")
    );
}

#[test]
fn hints_size_a_pool_to_pool_run() {
    let sb = pools_sandbox();
    let run = sb.mx(&[
        "hints",
        "--pool",
        "tor1=tor1.txt",
        "--pool",
        "tor2=tor2.txt",
        "--peers",
        "2",
        "--pps-per-pair",
        "10000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for want in [
        "to get that across 6 hosts (6 flows):",
        "  per sender      20.0 kpps of requests out (2 peers), the replies back",
        "  per receiver    up to 20.0 kpps of requests in (2 senders), as many replies out",
        "  fleet total     60.0 kpps requests + 60.0 kpps replies",
        "  mx gen --pool tor1=tor1.txt --pool tor2=tor2.txt --peers 2 --pps 10000",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
}

/// Pool lists of `a` and `b` hosts on loopback net `net` (a1.. then b1..).
fn loopback_pools(sb: &Sandbox, net: u8, a: u8, b: u8) {
    let list = |prefix: &str, from: u8, n: u8| -> String {
        (0..n)
            .map(|i| format!("{prefix}{}={}\n", i + 1, addr(net, from + i)))
            .collect()
    };
    sb.write("tor1.txt", &list("a", 1, a));
    sb.write("tor2.txt", &list("b", 1 + a, b));
}

#[test]
fn agents_rotate_through_the_pool_layers_and_never_inside_a_pool() {
    let net = 120;
    let sb = Sandbox::new();
    loopback_pools(&sb, net, 2, 3);
    // Duplex, one peer a layer: tor1's senders need 3 layers, tor2's 2
    // (they sit the third out).
    let run = sb.mx(&[
        "gen",
        "--pool",
        "tor1=tor1.txt",
        "--pool",
        "tor2=tor2.txt",
        "--duplex",
        "--peers",
        "1",
        "--seed",
        "9",
        "--dwell",
        "1",
        "--pps",
        "500",
        "-o",
        "-",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let matrix = Matrix::parse(run.stdout.as_bytes(), "pools.csv").unwrap();
    let schedule = Schedule::new(&matrix);
    assert_eq!(schedule.layer_count(), 3);
    let names = ["a1", "a2", "b1", "b2", "b3"];
    let mut fleet = Fleet::new(&run.stdout);
    for h in names {
        fleet.start(
            h,
            &["--interval", "1", "--duration", "7.6", "--workers", "1"],
        );
    }
    fleet.wait_ok();
    let mut pairs = BTreeSet::new();
    for name in names {
        let src = matrix.index_of(name).unwrap();
        for r in full_rows(&fleet.report(name), "tx", None) {
            let layer = r.f("layer").expect("tx rows carry their layer") as usize;
            let peer = matrix.index_of(r.s("peer")).unwrap();
            let want: Vec<u32> = schedule
                .flows_in_layer(src, layer)
                .iter()
                .map(|c| c.dst)
                .collect();
            assert_eq!(want, [peer], "{name} row {r:?} is in the wrong layer");
            assert_eq!(r.f("rep_pkts"), r.f("pkts"), "{name} {r:?}");
            pairs.insert((name.as_bytes()[0], src, peer));
        }
    }
    // Every cross-pool pair, both ways, and none inside a pool.
    assert_eq!(pairs.len(), 2 * 3 * 2, "{pairs:?}");
    for (_, src, dst) in &pairs {
        let pool = |h: u32| matrix.hosts()[h as usize].name.as_bytes()[0];
        assert_ne!(pool(*src), pool(*dst), "{src} -> {dst} inside a pool");
    }
    // The summary counts coverage over the cross-pool pairs, not all 20
    // ordered pairs of 5 hosts (which would call the run incomplete).
    fleet.collect_reports(&names);
    let summary = fleet
        .sandbox
        .mx(&["summarize", "--no-collect", "--matrix", "matrix.csv"]);
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    assert!(
        summary
            .stdout
            .contains("  COVERAGE  12 of 12 cross-pool pairs measured so far (100.0%)"),
        "{}",
        summary.stdout
    );
    for direction in ["POOL tor1 -> tor2 and back", "POOL tor2 -> tor1 and back"] {
        assert!(summary.stdout.contains(direction), "{}", summary.stdout);
    }
}

#[test]
fn summarize_has_pool_lines_and_grids_ordered_by_pool() {
    let net = 121;
    let sb = Sandbox::new();
    loopback_pools(&sb, net, 2, 2);
    let run = sb.mx(&[
        "gen",
        "--pool",
        "tor1=tor1.txt",
        "--pool",
        "tor2=tor2.txt",
        "--pps",
        "1000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    // The pool lines put in the other order by hand: the grid follows the
    // pools (tor2's hosts first), not the matrix's columns (a1 a2 b1 b2).
    let text = sb.read("matrix.csv");
    let (tor1, tor2) = ("# pool tor1: a1 a2\n", "# pool tor2: b1 b2\n");
    let swapped = text.replace(&format!("{tor1}{tor2}"), &format!("{tor2}{tor1}"));
    assert_ne!(swapped, text);
    sb.write("matrix.csv", &swapped);
    let run = sb.mx(&["run", "--local", "hosts", "--for", "4", "--interval", "1"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    for want in [
        "  POOL tor1 -> tor2 and back: 4 flows, 2 hosts sending to 2 hosts answering\n",
        "\n    REQUESTS  ",
        "100.00% of what was sent reached tor2\n",
        "    LOSS              0.00%   round trip (0.00% on the way to tor2, 0.00% on the way back)\n",
        "(exact, from the tor1 hosts' histograms)\n",
        // The direction's own spread, over its 4 flows, indented under it.
        "\n    SPREAD    across 4 flows ",
    ] {
        assert!(run.stdout.contains(want), "{want}\n{}", run.stdout);
    }
    // Four flows paced alike on an idle loopback share evenly.
    let jain: f64 = run
        .stdout
        .lines()
        .find(|l| l.starts_with("      requests delivered"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|j| j.parse().ok())
        .expect("the pool's delivered spread");
    assert!(jain > 0.99, "{}", run.stdout);
    assert!(
        !run.stdout.contains("POOL tor2 -> tor1"),
        "simplex: one direction"
    );
    // The direction's figures as data: what tor1 sent all reached tor2 and
    // came back (counts of one run, not a rate's rendering).
    let json = sb.mx(&["summarize", "--local", "hosts", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let pool = &doc["pools"][0];
    assert_eq!(
        (pool["from"].as_str(), pool["to"].as_str()),
        (Some("tor1"), Some("tor2"))
    );
    assert_eq!(pool["flows"], 4, "{pool}");
    let figures = &pool["figures"];
    assert!(figures["requests_pps"].as_f64().unwrap() > 0.0, "{pool}");
    assert_eq!(figures["delivered_pps"], figures["requests_pps"], "{pool}");
    assert_eq!(figures["replies_pps"], figures["requests_pps"], "{pool}");
    assert_eq!(figures["loss_pct"], 0.0, "{pool}");
    let grid = sb.mx(&["summarize", "--local", "hosts", "--grid", "g"]);
    assert_eq!(grid.code, 0, "{}", grid.stderr);
    let loss = sb.read("g/loss_grid.csv");
    let lines: Vec<&str> = loss.lines().collect();
    let order = ["b1", "b2", "a1", "a2"];
    assert_eq!(
        lines[0].split(',').skip(1).collect::<Vec<_>>(),
        order,
        "{loss}"
    );
    for (row, name) in lines[1..].iter().zip(order) {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[0], name);
        // a -> b measured; a -> a, b -> anything blank (no flow, never 0).
        let want_measured = [true, true, false, false].map(|to_b| to_b && name.starts_with('a'));
        for (cell, measured) in cells[1..].iter().zip(want_measured) {
            assert_eq!(!cell.is_empty(), measured, "{name}: {row}\n{loss}");
        }
    }
    assert_eq!(sb.mx(&["stop", "--local", "hosts"]).code, 0);
    assert_eq!(sb.mx(&["clean", "--local", "hosts", "-y"]).code, 0);
}
