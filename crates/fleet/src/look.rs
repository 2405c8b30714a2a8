//! One look at the fleet: each host's state and the figures of its newest
//! host row, read from its report over the transport (exact numbers, not
//! the status line's text). `status --json` prints it; `run`'s live line
//! sums it.

use std::path::Path;

use serde::Serialize;

use super::{Fleet, LOOK_TIMEOUT, scripts};
use mx_base::units::wall_now;
use mx_matrix::run_print::run_print;
use mx_report::Column;
use mx_report::read::rows_of;

#[derive(Serialize)]
pub struct HostStatus {
    pub host: String,
    /// `running`, `not-running`, `not-deployed` or `unreachable`.
    pub state: &'static str,
    /// Why it could not be asked (unreachable only).
    pub error: Option<String>,
    /// Its newest host row; null when it has none yet.
    pub row: Option<RowStatus>,
    /// Whether its agent runs the matrix here (its newest host row's
    /// print, `matrix_fp`, is this matrix's for the host); false: another
    /// run's (a remote directory two runs share, an edit since); null when
    /// no agent runs or its rows carry no print.
    pub runs_this_matrix: Option<bool>,
}

/// The figures of a host row (null: blank in the row, not measured).
#[derive(Serialize)]
pub struct RowStatus {
    pub ts: i64,
    /// Seconds since `ts`, from this machine's clock.
    pub age_s: f64,
    pub phase: Option<String>,
    pub sent_pps: Option<f64>,
    /// Null for unpaced flows.
    pub target_pps: Option<f64>,
    pub back_pps: Option<f64>,
    pub loss_pct: Option<f64>,
    pub rtt_p50_us: Option<f64>,
    pub rtt_p99_us: Option<f64>,
    pub cpu_pct: Option<f64>,
    pub cpu_core_pct: Option<f64>,
    pub agent_cpu_pct: Option<f64>,
    pub workers: Option<u32>,
    /// Requests it left unanswered because their source sent past its plan
    /// here (refused by plan, not lost); null in reports without the column.
    pub over_plan: Option<u64>,
}

/// Asks every host in `hosts` at once; returns when the look was taken
/// (this machine's clock, Unix seconds) and what each host said.
pub fn look(fleet: &Fleet, hosts: &[usize]) -> (f64, Vec<HostStatus>) {
    let outcomes = fleet.each(hosts, |host| {
        fleet
            .transport
            .run(host, &scripts::status_row(&fleet.dir(host)), LOOK_TIMEOUT)
    });
    let now = wall_now();
    let said = hosts
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
                    runs_this_matrix: None,
                };
            }
            let mut status = host_status(name, &outcome.text, now);
            if status.state == "running" {
                status.runs_this_matrix = newest_print(&outcome.text)
                    .map(|print| print == run_print(&fleet.matrix, h as u32));
            }
            status
        })
        .collect();
    (now, said)
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
            over_plan: r.num(Column::OverPlan).map(|n| n as u64),
        });
    });
    HostStatus {
        host,
        state,
        error: None,
        row,
        runs_this_matrix: None,
    }
}

/// The print of the traffic the agent ran (`matrix_fp`), from the newest
/// host row a status script printed after its first line; `None` when it
/// printed none, or the row carries no print (an older agent's).
pub fn newest_print(said: &str) -> Option<String> {
    let (_, report) = said.split_once('\n')?;
    let mut print = None;
    let _ = rows_of(report.as_bytes(), Path::new("status"), |r| {
        print = Some(r.text(Column::MatrixFp).to_string()).filter(|p| !p.is_empty());
    });
    print
}
