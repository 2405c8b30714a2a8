//! An interval's life after its tick: closed (its time, CPU and socket
//! drops taken, the next interval opened), held while its late packets come
//! in, then handed to the reporter as one batch; and the worker's last,
//! partial batch.

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::super::clock::{instant_of, wall_ns_of};
use super::super::counters::{Batch, SocketDrops, Span};
use super::super::disk::engine::Disk;
use super::super::disk::stats::DiskStats;
use super::super::slots;
use super::super::udp;
use super::Worker;
use super::counting::take_rx;

/// How long after its tick an interval is reported (the report's hold).
fn hold(interval: f64) -> Duration {
    Duration::from_secs_f64(mx_report::hold_seconds(interval))
}

/// An interval that has closed and waits for its late packets.
pub(super) struct Pending {
    pub(super) number: u64,
    tick: f64,
    /// Monotonic ns at which it began (replies to requests sent before are older).
    pub(super) began_ns: u64,
    pub(super) report_at: Instant,
    elapsed: f64,
    sending: f64,
    span: Span,
    cpu: f64,
    stray: u64,
    drops: SocketDrops,
    behind_ns: u64,
    layer: Option<u32>,
    disk: Option<DiskStats>,
    /// The rate scale the interval ran at.
    scale: Option<f64>,
    gso_pkts: u64,
    gro_pkts: u64,
}

impl Worker {
    /// The increase of every socket's drop counter since the last call.
    pub(super) fn read_drops(&mut self) -> SocketDrops {
        let mut drops = SocketDrops::default();
        if let Some(responder) = &self.responder
            && let Some(total) = udp::socket_drops(responder.as_raw_fd())
        {
            drops.requests = total.saturating_sub(self.responder_drops_seen);
            self.responder_drops_seen = total;
        }
        for flow in self.flows.iter_mut().flatten() {
            if let Some(total) = udp::socket_drops(flow.socket.as_raw_fd()) {
                drops.replies += total.saturating_sub(flow.drops_seen);
                flow.drops_seen = total;
            }
        }
        drops
    }

    /// The interval in progress reached its tick: it waits [`hold`] for its
    /// late packets, and the next one begins (in the next layer, on a layered
    /// matrix: the old layer's flows stop sending and close once their last
    /// interval is reported).
    pub(super) fn close_interval(&mut self, now: Instant) {
        if self.pending.is_some() {
            // Starved for a whole interval: report what came.
            self.poll_everything();
            let pending = self.pending.take().expect("checked");
            self.report(pending);
        }
        let (elapsed, sending) = self.interval_seconds(now);
        let span = self.span_until(self.tick_at);
        let cpu_ns = udp::thread_cpu_ns();
        let cpu = cpu_ns.saturating_sub(self.last_cpu_ns) as f64 / 1e9;
        self.last_report = now;
        self.last_cpu_ns = cpu_ns;
        let drops = self.read_drops();
        let tick = self.tick;
        self.pending = Some(Pending {
            number: self.number,
            tick,
            began_ns: self.began_ns,
            report_at: now + hold(self.plan.interval),
            elapsed,
            sending,
            span,
            cpu,
            stray: std::mem::take(&mut self.stray),
            drops,
            behind_ns: std::mem::take(&mut self.behind_ns),
            layer: self.layer.map(|l| l as u32),
            disk: self.disk.as_ref().map(Disk::take_stats),
            scale: self.scale,
            gso_pkts: self.send.take_coalesced(),
            gro_pkts: self.requests_in.take_coalesced() + self.replies_in.take_coalesced(),
        });
        self.number += 1;
        self.forget_silent_senders();
        self.began_ns = udp::monotonic_ns();
        self.opened_at = self.tick_at;
        self.tick = tick + self.plan.interval;
        // The next tick one interval on, on the monotonic clock: a wall clock
        // stepped by hand or by NTP neither stalls the reports (a step back)
        // nor bursts empty ones (a step forward). The labels keep the timeline
        // the run started on, which is the fleet's: the layers stay in step.
        self.tick_at += Duration::from_secs_f64(self.plan.interval);
        self.apply_scale();
        let layer = self.plan.schedule().layer_at(tick);
        if layer != self.layer {
            for flow in self.flows.iter_mut().flatten() {
                flow.draining = true;
            }
            self.layer = layer;
            if let Err(e) = self.open_layer(layer) {
                warn!("mx agent: worker {}: layer {layer:?}: {e}", self.id);
            }
        }
    }

    /// Seconds since the previous batch, and how many of them flows were
    /// sending: the planned end cuts the interval that holds it short.
    fn interval_seconds(&self, now: Instant) -> (f64, f64) {
        let elapsed = now.duration_since(self.last_report).as_secs_f64();
        let after_end = self.clock.end_ns().map_or(0.0, |end| {
            udp::monotonic_ns().saturating_sub(end) as f64 / 1e9
        });
        (elapsed.max(1e-3), (elapsed - after_end).max(1e-3))
    }

    /// The interval's span from its start by the clock to `until` or the
    /// run's end, whichever came first (see [`Batch::span`]).
    fn span_until(&self, until: Instant) -> Span {
        let until = match self.clock.end_ns() {
            Some(end) => until.min(instant_of(end)),
            None => until,
        };
        Span {
            from_ns: wall_ns_of(self.opened_at),
            to_ns: wall_ns_of(until.max(self.opened_at)),
        }
    }

    /// Hands the reporter the batch of a closed interval: the requests each
    /// flow sent in it and the replies to them, the requests its peers sent in
    /// it that arrived. Flows of a finished layer close now.
    pub(super) fn report(&mut self, p: Pending) {
        self.say_uncounted_peers();
        let tx = slots::tx_slot(p.number);
        let flows = self
            .flows
            .iter_mut()
            .flatten()
            .filter(|f| f.first_interval <= p.number)
            .map(|f| f.take_report(tx, p.scale, &mut self.rtts))
            .collect();
        self.close_flows(|f| f.draining);
        let rx = take_rx(&mut self.rx[slots::rx_slot(p.number)]);
        let _ = self.out.send(Batch {
            worker: self.id,
            tick: p.tick,
            elapsed: p.elapsed,
            sending: p.sending,
            span: p.span,
            cpu: p.cpu,
            flows,
            rx,
            stray: p.stray,
            layer: p.layer,
            drops: p.drops,
            behind_ns: p.behind_ns,
            disk: p.disk,
            rate_scale: p.scale,
            gso_pkts: p.gso_pkts,
            gro_pkts: p.gro_pkts,
            last: false,
        });
    }

    /// Names, once each, the peers whose replies carry no count: their
    /// flows' legs are left to the two hosts' reports.
    fn say_uncounted_peers(&mut self) {
        for flow in self.flows.iter_mut().flatten() {
            if flow.peer_uncounted() {
                flow.said_uncounted = true;
                let peer = &self.plan.matrix.hosts()[flow.spec.peer as usize].name;
                warn!(
                    "mx agent: worker {}: {peer}'s replies carry no count of our requests (the original tool's agent answers so): the legs of this flow are split from both hosts' reports by mx summarize, not from this host's counts",
                    self.id
                );
            }
        }
    }

    /// The worker's last batch: the interval in progress, partial (nothing when
    /// the run never started, or the interval began after the planned end).
    pub(super) fn finish(&mut self, now: Instant) {
        // By the clock: a worker that closed the interval before this one
        // late, past the end, still reports the requests its peers sent in
        // this one before the end.
        let began_after_end = self
            .clock
            .end_ns()
            .is_some_and(|end| self.opened_at >= instant_of(end));
        let (flows, rx) = if self.start.is_none() || began_after_end {
            (Vec::new(), Vec::new())
        } else {
            let tx = slots::tx_slot(self.number);
            let flows = self
                .flows
                .iter_mut()
                .flatten()
                .map(|f| f.take_report(tx, self.scale, &mut self.rtts))
                .collect();
            (flows, take_rx(&mut self.rx[slots::rx_slot(self.number)]))
        };
        let (elapsed, sending) = self.interval_seconds(now);
        let span = self.span_until(now.min(self.tick_at));
        let cpu = udp::thread_cpu_ns().saturating_sub(self.last_cpu_ns) as f64 / 1e9;
        let drops = self.read_drops();
        let _ = self.out.send(Batch {
            worker: self.id,
            tick: self.tick,
            elapsed,
            sending,
            span,
            cpu,
            flows,
            rx,
            stray: std::mem::take(&mut self.stray),
            layer: self.layer.map(|l| l as u32),
            drops,
            behind_ns: self.behind_ns,
            disk: self.disk.as_ref().map(Disk::take_stats),
            rate_scale: self.scale,
            gso_pkts: self.send.take_coalesced(),
            gro_pkts: self.requests_in.take_coalesced() + self.replies_in.take_coalesced(),
            last: true,
        });
    }
}
