//! What a running agent answers, re-read in place. `mx reload` of an edit
//! that leaves this host's own flows alone but changes what its senders
//! send it copies the new matrix here and orders a re-read, rather than
//! restart the host (and cut its run): its answer budgets are planned
//! anew from the new matrix ([`Sources::refresh`]), as the workers answer.
//!
//! The order is a control file beside the report ([`ANSWERS_FILE`]:
//! `in=<print>`, the new matrix's print of what this host answers,
//! [`stamp::inbound_prints`]), each taken once. The agent re-reads its own
//! `--matrix`, checks that its own traffic is unchanged (only a restart
//! takes that) and that the print is the one ordered, re-plans, and writes
//! the print into its stamp, so that the next reload sees it current.
//!
//! [`Sources::refresh`]: super::budget::Sources::refresh

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::plan::AgentPlan;
use super::stamp;

/// The control file of an order, beside the report.
pub const ANSWERS_FILE: &str = "agent.answers";

/// Where this agent looks for orders, and what it needs to act on one.
pub(crate) struct AnswerOrders {
    file: PathBuf,
    matrix: PathBuf,
    stamp: PathBuf,
    stamp_words: Vec<String>,
    /// The print of the last order taken.
    seen: RefCell<Option<String>>,
}

impl AnswerOrders {
    /// The orders of an agent whose files sit in `home`, that runs `matrix`
    /// and was started with `stamp_words`; an order of an earlier run is
    /// removed, never taken.
    pub fn new(home: &Path, matrix: &Path, stamp_words: &[String]) -> AnswerOrders {
        let file = home.join(ANSWERS_FILE);
        let _ = std::fs::remove_file(&file);
        AnswerOrders {
            file,
            matrix: matrix.to_path_buf(),
            stamp: home.join(super::STAMP_FILE),
            stamp_words: stamp_words.to_vec(),
            seen: RefCell::new(None),
        }
    }

    /// Takes a new order, if there is one, and says what it did.
    pub fn poll(&self, plan: &AgentPlan) {
        let Ok(text) = std::fs::read_to_string(&self.file) else {
            return;
        };
        let Some(ordered) = text.split_whitespace().find_map(|w| w.strip_prefix("in=")) else {
            return;
        };
        if self.seen.borrow().as_deref() == Some(ordered) {
            return;
        }
        *self.seen.borrow_mut() = Some(ordered.to_string());
        match self.apply(plan, ordered) {
            Ok(line) | Err(line) => say!("{line}"),
        }
    }

    /// Re-plans the budgets from the matrix file, as ordered: the line
    /// that says so, or why not.
    fn apply(&self, plan: &AgentPlan, ordered: &str) -> Result<String, String> {
        let refused = |why: String| format!("answers: not re-read: {why}");
        let (matrix, sliced_for) =
            mx_matrix::slice::load(&self.matrix).map_err(|e| refused(e.to_string()))?;
        let me = plan.me;
        if sliced_for.is_some_and(|cut_for| cut_for != me) {
            return Err(refused(format!(
                "{} is another host's slice",
                self.matrix.display()
            )));
        }
        let fingerprint = stamp::fingerprint(&plan.matrix, me);
        if matrix.host_count() != plan.matrix.host_count()
            || stamp::fingerprint(&matrix, me) != fingerprint
        {
            return Err(refused(format!(
                "{} changes this host's own flows, which only a restart takes (mx reload restarts it)",
                self.matrix.display()
            )));
        }
        let print = &stamp::inbound_prints(&matrix)[me as usize];
        if print != ordered {
            return Err(refused(format!(
                "{} is not the matrix the order is for (in={ordered})",
                self.matrix.display()
            )));
        }
        let ips: Vec<_> = plan.peer_addrs.iter().map(|a| a.map(|a| a.ip())).collect();
        let changed = plan.sources.refresh(&matrix, me, &ips).map_err(|ip| {
            refused(format!(
                "{ip} sends here in it, and did not: a restart takes that"
            ))
        })?;
        let text = stamp::stamp_text(&fingerprint, print, &self.stamp_words);
        mx_base::files::write_atomically(&self.stamp, |out| {
            std::io::Write::write_all(out, text.as_bytes())
        })
        .map_err(|e| refused(format!("{}: {e}", self.stamp.display())))?;
        Ok(format!(
            "answers: what the hosts that send here send re-read from {} (mx reload): {changed} source(s) answered at a new rate, the run goes on",
            self.matrix.display()
        ))
    }
}
