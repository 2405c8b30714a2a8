//! Traffic classes: `dscp=` in the matrix marks every request and reply,
//! checked on the wire from a capture on `lo`; two classes run side by side
//! as two fleets (two ports, two remote dirs) and are read apart.

use std::net::{Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::time::Duration;

use matrix_orchestrator::agent::udp;
use matrix_orchestrator::matrix::Dscp;
use socket2::{Domain, Protocol, Socket, Type};

use crate::agents::{Fleet, addr};
use crate::capture::{Capture, Seen};
use crate::fleet_local::agents_under;
use crate::util::{Sandbox, require_root};

/// The test network (127.33.0.x) and its ports: the marked pair, the
/// unmarked pair, and the socket-level IPv6 checks.
const NET: u8 = 33;
const EF_PORT: u16 = 5346;
const BE_PORT: u16 = 5347;
const V6_PORT: u16 = 5348;
/// The IPv6 agents' ports: h1 and h2 on ::1.
const V6_AGENTS: (u16, u16) = (5352, 5353);

/// A two-host matrix on `port`, 300 pps each way, with `keys` on its
/// header line.
fn pair(port: u16, keys: &str) -> String {
    format!(
        "# tx_size=100 rx_size=600 port={port}{keys}\nsrc\\dst,h1={},h2={}\nh1,,300\nh2,300,\n",
        addr(NET, 1),
        addr(NET, 2)
    )
}

/// The requests (to `port`) and replies (from it) among `seen`.
fn legs(seen: &[Seen], port: u16) -> (Vec<Seen>, Vec<Seen>) {
    let requests = seen.iter().filter(|s| s.dst_port == port).copied();
    let replies = seen.iter().filter(|s| s.src_port == port).copied();
    (requests.collect(), replies.collect())
}

#[test]
#[ignore = "needs root: an AF_PACKET capture on lo"]
fn requests_and_replies_carry_the_matrix_dscp_on_the_wire() {
    require_root("capturing on lo");
    let capture = Capture::udp_ports(EF_PORT, BE_PORT);
    // One pair marked EF, and beside it at the same time the control: the
    // same pair, on another port, from a matrix without dscp=.
    let mut ef = Fleet::new(&pair(EF_PORT, " dscp=EF"));
    let mut plain = Fleet::new(&pair(BE_PORT, ""));
    for fleet in [&mut ef, &mut plain] {
        for host in ["h1", "h2"] {
            fleet.start(host, &["--interval", "1", "--duration", "2"]);
        }
    }
    ef.wait_ok();
    plain.wait_ok();
    let seen = capture.drain();
    for (fleet, port, dscp) in [(&ef, EF_PORT, 46), (&plain, BE_PORT, 0)] {
        let (requests, replies) = legs(&seen, port);
        // Each pair exchanged ~1,200 datagrams each way: far more than this
        // is needed to say every one of them carried the class.
        for (leg, got) in [("requests", &requests), ("replies", &replies)] {
            assert!(
                got.len() >= 100,
                "port {port}: {} {leg} captured",
                got.len()
            );
            let wrong: Vec<&Seen> = got.iter().filter(|s| s.tos != dscp << 2).collect();
            assert!(
                wrong.is_empty(),
                "port {port}: {} of {} {leg} not DSCP {dscp}, ECN 0: {:?}",
                wrong.len(),
                got.len(),
                wrong.first()
            );
        }
        assert!(seen.iter().all(|s| !s.v6));
        // The log says what the agent marked with.
        for host in ["h1", "h2"] {
            let log = fleet.log(host);
            let says = "class: every request and reply is marked DSCP 46 (EF): TOS / traffic class byte 0xb8";
            assert_eq!(log.contains(says), dscp == 46, "{log}");
            assert_eq!(log.contains(" dscp=46\n"), dscp == 46, "{log}");
        }
    }
}

#[test]
#[ignore = "needs root: an AF_PACKET capture on lo"]
fn ipv6_agents_carry_the_matrix_dscp_in_the_traffic_class() {
    require_root("capturing on lo");
    let capture = Capture::udp_ports(V6_AGENTS.0, V6_AGENTS.1);
    let mut fleet = Fleet::new(&format!(
        "# tx_size=100 rx_size=600 dscp=AF41\nsrc\\dst,h1=[::1]:{},h2=[::1]:{}\nh1,,300\nh2,300,\n",
        V6_AGENTS.0, V6_AGENTS.1
    ));
    for host in ["h1", "h2"] {
        fleet.start(host, &["--interval", "1", "--duration", "2"]);
    }
    fleet.wait_ok();
    let seen = capture.drain();
    for port in [V6_AGENTS.0, V6_AGENTS.1] {
        let (requests, replies) = legs(&seen, port);
        for (leg, got) in [("requests", &requests), ("replies", &replies)] {
            assert!(got.len() >= 100, "port {port}: {} {leg}", got.len());
            // AF41 is DSCP 34: traffic class 0x88, every datagram IPv6.
            assert!(
                got.iter().all(|s| s.v6 && s.tos == 34 << 2),
                "port {port} {leg}: {:?}",
                got.iter().find(|s| !s.v6 || s.tos != 34 << 2)
            );
        }
    }
}

/// Sends one datagram from `socket`, marked EF, to `to`, where a receiver
/// listens at `at`.
fn send_marked(socket: &Socket, to: SocketAddr, at: SocketAddr) {
    let receiver = UdpSocket::bind(at).unwrap();
    let ef = Dscp::parse("EF").unwrap();
    udp::mark(socket, ef.tos(), &ef.label()).unwrap();
    socket.send_to(b"marked", &to.into()).unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    receiver.recv(&mut [0u8; 16]).unwrap();
}

#[test]
#[ignore = "needs root: an AF_PACKET capture on lo"]
fn an_ipv6_socket_is_marked_in_its_traffic_class_and_in_what_it_sends_to_ipv4() {
    require_root("capturing on lo");
    let capture = Capture::udp_ports(V6_PORT, V6_PORT);
    let v6 = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP)).unwrap();
    v6.set_only_v6(false).unwrap();
    // To ::1: an IPv6 packet, the class in its traffic class field.
    let v6_host = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, V6_PORT, 0, 0));
    send_marked(&v6, v6_host, v6_host);
    // To an IPv4 host through the same dual-stack socket (its IPv4-mapped
    // address): an IPv4 packet, the class in its TOS byte.
    let v4_host = SocketAddr::new(addr(NET, 3).into(), V6_PORT);
    let mapped = SocketAddrV6::new(addr(NET, 3).to_ipv6_mapped(), V6_PORT, 0, 0);
    send_marked(&v6, SocketAddr::V6(mapped), v4_host);
    let seen: Vec<Seen> = capture
        .drain()
        .into_iter()
        .filter(|s| s.dst_port == V6_PORT)
        .collect();
    assert!(
        seen.iter().any(|s| s.v6) && seen.iter().any(|s| !s.v6),
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s.tos == 0xb8), "{seen:?}");
}

#[test]
fn two_classes_run_side_by_side_from_two_remote_dirs_and_are_read_apart() {
    let sb = Sandbox::new();
    sb.write(
        "servers.txt",
        &format!("h1={}\nh2={}\n", addr(34, 1), addr(34, 2)),
    );
    let generate = |args: &[&str]| {
        let run = sb.mx(&[&["gen"][..], args].concat());
        assert_eq!(run.code, 0, "{}", run.stderr);
    };
    // Two rates, so that each summary shows which traffic it read.
    generate(&[
        "--pps", "500", "--dscp", "EF", "--port", "5350", "-o", "ef.csv",
    ]);
    generate(&["--pps", "300", "--port", "5351", "-o", "be.csv"]);
    let fleet = |class: &str| -> Vec<String> {
        [
            "--matrix",
            &format!("{class}.csv"),
            "--remote-dir",
            &format!("/var/tmp/mx-{class}"),
            "--local",
            "hosts",
        ]
        .map(String::from)
        .to_vec()
    };
    let mx = |command: &[&str], class: &str| {
        let flags = fleet(class);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        sb.mx(&[command, &flags].concat())
    };
    // The second fleet starts beside the first: its own directory, its own
    // agents (the running guard looks only at the agents of its directory).
    for (class, offered) in [("ef", "1.0 kpps, dscp=46"), ("be", "600 pps")] {
        let start = mx(&["start", "--interval", "1"], class);
        assert_eq!(start.code, 0, "{}{}", start.stdout, start.stderr);
        let running = format!("[mx] running: 2 hosts, 2 flows, 64 -> 64 bytes, {offered}\n");
        assert!(start.stdout.contains(&running), "{}", start.stdout);
    }
    let agents =
        |class: &str| agents_under(&sb.file(&format!("hosts/h1/var/tmp/mx-{class}"))).len();
    assert_eq!((agents("ef"), agents("be")), (1, 1));

    crate::util::wait_for_steady(
        &[
            crate::fleet_local::local_reports(&sb, &["h1", "h2"], "mx-ef"),
            crate::fleet_local::local_reports(&sb, &["h1", "h2"], "mx-be"),
        ]
        .concat(),
        2,
    );
    for class in ["ef", "be"] {
        let reports = format!("reports-{class}");
        let summary = mx(
            &["summarize", "--window", "2", "--reports", &reports],
            class,
        );
        assert_eq!(summary.code, 0, "{}{}", summary.stdout, summary.stderr);
        let text = &summary.stdout;
        assert!(
            text.contains(", 2 hosts, 2 flows, 64 bytes out -> 64 bytes back\n"),
            "{text}"
        );
        let class_line = "class -- DSCP 46 (EF) on every request and reply, as the agents sent them (the class on arrival is not checked)\n";
        assert_eq!(text.contains(class_line), class == "ef", "{text}");
        // Each fleet's own traffic: its own target, both hosts sending.
        let target = if class == "ef" { "1.0 kpps" } else { "600 pps" };
        let line = |lead: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(lead))
                .unwrap_or_else(|| panic!("no {lead} line: {text}"))
        };
        assert!(line("TARGET").contains(target), "{text}");
        for host in ["h1 ", "h2 "] {
            let sent = line(host).split_whitespace().nth(1).unwrap();
            assert!(sent.parse::<f64>().unwrap() > 0.0, "{text}");
        }
        // The export says the class in its header and labels every sample
        // of the marked run with it, so the two can share a dashboard.
        let export = |json: &[&str]| {
            let run = mx(
                &[
                    &["export", "--no-collect", "--reports", &reports, "-o", "-"],
                    json,
                ]
                .concat(),
                class,
            );
            assert_eq!(run.code, 0, "{}", run.stderr);
            run.stdout
        };
        let tsv = export(&[]);
        let marked = class == "ef";
        let shape = "# run shape: 64 bytes out -> 64 bytes back, dscp=46\n";
        assert_eq!(tsv.contains(shape), marked, "{tsv}");
        let samples: Vec<&str> = tsv
            .lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('!'))
            .collect();
        assert!(!samples.is_empty());
        for sample in samples {
            assert_eq!(sample.ends_with("\tdscp=46"), marked, "{sample}");
        }
        let json = export(&["--json"]);
        // The header's `#` lines, the TSV's, name the class of a marked run.
        let shape = json
            .lines()
            .find(|l| l.starts_with("# run shape: "))
            .unwrap();
        assert_eq!(shape.ends_with(", dscp=46"), marked, "{json}");
    }

    // Stopping one fleet leaves the other running.
    let stop = mx(&["stop"], "ef");
    assert_eq!(stop.code, 0, "{}{}", stop.stdout, stop.stderr);
    assert_eq!((agents("ef"), agents("be")), (0, 1));
    for class in ["be", "ef"] {
        let clean = mx(&["clean", "--yes"], class);
        assert_eq!(clean.code, 0, "{}{}", clean.stdout, clean.stderr);
    }
    assert_eq!(agents_under(&sb.file("hosts")), Vec::<String>::new());
}
