//! Every malformed input is refused with one line naming the file, the line or
//! cell, and what is wrong, and exit code 2; nothing is written.

use crate::util::Sandbox;

/// `mx check` on a matrix with `text` must refuse with exactly `want`.
fn refuses_matrix(text: &str, want: &str) {
    let sb = Sandbox::new();
    sb.write("m.csv", text);
    let run = sb.mx(&["check", "--matrix", "m.csv"]);
    assert_eq!(
        run.stderr,
        format!("mx: {want}\n"),
        "stdout: {}",
        run.stdout
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
}

/// `mx start --dry-run` (a fleet command that would deploy this matrix) must
/// refuse it with exactly `want`, print nothing else and write nothing.
fn start_refuses_matrix(text: &str, want: &str) {
    let sb = Sandbox::new();
    sb.write("m.csv", text);
    let run = sb.mx(&["start", "--dry-run", "--matrix", "m.csv"]);
    assert_eq!(
        run.stderr,
        format!("mx: {want}\n"),
        "stdout: {}",
        run.stdout
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "", "a refused start rehearsed its steps");
    assert_eq!(files_in(&sb), ["m.csv"], "a refused start wrote files");
}

/// Names of the files in the sandbox, sorted.
fn files_in(sb: &Sandbox) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sb.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// `mx gen` with `servers` and `args` must refuse with `want` and write nothing.
fn refuses_gen(servers: &str, args: &[&str], want: &str) {
    let sb = Sandbox::new();
    sb.write("servers.txt", servers);
    let mut all = vec!["gen"];
    all.extend_from_slice(args);
    let run = sb.mx(&all);
    assert_eq!(run.stderr, format!("mx: {want}\n"));
    assert_eq!(run.code, 2);
    assert!(
        !sb.file("matrix.csv").exists(),
        "a refused gen wrote a matrix"
    );
    let leftovers: Vec<_> = std::fs::read_dir(sb.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name != "servers.txt")
        .collect();
    assert!(leftovers.is_empty(), "left behind: {leftovers:?}");
}

const THREE: &str = "h1=10.0.0.1\nh2=10.0.0.2\nh3=10.0.0.3\n";

// ---- matrix.csv ----

#[test]
fn missing_matrix_says_how_to_make_one() {
    let sb = Sandbox::new();
    let run = sb.mx(&["check"]);
    assert_eq!(
        run.stderr,
        "mx: matrix not found: matrix.csv  (make one with: mx gen --servers servers.txt --pps 10000)\n"
    );
    assert_eq!(run.code, 2);
}

#[test]
fn matrix_with_only_a_header_row() {
    refuses_matrix(
        "# tx_size=64\nsrc\\dst,a,b\n",
        "m.csv: need a header row and at least one host row",
    );
}

#[test]
fn duplicate_host_in_the_header() {
    refuses_matrix(
        "src\\dst,a,b,a=10.0.0.9\na,,5,\n",
        "m.csv:1: duplicate host 'a' in the header",
    );
}

#[test]
fn fewer_than_two_hosts() {
    refuses_matrix("src\\dst,a\na,\n", "m.csv:1: need at least 2 hosts");
}

#[test]
fn row_host_written_twice() {
    // A row copy-pasted for another host and not renamed: the original merged
    // it into the first, and c's flows were silently never run.
    let text = "src\\dst,a,b,c\na,,5,5\nb,5,,5\n# c, pasted from b\nb,5,5,\n";
    let want = "m.csv:5: row host 'b' is written twice (first on line 3) -- each host has one row";
    refuses_matrix(text, want);
    start_refuses_matrix(text, want);
}

#[test]
fn two_hosts_at_one_address_and_port() {
    // One agent would bind 127.0.0.61:5300 and answer for both.
    let text = "src\\dst,a=127.0.0.61,b=127.0.0.61,c=127.0.0.62\na,,5,5\nb,5,,5\nc,5,5,\n";
    let want = "m.csv:1: hosts 'a' and 'b' are both at 127.0.0.61:5300 -- one agent would answer for both; give each host its own address or port";
    refuses_matrix(text, want);
    start_refuses_matrix(text, want);
}

#[test]
fn two_hosts_at_one_name_and_the_header_port() {
    // Names compare without case; a token without a port is at the header's.
    refuses_matrix(
        "src\\dst,a=Db.Example:5400,b=db.example\na,,5\n# tx_size=64 port=5400\n",
        "m.csv:1: hosts 'a' and 'b' are both at Db.Example:5400 -- one agent would answer for both; give each host its own address or port",
    );
}

#[test]
fn row_host_not_in_the_header() {
    refuses_matrix(
        "src\\dst,a,b\na,,5\n# a comment\nc,5,\n",
        "m.csv:4: row host 'c' is not in the header row",
    );
}

#[test]
fn bad_host_token_in_the_header() {
    refuses_matrix(
        "src\\dst,a,=10.0.0.2\na,,5\n",
        "m.csv:1: bad host token '=10.0.0.2' (want name[=addr[:port]])",
    );
}

#[test]
fn bad_port_in_a_host_token() {
    refuses_matrix(
        "src\\dst,a,b=10.0.0.2:http\na,,5\n",
        "m.csv:1: bad port in host token 'b=10.0.0.2:http' (want name[=addr[:port]] with a port from 1 to 65535)",
    );
}

#[test]
fn header_port_out_of_range() {
    refuses_matrix(
        "# tx_size=64 rx_size=64 port=70000\nsrc\\dst,a,b\na,,5\n",
        "m.csv:1: port must be between 1 and 65535 (got 70000)",
    );
}

#[test]
fn non_numeric_rate() {
    refuses_matrix(
        "src\\dst,a,b\na,,fast\n",
        "m.csv:2: cell a -> b: 'fast' is not a packet rate (a number, empty, or 'max')",
    );
}

#[test]
fn negative_rate() {
    refuses_matrix(
        "src\\dst,a,b\na,,5\nb,-20,\n",
        "m.csv:3: cell b -> a: negative packet rate '-20'",
    );
}

#[test]
fn request_size_out_of_range() {
    refuses_matrix(
        "# tx_size=16 rx_size=64 port=5300\nsrc\\dst,a,b\na,,5\n",
        "m.csv:1: tx_size must be between 32 and 65507 bytes (got 16)",
    );
}

#[test]
fn reply_size_out_of_range() {
    refuses_matrix(
        "# tx_size=64\n# rx_size=70000\nsrc\\dst,a,b\na,,5\n",
        "m.csv:2: rx_size must be between 32 and 65507 bytes (got 70000)",
    );
}

#[test]
fn non_integer_config_value() {
    refuses_matrix(
        "# tx_size=64.5\nsrc\\dst,a,b\na,,5\n",
        "m.csv:1: bad tx_size='64.5' in the config header",
    );
}

#[test]
fn no_flows_at_all() {
    refuses_matrix(
        "src\\dst,a,b\na,,0\nb,,\n",
        "m.csv: every cell is empty -- no flows to run",
    );
}

#[test]
fn layered_header_missing_its_seed() {
    refuses_matrix(
        "# peers=1 layers=2 dwell=15\nsrc\\dst,a,b,c\na,,5,\n",
        "m.csv:1: layers=2 needs peers, seed and dwell in the header -- regenerate with `mx gen --peers K --dwell T`",
    );
}

#[test]
fn layered_header_with_an_edited_layer_count() {
    refuses_matrix(
        "# peers=1 seed=3 layers=5 dwell=15\nsrc\\dst,a,b,c,d\na,,5,,\n",
        "m.csv:1: layers=5 but 4 hosts at 1 peers per layer partition into 3 layers -- the header was edited; regenerate with `mx gen`",
    );
}

#[test]
fn a_bad_disk_mode_is_refused_naming_the_modes() {
    refuses_matrix(
        "# tx_size=4096 disk=sometimes\nsrc\\dst,a,b\na,,5\n",
        "m.csv:1: bad disk='sometimes' in the config header (want one of: off, requests, replies, both)",
    );
}

#[test]
fn a_bad_dscp_is_refused_naming_the_range_and_the_names() {
    let valid = "want 0..63 or a name: EF, AF11..AF43, CS0..CS7";
    refuses_matrix(
        "# tx_size=64\nsrc\\dst,a,b\na,,5\n# dscp=AF5\n",
        &format!("m.csv:4: bad dscp='AF5' in the config header ({valid})"),
    );
    // A whole TOS byte where the code point was meant: said so.
    refuses_matrix(
        "# dscp=184\nsrc\\dst,a,b\na,,5\n",
        &format!(
            "m.csv:1: bad dscp='184' in the config header ({valid}; 184 looks like a whole TOS byte, whose DSCP is 46)"
        ),
    );
    start_refuses_matrix(
        "# dscp=-1\nsrc\\dst,a,b\na,,5\n",
        &format!("m.csv:1: bad dscp='-1' in the config header ({valid})"),
    );
}

// ---- servers.txt ----

#[test]
fn missing_server_list() {
    let sb = Sandbox::new();
    let run = sb.mx(&["gen", "--servers", "nope.txt"]);
    assert_eq!(
        run.stderr,
        "mx: server list not found: nope.txt  (one host per line)\n"
    );
    assert_eq!(run.code, 2);
}

#[test]
fn server_list_with_one_host() {
    refuses_gen(
        "# just one\nh1\n",
        &[],
        "servers.txt: need at least 2 servers",
    );
}

#[test]
fn server_list_with_duplicate_hosts() {
    refuses_gen(
        "h1\nh2\nh1=10.0.0.1\n",
        &[],
        "servers.txt: duplicate hosts: h1 (lines 1, 3)",
    );
}

#[test]
fn server_list_with_two_hosts_at_one_address_and_port() {
    // gen would write a matrix that every reader refuses.
    refuses_gen(
        "a=10.0.0.1:5400\nb=10.0.0.2\nc=10.0.0.1\n",
        &["--port", "5400"],
        "servers.txt: hosts 'a' and 'c' are both at 10.0.0.1:5400 -- one agent would answer for both; give each host its own address or port",
    );
}

#[test]
fn server_list_with_a_bad_token() {
    refuses_gen(
        "h1\nh2:99999\n",
        &[],
        "servers.txt:2: bad port in host token 'h2:99999' (want name[=addr[:port]] with a port from 1 to 65535)",
    );
}

// ---- fleet commands ----

#[test]
fn start_refuses_two_names_that_resolve_to_one_address() {
    // The reader cannot tell `localhost` from 127.0.0.1; start resolves the
    // names before it deploys, and refuses before anything is copied.
    let sb = Sandbox::new();
    sb.write("servers.txt", "a=localhost\nb=127.0.0.1\n");
    assert_eq!(sb.mx(&["gen", "--pps", "100"]).code, 0);
    let run = sb.mx(&["start", "--dry-run"]);
    assert_eq!(
        run.stderr,
        "mx: hosts 'a' (localhost) and 'b' (127.0.0.1) both resolve to 127.0.0.1:5300 -- one agent would answer for both; give each host its own address or port\n"
    );
    assert_eq!(run.code, 2);
    assert_eq!(run.stdout, "");
    assert_eq!(files_in(&sb), ["matrix.csv", "servers.txt"]);
}

// ---- gen switches ----

#[test]
fn gen_request_size_out_of_range() {
    refuses_gen(
        THREE,
        &["--tx-size", "31"],
        "--tx-size must be between 32 and 65507 bytes (got 31)",
    );
}

#[test]
fn gen_reply_size_out_of_range() {
    refuses_gen(
        THREE,
        &["--rx-size", "65508"],
        "--rx-size must be between 32 and 65507 bytes (got 65508)",
    );
}

#[test]
fn gen_dwell_without_peers() {
    refuses_gen(
        THREE,
        &["--dwell", "15"],
        "--dwell needs --peers K: the layers rotate K peers at a time",
    );
}

#[test]
fn gen_equal_layers_without_dwell() {
    refuses_gen(
        THREE,
        &["--peers", "1", "--equal-layers"],
        "--equal-layers needs --dwell: only a layered matrix has layers to equalize",
    );
}

#[test]
fn gen_peers_out_of_range() {
    refuses_gen(
        THREE,
        &["--peers", "3"],
        "--peers must be between 1 and 2 for 3 hosts (got 3)",
    );
    refuses_gen(
        THREE,
        &["--peers", "0"],
        "--peers must be between 1 and 2 for 3 hosts (got 0)",
    );
    refuses_gen(
        "h1\nh2\nh3\nh4\nh5\n",
        &["--peers", "5", "--dwell", "15"],
        "--peers must be between 1 and 4 for 5 hosts (got 5)",
    );
}

#[test]
fn gen_negative_seed_for_a_layered_matrix() {
    refuses_gen(
        THREE,
        &["--peers", "1", "--dwell", "15", "--seed", "-4"],
        "--seed must be 0 or more for a layered matrix (got -4)",
    );
}

#[test]
fn gen_dwell_under_a_second() {
    refuses_gen(
        THREE,
        &["--peers", "1", "--dwell", "0.5"],
        "--dwell must be at least 1 second (got 0.5)",
    );
}

#[test]
fn gen_dwell_with_nothing_to_rotate() {
    refuses_gen(
        THREE,
        &["--peers", "2", "--dwell", "15"],
        "--peers 2 of 3 hosts is already every pair: --dwell has nothing to rotate (drop --dwell, or lower --peers)",
    );
}

#[test]
fn gen_zero_pps() {
    refuses_gen(
        THREE,
        &["--pps", "0"],
        "--pps must be greater than 0 (or 'max' for unpaced)",
    );
}

#[test]
fn gen_zero_gbps() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE);
    let run = sb.mx(&["gen", "--gbps", "0"]);
    assert_eq!(run.code, 2);
    assert_eq!(
        run.stderr,
        "mx: gen --gbps: a rate of 0 Gb/s carries nothing\n"
    );
    assert!(!sb.file("matrix.csv").exists());
}

#[test]
fn gen_negative_pps_is_a_usage_error() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE);
    let run = sb.mx(&["gen", "--pps", "-5"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr.contains("negative packet rate '-5'"),
        "{}",
        run.stderr
    );
    assert!(!sb.file("matrix.csv").exists());
}

#[test]
fn gen_pps_and_gbps_together_is_a_usage_error() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE);
    let run = sb.mx(&["gen", "--pps", "5", "--gbps", "1"]);
    assert_eq!(run.code, 2);
    assert_eq!(run.stderr, "mx: gen: --pps cannot be given with --gbps\n");
}

#[test]
fn a_refused_gen_leaves_the_existing_matrix_untouched() {
    let sb = Sandbox::new();
    sb.write("servers.txt", THREE);
    sb.write("matrix.csv", "precious\n");
    let run = sb.mx(&["gen", "--peers", "9"]);
    assert_eq!(run.code, 2);
    assert_eq!(sb.read("matrix.csv"), "precious\n");
}
