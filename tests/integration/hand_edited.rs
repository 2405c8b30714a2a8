//! Matrices edited by hand load: comments anywhere, extra whitespace, CRLF line
//! ends, quoted fields, a cell changed. A row repeated is refused; a value the
//! reader ignores (on the diagonal, past the last host) is a warning.

use matrix_orchestrator::matrix::{Matrix, Rate};

use crate::util::Sandbox;

fn rates(m: &Matrix, src: &str) -> Vec<(String, Option<f64>)> {
    let src = m.index_of(src).unwrap();
    m.row(src)
        .iter()
        .map(|c| (m.hosts()[c.dst as usize].name.clone(), c.rate.pps()))
        .collect()
}

#[test]
fn a_hand_edited_file_loads() {
    let text = "\r\n\
        # mx matrix v1 -- rows send, columns receive, cells are packets/sec\r\n\
        #   tx_size=128    rx_size=8192 port=5300\r\n\
        \r\n\
        src\\dst , web=10.0.0.1 ,\"db=10.0.0.2:5400\", 10.0.0.3\r\n\
          # a comment between rows, indented\r\n\
        web,  , 20000 ,  MAX \r\n\
        db=10.0.0.2, 150.5,,0\r\n\
        ## port=5301 set late still counts: later keys win\r\n\
        10.0.0.3,1e3,,\r\n\
        \r\n";
    let m = Matrix::parse(text.as_bytes(), "edited.csv").unwrap();
    assert_eq!(m.config.tx_size, 128);
    assert_eq!(m.config.rx_size, 8192);
    assert_eq!(m.config.port, 5301);
    let hosts: Vec<(&str, &str, u16)> = m
        .hosts()
        .iter()
        .map(|h| (h.name.as_str(), h.addr.as_str(), h.port))
        .collect();
    assert_eq!(
        hosts,
        [
            ("web", "10.0.0.1", 5301),
            ("db", "10.0.0.2", 5400),
            ("10.0.0.3", "10.0.0.3", 5301)
        ]
    );
    assert_eq!(
        rates(&m, "web"),
        [("db".into(), Some(20000.0)), ("10.0.0.3".into(), None)]
    );
    assert!(m.row(0)[1].rate.is_unpaced());
    assert_eq!(rates(&m, "db"), [("web".into(), Some(150.5))]);
    assert_eq!(rates(&m, "10.0.0.3"), [("web".into(), Some(1000.0))]);
    assert_eq!(m.flow_count(), 4);
}

#[test]
fn the_diagonal_and_cells_past_the_header_are_ignored() {
    let m = Matrix::parse(b"src\\dst,a,b\na,99,5,7,8\nb,1,2\n", "m.csv").unwrap();
    assert_eq!(rates(&m, "a"), [("b".into(), Some(5.0))]);
    assert_eq!(rates(&m, "b"), [("a".into(), Some(1.0))]);
}

#[test]
fn a_repeated_row_is_refused_naming_both_lines() {
    // The original merges it into the first; we refuse it, since
    // a row pasted for another host and not renamed drops that host's flows.
    let err = Matrix::parse(b"src\\dst,a,b,c\na,,5,\nb,1,,\na,,,9\na,,6,\n", "m.csv").unwrap_err();
    assert_eq!(
        err.message(),
        "m.csv:4: row host 'a' is written twice (first on line 2) -- each host has one row"
    );
    assert_eq!(err.code(), 2);
}

#[test]
fn one_address_on_two_ports_is_two_hosts() {
    let m = Matrix::parse(
        b"# port=5300\nsrc\\dst,a=10.0.0.5,b=10.0.0.5:5301,10.0.0.6:5300\na,,5,5\n",
        "m.csv",
    )
    .unwrap();
    assert_eq!(m.host_count(), 3);
    assert_eq!(m.warnings(), [] as [String; 0]);
}

/// A matrix with a value on the diagonal and two cells past the last host, and
/// the same matrix without them.
const WARNED: &str = "# tx_size=64\r\n\
    src\\dst,a=127.0.0.71,b=127.0.0.72,,\r\n\
    a,99,5,7\r\n\
    # b answers too\r\n\
    b,1,max,,\"8\"\r\n";
const CLEAN: &str = "# tx_size=64\r\nsrc\\dst,a=127.0.0.71,b=127.0.0.72\r\na,,5\r\nb,1,\r\n";
const WARNINGS: &str = "\
mx: warning: matrix.csv:3: cell a -> a: '99' is on the diagonal (a host does not send to itself) -- ignored
mx: warning: matrix.csv:3: cell a -> column 4: '7' is past the last host of the header ('b', column 3) -- ignored
mx: warning: matrix.csv:5: cell b -> b: 'max' is on the diagonal (a host does not send to itself) -- ignored
mx: warning: matrix.csv:5: cell b -> column 5: '8' is past the last host of the header ('b', column 3) -- ignored
";

#[test]
fn ignored_cells_are_warned_about_and_the_command_runs_as_before() {
    let warned = Sandbox::new();
    warned.write("matrix.csv", WARNED);
    let clean = Sandbox::new();
    clean.write("matrix.csv", CLEAN);
    for command in [
        &["check"][..],
        &["start", "--dry-run"],
        &["reload", "--dry-run"],
        &["doctor", "--dry-run"],
    ] {
        let got = warned.mx(command);
        let want = clean.mx(command);
        assert_eq!(got.stderr, WARNINGS, "{command:?}");
        assert_eq!(want.stderr, "", "{command:?}");
        assert_eq!(got.code, want.code, "{command:?}: {}", got.stdout);
        assert_eq!(got.code, 0, "{command:?}: {}", got.stdout);
        // start's rehearsal names its staging directory, which differs per run.
        if command[0] != "start" {
            assert_eq!(got.stdout, want.stdout, "{command:?}");
        }
    }
}

#[test]
fn commands_that_only_look_do_not_warn() {
    let sb = Sandbox::new();
    sb.write("matrix.csv", WARNED);
    let run = sb.mx(&["status", "--dry-run"]);
    assert_eq!(run.code, 0);
    assert_eq!(run.stderr, "");
}

#[test]
fn hand_edits_that_change_nothing_are_silent() {
    // Comments, blank lines, CRLF, quotes, blanks and zeros (the diagonal too),
    // trailing empty cells and header cells, `20000.0` for `20000`.
    let sb = Sandbox::new();
    sb.write(
        "matrix.csv",
        "\r\n# mx matrix v1\r\n  #   tx_size=64 \r\n\
         \"src\\dst\", a=127.0.0.71 ,\"b=127.0.0.72\",,\r\n\
         a,0, 20000.0 ,,, \r\n\r\n# b\r\n\
         \"b\",\"20000\",\"\",\"\" \r\n",
    );
    let run = sb.mx(&["check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
}

#[test]
fn matrices_mx_gen_wrote_load_without_a_warning() {
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut loaded = 0;
    for entry in std::fs::read_dir(&golden).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "csv") {
            let m = Matrix::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(m.warnings(), [] as [String; 0], "{}", path.display());
            loaded += 1;
        }
    }
    assert!(loaded >= 7, "only {loaded} golden matrices");
}

#[test]
fn a_hand_changed_cell_survives_a_rewrite() {
    let m = Matrix::parse(b"src\\dst,a,b\r\na,,20000\r\nb,150.5,\r\n", "m.csv").unwrap();
    let text = String::from_utf8(m.to_bytes()).unwrap();
    assert!(
        text.ends_with("src\\dst,a,b\r\na,,20000\r\nb,150.5,\r\n"),
        "{text}"
    );
    assert_eq!(Matrix::parse(text.as_bytes(), "again.csv").unwrap(), m);
    assert_eq!(m.row_rate(1), Some(Rate::per_second(150.5)));
}

#[test]
fn a_hand_written_dscp_takes_names_in_any_case_and_the_last_one_wins() {
    let m = |header: &str| {
        Matrix::parse(
            format!("{header}\nsrc\\dst,a,b\na,,5\n").as_bytes(),
            "m.csv",
        )
        .unwrap()
    };
    assert_eq!(m("# dscp=ef").config.dscp.value(), 46);
    assert_eq!(
        m("#   dscp=46 \n## dscp=Af11 set later")
            .config
            .dscp
            .value(),
        10
    );
    // The default class, however written, is written back as nothing.
    for header in ["# dscp=0", "# dscp=cs0", "# tx_size=64"] {
        let text = String::from_utf8(m(header).to_bytes()).unwrap();
        assert!(
            m(header).config.dscp.is_default() && !text.contains("dscp"),
            "{text}"
        );
    }
    let marked = String::from_utf8(m("# dscp=ef").to_bytes()).unwrap();
    assert!(marked.contains("port=5300 dscp=46\n"), "{marked}");
}
