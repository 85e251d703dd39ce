//! Boots a system, waits for its monitor to finish, tears the system down and reads the monitor's report.
use crate::machine::{Disturbance, Watch};
use partita_apps::monitor::Report;
use partita_supervisor::executor::ExecutorLog;
use partita_supervisor::supervisor::{stop_requested, Supervisor, UpOptions};
use partita_system::System;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("system {system}: {message}")]
    Supervisor { system: String, message: String },
    #[error("system {system}: the monitor wrote no report ({why}); its output ends with:\n{log_tail}")]
    Monitor { system: String, why: String, log_tail: String },
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("interrupted (Ctrl-C or SIGTERM); the system was torn down")]
    Interrupted,
    #[error("measurement setup: {0}")]
    Setup(String),
}

/// A finished run: the report its measuring program wrote (the monitor's by default).
pub struct Finished<T = Report> {
    pub report: T,
    pub executors: Vec<ExecutorLog>,
    /// What the host did to the machine while the system ran (steal time, CPU frequency).
    pub disturbance: Disturbance,
}

impl<T> Finished<T> {
    /// The plan executors' largest window-start lateness, µs; `None` when the system had no plan.
    pub fn window_lateness_max_us(&self) -> Option<f64> {
        self.executors.iter().map(|e| e.max_lateness_ns).max().map(|ns| ns as f64 / 1e3)
    }

    /// How long after its planned start each recorded window was open to its partition (the executor's
    /// lateness and its freeze and thaw calls), ns; empty when the system had no plan.
    pub fn window_entries_ns(&self) -> Vec<u64> {
        self.executors.iter().flat_map(|e| e.starts.iter().map(|s| s.switched_ns.saturating_sub(s.planned_ns))).collect()
    }
}

/// Whether the supervisor's event log says the partition or node `name` has exited.
fn has_exited(events: &Path, name: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(events) else { return false };
    text.lines().any(|l| {
        serde_json::from_str::<serde_json::Value>(l)
            .map(|v| v["partition"] == name && (v["event"] == "exit" || v["event"] == "stopped"))
            .unwrap_or(false)
    })
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| format!("({}: {e})", path.display()));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Runs `system` until its partition or node `monitor` exits or `limit` passes, then tears it down and reads
/// the report the monitor wrote to `report_path`.
pub fn run_until_monitor_exits(
    system: &System,
    options: &UpOptions,
    monitor: &str,
    report_path: &Path,
    limit: Duration,
) -> Result<Finished, RunError> {
    run_until_exits::<Report>(system, options, monitor, report_path, limit)
}

/// [`run_until_monitor_exits`] for any report a measuring program writes as JSON: the report, the plan
/// executors' logs and what the host did meanwhile.
pub fn run_until_exits<T: serde::de::DeserializeOwned>(
    system: &System,
    options: &UpOptions,
    monitor: &str,
    report_path: &Path,
    limit: Duration,
) -> Result<Finished<T>, RunError> {
    if let Err(e) = std::fs::remove_file(report_path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(RunError::File { path: report_path.into(), message: e.to_string() });
        }
    }
    let Exited { executors, timed_out, disturbance } = run_until_exit(system, options, monitor, limit)?;
    let log = options.state_root.join(&system.name).join(format!("{monitor}.log"));
    let text = match std::fs::read_to_string(report_path) {
        Ok(t) => t,
        Err(e) => {
            let why = if timed_out {
                format!("still running after {:.0} s", limit.as_secs_f64())
            } else {
                format!("{}: {e}", report_path.display())
            };
            return Err(RunError::Monitor { system: system.name.clone(), why, log_tail: tail(&log, 10) });
        }
    };
    let report: T =
        serde_json::from_str(&text).map_err(|e| RunError::File { path: report_path.into(), message: e.to_string() })?;
    Ok(Finished { report, executors, disturbance })
}

/// A system run until one of its members exited ([`run_until_exit`]).
pub struct Exited {
    /// The plan executors' logs.
    pub executors: Vec<ExecutorLog>,
    /// Whether the limit passed first.
    pub timed_out: bool,
    /// What the host did to the machine from the system's start to its end (steal time, CPU frequency).
    pub disturbance: Disturbance,
}

/// Runs `system` until its partition or node `name` exits or `limit` passes, then tears it down. The state
/// directory (logs, events) is left for the caller to read and remove.
pub fn run_until_exit(system: &System, options: &UpOptions, name: &str, limit: Duration) -> Result<Exited, RunError> {
    let sys_err = |e: &dyn std::fmt::Display| RunError::Supervisor { system: system.name.clone(), message: e.to_string() };
    if system.node(name).is_none() && !system.partitions().any(|(_, p)| p.name == name) {
        return Err(RunError::Supervisor { system: system.name.clone(), message: format!("it has no partition or node {name:?} to wait for") });
    }
    let watch = Watch::start();
    let sup = Supervisor::up(system, options).map_err(|e| sys_err(&e))?;
    let events = sup.state_dir().join("events.jsonl");
    let stop = Arc::new(AtomicBool::new(false));
    let timed_out = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, timed_out, name) = (stop.clone(), timed_out.clone(), name.to_string());
        std::thread::spawn(move || {
            let t0 = Instant::now();
            while !stop.load(Ordering::SeqCst) {
                if has_exited(&events, &name) {
                    break;
                }
                if t0.elapsed() >= limit {
                    timed_out.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            stop.store(true, Ordering::SeqCst);
        })
    };
    let result = sup.run(None, Some(stop.clone()));
    stop.store(true, Ordering::SeqCst);
    let _ = watcher.join();
    let executors = result.map_err(|e| sys_err(&e))?;
    if stop_requested() {
        return Err(RunError::Interrupted);
    }
    Ok(Exited { executors, timed_out: timed_out.load(Ordering::SeqCst), disturbance: watch.stop() })
}

/// The thaw herd of one partition, measured.
#[derive(Debug, Clone)]
pub struct HerdMeasured {
    /// Threads of the partition when the trace started.
    pub threads: usize,
    pub herds: crate::herd::ThawHerds,
}

/// Where the executors' logs find `partition`: the log of the plan with its windows (the supervisor returns
/// one per plan, modules then their plans), the partition's number in the log's window starts (its place among
/// the system's partitions, module by module, as [`Supervisor::down`] renumbers them), and the plan's CPU.
fn herd_target(system: &System, partition: &str) -> Option<(usize, usize, usize)> {
    let (executor, plan) =
        system.modules.iter().flat_map(|m| m.plans.iter()).enumerate().find(|(_, p)| p.windows.iter().any(|w| w.partition == partition))?;
    let index = system.partitions().position(|(_, p)| p.name == partition)?;
    Some((executor, index, plan.cpu))
}

/// Runs `system` for `settle` + `span`, tracing every scheduler switch of the CPU whose plan runs `partition`
/// for `span` after `settle` (an ftrace instance of partita's own, removed after), then tears it down: the
/// herd at each window start of the partition in that time (crates/lab/src/herd.rs). The system's load
/// is the caller's: `bench paper` runs the partitioned scenario with its monitor asking once a second, so the
/// herd is the freezer's cost alone, not the partition's work.
pub fn measure_thaw_herd(system: &System, options: &UpOptions, partition: &str, settle: Duration, span: Duration) -> Result<HerdMeasured, RunError> {
    let sys_err = |e: &dyn std::fmt::Display| RunError::Supervisor { system: system.name.clone(), message: e.to_string() };
    let (executor, index, cpu) = herd_target(system, partition).ok_or_else(|| sys_err(&format!("no plan schedules a partition {partition:?}")))?;
    let sup = Supervisor::up(system, options).map_err(|e| sys_err(&e))?;
    let cgroup = sup
        .cgroups()
        .into_iter()
        .find(|c| c.relative_path().file_name().is_some_and(|n| n == partition))
        .ok_or_else(|| sys_err(&format!("partition {partition:?} has no cgroup")));
    let tracing = cgroup.map(|cg| {
        std::thread::spawn(move || -> Result<(HashSet<u32>, String), String> {
            std::thread::sleep(settle);
            let mut threads = HashSet::new();
            for pid in cg.pids().map_err(|e| e.to_string())? {
                let dir = PathBuf::from(format!("/proc/{pid}/task"));
                for t in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?.flatten() {
                    threads.extend(t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()));
                }
            }
            let mut tracer = partita_supervisor::stalls::Tracer::switches(cpu).map_err(|e| e.to_string())?;
            let mut text = String::new();
            let end = Instant::now() + span;
            while Instant::now() < end {
                std::thread::sleep(Duration::from_millis(100));
                text += &tracer.read_new().map_err(|e| e.to_string())?;
            }
            drop(tracer);
            Ok((threads, text))
        })
    });
    let result = sup.run(Some(settle + span + Duration::from_millis(300)), None);
    let traced = match tracing {
        Ok(t) => t.join().map_err(|_| RunError::Setup("the herd's tracing thread panicked".into()))?,
        Err(e) => return Err(e),
    };
    let logs = result.map_err(|e| sys_err(&e))?;
    if stop_requested() {
        return Err(RunError::Interrupted);
    }
    let (threads, text) = traced.map_err(|e| RunError::Setup(format!("tracing CPU {cpu} for the thaw herd: {e}")))?;
    let thaws: Vec<u64> =
        logs.get(executor).map(|l| l.starts.iter().filter(|s| s.partition == index).map(|s| s.switched_ns).collect()).unwrap_or_default();
    let events = partita_supervisor::stalls::parse_trace(&text);
    Ok(HerdMeasured { threads: threads.len(), herds: crate::herd::thaw_herds(&events, &thaws, &threads) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_herd_is_read_from_the_plan_and_the_number_the_partition_has_in_the_logs() {
        let module = |name: &str, cpu: usize, a: &str, b: &str| {
            format!(
                "[[module]]\nname = \"{name}\"\ncpus = [{cpu}]\n\
                 [[module.partition]]\nname = \"{a}\"\ncommand = [\"sleep\", \"1\"]\n\
                 [[module.partition]]\nname = \"{b}\"\ncommand = [\"sleep\", \"1\"]\n\
                 [[module.plan]]\ncpu = {cpu}\nmajor_frame = \"1ms\"\n\
                 [[module.plan.window]]\npartition = \"{a}\"\nstart = \"0us\"\nduration = \"500us\"\n\
                 [[module.plan.window]]\npartition = \"{b}\"\nstart = \"500us\"\nduration = \"500us\"\n"
            )
        };
        let text = format!("[system]\nname = \"herd\"\n{}{}", module("one", 0, "a", "b"), module("two", 1, "c", "d"));
        let system = partita_system::parse(&text, "herd.toml", &partita_system::Host { cpus: vec![0, 1], path: None }).unwrap();
        // The second module's plan is the second log; its partition d is the system's fourth, second of its plan.
        assert_eq!(herd_target(&system, "d"), Some((1, 3, 1)));
        assert_eq!(herd_target(&system, "a"), Some((0, 0, 0)));
        assert_eq!(herd_target(&system, "nobody"), None);
    }
}
