//! `mx status`: one line per host, the agent's latest status row with its
//! age and its target labelled; `--watch` looks again and again (facts.md 4.2).

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::cli::StatusArgs;
use crate::error::{EXIT_PROBLEMS, Result};
use crate::fleet::{LOOK_TIMEOUT, scripts};
use crate::units::{self, local_clock, wall_now};

pub fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<u8> {
    if args.json {
        return json::run(args, out);
    }
    let fleet = super::open_fleet(&args.fleet)?;
    let all = fleet.all();
    // Clear the screen between looks only where there is a screen.
    let terminal = std::io::stdout().is_terminal();
    // Each host's row at the last look (its ts), to say which rows are new.
    let mut last_rows: Vec<Option<i64>> = vec![None; all.len()];
    let mut first = true;
    loop {
        if args.watch > 0.0 {
            if terminal {
                write!(out, "\x1b[2J\x1b[H")?;
            } else if !first {
                writeln!(out)?;
            }
            writeln!(
                out,
                "mx status -- {} (every {}s, ctrl-c to stop)",
                local_clock(wall_now()),
                units::g(args.watch)
            )?;
        }
        let mut outcomes = fleet.each(&all, |host| {
            fleet
                .transport
                .run(host, &scripts::status(&fleet.dir(host)), LOOK_TIMEOUT)
        });
        let now = wall_now();
        for (outcome, last) in outcomes.iter_mut().zip(last_rows.iter_mut()) {
            if !outcome.ok() || fleet.dry_run {
                continue;
            }
            let ts = row_ts(&outcome.text);
            let unchanged = !first && ts.is_some() && ts == *last;
            outcome.text = status_row(&outcome.text, now, unchanged);
            *last = ts;
        }
        let answered = fleet.print(out, &all, &outcomes, false)?;
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

/// `status --json`: per host its state and the figures of its newest host
/// row, read from its report (exact numbers, not the status line's text).
mod json {
    use std::io::Write;
    use std::path::Path;
    use std::time::Duration;

    use serde::Serialize;

    use crate::cli::StatusArgs;
    use crate::error::{EXIT_PROBLEMS, Result};
    use crate::fleet::{LOOK_TIMEOUT, scripts};
    use crate::report::Column;
    use crate::report::read::rows_of;
    use crate::units::wall_now;

    /// One look at the fleet (mx.status/1).
    #[derive(Serialize)]
    struct StatusDoc {
        schema: &'static str,
        /// When the look was taken (this machine's clock, Unix seconds).
        at: f64,
        hosts: Vec<HostStatus>,
    }

    #[derive(Serialize)]
    struct HostStatus {
        host: String,
        /// `running`, `not-running`, `not-deployed` or `unreachable`.
        state: &'static str,
        /// Why it could not be asked (unreachable only).
        error: Option<String>,
        /// Its newest host row; null when it has none yet.
        row: Option<RowStatus>,
    }

    /// The figures of a host row (null: blank in the row, not measured).
    #[derive(Serialize)]
    struct RowStatus {
        ts: i64,
        /// Seconds since `ts`, from this machine's clock.
        age_s: f64,
        phase: Option<String>,
        sent_pps: Option<f64>,
        /// Null for unpaced flows.
        target_pps: Option<f64>,
        back_pps: Option<f64>,
        loss_pct: Option<f64>,
        rtt_p50_us: Option<f64>,
        rtt_p99_us: Option<f64>,
        cpu_pct: Option<f64>,
        cpu_core_pct: Option<f64>,
        agent_cpu_pct: Option<f64>,
        workers: Option<u32>,
    }

    pub fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<u8> {
        let fleet = crate::commands::open_fleet(&args.fleet)?;
        let all = fleet.all();
        loop {
            let outcomes = fleet.each(&all, |host| {
                fleet
                    .transport
                    .run(host, &scripts::status_row(&fleet.dir(host)), LOOK_TIMEOUT)
            });
            let now = wall_now();
            let hosts: Vec<HostStatus> = all
                .iter()
                .zip(&outcomes)
                .map(|(&h, outcome)| {
                    let name = fleet.matrix.hosts()[h].name.clone();
                    if !outcome.ok() {
                        return HostStatus {
                            host: name,
                            state: "unreachable",
                            error: Some(outcome.text.trim().to_string())
                                .filter(|e| !e.is_empty())
                                .or_else(|| Some(format!("exit {}", outcome.code))),
                            row: None,
                        };
                    }
                    host_status(name, &outcome.text, now)
                })
                .collect();
            let unreachable = hosts.iter().any(|h| h.state == "unreachable");
            let doc = StatusDoc {
                schema: "mx.status/1",
                at: now,
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

    /// A host's state and newest row from what [`scripts::status_row`] printed.
    fn host_status(host: String, text: &str, now: f64) -> HostStatus {
        let mut lines = text.lines();
        let state = match lines.next().map(str::trim) {
            Some("running") => "running",
            Some("NOT-DEPLOYED") => "not-deployed",
            _ => "not-running",
        };
        let report: String = lines.map(|l| format!("{l}\n")).collect();
        let mut row = None;
        // A report the host cannot give whole (a header alone, a torn row)
        // has no row to show: the state stands alone.
        let _ = rows_of(report.as_bytes(), Path::new(&host), |r| {
            let text = |c: Column| Some(r.text(c).to_string()).filter(|t| !t.is_empty());
            row = Some(RowStatus {
                ts: r.ts,
                age_s: (now - r.ts as f64).max(0.0).floor(),
                phase: text(Column::Phase),
                sent_pps: r.num(Column::Pps),
                target_pps: r.num(Column::TargetPps).filter(|t| *t > 0.0),
                back_pps: r.num(Column::RepPps),
                loss_pct: r.num(Column::LossPct),
                rtt_p50_us: r.num(Column::RttP50Us),
                rtt_p99_us: r.num(Column::RttP99Us),
                cpu_pct: r.num(Column::CpuPct),
                cpu_core_pct: r.num(Column::CpuMaxPct),
                agent_cpu_pct: r.num(Column::AgentCpuPct),
                workers: r.num(Column::Workers).map(|w| w as u32),
            });
        });
        HostStatus {
            host,
            state,
            error: None,
            row,
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
