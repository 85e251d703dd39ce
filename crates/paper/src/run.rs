//! Boots a system, waits for its monitor to finish, tears the system down and reads the monitor's report.
use partita_apps::monitor::Report;
use partita_supervisor::executor::ExecutorLog;
use partita_supervisor::supervisor::{stop_requested, Supervisor, UpOptions};
use partita_system::System;
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

/// A finished run.
pub struct Finished {
    pub report: Report,
    pub executors: Vec<ExecutorLog>,
}

impl Finished {
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
    let (report, executors) = run_until_exits::<Report>(system, options, monitor, report_path, limit)?;
    Ok(Finished { report, executors })
}

/// [`run_until_monitor_exits`] for any report a measuring program writes as JSON: the report and the plan
/// executors' logs.
pub fn run_until_exits<T: serde::de::DeserializeOwned>(
    system: &System,
    options: &UpOptions,
    monitor: &str,
    report_path: &Path,
    limit: Duration,
) -> Result<(T, Vec<ExecutorLog>), RunError> {
    if let Err(e) = std::fs::remove_file(report_path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(RunError::File { path: report_path.into(), message: e.to_string() });
        }
    }
    let (executors, timed_out) = run_until_exit(system, options, monitor, limit)?;
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
    Ok((report, executors))
}

/// Runs `system` until its partition or node `name` exits or `limit` passes, then tears it down: the plan
/// executors' logs, and whether `limit` passed first. The state directory (logs, events) is left for the
/// caller to read and remove.
pub fn run_until_exit(system: &System, options: &UpOptions, name: &str, limit: Duration) -> Result<(Vec<ExecutorLog>, bool), RunError> {
    let sys_err = |e: &dyn std::fmt::Display| RunError::Supervisor { system: system.name.clone(), message: e.to_string() };
    if system.node(name).is_none() && !system.partitions().any(|(_, p)| p.name == name) {
        return Err(RunError::Supervisor { system: system.name.clone(), message: format!("it has no partition or node {name:?} to wait for") });
    }
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
    Ok((executors, timed_out.load(Ordering::SeqCst)))
}
