//! Disks in the round trip (`disk=`, docs/disks.md), seen from the agents: who
//! reads and who writes in each mode, header-only packets costing nothing,
//! and (root) the I/O reaching a real block device, or the buffered path
//! where O_DIRECT is refused.

use std::path::Path;
use std::process::Command;

use crate::agents::{Fleet, PORT, Row, RowExt, addr};

/// One flow, h1 -> h2, at `rate` requests/s, with disks in `mode`.
fn one_way(net: u8, rate: u32, sizes: (u32, u32), mode: &str) -> String {
    format!(
        "# tx_size={} rx_size={} port={PORT} disk={mode}\nsrc\\dst,h1={},h2={}\nh1,,{rate}\nh2,,\n",
        sizes.0,
        sizes.1,
        addr(net, 1),
        addr(net, 2)
    )
}

const RUN: [&str; 6] = ["--interval", "1", "--duration", "4", "--disk-size", "2M"];

/// The host rows of `host` from the intervals in which the flow sent
/// throughout (not the first, nor the one the run ended in).
fn steady_host_rows(fleet: &Fleet, host: &str) -> Vec<Row> {
    let rows: Vec<Row> = fleet
        .report(host)
        .into_iter()
        .filter(|r| r.s("dir") == "host")
        .collect();
    assert!(
        rows.len() >= 3,
        "{host}: {} host rows\n{}",
        rows.len(),
        fleet.log(host)
    );
    rows[1..rows.len() - 1].to_vec()
}

/// The mean of `column` over `rows`; every cell must be measured.
fn mean(rows: &[Row], column: &str) -> f64 {
    let cells: Vec<f64> = rows
        .iter()
        .map(|r| {
            r.f(column)
                .unwrap_or_else(|| panic!("{column} blank in a disk run"))
        })
        .collect();
    cells.iter().sum::<f64>() / cells.len() as f64
}

/// Asserts `host` read and wrote at these rates (requests/s; 0 = none),
/// within 10%, and moved whole 4 KiB blocks per operation (O_DIRECT).
fn assert_disk(fleet: &Fleet, host: &str, reads: f64, writes: f64, block_bytes: f64) {
    let rows = steady_host_rows(fleet, host);
    for (dir, want) in [("rd", reads), ("wr", writes)] {
        let iops = mean(&rows, &format!("disk_{dir}_iops"));
        if want == 0.0 {
            assert_eq!(iops, 0.0, "{host} {dir}: {iops} IOPS\n{}", fleet.log(host));
        } else {
            assert!(
                (iops - want).abs() <= 0.1 * want,
                "{host} {dir}: {iops} IOPS, want {want}\n{}",
                fleet.log(host)
            );
            let mb_s = mean(&rows, &format!("disk_{dir}_mb_s"));
            let per_op = mb_s * 1e6 / iops;
            assert!(
                (per_op - block_bytes).abs() <= 0.02 * block_bytes,
                "{host} {dir}: {per_op} bytes per operation"
            );
            assert!(mean(&rows, &format!("disk_{dir}_avg_us")) > 0.0);
            assert!(mean(&rows, &format!("disk_{dir}_p99_us")) > 0.0);
        }
    }
    assert!(mean(&rows, "disk_busy_pct") > 0.0);
}

/// In every interval with a host row, first and last included, `host`'s
/// disk operations per second are the payloads per second its tx and rx
/// rows say it read or wrote, within 5%, two operations, and the payloads
/// still in flight at the interval's edges: reads of the requests it sent
/// (`requests`) and of the replies it answered with (`replies`); writes of
/// the requests that arrived and of the replies that came back.
fn assert_disk_follows_the_rows(fleet: &Fleet, host: &str, mode: &str) {
    let rows = fleet.report(host);
    // The longest round trip measured in each interval, in seconds, on any
    // host's flows (a responder's own rows time nothing).
    let rtt_max_s = |ts: &str| -> f64 {
        ["h1", "h2"]
            .iter()
            .flat_map(|h| fleet.report(h))
            .filter(|r| r.s("ts") == ts)
            .filter_map(|r| r.f("rtt_max_us"))
            .fold(0.0, f64::max)
            / 1e6
    };
    let mut previous_rtt_max_s = 0.0;
    let (requests, replies) = (mode != "replies", mode != "requests");
    let mut checked = 0;
    for h in rows.iter().filter(|r| r.s("dir") == "host") {
        let of = |dir: &str, column: &str| -> f64 {
            rows.iter()
                .filter(|r| r.s("ts") == h.s("ts") && r.s("dir") == dir)
                .filter_map(|r| r.f(column))
                .sum()
        };
        let mut reads = 0.0;
        let mut writes = 0.0;
        if requests {
            reads += of("tx", "pps");
            writes += of("rx", "pps");
        }
        if replies {
            reads += of("rx", "rep_pps");
            writes += of("tx", "rep_pps");
        }
        // One operation as a rate over the seconds the flows ran in this
        // interval (a row's rate over its packets: the host row's for what
        // the host sent, an rx row's for what it answered; a host that only
        // answers sends nothing of its own). An operation at an interval's
        // edge can count in the next interval's disk figures while its
        // packet counts in this one (the disk counts when it ran, the
        // packets the interval they belong to): two operations' worth is
        // nothing in a whole interval, and a large rate in the few
        // milliseconds the last interval runs.
        let one_op = rows
            .iter()
            .filter(|r| r.s("ts") == h.s("ts"))
            .filter_map(|r| match (r.f("pps"), r.f("pkts")) {
                (Some(pps), Some(pkts)) if pkts > 0.0 => Some(pps / pkts),
                _ => None,
            })
            .fold(0.0, f64::max);
        // A payload counts in the interval its request was sent in, and its
        // disk operation is done when the packet gets there: the
        // responder's as the request arrives, the requester's write as the
        // reply comes back. Those sent within a round trip of an edge are
        // done across it, short in this interval and over in the next: a
        // busy machine holding an agent off its core for 70 ms at 300/s
        // moves 21 writes (the round trips it delays say how long).
        let this_rtt_max_s = rtt_max_s(h.s("ts"));
        let in_flight_s = this_rtt_max_s.max(previous_rtt_max_s);
        previous_rtt_max_s = this_rtt_max_s;
        for (what, iops, payloads) in [
            ("reads", h.f("disk_rd_iops").unwrap(), reads),
            ("writes", h.f("disk_wr_iops").unwrap(), writes),
        ] {
            let in_flight = payloads * in_flight_s * one_op;
            assert!(
                (iops - payloads).abs() <= 0.05 * payloads.max(20.0) + 2.0 * one_op + in_flight,
                "{host} at {}: {iops} {what}/s for {payloads} payloads/s\n{}",
                h.s("ts"),
                fleet.report_text(host)
            );
        }
        checked += 1;
    }
    assert!(checked >= 4, "{host}: {checked} host rows");
}

/// Runs h1 and h2 on `matrix` with [`RUN`] and `extra` flags.
fn run(matrix: &str, extra: &[&str]) -> Fleet {
    let mut fleet = Fleet::new(matrix);
    let flags = [&RUN[..], extra].concat();
    fleet.run_all(&["h2", "h1"], &flags);
    fleet
}

#[test]
fn agent_disk_replies_the_responder_reads_and_the_requester_writes() {
    let fleet = run(&one_way(151, 400, (64, 4096), "replies"), &[]);
    assert_disk(&fleet, "h2", 400.0, 0.0, 4096.0);
    assert_disk(&fleet, "h1", 0.0, 400.0, 4096.0);
    for host in ["h1", "h2"] {
        assert_disk_follows_the_rows(&fleet, host, "replies");
    }
    let log = fleet.log("h1");
    assert!(
        log.contains("disk: replies -- every reply's payload is read from the responder's disk and written to the requester's at random 4096-byte-aligned offsets in "),
        "{log}"
    );
}

#[test]
fn agent_disk_requests_the_requester_reads_and_the_responder_writes() {
    let fleet = run(&one_way(152, 400, (4096, 64), "requests"), &[]);
    assert_disk(&fleet, "h1", 400.0, 0.0, 4096.0);
    assert_disk(&fleet, "h2", 0.0, 400.0, 4096.0);
    for host in ["h1", "h2"] {
        assert_disk_follows_the_rows(&fleet, host, "requests");
    }
}

#[test]
fn agent_disk_both_every_payload_is_read_by_its_sender_and_written_by_its_receiver() {
    // Payloads of 8,160 bytes: two blocks per operation.
    let fleet = run(&one_way(153, 300, (8192, 8192), "both"), &[]);
    assert_disk(&fleet, "h1", 300.0, 300.0, 8192.0);
    assert_disk(&fleet, "h2", 300.0, 300.0, 8192.0);
    for host in ["h1", "h2"] {
        assert_disk_follows_the_rows(&fleet, host, "both");
    }
}

#[test]
fn agent_disk_header_only_packets_cost_no_io() {
    let fleet = run(&one_way(154, 400, (32, 32), "both"), &[]);
    for host in ["h1", "h2"] {
        assert!(
            fleet
                .log(host)
                .contains("header-only (32 bytes), so there is nothing to put on disk"),
            "{}",
            fleet.log(host)
        );
        assert!(!fleet.dir(host).join("disk.dat").exists(), "no data file");
        for row in fleet.report(host) {
            for column in ["disk_rd_iops", "disk_wr_iops", "disk_busy_pct"] {
                assert_eq!(row.s(column), "", "{host} {column}: not measured, never 0");
            }
        }
    }
    // Header-only on one side only: the other still goes through the disks.
    let fleet = run(&one_way(154, 400, (32, 4096), "both"), &[]);
    assert_disk(&fleet, "h1", 0.0, 400.0, 4096.0);
    assert_disk(&fleet, "h2", 400.0, 0.0, 4096.0);
}

/// A filesystem mounted (`mount <args> <dir>`) for a test, unmounted on drop.
struct Mount(std::path::PathBuf);

impl Mount {
    fn new(dir: &Path, args: &[&str]) -> Mount {
        std::fs::create_dir_all(dir).unwrap();
        let status = Command::new("mount").args(args).arg(dir).status().unwrap();
        assert!(status.success(), "mount {args:?} {}", dir.display());
        Mount(dir.to_path_buf())
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A loop device with an ext4 filesystem on it, mounted; unmounted and
/// detached on drop.
struct LoopDisk {
    image: std::path::PathBuf,
    device: String,
    mount: std::path::PathBuf,
}

impl LoopDisk {
    fn new(dir: &Path, megabytes: u32) -> LoopDisk {
        let image = dir.join("disk.img");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        std::fs::File::create(&image)
            .unwrap()
            .set_len(u64::from(megabytes) << 20)
            .unwrap();
        let out = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&image)
            .output()
            .unwrap();
        assert!(out.status.success(), "losetup: {out:?}");
        let device = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let ok = |cmd: &mut Command| assert!(cmd.status().unwrap().success(), "{cmd:?}");
        ok(Command::new("mkfs.ext4").args(["-q", &device]));
        ok(Command::new("mount").arg(&device).arg(&mount));
        LoopDisk {
            image,
            device,
            mount,
        }
    }

    /// Reads and writes the device completed so far (/sys/block/<dev>/stat).
    fn completed(&self) -> (u64, u64) {
        let name = self.device.trim_start_matches("/dev/");
        let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        let fields: Vec<u64> = stat
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        (fields[0], fields[4])
    }
}

impl Drop for LoopDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

#[test]
#[ignore = "needs root: a loop device (CI runs it: --run-ignored all)"]
fn agent_disk_io_reaches_the_block_device() {
    crate::util::require_root("a loop device");
    let mut fleet = Fleet::new(&one_way(155, 300, (64, 4096), "replies"));
    let disk = LoopDisk::new(fleet.sandbox.path(), 64);
    let files: Vec<String> = ["h1", "h2"]
        .iter()
        .map(|h| disk.mount.join(format!("{h}.dat")).display().to_string())
        .collect();
    // Prepared first and synced, so the run's own I/O is all the device sees.
    for file in &files {
        let out = fleet.agent_here(&["--prepare-disk", "--disk-file", file, "--disk-size", "2M"]);
        assert!(out.status.success(), "{out:?}");
    }
    assert!(Command::new("sync").status().unwrap().success());
    let before = disk.completed();
    fleet.start("h2", &[&RUN[..], &["--disk-file", &files[1]]].concat());
    fleet.start("h1", &[&RUN[..], &["--disk-file", &files[0]]].concat());
    fleet.wait_ok();
    let after = disk.completed();
    let (reads, writes) = (after.0 - before.0, after.1 - before.1);
    // Over the whole run (4 s of sending): the responder's reads and the
    // requester's writes, each ~300/s, reached the device itself.
    for (what, count) in [("reads", reads), ("writes", writes)] {
        assert!(
            (1000..=1500).contains(&count),
            "{what} on {}: {count}\n{}\n{}",
            disk.device,
            fleet.log("h1"),
            fleet.log("h2")
        );
    }
    let log = fleet.log("h2");
    assert!(
        log.contains("; O_DIRECT, so every read and write reaches the device"),
        "{log}"
    );
}

#[test]
#[ignore = "needs root: mounting a ramfs (CI runs it: --run-ignored all)"]
fn agent_disk_buffered_where_o_direct_is_refused() {
    crate::util::require_root("mounting a ramfs");
    let mut fleet = Fleet::new(&one_way(156, 300, (64, 4096), "replies"));
    let ram = Mount::new(&fleet.sandbox.path().join("ram"), &["-t", "ramfs", "ramfs"]);
    let mount = &ram.0;
    for host in ["h2", "h1"] {
        let file = mount.join(format!("{host}.dat")).display().to_string();
        fleet.start(host, &[&RUN[..], &["--disk-file", &file]].concat());
    }
    fleet.wait_ok();
    let log = fleet.log("h2");
    // ramfs refuses O_DIRECT; the disk line names what it is instead.
    assert!(
        log.contains(
            "(2.0 MiB); on ramfs, a memory filesystem, so the I/O is memory, not a device"
        ),
        "{log}"
    );
    // Buffered: exact bytes (the 4,064-byte payload), not whole blocks.
    assert_disk(&fleet, "h2", 300.0, 0.0, 4064.0);
    assert_disk(&fleet, "h1", 0.0, 300.0, 4064.0);
}

/// A blkio cgroup (v1) that holds its processes to `iops` reads per second on
/// one block device; removed on drop.
struct Throttle(std::path::PathBuf);

impl Throttle {
    fn reads(device: &str, iops: u32) -> Option<Throttle> {
        let root = Path::new("/sys/fs/cgroup/blkio");
        if !root.join("blkio.throttle.read_iops_device").exists() {
            return None;
        }
        let dir = root.join(format!("mx-slow-disk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let name = device.trim_start_matches("/dev/");
        let numbers = std::fs::read_to_string(format!("/sys/block/{name}/dev")).unwrap();
        std::fs::write(
            dir.join("blkio.throttle.read_iops_device"),
            format!("{} {iops}", numbers.trim()),
        )
        .unwrap();
        Some(Throttle(dir))
    }

    fn hold(&self, pid: u32) {
        std::fs::write(self.0.join("cgroup.procs"), pid.to_string()).unwrap();
    }
}

impl Drop for Throttle {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
#[ignore = "needs root: a loop device held to 150 reads/s by a blkio cgroup (CI runs it: --run-ignored all)"]
fn agent_disk_a_disk_that_cannot_keep_up_is_named_not_the_fabric() {
    crate::util::require_root("a throttled loop device");
    let net = 157;
    let mut fleet = Fleet::new(&one_way(net, 600, (64, 4096), "replies"));
    let disk = LoopDisk::new(fleet.sandbox.path(), 64);
    let Some(throttle) = Throttle::reads(&disk.device, 150) else {
        panic!("this kernel has no blkio throttle (cgroup v1) to slow the disk with");
    };
    let file = |h: &str| disk.mount.join(format!("{h}.dat")).display().to_string();
    let start = crate::agents::start_soon();
    for host in ["h2", "h1"] {
        let flags = [
            "--interval",
            "1",
            "--duration",
            "6",
            "--disk-size",
            "2M",
            "--start-at",
            &start,
            "--disk-file",
            &file(host),
        ];
        let child = fleet.spawn(host, &flags);
        // The responder's reads go to the slow disk; the requester's writes
        // are not held.
        if host == "h2" {
            throttle.hold(child);
        }
    }
    fleet.wait_ok();
    // The device did what the cgroup allows: h2's reads ~150/s, and it was
    // busy on them nearly all the time.
    let rows = steady_host_rows(&fleet, "h2");
    let reads = mean(&rows, "disk_rd_iops");
    assert!((100.0..=170.0).contains(&reads), "h2 reads {reads}/s");
    assert!(
        mean(&rows, "disk_busy_pct") >= 75.0,
        "{}",
        fleet.report_text("h2")
    );
    let run = fleet.summarize(&["h1", "h2"], &[]);
    let out = run.stdout;
    // Shown with `--success-output immediate`: what the operator reads.
    println!("{out}");
    assert!(out.contains("DISK READ"), "{out}");
    assert!(out.contains("waiting on the disk"), "{out}");
    assert!(out.contains("h2"), "{out}");
}

#[test]
#[ignore = "needs root: mounting a small tmpfs (CI runs it: --run-ignored all)"]
fn agent_disk_a_small_tmpfs_takes_a_small_file_refuses_a_big_one_and_is_called_out() {
    crate::util::require_root("mounting a small tmpfs");
    let fleet = Fleet::new(&one_way(158, 100, (64, 4096), "replies"));
    let small = Mount::new(
        &fleet.sandbox.path().join("small"),
        &["-t", "tmpfs", "-o", "size=8m", "tmpfs"],
    );
    let mount = &small.0;
    let file = mount.join("disk.dat").display().to_string();
    let prepare = |size: &str| {
        fleet.agent_here(&["--prepare-disk", "--disk-file", &file, "--disk-size", size])
    };
    // 16 MiB on an 8 MiB filesystem: refused, one line, nothing left behind.
    let big = prepare("16M");
    assert_eq!(big.status.code(), Some(2));
    let said = String::from_utf8_lossy(&big.stderr);
    assert!(
        said.contains(
            "a 16.0 MiB data file would leave its filesystem all but full (8.0 MiB free)"
        ),
        "{said}"
    );
    assert_eq!(
        std::fs::read_dir(mount).unwrap().count(),
        0,
        "nothing written"
    );
    // 4 MiB fits (the headroom is in proportion): written, then reused.
    let small = prepare("4M");
    let said = String::from_utf8_lossy(&small.stdout);
    assert!(small.status.success(), "{small:?}");
    assert!(said.contains("disk: wrote"), "{said}");
    assert!(
        said.contains("tmpfs, a memory filesystem: its I/O is memory, not a device"),
        "{said}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 4 << 20);
    let again = prepare("4M");
    assert!(String::from_utf8_lossy(&again.stdout).contains("disk: reusing"));
    // Resized: the 4 MiB file it replaces counts as free space (7 of 8 MiB
    // is under 95%), and goes first, so the new one fits beside nothing.
    let resized = prepare("7M");
    assert!(resized.status.success(), "{resized:?}");
    // Past 95% of all there is: refused, and the file it has stays.
    assert_eq!(prepare("7.9M").status.code(), Some(2));
    assert_eq!(
        std::fs::metadata(&file).unwrap().len(),
        7 << 20,
        "the refused size left the old file"
    );
}

/// A slow device that serves many operations at once: a FUSE filesystem
/// (tests/lab/slowfs.py, Debian's python3-fusepy) at `mount` whose every
/// read and write takes `delay_ms`, each in a thread of its own, over the
/// directory `backing`. It counts the reads it served per wall-clock
/// second. Unmounted on drop.
struct SlowFs {
    backing: std::path::PathBuf,
    mount: std::path::PathBuf,
    counts: std::path::PathBuf,
    server: std::process::Child,
}

impl SlowFs {
    fn new(dir: &Path, delay_ms: u32) -> SlowFs {
        let (backing, mount) = (dir.join("backing"), dir.join("slow"));
        for d in [&backing, &mount] {
            std::fs::create_dir_all(d).unwrap();
        }
        let counts = dir.join("slowfs-counts.json");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab/slowfs.py");
        let log = std::fs::File::create(dir.join("slowfs.log")).unwrap();
        let server = Command::new("/usr/bin/python3")
            .arg(script)
            .args([&backing, &mount])
            .arg(delay_ms.to_string())
            .arg(&counts)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("/usr/bin/python3 runs tests/lab/slowfs.py (python3-fusepy)");
        let fs = SlowFs {
            backing,
            mount,
            counts,
            server,
        };
        let mounted = || {
            std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .contains(&format!(" {} ", fs.mount.display()))
        };
        let waited = std::time::Instant::now();
        while !mounted() {
            assert!(
                waited.elapsed() < std::time::Duration::from_secs(10),
                "slowfs did not mount: {}",
                std::fs::read_to_string(dir.join("slowfs.log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        fs
    }

    /// The reads it served, per wall-clock second (Unix seconds).
    fn reads(&self) -> std::collections::BTreeMap<i64, f64> {
        let text = std::fs::read_to_string(&self.counts).unwrap_or_else(|_| "{}".into());
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        doc["reads"]
            .as_object()
            .map(|per| {
                per.iter()
                    .map(|(s, n)| (s.parse().unwrap(), n.as_f64().unwrap()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for SlowFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// `--disk-depth`: each worker keeps that many disk operations in flight.
/// The responder's disk is a device whose every read takes 20 ms but that
/// serves many at once; one worker answers 100 requests/s, each after a
/// read. One read in flight does 50 a second and falls behind; eight hold
/// the rate. Either way every read the device served is counted, in the
/// interval it was done in, and the rows and the status line say the depth.
#[test]
#[ignore = "needs root: a FUSE filesystem (CI runs it: --run-ignored all)"]
fn agent_disk_depth_8_holds_the_rate_one_read_in_flight_does_not() {
    crate::util::require_root("a FUSE filesystem");
    for (depth, reads, replies) in [
        (1, 40.0..=52.0, 0.0..=60.0),
        (8, 90.0..=110.0, 90.0..=110.0),
    ] {
        let mut fleet = Fleet::new(&one_way(89, 100, (64, 4096), "replies"));
        let slow = SlowFs::new(fleet.sandbox.path(), 20);
        // Written where it is fast, read where it is slow: only the run's
        // own reads go through the slow device.
        let written = slow.backing.join("h2.dat").display().to_string();
        let out = fleet.agent_here(&[
            "--prepare-disk",
            "--disk-file",
            &written,
            "--disk-size",
            "2M",
        ]);
        assert!(out.status.success(), "{out:?}");
        let slow_file = slow.mount.join("h2.dat").display().to_string();
        let fast_file = fleet.sandbox.path().join("h1.dat").display().to_string();
        let start = crate::agents::start_soon();
        let depth_text = depth.to_string();
        for (host, file) in [("h2", &slow_file), ("h1", &fast_file)] {
            let flags = [
                &RUN[..],
                &["--start-at", &start, "--workers", "1", "--disk-file", file],
                &["--disk-depth", &depth_text],
            ]
            .concat();
            fleet.start(host, &flags);
        }
        fleet.wait_ok();
        let log = fleet.log("h2");
        assert!(log.contains("O_DIRECT"), "one device read per read\n{log}");
        let rows = steady_host_rows(&fleet, "h2");
        let served = slow.reads();
        for row in &rows {
            assert_eq!(row.f("disk_depth"), Some(f64::from(depth)), "{log}");
            // The interval ending at `ts` is the wall-clock second before it.
            let ts = row.f("ts").unwrap() as i64;
            let (counted, done) = (row.f("disk_rd_iops").unwrap(), served[&(ts - 1)]);
            assert!(
                (counted - done).abs() <= 3.0 + 0.05 * done,
                "depth {depth}: the interval to {ts} counted {counted} reads, the device served {done}\n{served:?}\n{}",
                fleet.report_text("h2")
            );
            assert!(
                reads.contains(&counted),
                "depth {depth}: {counted} reads/s\n{}",
                fleet.report_text("h2")
            );
        }
        assert!(log.contains(&format!("% depth={depth}")), "{log}");
        // What came back to the requester: the rate, or what one read in
        // flight allows.
        let back: Vec<f64> = steady_host_rows(&fleet, "h1")
            .iter()
            .map(|r| r.f("rep_pps").unwrap())
            .collect();
        let mean_back = back.iter().sum::<f64>() / back.len() as f64;
        assert!(
            replies.contains(&mean_back),
            "depth {depth}: {mean_back} replies/s of 100\n{}",
            fleet.report_text("h1")
        );
        // The summary names the lever where the disk held the run back,
        // with the figures it rests on.
        let run = fleet.summarize(&["h1", "h2"], &["--json"]);
        let doc: serde_json::Value = serde_json::from_str(&run.stdout).expect("--json");
        let disk: Vec<&serde_json::Value> = doc["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["kind"] == "disk")
            .collect();
        if depth == 1 {
            assert_eq!(disk.len(), 1, "{doc}");
            let text = disk[0]["text"].as_str().unwrap();
            assert!(
                text.contains("with 1 worker(s) keeping one I/O in flight each, so their disk queue stayed full")
                    && text.contains("raise `mx start --disk-depth 8` for more I/O in flight at once"),
                "{text}"
            );
            let figures = &disk[0]["figures"];
            assert_eq!(figures["disk_depth"], 1.0, "{figures}");
            assert!(
                figures["disk_busy_pct"].as_f64().unwrap() >= 90.0,
                "{figures}"
            );
        } else {
            assert!(disk.is_empty(), "{doc}");
        }
    }
}

/// The agent's own raise of its open-file limit counts its disk threads'
/// handles: two each (the data file, the responder socket) and an eventfd
/// per worker. Under a hard limit of 200, 2 workers at depth 64 need 258
/// for the disk alone: refused before anything runs, the disk named, with
/// the fix; at depth 1 the same run needs 71, and raises its soft limit of
/// 50 to that.
#[test]
fn agent_counts_its_disk_threads_handles_against_the_open_file_limit() {
    use std::os::unix::process::CommandExt;
    let fleet = Fleet::new(&one_way(87, 100, (64, 4096), "replies"));
    let file = fleet.sandbox.path().join("h1.dat").display().to_string();
    let run = |depth: &str| {
        let flags = [
            &RUN[..],
            &[
                "--workers",
                "2",
                "--disk-depth",
                depth,
                "--disk-file",
                &file,
            ],
        ]
        .concat();
        let mut cmd = fleet.command_from("h1", "../matrix.csv", &flags);
        // SAFETY: setrlimit is async-signal-safe, as pre_exec requires.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: 50,
                    rlim_max: 200,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let status = cmd.status().unwrap();
        (status.code(), fleet.log("h1"))
    };
    let (code, log) = run("64");
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("this run needs ~323 file descriptors (1 flows; each is a socket, and 258 disk handles: two per disk thread, --workers x --disk-depth of them) but the hard limit is 200"),
        "{log}"
    );
    assert!(log.contains("a lower --disk-depth"), "{log}");
    let (code, log) = run("1");
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("fd limit: soft 50 -> 71"), "{log}");
}
