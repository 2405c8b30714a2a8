//! Units and the number formats every human-readable output of mx shares.
//!
//! The formats are the original tool's, so operators read the same
//! figures the same way: `1.0 kpps`, `3.12 Gbps`, `2m00s`. Rust's `{:.N}` rounds the
//! exact binary value with ties to even, exactly as Python's `%.Nf` does, so the
//! same input prints the same text.

/// Bytes of framing an IPv4 packet costs on Ethernet besides its UDP payload:
/// preamble and start-of-frame 8, MAC header 14, FCS 4, inter-frame gap 12,
/// IPv4 20, UDP 8. An IPv6 packet costs 20 more ([`Ip::framing`]).
pub const FRAMING_BYTES: f64 = 66.0;

/// The IP version a packet travels by: what its header costs on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub enum Ip {
    #[default]
    V4,
    V6,
}

impl Ip {
    /// The family of an address.
    pub fn of(addr: std::net::IpAddr) -> Ip {
        if addr.is_ipv4() { Ip::V4 } else { Ip::V6 }
    }

    /// The wildcard address of the family (`0.0.0.0`, `::`).
    pub fn unspecified(self) -> std::net::IpAddr {
        match self {
            Ip::V4 => std::net::Ipv4Addr::UNSPECIFIED.into(),
            Ip::V6 => std::net::Ipv6Addr::UNSPECIFIED.into(),
        }
    }

    /// Bytes of its IP header (without options or extension headers).
    pub fn header_bytes(self) -> u32 {
        match self {
            Ip::V4 => 20,
            Ip::V6 => 40,
        }
    }

    /// Bytes an interface's byte counter counts for a packet besides its
    /// UDP payload: MAC header 14, IP, UDP 8 (no preamble, FCS or gap): 42
    /// over IPv4, 62 over IPv6.
    pub fn counted_header_bytes(self) -> f64 {
        f64::from(14 + self.header_bytes() + 8)
    }

    /// Bytes of framing a packet costs besides its UDP payload (see
    /// [`FRAMING_BYTES`]): 66 over IPv4, 86 over IPv6.
    pub fn framing(self) -> f64 {
        FRAMING_BYTES - 20.0 + f64::from(self.header_bytes())
    }

    pub fn name(self) -> &'static str {
        match self {
            Ip::V4 => "IPv4",
            Ip::V6 => "IPv6",
        }
    }
}

/// Bits per second on the wire for `pps` packets of `size` payload bytes over `ip`.
pub fn wire_bits(pps: f64, size: u32, ip: Ip) -> f64 {
    pps * (f64::from(size) + ip.framing()) * 8.0
}

/// Bits per second of UDP payload for `pps` packets of `size` bytes.
pub fn payload_bits(pps: f64, size: u32) -> f64 {
    pps * f64::from(size) * 8.0
}

/// A packet rate: `max` (unpaced), `X.XXX Mpps`, `X.X kpps` or `X pps`.
/// One departure from the original: a rate under 1 pps keeps three decimals
/// (`0.500 pps`), where the original printed a rate that is there as `0 pps`.
pub fn pps(value: f64) -> String {
    if value > 0.0 && value < 1.0 {
        format!("{value:.3} pps")
    } else if value.is_infinite() {
        "max".to_string()
    } else if value >= 1e6 {
        format!("{:.3} Mpps", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1} kpps", value / 1e3)
    } else {
        format!("{value:.0} pps")
    }
}

/// A rate someone chose (a flag, a matrix cell), as [`pps`] shows it but
/// never rounded below 1,000: `1.5 pps` is what was asked, `2 pps` is not.
pub fn pps_as_given(value: f64) -> String {
    if (1.0..1e3).contains(&value) && value.fract() != 0.0 {
        format!("{} pps", g(value))
    } else {
        pps(value)
    }
}

/// A bit rate: `X.XX Gbps`, `X.X Mbps` or `X kbps`.
pub fn bits(value: f64) -> String {
    if value >= 1e9 {
        format!("{:.2} Gbps", value / 1e9)
    } else if value >= 1e6 {
        format!("{:.1} Mbps", value / 1e6)
    } else {
        format!("{:.0} kbps", value / 1e3)
    }
}

/// A byte rate (disk traffic), decimal: `X.XX GB/s`, `X.X MB/s` or `X kB/s`.
pub fn byte_rate(value: f64) -> String {
    format!("{}/s", bytes(value))
}

/// A byte count, decimal: `X.XX TB`, `X.XX GB`, `X.X MB` or `X kB`.
pub fn bytes(value: f64) -> String {
    if value >= 1e12 {
        format!("{:.2} TB", value / 1e12)
    } else if value >= 1e9 {
        format!("{:.2} GB", value / 1e9)
    } else if value >= 1e6 {
        format!("{:.1} MB", value / 1e6)
    } else {
        format!("{:.0} kB", value / 1e3)
    }
}

/// An operation count or rate (disk IOPS): `X.XXM`, `X.Xk` or `X`.
pub fn ops(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2}M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.1}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// A figure rounded to 6 decimal places, as the JSON documents carry it:
/// nothing mx measures is finer, and `3995.8500000000004` is noise a reader
/// should not see.
pub fn six_places(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// A time in microseconds: `-` when not measured, `X.XXs`, `X.Xms` or `Xus`.
pub fn micros(value: Option<f64>) -> String {
    match value {
        None => "-".to_string(),
        Some(v) if v >= 1e6 => format!("{:.2}s", v / 1e6),
        Some(v) if v >= 1000.0 => format!("{:.1}ms", v / 1e3),
        Some(v) => format!("{v:.0}us"),
    }
}

/// A duration in seconds, rounded to whole seconds: `45s`, `2m00s`, `2h05m`.
pub fn duration(seconds: f64) -> String {
    let s = seconds.round_ties_even().max(0.0) as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// Python's `%g`: six significant digits, trailing zeros stripped, exponent form
/// below 1e-4 and from 1e6 up. Used where the original prints `--interval`,
/// `--duration` and `dwell`, so the files and stamps we write read the same.
pub fn g(value: f64) -> String {
    g_digits(value, 6)
}

/// C's and Python's `%.<digits>g`: `digits` significant digits (at least 1),
/// trailing zeros stripped, exponent form below 1e-4 and from `1e<digits>` up.
pub fn g_digits(value: f64, digits: u32) -> String {
    #[allow(clippy::cast_possible_wrap)]
    let precision = digits.max(1) as i32;
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    // The exponent after rounding to `precision` significant digits decides the form.
    let sci = format!("{:.*e}", (precision - 1) as usize, value);
    let (mantissa, exponent) = sci.split_once('e').expect("`{:e}` always has an exponent");
    let exponent: i32 = exponent.parse().expect("`{:e}` exponent is an integer");
    if (-4..precision).contains(&exponent) {
        let fixed = format!("{:.*}", (precision - 1 - exponent) as usize, value);
        strip_fraction_zeros(&fixed).to_string()
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_fraction_zeros(mantissa),
            exponent.abs()
        )
    }
}

fn strip_fraction_zeros(text: &str) -> &str {
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        text
    }
}

/// Unix time `t` as this machine's local date and time: `YYYY-MM-DD HH:MM:SS`.
pub fn local_date_time(t: f64) -> String {
    local(t).format("%Y-%m-%d %H:%M:%S").to_string()
}

/// Unix time `t` as this machine's local time of day: `HH:MM:SS`.
pub fn local_clock(t: f64) -> String {
    local(t).format("%H:%M:%S").to_string()
}

/// How an agent's log line says when (interval `ts`, Unix seconds):
/// `ts=<ts>` for whoever parses it (`mx status` shows its age), then
/// `time=HH:MM:SS`, local, for whoever reads it.
pub fn log_stamp(ts: i64) -> String {
    format!("ts={ts} time={}", local_clock(ts as f64))
}

/// `names` for a line: all of them comma-separated when there are at most
/// `shown`, else the first `shown` and how many more.
pub fn names_list(names: &[&str], shown: usize) -> String {
    if names.len() <= shown {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..shown].join(", "),
            names.len() - shown
        )
    }
}

/// Wall time `t` (Unix seconds) as local `HH:MM:SS.mmm`: an instant the
/// user compares with another to the millisecond (a start, a lateness).
pub fn local_clock_ms(t: f64) -> String {
    let millis = ((t - t.floor()) * 1e3).floor().min(999.0);
    format!("{}.{millis:03.0}", local_clock(t))
}

fn local(t: f64) -> chrono::DateTime<chrono::Local> {
    use chrono::TimeZone;
    chrono::Local
        .timestamp_opt(t.floor() as i64, 0)
        .earliest()
        .unwrap_or_else(|| chrono::Local.timestamp_opt(0, 0).unwrap())
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Wall-clock seconds since the Unix epoch.
pub fn wall_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_rates_use_the_originals_thresholds() {
        assert_eq!(pps(f64::INFINITY), "max");
        assert_eq!(pps(2_640_000.0), "2.640 Mpps");
        assert_eq!(pps(1000.0), "1.0 kpps");
        // The original's quirk, kept: 999.6 rounds up under the kpps threshold.
        assert_eq!(pps(999.6), "1000 pps");
        assert_eq!(pps(42.0), "42 pps");
        assert_eq!(pps(0.5), "0.500 pps");
        assert_eq!(pps(0.0), "0 pps");
    }

    #[test]
    fn bit_rates_use_the_originals_thresholds() {
        assert_eq!(bits(2.75e9), "2.75 Gbps");
        assert_eq!(bits(3_120_000.0), "3.1 Mbps");
        assert_eq!(bits(83_200.0), "83 kbps");
    }

    #[test]
    fn disk_rates_and_operation_counts_are_decimal() {
        assert_eq!(byte_rate(2_345_000_000.0), "2.35 GB/s");
        assert_eq!(byte_rate(12_300_000.0), "12.3 MB/s");
        assert_eq!(byte_rate(45_600.0), "46 kB/s");
        assert_eq!(ops(2_500_000.0), "2.50M");
        assert_eq!(ops(3010.0), "3.0k");
        assert_eq!(ops(999.0), "999");
        assert_eq!(ops(0.0), "0");
    }

    #[test]
    fn micros_and_durations() {
        assert_eq!(micros(None), "-");
        assert_eq!(micros(Some(240.0)), "240us");
        assert_eq!(micros(Some(4100.0)), "4.1ms");
        assert_eq!(micros(Some(31_000_000.0)), "31.00s");
        assert_eq!(duration(30.0), "30s");
        assert_eq!(duration(120.0), "2m00s");
        assert_eq!(duration(7500.0), "2h05m");
        assert_eq!(duration(59.5), "1m00s");
    }

    #[test]
    fn wire_rate_adds_66_bytes_of_framing_per_packet_86_over_ipv6() {
        assert_eq!(wire_bits(3000.0, 64, Ip::V4), 3000.0 * 130.0 * 8.0);
        // The IPv6 header is 40 bytes where IPv4's is 20.
        assert_eq!(wire_bits(3000.0, 64, Ip::V6), 3000.0 * 150.0 * 8.0);
        assert_eq!(
            wire_bits(1.0, 1400, Ip::V6) - wire_bits(1.0, 1400, Ip::V4),
            160.0
        );
        assert_eq!(payload_bits(3000.0, 64), 3000.0 * 64.0 * 8.0);
    }

    #[test]
    fn percent_g_matches_python() {
        // Expected values printed by CPython 3.11 `'%g' % x`.
        let cases = [
            (15.0, "15"),
            (2.5, "2.5"),
            (0.1, "0.1"),
            (60.0, "60"),
            (100000.0, "100000"),
            (1e6, "1e+06"),
            (1234567.0, "1.23457e+06"),
            (0.0001, "0.0001"),
            (0.00001234, "1.234e-05"),
            (999999.5, "1e+06"),
            (3.0000001, "3"),
            (0.0, "0"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "inf"),
        ];
        for (value, want) in cases {
            assert_eq!(g(value), want, "%g of {value}");
        }
    }

    #[test]
    fn percent_4g_matches_python() {
        // CPython 3.11 `'%.4g' % x`.
        let cases = [
            (12.3456, "12.35"),
            (12345.0, "1.234e+04"),
            (0.00012344, "0.0001234"),
            (2.0 / 3.0, "0.6667"),
            (1000.0, "1000"),
        ];
        for (value, want) in cases {
            assert_eq!(g_digits(value, 4), want, "%.4g of {value}");
        }
    }
}
