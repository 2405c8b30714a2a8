//! The open-file limit: every flow is a socket, and in a disk run every disk
//! thread holds two handles. The agent raises its own soft limit to what the
//! run needs (no privilege needed, and the raise ends with the process); a
//! hard limit below the need is refused with the fix named.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use mx_base::error::{Error, Result};

/// Descriptors beyond the flow sockets: responders, epoll, files, stdio.
const SPARE_FDS: u64 = 64;

/// Descriptors the disk threads of a disk run hold: each of a worker's
/// `depth` threads its own handle of the data file and of the worker's
/// responder socket, and each worker an eventfd they wake it with.
pub fn disk_handles(workers: usize, depth: usize) -> u64 {
    (workers * (2 * depth + 1)) as u64
}

/// Descriptors an agent with `flow_sockets` flow sockets and `disk` disk
/// handles ([`disk_handles`]; 0 without a disk) needs: each socket (twice
/// over on a layered run, whose old layer drains while the new one runs),
/// each disk handle, plus spares. `mx doctor` compares it with each host's
/// hard limit.
pub fn fds_needed(flow_sockets: usize, layered: bool, disk: u64) -> u64 {
    let sockets = if layered {
        2 * flow_sockets
    } else {
        flow_sockets
    };
    sockets as u64 + disk + SPARE_FDS
}

/// Raises the soft RLIMIT_NOFILE to `fds_needed`. Returns the
/// log line to print, if anything changed or failed softly.
pub(crate) fn ensure_fd_limit(
    flow_sockets: usize,
    layered: bool,
    disk: u64,
) -> Result<Option<String>> {
    let need = fds_needed(flow_sockets, layered, disk);
    let flows = need - SPARE_FDS - disk;
    let disk_too = if disk > 0 {
        format!(", and {disk} disk handles: two per disk thread, --workers x --disk-depth of them")
    } else {
        String::new()
    };
    let or_shallower = if disk > 0 {
        ", a lower --disk-depth"
    } else {
        ""
    };
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| Error::refused(format!("cannot read the open-file limit: {e}")))?;
    if soft >= need {
        return Ok(None);
    }
    let unlimited = hard == nix::sys::resource::RLIM_INFINITY;
    if !unlimited && hard < need {
        return Err(Error::refused(format!(
            "this run needs ~{need} file descriptors ({flows} flows; each is a socket{disk_too}) but the hard limit is {hard}, which only an administrator can raise. Either raise it (limits.conf / systemd LimitNOFILE), lower --streams{or_shallower}, use fewer peers (`mx gen --peers K`), or split the load across more hosts."
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_need_counts_sockets_disk_handles_and_spares() {
        // Two per disk thread and an eventfd per worker.
        assert_eq!(disk_handles(2, 1), 6);
        assert_eq!(disk_handles(2, 64), 258);
        assert_eq!(fds_needed(10, false, 0), 10 + SPARE_FDS);
        // A layered run holds its draining layer's sockets too.
        assert_eq!(fds_needed(10, true, 0), 20 + SPARE_FDS);
        assert_eq!(
            fds_needed(1, false, disk_handles(2, 64)),
            1 + 258 + SPARE_FDS
        );
    }
}
