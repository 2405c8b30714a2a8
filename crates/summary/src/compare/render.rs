//! A comparison as text (`mx compare`): the runs, the fleet's and each
//! pool's figures in tables, the hosts and flows that changed, and the
//! floors. The report page shows the same cells ([`FigureChange::cells`]).

use std::fmt::Write as _;

use super::judge::{
    Comparison, FigureChange, GroupChange, Kind, LOSS_FLOOR_PTS, RATE_FLOOR_PCT, RTT_FLOOR_PCT,
    RunLabel, Verdict,
};
use crate::analysis::bootstrap;
use mx_base::units::{micros, pps};

impl Kind {
    /// A figure's value in its unit (`-` when not measured).
    fn value(self, v: Option<f64>) -> String {
        match (self, v) {
            (_, None) => "-".to_string(),
            (Kind::Rate, Some(v)) => pps(v),
            (Kind::Loss, Some(v)) => format!("{v:.2}%"),
            (Kind::Rtt, Some(v)) => micros(Some(v)),
        }
    }

    /// A change, signed, in its change unit.
    fn signed(self, v: f64) -> String {
        // A change that rounds to nothing is shown as +0, not -0.
        match self {
            Kind::Loss => format!("{:+.2} pts", if v.abs() < 0.005 { 0.0 } else { v }),
            Kind::Rate | Kind::Rtt => format!("{:+.1}%", if v.abs() < 0.05 { 0.0 } else { v }),
        }
    }
}

impl Verdict {
    /// The verdict in words.
    fn text(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::WithinNoise => "within noise",
            Verdict::NotMeasured => "not measured",
            Verdict::TooFew => "too few to judge",
        }
    }
}

impl FigureChange {
    /// A, B, the change with its 95% interval, and the verdict, as the
    /// text and the report page show them.
    pub fn cells(&self) -> [String; 4] {
        [
            self.kind.value(self.a),
            self.kind.value(self.b),
            interval_text(self),
            self.verdict_text(),
        ]
    }

    /// The verdict, and for one too few to judge, what the runs had and
    /// how long to run.
    fn verdict_text(&self) -> String {
        let mut text = self.verdict.text().to_string();
        if let Some(had) = &self.too_few {
            let _ = write!(text, ": {had}");
        }
        if let (Some(seconds), Some(command)) = (self.run_at_least_s, &self.rerun) {
            let _ = write!(text, "; run at least {seconds}s ({command})");
        }
        text
    }
}

/// The comparison as text: the fleet, the pools, the hosts and flows that
/// changed, and the floors.
pub fn render(c: &Comparison, top: usize) -> String {
    let mut t = String::new();
    runs(&mut t, c);
    t.push('\n');
    figure_table(
        &mut t,
        "FLEET",
        "(over each run's intervals; rtt: the median of the intervals' own percentiles)",
        &c.fleet,
    );
    for pool in &c.pools {
        t.push('\n');
        figure_table(
            &mut t,
            &format!("POOL {}", pool.name),
            &format!(
                "(paired over its {} flows; rtt p99: the median of the flows' worst intervals)",
                pool.flows
            ),
            &pool.figures,
        );
    }
    t.push('\n');
    hosts(&mut t, c, top);
    t.push('\n');
    flows(&mut t, c, top);
    let _ = writeln!(
        t,
        "\n  A change is better or worse only when its 95% interval leaves out zero and it is at least {RATE_FLOOR_PCT}% of a rate, {LOSS_FLOOR_PTS} points of loss or {RTT_FLOOR_PCT}% of an RTT: two runs of one fabric differ that much with nothing changed."
    );
    t
}

/// The two runs, and whether their shapes differ.
fn runs(t: &mut String, c: &Comparison) {
    let run = |r: &RunLabel| {
        let plural = if r.intervals == 1 { "" } else { "s" };
        format!(
            "{} ({} interval{plural} of {}s)",
            r.source, r.intervals, r.interval_s
        )
    };
    let _ = writeln!(t, "mx compare -- A: {}, B: {}", run(&c.a), run(&c.b));
    if c.shape_differences.is_empty() {
        let _ = writeln!(t, "same shape: {} hosts, {} flows", c.a.hosts, c.a.flows);
    } else {
        let _ = writeln!(
            t,
            "shapes differ (compared anyway, --force): {}",
            c.shape_differences.join("; ")
        );
    }
}

/// The hosts that changed (`top` of them), each with the figures that did;
/// or that none did, or could be judged.
fn hosts(t: &mut String, c: &Comparison, top: usize) {
    let changed: Vec<&GroupChange> = c.hosts.iter().filter(|h| h.changed()).collect();
    let judged = c
        .hosts
        .iter()
        .filter(|h| h.figures.iter().any(|f| f.low.is_some()))
        .count();
    let over = "each over the flows it sends, and apart the flows into it";
    if judged == 0 {
        let _ = writeln!(
            t,
            "  HOSTS     none judged: a host is judged over its flows, paired before and after ({over}), and no host has {} on a side; see FLOWS",
            bootstrap::MIN_ITEMS
        );
        return;
    }
    if changed.is_empty() {
        let _ = writeln!(t, "  HOSTS     every host within noise ({over})");
        return;
    }
    let _ = writeln!(
        t,
        "  HOSTS THAT CHANGED ({} of {}; {over})",
        changed.len(),
        c.hosts.len()
    );
    for h in changed.iter().take(top) {
        let said: Vec<String> = h
            .figures
            .iter()
            .filter(|f| matches!(f.verdict, Verdict::Better | Verdict::Worse))
            .map(|f| {
                format!(
                    "{} {} -> {} ({}) {}",
                    f.figure,
                    f.kind.value(f.a),
                    f.kind.value(f.b),
                    interval_text(f),
                    f.verdict.text()
                )
            })
            .collect();
        let _ = writeln!(t, "    {:<12}{}", h.name, said.join("; "));
    }
}

/// The flows that changed most (`top` of them), or that none did.
fn flows(t: &mut String, c: &Comparison, top: usize) {
    if c.flows.is_empty() {
        let _ = writeln!(
            t,
            "  FLOWS     no flow changed by {LOSS_FLOOR_PTS} points of loss or {RATE_FLOOR_PCT}% of its replies or more"
        );
        return;
    }
    let _ = writeln!(
        t,
        "  FLOWS THAT CHANGED MOST ({} changed by {LOSS_FLOOR_PTS} points of loss or {RATE_FLOOR_PCT}% of its replies or more)",
        c.flows.len()
    );
    for f in c.flows.iter().take(top) {
        let back = f
            .back_change_pct()
            .map_or(String::new(), |p| format!(" ({p:+.1}%)"));
        let _ = writeln!(
            t,
            "    {} -> {}: loss {:.2}% -> {:.2}% ({:+.2} pts), replies back {} -> {}{back}",
            f.src,
            f.dst,
            f.loss_a_pct,
            f.loss_b_pct,
            f.loss_change(),
            pps(f.back_a_pps),
            pps(f.back_b_pps)
        );
    }
}

/// A change and its 95% interval, signed in its unit (`-`: none).
fn interval_text(f: &FigureChange) -> String {
    match (f.change, f.low, f.high) {
        (Some(c), Some(low), Some(high)) => format!(
            "{}, 95% {} .. {}",
            f.kind.signed(c),
            f.kind.signed(low),
            f.kind.signed(high)
        ),
        _ => "-".to_string(),
    }
}

/// A titled table of figures: A, B, the change with its interval, the
/// verdict.
fn figure_table(t: &mut String, title: &str, note: &str, figures: &[FigureChange]) {
    let _ = writeln!(
        t,
        "  {title} {note}\n  {:<16}{:>12}{:>12}   {:<42}verdict",
        "", "A", "B", "change, 95% interval"
    );
    for f in figures {
        let [a, b, change, verdict] = f.cells();
        let _ = writeln!(
            t,
            "  {:<16}{a:>12}{b:>12}   {change:<42}{verdict}",
            f.figure
        );
    }
}
