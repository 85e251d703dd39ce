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

/// The built-in system, its `partita` commands pointing at `exe`, its monitor told what to measure.
pub fn system(cfg: &DemoConfig) -> Result<(SystemSpec, PathBuf, PathBuf), DemoError> {
    let model = partita_system::builtin_default().map_err(|e| DemoError::System(e.to_string()))?;
    let mut spec = partita_supervisor::from_system::spec_from(&model).map_err(|e| DemoError::System(e.to_string()))?;
    let json = cfg.out.join("monitor.json");
    let frame = cfg.out.join("last-frame.png");
    let mut monitors = 0;
    for m in &mut spec.modules {
        for p in &mut m.partitions {
            if p.command.first().map(String::as_str) == Some("partita") {
                p.command[0] = cfg.exe.clone();
            }
            if m.plans.is_empty() && p.command.get(1..3) == Some(&["app".to_string(), "monitor".to_string()]) {
                monitors += 1;
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
    if monitors != 1 {
        return Err(DemoError::System(format!("expected one native monitoring node running `partita app monitor`, found {monitors}")));
    }
    Ok((spec, json, frame))
}

pub fn run(cfg: &DemoConfig) -> Result<DemoResult, DemoError> {
    let (spec, json, frame) = system(cfg)?;
    std::fs::create_dir_all(&cfg.out).map_err(|e| RunError::File { path: cfg.out.clone(), message: e.to_string() })?;
    let monitor = spec
        .modules
        .iter()
        .find(|m| m.plans.is_empty() && m.partitions.iter().any(|p| p.command.iter().any(|a| a == "monitor")))
        .map(|m| format!("{}/{}", m.name, m.partitions[0].name))
        .unwrap_or_default();
    let limit = Duration::from_secs(90) + Duration::from_millis(20) * (cfg.count + cfg.warmup) as u32;
    let done = run_until_monitor_exits(&spec, &cfg.state_root, &monitor, &json, limit)?;
    let plans: Vec<PlanWindows> = spec
        .modules
        .iter()
        .flat_map(|m| m.plans.iter())
        .map(|p| PlanWindows {
            major_frame_ns: p.major_frame.as_nanos() as u64,
            windows: p.windows.iter().map(|(n, o, d)| (n.clone(), o.as_nanos() as u64, d.as_nanos() as u64)).collect(),
        })
        .collect();
    Ok(DemoResult {
        window_delay: window_delay(&plans, &CHAIN),
        window_lateness_max_us: (!done.executors.is_empty())
            .then(|| done.executors.iter().map(|e| e.max_lateness_ns).max().unwrap_or(0) as f64 / 1e3),
        system: spec,
        report: done.report,
        monitor_json: json,
        frame,
    })
}
