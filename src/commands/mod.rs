//! One module per sub-command. Each takes its parsed arguments and a writer for
//! standard output, prints what the user sees, and returns the exit code (or an
//! [`Error`](crate::error::Error) that `main` prints as one `mx: ...` line).

pub mod check;
pub mod demo;
pub mod generate;
pub mod help;
pub mod hints;

/// How to find what unpaced flows reach, in the words gen, check and hints share:
/// an unpaced flow has no rate to weigh against a NIC or to size workers from, so
/// only a run can say. `goal` says what to find (`the ceiling`), `run` is the
/// `mx run` command to suggest; each line is printed after the caller's indent.
pub(crate) fn unpaced_ceiling(goal: &str, run: &str) -> [String; 4] {
    [
        format!("to find {goal}, run it: {run}"),
        "  `sent` in its summary is what each host managed, and `agent` its busiest worker's"
            .to_string(),
        "  share of a core: near 100%, mx is the limit, not the network (WHAT TO DO NEXT says"
            .to_string(),
        "  what to raise). To weigh a rate against your NICs, `mx check` a matrix paced near it."
            .to_string(),
    ]
}
