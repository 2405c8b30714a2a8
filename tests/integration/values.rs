//! Numbers that cannot be right are refused in one line naming the switch or
//! the cell, with exit 2, before anything touches a host: the fleet here is
//! a `--local` one whose directory must stay empty.

use crate::util::Sandbox;

const FLEET: &str = "--local";

/// A sandbox with a two-host matrix and an empty `--local` fleet directory.
fn sandbox() -> Sandbox {
    let sb = Sandbox::new();
    sb.write("servers.txt", "a=127.0.0.1\nb=127.0.0.2\n");
    assert_eq!(sb.mx(&["gen", "--pps", "100"]).code, 0);
    std::fs::create_dir(sb.file("hosts")).unwrap();
    sb
}

/// Runs `args`, and checks the refusal: exit 2, nothing on stdout, one
/// line on stderr (`mx: ...`) holding `said`, and nothing made on the fleet.
fn refused(sb: &Sandbox, args: &[&str], said: &str) {
    let run = sb.mx(args);
    assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
    assert!(run.stderr.starts_with("mx: "), "{args:?}: {}", run.stderr);
    assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    assert!(
        !run.stderr.contains("unexpected argument"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_dir(sb.file("hosts")).unwrap().count(),
        0,
        "{args:?} touched the fleet"
    );
}

#[test]
fn durations_that_cannot_be_are_refused_before_the_fleet_is_touched() {
    let sb = sandbox();
    for (value, said) in [
        ("NaN", "mx: run --for: 'NaN' is not a number of seconds"),
        ("inf", "'inf' is not a number of seconds"),
        ("0", "0 seconds runs nothing"),
        ("-5", "mx: run --for: negative duration '-5'"),
    ] {
        refused(&sb, &["run", FLEET, "hosts", "--for", value], said);
    }
    refused(
        &sb,
        &["summarize", FLEET, "hosts", "--window", "-1"],
        "negative duration '-1'",
    );
    refused(
        &sb,
        &["status", FLEET, "hosts", "--watch", "-1"],
        "negative duration '-1'",
    );
    // Ten rounds of ssh to every host a second is not a watch.
    refused(
        &sb,
        &["status", FLEET, "hosts", "--watch", "0.1"],
        "a look every 0.1s is a round of ssh to every host 10 times a second: give 1 or more",
    );
}

#[test]
fn rates_past_any_nic_or_not_numbers_are_refused_naming_the_switch_or_cell() {
    let sb = sandbox();
    refused(
        &sb,
        &["gen", "--pps", "1e12"],
        "1e12 packets/s is beyond what any NIC carries (at most 2.4 Gpps: 1600 Gb/s of the smallest Ethernet frames)",
    );
    refused(&sb, &["gen", "--pps", "-5"], "negative packet rate '-5'");
    refused(
        &sb,
        &["hints", "--servers", "servers.txt", "--pps-per-host", "-1"],
        "negative packet rate '-1'",
    );
    for (flag, value, said) in [
        ("--nic-gbps", "NaN", "'NaN' is not a rate in Gb/s"),
        ("--nic-gbps", "-1", "negative rate '-1'"),
        ("--nic-gbps", "0", "a rate of 0 Gb/s carries nothing"),
        (
            "--nic-gbps",
            "5000",
            "5000 Gb/s is beyond what any NIC carries",
        ),
        (
            "--nic-mpps",
            "inf",
            "'inf' is not a rate in millions of packets/s",
        ),
    ] {
        refused(&sb, &["check", flag, value], said);
    }
    // A cell past any NIC: the cell named, and no worker count from it.
    sb.write(
        "huge.csv",
        "# tx_size=64 rx_size=64 port=5300\n\
         src\\dst,a=127.0.0.1,b=127.0.0.2\n\
         a=127.0.0.1,,1e30\n\
         b=127.0.0.2,100,\n",
    );
    let run = sb.mx(&["check", "--matrix", "huge.csv"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        run.stderr,
        "mx: huge.csv:3: cell a -> b: 1e30 packets/s is beyond what any NIC carries (at most 2.4 Gpps: 1600 Gb/s of the smallest Ethernet frames)\n"
    );
    refused(
        &sb,
        &["start", FLEET, "hosts", "--matrix", "huge.csv"],
        "cell a -> b: 1e30 packets/s is beyond what any NIC carries",
    );
    // `inf`, `unpaced` and `max` are unpaced, as they always were, and
    // check says so in words.
    sb.write(
        "unpaced.csv",
        "src\\dst,a=127.0.0.1,b=127.0.0.2\na=127.0.0.1,,inf\nb=127.0.0.2,unpaced,\n",
    );
    let run = sb.mx(&["check", "--matrix", "unpaced.csv"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("every flow is unpaced ('max'; a cell of 'inf' or 'unpaced' means max too)"),
        "{}",
        run.stdout
    );
}
