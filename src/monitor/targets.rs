//! The fleet as Prometheus targets (`file_sd`), and what it costs a
//! Prometheus in series.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::matrix::{Matrix, endpoint};

/// Labels every target carries besides its address: the host's name (and
/// pool), under names the agents' own `host` and `pool` labels never clash
/// with (a target label of the same name would rename the scraped one).
#[derive(Serialize)]
struct Target {
    targets: [String; 1],
    labels: std::collections::BTreeMap<&'static str, String>,
}

/// The `file_sd` JSON: one target per host, at its matrix address and the
/// agents' metrics port, labelled `mx_host` (and `mx_pool`).
pub(crate) fn file_sd(matrix: &Matrix, port: u16) -> String {
    let pools = matrix.pools();
    let pool_of = pools.pool_of_each(matrix.host_count());
    let targets: Vec<Target> = matrix
        .hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let mut labels = std::collections::BTreeMap::new();
            labels.insert("mx_host", h.name.clone());
            if let Some(p) = pool_of[i] {
                labels.insert("mx_pool", pools.pools[p].name.clone());
            }
            Target {
                targets: [endpoint(&h.addr, port)],
                labels,
            }
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&targets).expect("targets serialize");
    text.push('\n');
    text
}

/// Series an agent serves: per peer it sends to, 9 counters (3 of them the
/// legs it tells from its replies' counts), a target gauge, the replies'
/// hop count and a 12-series histogram (10 bounds, +Inf, sum and count: 13
/// with the count); per peer it hears from, 6 counters and the requests'
/// hop count.
const PER_PEER_SENT_TO: usize = 9 + 1 + 1 + 13;
const PER_PEER_HEARD_FROM: usize = 6 + 1;
/// Its own: 12 interface and socket counters, 5 CPU gauges (5 more in a
/// disk run), strays, the host histogram (19 bounds, +Inf, sum, count),
/// the interval and its end; and the 5 series Prometheus adds per target
/// (`up`, `scrape_*`).
const PER_HOST: usize = 12 + 5 + 1 + 22 + 2 + 5;
const PER_HOST_DISK: usize = 5;

/// The series the fleet costs: (the most any host costs, all of them).
pub fn series(matrix: &Matrix) -> (usize, usize) {
    let n = matrix.host_count();
    let mut sent_to = vec![BTreeSet::new(); n];
    let mut heard_from = vec![BTreeSet::new(); n];
    for (src, cells) in matrix.rows() {
        for cell in cells {
            sent_to[src as usize].insert(cell.dst);
            heard_from[cell.dst as usize].insert(src);
        }
    }
    let disk = if matrix.config.disk.is_on() {
        PER_HOST_DISK
    } else {
        0
    };
    let each: Vec<usize> = (0..n)
        .map(|h| {
            PER_HOST
                + disk
                + sent_to[h].len() * PER_PEER_SENT_TO
                + heard_from[h].len() * PER_PEER_HEARD_FROM
        })
        .collect();
    (each.iter().copied().max().unwrap_or(0), each.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn a_target_per_host_at_its_address_and_the_metrics_port() {
        let m =
            matrix("src\\dst,a=2001:db8::1,b=2001:db8::2\na=2001:db8::1,,10\nb=2001:db8::2,10,\n");
        let doc: serde_json::Value = serde_json::from_str(&file_sd(&m, 9464)).unwrap();
        assert_eq!(
            doc,
            serde_json::json!([
                {"targets": ["[2001:db8::1]:9464"], "labels": {"mx_host": "a"}},
                {"targets": ["[2001:db8::2]:9464"], "labels": {"mx_host": "b"}},
            ])
        );
    }

    #[test]
    fn the_series_count_follows_the_peers_of_each_host() {
        // a sends to b and c; b and c send to a.
        let m = matrix("src\\dst,a,b,c\na,,10,10\nb,10,,\nc,10,,\n");
        let a = PER_HOST + 2 * PER_PEER_SENT_TO + 2 * PER_PEER_HEARD_FROM;
        let b = PER_HOST + PER_PEER_SENT_TO + PER_PEER_HEARD_FROM;
        assert_eq!(series(&m), (a, a + 2 * b));
    }
}
