//! Numbers on the command line, checked where clap reads them: a value that
//! cannot be right (not a number, infinite, negative, zero where zero means
//! nothing, a rate no NIC carries, a look at every host more often than once
//! a second) is one line naming the switch and the value, and exit 2, before
//! anything touches a host. Each switch takes `allow_negative_numbers`, so
//! that `-5` reaches these words instead of clap's "unexpected argument".

use crate::matrix::load::{FASTEST_NIC_GBPS, FASTEST_NIC_PPS, beyond_any_nic};
use crate::units;

/// A finite number, or what `text` is not.
fn finite(text: &str, what: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("'{text}' is not {what}")),
    }
}

/// Seconds, more than 0 (`run --for`).
pub fn seconds(text: &str) -> Result<f64, String> {
    match finite(text, "a number of seconds")? {
        v if v < 0.0 => Err(format!("negative duration '{text}'")),
        0.0 => Err("0 seconds runs nothing: give the seconds to run".to_string()),
        v => Ok(v),
    }
}

/// Seconds, 0 meaning the whole of what there is (`--window`).
pub(crate) fn seconds_or_zero(text: &str) -> Result<f64, String> {
    match finite(text, "a number of seconds")? {
        v if v < 0.0 => Err(format!("negative duration '{text}'")),
        v => Ok(v),
    }
}

/// The shortest refresh of `status --watch`: each look is a round of ssh
/// to every host.
pub(crate) const WATCH_MIN_SECONDS: f64 = 1.0;

/// `status --watch`: 0 for one look, else at least [`WATCH_MIN_SECONDS`].
pub(crate) fn watch_seconds(text: &str) -> Result<f64, String> {
    match seconds_or_zero(text)? {
        v if v > 0.0 && v < WATCH_MIN_SECONDS => Err(format!(
            "a look every {}s is a round of ssh to every host {} times a second: give {} or more (0 looks once)",
            units::g(v),
            units::g(1.0 / v),
            units::g(WATCH_MIN_SECONDS)
        )),
        v => Ok(v),
    }
}

/// A line rate in Gb/s: more than 0, and no more than a NIC carries.
pub fn gbps(text: &str) -> Result<f64, String> {
    match finite(text, "a rate in Gb/s")? {
        v if v < 0.0 => Err(format!("negative rate '{text}'")),
        0.0 => Err("a rate of 0 Gb/s carries nothing".to_string()),
        v if v > FASTEST_NIC_GBPS => Err(format!(
            "{} Gb/s is beyond what any NIC carries ({} Gb/s, the fastest Ethernet port)",
            units::g(v),
            units::g(FASTEST_NIC_GBPS)
        )),
        v => Ok(v),
    }
}

/// A packet rate in millions per second: more than 0, and no more than a
/// NIC carries.
pub fn mpps(text: &str) -> Result<f64, String> {
    match finite(text, "a rate in millions of packets/s")? {
        v if v < 0.0 => Err(format!("negative packet rate '{text}'")),
        0.0 => Err("a rate of 0 Mpps carries nothing".to_string()),
        v if v * 1e6 > FASTEST_NIC_PPS => Err(format!(
            "{text} Mpps: {}",
            beyond_any_nic(&units::g(v * 1e6))
        )),
        v => Ok(v),
    }
}

/// A share in percent: above 0, at most 100 (`--loss-pct`).
pub fn percent(text: &str) -> Result<f64, String> {
    match finite(text.trim().trim_end_matches('%'), "a percentage")? {
        v if v > 0.0 && v <= 100.0 => Ok(v),
        _ => Err(format!(
            "'{text}': want a percentage above 0 and at most 100"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_refuse_what_cannot_be_a_duration() {
        assert_eq!(seconds("30"), Ok(30.0));
        assert_eq!(seconds("0.5"), Ok(0.5));
        for (text, said) in [
            ("NaN", "'NaN' is not a number of seconds"),
            ("inf", "'inf' is not a number of seconds"),
            ("soon", "'soon' is not a number of seconds"),
            ("-5", "negative duration '-5'"),
            ("0", "0 seconds runs nothing: give the seconds to run"),
        ] {
            assert_eq!(seconds(text), Err(said.to_string()), "{text}");
        }
        assert_eq!(seconds_or_zero("0"), Ok(0.0));
        assert_eq!(
            seconds_or_zero("-1"),
            Err("negative duration '-1'".to_string())
        );
    }

    #[test]
    fn a_watch_looks_once_or_at_most_once_a_second() {
        assert_eq!(watch_seconds("0"), Ok(0.0));
        assert_eq!(watch_seconds("1"), Ok(1.0));
        assert_eq!(
            watch_seconds("0.1"),
            Err("a look every 0.1s is a round of ssh to every host 10 times a second: give 1 or more (0 looks once)".to_string())
        );
        assert!(watch_seconds("-1").is_err());
    }

    #[test]
    fn nic_rates_are_positive_and_within_the_fastest_nic() {
        assert_eq!(gbps("25"), Ok(25.0));
        assert_eq!(gbps("1600"), Ok(1600.0));
        assert!(
            gbps("1601")
                .unwrap_err()
                .contains("beyond what any NIC carries")
        );
        assert_eq!(gbps("NaN"), Err("'NaN' is not a rate in Gb/s".to_string()));
        assert_eq!(gbps("-1"), Err("negative rate '-1'".to_string()));
        assert!(gbps("0").is_err());
        assert_eq!(mpps("15"), Ok(15.0));
        assert!(
            mpps("1e6")
                .unwrap_err()
                .contains("beyond what any NIC carries")
        );
        assert!(mpps("nan").is_err());
    }
}
