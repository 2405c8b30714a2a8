//! Always on: the files that wire a fleet of agents serving `/metrics`
//! (`mx start --metrics PORT`) into Prometheus and Grafana, written from
//! the matrix (`mx monitor`). Pure: text in, text out.
//!
//! - [`targets`]: the `file_sd` targets, one per host, and the series
//!   the fleet costs a Prometheus;
//! - [`rules`]: recording rules for the loss of each leg (forward and
//!   return, per pair and into and out of each host, as rates and as
//!   counts), and alerting rules on them, on a host's RTT p99 and on an
//!   agent gone;
//! - [`dashboard`]: a Grafana dashboard of those series;
//! - [`config`]: a `prometheus.yml` that scrapes the targets with the rules.
//!
//! The PromQL lives here once: the rules, the dashboard and the docs read
//! the same record names.

pub mod config;
pub mod dashboard;
pub mod rules;
pub mod targets;
pub(crate) mod yaml;

/// What the operator chose: where the agents serve, and when to alert.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// The port every agent serves `/metrics` on (at its matrix address).
    pub port: u16,
    /// Alert when a leg loses more than this share of its packets (0..1).
    pub loss_ratio: f64,
    /// ... and at least this many packets over the window: at a few
    /// packets a second a share of a handful misleads.
    pub min_lost: u64,
    /// ... for this long (a Prometheus duration: `5m`).
    pub alert_for: String,
    /// Alert when a host's RTT p99 is over this many seconds.
    pub rtt_p99_seconds: f64,
    /// The window rates and counts are taken over (`5m`).
    pub window: String,
    /// How often Prometheus scrapes the agents (`15s`).
    pub scrape_interval: String,
    /// The scrape job's name (`mx`): the agent-gone alert reads its `up`.
    pub job: String,
}

/// A Prometheus duration (`90s`, `5m`, `1h`): its seconds, or why not.
pub(crate) fn duration_seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let seconds = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 604_800.0,
        _ => 0.0,
    };
    match number.parse::<u64>() {
        Ok(n) if n > 0 && seconds > 0.0 => Ok(n as f64 * seconds),
        _ => Err(format!(
            "'{text}': want a Prometheus duration, a whole number and its unit (30s, 5m, 1h)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_prometheus_s_a_whole_number_and_a_unit() {
        assert_eq!(duration_seconds("5m"), Ok(300.0));
        assert_eq!(duration_seconds("15s"), Ok(15.0));
        assert_eq!(duration_seconds("1h"), Ok(3600.0));
        for bad in ["5", "m", "0m", "1.5m", "-5m", "5 min", ""] {
            assert!(duration_seconds(bad).is_err(), "{bad}");
        }
    }
}
