//! The plan executor: a SCHED_FIFO thread that sleeps to absolute CLOCK_MONOTONIC times and, at every window
//! boundary, freezes the partitions whose window ended and thaws the ones whose window starts.
//!
//! Freezing a partition wakes every one of its threads (each must run to stop itself): at a boundary where one
//! partition's window ends and another's starts, those threads would run at the start of the next window, in
//! the other partition's time, more of them the more threads the partition has. With a freeze lead
//! ([`Schedule::with_freeze_ahead`]) the executor freezes such a partition that long before its window ends, so
//! its threads stop in its own window and the next one starts with only its own threads waking.
//!
//! A timer wakes the executor some µs after the instant it asked for (the kernel's and the CPU's wake-up
//! latency). With a wake lead ([`Schedule::with_wake_ahead`]) the executor sleeps until that long before a window
//! start that follows time no partition runs in (idle time, or the lead of a partition frozen ahead) and waits
//! for the start on the clock, so the window starts when it is due, not a wake-up latency later; it spends only
//! time that is no partition's, and only once the partition frozen ahead has stopped (else it sleeps to the
//! start, so that the partition's threads stop in their own time).
use crate::clock::{monotonic_ns, sleep_until_ns};
use crate::error::{Result, SupervisorError};
use partita_os::sched;
use crate::freeze::Freezer;
use crate::overrun::{OverrunRing, TimeGuard};
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A window of the plan: `partition` (an index into the executor's freezers) runs from `offset` for
/// `duration` in every major frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub partition: usize,
    pub offset: Duration,
    pub duration: Duration,
}

/// A cyclic plan, checked: windows sorted, not overlapping, inside the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    major_frame: Duration,
    windows: Vec<Window>,
    /// How long before the end of a window that another partition's window follows directly its partition is
    /// frozen (zero: at the boundary).
    freeze_ahead: Duration,
    /// How long before a window start that follows time no partition runs in the executor wakes, to wait
    /// for the start on the clock (zero: it sleeps until the start).
    wake_ahead: Duration,
}

/// One point of the frame where the set of running partitions changes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Boundary {
    offset_ns: u64,
    freeze: Vec<usize>,
    thaw: Vec<usize>,
    /// Index of the window starting here, if one does.
    window: Option<usize>,
    /// Partitions frozen `freeze_ahead` before this boundary: whether their freeze has completed is
    /// counted here.
    frozen_ahead: Vec<usize>,
    /// Partitions whose window ends here (planned), frozen here or ahead: their time guards judge, at the next
    /// boundary, whether they ran past it.
    ended: Vec<usize>,
    /// How long before this boundary the executor wakes to wait for it on the clock: the wake lead, at most
    /// the time before it in which no partition runs (zero where one does).
    wake_ahead_ns: u64,
}

/// Why a plan cannot be executed: what the validation of a system file refuses before, here for a plan built
/// in code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("a plan needs a major frame > 0 and at least one window")]
    Empty,
    #[error("window {index} ({offset:?} + {duration:?}) is empty or ends after the major frame {major_frame:?}")]
    Window { index: usize, offset: Duration, duration: Duration, major_frame: Duration },
    #[error("windows {first} and {} overlap", first + 1)]
    Overlap { first: usize },
    #[error("freeze_ahead {ahead:?} is not shorter than window {index} ({duration:?}), which another partition's window follows")]
    FreezeAhead { ahead: Duration, index: usize, duration: Duration },
    #[error("wake_ahead {ahead:?}: no window start follows time in which no partition runs; set freeze_ahead or leave a gap before a window")]
    WakeAhead { ahead: Duration },
    #[error("window for partition {partition} but only {freezers} freezers")]
    NoFreezer { partition: usize, freezers: usize },
    #[error("plan executor thread failed to start")]
    DidNotStart,
    #[error("plan executor panicked")]
    Panicked,
}

impl Schedule {
    pub fn new(major_frame: Duration, mut windows: Vec<Window>) -> Result<Schedule> {
        windows.sort_by_key(|w| w.offset);
        if major_frame.is_zero() || windows.is_empty() {
            return Err(PlanError::Empty.into());
        }
        for (i, w) in windows.iter().enumerate() {
            if w.duration.is_zero() || w.offset + w.duration > major_frame {
                return Err(PlanError::Window { index: i, offset: w.offset, duration: w.duration, major_frame }.into());
            }
            if let Some(next) = windows.get(i + 1) {
                if w.offset + w.duration > next.offset {
                    return Err(PlanError::Overlap { first: i }.into());
                }
            }
        }
        Ok(Schedule { major_frame, windows, freeze_ahead: Duration::ZERO, wake_ahead: Duration::ZERO })
    }

    /// Freezes a partition whose window another partition's window follows directly `ahead` before that
    /// window's end (a window followed by idle time, or by the same partition's, keeps its end). Refused
    /// when `ahead` is not shorter than every such window.
    pub fn with_freeze_ahead(mut self, ahead: Duration) -> Result<Schedule> {
        let followed = self.followed_by_another();
        if let Some((i, w)) = self.windows.iter().enumerate().find(|(i, w)| followed[*i] && w.duration <= ahead) {
            return Err(PlanError::FreezeAhead { ahead, index: i, duration: w.duration }.into());
        }
        self.freeze_ahead = ahead;
        Ok(self)
    }

    pub fn freeze_ahead(&self) -> Duration {
        self.freeze_ahead
    }

    /// Wakes the executor `ahead` before each window start that follows time no partition runs in (at most
    /// that time) and has it wait for the start on the clock. Refused when no window start follows such time
    /// (set the freeze lead first): the lead would never be used.
    pub fn with_wake_ahead(mut self, ahead: Duration) -> Result<Schedule> {
        self.wake_ahead = ahead;
        if !ahead.is_zero() && !self.boundaries().iter().any(|b| b.window.is_some() && b.wake_ahead_ns > 0) {
            return Err(PlanError::WakeAhead { ahead }.into());
        }
        Ok(self)
    }

    pub fn wake_ahead(&self) -> Duration {
        self.wake_ahead
    }

    /// For each window: whether another partition's window starts where it ends (cyclically).
    fn followed_by_another(&self) -> Vec<bool> {
        let frame = self.major_frame.as_nanos();
        self.windows
            .iter()
            .map(|w| {
                let end = (w.offset + w.duration).as_nanos() % frame;
                self.windows.iter().any(|o| o.partition != w.partition && o.offset.as_nanos() == end)
                    && !self.windows.iter().any(|o| o.partition == w.partition && o.offset.as_nanos() == end)
            })
            .collect()
    }

    pub fn major_frame(&self) -> Duration {
        self.major_frame
    }
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    fn boundaries(&self) -> Vec<Boundary> {
        let frame = self.major_frame.as_nanos() as u64;
        let mut b: Vec<Boundary> = Vec::new();
        let mut at = |offset_ns: u64| -> usize {
            let offset_ns = offset_ns % frame;
            match b.iter().position(|x| x.offset_ns == offset_ns) {
                Some(i) => i,
                None => {
                    b.push(Boundary { offset_ns, freeze: vec![], thaw: vec![], window: None, frozen_ahead: vec![], ended: vec![], wake_ahead_ns: 0 });
                    b.len() - 1
                }
            }
        };
        let mut starts = Vec::new();
        let mut ends = Vec::new();
        let followed = self.followed_by_another();
        let mut marks = Vec::new();
        let mut window_ends = Vec::new();
        for (i, w) in self.windows.iter().enumerate() {
            starts.push((at(w.offset.as_nanos() as u64), i, w.partition));
            window_ends.push((at((w.offset + w.duration).as_nanos() as u64), w.partition));
            let ahead = if followed[i] { self.freeze_ahead } else { Duration::ZERO };
            ends.push((at((w.offset + w.duration - ahead).as_nanos() as u64), w.partition));
            if !ahead.is_zero() {
                marks.push((at((w.offset + w.duration).as_nanos() as u64), w.partition));
            }
        }
        for (k, p) in marks {
            b[k].frozen_ahead.push(p);
        }
        for (k, p) in ends {
            b[k].freeze.push(p);
        }
        for (k, p) in window_ends {
            b[k].ended.push(p);
        }
        for (k, i, p) in starts {
            b[k].thaw.push(p);
            b[k].window = Some(i);
            // A partition owning two adjacent windows is not frozen in between, and its window goes on.
            b[k].freeze.retain(|x| *x != p);
            b[k].ended.retain(|x| *x != p);
        }
        b.sort_by_key(|x| x.offset_ns);
        // Which partitions run after each boundary: follow the frame twice round, so that the first boundaries
        // see what the frame's last ones left running.
        let n = b.len();
        let mut running: Vec<usize> = Vec::new();
        let mut idle_after = vec![false; n];
        for k in 0..2 * n {
            let x = &b[k % n];
            running.retain(|p| !x.freeze.contains(p));
            for &p in &x.thaw {
                if !running.contains(&p) {
                    running.push(p);
                }
            }
            idle_after[k % n] = running.is_empty();
        }
        let lead = self.wake_ahead.as_nanos() as u64;
        for k in 0..n {
            let prev = (k + n - 1) % n;
            if b[k].window.is_some() && idle_after[prev] && lead > 0 {
                let quiet = (b[k].offset_ns + frame - b[prev].offset_ns) % frame;
                let quiet = if quiet == 0 { frame } else { quiet };
                b[k].wake_ahead_ns = lead.min(quiet);
            }
        }
        b
    }
}

/// What happened at one window start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowStart {
    pub frame: u64,
    /// The plan (index among the executor's plans) whose window this is.
    pub plan: usize,
    pub window: usize,
    pub partition: usize,
    /// Planned start, CLOCK_MONOTONIC ns.
    pub planned_ns: u64,
    /// When the executor woke for it.
    pub woke_ns: u64,
    /// When the freezes and thaws of this boundary were issued (the partition may run from here).
    pub switched_ns: u64,
}

impl WindowStart {
    pub fn lateness_ns(&self) -> u64 {
        self.woke_ns.saturating_sub(self.planned_ns)
    }
    pub fn switch_ns(&self) -> u64 {
        self.switched_ns.saturating_sub(self.woke_ns)
    }
}

/// A boundary where only freezes happen (a window ends with no other starting).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WindowEnd {
    pub planned_ns: u64,
    pub woke_ns: u64,
    pub switched_ns: u64,
}

/// p50 / p99 / max in ns over a set of samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Summary {
    pub fn of(samples: &mut [u64]) -> Summary {
        if samples.is_empty() {
            return Summary::default();
        }
        samples.sort_unstable();
        let q = |p: f64| samples[(((samples.len() - 1) as f64) * p).round() as usize];
        Summary { count: samples.len() as u64, p50_ns: q(0.5), p99_ns: q(0.99), max_ns: *samples.last().unwrap() }
    }
}

/// The executor's record: the last `capacity` window starts, and all-time maxima.
#[derive(Debug, Clone, Serialize)]
pub struct ExecutorLog {
    pub capacity: usize,
    pub starts: VecDeque<WindowStart>,
    pub ends: VecDeque<WindowEnd>,
    pub windows_started: u64,
    pub max_lateness_ns: u64,
    pub max_switch_ns: u64,
    pub switch_errors: u64,
    /// Boundaries the executor reached only after the next one was already due: a window was lost.
    pub missed_boundaries: u64,
    /// With a freeze lead: partitions frozen ahead of a window start that the kernel reported frozen at that
    /// start (read just after its thaw, or with a wake lead already when the executor woke ahead of it): their
    /// threads had stopped in their own time; and those still stopping after the thaw.
    pub freezes_ahead_done: u64,
    pub freezes_ahead_overran: u64,
    /// Whether SCHED_FIFO and the CPU pinning were obtained.
    pub realtime: bool,
    pub pinned: bool,
    /// Every plan switch, oldest first (the last `capacity`, as for window starts).
    pub switches: VecDeque<PlanSwitch>,
}

impl ExecutorLog {
    fn new(capacity: usize) -> Self {
        ExecutorLog {
            capacity,
            starts: VecDeque::with_capacity(capacity),
            ends: VecDeque::with_capacity(capacity),
            windows_started: 0,
            max_lateness_ns: 0,
            max_switch_ns: 0,
            switch_errors: 0,
            missed_boundaries: 0,
            freezes_ahead_done: 0,
            freezes_ahead_overran: 0,
            realtime: false,
            pinned: false,
            switches: VecDeque::new(),
        }
    }

    pub fn lateness(&self) -> Summary {
        Summary::of(&mut self.starts.iter().map(|s| s.lateness_ns()).collect::<Vec<_>>())
    }

    pub fn switch_cost(&self) -> Summary {
        Summary::of(&mut self.starts.iter().map(|s| s.switch_ns()).collect::<Vec<_>>())
    }
}

#[derive(Debug, Clone)]
pub struct ExecutorConfig {
    /// CPU the executor thread is pinned to.
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority (1..=99); `None` keeps the normal policy.
    pub priority: Option<i32>,
    /// Stop after this many major frames (else when `stop` is set).
    pub frames: Option<u64>,
    pub log_capacity: usize,
    /// Fail instead of running with a normal policy when SCHED_FIFO cannot be set.
    pub require_realtime: bool,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig { cpu: None, priority: Some(90), frames: None, log_capacity: 100_000, require_realtime: false }
    }
}

/// Whether a partition asked to be idle (its control page's request, read with one atomic load): from the
/// boundary the executor sees it at, the partition is never thawed again until the supervisor releases it.
pub type IdleProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// A plan switch the executor made: at the end of a major frame of the old plan, or at once (`now`), at the
/// first wake-up after the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PlanSwitch {
    pub from: usize,
    pub to: usize,
    /// Requested to happen at once rather than at the end of the old plan's frame.
    pub now: bool,
    /// When the request reached the executor's cell (CLOCK_MONOTONIC ns).
    pub requested_ns: u64,
    /// The frame counter of the new plan's first frame.
    pub frame: u64,
    /// When the new plan's first frame starts (CLOCK_MONOTONIC ns): the old frame's end, or for `now` the
    /// instant the executor woke at.
    pub planned_ns: u64,
    /// When the executor woke for it, and when its freezes and thaws were issued.
    pub woke_ns: u64,
    pub switched_ns: u64,
    /// Where in its frame the old plan was cut (its major frame when it switched at the frame's end, which a
    /// switch asked for at once also does when the request arrives at a frame's end).
    pub cut_offset_ns: u64,
    pub old_frame_ns: u64,
}

/// Switch requests to an executor: `(plan + 1) | now << 32`, 0 when none is pending.
const SWITCH_NOW: u64 = 1 << 32;

/// What a running executor shares with the supervisor about its plans.
#[derive(Debug)]
pub struct PlanCell {
    /// The pending request (see [`SWITCH_NOW`]), and when it was made.
    request: AtomicU64,
    requested_ns: AtomicU64,
    /// The plan running now.
    current: AtomicU64,
    /// Switches made so far (a reader sees a new one when it changes).
    switches: AtomicU64,
    /// The last switches, newest last, for the supervisor (the executor never waits for this lock).
    recent: Mutex<VecDeque<PlanSwitch>>,
    /// Partitions the executor keeps frozen (idle, stopped with their module): set by the supervisor or, for an
    /// idle request, by the executor.
    held: Box<[AtomicBool]>,
}

impl PlanCell {
    fn new(initial: usize, partitions: usize) -> PlanCell {
        PlanCell {
            request: AtomicU64::new(0),
            requested_ns: AtomicU64::new(0),
            current: AtomicU64::new(initial as u64),
            switches: AtomicU64::new(0),
            recent: Mutex::new(VecDeque::with_capacity(SWITCH_RECORDS)),
            held: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
        }
    }
    /// A cell of no executor, for tests of what reads one.
    pub fn for_tests(partitions: usize) -> PlanCell {
        PlanCell::new(0, partitions)
    }

    /// Asks for plan `plan` at the end of the current frame, or at the executor's next wake-up (`now`). A later
    /// request replaces one not yet taken.
    pub fn request(&self, plan: usize, now: bool) {
        self.requested_ns.store(monotonic_ns(), Ordering::Release);
        self.request.store((plan as u64 + 1) | if now { SWITCH_NOW } else { 0 }, Ordering::Release);
    }
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Acquire) as usize
    }
    pub fn switch_count(&self) -> u64 {
        self.switches.load(Ordering::Acquire)
    }
    /// The switches recorded since the last call, oldest first.
    pub fn take_switches(&self) -> Vec<PlanSwitch> {
        self.recent.lock().map(|mut r| r.drain(..).collect()).unwrap_or_default()
    }
    /// Keeps partition `p` (the executor's index) frozen from its next boundary on, or lets it run in its
    /// windows again.
    pub fn hold(&self, p: usize, held: bool) {
        if let Some(h) = self.held.get(p) {
            h.store(held, Ordering::Release);
        }
    }
    pub fn is_held(&self, p: usize) -> bool {
        self.held.get(p).is_some_and(|h| h.load(Ordering::Acquire))
    }
}

/// How many switches the cell keeps for the supervisor between its reads.
const SWITCH_RECORDS: usize = 1024;

/// A running executor.
pub struct Executor {
    handle: Option<JoinHandle<Result<ExecutorLog>>>,
    stop: Arc<AtomicBool>,
    /// Last frame's snapshot for status readers (updated with try_lock, never blocking the executor).
    pub progress: Arc<Mutex<Progress>>,
    /// Every window start's lateness (readers snapshot it while the plan runs).
    pub lateness: Arc<crate::histogram::LatencyHistogram>,
    /// The window starts later than [`STALL_NS`], for the stall tracer.
    pub stall: Arc<crate::stalls::StallRing>,
    /// What the partitions' time guards noted: overruns, demotions, actions, containment.
    pub overruns: Arc<OverrunRing>,
    /// The plans: switch requests, the current plan, held partitions.
    pub plans: Arc<PlanCell>,
    /// Every window start and end, for the live timeline and the trace ([`crate::window_ring`]).
    pub windows: Arc<crate::window_ring::WindowRing>,
    /// CLOCK_MONOTONIC ns of the start of frame 0 of the plan running now (0 until the executor has chosen
    /// it): the executor's origin until the first switch, then the first frame of each new plan.
    origin_ns: Arc<AtomicU64>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Progress {
    pub frames: u64,
    pub missed_boundaries: u64,
    pub max_lateness_ns: u64,
    pub max_switch_ns: u64,
}

/// The executor's members beside their freezers: a time guard and an idle probe for each that has one
/// (`guards[i]` and `idle[i]` for `freezers[i]`).
#[derive(Default)]
pub struct Members {
    pub guards: Vec<Option<TimeGuard>>,
    pub idle: Vec<Option<IdleProbe>>,
}

impl Executor {
    /// Starts the plan: all partitions are frozen first, the first frame begins 2 ms later.
    pub fn start(schedule: Schedule, freezers: Vec<Freezer>, config: ExecutorConfig) -> Result<Executor> {
        Self::start_plans(vec![schedule], 0, freezers, Members::default(), config)
    }

    /// Starts the plan with a time guard for each partition that has one (`guards[i]` for `freezers[i]`): each
    /// guarded partition that runs past its windows is noted, demoted and acted on ([`crate::overrun`]).
    pub fn start_guarded(schedule: Schedule, freezers: Vec<Freezer>, guards: Vec<Option<TimeGuard>>, config: ExecutorConfig) -> Result<Executor> {
        Self::start_plans(vec![schedule], 0, freezers, Members { guards, idle: Vec::new() }, config)
    }

    /// Starts plan `initial` of `schedules` (each over the same partitions, `freezers`), ready to switch to any
    /// of the others on request ([`PlanCell::request`]).
    pub fn start_plans(schedules: Vec<Schedule>, initial: usize, freezers: Vec<Freezer>, members: Members, config: ExecutorConfig) -> Result<Executor> {
        let Members { mut guards, mut idle } = members;
        guards.resize_with(freezers.len(), || None);
        idle.resize_with(freezers.len(), || None);
        if schedules.get(initial).is_none() {
            return Err(PlanError::Empty.into());
        }
        if let Some(w) = schedules.iter().flat_map(|s| s.windows.iter()).find(|w| w.partition >= freezers.len()) {
            return Err(PlanError::NoFreezer { partition: w.partition, freezers: freezers.len() }.into());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let progress = Arc::new(Mutex::new(Progress::default()));
        let origin_ns = Arc::new(AtomicU64::new(0));
        let lateness = Arc::new(crate::histogram::LatencyHistogram::default());
        let stall = Arc::new(crate::stalls::StallRing::default());
        stall.set_wake_lead(schedules[initial].wake_ahead.as_nanos() as u64);
        let overruns = Arc::new(OverrunRing::default());
        let plans = Arc::new(PlanCell::new(initial, freezers.len()));
        let windows = Arc::new(crate::window_ring::WindowRing::default());
        let (stop2, progress2, origin2, lateness2, stall2, overruns2, plans2, windows2) =
            (stop.clone(), progress.clone(), origin_ns.clone(), lateness.clone(), stall.clone(), overruns.clone(), plans.clone(), windows.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("partita-plan".into())
            .spawn(move || {
                let mut log = ExecutorLog::new(config.log_capacity);
                let setup = prepare_thread(&config, &mut log);
                let failed = setup.as_ref().err().map(|e| e.to_string());
                let _ = ready_tx.send(failed);
                setup?;
                let shared = Shared { stop: &stop2, progress: &progress2, origin: &origin2, lateness: &lateness2, stall: &stall2, overruns: &overruns2, plans: &plans2, windows: &windows2 };
                run(&schedules, initial, &freezers, &mut guards, &idle, &config, &shared, &mut log);
                Ok(log)
            })
            .map_err(|e| SupervisorError::Sys { call: "pthread_create", context: "plan executor".into(), source: e })?;
        match ready_rx.recv() {
            Ok(None) => Ok(Executor { handle: Some(handle), stop, progress, lateness, stall, overruns, plans, windows, origin_ns }),
            _ => match handle.join() {
                Ok(Err(e)) => Err(e),
                _ => Err(PlanError::DidNotStart.into()),
            },
        }
    }

    /// When frame 0 started (CLOCK_MONOTONIC ns), once the executor has begun.
    pub fn origin_ns(&self) -> Option<u64> {
        Some(self.origin_ns.load(Ordering::Relaxed)).filter(|&o| o != 0)
    }

    /// The shared cell of [`Executor::origin_ns`], for a watcher on another thread.
    pub fn origin(&self) -> Arc<AtomicU64> {
        self.origin_ns.clone()
    }

    /// Asks the executor to stop at the next boundary.
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn is_finished(&self) -> bool {
        self.handle.as_ref().map(|h| h.is_finished()).unwrap_or(true)
    }

    /// Stops (if still running) and returns the log. Partitions are left frozen.
    pub fn stop(self) -> Result<ExecutorLog> {
        self.request_stop();
        self.join()
    }

    /// Waits for the executor to end by itself (`frames` reached or stop requested elsewhere).
    pub fn join(mut self) -> Result<ExecutorLog> {
        let handle = self.handle.take().expect("joined once");
        handle.join().unwrap_or_else(|_| Err(PlanError::Panicked.into()))
    }

    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }
}

impl Drop for Executor {
    /// An executor is never left running unowned: dropping it stops the plan and waits for the thread.
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = h.join();
        }
    }
}

fn prepare_thread(config: &ExecutorConfig, log: &mut ExecutorLog) -> Result<()> {
    const CONTEXT: &str = "plan executor";
    if let Some(cpu) = config.cpu {
        sched::pin_current_thread(cpu).map_err(|source| SupervisorError::Sched { context: CONTEXT, source })?;
        log.pinned = true;
    }
    if let Some(prio) = config.priority {
        match sched::set_current_thread_fifo(prio) {
            Ok(()) => log.realtime = true,
            Err(source) if config.require_realtime => return Err(SupervisorError::Sched { context: CONTEXT, source }),
            // Runs under the normal policy; the log says so.
            Err(_) => {}
        }
    }
    // Page faults in the loop would show as lateness. Without the privilege to lock memory the plan still
    // runs, as it did before the lock.
    let _ = sched::lock_all_memory();
    Ok(())
}

/// What the executor thread shares with its readers.
struct Shared<'a> {
    stop: &'a AtomicBool,
    progress: &'a Mutex<Progress>,
    origin: &'a AtomicU64,
    lateness: &'a crate::histogram::LatencyHistogram,
    stall: &'a crate::stalls::StallRing,
    overruns: &'a OverrunRing,
    plans: &'a PlanCell,
    windows: &'a crate::window_ring::WindowRing,
}

/// A window start later than this is noted for the stall tracer ([`crate::stalls`]).
pub const STALL_NS: u64 = 1_000_000;

/// The instant a plan switch takes effect: the old plan's partitions that the new plan's first boundary does
/// not keep running are frozen, that boundary's thaws are made, and the new plan's frames count from here.
struct Transition {
    from: usize,
    now: bool,
    requested_ns: u64,
    cut_offset_ns: u64,
}

/// The boundary the executor acts at: an ordinary one of the plan running, or a switch to it.
enum Step<'a> {
    Boundary(&'a Boundary),
    Switch(Transition),
}

fn run(
    schedules: &[Schedule],
    initial: usize,
    freezers: &[Freezer],
    guards: &mut [Option<TimeGuard>],
    idle: &[Option<IdleProbe>],
    config: &ExecutorConfig,
    shared: &Shared,
    log: &mut ExecutorLog,
) {
    let Shared { stop, progress, origin: origin_cell, lateness: histogram, stall, overruns, plans: cell, windows: ring } = *shared;
    let boundaries: Vec<Vec<Boundary>> = schedules.iter().map(|s| s.boundaries()).collect();
    let frames_ns: Vec<u64> = schedules.iter().map(|s| s.major_frame.as_nanos() as u64).collect();
    // What the executor last asked of each partition: a switch freezes what the old plan left running.
    let mut running = vec![false; freezers.len()];
    let mut was_running = running.clone();
    for f in freezers {
        if f.freeze().is_err() {
            log.switch_errors += 1;
        }
    }
    log.switches.reserve(config.log_capacity.min(SWITCH_RECORDS));
    let switch_capacity = config.log_capacity.max(1);
    let origin = monotonic_ns() + 2_000_000;
    origin_cell.store(origin, Ordering::Relaxed);
    let mut plan = initial;
    let mut base = origin;
    let mut next = 0usize;
    let mut frame = 0u64;
    let mut pending: Option<Transition> = None;
    // The wake-up of the last stall noted: a late start planned before it is the same stall, caught up.
    let mut stall_woke = 0u64;
    loop {
        if next == boundaries[plan].len() {
            next = 0;
            base += frames_ns[plan];
            frame += 1;
            if let Ok(mut p) = progress.try_lock() {
                *p = Progress { frames: frame, missed_boundaries: log.missed_boundaries, max_lateness_ns: log.max_lateness_ns, max_switch_ns: log.max_switch_ns };
            }
            if config.frames.is_some_and(|n| frame >= n) {
                break;
            }
            // At the end of a major frame: the switch requested meanwhile.
            if let Some((to, now)) = take_request(cell, schedules.len(), false) {
                if to != plan {
                    // A switch asked for at once that arrives at a frame's end cuts nothing.
                    pending = Some(Transition { from: plan, now, requested_ns: cell.requested_ns.load(Ordering::Acquire), cut_offset_ns: frames_ns[plan] });
                    plan = to;
                }
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let step = match pending.take() {
            Some(t) => Step::Switch(t),
            None => Step::Boundary(&boundaries[plan][next]),
        };
        let (planned, lead) = match &step {
            Step::Boundary(b) => (base + b.offset_ns, b.wake_ahead_ns),
            // The new plan's first frame starts here; its first boundary's wake lead applies when nothing runs
            // before it.
            Step::Switch(_) => {
                let b0 = &boundaries[plan][0];
                let lead = if b0.offset_ns == 0 && !running.iter().any(|r| *r) { b0.wake_ahead_ns } else { 0 };
                (base, lead)
            }
        };
        let next_due = match &step {
            Step::Boundary(_) => match boundaries[plan].get(next + 1) {
                Some(n) => base + n.offset_ns,
                None => base + frames_ns[plan] + boundaries[plan][0].offset_ns,
            },
            Step::Switch(_) => base + boundaries[plan].iter().map(|b| b.offset_ns).find(|&o| o > 0).unwrap_or(frames_ns[plan]),
        };
        stall.waiting_for(planned);
        // A switch at once is taken at the executor's first wake-up after the request, where it stands: the old
        // plan's frame ends there.
        let watch_now = matches!(step, Step::Boundary(_));
        let mut switched_now = false;
        loop {
            sleep_until_or_stop(planned.saturating_sub(lead), stop, watch_now.then_some(cell));
            if watch_now {
                if let Some((to, _)) = take_request(cell, schedules.len(), true) {
                    if to != plan {
                        let at = monotonic_ns().min(planned);
                        pending = Some(Transition { from: plan, now: true, requested_ns: cell.requested_ns.load(Ordering::Acquire), cut_offset_ns: at - base });
                        plan = to;
                        base = at;
                        next = 0;
                        switched_now = true;
                    }
                }
            }
            if switched_now || monotonic_ns() >= planned.saturating_sub(lead) || stop.load(Ordering::Relaxed) {
                break;
            }
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if switched_now {
            continue;
        }
        // Woken ahead of the start: wait for it on the clock if the partitions frozen ahead have stopped (a
        // partition stays stopped while frozen, so they are counted as stopped at the start, and the read is
        // off the window's path); if one is still stopping, sleep until the start instead, so that its
        // threads stop in its own time, not behind the executor's wait.
        let mut frozen_ahead_counted = false;
        if let Step::Boundary(b) = &step {
            if b.wake_ahead_ns > 0 && monotonic_ns() < planned {
                let (stopped, stopping) = frozen_ahead_states(b, freezers);
                if stopping > 0 {
                    sleep_until_ns(planned);
                } else {
                    log.freezes_ahead_done += stopped;
                    frozen_ahead_counted = true;
                }
            }
        }
        let woke = loop {
            let now = monotonic_ns();
            if now >= planned {
                break now;
            }
            std::hint::spin_loop();
        };
        if woke >= next_due {
            log.missed_boundaries += 1;
        }
        // The boundary's freezes and thaws (for a switch: what the old plan left running and the new plan's
        // first boundary does not keep, and that boundary's thaws), and the window that starts here.
        let (thaws, window): (&[usize], Option<usize>) = match &step {
            Step::Boundary(b) => (&b.thaw, b.window),
            Step::Switch(_) => {
                let b0 = &boundaries[plan][0];
                if b0.offset_ns == 0 { (&b0.thaw, b0.window) } else { (&[], None) }
            }
        };
        // Freeze before thaw: two partitions never run at once on the module's CPU.
        was_running.copy_from_slice(&running);
        match &step {
            Step::Boundary(b) => {
                for &p in &b.freeze {
                    if freezers[p].freeze().is_err() {
                        log.switch_errors += 1;
                    }
                    running[p] = false;
                }
            }
            Step::Switch(_) => {
                for p in 0..freezers.len() {
                    if running[p] && !thaws.contains(&p) {
                        if freezers[p].freeze().is_err() {
                            log.switch_errors += 1;
                        }
                        running[p] = false;
                    }
                }
            }
        }
        for &p in thaws {
            // A partition held frozen (idle, or stopped with its module) or whose overrun action keeps it frozen
            // gets no more windows; a demoted one gets its weight back first.
            if idle[p].as_ref().is_some_and(|probe| probe()) {
                cell.hold(p, true);
            }
            if cell.is_held(p) {
                continue;
            }
            if let Some(g) = guards[p].as_mut() {
                if g.keeps_frozen() {
                    continue;
                }
                g.before_thaw();
            }
            if freezers[p].thaw().is_err() {
                log.switch_errors += 1;
            }
            running[p] = true;
        }
        let switched = monotonic_ns();
        // The guards look after the switch: a partition thawed here cannot run before the executor sleeps
        // (same CPU, lower priority), so its CPU time read now is its time at its window's start.
        for (p, guard) in guards.iter_mut().enumerate() {
            if let Some(g) = guard {
                let thawed = thaws.contains(&p) && running[p];
                let ended = match &step {
                    Step::Boundary(b) => b.ended.contains(&p),
                    Step::Switch(_) => was_running[p] && !running[p],
                };
                g.at_boundary(p, frame, switched, thawed, ended.then_some(planned), || freezers[p].stopped_or_empty_now(), overruns);
            }
        }
        match step {
            Step::Boundary(b) => {
                // Without a wake lead (or woken too late to use it), read after the thaw, not before, so that it
                // does not delay the window.
                if !frozen_ahead_counted {
                    count_frozen_ahead(b, freezers, log);
                }
                next += 1;
            }
            Step::Switch(t) => {
                let record = PlanSwitch { from: t.from, to: plan, now: t.now, requested_ns: t.requested_ns, frame, planned_ns: planned, woke_ns: woke, switched_ns: switched, cut_offset_ns: t.cut_offset_ns, old_frame_ns: frames_ns[t.from] };
                if log.switches.len() == switch_capacity {
                    log.switches.pop_front();
                }
                log.switches.push_back(record);
                if let Ok(mut r) = cell.recent.try_lock() {
                    if r.len() == SWITCH_RECORDS {
                        r.pop_front();
                    }
                    r.push_back(record);
                }
                origin_cell.store(planned, Ordering::Release);
                cell.current.store(plan as u64, Ordering::Release);
                cell.switches.fetch_add(1, Ordering::AcqRel);
                stall.set_wake_lead(schedules[plan].wake_ahead.as_nanos() as u64);
                // The new plan's first boundary was this one when it lies at the frame's start.
                next = usize::from(boundaries[plan][0].offset_ns == 0);
            }
        }
        let lateness = woke.saturating_sub(planned);
        let cost = switched - woke;
        let partition = window.map(|w| schedules[plan].windows[w].partition);
        ring.record(&crate::window_ring::WindowRecord { frame, plan, window, partition, planned_ns: planned, woke_ns: woke, switched_ns: switched });
        match window {
            Some(window) => {
                if log.starts.len() == log.capacity {
                    log.starts.pop_front();
                }
                let partition = schedules[plan].windows[window].partition;
                log.starts.push_back(WindowStart { frame, plan, window, partition, planned_ns: planned, woke_ns: woke, switched_ns: switched });
                log.windows_started += 1;
                log.max_lateness_ns = log.max_lateness_ns.max(lateness);
                histogram.record(lateness);
                // One note per stall: the windows the executor catches up after it were planned inside it.
                if lateness > STALL_NS && planned >= stall_woke {
                    stall.record(planned, woke);
                    stall_woke = woke;
                }
                log.max_switch_ns = log.max_switch_ns.max(cost);
            }
            None => {
                if log.ends.len() == log.capacity {
                    log.ends.pop_front();
                }
                log.ends.push_back(WindowEnd { planned_ns: planned, woke_ns: woke, switched_ns: switched });
            }
        }
    }
    // The last window ends with the executor: nothing runs outside the plan.
    for f in freezers {
        let _ = f.freeze();
    }
    // Freezing completes asynchronously (a task stops on its way back to user space): wait for it, sleeping
    // between looks, since the tasks that must stop run on this thread's CPU, below its priority.
    for f in freezers {
        if f.wait_frozen_sleeping(Duration::from_secs(1)).is_err() {
            log.switch_errors += 1;
        }
    }
    if let Ok(mut p) = progress.lock() {
        *p = Progress { frames: frame, missed_boundaries: log.missed_boundaries, max_lateness_ns: log.max_lateness_ns, max_switch_ns: log.max_switch_ns };
    }
}

/// Takes the pending switch request if it is one to act on here (`at_once`: only a request for a switch at
/// once; else any), returning its plan and whether it asked for a switch at once; a request for a plan the
/// executor does not have is dropped.
fn take_request(cell: &PlanCell, plans: usize, at_once: bool) -> Option<(usize, bool)> {
    let r = cell.request.load(Ordering::Acquire);
    if r == 0 || (at_once && r & SWITCH_NOW == 0) {
        return None;
    }
    if cell.request.compare_exchange(r, 0, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // A newer request arrived meanwhile: it is taken at the next look.
        return None;
    }
    let plan = ((r & 0xffff_ffff) - 1) as usize;
    (plan < plans).then_some((plan, r & SWITCH_NOW != 0))
}

/// Counts the partitions frozen ahead of boundary `b` that have stopped and those still stopping.
fn count_frozen_ahead(b: &Boundary, freezers: &[Freezer], log: &mut ExecutorLog) {
    let (stopped, stopping) = frozen_ahead_states(b, freezers);
    log.freezes_ahead_done += stopped;
    log.freezes_ahead_overran += stopping;
}

/// Of the partitions frozen ahead of boundary `b`: how many have stopped, and how many are still stopping (a
/// backend that cannot tell counts in neither). Reads each once and allocates nothing: it runs on the
/// executor's path.
fn frozen_ahead_states(b: &Boundary, freezers: &[Freezer]) -> (u64, u64) {
    let (mut stopped, mut stopping) = (0, 0);
    for &p in &b.frozen_ahead {
        match freezers[p].stopped_now() {
            Some(true) => stopped += 1,
            Some(false) => stopping += 1,
            None => {}
        }
    }
    (stopped, stopping)
}

/// The longest the executor sleeps without looking at its stop flag: with long windows a stop still takes
/// effect at once, not at the next boundary.
const STOP_CHECK_NS: u64 = 20_000_000;

/// Sleeps until `at` (absolute CLOCK_MONOTONIC ns) unless `stop` is set or a switch at once is requested
/// first; the caller looks at which.
fn sleep_until_or_stop(at: u64, stop: &AtomicBool, cell: Option<&PlanCell>) {
    loop {
        let now = monotonic_ns();
        if now >= at || stop.load(Ordering::Relaxed) || cell.is_some_and(|c| c.request.load(Ordering::Relaxed) & SWITCH_NOW != 0) {
            return;
        }
        if at - now <= STOP_CHECK_NS {
            sleep_until_ns(at);
            return;
        }
        sleep_until_ns(now + STOP_CHECK_NS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const US: fn(u64) -> Duration = Duration::from_micros;

    /// The paper's plan: partition 0 (the recorder) 700 µs, then partition 1 (routing) 800 µs, every 1500 µs.
    fn paper_plan() -> Schedule {
        Schedule::new(US(1500), vec![
            Window { partition: 0, offset: US(0), duration: US(700) },
            Window { partition: 1, offset: US(700), duration: US(800) },
        ])
        .unwrap()
    }

    #[test]
    fn back_to_back_windows_share_a_boundary() {
        let s = Schedule::new(US(1500), vec![
            Window { partition: 0, offset: US(0), duration: US(800) },
            Window { partition: 1, offset: US(800), duration: US(700) },
        ])
        .unwrap();
        let b = s.boundaries();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].offset_ns, b[0].freeze.clone(), b[0].thaw.clone()), (0, vec![1], vec![0]));
        assert_eq!((b[1].offset_ns, b[1].freeze.clone(), b[1].thaw.clone()), (800_000, vec![0], vec![1]));
    }

    #[test]
    fn a_freeze_lead_freezes_the_outgoing_partition_before_the_next_window_starts() {
        let s = paper_plan().with_freeze_ahead(US(30)).unwrap();
        let b: Vec<(u64, Vec<usize>, Vec<usize>, Option<usize>, Vec<usize>)> =
            s.boundaries().into_iter().map(|b| (b.offset_ns, b.freeze, b.thaw, b.window, b.frozen_ahead)).collect();
        assert_eq!(b, vec![
            (0, vec![], vec![0], Some(0), vec![1]),
            (670_000, vec![0], vec![], None, vec![]),
            (700_000, vec![], vec![1], Some(1), vec![0]),
            (1_470_000, vec![1], vec![], None, vec![]),
        ]);
    }

    #[test]
    fn a_freeze_lead_leaves_windows_before_idle_time_or_the_same_partition_alone() {
        let s = Schedule::new(US(2000), vec![
            Window { partition: 0, offset: US(0), duration: US(500) },
            Window { partition: 0, offset: US(500), duration: US(500) },
            Window { partition: 1, offset: US(1200), duration: US(300) },
        ])
        .unwrap()
        .with_freeze_ahead(US(40))
        .unwrap();
        let b: Vec<(u64, Vec<usize>, Vec<usize>)> = s.boundaries().into_iter().map(|b| (b.offset_ns, b.freeze, b.thaw)).collect();
        assert_eq!(b, vec![(0, vec![], vec![0]), (500_000, vec![], vec![0]), (1_000_000, vec![0], vec![]), (1_200_000, vec![], vec![1]), (1_500_000, vec![1], vec![])]);
    }

    #[test]
    fn a_freeze_lead_as_long_as_a_window_is_refused() {
        let s = Schedule::new(US(1000), vec![
            Window { partition: 0, offset: US(0), duration: US(100) },
            Window { partition: 1, offset: US(100), duration: US(900) },
        ])
        .unwrap();
        assert!(matches!(s.clone().with_freeze_ahead(US(100)), Err(SupervisorError::Plan(PlanError::FreezeAhead { index: 0, .. }))));
        assert_eq!(s.with_freeze_ahead(US(99)).unwrap().freeze_ahead(), US(99));
    }

    #[test]
    fn a_wake_lead_is_used_only_before_starts_that_follow_quiet_time() {
        // Back to back and frozen at the boundary, the CPU is never free before a start: refused.
        assert!(matches!(paper_plan().with_wake_ahead(US(30)), Err(SupervisorError::Plan(PlanError::WakeAhead { .. }))));
        let s = paper_plan().with_freeze_ahead(US(100)).unwrap().with_wake_ahead(US(30)).unwrap();
        let leads: Vec<(u64, u64)> = s.boundaries().into_iter().map(|b| (b.offset_ns, b.wake_ahead_ns)).collect();
        assert_eq!(leads, vec![(0, 30_000), (600_000, 0), (700_000, 30_000), (1_400_000, 0)]);
        // A lead longer than the quiet time before a start is cut to it; a start right after another
        // partition's running window gets none.
        let s = Schedule::new(US(1000), vec![
            Window { partition: 0, offset: US(0), duration: US(400) },
            Window { partition: 1, offset: US(400), duration: US(500) },
        ])
        .unwrap()
        .with_wake_ahead(US(250))
        .unwrap();
        let leads: Vec<(u64, u64)> = s.boundaries().into_iter().map(|b| (b.offset_ns, b.wake_ahead_ns)).collect();
        assert_eq!(leads, vec![(0, 100_000), (400_000, 0), (900_000, 0)]);
        assert_eq!(s.wake_ahead(), US(250));
    }

    #[test]
    fn a_gap_gets_a_freeze_only_boundary() {
        let s = Schedule::new(US(1000), vec![Window { partition: 0, offset: US(100), duration: US(300) }]).unwrap();
        let b = s.boundaries();
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].window, Some(0));
        assert_eq!((b[1].offset_ns, b[1].freeze.clone(), b[1].window), (400_000, vec![0], None));
    }

    #[test]
    fn overlapping_windows_are_refused() {
        let r = Schedule::new(US(1000), vec![
            Window { partition: 0, offset: US(0), duration: US(600) },
            Window { partition: 1, offset: US(500), duration: US(100) },
        ]);
        assert!(matches!(r, Err(SupervisorError::Plan(PlanError::Overlap { first: 0 }))));
        let past_the_frame = Schedule::new(US(1000), vec![Window { partition: 0, offset: US(900), duration: US(200) }]);
        assert!(matches!(past_the_frame, Err(SupervisorError::Plan(PlanError::Window { index: 0, .. }))));
        assert!(matches!(Schedule::new(US(1000), Vec::new()), Err(SupervisorError::Plan(PlanError::Empty))));
    }

    #[test]
    fn summary_percentiles() {
        let mut v: Vec<u64> = (1..=100).collect();
        let s = Summary::of(&mut v);
        assert_eq!((s.count, s.p50_ns, s.p99_ns, s.max_ns), (100, 51, 99, 100));
    }
}
