//! The thaw herd: at a window start the kernel's freezer wakes every thread of the partition it thaws, and
//! each runs once, in the order the freezer woke them, to leave the freezer before it takes up its work or
//! sleeps again. A thread of the partition can run only once the threads woken before it have: the window opens
//! to the last of them this long after the executor's thaw. Read from a trace of the plan's CPU (every task's
//! `sched_switch`, [`partita_supervisor::stalls::Tracer::switches`]) and the executor's log of when it thawed.
use partita_supervisor::stalls::{field, TraceEvent, EXECUTOR_COMM};
use std::collections::HashSet;

/// The herds of one partition's window starts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThawHerds {
    /// For each window start in the trace at which every thread of the partition ran before the executor ran
    /// again: from the thaw (the executor's `switched_ns`) to the first run of the last of them, ns.
    pub spans_ns: Vec<u64>,
    /// Window starts in the trace at which some thread of the partition did not run before the executor did
    /// again (a host stall, or a thread that exited): left out of `spans_ns`.
    pub incomplete: usize,
}

/// The herd after each of `thaws_ns` (when the executor thawed the partition whose threads are `threads`,
/// CLOCK_MONOTONIC ns, as the trace's `mono` clock), from `events` (sorted by time). Thaws outside the trace
/// are skipped.
pub fn thaw_herds(events: &[TraceEvent], thaws_ns: &[u64], threads: &HashSet<u32>) -> ThawHerds {
    let mut out = ThawHerds::default();
    let switches: Vec<(u64, Option<u32>, bool)> = events
        .iter()
        .filter(|e| e.event == "sched_switch")
        .map(|e| {
            let next = field(&e.fields, "next_pid").and_then(|p| p.parse().ok());
            (e.ns, next, field(&e.fields, "next_comm") == Some(EXECUTOR_COMM))
        })
        .collect();
    let (Some(first), Some(last)) = (switches.first(), switches.last()) else { return out };
    if threads.is_empty() {
        return out;
    }
    for &thaw in thaws_ns.iter().filter(|t| **t >= first.0 && **t <= last.0) {
        let from = switches.partition_point(|s| s.0 < thaw);
        let mut seen: HashSet<u32> = HashSet::with_capacity(threads.len());
        let mut last_in = thaw;
        let mut complete = false;
        for &(ns, next, executor) in &switches[from..] {
            if executor {
                break;
            }
            if let Some(tid) = next.filter(|t| threads.contains(t)) {
                if seen.insert(tid) {
                    last_in = ns;
                    if seen.len() == threads.len() {
                        complete = true;
                        break;
                    }
                }
            }
        }
        if complete {
            out.spans_ns.push(last_in - thaw);
        } else {
            out.incomplete += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_supervisor::stalls::parse_trace;

    fn switch(t: &str, prev: (&str, u32), next: (&str, u32)) -> String {
        format!(
            "{p}-{pp} [000] d..2. {t}: sched_switch: prev_comm={p} prev_pid={pp} prev_prio=49 prev_state=S ==> next_comm={n} next_pid={np} next_prio=49\n",
            p = prev.0,
            pp = prev.1,
            n = next.0,
            np = next.1
        )
    }

    #[test]
    fn the_herd_ends_when_the_last_thread_of_the_partition_first_runs() {
        let exec = (EXECUTOR_COMM, 7);
        let mut text = String::new();
        text += &switch("100.000001", ("swapper", 0), exec);
        // Thaw at 100.000010: the executor sleeps, another task runs, then threads 11, 12, 11 again, 13.
        text += &switch("100.000020", exec, ("kworker", 3));
        text += &switch("100.000025", ("kworker", 3), ("recv", 11));
        text += &switch("100.000030", ("recv", 11), ("gc", 12));
        text += &switch("100.000034", ("gc", 12), ("recv", 11));
        text += &switch("100.000041", ("recv", 11), ("tev", 13));
        text += &switch("100.000043", ("tev", 13), ("swapper", 0));
        // Thaw at 100.001010: thread 13 never runs before the executor does again.
        text += &switch("100.001015", exec, ("recv", 11));
        text += &switch("100.001017", ("recv", 11), ("gc", 12));
        text += &switch("100.001019", ("gc", 12), ("swapper", 0));
        text += &switch("100.001500", ("swapper", 0), exec);
        text += &switch("100.001503", exec, ("tev", 13));
        let events = parse_trace(&text);
        let threads: HashSet<u32> = [11, 12, 13].into();
        let thaws = [99_000_000_000, 100_000_010_000, 100_001_010_000, 200_000_000_000];
        let h = thaw_herds(&events, &thaws, &threads);
        assert_eq!(h.spans_ns, vec![31_000], "from the thaw to thread 13's first run");
        assert_eq!(h.incomplete, 1, "the second thaw's herd was cut by the executor");
        assert_eq!(thaw_herds(&events, &thaws, &HashSet::new()), ThawHerds::default());
        assert_eq!(thaw_herds(&[], &thaws, &threads), ThawHerds::default());
    }
}
