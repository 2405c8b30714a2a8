//! Why ssh could not reach a host, read from what OpenSSH printed, and the
//! fix for each cause. A name that does not resolve, no route, a refused
//! connection, a silent host, a host key that changed or is not known, and a
//! key the host refused each want a different fix: one `ssh-copy-id` for all
//! of them sends the user the wrong way four times out of five.

/// What stood between ssh and a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// The name does not resolve (ssh's own lookup).
    NoName,
    /// No route to the address: nothing on the path knows it.
    NoRoute,
    /// The address answered, and nothing listens on the ssh port.
    Refused,
    /// No answer at all within the timeout.
    Silent,
    /// The host's key is not the one `known_hosts` holds for it.
    HostKeyChanged,
    /// The host's key is not in `known_hosts`, and checking is strict.
    HostKeyUnknown,
    /// sshd refused every key offered.
    KeyRefused,
}

/// OpenSSH's words for each cause, most specific first: a changed host key
/// also prints "Host key verification failed", which alone means unknown.
const SAID: &[(&str, Cause)] = &[
    ("Could not resolve hostname", Cause::NoName),
    ("No route to host", Cause::NoRoute),
    ("Network is unreachable", Cause::NoRoute),
    ("Connection refused", Cause::Refused),
    ("timed out", Cause::Silent),
    (
        "REMOTE HOST IDENTIFICATION HAS CHANGED",
        Cause::HostKeyChanged,
    ),
    ("Host key verification failed", Cause::HostKeyUnknown),
    ("Permission denied", Cause::KeyRefused),
];

impl Cause {
    /// The cause in what ssh printed (`None`: not one ssh names).
    pub fn of(said: &str) -> Option<Cause> {
        SAID.iter()
            .find(|(words, _)| said.contains(words))
            .map(|&(_, cause)| cause)
    }

    /// The cause in a few words, for a line that names its hosts.
    pub fn what(self) -> &'static str {
        match self {
            Cause::NoName => "the name does not resolve",
            Cause::NoRoute => "no route to the host",
            Cause::Refused => "connection refused: no sshd listening",
            Cause::Silent => "no answer",
            Cause::HostKeyChanged => "the host key changed",
            Cause::HostKeyUnknown => "the host key is not known",
            Cause::KeyRefused => "your key was refused",
        }
    }

    /// What to do, for the ssh target `target` (`[user@]address`).
    pub fn fix(self, target: &str) -> String {
        match self {
            Cause::NoName => "correct the name in the server list, or give its address \
                 (name=address) and regenerate the matrix"
                .to_string(),
            Cause::NoRoute => format!(
                "is the host up, and on a network this machine reaches? (`ping {}`)",
                address(target)
            ),
            Cause::Refused => format!(
                "start sshd on the host, or name its port (Port in ~/.ssh/config, or \
                 --ssh 'ssh -p PORT'); `ssh {target}` must work"
            ),
            Cause::Silent => format!(
                "the host is down, or a firewall drops ssh on the way; `ssh {target}` must answer"
            ),
            Cause::HostKeyChanged => format!(
                "if the host was reinstalled, `ssh-keygen -R {}` forgets its old key; \
                 otherwise find out why the key changed before trusting it",
                address(target)
            ),
            Cause::HostKeyUnknown => format!(
                "`ssh {target}` once, check the fingerprint it shows and accept it (or add the \
                 key to ~/.ssh/known_hosts)"
            ),
            Cause::KeyRefused => format!("`ssh-copy-id {target}` installs your key"),
        }
    }
}

/// The address part of `[user@]address`.
fn address(target: &str) -> &str {
    target.rsplit_once('@').map_or(target, |(_, a)| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_read_from_what_openssh_prints() {
        // OpenSSH 9's own lines, as ssh wrote them to standard error.
        for (said, cause) in [
            (
                "ssh: Could not resolve hostname nosuch.invalid: Name or service not known",
                Cause::NoName,
            ),
            (
                "ssh: Could not resolve hostname h9: Temporary failure in name resolution",
                Cause::NoName,
            ),
            (
                "ssh: connect to host 198.18.0.9 port 22: No route to host",
                Cause::NoRoute,
            ),
            (
                "ssh: connect to host 198.18.0.9 port 22: Network is unreachable",
                Cause::NoRoute,
            ),
            (
                "ssh: connect to host 127.0.0.1 port 1: Connection refused",
                Cause::Refused,
            ),
            (
                "Connection to 198.18.250.1 port 22 timed out",
                Cause::Silent,
            ),
            ("Connection timed out during banner exchange", Cause::Silent),
            (
                "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
                 @    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n\
                 @@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n\
                 Host key for 198.18.0.2 has changed and you have requested strict checking.\n\
                 Host key verification failed.",
                Cause::HostKeyChanged,
            ),
            (
                "No ED25519 host key is known for 198.18.0.2 and you have requested strict checking.\n\
                 Host key verification failed.",
                Cause::HostKeyUnknown,
            ),
            (
                "mx@198.18.0.2: Permission denied (publickey,password).",
                Cause::KeyRefused,
            ),
        ] {
            assert_eq!(Cause::of(said), Some(cause), "{said}");
        }
        assert_eq!(Cause::of("bash: line 1: mx: command not found"), None);
    }

    #[test]
    fn each_fix_names_the_target_and_only_a_refused_key_says_ssh_copy_id() {
        let causes = [
            Cause::NoName,
            Cause::NoRoute,
            Cause::Refused,
            Cause::Silent,
            Cause::HostKeyChanged,
            Cause::HostKeyUnknown,
            Cause::KeyRefused,
        ];
        for cause in causes {
            let fix = cause.fix("mx@198.18.0.2");
            assert_eq!(
                fix.contains("ssh-copy-id"),
                cause == Cause::KeyRefused,
                "{cause:?}: {fix}"
            );
            if cause != Cause::NoName {
                assert!(fix.contains("198.18.0.2"), "{cause:?}: {fix}");
            }
        }
        assert!(
            Cause::HostKeyChanged
                .fix("mx@10.0.0.1")
                .contains("ssh-keygen -R 10.0.0.1`")
        );
    }
}
