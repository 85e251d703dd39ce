//! Time overruns: a partition that keeps running after its window has ended (ARINC 653's time-overrun error).
//!
//! The freezer stops a task only on its way back to user space, so a partition inside a long system call (a
//! walk over tens of thousands of mappings, a large write, a page-table populate) runs on after its freeze, in
//! the next partition's window, until the call ends. Without kernel preemption (`PREEMPT(none)`) it runs on
//! even against the plan executor's SCHED_FIFO 90 (docs/security.md, "Time partitioning and kernel work").
//!
//! The plan executor guards every partition with a [`TimeGuard`]: at the first boundary after a window has ended
//! it reads the partition's CPU time (one `pread` of its cgroup's counter, no allocation) and compares it with
//! the time its window had. CPU time beyond the window's end by more than the tolerance is an overrun. Then:
//! - a partition still running then (not yet stopped by the freeze) is **demoted**: its cgroup's `cpu.idle` is
//!   set, so the scheduler gives it only the time the window's owner leaves, until its next window starts (where
//!   the kernel has scheduling points in the code it runs, that is at once). Most are only waiting for the CPU
//!   to stop (a spinning partition preempted at its window's end often is, a boundary later), and lose nothing;
//!   one inside a long system call would otherwise hold the CPU in kernel code;
//! - an overrun counts towards its policy once the partition is seen to run kernel code past its freeze: still
//!   running at a look, having used more than [`FREEZE_SLACK_NS`] of CPU time since the freeze (a task in user
//!   space stops as soon as it runs after a freeze, within microseconds; one that has not run since may be
//!   only waiting for the CPU, and one that has stopped may owe its time to the host or to a late executor: a
//!   stall of a virtual machine's CPU is charged to whichever task ran). An overrun without that evidence at
//!   its first look waits for it at the next looks, until the partition stops or its next window starts;
//! - at the `count`-th counted overrun within `frames` major frames its **action** is taken on the spot: `restart` and
//!   `stop` kill its processes (`cgroup.kill`, one write), `idle` keeps it frozen for good, `ignore` does
//!   nothing;
//! - the executor watches it at every boundary until it has stopped (frozen with every task stopped, or no
//!   process left) and notes that instant: the time from the first overrun to **containment**.
//!
//! Everything the executor notes goes through an [`OverrunRing`] (atomic stores) to the supervisor's thread,
//! which logs the events (`time_overrun`, `demoted`, `overrun_action`, `contained`).
use crate::cgroup::PartitionCgroup;
use crate::error::{path_err, Result};
use partita_system::OverrunAction;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Event names in the supervisor's event log.
pub const EVENT_TIME_OVERRUN: &str = "time_overrun";
pub const EVENT_DEMOTED: &str = "demoted";
pub const EVENT_OVERRUN_ACTION: &str = "overrun_action";
pub const EVENT_CONTAINED: &str = "contained";

/// When and how the executor acts on a partition's overruns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverrunPolicy {
    pub tolerance_ns: u64,
    /// The action is taken at the `count`-th overrun within `frames` major frames (`count` ≤ [`MAX_COUNT`]).
    pub count: u32,
    pub frames: u32,
    pub action: OverrunAction,
    /// Whether a partition still running after its window is demoted (`cpu.idle`) until its next window.
    pub demote: bool,
}

/// The most overruns a policy may count up to (the system file allows as many).
pub const MAX_COUNT: usize = 16;

/// CPU time a partition may use after its freeze without it counting as kernel work the freeze cannot stop:
/// every task of it, once it runs, stops on its way back to user space within microseconds.
pub const FREEZE_SLACK_NS: u64 = 100_000;

impl OverrunPolicy {
    pub fn from_system(t: &partita_system::TimeOverrun, demote: bool) -> OverrunPolicy {
        OverrunPolicy {
            tolerance_ns: t.tolerance.as_nanos(),
            count: t.count.clamp(1, MAX_COUNT as u32),
            frames: t.frames.max(1),
            action: t.action,
            demote,
        }
    }
}

/// What the executor noted, for the supervisor's event log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note {
    /// The partition used `past_ns` of CPU time beyond its window's end (or, `continued`, since the last look
    /// while it kept running), seen at the boundary at `at_ns`; `before_freeze_ns` of it before the executor froze
    /// it (the executor was late: held up by the partition's kernel work, or the host stalled the CPU).
    Overrun { partition: usize, frame: u64, past_ns: u64, before_freeze_ns: u64, still_running: bool, continued: bool, at_ns: u64 },
    /// Its cgroup runs as idle until its next window.
    Demoted { partition: usize, at_ns: u64 },
    /// Its action was taken (`killed`: its processes were sent SIGKILL through `cgroup.kill`; false where the
    /// kill is left to the supervisor's thread).
    Action { partition: usize, action: OverrunAction, killed: bool, at_ns: u64 },
    /// Stopped since `first_ns`, the end of the window of its first overrun counted by the action.
    Contained { partition: usize, first_ns: u64, at_ns: u64, frames: u64 },
}

const KIND_OVERRUN: u64 = 1;
const KIND_DEMOTED: u64 = 2;
const KIND_ACTION: u64 = 3;
const KIND_CONTAINED: u64 = 4;

/// Slots of the ring: a reader polling every 10 ms loses none unless the executor notes more than this many in
/// between (at most a few per partition and boundary).
pub const NOTE_SLOTS: usize = 256;

/// The executor's notes, in a ring it writes with atomic stores (one writer) and the supervisor's thread reads.
pub struct OverrunRing {
    seq: AtomicU64,
    slots: Box<[[AtomicU64; 5]]>,
}

impl Default for OverrunRing {
    fn default() -> Self {
        OverrunRing { seq: AtomicU64::new(0), slots: (0..NOTE_SLOTS).map(|_| std::array::from_fn(|_| AtomicU64::new(0))).collect() }
    }
}

fn action_code(a: OverrunAction) -> u64 {
    match a {
        OverrunAction::Restart => 0,
        OverrunAction::Stop => 1,
        OverrunAction::Idle => 2,
        OverrunAction::Ignore => 3,
    }
}

fn action_of(code: u64) -> OverrunAction {
    match code {
        0 => OverrunAction::Restart,
        1 => OverrunAction::Stop,
        2 => OverrunAction::Idle,
        _ => OverrunAction::Ignore,
    }
}

impl OverrunRing {
    /// Called by the executor only.
    pub fn push(&self, note: Note) {
        let words: [u64; 5] = match note {
            Note::Overrun { partition, frame, past_ns, before_freeze_ns, still_running, continued, at_ns } => {
                [KIND_OVERRUN | (partition as u64) << 8 | u64::from(still_running) << 40 | u64::from(continued) << 41, frame, past_ns, at_ns, before_freeze_ns]
            }
            Note::Demoted { partition, at_ns } => [KIND_DEMOTED | (partition as u64) << 8, 0, 0, at_ns, 0],
            Note::Action { partition, action, killed, at_ns } => {
                [KIND_ACTION | (partition as u64) << 8 | u64::from(killed) << 40, action_code(action), 0, at_ns, 0]
            }
            Note::Contained { partition, first_ns, at_ns, frames } => [KIND_CONTAINED | (partition as u64) << 8, frames, first_ns, at_ns, 0],
        };
        let seq = self.seq.load(Ordering::Relaxed);
        let slot = &self.slots[(seq % NOTE_SLOTS as u64) as usize];
        for (cell, w) in slot.iter().zip(words) {
            cell.store(w, Ordering::Relaxed);
        }
        self.seq.store(seq + 1, Ordering::Release);
    }

    /// The notes after sequence `from`, oldest first, and the sequence to read from next; notes overwritten
    /// before they were read are counted in the third value.
    pub fn read_since(&self, from: u64) -> (Vec<Note>, u64, u64) {
        let end = self.seq.load(Ordering::Acquire);
        let start = from.max(end.saturating_sub(NOTE_SLOTS as u64));
        let mut out = Vec::new();
        for seq in start..end {
            let w: Vec<u64> = self.slots[(seq % NOTE_SLOTS as u64) as usize].iter().map(|c| c.load(Ordering::Relaxed)).collect();
            let partition = ((w[0] >> 8) & 0xffff_ffff) as usize;
            let flag = |bit: u32| (w[0] >> bit) & 1 == 1;
            out.push(match w[0] & 0xff {
                KIND_OVERRUN => Note::Overrun { partition, frame: w[1], past_ns: w[2], before_freeze_ns: w[4], still_running: flag(40), continued: flag(41), at_ns: w[3] },
                KIND_DEMOTED => Note::Demoted { partition, at_ns: w[3] },
                KIND_ACTION => Note::Action { partition, action: action_of(w[1]), killed: flag(40), at_ns: w[3] },
                _ => Note::Contained { partition, frames: w[1], first_ns: w[2], at_ns: w[3] },
            });
        }
        let lost = start - from.min(start);
        (out, end, lost)
    }
}

/// The cgroup files the executor uses to guard one partition, opened once.
#[derive(Debug)]
pub struct TimeGuard {
    policy: OverrunPolicy,
    /// `cpuacct.usage` (ns) or v2 `cpu.stat` (`usage_usec`).
    usage: (File, UsageFormat),
    /// `cpu.idle` of its cpu controller group, where it has one.
    idle: Option<File>,
    /// v2 `cgroup.kill`, where the kernel has it.
    kill: Option<File>,
    /// Since when its program runs (monotonic ns, 0 while launched), from the health monitor; without one, it
    /// is taken as running all along.
    program_since: Option<Arc<AtomicU64>>,
    state: GuardState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UsageFormat {
    Nanoseconds,
    CpuStatMicros,
}

#[derive(Debug, Default)]
struct GuardState {
    /// CPU time when its current (or last) window started, and when it was thawed.
    usage_at_start: u64,
    thawed_ns: u64,
    /// To judge at the next boundary.
    check: Option<Check>,
    /// The frame of each overrun counted, and the end of its window (the last [`MAX_COUNT`]).
    overruns: [(u64, u64); MAX_COUNT],
    overrun_count: usize,
    demoted: bool,
    /// Kept frozen for good (`idle` or `stop` taken).
    idle: bool,
    /// The action was taken: the end of the window of the first overrun it counted, and that overrun's frame,
    /// until containment is seen.
    acted: Option<(u64, u64)>,
    /// An overrun past the tolerance not counted yet: the partition had not run since its freeze when it was
    /// seen (its frame and its window's end). Counted at a later look that finds it ran on past the freeze;
    /// dropped when it stops or its next window starts.
    pending: Option<(u64, u64)>,
}

/// What is judged at the next boundary: the CPU time at the freeze to count from, what the partition had
/// already used beyond its window before the freeze (an executor held up by the partition's own kernel work
/// freezes it late), and when that window ended (planned).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Check {
    from: u64,
    before: u64,
    end: u64,
    /// A look at a partition that was still running at the last one: all of its time since is past its window.
    continued: bool,
}

/// What one boundary's look at a partition found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Look {
    frame: u64,
    now: u64,
    usage: u64,
    thawed: bool,
    window_ended: Option<u64>,
    /// All its tasks stopped now (frozen, or none left); `None` where the freezer cannot tell.
    stopped: Option<bool>,
    /// Since when its program runs (`None`: still being launched): time before is the launch's.
    program_since: Option<u64>,
}

/// What the guard must do after a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Steps {
    overrun: Option<Note>,
    demote: bool,
    act: Option<OverrunAction>,
    contained: Option<Note>,
}

impl GuardState {
    fn needs_usage(&self, thawed: bool, window_ended: Option<u64>) -> bool {
        self.check.is_some() || thawed || window_ended.is_some()
    }

    /// The partition's overrun policy applied to one look; no I/O.
    fn step(&mut self, p: usize, policy: &OverrunPolicy, can_demote: bool, look: Look) -> Steps {
        let mut steps = Steps::default();
        if let Some(c) = self.check.take() {
            // CPU time since the freeze (or, `continued`, since the last look).
            let since_freeze = look.usage.saturating_sub(c.from);
            let past = c.before + since_freeze;
            let continued = c.continued;
            let still_running = look.stopped == Some(false);
            if past > policy.tolerance_ns {
                steps.overrun = Some(Note::Overrun { partition: p, frame: look.frame, past_ns: past, before_freeze_ns: c.before, still_running, continued, at_ns: look.now });
                // Counted only for kernel code the freeze cannot stop: still running, and it ran on after the
                // freeze. A partition that has stopped by then may owe its time to the host (a stall of a virtual
                // machine's CPU counted as its CPU time) or to an executor held up elsewhere, not to itself; one
                // that has not run since the freeze may only be waiting for the CPU to stop (the next looks
                // tell). And only once its program ran from the window's start: before, the time was its
                // launch's (the `execve` that tears down the copy of the supervisor's memory the launch forked
                // with). (`thawed_ns` is still that window's thaw: a thaw at this look is taken below.)
                let program_ran = look.program_since.is_some_and(|t| t <= self.thawed_ns);
                if !continued && still_running && program_ran {
                    if since_freeze > FREEZE_SLACK_NS {
                        steps.act = self.count_overrun(policy, look.frame, c.end);
                    } else {
                        self.pending = Some((look.frame, c.end));
                    }
                }
            }
            if continued {
                if let Some((frame, end)) = self.pending {
                    if since_freeze > FREEZE_SLACK_NS {
                        self.pending = None;
                        steps.act = self.count_overrun(policy, frame, end);
                    } else if !still_running {
                        self.pending = None;
                    }
                }
            }
            // Not stopped a boundary after its window's end: inside a long system call (or asleep in one), or
            // only not run since its freeze. It gets only the time others leave, and its time is counted on,
            // until its next window. Demoted at once, even when it has not run since its freeze: one inside a
            // system call, given its weight back, takes the CPU in kernel code the executor cannot preempt
            // (`bench isolation --faults vma-walk`, protected: the victim kept 98 % of its time so, 35–46 % when
            // demotion waited for CPU time used after the freeze).
            if still_running && !look.thawed {
                if can_demote && !self.demoted {
                    self.demoted = true;
                    steps.demote = true;
                }
                self.check = Some(Check { from: look.usage, before: 0, end: c.end, continued: true });
            }
        }
        if let Some((first_ns, first_frame)) = self.acted {
            if look.stopped == Some(true) {
                steps.contained = Some(Note::Contained { partition: p, first_ns, at_ns: look.now, frames: look.frame.saturating_sub(first_frame) });
                self.acted = None;
                self.overrun_count = 0;
            }
        }
        if look.thawed {
            self.usage_at_start = look.usage;
            self.thawed_ns = look.now;
            self.check = None;
            self.pending = None;
        }
        if let Some(end) = look.window_ended {
            // Its window: from its thaw to the planned end; thawed only after that (the executor was held up
            // elsewhere, a host stall), from its thaw to this freeze.
            let allowed = if self.thawed_ns < end { end - self.thawed_ns } else { look.now.saturating_sub(self.thawed_ns) };
            let before = look.usage.saturating_sub(self.usage_at_start).saturating_sub(allowed);
            self.check = Some(Check { from: look.usage, before, end, continued: false });
        }
        steps
    }

    /// Counts an overrun of the window of `frame` that ended at `end_ns`; the action to take, if this one
    /// reaches the policy's count.
    fn count_overrun(&mut self, policy: &OverrunPolicy, frame: u64, end_ns: u64) -> Option<OverrunAction> {
        if self.acted.is_some() || self.overruns[..self.overrun_count].iter().any(|(f, _)| *f == frame) {
            return None;
        }
        // Forget overruns older than the policy's frames.
        let horizon = frame.saturating_sub(u64::from(policy.frames) - 1);
        let mut kept = 0;
        for i in 0..self.overrun_count {
            if self.overruns[i].0 >= horizon {
                self.overruns[kept] = self.overruns[i];
                kept += 1;
            }
        }
        self.overrun_count = kept;
        if self.overrun_count == MAX_COUNT {
            self.overruns.copy_within(1.., 0);
            self.overrun_count -= 1;
        }
        self.overruns[self.overrun_count] = (frame, end_ns);
        self.overrun_count += 1;
        if self.overrun_count < policy.count as usize || policy.action == OverrunAction::Ignore {
            return None;
        }
        let first = self.overruns[..self.overrun_count].iter().min_by_key(|(f, _)| *f).copied().unwrap_or((frame, end_ns));
        if matches!(policy.action, OverrunAction::Idle | OverrunAction::Stop) {
            self.idle = true;
        }
        self.acted = Some((first.1, first.0));
        Some(policy.action)
    }
}

impl TimeGuard {
    /// Opens the files of `cg` the guard reads and writes.
    pub fn new(cg: &PartitionCgroup, policy: OverrunPolicy) -> Result<TimeGuard> {
        let (path, format) = match cg.cpuacct_dir() {
            Some(d) => (d.join("cpuacct.usage"), UsageFormat::Nanoseconds),
            None => (cg.v2_dir().map(|d| d.join("cpu.stat")).unwrap_or_default(), UsageFormat::CpuStatMicros),
        };
        let usage = File::open(&path).map_err(path_err("open", &path))?;
        let idle = if policy.demote { cg.cpu_idle_file().and_then(|p| OpenOptions::new().write(true).open(p).ok()) } else { None };
        let kill = cg.v2_dir().and_then(|d| OpenOptions::new().write(true).open(d.join("cgroup.kill")).ok());
        Ok(TimeGuard { policy, usage: (usage, format), idle, kill, program_since: None, state: GuardState::default() })
    }

    /// Reads when its program started running from `clock` (the health monitor's), so that time its launch
    /// takes past a window is not held against it.
    pub fn watch_program(&mut self, clock: Arc<AtomicU64>) {
        self.program_since = Some(clock);
    }

    pub fn policy(&self) -> OverrunPolicy {
        self.policy
    }

    /// Whether it can be demoted (its cgroup has a `cpu.idle`).
    pub fn can_demote(&self) -> bool {
        self.idle.is_some()
    }

    /// The partition's CPU time now, ns (0 when unreadable). One `pread`, no allocation.
    fn usage_ns(&self) -> u64 {
        let mut buf = [0u8; 512];
        let Ok(n) = self.usage.0.read_at(&mut buf, 0) else { return 0 };
        let text = &buf[..n];
        match self.usage.1 {
            UsageFormat::Nanoseconds => parse_u64(text),
            UsageFormat::CpuStatMicros => {
                let key = b"usage_usec ";
                text.windows(key.len()).position(|w| w == key).map(|i| parse_u64(&text[i + key.len()..]) * 1_000).unwrap_or(0)
            }
        }
    }

    /// Whether the executor must keep it frozen (its action was `idle` or `stop`).
    pub fn keeps_frozen(&self) -> bool {
        self.state.idle
    }

    /// Before its thaw: a demoted partition gets its weight back for its own window.
    pub fn before_thaw(&mut self) {
        if self.state.demoted {
            if let Some(f) = &self.idle {
                let _ = f.write_at(b"0", 0);
            }
            self.state.demoted = false;
        }
    }

    /// After the boundary's freezes and thaws (`now`): judges what partition `p` used since the last look,
    /// then starts a window (`thawed`) and/or a check (`window_ended`: the planned end of its window).
    /// `stopped` tells whether all its tasks are stopped now; it is read only when needed.
    pub fn at_boundary(&mut self, p: usize, frame: u64, now: u64, thawed: bool, window_ended: Option<u64>, stopped: impl Fn() -> Option<bool>, ring: &OverrunRing) {
        let needs_usage = self.state.needs_usage(thawed, window_ended);
        if !needs_usage && self.state.acted.is_none() {
            return;
        }
        let usage = if needs_usage { self.usage_ns() } else { 0 };
        // Whether it has stopped matters for a partition judged outside its window (to demote it) and one acted
        // on (containment); a partition thawed here is running its own window.
        let judged = (self.state.check.is_some() && !thawed) || self.state.acted.is_some();
        let stopped = if judged { stopped() } else { None };
        let program_since = match &self.program_since {
            Some(c) => Some(c.load(Ordering::Acquire)).filter(|t| *t != 0),
            None => Some(0),
        };
        let look = Look { frame, now, usage, thawed, window_ended, stopped, program_since };
        let steps = self.state.step(p, &self.policy, self.idle.is_some(), look);
        if let Some(n) = steps.overrun {
            ring.push(n);
        }
        if steps.demote {
            if let Some(f) = &self.idle {
                let _ = f.write_at(b"1", 0);
            }
            ring.push(Note::Demoted { partition: p, at_ns: now });
        }
        if let Some(action) = steps.act {
            let killed = match action {
                OverrunAction::Restart | OverrunAction::Stop => self.kill.as_ref().is_some_and(|f| f.write_at(b"1", 0).is_ok()),
                _ => false,
            };
            ring.push(Note::Action { partition: p, action, killed, at_ns: now });
        }
        if let Some(n) = steps.contained {
            ring.push(n);
        }
    }
}

/// The decimal number at the start of `text` (0 if none).
fn parse_u64(text: &[u8]) -> u64 {
    text.iter().take_while(|b| b.is_ascii_digit()).fold(0u64, |n, b| n.saturating_mul(10).saturating_add(u64::from(b - b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_go_through_the_ring_in_order_and_whole() {
        let ring = OverrunRing::default();
        let notes = [
            Note::Overrun { partition: 2, frame: 7, past_ns: 1_234_567, before_freeze_ns: 1_000_000, still_running: true, continued: false, at_ns: 99 },
            Note::Demoted { partition: 2, at_ns: 100 },
            Note::Action { partition: 2, action: OverrunAction::Stop, killed: true, at_ns: 101 },
            Note::Contained { partition: 2, first_ns: 50, at_ns: 200, frames: 3 },
        ];
        for n in notes {
            ring.push(n);
        }
        let (read, next, lost) = ring.read_since(0);
        assert_eq!(read, notes.to_vec());
        assert_eq!((next, lost), (4, 0));
        assert!(ring.read_since(next).0.is_empty());
    }

    #[test]
    fn a_slow_reader_is_told_how_many_notes_it_lost() {
        let ring = OverrunRing::default();
        for i in 0..(NOTE_SLOTS as u64 + 10) {
            ring.push(Note::Demoted { partition: 0, at_ns: i });
        }
        let (read, next, lost) = ring.read_since(0);
        assert_eq!((read.len(), next, lost), (NOTE_SLOTS, NOTE_SLOTS as u64 + 10, 10));
        assert_eq!(read[0], Note::Demoted { partition: 0, at_ns: 10 });
    }


    fn policy(count: u32, frames: u32, action: OverrunAction) -> OverrunPolicy {
        OverrunPolicy { tolerance_ns: 200_000, count, frames, action, demote: true }
    }

    /// One frame of a 3 ms plan for the partition whose window is the first millisecond: thawed at 0 with
    /// `usage` µs used so far, window judged at the next boundary (2 ms) with `used_then` µs used.
    fn frame(g: &mut GuardState, pol: &OverrunPolicy, frame: u64, usage_us: u64, used_then_us: u64, stopped: bool) -> Steps {
        let base = frame * 3_000_000;
        g.step(0, pol, true, Look { frame, now: base, usage: usage_us * 1000, thawed: true, window_ended: None, stopped: None, program_since: Some(0) });
        g.step(0, pol, true, Look { frame, now: base + 1_000_000, usage: (usage_us + 1000) * 1000, thawed: false, window_ended: Some(base + 1_000_000), stopped: Some(true), program_since: Some(0) });
        g.step(0, pol, true, Look { frame, now: base + 2_000_000, usage: used_then_us * 1000, thawed: false, window_ended: None, stopped: Some(stopped), program_since: Some(0) })
    }

    #[test]
    fn time_within_the_window_and_the_tolerance_is_no_overrun() {
        let pol = policy(1, 1, OverrunAction::Stop);
        let mut g = GuardState::default();
        // 1000 µs of window, 1150 µs used: 150 µs past, under the 200 µs tolerance.
        assert_eq!(frame(&mut g, &pol, 0, 0, 1150, true), Steps::default());
    }

    #[test]
    fn a_partition_running_on_is_demoted_and_watched_until_it_stops() {
        let pol = policy(3, 10, OverrunAction::Stop);
        let mut g = GuardState::default();
        let s = frame(&mut g, &pol, 0, 0, 1900, false);
        assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 900_000, still_running: true, continued: false, .. })), "{s:?}");
        assert!(s.demote && s.act.is_none());
        // Next boundary: it ran 300 µs more, then stopped.
        let s = g.step(0, &pol, true, Look { frame: 1, now: 3_000_000, usage: 2_200_000, thawed: false, window_ended: None, stopped: Some(true), program_since: Some(0) });
        assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 300_000, continued: true, .. })), "{s:?}");
        assert!(!s.demote, "demoted once");
        assert_eq!(g.check, None, "no more looks once stopped");
    }

    #[test]
    fn the_action_comes_at_the_count_th_overrun_within_the_frames_and_containment_is_timed_from_the_first() {
        let pol = policy(2, 3, OverrunAction::Stop);
        let mut g = GuardState::default();
        assert_eq!(frame(&mut g, &pol, 0, 0, 1500, false).act, None);
        // The second overrun four frames later: the first is out of the 3-frame look-back.
        assert_eq!(frame(&mut g, &pol, 4, 1500, 3000, false).act, None);
        let s = frame(&mut g, &pol, 5, 3000, 4500, false);
        assert_eq!(s.act, Some(OverrunAction::Stop));
        assert!(g.idle, "a stopped partition is kept frozen");
        // Contained at the next look that finds it stopped: timed from the end of frame 4's window.
        let s = g.step(0, &pol, true, Look { frame: 6, now: 18_000_000, usage: 5000_000, thawed: false, window_ended: None, stopped: Some(true), program_since: Some(0) });
        assert_eq!(s.contained, Some(Note::Contained { partition: 0, first_ns: 4 * 3_000_000 + 1_000_000, at_ns: 18_000_000, frames: 2 }));
    }

    #[test]
    fn a_window_thawed_late_past_its_end_counts_from_its_thaw_to_its_freeze() {
        // A host stall held the executor: the thaw planned at 0 came at 1.2 ms, after the window's end at 1 ms,
        // and the freeze at 1.25 ms; the partition used 40 µs in between, all of it its window's.
        let pol = policy(1, 1, OverrunAction::Stop);
        let mut g = GuardState::default();
        g.step(0, &pol, true, Look { frame: 0, now: 1_200_000, usage: 0, thawed: true, window_ended: None, stopped: None, program_since: Some(0) });
        g.step(0, &pol, true, Look { frame: 0, now: 1_250_000, usage: 40_000, thawed: false, window_ended: Some(1_000_000), stopped: Some(true), program_since: Some(0) });
        let s = g.step(0, &pol, true, Look { frame: 0, now: 2_000_000, usage: 45_000, thawed: false, window_ended: None, stopped: Some(true), program_since: Some(0) });
        assert_eq!(s, Steps::default());
    }

    #[test]
    fn time_that_kept_the_executor_from_freezing_it_counts_too() {
        // Thawed at 0 for a 1 ms window; its kernel work held the CPU until 9 ms, when the executor froze it.
        let pol = policy(1, 1, OverrunAction::Idle);
        let mut g = GuardState::default();
        g.step(0, &pol, true, Look { frame: 0, now: 0, usage: 0, thawed: true, window_ended: None, stopped: None, program_since: Some(0) });
        g.step(0, &pol, true, Look { frame: 0, now: 9_000_000, usage: 9_000_000, thawed: false, window_ended: Some(1_000_000), stopped: Some(false), program_since: Some(0) });
        // At the next boundary it has not run since the freeze (the next window's owner had the CPU): logged,
        // not counted yet; at the one after it ran 400 µs more inside its system call: counted then.
        let s = g.step(0, &pol, true, Look { frame: 0, now: 9_100_000, usage: 9_000_000, thawed: false, window_ended: None, stopped: Some(false), program_since: Some(0) });
        assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 8_000_000, still_running: true, .. })), "{s:?}");
        assert_eq!(s.act, None);
        let s = g.step(0, &pol, true, Look { frame: 0, now: 10_000_000, usage: 9_400_000, thawed: false, window_ended: None, stopped: Some(false), program_since: Some(0) });
        assert_eq!(s.act, Some(OverrunAction::Idle), "{s:?}");
        assert_eq!(g.acted, Some((1_000_000, 0)), "counted for the window it overran");
    }

    #[test]
    fn a_partition_not_yet_stopped_is_demoted_even_before_it_runs_on_but_not_counted() {
        // Its window ended on time and it used its window only; a boundary later it had not run again to stop
        // (inside a system call, or waiting for the CPU: the executor cannot tell). Demoted at once; nothing
        // counted. The look after, it had run 5 µs and stopped.
        let pol = policy(1, 1, OverrunAction::Stop);
        let mut g = GuardState::default();
        let s = frame(&mut g, &pol, 0, 0, 1000, false);
        assert_eq!((s.demote, s.overrun, s.act), (true, None, None));
        assert!(g.check.is_some_and(|c| c.continued), "watched on");
        let s = g.step(0, &pol, true, Look { frame: 0, now: 3_000_000, usage: 1_005_000, thawed: false, window_ended: None, stopped: Some(true), program_since: Some(0) });
        assert_eq!(s, Steps::default());
        assert_eq!(g.check, None);
    }

    #[test]
    fn a_partition_given_time_by_a_late_executor_that_never_ran_past_its_freeze_is_not_acted_on() {
        // A spinning partition: the executor came 750 µs late to its window's end (a host stall or someone
        // else's kernel work), and at the next boundary it had not run again yet (others had the CPU), so it was
        // not stopped either. It stops as soon as it runs; twice in a row, never counted.
        let pol = policy(2, 10, OverrunAction::Stop);
        let mut g = GuardState::default();
        for f in 0..2u64 {
            let base = f * 3_000_000;
            let used = f * 1_750_000;
            g.step(0, &pol, true, Look { frame: f, now: base, usage: used, thawed: true, window_ended: None, stopped: None, program_since: Some(0) });
            g.step(0, &pol, true, Look { frame: f, now: base + 1_750_000, usage: used + 1_750_000, thawed: false, window_ended: Some(base + 1_000_000), stopped: Some(false), program_since: Some(0) });
            let s = g.step(0, &pol, true, Look { frame: f, now: base + 2_000_000, usage: used + 1_750_000, thawed: false, window_ended: None, stopped: Some(false), program_since: Some(0) });
            assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 750_000, before_freeze_ns: 750_000, still_running: true, .. })), "{s:?}");
            assert_eq!(s.act, None);
            // It ran 5 µs and stopped, or it was still waiting when its next window came.
            let stopped = f == 0;
            let s = g.step(0, &pol, true, Look { frame: f, now: base + 2_900_000, usage: used + 1_755_000, thawed: false, window_ended: None, stopped: Some(stopped), program_since: Some(0) });
            assert_eq!((s.act, g.pending.is_some()), (None, !stopped), "{s:?}");
        }
        assert_eq!((g.overrun_count, g.idle), (0, false));
    }

    #[test]
    fn time_past_the_end_of_a_partition_that_stopped_is_logged_but_not_acted_on() {
        // 3 ms past its end (a host stall charged to it), stopped by the next look: logged, never counted.
        let pol = policy(1, 1, OverrunAction::Stop);
        let mut g = GuardState::default();
        let s = frame(&mut g, &pol, 0, 0, 4000, true);
        assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 3_000_000, still_running: false, .. })), "{s:?}");
        assert_eq!((s.act, g.idle), (None, false));
    }

    #[test]
    fn time_past_a_window_while_the_partition_was_still_launched_is_logged_but_not_counted() {
        // Its `execve` ran 900 µs past the window of frame 0, and was still running: the launch's, not its
        // program's, which the health monitor saw running only at 1.5 ms. The same in frame 1 counts.
        let pol = policy(1, 1, OverrunAction::Stop);
        let mut g = GuardState::default();
        let look = |frame: u64, at_us: u64, usage_us: u64, thawed: bool, ended: Option<u64>, stopped: Option<bool>, since: Option<u64>| Look {
            frame,
            now: at_us * 1000,
            usage: usage_us * 1000,
            thawed,
            window_ended: ended.map(|e| e * 1000),
            stopped,
            program_since: since.map(|t| t * 1000),
        };
        g.step(0, &pol, true, look(0, 0, 0, true, None, None, None));
        g.step(0, &pol, true, look(0, 1000, 1000, false, Some(1000), Some(false), None));
        let s = g.step(0, &pol, true, look(0, 2000, 1900, false, None, Some(false), Some(1500)));
        assert!(matches!(s.overrun, Some(Note::Overrun { past_ns: 900_000, still_running: true, .. })), "{s:?}");
        assert_eq!((s.act, g.idle), (None, false), "not counted");
        g.step(0, &pol, true, look(1, 3000, 1900, true, None, None, Some(1500)));
        g.step(0, &pol, true, look(1, 4000, 2900, false, Some(4000), Some(false), Some(1500)));
        let s = g.step(0, &pol, true, look(1, 5000, 3800, false, None, Some(false), Some(1500)));
        assert_eq!(s.act, Some(OverrunAction::Stop), "{s:?}");
    }

    #[test]
    fn ignore_counts_but_never_acts() {
        let pol = policy(1, 1, OverrunAction::Ignore);
        let mut g = GuardState::default();
        let s = frame(&mut g, &pol, 0, 0, 5000, false);
        assert!(s.overrun.is_some() && s.act.is_none() && !g.idle);
    }

    #[test]
    fn counters_are_read_from_both_formats() {
        assert_eq!(parse_u64(b"123456\n"), 123_456);
        assert_eq!(parse_u64(b""), 0);
    }
}
