//! What delayed a late window start: the plan executor notes each start later than a threshold (two atomic
//! stores, nothing else on its path), a kernel trace of the plan's CPU (an ftrace instance of partita's own:
//! scheduler switches and wake-ups, interrupts, softirqs, timers, kernel page faults) is kept running, and a
//! reader that sees a new stall cuts the trace around it and says what happened between the planned start and
//! the executor's wake-up.
use crate::error::{path_err, Result, SupervisorError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The executor thread's name, as the trace shows it.
pub const EXECUTOR_COMM: &str = "partita-plan";

/// The latest window start later than the executor's stall threshold.
#[derive(Default)]
pub struct StallCell {
    seq: AtomicU64,
    planned_ns: AtomicU64,
    woke_ns: AtomicU64,
}

impl StallCell {
    pub fn record(&self, planned_ns: u64, woke_ns: u64) {
        self.planned_ns.store(planned_ns, Ordering::Relaxed);
        self.woke_ns.store(woke_ns, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// `(how many so far, planned ns, woke ns)` of the latest; a stall recorded while reading is read again.
    pub fn latest(&self) -> (u64, u64, u64) {
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            let (p, w) = (self.planned_ns.load(Ordering::Relaxed), self.woke_ns.load(Ordering::Relaxed));
            if self.seq.load(Ordering::Acquire) == seq {
                return (seq, p, w);
            }
        }
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

/// An ftrace instance on one CPU, removed on drop (and tracefs unmounted if it was mounted for it).
pub struct Tracer {
    dir: PathBuf,
    cpu: usize,
    mounted_here: bool,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(path_err("write", path))
}

impl Tracer {
    /// Starts tracing `cpu` into a fresh instance `partita-<pid>-cpu<cpu>`.
    pub fn start(cpu: usize) -> Result<Tracer> {
        let root = Path::new(TRACEFS);
        let mut mounted_here = false;
        if !root.join("instances").is_dir() {
            crate::command::run("mount", &["-t", "tracefs", "nodev", TRACEFS])
                .map_err(|e| SupervisorError::Invalid(format!("tracefs is not mounted at {TRACEFS} and mounting it failed: {e}")))?;
            mounted_here = true;
        }
        let dir = root.join("instances").join(format!("{}{}-cpu{cpu}", INSTANCE_PREFIX, std::process::id()));
        std::fs::create_dir(&dir).map_err(path_err("mkdir", &dir))?;
        let t = Tracer { dir, cpu, mounted_here };
        write(&t.dir.join("trace_clock"), "mono")?;
        write(&t.dir.join("buffer_size_kb"), "4096")?;
        let mask = format!("{:x}", 1u128 << cpu);
        write(&t.dir.join("tracing_cpumask"), &mask)?;
        for e in EVENTS {
            let enable = t.dir.join("events").join(e).join("enable");
            if enable.exists() {
                write(&enable, "1")?;
            }
        }
        write(&t.dir.join("tracing_on"), "1")?;
        Ok(t)
    }

    /// The trace of the CPU since the last cut, and a fresh buffer from here on.
    pub fn cut(&self) -> Result<String> {
        write(&self.dir.join("tracing_on"), "0")?;
        let path = self.dir.join("per_cpu").join(format!("cpu{}", self.cpu)).join("trace");
        let text = std::fs::read_to_string(&path).map_err(path_err("read", &path));
        write(&self.dir.join("trace"), "")?;
        write(&self.dir.join("tracing_on"), "1")?;
        text
    }
}

/// Instances of partita's in tracefs start with this (`partita down` removes those left by a crash).
pub const INSTANCE_PREFIX: &str = "partita-";

impl Drop for Tracer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("tracing_on"), "0");
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

fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    let at = fields.find(&format!("{key}="))? + key.len() + 1;
    fields[at..].split_whitespace().next()
}

/// What the trace says about one late start.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explanation {
    pub lateness_us: f64,
    /// One of: `no-event` (nothing on the CPU: the vCPU did not run, or interrupts were off), `interrupts`,
    /// `other-task` (a higher-priority task), `not-preempted` (woken, but only lower-priority tasks ran until it
    /// did), `page-fault`, `late-timer`, `no-trace` (the trace does not cover it).
    pub cause: &'static str,
    pub detail: String,
}

/// Explains the start planned at `planned_ns` that the executor woke for at `woke_ns`, from `events` of its CPU.
pub fn explain(events: &[TraceEvent], planned_ns: u64, woke_ns: u64) -> Explanation {
    let lateness_us = woke_ns.saturating_sub(planned_ns) as f64 / 1e3;
    let window: Vec<&TraceEvent> = events.iter().filter(|e| e.ns + 200_000 >= planned_ns && e.ns <= woke_ns + 100_000).collect();
    if window.is_empty() || events.first().is_none_or(|e| e.ns > planned_ns) {
        return Explanation { lateness_us, cause: "no-trace", detail: "the trace does not cover the planned start".into() };
    }
    let is_exec_wake = |e: &&TraceEvent| (e.event == "sched_wakeup" || e.event == "sched_waking") && field(&e.fields, "comm") == Some(EXECUTOR_COMM);
    let wake = window.iter().find(|e| e.ns + 50_000 >= planned_ns && is_exec_wake(e)).map(|e| e.ns);
    let faults = window.iter().filter(|e| e.event == "page_fault_kernel" && e.task.starts_with(EXECUTOR_COMM)).count();
    let until = wake.unwrap_or(woke_ns).max(planned_ns);
    // The longest stretch without any event on the CPU between the planned start and the wake-up.
    let mut times: Vec<u64> = window.iter().map(|e| e.ns).filter(|t| *t > planned_ns && *t < until).collect();
    times.insert(0, planned_ns);
    times.push(until);
    let longest_gap = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
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
        assert_eq!(explain(&silent, p, p + 2_010_000).cause, "no-event");
        // Interrupts all along before the wake-up.
        let irq: String = (1..20).map(|k| line("x-1", &ts(p + k * 100_000), "irq_handler_entry", "irq=11 name=virtio0")).collect();
        let busy = parse_trace(&format!("{before}{irq}{}", wake(p + 2_000_000)));
        let e = explain(&busy, p, p + 2_010_000);
        assert_eq!(e.cause, "interrupts", "{e:?}");
        assert!(e.detail.contains("virtio0"));
        // Woken on time; a higher-priority thread held the CPU.
        let switch = line("x-1", &ts(p + 1_500_000), "sched_switch", &format!("prev_comm=migration/1 prev_pid=21 prev_prio=0 prev_state=S ==> next_comm={EXECUTOR_COMM} next_pid=9 next_prio=9"));
        let other = parse_trace(&format!("{before}{}{switch}", wake(p + 5_000)));
        let e = explain(&other, p, p + 1_500_000);
        assert_eq!(e.cause, "other-task", "{e:?}");
        assert!(e.detail.contains("migration/1 (prio 0)"), "{e:?}");
        // Woken on time, and only a lower-priority task ran until the switch: it cannot have held the CPU.
        let low = line("x-1", &ts(p + 1_500_000), "sched_switch", &format!("prev_comm=rustc prev_pid=21 prev_prio=130 prev_state=R ==> next_comm={EXECUTOR_COMM} next_pid=9 next_prio=9"));
        let e = explain(&parse_trace(&format!("{before}{}{low}", wake(p + 5_000))), p, p + 1_500_000);
        assert_eq!(e.cause, "not-preempted", "{e:?}");
        // A trace that starts after the planned start explains nothing.
        assert_eq!(explain(&parse_trace(&wake(p + 10_000)), p, p + 2_000_000).cause, "no-trace");
    }

    #[test]
    fn the_cell_keeps_the_latest_stall() {
        let c = StallCell::default();
        assert_eq!(c.latest(), (0, 0, 0));
        c.record(10, 2_000_010);
        c.record(20, 3_000_020);
        assert_eq!(c.latest(), (2, 20, 3_000_020));
    }
}
