//! What a responder answers: each source host at most the rate the matrix
//! has it send here, plus headroom, whatever arrives. A responder that
//! answered everything would let anyone who can spoof a matrix host's
//! address aim the fleet's replies at it, and a peer still running an old
//! matrix at ten times the rate would do the same by mistake. What goes
//! unanswered is counted (`over_plan`), never taken for the network's loss.
//!
//! One budget per source address, shared by the workers (the streams of one
//! source land on several responder sockets): a GCRA, the token bucket
//! written as one atomic "theoretical arrival time", so a check is one
//! compare-and-swap and no lock.
//!
//! What a source is planned to send can change under a running agent: `mx
//! reload` of an edit that changes only another host's row re-reads this
//! host's budgets in place ([`Sources::refresh`]) rather than restarting it,
//! so the planned rate is an atomic too.
//!
//! The headroom ([`HEADROOM`], [`DEPTH_NS`]) must never cut a clean run: a
//! sender's pacer sends at most its rate, in bursts of a few milliseconds,
//! and a responder held off its core reads, late and at once, what arrived
//! while it waited. A quarter over the plan and a second's worth of depth
//! cover both by far, and still cut a tenfold flood to an eighth.

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use rustc_hash::FxHashMap;

use mx_matrix::Matrix;
use mx_matrix::schedule::Schedule;

/// Answered beyond the plan, sustained: the plan's own headroom.
pub const HEADROOM: f64 = mx_matrix::load::ANSWER_HEADROOM;
/// And bursts up to one second of that rate (at least 64 packets: a GRO run).
pub const DEPTH_NS: u64 = 1_000_000_000;
/// The least a bucket holds, in packets: a whole GRO run of requests.
const MIN_DEPTH: u64 = 64;

/// What each source address is planned to send host `me` (the matrix hosts
/// at it, `None` where one did not resolve): the sum of their cells (a
/// `max` cell: unlimited), at the layer where that is the most. A host with
/// no cell towards `me` is planned nothing.
fn planned_into(
    matrix: &Matrix,
    me: u32,
    addrs: &[Option<IpAddr>],
) -> FxHashMap<IpAddr, Option<f64>> {
    let schedule = Schedule::new(matrix);
    let mut per_layer: FxHashMap<IpAddr, Vec<Option<f64>>> = FxHashMap::default();
    let layers = schedule.layer_count();
    for (src, addr) in addrs.iter().enumerate() {
        let Some(ip) = addr else { continue };
        let sums = per_layer
            .entry(*ip)
            .or_insert_with(|| vec![Some(0.0); layers]);
        for (layer, sum) in sums.iter_mut().enumerate() {
            for cell in schedule.layer_flows(src as u32, layer) {
                if cell.dst == me {
                    *sum = match (*sum, cell.rate.pps()) {
                        (Some(a), Some(b)) => Some(a + b),
                        _ => None,
                    };
                }
            }
        }
    }
    per_layer
        .into_iter()
        .map(|(ip, sums)| {
            (
                ip,
                sums.into_iter().try_fold(0.0f64, |m, s| Some(m.max(s?))),
            )
        })
        .collect()
}

/// One source's budget.
#[derive(Debug)]
pub struct Budget {
    /// Requests per second the matrix has this source send here (at the
    /// largest of its layers), as f64 bits; infinity: a `max` cell, never
    /// limited.
    planned: AtomicU64,
    /// The GCRA's theoretical arrival time, monotonic ns: the budget is
    /// spent up to here. Starts at 0: full.
    spent_until: AtomicU64,
}

impl Budget {
    fn new(planned: Option<f64>) -> Budget {
        let budget = Budget {
            planned: AtomicU64::new(0),
            spent_until: AtomicU64::new(0),
        };
        budget.plan(planned);
        budget
    }

    /// Requests per second this source is planned to send here; `None`: no
    /// limit.
    pub fn planned(&self) -> Option<f64> {
        let pps = f64::from_bits(self.planned.load(Ordering::Relaxed));
        pps.is_finite().then_some(pps)
    }

    fn plan(&self, pps: Option<f64>) {
        let bits = pps.unwrap_or(f64::INFINITY).to_bits();
        self.planned.store(bits, Ordering::Relaxed);
    }

    /// Requests per second this source is answered at most, sustained, at
    /// rate scale `scale` (`mx run --ramp`); `None`: unlimited.
    pub fn limit(&self, scale: Option<f64>) -> Option<f64> {
        self.planned()
            .map(|pps| pps * scale.unwrap_or(1.0) * (1.0 + HEADROOM))
    }

    /// Of `n` requests that arrived by `now_ns` (monotonic), how many are
    /// answered: the first ones, as far as the budget goes.
    #[inline]
    pub fn take(&self, now_ns: u64, n: u64, scale: Option<f64>) -> u64 {
        let Some(limit) = self.limit(scale) else {
            return n;
        };
        if limit <= 0.0 {
            return 0;
        }
        // ns per answered request, rounded down (in the source's favour);
        // past 1e9 per second: unlimited.
        let cost = (1e9 / limit) as u64;
        if cost == 0 {
            return n;
        }
        let depth = DEPTH_NS.max(MIN_DEPTH * cost);
        let mut spent = self.spent_until.load(Ordering::Relaxed);
        loop {
            let from = spent.max(now_ns);
            let room = (now_ns + depth).saturating_sub(from) / cost;
            let k = n.min(room);
            if k == 0 {
                return 0;
            }
            match self.spent_until.compare_exchange_weak(
                spent,
                from + k * cost,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return k,
                Err(now_spent) => spent = now_spent,
            }
        }
    }
}

/// The matrix hosts' addresses that may send here, each with its budget.
#[derive(Debug, Default)]
pub struct Sources {
    budgets: FxHashMap<IpAddr, Budget>,
}

impl Sources {
    /// A budget for every address in `addrs` (the matrix hosts', `None` where
    /// one did not resolve), from what `matrix` has the hosts at that address
    /// send to host `me`: the sum of their cells (a `max` cell: unlimited),
    /// at the layer where that is the most. A host with no cell towards `me`
    /// has a budget of nothing.
    pub fn new(matrix: &Matrix, me: u32, addrs: &[Option<IpAddr>]) -> Sources {
        let budgets = planned_into(matrix, me, addrs)
            .into_iter()
            .map(|(ip, planned)| (ip, Budget::new(planned)))
            .collect();
        Sources { budgets }
    }

    /// Plans every source anew from `matrix` (an edit of other hosts' rows
    /// towards `me`), in place, as the workers answer: the number of sources
    /// whose plan changed. Refused, changing nothing, when `matrix` has a
    /// source this host does not know (only a restart adds one).
    pub fn refresh(
        &self,
        matrix: &Matrix,
        me: u32,
        addrs: &[Option<IpAddr>],
    ) -> std::result::Result<usize, IpAddr> {
        let planned = planned_into(matrix, me, addrs);
        if let Some(&new) = planned.keys().find(|ip| !self.budgets.contains_key(ip)) {
            return Err(new);
        }
        let mut changed = 0;
        for (ip, pps) in planned {
            let budget = &self.budgets[&ip];
            if budget.planned() != pps {
                budget.plan(pps);
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// The budget of a request's source address; `None`: not a matrix host,
    /// never answered.
    #[inline]
    pub fn get(&self, ip: &IpAddr) -> Option<&Budget> {
        self.budgets.get(ip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_source_is_answered_its_plan_and_headroom_and_no_more() {
        let budget = Budget::new(Some(1000.0));
        // Full at the start: a second's depth at 1,250/s.
        assert_eq!(budget.take(SECOND, 5000, None), 1250);
        assert_eq!(budget.take(SECOND, 1, None), 0);
        // Then 1,250 a second, however much arrives.
        let mut answered = 0;
        for ms in 1..=10_000u64 {
            answered += budget.take(SECOND + ms * 1_000_000, 100, None);
        }
        assert!((12_490..=12_510).contains(&answered), "{answered}");
    }

    #[test]
    fn a_clean_source_at_its_rate_loses_nothing_even_read_late_and_at_once() {
        let budget = Budget::new(Some(10_000.0));
        let mut answered = 0;
        let mut sent = 0;
        // 10 kpps for 10 s, read in 2 ms batches, and every second a 400 ms
        // stall of the responder, then the backlog at once.
        let mut t = SECOND;
        while t < 11 * SECOND {
            let stalled = (t / 1_000_000) % 1000 < 400;
            if !stalled {
                answered += budget.take(t, 20, None);
                sent += 20;
            } else if (t / 1_000_000) % 1000 == 398 {
                // The stall's 400 ms arrive at its end.
                answered += budget.take(t + 2_000_000, 4000, None);
                sent += 4000;
            }
            t += 2_000_000;
        }
        assert_eq!(answered, sent);
    }

    #[test]
    fn workers_sharing_a_source_share_its_budget() {
        // A source's streams land on several workers: together they answer
        // the budget once, not once each.
        let budget = std::sync::Arc::new(Budget::new(Some(8000.0)));
        let answered: u64 = std::thread::scope(|scope| {
            let takers: Vec<_> = (0..4)
                .map(|_| {
                    let budget = &budget;
                    scope.spawn(move || {
                        (0..2000u64)
                            .map(|i| budget.take(SECOND + i * 1_000_000, 10, None))
                            .sum::<u64>()
                    })
                })
                .collect();
            takers.into_iter().map(|t| t.join().unwrap()).sum()
        });
        // 2 s at 10,000/s, and a second's depth: 30,000, never more.
        assert!((29_900..=30_000).contains(&answered), "{answered}");
    }

    #[test]
    fn the_ramp_scale_moves_the_budget_and_a_max_cell_has_none() {
        let budget = Budget::new(Some(1000.0));
        assert_eq!(budget.limit(Some(2.0)), Some(2500.0));
        let unlimited = Budget::new(None);
        assert_eq!(unlimited.take(SECOND, 1_000_000, None), 1_000_000);
        let nothing = Budget::new(Some(0.0));
        assert_eq!(nothing.take(SECOND, 10, None), 0);
    }

    #[test]
    fn the_budget_is_the_sum_of_a_sources_cells_to_this_host() {
        let text = "# tx_size=64 rx_size=64 port=5300\n\
                    src\\dst,a=10.0.0.1,b=10.0.0.2,c=10.0.0.3\n\
                    a=10.0.0.1,,300,50\n\
                    b=10.0.0.2,max,,\n\
                    c=10.0.0.3,,7,\n";
        let matrix = Matrix::parse(text.as_bytes(), "m.csv").unwrap();
        let addrs: Vec<Option<IpAddr>> =
            matrix.hosts().iter().map(|h| h.addr.parse().ok()).collect();
        let to_b = Sources::new(&matrix, 1, &addrs);
        let planned = |ip: &str| to_b.get(&ip.parse().unwrap()).unwrap().planned();
        assert_eq!(planned("10.0.0.1"), Some(300.0));
        assert_eq!(planned("10.0.0.3"), Some(7.0));
        assert_eq!(planned("10.0.0.2"), Some(0.0), "b sends itself nothing");
        let to_a = Sources::new(&matrix, 0, &addrs);
        assert_eq!(
            to_a.get(&"10.0.0.2".parse().unwrap()).unwrap().planned(),
            None
        );
        assert!(to_b.get(&"10.0.0.9".parse().unwrap()).is_none());

        // An edit of a's row: b's budgets re-planned in place.
        let edited = Matrix::parse(
            text.replace("a=10.0.0.1,,300,50", "a=10.0.0.1,,600,50")
                .as_bytes(),
            "m.csv",
        )
        .unwrap();
        assert_eq!(to_b.refresh(&edited, 1, &addrs), Ok(1));
        assert_eq!(planned("10.0.0.1"), Some(600.0));
        assert_eq!(planned("10.0.0.3"), Some(7.0));
        // A source this host never knew takes a restart.
        let mut more = addrs.clone();
        more[2] = Some("10.0.0.9".parse().unwrap());
        assert_eq!(
            to_b.refresh(&edited, 1, &more),
            Err("10.0.0.9".parse().unwrap())
        );
    }
}
