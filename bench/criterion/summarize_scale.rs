//! `mx summarize` at fleet scale: a synthetic report set of 1,000 hosts x 8
//! peers x 1 hour at 5 s intervals (720 intervals; 8 tx + 8 rx + 1 host row
//! each: 12.2 million rows, ~2 GB), summarized over its whole history; or,
//! with `--fleet 10000x8x120`, 10,000 hosts x 8 peers x 10 minutes (20.4
//! million rows). Prints the wall time of each run, their median, and the
//! peak memory (max RSS) of the summarize process.
//!
//!   cargo bench --bench summarize_scale                         # 1,000 hosts, an hour
//!   cargo bench --bench summarize_scale -- --fleet 10000x8x120  # 10,000 hosts, 10 minutes
//!   cargo bench --bench summarize_scale -- --test               # a tiny set, as CI runs it
//!
//! The data set is generated once into target/bench-data/ and reused.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use matrix_orchestrator::report::row::header_line;
use matrix_orchestrator::report::{Dir, ReportRow};

/// Writes `hosts` report files of `intervals` intervals, each host sending to
/// the next `peers` hosts (a k-regular shift graph, like `mx gen --peers`).
fn generate(dir: &Path, hosts: usize, peers: usize, intervals: i64) {
    std::fs::create_dir_all(dir).unwrap();
    let name = |i: usize| format!("h{i:04}");
    // A host row's RTT histogram: ~30 buckets around 40 us, a thin tail.
    let hist: String = (0..30)
        .map(|i| format!("{}:{}", 30_000 + i * 600, 1000 / (i + 1)))
        .collect::<Vec<_>>()
        .join(";");
    for h in 0..hosts {
        let file = std::fs::File::create(dir.join(format!("{}.csv", name(h)))).unwrap();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut text = header_line();
        for t in 0..intervals {
            let ts = 1_800_000_000 + 5 * t;
            let base = ReportRow {
                ts,
                host: name(h),
                size: 64,
                rep_size: 64,
                ..ReportRow::default()
            };
            for k in 1..=peers {
                let loss = if (h + k + t as usize).is_multiple_of(97) {
                    10.0
                } else {
                    0.0
                };
                let tx = ReportRow {
                    dir: Some(Dir::Tx),
                    peer: name((h + k) % hosts),
                    target_pps: Some(10_000.0),
                    pps: Some(10_000.0),
                    mbps: Some(5.12),
                    rep_pps: Some(10_000.0 - loss * 100.0),
                    rep_mbps: Some(5.12),
                    loss_pct: Some(loss),
                    rtt_avg_us: Some(42.0),
                    rtt_p50_us: Some(40.0),
                    rtt_p99_us: Some(90.0 + k as f64),
                    rtt_max_us: Some(300.0),
                    dup_pkts: Some(0),
                    ooo_pkts: Some(0),
                    rtt_p999_us: Some(150.0),
                    ..base.clone()
                };
                tx.write_csv(&mut text);
            }
            for k in 1..=peers {
                let rx = ReportRow {
                    dir: Some(Dir::Rx),
                    peer: name((h + hosts - k) % hosts),
                    pps: Some(10_000.0),
                    mbps: Some(5.12),
                    rep_pps: Some(10_000.0),
                    rep_mbps: Some(5.12),
                    dup_pkts: Some(0),
                    ooo_pkts: Some(0),
                    ..base.clone()
                };
                rx.write_csv(&mut text);
            }
            let host = ReportRow {
                dir: Some(Dir::Host),
                peer: "*".into(),
                target_pps: Some(80_000.0),
                pps: Some(80_000.0),
                mbps: Some(40.96),
                rep_pps: Some(80_000.0),
                rep_mbps: Some(40.96),
                loss_pct: Some(0.0),
                rtt_p50_us: Some(40.0),
                rtt_p99_us: Some(95.0),
                cpu_pct: Some(20.0),
                cpu_max_pct: Some(35.0),
                agent_cpu_pct: Some(30.0),
                workers: Some(4),
                stray_pkts: Some(0),
                rtt_p999_us: Some(150.0),
                rtt_hist: Some(hist.clone()),
                ..base.clone()
            };
            host.write_csv(&mut text);
            if text.len() > 1 << 20 {
                out.write_all(text.as_bytes()).unwrap();
                text.clear();
            }
        }
        out.write_all(text.as_bytes()).unwrap();
    }
}

/// Peak resident memory of the children waited for so far, in MiB.
fn children_max_rss_mib() -> f64 {
    // SAFETY: getrusage fills a caller-owned struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    usage.ru_maxrss as f64 / 1024.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--test");
    let fleet = args
        .iter()
        .position(|a| a == "--fleet")
        .and_then(|i| args.get(i + 1))
        .map(|shape| {
            let parts: Vec<usize> = shape.split('x').filter_map(|p| p.parse().ok()).collect();
            assert!(
                parts.len() == 3,
                "--fleet HOSTSxPEERSxINTERVALS, not {shape}"
            );
            (parts[0], parts[1], parts[2] as i64)
        });
    let (hosts, peers, intervals) = match (smoke, fleet) {
        (true, _) => (10, 3, 10),
        (false, Some(shape)) => shape,
        (false, None) => (1000, 8, 720),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    let dir = root.join(format!("reports-{hosts}x{peers}x{intervals}"));
    let marker = dir.join(".complete");
    if !marker.exists() {
        let t = Instant::now();
        let _ = std::fs::remove_dir_all(&dir);
        generate(&dir, hosts, peers, intervals);
        std::fs::write(&marker, "").unwrap();
        eprintln!(
            "generated {hosts} x {peers} x {intervals} in {:.1}s",
            t.elapsed().as_secs_f64()
        );
    }
    let rows = hosts * intervals as usize * (2 * peers + 1);
    let bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let runs = if smoke { 1 } else { 3 };
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_mx"))
            .args([
                "summarize",
                "--no-collect",
                "--window",
                "0",
                "--matrix",
                "/nonexistent",
                "--reports",
            ])
            .arg(&dir)
            .output()
            .expect("run mx summarize");
        times.push(t.elapsed().as_secs_f64());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("{hosts} hosts, {} flows", hosts * peers)),
            "{text}"
        );
    }
    times.sort_by(f64::total_cmp);
    println!(
        "summarize {rows} rows ({:.2} GB, {hosts} hosts x {peers} peers x {intervals} intervals): runs {:?} s, median {:.1} s, peak RSS {:.0} MiB",
        bytes as f64 / 1e9,
        times
            .iter()
            .map(|t| (t * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        times[times.len() / 2],
        children_max_rss_mib()
    );
}
