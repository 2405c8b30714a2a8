//! Slurm (`--via slurm`): the fleet is nodes of the allocation this shell
//! is in (`salloc -N 40`, or a batch script), reached through the scheduler
//! instead of ssh, so a site that blocks ssh to its compute nodes still runs mx.
//!
//! - A command on one node is a job step there: `srun --overlap -N1 -n1
//!   -w NODE timeout -k 5 S sh -c SCRIPT`. `--overlap` lets it share the
//!   node with the agents' own step; `timeout` bounds it on the node, and
//!   this side kills srun 15 s after that (a step slurmctld is slow to make).
//! - Files go out once for every node, by `sbcast`: it has no node list of its
//!   own, but `--jobid=JOB.STEP` aims it at a step's nodes, so a short "copy"
//!   step across the nodes holds them while sbcast writes, and ends when this
//!   side closes its input. The remote dir must be node-local (the default
//!   /var/tmp/mx is): on a shared filesystem every node would write one file.
//! - The agents run as one job step across the nodes (`srun -N k
//!   --ntasks-per-node=1`), left running on this machine in the background,
//!   its output in an unlinked file. Under Slurm a process lives only as long
//!   as the step that started it (proctrack kills what a step leaves behind),
//!   so the step must outlive `mx start`, and each agent is its node's task:
//!   the launch script says it started, then waits for the agent. One step
//!   rather than one per node (`srun -w node`, backgrounded): an srun client
//!   holds ~8 MB here, which for a thousand nodes is gigabytes on the login
//!   node, and one step is one request to slurmctld rather than a thousand.
//!   A host `mx reload` restarts gets a step of its own; a step ends when
//!   its last agent does.
//! - `mx clean` then looks for this fleet's steps (`mx-agent:DIR`,
//!   `mx-copy:DIR`) and cancels any still there ([`Transport::sweep`]).
//!
//! Which node a matrix host is: the node of its name, else the node whose
//! NodeAddr (or NodeHostName) its address is, written or resolved. `mx gen
//! --servers slurm` writes the allocation's nodes as `NAME=NODEADDR`.

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{
    CANNOT_RUN, Copy, HeldLaunch, Outcome, TIMED_OUT, Transport, run_command, run_command_into,
};
use crate::scripts::{self, q};
use crate::shell_join;
use mx_base::error::{Error, Result};
use mx_base::units::wall_now;
use mx_matrix::Host;
use mx_matrix::resolve::lookup;

/// A node of the allocation, as `scontrol show node` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    /// NodeAddr: where the cluster reaches the node (often its name).
    pub addr: String,
    /// NodeHostName: its hostname (often its name).
    pub hostname: String,
}

/// The allocation this shell is in: its job id and its nodes, in the order
/// `scontrol show hostnames` lists them.
#[derive(Debug, Clone)]
pub struct Allocation {
    pub job: String,
    pub nodes: Vec<Node>,
}

/// How long a query of slurmctld (scontrol, squeue) may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);
/// How much longer than a step's own bound this side waits for srun.
const SRUN_SLACK: Duration = Duration::from_secs(15);

/// The refusal outside an allocation: what `what` (`--via slurm`) needs, and
/// the one command that gets it (`salloc -N <hosts>`).
pub fn outside(what: &str, hosts: Option<usize>) -> Error {
    let n = hosts.map_or_else(|| "<hosts>".to_string(), |n| n.to_string());
    Error::refused(format!(
        "{what} works inside a Slurm allocation, and this shell is in none (no SLURM_JOB_ID): `salloc -N {n}` opens a shell in one -- run mx there"
    ))
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Runs a Slurm client command (`scontrol ...`), its output or a refusal
/// naming it.
fn query(argv: &[&str]) -> Result<String> {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..]);
    let got = run_command(cmd, QUERY_TIMEOUT);
    if got.code == CANNOT_RUN {
        return Err(Error::refused(format!(
            "{} is not on this machine's PATH: --via slurm needs Slurm's client commands (srun, sbcast, scontrol, squeue)",
            argv[0]
        )));
    }
    if !got.ok() {
        return Err(Error::refused(format!(
            "`{}` failed: {}",
            shell_join(argv),
            got.text.lines().next().unwrap_or("(no output)")
        )));
    }
    Ok(got.text)
}

impl Allocation {
    /// The allocation this shell is in (SLURM_JOB_ID and SLURM_JOB_NODELIST),
    /// its nodes named and addressed by scontrol. Outside one, refused with
    /// the `salloc` that gets one (`hosts` nodes, when known).
    pub fn current(what: &str, hosts: Option<usize>) -> Result<Allocation> {
        let Some(job) = env("SLURM_JOB_ID").or_else(|| env("SLURM_JOBID")) else {
            return Err(outside(what, hosts));
        };
        let Some(list) = env("SLURM_JOB_NODELIST").or_else(|| env("SLURM_NODELIST")) else {
            return Err(Error::refused(format!(
                "SLURM_JOB_ID is {job} but SLURM_JOB_NODELIST is not set: run mx in the shell salloc opens (or in the batch script), where Slurm sets both"
            )));
        };
        let names = query(&["scontrol", "show", "hostnames", &list])?;
        let details = parse_nodes(&query(&["scontrol", "-o", "show", "node", &list])?);
        let nodes = names
            .lines()
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(|name| {
                details
                    .iter()
                    .find(|d| d.name == name)
                    .cloned()
                    .unwrap_or_else(|| Node {
                        name: name.to_string(),
                        addr: name.to_string(),
                        hostname: name.to_string(),
                    })
            })
            .collect();
        Ok(Allocation { job, nodes })
    }

    /// The allocation as a server list: one `NAME=NODEADDR` line per node
    /// (just `NAME` where the two are the same), for `mx gen --servers slurm`.
    pub fn server_list(&self) -> String {
        self.nodes
            .iter()
            .map(|n| {
                if n.addr == n.name {
                    format!("{}\n", n.name)
                } else {
                    format!("{}={}\n", n.name, n.addr)
                }
            })
            .collect()
    }
}

/// The nodes of `scontrol -o show node` output, one line per node
/// (`NodeName=n1 Arch=... NodeAddr=10.0.0.1 NodeHostName=n1 ...`; other
/// values may hold spaces, these three do not).
pub(crate) fn parse_nodes(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let field = |key: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(key))
                    .map(str::to_string)
            };
            let name = field("NodeName=")?;
            Some(Node {
                addr: field("NodeAddr=").unwrap_or_else(|| name.clone()),
                hostname: field("NodeHostName=").unwrap_or_else(|| name.clone()),
                name,
            })
        })
        .collect()
}

/// Which node each matrix host is (its name, by host): the node of its name,
/// else the node whose NodeAddr, name or NodeHostName its address is, else
/// the node whose address resolves to an address (IPv4 or IPv6) the host's
/// does.
/// Refuses a host on no node of the allocation, and two hosts on one node.
pub fn map_hosts(hosts: &[Host], alloc: &Allocation) -> Result<HashMap<String, String>> {
    let by_name = |h: &Host| alloc.nodes.iter().position(|n| n.name == h.name);
    let by_addr = |h: &Host| {
        alloc
            .nodes
            .iter()
            .position(|n| [&n.addr, &n.name, &n.hostname].contains(&&h.addr))
    };
    let mut found: Vec<Option<usize>> = hosts
        .iter()
        .map(|h| by_name(h).or_else(|| by_addr(h)))
        .collect();
    if found.iter().any(Option::is_none) {
        // Resolved only when needed: a thousand lookups cost seconds.
        let ips = |addr: &str| -> Vec<IpAddr> {
            match addr.parse() {
                Ok(ip) => vec![ip],
                Err(_) => (addr, 0)
                    .to_socket_addrs()
                    .map(|found| found.map(|a| a.ip()).collect())
                    .unwrap_or_default(),
            }
        };
        let node_ips: Vec<Vec<IpAddr>> = alloc.nodes.iter().map(|n| ips(&n.addr)).collect();
        for (h, slot) in hosts.iter().zip(found.iter_mut()) {
            if slot.is_none() {
                let want = lookup(h);
                *slot = node_ips
                    .iter()
                    .position(|node| node.iter().any(|ip| want.contains(ip)));
            }
        }
    }
    let missing: Vec<String> = hosts
        .iter()
        .zip(&found)
        .filter(|(_, f)| f.is_none())
        .map(|(h, _)| {
            if h.addr == h.name {
                h.name.clone()
            } else {
                format!("{} ({})", h.name, h.addr)
            }
        })
        .collect();
    if !missing.is_empty() {
        return Err(Error::refused(format!(
            "{} matrix host(s) not in this allocation (job {}, nodes {}): {} -- a host is the node of its name, or of its address (NodeAddr); `mx gen --servers slurm` writes a matrix of the allocation's nodes",
            missing.len(),
            alloc.job,
            listed(alloc.nodes.iter().map(|n| n.name.as_str())),
            listed(missing.iter().map(String::as_str)),
        )));
    }
    let mut node_of = HashMap::new();
    let mut host_on: HashMap<usize, &str> = HashMap::new();
    for (h, f) in hosts.iter().zip(&found) {
        let n = f.expect("every host found");
        if let Some(other) = host_on.insert(n, &h.name) {
            return Err(Error::refused(format!(
                "hosts {other} and {} are both node {} of the allocation: one agent per node, so one host per node",
                h.name, alloc.nodes[n].name
            )));
        }
        node_of.insert(h.name.clone(), alloc.nodes[n].name.clone());
    }
    Ok(node_of)
}

/// Up to eight names, then how many more.
fn listed<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    if names.len() <= 8 {
        names.join(", ")
    } else {
        format!("{}, ... ({} more)", names[..8].join(", "), names.len() - 8)
    }
}

/// The fleet through Slurm: the allocation's job, and each host's node.
pub struct Slurm {
    pub job: String,
    /// Each matrix host's node name, by host name.
    pub node_of: HashMap<String, String>,
}

/// The name of the step that holds a fleet's agents (`what` = `agent`) or
/// copies its files (`copy`): the fleet is its remote dir.
fn step_name(what: &str, dir: &str) -> String {
    format!("mx-{what}:{dir}")
}

/// srun's own line for a task that ended with an error: the outcome's code
/// says it already.
fn srun_noise(line: &str) -> bool {
    line.starts_with("srun: error: ")
        && line.contains(": task ")
        && (line.contains("Exited with exit code")
            || line.ends_with("Terminated")
            || line.ends_with("Killed"))
}

fn without_noise(text: &str) -> String {
    text.lines()
        .filter(|l| !srun_noise(l))
        .collect::<Vec<_>>()
        .join("\n")
}

fn command(argv: &[String]) -> Command {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd
}

impl Slurm {
    fn node<'a>(&'a self, host: &'a Host) -> &'a str {
        self.node_of
            .get(&host.name)
            .map_or(host.name.as_str(), String::as_str)
    }

    /// srun in this job, sharing the nodes with the steps already there,
    /// with this environment (PATH finds `timeout` and `sh`), whatever a
    /// batch script's `--export` said.
    fn srun(&self) -> Vec<String> {
        [
            "srun",
            "--jobid",
            &self.job,
            "--overlap",
            "--quiet",
            "--chdir",
            "/",
            "--export",
            "ALL",
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// `--nodes K --ntasks K --ntasks-per-node 1 --nodelist a,b`: one task on each node.
    fn across(nodes: &[&str]) -> Vec<String> {
        let n = nodes.len().to_string();
        [
            "--nodes",
            &n,
            "--ntasks",
            &n,
            "--ntasks-per-node",
            "1",
            "--nodelist",
            &nodes.join(","),
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// `timeout -k 5 S`: a step's own bound, on its node.
    fn bounded(timeout: Duration) -> Vec<String> {
        ["timeout", "-k", "5", &timeout.as_secs().max(1).to_string()]
            .map(str::to_string)
            .to_vec()
    }

    /// The srun running `script` on `host`'s node, bounded by `timeout`.
    pub(crate) fn run_argv(&self, host: &Host, script: &str, timeout: Duration) -> Vec<String> {
        let mut argv = self.srun();
        argv.extend(Self::across(&[self.node(host)]));
        argv.extend(["--job-name", "mx"].map(str::to_string));
        argv.extend(Self::bounded(timeout));
        argv.extend(["sh", "-c", script].map(str::to_string));
        argv
    }

    /// A step of this fleet (`mx-<what>:<dir>`) across `nodes`, one task on
    /// each, a task that fails leaving the others be, with `options`.
    fn fleet_step(&self, what: &str, dir: &str, nodes: &[&str], options: &[&str]) -> Vec<String> {
        let mut argv = self.srun();
        argv.extend(Self::across(nodes));
        argv.extend(
            ["--kill-on-bad-exit=0", "--job-name", &step_name(what, dir)].map(str::to_string),
        );
        argv.extend(options.iter().map(|o| o.to_string()));
        argv
    }

    /// The copy step across `nodes`: each task says the step's id, then waits
    /// for its input (all tasks share it) to close.
    fn copy_argv(&self, nodes: &[&str], dir: &str, timeout: Duration) -> Vec<String> {
        let mut argv = self.fleet_step("copy", dir, nodes, &["--input", "all"]);
        argv.extend(Self::bounded(timeout));
        argv.extend(["sh", "-c", "echo \"mx-step=$SLURM_STEP_ID\"; read -r _"].map(str::to_string));
        argv
    }

    /// sbcast of `file` into `dir` on the nodes of step `step`.
    /// sbcast of `file` into `dir` on the nodes of step `step`; `compress`:
    /// compressed on its way down Slurm's tree (lz4, the library sbcast
    /// defaults to), unpacked by each node's slurmd.
    fn sbcast_argv(&self, step: &str, file: &Path, dir: &str, compress: bool) -> Vec<String> {
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut argv = vec![
            "sbcast".to_string(),
            "--jobid".to_string(),
            format!("{}.{step}", self.job),
            "--force".to_string(),
            "--preserve".to_string(),
        ];
        if compress {
            argv.push("--compress".to_string());
        }
        argv.extend([file.display().to_string(), format!("{dir}/{name}")]);
        argv
    }

    /// The step holding the agents of `hosts`: one task per node, each
    /// running `script` as its host, output labelled by task; a task that
    /// ends never ends the others (`--wait 0`: whatever the site's WaitTime).
    fn held_argv(&self, hosts: &[&Host], dir: &str, script: &str) -> Vec<String> {
        let nodes: Vec<&str> = hosts.iter().map(|h| self.node(h)).collect();
        let options = ["--wait", "0", "--label", "--cpu-bind", "none"];
        let mut argv = self.fleet_step("agent", dir, &nodes, &options);
        argv.extend(["sh", "-c", &self.held_script(hosts, script)].map(str::to_string));
        argv
    }

    /// `script` run as the host of this node: `$MX_HOST` set by the node's
    /// name, the node said first, and the script's exit status said last.
    fn held_script(&self, hosts: &[&Host], script: &str) -> String {
        let mut case = String::new();
        for h in hosts {
            case.push_str(&format!("{}) MX_HOST={} ;;\n", q(self.node(h)), q(&h.name)));
        }
        format!(
            "echo \"{NODE_MARK}$SLURMD_NODENAME\"\ntrap 'echo \"{EXIT_MARK}$?\"' EXIT\n\
             case \"$SLURMD_NODENAME\" in\n{case}*) echo \"node $SLURMD_NODENAME runs no host of this fleet\"; exit 1 ;;\nesac\n{script}"
        )
    }

    /// `squeue` listing this job's steps: `JOB.STEP|NAME` per line.
    fn steps_argv(&self) -> Vec<String> {
        [
            "squeue",
            "--noheader",
            "--steps",
            "--jobs",
            &self.job,
            "--format",
            "%i|%j",
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// This fleet's steps still in the job (id, name).
    fn fleet_steps(&self, dir: &str) -> std::result::Result<Vec<(String, String)>, Outcome> {
        let mine = [step_name("agent", dir), step_name("copy", dir)];
        let got = run_command(command(&self.steps_argv()), QUERY_TIMEOUT);
        if !got.ok() {
            return Err(Outcome {
                code: got.code,
                text: format!("cannot list the job's steps: {}", got.text),
            });
        }
        Ok(got
            .text
            .lines()
            .filter_map(|l| l.split_once('|'))
            .filter(|(_, name)| mine.iter().any(|m| m == name))
            .map(|(id, name)| (id.trim().to_string(), name.to_string()))
            .collect())
    }

    /// Waits up to `wait` for this fleet's steps to end; those left.
    fn steps_after(
        &self,
        dir: &str,
        wait: Duration,
    ) -> std::result::Result<Vec<(String, String)>, Outcome> {
        let deadline = Instant::now() + wait;
        loop {
            let left = self.fleet_steps(dir)?;
            if left.is_empty() || Instant::now() >= deadline {
                return Ok(left);
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// The line each held task says first: `mx-node=<node name>`.
const NODE_MARK: &str = "mx-node=";
/// The line each held task says last: `mx-exit=<status>`.
const EXIT_MARK: &str = "mx-exit=";

/// What one task of a held step said.
#[derive(Debug, Default, Clone, PartialEq)]
struct Told {
    node: Option<String>,
    lines: Vec<String>,
    /// Its answer: 0 once it said it holds its agent, else its exit status.
    code: Option<i32>,
}

/// The held step's output so far: each task's lines (by srun's `--label`,
/// `  3: text`), and srun's own lines.
fn parse_held(text: &str) -> (HashMap<u32, Told>, Vec<String>) {
    let mut tasks: HashMap<u32, Told> = HashMap::new();
    let mut own = Vec::new();
    for line in text.lines() {
        let labelled = line
            .trim_start()
            .split_once(": ")
            .and_then(|(label, rest)| label.parse::<u32>().ok().map(|task| (task, rest)));
        let Some((task, rest)) = labelled else {
            if !srun_noise(line) && !line.trim().is_empty() {
                own.push(line.to_string());
            }
            continue;
        };
        let told = tasks.entry(task).or_default();
        if told.code.is_some() {
            continue;
        }
        if let Some(node) = rest.strip_prefix(NODE_MARK) {
            told.node = Some(node.trim().to_string());
        } else if rest.trim() == scripts::HELD {
            told.code = Some(0);
        } else if let Some(code) = rest.strip_prefix(EXIT_MARK) {
            told.code = Some(code.trim().parse().unwrap_or(1));
        } else {
            told.lines.push(rest.to_string());
        }
    }
    (tasks, own)
}

impl Transport for Slurm {
    fn remote_dir(&self, _host: &Host, dir: &str) -> String {
        dir.to_string()
    }

    fn run(&self, host: &Host, script: &str, timeout: Duration) -> Outcome {
        let mut got = run_command(
            command(&self.run_argv(host, script, timeout)),
            timeout + SRUN_SLACK,
        );
        got.text = without_noise(&got.text);
        got
    }

    fn push(&self, host: &Host, files: &[PathBuf], dir: &str, timeout: Duration) -> Outcome {
        let copy = Copy {
            files,
            dir,
            timeout,
        };
        self.push_all(&[host], &copy).remove(0)
    }

    fn pull(&self, host: &Host, remote: &str, to: &Path, timeout: Duration) -> Outcome {
        let script = format!("exec cat -- {}", q(remote));
        let mut got = run_command_into(
            command(&self.run_argv(host, &script, timeout)),
            to,
            timeout + SRUN_SLACK,
        );
        got.text = without_noise(&got.text);
        got
    }

    fn broadcasts(&self) -> bool {
        true
    }

    /// One copy step across the hosts' nodes, and sbcast of each file to it.
    fn push_all(&self, hosts: &[&Host], copy: &Copy) -> Vec<Outcome> {
        if hosts.is_empty() {
            return Vec::new();
        }
        let every = |code: i32, text: String| vec![Outcome { code, text }; hosts.len()];
        let nodes: Vec<&str> = hosts.iter().map(|h| self.node(h)).collect();
        let mut holder = command(&self.copy_argv(&nodes, copy.dir, copy.timeout));
        holder
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match holder.spawn() {
            Ok(child) => child,
            Err(e) => return every(CANNOT_RUN, format!("cannot run srun: {e}")),
        };
        let input = child.stdin.take();
        let mut stderr = child.stderr.take().expect("piped");
        let said = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        let copied = first_step_id(child.stdout.take().expect("piped"), copy.timeout)
            .map(|step| self.sbcast_to(&step, &nodes, copy));
        // Its input closed, each task of the copy step ends.
        drop(input);
        end_within(&mut child, Duration::from_secs(10));
        let said = said.join().unwrap_or_default();
        copied.unwrap_or_else(|| {
            every(
                1,
                format!(
                    "the copy step did not start: {}",
                    without_noise(said.trim())
                ),
            )
        })
    }

    fn holds_agents(&self) -> bool {
        true
    }

    /// One step per chunk of hosts whose script fits an argument (see
    /// `held_chunks`): all launched at once, their output read until every
    /// node has answered, its step has ended, or the launch's timeout.
    fn run_held(&self, hosts: &[&Host], launch: &HeldLaunch) -> Vec<(Outcome, f64)> {
        let deadline = Instant::now() + launch.timeout;
        let mut answers: HashMap<String, (Outcome, f64)> = HashMap::new();
        let mut steps = Vec::new();
        for chunk in held_chunks(self, hosts) {
            match self.spawn_held(&chunk, launch) {
                Ok(step) => steps.push(step),
                Err(failed) => {
                    for h in chunk {
                        answers.insert(h.name.clone(), (failed.clone(), wall_now()));
                    }
                }
            }
        }
        while steps.iter_mut().any(|step| !step.look()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for step in &steps {
            for (h, answer) in step.hosts.iter().zip(step.answers(self, launch.timeout)) {
                answers.insert(h.name.clone(), answer);
            }
        }
        hosts
            .iter()
            .map(|h| answers.remove(&h.name).expect("every host answered"))
            .collect()
    }

    fn sweep(&self, dir: &str, wait: Duration) -> Option<Outcome> {
        let left = match self.steps_after(dir, wait) {
            Ok(left) => left,
            Err(failed) => return Some(failed),
        };
        if left.is_empty() {
            return Some(Outcome {
                code: 0,
                text: format!("no job step of this fleet left in job {}", self.job),
            });
        }
        let ids: Vec<String> = left.iter().map(|(id, _)| id.clone()).collect();
        let mut cancel = vec!["scancel".to_string()];
        cancel.extend(ids.iter().cloned());
        let cancelled = run_command(command(&cancel), QUERY_TIMEOUT);
        let still = match self.steps_after(dir, wait) {
            Ok(still) => still,
            Err(failed) => return Some(failed),
        };
        let named = |steps: &[(String, String)]| {
            steps
                .iter()
                .map(|(id, name)| format!("{id} ({name})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        Some(if still.is_empty() {
            Outcome {
                code: 0,
                text: format!("cancelled the job step(s) still there: {}", named(&left)),
            }
        } else {
            Outcome {
                code: 1,
                text: format!(
                    "LEFTOVER: job step(s) still there after scancel: {}{} -- Slurm ends a step once every node of it answers (a node that does not holds it until slurmctld gives up on the node; `squeue -s` shows it)",
                    named(&still),
                    if cancelled.ok() {
                        String::new()
                    } else {
                        format!(" ({})", cancelled.text)
                    }
                ),
            }
        })
    }
}

impl Slurm {
    /// sbcast of each of `files` to the nodes of the copy step `step`; a
    /// failure that names a node (`REQUEST_FILE_BCAST(node2)`) is that
    /// node's, any other every host's.
    fn sbcast_to(&self, step: &str, nodes: &[&str], copy: &Copy) -> Vec<Outcome> {
        let mut outcomes = vec![
            Outcome {
                code: 0,
                text: String::new(),
            };
            nodes.len()
        ];
        for file in copy.files {
            let send = |compress| {
                run_command(
                    command(&self.sbcast_argv(step, file, copy.dir, compress)),
                    copy.timeout,
                )
            };
            let mut sent = send(true);
            // A Slurm built without the compression library refuses the
            // option: the file goes as it is.
            let lowered = sent.text.to_ascii_lowercase();
            if !sent.ok() && (lowered.contains("compress") || lowered.contains("lz4")) {
                sent = send(false);
            }
            if sent.ok() {
                continue;
            }
            let text = format!("sbcast {}: {}", file.display(), sent.text);
            let named: Vec<usize> = (0..nodes.len())
                .filter(|&i| sent.text.contains(&format!("({})", nodes[i])))
                .collect();
            if named.is_empty() {
                return vec![
                    Outcome {
                        code: sent.code,
                        text
                    };
                    nodes.len()
                ];
            }
            for i in named {
                outcomes[i] = Outcome {
                    code: 1,
                    text: text.clone(),
                };
            }
        }
        outcomes
    }
}

/// The most bytes of node-to-host lines one held step's script carries: a
/// single argument may not pass 128 KiB (MAX_ARG_STRLEN), so a fleet of
/// thousands of nodes is held by a few steps.
const HELD_CASES_MAX: usize = 64 * 1024;

/// `hosts` in runs whose held script's node-to-host lines fit
/// [`HELD_CASES_MAX`], in order.
fn held_chunks<'h>(slurm: &Slurm, hosts: &[&'h Host]) -> Vec<Vec<&'h Host>> {
    let mut chunks: Vec<Vec<&Host>> = Vec::new();
    let mut bytes = 0;
    for &h in hosts {
        let line = q(slurm.node(h)).len() + q(&h.name).len() + 16;
        match chunks.last_mut() {
            Some(chunk) if bytes + line <= HELD_CASES_MAX => {
                chunk.push(h);
                bytes += line;
            }
            _ => {
                chunks.push(vec![h]);
                bytes = line;
            }
        }
    }
    chunks
}

/// A held step as it launches: its srun, the file its output goes to (read
/// here, unlinked when this is dropped while srun keeps writing to it), its
/// hosts, and what its tasks have said so far.
struct Held<'h> {
    child: std::process::Child,
    log: tempfile::NamedTempFile,
    hosts: Vec<&'h Host>,
    tasks: HashMap<u32, Told>,
    own: Vec<String>,
    ended: Option<std::process::ExitStatus>,
    /// When each node's answer was first seen (Unix seconds), by node name.
    seen: HashMap<String, f64>,
}

impl Slurm {
    /// Starts the step holding `hosts`, its output going to a file: a pipe
    /// would end the step once this command exits.
    fn spawn_held<'h>(
        &self,
        hosts: &[&'h Host],
        launch: &HeldLaunch,
    ) -> std::result::Result<Held<'h>, Outcome> {
        let cannot = |text: String| Outcome {
            code: CANNOT_RUN,
            text,
        };
        let log = tempfile::NamedTempFile::new()
            .map_err(|e| cannot(format!("cannot make a file for srun's output: {e}")))?;
        let (Ok(out), Ok(err)) = (log.as_file().try_clone(), log.as_file().try_clone()) else {
            return Err(cannot("cannot hand srun its output file".to_string()));
        };
        let mut cmd = command(&self.held_argv(hosts, launch.dir, launch.script));
        // Its own process group: a ctrl-c meant for mx never reaches it.
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = cmd
            .spawn()
            .map_err(|e| cannot(format!("cannot run srun: {e}")))?;
        Ok(Held {
            child,
            log,
            hosts: hosts.to_vec(),
            tasks: HashMap::new(),
            own: Vec::new(),
            ended: None,
            seen: HashMap::new(),
        })
    }
}

impl Held<'_> {
    /// Reads what the step has said; true once every node has answered or
    /// the step has ended.
    fn look(&mut self) -> bool {
        if self.ended.is_none() {
            // Before the read: whatever it said before it ended is in the file.
            self.ended = self.child.try_wait().ok().flatten();
        }
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        (self.tasks, self.own) = parse_held(&text);
        for told in self.tasks.values() {
            if let (Some(node), Some(_)) = (&told.node, told.code) {
                self.seen.entry(node.clone()).or_insert_with(wall_now);
            }
        }
        self.ended.is_some() || self.seen.len() >= self.hosts.len()
    }

    /// Each host's answer, in order, and when it came.
    fn answers(&self, slurm: &Slurm, timeout: Duration) -> Vec<(Outcome, f64)> {
        let own = self.own.join("\n");
        self.hosts
            .iter()
            .map(|h| {
                let node = slurm.node(h);
                let told = self
                    .tasks
                    .values()
                    .find(|t| t.node.as_deref() == Some(node));
                if let (Some(told), Some(&at)) = (told, self.seen.get(node)) {
                    let text = told.lines.join("\n");
                    return (
                        Outcome {
                            code: told.code.unwrap_or(1),
                            text,
                        },
                        at,
                    );
                }
                let said = told.map(|t| t.lines.join("\n")).unwrap_or_default();
                let why = match &self.ended {
                    Some(status) => {
                        format!("the agents' step ended ({status}) with no answer from node {node}")
                    }
                    None => format!("no answer from node {node} in {}s", timeout.as_secs()),
                };
                let text = [said.as_str(), own.as_str(), why.as_str()]
                    .into_iter()
                    .filter(|t| !t.is_empty())
                    .collect::<Vec<_>>()
                    .join("\n");
                let code = if self.ended.is_some() { 1 } else { TIMED_OUT };
                (Outcome { code, text }, wall_now())
            })
            .collect()
    }
}

/// Waits up to `wait` for `child` to exit, then kills it; reaped either way.
fn end_within(child: &mut std::process::Child, wait: Duration) {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The step id the copy step's first task says (`mx-step=3`), read from its
/// output within `timeout`; `None` when srun ends (or stays silent) first.
fn first_step_id(stdout: std::process::ChildStdout, timeout: Duration) -> Option<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut sent = false;
        // Read to the end, so the tasks never block on a full pipe.
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
        {
            if !sent && let Some(id) = line.trim().strip_prefix("mx-step=") {
                let _ = tx.send(id.to_string());
                sent = true;
            }
        }
    });
    rx.recv_timeout(timeout).ok()
}

/// The dry run of the Slurm transport: the commands it would run.
impl Slurm {
    pub(crate) fn rehearse_run(&self, host: &Host, script: &str, timeout: Duration) -> String {
        shell_join(&self.run_argv(host, script, timeout))
    }

    pub(crate) fn rehearse_push(&self, hosts: &[&Host], copy: &Copy) -> String {
        let nodes: Vec<&str> = hosts.iter().map(|h| self.node(h)).collect();
        let holder = self.copy_argv(&nodes, copy.dir, copy.timeout);
        let mut lines = vec![format!("{} &", shell_join(&holder))];
        for file in copy.files {
            lines.push(shell_join(
                &self.sbcast_argv("<step>", file, copy.dir, true),
            ));
        }
        lines.join("\n")
    }

    pub(crate) fn rehearse_pull(
        &self,
        host: &Host,
        remote: &str,
        to: &Path,
        timeout: Duration,
    ) -> String {
        let script = format!("exec cat -- {}", q(remote));
        format!(
            "{} > {}",
            shell_join(&self.run_argv(host, &script, timeout)),
            q(&to.display().to_string())
        )
    }

    pub(crate) fn rehearse_held(&self, hosts: &[&Host], launch: &HeldLaunch) -> String {
        let argv = self.held_argv(hosts, launch.dir, launch.script);
        format!("{} &", shell_join(&argv))
    }

    pub(crate) fn rehearse_sweep(&self) -> String {
        shell_join(&self.steps_argv())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mx_matrix::HostToken;

    fn host(token: &str) -> Host {
        Host::from_token(HostToken::parse(token).unwrap(), 9000)
    }

    fn alloc() -> Allocation {
        Allocation {
            job: "42".to_string(),
            nodes: parse_nodes(
                "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=198.18.112.1 NodeHostName=node1 OS=Linux 6.1 #1 SMP Version=22.05.8\n\
                 NodeName=node2 Arch=x86_64 NodeAddr=198.18.112.2 NodeHostName=node2 Reason=down for a bit [root@2026]\n\
                 NodeName=gpu7 NodeAddr=gpu7 NodeHostName=gpu7.cluster\n",
            ),
        }
    }

    #[test]
    fn scontrol_lines_give_each_node_its_name_and_addresses() {
        let a = alloc();
        assert_eq!(a.nodes.len(), 3);
        assert_eq!(a.nodes[0].addr, "198.18.112.1");
        assert_eq!(a.nodes[2].hostname, "gpu7.cluster");
        assert_eq!(
            a.server_list(),
            "node1=198.18.112.1\nnode2=198.18.112.2\ngpu7\n"
        );
    }

    #[test]
    fn hosts_map_to_nodes_by_name_then_by_address() {
        let a = alloc();
        let hosts = [
            host("node2=10.9.9.9"),
            host("h1=198.18.112.1"),
            host("gpu7.cluster"),
        ];
        let map = map_hosts(&hosts, &a).unwrap();
        assert_eq!(map["node2"], "node2", "by name, whatever its address");
        assert_eq!(map["h1"], "node1", "by NodeAddr");
        assert_eq!(map["gpu7.cluster"], "gpu7", "by NodeHostName");
    }

    #[test]
    fn an_ipv6_node_address_is_a_server_line_and_a_resolved_name_maps() {
        let a = Allocation {
            job: "1".to_string(),
            nodes: parse_nodes(
                "NodeName=v6n NodeAddr=fd00:18:112::1 NodeHostName=v6n\n\
                 NodeName=lo NodeAddr=localhost NodeHostName=lo\n",
            ),
        };
        let list = a.server_list();
        assert_eq!(list, "v6n=fd00:18:112::1\nlo=localhost\n");
        let tokens = mx_matrix::servers::parse_servers(&list, "the allocation").unwrap();
        assert_eq!(tokens[0].addr, "fd00:18:112::1");
        let hosts = [host("h6=[fd00:18:112::1]:5300"), host("h1=127.0.0.1")];
        let map = map_hosts(&hosts, &a).unwrap();
        assert_eq!(map["h6"], "v6n", "by NodeAddr, an IPv6 literal");
        assert_eq!(map["h1"], "lo", "by what NodeAddr resolves to");
    }

    #[test]
    fn a_host_on_no_node_and_two_on_one_are_refused() {
        let a = alloc();
        let err = map_hosts(&[host("node1"), host("h9=198.18.113.9")], &a).unwrap_err();
        assert_eq!(
            err.message(),
            "1 matrix host(s) not in this allocation (job 42, nodes node1, node2, gpu7): h9 (198.18.113.9) -- a host is the node of its name, or of its address (NodeAddr); `mx gen --servers slurm` writes a matrix of the allocation's nodes"
        );
        let err = map_hosts(&[host("node1"), host("h1=198.18.112.1")], &a).unwrap_err();
        assert_eq!(
            err.message(),
            "hosts node1 and h1 are both node node1 of the allocation: one agent per node, so one host per node"
        );
    }

    #[test]
    fn a_held_steps_output_is_split_by_task_and_answered_once() {
        let text = " 1: mx-node=node2\n 0: mx-node=node1\n 0: started\n 1: already running -- mx stop first\n 1: mx-exit=1\n\
                    srun: error: node2: task 1: Exited with exit code 1\n 0: mx-held\n 0: mx-exit=143\nsrun: error: Unable to create step\n";
        let (tasks, own) = parse_held(text);
        assert_eq!(
            tasks[&0],
            Told {
                node: Some("node1".into()),
                lines: vec!["started".into()],
                code: Some(0)
            }
        );
        assert_eq!(tasks[&1].code, Some(1));
        assert_eq!(tasks[&1].lines, ["already running -- mx stop first"]);
        assert_eq!(own, ["srun: error: Unable to create step"]);
    }

    #[test]
    fn thousands_of_nodes_are_held_by_steps_whose_scripts_fit_an_argument() {
        let hosts: Vec<Host> = (0..9000)
            .map(|i| {
                host(&format!(
                    "a-rather-long-host-name-{i:05}=10.{}.{}.1",
                    i / 250,
                    i % 250
                ))
            })
            .collect();
        let s = Slurm {
            job: "7".into(),
            node_of: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| (h.name.clone(), format!("compute-node-{i:05}")))
                .collect(),
        };
        let refs: Vec<&Host> = hosts.iter().collect();
        let chunks = held_chunks(&s, &refs);
        assert!(chunks.len() > 1, "{}", chunks.len());
        let flat: Vec<&str> = chunks.iter().flatten().map(|h| h.name.as_str()).collect();
        let names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(flat, names, "every host, once, in order");
        for chunk in &chunks {
            let argv = s.held_argv(chunk, "/var/tmp/mx", "true");
            assert!(
                argv.iter().all(|a| a.len() < 128 * 1024),
                "an argument too long"
            );
        }
        let three: Vec<&Host> = refs[..3].to_vec();
        assert_eq!(held_chunks(&s, &three).len(), 1);
    }

    #[test]
    fn a_held_script_names_its_host_by_node_quoted() {
        let s = Slurm {
            job: "7".into(),
            node_of: HashMap::from([("h 1".to_string(), "node1".to_string())]),
        };
        let h = host("h1");
        let mut h1 = h.clone();
        h1.name = "h 1".into();
        let script = s.held_script(&[&h1], "echo \"$MX_HOST\"");
        let out = Command::new("sh")
            .arg("-c")
            .arg(&script)
            .env("SLURMD_NODENAME", "node1")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "mx-node=node1\nh 1\nmx-exit=0\n"
        );
    }
}
