//! The health monitor: reaps every partition's root process, classifies how it ended (exit status, signal,
//! OOM kill from the cgroup's counter), applies the partition's action and logs every event as a JSON line.
use crate::cgroup::PartitionCgroup;
use crate::clock::{monotonic_ns, unix_ms};
use crate::error::Result;
use crate::launch::{try_wait, Started};
use partita_os::seccomp_notify::Listener;
use serde::Serialize;
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the supervisor does when a partition ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Cold start again, at most `max` times in any `within` interval; beyond that the partition is stopped.
    /// The first restart waits `backoff`, each further one within the interval twice as long as the one
    /// before: a crash loop cannot keep the supervisor (and the machine) busy.
    Restart { max: u32, within: Duration, backoff: Duration },
    /// Leave it stopped (its cgroup is emptied).
    Stop,
    /// Log it and do nothing else.
    Ignore,
}

/// How a partition's root process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExitKind {
    Exited { code: i32 },
    Signaled { signal: i32 },
    /// Killed by the kernel's OOM killer (its cgroup's OOM-kill counter rose).
    OomKilled,
}

impl ExitKind {
    pub fn classify(status: i32, oom_kills_during_run: u64) -> ExitKind {
        if libc::WIFEXITED(status) {
            ExitKind::Exited { code: libc::WEXITSTATUS(status) }
        } else if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL && oom_kills_during_run > 0 {
            ExitKind::OomKilled
        } else {
            ExitKind::Signaled { signal: libc::WTERMSIG(status) }
        }
    }
}

/// One line of the event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    pub unix_ms: u64,
    pub monotonic_ns: u64,
    pub partition: String,
    pub event: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit: Option<ExitKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

type Sink = Option<Box<dyn Write + Send>>;

/// Where events go: a JSON-lines writer, and a copy kept in memory for status and tests.
#[derive(Clone)]
pub struct EventLog {
    inner: Arc<Mutex<(Sink, Vec<Event>)>>,
}

impl EventLog {
    pub fn new(writer: Option<Box<dyn Write + Send>>) -> Self {
        EventLog { inner: Arc::new(Mutex::new((writer, Vec::new()))) }
    }

    pub fn record(&self, partition: &str, event: &'static str, pid: Option<i32>, exit: Option<ExitKind>, detail: Option<String>) {
        let e = Event { unix_ms: unix_ms(), monotonic_ns: monotonic_ns(), partition: partition.into(), event, pid, exit, detail };
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = g.0.as_mut() {
            if let Ok(line) = serde_json::to_string(&e) {
                let _ = writeln!(w, "{line}");
                let _ = w.flush();
            }
        }
        if g.1.len() < 100_000 {
            g.1.push(e);
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).1.clone()
    }

    /// The events kept from index `from` on (the first 100 000 of the run are kept): what a reader that has
    /// seen `from` of them has not.
    pub fn events_since(&self, from: usize) -> Vec<Event> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.get(from..).map(<[Event]>::to_vec).unwrap_or_default()
    }
}

/// A partition whose process tree ended, left to the supervisor's health-monitor tables ([`crate::hm`]) to act
/// on (a partition under [`HealthMonitor::defer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    pub name: String,
    pub pid: i32,
    pub exit: ExitKind,
}

/// How a partition is started again: with its state directory emptied (cold) or as it was left (warm).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartKind {
    Cold,
    Warm,
}

impl RestartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RestartKind::Cold => "cold start",
            RestartKind::Warm => "warm start",
        }
    }
}

/// Starts a partition (again): returns its new root process.
pub type Starter = Box<dyn FnMut() -> Result<Started> + Send>;

/// The seccomp listener of a partition's current run: first the socket it will arrive on, then the listener.
#[derive(Default)]
struct SeccompWatch {
    socket: Option<std::os::fd::OwnedFd>,
    listener: Option<Listener>,
    /// Attempts denied in the current second, and when it began: at most [`SECCOMP_EVENTS_PER_SECOND`] are
    /// logged one by one, the rest counted in the next event.
    second: (Option<Instant>, u64),
}

/// How many forbidden system calls a partition gets logged one by one per second.
const SECCOMP_EVENTS_PER_SECOND: u64 = 20;

impl SeccompWatch {
    fn new(socket: Option<std::os::fd::OwnedFd>) -> SeccompWatch {
        SeccompWatch { socket, listener: None, second: (None, 0) }
    }

    /// Every forbidden system call made since the last look: denied (EPERM), and logged. The process is not
    /// killed: its teardown would run whenever the supervisor happened to look, in its neighbours' windows.
    /// Denies what the partition's filter reported; whether it reported anything.
    fn poll(&mut self, name: &str, log: &EventLog) -> bool {
        if self.listener.is_none() {
            if let Some(fd) = self.socket.as_ref().and_then(|s| partita_os::seccomp_notify::receive_fd(s).ok().flatten()) {
                self.listener = Some(Listener::new(fd));
                self.socket = None;
            }
        }
        let Some(listener) = &self.listener else { return false };
        let mut denied = false;
        // A bounded number per look: a partition cannot keep the supervisor here.
        for _ in 0..64 {
            let Ok(Some(n)) = listener.next() else { break };
            denied = true;
            let _ = listener.deny(n.id, libc::EPERM);
            let now = Instant::now();
            if self.second.0.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1)) {
                let unlogged = self.second.1.saturating_sub(SECCOMP_EVENTS_PER_SECOND);
                if unlogged > 0 {
                    log.record(name, "seccomp", None, None, Some(format!("{unlogged} more forbidden system calls were denied")));
                }
                self.second = (Some(now), 0);
            }
            self.second.1 += 1;
            if self.second.1 <= SECCOMP_EVENTS_PER_SECOND {
                let call = crate::launch::seccomp::name_of(i64::from(n.syscall)).map_or_else(|| format!("system call {}", n.syscall), String::from);
                log.record(name, "seccomp", Some(n.pid as i32), None, Some(format!("{call} is forbidden: denied")));
            }
        }
        denied
    }
}

/// A partition under watch.
pub struct Watched {
    pub name: String,
    pub action: Action,
    pub cgroup: Arc<PartitionCgroup>,
    starter: Starter,
    pid: Option<i32>,
    seccomp: SeccompWatch,
    oom_kills_at_start: u64,
    oom_kills_seen: u64,
    /// Forks the pids limit refused, as last reported.
    pids_refused_seen: u64,
    /// Times the memory limit was hit, as last reported, and when.
    memory_hits_seen: (u64, Option<Instant>),
    restarts: VecDeque<Instant>,
    /// When a restart waiting out its back-off is due.
    restart_at: Option<Instant>,
    program: ProgramClock,
    /// Its ends go to the supervisor's tables instead of `action` ([`HealthMonitor::defer`]).
    deferred: bool,
    /// A restart asked for ([`HealthMonitor::restart`]): made when its process tree has ended.
    restart_pending: Option<RestartKind>,
    /// How the restart waiting for its back-off starts it.
    restart_kind: RestartKind,
    /// Emptied before a cold start.
    state_dir: Option<std::path::PathBuf>,
    /// Kept stopped ([`HealthMonitor::keep_stopped`]): no restart, whoever asks.
    kept_stopped: bool,
    /// How often its process tree was started (the first start included).
    starts: u64,
    /// The action its system file gave it: what it gets back when the operator releases it from being kept stopped.
    own_action: Action,
}

/// Since when a partition's program runs, as its launch pipe tells: the time before that is its launch's
/// (an `execve`; for a VM partition, QEMU starting and the guest booting), which the plan executor's time
/// guard does not hold against the partition.
struct ProgramClock {
    /// The launch pipe, until it shows the program executed (a VM partition's: until its guest's command
    /// started).
    report: Option<File>,
    /// When the program counts as running even if the pipe has not said so.
    deadline: Option<Instant>,
    /// Monotonic ns; 0 while the program is being launched. Shared with the time guard.
    since: Arc<AtomicU64>,
}

impl ProgramClock {
    fn new() -> Self {
        ProgramClock { report: None, deadline: None, since: Arc::new(AtomicU64::new(0)) }
    }

    /// A (re)launch: the program runs once `report` reaches its end of file, or from `deadline` on.
    fn launched(&mut self, report: Option<File>, deadline: Option<Duration>) {
        self.since.store(0, Ordering::Release);
        self.report = report;
        self.deadline = deadline.map(|d| Instant::now() + d);
        self.watch();
    }

    /// Looks at the launch pipe: at its end of file, past the deadline, or at anything else it says, the
    /// program runs from now on. Anything else: a failure word of the launcher (the partition is about to
    /// exit, which its status tells) or bytes a VM partition's runner wrote on its pipe, which the partition
    /// holds: neither may keep its time out of the guard's count.
    fn watch(&mut self) {
        let Some(f) = self.report.as_mut() else { return };
        if !self.deadline.is_some_and(|t| Instant::now() >= t) {
            let mut word = [0u8; 8];
            if let Err(e) = f.read(&mut word) {
                if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted {
                    return;
                }
            }
        }
        self.since.store(monotonic_ns().max(1), Ordering::Release);
        self.report = None;
    }
}

impl Watched {
    /// A (re)launch: the program runs once its launch pipe says so.
    fn launched(&mut self, started: Started) -> i32 {
        self.program.launched(started.exec_report, started.program_deadline);
        self.seccomp = SeccompWatch::new(started.notifications);
        self.pid = Some(started.pid);
        self.starts += 1;
        started.pid
    }
}

pub struct HealthMonitor {
    partitions: Vec<Watched>,
    log: EventLog,
    /// Ends of deferred partitions, and the limit events of every partition, not yet taken by the supervisor.
    ended: Vec<Ended>,
    noted: Vec<(String, &'static str)>,
}

impl HealthMonitor {
    pub fn new(log: EventLog) -> Self {
        HealthMonitor { partitions: Vec::new(), log, ended: Vec::new(), noted: Vec::new() }
    }

    /// From now on `name`'s ends are left to the supervisor ([`HealthMonitor::take_ended`]), which acts through
    /// [`HealthMonitor::restart`], [`HealthMonitor::keep_stopped`] or [`HealthMonitor::apply_default`].
    /// `state_dir` is what a cold start empties.
    pub fn defer(&mut self, name: &str, state_dir: Option<std::path::PathBuf>) {
        if let Some(w) = self.partitions.iter_mut().find(|w| w.name == name) {
            w.deferred = true;
            w.state_dir = state_dir;
        }
    }

    /// The deferred partitions that ended since the last call.
    pub fn take_ended(&mut self) -> Vec<Ended> {
        std::mem::take(&mut self.ended)
    }

    /// The limit events (`oom`, `pids_limit`, `seccomp`) logged since the last call, by partition.
    pub fn take_noted(&mut self) -> Vec<(String, &'static str)> {
        std::mem::take(&mut self.noted)
    }

    /// Starts `name` again, cold (its state directory emptied first) or warm: at once if its process tree has
    /// ended (after the back-off of its recent restarts), else once it has been killed and reaped.
    pub fn restart(&mut self, name: &str, kind: RestartKind) {
        let log = self.log.clone();
        let Some(w) = self.partitions.iter_mut().find(|w| w.name == name) else { return };
        if w.pid.is_some() {
            w.restart_pending = Some(kind);
            if let Err(e) = w.cgroup.kill_all() {
                log.record(&w.name, "error", None, None, Some(e.to_string()));
            }
        } else {
            schedule_restart(w, kind, &log);
        }
    }

    /// Applies `name`'s own action (its `health`) to its last end: what the monitor does for a partition that
    /// is not deferred.
    pub fn apply_default(&mut self, name: &str) {
        let log = self.log.clone();
        if let Some(w) = self.partitions.iter_mut().find(|w| w.name == name) {
            apply_action(w, &log);
        }
    }

    /// Whether `name`'s process tree is running (or about to be started again).
    pub fn is_running(&self, name: &str) -> bool {
        self.partitions.iter().any(|w| w.name == name && (w.pid.is_some() || w.restart_at.is_some()))
    }

    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Starts the partition with `starter` and watches it.
    pub fn start(&mut self, name: &str, action: Action, cgroup: Arc<PartitionCgroup>, mut starter: Starter) -> Result<()> {
        let oom = cgroup.oom_kills()?;
        let pids_refused = cgroup.pids_limit_hits().unwrap_or(0);
        let memory_hits = cgroup.memory_events().map(|m| m.limit_hits).unwrap_or(0);
        let started = starter()?;
        let mut w = Watched {
            name: name.into(),
            action,
            cgroup,
            starter,
            pid: None,
            seccomp: SeccompWatch::new(None),
            oom_kills_at_start: oom,
            oom_kills_seen: oom,
            pids_refused_seen: pids_refused,
            memory_hits_seen: (memory_hits, None),
            restarts: VecDeque::new(),
            restart_at: None,
            program: ProgramClock::new(),
            deferred: false,
            restart_pending: None,
            restart_kind: RestartKind::Warm,
            state_dir: None,
            kept_stopped: false,
            starts: 0,
            own_action: action,
        };
        let pid = w.launched(started);
        self.log.record(name, "start", Some(pid), None, None);
        self.partitions.push(w);
        Ok(())
    }

    /// Since when (monotonic ns, 0: not yet) `name`'s program runs: what its time guard reads.
    pub fn program_clock(&self, name: &str) -> Option<Arc<AtomicU64>> {
        self.partitions.iter().find(|w| w.name == name).map(|w| w.program.since.clone())
    }

    /// The current root pid of each partition (`None` when stopped).
    pub fn pids(&self) -> Vec<(String, Option<i32>)> {
        self.partitions.iter().map(|w| (w.name.clone(), w.pid)).collect()
    }

    /// How often each partition was restarted (its starts after the first).
    pub fn restarts(&self) -> Vec<(String, u64)> {
        self.partitions.iter().map(|w| (w.name.clone(), w.starts.saturating_sub(1))).collect()
    }

    /// Reaps and acts once; returns how many partitions ended in this call.
    pub fn poll(&mut self) -> usize {
        let mut ended = 0;
        for w in &mut self.partitions {
            if let Ok(now) = w.cgroup.oom_kills() {
                if now > w.oom_kills_seen {
                    // An OOM kill inside the partition, maybe of a child, maybe of its root.
                    self.log.record(&w.name, "oom", w.pid, None, Some(format!("oom_kill counter {now}")));
                    self.noted.push((w.name.clone(), "oom"));
                    w.oom_kills_seen = now;
                }
            }
            // A partition that ran into its limits: the kernel refused it forks, or memory.
            if let Ok(now) = w.cgroup.pids_limit_hits() {
                if now > w.pids_refused_seen {
                    let detail = format!("{} forks refused by the pids limit", now - w.pids_refused_seen);
                    self.log.record(&w.name, "pids_limit", w.pid, None, Some(detail));
                    self.noted.push((w.name.clone(), "pids_limit"));
                    w.pids_refused_seen = now;
                }
            }
            if let Ok(m) = w.cgroup.memory_events() {
                let (seen, last) = w.memory_hits_seen;
                // At most one event a second: a partition at its limit hits it continuously.
                if m.limit_hits > seen && last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    let detail = format!("the memory limit was hit {} times", m.limit_hits - seen);
                    self.log.record(&w.name, "memory_limit", w.pid, None, Some(detail));
                    w.memory_hits_seen = (m.limit_hits, Some(Instant::now()));
                }
            }
            if w.restart_at.is_some_and(|t| Instant::now() >= t) {
                w.restart_at = None;
                w.restarts.push_back(Instant::now());
                w.oom_kills_at_start = w.oom_kills_seen;
                let kind = std::mem::replace(&mut w.restart_kind, RestartKind::Warm);
                if kind == RestartKind::Cold {
                    if let Some(dir) = &w.state_dir {
                        if let Err(e) = empty_dir(dir) {
                            self.log.record(&w.name, "error", None, None, Some(format!("cold start: emptying {}: {e}", dir.display())));
                        }
                    }
                }
                match (w.starter)() {
                    Ok(started) => {
                        let pid = w.launched(started);
                        let detail = w.deferred.then(|| kind.as_str().to_string());
                        self.log.record(&w.name, "restart", Some(pid), None, detail);
                    }
                    Err(e) => self.log.record(&w.name, "restart_failed", None, None, Some(e.to_string())),
                }
                continue;
            }
            if w.seccomp.poll(&w.name, &self.log) {
                self.noted.push((w.name.clone(), "seccomp"));
            }
            w.program.watch();
            let Some(pid) = w.pid else { continue };
            let status = match try_wait(pid) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                Err(e) => {
                    self.log.record(&w.name, "error", Some(pid), None, Some(e.to_string()));
                    w.pid = None;
                    continue;
                }
            };
            ended += 1;
            let oom_now = w.cgroup.oom_kills().unwrap_or(w.oom_kills_seen);
            w.oom_kills_seen = oom_now;
            let exit = ExitKind::classify(status, oom_now.saturating_sub(w.oom_kills_at_start));
            self.log.record(&w.name, "exit", Some(pid), Some(exit), None);
            w.pid = None;
            // The PID namespace dies with its root; what the kernel has not yet reaped is killed here.
            if let Err(e) = w.cgroup.kill_all() {
                self.log.record(&w.name, "error", None, None, Some(e.to_string()));
            }
            if let Some(kind) = w.restart_pending.take() {
                schedule_restart(w, kind, &self.log);
            } else if w.deferred {
                self.ended.push(Ended { name: w.name.clone(), pid, exit });
            } else {
                apply_action(w, &self.log);
            }
        }
        ended
    }

    /// From now on `name` is not started again: its next exit leaves it stopped, a pending restart is cancelled
    /// (a partition whose time-overrun action is `stop`).
    pub fn keep_stopped(&mut self, name: &str) {
        if let Some(w) = self.partitions.iter_mut().find(|w| w.name == name) {
            w.action = Action::Stop;
            w.kept_stopped = true;
            w.restart_pending = None;
            if w.restart_at.take().is_some() {
                self.log.record(&w.name, "stopped", None, None, Some("restart cancelled".into()));
            }
        }
    }

    /// Lets a partition kept stopped be started again, with its own health action back (the operator's restart).
    pub fn release(&mut self, name: &str) {
        if let Some(w) = self.partitions.iter_mut().find(|w| w.name == name) {
            w.kept_stopped = false;
            w.action = w.own_action;
        }
    }

    /// Whether `name` is kept stopped.
    pub fn is_kept_stopped(&self, name: &str) -> bool {
        self.partitions.iter().any(|w| w.name == name && w.kept_stopped)
    }

    /// Kills `name`'s processes (the health monitor then reaps its root and applies its action).
    pub fn kill(&mut self, name: &str) {
        if let Some(w) = self.partitions.iter().find(|w| w.name == name) {
            if let Err(e) = w.cgroup.kill_all() {
                self.log.record(&w.name, "error", None, None, Some(e.to_string()));
            }
        }
    }

    /// Whether any partition still has a live root process, or will have one after its back-off.
    pub fn any_running(&self) -> bool {
        self.partitions.iter().any(|w| w.pid.is_some() || w.restart_at.is_some())
    }

    /// Kills every partition (SIGKILL to each cgroup) and reaps the roots.
    pub fn kill_all(&mut self) {
        for w in &mut self.partitions {
            let _ = w.cgroup.kill_all();
            if let Some(pid) = w.pid.take() {
                let status = crate::launch::wait_blocking(pid).unwrap_or(0);
                self.log.record(&w.name, "killed", Some(pid), Some(ExitKind::classify(status, 0)), None);
            }
        }
    }
}

/// The partition's own action (`health`) after its process tree ended.
fn apply_action(w: &mut Watched, log: &EventLog) {
    match w.action {
        Action::Ignore => {}
        Action::Stop => log.record(&w.name, "stopped", None, None, None),
        Action::Restart { max, within, backoff } => {
            let now = Instant::now();
            while w.restarts.front().is_some_and(|t| now.duration_since(*t) > within) {
                w.restarts.pop_front();
            }
            if w.restarts.len() as u32 >= max {
                log.record(&w.name, "restart_limit", None, None, Some(format!("{max} restarts within {within:?}")));
                return;
            }
            let delay = backoff.saturating_mul(1u32 << w.restarts.len().min(16)).min(within);
            w.restart_at = Some(now + delay);
            w.restart_kind = RestartKind::Warm;
            log.record(&w.name, "restart_scheduled", None, None, Some(format!("in {delay:?}")));
        }
    }
}

/// A restart the supervisor asked for, after the back-off of the partition's recent restarts (those of the last
/// minute): a crash loop restarted by a table cannot keep the supervisor busy either.
fn schedule_restart(w: &mut Watched, kind: RestartKind, log: &EventLog) {
    if w.kept_stopped {
        log.record(&w.name, "stopped", None, None, Some(format!("{} refused: the partition is kept stopped", kind.as_str())));
        return;
    }
    let backoff = match w.action {
        Action::Restart { backoff, .. } => backoff,
        _ => Duration::from_millis(100),
    };
    let now = Instant::now();
    while w.restarts.front().is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60)) {
        w.restarts.pop_front();
    }
    let delay = if w.restarts.is_empty() { Duration::ZERO } else { backoff.saturating_mul(1u32 << w.restarts.len().min(10)).min(Duration::from_secs(60)) };
    w.restart_at = Some(now + delay);
    w.restart_kind = kind;
    log.record(&w.name, "restart_scheduled", None, None, Some(format!("{} in {delay:?}", kind.as_str())));
}

/// Removes everything in `dir` (a partition's state directory), keeping the directory itself (a mount point)
/// and `lost+found`.
fn empty_dir(dir: &std::path::Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_name() == "lost+found" {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    Ok(())
}

impl Drop for HealthMonitor {
    fn drop(&mut self) {
        self.kill_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_exit_signal_and_oom() {
        assert_eq!(ExitKind::classify(3 << 8, 0), ExitKind::Exited { code: 3 });
        assert_eq!(ExitKind::classify(libc::SIGTERM, 0), ExitKind::Signaled { signal: libc::SIGTERM });
        assert_eq!(ExitKind::classify(libc::SIGKILL, 0), ExitKind::Signaled { signal: libc::SIGKILL });
        assert_eq!(ExitKind::classify(libc::SIGKILL, 1), ExitKind::OomKilled);
    }

    use std::os::fd::{AsRawFd, OwnedFd};

    fn pipe() -> (File, OwnedFd) {
        let (r, w) = partita_os::process::cloexec_pipe().unwrap();
        partita_os::fd::set_nonblocking(r.as_raw_fd()).unwrap();
        (File::from(r), w)
    }

    #[test]
    fn a_program_runs_from_its_launch_pipes_end() {
        let mut clock = ProgramClock::new();
        let (r, w) = pipe();
        clock.launched(Some(r), Some(Duration::from_secs(60)));
        clock.watch();
        assert_eq!(clock.since.load(Ordering::Acquire), 0, "launching while the pipe is open");
        let before = monotonic_ns();
        drop(w);
        clock.watch();
        assert!(clock.since.load(Ordering::Acquire) >= before, "runs from the end of file on");
        // A relaunch starts over.
        let (r, _w) = pipe();
        clock.launched(Some(r), None);
        assert_eq!(clock.since.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_report_held_back_counts_from_the_deadline() {
        // A VM partition's pipe is the guest's start, which the partition could keep to itself: its boot
        // timeout ends the excuse.
        let mut clock = ProgramClock::new();
        let (r, _held) = pipe();
        clock.launched(Some(r), Some(Duration::from_millis(50)));
        assert_eq!(clock.since.load(Ordering::Acquire), 0);
        std::thread::sleep(Duration::from_millis(60));
        clock.watch();
        assert!(clock.since.load(Ordering::Acquire) > 0, "past the deadline the program counts as running");
    }

    #[test]
    fn bytes_on_the_pipe_end_the_launch_too() {
        // A VM partition holds its pipe's write end: writing on it instead of closing it must not keep its
        // overruns out of the count.
        let mut clock = ProgramClock::new();
        let (r, w) = pipe();
        clock.launched(Some(r), Some(Duration::from_secs(60)));
        let mut w = File::from(w);
        std::io::Write::write_all(&mut w, &[1u8; 8]).unwrap();
        clock.watch();
        assert!(clock.since.load(Ordering::Acquire) > 0, "counted from the first word on");
        assert!(clock.report.is_none(), "nothing more to read from it");
    }

    #[test]
    fn events_are_json_lines() {
        let buf = Arc::new(Mutex::new(Vec::<u8>::new()));
        struct W(Arc<Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let log = EventLog::new(Some(Box::new(W(buf.clone()))));
        log.record("recorder", "exit", Some(12), Some(ExitKind::OomKilled), None);
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["partition"], "recorder");
        assert_eq!(v["event"], "exit");
        assert_eq!(v["exit"]["kind"], "oom_killed");
        assert!(v["monotonic_ns"].as_u64().unwrap() > 0);
    }
}
