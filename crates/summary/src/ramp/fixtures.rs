//! The ramp's test fixtures: a plan, a step's figures, an agent short of
//! CPU, and a step as tried.

use super::plan::{Kind, Plan};
use super::verdict::{ShortOfCpu, StepFigures, StepResult, Thresholds, verdict};

/// A plan from its four values.
pub fn plan(from: f64, to: f64, step: f64, bisect: bool) -> Plan {
    Plan {
        from,
        to,
        step,
        bisect,
    }
}

/// A step of 4 intervals that offered and sent 1000 pps, `delivered`
/// percent of it back, its p99 `p99` us.
pub fn figures(delivered: f64, p99: f64) -> StepFigures {
    StepFigures {
        intervals: 4,
        offered_pps: Some(1000.0),
        sent_pps: Some(1000.0),
        back_pps: Some(delivered * 10.0),
        delivered_pct: Some(delivered),
        rtt_p99_us: Some(p99),
        ..StepFigures::default()
    }
}

/// An agent of `host` with these counts (short of CPU or not: `starved`
/// says).
pub fn starved(host: &str, sent_pct: Option<f64>, behind_ms: f64, throttled_ms: f64) -> ShortOfCpu {
    ShortOfCpu {
        host: host.to_string(),
        sent_pct,
        behind_ms,
        throttled_ms,
    }
}

/// Judged on 97% delivered, the tail not: a step whose 95.49% came back
/// while h2's agent was short of CPU (it sent 96.1% of its rate, up to
/// 14.2 ms behind its send schedule).
pub(crate) fn short_with_h2_starved() -> (Thresholds, StepFigures) {
    let t = Thresholds {
        min_delivered_pct: 97.0,
        max_p99_us: None,
    };
    let f = StepFigures {
        short_of_cpu: vec![starved("h2", Some(96.1), 14.2, 0.0)],
        ..figures(95.49, 800.0)
    };
    (t, f)
}

/// `figures` tried at `scale` after `tries` tries of it, judged by `t`, its
/// intervals after 0 up to 4 and its offer 1000 pps times the scale.
pub(crate) fn step_result(
    t: &Thresholds,
    scale: f64,
    kind: Kind,
    figures: &StepFigures,
    tries: usize,
) -> StepResult {
    StepResult {
        scale,
        kind,
        after: 0,
        until: 4,
        verdict: verdict(figures, t, tries),
        figures: StepFigures {
            offered_pps: Some(1000.0 * scale),
            ..figures.clone()
        },
    }
}
