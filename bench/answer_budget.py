#!/usr/bin/env python3
"""What the answer budget costs a responder, side by side with the build before it.

  bench/answer_budget.py [--rounds N] [--rate PPS] [--seconds S] [--baseline MX_BINARY]

Every responder checks each request (each GRO run of them) against its
source's budget (src/agent/budget.rs): one compare-and-swap. This measures
that check where it costs most, at a high rate on one flow each way: two local
agents (`--workers 1`, 64-byte requests and replies, GSO/GRO as by default),
this build and the baseline in turn, A B A B (paired, interleaved):

  cpu    microseconds of CPU (user + system, both agents) per round trip
         completed: what the check would add;
  rate   round trips completed per second per flow, whole intervals;
  over   requests the responders left unanswered by plan: 0 for this build
         (the budget never cuts a clean run), blank for a baseline that has
         no budget.

Prints every round, the medians per build and the median of the paired
ratios this / baseline. The baseline is the build of the commit before the
budget came in (built in a git worktree under /tmp), unless --baseline names
a binary. Builds what it runs. Traffic stays on 127.0.0.0/8.
"""
import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_vs_ceiling as avc  # noqa: E402  (the shared runners)


def baseline_build():
    """The release binary of the commit before the budget came in."""
    return avc.build_before("pub mod budget;", "src/agent/mod.rs", "mx-bench-before-budget")


def run(mx, rate, seconds):
    """One pair at `rate` per flow: (cpu us per round trip, round trips per
    second per flow, requests refused by plan or None)."""
    with tempfile.TemporaryDirectory() as d:
        procs = avc.launch_pair(d, rate, seconds, (64, 64), (), mx, port=7300)
        cores = avc.cpu_share(procs, seconds)
        for p in procs:
            p.wait()
        completed, over = [], None
        for host in ("a", "b"):
            lines = open(os.path.join(d, host, "report.csv")).read().splitlines()
            col = {name: i for i, name in enumerate(lines[0].split(","))}
            rows = [line.split(",") for line in lines[1:]]
            ticks = [r[col["ts"]] for r in rows if r[col["dir"]] == "host"]
            full = set(ticks[1:-1])
            back = [float(r[col["rep_pps"]]) for r in rows if r[col["dir"]] == "tx" and r[col["ts"]] in full]
            if not back:
                sys.exit(f"bench: {host} wrote no whole interval in {seconds} s")
            completed.append(statistics.mean(back))
            if "over_plan" in col:
                over = (over or 0) + sum(int(r[col["over_plan"]] or 0) for r in rows if r[col["dir"]] == "host")
        round_trips = sum(completed)
        return cores / round_trips * 1e6, round_trips / 2, over


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2_000_000, help="requests per second per flow")
    ap.add_argument("--seconds", type=float, default=5.5)
    ap.add_argument("--baseline", metavar="MX_BINARY")
    args = ap.parse_args()
    avc.build()
    base = args.baseline or baseline_build()
    print(f"machine: {avc.machine()}")
    print(f"rate: {args.rate} per flow, one flow each way; baseline: {base}")
    rows = {"this": [], "base": []}
    for i in range(args.rounds):
        for key, mx in (("this", avc.MX), ("base", base)):
            rows[key].append(run(mx, args.rate, args.seconds))
        (c1, r1, o1), (c0, r0, _) = rows["this"][-1], rows["base"][-1]
        print(f"  round {i + 1}: this {c1:.3f} us/rt, {r1 / 1e6:.3f} M rt/s, over_plan {o1}; "
              f"baseline {c0:.3f} us/rt, {r0 / 1e6:.3f} M rt/s")
    med = lambda key, k: statistics.median(r[k] for r in rows[key])  # noqa: E731
    ratio = lambda k: statistics.median(a[k] / b[k] for a, b in zip(rows["this"], rows["base"]))  # noqa: E731
    print("\n| figure | this build | baseline | median of the paired ratios this / baseline |")
    print("|---|---|---|---|")
    print(f"| CPU per round trip | {med('this', 0):.3f} us | {med('base', 0):.3f} us | {ratio(0):.3f} |")
    print(f"| round trips per flow | {med('this', 1) / 1e6:.3f} M/s | {med('base', 1) / 1e6:.3f} M/s | {ratio(1):.3f} |")
    print(f"| refused by plan | {max(r[2] or 0 for r in rows['this'])} (most in a round) | - | |")


if __name__ == "__main__":
    main()
