//! Fuzzing the four readers of untrusted bytes: the matrix parser, the
//! server-list parser, the report reader and the packet decoder.
//!
//! Each target mutates the seed files of `tests/fuzz/corpus/<target>/` (byte
//! flips, inserts, deletions, cuts, splices of CSV syntax) or takes arbitrary
//! bytes, and checks: no panic, and a refusal that is one line naming the file.
//! The matrix has two readers (whole text, and streamed from a file): they
//! must agree. Hangs are caught by nextest's timeout (.config/nextest.toml).
//!
//! CI runs `MX_FUZZ_CASES` (default 2,000) cases per target; run longer with
//!   MX_FUZZ_CASES=200000 cargo nextest run fuzz
//! A failing case is saved by proptest under proptest-regressions/ and
//! replayed first from then on.

use std::path::{Path, PathBuf};

use matrix_orchestrator::agent::wire::{HEADER_LEN, Header};
use matrix_orchestrator::matrix::Matrix;
use matrix_orchestrator::matrix::servers::parse_servers;
use matrix_orchestrator::report::Column;
use matrix_orchestrator::report::read::{for_each_row, latest_ts};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn cases() -> u32 {
    std::env::var("MX_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

fn config() -> Config {
    Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The seed files of one target, sorted by name.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz/corpus")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no seeds in {}", dir.display());
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Bytes that mean something to our formats, for splicing in.
const TOKENS: &[&[u8]] = &[
    b",",
    b"\n",
    b"\r\n",
    b"\"",
    b"#",
    b"=",
    b":",
    b"max",
    b"-1",
    b"1e309",
    b"nan",
    b"inf",
    b"\0",
    b"\xff",
    b"src\\dst",
    b"tx_size=",
    b"port=0",
    b"peers=",
    b"dwell=",
    b"layers=",
    b"# mx matrix v9",
    b"MXO1",
    b"ts,host,dir,peer",
];

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Splice(usize, usize),
    Cut(usize),
    Repeat(usize, usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Flip(at, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Insert(at, b)),
        any::<usize>().prop_map(Edit::Delete),
        (any::<usize>(), 0..TOKENS.len()).prop_map(|(at, t)| Edit::Splice(at, t)),
        any::<usize>().prop_map(Edit::Cut),
        (any::<usize>(), 1usize..200).prop_map(|(at, len)| Edit::Repeat(at, len)),
    ]
}

fn apply(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |i: usize, len: usize| if len == 0 { 0 } else { i % (len + 1) };
        match *e {
            Edit::Flip(i, b) if !bytes.is_empty() => {
                let n = bytes.len();
                bytes[i % n] ^= b;
            }
            Edit::Insert(i, b) => bytes.insert(at(i, bytes.len()), b),
            Edit::Delete(i) if !bytes.is_empty() => {
                let n = bytes.len();
                bytes.remove(i % n);
            }
            Edit::Splice(i, t) => {
                let i = at(i, bytes.len());
                bytes.splice(i..i, TOKENS[t].iter().copied());
            }
            Edit::Cut(i) => bytes.truncate(at(i, bytes.len())),
            Edit::Repeat(i, len) => {
                let i = at(i, bytes.len());
                let end = (i + len).min(bytes.len());
                let piece = bytes[i..end].to_vec();
                bytes.splice(end..end, piece);
            }
            _ => {}
        }
    }
    bytes
}

/// Inputs for `target`: a mutated seed (mostly) or arbitrary bytes.
fn input(target: &'static str) -> impl Strategy<Value = Vec<u8>> {
    let seeds = seeds(target);
    let n = seeds.len();
    prop_oneof![
        4 => (0..n, prop::collection::vec(edit(), 0..12))
            .prop_map(move |(s, edits)| apply(seeds[s].clone(), &edits)),
        1 => prop::collection::vec(any::<u8>(), 0..2048),
    ]
}

/// A refusal or a warning must be one line and name the file.
fn one_line_naming(message: &str, name: &str) {
    assert!(!message.contains('\n'), "two lines: {message:?}");
    assert!(
        message.starts_with(name),
        "does not name {name}: {message:?}"
    );
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fuzz_matrix_parser(bytes in input("matrix")) {
        let parsed = Matrix::parse(&bytes, "fuzz.csv");
        match &parsed {
            Err(e) => one_line_naming(e.message(), "fuzz.csv"),
            Ok(m) => m.warnings().iter().for_each(|w| one_line_naming(w, "fuzz.csv")),
        }
        // The streaming reader (what the agent and every command use) agrees.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.csv");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = Matrix::load(&path);
        let label = path.display().to_string();
        match (&parsed, &loaded) {
            (Ok(a), Ok(b)) => {
                prop_assert_eq!(a.host_count(), b.host_count());
                prop_assert_eq!(a.flow_count(), b.flow_count());
                let warnings: Vec<String> =
                    a.warnings().iter().map(|w| w.replacen("fuzz.csv", &label, 1)).collect();
                prop_assert_eq!(warnings.as_slice(), b.warnings());
            }
            (Err(a), Err(b)) => {
                prop_assert_eq!(a.message().replacen("fuzz.csv", &label, 1), b.message());
            }
            _ => prop_assert!(false, "parse {:?} vs load {:?}", parsed.is_ok(), loaded.is_ok()),
        }
    }

    #[test]
    fn fuzz_server_list_parser(bytes in input("servers")) {
        // A list is text: what is not UTF-8 is refused before parsing.
        if let Ok(text) = std::str::from_utf8(&bytes)
            && let Err(e) = parse_servers(text, "fuzz.txt")
        {
            one_line_naming(e.message(), "fuzz.txt");
        }
    }

    #[test]
    fn fuzz_report_reader(bytes in input("report")) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h1.csv");
        std::fs::write(&path, &bytes).unwrap();
        let label = path.display().to_string();
        let mut rows = 0u64;
        match for_each_row(&path, |row| {
            // Every accessor on every row, as summarize and export use them.
            let _ = (row.host(), row.peer(), row.dir(), row.num(Column::Pps), row.text(Column::RttHist));
            rows += 1;
        }) {
            Ok(()) => {}
            Err(e) => one_line_naming(e.message(), &label),
        }
        if let Err(e) = latest_ts(&path) {
            one_line_naming(e.message(), &label);
        }
    }

    #[test]
    fn fuzz_packet_decoder(bytes in input("packet")) {
        match Header::decode(&bytes) {
            None => prop_assert!(bytes.len() < HEADER_LEN || bytes[..4] != *b"MXO1"),
            Some(h) => {
                // What decodes re-encodes to the same bytes (the flags byte,
                // our interval tag, included).
                let mut again = [0u8; HEADER_LEN];
                h.encode(&mut again);
                let want: [u8; HEADER_LEN] = bytes[..HEADER_LEN].try_into().unwrap();
                prop_assert_eq!(again, want);
                // Any request gets a reply the agent can send, and never
                // one larger than the plan's (here 1400 bytes).
                let reply = Header::reply_to(&h, 1, 1400);
                prop_assert!((32..=1400).contains(&reply.packet_len));
            }
        }
    }
}
