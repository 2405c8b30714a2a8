//! CPU numbers for the host row: the whole box and its busiest
//! core from /proc/stat, sampled by the reporter each interval, and the
//! share of the box's time its hypervisor gave to other guests (steal): a
//! VM whose vCPUs are taken away runs its agent late, and that shows in the
//! round trips as a tail the network did not make. (The busiest worker
//! thread's share of a core comes from each worker's own thread clock.)

/// Busy, stolen and total jiffies of one /proc/stat line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Jiffies {
    busy: u64,
    steal: u64,
    total: u64,
}

/// The CPU figures of one interval, in percent of the time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CpuShares {
    /// The whole box busy.
    pub box_pct: f64,
    /// Its busiest core.
    pub core_max_pct: f64,
    /// Stolen by the hypervisor (0 on bare metal, `None` where the kernel
    /// does not count it).
    pub steal_pct: Option<f64>,
}

/// Parses a `cpu...` line: total = the first ten counters (user..guest_nice),
/// idle = idle + iowait, steal the eighth.
fn parse_line(line: &str) -> Option<Jiffies> {
    let mut fields = line.split_whitespace();
    fields.next()?;
    let values: Vec<u64> = fields
        .take(10)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if values.len() < 5 {
        return None;
    }
    let total: u64 = values.iter().sum();
    let idle = values[3] + values[4];
    Some(Jiffies {
        busy: total - idle,
        steal: values.get(7).copied().unwrap_or(0),
        total,
    })
}

/// The previous sample, to take deltas against.
#[derive(Debug, Default)]
pub(crate) struct CpuSampler {
    last: Option<(Jiffies, Vec<Jiffies>)>,
}

fn percent(now: Jiffies, then: Jiffies) -> Option<f64> {
    let total = now.total.checked_sub(then.total)?;
    let busy = now.busy.checked_sub(then.busy)?;
    (total > 0).then(|| busy as f64 / total as f64 * 100.0)
}

impl CpuSampler {
    /// The shares since the previous call; `None` on the first call or when
    /// /proc/stat cannot be read.
    pub fn sample(&mut self) -> Option<CpuShares> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        self.sample_from(&text)
    }

    fn sample_from(&mut self, text: &str) -> Option<CpuShares> {
        let has_steal = text
            .lines()
            .find(|l| l.starts_with("cpu "))
            .is_some_and(|l| l.split_whitespace().count() > 8);
        let mut overall = None;
        let mut cores = Vec::new();
        for line in text.lines() {
            if line.starts_with("cpu ") {
                overall = parse_line(line);
            } else if line.starts_with("cpu") {
                cores.extend(parse_line(line));
            }
        }
        let overall = overall?;
        let previous = self.last.replace((overall, cores.clone()));
        let (then, then_cores) = previous?;
        let box_pct = percent(overall, then)?;
        let core_max = cores
            .iter()
            .zip(&then_cores)
            .filter_map(|(&now, &then)| percent(now, then))
            .fold(None, |m: Option<f64>, p| Some(m.map_or(p, |m| m.max(p))))
            .unwrap_or(box_pct);
        let steal_pct = has_steal
            .then(|| {
                let total = overall.total.checked_sub(then.total)?;
                let steal = overall.steal.checked_sub(then.steal)?;
                (total > 0).then(|| steal as f64 / total as f64 * 100.0)
            })
            .flatten();
        Some(CpuShares {
            box_pct,
            core_max_pct: core_max,
            steal_pct,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_and_busiest_core_from_deltas() {
        let mut s = CpuSampler::default();
        let t0 = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 50 0 50 400 0 0 0 0 0 0\ncpu1 50 0 50 400 0 0 0 0 0 0\n";
        // cpu0 busy 90 of 100 more jiffies; cpu1 busy 10 of 100: box 50%.
        let t1 = "cpu  200 0 100 900 0 0 0 0 0 0\ncpu0 140 0 50 410 0 0 0 0 0 0\ncpu1 60 0 50 490 0 0 0 0 0 0\n";
        assert_eq!(s.sample_from(t0), None);
        let shares = s.sample_from(t1).unwrap();
        assert_eq!((shares.box_pct, shares.core_max_pct), (50.0, 90.0));
        assert_eq!(shares.steal_pct, Some(0.0));
    }

    #[test]
    fn steal_is_the_hypervisors_share_of_the_box() {
        let mut s = CpuSampler::default();
        let t0 = "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0 0 0\n";
        // 200 more jiffies, 30 of them stolen.
        let t1 = "cpu  150 0 100 920 0 0 0 30 0 0\ncpu0 150 0 100 920 0 0 0 30 0 0\n";
        s.sample_from(t0);
        assert_eq!(s.sample_from(t1).unwrap().steal_pct, Some(15.0));
        // An old kernel's line without the steal counter: not measured.
        let mut old = CpuSampler::default();
        old.sample_from("cpu  100 0 100 800 0\n");
        assert_eq!(
            old.sample_from("cpu  200 0 100 900 0\n").unwrap().steal_pct,
            None
        );
    }
}
