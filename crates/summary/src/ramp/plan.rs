//! Which rate scales a ramp tries, and in what order: the climb from FROM
//! to TO in steps, then, with `--bisect`, halving the gap between the last
//! step that held and the first that did not.
//!
//! A scale multiplies every flow's matrix rate: x1 is the matrix as
//! written, x2 twice every cell. Scales are kept to the report's 4 decimals,
//! so that the controller and the rows name the same step.

use serde::Serialize;

use mx_base::units;

/// Bisection stops once the rate that held and the one that did not are
/// within this fraction of the latter ...
pub const BISECT_WITHIN: f64 = 0.02;
/// ... or after this many bisection steps.
pub const MAX_BISECT_STEPS: usize = 8;
/// Most steps a climb may take: past this the step is a typo.
pub const MAX_STEPS: usize = 1000;
/// Steps a climb takes when `--ramp-step` is not given (from FROM to TO).
pub const DEFAULT_STEPS: f64 = 10.0;
/// The ramp mx suggests wherever it suggests one (the summary's advice,
/// `mx hints`, the docs).
pub use crate::analysis::diagnosis::rate::SUGGESTED_RAMP as SUGGESTED_RANGE;

/// A scale kept to the report's 4 decimals.
pub fn round4(scale: f64) -> f64 {
    (scale * 1e4).round() / 1e4
}

/// Which scales a ramp tries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub from: f64,
    pub to: f64,
    pub step: f64,
    /// After the first step that fell short, bisect between it and the last
    /// that held.
    pub bisect: bool,
}

/// How a step came to be tried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Climb,
    Bisect,
    /// The step before again, at the same scale: an agent was short of CPU
    /// in it.
    Again,
}

impl Kind {
    /// The word the JSON and the step record use.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Climb => "climb",
            Kind::Bisect => "bisect",
            Kind::Again => "again",
        }
    }

    pub fn parse(word: &str) -> Option<Kind> {
        [Kind::Climb, Kind::Bisect, Kind::Again]
            .into_iter()
            .find(|k| k.word() == word)
    }
}

impl Plan {
    /// `--ramp FROM:TO` and `--ramp-step` (as given; `None`: a tenth of the
    /// way), checked: one line naming the value at fault.
    pub fn parse(
        range: &str,
        step: Option<&str>,
        bisect: bool,
    ) -> std::result::Result<Plan, String> {
        let factor = |text: &str| text.trim().trim_start_matches(['x', 'X']).parse::<f64>();
        let bad_range = |why: &str| {
            format!(
                "--ramp '{range}': {why} (FROM:TO, factors of every flow's matrix rate, e.g. 0.5:3)"
            )
        };
        let (from, to) = range
            .split_once(':')
            .ok_or_else(|| bad_range("want two factors with a ':' between"))?;
        let (Ok(from), Ok(to)) = (factor(from), factor(to)) else {
            return Err(bad_range("FROM and TO must be numbers"));
        };
        if !(from.is_finite() && to.is_finite()) || round4(from) <= 0.0 {
            return Err(bad_range("FROM and TO must be positive (at least 0.0001)"));
        }
        let (from, to) = (round4(from), round4(to));
        if to <= from {
            return Err(bad_range("TO must be above FROM"));
        }
        let step = match step {
            None => round4((to - from) / DEFAULT_STEPS).max(1e-4),
            Some(text) => match factor(text) {
                Ok(s) if s.is_finite() && round4(s) > 0.0 => round4(s),
                _ => {
                    return Err(format!(
                        "--ramp-step '{text}': want a positive factor (at least 0.0001), added to the scale at each step"
                    ));
                }
            },
        };
        let steps = ((to - from) / step - 1e-9).ceil() + 1.0;
        if steps > MAX_STEPS as f64 {
            return Err(format!(
                "--ramp-step '{}' makes {steps} steps from x{} to x{}: at most {MAX_STEPS} (or --bisect with a coarser step)",
                scale_text(step),
                units::g(from),
                units::g(to)
            ));
        }
        Ok(Plan {
            from,
            to,
            step,
            bisect,
        })
    }

    /// The climb: FROM, FROM + STEP, ... and TO last (even where the steps
    /// do not land on it).
    pub fn climb(&self) -> Vec<f64> {
        let mut scales = Vec::new();
        let mut i = 0.0;
        loop {
            let scale = round4(self.from + i * self.step);
            if scale >= self.to - 0.5e-4 {
                scales.push(self.to);
                return scales;
            }
            scales.push(scale);
            i += 1.0;
        }
    }

    /// The next scale to try after `tried` (each scale and whether it held,
    /// in the order tried), and how it came; `None` when the ramp is done:
    /// the climb's end, or its first step that fell short (bisected first,
    /// with `bisect`, until the rates that held and did not are within
    /// [`BISECT_WITHIN`] of each other).
    pub fn next(&self, tried: &[(f64, bool)]) -> Option<(f64, Kind)> {
        let climb = self.climb();
        let Some(bad) = tried
            .iter()
            .filter(|(_, held)| !held)
            .map(|&(s, _)| s)
            .reduce(f64::min)
        else {
            // Everything held so far: the climb's next step.
            return climb.get(tried.len()).map(|&s| (s, Kind::Climb));
        };
        if !self.bisect {
            return None;
        }
        let good = tried
            .iter()
            .filter(|&&(s, held)| held && s < bad)
            .map(|&(s, _)| s)
            .reduce(f64::max)?;
        // The climb ends at its first step that fell short; bisection follows.
        let climbed = tried
            .iter()
            .position(|(_, held)| !held)
            .map_or(0, |i| i + 1);
        let bisected = tried.len() - climbed;
        if bisected >= MAX_BISECT_STEPS || bad - good <= BISECT_WITHIN * bad {
            return None;
        }
        let mid = round4((good + bad) / 2.0);
        (mid > good && mid < bad).then_some((mid, Kind::Bisect))
    }
}

/// `1.5`, `0.0625`: a scale as the table writes it.
pub fn scale_text(scale: f64) -> String {
    units::g(round4(scale))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::plan;
    use super::super::verdict::{Thresholds, parse_micros};
    use super::*;

    /// Runs `p` against a fleet whose limit is `limit`: every scale at or
    /// under it holds. Returns the scales tried, in order.
    fn ramp_against(p: &Plan, limit: f64) -> Vec<(f64, Kind)> {
        let mut tried = Vec::new();
        let mut steps = Vec::new();
        while let Some((scale, kind)) = p.next(&tried) {
            tried.push((scale, scale <= limit));
            steps.push((scale, kind));
            assert!(steps.len() < 100, "runaway: {steps:?}");
        }
        steps
    }

    #[test]
    fn the_climb_goes_from_from_to_to_in_steps_and_ends_on_to() {
        assert_eq!(
            plan(1.0, 2.0, 0.25, false).climb(),
            vec![1.0, 1.25, 1.5, 1.75, 2.0]
        );
        // A step that does not land on TO: TO is the last.
        assert_eq!(plan(0.5, 1.2, 0.3, false).climb(), vec![0.5, 0.8, 1.1, 1.2]);
        // Float sums do not leave a sliver step before TO.
        assert_eq!(plan(0.1, 0.4, 0.1, false).climb(), vec![0.1, 0.2, 0.3, 0.4]);
    }

    #[test]
    fn a_climb_stops_at_its_first_step_that_fell_short() {
        let p = plan(1.0, 3.0, 0.5, false);
        let steps: Vec<f64> = ramp_against(&p, 1.8).into_iter().map(|s| s.0).collect();
        assert_eq!(steps, vec![1.0, 1.5, 2.0]);
        // Nothing falls short: the whole climb.
        assert_eq!(ramp_against(&p, 10.0).len(), 5);
        // The first step falls short: nothing more, bisect or not.
        assert_eq!(ramp_against(&p, 0.5).len(), 1);
        assert_eq!(ramp_against(&plan(1.0, 3.0, 0.5, true), 0.5).len(), 1);
    }

    #[test]
    fn bisect_halves_the_gap_to_within_two_percent() {
        let p = plan(1.0, 4.0, 0.5, true);
        let steps = ramp_against(&p, 2.358);
        type Steps<'a> = Vec<&'a (f64, Kind)>;
        let (climb, bisect): (Steps, Steps) = steps.iter().partition(|s| s.1 == Kind::Climb);
        assert_eq!(
            climb.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![1.0, 1.5, 2.0, 2.5]
        );
        assert_eq!(
            bisect.iter().map(|s| s.0).collect::<Vec<_>>(),
            vec![2.25, 2.375, 2.3125, 2.3438]
        );
        // What held last is within 2% of the limit.
        let tried: Vec<(f64, bool)> = steps.iter().map(|&(s, _)| (s, s <= 2.358)).collect();
        let good = tried
            .iter()
            .filter(|t| t.1)
            .map(|t| t.0)
            .reduce(f64::max)
            .unwrap();
        assert!((2.358 - good) / 2.358 <= BISECT_WITHIN, "{good}");
        // A gap already within 2% is not bisected.
        let fine = plan(1.0, 1.02, 0.01, true);
        assert_eq!(ramp_against(&fine, 1.005).len(), 2);
        // Bisection is bounded however fine the rounding lets it go.
        let long = plan(0.0001, 1000.0, 999.9999, true);
        assert!(ramp_against(&long, 0.00015).len() <= 2 + MAX_BISECT_STEPS);
    }

    #[test]
    fn flag_values_are_checked_naming_the_value() {
        let p = Plan::parse("0.5:2", None, true).unwrap();
        assert_eq!(p, plan(0.5, 2.0, 0.15, true));
        assert_eq!(
            Plan::parse("x1:x3", Some("0.5"), false)
                .unwrap()
                .climb()
                .len(),
            5
        );
        for (range, step, want) in [
            ("2", None, "--ramp '2': want two factors"),
            ("a:2", None, "--ramp 'a:2': FROM and TO must be numbers"),
            ("0:2", None, "--ramp '0:2': FROM and TO must be positive"),
            ("-1:2", None, "--ramp '-1:2': FROM and TO must be positive"),
            ("3:1", None, "--ramp '3:1': TO must be above FROM"),
            (
                "1:inf",
                None,
                "--ramp '1:inf': FROM and TO must be positive",
            ),
            ("1:2", Some("0"), "--ramp-step '0': want a positive factor"),
            (
                "1:2",
                Some("-0.1"),
                "--ramp-step '-0.1': want a positive factor",
            ),
            (
                "1:2",
                Some("fast"),
                "--ramp-step 'fast': want a positive factor",
            ),
            (
                "1:2",
                Some("0.0001"),
                "--ramp-step '0.0001' makes 10001 steps",
            ),
        ] {
            let e = Plan::parse(range, step, false).unwrap_err();
            assert!(e.starts_with(want), "{range} {step:?}: {e}");
            assert!(!e.contains('\n'));
        }
        let t = Thresholds::parse(Some("99%"), Some("5ms")).unwrap();
        assert_eq!((t.min_delivered_pct, t.max_p99_us), (99.0, Some(5000.0)));
        assert_eq!(t.text(), "delivered >= 99% and p99 <= 5.0ms");
        let t = Thresholds::parse(None, None).unwrap();
        assert_eq!((t.min_delivered_pct, t.max_p99_us), (99.9, None));
        assert_eq!(parse_micros("800us"), Some(800.0));
        assert_eq!(parse_micros("0.2s"), Some(200_000.0));
        for (min, p99, want) in [
            (Some("0"), None, "--min-delivered '0': want a percentage"),
            (
                Some("101"),
                None,
                "--min-delivered '101': want a percentage",
            ),
            (
                Some("most"),
                None,
                "--min-delivered 'most': want a percentage",
            ),
            (
                None,
                Some("5"),
                "--max-p99 '5': want a positive duration with its unit",
            ),
            (
                None,
                Some("-5ms"),
                "--max-p99 '-5ms': want a positive duration",
            ),
            (None, Some("5 parsecs"), "--max-p99 '5 parsecs': want"),
        ] {
            let e = Thresholds::parse(min, p99).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }
}
