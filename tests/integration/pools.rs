//! Pools in the matrix file and on the command line: the `# pool` lines
//! survive hand edits, what cannot be a pool is refused in one line naming
//! the file and line, and gen, check and hints speak of pools.

use matrix_orchestrator::matrix::Matrix;

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
