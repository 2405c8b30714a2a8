//! Where the packets went: in a host, or on the wire.
//!
//! A request lost on its way into a host may have died on the wire, or in the
//! host itself: in its NIC's ring, or in the agent's own socket buffer when the
//! agent could not run to empty it (a CPU quota, a busy box). The kernel counts
//! the second kind, and the agent reports those counts per interval: the
//! datagrams dropped at its full sockets (`req_drops` at the responder,
//! `rep_drops` at its flow sockets), its interfaces' rx drops, how far it fell
//! behind its send schedule and how long its cgroup was throttled. Set against
//! the packets lost at each host, they say which losses the host counted
//! itself: those are the host's, and advice never sends anyone to a cable for
//! them. What the counts do not cover is the wire's.

use super::aggregate::ReportSet;
use super::figures::FlowFigures;

/// An agent this far behind its send schedule did not get the CPU it needed.
pub const STARVED_BEHIND_MS: f64 = 20.0;
/// A disk that held the busiest worker this share of its time (mean
/// `disk_busy_pct`) can be what a host's loss or shortfall waits on.
pub const DISK_SUSPECT_PCT: f64 = 20.0;
/// Losses a host's own counts explain when they cover at least this share.
const EXPLAINED_SHARE: f64 = 0.5;

/// One host's losses, and what its kernel and its agent counted of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostLoss {
    pub id: u32,
    /// Requests sent to this host that were not counted arriving in their
    /// interval (packets, over the span).
    pub lost_in: f64,
    /// Requests the kernel dropped at this host's responder sockets.
    pub dropped_in: f64,
    /// Requests this host's agent read only after their interval was written.
    pub late_in: f64,
    /// Of the requests that reached it, replies that did not come back in
    /// their interval, and of those the ones that came back late.
    pub lost_answers: f64,
    pub late_answers: f64,
    /// Replies to this host's own requests lost on their way back to it, the
    /// ones the kernel dropped at its flow sockets, and the ones its agent
    /// read after their interval was written.
    pub lost_back: f64,
    pub dropped_back: f64,
    pub late_back: f64,
    pub nic_drops: f64,
    /// The longest the agent was behind its send schedule (ms), and the time
    /// its cgroup was throttled (ms).
    pub behind_ms: f64,
    pub throttled_ms: f64,
    /// Disk runs: the mean share of time its busiest worker spent in disk
    /// I/O (`None`: not measured).
    pub disk_busy: Option<f64>,
}

impl HostLoss {
    /// Its disk held its busiest worker long enough to stop it reading: in
    /// a disk run a responder answers only once its disk has done its part,
    /// and meanwhile requests queue in its sockets.
    pub fn disk_waits(&self) -> Option<f64> {
        self.disk_busy.filter(|&b| b >= DISK_SUSPECT_PCT)
    }

    /// The requests lost into it are its own: its sockets dropped them, or its
    /// agent read them too late. With UDP GRO the kernel counts a dropped
    /// batch of up to 64 datagrams as one drop, so for an agent short of CPU
    /// any overflow its sockets counted is taken as the cause (and said so).
    pub fn explains_in(&self) -> bool {
        let counted = self.dropped_in + self.late_in;
        self.lost_in > 0.0
            && (counted >= EXPLAINED_SHARE * self.lost_in || (self.starved() && counted > 0.0))
    }

    /// Its own counts cover most of what was lost into it.
    fn counts_cover_in(&self) -> bool {
        self.dropped_in + self.late_in >= EXPLAINED_SHARE * self.lost_in
    }

    /// The replies it owed came back late, and its agent was starved: it
    /// answered late.
    pub fn explains_answers(&self) -> bool {
        self.starved()
            && self.lost_answers > 0.0
            && self.late_answers >= EXPLAINED_SHARE * self.lost_answers
    }

    /// The replies lost back to it are its own: its flow sockets dropped them.
    /// (Replies that came back late are the responder's, or the path's: a
    /// worker reads everything queued before it reports an interval.)
    pub fn explains_back(&self) -> bool {
        self.lost_back > 0.0 && self.dropped_back >= EXPLAINED_SHARE * self.lost_back
    }

    /// Its NIC dropped what was lost into it (and its sockets did not).
    pub fn nic_explains_in(&self) -> bool {
        self.lost_in > 0.0
            && !self.explains_in()
            && self.nic_drops >= EXPLAINED_SHARE * self.lost_in
    }

    /// The agent did not get the CPU it needed.
    pub fn starved(&self) -> bool {
        self.behind_ms >= STARVED_BEHIND_MS || self.throttled_ms > 0.0
    }

    /// Requests lost into it that its own counts account for.
    pub fn explained_in(&self) -> f64 {
        if self.explains_in() || self.nic_explains_in() {
            self.lost_in
        } else {
            0.0
        }
    }

    /// Replies lost on the return leg that its own counts account for: to
    /// its own requests, and the ones it answered late.
    pub fn explained_back(&self) -> f64 {
        let own = if self.explains_back() {
            self.lost_back
        } else {
            0.0
        };
        let answers = if self.explains_answers() {
            self.lost_answers
        } else {
            0.0
        };
        own + answers
    }
}

/// Every host's losses and counts, by host.
pub fn host_losses(set: &ReportSet, flows: &[FlowFigures]) -> Vec<HostLoss> {
    let mut by_host: std::collections::BTreeMap<u32, HostLoss> = set
        .hosts
        .iter()
        .map(|(&id, h)| {
            (
                id,
                HostLoss {
                    id,
                    dropped_in: h.req_drops.unwrap_or(0.0),
                    dropped_back: h.rep_drops.unwrap_or(0.0),
                    nic_drops: h.nic_rx_drops.unwrap_or(0.0),
                    behind_ms: h.behind_ms.unwrap_or(0.0),
                    throttled_ms: h.throttled_ms.unwrap_or(0.0),
                    disk_busy: h.disk.busy.get(),
                    ..HostLoss::default()
                },
            )
        })
        .collect();
    fn entry(by_host: &mut std::collections::BTreeMap<u32, HostLoss>, id: u32) -> &mut HostLoss {
        by_host.entry(id).or_insert_with(|| HostLoss {
            id,
            ..HostLoss::default()
        })
    }
    for f in flows {
        let p = &f.packets;
        // (In the original's reports a layer's drain rows can bring back
        // more replies than the window's requests: capped.)
        let back = p.back.min(p.sent);
        let arrived = p.arrived.unwrap_or(p.sent).min(p.sent).max(back);
        let late_replies = set.tx.get(&(f.host, f.peer)).map_or(0.0, |t| t.late);
        let late_requests = set.rx.get(&(f.peer, f.host)).map_or(0.0, |r| r.late);
        let receiver = entry(&mut by_host, f.peer);
        receiver.lost_in += p.sent - arrived;
        receiver.late_in += late_requests;
        receiver.lost_answers += arrived - back;
        receiver.late_answers += late_replies;
        let sender = entry(&mut by_host, f.host);
        sender.lost_back += arrived - back;
        sender.late_back += late_replies;
    }
    by_host.into_values().collect()
}

/// What a starved agent's own figures say, for a sentence: "was throttled
/// 420 ms by its cgroup's CPU quota and fell up to 310 ms behind its send
/// schedule".
pub fn starvation(h: &HostLoss) -> Option<String> {
    let throttled = (h.throttled_ms > 0.0).then(|| {
        format!(
            "was throttled {:.0} ms by its cgroup's CPU quota",
            h.throttled_ms
        )
    });
    let behind = (h.behind_ms >= STARVED_BEHIND_MS)
        .then(|| format!("fell up to {:.0} ms behind its send schedule", h.behind_ms));
    match (throttled, behind) {
        (Some(t), Some(b)) => Some(format!("{t} and {b}")),
        (t, b) => t.or(b),
    }
}

/// The advice lines for losses the hosts counted themselves.
pub fn lines(set: &ReportSet, losses: &[HostLoss]) -> Vec<String> {
    let mut out = Vec::new();
    for h in losses {
        let name = set.name(h.id);
        let mut counted = Vec::new();
        if h.explains_in() {
            let mut how = Vec::new();
            if h.dropped_in > 0.0 {
                how.push(format!(
                    "dropped in {name}'s own socket buffers (the kernel counted {:.0} drops; with UDP GRO one drop can be a batch of up to 64 datagrams)",
                    h.dropped_in
                ));
            }
            if h.late_in > 0.0 {
                how.push(format!(
                    "read by {name}'s agent only after their interval was written ({:.0})",
                    h.late_in
                ));
            }
            counted.push(format!(
                "the {:.0} requests lost on their way into {name} were {}",
                h.lost_in,
                how.join(", or ")
            ));
        }
        if h.explains_answers() {
            counted.push(format!(
                "{:.0} of its replies came back after their interval was written: {name} answered late",
                h.late_answers.min(h.lost_answers)
            ));
        }
        if h.explains_back() {
            counted.push(format!(
                "{:.0} of the {:.0} replies lost on their way back to {name} were dropped in its flow sockets' buffers (the kernel counted {:.0})",
                h.lost_back.min(h.dropped_back),
                h.lost_back,
                h.dropped_back
            ));
        }
        if !counted.is_empty() {
            let rest = if h.explains_in() && !h.counts_cover_in() {
                format!(
                    "; if the loss stays once it has the CPU, look at {name}'s NIC, cable and switch port"
                )
            } else {
                String::new()
            };
            // A responder waiting on its disk stops reading too: where its
            // disk was busy, the disk fits as well as the CPU, or alone.
            let disk = h.disk_waits().filter(|_| h.explains_in());
            let cause = match (starvation(h), disk) {
                (Some(why), Some(busy)) => format!(
                    "; {name}'s agent {why}, and its busiest worker spent {busy:.0}% of its time in disk I/O: {name}'s CPU or its disk, not the network -- a run without --disk tells which{rest}"
                ),
                (Some(why), None) => format!(
                    "; {name}'s agent {why}: {name}'s CPU, not the network -- give its agent the CPU it needs (a quota, or other load on that box), then rerun{rest}"
                ),
                (None, Some(busy)) => format!(
                    ": {name}'s busiest worker spent {busy:.0}% of its time in disk I/O, and requests queue in its sockets while its answers wait on the disk: {name}'s disk, not the network -- a faster disk, more `mx start --workers` (one I/O in flight each), or a lower --pps"
                ),
                (None, None) => format!(
                    ": {name}'s agent did not read its sockets fast enough, not the network -- raise `mx start --rcvbuf 16777216` or `--workers`, or find what else loads {name}"
                ),
            };
            out.push(format!("{}{cause}", counted.join("; ")));
        } else if h.nic_explains_in() {
            out.push(format!(
                "{:.0} requests were lost on their way into {name}, and {name}'s interfaces counted {:.0} rx drops (/proc/net/dev): its NIC or driver dropped them before the kernel saw them -- look at {name}'s NIC ring size and interrupt load",
                h.lost_in, h.nic_drops
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_drops_explain_a_hosts_loss_and_starvation_says_why() {
        let h = HostLoss {
            id: 0,
            lost_in: 1000.0,
            dropped_in: 990.0,
            lost_back: 10.0,
            dropped_back: 0.0,
            behind_ms: 95.0,
            throttled_ms: 4200.0,
            ..HostLoss::default()
        };
        assert!(h.explains_in() && !h.explains_back() && h.starved());
        assert_eq!(h.explained_in(), 1000.0);
        assert_eq!(
            starvation(&h).unwrap(),
            "was throttled 4200 ms by its cgroup's CPU quota and fell up to 95 ms behind its send schedule"
        );
        // A wire drop: nothing counted at the host.
        let wire = HostLoss {
            lost_in: 1000.0,
            behind_ms: 1.0,
            ..HostLoss::default()
        };
        assert!(!wire.explains_in() && !wire.nic_explains_in() && !wire.starved());
        assert_eq!(wire.explained_in(), 0.0);
        let nic = HostLoss {
            lost_in: 1000.0,
            nic_drops: 800.0,
            ..HostLoss::default()
        };
        assert!(nic.nic_explains_in());
    }
}
