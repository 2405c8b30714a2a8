//! `mx agent`: the program every host of the fleet runs.
//!
//! It reads the matrix, answers every request it receives with a reply of
//! rx_size bytes, sends its own flows' requests at their target rates, times
//! what comes back, and appends one report row per flow per interval.
//!
//! Threads: `--workers` worker threads each run one event loop over their own
//! SO_REUSEPORT responder socket and their shard of the flow sockets
//! ([`worker`]); the main thread is the reporter, which merges the workers'
//! per-interval batches into rows on wall-clock boundaries ([`reporter`]):
//! the first tick is the next multiple of the interval on the wall clock, and
//! the rest follow the monotonic clock from there, so a clock step mid-run
//! neither stalls the agent nor skews its rates.
//! Workers and reporter share nothing mutable but a stop flag.

#![forbid(unsafe_code)]

/// A line on the agent's stdout (its log). Never panics: the log may sit on
/// a full disk, and the traffic must go on (`say!` would abort).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// The same on stderr, for diagnostics.
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod answers;
pub mod budget;
pub mod clock;
pub mod config;
pub mod counters;
pub mod cpu;
pub mod disk;
pub(crate) mod host_counters;
pub(crate) mod identity;
pub mod legs;
pub mod limits;
pub mod metrics;
pub(crate) mod neigh_table;
pub mod pacing;
pub(crate) mod pair_rtt;
pub mod plan;
pub mod report_keep;
pub mod reporter;
pub mod sequence;
pub mod slots;
pub mod stamp;
pub mod trace;
pub mod worker;

/// The sockets and the wire header the agent runs on, each its own crate.
pub use mx_udp as udp;
pub use mx_wire as wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use mx_base::error::{Error, Result};
use mx_base::units;
use mx_matrix::Matrix;

use clock::RunClock;
use config::{AgentConfig, MetricsAt};
use counters::Batch;
use metrics::Metrics;
use metrics::endpoint::Endpoint;
use mx_base::units::wall_now;
use plan::AgentPlan;
use reporter::Reporter;
use udp::Buffers;
use worker::Worker;

/// The responder's receive buffer when `--rcvbuf` is not given: 8 MiB absorbs a
/// burst of requests from many peers while the worker is busy sending.
const DEFAULT_RESPONDER_RCVBUF: usize = 8 << 20;
/// A flow socket's receive buffer when `--rcvbuf` is not given. The kernel's
/// default (~208 KB, about 1,500 small replies) overflows at a few hundred
/// kpps while the worker is busy answering: measured as UdpRcvbufErrors, and
/// it would read as return-leg loss that is the agent's own. A limit, not an
/// allocation: memory is used only by replies actually queued.
const DEFAULT_FLOW_RCVBUF: usize = 4 << 20;
/// Datagrams of the request size the responder's buffer holds at least, and
/// of the reply size a flow's: measured with 65507-byte datagrams, where the
/// defaults above overflowed at 60 kpps and 32 MiB ran loss-free at 86 kpps.
const RESPONDER_DATAGRAMS: usize = 512;
const FLOW_DATAGRAMS: usize = 256;

/// Names of the files the agent keeps beside its report.
pub(crate) const PID_FILE: &str = "agent.pid";
pub(crate) const STAMP_FILE: &str = "agent.stamp";

/// Worker threads for `flow_sockets` sockets: `None` (auto) is one per core;
/// either way capped at flows + 1, since a worker without a flow only answers
/// requests.
pub fn worker_count(asked: Option<usize>, flow_sockets: usize, cores: usize) -> usize {
    let wanted = asked.unwrap_or(cores.max(1));
    if flow_sockets > 0 {
        wanted.min(flow_sockets + 1)
    } else {
        wanted
    }
    .max(1)
}

/// Whether to coalesce with GSO/GRO; says once when the kernel cannot.
fn kernel_coalesces() -> bool {
    let yes = udp::kernel_coalesces();
    if !yes {
        warn!("mx agent: this kernel has no UDP GSO/GRO (Linux 5.0+): one datagram per trip");
    }
    yes
}

/// Writes `text` to `path` through a temp file and a rename.
fn write_file(path: &Path, text: &str) -> Result<()> {
    mx_base::files::write_atomically(path, |out| std::io::Write::write_all(out, text.as_bytes()))
}

/// Points stdout and stderr at `path` (appending), so every line the agent and
/// its workers print lands in one log, in order.
pub fn log_to(path: &Path) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| Error::io(path, "cannot open the log", &e))?;
    nix::unistd::dup2_stdout(&file)
        .and_then(|()| nix::unistd::dup2_stderr(&file))
        .map_err(|errno| Error::io(path, "cannot log to", &errno.into()))
}

/// Runs the agent `config` describes until it is stopped (a signal, the end
/// instant, its directory deleted); returns its exit code.
pub fn run(config: &AgentConfig) -> Result<u8> {
    // 1. The matrix, held to the agent's stricter standard.
    // A host's slice (what mx start copies) or a whole matrix.
    let (matrix, sliced_for) = mx_matrix::slice::load(&config.matrix)?;
    matrix.check_layer_zero(&config.matrix.display().to_string())?;
    for warning in matrix.warnings() {
        warn!("mx: warning: {warning}");
    }
    // 2-5. Who this host is, its addresses and its peers', its sockets' buffers.
    let mut plan = plan(config, matrix, sliced_for)?;
    // 6. A dwell the ticks cannot land on.
    warn_dwell(&plan);
    // 7. Workers.
    let flow_sockets = plan.flow_sockets();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    plan.workers = worker_count(config.run.workers, flow_sockets, cores);
    if plan.workers > cores {
        warn!(
            "workers: {} on a {cores}-core box. Each worker wants a core; expect them to share.",
            plan.workers
        );
    }
    // 8. File descriptors.
    let layered = plan.matrix.config.rotation.is_some();
    if let Some(line) = limits::ensure_fd_limit(flow_sockets, layered, plan.disk_handles())? {
        say!("{line}");
    }

    // 9. The clock, the report, the workers.
    let plan = Arc::new(plan);
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .map_err(|e| Error::refused(format!("cannot handle signals: {e}")))?;
    }
    let clock = Arc::new(RunClock::new(Arc::clone(&stop)));
    let (start_file, end_file, rate_file) = clock::control_paths(&config.report);
    // Control files of an earlier run must not start, end or scale this one.
    for stale in [&start_file, &end_file, &rate_file] {
        let _ = std::fs::remove_file(stale);
    }
    let metrics = serve_metrics(config, &plan)?;
    let mut reporter = Reporter::open(
        &config.report,
        &plan,
        Arc::clone(&clock),
        metrics,
        config.run.keep,
    )
    .map_err(|e| Error::io(&config.report, "cannot open the report", &e))?;
    let (rx, threads) = spawn_workers(&plan, &clock)?;

    // 10. The banner, then the files that say this agent is up.
    banner(config, &plan, &threads);
    interface_lines(reporter.interface(), &plan);
    let (home, pid_path) = write_up_files(config, &plan)?;
    let answers = answers::AnswerOrders::new(&home, &config.matrix, &config.run.stamp_words);

    // 11. The start: at once, at --start-at, or (--armed) when the controller
    // writes it; with --duration the end follows from it.
    let when = Timing {
        interval: plan.interval,
        duration: config.run.duration,
        grace: config.grace,
        start_file: config.armed.then_some(start_file),
        end_file,
        rate_file,
        rate_seen: std::cell::Cell::new(None),
        end_seen: std::cell::Cell::new(None),
        home,
    };
    if !config.armed {
        when.start(&clock, config.start_at);
    } else {
        say!(
            "armed: listening and answering; the flows begin at the fleet's start instant (agent.start)"
        );
    }

    // 12. Report until the workers stop.
    let result = report_loop(&plan, &rx, &mut reporter, &clock, (&when, &answers));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for thread in threads {
        let _ = thread.handle.join();
    }
    remove_pid_file(&pid_path);
    result?;
    if reporter.unwritten() > 0 {
        warn!(
            "mx agent: {} bytes of the report could not be written: the disk still refuses them",
            reporter.unwritten()
        );
        return Ok(mx_base::error::EXIT_PROBLEMS);
    }
    say!("mx agent: stopped");
    Ok(0)
}

/// Says when the layers' dwell is no whole multiple of the interval: their
/// switches will not land on report ticks.
fn warn_dwell(plan: &AgentPlan) {
    if let Some(rotation) = plan.matrix.config.rotation
        && rotation.fits_interval(plan.interval).is_err()
    {
        warn!(
            "mx agent: dwell {}s is not a whole multiple of the {}s interval -- layer switches will not land on report ticks",
            units::g(rotation.dwell),
            units::g(plan.interval)
        );
    }
}

/// Writes the files that say this agent is up, beside its report: its pid
/// and its stamp. Returns the agent's directory and the pid file's path.
fn write_up_files(config: &AgentConfig, plan: &AgentPlan) -> Result<(PathBuf, PathBuf)> {
    let home = match config.report.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let pid_path = home.join(PID_FILE);
    write_file(&pid_path, &format!("{}\n", std::process::id()))?;
    let fingerprint = stamp::fingerprint(&plan.matrix, plan.me);
    let inbound = &stamp::inbound_prints(&plan.matrix)[plan.me as usize];
    write_file(
        &home.join(STAMP_FILE),
        &stamp::stamp_text(&fingerprint, inbound, &config.run.stamp_words),
    )?;
    Ok((home, pid_path))
}

/// The plan of `config`'s run on `matrix`, all but the worker count: who this
/// host is, the address every socket binds to, its peers' addresses (each
/// resolved once) and its sockets' buffers.
fn plan(config: &AgentConfig, matrix: Matrix, sliced_for: Option<u32>) -> Result<AgentPlan> {
    // Every host's family: its literal's (a deployed matrix holds addresses),
    // or, for names, what they resolve to here; flows across families refused.
    let matrix = mx_matrix::resolve::with_families(&matrix)?;
    // 2. Who am I: the host a slice was cut for, which --host must agree with.
    let host = match sliced_for {
        Some(cut_for) => {
            let name = &matrix.hosts()[cut_for as usize].name;
            if let Some(flag) = config.host.as_deref().filter(|f| f != name) {
                return Err(Error::refused(format!(
                    "{}: a slice cut for host '{name}', and this agent is --host '{flag}'",
                    config.matrix.display()
                )));
            }
            Some(name.as_str())
        }
        None => config.host.as_deref(),
    };
    let me = identity::who_am_i(&matrix, host)?;
    let me_host = matrix.hosts()[me as usize].clone();
    let my_addr = identity::resolve(&me_host);
    // 3. --bind: the address every socket binds to, which must be ours in the matrix.
    let bound = match &config.run.bind {
        None => None,
        Some(spec) => {
            let (interface, ip) = identity::bind_address(spec, me_host.ip())?;
            identity::check_bind_matches(ip, &interface, &me_host, my_addr)?;
            say!("bind: '{spec}' -> {ip} ({interface})");
            Some(ip)
        }
    };
    // 4. Peers, resolved once. Every peer this host will ever send to must
    // have an address: a flow that cannot open fails the start, it never
    // becomes a quiet, empty run.
    let peer_addrs: Vec<Option<SocketAddr>> =
        matrix.hosts().iter().map(identity::resolve).collect();
    for peer in schedule_peers(&matrix, me) {
        if peer_addrs[peer as usize].is_none() {
            let host = &matrix.hosts()[peer as usize];
            return Err(Error::refused(format!(
                "cannot reach {} ({}): the address does not resolve to an {} address here -- fix its token in {}",
                host.name,
                host.endpoint(),
                host.ip().name(),
                config.matrix.display()
            )));
        }
    }
    let source_ips: Vec<Option<std::net::IpAddr>> =
        peer_addrs.iter().map(|a| a.map(|a| a.ip())).collect();
    let sources = budget::Sources::new(&matrix, me, &source_ips);
    // Requests leave from our matrix address when it is local, so responders
    // recognise the source as a matrix host.
    let local_ip = bound.or_else(|| my_addr.map(|a| a.ip()).filter(|ip| identity::is_local(*ip)));
    // Responders listen on that address too, so replies leave from the address
    // the peer sent to: a connected flow socket accepts nothing else.
    let listen = SocketAddr::new(local_ip.unwrap_or(me_host.ip().unspecified()), me_host.port);
    // 5. Buffers. Large datagrams need room for as many of them: a 64 KB
    // request takes a 64 KB slot of the buffer, and 8 MiB would hold barely
    // a hundred.
    let run = &config.run;
    let rcvbuf_or = |default| if run.rcvbuf == 0 { default } else { run.rcvbuf };
    let (tx_size, rx_size) = (
        matrix.config.tx_size as usize,
        matrix.config.rx_size as usize,
    );
    let responder_default = DEFAULT_RESPONDER_RCVBUF.max(RESPONDER_DATAGRAMS * tx_size);
    let flow_default = DEFAULT_FLOW_RCVBUF.max(FLOW_DATAGRAMS * rx_size);
    let disk = disk_plan(config, &matrix)?;
    Ok(AgentPlan {
        matrix,
        me,
        streams: run.streams,
        workers: 1,
        peer_addrs,
        sources,
        local_ip,
        listen,
        responder_buffers: Buffers {
            send: run.sndbuf,
            recv: rcvbuf_or(responder_default),
        },
        client_buffers: Buffers {
            send: run.sndbuf,
            recv: rcvbuf_or(flow_default),
        },
        interval: run.interval,
        busy_poll: run.busy_poll,
        gso: !run.no_gso && kernel_coalesces(),
        disk,
    })
}

/// The disk part of the plan, in a disk run: the data file, prepared here
/// (written once, or an earlier run's reused), and the I/O per packet. `None`
/// without `disk=`, or when every payload is header-only (said so).
fn disk_plan(config: &AgentConfig, matrix: &Matrix) -> Result<Option<disk::DiskPlan>> {
    let c = &matrix.config;
    let Some(sentence) = c.disk.sentence() else {
        return Ok(None);
    };
    let work = disk::DiskWork::of(c.disk, c.tx_size, c.rx_size);
    if work.is_none() {
        say!(
            "disk={}: the payloads are header-only ({} bytes), so there is nothing to put on disk",
            c.disk.name(),
            mx_matrix::MIN_PACKET_BYTES
        );
        return Ok(None);
    }
    let prepared = disk::file::prepare(&config.disk_file, config.run.disk_size)?;
    for line in prepared.lines() {
        say!("{line}");
    }
    // The workers' devices probe O_DIRECT as this one does.
    let direct = disk::device::Device::open(&prepared.path, 0)
        .map_err(|e| Error::io(&prepared.path, "cannot open", &e))?
        .direct;
    say!("{}", disk::banner_line(c.disk, sentence, &prepared, direct));
    Ok(Some(disk::DiskPlan {
        path: prepared.path,
        work,
        depth: config.run.disk_depth,
    }))
}

/// A started worker thread, and how many flow sockets it holds.
struct WorkerThread {
    handle: std::thread::JoinHandle<()>,
    flows: usize,
}

/// Starts the plan's workers; their batches come in on the receiver.
fn spawn_workers(
    plan: &Arc<AgentPlan>,
    clock: &Arc<RunClock>,
) -> Result<(mpsc::Receiver<Batch>, Vec<WorkerThread>)> {
    let (tx, rx) = mpsc::channel::<Batch>();
    // Every worker's responder socket is bound before any worker reads one.
    // The kernel hashes a flow over the SO_REUSEPORT group as it stands, so
    // each socket bound while others answer moves flows between workers,
    // each of which counts a flow from zero (the count its replies carry).
    // Bound first, a flow moves at most once: off the socket that queued its
    // first requests while the rest were bound.
    let workers = (0..plan.workers)
        .map(|id| {
            Worker::new(id, Arc::clone(plan), Arc::clone(clock), tx.clone())
                .map_err(|e| Error::refused(format!("worker {id}: {e}")))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut threads = Vec::new();
    for (id, worker) in workers.into_iter().enumerate() {
        let flows = worker.flow_count();
        let handle = std::thread::Builder::new()
            .name(format!("mx-worker-{id}"))
            .spawn(move || worker.run())
            .map_err(|e| Error::refused(format!("cannot start worker {id}: {e}")))?;
        threads.push(WorkerThread { handle, flows });
    }
    Ok((rx, threads))
}

/// The lines that open the agent's log: what it runs, how, and (layered) its
/// schedule.
/// Which interface's counters the host rows carry, its MTU, and the
/// requests or replies it cuts into IP fragments.
fn interface_lines(interface: Option<&str>, plan: &AgentPlan) {
    let Some(name) = interface else {
        say!(
            "the interface that carries the traffic is not known here: the host rows' nic_* cells stay blank"
        );
        return;
    };
    let mtu = identity::interface_mtu(name);
    say!(
        "traffic on {name}{}: what it sends and receives is counted in the host rows (nic_*)",
        mtu.map_or(String::new(), |mtu| format!(" (MTU {mtu})"))
    );
    // Loopback's MTU (65536) is past what an IP packet can state: no
    // datagram is cut there.
    let Some(mtu) = mtu.and_then(|m| mx_matrix::load::Mtu::checked("", i64::from(m)).ok()) else {
        return;
    };
    let ip = plan.matrix.hosts()[plan.me as usize].ip();
    let c = &plan.matrix.config;
    for (what, size) in [("requests", c.tx_size), ("replies", c.rx_size)] {
        if let Some(line) = mx_matrix::load::fragments_line(what, size, mtu, &[ip]) {
            say!("{name}: {line}");
        }
    }
}

fn banner(config: &AgentConfig, plan: &AgentPlan, threads: &[WorkerThread]) {
    let now = wall_now();
    let schedule = plan.schedule();
    let me_host = &plan.matrix.hosts()[plan.me as usize];
    let mut peers: Vec<&str> = schedule
        .layer_flows(plan.me, schedule.layer_at(now).unwrap_or(0))
        .map(|c| plan.matrix.hosts()[c.dst as usize].name.as_str())
        .collect();
    peers.sort_unstable();
    say!(
        "mx agent {}: host={} port={} peers={} streams={} flows={} tx_size={} rx_size={} workers={} report={}{}{}",
        env!("CARGO_PKG_VERSION"),
        me_host.name,
        me_host.port,
        if peers.is_empty() {
            "-".to_string()
        } else {
            peers.join(",")
        },
        plan.streams,
        plan.flow_sockets(),
        plan.matrix.config.tx_size,
        plan.matrix.config.rx_size,
        plan.workers,
        config.report.display(),
        match plan.matrix.config.disk {
            mx_matrix::DiskMode::Off => String::new(),
            mode => format!(" disk={}", mode.name()),
        },
        plan.matrix.config.dscp.setting(" ")
    );
    // The class this agent marks with (the sockets are marked by now): what
    // it sent, not what the network delivered.
    let dscp = plan.matrix.config.dscp;
    if !dscp.is_default() {
        say!("class: {}", dscp.sentence());
    }
    let shards: Vec<String> = threads.iter().map(|t| t.flows.to_string()).collect();
    say!(
        "workers: {} (flow sockets per worker: {})",
        plan.workers,
        shards.join(", ")
    );
    say!(
        "datagrams: {}",
        if plan.gso {
            "UDP GSO/GRO, runs of up to 64 per trip through the stack"
        } else {
            "one per trip through the stack"
        }
    );
    if let (Some(key), Some(rotation)) = (plan.matrix.config.shuffle, plan.matrix.config.rotation) {
        say!(
            "mx agent: layered -- {} layers of {} peers{}, dwell {}s, cycle {}; starting in layer {}",
            rotation.layers,
            key.peers,
            if rotation.fill { ", equal layers" } else { "" },
            units::g(rotation.dwell),
            units::duration(schedule.cycle_seconds().unwrap_or(0.0)),
            schedule.layer_at(now).unwrap_or(0)
        );
    }
}

/// Removes the pid file if it is still ours (a restart may have replaced it).
fn remove_pid_file(path: &PathBuf) {
    if std::fs::read_to_string(path).is_ok_and(|t| t.trim() == std::process::id().to_string()) {
        let _ = std::fs::remove_file(path);
    }
}

/// The hosts `me` sends to in any layer (all of its row on a fixed matrix).
fn schedule_peers(matrix: &Matrix, me: u32) -> std::collections::BTreeSet<u32> {
    let schedule = mx_matrix::schedule::Schedule::new(matrix);
    (0..schedule.layer_count())
        .flat_map(|layer| {
            schedule
                .layer_flows(me, layer)
                .map(|c| c.dst)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `--metrics`: listens (a port taken or an address not here refuses the
/// start, in one line) and serves this agent's counts from a thread of its
/// own; the metrics the reporter is to publish to.
fn serve_metrics(config: &AgentConfig, plan: &AgentPlan) -> Result<Option<Arc<Metrics>>> {
    let addr = match config.run.metrics {
        None => return Ok(None),
        Some(MetricsAt::Addr(addr)) => addr,
        Some(MetricsAt::Port(port)) => {
            let ip = plan
                .local_ip
                .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED.into());
            SocketAddr::new(ip, port)
        }
    };
    let endpoint = Endpoint::listen(addr).map_err(|e| Error::refused(format!("--metrics: {e}")))?;
    let metrics = Arc::new(Metrics::new(&plan.matrix, plan.me, plan.interval));
    endpoint
        .serve(Arc::clone(&metrics))
        .map_err(|e| Error::refused(format!("--metrics: cannot start its thread: {e}")))?;
    say!("metrics: serving /metrics on {}", endpoint.addr);
    Ok(Some(metrics))
}

/// How this agent learns its start and end.
struct Timing {
    interval: f64,
    duration: f64,
    grace: f64,
    /// `--armed`: the control file the start instant comes in.
    start_file: Option<PathBuf>,
    end_file: PathBuf,
    /// The rate scale `mx run --ramp` orders, and the last order read from
    /// it (scale, at), so that each order is taken once.
    rate_file: PathBuf,
    rate_seen: std::cell::Cell<Option<(f64, f64)>>,
    /// The end file's instant last acted on: a newer, sooner one (`mx stop`
    /// of an agent started with `--duration`) ends it sooner.
    end_seen: std::cell::Cell<Option<f64>>,
    /// The directory of the report, pid and control files.
    home: PathBuf,
}

impl Timing {
    /// Sets the start (at `at`, or now), and the end `--duration` implies.
    /// An instant off the interval's boundaries (an open-ended `mx start`)
    /// begins the flows then; they tick on the boundaries from the first.
    fn start(&self, clock: &RunClock, at: Option<f64>) {
        let late = clock.set_start(at, self.interval);
        let begins = clock.started_wall().unwrap_or_else(wall_now);
        match at {
            Some(at) if late > 0.0 => say!(
                "start: flows begin now, {:.3}s after the fleet's start instant {} (this host was late: its first interval is left out of summaries)",
                late,
                units::local_clock_ms(at)
            ),
            Some(at) => say!(
                "start: flows begin at {} (in {:.3}s), all hosts together",
                units::local_clock_ms(at),
                (at - wall_now()).max(0.0)
            ),
            None => say!("start: flows begin now ({})", units::local_clock_ms(begins)),
        }
        if self.duration > 0.0 {
            clock.set_end(begins + self.duration, self.grace);
        }
    }

    /// How often to look for the control files: every 20 ms while armed (the
    /// fleet's start instant is a few tenths of a second after its go
    /// reaches the last host, and an agent that saw it a whole poll late
    /// would start late), every 100 ms once the flows run (an end comes
    /// at least a second ahead).
    fn poll_period(&self, clock: &RunClock) -> Duration {
        if self.start_file.is_some() && !clock.has_started() {
            Duration::from_millis(20)
        } else {
            Duration::from_millis(100)
        }
    }

    /// Looks for the control files: the start (armed), then the end. An
    /// agent whose directory was deleted stops: nothing can stop or collect
    /// it any more, and it must not run on as a trace nobody can find.
    fn poll(&self, clock: &RunClock) {
        if !clock.stopping() && directory_deleted(&self.home) {
            say!(
                "{} was deleted: no one can stop this agent or collect its report, so it stops now",
                self.home.display()
            );
            clock.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        // The rate before the start: an order written with the start
        // instant applies from the first interval.
        if let Some(order) = clock::read_rate(&self.rate_file)
            && self.rate_seen.get() != Some(order)
        {
            self.rate_seen.set(Some(order));
            let (scale, at) = order;
            let from = clock::rate_from(at, wall_now(), self.interval);
            clock.set_rate(from, scale);
            say!(
                "rate: every flow at x{} of its matrix rate from the interval ending at {:.0} (ordered for {at:.3})",
                units::g(scale),
                from as f64 * self.interval
            );
        }
        if let Some(path) = &self.start_file
            && !clock.has_started()
            && let Some((at, _)) = clock::read_control(path)
        {
            if let Some(by) = clock::read_began_by(path) {
                clock.set_began_by(by);
            }
            self.start(clock, Some(at));
        }
        if let Some((at, grace)) = clock::read_control(&self.end_file)
            && self.end_seen.get() != Some(at)
        {
            self.end_seen.set(Some(at));
            let grace = grace.unwrap_or(self.grace);
            if clock.set_end(at, grace) {
                say!(
                    "end: flows end at {at:.3} (in {:.3}s); answering {}s more",
                    (at - wall_now()).max(0.0),
                    units::g(grace)
                );
            }
        }
    }
}

/// Whether `dir` is gone: removed by path, or (a working directory, `.`)
/// unlinked while open, which leaves it with no links.
fn directory_deleted(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(dir) {
        Ok(meta) => meta.nlink() == 0,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// The ticks at which the host's counters are sampled: the start instant
/// (their baseline), then every interval's end, on the monotonic clock as
/// the workers close their intervals.
#[derive(Default)]
struct TickMarks {
    /// The next tick's instant and wall-clock label; `None` before the start.
    next: Option<(Instant, f64)>,
}

impl TickMarks {
    /// Samples the counters at every tick passed since the last call (and
    /// takes their baseline at the start); returns how long until the next.
    fn mark(&mut self, clock: &RunClock, interval: f64, reporter: &mut Reporter) -> Duration {
        if self.next.is_none() {
            let Some(start) = clock.start() else {
                return Duration::MAX;
            };
            // Woken at the start instant itself: a baseline taken late would
            // leave the flows' first packets out of the first interval.
            let now = Instant::now();
            if now < start.at {
                return start.at - now;
            }
            reporter.flows_begin();
            let first =
                start.at + Duration::from_secs_f64((start.first_tick - start.wall).max(0.0));
            self.next = Some((first, start.first_tick));
        }
        let step = Duration::from_secs_f64(interval);
        while let Some((at, tick)) = self.next
            && Instant::now() >= at
        {
            reporter.tick_now(tick);
            self.next = Some((at + step, tick + interval));
        }
        self.next.map_or(Duration::MAX, |(at, _)| {
            at.saturating_duration_since(Instant::now())
        })
    }
}

/// Collects batches tick by tick and writes them; returns when every worker has
/// sent its last batch (the workers watch the stop flag a signal sets, and the
/// end instant, themselves). Polls the control files in between: the
/// start, end and rate, and what it answers (`mx reload`).
fn report_loop(
    plan: &AgentPlan,
    rx: &mpsc::Receiver<Batch>,
    reporter: &mut Reporter,
    clock: &RunClock,
    (when, answers): (&Timing, &answers::AnswerOrders),
) -> Result<()> {
    // A tick waits this long after its first batch for its slow workers. The
    // original gave up after half an interval (its workers were processes
    // that could die) and wrote a partial interval without a host row; ours
    // are threads of this process, and a worker is slow when the agent is
    // short of CPU: exactly when its host row (how far behind it fell, what
    // its sockets dropped) matters most. So the tick waits for them all.
    let grace = (10.0 * plan.interval).max(30.0);
    let key = reporter::tick_key;
    let mut ticks = TickMarks::default();
    // Batches by tick, and when the tick's first batch came (monotonic: a
    // stepped wall clock must not hold a tick, or flush it early).
    let mut pending: BTreeMap<i64, (Instant, Vec<Batch>)> = BTreeMap::new();
    let mut last: Vec<Batch> = Vec::new();
    // A report the disk refuses is held in memory and written when it can be:
    // the agent says so once, and again when it catches up.
    let write = |reporter: &mut Reporter, batches: &[Batch], complete: bool| {
        let status = reporter.write_tick(batches, complete);
        if let Some(news) = reporter.take_news() {
            say!("{news}");
        }
        if let Some(status) = status {
            say!("{status}");
        }
    };
    while last.len() < plan.workers {
        when.poll(clock);
        answers.poll(plan);
        let wait = ticks.mark(clock, plan.interval, reporter);
        match rx.recv_timeout(wait.min(when.poll_period(clock))) {
            Ok(batch) if batch.last => last.push(batch),
            Ok(batch) => pending
                .entry(key(batch.tick))
                .or_insert_with(|| (Instant::now(), Vec::new()))
                .1
                .push(batch),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        while let Some(entry) = pending.first_entry() {
            let (first_seen, batches) = entry.get();
            let complete = batches.len() == plan.workers;
            if !complete && first_seen.elapsed().as_secs_f64() < grace {
                break;
            }
            let (_, batches) = entry.remove();
            write(reporter, &batches, complete);
        }
    }
    // Ticks still waiting, then the interval in progress: partial, no host row.
    for (_, (_, batches)) in std::mem::take(&mut pending) {
        write(reporter, &batches, false);
    }
    if last.iter().any(|b| !b.flows.is_empty() || !b.rx.is_empty()) {
        let ts = last.iter().map(|b| b.tick).fold(0.0, f64::max).ceil() as i64;
        write(reporter, &last, false);
        say!(
            "{} final partial interval written (per-peer rows, no host totals)",
            units::log_stamp(ts)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_auto_is_one_per_core_capped_at_flows_plus_one() {
        assert_eq!(worker_count(None, 100, 8), 8);
        assert_eq!(worker_count(None, 3, 8), 4);
        assert_eq!(worker_count(Some(32), 3, 8), 4);
        assert_eq!(worker_count(Some(2), 0, 8), 2);
    }
}
