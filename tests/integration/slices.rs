//! An agent run from its host's slice of the matrix (what `mx start` copies
//! each host) against one run from the whole matrix: the same flows, the same
//! answers, the same prints; and a slice that is not whole, or not its own,
//! refused before anything runs.

use crate::agents::{Fleet, PORT, RowExt, addr, full_rows, start_soon};
use mx_matrix::Matrix;
use mx_matrix::slice::Slicer;

/// h1 and h2 send to each other at two rates; h3, whose agent never runs,
/// sends to both (so each answers three sources: two planned, one silent).
fn matrix(net: u8) -> String {
    format!(
        "# tx_size=100 rx_size=300 port={PORT}\n\
         src\\dst,h1={},h2={},h3={}\n\
         h1,,1000,\nh2,600,,\nh3,50,70,\n",
        addr(net, 1),
        addr(net, 2),
        addr(net, 3)
    )
}

/// Writes each host's slice beside the matrix as `<host>.slice`.
fn cut_slices(fleet: &Fleet, text: &str) {
    let slicer = Slicer::new(Matrix::parse(text.as_bytes(), "m.csv").unwrap());
    for (i, host) in ["h1", "h2", "h3"].iter().enumerate() {
        std::fs::write(
            fleet.dir(host).with_extension("slice"),
            slicer.slice(i as u32),
        )
        .unwrap();
    }
}

/// What a run of h1 and h2 did, host by host: its stamp, and per tx flow its
/// peer, target, the print on its rows, and requests sent against replies
/// back over its whole intervals.
fn run(fleet: &mut Fleet, matrix_flag: &dyn Fn(&str) -> String) -> Vec<String> {
    let start = start_soon();
    for host in ["h1", "h2"] {
        fleet.spawn_from(
            host,
            &matrix_flag(host),
            &["--interval", "1", "--duration", "4", "--start-at", &start],
        );
    }
    fleet.wait_ok();
    let mut seen = Vec::new();
    for host in ["h1", "h2"] {
        let stamp = std::fs::read_to_string(fleet.dir(host).join("agent.stamp")).unwrap();
        let stamp: Vec<&str> = stamp.lines().filter(|l| !l.starts_with("flags=")).collect();
        seen.push(format!("{host} stamp {stamp:?}"));
        let rows = fleet.report(host);
        for (dir, peer) in [("tx", "h1"), ("tx", "h2"), ("rx", "h1"), ("rx", "h2")] {
            let flows = full_rows(&rows, dir, Some(peer));
            if peer == host {
                assert!(flows.is_empty());
                continue;
            }
            // Requests against replies over the whole intervals: every
            // request sent was answered (tx), every one that came in was
            // answered (rx): the budgets answered them all.
            let (requests, replies): (f64, f64) = flows.iter().fold((0.0, 0.0), |(q, p), r| {
                (q + r.f("pkts").unwrap(), p + r.f("rep_pkts").unwrap())
            });
            assert!(
                requests > 0.0 && replies == requests,
                "{host} {dir} {peer}: {requests} requests, {replies} replies"
            );
            seen.push(format!(
                "{host} {dir} {peer} target {}",
                flows[0].s("target_pps")
            ));
        }
        for r in full_rows(&rows, "host", None) {
            seen.push(format!(
                "{host} print {} over plan {}",
                r.s("matrix_fp"),
                r.s("over_plan")
            ));
        }
        seen.dedup();
    }
    seen
}

#[test]
fn agent_run_from_its_slice_does_what_the_whole_matrix_has_it_do() {
    let net = 83;
    let text = matrix(net);
    let mut fleet = Fleet::new(&text);
    let whole = run(&mut fleet, &|_| "../matrix.csv".to_string());
    cut_slices(&fleet, &text);
    let sliced = run(&mut fleet, &|host| format!("../{host}.slice"));
    assert_eq!(sliced, whole);
    // Each ran what it was cut for, and said where it came from.
    for line in ["h1 tx h2 target 1000.0", "h2 tx h1 target 600.0"] {
        assert!(whole.iter().any(|l| l == line), "{line}: {whole:#?}");
    }
    for host in ["h1", "h2"] {
        let print = whole
            .iter()
            .find_map(|l| l.strip_prefix(&format!("{host} print ")))
            .unwrap_or_else(|| panic!("{whole:#?}"));
        assert!(
            print.len() == 16 + " over plan 0".len() && print.ends_with(" over plan 0"),
            "{print}"
        );
    }
}

#[test]
fn agent_refuses_a_slice_cut_short_changed_or_not_its_own_in_one_line() {
    let net = 84;
    let text = matrix(net);
    let fleet = Fleet::new(&text);
    std::fs::create_dir_all(fleet.dir("h1")).unwrap();
    cut_slices(&fleet, &text);
    let slice = std::fs::read(fleet.dir("h1").with_extension("slice")).unwrap();
    let bad = |name: &str, bytes: &[u8], host: &str| -> String {
        let path = fleet.dir("h1").join(name);
        std::fs::write(&path, bytes).unwrap();
        let out = fleet
            .command_from(host, path.to_str().unwrap(), &["--duration", "1"])
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name}: {err}");
        assert!(
            !fleet.dir(host).join("report.csv").exists(),
            "{name}: a report was begun"
        );
        err
    };
    let cut = bad("cut.slice", &slice[..slice.len() * 2 / 3], "h1");
    assert!(cut.contains("cut short"), "{cut}");
    let text_of = String::from_utf8(slice.clone()).unwrap();
    let changed = bad(
        "changed.slice",
        text_of.replacen("1=1000", "1=2000", 1).as_bytes(),
        "h1",
    );
    assert!(changed.contains("changed since it was cut"), "{changed}");
    let others = bad("h1.slice", &slice, "h2");
    assert!(
        others.contains("a slice cut for host 'h1', and this agent is --host 'h2'"),
        "{others}"
    );
}
