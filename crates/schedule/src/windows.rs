//! A cyclic plan's windows, and how a request that visits partitions in turn is served by them.
//!
//! A request from a monitor visits, for example, the routing partition (into the module), the recorder, and the
//! routing partition again (the answer out). Each visit can only make progress inside its partition's windows.
//! [`PlanWindows::serve`] walks the plan: a visit that needs `need` ns of its partition's CPU starts at the
//! first instant its partition runs and, when a window ends before the work is done, continues in the next
//! window (a request's own processing time can overrun a window). A window entered from another partition (or
//! from idle time) loses its first `switch` ns: the executor's thaw and its lateness.
use partita_system::{Plan, System};
use serde::Serialize;

/// One window of a plan, ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub partition: String,
    pub start: u64,
    pub duration: u64,
    /// Whether the CPU comes to this window from another partition or from idle time (then the switch cost
    /// applies), rather than from an adjacent window of the same partition.
    pub switched_in: bool,
}

/// A cyclic plan on one CPU, or the windows of a partition that has a CPU of its own.
#[derive(Debug, Clone)]
pub struct PlanWindows {
    pub cpu: usize,
    pub major_frame_ns: u64,
    /// Sorted by start.
    pub slots: Vec<Slot>,
}

impl PlanWindows {
    /// A plan of `(partition, start, duration)` windows, ns.
    pub fn new(cpu: usize, major_frame_ns: u64, windows: &[(String, u64, u64)]) -> PlanWindows {
        let mut w: Vec<(String, u64, u64)> = windows.iter().filter(|w| w.2 > 0).cloned().collect();
        w.sort_by_key(|w| w.1);
        let n = w.len();
        let slots = (0..n)
            .map(|i| {
                // The window before this one, cyclically: does it end where this one starts, for the same partition?
                let (pp, ps, pd) = &w[(i + n - 1) % n];
                let prev_end = (ps + pd) % major_frame_ns.max(1);
                let joined = n > 1 && *pp == w[i].0 && prev_end == w[i].1 % major_frame_ns.max(1);
                let whole = n == 1 && w[i].2 >= major_frame_ns;
                Slot { partition: w[i].0.clone(), start: w[i].1, duration: w[i].2, switched_in: !(joined || whole) }
            })
            .collect();
        PlanWindows { cpu, major_frame_ns, slots }
    }

    /// The plan as its partitions get it: a window that another partition's window follows ends
    /// `freeze_ahead` early (its partition is frozen then).
    pub fn of_plan(p: &Plan) -> PlanWindows {
        let w: Vec<(String, u64, u64)> =
            p.windows.iter().enumerate().map(|(i, w)| (w.partition.clone(), w.start.as_nanos(), p.usable(i).as_nanos())).collect();
        PlanWindows::new(p.cpu, p.frame().as_nanos(), &w)
    }

    /// The plans of every module of `system`.
    pub fn of_system(system: &System) -> Vec<PlanWindows> {
        system.modules.iter().flat_map(|m| m.plans.iter()).map(PlanWindows::of_plan).collect()
    }

    /// Windows entered from another partition or from idle time, per frame.
    pub fn switches(&self) -> usize {
        self.slots.iter().filter(|s| s.switched_in).count()
    }

    /// [`PlanWindows::switches`] per millisecond.
    pub fn switches_per_ms(&self) -> f64 {
        self.switches() as f64 * 1e6 / self.major_frame_ns.max(1) as f64
    }

    pub fn has(&self, partition: &str) -> bool {
        self.slots.iter().any(|s| s.partition == partition)
    }

    /// Whether `partition` runs at instant `t` (ns, absolute; frames start at multiples of the major frame).
    pub fn runs_at(&self, partition: &str, t: u64) -> bool {
        let f = self.major_frame_ns;
        let o = t % f;
        self.slots.iter().any(|s| s.partition == partition && o >= s.start && o < s.start + s.duration)
    }

    /// Serves `need` ns of `partition`'s CPU from instant `t` on, every window entered from elsewhere losing its
    /// first `switch` ns; the instant the work is done. `None` when the partition has no usable window here.
    pub fn serve(&self, partition: &str, t: u64, need: u64, switch: u64) -> Option<u64> {
        let mine = self.slots.iter().filter(|s| s.partition == partition);
        if mine.clone().all(|s| s.duration <= if s.switched_in { switch } else { 0 }) {
            return None;
        }
        self.serve_with(partition, t, need, &|_| switch)
    }

    /// As [`PlanWindows::serve`], with the time a window entered from elsewhere loses given per window instance:
    /// `lost(start)` for the instance that starts at `start` (the same instance loses the same time to every
    /// request). `None` when a thousand windows in a row were lost whole, or the partition has none here.
    pub fn serve_with(&self, partition: &str, mut t: u64, mut need: u64, lost: &dyn Fn(u64) -> u64) -> Option<u64> {
        let f = self.major_frame_ns;
        let mine: Vec<&Slot> = self.slots.iter().filter(|s| s.partition == partition).collect();
        if mine.is_empty() || f == 0 {
            return None;
        }
        let mut wasted = 0;
        loop {
            // The window instance that holds t, or else the first to start after it.
            let base = t - t % f;
            let mut next: Option<(u64, u64, bool)> = None;
            for frame in [base, base + f] {
                for s in &mine {
                    let (start, end) = (frame + s.start, frame + s.start + s.duration);
                    if end > t && next.map_or(true, |(b, _, _)| start < b) {
                        next = Some((start, end, s.switched_in));
                    }
                }
                if next.is_some() {
                    break;
                }
            }
            let (start, end, switched_in) = next?;
            let from = if switched_in { start.saturating_add(lost(start)) } else { start };
            let begin = from.max(t);
            if begin < end {
                if need <= end - begin {
                    return Some(begin + need);
                }
                need -= end - begin;
                wasted = 0;
            } else {
                wasted += 1;
                if wasted > 1000 {
                    return None;
                }
            }
            t = end;
        }
    }

    /// The earliest instant at or after `t` when `partition` runs.
    pub fn next_run(&self, partition: &str, t: u64) -> Option<u64> {
        self.serve(partition, t, 0, 0)
    }
}

/// The plan of `plans` that has windows of `partition` (a chain may cross plans of different CPUs).
pub fn plan_of<'a>(plans: &'a [PlanWindows], partition: &str) -> Option<&'a PlanWindows> {
    plans.iter().find(|p| p.has(partition))
}

/// The distribution of the delay the windows alone add to a path, over arrival instants, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WindowDelay {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The window delay of `chain` (processing time zero, no switch cost) for arrivals 1 µs apart over the longest
/// major frame of `plans`: the exact distribution, at 1 µs resolution, for arrivals spread evenly over the
/// frame. `None` when a partition of the chain has no window in `plans`.
pub fn window_delay(plans: &[PlanWindows], chain: &[&str]) -> Option<WindowDelay> {
    let frame = plans.iter().map(|p| p.major_frame_ns).max()?;
    let hops: Vec<&PlanWindows> = chain.iter().map(|p| plan_of(plans, p)).collect::<Option<_>>()?;
    let mut d: Vec<u64> = Vec::with_capacity((frame / 1000) as usize + 1);
    let mut arrival = 0;
    while arrival < frame {
        let mut t = arrival;
        for (p, plan) in chain.iter().zip(&hops) {
            t = plan.next_run(p, t)?;
        }
        d.push(t - arrival);
        arrival += 1000;
    }
    Some(WindowDelay::of(&mut d))
}

impl WindowDelay {
    /// Of delays in ns (sorted in place): nearest-rank percentiles.
    pub fn of(d: &mut [u64]) -> WindowDelay {
        d.sort_unstable();
        WindowDelay {
            min_us: d[0] as f64 / 1e3,
            mean_us: d.iter().map(|&x| x as f64).sum::<f64>() / d.len() as f64 / 1e3,
            p50_us: rank_us(d, 0.5),
            p99_us: rank_us(d, 0.99),
            max_us: d[d.len() - 1] as f64 / 1e3,
        }
    }
}

/// The nearest-rank `q` quantile of `sorted` (ns, not empty), µs.
pub(crate) fn rank_us(sorted: &[u64], q: f64) -> f64 {
    sorted[(((q * sorted.len() as f64).ceil() as usize).max(1) - 1).min(sorted.len() - 1)] as f64 / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn paper_plan() -> PlanWindows {
        PlanWindows::new(0, 1_500_000, &[("recorder".into(), 0, 700_000), ("routing".into(), 700_000, 800_000)])
    }

    #[test]
    fn the_papers_plan_delays_a_round_trip_by_up_to_frame_plus_recorder_window() {
        let d = window_delay(&[paper_plan()], &["routing", "recorder", "routing"]).unwrap();
        // Arriving at 0 (routing just closed): routing at 700, recorder at 1500, routing at 2200.
        assert_eq!(d.max_us, 2200.0);
        // Arriving just before the routing window ends: recorder 1 µs later, routing 700 µs after that.
        assert_eq!(d.min_us, 701.0);
        // 700 arrivals in the recorder's window wait 2200 − a, 800 in the routing window 2200 − a too.
        assert!((d.mean_us - 1450.5).abs() < 1e-9, "{}", d.mean_us);
    }

    #[test]
    fn partitions_with_their_own_cpu_add_no_window_delay_and_pay_no_switch() {
        let own = |p: &str| PlanWindows::new(1, 1_500_000, &[(p.into(), 0, 1_500_000)]);
        let d = window_delay(&[own("recorder"), own("routing")], &["routing", "recorder", "routing"]).unwrap();
        assert_eq!(d.max_us, 0.0);
        assert!(window_delay(&[own("recorder")], &["routing"]).is_none());
        assert_eq!(own("a").serve("a", 1_499_990, 50_000, 20_000), Some(1_549_990));
    }

    #[test]
    fn work_that_overruns_a_window_continues_in_the_next_and_pays_the_switch_again() {
        let p = paper_plan();
        // 100 µs of routing work arriving 50 µs before its window ends: 50 now, 50 in the next window, which
        // starts at 2200 and loses 20 µs to the switch.
        assert_eq!(p.serve("routing", 1_450_000, 100_000, 20_000), Some(2_200_000 + 20_000 + 50_000));
        // Arriving inside the switch time of a window: work starts when the switch is over.
        assert_eq!(p.serve("recorder", 1_505_000, 10_000, 20_000), Some(1_530_000));
        // Adjacent windows of one partition are one: no switch between them.
        let q = PlanWindows::new(0, 1000, &[("a".into(), 0, 300), ("a".into(), 300, 200), ("b".into(), 500, 500)]);
        assert!(q.slots[0].switched_in && !q.slots[1].switched_in);
        assert_eq!(q.serve("a", 0, 460, 10), Some(470));
        // The second window of a pair is entered from the first: it loses nothing even to a long switch.
        assert_eq!(q.serve("a", 0, 1, 600), Some(301));
        // A partition whose windows are all shorter than the switch is never served.
        assert_eq!(p.serve("routing", 0, 1, 800_000), None);
    }
}
