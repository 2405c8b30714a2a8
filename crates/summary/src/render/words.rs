//! The small words every rendering shares: lists of names, ranges of
//! percentages, packet counts.

/// Up to five names, then how many more: `h1, h2 and h3`, `h1, ... and 4 more`.
pub(crate) fn name_list<S: AsRef<str>>(names: &[S]) -> String {
    let shown: Vec<&str> = names.iter().take(5).map(AsRef::as_ref).collect();
    match names.len() {
        0 => String::new(),
        1 => shown[0].to_string(),
        n if n > 5 => format!("{} and {} more", shown.join(", "), n - 5),
        _ => format!(
            "{} and {}",
            shown[..shown.len() - 1].join(", "),
            shown[shown.len() - 1]
        ),
    }
}

/// A range of percentages, `4.9%` or `4.9-5.1%`.
pub(crate) fn pct_range(values: impl IntoIterator<Item = f64>) -> String {
    let (lo, hi) = values
        .into_iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !lo.is_finite() {
        return "-".to_string();
    }
    let (a, b) = (pct(lo), pct(hi));
    if a == b {
        format!("{a}%")
    } else {
        format!("{a}-{b}%")
    }
}

/// A percentage with the digits it needs: `5.0`, `0.42`, `0.013`.
pub fn pct(v: f64) -> String {
    if v >= 1.0 || v == 0.0 {
        format!("{v:.1}")
    } else if v >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A packet count with thousands separators: `115,843`.
pub fn count(v: f64) -> String {
    let digits = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_ranges_and_counts_read_as_a_person_writes_them() {
        assert_eq!(name_list(&["h1"]), "h1");
        assert_eq!(name_list(&["h1", "h3", "h4"]), "h1, h3 and h4");
        let many: Vec<String> = (1..=7).map(|i| format!("h{i}")).collect();
        assert_eq!(name_list(&many), "h1, h2, h3, h4, h5 and 2 more");
        assert_eq!(pct_range([5.04, 4.91, 5.12]), "4.9-5.1%");
        assert_eq!(pct_range([0.42]), "0.42%");
        assert_eq!(count(115_843.0), "115,843");
        assert_eq!(count(999.0), "999");
    }
}
