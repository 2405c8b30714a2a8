//! `mx status` on a big fleet: one line for the fleet, then the hosts that
//! are not as the rest (not running, out of reach, another matrix, a row
//! gone stale, short of its rate), at most [`EXCEPTIONS_SHOWN`] of them.
//! 10,000 lines say less than that. `--each` prints every host's line, as
//! a small fleet always does.

use std::io::Write;

use crate::fleet::look::HostStatus;
use crate::units::{self, pps};

/// A fleet of more hosts than this gets the fleet line, unless `--each`.
pub const EACH_UP_TO: usize = 100;
/// Exceptions printed; the rest are counted.
pub const EXCEPTIONS_SHOWN: usize = 20;
/// A host that sent less than this share of its target is short of it (as
/// the summary's advice judges a host short).
const SHORT_SHARE: f64 = 0.95;
/// A row this many times older than the fleet's typical one is stale (and
/// at least [`STALE_FLOOR_S`] old): its agent stopped writing.
const STALE_FACTOR: f64 = 3.0;
const STALE_FLOOR_S: f64 = 10.0;

/// Why a host is listed under the fleet line.
#[derive(Debug, Clone, PartialEq)]
pub enum Exception {
    Unreachable(String),
    NotRunning,
    NotDeployed,
    AnotherMatrix,
    /// Its newest row is this old (s).
    Stale(f64),
    /// It sent this much of this target (pps).
    Short(f64, f64),
}

impl Exception {
    fn text(&self) -> String {
        match self {
            Exception::Unreachable(why) => format!("unreachable: {why}"),
            Exception::NotRunning => "NOT-RUNNING".to_string(),
            Exception::NotDeployed => "NOT-DEPLOYED".to_string(),
            Exception::AnotherMatrix => {
                "ANOTHER MATRIX: its agent runs another matrix than this one".to_string()
            }
            Exception::Stale(age) => format!(
                "its newest row is {} old: its agent stopped writing",
                units::duration(*age)
            ),
            Exception::Short(sent, target) => format!(
                "sending {} of its {} ({:.1}%)",
                pps(*sent),
                pps(*target),
                sent / target * 100.0
            ),
        }
    }
}

/// What a look at the fleet found: the running hosts' sums, and the rest.
#[derive(Debug, Default, PartialEq)]
pub struct FleetLook {
    pub hosts: usize,
    pub running: usize,
    /// Running hosts' newest rows: youngest and oldest age (s).
    pub ages: Option<(f64, f64)>,
    pub sent_pps: f64,
    pub target_pps: f64,
    pub back_pps: f64,
    /// Hosts in each state that is not running.
    pub not_running: usize,
    pub not_deployed: usize,
    pub unreachable: usize,
    /// Each host that is not as the rest, in the matrix's order.
    pub exceptions: Vec<(String, Exception)>,
}

/// Reads `hosts` (one look) into the fleet's sums and its exceptions.
pub fn read(hosts: &[HostStatus]) -> FleetLook {
    let mut look = FleetLook {
        hosts: hosts.len(),
        ..FleetLook::default()
    };
    let mut ages: Vec<f64> = hosts
        .iter()
        .filter(|h| h.state == "running")
        .filter_map(|h| Some(h.row.as_ref()?.age_s))
        .collect();
    ages.sort_by(f64::total_cmp);
    let typical = ages.get(ages.len() / 2).copied().unwrap_or(0.0);
    let stale_from = (typical * STALE_FACTOR).max(STALE_FLOOR_S);
    for h in hosts {
        let exception = match h.state {
            "unreachable" => {
                look.unreachable += 1;
                Some(Exception::Unreachable(h.error.clone().unwrap_or_default()))
            }
            "not-running" => {
                look.not_running += 1;
                Some(Exception::NotRunning)
            }
            "not-deployed" => {
                look.not_deployed += 1;
                Some(Exception::NotDeployed)
            }
            _ => {
                look.running += 1;
                running_exception(h, stale_from, &mut look)
            }
        };
        if let Some(e) = exception {
            look.exceptions.push((h.host.clone(), e));
        }
    }
    look.ages = ages.first().zip(ages.last()).map(|(&a, &b)| (a, b));
    look
}

/// A running host's exception, if any; its figures go into the sums.
fn running_exception(h: &HostStatus, stale_from: f64, look: &mut FleetLook) -> Option<Exception> {
    if h.runs_this_matrix == Some(false) {
        return Some(Exception::AnotherMatrix);
    }
    let row = h.row.as_ref()?;
    look.sent_pps += row.sent_pps.unwrap_or(0.0);
    look.target_pps += row.target_pps.unwrap_or(0.0);
    look.back_pps += row.back_pps.unwrap_or(0.0);
    if row.age_s >= stale_from {
        return Some(Exception::Stale(row.age_s));
    }
    match (row.sent_pps, row.target_pps) {
        (Some(sent), Some(target)) if target > 0.0 && sent < SHORT_SHARE * target => {
            Some(Exception::Short(sent, target))
        }
        _ => None,
    }
}

/// Prints the fleet line and the exceptions.
pub fn print(look: &FleetLook, out: &mut dyn Write) -> std::io::Result<()> {
    let mut line = format!("[mx] {} hosts: {} running", look.hosts, look.running);
    if let Some((young, old)) = look.ages {
        line.push_str(&format!(" (rows {}-{}s old)", young.floor(), old.floor()));
    }
    if look.running > 0 {
        line.push_str(&format!(", sending {}", pps(look.sent_pps)));
        if look.target_pps > 0.0 {
            line.push_str(&format!(" of {}", pps(look.target_pps)));
        }
        line.push_str(&format!(", {} back", pps(look.back_pps)));
    }
    let others: Vec<String> = [
        (look.not_running, "not running"),
        (look.not_deployed, "not deployed"),
        (look.unreachable, "unreachable"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if !others.is_empty() {
        line.push_str(&format!("; {}", others.join(", ")));
    }
    writeln!(out, "{line}")?;
    let width = look
        .exceptions
        .iter()
        .take(EXCEPTIONS_SHOWN)
        .map(|(h, _)| h.len())
        .max()
        .unwrap_or(0);
    for (host, e) in look.exceptions.iter().take(EXCEPTIONS_SHOWN) {
        writeln!(out, "  {host:<width$}  {}", e.text())?;
    }
    let more = look.exceptions.len().saturating_sub(EXCEPTIONS_SHOWN);
    if more > 0 {
        writeln!(
            out,
            "  ... and {more} more hosts like these (`mx status --each` prints every host)"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::look::RowStatus;

    fn host(name: &str, state: &'static str, row: Option<(f64, f64, f64)>) -> HostStatus {
        HostStatus {
            host: name.to_string(),
            state,
            error: (state == "unreachable").then(|| "ssh: connect timed out".to_string()),
            row: row.map(|(age_s, sent, target)| RowStatus {
                ts: 0,
                age_s,
                phase: None,
                sent_pps: Some(sent),
                target_pps: Some(target),
                back_pps: Some(sent),
                loss_pct: Some(0.0),
                rtt_p50_us: None,
                rtt_p99_us: None,
                cpu_pct: None,
                cpu_core_pct: None,
                agent_cpu_pct: None,
                workers: None,
                over_plan: None,
            }),
            runs_this_matrix: row.map(|_| true),
        }
    }

    #[test]
    fn the_fleet_is_one_line_and_only_the_hosts_unlike_it_are_listed() {
        let mut hosts: Vec<HostStatus> = (1..=200)
            .map(|i| host(&format!("h{i}"), "running", Some((2.0, 100.0, 100.0))))
            .collect();
        hosts[4] = host("h5", "not-running", None);
        hosts[9] = host("h10", "unreachable", None);
        hosts[19] = host("h20", "running", Some((60.0, 100.0, 100.0)));
        hosts[29] = host("h30", "running", Some((2.0, 80.0, 100.0)));
        hosts[39].runs_this_matrix = Some(false);
        let look = read(&hosts);
        assert_eq!(
            (look.hosts, look.running, look.not_running, look.unreachable),
            (200, 198, 1, 1)
        );
        assert_eq!(
            look.exceptions,
            vec![
                ("h5".to_string(), Exception::NotRunning),
                (
                    "h10".to_string(),
                    Exception::Unreachable("ssh: connect timed out".into())
                ),
                ("h20".to_string(), Exception::Stale(60.0)),
                ("h30".to_string(), Exception::Short(80.0, 100.0)),
                ("h40".to_string(), Exception::AnotherMatrix),
            ]
        );
        let mut text = Vec::new();
        print(&look, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with("[mx] 200 hosts: 198 running (rows 2-60s old), sending 19.7 kpps of 19.7 kpps, 19.7 kpps back; 1 not running, 1 unreachable\n"),
            "{text}"
        );
        assert!(
            text.contains("  h30  sending 80 pps of its 100 pps (80.0%)\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 6, "{text}");
    }

    #[test]
    fn past_twenty_exceptions_the_rest_are_counted() {
        let hosts: Vec<HostStatus> = (1..=150)
            .map(|i| host(&format!("h{i}"), "not-deployed", None))
            .collect();
        let look = read(&hosts);
        let mut text = Vec::new();
        print(&look, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.starts_with("[mx] 150 hosts: 0 running; 150 not deployed\n"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 1 + EXCEPTIONS_SHOWN + 1, "{text}");
        assert!(
            text.ends_with(
                "  ... and 130 more hosts like these (`mx status --each` prints every host)\n"
            ),
            "{text}"
        );
    }
}
