//! Plan analysis: what the supervisor and the benchmarks need to know about a cyclic plan.
use crate::model::{Duration, Module, Plan, Window};

/// Why a plan's `wake_ahead` is refused ([`Plan::wake_ahead_refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeAheadRefused {
    /// Longer than 1 ms: a timer's wake-up latency is tens of µs.
    OverAMillisecond,
    /// Not shorter than `freeze_ahead`: the executor would hold the CPU for the whole time the partition
    /// frozen ahead has to stop.
    NotShorterThanFreezeAhead,
    /// No window starts after time in which no partition runs: the executor would never use it.
    NoQuietTime,
}

impl Plan {
    /// The major frame as a duration.
    pub fn frame(&self) -> Duration {
        self.major_frame.0
    }

    /// Whether another partition's window starts where window `i` ends (cyclically), so that its partition
    /// is frozen `freeze_ahead` early. A window followed by idle time or by its own partition's is not.
    pub fn followed_by_another(&self, i: usize) -> bool {
        let Some(w) = self.windows.get(i) else { return false };
        let frame = self.frame().as_nanos().max(1);
        let end = w.end().as_nanos() % frame;
        let starts_at_end = |same: bool| self.windows.iter().any(|o| (o.partition == w.partition) == same && o.start.as_nanos() % frame == end);
        starts_at_end(false) && !starts_at_end(true)
    }

    /// How long window `i`'s partition really runs in it: its duration less `freeze_ahead` when another
    /// partition's window follows it directly.
    pub fn usable(&self, i: usize) -> Duration {
        let d = self.windows.get(i).map_or(Duration::ZERO, |w| w.duration);
        if self.followed_by_another(i) { d.saturating_sub(self.freeze_ahead) } else { d }
    }

    /// The first window whose partition `freeze_ahead` would freeze more than a fifth of it early (the
    /// supervisor's window watch does not judge a window's last fifth; a partition frozen earlier would look as
    /// if it had missed its window). `None` when the lead fits every window it shortens.
    pub fn freeze_ahead_too_long(&self) -> Option<usize> {
        (0..self.windows.len())
            .find(|&k| self.followed_by_another(k) && self.freeze_ahead.as_nanos().saturating_mul(5) > self.windows[k].duration.as_nanos())
    }

    /// Whether some window starts after time in which no partition runs: a gap before it, or the lead of a
    /// partition frozen `freeze_ahead` early. Only there can the executor wait for a start on the clock
    /// (`wake_ahead`).
    pub fn has_quiet_time_before_a_window(&self) -> bool {
        let frame = self.frame().as_nanos().max(1);
        (0..self.windows.len()).any(|k| {
            let start = self.windows[k].start.as_nanos() % frame;
            match (0..self.windows.len()).find(|&i| self.windows[i].end().as_nanos() % frame == start) {
                None => true,
                Some(i) => self.followed_by_another(i) && self.freeze_ahead > Duration::ZERO,
            }
        })
    }

    /// Why this plan's `wake_ahead` cannot be used, if it cannot (`None` also when it is zero): the one
    /// judgement behind the system file's check and `partita soak --wake-ahead`.
    pub fn wake_ahead_refused(&self) -> Option<WakeAheadRefused> {
        let wake = self.wake_ahead;
        if wake == Duration::ZERO {
            None
        } else if wake > Duration::from_millis(1) {
            Some(WakeAheadRefused::OverAMillisecond)
        } else if self.freeze_ahead > Duration::ZERO && wake >= self.freeze_ahead {
            Some(WakeAheadRefused::NotShorterThanFreezeAhead)
        } else if !self.has_quiet_time_before_a_window() {
            Some(WakeAheadRefused::NoQuietTime)
        } else {
            None
        }
    }

    /// The windows sorted by start (validated plans already are; this does not rely on it).
    pub fn sorted_windows(&self) -> Vec<&Window> {
        let mut w: Vec<&Window> = self.windows.iter().collect();
        w.sort_by_key(|w| w.start);
        w
    }

    /// Total time given to `partition` in one major frame.
    pub fn time_of(&self, partition: &str) -> Duration {
        Duration::from_nanos(
            self.windows.iter().filter(|w| w.partition == partition).map(|w| w.duration.as_nanos()).sum(),
        )
    }

    /// Fraction of the major frame given to `partition`, 0.0..=1.0.
    pub fn share(&self, partition: &str) -> f64 {
        let frame = self.frame().as_nanos();
        if frame == 0 {
            return 0.0;
        }
        self.time_of(partition).as_nanos() as f64 / frame as f64
    }

    /// Time of the major frame in no window (the CPU idles or runs the host).
    pub fn idle(&self) -> Duration {
        let busy: u64 = self.windows.iter().map(|w| w.duration.as_nanos()).sum();
        self.frame().saturating_sub(Duration::from_nanos(busy))
    }

    /// The longest a partition that becomes ready at an arbitrary instant waits before it runs: the longest
    /// gap, cyclically over the frame, between the end of one of its windows and the start of its next one.
    /// Adjacent windows of the same partition count as one. `None` if the partition has no window here.
    pub fn worst_case_wait(&self, partition: &str) -> Option<Duration> {
        let mine: Vec<&Window> = self.sorted_windows().into_iter().filter(|w| w.partition == partition).collect();
        if mine.is_empty() {
            return None;
        }
        let frame = self.frame().as_nanos();
        let mut worst = 0u64;
        for (i, w) in mine.iter().enumerate() {
            let end = w.end().as_nanos();
            let gap = match mine.get(i + 1) {
                Some(next) => next.start.as_nanos().saturating_sub(end),
                None => frame.saturating_sub(end) + mine[0].start.as_nanos(),
            };
            worst = worst.max(gap);
        }
        Some(Duration::from_nanos(worst))
    }
}

impl Module {
    /// Each CPU's windows sorted by start, in CPU order.
    pub fn windows_by_cpu(&self) -> Vec<(usize, Vec<&Window>)> {
        let mut plans: Vec<&Plan> = self.plans.iter().collect();
        plans.sort_by_key(|p| p.cpu);
        plans.into_iter().map(|p| (p.cpu, p.sorted_windows())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::MajorFrame;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }
    fn plan(frame: u64, w: &[(&str, u64, u64)]) -> Plan {
        Plan {
            cpu: 0,
            major_frame: MajorFrame(us(frame)),
            windows: w.iter().map(|(p, s, d)| Window { partition: p.to_string(), start: us(*s), duration: us(*d) }).collect(),
            freeze_ahead: Duration::ZERO,
            wake_ahead: Duration::ZERO,
            demote: true,
        }
    }

    #[test]
    fn freeze_ahead_shortens_only_windows_another_partition_follows() {
        let mut p = plan(2000, &[("a", 0, 700), ("b", 700, 800), ("b", 1500, 200), ("a", 1800, 100)]);
        p.freeze_ahead = us(30);
        // a → b directly; b → b (its own); b → idle; a at the frame's end → a at 0 (its own).
        assert_eq!((0..4).map(|i| p.followed_by_another(i)).collect::<Vec<_>>(), [true, false, false, false]);
        assert_eq!(p.usable(0), us(670));
        assert_eq!(p.usable(1), us(800));
        let q = plan(1500, &[("recorder", 0, 700), ("routing", 700, 800)]);
        assert!(q.followed_by_another(1), "the last window is followed by the first of the next frame");
    }

    #[test]
    fn quiet_time_before_a_window_is_a_gap_or_a_freeze_lead() {
        let mut p = plan(1500, &[("recorder", 0, 700), ("routing", 700, 800)]);
        assert!(!p.has_quiet_time_before_a_window(), "back to back, frozen at the boundary: no quiet time");
        p.freeze_ahead = us(100);
        assert!(p.has_quiet_time_before_a_window());
        assert!(plan(2000, &[("a", 0, 700), ("b", 700, 800)]).has_quiet_time_before_a_window(), "idle from 1500 to the frame's end");
        assert!(!plan(1000, &[("a", 0, 1000)]).has_quiet_time_before_a_window(), "one partition all the time");
    }

    #[test]
    fn a_wake_lead_is_refused_over_a_millisecond_not_shorter_than_the_freeze_lead_or_without_quiet_time() {
        let mut p = plan(1500, &[("recorder", 0, 700), ("routing", 700, 800)]);
        assert_eq!(p.wake_ahead_refused(), None, "no lead");
        p.wake_ahead = us(30);
        assert_eq!(p.wake_ahead_refused(), Some(WakeAheadRefused::NoQuietTime));
        p.freeze_ahead = us(100);
        assert_eq!(p.wake_ahead_refused(), None);
        p.wake_ahead = us(100);
        assert_eq!(p.wake_ahead_refused(), Some(WakeAheadRefused::NotShorterThanFreezeAhead));
        p.wake_ahead = us(1001);
        assert_eq!(p.wake_ahead_refused(), Some(WakeAheadRefused::OverAMillisecond));
        let mut gap = plan(3000, &[("a", 0, 700), ("b", 700, 800)]);
        gap.wake_ahead = us(1000);
        assert_eq!(gap.wake_ahead_refused(), None, "a gap before a window, no freeze lead needed");
    }

    #[test]
    fn paper_plan_shares_and_waits() {
        let p = plan(1500, &[("recorder", 0, 700), ("routing", 700, 800)]);
        assert_eq!(p.worst_case_wait("recorder"), Some(us(800)));
        assert_eq!(p.worst_case_wait("routing"), Some(us(700)));
        assert!((p.share("recorder") - 700.0 / 1500.0).abs() < 1e-12);
        assert_eq!(p.idle(), Duration::ZERO);
        assert_eq!(p.worst_case_wait("nobody"), None);
    }

    #[test]
    fn waits_are_cyclic_and_idle_counts_gaps() {
        // a: [100,200) and [600,700) in 1000: gaps 400 and 400 (700..1000 + 0..100).
        let p = plan(1000, &[("b", 300, 100), ("a", 600, 100), ("a", 100, 100)]);
        assert_eq!(p.worst_case_wait("a"), Some(us(400)));
        assert_eq!(p.worst_case_wait("b"), Some(us(900)));
        assert_eq!(p.idle(), us(700));
        let order: Vec<u64> = p.sorted_windows().iter().map(|w| w.start.as_nanos() / 1000).collect();
        assert_eq!(order, vec![100, 300, 600]);
    }

    #[test]
    fn adjacent_windows_of_one_partition_have_no_gap_between_them() {
        let p = plan(1000, &[("a", 0, 300), ("a", 300, 200), ("b", 500, 500)]);
        assert_eq!(p.worst_case_wait("a"), Some(us(500)));
        let full = plan(1000, &[("a", 0, 1000)]);
        assert_eq!(full.worst_case_wait("a"), Some(Duration::ZERO));
    }
}
