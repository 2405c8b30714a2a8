//! Disk runs read back: `mx summarize`'s DISK lines, its per-host `disk`
//! column and the disk advice, and `mx export`'s disk overlays, on
//! hand-written reports whose answers are known, and on a real disk run of
//! two local agents. A blank disk cell is "not measured": never read as 0.

use matrix_orchestrator::report::ReportRow;

use crate::agents::{Fleet, addr};
use crate::export::{samples, value};
use crate::summarize::{Reports, advice, mesh_reports, mesh_reports_with};
use crate::util::Sandbox;

/// What one host's disk did in each interval (its host rows' disk cells).
#[derive(Clone, Copy)]
struct Disk {
    iops: f64,
    rd_avg: f64,
    rd_p99: f64,
    wr_avg: f64,
    wr_p99: f64,
    busy: f64,
}

impl Disk {
    /// `iops` 4 KiB reads and as many writes a second.
    fn new(iops: f64, busy: f64) -> Disk {
        Disk {
            iops,
            rd_avg: 100.0,
            rd_p99: 300.0,
            wr_avg: 50.0,
            wr_p99: 150.0,
            busy,
        }
    }

    fn fill(&self, row: &mut ReportRow) {
        let mb_s = self.iops * 4096.0 / 1e6;
        row.disk_rd_iops = Some(self.iops);
        row.disk_rd_mb_s = Some(mb_s);
        row.disk_rd_avg_us = Some(self.rd_avg);
        row.disk_rd_p99_us = Some(self.rd_p99);
        row.disk_wr_iops = Some(self.iops);
        row.disk_wr_mb_s = Some(mb_s);
        row.disk_wr_avg_us = Some(self.wr_avg);
        row.disk_wr_p99_us = Some(self.wr_p99);
        row.disk_busy_pct = Some(self.busy);
    }
}

/// A full mesh of `hosts` for 3 whole intervals: every flow sends `pps` of a
/// `target`, all of it comes back with RTT p50/p99 `rtt` (us); each host's
/// disk is `disk(host)` (`None`: its disk cells blank).
fn disk_mesh(
    hosts: &[&str],
    rates: (f64, f64),
    rtt: (f64, f64),
    disk: impl Fn(&str) -> Option<Disk>,
) -> Reports {
    disk_mesh_with(hosts, rates, rtt, disk, |_, _| {})
}

/// [`disk_mesh`], each host row then changed by `more(host, row)`.
fn disk_mesh_with(
    hosts: &[&str],
    (pps, target): (f64, f64),
    rtt: (f64, f64),
    disk: impl Fn(&str) -> Option<Disk>,
    more: impl Fn(&str, &mut ReportRow),
) -> Reports {
    let mut r = Reports::default();
    for ts in [100, 101, 102] {
        for &src in hosts {
            for &dst in hosts.iter().filter(|&&d| d != src) {
                r.tx(ts, src, dst, Some(target), pps, pps, rtt.0, rtt.1);
                r.rx(ts, src, dst, pps, pps);
            }
            let n = (hosts.len() - 1) as f64;
            r.host_with(
                ts,
                src,
                target * n,
                pps * n,
                pps * n,
                10.0,
                20.0,
                5.0,
                2,
                |row| {
                    if let Some(d) = disk(src) {
                        d.fill(row);
                    }
                    more(src, row);
                },
            );
        }
    }
    r
}

fn summarize(sb: &Sandbox) -> String {
    let run = sb.mx(&["summarize", "--no-collect", "--window", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

fn has_line(text: &str, want: &str) {
    assert!(
        text.lines().any(|l| l.trim_end() == want),
        "missing line:\n{want}\nin:\n{text}"
    );
}

fn advises(text: &str, want: &str) {
    assert!(
        advice(text).iter().any(|h| h.contains(want)),
        "no hint says {want:?}:\n{text}"
    );
}

/// The line of the per-host table that starts with `host`.
fn host_line<'a>(text: &'a str, host: &str) -> &'a str {
    let start = format!("  {host} ");
    text.lines()
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no table line for {host}:\n{text}"))
}

/// A matrix for hosts a, b, c whose header says `disk=<mode>`.
fn gen_disk_matrix(sb: &Sandbox, mode: &str) {
    sb.write("servers.txt", "a=198.18.0.1\nb=198.18.0.2\nc=198.18.0.3\n");
    let run = sb.mx(&["gen", "--disk", mode, "--rx-size", "4096"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[test]
fn disk_bound_host_gets_the_disk_lines_its_column_and_rule_1() {
    let sb = Sandbox::new();
    // b's disk holds its busiest worker 90% of the time, and is slow.
    disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (50.0, 100.0), |h| {
        Some(match h {
            "b" => Disk {
                rd_avg: 800.0,
                rd_p99: 2000.0,
                ..Disk::new(2000.0, 90.0)
            },
            _ => Disk::new(2000.0, 10.0),
        })
    })
    .write(&sb);
    let out = summarize(&sb);
    // Σ of 3 hosts x 2000 x 4096 B/s; latency weighted by IOPS:
    // (100 + 800 + 100) / 3 = 333 us; p99 the worst host's worst interval.
    has_line(
        &out,
        "  DISK READ  24.6 MB/s   6.0k IOPS   avg 333us, worst host p99 2.0ms (b, its worst interval)",
    );
    has_line(
        &out,
        "  DISK WRITE 24.6 MB/s   6.0k IOPS   avg 50us, worst host p99 150us (a, its worst interval)",
    );
    has_line(&out, "  DISK BUSY 90%   of the busiest worker's time, on b");
    // No matrix: which disk I/O the RTT holds is not known, and said so.
    has_line(
        &out,
        "            RTT includes the responder's disk I/O: which (read, write or both) is in the run's matrix, not found here",
    );
    // The DISK lines follow the fleet lines, before the host table.
    let rtt = out.find("  RTT ").unwrap();
    let disk = out.find("  DISK READ").unwrap();
    assert!(rtt < disk && disk < out.find("  host ").unwrap(), "{out}");
    let header = out.lines().find(|l| l.starts_with("  host ")).unwrap();
    assert!(header.ends_with("agent  disk"), "{header}");
    assert!(host_line(&out, "b").ends_with("   90%"), "{out}");
    assert!(host_line(&out, "a").ends_with("   10%"), "{out}");
    // b: 2000 reads at 800 us and 2000 writes at 50 us: 425 us on average.
    advises(
        &out,
        "1 host(s) mostly waiting on the disk: b's busiest worker spent 90% of its time in disk I/O (4.0k IOPS at 425us each on average), with 2 worker(s) keeping one I/O in flight each, so their disk queue stayed full. The disk, not the fabric, is short: raise `mx start --disk-depth 8` for more I/O in flight at once (or `--workers 4`), use a faster disk, or lower --pps",
    );
    assert!(!out.contains("everything is landing"), "{out}");
}

#[test]
fn disk_shortfall_with_a_30_percent_busy_disk_is_the_disks_rule_3c() {
    let sb = Sandbox::new();
    // 70% of the target, CPU to spare, c's disk busy 30% of the time.
    disk_mesh(&["a", "b", "c"], (700.0, 1000.0), (50.0, 100.0), |h| {
        Some(Disk::new(1400.0, if h == "c" { 30.0 } else { 5.0 }))
    })
    .write(&sb);
    let out = summarize(&sb);
    has_line(&out, "  DISK BUSY 30%   of the busiest worker's time, on c");
    advises(
        &out,
        "a, b and c sent less than their rate (a 70.0%, b 70.0%, c 70.0%) with CPU to spare, while c's busiest worker spent 30% of its time in disk I/O: the shortfall is the disk's, not the network's",
    );
    assert_eq!(
        crate::summarize::blames(&crate::summarize::summary_doc(&sb)),
        ["c - - disk"]
    );
    // Not disk-bound (30% < 75%), and not "a flow may have failed".
    assert!(!out.contains("mostly waiting on the disk"), "{out}");
    assert!(!out.contains("failed to open"), "{out}");
}

#[test]
fn disk_shortfall_of_a_sender_behind_its_schedule_names_the_cpu_and_the_disk() {
    let sb = Sandbox::new();
    // 60% of the target; a's agent fell 310 ms behind its send schedule (no
    // quota throttled it) while its disk held its busiest worker 45%: a
    // disk run's requests wait for their payload's read, so both fit.
    disk_mesh_with(
        &["a", "b", "c"],
        (600.0, 1000.0),
        (50.0, 100.0),
        |h| Some(Disk::new(1200.0, if h == "a" { 45.0 } else { 5.0 })),
        |h, row| row.behind_ms = Some(if h == "a" { 310.0 } else { 1.0 }),
    )
    .write(&sb);
    let out = summarize(&sb);
    advises(
        &out,
        "a sent 60.0% of its rate (1.2 kpps of 2.0 kpps): a's agent fell up to 310 ms behind its send schedule, and a's busiest worker spent 45% of its time in disk I/O: the shortfall is the CPU or the disk, not the network; a run without --disk tells which",
    );
    assert!(!out.contains("so the shortfall is a's CPU"), "{out}");
}

#[test]
fn disk_tail_rule_6a_names_the_responders_disk_p99() {
    let sb = Sandbox::new();
    gen_disk_matrix(&sb, "replies");
    // p99 5 ms over a p50 of 100 us; b's reads (what a `replies` RTT holds)
    // reach 4 ms; its writes, outside the RTT, more.
    disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (100.0, 5000.0), |h| {
        Some(match h {
            "b" => Disk {
                rd_p99: 4000.0,
                wr_p99: 9000.0,
                ..Disk::new(1000.0, 15.0)
            },
            _ => Disk::new(1000.0, 5.0),
        })
    })
    .write(&sb);
    let out = summarize(&sb);
    has_line(
        &out,
        "            RTT includes the responder's disk read: each reply waits for its payload to be read from the responder's disk, as a storage read would",
    );
    advises(
        &out,
        "p99 (5.0ms) is 50x the p50 (100us), and the tail held in 18 of 18 flow intervals, on 3 of 3 hosts, and b's disk read p99 is 4.0ms (its worst interval): the tail includes the disk's own p99. Rerun without --disk to see the network's tail alone",
    );
    assert!(!out.contains("queues are building"), "{out}");

    // A disk p99 far below the tail is a small part of it: the rest is
    // waiting, on a disk busy 40% of its worker's time or in queues.
    let sb = Sandbox::new();
    gen_disk_matrix(&sb, "replies");
    disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (100.0, 5000.0), |h| {
        Some(Disk::new(1000.0, if h == "c" { 40.0 } else { 5.0 }))
    })
    .write(&sb);
    let out = summarize(&sb);
    advises(
        &out,
        "p99 (5.0ms) is 50x the p50 (100us), and the tail held in 18 of 18 flow intervals, on 3 of 3 hosts, and a's disk read p99 is 300us (its worst interval): that is a small part of the tail, so most of it is waiting: on a busy disk or in queues. Rerun without --disk to see the network's tail alone",
    );
}

#[test]
fn disk_busy_receivers_losing_requests_is_rule_4a_not_the_fabric() {
    let sb = Sandbox::new();
    // 10% of the requests into c never arrive; c's disk held its busiest
    // worker half the time. Nothing counted the drops.
    let into_c = |_: &str, dst: &str| if dst == "c" { 0.9 } else { 1.0 };
    mesh_reports_with(&["a", "b", "c"], into_c, into_c, |h, row| {
        Disk::new(1000.0, if h == "c" { 50.0 } else { 5.0 }).fill(row)
    })
    .write(&sb);
    let out = summarize(&sb);
    // c's column is dark: its disk is named before the wire, and both fit.
    advises(
        &out,
        "requests into c are lost, and only requests: 10.0% of the requests of every flow into it (a and b -> c), while the replies it gets back arrive whole; c's busiest worker spent 50% of its time in disk I/O: a responder waiting on its disk stops reading, and requests are likely lost on c itself, though its kernel counted no drop -- compare a run without --disk to tell the disk's share from the wire's",
    );
    assert_eq!(
        crate::summarize::blames(&crate::summarize::summary_doc(&sb)),
        ["c into - disk", "c into - wire"]
    );
}

#[test]
fn disk_busy_during_reply_loss_is_rule_5a() {
    let sb = Sandbox::new();
    // Every request arrives; 5% of the replies do not come back.
    mesh_reports_with(
        &["a", "b", "c"],
        |_, _| 1.0,
        |_, _| 0.95,
        |h, row| Disk::new(1000.0, if h == "b" { 35.0 } else { 5.0 }).fill(row),
    )
    .write(&sb);
    let out = summarize(&sb);
    // Every flow's replies alike: the fabric's, or b's disk.
    advises(
        &out,
        "Or the disk: b's busiest worker spent 35% of its time in disk I/O, and replies wait for it",
    );
    assert!(!out.contains("smaller --rx-size"), "{out}");
    assert_eq!(
        crate::summarize::blames(&crate::summarize::summary_doc(&sb)),
        ["- - - fabric-wide", "b - - disk"]
    );
}

#[test]
fn disk_busy_host_whose_sockets_dropped_the_requests_is_told_its_disk() {
    let sb = Sandbox::new();
    // c's kernel counted the 600 requests lost into it dropped at its full
    // sockets, with CPU to spare, while its disk held its worker 60%.
    let into_c = |_: &str, dst: &str| if dst == "c" { 0.9 } else { 1.0 };
    mesh_reports_with(&["a", "b", "c"], into_c, into_c, |h, row| {
        let c = h == "c";
        row.req_drops = Some(if c { 200 } else { 0 });
        row.rep_drops = Some(0);
        row.behind_ms = Some(1.0);
        Disk::new(1000.0, if c { 60.0 } else { 5.0 }).fill(row)
    })
    .write(&sb);
    let out = summarize(&sb);
    advises(
        &out,
        "the kernel dropped 600 of them at c's full sockets, while its busiest worker spent 60% of its time in disk I/O: requests queue in its sockets while its answers wait on the disk: c's disk, not the network",
    );
    assert_eq!(
        crate::summarize::blames(&crate::summarize::summary_doc(&sb)),
        ["c into - disk"]
    );
    assert!(
        !out.contains("did not read its sockets fast enough"),
        "{out}"
    );
}

#[test]
fn disk_latency_is_weighted_by_operations_and_p99_is_the_worst_interval() {
    let sb = Sandbox::new();
    // a: 3000 reads at 100 us, then 1000 at 500 us and 900 us p99, then
    // none (its latency cells blank); b: 2000 at 50 us throughout.
    mesh_reports_with(
        &["a", "b"],
        |_, _| 1.0,
        |_, _| 1.0,
        |h, row| {
            let (iops, avg, p99) = match (h, row.ts) {
                ("a", 100) => (3000.0, Some(100.0), Some(300.0)),
                ("a", 101) => (1000.0, Some(500.0), Some(900.0)),
                ("a", _) => (0.0, None, None),
                _ => (2000.0, Some(50.0), Some(150.0)),
            };
            row.disk_rd_iops = Some(iops);
            row.disk_rd_mb_s = Some(iops * 4096.0 / 1e6);
            row.disk_rd_avg_us = avg;
            row.disk_rd_p99_us = p99;
            row.disk_busy_pct = Some(10.0);
        },
    )
    .write(&sb);
    let out = summarize(&sb);
    // a: 4000 reads over 3 intervals (1333/s) at (3000 x 100 + 1000 x 500)
    // / 4000 = 200 us each; with b's 2000/s at 50 us: 110 us per read.
    has_line(
        &out,
        "  DISK READ  13.7 MB/s   3.3k IOPS   avg 110us, worst host p99 900us (a, its worst interval)",
    );
    // No host measured a write: no DISK WRITE line, rather than zeros.
    assert!(!out.contains("DISK WRITE"), "{out}");
    let tsv = export(&sb, &[]);
    assert_eq!(value(&tsv, "mx_disk_read_p99", "a").as_deref(), Some("900"));
    assert_eq!(
        value(&tsv, "mx_disk_read_iops", "a").as_deref(),
        Some("1333")
    );
    assert_eq!(value(&tsv, "mx_disk_write_iops", "a"), None);
}

#[test]
fn disk_modes_say_which_io_the_rtt_includes() {
    for (mode, io) in [("requests", "write"), ("both", "write and read")] {
        let sb = Sandbox::new();
        gen_disk_matrix(&sb, mode);
        disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (50.0, 100.0), |_| {
            Some(Disk::new(1000.0, 5.0))
        })
        .write(&sb);
        let out = summarize(&sb);
        let want = format!("            RTT includes the responder's disk {io}: ");
        assert!(out.contains(&want), "{mode}: {out}");
    }
}

#[test]
fn disk_lines_and_column_are_absent_from_a_run_without_disk() {
    let sb = Sandbox::new();
    mesh_reports(&["a", "b", "c"], |_, _| 1.0, |_, _| 1.0).write(&sb);
    let out = summarize(&sb);
    assert!(!out.contains("DISK"), "{out}");
    assert!(!out.contains("disk"), "{out}");
    let header = out.lines().find(|l| l.starts_with("  host ")).unwrap();
    assert!(header.ends_with("agent"), "{header}");
    has_line(
        &out,
        "  a                       2.0 kpps    2.0 kpps    2.0 kpps   4.2 Mbps    0.00%     100us   10%     20%     5%",
    );
    advises(&out, "everything is landing at the target rate");
}

#[test]
fn disk_cells_left_blank_are_not_measured_never_zero() {
    let sb = Sandbox::new();
    // Only a measured its disk; b's and c's disk cells are blank.
    disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (50.0, 100.0), |h| {
        (h == "a").then(|| Disk::new(2000.0, 40.0))
    })
    .write(&sb);
    let out = summarize(&sb);
    // The fleet's disk is a's alone: no zeros averaged in.
    has_line(
        &out,
        "  DISK READ  8.2 MB/s   2.0k IOPS   avg 100us, worst host p99 300us (a, its worst interval)",
    );
    has_line(&out, "  DISK BUSY 40%   of the busiest worker's time, on a");
    assert!(host_line(&out, "a").ends_with("   40%"), "{out}");
    for h in ["b", "c"] {
        assert!(host_line(&out, h).ends_with("     -"), "{h}: {out}");
    }
    // And export has no disk overlay for them, never a 0, and says why.
    let run = sb.mx(&["export", "--no-collect", "--window", "0"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("[mx] export: b has no mx_disk_read_mbs / mx_disk_write_mbs / mx_disk_read_iops / mx_disk_write_iops / mx_disk_read_p99 / mx_disk_write_p99 / mx_disk_busy: its host rows in the window carry no disk figures\n"),
        "{}",
        run.stderr
    );
    let tsv = run.stdout;
    assert_eq!(value(&tsv, "mx_disk_busy", "a").as_deref(), Some("40"));
    for h in ["b", "c"] {
        assert!(
            !samples(&tsv)
                .iter()
                .any(|s| s.0.starts_with("mx_disk_") && s.1 == h),
            "{h} has a disk sample:\n{tsv}"
        );
    }
}

fn export(sb: &Sandbox, extra: &[&str]) -> String {
    let mut args = vec!["export", "--no-collect", "--window", "0"];
    args.extend_from_slice(extra);
    let run = sb.mx(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

#[test]
fn disk_overlays_are_exported_for_a_disk_run_only() {
    let sb = Sandbox::new();
    gen_disk_matrix(&sb, "replies");
    disk_mesh(&["a", "b", "c"], (1000.0, 1000.0), (50.0, 100.0), |h| {
        Some(match h {
            "b" => Disk {
                rd_p99: 2000.0,
                ..Disk::new(2000.0, 90.0)
            },
            _ => Disk::new(2000.0, 10.0),
        })
    })
    .write(&sb);
    let out = export(&sb, &[]);
    assert!(
        out.contains("# run shape: 64 bytes out -> 64 bytes back, disk=replies\n"),
        "{out}"
    );
    // 2000 x 4096 B/s = 8.192 MB/s.
    for (test, want) in [
        ("mx_disk_read_mbs", "8.192"),
        ("mx_disk_write_mbs", "8.192"),
        ("mx_disk_read_iops", "2000"),
        ("mx_disk_write_iops", "2000"),
        ("mx_disk_read_p99", "2000"),
        ("mx_disk_write_p99", "150"),
        ("mx_disk_busy", "90"),
    ] {
        assert_eq!(value(&out, test, "b").as_deref(), Some(want), "{test}");
    }
    for meta in [
        "!test\tmx_disk_read_mbs\tunit=MB/s higher=good agg=sum decimals=1 short=DRD label=\"Disk read\"\n",
        "!test\tmx_disk_write_mbs\tunit=MB/s higher=good agg=sum decimals=1 short=DWR label=\"Disk write\"\n",
        "!test\tmx_disk_read_iops\tunit=IOPS higher=good agg=sum decimals=0 short=RIOP label=\"Disk read operations\"\n",
        "!test\tmx_disk_write_iops\tunit=IOPS higher=good agg=sum decimals=0 short=WIOP label=\"Disk write operations\"\n",
        "!test\tmx_disk_read_p99\tunit=us higher=bad agg=max decimals=0 short=DRP99 label=\"Disk read p99\"\n",
        "!test\tmx_disk_write_p99\tunit=us higher=bad agg=max decimals=0 short=DWP99 label=\"Disk write p99\"\n",
        "!test\tmx_disk_busy\tunit=% higher=bad min=0 max=100 agg=max decimals=0 short=DISK label=\"Busiest mx worker, time blocked on disk\"\n",
    ] {
        assert!(out.contains(meta), "{meta}in:\n{out}");
    }
    // In the overlays' order: after agent_cpu, before request_gbps.
    let order: Vec<String> = samples(&out)
        .into_iter()
        .filter(|s| s.1 == "a")
        .map(|s| s.0)
        .collect();
    let at = |t: &str| order.iter().position(|o| o == t).unwrap();
    assert!(at("mx_agent_cpu") < at("mx_disk_read_mbs"), "{order:?}");
    assert!(at("mx_disk_busy") < at("mx_request_gbps"), "{order:?}");
    // --raw: each interval's own disk cells, tagged ts=.
    let raw = export(&sb, &["--raw"]);
    let busy: Vec<_> = samples(&raw)
        .into_iter()
        .filter(|s| s.0 == "mx_disk_busy" && s.1 == "b")
        .collect();
    assert_eq!(busy.len(), 3, "{raw}");
    assert_eq!(busy[0].2, "90");
    assert_eq!(busy[0].3, "ts=100");
    let json = export(&sb, &["--json"]);
    assert!(
        json.contains("# run shape: 64 bytes out -> 64 bytes back, disk=replies"),
        "{json}"
    );

    // Without disk: none of them.
    let plain = Sandbox::new();
    mesh_reports(&["a", "b", "c"], |_, _| 1.0, |_, _| 1.0).write(&plain);
    let run = plain.mx(&["export", "--no-collect", "--window", "0", "--raw"]);
    assert!(!run.stderr.contains("disk"), "{}", run.stderr);
    let out = run.stdout;
    assert!(!out.contains("mx_disk"), "{out}");
    assert!(!out.contains("disk="), "{out}");
}

/// A number of the summary's disk lines: `1.0k` is 1000.
fn ops(text: &str) -> f64 {
    let (n, scale) = match text.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match text.strip_suffix('M') {
            Some(n) => (n, 1e6),
            None => (text, 1.0),
        },
    };
    n.parse::<f64>().unwrap_or_else(|_| panic!("ops {text}")) * scale
}

#[test]
fn disk_run_of_two_agents_summarized_end_to_end() {
    let net = 46;
    let mut fleet = Fleet::new("");
    let sb = &fleet.sandbox;
    sb.write(
        "servers.txt",
        &format!("h1={}\nh2={}\n", addr(net, 1), addr(net, 2)),
    );
    // 500 requests a second each way; each reply's 4064-byte payload is read
    // from the responder's disk and written to the requester's.
    let run = sb.mx(&[
        "gen",
        "--disk",
        "replies",
        "--rx-size",
        "4096",
        "--pps",
        "500",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let start = crate::agents::start_soon();
    for h in ["h1", "h2"] {
        fleet.start(
            h,
            &[
                "--interval",
                "1",
                "--start-at",
                &start,
                "--duration",
                "4",
                "--disk-size",
                "2M",
            ],
        );
    }
    fleet.wait_ok();
    fleet.collect_reports(&["h1", "h2"]);
    for h in ["h1", "h2"] {
        // `mx status` shows the agent's last status line: its disk part.
        let log = fleet.log(h);
        assert!(
            log.lines()
                .any(|l| l.starts_with("ts=") && l.contains(" disk=rd ")),
            "{log}"
        );
    }
    let run = fleet.sandbox.mx(&["summarize", "--no-collect"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let out = run.stdout;
    let requests: f64 = {
        let line = out.lines().find(|l| l.starts_with("  REQUESTS")).unwrap();
        let w: Vec<&str> = line.split_whitespace().collect();
        let scale = if w[2] == "kpps" { 1e3 } else { 1.0 };
        w[1].parse::<f64>().unwrap() * scale
    };
    // 2 x 500 a second asked; a box loaded by other tests may send less.
    assert!((500.0..=1100.0).contains(&requests), "{out}");
    // Each request's reply is read once (its responder) and written once
    // (its requester): the fleet's IOPS each way are the request rate.
    for label in ["  DISK READ  ", "  DISK WRITE "] {
        let line = out
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label}:\n{out}"));
        let w: Vec<&str> = line.split_whitespace().collect();
        let iops = ops(w[4]);
        assert_eq!(w[5], "IOPS", "{line}");
        assert!(
            (0.9 * requests..=1.1 * requests).contains(&iops),
            "{label} {iops} IOPS for {requests} requests/s:\n{out}"
        );
        assert!(line.contains("MB/s"), "{line}");
    }
    assert!(out.contains("  DISK BUSY "), "{out}");
    assert!(
        out.contains("            RTT includes the responder's disk read: "),
        "{out}"
    );
    let header = out.lines().find(|l| l.starts_with("  host ")).unwrap();
    assert!(header.contains("agent  disk"), "{out}");
    let h1 = host_line(&out, "h1");
    assert!(h1.trim_end().ends_with('%'), "{out}");
}
