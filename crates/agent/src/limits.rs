//! The open-file limit: every flow is a socket. The agent raises its own soft
//! limit to what the run needs (no privilege needed, and the raise ends with the
//! process); a hard limit below the need is refused with the fix named.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use mx_base::error::{Error, Result};

/// Descriptors beyond the flow sockets: responders, epoll, files, stdio.
const SPARE_FDS: u64 = 64;

/// Descriptors an agent with `flow_sockets` flow sockets needs: each socket
/// (twice over on a layered run, whose old layer drains while the new one
/// runs), plus spares. `mx doctor` compares it with each host's hard limit.
pub fn fds_needed(flow_sockets: usize, layered: bool) -> u64 {
    let sockets = if layered {
        2 * flow_sockets
    } else {
        flow_sockets
    };
    sockets as u64 + SPARE_FDS
}

/// Raises the soft RLIMIT_NOFILE to `fds_needed`. Returns the
/// log line to print, if anything changed or failed softly.
pub(crate) fn ensure_fd_limit(flow_sockets: usize, layered: bool) -> Result<Option<String>> {
    let need = fds_needed(flow_sockets, layered);
    let flows = need - SPARE_FDS;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| Error::refused(format!("cannot read the open-file limit: {e}")))?;
    if soft >= need {
        return Ok(None);
    }
    let unlimited = hard == nix::sys::resource::RLIM_INFINITY;
    if !unlimited && hard < need {
        return Err(Error::refused(format!(
            "this run needs ~{need} file descriptors ({flows} flows; each is a socket) but the hard limit is {hard}, which only an administrator can raise. Either raise it (limits.conf / systemd LimitNOFILE), lower --streams, use fewer peers (`mx gen --peers K`), or split the load across more hosts."
        )));
    }
    let hard_text = if unlimited {
        "unlimited".to_string()
    } else {
        hard.to_string()
    };
    Ok(Some(match setrlimit(Resource::RLIMIT_NOFILE, need, hard) {
        Ok(()) => format!(
            "fd limit: soft {soft} -> {need} (hard {hard_text}; raising the soft limit needs no privilege and ends with this process)"
        ),
        Err(e) => format!(
            "fd limit: could not raise soft limit {soft} -> {need} ({e}); continuing, but flows may fail to open"
        ),
    }))
}
