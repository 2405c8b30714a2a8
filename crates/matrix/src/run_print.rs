//! What a host's traffic is, in 16 hex digits: the print an agent writes on
//! each host row of its report (`matrix_fp`), and that a summary computes
//! from the matrix beside the reports. Two prints that differ are two runs:
//! reports of another matrix (another directory's run in the same remote
//! directory, an edit since) are never summarized as this one's without a
//! word.
//!
//! The terms are what decides the host's traffic ([`traffic_terms`]):
//! sizes, port, disk mode, class, the layer rotation, the hosts by name,
//! and its flows and rates.
//! Never addresses: the controller resolves names and `--bind` retargets
//! them, so a host's address differs between the matrix a user keeps and
//! the one an agent ran, while its traffic is the same.

use sha2::{Digest, Sha256};

use super::{Host, Matrix};
use mx_base::units::g;

/// The print of host `me`'s traffic in `matrix`.
pub fn run_print(matrix: &Matrix, me: u32) -> String {
    print(&traffic_terms(matrix, me, RUN_TAG, run_host_term))
}

const RUN_TAG: &str = "mx-run-v1";

/// A host in the run print: its name and port, never its address.
fn run_host_term(h: &Host) -> String {
    format!("host={},{}", h.name, h.port)
}

/// The terms that decide host `me`'s traffic, after `tag`: sizes and port;
/// the disk mode and class only when set (a plain matrix keeps the terms it
/// always had); the layer rotation; every host as `host_term` writes it;
/// `me`; its flows and their rates. The agent's stamp takes them too, with
/// the original tool's tag and host terms.
pub fn traffic_terms(
    matrix: &Matrix,
    me: u32,
    tag: &str,
    host_term: impl Fn(&Host) -> String,
) -> Vec<String> {
    let mut terms = common_terms(matrix, tag, host_term);
    terms.extend(own_terms(matrix, me));
    terms
}

/// The terms every host of `matrix` has alike: all but its own.
fn common_terms(matrix: &Matrix, tag: &str, host_term: impl Fn(&Host) -> String) -> Vec<String> {
    let c = &matrix.config;
    let mut terms = vec![
        tag.to_string(),
        format!("tx={}", c.tx_size),
        format!("rx={}", c.rx_size),
        format!("port={}", c.port),
    ];
    if c.disk.is_on() {
        terms.push(format!("disk={}", c.disk.name()));
    }
    if !c.dscp.is_default() {
        terms.push(format!("dscp={}", c.dscp.value()));
    }
    if let (Some(key), Some(r)) = (c.shuffle, c.rotation) {
        terms.push(format!(
            "rotation={},{},{},{},{}",
            key.peers,
            r.layers,
            g(r.dwell),
            key.seed,
            u8::from(r.fill)
        ));
    }
    terms.extend(matrix.hosts().iter().map(host_term));
    terms
}

/// Host `me`'s own terms: its name, its flows and their rates.
fn own_terms(matrix: &Matrix, me: u32) -> impl Iterator<Item = String> + '_ {
    let me_term = format!("me={}", matrix.hosts()[me as usize].name);
    std::iter::once(me_term).chain(matrix.row(me).iter().map(|cell| {
        let rate = cell.rate.pps().map_or("max".to_string(), g);
        format!("flow={},{rate}", matrix.hosts()[cell.dst as usize].name)
    }))
}

/// One print of every host's traffic in `matrix`: the terms they share and
/// each host's own. What a slice for every host is checked against once its
/// rows are rebuilt: one print for the fleet, not one per host.
pub fn fleet_print(matrix: &Matrix) -> String {
    let mut terms = common_terms(matrix, FLEET_TAG, run_host_term);
    for me in 0..matrix.host_count() as u32 {
        terms.extend(own_terms(matrix, me));
    }
    print(&terms)
}

const FLEET_TAG: &str = "mx-fleet-v1";

/// The run print of every host of one matrix, the terms they share hashed
/// once: a print for each of 10,000 hosts costs each host's own terms, not
/// 10,000 times the fleet's.
pub struct RunPrints {
    common: Sha256,
}

impl RunPrints {
    pub fn new(matrix: &Matrix) -> RunPrints {
        let mut common = Sha256::new();
        common.update(common_terms(matrix, RUN_TAG, run_host_term).join("\n"));
        RunPrints { common }
    }

    /// [`run_print`] of host `me` of `matrix` (the one these were made of).
    pub fn of(&self, matrix: &Matrix, me: u32) -> String {
        let mut hash = self.common.clone();
        for term in own_terms(matrix, me) {
            hash.update(b"\n");
            hash.update(term.as_bytes());
        }
        hex16(&hash.finalize())
    }
}

/// The first 16 hex digits of SHA-256 over `terms`, one per line.
pub fn print(terms: &[String]) -> String {
    hex16(&Sha256::digest(terms.join("\n").as_bytes()))
}

fn hex16(digest: &[u8]) -> String {
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn the_print_follows_the_traffic_not_the_addresses() {
        let named = matrix("src\\dst,a,b\na,,1000\nb,1000,\n");
        let addressed =
            matrix("src\\dst,a=10.0.0.1,b=10.0.0.2\na=10.0.0.1,,1000\nb=10.0.0.2,1000,\n");
        assert_eq!(run_print(&named, 0), run_print(&addressed, 0));
        assert_eq!(run_print(&named, 0).len(), 16);
        // Another rate, size or peer is another run.
        for other in [
            "src\\dst,a,b\na,,2000\nb,1000,\n",
            "# tx_size=128\nsrc\\dst,a,b\na,,1000\nb,1000,\n",
            "src\\dst,a,c\na,,1000\nc,1000,\n",
        ] {
            assert_ne!(
                run_print(&matrix(other), 0),
                run_print(&named, 0),
                "{other}"
            );
        }
        // b's print is b's: a's row changing leaves it alone.
        let edited = matrix("src\\dst,a,b\na,,2000\nb,1000,\n");
        assert_eq!(run_print(&edited, 1), run_print(&named, 1));
    }

    #[test]
    fn every_hosts_print_at_once_is_each_hosts_print() {
        let layered = crate::build::generated(
            12,
            crate::build::Shape::Layered {
                peers: 3,
                seed: 5,
                dwell: 10.0,
                fill: false,
            },
        );
        for m in [
            matrix("# dscp=46 disk=both\nsrc\\dst,a,b,c\na,,1000,max\nb,1000,,\nc,5,6,\n"),
            layered,
        ] {
            let prints = RunPrints::new(&m);
            for me in 0..m.host_count() as u32 {
                assert_eq!(prints.of(&m, me), run_print(&m, me));
            }
        }
    }
}
