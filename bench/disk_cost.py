#!/usr/bin/env python3
"""What a disk in the round trip costs, side by side (paired and interleaved: a
baseline measured in the same run).

  bench/disk_cost.py [--rounds N] [--rate PPS] [--rx-size BYTES] [--dir DIR]

Two local agents, one flow a -> b at --rate requests/s (64-byte requests,
--rx-size replies), one worker each, run twice per round, interleaved:

  plain  the matrix without disk=
  disk   the same matrix with disk=replies: b reads every reply's payload
         from its data file (O_DIRECT, random 4 KiB-aligned offsets) before
         answering, a writes it to its own after timing the round trip.

Per row: the requester's RTT p50 and p99 (medians of its full intervals), the
rate it achieved, and in the disk row the IOPS each side's disk did and its
busy share. The figure of merit is the RTT the disk adds (disk - plain, and
the paired ratio) at the same achieved rate; the plain row doubles as the
check that the path without disks is untouched. The data files live in --dir
(default: a temporary directory on the filesystem of /var/tmp).

Builds mx in release mode. Traffic stays on 127.0.0.0/8.
"""
import argparse
import os
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MX = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "mx")
SECONDS = 6


def rows(path):
    lines = open(path).read().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def steady(report, kind):
    host = [r for r in report if r["dir"] == "host"]
    ticks = {r["ts"] for r in host[1:-1]}
    return [r for r in report if r["dir"] == kind and r["ts"] in ticks]


def med(rs, column):
    cells = [float(r[column]) for r in rs if r[column] != ""]
    return statistics.median(cells) if cells else None


def trial(rate, rx_size, disk, where):
    with tempfile.TemporaryDirectory(dir=where) as d:
        mode = " disk=replies" if disk else ""
        with open(os.path.join(d, "matrix.csv"), "w") as f:
            f.write(f"# tx_size=64 rx_size={rx_size} port=7500{mode}\n"
                    "src\\dst,a=127.0.0.1,b=127.0.0.2\n"
                    f"a,,{rate}\nb,,\n")
        procs = []
        for host in ("b", "a"):
            os.makedirs(os.path.join(d, host))
            procs.append(subprocess.Popen(
                [MX, "agent", "--matrix", "../matrix.csv", "--host", host, "--workers", "1",
                 "--interval", "1", "--duration", str(SECONDS), "--disk-size", "64M"],
                cwd=os.path.join(d, host), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in procs:
            p.wait()
        a, b = rows(os.path.join(d, "a", "report.csv")), rows(os.path.join(d, "b", "report.csv"))
        tx = steady(a, "tx")
        return {
            "p50": med(tx, "rtt_p50_us"),
            "p99": med(tx, "rtt_p99_us"),
            "pps": med(tx, "rep_pps"),
            "b_rd_iops": med(steady(b, "host"), "disk_rd_iops"),
            "a_wr_iops": med(steady(a, "host"), "disk_wr_iops"),
            "b_busy": med(steady(b, "host"), "disk_busy_pct"),
            "b_rd_p99": med(steady(b, "host"), "disk_rd_p99_us"),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--rx-size", type=int, default=4096)
    ap.add_argument("--dir", default="/var/tmp")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    fs = subprocess.run(["df", "-T", args.dir], capture_output=True, text=True).stdout.splitlines()[-1].split()
    print(f"data files on {args.dir} ({fs[1]} on {fs[0]}); {args.rate} requests/s of 64 bytes, "
          f"{args.rx_size}-byte replies; {args.rounds} rounds, plain and disk interleaved\n")
    pairs = []
    for i in range(args.rounds):
        plain = trial(args.rate, args.rx_size, False, args.dir)
        disk = trial(args.rate, args.rx_size, True, args.dir)
        pairs.append((plain, disk))
        print(f"  round {i + 1}: plain p50 {plain['p50']:.0f}us p99 {plain['p99']:.0f}us {plain['pps']:.0f} pps | "
              f"disk p50 {disk['p50']:.0f}us p99 {disk['p99']:.0f}us {disk['pps']:.0f} pps, "
              f"b reads {disk['b_rd_iops']:.0f} IOPS (p99 {disk['b_rd_p99']:.0f}us, busy {disk['b_busy']:.0f}%), "
              f"a writes {disk['a_wr_iops']:.0f} IOPS", flush=True)
    m = lambda side, k: statistics.median(p[side][k] for p in pairs)
    ratio = lambda k: statistics.median(p[1][k] / p[0][k] for p in pairs)
    print()
    print("| row | RTT p50 | RTT p99 | replies/s | disk |")
    print("|---|---|---|---|---|")
    print(f"| plain (no disk=) | {m(0, 'p50'):.0f} us | {m(0, 'p99'):.0f} us | {m(0, 'pps'):.0f} | |")
    print(f"| disk=replies | {m(1, 'p50'):.0f} us | {m(1, 'p99'):.0f} us | {m(1, 'pps'):.0f} | "
          f"b reads {m(1, 'b_rd_iops'):.0f} IOPS (p99 {m(1, 'b_rd_p99'):.0f} us, busy {m(1, 'b_busy'):.0f}%), "
          f"a writes {m(1, 'a_wr_iops'):.0f} IOPS |")
    print(f"| disk / plain, paired | {ratio('p50'):.2f} | {ratio('p99'):.2f} | {ratio('pps'):.3f} | |")
    print(f"\nthe disk adds {m(1, 'p50') - m(0, 'p50'):.0f} us at the median round trip")


if __name__ == "__main__":
    main()
