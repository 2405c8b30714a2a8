//! The worker's event loop: each pass reports an interval whose hold is
//! over, closes the interval in progress at its tick, sends what the pacers
//! allow, then waits on epoll (or, with `--busy-poll`, polls every socket)
//! and reads whatever is ready.

use std::time::{Duration, Instant};

use nix::sys::epoll::{EpollEvent, EpollTimeout};

use super::super::clock::{ARMED_TIMEOUT, Awaited, Start};
use super::super::counters::RxCounts;
use super::super::pacing::Pacer;
use super::super::slots;
use super::super::udp;
use super::flows::scaled;
use super::{DISK, MAX_WAIT, RESPONDER, Worker};

impl Worker {
    /// Runs until the stop flag or the exit instant; the last batch is partial.
    pub fn run(mut self) {
        let armed_since = Instant::now();
        let mut events = [EpollEvent::empty(); 64];
        loop {
            let now = Instant::now();
            if self.start.is_none() {
                match self.clock.awaited() {
                    Awaited::Begun(start) => self.begin(start),
                    Awaited::Start if now.duration_since(armed_since) <= ARMED_TIMEOUT => {}
                    Awaited::Ended | Awaited::Start => {
                        self.finish(now);
                        return;
                    }
                }
            }
            let now_ns = udp::monotonic_ns();
            let leaving =
                self.clock.stopping() || self.clock.exit_ns().is_some_and(|x| now_ns >= x);
            if let Some(pending) = &self.pending
                && now >= pending.report_at
            {
                // What already arrived belongs in it, even if this worker was
                // held off the CPU past the hold: read everything first.
                self.poll_everything();
                let pending = self.pending.take().expect("checked");
                self.report(pending);
            }
            if leaving && self.pending.is_none() {
                self.finish(now);
                return;
            }
            if self.start.is_some() && !leaving && now >= self.tick_at {
                self.close_interval(now);
            }
            let sending = self.start.is_some_and(|s| now >= s.at)
                && !leaving
                && self.clock.end_ns().is_none_or(|end| now_ns < end);
            let mut next = now + MAX_WAIT;
            if sending {
                next = next.min(self.send_due(now));
            } else if let Some(start) = self.start
                && now < start.at
            {
                // The rate of the first interval may be ordered until it begins.
                self.apply_scale();
                next = next.min(start.at);
            }
            if self.start.is_some() {
                next = next.min(self.tick_at);
            }
            if let Some(pending) = &self.pending {
                next = next.min(pending.report_at);
            }
            if self.plan.busy_poll {
                self.poll_everything();
                continue;
            }
            let wait = next.saturating_duration_since(Instant::now()).min(MAX_WAIT);
            // epoll waits in whole milliseconds. Round up: rounding down would
            // spin a core until the send is due. A send that comes up to 1 ms
            // late finds the tokens waiting and goes out in the same batch.
            let timeout = EpollTimeout::from(wait.as_micros().div_ceil(1000) as u16);
            let ready = match self.epoll.wait(&mut events, timeout) {
                Ok(n) => n,
                Err(nix::errno::Errno::EINTR) => 0,
                Err(e) => {
                    warn!("mx agent: worker {} died: epoll: {e}", self.id);
                    return;
                }
            };
            for event in &events[..ready] {
                match event.data() {
                    RESPONDER => self.serve_requests(),
                    DISK => self.collect_disk(),
                    slot => self.read_replies(slot as usize),
                }
            }
        }
    }

    /// The run has its start: the first interval ends at the first tick, the
    /// pacers start empty at the start instant.
    fn begin(&mut self, start: Start) {
        let interval = self.plan.interval;
        self.start = Some(start);
        self.tick = start.first_tick;
        self.number = slots::interval_number(start.first_tick, interval);
        self.tick_at = start.at + Duration::from_secs_f64((start.first_tick - start.wall).max(0.0));
        self.began_ns = start.at_ns;
        self.opened_at = start.at;
        self.last_report = start.at;
        self.last_cpu_ns = udp::thread_cpu_ns();
        self.stray = 0;
        self.behind_ns = 0;
        for slot in &mut self.rx {
            slot.fill(RxCounts::default());
        }
        // The layer in force when the flows begin.
        let layer = self.plan.schedule().layer_at(start.wall);
        if layer != self.layer {
            self.close_flows(|_| true);
            self.layer = layer;
            if let Err(e) = self.open_layer(layer) {
                warn!("mx agent: worker {}: {e}", self.id);
            }
        }
        self.scale = self.clock.rate_for(self.number);
        for flow in self.flows.iter_mut().flatten() {
            flow.first_interval = self.number;
            flow.pacer = flow
                .spec
                .rate
                .map(|rate| Pacer::new(scaled(rate, self.scale), start.at));
            flow.slots = Default::default();
        }
        self.rtts.clear();
        self.read_drops();
    }

    /// Takes up the rate scale ordered for the interval in progress, if it
    /// changed: every live flow's pacer moves to its matrix rate times it.
    /// Called as an interval opens (and while the first waits to begin):
    /// never on the per-packet path.
    pub(super) fn apply_scale(&mut self) {
        let scale = self.clock.rate_for(self.number);
        if scale == self.scale {
            return;
        }
        self.scale = scale;
        for flow in self.flows.iter_mut().flatten() {
            if let (Some(pacer), Some(rate)) = (flow.pacer.as_mut(), flow.spec.rate) {
                pacer.set_rate(scaled(rate, scale));
            }
        }
    }

    /// `--busy-poll`: read every socket every pass, never sleep. Lowest latency
    /// and no wakeups, at the price of a core spinning even when idle.
    pub(super) fn poll_everything(&mut self) {
        self.collect_disk();
        self.serve_requests();
        for slot in 0..self.flows.len() {
            self.read_replies(slot);
        }
    }
}
