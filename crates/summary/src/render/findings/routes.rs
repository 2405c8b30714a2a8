//! Route changes, in words.

use crate::analysis::diagnosis::says::RouteWay;
use crate::analysis::routes::Hops;
use crate::render::words::name_list;
use mx_base::units::local_clock;

/// A range of routers: `2` or `2 to 3`.
fn routers(h: &Hops) -> String {
    if h.fewest == h.most {
        h.fewest.to_string()
    } else {
        format!("{} to {}", h.fewest, h.most)
    }
}

/// Ways whose route changed from interval `at` on, through the ranges
/// `hops`, `changes` times at most.
pub fn changed(ways: &[RouteWay], hops: &[Hops], at: i64, changes: u32) -> String {
    let when = local_clock(at as f64);
    let mut ranges: Vec<String> = hops.iter().map(routers).collect();
    if let Some(first) = ranges.first_mut() {
        first.push_str(" routers");
    }
    let mut went = ranges.join(", then ");
    let shown = hops.len().saturating_sub(1) as u32;
    if changes > shown {
        went.push_str(&format!(", ... ({changes} changes in all)"));
    }
    let names: Vec<String> = ways
        .iter()
        .map(|w| format!("{} -> {}", w.from, w.to))
        .collect();
    let which = match ways {
        [one] => format!("the route from {} to {}", one.from, one.to),
        _ => format!("the routes of {} ways ({})", ways.len(), name_list(&names)),
    };
    format!(
        "{which} changed in the interval ending {when}: the datagrams crossed {went} (by the TTL they arrived with). A link or router on the way went down or came back, or a route was moved; a loss in that interval fits the change as well -- `mx trace` shows each stream's path now"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_its_ways_and_the_routers_before_and_after() {
        let ways = [RouteWay {
            from: "h1".into(),
            to: "h3".into(),
        }];
        let hops = [
            Hops { fewest: 2, most: 2 },
            Hops { fewest: 2, most: 3 },
            Hops { fewest: 3, most: 3 },
        ];
        let text = changed(&ways, &hops, 0, 2);
        assert!(
            text.starts_with("the route from h1 to h3 changed in the interval ending "),
            "{text}"
        );
        assert!(
            text.contains("crossed 2 routers, then 2 to 3, then 3 (by the TTL"),
            "{text}"
        );
        let flapped = changed(&ways, &hops[..2], 0, 9);
        assert!(flapped.contains("2 routers, then 2 to 3, ... (9 changes in all) (by"));
    }
}
