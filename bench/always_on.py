#!/usr/bin/env python3
"""What an always-on fleet costs a host, and how an agent holds up for long.

  bench/always_on.py [--rounds 3] [--seconds 60]      # the cost, side by side
  bench/always_on.py --soak --minutes 30 [--every 60] # the soak

The cost: 9 local agents on 127.0.1.0/24 run `mx gen --pps 10 --peers 8`
(10 requests a second to each of 8 peers, replies back) at `--interval 5`,
with `--metrics` (every agent serving /metrics, scraped every 5 s as a
Prometheus would) and without it, A B A B. Each round measures every
agent's CPU (utime + stime from /proc) over `--seconds`, and the table gives
the median agent's share of one core, each side, and their ratio.

The soak: 65 local agents, `--peers 64` at 10 pps, `--metrics` and
`--keep-report 1M`. Every `--every` seconds agent h1 (64 peers each way) is
sampled: its resident memory, its open files, its report's size, and five
scrapes of its /metrics (the slowest and the median). The table gives first
and last of each and the RSS slope after the warm-up with its standard error.

Builds mx in release mode; writes nothing outside a temporary directory.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MX = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "mx")
PORT = 19464
TICK = os.sysconf("SC_CLK_TCK")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import rss_kib, slope  # noqa: E402


def fleet(d, hosts, peers):
    """A matrix of `hosts` local hosts, `peers` each at 10 pps, in `d`."""
    with open(os.path.join(d, "servers.txt"), "w") as f:
        for i in range(1, hosts + 1):
            f.write(f"h{i}=127.0.1.{i}\n")
    subprocess.run([MX, "gen", "--pps", "10", "--peers", str(peers)], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    return [f"h{i}" for i in range(1, hosts + 1)]


def start(d, names, extra):
    procs = {}
    for name in names:
        home = os.path.join(d, name)
        os.makedirs(home, exist_ok=True)
        procs[name] = subprocess.Popen(
            [MX, "agent", "--matrix", "../matrix.csv", "--host", name, "--interval", "5",
             "--workers", "1", *extra],
            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return procs


def stop(procs):
    for p in procs.values():
        p.terminate()
    for p in procs.values():
        p.wait()


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def scrape(name, i):
    """One GET of agent `name`'s /metrics: seconds it took."""
    began = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.1.{i}:{PORT}/metrics", timeout=5) as r:
        r.read()
    return time.monotonic() - began


def cost_round(d, names, metrics, seconds):
    """The median agent's share of a core over `seconds`, after a warm-up."""
    extra = ["--metrics", str(PORT)] if metrics else []
    procs = start(d, names, extra)
    time.sleep(6)
    before = {n: cpu_seconds(p.pid) for n, p in procs.items()}
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        time.sleep(5)
        if metrics:
            for i, n in enumerate(names, 1):
                scrape(n, i)
    elapsed = time.monotonic() - began
    shares = [(cpu_seconds(p.pid) - before[n]) / elapsed * 100 for n, p in procs.items()]
    stop(procs)
    return statistics.median(shares)


def cost(args):
    with tempfile.TemporaryDirectory() as d:
        names = fleet(d, 9, 8)
        rounds = []
        for r in range(args.rounds):
            a = cost_round(d, names, False, args.seconds)
            b = cost_round(d, names, True, args.seconds)
            rounds.append((a, b))
            print(f"  round {r + 1}: without --metrics {a:.3f}% of a core, with {b:.3f}%", flush=True)
    a = statistics.median(x for x, _ in rounds)
    b = statistics.median(y for _, y in rounds)
    print()
    print("| 9 agents, --peers 8 at 10 pps, --interval 5 | median agent, % of one core |")
    print("|---|---|")
    print(f"| without --metrics | {a:.3f} |")
    print(f"| with --metrics, scraped every 5 s | {b:.3f} |")
    print(f"| ratio with / without | {b / a:.2f} |" if a > 0 else "| ratio | - |")
    print(f"| under 1% of a core? | {'yes' if b < 1.0 else 'NO'} |")


def soak(args):
    seconds = args.minutes * 60
    with tempfile.TemporaryDirectory() as d:
        names = fleet(d, 65, 64)
        procs = start(d, names, ["--metrics", str(PORT), "--keep-report", "1M"])
        h1 = procs["h1"]
        report = os.path.join(d, "h1", "report.csv")
        samples = []
        began = time.monotonic()
        print(f"soak: {args.minutes:g} min, agent h1 (64 peers) every {args.every:g} s", flush=True)
        while time.monotonic() - began < seconds:
            time.sleep(args.every)
            t = (time.monotonic() - began) / 60
            scrapes = sorted(scrape("h1", 1) for _ in range(5))
            fds = len(os.listdir(f"/proc/{h1.pid}/fd"))
            samples.append((t, rss_kib(h1.pid), fds, os.path.getsize(report), scrapes[2], scrapes[-1]))
            s = samples[-1]
            print(f"  {t:6.1f} min  RSS {s[1] / 1024:6.2f} MiB  fds {s[2]}  report {s[3] >> 10} KiB"
                  f"  scrape median {s[4] * 1e3:.1f} ms, slowest {s[5] * 1e3:.1f} ms", flush=True)
        stop(procs)
    steady = [s for s in samples if s[0] > args.warmup] or samples
    b, se = slope([s[0] for s in steady], [s[1] for s in steady]) if len(steady) > 2 else (0.0, 0.0)
    first, last = samples[0], samples[-1]
    print()
    print("| soak: agent h1, 64 peers each way, --metrics, --keep-report 1M | figure |")
    print("|---|---|")
    print(f"| duration, samples | {args.minutes:g} min, {len(samples)} |")
    print(f"| RSS first / last / max | {first[1] / 1024:.2f} / {last[1] / 1024:.2f} / {max(s[1] for s in samples) / 1024:.2f} MiB |")
    print(f"| RSS slope after {args.warmup:g} min | {b:+.2f} KiB/min, standard error {se:.2f} |")
    print(f"| open files first / last / max | {first[2]} / {last[2]} / {max(s[2] for s in samples)} |")
    print(f"| report size last / max | {last[3] >> 10} / {max(s[3] for s in samples) >> 10} KiB |")
    print(f"| scrape median / slowest of all | {statistics.median(s[4] for s in samples) * 1e3:.1f} / {max(s[5] for s in samples) * 1e3:.1f} ms |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--soak", action="store_true")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--every", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=5, help="minutes left out of the slope")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    return soak(args) if args.soak else cost(args)


if __name__ == "__main__":
    sys.exit(main())
