#!/usr/bin/env python3
"""What an mx agent costs, and the latency it adds, measured side by side.

  bench/agent_costs.py [--rounds N] [--baseline MX_BINARY]

Rows, interleaved per round (paired: each round measures every row, so
ratios compare figures taken minutes apart, never hours):

  latency   RTT p50 at 1,000 pps, 64-byte messages, loopback: sockperf
            ping-pong (its reported p50 is half the round trip, so x2), mx in
            its default mode, mx --busy-poll, and mx in sockperf's shape (its
            client spins between paced messages, its server sleeps: the
            sender --busy-poll, the responder not). Ratio: mx / sockperf.
  light     an agent sending 1,000 pps in total (one flow) and answering its
            peer: CPU of the whole agent process, in % of one core, from
            /proc/<pid>/stat over the run. Beside it, in the same round, the
            floor: bench/rr_ceiling.c's paced loop (paced=1000), a process that
            does only that (epoll, sendmmsg, recvmmsg) with the same wake-ups,
            measured the same way. Ratio: mx / floor.
  pacing    one flow at 100, 1k, 10k, 100k and 1M pps: achieved / target
            over the run and the worst full interval.
  1k flows  an agent holding 1,000 flow sockets (4 peers x 250 streams at 100
            pps each): achieved rate per peer vs target, and the process's
            peak and final resident memory (flat = no growth over the run).

With --baseline, the latency and light-load rows are measured again with that
binary in every round, right after this build's, and printed with the paired
ratio new / baseline.

Needs sockperf (apt-get install sockperf); builds mx in release mode.
Traffic stays on 127.0.0.0/8.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MX = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "mx")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def memory_kib(pid):
    status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
    return int(status["VmHWM"].split()[0]), int(status["VmRSS"].split()[0])


def report_rows(path):
    lines = open(path).read().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def run_pair(matrix_text, seconds, extra_a=(), extra_b=(), watch=None, mx=MX):
    """Runs agents a and b; `watch(pid_a)` is sampled while a runs. Returns a's rows."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "matrix.csv"), "w") as f:
            f.write(matrix_text)
        procs = {}
        for host, extra in (("b", extra_b), ("a", extra_a)):
            os.makedirs(os.path.join(d, host))
            procs[host] = subprocess.Popen(
                [mx, "agent", "--matrix", "../matrix.csv", "--host", host, "--interval", "1",
                 "--duration", str(seconds), *extra],
                cwd=os.path.join(d, host), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        samples = []
        if watch:
            time.sleep(1.0)
            while procs["a"].poll() is None:
                try:
                    samples.append(watch(procs["a"].pid))
                except (FileNotFoundError, ProcessLookupError):
                    break
                time.sleep(0.5)
        for p in procs.values():
            p.wait()
        return report_rows(os.path.join(d, "a", "report.csv")), samples


def full(rows, kind):
    # Not the first interval (it began with the agent) nor the last (it holds
    # the planned end), for every build alike.
    ticks = [r["ts"] for r in rows if r["dir"] == "host"][1:-1]
    return [r for r in rows if r["dir"] == kind and r["ts"] in ticks]


def sockperf_rtt_p50():
    server = subprocess.Popen(["sockperf", "server", "-i", "127.0.0.9", "-p", "11111"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    out = subprocess.run(["sockperf", "ping-pong", "-i", "127.0.0.9", "-p", "11111", "-m", "64",
                          "-t", "4", "--mps", "1000"], capture_output=True, text=True).stdout
    server.kill()
    server.wait()
    for line in out.splitlines():
        if "percentile 50.000" in line:
            return 2 * float(line.split("=")[-1])  # sockperf reports RTT / 2
    raise SystemExit(f"sockperf gave no p50:\n{out}")


PAIR_1K = "src\\dst,a=127.0.0.1:7301,b=127.0.0.2:7302\na,,1000\n"
# a sends to 4 peers at 25,000 pps, each pair split over 250 streams: 1,000
# flow sockets of 100 pps each.
MANY = ("src\\dst,a=127.0.0.1:7301,b=127.0.0.2:7302,c=127.0.0.3:7303,d=127.0.0.4:7304,e=127.0.0.5:7305\n"
        "a,,25000,25000,25000,25000\n")


def mx_rtt_p50(extra, mx=MX, responder_extra=None):
    """RTT p50 of a -> b; b runs with `responder_extra` if given, else `extra`."""
    # One worker each: two spinning agents with two workers would be four
    # busy threads on a 2-core machine.
    extra = ["--workers", "1", *extra]
    b_extra = extra if responder_extra is None else ["--workers", "1", *responder_extra]
    rows, _ = run_pair(PAIR_1K, 5, extra, b_extra, mx=mx)
    return statistics.median(float(r["rtt_p50_us"]) for r in full(rows, "tx"))


def light_load_cpu(extra=(), mx=MX):
    one = ["--workers", "1", *extra]
    rows, samples = run_pair(PAIR_1K, 6, one, one, watch=lambda pid: (time.monotonic(), cpu_seconds(pid)), mx=mx)
    (t0, c0), (t1, c1) = samples[0], samples[-1]
    return (c1 - c0) / (t1 - t0) * 100


CEILING = os.path.join(ROOT, "target", "rr_ceiling")


def raw_light_load_cpu(seconds=6):
    """CPU of rr_ceiling's paced loop sending 1,000 pps and answering its peer."""
    subprocess.run(["gcc", "-O2", "-o", CEILING, os.path.join(ROOT, "bench", "rr_ceiling.c")], check=True)
    b = subprocess.Popen([CEILING, "127.0.0.2", "7302", "127.0.0.1", "7301", str(seconds + 1), "64", "paced=0"],
                         stdout=subprocess.DEVNULL)
    a = subprocess.Popen([CEILING, "127.0.0.1", "7301", "127.0.0.2", "7302", str(seconds), "64", "paced=1000"],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    samples = []
    while a.poll() is None:
        try:
            samples.append((time.monotonic(), cpu_seconds(a.pid)))
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.5)
    out = a.communicate()[0]
    b.wait()
    rate = float(out.split("=")[1])
    if not 990 <= rate <= 1010:
        raise SystemExit(f"rr_ceiling paced=1000 got {rate:.0f} round trips/s back")
    (t0, c0), (t1, c1) = samples[0], samples[-1]
    return (c1 - c0) / (t1 - t0) * 100


SWEEP = (100, 1_000, 10_000, 100_000, 1_000_000)


def pacing_sweep():
    """{rate: (achieved % over the run, worst full interval %)} for one flow a -> b."""
    out = {}
    for rate in SWEEP:
        text = f"src\\dst,a=127.0.0.1:7301,b=127.0.0.2:7302\na,,{rate}\n"
        rows, _ = run_pair(text, 6, ["--workers", "1"], ["--workers", "1"])
        tx = full(rows, "tx")
        pps = [float(r["pps"]) for r in tx]
        out[rate] = (sum(pps) / len(pps) / rate * 100,
                     max((abs(p / rate - 1) for p in pps)) * 100)
    return out


def thousand_flows():
    """1,000 flow sockets on agent a (c answers too: a third agent)."""
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "matrix.csv"), "w") as f:
            f.write(MANY)
        procs = {}
        for host in ("b", "c", "d", "e", "a"):
            os.makedirs(os.path.join(d, host))
            extra = ["--streams", "250", "--workers", "2"] if host == "a" else ["--workers", "1"]
            procs[host] = subprocess.Popen(
                [MX, "agent", "--matrix", "../matrix.csv", "--host", host, "--interval", "1",
                 "--duration", "8", *extra],
                cwd=os.path.join(d, host), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        mem = []
        time.sleep(2.0)
        while procs["a"].poll() is None:
            try:
                mem.append(memory_kib(procs["a"].pid))
            except (FileNotFoundError, ProcessLookupError):
                break
            time.sleep(0.5)
        for p in procs.values():
            p.wait()
        rows = report_rows(os.path.join(d, "a", "report.csv"))
    achieved = [float(r["pps"]) / float(r["target_pps"]) * 100 for r in full(rows, "tx")]
    return achieved, max(m[0] for m in mem) / 1024, mem[1][1] / 1024, mem[-1][1] / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", metavar="MX_BINARY", help="also measure latency and light load with this mx, paired")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    rounds = []
    paired = []  # (rtt, rtt baseline, cpu, cpu baseline) per round
    for i in range(args.rounds):
        sp = sockperf_rtt_p50()
        mx_default = mx_rtt_p50([])
        if args.baseline:
            rtt0 = mx_rtt_p50([], args.baseline)
        mx_busy = mx_rtt_p50(["--busy-poll"])
        # sockperf's client spins between its paced messages (its --mps:
        # ~70% of a core at 1,000/s here) and its server sleeps: mx with the
        # same shape, the sender spinning and the responder asleep.
        mx_like_sockperf = mx_rtt_p50(["--busy-poll"], responder_extra=[])
        cpu = light_load_cpu()
        cpu_floor = raw_light_load_cpu()
        if args.baseline:
            cpu0 = light_load_cpu((), args.baseline)
            paired.append((mx_default, rtt0, cpu, cpu0))
            print(f"  round {i + 1} vs baseline: RTT p50 {mx_default:.0f} / {rtt0:.0f} us,"
                  f" CPU {cpu:.2f} / {cpu0:.2f}% of a core", flush=True)
        cpu_no_gso = light_load_cpu(["--no-gso"])
        achieved, peak, rss_early, rss_late = thousand_flows()
        sweep = pacing_sweep()
        rounds.append((sp, mx_default, mx_busy, cpu, min(achieved), max(achieved), peak, rss_early, rss_late, sweep, cpu_no_gso,
                       mx_like_sockperf, cpu_floor))
        print(f"  round {i + 1}: RTT p50 sockperf {sp:.1f}us, mx {mx_default:.0f}us, busy {mx_busy:.0f}us, "
              f"sender busy {mx_like_sockperf:.0f}us; "
              f"1 kpps agent {cpu:.2f}% of a core (raw paced loop {cpu_floor:.2f}%); 1000 flows: achieved {min(achieved):.2f}..{max(achieved):.2f}%, "
              f"peak RSS {peak:.1f} MiB ({rss_early:.1f} -> {rss_late:.1f})", flush=True)
    m = lambda k: statistics.median(r[k] for r in rounds)
    print()
    print("| what | median | ratio / target |")
    print("|---|---|---|")
    print(f"| RTT p50 at 1 kpps, sockperf ping-pong (2 x its p50) | {m(0):.1f} us | 1.00 |")
    print(f"| RTT p50 at 1 kpps, mx (default) | {m(1):.0f} us | {statistics.median(r[1] / r[0] for r in rounds):.2f} |")
    print(f"| RTT p50 at 1 kpps, mx --busy-poll | {m(2):.0f} us | {statistics.median(r[2] / r[0] for r in rounds):.2f} |")
    print(f"| RTT p50 at 1 kpps, mx with sockperf's shape (sender --busy-poll, responder asleep) | {m(11):.0f} us"
          f" | {statistics.median(r[11] / r[0] for r in rounds):.2f} |")
    print(f"| agent CPU at 1 kpps total (sending and answering) | {m(3):.2f}% of a core | target < 2% |")
    print(f"| the same, --no-gso | {m(10):.2f}% of a core | |")
    print(f"| the floor: rr_ceiling's paced loop at 1 kpps, same wake-ups | {m(12):.2f}% of a core"
          f" | mx / floor {statistics.median(r[3] / r[12] for r in rounds):.2f} |")
    print(f"| 1,000 flows x 100 pps: achieved vs target, worst peer | {min(r[4] for r in rounds):.2f}% .. {max(r[5] for r in rounds):.2f}% | target 99-101% |")
    print(f"| 1,000 flows: agent peak RSS | {m(6):.1f} MiB | target < 32 MiB |")
    print(f"| 1,000 flows: RSS 2 s in -> at the end | {m(7):.1f} -> {m(8):.1f} MiB | flat |")
    for rate in SWEEP:
        run = statistics.median(r[9][rate][0] for r in rounds)
        worst = max(r[9][rate][1] for r in rounds)
        print(f"| pacing, one flow at {rate:,} pps: achieved over the run (worst interval off by) | {run:.2f}% ({worst:.2f}%) | target 99-101% |")
    if paired:
        p = lambda k: statistics.median(r[k] for r in paired)
        ratio = lambda a, b: statistics.median(r[a] / r[b] for r in paired)
        print(f"\nthis build vs {args.baseline}, paired per round:\n")
        print("| what | this build | baseline | median of the paired ratios |")
        print("|---|---|---|---|")
        print(f"| RTT p50 at 1 kpps (default) | {p(0):.0f} us | {p(1):.0f} us | {ratio(0, 1):.2f} |")
        print(f"| agent CPU at 1 kpps | {p(2):.2f}% | {p(3):.2f}% | {ratio(2, 3):.2f} |")


if __name__ == "__main__":
    main()
