//! The stamp an agent leaves beside its report: a fingerprint of what it loaded
//! and the flags it was started with. `mx reload` compares fingerprints to
//! restart only the hosts an edit touched, and restarts them with the same
//! flags. The terms are the original tool's, so stamps compare across the two
//! implementations.
//!
//! Ours add the print of what the host answers (`in=`): who sends to it, at
//! what rate, which its answer budget follows (agent::budget). An edit of
//! another host's row can change it, and an agent left running with the old
//! budget would refuse the new rate. The original kept no budget, and its
//! stamps have no such line.

use mx_base::units::g;
use mx_matrix::Matrix;
use mx_matrix::run_print::{print, traffic_terms};

/// First 16 hex digits of SHA-256 over the terms that decide host `me`'s
/// traffic, as the original wrote them (each host with its address).
pub fn fingerprint(matrix: &Matrix, me: u32) -> String {
    print(&traffic_terms(matrix, me, "mx-stamp-v1", |h| {
        format!("host={},{},{}", h.name, h.addr, h.port)
    }))
}

/// The print of what each host answers, by host: the hosts that send to
/// it and their rates (16 hex digits of SHA-256 over the terms), in one
/// pass over the matrix.
pub fn inbound_prints(matrix: &Matrix) -> Vec<String> {
    let hosts = matrix.hosts();
    let mut terms: Vec<Vec<String>> = hosts
        .iter()
        .map(|h| vec!["mx-inbound-v1".to_string(), format!("me={}", h.name)])
        .collect();
    for (src, cells) in matrix.rows() {
        for cell in cells {
            let rate = cell.rate.pps().map_or("max".to_string(), g);
            terms[cell.dst as usize].push(format!("from={},{rate}", hosts[src as usize].name));
        }
    }
    terms.iter().map(|t| print(t)).collect()
}

/// The stamp file's text: `fp=<fingerprint>`, `in=<inbound print>` and
/// `flags=<agent flags>`. The flags are shell words (`mx reload` splits them
/// again); an argument can hold no NUL, the one thing shell quoting cannot
/// carry.
pub(crate) fn stamp_text(fingerprint: &str, inbound: &str, flags: &[String]) -> String {
    let flags = shlex::try_join(flags.iter().map(String::as_str)).unwrap_or_default();
    format!("fp={fingerprint}\nin={inbound}\nflags={flags}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn matrix(text: &str) -> Matrix {
        Matrix::parse(text.as_bytes(), "m.csv").unwrap()
    }

    #[test]
    fn the_fingerprint_is_the_originals_terms() {
        let m = matrix(
            "# tx_size=64 rx_size=512 port=5300\nsrc\\dst,a,b=10.0.0.2:5400\na,,20000\nb,max,\n",
        );
        let terms = "mx-stamp-v1\ntx=64\nrx=512\nport=5300\nhost=a,a,5300\nhost=b,10.0.0.2,5400\nme=a\nflow=b,20000";
        let want: String = Sha256::digest(terms.as_bytes())
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(fingerprint(&m, 0), want);
        assert_eq!(fingerprint(&m, 0).len(), 16);
    }

    #[test]
    fn what_changes_a_hosts_fingerprint() {
        let base = "# tx_size=64\nsrc\\dst,a,b,c\na,,100,100\nb,100,,100\nc,100,100,\n";
        let fp = |text: &str, me| fingerprint(&matrix(text), me);
        // Another host's row: a is untouched, b changed.
        let b_edited = base.replace("b,100,,100", "b,200,,100");
        assert_eq!(fp(base, 0), fp(&b_edited, 0));
        assert_ne!(fp(base, 1), fp(&b_edited, 1));
        // Cosmetic: comments and 100 vs 100.0 change nothing.
        let cosmetic = base.replace("a,,100,100", "# hi\na,,100.0,100");
        assert_eq!(fp(base, 0), fp(&cosmetic, 0));
        // The packet shape changes every host.
        let shape = base.replace("tx_size=64", "tx_size=128");
        assert_ne!(fp(base, 2), fp(&shape, 2));
        // So does the class; the default class, written or not, is no change.
        let ef = base.replace("tx_size=64", "tx_size=64 dscp=46");
        assert_ne!(fp(base, 0), fp(&ef, 0));
        assert_eq!(fp(&ef, 0), fp(&ef.replace("dscp=46", "dscp=EF"), 0));
        assert_eq!(
            fp(base, 0),
            fp(&base.replace("tx_size=64", "tx_size=64 dscp=0"), 0)
        );
    }

    #[test]
    fn stamps_quote_flags_for_the_shell() {
        let flags = ["--interval", "5", "--bind", "eth 1"].map(String::from);
        assert_eq!(
            stamp_text("0123456789abcdef", "fedcba9876543210", &flags),
            "fp=0123456789abcdef\nin=fedcba9876543210\nflags=--interval 5 --bind 'eth 1'\n"
        );
    }

    #[test]
    fn what_a_host_answers_changes_with_the_cells_that_send_to_it_alone() {
        let base = "src\\dst,a,b,c\na,,100,100\nb,100,,100\nc,100,100,\n";
        let prints = |text: &str| inbound_prints(&matrix(text));
        let before = prints(base);
        // a sends c twice as much: c answers a new rate; a's fingerprint
        // changed, b's nothing at all.
        let after = prints(&base.replace("a,,100,100", "a,,100,200"));
        assert_eq!(
            (
                before[0] == after[0],
                before[1] == after[1],
                before[2] == after[2]
            ),
            (true, true, false)
        );
        assert_eq!(
            before
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            3
        );
        // 100 and 100.0 are one rate.
        assert_eq!(prints(&base.replace("a,,100,100", "a,,100.0,100")), before);
    }
}
