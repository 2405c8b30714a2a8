//! `mx status`: one line per host, the agent's latest status row with its
//! age and its target labelled; `--watch` looks again and again.

use std::io::Write;
use std::time::Duration;

use crate::cli::StatusArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::look::newest_print;
use crate::fleet::{LOOK_TIMEOUT, scripts};
use crate::matrix::run_print::run_print;
use crate::units::{self, local_clock, wall_now};

pub fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<u8> {
    if args.json {
        return json::run(args, out);
    }
    let fleet = super::open_fleet(&args.fleet)?;
    let all = fleet.all();
    if !args.each && !fleet.dry_run && all.len() > super::status_fleet::EACH_UP_TO {
        return by_fleet(args, &fleet, out);
    }
    // On a terminal each look redraws the last in place; elsewhere the looks
    // follow one another, a blank line between.
    let term = console::Term::stdout();
    let terminal = term.is_term();
    // Each host's row at the last look (its ts), to say which rows are new.
    let mut last_rows: Vec<Option<i64>> = vec![None; all.len()];
    let mut drawn = 0;
    let mut first = true;
    loop {
        let mut look: Vec<u8> = Vec::new();
        watch_header(&mut look, args.watch)?;
        let mut outcomes = fleet.each(&all, |host| {
            fleet
                .transport
                .run(host, &scripts::status(&fleet.dir(host)), LOOK_TIMEOUT)
        });
        let now = wall_now();
        let mut other = Vec::new();
        for ((outcome, last), &h) in outcomes.iter_mut().zip(last_rows.iter_mut()).zip(&all) {
            if !outcome.ok() || fleet.dry_run {
                continue;
            }
            let line = outcome.text.lines().next().unwrap_or_default();
            let ts = row_ts(line);
            let unchanged = !first && ts.is_some() && ts == *last;
            let mut shown = status_row(line, now, unchanged);
            let running = !matches!(line, "NOT-RUNNING" | "NOT-DEPLOYED");
            if running
                && newest_print(&outcome.text)
                    .is_some_and(|print| print != run_print(&fleet.matrix, h as u32))
            {
                shown.push_str(" -- ANOTHER MATRIX");
                other.push(fleet.matrix.hosts()[h].name.as_str());
            }
            outcome.text = shown;
            *last = ts;
        }
        let answered = fleet.print(&mut look, &all, &outcomes, false)?;
        if !other.is_empty() {
            writeln!(
                look,
                "[mx] ANOTHER MATRIX: the agents of {} run another matrix than {} (another run's, from a directory that shares {} on the hosts, or an edit since): their figures are not this matrix's -- `{}` runs this one there",
                units::names_list(&other, 5),
                args.fleet.matrix.display(),
                args.fleet.remote_dir,
                fleet.hint("reload")
            )?;
        }
        if args.watch > 0.0 {
            if terminal {
                out.flush()?;
                term.clear_last_lines(drawn)?;
                drawn = screen_lines(&look, term.size().1);
            } else if !first {
                writeln!(out)?;
            }
        }
        out.write_all(&look)?;
        out.flush()?;
        if args.watch <= 0.0 {
            // Hosts that answer, running or not, are a status; one that cannot
            // be reached is a problem.
            return Ok(if answered.len() == all.len() {
                0
            } else {
                EXIT_PROBLEMS
            });
        }
        first = false;
        std::thread::sleep(Duration::from_secs_f64(args.watch));
    }
}

/// `status` of a big fleet: a line for the fleet and its exceptions, each
/// look (as `--watch` asks) after the last.
fn by_fleet(args: &StatusArgs, fleet: &crate::fleet::Fleet, out: &mut dyn Write) -> Result<u8> {
    let all = fleet.all();
    loop {
        let (_, hosts) = crate::fleet::look::look(fleet, &all);
        let look = super::status_fleet::read(&hosts);
        watch_header(out, args.watch)?;
        super::status_fleet::print(&look, out)?;
        out.flush()?;
        if args.watch <= 0.0 {
            return Ok(if look.unreachable == 0 {
                0
            } else {
                EXIT_PROBLEMS
            });
        }
        writeln!(out)?;
        std::thread::sleep(Duration::from_secs_f64(args.watch));
    }
}

/// What heads each look of `--watch S` (nothing for a single look).
fn watch_header(out: &mut dyn Write, watch: f64) -> std::io::Result<()> {
    if watch > 0.0 {
        writeln!(
            out,
            "mx status -- {} (every {}s, ctrl-c to stop)",
            local_clock(wall_now()),
            units::g(watch)
        )?;
    }
    Ok(())
}

/// The rows `text` takes on a screen `width` columns wide (a line longer
/// than the screen wraps onto more).
fn screen_lines(text: &[u8], width: u16) -> usize {
    let width = usize::from(width.max(1));
    String::from_utf8_lossy(text)
        .lines()
        .map(|line| console::measure_text_width(line).div_ceil(width).max(1))
        .sum()
}

/// `status --json`: per host its state and the figures of its newest host
/// row, read from its report (exact numbers, not the status line's text).
mod json {
    use std::io::Write;
    use std::time::Duration;

    use serde::Serialize;

    use crate::cli::StatusArgs;
    use crate::error::{EXIT_PROBLEMS, Result};
    use crate::fleet::look::{HostStatus, look};

    /// One look at the fleet (mx.status/1).
    #[derive(Serialize)]
    struct StatusDoc {
        schema: &'static str,
        /// When the look was taken (this machine's clock, Unix seconds).
        at: f64,
        hosts: Vec<HostStatus>,
    }

    pub fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<u8> {
        let fleet = crate::commands::open_fleet(&args.fleet)?;
        let all = fleet.all();
        loop {
            let (at, hosts) = look(&fleet, &all);
            let unreachable = hosts.iter().any(|h| h.state == "unreachable");
            let doc = StatusDoc {
                schema: "mx.status/1",
                at,
                hosts,
            };
            // One document per look: pretty once, one line each with --watch.
            let text = if args.watch > 0.0 {
                serde_json::to_string(&doc)
            } else {
                serde_json::to_string_pretty(&doc)
            }
            .expect("a status document serializes");
            writeln!(out, "{text}")?;
            out.flush()?;
            if args.watch <= 0.0 {
                return Ok(if unreachable { EXIT_PROBLEMS } else { 0 });
            }
            std::thread::sleep(Duration::from_secs_f64(args.watch));
        }
    }
}

/// The ts of an agent's status line (`ts=<unix s> ...`), if it is one.
fn row_ts(line: &str) -> Option<i64> {
    let rest = line.strip_prefix("ts=")?;
    let (ts, _) = rest.split_once(' ')?;
    ts.parse().ok()
}

/// An agent's status line as `mx status` shows it: the row's age (seen from
/// this machine's clock) for its raw ts, `(unchanged since the last look)`
/// when `--watch` finds the row it showed before, and the target labelled
/// (`tx=4.0 kpps (target 4.0 kpps)`); the rest as the agent wrote it. Other
/// lines (NOT-RUNNING, an armed agent's note) are left alone.
pub fn status_row(line: &str, now: f64, unchanged: bool) -> String {
    let Some(ts) = row_ts(line) else {
        return line.to_string();
    };
    let rest = &line[line.find(' ').expect("row_ts found one") + 1..];
    // The agent's `time=HH:MM:SS` is its host's clock; the age says it here.
    let rest = match rest.strip_prefix("time=") {
        Some(timed) => timed.split_once(' ').map_or("", |(_, after)| after),
        None => rest,
    };
    let age = (now - ts as f64).max(0.0);
    let age = if age < 120.0 {
        format!("{}s ago", age.floor())
    } else {
        format!("{} ago", units::duration(age))
    };
    let mark = if unchanged {
        " (unchanged since the last look)"
    } else {
        ""
    };
    format!("{age}{mark}: {}", labelled_target(rest))
}

/// `tx=<sent>/<target>` as `tx=<sent> (target <target>)`, or `(unpaced)`.
fn labelled_target(fields: &str) -> String {
    let Some(at) = fields.find("tx=") else {
        return fields.to_string();
    };
    let tx_end = fields[at..].find(" rx=").map_or(fields.len(), |e| at + e);
    let tx = &fields[at + 3..tx_end];
    let Some((sent, target)) = tx.rsplit_once('/') else {
        return fields.to_string();
    };
    let target = if target == "max" {
        "(unpaced)".to_string()
    } else {
        format!("(target {target})")
    };
    format!("{}tx={sent} {target}{}", &fields[..at], &fields[tx_end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROW: &str = "ts=1796003022 tx=4.0 kpps/4.0 kpps rx=4.0 kpps serving=4.0 kpps loss=0.00% rtt_p50=112us rtt_p99=384us cpu=31%(max 33%) workers=2 peers=2 busiest_worker=13% of a core";

    #[test]
    fn a_look_takes_a_screen_row_per_line_and_more_for_a_line_that_wraps() {
        assert_eq!(screen_lines(b"one\ntwo\n", 80), 2);
        assert_eq!(screen_lines(b"\n", 80), 1);
        assert_eq!(screen_lines("x".repeat(81).as_bytes(), 80), 2);
        assert_eq!(screen_lines("x".repeat(80).as_bytes(), 80), 1);
    }

    #[test]
    fn a_status_row_shows_its_age_and_a_labelled_target() {
        assert_eq!(
            status_row(ROW, 1796003024.7, false),
            "2s ago: tx=4.0 kpps (target 4.0 kpps) rx=4.0 kpps serving=4.0 kpps loss=0.00% rtt_p50=112us rtt_p99=384us cpu=31%(max 33%) workers=2 peers=2 busiest_worker=13% of a core"
        );
        assert!(status_row(ROW, 1796003029.0, true).starts_with(
            "7s ago (unchanged since the last look): tx=4.0 kpps (target 4.0 kpps) rx="
        ));
        // A clock a little behind the host's: never a negative age.
        assert!(status_row(ROW, 1796003021.0, false).starts_with("0s ago: "));
        assert!(status_row(ROW, 1796003022.0 + 600.0, false).starts_with("10m00s ago: "));
        // The agent's own time of day is left out: the age says when.
        assert_eq!(
            status_row(
                "ts=1796003022 time=12:03:42 tx=500 pps/500 pps rx=500 pps",
                1796003023.0,
                false
            ),
            "1s ago: tx=500 pps (target 500 pps) rx=500 pps"
        );
        let unpaced = "ts=1796003022 tx=120.0 kpps/max rx=119.0 kpps serving=1 pps loss=0.83%";
        assert_eq!(
            status_row(unpaced, 1796003023.0, false),
            "1s ago: tx=120.0 kpps (unpaced) rx=119.0 kpps serving=1 pps loss=0.83%"
        );
        assert_eq!(
            status_row(
                "ts=1796003022 partial interval: 1 of 2 workers reported -- per-peer rows written, host totals skipped",
                1796003023.0,
                false
            ),
            "1s ago: partial interval: 1 of 2 workers reported -- per-peer rows written, host totals skipped"
        );
        for other in [
            "NOT-RUNNING",
            "NOT-DEPLOYED",
            "running (no report yet)",
            "armed: listening and answering; the flows begin at the fleet's start instant (agent.start)",
            "",
        ] {
            assert_eq!(status_row(other, 1796003023.0, false), other);
        }
        // A disk run's status line keeps its disk part as the agent wrote it.
        let disk = "ts=1796003022 tx=500 pps/500 pps rx=500 pps serving=500 pps loss=0.00% rtt_p50=180us rtt_p99=2.1ms cpu=12%(max 15%) workers=1 peers=1 disk=rd 2.0 MB/s (500 iops) wr 2.0 MB/s (500 iops) busy=9% errors=2";
        assert_eq!(
            status_row(disk, 1796003023.0, false),
            "1s ago: tx=500 pps (target 500 pps) rx=500 pps serving=500 pps loss=0.00% rtt_p50=180us rtt_p99=2.1ms cpu=12%(max 15%) workers=1 peers=1 disk=rd 2.0 MB/s (500 iops) wr 2.0 MB/s (500 iops) busy=9% errors=2"
        );
        assert_eq!(row_ts(ROW), Some(1796003022));
        assert_eq!(row_ts("NOT-RUNNING"), None);
    }
}
