#!/usr/bin/env python3
"""mx agent against the kernel's request/response ceiling, side by side.

  bench/agent_vs_ceiling.py [--rounds N] [--seconds S] [--size BYTES] [--rx-size BYTES]
                            [--baseline MX_BINARY]

Rows measured in the same run, interleaved A S B C D R E, A S B C ... (paired: ratios
against a baseline measured in the same round);
the ceiling searches of S, B and C go side by side, one rate of each in turn,
and so do R and E (and, with --baseline, the baseline build's beside each):

  A  ceiling: bench/rr_ceiling.c, two processes on 127.0.0.1/127.0.0.2, each
     sending requests in batches and answering the other's (the minimal batched
     request/response loop over raw kernel sockets, recvmmsg/sendmmsg: no
     pacing, no timing, no reports). Figure: round trips per second per process.
  B  mx --no-gso: two local `mx agent --workers 1` with one paced flow each
     way, on the same kernel path as A. Figure: the highest per-flow rate both
     deliver at >= 99.9% (replies / requests over the run's full intervals)
     while sending >= 99% of the target in every one, found by ramping up by
     1.25x until a rate fails, then bisecting between the last pass and the
     first fail.
  C  the same with `--busy-poll` (workers spin instead of sleeping in epoll,
     as the ceiling does).
  D  A's loop over the kernel's coalescing path (rr_ceiling ... gso: 64
     datagrams per UDP_SEGMENT send, UDP_GRO reads, one GSO reply per batch).
  E  mx as it runs by default: GSO/GRO where the kernel has them. Ratios
     against A (the plain loop) and against D (the same kernel path).
  S  the ceiling B's search finds on rr_ceiling's paced loop (paced=<rate>:
     2 ms batches, epoll sleeps, sendmmsg/recvmmsg, and mx's token bucket,
     which forgives 5 ms of lateness and then loses what was missed), both
     ways at the rate: the same test B passes or fails, passed by the
     minimal paced loop. B / S is mx's share of what a paced sender holds on
     this VM, where B / A also holds what pacing itself costs here.
  R  the same over GSO/GRO (paced=<rate> gso), searched as E: E / R.
  U  mx as E, unpaced (matrix cell `max`): round trips completed per second
     per agent, the mean of the two over the run's whole intervals: D's own
     measure, side by side with it. E asks more than U: a paced rate held in
     every interval, which on a VM that stalls both vCPUs for tens of ms
     fails a trial on one stall (the bucket forgives 6 ms); U shows what the
     agent's path costs per round trip, E what it holds under that test.
  V  mx --no-gso, unpaced, measured as U: A's own measure, beside A.
     (Unpaced, mx sends as fast as its worker goes, with no window: on
     loopback most requests are dropped at the peer's socket, and the work
     they cost is wasted; A and D keep a window and lose nothing. So U and V
     understate the path; P and Q are the like-for-like cost.)
  P  CPU per round trip, paced: mx --no-gso beside rr_ceiling's paced loop
     (paced=<rate>: the same 2 ms batches, epoll sleeps, sendmmsg/recvmmsg),
     one flow each way at 40 kpps, both processes' CPU over the round trips
     both completed. Figure: microseconds of CPU per round trip; ratio raw /
     mx, the share of a core's round trips mx keeps. CPU time leaves out
     what the VM steals, so this ratio holds still where B and E swing.
  Q  the same over GSO/GRO: mx default beside paced=<rate> gso, 500 kpps.
     (P and Q lower their rate for large datagrams: at most 250 MB/s.)
  F  sockperf throughput, same message size: messages sent per second, one
     way (its server only counts; nothing comes back).
  G  sockperf ping-pong at full speed: round trips per second with one
     message in flight (its latency mode).

After each round, a line per ceiling search (B, C, E, R, S) says why its failed
trials failed: an interval sent short while an agent said it was behind its
send schedule past the 6 ms the bucket forgives (the host row's behind_ms: a
stall, the VM's or the agent's own), short without that, or replies under
99.9%; and the VM's steal (/proc/stat) over those trials.

With --baseline, every mx row (B, C, E) is measured again right after itself
with that binary (an older build, say), and the table gains the paired ratio
new / baseline: the A B A B comparison a change's "no worse" rests on.

Prints the machine, every round, the medians and the paired ratios. Builds what it
runs (cargo build --release; gcc -O2). Traffic stays on 127.0.0.0/8.
"""
import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MX = os.path.join(ROOT, "target", "x86_64-unknown-linux-gnu", "release", "mx")
CEILING = os.path.join(ROOT, "target", "rr_ceiling")


def build():
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    subprocess.run(["gcc", "-O2", "-o", CEILING, os.path.join(ROOT, "bench", "rr_ceiling.c")], check=True)


def build_before(marker, path, name):
    """The release binary of the commit before the one that added `marker`
    to `path` (found with git log -S), built in a worktree under /tmp named
    `name`: the baseline a bench measures a change against, in the same run."""
    added = subprocess.check_output(
        ["git", "log", "--format=%H", "-S", marker, "--", path], cwd=ROOT, text=True).split()
    if not added:
        sys.exit(f"bench: no commit adds {marker!r} to {path}: pass --baseline MX_BINARY")
    tree = os.path.join(tempfile.gettempdir(), name)
    if not os.path.isdir(tree):
        subprocess.check_call(["git", "worktree", "add", "--detach", tree, added[-1] + "^"],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.check_call(["cargo", "build", "--release", "--quiet"], cwd=tree)
    return os.path.join(tree, "target", "x86_64-unknown-linux-gnu", "release", "mx")


def machine():
    model = "?"
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    return f"{os.cpu_count()} cores, {model}, Linux {platform.release()}, mx {commit}"


def ceiling(seconds, size, mode=()):
    """Round trips per second per process (mean of the two)."""
    sizes = f"{size[0]}/{size[1]}"
    a = subprocess.Popen([CEILING, "127.0.0.1", "7101", "127.0.0.2", "7102", str(seconds), sizes, *mode],
                         stdout=subprocess.PIPE, text=True)
    b = subprocess.Popen([CEILING, "127.0.0.2", "7102", "127.0.0.1", "7101", str(seconds), sizes, *mode],
                         stdout=subprocess.PIPE, text=True)
    rates = []
    for p in (a, b):
        out, _ = p.communicate()
        rates.append(float(out.strip().split("=")[1]))
    return statistics.mean(rates)


def sockperf(seconds, size):
    """(throughput msg/s one way, ping-pong round trips/s), or None for sizes
    it does not take (asymmetric)."""
    if size[0] != size[1]:
        return None
    server = subprocess.Popen(["sockperf", "server", "-i", "127.0.0.9", "-p", "11113"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        common = ["-i", "127.0.0.9", "-p", "11113", "-m", str(size[0]), "-t", str(int(seconds))]
        out = subprocess.run(["sockperf", "throughput", *common], capture_output=True, text=True).stdout
        rate = float(out.split("Message Rate is ")[1].split()[0])
        out = subprocess.run(["sockperf", "ping-pong", *common], capture_output=True, text=True).stdout
        # "Total 65589 observations" (sockperf may colour it)
        observations = float(re.search(r"Total (\d+) observations", out).group(1))
        return rate, observations / int(seconds)
    finally:
        server.kill()
        server.wait()


CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU of process `pid` so far (all its threads)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_share(procs, seconds):
    """Cores the processes used together from 1 s into their run to 0.5 s
    before its end (neither start nor exit in it): CPU seconds per second."""
    time.sleep(1.0)
    t0, c0 = time.monotonic(), sum(cpu_seconds(p.pid) for p in procs)
    time.sleep(max(0.5, seconds - 1.5))
    t1, c1 = time.monotonic(), sum(cpu_seconds(p.pid) for p in procs)
    return (c1 - c0) / (t1 - t0)


def steal_ticks():
    """(stolen, all) CPU ticks of the machine so far, from /proc/stat: the
    time the hypervisor ran something else while a vCPU wanted to run."""
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return fields[7], sum(fields[:8])


class Pair:
    """One run of two agents: `tx`, each host's tx rows (pps, rep_pps) over
    the run's whole intervals; `behind_ms`, the longest either agent said it
    was behind its send schedule in one of them (the host row's behind_ms);
    `steal_pct`, the share of the machine's CPU time the VM lost to steal
    over the run."""
    def __init__(self, tx, behind_ms, steal_pct):
        self.tx, self.behind_ms, self.steal_pct = tx, behind_ms, steal_pct


def launch_pair(d, cell, seconds, size, extra, mx, port):
    """Starts agents a (127.0.0.1) and b (127.0.0.2) in folders of `d`, one
    flow each way at matrix cell `cell`, requests and replies of `size`
    (tx, rx) bytes, one worker and a 1 s interval for `seconds`; returns the
    two processes. Each writes `d`/HOST/report.csv."""
    matrix = os.path.join(d, "matrix.csv")
    with open(matrix, "w") as f:
        tx, rx = size
        f.write(f"# tx_size={tx} rx_size={rx} port={port}\n")
        f.write("src\\dst,a=127.0.0.1,b=127.0.0.2\n")
        f.write(f"a,,{cell}\nb,{cell},\n")
    procs = []
    for host in ("a", "b"):
        os.makedirs(os.path.join(d, host))
        procs.append(subprocess.Popen(
            [mx, "agent", "--matrix", matrix, "--host", host, "--workers", "1",
             "--interval", "1", "--duration", str(seconds)] + list(extra),
            cwd=os.path.join(d, host), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def run_pair(cell, seconds, size, extra, mx=MX, cpu=None):
    """Runs two agents, one flow each way at matrix cell `cell` (a rate, or
    `max`: unpaced); returns a Pair, or None if an agent wrote fewer than two
    whole intervals. With `cpu` (a list), appends the cores both agents used
    (cpu_share)."""
    stolen0, all0 = steal_ticks()
    with tempfile.TemporaryDirectory() as d:
        procs = launch_pair(d, cell, seconds, size, extra, mx, port=7200)
        if cpu is not None:
            cpu.append(cpu_share(procs, seconds))
        for p in procs:
            p.wait()
        stolen1, all1 = steal_ticks()
        out, behind = {}, 0.0
        for host in ("a", "b"):
            rows = [line.split(",") for line in open(os.path.join(d, host, "report.csv")).read().splitlines()]
            header, rows = rows[0], rows[1:]
            col = {name: i for i, name in enumerate(header)}
            host_ticks = [r[col["ts"]] for r in rows if r[col["dir"]] == "host"]
            # Whole intervals only: not the first (it began with the agent),
            # nor the last (it holds the planned end: since 2.0 it is written,
            # at the rate of its sending part, and summaries leave it out as
            # an edge). The same rule for every build compared.
            full = set(host_ticks[1:-1])
            tx = [(float(r[col["pps"]]), float(r[col["rep_pps"]]))
                  for r in rows if r[col["dir"]] == "tx" and r[col["ts"]] in full]
            if len(tx) < 2:
                return None
            out[host] = tx
            behind = max([behind] + [float(r[col["behind_ms"]]) for r in rows
                                     if r[col["dir"]] == "host" and r[col["ts"]] in full
                                     and r[col["behind_ms"]]])
        return Pair(out, behind, (stolen1 - stolen0) / max(1, all1 - all0) * 100)


# The mx rows read against the raw paced loop's ceiling searched the same way.
SAME_SEARCH = (("B", "S"), ("C", "S"), ("E", "R"))

def forgiven_ms():
    """How late an agent's loop may wake and lose no tokens, in ms: read from
    its one definition, crates/report/src/lib.rs (FORGIVEN_BEHIND_MS)."""
    text = open(os.path.join(ROOT, "crates", "report", "src", "lib.rs")).read()
    return float(re.search(r"pub const FORGIVEN_BEHIND_MS: f64 = ([0-9.]+);", text).group(1))


FORGIVEN_MS = forgiven_ms()


def clean(pair, rate, failures=None):
    """Whether a run at `rate` per flow (a Pair, None if it wrote too little)
    delivered cleanly: every whole interval sent at the rate (>= 99%), and
    over the run 99.9% of the requests came back. (Per interval, replies in
    flight at a tick land in the next one: at 40 kpps and 1 ms of RTT that
    alone is 0.1% of an interval, so an interval's own ratio is no test.) A
    failed trial appends to `failures` why: (rate, "short" if an interval
    sent < 99% of the rate, else "lost", the senders' behind_ms, the steal %)."""
    if pair is None:
        return False
    for tx in pair.tx.values():
        sent = [s for s, _ in tx]
        back = [b for _, b in tx]
        if min(sent) < 0.99 * rate or sum(back) < 0.999 * sum(sent):
            if failures is not None:
                why = "short" if min(sent) < 0.99 * rate else "lost"
                failures.append((rate, why, pair.behind_ms, pair.steal_pct))
            return False
    return True


def raw_pair(rate, seconds, size, mode=()):
    """rr_ceiling's paced loop (mx's bucket) both ways at `rate`, as a Pair:
    each second's requests sent and replies read, from the second on (the
    first holds the start: a peer not bound yet), and the worst lateness."""
    stolen0, all0 = steal_ticks()
    procs = raw_paced(rate, seconds, size, [*mode, "intervals"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    out, behind = {}, 0.0
    for host, p in zip("ab", procs):
        lines = [dict(f.split("=") for f in line.split()) for line in p.communicate()[1].splitlines()]
        whole = [line for line in lines if int(line["interval"]) >= 2]
        if len(whole) < 2:
            return None
        out[host] = [(float(line["sent"]), float(line["replies"])) for line in whole]
        behind = max([behind] + [float(line["behind_ms"]) for line in whole])
    stolen1, all1 = steal_ticks()
    return Pair(out, behind, (stolen1 - stolen0) / max(1, all1 - all0) * 100)


def mx_unpaced(seconds, size, extra, mx=MX):
    """Round trips completed per second per agent, unpaced (cell `max`: each
    agent sends as fast as its worker goes), mean of the two: D's measure.
    Averaged over the run's whole intervals, so a VM's short stall costs
    its length, not the row."""
    pair = run_pair("max", seconds, size, extra, mx)
    if pair is None:
        sys.exit(f"bench: an unpaced run of {seconds} s wrote fewer than two whole intervals (--seconds >= 4)")
    return statistics.mean(statistics.mean(b for _, b in tx) for tx in pair.tx.values())


def mx_cost(rate, seconds, size, extra, mx=MX):
    """CPU microseconds per round trip, both agents together, one flow each
    way paced at `rate`: the cores they used over the round trips they
    completed per second (replies, both hosts, whole intervals). CPU time
    does not count a VM's steal, so a stall moves this little: the per-core
    comparison with the raw loop that a rate ceiling on this VM cannot make."""
    used = []
    pair = run_pair(rate, seconds, size, extra, mx, cpu=used)
    if pair is None:
        sys.exit(f"bench: a paced run of {seconds} s wrote fewer than two whole intervals (--seconds >= 4)")
    round_trips = sum(statistics.mean(b for _, b in tx) for tx in pair.tx.values())
    return used[0] / round_trips * 1e6


def raw_paced(rate, seconds, size, mode, **pipes):
    """Starts rr_ceiling's paced loop (paced=<rate>, with `mode`) both ways
    on 127.0.0.1/127.0.0.2; `pipes` are Popen's stdout/stderr."""
    sizes = f"{size[0]}/{size[1]}"
    return [subprocess.Popen([CEILING, me, mp, peer, pp, str(seconds), sizes, f"paced={rate}", *mode],
                             text=True, **pipes)
            for me, mp, peer, pp in (("127.0.0.1", "7101", "127.0.0.2", "7102"),
                                     ("127.0.0.2", "7102", "127.0.0.1", "7101"))]


def raw_cost(rate, seconds, size, mode=()):
    """The same for rr_ceiling's paced loop (paced=<rate>, with `mode`)."""
    procs = raw_paced(rate, seconds, size, mode, stdout=subprocess.PIPE)
    used = cpu_share(procs, seconds)
    round_trips = sum(float(p.communicate()[0].strip().split("=")[1]) for p in procs)
    return used / round_trips * 1e6


def passes(run, rate, failures=None):
    """A rate passes if one of three trials (`run(rate)`, a Pair) is clean:
    on a 2-core machine a single trial can fail for a reason that is not the
    sender's (another process's burst), and one such failure would otherwise
    halve the search. Two were not enough on the AMD EPYC VM (2026-12-02):
    one trial in three failed at 1 Mpps per flow, where the same build passed
    2 Mpps three times out of three, and the search stopped at 0.6-0.8 Mpps
    in four rounds of five."""
    return any(clean(run(rate), rate, failures) for _ in range(3))


def ceiling_search(start):
    """The search for the highest rate that passes, as a generator: yields
    each rate to try and is sent whether it passed; returns the ceiling.
    Ramp 1.25x from `start` until a rate fails (halving from `start` if it
    fails at once), then bisect three times between the last pass and the
    first fail."""
    ok, bad = None, None
    rate = start
    while bad is None:
        if (yield int(rate)):
            ok, rate = rate, rate * 1.25
        else:
            bad = rate
            if ok is None:
                ok, rate = 0, rate / 2
                while ok == 0 and rate >= 1000:
                    if (yield int(rate)):
                        ok = rate
                    else:
                        bad, rate = rate, rate / 2
    for _ in range(3):
        mid = (ok + bad) / 2
        if (yield int(mid)):
            ok = mid
        else:
            bad = mid
    return ok


def paced_ceilings(runs, starts, failures):
    """The ceilings of several senders (`runs`: key -> run(rate), a Pair),
    searched side by side: one rate of each in turn, so that a stretch of
    the VM's steal (it comes and goes over seconds to minutes) falls on all
    of them alike, not on whichever was searched then. Failed trials append
    why to `failures[key]` (clean). Returns key -> ceiling."""
    searches = {key: ceiling_search(starts[key]) for key in runs}
    trying = {key: next(search) for key, search in searches.items()}
    found = {}
    while searches:
        for key in list(searches):
            passed = passes(runs[key], trying[key], failures[key])
            try:
                trying[key] = searches[key].send(passed)
            except StopIteration as done:
                found[key] = done.value
                del searches[key]
    return found


def why_failed(failures):
    """What the failed trials of one ceiling search say: how many sent short
    in an interval with an agent behind its schedule past what the bucket
    forgives (a stall, the VM's or the agent's own), how many sent short
    without, how many lost replies; and the VM's steal in the failed trials."""
    if not failures:
        return "no trial failed"
    stalled = sum(1 for _, why, behind, _ in failures if why == "short" and behind > FORGIVEN_MS)
    short = sum(1 for _, why, _, _ in failures if why == "short") - stalled
    lost = sum(1 for _, why, _, _ in failures if why == "lost")
    steal = [s for *_, s in failures]
    behind = [b for _, _, b, _ in failures]
    return (f"{len(failures)} trials failed: {stalled} an interval short with a sender > {FORGIVEN_MS:.0f} ms"
            f" behind, {short} short without, {lost} replies < 99.9%; behind {min(behind):.0f}-{max(behind):.0f} ms,"
            f" VM steal {min(steal):.1f}-{max(steal):.1f}% in them")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.5)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rx-size", type=int, default=None, help="reply size (default: --size)")
    ap.add_argument("--only-default", action="store_true", help="rows A, D and E only (skip --no-gso)")
    ap.add_argument("--baseline", metavar="MX_BINARY", help="also measure B, C, E with this mx, paired")
    ap.add_argument("--rows", default="ABCDERSUVPQFG",
                    help="the rows to measure (default all; A and D always, the others are read against them)")
    args = ap.parse_args()
    size = (args.size, args.rx_size or args.size)
    build()
    print(f"machine: {machine()}")
    print(f"{size[0]}-byte requests, {size[1]}-byte replies, one pair on loopback, one worker each;"
          f" {args.rounds} rounds, interleaved\n")
    rows = []
    cost_rates = {}
    start = {"B": 80_000, "C": 80_000, "E": 400_000, "S": 80_000, "R": 400_000}
    flags = {"B": ["--no-gso"], "C": ["--no-gso", "--busy-poll"], "E": []}
    raw_modes = {"S": [], "R": ["gso"]}
    def measure(row, keys):
        """The ceilings of `keys` (and with --baseline, of the baseline build
        for each mx row), searched side by side."""
        runs = {}
        for key in keys:
            if key in raw_modes:
                runs[key] = lambda rate, key=key: raw_pair(rate, args.seconds, size, raw_modes[key])
            else:
                runs[key] = lambda rate, key=key: run_pair(rate, args.seconds, size, flags[key])
                if args.baseline:
                    runs[key + "0"] = lambda rate, key=key: run_pair(rate, args.seconds, size, flags[key],
                                                                     args.baseline)
                    start.setdefault(key + "0", start[key])
        failures = {key: [] for key in runs}
        found = paced_ceilings(runs, start, failures)
        for key in runs:
            row[key] = start[key] = found[key]
            if not key.endswith("0"):
                why[key] = failures[key]

    wanted = set(args.rows) - (set("BCSVP") if args.only_default else set())
    for i in range(args.rounds):
        why = {}
        row = {"A": ceiling(args.seconds, size)}
        measure(row, [key for key in "SBC" if key in wanted])
        row["D"] = ceiling(args.seconds, size, ["gso"])
        measure(row, [key for key in "RE" if key in wanted])
        for key, extra in (("U", []), ("V", ["--no-gso"])):
            if key in wanted:
                row[key] = mx_unpaced(args.seconds, size, extra)
                if args.baseline:
                    row[key + "0"] = mx_unpaced(args.seconds, size, extra, args.baseline)
        for key, rate, mode, extra in (("P", 40_000, [], ["--no-gso"]), ("Q", 500_000, ["gso"], [])):
            if key not in wanted:
                continue
            # Large datagrams at these rates would be more bytes than the
            # loopback moves: at most 250 MB/s of the larger way.
            rate = cost_rates[key] = int(min(rate, 250e6 / max(size)))
            row[key + "raw"] = raw_cost(rate, args.seconds, size, mode)
            row[key] = mx_cost(rate, args.seconds, size, extra)
            if args.baseline:
                row[key + "0"] = mx_cost(rate, args.seconds, size, extra, args.baseline)
        if "F" in wanted and (sp := sockperf(args.seconds, size)) is not None:
            row["F"], row["G"] = sp
        rows.append(row)
        costs = [k for k in ("P", "Q") if k in row]
        rates = {k: v for k, v in row.items() if not k.startswith(tuple(costs))}
        ratios = " ".join(f"{k}/A {v / row['A']:.2f}" for k, v in rates.items() if k != "A" and len(k) == 1)
        print(f"  round {i + 1}: " + "   ".join(f"{k} {v / 1e3:.1f}k" for k, v in rates.items())
              + "".join(f"   {k}/D {row[k] / row['D']:.2f}" for k in "EU" if k in row)
              + "".join(f"   {k}/{raw} {row[k] / row[raw]:.2f}" for k, raw in SAME_SEARCH if k in row and raw in row)
              + "   "
              + "   ".join(f"{k} {row[k]:.3f} us/RT (raw {row[k + 'raw']:.3f}, raw/mx {row[k + 'raw'] / row[k]:.2f})"
                           for k in costs), flush=True)
        for key, failures in why.items():
            print(f"  round {i + 1}: {key} stopped at {row[key] / 1e3:.1f}k: {why_failed(failures)}", flush=True)
    med = lambda xs: statistics.median(xs)
    ratio = lambda k, base: med(r[k] / r[base] for r in rows)
    what = {
        "A": "A: raw batched request/response loop (recvmmsg/sendmmsg), per process",
        "B": "B: mx --no-gso, 1 worker, highest rate delivering >= 99.9%",
        "C": "C: mx --no-gso --busy-poll",
        "D": "D: raw loop over GSO/GRO, per process",
        "E": "E: mx default (GSO/GRO), 1 worker, highest rate delivering >= 99.9%",
        "S": "S: raw paced loop (mx's bucket), searched as B",
        "R": "R: raw paced loop over GSO/GRO (mx's bucket), searched as E",
        "U": "U: mx default, unpaced (cell max): round trips/s per agent, D's measure",
        "V": "V: mx --no-gso, unpaced: round trips/s per agent, A's measure",
        "F": "F: sockperf throughput, one way (messages sent/s)",
        "G": "G: sockperf ping-pong, one in flight (round trips/s)",
    }
    print()
    print("| what | median | vs A | vs D | vs the raw paced loop, searched the same way (range) |")
    print("|---|---|---|---|---|")
    for k in (k for k in rows[0] if len(k) == 1 and k not in "PQ"):
        unit = {"A": "k round trips/s", "D": "k round trips/s", "U": "k round trips/s", "V": "k round trips/s",
                "F": "k msg/s", "G": "k round trips/s"}.get(k, "kpps per flow")
        vs_d = f"{ratio(k, 'D'):.2f}" if k in "DEUR" else ""
        vs_raw = ""
        for mx_row, raw in SAME_SEARCH:
            if k == mx_row and raw in rows[0]:
                each = [r[k] / r[raw] for r in rows]
                vs_raw = f"{med(each):.2f} ({min(each):.2f}-{max(each):.2f}) of {raw}"
        print(f"| {what[k]} | {med(r[k] for r in rows) / 1e3:.1f} {unit} | {ratio(k, 'A'):.2f} | {vs_d} | {vs_raw} |")
    if "P" in rows[0] or "Q" in rows[0]:
        print("\n| CPU per round trip, paced, both processes | mx | raw paced loop | raw / mx (median of the rounds', range) |")
        print("|---|---|---|---|")
    for k, what_ in (("P", "P: --no-gso"), ("Q", "Q: default (GSO/GRO)")):
        if k in rows[0]:
            what_ += f" at {cost_rates[k]:,} pps per flow"
            each = [r[k + "raw"] / r[k] for r in rows]
            print(f"| {what_} | {med(r[k] for r in rows):.3f} us | {med(r[k + 'raw'] for r in rows):.3f} us"
                  f" | {med(each):.2f} ({min(each):.2f}-{max(each):.2f}) |")
    if args.baseline:
        print(f"\nthis build vs {args.baseline}, paired per round:\n")
        print("| row | this build | baseline | median of the paired ratios |")
        print("|---|---|---|---|")
        for k in (k for k in rows[0] if k + "0" in rows[0]):
            unit, scale = {"P": ("us/RT", 1), "Q": ("us/RT", 1), "U": ("k round trips/s", 1e3),
                           "V": ("k round trips/s", 1e3)}.get(k, ("kpps", 1e3))
            print(f"| {k} | {med(r[k] for r in rows) / scale:.3f} {unit} | {med(r[k + '0'] for r in rows) / scale:.3f} {unit}"
                  f" | {ratio(k, k + '0'):.2f} |")


if __name__ == "__main__":
    sys.exit(main())
