//! Checks the plan from outside its executor. Every few milliseconds the supervisor samples each planned
//! partition:
//! - its frozen state (the kernel's view, not what the executor asked for) when the plan is well inside one of
//!   its windows: found frozen, it did not run in its window (someone froze it, or the executor's thaw did not
//!   take). A thaw takes effect at once, so this is exact; samples within a fifth of a window from its ends are
//!   not judged (window starts are tens of µs late on these machines);
//! - the CPU time its processes used since the last sample, against the time its windows had in that span:
//!   more than that (with a slack of 100 µs and 50 µs per window start) means it ran outside its windows. The
//!   frozen state cannot tell this: a freeze takes effect only when a thread is next scheduled, which on a busy
//!   CPU may be a while after the window ended, without the thread running its program meanwhile.
//!
//! Each rise of a count is logged as an event (`window_missed`, `ran_outside_window`), at most one a second per
//! partition and kind; the counts are in `state.json` and in `partita status`.
use crate::cgroup::PartitionCgroup;
use crate::executor::{PlanCell, Schedule};
use crate::freeze::FrozenProbe;
use crate::health::EventLog;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How one partition was found, sample by sample.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WindowCounts {
    /// Samples taken inside its windows, and of those how many found it frozen.
    pub in_window: u64,
    pub missed: u64,
    /// Spans between two samples, and of those how many it used more CPU time in than its windows had.
    pub spans: u64,
    pub ran_outside: u64,
    /// The CPU time used beyond its windows, over all spans, µs.
    pub outside_us: u64,
}

struct Watched {
    name: String,
    probe: FrozenProbe,
    cgroup: Arc<PartitionCgroup>,
    /// The last sample: when (ns) and the CPU time used until then.
    last: Option<(u64, Duration)>,
    counts: WindowCounts,
    /// When each kind of event was last logged.
    logged: [Option<Instant>; 2],
    reported: WindowCounts,
}

/// One executor's plans: each plan's frame as intervals `(start, end, partition index or None for idle)`
/// covering it, and the cell that says which plan runs since when.
struct PlanWatch {
    origin: Arc<AtomicU64>,
    cell: Option<Arc<PlanCell>>,
    /// Per plan: its major frame and intervals.
    plans: Vec<(u64, Vec<(u64, u64, Option<usize>)>)>,
    /// The executor's switch count at the last sample: spans across a switch are not judged.
    switches: u64,
    partitions: Vec<Watched>,
}

/// The watch over every plan of a system.
#[derive(Default)]
pub struct WindowWatch {
    plans: Vec<PlanWatch>,
    /// The events logged since the last [`WindowWatch::take_noted`], by partition: errors a health-monitor
    /// table maps.
    noted: Vec<(String, &'static str)>,
}

/// The intervals of a frame: windows and the idle gaps between them.
fn intervals(schedule: &Schedule) -> Vec<(u64, u64, Option<usize>)> {
    let frame = schedule.major_frame().as_nanos() as u64;
    let mut out = Vec::new();
    let mut at = 0u64;
    for w in schedule.windows() {
        let (s, e) = (w.offset.as_nanos() as u64, (w.offset + w.duration).as_nanos() as u64);
        if s > at {
            out.push((at, s, None));
        }
        out.push((s, e, Some(w.partition)));
        at = e;
    }
    if at < frame {
        out.push((at, frame, None));
    }
    out
}

/// The time partition `p`'s windows have between `from` and `to` (ns since the plan's origin), and how many of
/// them start in that span.
fn window_time(intervals: &[(u64, u64, Option<usize>)], frame: u64, p: usize, from: u64, to: u64) -> (u64, u64) {
    let (mut total, mut starts) = (0, 0);
    let mut base = from - from % frame;
    while base < to {
        for &(s, e, _) in intervals.iter().filter(|(_, _, o)| *o == Some(p)) {
            let (a, b) = ((base + s).max(from), (base + e).min(to));
            if a < b {
                total += b - a;
            }
            if base + s >= from && base + s < to {
                starts += 1;
            }
        }
        base += frame;
    }
    (total, starts)
}

/// Whether `phase` lies in the middle three fifths of `[start, end)`.
fn well_inside(phase: u64, start: u64, end: u64) -> bool {
    let margin = (end - start) / 5;
    phase >= start + margin && phase < end - margin
}

impl WindowWatch {
    /// Watches a plan whose executor publishes its origin in `origin`; `partitions` are the plan's partitions in
    /// the executor's order, with a probe of each.
    pub fn add_plan(&mut self, schedule: &Schedule, origin: Arc<AtomicU64>, partitions: Vec<(String, FrozenProbe, Arc<PartitionCgroup>)>) {
        self.add_plans(std::slice::from_ref(schedule), None, origin, partitions);
    }

    /// Watches an executor of several plans: `cell` says which one runs, `origin` since when.
    pub fn add_plans(&mut self, schedules: &[Schedule], cell: Option<Arc<PlanCell>>, origin: Arc<AtomicU64>, partitions: Vec<(String, FrozenProbe, Arc<PartitionCgroup>)>) {
        self.plans.push(PlanWatch {
            origin,
            cell,
            plans: schedules.iter().map(|s| (s.major_frame().as_nanos() as u64, intervals(s))).collect(),
            switches: 0,
            partitions: partitions
                .into_iter()
                .map(|(name, probe, cgroup)| Watched { name, probe, cgroup, last: None, counts: WindowCounts::default(), logged: [None; 2], reported: WindowCounts::default() })
                .collect(),
        });
    }

    /// Takes one sample of every planned partition at `now_ns` (CLOCK_MONOTONIC) and logs what is wrong.
    pub fn sample(&mut self, now_ns: u64, log: &EventLog) {
        for plan in &mut self.plans {
            // Which plan runs since when: read between two looks at the switch count, so that a switch in
            // between is seen; a span across a switch is not judged.
            let (k, origin) = match &plan.cell {
                None => (0, plan.origin.load(Ordering::Acquire)),
                Some(cell) => {
                    let before = cell.switch_count();
                    let (k, origin) = (cell.current(), plan.origin.load(Ordering::Acquire));
                    if cell.switch_count() != before {
                        continue;
                    }
                    if before != plan.switches {
                        plan.switches = before;
                        for w in &mut plan.partitions {
                            w.last = None;
                        }
                    }
                    (k, origin)
                }
            };
            let Some((frame_ns, intervals)) = plan.plans.get(k) else { continue };
            let frame_ns = *frame_ns;
            if origin == 0 || now_ns < origin || frame_ns == 0 {
                continue;
            }
            let phase = (now_ns - origin) % frame_ns;
            let current = intervals.iter().find(|(s, e, _)| phase >= *s && phase < *e).copied();
            for (i, w) in plan.partitions.iter_mut().enumerate() {
                // A partition held frozen (idle, its module stopped) is meant to miss its windows.
                let held = plan.cell.as_ref().is_some_and(|c| c.is_held(i));
                if let Some((start, end, Some(owner))) = current {
                    if owner == i && !held && well_inside(phase, start, end) {
                        if let Ok(frozen) = w.probe.is_frozen() {
                            w.counts.in_window += 1;
                            w.counts.missed += u64::from(frozen);
                        }
                    }
                }
                let Ok(used) = w.cgroup.cpu_usage() else { continue };
                if let Some((then, used_then)) = w.last.filter(|(then, _)| *then >= origin) {
                    let (window_ns, starts) = window_time(intervals, frame_ns, i, then - origin, now_ns - origin);
                    let allowed = Duration::from_nanos(window_ns + 100_000 + 50_000 * starts);
                    let spent = used.saturating_sub(used_then);
                    w.counts.spans += 1;
                    if spent > allowed {
                        w.counts.ran_outside += 1;
                        w.counts.outside_us += (spent - allowed).as_micros() as u64;
                    }
                }
                w.last = Some((now_ns, used));
            }
        }
        self.report(log);
    }

    fn report(&mut self, log: &EventLog) {
        for w in self.plans.iter_mut().flat_map(|p| p.partitions.iter_mut()) {
            let noted = &mut self.noted;
            let kinds = [("window_missed", w.counts.missed, w.reported.missed), ("ran_outside_window", w.counts.ran_outside, w.reported.ran_outside)];
            for (k, (event, now, before)) in kinds.into_iter().enumerate() {
                if now > before && w.logged[k].is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    let detail = match k {
                        0 => format!("found frozen in {} of {} samples inside its windows", now, w.counts.in_window),
                        _ => format!("used more CPU time than its windows had in {} of {} spans ({} µs in all)", now, w.counts.spans, w.counts.outside_us),
                    };
                    log.record(&w.name, event, None, None, Some(detail));
                    noted.push((w.name.clone(), event));
                    w.logged[k] = Some(Instant::now());
                    if k == 0 {
                        w.reported.missed = now;
                    } else {
                        w.reported.ran_outside = now;
                    }
                }
            }
        }
    }

    /// The events logged since the last call.
    pub fn take_noted(&mut self) -> Vec<(String, &'static str)> {
        std::mem::take(&mut self.noted)
    }

    /// The counts of every planned partition.
    pub fn counts(&self) -> Vec<(String, WindowCounts)> {
        self.plans.iter().flat_map(|p| p.partitions.iter().map(|w| (w.name.clone(), w.counts))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Window;

    #[test]
    fn a_frame_is_covered_by_its_windows_and_gaps() {
        let us = Duration::from_micros;
        let s = Schedule::new(us(1000), vec![Window { partition: 0, offset: us(100), duration: us(300) }, Window { partition: 1, offset: us(400), duration: us(200) }]).unwrap();
        assert_eq!(intervals(&s), vec![(0, 100_000, None), (100_000, 400_000, Some(0)), (400_000, 600_000, Some(1)), (600_000, 1_000_000, None)]);
        assert!(well_inside(250_000, 100_000, 400_000));
        assert!(!well_inside(110_000, 100_000, 400_000), "near a boundary a sample is not judged");
        let iv = intervals(&s);
        // partition 0 has 300 µs per 1000 µs frame: from 50 µs to 2550 µs its windows 100..400, 1100..1400 and
        // 2100..2400: 900 µs and 3 starts
        assert_eq!(window_time(&iv, 1_000_000, 0, 50_000, 2_550_000), (900_000, 3));
        // from inside a window: 250..400 → 150 µs, no start
        assert_eq!(window_time(&iv, 1_000_000, 0, 250_000, 450_000), (150_000, 0));
    }
}
