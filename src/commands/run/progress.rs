//! The live line of `mx run` while the flows run: elapsed of total, the
//! fleet's requests sent and replies back per second, the round-trip loss,
//! and the worst host so far, summed from each host's newest host row (one
//! [`look`] at the fleet every interval, at least 5 s apart).
//!
//! On a terminal, an indicatif bar redraws one line in place; anywhere else
//! (a pipe, a file, CI) each look prints one plain line. Only rows of whole
//! steady intervals count: the start and end intervals are mx's own edges,
//! never the network's, and a look that finds none says so instead of
//! printing 0.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::error::Result;
use crate::fleet::Fleet;
use crate::fleet::look::{HostStatus, look};
use crate::units::{self, wall_now};

/// The shortest time between two looks (s). Each look runs a shell on every
/// host: often enough to follow a run, rarely enough that the view does not
/// itself disturb the hosts it measures (on the lab, where the hosts share
/// two cores with the controller, looks every 2 s lifted the clean run's
/// p99 into the tail advice).
const LOOK_EVERY_S: f64 = 5.0;

/// Where the live line goes.
pub(crate) enum Screen {
    /// A terminal: one line redrawn in place (stdout or stderr's terminal).
    Terminal(console::Term),
    /// Anything else: a plain line per look on the command's output.
    Lines,
}

/// The run's clock: the flows' start instant, how long they run, and when
/// the wait is over (after the agents' end and grace).
pub struct Span {
    pub begin: f64,
    pub hold: f64,
    pub done_at: f64,
    /// The agents' report interval (s): looks are this far apart, or 2 s.
    pub interval: f64,
}

/// What one look says of the fleet.
#[derive(Debug, Default, PartialEq)]
pub struct Reading {
    /// Hosts whose newest row is a whole steady interval.
    pub steady_hosts: usize,
    pub sent_pps: f64,
    pub back_pps: f64,
    /// Round-trip loss over those rows, weighted by what each host sent,
    /// less the requests refused by plan; None when nothing was sent in them.
    pub loss_pct: Option<f64>,
    /// Requests per second the responders left unanswered by plan (their
    /// sources sent past the matrix rate): refused, not lost.
    pub refused_pps: f64,
}

/// The worst host seen so far: its name, its loss, and when (seconds into
/// the run).
#[derive(Debug, Clone, PartialEq)]
pub struct Worst {
    pub host: String,
    pub loss_pct: f64,
    pub at: f64,
}

/// Sums the hosts' newest rows (of `interval` seconds); only rows of steady
/// intervals at or after the start instant count.
pub fn reading(hosts: &[HostStatus], begin: f64, interval: f64) -> Reading {
    let mut r = Reading::default();
    let mut lost = 0.0;
    for row in hosts.iter().filter_map(|h| steady_row(h, begin)) {
        let sent = row.sent_pps.unwrap_or(0.0);
        r.steady_hosts += 1;
        r.sent_pps += sent;
        r.back_pps += row.back_pps.unwrap_or(0.0);
        lost += sent * row.loss_pct.unwrap_or(0.0) / 100.0;
        r.refused_pps += row.over_plan.unwrap_or(0) as f64 / interval;
    }
    let subject = r.sent_pps - r.refused_pps;
    r.loss_pct =
        (subject > 0.0).then(|| (100.0 * (lost - r.refused_pps) / subject).clamp(0.0, 100.0));
    r
}

fn steady_row(host: &HostStatus, begin: f64) -> Option<&crate::fleet::look::RowStatus> {
    host.row
        .as_ref()
        .filter(|row| row.ts as f64 >= begin && row.phase.as_deref() == Some("steady"))
}

/// The worse of `worst` and this look's worst host (by its newest steady
/// row's loss); a host with no loss is never the worst.
pub fn worse(worst: Option<Worst>, hosts: &[HostStatus], begin: f64, at: f64) -> Option<Worst> {
    let now = hosts
        .iter()
        .filter_map(|h| Some((h, steady_row(h, begin)?.loss_pct?)))
        .filter(|(_, loss)| *loss > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(h, loss)| Worst {
            host: h.host.clone(),
            loss_pct: loss,
            at,
        });
    match (worst, now) {
        (Some(w), Some(n)) => Some(if n.loss_pct > w.loss_pct { n } else { w }),
        (w, n) => w.or(n),
    }
}

/// The figures of a look as the live line says them.
pub fn figures(r: &Reading, hosts: usize, worst: Option<&Worst>) -> String {
    if r.steady_hosts == 0 {
        return "waiting for the first whole interval's rows".to_string();
    }
    let loss = r
        .loss_pct
        .map_or("loss not measured".to_string(), |l| format!("loss {l:.2}%"));
    let worst = worst.map_or("no host losing".to_string(), |w| {
        format!(
            "worst so far {} ({:.2}% at {}s)",
            w.host,
            w.loss_pct,
            w.at.floor()
        )
    });
    let of = if r.steady_hosts < hosts {
        format!(" ({} of {hosts} hosts)", r.steady_hosts)
    } else {
        String::new()
    };
    let refused = if r.refused_pps > 0.0 {
        format!(", {} refused by plan (not lost)", units::pps(r.refused_pps))
    } else {
        String::new()
    };
    format!(
        "sent {}, back {}{of}, {loss}{refused}, {worst}",
        units::pps(r.sent_pps),
        units::pps(r.back_pps)
    )
}

/// Waits until `span.done_at` or ctrl-c, showing the live line on `screen`
/// (or as lines on `out`).
pub fn hold(
    fleet: &Fleet,
    span: &Span,
    interrupted: &AtomicBool,
    screen: Screen,
    out: &mut dyn Write,
) -> Result<()> {
    let all = fleet.all();
    let total = span.hold.ceil() as u64;
    let elapsed = || (wall_now() - span.begin).clamp(0.0, span.hold);
    let bar = match &screen {
        Screen::Terminal(term) => {
            let bar = ProgressBar::with_draw_target(
                Some(total),
                ProgressDrawTarget::term(term.clone(), 4),
            );
            bar.set_style(
                ProgressStyle::with_template("[mx] {pos}s of {len}s [{bar:20}] {msg}")
                    .expect("a fixed template")
                    .progress_chars("=> "),
            );
            Some(bar)
        }
        Screen::Lines => None,
    };
    let every = span.interval.max(LOOK_EVERY_S);
    let mut next_look = span.begin + every;
    let mut worst = None;
    while wall_now() < span.done_at && !interrupted.load(Ordering::Relaxed) {
        let now = wall_now();
        if let Some(bar) = &bar {
            bar.set_position(elapsed() as u64);
            if now < span.begin {
                bar.set_message(format!(
                    "armed: the flows begin in {}s",
                    (span.begin - now).ceil()
                ));
            } else if now < next_look && next_look == span.begin + every {
                bar.set_message(figures(&Reading::default(), all.len(), None));
            }
        }
        // Looks only while the flows run: after the end, the rows are the
        // agents' last, and the summary says what they hold.
        if now >= next_look && now < span.begin + span.hold {
            let (at, hosts) = look(fleet, &all);
            let into = at - span.begin;
            worst = worse(worst, &hosts, span.begin, into);
            let line = figures(
                &reading(&hosts, span.begin, span.interval),
                all.len(),
                worst.as_ref(),
            );
            match &bar {
                Some(bar) => {
                    bar.set_position(elapsed() as u64);
                    bar.set_message(line);
                }
                None => {
                    writeln!(
                        out,
                        "[mx] {}s of {}s: {line}",
                        seconds_into(into, span.hold),
                        total
                    )?;
                    out.flush()?;
                }
            }
            next_look = (wall_now() + every).max(next_look + every);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(bar) = bar {
        bar.set_position(elapsed() as u64);
        // The last line stays on the screen, above what follows.
        bar.abandon();
    }
    Ok(())
}

/// Whole seconds into a hold of `hold` seconds, `into` after its begin: a
/// look that ends past the hold read the hold's rows, so it says the hold's
/// end, never "18s of 15s".
fn seconds_into(into: f64, hold: f64) -> f64 {
    into.clamp(0.0, hold).floor()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::look::RowStatus;

    #[test]
    fn a_look_past_the_hold_says_the_holds_end() {
        assert_eq!(seconds_into(18.4, 15.0), 15.0);
        assert_eq!(seconds_into(7.9, 15.0), 7.0);
        assert_eq!(seconds_into(-0.5, 15.0), 0.0);
    }

    fn host(name: &str, ts: i64, phase: &str, sent: f64, loss: f64) -> HostStatus {
        HostStatus {
            host: name.to_string(),
            state: "running",
            error: None,
            row: Some(RowStatus {
                ts,
                age_s: 0.0,
                phase: Some(phase.to_string()),
                sent_pps: Some(sent),
                target_pps: Some(sent),
                back_pps: Some(sent * (1.0 - loss / 100.0)),
                loss_pct: Some(loss),
                rtt_p50_us: None,
                rtt_p99_us: None,
                cpu_pct: None,
                cpu_core_pct: None,
                agent_cpu_pct: None,
                workers: None,
                over_plan: None,
            }),
            runs_this_matrix: Some(true),
        }
    }

    #[test]
    fn requests_refused_by_plan_are_said_apart_and_never_as_loss() {
        // h1 sent 10 kpps to h2, whose plan answers 1.25 kpps of them: h1's
        // row reads 87.5% lost, h2's counts the 8.75 k refused a second.
        let mut h2 = host("h2", 110, "steady", 1000.0, 0.0);
        h2.row.as_mut().unwrap().over_plan = Some(17_500);
        let hosts = [host("h1", 110, "steady", 10_000.0, 87.5), h2];
        let r = reading(&hosts, 100.0, 2.0);
        assert_eq!(r.refused_pps, 8750.0);
        assert!(r.loss_pct.unwrap().abs() < 1e-9, "{r:?}");
        assert!(
            figures(&r, 2, None).contains("loss 0.00%, 8.8 kpps refused by plan (not lost)"),
            "{}",
            figures(&r, 2, None)
        );
    }

    #[test]
    fn only_steady_rows_of_this_run_count_and_loss_is_weighted_by_what_was_sent() {
        let hosts = [
            host("h1", 110, "steady", 3000.0, 0.0),
            host("h2", 110, "steady", 1000.0, 4.0),
            // The start interval and a row from before this run: not counted.
            host("h3", 110, "start", 5000.0, 50.0),
            host("h4", 90, "steady", 5000.0, 50.0),
        ];
        let r = reading(&hosts, 100.0, 1.0);
        assert_eq!(r.steady_hosts, 2);
        assert_eq!(r.sent_pps, 4000.0);
        assert_eq!(r.back_pps, 3960.0);
        assert!((r.loss_pct.unwrap() - 1.0).abs() < 1e-9);
        let worst = worse(None, &hosts, 100.0, 10.0).unwrap();
        assert_eq!((worst.host.as_str(), worst.loss_pct), ("h2", 4.0));
        assert_eq!(
            figures(&r, 4, Some(&worst)),
            "sent 4.0 kpps, back 4.0 kpps (2 of 4 hosts), loss 1.00%, worst so far h2 (4.00% at 10s)"
        );
    }

    #[test]
    fn the_worst_so_far_is_kept_until_a_worse_one_and_nothing_is_never_zero() {
        let early = [host("h2", 110, "steady", 1000.0, 4.0)];
        let later = [
            host("h2", 120, "steady", 1000.0, 0.0),
            host("h3", 120, "steady", 1000.0, 1.0),
        ];
        let w = worse(None, &early, 100.0, 10.0);
        let w = worse(w, &later, 100.0, 20.0).unwrap();
        assert_eq!((w.host.as_str(), w.at), ("h2", 10.0));
        let clean = [host("h1", 110, "steady", 1000.0, 0.0)];
        assert_eq!(worse(None, &clean, 100.0, 10.0), None);
        assert_eq!(
            figures(&reading(&clean, 100.0, 1.0), 1, None),
            "sent 1.0 kpps, back 1.0 kpps, loss 0.00%, no host losing"
        );
        // No steady row yet: said, not 0 pps.
        let armed = [host("h1", 110, "start", 1000.0, 0.0)];
        assert_eq!(
            figures(&reading(&armed, 100.0, 1.0), 1, None),
            "waiting for the first whole interval's rows"
        );
    }
}
