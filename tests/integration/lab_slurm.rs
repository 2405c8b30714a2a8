//! The fleet through a real Slurm (`--via slurm`): tests/lab/slurm.sh puts
//! slurmctld on the controller and a slurmd as node<i> in each of the lab's
//! host namespaces (proctrack/cgroup: a step's processes die with it, as on
//! a real cluster). Every mx command runs inside an allocation that `salloc`
//! made, with the environment salloc gives its shell. srun is never mocked.
//! Needs root and Debian's slurmctld, slurmd, slurm-client and munge
//! (tests/run installs them).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::lab::Lab;
use crate::util::{Run, Sandbox};

/// The Slurm lab's network (198.18.112.0/24): one Slurm lab per machine.
const NET: u8 = 112;
const NODES: usize = 3;

/// An allocation held by `salloc` for as long as this lives: salloc's
/// command prints the environment it gives a shell, then sleeps.
struct Allocation {
    salloc: Child,
    env: Vec<(String, String)>,
    job: String,
    conf: String,
}

impl Allocation {
    fn get(lab: &Lab, nodes: usize) -> Allocation {
        let conf = lab.dir.join("slurm.conf").display().to_string();
        let mut salloc = Command::new("salloc")
            .args(["-N", &nodes.to_string(), "-J", "mx-lab", "--immediate=30"])
            .args(["sh", "-c", "env; echo mx-env-end; exec sleep 600"])
            .env("SLURM_CONF", &conf)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("salloc (Debian's slurm-client)");
        let mut env = Vec::new();
        let lines = BufReader::new(salloc.stdout.take().unwrap()).lines();
        for line in lines.map_while(Result::ok) {
            if line == "mx-env-end" {
                break;
            }
            if let Some((k, v)) = line.split_once('=')
                && k.starts_with("SLURM_")
            {
                env.push((k.to_string(), v.to_string()));
            }
        }
        let job = env
            .iter()
            .find(|(k, _)| k == "SLURM_JOB_ID")
            .map(|(_, v)| v.clone())
            .expect("salloc granted an allocation");
        Allocation {
            salloc,
            env,
            job,
            conf,
        }
    }

    /// `mx args...` in `sb`, inside the allocation (plus `extra` variables).
    fn mx(&self, sb: &Sandbox, args: &[&str], extra: &[(&str, &str)]) -> Run {
        let mut env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        env.extend_from_slice(extra);
        sb.mx_env(args, &env)
    }

    /// The job's steps now, `id|name` per line.
    fn steps(&self) -> String {
        let out = Command::new("squeue")
            .args([
                "--noheader",
                "--steps",
                "--jobs",
                &self.job,
                "--format=%i|%j",
            ])
            .env("SLURM_CONF", &self.conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        let _ = Command::new("scancel")
            .arg(&self.job)
            .env("SLURM_CONF", &self.conf)
            .status();
        let _ = self.salloc.kill();
        let _ = self.salloc.wait();
    }
}

/// mx with the Slurm lab's configuration, outside any allocation.
fn outside(lab: &Lab, sb: &Sandbox, args: &[&str]) -> Run {
    let conf = lab.dir.join("slurm.conf").display().to_string();
    sb.mx_env(args, &[("SLURM_CONF", &conf)])
}

fn assert_ok(run: &Run, what: &str) {
    assert_eq!(run.code, 0, "{what}: {}{}", run.stdout, run.stderr);
}

/// `run` (`what`) exited 0 and said each of `says`.
fn assert_says(run: &Run, what: &str, says: &[&str]) {
    assert_ok(run, what);
    for text in says {
        assert!(
            run.stdout.contains(text),
            "{what}: no {text:?} in\n{}",
            run.stdout
        );
    }
}

/// `run` (`what`) exited 0 and said `text` on `n` lines.
fn assert_lines(run: &Run, what: &str, text: &str, n: usize) {
    assert_ok(run, what);
    let said = run.stdout.lines().filter(|l| l.contains(text)).count();
    assert_eq!(said, n, "{what}: {text:?}\n{}", run.stdout);
}

#[test]
#[ignore = "needs root: a Slurm cluster on the lab's namespaces (CI runs it: --run-ignored all)"]
fn agent_lab_slurm_lifecycle_inside_salloc_leaves_nothing() {
    for daemon in [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/sbin/munged",
    ] {
        assert!(
            Path::new(daemon).exists(),
            "the Slurm lab needs Debian's slurmctld, slurmd, slurm-client and munge (tests/run installs them)"
        );
    }
    let lab = Lab::built_by("slurm.sh", NET, NODES);
    let sb = Sandbox::new();

    // Outside an allocation: one line saying how to get one, exit 2.
    for args in [
        &["gen", "--servers", "slurm"][..],
        &["status", "--via", "slurm"],
    ] {
        if args[0] == "status" {
            std::fs::copy(lab.dir.join("servers.txt"), sb.file("servers.txt")).unwrap();
            assert_ok(&sb.mx(&["gen"]), "gen from the lab's servers.txt");
        }
        let run = outside(&lab, &sb, args);
        assert_eq!(run.code, 2, "{args:?}: {}{}", run.stdout, run.stderr);
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(run.stderr.contains("`salloc -N "), "{}", run.stderr);
    }

    let alloc = Allocation::get(&lab, NODES);
    // The lab's own matrix (h1=198.18.112.1 ...) maps to the nodes by address.
    let by_addr = alloc.mx(&sb, &["status"], &[("MX_VIA", "slurm")]);
    assert_lines(&by_addr, "status by address", "NOT-DEPLOYED", NODES);
    // The allocation's own nodes, named and addressed by scontrol.
    let generated = alloc.mx(&sb, &["gen", "--servers", "slurm", "--pps", "1000"], &[]);
    assert_ok(&generated, "gen --servers slurm");
    let matrix = sb.read("matrix.csv");
    assert!(
        matrix.contains("node1=198.18.112.1") && matrix.contains("node3=198.18.112.3"),
        "{matrix}"
    );

    let slurm = |args: &[&str]| alloc.mx(&sb, &[args, &["--via", "slurm"]].concat(), &[]);
    let srun = format!("DRY-RUN srun --jobid {} --overlap", alloc.job);
    let sbcast = format!(
        "DRY-RUN sbcast --jobid '{}.<step>' --force --preserve --compress ",
        alloc.job
    );
    let dry = slurm(&["start", "--dry-run"]);
    assert_says(&dry, "start --dry-run", &[&srun, &sbcast]);
    for i in 1..=NODES {
        assert_eq!(std::fs::read_dir(lab.var_tmp(i)).unwrap().count(), 0);
    }
    assert_ok(&slurm(&["doctor"]), "doctor");

    // The traffic on the data NIC (eth1, 198.19.112.0/24), as `--bind ib0`
    // would put it on a fabric: resolved on each node through srun.
    let start = slurm(&["start", "--interval", "1", "--bind", "eth1"]);
    let running = ["[mx] running: 3 hosts, 6 flows", "mx status --via slurm"];
    assert_says(&start, "start", &running);
    for i in 1..=NODES {
        assert_eq!(lab.agents(i).len(), 1, "node{i} runs one agent");
        assert!(lab.var_tmp(i).join("mx/agent.stamp").exists());
        let deployed = std::fs::read_to_string(lab.var_tmp(i).join("mx/matrix.csv")).unwrap();
        assert!(deployed.contains("node2=198.19.112.2"), "{deployed}");
    }
    let steps = alloc.steps();
    assert_eq!(
        steps.matches("|mx-agent:/var/tmp/mx").count(),
        1,
        "one step holds every agent: {steps}"
    );
    let again = slurm(&["start", "--interval", "1"]);
    assert_eq!(again.code, 1, "a double start is refused");
    assert!(
        again
            .stdout
            .contains("already running -- mx stop --via slurm first"),
        "{}",
        again.stdout
    );

    crate::util::wait_for_steady(&lab.reports(), 2);
    assert_lines(&slurm(&["status"]), "status", "s ago: tx=", NODES);
    let summary = slurm(&["summarize", "--window", "2", "--json"]);
    assert_ok(&summary, "summarize");
    let doc: serde_json::Value = serde_json::from_str(&summary.stdout).unwrap();
    let flows = doc["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 6, "{}", summary.stdout);
    for flow in flows {
        assert!(
            flow["delivered_pps"].as_f64().unwrap() > 500.0,
            "every flow delivers: {flow}"
        );
    }

    // One host's row edited: reload restarts it alone, in a step of its
    // own; node2, which answers node1's new rate, re-reads that and runs on.
    let edited = matrix.replacen(
        "node1=198.18.112.1,,1000,1000",
        "node1=198.18.112.1,,2000,1000",
        1,
    );
    assert_ne!(edited, matrix, "{matrix}");
    sb.write("matrix.csv", &edited);
    let reloaded = [
        "node1  restarted (was running)",
        "node2  answers re-read: runs on",
        "reloaded: 1 restarted, 2 left running",
    ];
    assert_says(&slurm(&["reload", "--bind", "eth1"]), "reload", &reloaded);
    assert_eq!(lab.agents(1).len(), 1, "node1 runs its new agent");

    let logs = slurm(&["logs"]);
    assert_ok(&logs, "logs");
    assert!(sb.read("logs/node3.log").contains("host=node3"));

    assert_lines(&slurm(&["stop"]), "stop", "  ended", NODES);
    let cleaned = ["[mx] no job step of this fleet left in job "];
    assert_says(&slurm(&["clean", "--yes"]), "clean", &cleaned);
    for i in 1..=NODES {
        assert!(
            !lab.var_tmp(i).join("mx").exists(),
            "node{i}: the remote dir is gone"
        );
        assert!(lab.agents(i).is_empty(), "node{i}: no agent runs");
    }
    assert_eq!(alloc.steps().trim(), "", "no job step is left");

    // The README's way: one command from deploy to summary.
    let run = slurm(&["run", "--for", "3", "--interval", "1"]);
    let ran = ["[mx] every agent ended at", "s steady, 3 hosts, 6 flows"];
    assert_says(&run, "run", &ran);
    assert_eq!(alloc.steps().trim(), "", "the agents' step ended with them");

    // A layered matrix: one file that sbcast copies to every node holds
    // every node's slice (the host list and each row's rate: each agent
    // rebuilds its rows from the seed), and the run covers every pair.
    let layered = ["gen", "--servers", "slurm", "--pps", "1000", "--peers", "1"];
    let generated = alloc.mx(
        &sb,
        &[&layered[..], &["--dwell", "2", "--seed", "5"]].concat(),
        &[],
    );
    assert_ok(&generated, "gen a layered matrix");
    let run = slurm(&["run", "--for", "6", "--interval", "1"]);
    let ran = [
        "[mx] every agent ended at",
        "COVERAGE  6 of 6 ordered pairs",
    ];
    assert_says(&run, "run a layered matrix", &ran);
    for i in 1..=NODES {
        let deployed = std::fs::read_to_string(lab.var_tmp(i).join("mx/matrix.csv")).unwrap();
        assert!(
            deployed.starts_with("# mx slice v1 hosts=all ") && !deployed.contains("\nrow "),
            "node{i}: {deployed}"
        );
    }

    // A step of this fleet left behind (an mx killed mid-launch, a node that
    // hung): clean ends it, and says so.
    let mut stray = Command::new("srun")
        .args(["--jobid", &alloc.job, "--overlap", "--quiet", "-N1", "-n1"])
        .args(["-w", "node2", "-J", "mx-agent:/var/tmp/mx", "sleep", "300"])
        .env("SLURM_CONF", &alloc.conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut waited = 0;
    while !alloc.steps().contains("|mx-agent:/var/tmp/mx") {
        waited += 1;
        assert!(
            waited < 100,
            "the stray step never showed: {}",
            alloc.steps()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let cancelled = ["[mx] cancelled the job step(s) still there: "];
    assert_says(&slurm(&["clean", "--yes"]), "clean a stray", &cancelled);
    let _ = stray.wait();
    assert_eq!(alloc.steps().trim(), "", "no job step is left");
}
