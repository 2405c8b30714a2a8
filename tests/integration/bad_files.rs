//! Every command fed a file that cannot be what it asks for -- missing, empty,
//! a directory, binary, huge, or a matrix from a newer mx -- answers with one
//! line naming the file, and exit 2.

use crate::util::{Run, Sandbox};

/// The kinds of bad file, each made at `name` in `sb`.
#[derive(Debug, Clone, Copy)]
enum Bad {
    Missing,
    Empty,
    Directory,
    Binary,
    /// 3 GiB, sparse: no command may read it whole.
    Huge,
    /// A v2 matrix header on an otherwise good matrix.
    Future,
}

const ALL: [Bad; 6] = [
    Bad::Missing,
    Bad::Empty,
    Bad::Directory,
    Bad::Binary,
    Bad::Huge,
    Bad::Future,
];

fn make(sb: &Sandbox, name: &str, bad: Bad) {
    let path = sb.file(name);
    match bad {
        Bad::Missing => {}
        Bad::Empty => std::fs::write(&path, "").unwrap(),
        Bad::Directory => std::fs::create_dir(&path).unwrap(),
        Bad::Binary => {
            // Deterministic noise with NULs and invalid UTF-8 throughout.
            let mut x: u32 = 0x9e37_79b9;
            let bytes: Vec<u8> = (0..4096)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            std::fs::write(&path, bytes).unwrap();
        }
        Bad::Huge => {
            let file = std::fs::File::create(&path).unwrap();
            file.set_len(3 << 30).unwrap();
        }
        Bad::Future => std::fs::write(
            &path,
            "# mx matrix v2 -- rows send, columns receive, cells are packets/sec\n\
             # tx_size=64 rx_size=64 port=7000\n\
             src\\dst,a=127.0.0.1,b=127.0.0.2\na,,100\nb,100,\n",
        )
        .unwrap(),
    }
}

/// One line on stderr, starting `mx: `, naming `name`; exit 2; nothing on stdout.
fn assert_one_line_refusal(run: &Run, name: &str, what: &str) {
    assert_eq!(run.code, 2, "{what}: {}{}", run.stdout, run.stderr);
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: {:?}", run.stderr);
    assert!(lines[0].starts_with("mx: "), "{what}: {}", lines[0]);
    assert!(
        lines[0].contains(name),
        "{what}: {} does not name {name}",
        lines[0]
    );
}

#[test]
fn every_matrix_command_refuses_a_bad_matrix_in_one_line() {
    let commands: [&[&str]; 11] = [
        &["check", "--matrix", "m.csv"],
        &[
            "agent",
            "--matrix",
            "m.csv",
            "--host",
            "a",
            "--duration",
            "1",
        ],
        &["start", "--matrix", "m.csv", "--local", "fleet"],
        &["status", "--matrix", "m.csv", "--local", "fleet"],
        &["stop", "--matrix", "m.csv", "--local", "fleet"],
        &["clean", "--matrix", "m.csv", "--local", "fleet", "--yes"],
        &["reload", "--matrix", "m.csv", "--local", "fleet"],
        &["doctor", "--matrix", "m.csv", "--local", "fleet"],
        &["run", "--matrix", "m.csv", "--local", "fleet", "--for", "1"],
        &["logs", "--matrix", "m.csv", "--local", "fleet"],
        &["collect", "--matrix", "m.csv", "--local", "fleet"],
    ];
    for bad in ALL {
        let sb = Sandbox::new();
        make(&sb, "m.csv", bad);
        for args in commands {
            let run = sb.mx(args);
            assert_one_line_refusal(&run, "m.csv", &format!("{bad:?} {args:?}"));
        }
        assert!(
            !sb.file("fleet").exists(),
            "{bad:?}: a refused command made the fleet"
        );
    }
}

#[test]
fn the_refusals_say_what_is_wrong() {
    let cases = [
        (Bad::Directory, "Is a directory"),
        (Bad::Binary, "not a matrix"),
        (Bad::Huge, "m.csv:1: a line over 64 MiB: not a matrix"),
        (
            Bad::Future,
            "m.csv:1: a v2 matrix, from a newer mx: this one reads v1 -- upgrade mx",
        ),
        (Bad::Missing, "matrix not found: m.csv"),
    ];
    for (bad, want) in cases {
        let sb = Sandbox::new();
        make(&sb, "m.csv", bad);
        let run = sb.mx(&["check", "--matrix", "m.csv"]);
        assert!(run.stderr.contains(want), "{bad:?}: {}", run.stderr);
    }
}

#[test]
fn a_matrix_line_over_64_mib_is_refused_without_reading_on() {
    let sb = Sandbox::new();
    let mut text = b"src\\dst,a=127.0.0.1,b=127.0.0.2\na,".to_vec();
    text.resize(70 << 20, b' ');
    std::fs::write(sb.file("m.csv"), text).unwrap();
    let run = sb.mx(&["check", "--matrix", "m.csv"]);
    assert_eq!(
        run.stderr,
        "mx: m.csv:2: a line over 64 MiB: not a matrix\n"
    );
    assert_eq!(run.code, 2);
}

#[test]
fn server_list_commands_refuse_bad_lists_in_one_line() {
    for bad in [
        Bad::Missing,
        Bad::Empty,
        Bad::Directory,
        Bad::Binary,
        Bad::Huge,
    ] {
        let sb = Sandbox::new();
        make(&sb, "servers.txt", bad);
        for args in [
            &["gen", "--servers", "servers.txt"][..],
            &[
                "hints",
                "--servers",
                "servers.txt",
                "--pps-per-pair",
                "1000",
            ][..],
        ] {
            let run = sb.mx(args);
            assert_one_line_refusal(&run, "servers.txt", &format!("{bad:?} {args:?}"));
        }
        assert!(!sb.file("matrix.csv").exists());
    }
}

#[test]
fn summarize_and_export_refuse_a_bad_report_in_one_line() {
    for bad in [Bad::Binary, Bad::Huge, Bad::Directory] {
        let sb = Sandbox::new();
        std::fs::create_dir(sb.file("reports")).unwrap();
        make(&sb, "reports/a.csv", bad);
        for args in [
            &[
                "summarize",
                "--no-collect",
                "--reports",
                "reports",
                "--window",
                "0",
            ][..],
            &[
                "export",
                "--no-collect",
                "--reports",
                "reports",
                "--window",
                "0",
            ][..],
        ] {
            let run = sb.mx(args);
            // A directory named like a report is not a report file: nothing to read.
            let name = if matches!(bad, Bad::Directory) {
                "reports"
            } else {
                "a.csv"
            };
            assert_one_line_refusal(&run, name, &format!("{bad:?} {args:?}"));
        }
    }
    // The reports directory itself missing, or a file.
    for bad in [Bad::Missing, Bad::Empty] {
        let sb = Sandbox::new();
        make(&sb, "reports", bad);
        let run = sb.mx(&["summarize", "--no-collect", "--reports", "reports"]);
        assert_one_line_refusal(&run, "reports", &format!("{bad:?}"));
    }
}

#[test]
fn export_refuses_a_bad_names_file_in_one_line() {
    for bad in [Bad::Missing, Bad::Directory, Bad::Binary, Bad::Huge] {
        let sb = Sandbox::new();
        std::fs::create_dir(sb.file("reports")).unwrap();
        sb.write(
            "reports/a.csv",
            &format!("{}\r\n", matrix_orchestrator::report::COLUMNS.join(",")),
        );
        make(&sb, "names.txt", bad);
        let run = sb.mx(&[
            "export",
            "--no-collect",
            "--reports",
            "reports",
            "--names",
            "names.txt",
        ]);
        assert_one_line_refusal(&run, "names.txt", &format!("{bad:?}"));
    }
}
