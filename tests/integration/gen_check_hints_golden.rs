//! Golden tests: the files and console output of gen, check and hints on small
//! fleets, compared byte for byte with tests/golden/ (MX_BLESS=1 rewrites them).

use crate::util::{Sandbox, assert_golden};

fn gen_golden(name: &str, servers: &str, args: &[&str]) {
    gen_golden_with(name, &[("servers.txt", servers)], args);
}

/// A gen golden whose server lists are `files` (name, text).
fn gen_golden_with(name: &str, files: &[(&str, &str)], args: &[&str]) {
    let sb = Sandbox::new();
    for (file, text) in files {
        sb.write(file, text);
    }
    let mut all = vec!["gen"];
    all.extend_from_slice(args);
    let run = sb.mx(&all);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stderr, "");
    assert_golden(&format!("{name}.stdout"), &run.stdout);
    let output = args
        .iter()
        .position(|a| *a == "-o")
        .map_or("matrix.csv", |i| args[i + 1]);
    assert_golden(&format!("{name}.csv"), &sb.read(output));
}

/// A server list of `n` hosts named `h1`..`hn`, each with its address
/// (`name=addr`), so no test waits on the resolver.
fn hosts(n: usize) -> String {
    (1..=n).map(|i| format!("h{i}=198.18.0.{i}\n")).collect()
}

const THREE_IPS: &str = "10.0.0.10\n10.0.0.11\n10.0.0.12\n";

#[test]
fn gen_full_mesh() {
    gen_golden(
        "gen_mesh",
        THREE_IPS,
        &["--pps", "20000", "--tx-size", "64", "--rx-size", "512"],
    );
}

#[test]
fn gen_k_regular_shuffle() {
    gen_golden(
        "gen_peers",
        &hosts(11),
        &["--peers", "3", "--seed", "5", "--pps", "1000"],
    );
}

#[test]
fn gen_layered() {
    gen_golden(
        "gen_layered",
        &hosts(11),
        &[
            "--peers", "3", "--seed", "5", "--dwell", "30", "--pps", "1000", "-o", "l.csv",
        ],
    );
}

#[test]
fn gen_equal_layers() {
    gen_golden(
        "gen_equal_layers",
        &hosts(11),
        &[
            "--peers",
            "3",
            "--seed",
            "5",
            "--dwell",
            "30",
            "--pps",
            "1000",
            "--equal-layers",
        ],
    );
}

#[test]
fn gen_equal_layers_with_nothing_to_pad() {
    gen_golden(
        "gen_equal_layers_even",
        &hosts(5),
        &[
            "--peers",
            "2",
            "--seed",
            "7",
            "--dwell",
            "15",
            "--equal-layers",
        ],
    );
}

#[test]
fn gen_gbps_budget() {
    // 1 Gb/s of 1400-byte requests per host over 2 peers: 42,633 pps per pair.
    gen_golden("gen_gbps", THREE_IPS, &["--gbps", "1", "--tx-size", "1400"]);
}

#[test]
fn gen_unpaced() {
    gen_golden(
        "gen_max",
        "a=10.0.0.1:5400\nb=10.0.0.2\n",
        &["--pps", "max", "--port", "6000"],
    );
}

#[test]
fn gen_small_rates_keep_three_decimals() {
    gen_golden("gen_small", THREE_IPS, &["--pps", "0.5"]);
}

#[test]
fn gen_to_stdout_prints_only_the_matrix() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE_IPS);
    let run = sb.mx(&["gen", "--pps", "20000", "--rx-size", "512", "-o", "-"]);
    assert_eq!(run.code, 0);
    assert_golden("gen_mesh.csv", &run.stdout);
    assert!(!sb.file("matrix.csv").exists());
}

#[test]
fn gen_with_the_same_seed_replays_the_same_matrix() {
    let sb = Sandbox::new();
    // Addresses given: bare names would be looked up (seconds each where
    // they do not resolve), and the shuffle is what this test is about.
    let servers: String = (1..=40).map(|i| format!("h{i}=10.0.{i}.1\n")).collect();
    sb.write("servers.txt", &servers);
    let args = ["gen", "--peers", "4", "--seed", "1234", "--dwell", "15"];
    assert_eq!(sb.mx(&[&args[..], &["-o", "a.csv"]].concat()).code, 0);
    assert_eq!(sb.mx(&[&args[..], &["-o", "b.csv"]].concat()).code, 0);
    assert_eq!(sb.read("a.csv"), sb.read("b.csv"));
}

#[test]
fn gen_without_a_seed_draws_one_and_says_how_to_replay_it() {
    let sb = Sandbox::new();
    sb.write("servers.txt", &hosts(12));
    let run = sb.mx(&["gen", "--peers", "3"]);
    assert_eq!(run.code, 0);
    let seed = run
        .stdout
        .split("reuse --seed ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the seed is printed");
    let first = sb.read("matrix.csv");
    assert!(first.contains(&format!("# peers=3 seed={seed} ")));
    assert_eq!(sb.mx(&["gen", "--peers", "3", "--seed", seed]).code, 0);
    assert_eq!(sb.read("matrix.csv"), first);
}

fn check_golden(name: &str, matrix: &str, args: &[&str], code: i32) {
    let sb = Sandbox::new();
    sb.write("matrix.csv", matrix);
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let run = sb.mx(&all);
    assert_eq!(run.code, code, "{}{}", run.stdout, run.stderr);
    assert_golden(&format!("{name}.stdout"), &run.stdout);
}

const MESH: &str = include_str!("../golden/gen_mesh.csv");
const LAYERED: &str = include_str!("../golden/gen_layered.csv");

#[test]
fn check_over_the_caps_exits_1() {
    check_golden(
        "check_over",
        MESH,
        &["--nic-gbps", "0.2", "--nic-mpps", "0.05"],
        1,
    );
}

#[test]
fn check_within_the_caps() {
    check_golden(
        "check_ok",
        MESH,
        &["--nic-gbps", "25", "--nic-mpps", "15"],
        0,
    );
}

#[test]
fn check_without_caps() {
    check_golden("check_nocaps", MESH, &[], 0);
}

#[test]
fn check_a_hand_edited_matrix_with_an_unpaced_flow() {
    // One sick-heavy row and one unpaced flow: the heavy host is listed first,
    // and only it is over the cap.
    let matrix = "# tx_size=64 rx_size=1400 port=5300\n\
                  src\\dst,a=198.18.0.1,b=198.18.0.2,c=198.18.0.3,d=198.18.0.4\n\
                  a=198.18.0.1,,1000,1000,1000\n\
                  b=198.18.0.2,1000,,1000,max\n\
                  c=198.18.0.3,90000,1000,,1000\n\
                  d=198.18.0.4,1000,1000,1000,\n";
    check_golden(
        "check_edited",
        matrix,
        &["--nic-gbps", "1", "--top", "3"],
        1,
    );
}

const UNPACED: &str = include_str!("../golden/gen_max.csv");

#[test]
fn check_an_unpaced_matrix_says_what_is_known_and_weighs_nothing() {
    check_golden(
        "check_unpaced",
        UNPACED,
        &["--nic-gbps", "25", "--nic-mpps", "15"],
        0,
    );
    let sb = Sandbox::new();
    sb.write("matrix.csv", UNPACED);
    for caps in [&[][..], &["--nic-gbps", "0.001"]] {
        let run = sb.mx(&[&["check"][..], caps].concat());
        assert_eq!(run.code, 0, "{}", run.stderr);
        // No table of zeros, no verdict on caps it could not check, no worker
        // count computed from a rate of zero.
        for unsaid in [
            "packets/s",
            "0 pps",
            "admissible",
            "needs about",
            "no caps given",
        ] {
            assert!(
                !run.stdout.contains(unsaid),
                "{unsaid:?} in\n{}",
                run.stdout
            );
        }
        assert!(
            run.stdout
                .contains("to find the ceiling, run it: mx run --for 60")
        );
    }
    // A layered matrix, every layer unpaced: nothing is "checked" in any layer.
    let sb = Sandbox::new();
    sb.write("servers.txt", &hosts(11));
    let args = [
        "gen", "--peers", "3", "--seed", "5", "--dwell", "30", "--pps", "max",
    ];
    assert_eq!(sb.mx(&args).code, 0);
    let run = sb.mx(&["check", "--nic-mpps", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("check_unpaced_layered.stdout", &run.stdout);
}

#[test]
fn check_a_mixed_matrix_checks_the_paced_flows_and_names_the_rest() {
    // Two unpaced flows from b, one from c: the loads are the paced flows', each
    // host an unpaced flow touches is marked, and the verdict says what it covers.
    let matrix = "# tx_size=64 rx_size=1400 port=5300\n\
                  src\\dst,a=198.18.0.1,b=198.18.0.2,c=198.18.0.3,d=198.18.0.4\n\
                  a=198.18.0.1,,1000,1000,1000\n\
                  b=198.18.0.2,max,,1000,max\n\
                  c=198.18.0.3,90000,max,,1000\n\
                  d=198.18.0.4,1000,1000,1000,\n";
    check_golden("check_mixed", matrix, &["--nic-gbps", "10"], 0);

    // A big unpaced part is named in a few lines, the rest counted.
    let sb = Sandbox::new();
    sb.write("servers.txt", &hosts(12));
    assert_eq!(sb.mx(&["gen", "--pps", "max"]).code, 0);
    let text = sb.read("matrix.csv").replacen("max", "1000", 1);
    sb.write("matrix.csv", &text);
    let run = sb.mx(&["check"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "  131 flows are unpaced ('max'; a cell of 'inf' or 'unpaced' means max too), left out below: their load is whatever the senders manage\n\
             \x20   h1 -> h3, h4, h5, h6, h7, h8, h9, h10 and 2 more\n"
        ),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n    ... and 7 more hosts sending unpaced\n\n")
    );
    assert!(run.stdout.contains("fleet offered: 1.0 kpps requests"));
}

#[test]
fn check_a_layered_matrix_checks_every_layer() {
    check_golden("check_layered", LAYERED, &["--nic-mpps", "0.006"], 0);
    check_golden("check_layered_over", LAYERED, &["--nic-mpps", "0.0059"], 1);
}

const TOR1: &str = "a1=10.0.1.1\na2=10.0.1.2\na3=10.0.1.3\na4=10.0.1.4\n";
const TOR2: &str = "b1=10.0.2.1\nb2=10.0.2.2\nb3=10.0.2.3\n";
const POOL_FLAGS: [&str; 4] = ["--pool", "tor1=tor1.txt", "--pool", "tor2=tor2.txt"];

fn gen_pools_golden(name: &str, args: &[&str]) {
    let mut all = POOL_FLAGS.to_vec();
    all.extend_from_slice(args);
    gen_golden_with(name, &[("tor1.txt", TOR1), ("tor2.txt", TOR2)], &all);
}

#[test]
fn gen_pool_to_pool_shapes() {
    gen_pools_golden("gen_pools", &["--between", "tor1", "tor2", "--pps", "5000"]);
    gen_pools_golden(
        "gen_pools_duplex_peers",
        &["--duplex", "--peers", "2", "--seed", "11", "--gbps", "1"],
    );
    gen_pools_golden(
        "gen_pools_layered",
        &[
            "--peers", "1", "--seed", "3", "--dwell", "10", "--pps", "1000", "-o", "l.csv",
        ],
    );
}

#[test]
fn check_a_pool_matrix_says_its_pools() {
    check_golden(
        "check_pools_layered",
        include_str!("../golden/gen_pools_layered.csv"),
        &["--nic-gbps", "1"],
        0,
    );
}

#[test]
fn hints_cheat_sheet() {
    let run = Sandbox::new().mx(&["hints"]);
    assert_eq!(run.code, 0);
    assert_golden("hints_cheat_sheet.stdout", &run.stdout);
}

#[test]
fn hints_sizes_a_run() {
    let sb = Sandbox::new();
    sb.write("s12.txt", &hosts(12));
    let run = sb.mx(&["hints", "--servers", "s12.txt", "--pps-per-host", "2000000"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("hints_sizing.stdout", &run.stdout);
    let run = sb.mx(&[
        "hints",
        "--servers",
        "s12.txt",
        "--peers",
        "2",
        "--pps-per-pair",
        "20000000",
        "--rx-size",
        "1400",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("hints_sizing_sparse.stdout", &run.stdout);
}

#[test]
fn hints_for_an_unpaced_run_says_what_is_known() {
    let sb = Sandbox::new();
    sb.write("s12.txt", &hosts(12));
    let run = sb.mx(&["hints", "--servers", "s12.txt", "--pps-per-pair", "max"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("hints_unpaced.stdout", &run.stdout);
    // Per host, or 'inf', the same; a number per pair still wins.
    let per_host = sb.mx(&["hints", "--servers", "s12.txt", "--pps-per-host", "inf"]);
    assert_eq!(per_host.stdout, run.stdout);
    let paced = sb.mx(&[
        "hints",
        "--servers",
        "s12.txt",
        "--pps-per-pair",
        "1000",
        "--pps-per-host",
        "max",
    ]);
    assert!(paced.stdout.starts_with("to get that across 12 hosts"));
}

#[test]
fn hints_refuses_peers_out_of_range_with_the_numbers_filled_in() {
    let sb = Sandbox::new();
    sb.write("s3.txt", &hosts(3));
    for (k, got) in [("3", "3"), ("0", "0")] {
        let run = sb.mx(&[
            "hints",
            "--servers",
            "s3.txt",
            "--peers",
            k,
            "--pps-per-host",
            "1000",
        ]);
        assert_eq!(run.code, 2);
        assert_eq!(
            run.stderr,
            format!("mx: --peers must be between 1 and 2 for 3 hosts (got {got})\n")
        );
    }
}

#[test]
fn hints_sizing_needs_the_server_list() {
    let run = Sandbox::new().mx(&["hints", "--pps-per-host", "1000"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: sizing a run needs the server list: --servers servers.txt not found\n"
    );
}

/// gen's `per NIC` figures, as printed: (packets each way, out wire, in wire).
fn gen_nic_figures(stdout: &str) -> (String, String, String) {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with("  per NIC  : "));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no per NIC line:\n{stdout}"));
    let packets = first["  per NIC  : ".len()..]
        .split(" each way")
        .next()
        .unwrap()
        .to_string();
    let second = lines.next().unwrap().trim_start();
    let (out, rest) = second.split_once(" out, ").unwrap();
    let (inw, _) = rest.split_once(" in on the wire").unwrap();
    (packets, out.to_string(), inw.to_string())
}

/// check's figures for its busiest host: (packets/s, out (wire), in (wire)).
fn check_top_figures(stdout: &str) -> (String, String, String) {
    let row = stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("host "))
        .nth(1)
        .unwrap_or_else(|| panic!("no table:\n{stdout}"));
    // Columns are right-aligned after the name: packets (13), out (15), in (15).
    let tail = &row[row.len() - 43..];
    (
        tail[..13].trim().to_string(),
        tail[13..28].trim().to_string(),
        tail[28..].trim().to_string(),
    )
}

#[test]
fn gen_says_what_each_nic_carries_as_check_counts_it() {
    let cases: [(&str, &[&str]); 7] = [
        (THREE_IPS, &["--pps", "20000", "--rx-size", "512"]),
        (
            THREE_IPS,
            &["--gbps", "1", "--tx-size", "1400", "--rx-size", "200"],
        ),
        (
            &hosts(11),
            &["--peers", "3", "--seed", "5", "--pps", "1000"],
        ),
        (
            &hosts(11),
            &[
                "--peers",
                "3",
                "--seed",
                "5",
                "--dwell",
                "30",
                "--tx-size",
                "900",
            ],
        ),
        (
            &hosts(11),
            &[
                "--peers",
                "3",
                "--seed",
                "5",
                "--dwell",
                "30",
                "--equal-layers",
            ],
        ),
        (&hosts(3), &["--pps", "0.5"]),
        // Fragments: 8000-byte requests are 6 packets each, 4096-byte replies 3.
        (
            THREE_IPS,
            &["--pps", "1000", "--tx-size", "8000", "--rx-size", "4096"],
        ),
    ];
    for (servers, args) in cases {
        let sb = Sandbox::new();
        sb.write("servers.txt", servers);
        let generated = sb.mx(&[&["gen"][..], args].concat());
        assert_eq!(generated.code, 0, "{}", generated.stderr);
        let checked = sb.mx(&["check"]);
        assert_eq!(checked.code, 0, "{}", checked.stderr);
        assert_eq!(
            gen_nic_figures(&generated.stdout),
            check_top_figures(&checked.stdout),
            "{args:?}:\n{}\n{}",
            generated.stdout,
            checked.stdout
        );
    }
}

#[test]
fn gen_disk_writes_the_mode_and_its_sentence_and_sizes_the_disks() {
    gen_golden(
        "gen_disk",
        THREE_IPS,
        &["--pps", "500", "--rx-size", "4096", "--disk", "replies"],
    );
}

#[test]
fn gen_disk_with_header_only_payloads_says_there_is_nothing_to_put_on_disk() {
    gen_golden(
        "gen_disk_header_only",
        THREE_IPS,
        &["--pps", "500", "--tx-size", "32", "--disk", "requests"],
    );
}

#[test]
fn check_disk_lists_each_hosts_iops_and_bytes() {
    check_golden("check_disk", include_str!("../golden/gen_disk.csv"), &[], 0);
}

/// The disk table's columns as the original prints them: each as wide as
/// its widest cell, four spaces apart, the figures to the right, so an IOPS
/// cell and its MB/s cell stand `2.0k    16.4 MB/s`.
#[test]
fn check_disk_table_is_spaced_as_the_originals() {
    // Two blocks a reply (8,192 bytes of payload), 2,000 of them a host.
    let matrix = include_str!("../golden/gen_disk.csv")
        .replace("rx_size=4096", "rx_size=8224")
        .replace("of 4096 bytes", "of 8224 bytes")
        .replace("500", "1000");
    check_golden("check_disk_8k", &matrix, &["--top", "2"], 0);
    let out = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/check_disk_8k.stdout"),
    )
    .unwrap();
    assert!(
        out.contains("  10.0.0.10         2.0k    16.4 MB/s          2.0k    16.4 MB/s\n"),
        "{out}"
    );
    assert!(
        out.contains("  host         read IOPS         read    write IOPS        write\n"),
        "{out}"
    );
}

/// `mx gen` with `args` refuses a flag's value, saying `want`, and writes nothing.
fn gen_refuses_value(args: &[&str], want: &str) {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE_IPS);
    let run = sb.mx(&[&["gen"][..], args].concat());
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains(want), "{}", run.stderr);
    assert!(!sb.file("matrix.csv").exists());
}

#[test]
fn gen_refuses_an_unknown_disk_mode() {
    gen_refuses_value(
        &["--disk", "always"],
        "--disk wants off, requests, replies or both (got 'always')",
    );
}

#[test]
fn gen_dscp_writes_the_class_as_a_number_and_says_what_it_marks() {
    gen_golden(
        "gen_dscp",
        THREE_IPS,
        &["--pps", "20000", "--rx-size", "512", "--dscp", "af41"],
    );
}

#[test]
fn check_dscp_says_the_class() {
    check_golden("check_dscp", include_str!("../golden/gen_dscp.csv"), &[], 0);
}

#[test]
fn gen_refuses_a_dscp_it_does_not_know() {
    for (value, why) in [
        ("64", "; 64 looks like a whole TOS byte, whose DSCP is 16"),
        ("AF44", ""),
    ] {
        gen_refuses_value(
            &["--dscp", value],
            &format!("--dscp wants 0..63 or a name: EF, AF11..AF43, CS0..CS7{why} (got '{value}')"),
        );
    }
}

#[test]
fn ipv6_fleets_are_sized_with_40_byte_headers() {
    // 1 Gb/s of 1400-byte requests per host over 2 peers: 1e9 / (1486 * 8)
    // / 2 = 42,059 pps a pair over IPv6, 42,633 over IPv4 (1466 bytes).
    for (servers, pair) in [
        (
            "a=[2001:db8::1]\nb=[2001:db8::2]:5300\n2001:db8::3\n",
            "42059",
        ),
        ("a=10.0.0.1\nb=10.0.0.2\nc=10.0.0.3\n", "42633"),
    ] {
        let sb = Sandbox::new();
        sb.write("servers.txt", servers);
        let hints = sb.mx(&["hints", "--gbps-per-host", "1", "--tx-size", "1400"]);
        assert_eq!(hints.code, 0, "{}", hints.stderr);
        assert!(
            hints.stdout.contains(&format!("--pps {pair} ")),
            "{}",
            hints.stdout
        );
        let generated = sb.mx(&["gen", "--gbps", "1", "--tx-size", "1400"]);
        assert_eq!(generated.code, 0, "{}", generated.stderr);
        assert!(
            sb.read("matrix.csv").contains(&format!(",{pair},")),
            "{}",
            sb.read("matrix.csv")
        );
        assert!(
            generated.stdout.contains("1000.0 Mbps out on the wire"),
            "{}",
            generated.stdout
        );
    }
    // Hosts of both families cannot share what gen draws.
    let sb = Sandbox::new();
    sb.write("servers.txt", "a=10.0.0.1\nb=[2001:db8::2]\n");
    let mixed = sb.mx(&["gen"]);
    assert_eq!(mixed.code, 2);
    assert_eq!(
        mixed.stderr,
        "mx: servers.txt: hosts a (IPv4, 10.0.0.1) and b (IPv6, 2001:db8::2) cannot share a matrix: its flows join every host, and a host speaks one address family to all its peers -- list hosts of one family (or make one matrix per family)\n"
    );
    assert!(!sb.file("matrix.csv").exists());
}

#[test]
fn gen_calls_out_requests_over_the_mtu_and_counts_their_fragments() {
    // 8000-byte requests are 6 IPv4 fragments at MTU 1500: 2,000 requests
    // out and 2,000 in a host are 12,000 packets each way, and the replies 4,000.
    gen_golden(
        "gen_fragments",
        THREE_IPS,
        &["--pps", "1000", "--tx-size", "8000"],
    );
    // A 9000-byte MTU carries them whole, and `next:` checks at that MTU.
    gen_golden(
        "gen_fragments_jumbo",
        THREE_IPS,
        &["--pps", "1000", "--tx-size", "8000", "--mtu", "9000"],
    );
}

const FRAGMENTS: &str = include_str!("../golden/gen_fragments.csv");

#[test]
fn check_calls_out_requests_over_the_mtu_and_weighs_their_fragments() {
    // 14,000 packets a second each way is over a 10,000 pps cap; the same
    // requests whole (MTU 9000) are 4,000.
    check_golden("check_fragments", FRAGMENTS, &["--nic-mpps", "0.01"], 1);
    check_golden(
        "check_fragments_jumbo",
        FRAGMENTS,
        &["--nic-mpps", "0.01", "--mtu", "9000"],
        0,
    );
}

#[test]
fn check_calls_out_ipv6_fragments_with_their_headers() {
    // Over IPv6 a reply fits whole up to 1500 - 48 = 1452 bytes; 1453 is
    // 1448 + 13 bytes of UDP in two fragments.
    let matrix = "# tx_size=8000 rx_size=1453 port=5300\n\
                  src\\dst,a=[2001:db8::1],b=[2001:db8::2]\n\
                  a,,1000\n\
                  b,1000,\n";
    check_golden("check_fragments_ipv6", matrix, &[], 0);
}

/// The call-out lines of `mx check` on a 3-host mesh of `tx`-byte requests.
fn check_callouts(tx: u32, args: &[&str]) -> Vec<String> {
    let sb = Sandbox::new();
    sb.write(
        "matrix.csv",
        &format!(
            "# tx_size={tx} rx_size=64 port=5300\nsrc\\dst,a=10.0.0.1,b=10.0.0.2\na,,1000\nb,1000,\n"
        ),
    );
    let run = sb.mx(&[&["check"][..], args].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
        .lines()
        .filter(|l| l.contains("MTU"))
        .map(str::to_string)
        .collect()
}

#[test]
fn check_calls_out_a_datagram_one_byte_over_the_mtu_and_not_one_that_fits() {
    // 1472 + 28 bytes of IPv4 and UDP headers is 1500: one packet.
    assert_eq!(check_callouts(1472, &[]), Vec::<String>::new());
    assert_eq!(
        check_callouts(1473, &[]),
        [
            "  requests of 1473 bytes (1501 with the IPv4 and UDP headers) exceed the 1500-byte MTU: each leaves as 2 IPv4 fragments (a lost fragment loses the datagram)"
        ]
    );
    assert_eq!(
        check_callouts(8972, &["--mtu", "9000"]),
        Vec::<String>::new()
    );
    assert_eq!(check_callouts(8973, &["--mtu", "9000"]).len(), 1);
}

#[test]
fn check_json_carries_the_mtu_and_each_hosts_fragments() {
    let sb = Sandbox::new();
    sb.write("matrix.csv", FRAGMENTS);
    let run = sb.mx(&["check", "--json", "--nic-mpps", "0.01"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["mtu"], 1500);
    for host in doc["hosts"].as_array().unwrap() {
        assert_eq!(host["request_fragments"], 6, "{host}");
        assert_eq!(host["reply_fragments"], 1, "{host}");
        assert_eq!(host["packets_pps"], 14000.0, "{host}");
    }
    let jumbo = sb.mx(&["check", "--json", "--mtu", "9000"]);
    let doc: serde_json::Value = serde_json::from_str(&jumbo.stdout).unwrap();
    assert_eq!(doc["mtu"], 9000);
    assert_eq!(doc["hosts"][0]["request_fragments"], 1);
    assert_eq!(doc["hosts"][0]["packets_pps"], 4000.0);
}

#[test]
fn hints_calls_out_fragments_and_counts_them_per_nic() {
    let sb = Sandbox::new();
    sb.write("s3.txt", THREE_IPS);
    let sizing = [
        "hints",
        "--servers",
        "s3.txt",
        "--pps-per-host",
        "2000",
        "--tx-size",
        "8000",
        "--rx-size",
        "1473",
    ];
    let run = sb.mx(&sizing);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("hints_fragments.stdout", &run.stdout);
    // At MTU 9000 both leave whole, and the commands it suggests say --mtu 9000.
    let run = sb.mx(&[&sizing[..], &["--mtu", "9000"]].concat());
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_golden("hints_fragments_jumbo.stdout", &run.stdout);
    // Unpaced: no rate to count, but the call-out all the same.
    let run = sb.mx(&[
        "hints",
        "--servers",
        "s3.txt",
        "--pps-per-pair",
        "max",
        "--rx-size",
        "9000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("\n  replies of 9000 bytes exceed the 1500-byte MTU: each leaves as 7 IPv4 fragments (a lost fragment loses the datagram)\n"),
        "{}",
        run.stdout
    );
}

#[test]
fn gen_check_and_hints_refuse_an_mtu_no_path_has_in_one_line() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE_IPS);
    sb.write("matrix.csv", MESH);
    let range = |got: &str| format!("mx: --mtu must be between 576 and 65535 bytes (got {got})\n");
    let words =
        |got: &str| format!("mx: --mtu wants a whole number of bytes, 576..65535 (got '{got}')\n");
    for (value, want) in [
        ("575", range("575")),
        ("65536", range("65536")),
        ("-1", range("-1")),
        ("0", range("0")),
        ("NaN", words("NaN")),
        ("1500.5", words("1500.5")),
        ("jumbo", words("jumbo")),
    ] {
        for command in [
            &["check"][..],
            &["hints", "--pps-per-host", "1000"],
            &["gen", "-o", "new.csv"],
        ] {
            let run = sb.mx(&[command, &["--mtu", value]].concat());
            assert_eq!(run.code, 2, "{command:?} --mtu {value}");
            assert_eq!(run.stderr, want, "{command:?} --mtu {value}");
            assert_eq!(run.stdout, "", "{command:?} --mtu {value}");
        }
    }
    assert!(!sb.file("new.csv").exists());
    // The bounds themselves are MTUs.
    for value in ["576", "65535"] {
        assert_eq!(sb.mx(&["check", "--mtu", value]).code, 0);
    }
}

#[test]
fn ipv6_hosts_need_an_mtu_of_1280_at_least() {
    let sb = Sandbox::new();
    sb.write("servers.txt", "a=[2001:db8::1]\nb=[2001:db8::2]\n");
    let want = "mx: --mtu must be at least 1280 bytes for IPv6 hosts, the least an IPv6 link carries (got 1279)\n";
    let generated = sb.mx(&["gen", "--mtu", "1279"]);
    assert_eq!((generated.code, generated.stderr.as_str()), (2, want));
    assert!(!sb.file("matrix.csv").exists());
    let hints = sb.mx(&["hints", "--pps-per-host", "1000", "--mtu", "1279"]);
    assert_eq!((hints.code, hints.stderr.as_str()), (2, want));
    assert_eq!(sb.mx(&["gen", "--mtu", "1280"]).code, 0);
    let check = sb.mx(&["check", "--mtu", "1279"]);
    assert_eq!((check.code, check.stderr.as_str()), (2, want));
    assert_eq!(sb.mx(&["check", "--mtu", "1280"]).code, 0);
    // IPv4 hosts go down to 576.
    sb.write("servers.txt", THREE_IPS);
    assert_eq!(sb.mx(&["gen", "--mtu", "1279"]).code, 0);
}

#[test]
fn a_gbps_budget_is_the_originals_and_the_wire_counts_the_fragments() {
    // 1 Gb/s of 8000-byte requests by the original's formula, one frame a
    // datagram (8,066 bytes): 15,496 a second per host, 7,749 per pair of 2
    // peers (rounded up), the same matrix the original writes. On the wire
    // the 6 fragments' headers make that 1.04 Gb/s, and gen says so.
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE_IPS);
    let generated = sb.mx(&["gen", "--gbps", "1", "--tx-size", "8000"]);
    assert_eq!(generated.code, 0, "{}", generated.stderr);
    assert!(
        sb.read("matrix.csv").contains(",7749,"),
        "{}",
        sb.read("matrix.csv")
    );
    assert!(
        generated.stdout.contains("1.04 Gbps out on the wire"),
        "{}",
        generated.stdout
    );
    let hints = sb.mx(&["hints", "--gbps-per-host", "1", "--tx-size", "8000"]);
    assert!(hints.stdout.contains("--pps 7749 "), "{}", hints.stdout);
}

#[test]
fn check_names_a_host_that_does_not_resolve_which_start_would_refuse() {
    // `.invalid` never resolves (RFC 6761): the resolver answers at once.
    let sb = Sandbox::new();
    sb.write(
        "matrix.csv",
        "# tx_size=64 rx_size=64 port=5300\n\
         src\\dst,a=198.18.0.1,nosuch.invalid\n\
         a=198.18.0.1,,100\n\
         nosuch.invalid,100,\n",
    );
    let run = sb.mx(&["check"]);
    // Still weighed (a matrix of bare names is check's to weigh), and named.
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "\n  NOT RESOLVED: nosuch.invalid -- no address on this machine, so mx start refuses it: \
             fix the name, or write the address in the matrix (name=address)\n"
        ),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains("a=198.18.0.1 ("), "{}", run.stdout);
}

#[test]
fn gen_prints_a_fractional_rate_as_it_was_given() {
    let sb = Sandbox::new();
    sb.write("servers.txt", &hosts(4));
    let run = sb.mx(&["gen", "--pps", "1.5"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("\n  per pair : 1.5 pps\n"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("\n  per host : 4.5 pps out, 4.5 pps back in -- every host identical\n"),
        "{}",
        run.stdout
    );
}
