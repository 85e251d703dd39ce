//! `partita soak`: runs a system for a long time under the load it declares and writes, per interval, what
//! temporal isolation looked like: each plan's window-start lateness, each partition's CPU time against its
//! planned window time, memory, the monitors' response times, the host's steal time and context switches, and
//! the health events; then a report with plots over time and a verdict against stated limits. Before the
//! system starts, cyclictest measures the machine's own wake-up floor on each plan's CPU.
//!
//! A stop (Ctrl-C, SIGTERM) ends the run early; the intervals measured so far are still reported.
use partita_lab::cyclictest::{self, CyclicConfig, CyclicResult};
use partita_supervisor::histogram::Snapshot;
use partita_supervisor::supervisor::{stop_requested, Supervisor, UpOptions};
use partita_system::System;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SoakConfig {
    pub system: System,
    pub options: UpOptions,
    pub duration: Duration,
    pub interval: Duration,
    pub out: PathBuf,
    /// cyclictest on each plan's CPU before the system starts, for this long (`None`: no floor).
    pub floor: Option<Duration>,
    /// Limits of the verdict.
    pub limits: Limits,
    /// Trace each plan's CPU with ftrace and explain every window start later than 1 ms.
    pub trace_stalls: bool,
    /// How the system's processes are scheduled, for the report.
    pub setup: String,
}

/// A window start later than 1 ms, and what the kernel's trace says delayed it.
#[derive(Debug, Clone, Serialize)]
pub struct StallRecord {
    pub t_s: f64,
    pub cpu: usize,
    /// The planned start, CLOCK_MONOTONIC ns (the trace's clock).
    pub planned_ns: u64,
    #[serde(flatten)]
    pub explanation: partita_supervisor::stalls::Explanation,
    /// The trace around it, relative to the output folder.
    pub trace: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    /// An interval's executor lateness p99 may be at most this many times cyclictest's p99 on its CPU.
    pub lateness_vs_floor: f64,
    /// An interval's monitor p99 response time, µs (of all its responses when the monitor prints them, else
    /// the worst of its per-second p99s).
    pub response_p99_us: Option<f64>,
    /// Where `response_p99_us` came from when it was not given by hand ([`bound_from`]).
    pub response_from: Option<String>,
}

/// The response limit of a soak of the built-in system from `bench paper`'s results (`results.json`): its
/// plan-predicted bound (`prediction.bound_us`, which counts the routing partition's thaw herd when `bench paper`
/// could trace it) plus `lead`, the soak's freeze-ahead (a partition frozen that
/// much before its window ends makes the longest wait for the routing window that much longer; `bench paper`'s
/// plan has none). Returns the limit in µs and a line saying where it came from, or an error naming the file,
/// the field and the fix.
pub fn bound_from(results: &std::path::Path, lead: std::time::Duration) -> Result<(f64, String), String> {
    let f = results.display();
    let text = std::fs::read_to_string(results).map_err(|e| format!("--bound-from {f}: {e}; give the results.json `partita bench paper` wrote"))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("--bound-from {f}: not JSON ({e}); give the results.json `partita bench paper` wrote"))?;
    let bound = v["prediction"]["bound_us"].as_f64().filter(|b| *b > 0.0 && b.is_finite()).ok_or_else(|| {
        format!("--bound-from {f}: no `prediction.bound_us`; run `partita bench paper` with the trad-routing and partitioned scenarios (--scenarios trad-routing,partitioned), which predict the bound")
    })?;
    let lead_us = lead.as_secs_f64() * 1e6;
    let herd = v["prediction"]["thaw_herd"]["p99_us"].as_f64().map_or(String::new(), |h| format!(", the thaw herd's p99 {h:.0} µs in it,"));
    let mut from = format!("bench paper's bound {bound:.0} µs{herd} in {f}");
    if lead_us > 0.0 {
        from.push_str(&format!(" + the freeze-ahead lead {lead_us:.0} µs"));
    }
    if let Some(m) = v["machine"].as_str().filter(|m| *m != partita_lab::machine::describe()) {
        from.push_str(&format!(" (measured on another machine or idle policy: {m})"));
    }
    Ok((bound + lead_us, from))
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanInterval {
    pub cpu: usize,
    pub windows: u64,
    pub lateness_p50_us: Option<f64>,
    pub lateness_p99_us: Option<f64>,
    pub lateness_max_us: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PartitionInterval {
    pub name: String,
    /// CPU time its cgroup used in the interval, ms.
    pub cpu_ms: f64,
    /// Its planned window time in the interval, ms (`None`: not in a plan).
    pub planned_ms: Option<f64>,
    pub processes: usize,
    /// Resident memory of its processes at the interval's end, KiB.
    pub rss_kib: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct MonitorInterval {
    pub name: String,
    pub answered: u64,
    pub timed_out: u64,
    /// Of the monitor's per-second figures in the interval: the median p50, the worst p99 and max.
    pub p50_us: Option<f64>,
    pub worst_p99_us: Option<f64>,
    pub worst_max_us: Option<f64>,
    /// Over every response of the interval (when the monitor prints them, `--live-samples`): how many, and
    /// their p50, p99 and max, µs.
    pub samples: u64,
    pub all_p50_us: Option<f64>,
    pub all_p99_us: Option<f64>,
    pub all_max_us: Option<f64>,
    /// Of those responses, how many took longer than the response limit (when one is given).
    pub over_limit: Option<u64>,
}

impl MonitorInterval {
    /// The p99 the verdict judges: over all the interval's responses if known, else the worst second's.
    pub fn p99_us(&self) -> Option<f64> {
        self.all_p99_us.or(self.worst_p99_us)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Seconds since the system came up, at the interval's end.
    pub t_s: f64,
    pub plans: Vec<PlanInterval>,
    pub partitions: Vec<PartitionInterval>,
    pub monitors: Vec<MonitorInterval>,
    /// The host's steal time (all CPUs), ms, and context switches, in the interval.
    pub steal_ms: f64,
    pub context_switches: u64,
    /// Health events in the interval, by kind.
    pub events: std::collections::BTreeMap<String, u64>,
    /// Window starts later than 1 ms in the interval, explained (with `--trace-stalls`).
    pub stalls: Vec<StallRecord>,
    /// Window starts later than 1 ms the executor noted but the tracer could not read in time (overwritten).
    pub stalls_lost: u64,
    /// Whether the interval met the limits (`None` where a limit could not be checked).
    pub lateness_ok: Option<bool>,
    pub response_ok: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    pub system: String,
    pub machine: String,
    pub duration_s: f64,
    pub interval_s: f64,
    pub stopped_early: bool,
    /// How the system's processes were scheduled.
    pub setup: String,
    /// Each plan as the executor ran it: CPU, major frame, freeze lead and wake lead.
    pub plans: Vec<String>,
    /// cyclictest per plan CPU, before the system started.
    pub floor: Vec<(usize, CyclicResult)>,
    pub limits: Limits,
    /// Over the whole run, per plan: lateness p50/p99/max µs.
    pub overall: Vec<PlanInterval>,
    /// Every response of the monitors over the whole run (with `--live-samples`), counted in 100 µs bins:
    /// `(bin start µs, responses)`, the empty bins left out.
    pub responses_100us: Vec<(u64, u64)>,
    /// Per plan with a freeze lead (`freeze_ahead`), in plan order: of the partitions frozen ahead of a window
    /// start, how many the kernel reported stopped when that window started, and how many were still stopping.
    pub freezes_ahead: Vec<FreezesAhead>,
    pub intervals: Vec<Interval>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct FreezesAhead {
    pub plan: usize,
    pub done: u64,
    pub overran: u64,
}

/// The width of the whole run's response bins, µs.
const BIN_US: f64 = 100.0;

#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    #[error("system {system}: {message}")]
    Supervisor { system: String, message: String },
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("the floor: {0}")]
    Floor(String),
    #[error("{0}")]
    Trace(String),
}

fn file_err(path: &Path) -> impl Fn(std::io::Error) -> SoakError + '_ {
    move |e| SoakError::File { path: path.into(), message: e.to_string() }
}

/// `(steal ns, context switches)` of the whole host, from /proc/stat.
fn host_counters() -> (f64, u64) {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let tick_ms = 1000.0 / 100.0; // USER_HZ
    let steal = text.lines().find(|l| l.starts_with("cpu ")).and_then(|l| l.split_whitespace().nth(8)).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) * tick_ms;
    let ctxt = text.lines().find_map(|l| l.strip_prefix("ctxt ")).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (steal, ctxt)
}


/// A monitor's live line: `(elapsed s, answered, timed out, p50, p99, max)`.
pub fn parse_live_line(line: &str) -> Option<(f64, u64, u64, f64, f64, f64)> {
    let rest = line.strip_prefix("monitor:")?;
    let w: Vec<&str> = rest.split_whitespace().collect();
    let num = |key: &str| w.iter().position(|x| *x == key).and_then(|i| w.get(i + 1)).and_then(|v| v.parse::<f64>().ok());
    let elapsed = w.first()?.parse().ok()?;
    let answered = w.get(2)?.parse().ok()?;
    let timed = w.get(4)?.parse().ok()?;
    Some((elapsed, answered, timed, num("p50")?, num("p99")?, num("max")?))
}

/// A monitor's samples line (`monitor samples: N us us …`): the response times, µs.
pub fn parse_samples_line(line: &str) -> Option<Vec<f64>> {
    let mut w = line.strip_prefix("monitor samples:")?.split_whitespace();
    let n: usize = w.next()?.parse().ok()?;
    let v: Vec<f64> = w.map(|x| x.parse::<f64>()).collect::<Result<_, _>>().ok()?;
    (v.len() == n).then_some(v)
}

/// The `q` quantile (nearest rank) of sorted values; `None` for none.
fn rank(sorted: &[f64], q: f64) -> Option<f64> {
    partita_lab::stats::nearest_rank(sorted, q)
}

/// Reads the lines added to a file since the last call.
struct Tail {
    path: PathBuf,
    offset: u64,
}

impl Tail {
    fn new_lines(&mut self) -> Vec<String> {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = std::fs::File::open(&self.path) else { return Vec::new() };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut text = String::new();
        let _ = f.read_to_string(&mut text);
        let complete = text.rfind('\n').map_or(0, |i| i + 1);
        self.offset += complete as u64;
        text[..complete].lines().map(String::from).collect()
    }
}

struct Sampler {
    plans: Vec<(usize, Arc<partita_supervisor::histogram::LatencyHistogram>, Snapshot)>,
    partitions: Vec<(String, Arc<partita_supervisor::cgroup::PartitionCgroup>, Duration, Option<f64>)>,
    monitors: Vec<(String, Tail, (u64, u64))>,
    events: Tail,
    host: (f64, u64),
    started: Instant,
    last: Instant,
    floor: Vec<(usize, CyclicResult)>,
    limits: Limits,
    tracers: Vec<partita_supervisor::stalls::Watcher>,
    stalls: Vec<StallRecord>,
    stalls_lost: u64,
    stall_count: usize,
    out: PathBuf,
    /// The whole run's responses by 100 µs bin.
    responses: std::collections::BTreeMap<u64, u64>,
}

impl Sampler {
    /// Explains every stall of each traced plan whose trace is in.
    fn check_stalls(&mut self) {
        for w in &mut self.tracers {
            let lost = w.lost;
            let Ok(explained) = w.poll() else { continue };
            self.stalls_lost += w.lost - lost;
            for e in explained {
                let name = format!("stalls/stall-{}-cpu{}.txt", self.stall_count + 1, w.cpu);
                self.stall_count += 1;
                let _ = std::fs::create_dir_all(self.out.join("stalls"));
                let _ = std::fs::write(self.out.join(&name), format!("# planned {} ns (CLOCK_MONOTONIC), woke {} ns: {:?}\n{}", e.planned_ns, e.woke_ns, e.explanation, e.excerpt));
                self.stalls.push(StallRecord { t_s: self.started.elapsed().as_secs_f64(), cpu: w.cpu, planned_ns: e.planned_ns, explanation: e.explanation, trace: name });
            }
        }
    }

    fn sample(&mut self) -> Interval {
        let interval_s = self.last.elapsed().as_secs_f64();
        self.last = Instant::now();
        let plans = self
            .plans
            .iter_mut()
            .map(|(cpu, h, last)| {
                let now = h.snapshot();
                let d = now.since(last);
                *last = now;
                PlanInterval { cpu: *cpu, windows: d.total(), lateness_p50_us: d.quantile_us(0.5), lateness_p99_us: d.quantile_us(0.99), lateness_max_us: d.max_us() }
            })
            .collect::<Vec<_>>();
        let partitions = self
            .partitions
            .iter_mut()
            .map(|(name, cg, last, share)| {
                let used = cg.cpu_usage().unwrap_or(*last);
                let cpu_ms = used.saturating_sub(*last).as_secs_f64() * 1e3;
                *last = used;
                let pids = cg.pids().unwrap_or_default();
                PartitionInterval {
                    name: name.clone(),
                    cpu_ms,
                    planned_ms: share.map(|s| s * interval_s * 1e3),
                    processes: pids.len(),
                    rss_kib: pids.iter().filter_map(|p| partita_os::process::rss_kib(*p)).sum(),
                }
            })
            .collect();
        let (responses, limit) = (&mut self.responses, self.limits.response_p99_us);
        let monitors = self
            .monitors
            .iter_mut()
            .map(|(name, tail, last)| {
                let text = tail.new_lines();
                let lines: Vec<_> = text.iter().filter_map(|l| parse_live_line(l)).collect();
                let mut all: Vec<f64> = text.iter().filter_map(|l| parse_samples_line(l)).flatten().collect();
                all.sort_by(f64::total_cmp);
                for v in &all {
                    *responses.entry((v / BIN_US) as u64).or_insert(0) += 1;
                }
                let mut m = MonitorInterval {
                    name: name.clone(),
                    samples: all.len() as u64,
                    all_p50_us: rank(&all, 0.5),
                    all_p99_us: rank(&all, 0.99),
                    all_max_us: all.last().copied(),
                    over_limit: limit.filter(|_| !all.is_empty()).map(|l| all.iter().filter(|v| **v > l).count() as u64),
                    ..MonitorInterval::default()
                };
                if let Some(end) = lines.last() {
                    m.answered = end.1.saturating_sub(last.0);
                    m.timed_out = end.2.saturating_sub(last.1);
                    *last = (end.1, end.2);
                    let mut p50: Vec<f64> = lines.iter().map(|l| l.3).collect();
                    p50.sort_by(f64::total_cmp);
                    m.p50_us = p50.get(p50.len() / 2).copied();
                    m.worst_p99_us = lines.iter().map(|l| l.4).reduce(f64::max);
                    m.worst_max_us = lines.iter().map(|l| l.5).reduce(f64::max);
                }
                m
            })
            .collect::<Vec<_>>();
        let mut events = std::collections::BTreeMap::new();
        for l in self.events.new_lines() {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&l) {
                *events.entry(v["event"].as_str().unwrap_or("?").to_string()).or_insert(0) += 1;
            }
        }
        let host = host_counters();
        let (steal_ms, context_switches) = (host.0 - self.host.0, host.1.saturating_sub(self.host.1));
        self.host = host;
        let lateness_ok = plans
            .iter()
            .map(|p| {
                let floor = self.floor.iter().find(|(c, _)| *c == p.cpu)?.1.p99_us;
                Some(p.lateness_p99_us? <= self.limits.lateness_vs_floor * floor.max(1.0))
            })
            .collect::<Option<Vec<bool>>>()
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().all(|ok| *ok));
        let response_ok = self.limits.response_p99_us.and_then(|limit| {
            let worst: Vec<f64> = monitors.iter().filter_map(|m| m.p99_us()).collect();
            (!worst.is_empty()).then(|| worst.iter().all(|w| *w <= limit))
        });
        let stalls = std::mem::take(&mut self.stalls);
        let stalls_lost = std::mem::take(&mut self.stalls_lost);
        Interval { t_s: self.started.elapsed().as_secs_f64(), plans, partitions, monitors, steal_ms, context_switches, events, stalls, stalls_lost, lateness_ok, response_ok }
    }
}

/// Each planned partition's share of its plan's frame.
fn shares(system: &System) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for m in &system.modules {
        for plan in &m.plans {
            let frame = plan.frame().to_std().as_nanos() as f64;
            for p in &m.partitions {
                let mine: f64 = plan.windows.iter().filter(|w| w.partition == p.name).map(|w| w.duration.to_std().as_nanos() as f64).sum();
                if mine > 0.0 {
                    out.push((p.name.clone(), mine / frame));
                }
            }
        }
    }
    out
}

/// Runs the soak; `log` gets a line per interval.
pub fn run(cfg: &SoakConfig, log: impl Fn(&str) + Send + 'static) -> Result<SoakReport, SoakError> {
    std::fs::create_dir_all(&cfg.out).map_err(file_err(&cfg.out))?;
    let machine = partita_lab::machine::describe();
    let cpus: Vec<usize> = cfg.system.modules.iter().flat_map(|m| m.plans.iter().map(|p| p.cpu)).collect();
    let mut floor = Vec::new();
    if let Some(d) = cfg.floor {
        for &cpu in &cpus {
            log(&format!("the floor: cyclictest on CPU {cpu} for {} s…", d.as_secs()));
            let c = cyclictest::run(&CyclicConfig { cpu, priority: partita_system::EXECUTOR_PRIORITY, interval_us: 1000, duration: d }).map_err(SoakError::Floor)?;
            log(&format!("  p50/p99/max {:.0}/{:.0}/{:.0} µs over {} wake-ups", c.p50_us, c.p99_us, c.max_us, c.samples));
            floor.push((cpu, c));
        }
    }
    let sup_err = |e: &dyn std::fmt::Display| SoakError::Supervisor { system: cfg.system.name.clone(), message: e.to_string() };
    let sup = Supervisor::up(&cfg.system, &cfg.options).map_err(|e| sup_err(&e))?;
    let state = sup.state_dir().to_path_buf();
    let shares = shares(&cfg.system);
    let names: Vec<String> = cfg.system.partitions().map(|(_, p)| p.name.clone()).chain(cfg.system.nodes.iter().map(|n| n.name.clone())).collect();
    let monitors: Vec<String> = names.iter().filter(|n| cfg.system.node(n).is_some_and(|node| node.tree.command.iter().any(|a| a == "monitor"))).cloned().collect();
    let mut sampler = Sampler {
        plans: cpus.iter().zip(sup.lateness()).map(|(&c, h)| {
            let s = h.snapshot();
            (c, h, s)
        }).collect(),
        partitions: names.iter().zip(sup.cgroups()).map(|(n, cg)| {
            let used = cg.cpu_usage().unwrap_or_default();
            (n.clone(), cg, used, shares.iter().find(|(p, _)| p == n).map(|s| s.1))
        }).collect(),
        monitors: monitors.iter().map(|m| (m.clone(), Tail { path: state.join(format!("{m}.log")), offset: 0 }, (0, 0))).collect(),
        events: Tail { path: state.join("events.jsonl"), offset: 0 },
        host: host_counters(),
        started: Instant::now(),
        last: Instant::now(),
        floor: floor.clone(),
        limits: cfg.limits.clone(),
        tracers: Vec::new(),
        stalls: Vec::new(),
        stalls_lost: 0,
        stall_count: 0,
        out: cfg.out.clone(),
        responses: Default::default(),
    };
    if cfg.trace_stalls {
        for ((cpu, _, _), ring) in sampler.plans.iter().zip(sup.stalls()) {
            let w = partita_supervisor::stalls::Watcher::start(*cpu, ring).map_err(|e| SoakError::Trace(format!("tracing CPU {cpu} for --trace-stalls: {e}")))?;
            sampler.tracers.push(w);
        }
    }
    let overall: Vec<(usize, Arc<partita_supervisor::histogram::LatencyHistogram>, Snapshot)> = sampler.plans.iter().map(|(c, h, s)| (*c, h.clone(), s.clone())).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let jsonl = cfg.out.join("intervals.jsonl");
    let mut lines = std::fs::File::create(&jsonl).map_err(file_err(&jsonl))?;
    let (interval, duration) = (cfg.interval, cfg.duration);
    let sampling = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut out: Vec<Interval> = Vec::new();
            let t0 = Instant::now();
            let mut next = interval;
            loop {
                let end = next.min(duration);
                while t0.elapsed() < end && !stop.load(Ordering::SeqCst) && !stop_requested() {
                    std::thread::sleep(Duration::from_millis(50));
                    sampler.check_stalls();
                }
                let stopped = t0.elapsed() < end;
                let i = sampler.sample();
                // Written and shown as it is measured: a run that is killed keeps what it measured.
                let _ = writeln!(lines, "{}", serde_json::to_string(&i).unwrap_or_default());
                log(&interval_line(&i));
                out.push(i);
                if stopped || end >= duration {
                    break;
                }
                next += interval;
            }
            stop.store(true, Ordering::SeqCst);
            (out, sampler.responses)
        })
    };
    // The sampler decides when the run is over (the duration, or a stop signal).
    let logs = sup.run(None, Some(stop.clone())).map_err(|e| sup_err(&e))?;
    let freezes_ahead = logs
        .iter()
        .enumerate()
        .filter(|(_, l)| l.freezes_ahead_done + l.freezes_ahead_overran > 0)
        .map(|(plan, l)| FreezesAhead { plan, done: l.freezes_ahead_done, overran: l.freezes_ahead_overran })
        .collect();
    let (intervals, responses) = sampling.join().map_err(|_| SoakError::Trace("the sampling thread panicked".into()))?;
    let overall = overall
        .iter()
        .map(|(cpu, h, first)| {
            let d = h.snapshot().since(first);
            PlanInterval { cpu: *cpu, windows: d.total(), lateness_p50_us: d.quantile_us(0.5), lateness_p99_us: d.quantile_us(0.99), lateness_max_us: d.max_us() }
        })
        .collect();
    Ok(SoakReport {
        system: cfg.system.name.clone(),
        machine,
        duration_s: intervals.last().map_or(0.0, |i| i.t_s),
        interval_s: cfg.interval.as_secs_f64(),
        stopped_early: intervals.last().is_some_and(|i| i.t_s + 0.5 < cfg.duration.as_secs_f64()),
        setup: cfg.setup.clone(),
        plans: cfg.system.modules.iter().flat_map(|m| m.plans.iter()).map(plan_caption).collect(),
        floor,
        limits: cfg.limits.clone(),
        overall,
        responses_100us: responses.into_iter().map(|(bin, n)| (bin * BIN_US as u64, n)).collect(),
        freezes_ahead,
        intervals,
    })
}

/// A plan's timing in one line: `CPU 0: major frame 1500us, freeze_ahead 100us, wake_ahead 30us`.
fn plan_caption(p: &partita_system::Plan) -> String {
    format!("CPU {}: major frame {}, freeze_ahead {}, wake_ahead {}", p.cpu, p.frame(), p.freeze_ahead, p.wake_ahead)
}

/// One line per interval for the console.
fn interval_line(i: &Interval) -> String {
    let plan = i.plans.first();
    let mon = i.monitors.first();
    format!(
        "{:>7.0} s  lateness p99 {}  max {}  responses {} (p99 {}, worst second's p99 {})  events {}  stalls traced {}{}",
        i.t_s,
        fmt(plan.and_then(|p| p.lateness_p99_us)),
        fmt(plan.and_then(|p| p.lateness_max_us)),
        mon.map_or(0, |m| m.answered),
        fmt(mon.and_then(|m| m.all_p99_us)),
        fmt(mon.and_then(|m| m.worst_p99_us)),
        i.events.values().sum::<u64>(),
        i.stalls.len(),
        if i.stalls_lost > 0 { format!(" ({} not read in time)", i.stalls_lost) } else { String::new() }
    )
}

fn fmt(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.0} µs"))
}

fn cell(v: Option<f64>) -> String {
    v.map_or("–".into(), |x| format!("{x:.0}"))
}

fn verdict(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "–",
    }
}

/// How many stalls the report lists (the largest); every one is in soak.json and has its trace excerpt.
const STALLS_LISTED: usize = 40;

/// The whole run's responses by 100 µs bin: every bin with at least 0.1% of them, and the share above the limit.
fn responses_section(r: &SoakReport) -> String {
    let total: u64 = r.responses_100us.iter().map(|b| b.1).sum();
    if total == 0 {
        return String::new();
    }
    let mut s = format!("## Responses over the whole run\n\n{total} responses in 100 µs bins (bins with at least 0.1% of them; the rest in the last row):\n\n| from µs | responses | share |\n|---:|---:|---:|\n");
    let mut rest = 0u64;
    for (from, n) in &r.responses_100us {
        if *n * 1000 >= total {
            s.push_str(&format!("| {from} | {n} | {:.2}% |\n", *n as f64 * 100.0 / total as f64));
        } else {
            rest += n;
        }
    }
    s.push_str(&format!("| (other bins) | {rest} | {:.2}% |\n", rest as f64 * 100.0 / total as f64));
    if let Some(limit) = r.limits.response_p99_us {
        let over: u64 = r.intervals.iter().flat_map(|i| &i.monitors).filter_map(|m| m.over_limit).sum();
        s.push_str(&format!("\nAbove the limit of {limit:.0} µs: {over} ({:.2}%).\n", over as f64 * 100.0 / total as f64));
    }
    s.push('\n');
    s
}

/// The report: the floor, the whole run, the verdict, a table per interval.
pub fn markdown(r: &SoakReport, command: &str) -> String {
    let plans: String = r.plans.iter().map(|p| format!("- plan {p}\n")).collect();
    let mut s = format!("# Soak of {}\n\n`{command}`\n\n- machine: {}\n- setup: {}\n{plans}- {:.0} s in intervals of {:.0} s{}\n\n", r.system, r.machine, r.setup, r.duration_s, r.interval_s, if r.stopped_early { " (stopped early)" } else { "" });
    s.push_str("## The floor and the whole run\n\n| CPU | cyclictest p50/p99/max µs (before) | executor lateness p50/p99/max µs | window starts | p99 ratio |\n|---|---:|---:|---:|---:|\n");
    for p in &r.overall {
        let f = r.floor.iter().find(|(c, _)| *c == p.cpu).map(|x| x.1);
        s.push_str(&format!(
            "| {} | {} | {} / {} / {} | {} | {} |\n",
            p.cpu,
            f.map_or("–".into(), |f| format!("{:.0} / {:.0} / {:.0}", f.p50_us, f.p99_us, f.max_us)),
            cell(p.lateness_p50_us),
            cell(p.lateness_p99_us),
            cell(p.lateness_max_us),
            p.windows,
            match (p.lateness_p99_us, f) {
                (Some(a), Some(f)) => format!("{:.2}", a / f.p99_us.max(1.0)),
                _ => "–".into(),
            }
        ));
    }
    for f in &r.freezes_ahead {
        s.push_str(&format!(
            "\nPlan {}, freeze_ahead: of the partitions frozen ahead of a window start, {} had stopped when the window started and {} were still stopping.\n",
            f.plan, f.done, f.overran
        ));
    }
    let count = |f: fn(&Interval) -> Option<bool>| {
        let v: Vec<bool> = r.intervals.iter().filter_map(f).collect();
        if v.is_empty() {
            "not checked".to_string()
        } else {
            format!("{} of {} intervals", v.iter().filter(|x| **x).count(), v.len())
        }
    };
    s.push_str(&format!(
        "\n## Verdict\n\n- executor lateness p99 within {:.1}× cyclictest's p99, per interval: {}\n- monitors' p99 (of all the interval's responses; without `--live-samples`, the worst second's) within {}: {}\n\n",
        r.limits.lateness_vs_floor,
        count(|i| i.lateness_ok),
        r.limits.response_p99_us.map_or("(no limit given)".into(), |l| match &r.limits.response_from {
            Some(from) => format!("{l:.0} µs ({from})"),
            None => format!("{l:.0} µs"),
        }),
        count(|i| i.response_ok)
    ));
    s.push_str(&responses_section(r));
    let stalls: Vec<&StallRecord> = r.intervals.iter().flat_map(|i| &i.stalls).collect();
    if !stalls.is_empty() {
        let mut causes = std::collections::BTreeMap::new();
        for st in &stalls {
            *causes.entry(st.explanation.cause).or_insert(0u64) += 1;
        }
        s.push_str(&format!(
            "## Window starts later than 1 ms, explained by the kernel's trace\n\n{} traced ({}); {} not read in time. The {} largest:\n\n| t s | CPU | late µs | cause | what the trace shows | trace |\n|---:|---:|---:|---|---|---|\n",
            stalls.len(),
            causes.iter().map(|(c, n)| format!("{c}: {n}")).collect::<Vec<_>>().join(", "),
            r.intervals.iter().map(|i| i.stalls_lost).sum::<u64>(),
            stalls.len().min(STALLS_LISTED)
        ));
        let mut largest = stalls.clone();
        largest.sort_by(|a, b| b.explanation.lateness_us.total_cmp(&a.explanation.lateness_us));
        largest.truncate(STALLS_LISTED);
        largest.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        for st in largest {
            s.push_str(&format!("| {:.0} | {} | {:.0} | {} | {} | `{}` |\n", st.t_s, st.cpu, st.explanation.lateness_us, st.explanation.cause, st.explanation.detail, st.trace));
        }
        s.push('\n');
    }
    s.push_str("![lateness and response time over time](soak.svg)\n\n## Per interval\n\n| t s | lateness p50/p99/max µs | answered | timed out | response p50 / p99 / max µs (worst second's p99) | CPU ms / planned ms per partition | RSS KiB per partition | steal ms | ctx switches | events | lateness | response |\n|---:|---|---:|---:|---|---|---|---:|---:|---|---|---|\n");
    for i in &r.intervals {
        let p = i.plans.first();
        let m = i.monitors.first();
        s.push_str(&format!(
            "| {:.0} | {} / {} / {} | {} | {} | {} / {} / {} | {} | {} | {:.0} | {} | {} | {} | {} |\n",
            i.t_s,
            cell(p.and_then(|p| p.lateness_p50_us)),
            cell(p.and_then(|p| p.lateness_p99_us)),
            cell(p.and_then(|p| p.lateness_max_us)),
            m.map_or(0, |m| m.answered),
            m.map_or(0, |m| m.timed_out),
            cell(m.and_then(|m| m.all_p50_us.or(m.p50_us))),
            format!("{} ({})", cell(m.and_then(|m| m.all_p99_us)), cell(m.and_then(|m| m.worst_p99_us))),
            cell(m.and_then(|m| m.all_max_us.or(m.worst_max_us))),
            i.partitions.iter().map(|x| format!("{} {:.0}/{}", x.name, x.cpu_ms, cell(x.planned_ms))).collect::<Vec<_>>().join(", "),
            i.partitions.iter().map(|x| format!("{} {}", x.name, x.rss_kib)).collect::<Vec<_>>().join(", "),
            i.steal_ms,
            i.context_switches,
            i.events.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "),
            verdict(i.lateness_ok),
            verdict(i.response_ok),
        ));
    }
    s
}

/// A line of the plot: its name, colour and (t s, µs) points.
type Series = (&'static str, &'static str, Vec<(f64, f64)>);

/// Lateness p99 and max and the worst monitor p99 against time (log scale), as SVG.
pub fn svg(r: &SoakReport) -> String {
    let (w, h, left, bottom) = (720.0, 320.0, 60.0, 40.0);
    let series: [Series; 3] = [
        ("executor lateness p99", "#1f77b4", r.intervals.iter().filter_map(|i| Some((i.t_s, i.plans.first()?.lateness_p99_us?))).collect()),
        ("executor lateness max", "#aec7e8", r.intervals.iter().filter_map(|i| Some((i.t_s, i.plans.first()?.lateness_max_us?))).collect()),
        ("monitor p99", "#d62728", r.intervals.iter().filter_map(|i| Some((i.t_s, i.monitors.first()?.p99_us()?))).collect()),
    ];
    let t_max = r.intervals.last().map_or(1.0, |i| i.t_s).max(1.0);
    let (lo, hi) = (1.0f64.log10(), 1e6f64.log10());
    let x = |t: f64| left + (w - left - 20.0) * t / t_max;
    let y = |v: f64| (h - bottom) - (h - bottom - 20.0) * (v.max(1.0).log10() - lo) / (hi - lo);
    let mut s = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    for e in 0..=6 {
        let v = 10f64.powi(e);
        s.push_str(&format!("<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/><text x=\"5\" y=\"{:.1}\">{} µs</text>\n", w - 20.0, y(v), y(v), y(v) + 4.0, v));
    }
    s.push_str(&format!("<text x=\"{left}\" y=\"{}\">0 s</text><text x=\"{}\" y=\"{}\">{t_max:.0} s</text>\n", h - 10.0, w - 60.0, h - 10.0));
    for (k, (name, color, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts.iter().map(|(t, v)| format!("{:.1},{:.1}", x(*t), y(*v))).collect();
        if !path.is_empty() {
            s.push_str(&format!("<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n", path.join(" ")));
        }
        s.push_str(&format!("<text x=\"{}\" y=\"{}\" fill=\"{color}\">{name}</text>\n", left + 10.0 + k as f64 * 200.0, 14));
    }
    s.push_str("</svg>\n");
    s
}

/// Writes report.md, soak.json and soak.svg (intervals.jsonl is written as the run goes).
pub fn write_all(r: &SoakReport, dir: &Path, command: &str) -> std::io::Result<()> {
    std::fs::write(dir.join("report.md"), markdown(r, command))?;
    std::fs::write(dir.join("soak.svg"), svg(r))?;
    std::fs::write(dir.join("soak.json"), serde_json::to_string_pretty(r).map_err(std::io::Error::other)?)
}

/// `"90s"`, `"10m"`, `"1h"`, `"1.5h"`, `"500ms"`, or a plain number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num.trim().parse().ok()?;
    let s = n * match unit {
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    (s.is_finite() && s > 0.0 && s < 1e7).then(|| Duration::from_secs_f64(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monitors_live_line_is_read_back() {
        let l = "monitor:   3.0 s      704 answered     0 timed out  last second p50 2948.0 µs  p99 18107.3 µs  max 21105.2 µs";
        assert_eq!(parse_live_line(l), Some((3.0, 704, 0, 2948.0, 18107.3, 21105.2)));
        assert_eq!(parse_live_line("| monitor | dds | 1100 |"), None);
    }

    #[test]
    fn the_monitors_samples_line_is_read_back_and_ranked() {
        assert_eq!(parse_samples_line("monitor samples: 3 1921 2488 1930"), Some(vec![1921.0, 2488.0, 1930.0]));
        assert_eq!(parse_samples_line("monitor samples: 0"), Some(vec![]));
        assert_eq!(parse_samples_line("monitor samples: 3 1921 2488"), None, "a cut line is not read");
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!((rank(&v, 0.5), rank(&v, 0.99), rank(&[], 0.99)), (Some(100.0), Some(198.0), None));
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("5"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        for bad in ["", "-1s", "0", "1x", "h", "nan"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }
}
