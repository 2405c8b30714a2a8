//! Hosts gone before the run's end, and requests refused by plan, in words.

use crate::analysis::diagnosis::says::Gone;
use crate::render::words::{count, name_list};
use mx_base::units::{local_clock, pps};

/// A host gone before the run's end.
pub fn gone(name: &str, last: i64, behind: i64, left_out: u64, gone: &Gone) -> String {
    let when = local_clock(last as f64);
    let left_out = if left_out > 0 {
        format!(
            "; its flows after it ({left_out} flow interval(s)) are left out, not counted as loss"
        )
    } else {
        "; its flows after it are left out, not counted as loss".to_string()
    };
    match gone {
        Gone::StoppedStarved {
            behind_ms,
            throttled_ms,
        } => format!(
            "{name}'s report ends at {when}, {behind}s before the others', with no end marked, and its rows say its agent fell up to {behind_ms:.0} ms behind its send schedule{}: it was short of CPU, so its last rows may be late or lost rather than its agent dead -- `mx logs`{left_out}",
            throttled_ms.map_or(String::new(), |t| format!(
                " and was throttled {t:.0} ms by its cgroup's CPU quota"
            ))
        ),
        Gone::Stopped => format!(
            "{name}'s agent stopped at {when}, {behind}s before the others: its report ends there with no end marked (killed, crashed, or its host went down) -- `mx logs` and `mx status` say which{left_out}"
        ),
        Gone::Unreachable => format!(
            "{name} could not be reached to collect its report, and was last heard from at {when}, {behind}s before the end: its agent went down with it, or it is cut off -- `mx status` and `mx doctor`{left_out}"
        ),
        Gone::Silent => format!(
            "no report from {name}, whose peers last heard from it at {when}, {behind}s before the end: its agent stopped or it was cut off, and its report was not collected -- `mx status`{left_out}"
        ),
    }
}

/// Hosts never heard from.
pub(crate) fn never_heard(hosts: &[String]) -> String {
    format!(
        "no report from {} and not one reply or request from it in the run: not started, or out of reach (`mx status`, `mx doctor`); its flows are left out",
        name_list(hosts)
    )
}

/// Requests `to` refused by plan from `sources` (the first refused most).
pub fn refused(
    to: &str,
    sources: &[String],
    (sent, back): (f64, f64),
    headroom_pct: f64,
    refused: f64,
) -> String {
    let first = &sources[0];
    format!(
        "{} sent {to} {} and got {} back: {to} answers each source at most what its matrix plans for it (+{headroom_pct:.0}%), and refused {} requests {} -- refused by plan, not lost. Either {first} runs another matrix than {to} (an edit not on every host: `mx reload`), or something else sends from {first}'s address",
        name_list(sources),
        pps(sent),
        pps(back),
        count(refused),
        if sources.len() > 1 {
            "from them"
        } else {
            "of them"
        },
    )
}
