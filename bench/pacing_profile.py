#!/usr/bin/env python3
"""Where a paced `--no-gso` pair's time goes near its ceiling (row B of
agent_vs_ceiling.py): is a worker that falls behind its schedule waiting for
a CPU, or is its own core full?

  bench/pacing_profile.py [--rates 40000,60000,80000] [--profile-rate 95000]
                          [--seconds 6] [--runs 2]

1. For each of --rates: two `mx agent --no-gso --workers 1`, one flow each
   way on 127.0.0.1/127.0.0.2, and the cores both agents used (from /proc,
   the run's middle) over the round trips they completed: CPU per round trip.
   Beside it, A (the raw batched loop, spinning on both cores) for scale.
2. --runs times at --profile-rate, under `perf sched record` (all CPUs), and
   from `perf sched timehist`, per worker thread: how busy it kept its core,
   the share of its 20-ms windows at >= 95% busy, its longest run without
   sleeping, and its longest wait for a CPU once woken (the scheduler's
   delay); for the machine, what other tasks and idle took. The tracing
   costs CPU itself: a rate that passes without it may fail under it.

Needs root (perf) and linux-perf; builds what it runs (agent_vs_ceiling's
build). Traffic stays on 127.0.0.0/8.
"""
import argparse
import collections
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_vs_ceiling as bench  # noqa: E402

SIZE = (64, 64)
WINDOW_S = 0.02


def cost(rate, seconds):
    """(cores both agents used, CPU microseconds per round trip, clean)."""
    used = []
    pair = bench.run_pair(rate, seconds, SIZE, ["--no-gso"], cpu=used)
    if pair is None:
        sys.exit(f"pacing_profile: a run of {seconds} s wrote fewer than two whole intervals")
    round_trips = sum(statistics.mean(b for _, b in tx) for tx in pair.tx.values())
    return used[0], used[0] / round_trips * 1e6, bench.clean(pair, rate)


def timehist(data):
    """perf sched timehist's lines as (start s, end s, task, sched delay ms):
    each a stretch a task ran on a CPU until it was switched out. Tasks are
    `worker <tid>` for mx's workers, `idle`, or `other`."""
    out = subprocess.run(["perf", "sched", "timehist", "-i", data], capture_output=True, text=True).stdout
    runs = []
    for line in out.splitlines()[3:]:
        # time [cpu] task[tid/pid] wait-time sch-delay run-time
        fields = line.split()
        if len(fields) < 6:
            continue
        try:
            end, delay, run = float(fields[0]), float(fields[-2]), float(fields[-1]) / 1e3
        except ValueError:
            continue
        task = fields[2]
        if task.startswith("mx-worker"):
            task = "worker " + task.split("[")[1].split("/")[0]
        elif "idle" in task:
            task = "idle"
        else:
            task = "other"
        runs.append((end - run, end, task, delay))
    return runs


def busy_windows(runs):
    """{(window index, task): seconds it ran in that window}, and the number
    of windows."""
    t0, t1 = min(r[0] for r in runs), max(r[1] for r in runs)
    ran = collections.defaultdict(float)
    for start, end, task, _ in runs:
        k = int((start - t0) / WINDOW_S)
        while start < end:
            edge = min(end, t0 + (k + 1) * WINDOW_S)
            ran[(k, task)] += edge - start
            start, k = edge, k + 1
    return ran, int((t1 - t0) / WINDOW_S), t1 - t0


def profile(rate, seconds):
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "sched.data")
        # The whole machine's scheduler events while the pair runs; perf
        # writes its file when interrupted.
        perf = subprocess.Popen(["perf", "sched", "record", "-a", "-q", "-o", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        try:
            pair = bench.run_pair(rate, seconds, SIZE, ["--no-gso"])
        finally:
            perf.send_signal(signal.SIGINT)
            perf.wait()
        runs = timehist(data)
    if pair is None:
        sys.exit(f"pacing_profile: a run of {seconds} s wrote fewer than two whole intervals")
    verdict = "clean" if bench.clean(pair, rate) else "failed"
    print(f"  at {rate:,.0f} pps a flow, under perf: {verdict}, an agent up to {pair.behind_ms:.0f} ms behind")
    ran, windows, span = busy_windows(runs)
    for worker in sorted({r[2] for r in runs if r[2].startswith("worker")}):
        busy = [ran[(k, worker)] / WINDOW_S for k in range(windows)]
        # The windows it ran in at all, less the first and last tenth
        # (the agents' start and stop).
        busy = [b for b in busy if b > 0.05]
        busy = busy[len(busy) // 10: len(busy) - len(busy) // 10]
        full = sum(1 for b in busy if b >= 0.95)
        longest = max(end - start for start, end, task, _ in runs if task == worker) * 1e3
        waited = max(delay for _, _, task, delay in runs if task == worker)
        print(f"    {worker}: {100 * statistics.mean(busy):.0f}% busy, {full} of {len(busy)} 20-ms windows"
              f" >= 95% busy, longest run without sleeping {longest:.0f} ms,"
              f" longest wait for a CPU {waited:.1f} ms")
    share = {what: sum(v for (_, task), v in ran.items() if task == what) / (span * os.cpu_count())
             for what in ("other", "idle")}
    print(f"    the machine: other tasks {100 * share['other']:.1f}%, idle {100 * share['idle']:.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="40000,60000,80000")
    ap.add_argument("--profile-rate", type=float, default=95000)
    ap.add_argument("--seconds", type=float, default=6)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    bench.build()
    print(bench.machine())
    a = [bench.ceiling(4, SIZE) for _ in range(3)]
    print(f"A, the raw loop, 3 runs: {', '.join(f'{x / 1e3:.1f}k' for x in a)} round trips/s per process"
          f" (both cores spinning: {1e6 / statistics.median(a):.1f} us of CPU per round trip at the median)")
    for rate in (float(r) for r in args.rates.split(",")):
        cores, us, ok = cost(rate, args.seconds)
        print(f"mx --no-gso at {rate:,.0f} pps a flow: {cores:.2f} cores, {us:.2f} us per round trip,"
              f" {'clean' if ok else 'failed'}")
    print("perf sched:")
    for _ in range(args.runs):
        profile(args.profile_rate, args.seconds)


if __name__ == "__main__":
    main()
