//! `partita demo`: the paper's video-surveillance system on its built-in defaults, measured by its monitor.
use crate::bench::CHAIN;
use partita_schedule::{window_delay, PlanWindows, WindowDelay};
use partita_lab::run::{run_until_monitor_exits, RunError};
use partita_apps::monitor::Report;
use crate::scenario::MONITOR;
use partita_supervisor::UpOptions;
use partita_system::System;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct DemoConfig {
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub count: u64,
    pub warmup: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("the built-in system: {0}")]
    System(String),
    #[error(transparent)]
    Run(#[from] RunError),
}

pub struct DemoResult {
    pub system: System,
    pub report: Report,
    /// The window delay the plan adds to a request's path (routing, recorder, routing).
    pub window_delay: Option<WindowDelay>,
    pub window_lateness_max_us: Option<f64>,
    pub monitor_json: PathBuf,
    pub frame: PathBuf,
}

/// The built-in system to run, its monitoring node told what to measure and where to write it.
pub struct DemoSystem {
    pub system: System,
    /// The monitoring node's name.
    pub monitor: String,
    pub monitor_json: PathBuf,
    pub frame: PathBuf,
}

pub fn system(cfg: &DemoConfig) -> Result<DemoSystem, DemoError> {
    let mut system = partita_system::builtin_default().map_err(|e| DemoError::System(e.to_string()))?;
    let json = cfg.out.join("monitor.json");
    let frame = cfg.out.join("last-frame.png");
    let source = system.source.clone();
    let monitor = system.node_mut(MONITOR).ok_or_else(|| {
        DemoError::System(format!("{source} has no native node {MONITOR:?} running `partita app monitor`"))
    })?;
    monitor.tree.command.extend(
        [
            "--name", MONITOR, "--quiet", "--count", &cfg.count.to_string(), "--warmup", &cfg.warmup.to_string(),
            "--json", &json.display().to_string(), "--save-frame", &frame.display().to_string(),
        ]
        .map(String::from),
    );
    Ok(DemoSystem { system, monitor: MONITOR.into(), monitor_json: json, frame })
}

pub fn run(cfg: &DemoConfig) -> Result<DemoResult, DemoError> {
    let sys = system(cfg)?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| RunError::File { path: cfg.out.clone(), message: e.to_string() })?;
    let limit = Duration::from_secs(90) + Duration::from_millis(20) * (cfg.count + cfg.warmup) as u32;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let done = run_until_monitor_exits(&sys.system, &options, &sys.monitor, &sys.monitor_json, limit)?;
    Ok(DemoResult {
        window_delay: window_delay(&PlanWindows::of_system(&sys.system), &CHAIN),
        window_lateness_max_us: done.window_lateness_max_us(),
        system: sys.system,
        report: done.report,
        monitor_json: sys.monitor_json,
        frame: sys.frame,
    })
}
