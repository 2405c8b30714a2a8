#!/usr/bin/env python3
"""What an always-on fleet costs a host, how an agent holds up for long, and
what a real Prometheus alerts on with the rules `mx monitor` writes.

  bench/always_on.py [--rounds 3] [--seconds 60]      # the cost, side by side
  bench/always_on.py --baseline [MX_BINARY]           # ... against the build before the count
  bench/always_on.py --soak --minutes 30 [--every 60] # the soak
  bench/always_on.py --alerts [--clean-minutes 10]    # Prometheus, the defaults (root)

The cost: 9 local agents on 127.0.1.0/24 run `mx gen --pps 10 --peers 8`
(10 requests a second to each of 8 peers, replies back) at `--interval 5`,
with `--metrics` (every agent serving /metrics, scraped every 5 s as a
Prometheus would) and without it, A B A B. Each round measures every
agent's CPU (its threads' run time, in ns, from /proc/PID/task/*/schedstat)
over `--seconds`, and the table gives
the median agent's share of one core, each side, and their ratio. With
`--baseline`, both sides serve --metrics, and A is the build of the commit
before replies carried the responder's count (built in a worktree under
/tmp, unless a binary is named): what the count costs an always-on agent.

The soak: 65 local agents, `--peers 64` at 10 pps, `--metrics` and
`--keep-report 1M`. Every `--every` seconds agent h1 (64 peers each way) is
sampled: its resident memory, its open files, its report's size, and five
scrapes of its /metrics (the slowest and the median). The table gives first
and last of each and the RSS slope after the warm-up with its standard error.

The alerts: a lab of 4 hosts with real sshd (tests/lab/lab.sh, net 134;
needs root) runs the documented always-on fleet (`mx gen --pps 10`, `mx
start --interval 5 --metrics`) under Debian's Prometheus with the files
`mx monitor` writes, every default kept (15 s scrapes, a 5m window, alerts
over 1% and 3 packets for 5m), beside a control: the rules as they were
when every share divided one agent's counter by another's. It watches
Prometheus's alerts every 15 s: `--clean-minutes` of a clean fleet from its
start; then 5% of the requests into h2 dropped, until h2's alert fires; then
healed, and a reload of an edited matrix, for `--after-minutes`. The table
says which alerts went pending or fired in each phase, and when.

Builds mx in release mode; writes nothing outside a temporary directory.
"""
import argparse
import json
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak import rss_kib, slope  # noqa: E402
import agent_vs_ceiling as avc  # noqa: E402  (the shared baseline build)


def fleet(d, hosts, peers):
    """A matrix of `hosts` local hosts, `peers` each at 10 pps, in `d`."""
    with open(os.path.join(d, "servers.txt"), "w") as f:
        for i in range(1, hosts + 1):
            f.write(f"h{i}=127.0.1.{i}\n")
    subprocess.run([MX, "gen", "--pps", "10", "--peers", str(peers)], cwd=d, check=True,
                   stdout=subprocess.DEVNULL)
    return [f"h{i}" for i in range(1, hosts + 1)]


def start(d, names, extra, mx=MX):
    procs = {}
    for name in names:
        home = os.path.join(d, name)
        os.makedirs(home, exist_ok=True)
        procs[name] = subprocess.Popen(
            [mx, "agent", "--matrix", "../matrix.csv", "--host", name, "--interval", "5",
             "--workers", "1", *extra],
            cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return procs


def stop(procs):
    for p in procs.values():
        p.terminate()
    for p in procs.values():
        p.wait()


def cpu_seconds(pid):
    """Seconds process `pid`'s threads have run, in nanoseconds as the
    scheduler counts them (/proc/PID/task/*/schedstat): an agent at 10 pps
    runs about 3 ms a second, a third of the 10 ms tick utime and stime
    count in, so those would round a round's median to whole ticks."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{tid}/schedstat").read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total / 1e9


def scrape(name, i):
    """One GET of agent `name`'s /metrics: seconds it took."""
    began = time.monotonic()
    with urllib.request.urlopen(f"http://127.0.1.{i}:{PORT}/metrics", timeout=5) as r:
        r.read()
    return time.monotonic() - began


def cost_round(d, names, metrics, seconds, mx=MX):
    """The median agent's share of a core over `seconds`, after a warm-up."""
    extra = ["--metrics", str(PORT)] if metrics else []
    procs = start(d, names, extra, mx)
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
    """A B A B: without and with --metrics; or, with --baseline, the build
    before the count and this one, both with --metrics."""
    if args.baseline is not None:
        base = args.baseline or avc.build_before("pub mod legs;", "src/agent/mod.rs",
                                                 "mx-bench-before-legs")
        sides = [("the build before the count", (True, base)), ("this build", (True, MX))]
    else:
        sides = [("without --metrics", (False, MX)), ("with --metrics", (True, MX))]
    with tempfile.TemporaryDirectory() as d:
        names = fleet(d, 9, 8)
        rounds = []
        for r in range(args.rounds):
            got = [cost_round(d, names, metrics, args.seconds, mx) for _, (metrics, mx) in sides]
            rounds.append(got)
            print(f"  round {r + 1}: {sides[0][0]} {got[0]:.3f}% of a core, {sides[1][0]} {got[1]:.3f}%",
                  flush=True)
    a = statistics.median(x for x, _ in rounds)
    b = statistics.median(y for _, y in rounds)
    ratios = [y / x for x, y in rounds if x > 0]
    print()
    print("| 9 agents, --peers 8 at 10 pps, --interval 5 | median agent, % of one core |")
    print("|---|---|")
    print(f"| {sides[0][0]} | {a:.3f} |")
    print(f"| {sides[1][0]} | {b:.3f} |")
    print(f"| median of the paired ratios | {statistics.median(ratios):.2f} |" if ratios else "| ratio | - |")
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


LAB_NET, LAB_HOSTS, LAB_PORT, PROM_PORT = 134, 4, 19534, 19134


def control_rules(window):
    """The control: each share one agent's counter over another's (the
    receiver's requests received over the senders' requests sent)."""
    sent = (f"sum by (host) (label_replace({{f}}(mx_requests_sent_total[{window}]),"
            f" 'host', '$1', 'peer', '(.*)'))")
    got = f"sum by (host) ({{f}}(mx_requests_received_total[{window}]))"
    expr = (f"(1 - {got.format(f='rate')} / {sent.format(f='rate')} > 0.01) and on (host) "
            f"({sent.format(f='increase')} - {got.format(f='increase')} >= 3)")
    return ("groups:\n- name: control\n  rules:\n  - alert: ControlCrossTargetLossIntoHost\n"
            f"    expr: {json.dumps(expr)}\n    for: 5m\n")


def prometheus_alerts():
    with urllib.request.urlopen(f"http://127.0.0.1:{PROM_PORT}/api/v1/alerts", timeout=10) as r:
        doc = json.load(r)
    return doc["data"]["alerts"]


def watch(phase, minutes, seen, began, done=None):
    """Polls the alerts every 15 s for `minutes` (or until `done`): the
    first time each alert was pending and firing, into `seen[phase]`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < minutes * 60:
        alerts = prometheus_alerts()
        for a in alerts:
            labels = a["labels"]
            name = labels["alertname"] + "{" + ",".join(
                f"{k}={v}" for k, v in sorted(labels.items()) if k in ("host", "from", "to")) + "}"
            seen.setdefault(phase, {}).setdefault(name, {}).setdefault(
                a["state"], time.monotonic() - began)
        if done and done(alerts):
            return time.monotonic() - t0
        time.sleep(15)
    return None


def alerts(args):
    if os.getuid() != 0 or not os.path.exists("/usr/bin/prometheus"):
        sys.exit("bench: --alerts needs root (a lab of network namespaces) and Debian's prometheus")
    lab_sh = os.path.join(ROOT, "tests", "lab", "lab.sh")
    with tempfile.TemporaryDirectory() as lab, tempfile.TemporaryDirectory() as d, \
            tempfile.TemporaryDirectory() as tsdb:
        net, hosts = str(LAB_NET), str(LAB_HOSTS)
        subprocess.run(["bash", lab_sh, "up", net, hosts, lab], check=True)
        prom = None
        env = dict(os.environ, MX_SSH=f"ssh -F {lab}/ssh_config", MX_SCP=f"scp -F {lab}/ssh_config")
        mx = lambda *a: subprocess.run([MX, *a], cwd=d, env=env, check=True,  # noqa: E731
                                       stdout=subprocess.DEVNULL)
        nft = lambda host, text, *a: subprocess.run(  # noqa: E731
            ["ip", "netns", "exec", f"mx{net}h{host}", "nft", *(a or ("-f", "-"))],
            input=text, text=True, check=True)
        try:
            subprocess.run(["cp", f"{lab}/servers.txt", d], check=True)
            mx("gen", "--pps", "10")
            mx("monitor", "--metrics", str(LAB_PORT))
            mon = os.path.join(d, "monitor")
            open(os.path.join(mon, "control.yml"), "w").write(control_rules("5m"))
            config = open(os.path.join(mon, "prometheus.yml")).read()
            open(os.path.join(mon, "bench.yml"), "w").write(
                config.replace('- "rules.yml"', '- "rules.yml"\n  - "control.yml"'))
            mx("start", "--interval", "5", "--metrics", str(LAB_PORT))
            began = time.monotonic()
            prom = subprocess.Popen(
                ["/usr/bin/prometheus", f"--config.file={mon}/bench.yml",
                 f"--storage.tsdb.path={tsdb}", f"--web.listen-address=127.0.0.1:{PROM_PORT}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(5)
            seen = {}
            print(f"clean: {args.clean_minutes:g} min from the start", flush=True)
            watch("clean", args.clean_minutes, seen, began)
            print("5% of the requests into h2 dropped, until its alert fires", flush=True)
            nft(2, "table inet mxbench {\n chain c {\n  type filter hook input priority 0;\n"
                   "  udp dport 5300 numgen random mod 10000 < 500 drop\n }\n}\n")
            fault_at = time.monotonic()
            fired = watch("5% into h2", 20, seen, fault_at, lambda al: any(
                a["labels"]["alertname"] == "MxLossIntoHost" and a["labels"].get("host") == "h2"
                and a["state"] == "firing" for a in al))
            print(f"healed, and a reload of an edited matrix: {args.after_minutes:g} min", flush=True)
            nft(2, "", "delete", "table", "inet", "mxbench")
            lines = open(os.path.join(d, "matrix.csv")).read().splitlines()
            row = next(i for i, line in enumerate(lines) if line.startswith("h1"))
            cells = lines[row].split(",")
            cells[3] = "20"
            lines[row] = ",".join(cells)
            open(os.path.join(d, "matrix.csv"), "w").write("\n".join(lines) + "\n")
            mx("reload")
            watch("healed, reloaded", args.after_minutes, seen, time.monotonic())
        finally:
            if prom:
                prom.kill()
                prom.wait()
            subprocess.run([MX, "stop"], cwd=d, env=env, stdout=subprocess.DEVNULL)
            subprocess.run([MX, "clean", "--yes"], cwd=d, env=env, stdout=subprocess.DEVNULL)
            subprocess.run(["bash", lab_sh, "down", net, hosts, lab])
    print()
    print("| phase | alert | pending at | firing at |")
    print("|---|---|---|---|")
    for phase in ("clean", "5% into h2", "healed, reloaded"):
        for name, states in sorted(seen.get(phase, {}).items()):
            at = lambda s: f"{states[s]:.0f} s" if s in states else "-"  # noqa: E731
            print(f"| {phase} | {name} | {at('pending')} | {at('firing')} |")
        if not seen.get(phase):
            print(f"| {phase} | none | - | - |")
    print()
    ours = [n for n in seen.get("clean", {}) if not n.startswith("Control")]
    control = [n for n in seen.get("clean", {}) if n.startswith("Control")]
    print(f"clean fleet: {len(ours)} mx alert(s) pending or firing, {len(control)} of the control's")
    print(f"5% into h2: h2's alert fired {fired:.0f} s after the fault" if fired else
          "5% into h2: h2's alert never fired")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--soak", action="store_true")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--every", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=5, help="minutes left out of the slope")
    ap.add_argument("--baseline", nargs="?", const="", default=None, metavar="MX_BINARY",
                    help="cost against the build before the count (this binary instead)")
    ap.add_argument("--alerts", action="store_true")
    ap.add_argument("--clean-minutes", type=float, default=10)
    ap.add_argument("--after-minutes", type=float, default=10)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    if args.alerts:
        return alerts(args)
    return soak(args) if args.soak else cost(args)


if __name__ == "__main__":
    sys.exit(main())
