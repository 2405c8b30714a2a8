#!/usr/bin/env python3
"""A long run of one agent, to show its memory stays flat.

  bench/soak.py [--minutes 30] [--every 60] [--warmup 5]

Five local agents on 127.0.0.0/8: agent `a` holds 200 flow sockets (4 peers x
50 streams, 5,000 pps per peer: 20 kpps out) and answers its peers' requests
(each of b..e sends 2,000 pps to a). Every `--every` seconds the script
samples a's resident memory (VmRSS) and the rows its report has; at the end it
prints the samples, the least-squares slope of RSS over time after the warm-up
(the allocator and the histograms reach their working size in the first
minutes) with its standard error, and whether the slope is distinguishable
from noise (|slope| > 2 SE).

Builds mx in release mode; writes nothing outside a temporary directory.
"""
import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MX = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "mx")

MATRIX = """# tx_size=64 rx_size=64 port=7400
src\\dst,a=127.0.0.1,b=127.0.0.2,c=127.0.0.3,d=127.0.0.4,e=127.0.0.5
a,,5000,5000,5000,5000
b,2000,,,,
c,2000,,,,
d,2000,,,,
e,2000,,,,
"""


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def slope(xs, ys):
    """Least-squares slope of ys over xs, and its standard error."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    resid = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(resid / (n - 2) / sxx) if n > 2 else float("inf")
    return b, se


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--every", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=5, help="minutes left out of the slope")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "matrix.csv"), "w") as f:
            f.write(MATRIX)
        procs = {}
        for host in "bcdea":
            os.makedirs(os.path.join(d, host))
            extra = ["--streams", "50", "--workers", "2"] if host == "a" else ["--workers", "1"]
            procs[host] = subprocess.Popen(
                [MX, "agent", "--matrix", "../matrix.csv", "--host", host, "--interval", "5",
                 "--duration", str(seconds + 10), *extra],
                cwd=os.path.join(d, host), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        start = time.monotonic()
        samples = []
        print(f"soak: {args.minutes:g} min, RSS of agent a every {args.every:g} s", flush=True)
        while time.monotonic() - start < seconds:
            time.sleep(args.every)
            t = (time.monotonic() - start) / 60
            rows = sum(1 for _ in open(os.path.join(d, "a", "report.csv"))) - 1
            samples.append((t, rss_kib(procs["a"].pid), rows))
            print(f"  {t:6.1f} min  RSS {samples[-1][1] / 1024:7.2f} MiB  report rows {rows}", flush=True)
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait()
    ys = [s[1] for s in samples]
    steady = [s for s in samples if s[0] > args.warmup]
    b, se = slope([s[0] for s in steady], [s[1] for s in steady])
    print()
    print("| soak | figure |")
    print("|---|---|")
    print(f"| duration, samples | {args.minutes:g} min, {len(samples)} |")
    print(f"| RSS first / last / min / max | {ys[0] / 1024:.2f} / {ys[-1] / 1024:.2f} / {min(ys) / 1024:.2f} / {max(ys) / 1024:.2f} MiB |")
    print(f"| least-squares slope after {args.warmup:g} min of warm-up | {b:+.2f} KiB/min ({b * 60 / 1024:+.3f} MiB/hour), standard error {se:.2f} KiB/min |")
    print(f"| growth beyond noise (abs(slope) > 2 SE)? | {'YES' if abs(b) > 2 * se else 'no'} |")
    # A step (the allocator taking one more page) reads as a slope over a
    # short run; a leak keeps climbing in the second half too.
    half = [s for s in samples if s[0] > args.minutes / 2]
    b2, se2 = slope([s[0] for s in half], [s[1] for s in half])
    print(f"| slope over the second half | {b2:+.2f} KiB/min, standard error {se2:.2f} KiB/min |")


if __name__ == "__main__":
    sys.exit(main())
