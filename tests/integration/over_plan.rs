//! A responder answers each source at most its plan: the rate the matrix
//! has that source send here, plus the headroom (agent::budget). A peer
//! still running an old matrix at ten times the rate gets its budget back,
//! the rest is counted (`over_plan`), and the summary says it was refused
//! by plan, not lost.

use crate::agents::{Fleet, RowExt, full_rows, mesh, start_soon};

const NET: u8 = 98;
/// The plan h2 runs: 1,000 requests a second each way.
const PLANNED: f64 = 1000.0;
/// h2 answers a source at most this many a second (PLANNED + 25%).
const BUDGET: f64 = 1250.0;

#[test]
fn a_source_sending_ten_times_its_plan_gets_the_budget_back_and_the_rest_is_refused_not_lost() {
    // h2 runs the plan; h1 an old matrix at ten times the rate.
    let mut plan = Fleet::new(&mesh(NET, 2, "1000", (64, 64)));
    let mut old = Fleet::new(&mesh(NET, 2, "10000", (64, 64)));
    let start = start_soon();
    let flags = ["--interval", "1", "--duration", "6", "--start-at", &start];
    plan.start("h2", &flags);
    old.start("h1", &flags);
    plan.wait_ok();
    old.wait_ok();

    let h2 = plan.report("h2");
    let rx = full_rows(&h2, "rx", Some("h1"));
    assert!(rx.len() >= 3, "{}", plan.report_text("h2"));
    for (i, row) in rx.iter().enumerate() {
        let (arrived, answered) = (row.f("pkts").unwrap(), row.f("rep_pkts").unwrap());
        let refused = row.f("over_plan").unwrap();
        // h1 sent about ten times the plan; h2 answered its budget (in the
        // first interval also the second's depth it had saved), never less
        // than the plan, and counted every other request as refused.
        let most = if i == 0 { 2.0 * BUDGET } else { BUDGET };
        assert!(arrived >= 8.0 * PLANNED, "{row:?}");
        assert!(
            (PLANNED..=most * 1.02).contains(&answered),
            "answered {answered} of {arrived}: {row:?}"
        );
        assert_eq!(answered + refused, arrived, "{row:?}");
    }
    // Over the whole run: no more than a second's depth past the budget.
    let total = |rows: &[crate::agents::Row], dir: &str, col: &str| -> f64 {
        rows.iter()
            .filter(|r| r.s("dir") == dir)
            .map(|r| r.f(col).unwrap_or(0.0))
            .sum()
    };
    let answered = total(&h2, "rx", "rep_pkts");
    assert!(answered <= BUDGET * 8.0 + BUDGET, "{answered}");
    // The host rows carry the total; h1's plan (its 1,000/s from h2 in its
    // old matrix's 10,000) refused nothing.
    assert_eq!(
        total(&h2, "host", "over_plan"),
        total(&h2, "rx", "over_plan")
    );
    assert!(total(&h2, "host", "over_plan") > 20_000.0);
    let h1 = old.report("h1");
    assert_eq!(total(&h1, "rx", "over_plan"), 0.0);
    assert!(total(&h1, "rx", "rep_pkts") >= 4.0 * PLANNED);
    // What h1 got back is what h2 answered.
    let back = total(&h1, "tx", "rep_pkts");
    assert!(
        (answered - back).abs() <= 0.01 * answered,
        "{back} of {answered}"
    );
    // The status line says so.
    assert!(plan.log("h2").contains(" over_plan="), "{}", plan.log("h2"));

    // The summary: refused by plan, not lost; the loss is the network's, 0.
    let reports = plan.sandbox.file("reports");
    std::fs::create_dir_all(&reports).unwrap();
    std::fs::copy(plan.dir("h2").join("report.csv"), reports.join("h2.csv")).unwrap();
    std::fs::copy(old.dir("h1").join("report.csv"), reports.join("h1.csv")).unwrap();
    // h1 ran the old matrix: told to trust the plan's.
    let run = plan.sandbox.mx(&[
        "summarize",
        "--no-collect",
        "--matrix",
        "matrix.csv",
        "--trust",
        "matrix",
    ]);
    let out = run.stdout;
    println!("{out}");
    assert!(
        out.contains("requests refused by plan, not lost: sent past the receiver's matrix rate +25% (h1 -> h2 "),
        "{out}"
    );
    let loss = out
        .lines()
        .find(|l| l.trim_start().starts_with("LOSS"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(loss.contains(" 0.00%"), "{loss}");
    // The advice names the source, the receiver and both causes that fit.
    assert!(out.contains("* h1 sent h2 "), "{out}");
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("Either h1 runs another matrix than h2")
            && words.contains("or something else sends from h1's address"),
        "{out}"
    );
    assert!(!out.contains("nothing looks wrong"), "{out}");
    // And the host table's refused column, on h2.
    let h2_line = out
        .lines()
        .find(|l| l.trim_start().starts_with("h2 "))
        .unwrap_or_else(|| panic!("{out}"));
    let refused_cell: f64 = h2_line.split_whitespace().last().unwrap().parse().unwrap();
    assert_eq!(refused_cell, total(&h2, "host", "over_plan"), "{h2_line}");
    // The same as data.
    let json = plan.sandbox.mx(&[
        "summarize",
        "--no-collect",
        "--matrix",
        "matrix.csv",
        "--trust",
        "matrix",
        "--json",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["fleet"]["loss_pct"], 0.0, "{}", json.stdout);
    assert!(doc["fleet"]["refused_pkts"].as_f64().unwrap() > 20_000.0);
    let h2_doc = doc["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["host"] == "h2")
        .unwrap();
    assert_eq!(h2_doc["over_plan_pkts"].as_f64(), Some(refused_cell));
    assert!(
        doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "plan"),
        "{}",
        json.stdout
    );
    assert!(
        !out.to_lowercase().contains("return path") && !out.contains("on the way back from h2"),
        "the refused requests read as loss:\n{out}"
    );
}
