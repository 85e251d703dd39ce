//! `partita demo`: the paper's video-surveillance system on its built-in defaults, measured by its monitor.
use crate::bench::CHAIN;
use crate::prediction::{window_delay, PlanWindows, WindowDelay};
use crate::run::{run_until_monitor_exits, RunError};
use partita_apps::monitor::Report;
use partita_supervisor::system::SystemSpec;
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
    pub system: SystemSpec,
    pub report: Report,
    /// The window delay the plan adds to a request's path (routing, recorder, routing).
    pub window_delay: Option<WindowDelay>,
    pub window_lateness_max_us: Option<f64>,
    pub monitor_json: PathBuf,
    pub frame: PathBuf,
}

/// The built-in system to run: its `partita` commands pointing at `exe`, its monitor told what to measure.
pub struct DemoSystem {
    pub spec: SystemSpec,
    /// The monitoring node, as the supervisor names it (`module/partition`).
    pub monitor: String,
    pub monitor_json: PathBuf,
    pub frame: PathBuf,
}

pub fn system(cfg: &DemoConfig) -> Result<DemoSystem, DemoError> {
    let model = partita_system::builtin_default().map_err(|e| DemoError::System(e.to_string()))?;
    let mut spec = partita_supervisor::from_system::spec_from(&model).map_err(|e| DemoError::System(e.to_string()))?;
    spec.run_partita_as(&cfg.exe);
    let json = cfg.out.join("monitor.json");
    let frame = cfg.out.join("last-frame.png");
    let mut monitors = Vec::new();
    for m in &mut spec.modules {
        for p in &mut m.partitions {
            if m.plans.is_empty() && p.command.get(1..3) == Some(&["app".to_string(), "monitor".to_string()]) {
                monitors.push(format!("{}/{}", m.name, p.name));
                p.command.extend(
                    [
                        "--name", "monitor", "--quiet", "--count", &cfg.count.to_string(), "--warmup", &cfg.warmup.to_string(),
                        "--json", &json.display().to_string(), "--save-frame", &frame.display().to_string(),
                    ]
                    .map(String::from),
                );
            }
        }
    }
    match <[String; 1]>::try_from(monitors) {
        Ok([monitor]) => Ok(DemoSystem { spec, monitor, monitor_json: json, frame }),
        Err(found) => Err(DemoError::System(format!(
            "expected one native monitoring node running `partita app monitor`, found {}",
            found.len()
        ))),
    }
}

pub fn run(cfg: &DemoConfig) -> Result<DemoResult, DemoError> {
    let sys = system(cfg)?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| RunError::File { path: cfg.out.clone(), message: e.to_string() })?;
    let limit = Duration::from_secs(90) + Duration::from_millis(20) * (cfg.count + cfg.warmup) as u32;
    let done = run_until_monitor_exits(&sys.spec, &cfg.state_root, &sys.monitor, &sys.monitor_json, limit)?;
    Ok(DemoResult {
        window_delay: window_delay(&PlanWindows::of_system(&sys.spec), &CHAIN),
        window_lateness_max_us: done.window_lateness_max_us(),
        system: sys.spec,
        report: done.report,
        monitor_json: sys.monitor_json,
        frame: sys.frame,
    })
}
