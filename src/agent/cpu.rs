//! CPU numbers for the host row (facts.md 3.10): the whole box and its busiest
//! core from /proc/stat, sampled by the reporter each interval. (The busiest
//! worker thread's share of a core comes from each worker's own thread clock.)

/// Busy and total jiffies of one /proc/stat line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Jiffies {
    busy: u64,
    total: u64,
}

/// Parses a `cpu...` line: total = the first ten counters (user..guest_nice),
/// idle = idle + iowait.
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
        total,
    })
}

/// The previous sample, to take deltas against.
#[derive(Debug, Default)]
pub struct CpuSampler {
    last: Option<(Jiffies, Vec<Jiffies>)>,
}

fn percent(now: Jiffies, then: Jiffies) -> Option<f64> {
    let total = now.total.checked_sub(then.total)?;
    let busy = now.busy.checked_sub(then.busy)?;
    (total > 0).then(|| busy as f64 / total as f64 * 100.0)
}

impl CpuSampler {
    /// (whole box %, busiest core %) since the previous call; `None` on the
    /// first call or when /proc/stat cannot be read.
    pub fn sample(&mut self) -> Option<(f64, f64)> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        self.sample_from(&text)
    }

    fn sample_from(&mut self, text: &str) -> Option<(f64, f64)> {
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
        Some((box_pct, core_max))
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
        assert_eq!(s.sample_from(t1), Some((50.0, 90.0)));
    }
}
