//! `partita bench modes`: plan switching and partition modes, measured (issue 35).
//!
//! One system on one CPU (the last one of the machine), three process partitions that spin — `a`, `b` and `c` —
//! and two named plans:
//!
//! - `normal`: a 700 µs, b 500 µs, c 300 µs in a 1500 µs major frame;
//! - `degraded`: a 1200 µs, a gap, b 400 µs, c 200 µs in a 2000 µs frame.
//!
//! While a load (`stress-ng` on the other CPUs, when the machine has it) runs beside it, the benchmark asks the
//! running supervisor, through its control socket as `partita plan switch` does:
//!
//! 1. `switches` switches at the end of a major frame, back and forth, each after a random 0–3 ms;
//! 2. `now_switches` switches at once;
//! 3. then partition `c` sets itself idle through its control page (`partita bench modes-peer`).
//!
//! A kernel trace of the plan's CPU (every `sched_switch`) runs the whole time. From the executor's own record
//! and from the trace it reports:
//!
//! - whether each frame-end switch took effect exactly at the old plan's frame end, how late the new plan's
//!   first window started against the executor's lateness p99 in the old plan, and whether any window next to
//!   a switch was lost, doubled or shortened (the record's sequence of window starts; the trace's CPU time of
//!   each window's partition inside it, against ordinary windows);
//! - for the switches at once: whether each happened at the executor's first wake-up after the request, how
//!   long after the request, and what each cut took from the old plan's windows;
//! - for the idle request: how long after the request partition `c` last ran, against its window.
use partita_lab::machine::{Disturbance, Watch, HOST_NOTE};
use partita_lab::run::RunError;
use partita_supervisor::control_socket::{self, Request};
use partita_supervisor::executor::{ExecutorLog, PlanSwitch, Schedule, Window};
use partita_supervisor::stalls::{field, parse_trace, TraceEvent, Tracer};
use partita_supervisor::supervisor::{stop_requested, Supervisor, UpOptions};
use partita_system::System;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The partitions' windows in each plan, µs: (partition, start, duration); and the frames.
pub const NORMAL: (u64, [(&str, u64, u64); 3]) = (1500, [("a", 0, 700), ("b", 700, 500), ("c", 1200, 300)]);
pub const DEGRADED: (u64, [(&str, u64, u64); 3]) = (2000, [("a", 0, 1200), ("b", 1400, 400), ("c", 1800, 200)]);
const PLANS: [&str; 2] = ["normal", "degraded"];

#[derive(Debug, Clone)]
pub struct ModesConfig {
    pub switches: u32,
    pub now_switches: u32,
    /// The CPU of the plan.
    pub cpu: usize,
    /// `stress-ng` beside the plan, on the other CPUs.
    pub load: bool,
    /// The binary partitions run as `partita` (its `bench modes-peer`).
    pub partita: Option<PathBuf>,
    pub state_root: PathBuf,
}

/// The system: three spinning partitions, `c` asking for idle when told to (a file in its state directory).
pub fn system_text(cfg: &ModesConfig) -> String {
    let mut t = String::from("[system]\nname = \"bench-modes\"\n\n[[module]]\nname = \"modes\"\n");
    let _ = writeln!(t, "cpus = [{}]\ndefault_plan = \"normal\"\n", cfg.cpu);
    for p in ["a", "b", "c"] {
        let _ = writeln!(t, "[[module.partition]]\nname = \"{p}\"\ncommand = [\"partita\", \"bench\", \"modes-peer\"]\nhealth = {{ action = \"stop\" }}\n");
    }
    for (name, (frame, windows)) in PLANS.iter().zip([NORMAL, DEGRADED]) {
        let _ = writeln!(t, "[[module.plan]]\nname = \"{name}\"\ncpu = {}\nmajor_frame = \"{frame}us\"\n", cfg.cpu);
        for (p, start, dur) in windows {
            let _ = writeln!(t, "[[module.plan.window]]\npartition = \"{p}\"\nstart = \"{start}us\"\nduration = \"{dur}us\"\n");
        }
    }
    t
}

fn schedule(plan: (u64, [(&str, u64, u64); 3])) -> Schedule {
    let index = |p: &str| ["a", "b", "c"].iter().position(|x| *x == p).unwrap_or(0);
    let us = Duration::from_micros;
    Schedule::new(us(plan.0), plan.1.iter().map(|(p, s, d)| Window { partition: index(p), offset: us(*s), duration: us(*d) }).collect()).expect("the study's plans are valid")
}

/// p50 / p99 / max of a set, µs.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Spread {
    pub count: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

fn spread(ns: &[u64]) -> Spread {
    if ns.is_empty() {
        return Spread::default();
    }
    let mut v = ns.to_vec();
    v.sort_unstable();
    let q = |p: f64| v[(((v.len() - 1) as f64) * p).round() as usize] as f64 / 1e3;
    Spread { count: v.len(), p50_us: q(0.5), p99_us: q(0.99), max_us: *v.last().unwrap_or(&0) as f64 / 1e3 }
}

#[derive(Debug, Clone, Serialize)]
pub struct ModesResults {
    pub cpu: usize,
    pub load: String,
    /// Frame-end switches made and of those taking effect exactly at the old frame's end (planned instant).
    pub switches: usize,
    pub at_frame_end: usize,
    /// Lateness of the new plan's first window after each switch, against every other window start of the
    /// plans.
    pub first_window_lateness: Spread,
    pub ordinary_lateness: Spread,
    /// First windows after a switch later than the ordinary p99.
    pub first_windows_beyond_p99: usize,
    /// Windows lost, doubled or cut short next to a switch, in the executor's record.
    pub record_anomalies: usize,
    /// From the trace: each window's partition's CPU time inside it over the window (next to a switch, and
    /// elsewhere), and the windows next to a switch below the ordinary 1st percentile.
    pub share_next_to_switch_p1: f64,
    pub share_next_to_switch_p50: f64,
    pub share_ordinary_p1: f64,
    pub share_ordinary_p50: f64,
    pub windows_next_to_switch_traced: usize,
    pub shortened_in_trace: usize,
    /// The old plan's partitions still running after a switch instant (the freeze taking effect), µs.
    pub old_running_after_switch: Spread,
    /// Switches at once: made, made at the executor's first wake-up after the request, from request to switch,
    /// and what each cut took from the old plan's windows.
    pub now_switches: usize,
    pub now_at_first_wake: usize,
    pub now_response: Spread,
    pub now_lost: Spread,
    /// Idle: `c`'s CPU time after the end of the window it asked in, µs (a frozen task runs only to enter the
    /// freezer when woken); its window; and how many of its later windows gave it more than 50 µs (none, if
    /// it stopped within one window).
    pub idle_cpu_after_window_us: Option<f64>,
    pub idle_window_us: f64,
    pub idle_windows_with_cpu_after: usize,
    pub trace_events: usize,
    pub trace_lost: u64,
    pub disturbance: Disturbance,
}

/// Runs the study.
pub fn run(cfg: &ModesConfig, mut log: impl FnMut(&str)) -> Result<ModesResults, RunError> {
    let text = system_text(cfg);
    let host = partita_system::Host::this_machine();
    let system: System = partita_system::parse(&text, "bench-modes.toml", &host).map_err(|e| RunError::Setup(format!("the study's system: {e}")))?;
    let mut options = UpOptions::new(&cfg.state_root);
    options.partita = cfg.partita.clone();
    let load = start_load(cfg);
    let load_text = match &load {
        Some(_) => format!("stress-ng --cpu 1 --hdd 1 on CPUs other than {}", cfg.cpu),
        None => "none".to_string(),
    };
    let watch = Watch::start();
    let sys_err = |e: &dyn std::fmt::Display| RunError::Supervisor { system: system.name.clone(), message: e.to_string() };
    let sup = Supervisor::up(&system, &options).map_err(|e| sys_err(&e))?;
    let state = sup.state_dir().to_path_buf();
    let c_dir = system.partitions().find(|(_, p)| p.name == "c").and_then(|(_, p)| p.tree.confinement.as_ref()).map(|c| c.state_dir.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let cpu = cfg.cpu;
    let (switches, now_switches) = (cfg.switches, cfg.now_switches);
    let driver = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<(String, Option<u64>), String> {
            let mut tracer = Tracer::switches(cpu).map_err(|e| format!("tracing CPU {cpu}: {e}"))?;
            let mut trace = String::new();
            std::thread::sleep(Duration::from_millis(500));
            let mut rng = 0x2545_f491_4f6c_dd1du64;
            let mut next = |n: u64| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng % n
            };
            let ask = |plan: &str, now: bool| control_socket::send(&state, &Request::SwitchPlan { module: None, plan: plan.into(), now }, Duration::from_secs(15));
            for k in 0..switches + now_switches {
                if stop_requested() {
                    break;
                }
                let plan = PLANS[((k + 1) % 2) as usize];
                match ask(plan, k >= switches) {
                    Ok(r) if r.ok => {}
                    Ok(r) => return Err(format!("switch {k} to {plan}: {}", r.detail)),
                    Err(e) => return Err(format!("switch {k} to {plan}: {e}")),
                }
                std::thread::sleep(Duration::from_micros(next(3000)));
                if k % 64 == 0 {
                    trace += &tracer.read_new().map_err(|e| e.to_string())?;
                }
            }
            // Back to the normal plan, then c asks for idle: its peer program looks for this file.
            let _ = ask("normal", false);
            std::thread::sleep(Duration::from_millis(100));
            let idle_asked = c_dir.as_ref().and_then(|d| std::fs::write(d.join("idle-now"), b"1").ok()).map(|_| partita_supervisor::clock::monotonic_ns());
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(100));
                trace += &tracer.read_new().map_err(|e| e.to_string())?;
            }
            drop(tracer);
            stop.store(true, Ordering::SeqCst);
            Ok((trace, idle_asked))
        })
    };
    log(&format!("bench modes: {switches} switches at frame ends and {now_switches} at once between plans normal and degraded on CPU {cpu} (load: {load_text})"));
    let result = sup.run(Some(Duration::from_secs(600)), Some(stop.clone()));
    stop.store(true, Ordering::SeqCst);
    let driven = driver.join().map_err(|_| RunError::Setup("the benchmark's driver panicked".into()))?;
    drop(load);
    let logs = result.map_err(|e| sys_err(&e))?;
    if stop_requested() {
        return Err(RunError::Interrupted);
    }
    let (trace, _idle_file_written) = driven.map_err(RunError::Setup)?;
    // The peer of c wrote when it asked for idle in its output log.
    let c_log = std::fs::read_to_string(options.state_root.join(&system.name).join("c.log")).unwrap_or_default();
    let asked = c_log.lines().find_map(|l| l.strip_prefix("modes-peer: asking for idle at ")?.strip_suffix(" ns")?.trim().parse::<u64>().ok());
    let log0 = logs.into_iter().next().ok_or_else(|| RunError::Setup("no executor log".into()))?;
    Ok(analyse(&log0, &trace, asked, cfg.cpu, load_text, watch.stop()))
}

/// The peer program of each partition: spins; partition `c` asks for idle once `idle-now` appears in its state
/// directory, then spins on (its windows stay empty from then on).
pub fn peer(state_dir: Option<&Path>) -> std::io::Result<()> {
    let control = partita_ports::control::Control::from_env().map_err(|e| std::io::Error::other(e.to_string()))?;
    if let Some(c) = &control {
        // Started (cold start): normal from here, as an application does when its initialisation is done.
        let _ = c.request(&partita_ports::control::Request::SetMode(partita_ports::control::Mode::Normal), Duration::from_secs(5));
    }
    let flag = state_dir.map(|d| d.join("idle-now"));
    // An earlier run's signal, kept in the state directory (the partition's own, kept across runs).
    if let Some(f) = &flag {
        let _ = std::fs::remove_file(f);
    }
    let mut asked = false;
    let mut last_look = Instant::now();
    loop {
        std::hint::spin_loop();
        if !asked && last_look.elapsed() >= Duration::from_millis(5) {
            last_look = Instant::now();
            if flag.as_ref().is_some_and(|f| f.exists()) {
                asked = true;
                if let Some(c) = &control {
                    eprintln!("modes-peer: asking for idle at {} ns", partita_os::clock::monotonic_ns());
                    let _ = c.request(&partita_ports::control::Request::SetMode(partita_ports::control::Mode::Idle), Duration::from_secs(5));
                }
            }
        }
    }
}

/// Who ran on the CPU when: (from, to, pid) intervals of every task but the idle task and the executor.
fn runs(events: &[TraceEvent]) -> Vec<(u64, u64, u32)> {
    let mut out = Vec::new();
    let mut current: Option<(u64, u32)> = None;
    for e in events.iter().filter(|e| e.event == "sched_switch") {
        if let Some((from, pid)) = current.take() {
            out.push((from, e.ns, pid));
        }
        let next: Option<u32> = field(&e.fields, "next_pid").and_then(|p| p.parse().ok());
        let comm = field(&e.fields, "next_comm").unwrap_or("");
        if let Some(pid) = next.filter(|p| *p != 0 && comm != partita_supervisor::stalls::EXECUTOR_COMM) {
            current = Some((e.ns, pid));
        }
    }
    out
}

/// CPU time of `pids` inside [from, to).
fn time_in(runs: &[(u64, u64, u32)], pids: &HashSet<u32>, from: u64, to: u64) -> u64 {
    let start = runs.partition_point(|r| r.1 <= from);
    runs[start..].iter().take_while(|r| r.0 < to).filter(|r| pids.contains(&r.2)).map(|r| r.1.min(to).saturating_sub(r.0.max(from))).sum()
}

#[allow(clippy::too_many_arguments)]
fn analyse(log: &ExecutorLog, trace: &str, asked: Option<u64>, cpu: usize, load: String, disturbance: Disturbance) -> ModesResults {
    let plans = [schedule(NORMAL), schedule(DEGRADED)];
    let frame_end: Vec<&PlanSwitch> = log.switches.iter().filter(|s| !s.now).collect();
    let at_once: Vec<&PlanSwitch> = log.switches.iter().filter(|s| s.now).collect();
    let starts: Vec<_> = log.starts.iter().collect();
    let switch_at: HashSet<u64> = log.switches.iter().map(|s| s.planned_ns).collect();
    // The record: each frame-end switch at the old frame's end (its last window plus what follows it in the
    // frame), the new plan's window 0 there.
    let mut at_end = 0;
    let mut anomalies = 0;
    let mut first_late = Vec::new();
    for s in &frame_end {
        let k = starts.partition_point(|w| w.planned_ns < s.planned_ns);
        let (Some(before), Some(first)) = (k.checked_sub(1).and_then(|i| starts.get(i)), starts.get(k)) else { continue };
        let old = &plans[s.from];
        let last = old.windows().len() - 1;
        let old_end = before.planned_ns + (old.major_frame() - old.windows()[last].offset).as_nanos() as u64;
        let exact = before.plan == s.from && before.window == last && old_end == s.planned_ns;
        at_end += usize::from(exact);
        if !(exact && first.planned_ns == s.planned_ns && first.plan == s.to && first.window == 0) {
            anomalies += 1;
        }
        first_late.push(first.woke_ns.saturating_sub(first.planned_ns));
    }
    // Between switches, consecutive starts follow their plan's windows.
    for pair in starts.windows(2) {
        let (x, y) = (pair[0], pair[1]);
        if x.plan != y.plan || switch_at.contains(&y.planned_ns) {
            continue;
        }
        let p = &plans[x.plan];
        let n = p.windows().len();
        let expected_window = (x.window + 1) % n;
        let gap = if expected_window == 0 { (p.major_frame() - p.windows()[x.window].offset).as_nanos() as u64 } else { (p.windows()[expected_window].offset - p.windows()[x.window].offset).as_nanos() as u64 };
        if y.window != expected_window || y.planned_ns - x.planned_ns != gap {
            anomalies += 1;
        }
    }
    let ordinary: Vec<u64> = starts.iter().filter(|w| !switch_at.contains(&w.planned_ns)).map(|w| w.woke_ns.saturating_sub(w.planned_ns)).collect();
    let ordinary_spread = spread(&ordinary);
    let beyond = first_late.iter().filter(|l| **l as f64 / 1e3 > ordinary_spread.p99_us).count();
    // The trace: which pids are whose — the executor's thaw of a window's partition is followed by its tasks.
    let events = parse_trace(trace);
    let lost: u64 = trace.lines().filter_map(partita_supervisor::stalls::lost_events).sum();
    let runs = runs(&events);
    let (t0, t1) = (events.first().map_or(0, |e| e.ns), events.last().map_or(0, |e| e.ns));
    // A partition's tasks: those that run in the middle of its windows (the first 100 traced windows).
    let mut owner: HashMap<u32, [u64; 3]> = HashMap::new();
    for w in starts.iter().filter(|w| w.planned_ns >= t0 && w.planned_ns < t1).take(3000) {
        let dur = plans[w.plan].windows()[w.window].duration.as_nanos() as u64;
        let (from, to) = (w.switched_ns + dur / 4, w.planned_ns + dur * 3 / 4);
        let k = runs.partition_point(|r| r.1 <= from);
        for r in runs[k..].iter().take_while(|r| r.0 < to) {
            owner.entry(r.2).or_default()[w.partition.min(2)] += r.1.min(to).saturating_sub(r.0.max(from));
        }
    }
    let mut pids: [HashSet<u32>; 3] = Default::default();
    for (pid, t) in &owner {
        let best = (0..3).max_by_key(|&i| t[i]).unwrap_or(0);
        if t[best] > 0 {
            pids[best].insert(*pid);
        }
    }
    let share = |w: &partita_supervisor::executor::WindowStart| {
        let dur = plans[w.plan].windows()[w.window].duration.as_nanos() as u64;
        time_in(&runs, &pids[w.partition.min(2)], w.planned_ns, w.planned_ns + dur) as f64 / dur as f64
    };
    let traced: Vec<_> = starts.iter().filter(|w| w.planned_ns >= t0 && w.planned_ns + 2_000_000 < t1).collect();
    let near: HashSet<u64> = frame_end
        .iter()
        .flat_map(|s| {
            let k = starts.partition_point(|w| w.planned_ns < s.planned_ns);
            [k.checked_sub(1), Some(k)].into_iter().flatten().filter_map(|i| starts.get(i).map(|w| w.planned_ns)).collect::<Vec<_>>()
        })
        .collect();
    // Ordinary windows: not next to a switch, not near a switch at once, and not c's once it asked for idle.
    let idle_from = asked.unwrap_or(u64::MAX);
    let mut ordinary_shares: Vec<f64> = traced
        .iter()
        .filter(|w| !near.contains(&w.planned_ns) && !at_once.iter().any(|s| s.planned_ns.abs_diff(w.planned_ns) < 3_000_000))
        .filter(|w| !(w.partition == 2 && w.planned_ns >= idle_from))
        .map(|w| share(w))
        .collect();
    ordinary_shares.sort_by(|a, b| a.total_cmp(b));
    let q = |v: &[f64], p: f64| if v.is_empty() { 0.0 } else { v[(((v.len() - 1) as f64) * p).round() as usize] };
    let (p1, p50) = (q(&ordinary_shares, 0.01), q(&ordinary_shares, 0.5));
    let near_shares: Vec<f64> = traced.iter().filter(|w| near.contains(&w.planned_ns)).map(|w| share(w)).collect();
    let shortened = near_shares.iter().filter(|s| **s < p1).count();
    let mut near_sorted = near_shares.clone();
    near_sorted.sort_by(|a, b| a.total_cmp(b));
    let (near_p1, near_p50) = (q(&near_sorted, 0.01), q(&near_sorted, 0.5));
    // The old plan's last partition after the switch instant: until its tasks stop.
    let old_after: Vec<u64> = frame_end
        .iter()
        .filter(|s| s.planned_ns > t0 && s.planned_ns + 2_000_000 < t1)
        .filter_map(|s| {
            let k = starts.partition_point(|w| w.planned_ns < s.planned_ns);
            let before = starts.get(k.checked_sub(1)?)?;
            if before.partition == 0 {
                return None;
            }
            Some(time_in(&runs, &pids[before.partition.min(2)], s.planned_ns, s.planned_ns + 1_000_000))
        })
        .collect();
    // Switches at once: the first wake-up after the request is the switch's (no boundary handled between).
    let mut first_wake = 0;
    let mut response = Vec::new();
    let mut lost_ns = Vec::new();
    for s in &at_once {
        let handled_between = log.starts.iter().any(|w| w.woke_ns > s.requested_ns && w.woke_ns < s.woke_ns) || log.ends.iter().any(|w| w.woke_ns > s.requested_ns && w.woke_ns < s.woke_ns);
        first_wake += usize::from(!handled_between);
        response.push(s.switched_ns.saturating_sub(s.requested_ns));
        let old = &plans[s.from];
        let cut: u64 = old.windows().iter().map(|w| ((w.offset + w.duration).as_nanos() as u64).saturating_sub(s.cut_offset_ns.max(w.offset.as_nanos() as u64))).sum();
        lost_ns.push(cut);
    }
    // Idle: from the peer's request to c's last run (its tasks stop when the executor freezes it at its
    // window's end and never thaws it again).
    let idle_window = plans[0].windows()[2].duration.as_nanos() as f64 / 1e3;
    // After the end of the window it asked in, a frozen partition's task runs only to enter the freezer when
    // something wakes it (the supervisor's answer): its CPU time from there on, and its later windows with
    // more than 50 µs of it.
    let (mut idle_after_us, mut idle_windows_after) = (None, 0usize);
    if let Some(a) = asked {
        if let Some(w) = starts.iter().rev().find(|w| w.partition == 2 && w.planned_ns <= a) {
            let end = w.planned_ns + plans[w.plan].windows()[w.window].duration.as_nanos() as u64;
            idle_after_us = Some(time_in(&runs, &pids[2], end, t1) as f64 / 1e3);
            idle_windows_after = starts.iter().filter(|x| x.partition == 2 && x.planned_ns > w.planned_ns && x.planned_ns < t1).filter(|x| share(x) * plans[x.plan].windows()[x.window].duration.as_nanos() as f64 > 50_000.0).count();
        }
    }
    ModesResults {
        cpu,
        load,
        switches: frame_end.len(),
        at_frame_end: at_end,
        first_window_lateness: spread(&first_late),
        ordinary_lateness: ordinary_spread,
        first_windows_beyond_p99: beyond,
        record_anomalies: anomalies,
        share_next_to_switch_p1: near_p1,
        share_next_to_switch_p50: near_p50,
        share_ordinary_p1: p1,
        share_ordinary_p50: p50,
        windows_next_to_switch_traced: near_shares.len(),
        shortened_in_trace: shortened,
        old_running_after_switch: spread(&old_after),
        now_switches: at_once.len(),
        now_at_first_wake: first_wake,
        now_response: spread(&response),
        now_lost: spread(&lost_ns),
        idle_cpu_after_window_us: idle_after_us,
        idle_window_us: idle_window,
        idle_windows_with_cpu_after: idle_windows_after,
        trace_events: events.len(),
        trace_lost: lost,
        disturbance,
    }
}

/// `stress-ng`, ended (SIGTERM to it, which ends its workers, then reaped) when dropped.
struct Load(std::process::Child);

impl Drop for Load {
    fn drop(&mut self) {
        let _ = partita_os::process::send_signal(self.0.id() as i32, libc::SIGTERM);
        let _ = self.0.wait();
    }
}

fn start_load(cfg: &ModesConfig) -> Option<Load> {
    if !cfg.load {
        return None;
    }
    let cpus: Vec<String> = partita_system::Host::this_machine().cpus.into_iter().filter(|c| *c != cfg.cpu).map(|c| c.to_string()).collect();
    if cpus.is_empty() {
        return None;
    }
    let mut cmd = std::process::Command::new("stress-ng");
    // Not beyond the benchmark, even if it is killed.
    partita_os::process::end_with_parent(&mut cmd, libc::SIGTERM);
    cmd.args(["--cpu", "1", "--hdd", "1", "--hdd-bytes", "64M", "--temp-path", "/tmp", "--taskset", &cpus.join(","), "--timeout", "900", "--quiet"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()
        .map(Load)
}

pub fn markdown(r: &ModesResults, command: &str) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# partita bench modes: plan switches and an idle request\n");
    let _ = writeln!(m, "`{command}` — plan CPU {}, load: {}. {HOST_NOTE}\n", r.cpu, r.load);
    let _ = writeln!(m, "## Switches at the end of a major frame\n");
    let _ = writeln!(m, "| measure | value |\n|---|---:|");
    let _ = writeln!(m, "| switches | {} |", r.switches);
    let _ = writeln!(m, "| taking effect exactly at the old frame's end (executor record) | {} of {} |", r.at_frame_end, r.switches);
    let _ = writeln!(m, "| windows lost, doubled or out of sequence in the record | {} |", r.record_anomalies);
    let _ = writeln!(m, "| lateness of the new plan's first window: p50 / p99 / max µs | {:.1} / {:.1} / {:.1} |", r.first_window_lateness.p50_us, r.first_window_lateness.p99_us, r.first_window_lateness.max_us);
    let _ = writeln!(m, "| lateness of every other window start: p50 / p99 / max µs | {:.1} / {:.1} / {:.1} |", r.ordinary_lateness.p50_us, r.ordinary_lateness.p99_us, r.ordinary_lateness.max_us);
    let _ = writeln!(m, "| first windows later than that p99 | {} of {} |", r.first_windows_beyond_p99, r.first_window_lateness.count);
    let _ = writeln!(m, "| kernel trace: windows next to a switch traced | {} |", r.windows_next_to_switch_traced);
    let _ = writeln!(m, "| kernel trace: the share of each window its partition ran, next to a switch, p1 / p50 | {:.3} / {:.3} |", r.share_next_to_switch_p1, r.share_next_to_switch_p50);
    let _ = writeln!(m, "| kernel trace: the same of every other window, p1 / p50 | {:.3} / {:.3} |", r.share_ordinary_p1, r.share_ordinary_p50);
    let _ = writeln!(m, "| kernel trace: windows next to a switch below the others' p1 (1 % would be by chance) | {} of {} ({:.2} %) |", r.shortened_in_trace, r.windows_next_to_switch_traced, 100.0 * r.shortened_in_trace as f64 / r.windows_next_to_switch_traced.max(1) as f64);
    let _ = writeln!(m, "| kernel trace: the old plan's last partition running after the switch instant, p50 / p99 / max µs | {:.1} / {:.1} / {:.1} |", r.old_running_after_switch.p50_us, r.old_running_after_switch.p99_us, r.old_running_after_switch.max_us);
    let _ = writeln!(m, "| trace events (lost) | {} ({}) |\n", r.trace_events, r.trace_lost);
    let _ = writeln!(m, "## Switches at once (`--now`)\n");
    let _ = writeln!(m, "| measure | value |\n|---|---:|");
    let _ = writeln!(m, "| switches | {} |", r.now_switches);
    let _ = writeln!(m, "| made at the executor's first wake-up after the request | {} of {} |", r.now_at_first_wake, r.now_switches);
    let _ = writeln!(m, "| request (reaching the executor) to switch: p50 / p99 / max µs | {:.1} / {:.1} / {:.1} |", r.now_response.p50_us, r.now_response.p99_us, r.now_response.max_us);
    let _ = writeln!(m, "| window time the cut took from the old plan: p50 / max µs | {:.1} / {:.1} |\n", r.now_lost.p50_us, r.now_lost.max_us);
    let _ = writeln!(m, "## A partition that sets itself idle\n");
    match r.idle_cpu_after_window_us {
        Some(us) => {
            let _ = writeln!(m, "Partition c (windows of {:.0} µs) asked for idle; after the end of the window it asked in it used {us:.1} µs of CPU time in all (a frozen task entering the freezer when woken), and {} of its later windows gave it more than 50 µs.\n", r.idle_window_us, r.idle_windows_with_cpu_after);
        }
        _ => {
            let _ = writeln!(m, "The idle request was not seen in the trace.\n");
        }
    }
    let _ = writeln!(m, "{}", r.disturbance.note());
    m
}

pub fn write_all(r: &ModesResults, dir: &Path, command: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("modes.md"), markdown(r, command))?;
    std::fs::write(dir.join("modes.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)
}
