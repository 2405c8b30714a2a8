//! When this agent's flows begin and end: the run's shared instants.
//!
//! A fleet started by `mx start` begins sending at one wall-clock instant and,
//! with `--duration` or `mx run --for`, stops at one: the agents are launched
//! first (listening and answering, not sending), and the controller then
//! writes the start instant into `agent.start` beside the report once every
//! host is up; `mx stop` (and `run`) write the end instant into `agent.end`.
//! That is what keeps a request to a peer that is not listening yet, or no
//! longer, out of the measurement: the ragged edges of an ssh fan-out never
//! read as the network's loss.
//!
//! The reporter thread learns the instants (from the flags or the control
//! files) and publishes them here; the workers read them every loop pass.
//! Instants are kept as nanoseconds of the monotonic clock (the one requests
//! carry as `t_send`), converted from the wall clock once, when learned: a
//! wall clock stepped mid-run moves nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::udp::monotonic_ns;
use mx_base::units::wall_now;
use mx_report::Phase;

const UNSET: u64 = u64::MAX;

/// The control file that carries the fleet's start instant (`at=<unix s>`).
pub(crate) const START_FILE: &str = "agent.start";
/// The control file that carries the end instant (`at=<unix s> grace=<s>`).
pub(crate) const END_FILE: &str = "agent.end";
/// The control file that scales every flow's matrix rate from a whole
/// interval on (`scale=<factor> at=<unix s>`): how `mx run --ramp` raises a
/// running fleet's rate without restarting it.
pub const RATE_FILE: &str = "agent.rate";

/// How long before the interval it applies from a new scale must be known:
/// every worker checks for one as it opens an interval, so one learned
/// later than this applies from the interval after (never mid-interval, and
/// never in some workers only).
pub const RATE_LEAD: f64 = 0.25;

/// How long responders keep answering after the end instant unless told
/// otherwise: the last requests of a peer whose clock runs a little behind
/// still get their replies.
pub const DEFAULT_GRACE: f64 = 1.0;

/// How long an armed agent waits for the start instant before it gives up
/// (the controller that launched it was interrupted): it must not linger.
pub(crate) const ARMED_TIMEOUT: Duration = Duration::from_secs(600);

/// The instants, shared by the reporter and the workers.
pub struct RunClock {
    /// Monotonic ns at which flows begin; UNSET while armed.
    start_ns: AtomicU64,
    /// Wall-clock label (f64 bits) of the first report tick, set with the start.
    first_tick: AtomicU64,
    /// Monotonic ns at which flows stop sending; UNSET for none.
    end_ns: AtomicU64,
    /// Monotonic ns at which the agent exits (end + grace); UNSET for none.
    exit_ns: AtomicU64,
    /// SIGTERM/SIGINT: stop now (a final partial interval is written).
    pub stop: Arc<AtomicBool>,
    /// The wall-clock times behind the instants, for the reporter's phases.
    started_wall: AtomicU64,
    end_wall: AtomicU64,
    /// The command whose start instant began the flows (`by=` in the start
    /// file: `start` or `reload`), for the first host row's `began_by`.
    began_by: std::sync::OnceLock<&'static str>,
    /// The rate scales learned (`agent.rate`): (the number of the first
    /// interval it applies to, the factor), in order. Read by the workers
    /// once per interval, never per packet.
    rates: Mutex<Vec<(u64, f64)>>,
}

/// The start as a worker needs it.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    pub at: Instant,
    pub at_ns: u64,
    /// Wall time of `at`.
    pub wall: f64,
    /// Wall-clock label of the first tick (the end of the first interval).
    pub first_tick: f64,
}

/// See [`RunClock::awaited`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum Awaited {
    /// The flows have their start.
    Begun(Start),
    /// The run ended (or was stopped) before it began.
    Ended,
    /// Armed: the start is still to come.
    Start,
}

/// The instant the monotonic clock reads `ns` (now if already past).
pub(crate) fn instant_of(ns: u64) -> Instant {
    let now_ns = monotonic_ns();
    let now = Instant::now();
    if ns >= now_ns {
        now + Duration::from_nanos(ns - now_ns)
    } else {
        now.checked_sub(Duration::from_nanos(now_ns - ns))
            .unwrap_or(now)
    }
}

/// What the wall clock read (or will read) at `at`, in ns since the Unix
/// epoch, by the offset between the two clocks now.
pub(crate) fn wall_ns_of(at: Instant) -> u64 {
    let now = Instant::now();
    let wall = (wall_now() * 1e9) as i128;
    let off = if at >= now {
        at.duration_since(now).as_nanos() as i128
    } else {
        -(now.duration_since(at).as_nanos() as i128)
    };
    (wall + off).max(0) as u64
}

/// The monotonic ns at which the wall clock will read (or read) `wall`.
pub(crate) fn ns_of_wall(wall: f64) -> u64 {
    let ahead = wall - wall_now();
    let now = monotonic_ns() as i128;
    (now + (ahead * 1e9) as i128).max(0) as u64
}

/// The first report tick of flows that begin at `now`: the next whole
/// multiple of the interval on the wall clock, or the one after if that is
/// under half an interval away (no sliver rows). Flows that begin on a
/// boundary tick a whole interval later.
pub(crate) fn first_tick(now: f64, interval: f64) -> f64 {
    let next = (now / interval).floor() * interval + interval;
    if next - now < interval / 2.0 {
        next + interval
    } else {
        next
    }
}

impl RunClock {
    pub fn new(stop: Arc<AtomicBool>) -> RunClock {
        RunClock {
            start_ns: AtomicU64::new(UNSET),
            first_tick: AtomicU64::new(0),
            end_ns: AtomicU64::new(UNSET),
            exit_ns: AtomicU64::new(UNSET),
            stop,
            started_wall: AtomicU64::new(UNSET),
            began_by: std::sync::OnceLock::new(),
            end_wall: AtomicU64::new(UNSET),
            rates: Mutex::new(Vec::new()),
        }
    }

    /// Scales every flow's rate by `scale` from interval number `from` on.
    pub(crate) fn set_rate(&self, from: u64, scale: f64) {
        let mut rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        // A later order for the same or an earlier interval replaces the ones
        // it overtakes.
        rates.retain(|&(f, _)| f < from);
        rates.push((from, scale));
    }

    /// The scale in force in interval `number`; `None` when nothing scaled
    /// the rates (then they are the matrix's).
    pub(crate) fn rate_for(&self, number: u64) -> Option<f64> {
        let rates = self.rates.lock().unwrap_or_else(|e| e.into_inner());
        rates
            .iter()
            .rev()
            .find(|&&(from, _)| from <= number)
            .map(|&(_, scale)| scale)
    }

    /// Sets the start: flows begin at wall time `at`, their first tick the
    /// fleet's ([`first_tick`] of `at`); or, when `at` has passed (a late
    /// go), now, still ticking with the fleet while its first tick is ahead
    /// (the late host's first interval, an edge for every host, is only
    /// shorter); or, with no instant at all or one a whole interval gone,
    /// now, with a first tick of its own. Returns how late the start was,
    /// in seconds (0 on time).
    pub(crate) fn set_start(&self, at: Option<f64>, interval: f64) -> f64 {
        let now = wall_now();
        let (begin, first_tick, late) = match at {
            Some(at) if at >= now => (at, first_tick(at, interval), 0.0),
            Some(at) if first_tick(at, interval) > now => (now, first_tick(at, interval), now - at),
            Some(at) => (now, first_tick(now, interval), now - at),
            None => (now, first_tick(now, interval), 0.0),
        };
        self.first_tick
            .store(first_tick.to_bits(), Ordering::Relaxed);
        self.started_wall.store(begin.to_bits(), Ordering::Relaxed);
        self.start_ns.store(ns_of_wall(begin), Ordering::Release);
        late
    }

    /// Notes which command gave the start instant (once; a later word is
    /// ignored).
    pub(crate) fn set_began_by(&self, by: &'static str) {
        let _ = self.began_by.set(by);
    }

    /// The command whose start instant began the flows, when one said.
    pub fn began_by(&self) -> Option<&'static str> {
        self.began_by.get().copied()
    }

    /// Sets the end: flows stop at wall time `at` (now if past), responders
    /// answer `grace` seconds more, then the agent exits. An end already set
    /// stands unless this one comes sooner: `mx stop` ends an agent started
    /// with `--duration` before its duration is out. Whether it took.
    pub(crate) fn set_end(&self, at: f64, grace: f64) -> bool {
        let at = at.max(wall_now());
        let end_ns = ns_of_wall(at);
        let set = self.end_ns.load(Ordering::Acquire);
        if set != UNSET && set <= end_ns {
            return false;
        }
        self.end_wall.store(at.to_bits(), Ordering::Relaxed);
        self.exit_ns
            .store(end_ns + (grace.max(0.0) * 1e9) as u64, Ordering::Relaxed);
        self.end_ns.store(end_ns, Ordering::Release);
        true
    }

    /// The start, once known.
    pub fn start(&self) -> Option<Start> {
        let at_ns = self.start_ns.load(Ordering::Acquire);
        (at_ns != UNSET).then(|| Start {
            at: instant_of(at_ns),
            at_ns,
            wall: f64::from_bits(self.started_wall.load(Ordering::Relaxed)),
            first_tick: f64::from_bits(self.first_tick.load(Ordering::Relaxed)),
        })
    }

    /// What a worker that has not begun is waiting on: the start, or
    /// nothing any more (stopped, or an end set with no start: an armed agent
    /// told to stop before the fleet began).
    ///
    /// The end is read before the start, and that order is the point: an
    /// agent that starts at once sets its start and then, with `--duration`,
    /// its end, from the reporter thread. Read the other way round, a worker
    /// preempted between the two reads could see no start, then the end, and
    /// finish a run that had just begun, leaving a report of only a header.
    /// The end's Acquire makes a start stored before it visible to the read
    /// that follows.
    pub(crate) fn awaited(&self) -> Awaited {
        let ended = self.end_ns().is_some() || self.stopping();
        match self.start() {
            Some(start) => Awaited::Begun(start),
            None if ended => Awaited::Ended,
            None => Awaited::Start,
        }
    }

    pub(crate) fn has_started(&self) -> bool {
        self.start_ns.load(Ordering::Acquire) != UNSET
    }

    /// Monotonic ns at which flows stop, if an end is set.
    pub(crate) fn end_ns(&self) -> Option<u64> {
        let ns = self.end_ns.load(Ordering::Acquire);
        (ns != UNSET).then_some(ns)
    }

    /// Monotonic ns at which the agent exits, if an end is set.
    pub(crate) fn exit_ns(&self) -> Option<u64> {
        let ns = self.exit_ns.load(Ordering::Relaxed);
        (ns != UNSET).then_some(ns)
    }

    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Wall time the flows began (the start instant, or later if late).
    pub(crate) fn started_wall(&self) -> Option<f64> {
        let bits = self.started_wall.load(Ordering::Relaxed);
        (bits != UNSET).then(|| f64::from_bits(bits))
    }

    /// Wall time of the planned end, if any.
    pub(crate) fn end_wall(&self) -> Option<f64> {
        let bits = self.end_wall.load(Ordering::Relaxed);
        (bits != UNSET).then(|| f64::from_bits(bits))
    }
}

/// The phase of the interval ending at wall time `tick`, `interval` long,
/// for flows that began at `started` (and end at `end`, if planned). `first`
/// says it is the agent's first interval: whole only if the flows began
/// exactly at its beginning (an on-time start instant).
pub(crate) fn phase_of(
    tick: f64,
    interval: f64,
    started: f64,
    end: Option<f64>,
    first: bool,
) -> Phase {
    const SLACK: f64 = 0.001;
    let begins = tick - interval;
    if let Some(end) = end {
        if (end - tick).abs() <= SLACK {
            return Phase::Last;
        }
        if end < tick {
            return Phase::End;
        }
    }
    if started > begins + SLACK || (first && (started - begins).abs() > SLACK) {
        Phase::Start
    } else {
        Phase::Steady
    }
}

/// Reads a control file's `at=` (and `grace=`) words; `None` when absent or
/// unreadable (it is written by rename, so a half-written file is never seen).
pub(crate) fn read_control(path: &Path) -> Option<(f64, Option<f64>)> {
    let text = std::fs::read_to_string(path).ok()?;
    let value = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    Some((value("at=")?, value("grace=")))
}

/// The command a start file says gave its instant (its `by=` word): `start`
/// (`mx start`, `mx run`) or `reload`; `None` for any other word or none.
pub fn read_began_by(path: &Path) -> Option<&'static str> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace()
        .find_map(|w| w.strip_prefix("by="))
        .and_then(|by| ["start", "reload"].into_iter().find(|known| *known == by))
}

/// Reads a rate file's `scale=` and `at=` words; `None` when absent,
/// unreadable, or not a positive finite scale.
pub(crate) fn read_rate(path: &Path) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let value = |key: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.parse::<f64>().ok())
            .filter(|v| v.is_finite())
    };
    let scale = value("scale=").filter(|s| *s > 0.0)?;
    Some((scale, value("at=")?))
}

/// The number of the first interval a scale ordered for wall time `at`
/// applies to, learned at wall time `now`: the interval that begins at the
/// first boundary at or after `at`, or, when that is less than
/// [`RATE_LEAD`] away, the first boundary that is not.
pub(crate) fn rate_from(at: f64, now: f64, interval: f64) -> u64 {
    let first = |t: f64| ((t - 1e-6) / interval).ceil().max(0.0);
    let boundary = first(at).max(first(now + RATE_LEAD));
    boundary as u64 + 1
}

/// The control files of an agent whose report is at `report`: the start,
/// the end, and the rate.
pub(crate) fn control_paths(report: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let dir = report.parent().map(Path::to_path_buf).unwrap_or_default();
    (
        dir.join(START_FILE),
        dir.join(END_FILE),
        dir.join(RATE_FILE),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh_clock() -> RunClock {
        RunClock::new(Arc::new(AtomicBool::new(false)))
    }

    #[test]
    fn a_worker_waits_for_the_start_and_a_start_with_its_end_begins() {
        let clock = fresh_clock();
        assert!(matches!(clock.awaited(), Awaited::Start));
        // Started with --duration: the start and the end are both known, and
        // the run begins (the end does not cancel a run it belongs to).
        clock.set_start(None, 1.0);
        clock.set_end(wall_now() + 9.0, 1.0);
        assert!(matches!(clock.awaited(), Awaited::Begun(_)));
        // Armed and told to end (mx stop before the fleet began), or stopped.
        let armed = fresh_clock();
        armed.set_end(wall_now(), 0.0);
        assert!(matches!(armed.awaited(), Awaited::Ended));
        let stopped = fresh_clock();
        stopped.stop.store(true, Ordering::SeqCst);
        assert!(matches!(stopped.awaited(), Awaited::Ended));
    }

    #[test]
    fn a_worker_racing_the_start_and_its_end_sees_the_start() {
        // The reporter thread sets the start, then the end; a worker polls
        // meanwhile. Whatever it reads between, it must never take the pair
        // for an end without a start (that agent's run would be lost).
        for _ in 0..10_000 {
            let clock = Arc::new(fresh_clock());
            let setter = {
                let clock = Arc::clone(&clock);
                std::thread::spawn(move || {
                    clock.set_start(None, 1.0);
                    clock.set_end(wall_now() + 9.0, 1.0);
                })
            };
            let seen = loop {
                match clock.awaited() {
                    // Yield, not spin: on a busy machine a spinning poller
                    // can keep the setter off the core for a whole slice.
                    Awaited::Start => std::thread::yield_now(),
                    other => break other,
                }
            };
            setter.join().unwrap();
            assert!(matches!(seen, Awaited::Begun(_)), "{seen:?}");
        }
    }

    #[test]
    fn a_sooner_end_replaces_a_later_one_and_a_later_one_is_refused() {
        let clock = fresh_clock();
        clock.set_start(None, 1.0);
        // --duration's end, then mx stop's sooner one.
        assert!(clock.set_end(wall_now() + 60.0, 1.0));
        let later = clock.end_ns().unwrap();
        assert!(clock.set_end(wall_now() + 2.0, 1.0));
        let sooner = clock.end_ns().unwrap();
        assert!(sooner < later);
        assert!(!clock.set_end(wall_now() + 30.0, 1.0));
        assert_eq!(clock.end_ns(), Some(sooner));
    }

    #[test]
    fn phases_of_a_run() {
        // Started on time at 100 (interval 5): the first interval is whole.
        assert_eq!(phase_of(105.0, 5.0, 100.0, None, true), Phase::Steady);
        assert_eq!(
            phase_of(110.0, 5.0, 100.0, Some(120.0), false),
            Phase::Steady
        );
        assert_eq!(phase_of(120.0, 5.0, 100.0, Some(120.0), false), Phase::Last);
        // A late start: the first interval is an edge, the next ones are not.
        assert_eq!(phase_of(105.0, 5.0, 101.3, None, true), Phase::Start);
        // ... even when the first tick came 1.5 intervals after it began.
        assert_eq!(phase_of(110.0, 5.0, 102.6, None, true), Phase::Start);
        assert_eq!(phase_of(110.0, 5.0, 101.3, None, false), Phase::Steady);
        // An end that came mid-interval.
        assert_eq!(phase_of(125.0, 5.0, 100.0, Some(122.0), false), Phase::End);
    }

    #[test]
    fn control_files_say_when() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(END_FILE);
        assert_eq!(read_control(&path), None);
        assert_eq!(read_began_by(&path), None);
        std::fs::write(&path, "at=1796003025.5 grace=1.5\n").unwrap();
        assert_eq!(read_control(&path), Some((1_796_003_025.5, Some(1.5))));
        std::fs::write(&path, "at=1796003025\n").unwrap();
        assert_eq!(read_control(&path), Some((1_796_003_025.0, None)));
        std::fs::write(&path, "at=soon\n").unwrap();
        assert_eq!(read_control(&path), None);
        // The start file names the command that gave its instant.
        for (words, by) in [
            ("at=5 grace=1 by=reload", Some("reload")),
            ("at=5 grace=1 by=start", Some("start")),
            ("at=5 grace=1 by=cron", None),
            ("at=5 grace=1", None),
        ] {
            std::fs::write(&path, words).unwrap();
            assert_eq!(read_began_by(&path), by, "{words}");
        }
    }

    #[test]
    fn a_rate_file_says_how_much_and_from_when() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RATE_FILE);
        assert_eq!(read_rate(&path), None);
        std::fs::write(&path, "scale=1.2500 at=1796003025.000000\n").unwrap();
        assert_eq!(read_rate(&path), Some((1.25, 1_796_003_025.0)));
        for bad in [
            "scale=0 at=5",
            "scale=-1 at=5",
            "scale=x at=5",
            "at=5",
            "scale=2",
        ] {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(read_rate(&path), None, "{bad}");
        }
    }

    #[test]
    fn a_scale_applies_from_a_whole_interval_all_workers_can_see_coming() {
        // Ordered for 1000 (interval 5), learned at 998: the interval that
        // begins at 1000 (it ends at 1005: number 201).
        assert_eq!(rate_from(1000.0, 998.0, 5.0), 201);
        // Learned 0.1 s before the boundary: too close, the next one.
        assert_eq!(rate_from(1000.0, 999.9, 5.0), 202);
        // Learned after it passed: the next whole interval.
        assert_eq!(rate_from(1000.0, 1001.0, 5.0), 202);
        // An order off the boundaries: the first boundary after it.
        assert_eq!(rate_from(1002.0, 990.0, 5.0), 202);
        let clock = RunClock::new(Arc::new(AtomicBool::new(false)));
        assert_eq!(clock.rate_for(10), None);
        clock.set_rate(5, 1.5);
        clock.set_rate(8, 2.0);
        assert_eq!(
            [4, 5, 7, 8, 9].map(|n| clock.rate_for(n)),
            [None, Some(1.5), Some(1.5), Some(2.0), Some(2.0)]
        );
        // A new order for an interval already ordered replaces it.
        clock.set_rate(8, 1.75);
        assert_eq!(clock.rate_for(9), Some(1.75));
    }

    #[test]
    fn the_first_tick_is_a_whole_interval_boundary() {
        assert_eq!(first_tick(1000.2, 5.0), 1005.0);
        // Under half an interval to the next boundary: the one after.
        assert_eq!(first_tick(1003.0, 5.0), 1010.0);
        assert_eq!(first_tick(1000.0, 1.0), 1001.0);
    }

    #[test]
    fn a_start_instant_off_the_boundaries_ticks_on_them() {
        // On a boundary: the first interval is a whole one.
        let interval = 5.0;
        let on = (wall_now() / interval).ceil() * interval + interval;
        let clock = fresh_clock();
        assert_eq!(clock.set_start(Some(on), interval), 0.0);
        assert_eq!(clock.start().unwrap().first_tick, on + interval);
        // 0.3 s past one: to the next (4.7 s); 4 s past: to the one after
        // (6 s), never a sliver.
        for (past, first) in [(0.3, interval), (4.0, 2.0 * interval)] {
            let clock = fresh_clock();
            assert_eq!(clock.set_start(Some(on + past), interval), 0.0);
            let start = clock.start().unwrap();
            assert_eq!(start.wall, on + past);
            assert_eq!(start.first_tick, on + first);
        }
    }

    #[test]
    fn a_late_go_ticks_with_the_fleet_while_its_first_tick_is_ahead() {
        let interval = 1.0;
        let now = wall_now();
        // The fleet's instant 0.2 s ago, its first tick ahead: this host
        // begins now and ticks with the others (a shorter first interval,
        // never one of its own a tick later).
        let at = now - 0.2;
        let clock = fresh_clock();
        let late = clock.set_start(Some(at), interval);
        assert!((0.2..0.5).contains(&late), "{late}");
        let start = clock.start().unwrap();
        assert_eq!(start.first_tick, first_tick(at, interval));
        assert!(start.wall >= now);
        // An instant whose first tick has passed too: a first tick of its
        // own, past now.
        let clock = fresh_clock();
        clock.set_start(Some(now - 3.0), interval);
        let start = clock.start().unwrap();
        assert_eq!(start.first_tick, first_tick(start.wall, interval));
        assert!(start.first_tick > now);
    }
}
