//! What the plan predicts for a request that has to pass through partitions in turn.
//!
//! A request from the monitor visits the routing partition (into the module), the recorder, and the routing
//! partition again (the answer out). Each can only run inside its windows. Walking the plan with the
//! processing time of each visit taken as zero gives the delay the windows alone add, for every arrival instant
//! in the major frame; its maximum is the worst case (a request arriving just after the routing window closes
//! waits for the next routing window, then for the recorder's, then for the routing window again). Adding the
//! response time of the same system without windows (TRADITIONAL DDS WITH ROUTING, measured in the same run)
//! gives the predicted bound the measured figures are checked against.
use partita_system::System;
use serde::Serialize;

/// A cyclic plan on one CPU, or the windows of a partition that has a CPU of its own.
#[derive(Debug, Clone)]
pub struct PlanWindows {
    pub major_frame_ns: u64,
    /// (partition, offset, duration), ns.
    pub windows: Vec<(String, u64, u64)>,
}

impl PlanWindows {
    /// The plans of every module of `system`.
    pub fn of_system(system: &System) -> Vec<PlanWindows> {
        system
            .modules
            .iter()
            .flat_map(|m| m.plans.iter())
            .map(|p| PlanWindows {
                major_frame_ns: p.frame().as_nanos(),
                windows: p.windows.iter().map(|w| (w.partition.clone(), w.start.as_nanos(), w.duration.as_nanos())).collect(),
            })
            .collect()
    }

    /// The earliest instant at or after `t` (ns, absolute) when `partition` is inside one of its windows.
    fn next_run(&self, partition: &str, t: u64) -> Option<u64> {
        let f = self.major_frame_ns;
        let base = t - t % f;
        let mut best: Option<u64> = None;
        for frame in [base, base + f] {
            for (p, off, dur) in &self.windows {
                if p != partition || *dur == 0 {
                    continue;
                }
                let (s, e) = (frame + off, frame + off + dur);
                let at = if t >= s && t < e { t } else if s >= t { s } else { continue };
                best = Some(best.map_or(at, |b: u64| b.min(at)));
            }
        }
        best
    }

    /// The window delay of a request arriving at offset `arrival` (ns into the frame) that visits `chain` in order.
    pub fn delay(&self, chain: &[&str], arrival: u64) -> Option<u64> {
        let mut t = arrival;
        for p in chain {
            t = self.next_run(p, t)?;
        }
        Some(t - arrival)
    }
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct WindowDelay {
    pub min_us: f64,
    pub mean_us: f64,
    pub max_us: f64,
}

/// The window delay of the chain over arrivals spread evenly (1 µs apart) over one major frame. `None` when a
/// partition of the chain has no window in `plans`. A chain may cross plans of different CPUs: each partition
/// is looked up in the first plan that has it.
pub fn window_delay(plans: &[PlanWindows], chain: &[&str]) -> Option<WindowDelay> {
    let frame = plans.iter().map(|p| p.major_frame_ns).max()?;
    let step = 1000u64;
    let (mut min, mut max, mut sum, mut n) = (u64::MAX, 0u64, 0u128, 0u64);
    let mut arrival = 0;
    while arrival < frame {
        let mut t = arrival;
        for p in chain {
            let plan = plans.iter().find(|pl| pl.windows.iter().any(|(n, _, _)| n == p))?;
            t = plan.next_run(p, t)?;
        }
        let d = t - arrival;
        min = min.min(d);
        max = max.max(d);
        sum += d as u128;
        n += 1;
        arrival += step;
    }
    Some(WindowDelay { min_us: min as f64 / 1e3, mean_us: sum as f64 / n as f64 / 1e3, max_us: max as f64 / 1e3 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper_plan() -> PlanWindows {
        PlanWindows {
            major_frame_ns: 1_500_000,
            windows: vec![("recorder".into(), 0, 700_000), ("routing".into(), 700_000, 800_000)],
        }
    }

    #[test]
    fn the_papers_plan_delays_a_round_trip_by_up_to_frame_plus_recorder_window() {
        let d = window_delay(&[paper_plan()], &["routing", "recorder", "routing"]).unwrap();
        // Arriving at 0 (routing just closed): routing at 700, recorder at 1500, routing at 2200.
        assert_eq!(d.max_us, 2200.0);
        // Arriving just before the routing window ends: recorder 1 µs later, routing 700 µs after that.
        assert_eq!(d.min_us, 701.0);
        assert_eq!(paper_plan().delay(&["routing", "recorder", "routing"], 1_000_000), Some(1_200_000));
    }

    #[test]
    fn partitions_with_their_own_cpu_add_no_window_delay() {
        let own = |p: &str| PlanWindows { major_frame_ns: 1_500_000, windows: vec![(p.into(), 0, 1_500_000)] };
        let d = window_delay(&[own("recorder"), own("routing")], &["routing", "recorder", "routing"]).unwrap();
        assert_eq!(d.max_us, 0.0);
        assert!(window_delay(&[own("recorder")], &["routing"]).is_none());
    }
}
