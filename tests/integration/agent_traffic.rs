//! Real agents exchanging real packets on loopback: rates, sizes, loss truth.

use std::time::Duration;

use crate::agents::{
    Fleet, NetNs, PORT, Row, RowExt, addr, assert_mostly_on_time, fell_behind, full_rows, header,
    mesh, mesh_v6, plain_socket,
};

fn within(got: f64, want: f64, tolerance: f64) -> bool {
    (got - want).abs() <= want * tolerance
}

/// [`fell_behind`] for `host`, one of `reports`.
fn starved(reports: &[(&str, Vec<Row>)], host: &str, ts: &str) -> Option<f64> {
    let (_, rows) = reports.iter().find(|(h, _)| *h == host)?;
    fell_behind(rows, ts)
}

/// Every flow among `hosts` (a mesh) ran at `pps` within 1%, both ways, in
/// every whole interval (at least 2): requests out, replies back, requests
/// served.
///
/// A 2-core CI VM can lose a vCPU for tens of ms: a loop that wakes later
/// than its bucket forgives cannot send what it missed (pacing.rs), so an
/// interval may fall short, but only one whose host row says the agent at
/// fault fell behind its schedule (the agent's own edge, said as such, never
/// the network's). Most intervals must still be within 1%
/// ([`assert_mostly_on_time`]).
fn assert_flows_at(fleet: &Fleet, hosts: &[&str], pps: f64) {
    assert_flows_within(fleet, hosts, pps, 0.01);
}

/// [`assert_flows_at`] within `tolerance` (a fraction of `pps`).
fn assert_flows_within(fleet: &Fleet, hosts: &[&str], pps: f64, tolerance: f64) {
    let reports: Vec<(&str, Vec<Row>)> = hosts.iter().map(|h| (*h, fleet.report(h))).collect();
    for (h, rows) in &reports {
        let whole = full_rows(rows, "host", None).len();
        let tx = full_rows(rows, "tx", None);
        assert!(
            whole >= 2 && tx.len() == whole * (hosts.len() - 1),
            "{h}: {} tx rows in {whole} whole intervals\n{}",
            tx.len(),
            fleet.log(h)
        );
        // An interval one of these rows ran short in, and the agent to blame.
        let mut excused = Vec::new();
        let mut check = |ok: bool, blamed: &[&str], ts: &str, what: String| {
            if ok {
                return;
            }
            match blamed
                .iter()
                .find_map(|b| Some((b, starved(&reports, b, ts)?)))
            {
                Some((b, ms)) => {
                    excused.push((ts.to_string(), format!("{what} ({b} {ms} ms behind)")))
                }
                None => panic!("{what}, and no agent said it fell behind\n{}", fleet.log(h)),
            }
        };
        for r in &tx {
            let (peer, ts) = (r.s("peer"), r.s("ts"));
            assert_eq!(r.f("target_pps"), Some(pps));
            let (sent, rep) = (r.f("pps").unwrap(), r.f("rep_pps").unwrap());
            check(
                within(sent, pps, tolerance),
                &[h],
                ts,
                format!("{h} -> {peer}: {sent} pps at {ts}"),
            );
            check(
                within(rep, pps, tolerance),
                &[h, peer],
                ts,
                format!("{h} <- {peer}: {rep} replies/s at {ts}"),
            );
            assert!(r.f("rtt_p50_us").unwrap() > 0.0);
        }
        // Each host serves the others: rx rows at the same rate.
        for r in full_rows(rows, "rx", None) {
            let (peer, ts) = (r.s("peer"), r.s("ts"));
            if hosts.contains(&peer) {
                let got = r.f("pps").unwrap();
                check(
                    within(got, pps, tolerance),
                    &[peer, h],
                    ts,
                    format!("{h} <- {peer}: {got} requests/s served at {ts}"),
                );
            }
        }
        let mut short: Vec<&str> = excused.iter().map(|(ts, _)| ts.as_str()).collect();
        short.sort();
        short.dedup();
        assert_mostly_on_time(h, short.len(), whole, &excused);
    }
}

#[test]
fn three_agents_deliver_1k_pps_per_flow_within_1_percent() {
    let net = 11;
    let mut fleet = Fleet::new(&mesh(net, 3, "1000", (64, 64)));
    fleet.run_all(
        &["h1", "h2", "h3"],
        &["--interval", "1", "--duration", "6.6"],
    );
    assert_flows_at(&fleet, &["h1", "h2", "h3"], 1000.0);
}

#[test]
fn ipv6_agents_on_loopback_deliver_every_flow_and_answer_from_the_address_asked() {
    // Three agents on ::1 (ports 5401-5403), 1,000 pps per flow, and a plain
    // IPv6 socket standing in for a fourth host that h1 answers.
    let mut text = mesh_v6(5400, 3, "1000", (64, 300));
    text = text.replace(
        "src\\dst,h1=[::1]:5401,h2=[::1]:5402,h3=[::1]:5403\n",
        "src\\dst,h1=[::1]:5401,h2=[::1]:5402,h3=[::1]:5403,h4=[::1]:5404\n",
    );
    let mut fleet = Fleet::new(&text);
    let peer = std::net::UdpSocket::bind("[::1]:5404").unwrap();
    peer.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    // One start instant: an agent that began before its peers had bound
    // would lose its first requests to them, in an interval the test reads.
    let start = crate::agents::start_soon();
    for h in ["h1", "h2", "h3"] {
        fleet.start(
            h,
            &["--interval", "1", "--duration", "6.6", "--start-at", &start],
        );
    }
    // A request from h4 (index 3) to h1 comes back from h1's address, at the
    // size it asks for.
    let h1: std::net::SocketAddr = "[::1]:5401".parse().unwrap();
    let mut buf = vec![0u8; 2048];
    let reply = (0..25).find_map(|seq| {
        peer.send_to(&header(0, 3, 64, 300, seq + 1, 5), h1).ok()?;
        let (len, from) = peer.recv_from(&mut buf).ok()?;
        (buf[4] == 1).then_some((len, from))
    });
    assert_eq!(reply, Some((300, h1)), "{}", fleet.log("h1"));
    fleet.wait_ok();
    // Every flow ran at its rate over IPv6, and lost nothing. (How exactly
    // an agent paces is the IPv4 rate tests' subject; here 5%: on this VM a
    // woken worker waits up to 13 ms for a core in most intervals of some
    // runs, 1-4% of a 1 kpps flow's interval, and two CI runs failed on it
    // at 1% with every reply back.)
    assert_flows_within(&fleet, &["h1", "h2", "h3"], 1000.0, 0.05);
    for h in ["h1", "h2", "h3"] {
        let rows = fleet.report(h);
        for r in full_rows(&rows, "tx", None) {
            assert_eq!(r.f("loss_pct"), Some(0.0), "{r:?}");
        }
        for r in full_rows(&rows, "host", None) {
            assert_eq!(r.f("stray_pkts"), Some(0.0), "{h}: {r:?}");
        }
    }
}

#[test]
fn two_agents_deliver_50k_pps_per_flow_within_1_percent() {
    let net = 12;
    let mut fleet = Fleet::new(&mesh(net, 2, "50000", (64, 64)));
    fleet.run_all(&["h1", "h2"], &["--interval", "1", "--duration", "6.6"]);
    assert_flows_at(&fleet, &["h1", "h2"], 50_000.0);
}

#[test]
fn unpaced_flows_run_and_have_no_target() {
    let net = 13;
    let mut fleet = Fleet::new(&mesh(net, 2, "max", (64, 64)));
    fleet.run_all(&["h1", "h2"], &["--interval", "1", "--duration", "3.2"]);
    let rows = fleet.report("h1");
    let tx = full_rows(&rows, "tx", Some("h2"));
    assert!(!tx.is_empty());
    for r in tx {
        assert_eq!(r.f("target_pps"), None, "unpaced has no target");
        assert!(r.f("pps").unwrap() > 10_000.0, "{r:?}");
        assert!(r.f("rep_pps").unwrap() > 0.0);
    }
    for r in full_rows(&rows, "host", None) {
        assert_eq!(r.f("target_pps"), None);
    }
}

#[test]
fn asymmetric_sizes_64_out_8192_back_are_counted_to_the_byte() {
    let net = 14;
    let mut fleet = Fleet::new(&mesh(net, 2, "2000", (64, 8192)));
    fleet.run_all(&["h1", "h2"], &["--interval", "1", "--duration", "3.6"]);
    let rows = fleet.report("h1");
    for r in full_rows(&rows, "tx", Some("h2")) {
        assert_eq!((r.s("size"), r.s("rep_size")), ("64", "8192"));
        let (pps, rep) = (r.f("pps").unwrap(), r.f("rep_pps").unwrap());
        // mbps = pps x bytes x 8 / 1e6, to the rounding of the columns.
        assert!((r.f("mbps").unwrap() - pps * 64.0 * 8.0 / 1e6).abs() < 0.002);
        assert!((r.f("rep_mbps").unwrap() - rep * 8192.0 * 8.0 / 1e6).abs() < 0.01);
    }
    for r in full_rows(&rows, "rx", Some("h2")) {
        let (pps, rep) = (r.f("pps").unwrap(), r.f("rep_pps").unwrap());
        assert!((r.f("mbps").unwrap() - pps * 64.0 * 8.0 / 1e6).abs() < 0.002);
        assert!((r.f("rep_mbps").unwrap() - rep * 8192.0 * 8.0 / 1e6).abs() < 0.01);
    }
}

#[test]
fn sizes_on_the_wire_are_exactly_tx_size_and_rx_size() {
    // h1 is an agent; h2 is this test, with a plain socket on h2's address.
    let net = 15;
    let mut fleet = Fleet::new(&mesh(net, 2, "500", (200, 3000)));
    let peer = plain_socket(addr(net, 2), PORT);
    fleet.start("h1", &["--interval", "1", "--duration", "2.5"]);
    let mut buf = vec![0u8; 70_000];
    // Requests from h1 arrive at exactly tx_size, asking for rx_size back.
    let (len, _) = loop {
        match peer.recv_from(&mut buf) {
            Ok(got) => break got,
            Err(_) => continue,
        }
    };
    assert_eq!(len, 200);
    assert_eq!(&buf[..4], b"MXO1");
    assert_eq!(buf[4], 0, "kind request");
    assert_eq!(u16::from_be_bytes([buf[6], buf[7]]), 0, "h1's index");
    assert_eq!(u32::from_be_bytes(buf[12..16].try_into().unwrap()), 3000);
    // A request from h2 (index 1) is answered with the reply size it asks
    // for, up to the matrix's rx_size and never past it: asking 8192 under
    // a 200/3000 matrix gets 3000, as asking 65,507 would.
    let to = std::net::SocketAddrV4::new(addr(net, 1), PORT);
    peer.send_to(&header(0, 1, 64, 8192, 1, 77), to).unwrap();
    let reply_len = loop {
        let (len, from) = peer.recv_from(&mut buf).unwrap();
        if buf[4] == 1 {
            assert_eq!(
                from,
                std::net::SocketAddr::V4(to),
                "replies come from the address asked"
            );
            break len;
        }
    };
    assert_eq!(reply_len, 3000);
    assert_eq!(
        u64::from_be_bytes(buf[16..24].try_into().unwrap()),
        1,
        "seq echoed"
    );
    assert_eq!(
        u64::from_be_bytes(buf[24..32].try_into().unwrap()),
        77,
        "t_send echoed"
    );
    assert_eq!(
        u16::from_be_bytes([buf[6], buf[7]]),
        0,
        "responder's own index"
    );
    fleet.wait(Duration::from_secs(10));
}

#[test]
fn a_peer_answering_every_other_request_reads_50_percent_loss() {
    // Known truth: the fake h2 answers exactly every other request it receives.
    let net = 16;
    let mut fleet = Fleet::new(&mesh(net, 2, "1000", (64, 64)));
    let peer = plain_socket(addr(net, 2), PORT);
    fleet.start("h1", &["--interval", "1", "--duration", "4.6"]);
    let mut buf = [0u8; 2048];
    let (mut arrived, mut answered) = (0u64, 0u64);
    let stop = std::time::Instant::now() + Duration::from_secs(6);
    while std::time::Instant::now() < stop {
        let Ok((len, from)) = peer.recv_from(&mut buf) else {
            continue;
        };
        if len < 32 || buf[4] != 0 {
            continue;
        }
        arrived += 1;
        if arrived % 2 == 0 {
            let mut reply = buf[..64].to_vec();
            reply[4] = 1;
            reply[6..8].copy_from_slice(&1u16.to_be_bytes());
            peer.send_to(&reply, from).unwrap();
            answered += 1;
        }
    }
    fleet.wait(Duration::from_secs(10));
    assert!(arrived > 4000, "{arrived}");
    assert_eq!(answered, arrived / 2);
    let rows = fleet.report("h1");
    let tx = full_rows(&rows, "tx", Some("h2"));
    assert!(tx.len() >= 3);
    for r in tx {
        let loss = r.f("loss_pct").unwrap();
        assert!((loss - 50.0).abs() <= 1.0, "round-trip loss {loss}");
        // Half of what was sent came back; what was sent is the rate, but in
        // an interval whose host row says h1 fell behind (a VM that lost its
        // vCPU: a CI run here sent ~956).
        let (sent, rep) = (r.f("pps").unwrap(), r.f("rep_pps").unwrap());
        assert!(within(rep, sent / 2.0, 0.02), "{rep} of {sent}");
        assert!(
            within(sent, 1000.0, 0.01) || fell_behind(&rows, r.s("ts")).is_some(),
            "{sent} pps, and h1 did not say it fell behind"
        );
    }
}

/// A firewall on the responder's own output refuses half its replies (each
/// an EPERM to its send, a whole GSO run at a time): its rx rows count as
/// replies sent only those the kernel took, which are exactly the replies
/// the requester got back; what was refused is the return leg's loss.
#[test]
#[ignore = "needs root: a network namespace with nftables (CI runs it: --run-ignored all)"]
fn agent_replies_the_kernel_refuses_are_not_counted_as_sent() {
    let ns = NetNs::new("mxrefused");
    ns.nft(&format!(
        "table inet mxrefused {{\n  chain out {{\n    type filter hook output priority 0;\n    udp sport {PORT} numgen random mod 2 == 0 drop\n  }}\n}}\n"
    ));
    let matrix = format!(
        "# port={PORT}\nsrc\\dst,h1={},h2={}\nh1,,4000\nh2,,\n",
        addr(1, 1),
        addr(1, 2)
    );
    let mut fleet = Fleet::in_netns(&matrix, &ns);
    // Both start on one instant, as `mx start` has them: an h1 that began
    // first would send its first requests to a port h2 had not bound yet
    // (32 of them lost, in two runs of four here), which are not the
    // firewall's doing.
    let start = crate::agents::start_soon();
    let args = ["--interval", "1", "--duration", "4", "--start-at", &start];
    fleet.run_all(&["h1", "h2"], &args);
    let total = |host: &str, dir: &str, column: &str| -> f64 {
        let rows = fleet.report(host);
        rows.iter()
            .filter(|r| r.s("dir") == dir)
            .filter_map(|r| r.f(column))
            .sum()
    };
    let sent = total("h1", "tx", "pkts");
    let back = total("h1", "tx", "rep_pkts") + total("h1", "tx", "late_pkts");
    let arrived = total("h2", "rx", "pkts") + total("h2", "rx", "late_pkts");
    let answered = total("h2", "rx", "rep_pkts");
    let log = || format!("{}\n{}", fleet.report_text("h1"), fleet.report_text("h2"));
    assert!(sent > 10_000.0, "h1 sent {sent}\n{}", log());
    assert_eq!(arrived, sent, "every request arrives\n{}", log());
    // The refused are runs of requests' worth (a batch of ~8 at 4 kpps):
    // about half, not exactly half.
    assert!(
        (0.3..=0.7).contains(&(answered / arrived)),
        "h2 counted {answered} replies sent of {arrived} requests: the refused ones too?\n{}",
        log()
    );
    assert_eq!(
        back,
        answered,
        "h1 got back what h2 says it sent\n{}",
        log()
    );
}

#[test]
fn an_absent_responder_reads_100_percent_loss() {
    let net = 17;
    let mut fleet = Fleet::new(&mesh(net, 3, "1000", (64, 64)));
    // h3 never starts: nobody listens on its address.
    fleet.run_all(&["h1", "h2"], &["--interval", "1", "--duration", "3.6"]);
    let rows = fleet.report("h1");
    for r in full_rows(&rows, "tx", Some("h3")) {
        assert_eq!(r.f("loss_pct"), Some(100.0), "{r:?}");
        assert_eq!(r.f("rep_pps"), Some(0.0));
        assert_eq!(r.f("rtt_p50_us"), None, "no RTT measured: blank");
    }
    for r in full_rows(&rows, "tx", Some("h2")) {
        assert!(r.f("loss_pct").unwrap() < 1.0);
    }
    // Nobody at h3 sends to h1: no rx row for it.
    assert!(
        rows.iter()
            .all(|r| !(r.s("dir") == "rx" && r.s("peer") == "h3"))
    );
}

#[test]
fn busy_poll_agents_deliver_and_say_so_in_the_stamp() {
    let net = 18;
    let mut fleet = Fleet::new(&mesh(net, 2, "20000", (64, 64)));
    fleet.run_all(
        &["h1", "h2"],
        &[
            "--interval",
            "1",
            "--duration",
            "6.6",
            "--busy-poll",
            "--workers",
            "1",
        ],
    );
    // Two agents each spinning a core of a two-core machine, beside the
    // test itself: a worker held off the CPU for a few ms loses its bucket's
    // overflow. 2%, and every request answered; a run of six whole
    // intervals, as every rate test (a CI run: h2 101 ms behind in one of
    // two).
    assert_flows_within(&fleet, &["h1", "h2"], 20_000.0, 0.02);
    for h in ["h1", "h2"] {
        let rows = fleet.report(h);
        for r in full_rows(&rows, "tx", None) {
            assert_eq!(r.f("rep_pkts"), r.f("pkts"), "{r:?}");
        }
        let stamp = std::fs::read_to_string(fleet.dir(h).join("agent.stamp")).unwrap();
        assert!(stamp.contains("--busy-poll"), "{stamp}");
    }
}

/// Datagram lengths a plain socket with UDP_GRO set reads from h1 for a
/// second: a length over tx_size is a run of requests the kernel kept whole.
fn lengths_read_with_gro(net: u8, extra: &[&str]) -> (Vec<usize>, String) {
    use std::os::fd::AsRawFd;
    let mut fleet = Fleet::new(&mesh(net, 2, "20000", (200, 64)));
    let peer = plain_socket(addr(net, 2), PORT);
    let on: libc::c_int = 1;
    // SAFETY: setsockopt reads one c_int from a live local.
    let rc = unsafe {
        libc::setsockopt(
            peer.as_raw_fd(),
            libc::SOL_UDP,
            104, // UDP_GRO
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "UDP_GRO on the test socket");
    let mut args = vec!["--interval", "1", "--duration", "2"];
    args.extend(extra);
    fleet.start("h1", &args);
    let mut buf = vec![0u8; 70_000];
    let mut lengths = Vec::new();
    let stop = std::time::Instant::now() + Duration::from_secs(1);
    while std::time::Instant::now() < stop {
        if let Ok((len, _)) = peer.recv_from(&mut buf) {
            lengths.push(len);
        }
    }
    fleet.wait(Duration::from_secs(10));
    (lengths, fleet.log("h1"))
}

#[test]
fn requests_go_as_gso_runs_by_default_and_one_by_one_with_no_gso() {
    let (coalesced, log) = lengths_read_with_gro(19, &[]);
    assert!(
        log.contains("datagrams: UDP GSO/GRO, runs of up to 64"),
        "{log}"
    );
    assert!(!coalesced.is_empty());
    assert!(coalesced.iter().all(|len| len % 200 == 0), "{coalesced:?}");
    // 20 kpps sends 40 requests every 2 ms: whole runs of them.
    assert!(
        coalesced.iter().any(|&len| len >= 10 * 200),
        "{coalesced:?}"
    );
    let (single, log) = lengths_read_with_gro(20, &["--no-gso"]);
    assert!(
        log.contains("datagrams: one per trip through the stack"),
        "{log}"
    );
    assert!(single.len() > 10_000, "{}", single.len());
    assert!(single.iter().all(|&len| len == 200), "{single:?}");
}

/// The host row carries what the traffic's interface counted, and a drop
/// after the interface counted a packet (a host firewall) shows as the gap
/// between what arrived there and what the agents read. In a namespace of
/// their own both agents share `lo`, which counts each packet once as sent
/// and once as received, and nothing else uses it.
#[test]
#[ignore = "needs root: a network namespace with nftables (CI runs it: --run-ignored all)"]
fn agent_host_rows_carry_the_interfaces_counts_and_a_firewall_drop_is_their_gap() {
    let ns = NetNs::new("mxnicgap");
    // 10% of the requests arriving at the agents' port are dropped on input,
    // after the interface counted them.
    ns.nft(&format!(
        "table inet mxnicgap {{\n  chain input {{\n    type filter hook input priority 0;\n    udp dport {PORT} numgen random mod 10 == 0 drop\n  }}\n}}\n"
    ));
    let matrix = format!(
        "# port={PORT}\nsrc\\dst,h1={},h2={}\nh1,,2000\nh2,,\n",
        addr(1, 1),
        addr(1, 2)
    );
    let mut fleet = Fleet::in_netns(&matrix, &ns);
    let start = crate::agents::start_soon();
    let args = [
        "--interval",
        "1",
        "--duration",
        "6",
        "--no-gso",
        "--start-at",
        &start,
    ];
    fleet.run_all(&["h1", "h2"], &args);
    let (h1, h2) = (fleet.report("h1"), fleet.report("h2"));
    let hosts =
        |rows: &[Row]| -> Vec<Row> { full_rows(rows, "host", None).into_iter().cloned().collect() };
    let (h1_hosts, h2_hosts) = (hosts(&h1), hosts(&h2));
    assert!(h2_hosts.len() >= 3, "{h2_hosts:?}");
    for h in h1_hosts.iter().chain(&h2_hosts) {
        assert_eq!(h.s("nic"), "lo", "{h:?}");
        // --no-gso: every datagram its own packet.
        assert_eq!(h.f("gso_pkts"), Some(0.0), "{h:?}");
        assert_eq!(h.f("gro_pkts"), Some(0.0), "{h:?}");
        // Loopback's driver counts each packet once and reports the count
        // as both sent and received; the agent reads all of an interface's
        // counters at one instant, so the two agree to the packet.
        let (tx, rx) = (h.f("nic_tx_pkts").unwrap(), h.f("nic_rx_pkts").unwrap());
        assert_eq!(tx, rx, "{h:?}");
        assert!(h.f("nic_tx_bytes").unwrap() > 0.0 && h.f("udp_sndbuf_errors").is_some());
    }
    // Over h2's whole intervals: what lo counted arriving, against what both
    // agents read (h2 the requests, h1 the replies): the gap is the 10%.
    let interval = |rows: &[Row], ts: &str, dir: &str, column: &str| -> f64 {
        rows.iter()
            .filter(|r| r.s("ts") == ts && r.s("dir") == dir)
            .filter_map(|r| r.f(column))
            .sum()
    };
    let (mut arrived_at_lo, mut read, mut sent) = (0.0, 0.0, 0.0);
    for h in &h2_hosts {
        let ts = h.s("ts");
        arrived_at_lo += h.f("nic_rx_pkts").unwrap();
        read += interval(&h2, ts, "rx", "pkts") + interval(&h1, ts, "tx", "rep_pkts");
        sent += interval(&h1, ts, "tx", "pkts");
    }
    let gap = arrived_at_lo - read;
    assert!(
        (gap / (0.1 * sent) - 1.0).abs() < 0.3,
        "lo counted {arrived_at_lo} arriving, the agents read {read}: a gap of {gap}, against 10% of {sent} requests"
    );
    // Interval by interval, what lo sent is what the agents handed it (their
    // requests and replies, counted by when they were sent): the counters
    // are sampled at each tick, not when the rows are written, half an
    // interval later (which put half an interval too many in the first).
    for h in &h2_hosts {
        let ts = h.s("ts");
        let handed = interval(&h1, ts, "tx", "pkts")
            + interval(&h1, ts, "rx", "rep_pkts")
            + interval(&h2, ts, "tx", "pkts")
            + interval(&h2, ts, "rx", "rep_pkts");
        let sent_by_lo = h.f("nic_tx_pkts").unwrap();
        assert!(
            (sent_by_lo / handed - 1.0).abs() < 0.05,
            "ts {ts}: lo sent {sent_by_lo}, the agents handed it {handed}"
        );
    }
    // The round trip's smallest and its jitter, per flow and per host.
    for r in full_rows(&h1, "tx", Some("h2")) {
        let (min, p50) = (r.f("rtt_min_us").unwrap(), r.f("rtt_p50_us").unwrap());
        assert!(min > 0.0 && min <= p50, "{r:?}");
        assert!(r.f("jitter_us").is_some_and(|j| j >= 0.0), "{r:?}");
    }
}

/// An agent names the interface its traffic takes and its MTU, and says
/// which datagrams that MTU cuts into IP fragments.
#[test]
#[ignore = "needs root: a network namespace (CI runs it: --run-ignored all)"]
fn agent_names_its_interface_and_the_datagrams_its_mtu_cuts() {
    let ns = NetNs::new("mxmtu");
    ns.run(&["ip", "link", "set", "lo", "mtu", "1500"], true);
    let matrix = format!(
        "# port={PORT} tx_size=8000 rx_size=64\nsrc\\dst,h1={},h2={}\nh1,,100\nh2,,\n",
        addr(1, 1),
        addr(1, 2)
    );
    let mut fleet = Fleet::in_netns(&matrix, &ns);
    fleet.run_all(&["h1", "h2"], &["--interval", "1", "--duration", "1"]);
    let log = fleet.log("h1");
    assert!(log.contains("traffic on lo (MTU 1500)"), "{log}");
    assert!(
        log.contains(
            "lo: requests of 8000 bytes exceed the 1500-byte MTU: each leaves as 6 IPv4 fragments"
        ),
        "{log}"
    );
    assert!(!log.contains("replies of 64 bytes"), "{log}");
}
