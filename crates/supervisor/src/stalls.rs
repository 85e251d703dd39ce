//! What delayed a late window start: the plan executor notes each start later than a threshold in a ring
//! (three atomic stores, nothing else on its path), a kernel trace of the plan's CPU (an ftrace instance of
//! partita's own: scheduler switches and wake-ups, interrupts, softirqs, timers, kernel page faults) streams
//! into a reader that keeps its last 200 ms, and for every noted stall the reader says what happened between the
//! planned start and the executor's wake-up.
use crate::error::{path_err, Result, SupervisorError};
use std::collections::VecDeque;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The executor thread's name, as the trace shows it.
pub const EXECUTOR_COMM: &str = "partita-plan";

/// How many late window starts the executor keeps for the reader (a reader polling every 50 ms misses none
/// unless more than this many arrive between two polls).
pub const STALL_SLOTS: usize = 64;

/// The window starts later than the executor's stall threshold, in a ring the executor writes (two relaxed
/// stores and one release store per stall, no allocation) and one reader reads behind it.
pub struct StallRing {
    seq: AtomicU64,
    slots: [(AtomicU64, AtomicU64); STALL_SLOTS],
    /// The planned start the executor waits for (or is late for) now: while a stall lasts, the reader keeps
    /// the trace from there on, however long the stall.
    waiting_for: AtomicU64,
    /// The plan's wake lead: the executor wakes up to this long before a start and waits for it on the clock.
    wake_lead: AtomicU64,
}

impl Default for StallRing {
    fn default() -> Self {
        StallRing {
            seq: AtomicU64::new(0),
            slots: std::array::from_fn(|_| (AtomicU64::new(0), AtomicU64::new(0))),
            waiting_for: AtomicU64::new(u64::MAX),
            wake_lead: AtomicU64::new(0),
        }
    }
}

/// What the reader got since its last read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewStalls {
    /// `(planned ns, woke ns)` of each, oldest first.
    pub stalls: Vec<(u64, u64)>,
    /// Overwritten before they were read.
    pub lost: u64,
    /// The sequence to read from next time.
    pub next: u64,
}

impl StallRing {
    /// Called by the executor only (one writer).
    pub fn record(&self, planned_ns: u64, woke_ns: u64) {
        let seq = self.seq.load(Ordering::Relaxed);
        let slot = &self.slots[(seq % STALL_SLOTS as u64) as usize];
        slot.0.store(planned_ns, Ordering::Relaxed);
        slot.1.store(woke_ns, Ordering::Relaxed);
        self.seq.store(seq + 1, Ordering::Release);
    }

    /// Called by the executor before it sleeps for a boundary (one release store: a reader that sees it also
    /// sees every stall recorded before it).
    pub fn waiting_for(&self, planned_ns: u64) {
        self.waiting_for.store(planned_ns, Ordering::Release);
    }

    /// Set once, before the executor starts: its wake lead, ns.
    pub fn set_wake_lead(&self, lead_ns: u64) {
        self.wake_lead.store(lead_ns, Ordering::Relaxed);
    }

    pub fn wake_lead(&self) -> u64 {
        self.wake_lead.load(Ordering::Relaxed)
    }

    /// The planned start the executor waits for now (`u64::MAX` before it started).
    pub fn waits_for(&self) -> u64 {
        self.waiting_for.load(Ordering::Acquire)
    }

    /// How many stalls were recorded so far.
    pub fn count(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// The stalls recorded from sequence `from` on. A slot the executor may have been rewriting while it was
    /// read is counted as lost, never returned torn.
    pub fn since(&self, from: u64) -> NewStalls {
        let end = self.seq.load(Ordering::Acquire);
        // The oldest slot may be the one the executor rewrites next (while it does, `seq` has not moved yet).
        let first = from.max(end.saturating_sub(STALL_SLOTS as u64 - 1));
        let mut out = NewStalls { stalls: Vec::new(), lost: first.saturating_sub(from), next: end };
        for k in first..end {
            let slot = &self.slots[(k % STALL_SLOTS as u64) as usize];
            let v = (slot.0.load(Ordering::Relaxed), slot.1.load(Ordering::Relaxed));
            std::sync::atomic::fence(Ordering::Acquire);
            // Slot k is rewritten for stall k + SLOTS, which starts only once stall k + SLOTS − 1 is recorded.
            if self.seq.load(Ordering::Relaxed) < k + STALL_SLOTS as u64 {
                out.stalls.push(v);
            } else {
                out.lost += 1;
            }
        }
        out
    }
}

const TRACEFS: &str = "/sys/kernel/tracing";
/// Events of the trace; those the kernel lacks are left out.
const EVENTS: [&str; 8] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_waking",
    "irq/irq_handler_entry",
    "irq/softirq_entry",
    "irq_vectors/local_timer_entry",
    "timer/hrtimer_expire_entry",
    "exceptions/page_fault_kernel",
];

/// The wake-up events keep only the executor's: the analysis needs no other, and at every window start the
/// freezer wakes each thread of two partitions, two events apiece, which the traced CPU pays for in the
/// window it starts (docs/soak.md, "What tracing costs").
const WAKEUP_EVENTS: [&str; 2] = ["sched/sched_wakeup", "sched/sched_waking"];

/// An ftrace instance on one CPU, read as a stream (its CPU's `trace_pipe`, without ever stopping it); removed
/// on drop (and tracefs unmounted if it was mounted for it).
pub struct Tracer {
    dir: PathBuf,
    mounted_here: bool,
    pipe: Option<std::fs::File>,
    partial: Vec<u8>,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(path_err("write", path))
}

impl Tracer {
    /// Starts tracing `cpu` into a fresh instance `partita-<pid>-cpu<cpu>`: every event the stall analysis
    /// reads, the wake-ups only the executor's.
    pub fn start(cpu: usize) -> Result<Tracer> {
        Tracer::open(cpu, &EVENTS, true)
    }

    /// Starts tracing every scheduler switch of `cpu` (every task's, no other event), into a fresh instance:
    /// what [`crate::herd`] reads.
    pub fn switches(cpu: usize) -> Result<Tracer> {
        Tracer::open(cpu, &["sched/sched_switch"], false)
    }

    fn open(cpu: usize, events: &[&str], executor_wakeups_only: bool) -> Result<Tracer> {
        let root = Path::new(TRACEFS);
        let mut mounted_here = false;
        if !root.join("instances").is_dir() {
            crate::command::run("mount", &["-t", "tracefs", "nodev", TRACEFS])
                .map_err(|e| SupervisorError::Tracefs { path: TRACEFS, source: Box::new(e) })?;
            mounted_here = true;
        }
        let dir = root.join("instances").join(format!("{}{}-cpu{cpu}", INSTANCE_PREFIX, std::process::id()));
        std::fs::create_dir(&dir).map_err(path_err("mkdir", &dir))?;
        let mut t = Tracer { dir, mounted_here, pipe: None, partial: Vec::new() };
        write(&t.dir.join("trace_clock"), "mono")?;
        write(&t.dir.join("buffer_size_kb"), "4096")?;
        let mask = format!("{:x}", 1u128 << cpu);
        write(&t.dir.join("tracing_cpumask"), &mask)?;
        for e in events {
            let enable = t.dir.join("events").join(e).join("enable");
            if enable.exists() {
                if executor_wakeups_only && WAKEUP_EVENTS.contains(e) {
                    write(&t.dir.join("events").join(e).join("filter"), &format!("comm == \"{EXECUTOR_COMM}\""))?;
                }
                write(&enable, "1")?;
            }
        }
        let pipe = t.dir.join("per_cpu").join(format!("cpu{cpu}")).join("trace_pipe");
        use std::os::unix::fs::OpenOptionsExt;
        t.pipe = Some(std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&pipe).map_err(path_err("open", &pipe))?);
        write(&t.dir.join("tracing_on"), "1")?;
        Ok(t)
    }

    /// The complete lines traced since the last call (the stream is consumed: nothing is read twice).
    pub fn read_new(&mut self) -> Result<String> {
        let Some(pipe) = self.pipe.as_mut() else { return Ok(String::new()) };
        let mut buf = [0u8; 65536];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(path_err("read", &self.dir.join("per_cpu"))(e)),
            }
        }
        let complete = self.partial.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        let rest = self.partial.split_off(complete);
        let text = String::from_utf8_lossy(&std::mem::replace(&mut self.partial, rest)).into_owned();
        Ok(text)
    }
}

/// Instances of partita's in tracefs start with this (`partita down` removes those left by a crash).
pub const INSTANCE_PREFIX: &str = "partita-";

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
        self.pipe = None;
        let _ = std::fs::remove_dir(&self.dir);
        if self.mounted_here {
            let _ = crate::command::run("umount", &[TRACEFS]);
        }
    }
}

/// Removes trace instances a crashed partita left (`partita-*` whose pid is gone).
pub fn remove_stale_instances() {
    let Ok(entries) = std::fs::read_dir(Path::new(TRACEFS).join("instances")) else { return };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(INSTANCE_PREFIX).and_then(|r| r.split('-').next()).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// How much of the trace the watcher keeps behind its newest event when no stall is under way (a stall under
/// way, or noted and not yet explained, keeps the trace from 3 ms before its planned start, up to [`MAX_KEEP_NS`]).
const KEEP_NS: u64 = 200_000_000;
/// The most the watcher keeps for a stall under way: a stall longer than this is explained from its last part.
const MAX_KEEP_NS: u64 = 10_000_000_000;
/// A stall's excerpt: this long before its planned start, and after the executor woke.
pub const BEFORE_NS: u64 = 3_000_000;
pub const AFTER_NS: u64 = 500_000;

/// A late window start, explained, with the trace lines around it.
#[derive(Debug, Clone)]
pub struct Explained {
    pub planned_ns: u64,
    pub woke_ns: u64,
    pub explanation: Explanation,
    pub excerpt: String,
}

/// Follows one plan's stall ring and its CPU's trace, and explains every stall the executor noted.
pub struct Watcher {
    pub cpu: usize,
    tracer: Tracer,
    ring: Arc<StallRing>,
    next: u64,
    recent: VecDeque<(TraceEvent, String)>,
    /// Noted stalls waiting for the trace after their wake-up, and how many polls they have waited.
    pending: Vec<(u64, u64, u32)>,
    /// Stalls overwritten in the ring before they were read.
    pub lost: u64,
    /// Where the kernel's trace buffer overran: (time of the last event read before it, events lost).
    trace_lost: Vec<(u64, u64)>,
}

impl Watcher {
    /// Starts tracing `cpu`; stalls noted from now on are explained.
    pub fn start(cpu: usize, ring: Arc<StallRing>) -> Result<Watcher> {
        let tracer = Tracer::start(cpu)?;
        let next = ring.count();
        Ok(Watcher { cpu, tracer, ring, next, recent: VecDeque::new(), pending: Vec::new(), lost: 0, trace_lost: Vec::new() })
    }

    /// Reads what was traced and noted since the last poll (call it every few tens of ms) and explains each
    /// stall whose trace is complete: once events past its wake-up are in, or after three polls.
    pub fn poll(&mut self) -> Result<Vec<Explained>> {
        // The start the executor waits for is read before the trace: a stall that ends after this read is in
        // the ring by the next poll, and its trace is still kept.
        let waits_for = self.ring.waits_for();
        let text = self.tracer.read_new()?;
        for line in text.lines() {
            if let Some(lost) = lost_events(line) {
                // The kernel's buffer overran: the events before the next one kept are incomplete.
                self.trace_lost.push((self.recent.back().map_or(0, |(e, _)| e.ns), lost));
                continue;
            }
            if let Some(e) = parse_trace(line).pop() {
                self.recent.push_back((e, line.to_string()));
            }
        }
        let new = self.ring.since(self.next);
        self.next = new.next;
        self.lost += new.lost;
        self.pending.extend(new.stalls.into_iter().map(|(p, w)| (p, w, 0)));
        let newest = self.recent.back().map_or(0, |(e, _)| e.ns);
        let keep_from = self.pending.iter().map(|(p, _, _)| *p).chain([waits_for]).min().unwrap_or(u64::MAX).saturating_sub(BEFORE_NS);
        let keep_from = keep_from.min(newest.saturating_sub(KEEP_NS)).max(newest.saturating_sub(MAX_KEEP_NS));
        while self.recent.front().is_some_and(|(e, _)| e.ns < keep_from) {
            self.recent.pop_front();
        }
        let oldest = self.recent.front().map_or(newest, |(e, _)| e.ns);
        self.trace_lost.retain(|(after, _)| *after + BEFORE_NS >= oldest);
        let mut out = Vec::new();
        let mut waiting = Vec::new();
        for (planned, woke, polls) in std::mem::take(&mut self.pending) {
            if newest < woke + AFTER_NS && polls < 3 {
                waiting.push((planned, woke, polls + 1));
                continue;
            }
            out.push(self.explain(planned, woke));
        }
        self.pending = waiting;
        Ok(out)
    }

    fn explain(&self, planned: u64, woke: u64) -> Explained {
        let events: Vec<TraceEvent> = self.recent.iter().map(|(e, _)| e.clone()).collect();
        let mut explanation = explain(&events, planned, woke, self.ring.wake_lead());
        // Events lost in the kernel's buffer after an event of the 3 ms before the planned start or of the stall:
        // the trace may be silent for that reason, not because nothing happened.
        if let Some((_, n)) = self.trace_lost.iter().find(|(after, _)| *after + BEFORE_NS >= planned && *after <= woke) {
            explanation = Explanation { lateness_us: explanation.lateness_us, cause: "trace-lost", detail: format!("the kernel's trace buffer lost {n} events around the stall (it read as: {})", explanation.detail) };
        }
        let excerpt = self.recent.iter().filter(|(e, _)| e.ns + BEFORE_NS >= planned && e.ns <= woke + AFTER_NS).map(|(_, l)| format!("{l}\n")).collect();
        Explained { planned_ns: planned, woke_ns: woke, explanation, excerpt }
    }
}

/// One line of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub ns: u64,
    /// The task running when it happened (`comm-pid`).
    pub task: String,
    pub event: String,
    pub fields: String,
}

/// Parses the text of a `trace` file (lines like
/// `comm-12 [001] d..2. 16703.146485: sched_switch: prev_comm=… ==> next_comm=…`).
pub fn parse_trace(text: &str) -> Vec<TraceEvent> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (task, rest) = l.split_once(" [")?;
            let (_, rest) = rest.split_once("] ")?;
            let mut parts = rest.splitn(3, ": ");
            let ts = parts.next()?.split_whitespace().last()?;
            let event = parts.next()?.trim().to_string();
            let fields = parts.next().unwrap_or("").to_string();
            let (s, us) = ts.split_once('.')?;
            let ns = s.parse::<u64>().ok()? * 1_000_000_000 + format!("{us:0<9}")[..9].parse::<u64>().ok()?;
            Some(TraceEvent { ns, task: task.trim().to_string(), event, fields })
        })
        .collect()
}

/// The line `trace_pipe` writes where the kernel's buffer overran (`CPU:1 [LOST 1234 EVENTS]`): how many.
pub fn lost_events(line: &str) -> Option<u64> {
    let rest = line.trim().strip_prefix("CPU:")?;
    let (_, rest) = rest.split_once(" [LOST ")?;
    rest.strip_suffix(" EVENTS]")?.trim().parse().ok()
}

/// The value of `key=` in a trace event's fields.
pub fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let at = fields.find(&format!("{key}="))? + key.len() + 1;
    fields[at..].split_whitespace().next()
}

/// What the trace says about one late start.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explanation {
    pub lateness_us: f64,
    /// One of: `no-event` (nothing on the CPU: the vCPU did not run, or interrupts were off), `interrupts`,
    /// `other-task` (a higher-priority task), `not-preempted` (woken, but only lower-priority tasks ran until it
    /// did), `page-fault`, `late-timer`, `no-trace` (the trace does not cover it), `trace-lost` (the kernel's
    /// trace buffer overran around it).
    pub cause: &'static str,
    pub detail: String,
}

/// The stretches (ns) without an event on the CPU from `from` to `until`: between them, the events in between.
fn quiet_stretches(window: &[&TraceEvent], from: u64, until: u64) -> impl Iterator<Item = u64> {
    let mut times: Vec<u64> = window.iter().map(|e| e.ns).filter(|t| *t > from && *t < until).collect();
    times.insert(0, from);
    times.push(until);
    (1..times.len()).map(move |i| times[i] - times[i - 1])
}

/// Explains the start planned at `planned_ns` that the executor woke for at `woke_ns`, from `events` of its CPU;
/// `lead_ns` is the plan's wake lead (the executor's timer was set that long before the start).
pub fn explain(events: &[TraceEvent], planned_ns: u64, woke_ns: u64, lead_ns: u64) -> Explanation {
    let lateness_us = woke_ns.saturating_sub(planned_ns) as f64 / 1e3;
    let window: Vec<&TraceEvent> = events.iter().filter(|e| e.ns + 200_000 + lead_ns >= planned_ns && e.ns <= woke_ns + 100_000).collect();
    if window.is_empty() || events.first().is_none_or(|e| e.ns > planned_ns) {
        return Explanation { lateness_us, cause: "no-trace", detail: "the trace does not cover the planned start".into() };
    }
    let is_exec_wake = |e: &&TraceEvent| (e.event == "sched_wakeup" || e.event == "sched_waking") && field(&e.fields, "comm") == Some(EXECUTOR_COMM);
    // The executor's wake-up for this start: its last before it ran (with a wake lead, before the start).
    let wake = window.iter().filter(|e| e.ns + 50_000 + lead_ns >= planned_ns && e.ns <= woke_ns && is_exec_wake(e)).last().map(|e| e.ns);
    let faults = window.iter().filter(|e| e.event == "page_fault_kernel" && e.task.starts_with(EXECUTOR_COMM)).count();
    let until = wake.unwrap_or(woke_ns).max(planned_ns);
    // The longest stretch without any event on the CPU between the planned start and the wake-up.
    let longest_gap = quiet_stretches(&window, planned_ns, until).max().unwrap_or(0);
    let between = |a: u64, b: u64| window.iter().filter(move |e| e.ns >= a && e.ns <= b);
    let irqs: Vec<String> = between(planned_ns, until)
        .filter(|e| matches!(e.event.as_str(), "irq_handler_entry" | "softirq_entry" | "local_timer_entry"))
        .map(|e| format!("{} {}", e.event, field(&e.fields, "name").or(field(&e.fields, "vec")).or(field(&e.fields, "vector")).unwrap_or("")))
        .collect();
    let span = until - planned_ns;
    if faults > 0 {
        return Explanation { lateness_us, cause: "page-fault", detail: format!("{faults} kernel page fault(s) in the executor around the start") };
    }
    if span * 2 >= woke_ns.saturating_sub(planned_ns) && span > 0 {
        // The wake-up itself came late.
        if longest_gap * 10 >= span * 7 {
            return Explanation {
                lateness_us,
                cause: "no-event",
                detail: format!("no event at all on the CPU for {:.0} µs of the {:.0} µs before the wake-up: the vCPU was not running (host steal, or a halted vCPU the host woke late) or had interrupts off", longest_gap as f64 / 1e3, span as f64 / 1e3),
            };
        }
        if !irqs.is_empty() {
            return Explanation { lateness_us, cause: "interrupts", detail: format!("{} interrupt/softirq entries before the wake-up: {}", irqs.len(), irqs.iter().take(6).cloned().collect::<Vec<_>>().join(", ")) };
        }
        return Explanation { lateness_us, cause: "late-timer", detail: format!("the executor's timer woke it {:.0} µs late with the CPU busy", span as f64 / 1e3) };
    }
    // Woken in time, switched in late: who had the CPU.
    let wake = wake.unwrap_or(planned_ns);
    let switches: Vec<(&str, u32)> = between(wake, woke_ns)
        .filter(|e| e.event == "sched_switch")
        .filter_map(|e| Some((field(&e.fields, "prev_comm")?, field(&e.fields, "prev_prio")?.parse().ok()?)))
        .collect();
    let ran: Vec<String> = switches.iter().map(|(c, p)| format!("{c} (prio {p})")).collect();
    // Woken, then (a timer tick or two aside) no event until it ran and no task switched in: nothing took the
    // CPU from it; the vCPU stopped. Silent: the stretches of more than 100 µs without an event, added up.
    let silent: u64 = quiet_stretches(&window, wake, woke_ns).filter(|g| *g > 100_000).sum();
    let waited = woke_ns.saturating_sub(wake);
    if switches.is_empty() && waited > 0 && silent * 10 >= waited * 7 {
        return Explanation {
            lateness_us,
            cause: "no-event",
            detail: format!(
                "woken {:.0} µs after the planned start, then no task switched in and no event on the CPU for {:.0} µs of the {:.0} µs until it ran (in stretches of more than 100 µs): the vCPU was not running (host steal) or had interrupts off",
                wake.saturating_sub(planned_ns) as f64 / 1e3,
                silent as f64 / 1e3,
                waited as f64 / 1e3
            ),
        };
    }
    // The executor's kernel priority (99 − its SCHED_FIFO priority): a task of a lower priority (a larger
    // number) cannot keep it waiting once woken, unless the CPU itself did not run or could not preempt.
    let executor_prio = window.iter().find(|e| is_exec_wake(e)).and_then(|e| field(&e.fields, "prio")?.parse::<u32>().ok()).unwrap_or(9);
    if !switches.is_empty() && switches.iter().all(|(_, p)| *p > executor_prio) {
        return Explanation {
            lateness_us,
            cause: "not-preempted",
            detail: format!(
                "woken {:.0} µs after the planned start, running {:.0} µs later, while only lower-priority tasks had the CPU ({}): the vCPU was not running or the kernel could not preempt",
                wake.saturating_sub(planned_ns) as f64 / 1e3,
                woke_ns.saturating_sub(wake) as f64 / 1e3,
                ran.join(", ")
            ),
        };
    }
    Explanation {
        lateness_us,
        cause: "other-task",
        detail: format!("woken {:.0} µs after the planned start, running {:.0} µs later; before it the CPU ran: {}{}", wake.saturating_sub(planned_ns) as f64 / 1e3, woke_ns.saturating_sub(wake) as f64 / 1e3, if ran.is_empty() { "(no switch recorded)".into() } else { ran.join(", ") }, if irqs.is_empty() { String::new() } else { format!("; interrupts: {}", irqs.len()) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(task: &str, t: &str, event: &str, fields: &str) -> String {
        format!("{task:>24} [001] d..2. {t}: {event}: {fields}\n")
    }

    #[test]
    fn a_trace_line_is_read_back() {
        let text = format!("# tracer: nop\n{}", line("migration/1-21", "16703.146485", "sched_switch", "prev_comm=migration/1 prev_pid=21 prev_prio=0 prev_state=S ==> next_comm=x next_pid=4 next_prio=120"));
        let e = parse_trace(&text);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].ns, e[0].task.as_str(), e[0].event.as_str()), (16_703_146_485_000, "migration/1-21", "sched_switch"));
        assert_eq!(field(&e[0].fields, "prev_prio"), Some("0"));
    }

    #[test]
    fn silence_interrupts_and_a_neighbour_are_told_apart() {
        let p = 100_000_000_000u64; // planned: 100.000000 s
        let ts = |ns: u64| format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1_000);
        let wake = |ns: u64| line("x-1", &ts(ns), "sched_wakeup", &format!("comm={EXECUTOR_COMM} pid=9 prio=9 target_cpu=001"));
        let before = line("x-1", &ts(p - 150_000), "sched_switch", "prev_comm=a prev_pid=1 prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120");
        // 2 ms of nothing, then the wake-up: the vCPU did not run.
        let silent = parse_trace(&format!("{before}{}", wake(p + 2_000_000)));
        assert_eq!(explain(&silent, p, p + 2_010_000, 0).cause, "no-event");
        // Interrupts all along before the wake-up.
        let irq: String = (1..20).map(|k| line("x-1", &ts(p + k * 100_000), "irq_handler_entry", "irq=11 name=virtio0")).collect();
        let busy = parse_trace(&format!("{before}{irq}{}", wake(p + 2_000_000)));
        let e = explain(&busy, p, p + 2_010_000, 0);
        assert_eq!(e.cause, "interrupts", "{e:?}");
        assert!(e.detail.contains("virtio0"));
        // Woken on time; a higher-priority thread held the CPU.
        let switch = line("x-1", &ts(p + 1_500_000), "sched_switch", &format!("prev_comm=migration/1 prev_pid=21 prev_prio=0 prev_state=S ==> next_comm={EXECUTOR_COMM} next_pid=9 next_prio=9"));
        let other = parse_trace(&format!("{before}{}{switch}", wake(p + 5_000)));
        let e = explain(&other, p, p + 1_500_000, 0);
        assert_eq!(e.cause, "other-task", "{e:?}");
        assert!(e.detail.contains("migration/1 (prio 0)"), "{e:?}");
        // Woken on time, and only a lower-priority task ran until the switch: it cannot have held the CPU.
        let low = line("x-1", &ts(p + 1_500_000), "sched_switch", &format!("prev_comm=rustc prev_pid=21 prev_prio=130 prev_state=R ==> next_comm={EXECUTOR_COMM} next_pid=9 next_prio=9"));
        let e = explain(&parse_trace(&format!("{before}{}{low}", wake(p + 5_000))), p, p + 1_500_000, 0);
        assert_eq!(e.cause, "not-preempted", "{e:?}");
        assert_eq!(lost_events("CPU:1 [LOST 1234 EVENTS]"), Some(1234));
        assert_eq!(lost_events("x-1 [001] d..2. 1.000001: sched_switch: a"), None);
        // Woken a little late, then silence until it ran, with no switch: the vCPU stopped, no task held it.
        let tick = |ns: u64| line("partita-plan-9", &ts(ns), "local_timer_entry", "vector=236");
        let e = explain(&parse_trace(&format!("{before}{}{}", wake(p + 500_000), tick(p + 3_000_000))), p, p + 6_000_000, 0);
        assert_eq!(e.cause, "no-event", "{e:?}");
        assert!(e.detail.contains("no event on the CPU for 5500 µs of the 5500 µs"), "{e:?}");
        // Events all along after the wake-up, but no switch: not the host's silence.
        let ticks: String = (1..50).map(|k| tick(p + 500_000 + k * 100_000)).collect();
        let e = explain(&parse_trace(&format!("{before}{}{ticks}", wake(p + 500_000))), p, p + 6_000_000, 0);
        assert_eq!(e.cause, "other-task", "{e:?}");
        // With a wake lead: woken before the start (an earlier boundary's wake-up before that), then nothing
        // until it ran: the vCPU stopped while the executor waited on the clock.
        let led = parse_trace(&format!("{before}{}{}", wake(p - 140_000), wake(p - 80_000)));
        let e = explain(&led, p, p + 3_000_000, 100_000);
        assert_eq!(e.cause, "no-event", "{e:?}");
        assert!(e.detail.contains("no task switched in and no event on the CPU for 3080 µs"), "{e:?}");
        // With a wake lead, a wake-up itself late: read as before.
        assert_eq!(explain(&silent, p, p + 2_010_000, 100_000).cause, "no-event");
        // A trace that starts after the planned start explains nothing.
        assert_eq!(explain(&parse_trace(&wake(p + 10_000)), p, p + 2_000_000, 0).cause, "no-trace");
    }

    #[test]
    fn the_ring_gives_every_stall_once_and_counts_what_it_overwrote() {
        let r = StallRing::default();
        assert_eq!(r.since(0), NewStalls::default());
        r.record(10, 2_000_010);
        r.record(20, 3_000_020);
        let got = r.since(0);
        assert_eq!(got, NewStalls { stalls: vec![(10, 2_000_010), (20, 3_000_020)], lost: 0, next: 2 });
        assert!(r.since(got.next).stalls.is_empty());
        // More than the ring holds between two reads: the oldest are lost and counted.
        for k in 0..(STALL_SLOTS as u64 + 5) {
            r.record(100 + k, 1_000_200 + k);
        }
        let got = r.since(2);
        assert_eq!(got.lost, 6);
        assert_eq!(got.stalls.len(), STALL_SLOTS - 1);
        assert_eq!(got.stalls[0], (106, 1_000_206));
        assert_eq!(got.next, STALL_SLOTS as u64 + 7);
    }
}
