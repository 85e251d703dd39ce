//! `partita bench paper`: every scenario in one run, the 1 KiB tables and the image-size sweep.
use crate::prediction::{window_delay, PlanWindows, WindowDelay};
use crate::run::{run_until_monitor_exits, RunError};
use crate::scenario::{Params, Scenario, MONITOR};
use partita_supervisor::UpOptions;
use partita_apps::summary::Summary;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// The partita binary the partitions run.
    pub exe: String,
    pub out: PathBuf,
    pub state_root: PathBuf,
    pub scenarios: Vec<Scenario>,
    /// Tables 1 and 2: answer size, measured requests, warm-up.
    pub table_size: usize,
    pub count: u64,
    pub warmup: u64,
    /// Fig. 5: answer sizes (the table size is taken from the tables), requests and warm-up per point.
    pub sweep_sizes: Vec<usize>,
    pub sweep_count: u64,
    pub sweep_warmup: u64,
    pub recorder_cpu: usize,
    pub routing_cpu: usize,
}

/// One scenario at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: Scenario,
    pub key: &'static str,
    pub title: &'static str,
    pub reply_size: usize,
    pub reply_bytes: u64,
    pub requests: u64,
    pub answered: u64,
    pub timeouts: u64,
    pub summary: Summary,
    /// The plan executors' largest window-start lateness in this run (partitioned scenarios), µs.
    pub window_lateness_max_us: Option<f64>,
    /// The delay the scenario's plans add to a request's path ([`CHAIN`]); `None` where the path is not
    /// windowed.
    #[serde(skip)]
    pub window_delay: Option<WindowDelay>,
    /// Where the raw samples are (relative to the output folder).
    pub raw: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The window delay of the request's path through the plan (routing, recorder, routing).
    pub window_delay: WindowDelay,
    /// Response time of the same path without windows (TRADITIONAL DDS WITH ROUTING), p99, µs.
    pub unpartitioned_p99_us: f64,
    /// window_delay.max + unpartitioned p99: the bound the partitioned p99 must stay under.
    pub bound_us: f64,
    pub measured_p99_us: f64,
    pub measured_max_us: f64,
    pub p99_within_bound: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub name: &'static str,
    pub numerator: &'static str,
    pub denominator: &'static str,
    /// Of the mean response times.
    pub measured: f64,
    pub paper: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub machine: String,
    pub table_size: usize,
    pub count: u64,
    pub warmup: u64,
    pub tables: Vec<Row>,
    pub sweep: Vec<Row>,
    pub ratios: Vec<Ratio>,
    pub prediction: Option<Prediction>,
    /// How much of the partitioning penalty (partitioned − traditional with routing, in mean and p99) the
    /// routing partition's own CPU removes.
    pub multicore_penalty_removed: Option<(f64, f64)>,
}

impl Results {
    pub fn table_row(&self, s: Scenario) -> Option<&Row> {
        self.tables.iter().find(|r| r.scenario == s)
    }
}

fn run_one(cfg: &BenchConfig, s: Scenario, size: usize, count: u64, warmup: u64) -> Result<Row, RunError> {
    let raw_dir = cfg.out.join("raw");
    std::fs::create_dir_all(&raw_dir).map_err(|e| RunError::File { path: raw_dir.clone(), message: e.to_string() })?;
    let name = format!("{}-{}.json", s.key(), size);
    let params = Params {
        reply_size: size,
        count,
        warmup,
        timeout_ms: 1000,
        monitor_json: raw_dir.join(&name),
        ring: cfg.out.join("rings").join(s.key()),
        save_frame: (size >= 16 << 10).then(|| cfg.out.join(format!("frame-{}.png", s.key()))),
        recorder_cpu: cfg.recorder_cpu,
        routing_cpu: cfg.routing_cpu,
        memory_bytes: 512 << 20,
        monitor_extra: Vec::new(),
    };
    let system = s.system(&params).map_err(|e| RunError::Supervisor { system: format!("paper-{}", s.key()), message: e.to_string() })?;
    let ring = s.ring(&system, &params);
    if let Some(r) = &ring {
        let _ = std::fs::remove_dir_all(r);
    }
    let window_delay = window_delay(&PlanWindows::of_system(&system), &CHAIN);
    let limit = Duration::from_secs(120) + Duration::from_millis(20) * (count + warmup) as u32;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let done = run_until_monitor_exits(&system, &options, MONITOR, &params.monitor_json, limit);
    // The recording is the measurement's own: it goes, with the recorder partition's state directory.
    if let Some(r) = &ring {
        let _ = std::fs::remove_dir_all(r);
        let _ = r.parent().map(std::fs::remove_dir);
        let _ = r.parent().and_then(|p| p.parent()).map(std::fs::remove_dir);
    }
    let done = done?;
    let window_lateness_max_us = done.window_lateness_max_us();
    let r = done.report;
    Ok(Row {
        scenario: s,
        key: s.key(),
        title: s.title(),
        reply_size: size,
        reply_bytes: r.reply_bytes,
        requests: r.requests,
        answered: r.answered,
        timeouts: r.timeouts,
        summary: r.summary,
        window_lateness_max_us,
        window_delay,
        raw: format!("raw/{name}"),
    })
}

/// A request's path through the recorder node: into the module, to the recorder, and back out.
pub const CHAIN: [&str; 3] = ["routing", "recorder", "routing"];

/// Runs the tables, then the sweep; `log` gets a line per run.
pub fn run(cfg: &BenchConfig, mut log: impl FnMut(&str)) -> Result<Results, RunError> {
    let mut tables = Vec::new();
    for &s in &cfg.scenarios {
        log(&format!("{}: {} B answers, {} requests after {} warm-up…", s.title(), cfg.table_size, cfg.count, cfg.warmup));
        let row = run_one(cfg, s, cfg.table_size, cfg.count, cfg.warmup)?;
        log(&format!(
            "  mean {:.1} µs, p99 {:.1} µs, max {:.1} µs, {} timed out",
            row.summary.mean_us, row.summary.p99_us, row.summary.max_us, row.timeouts
        ));
        tables.push(row);
    }
    let mut sweep = Vec::new();
    let _ = std::fs::remove_dir(cfg.out.join("rings"));
    for &size in &cfg.sweep_sizes {
        for &s in &cfg.scenarios {
            if size == cfg.table_size {
                if let Some(r) = tables.iter().find(|r| r.scenario == s) {
                    sweep.push(r.clone());
                    continue;
                }
            }
            log(&format!("Fig. 5: {} at {} B, {} requests…", s.title(), size, cfg.sweep_count));
            let row = run_one(cfg, s, size, cfg.sweep_count, cfg.sweep_warmup)?;
            log(&format!("  p99 {:.1} µs, max {:.1} µs, {} timed out", row.summary.p99_us, row.summary.max_us, row.timeouts));
            sweep.push(row);
        }
    }
    let _ = std::fs::remove_dir(cfg.out.join("rings"));
    let mean = |s: Scenario| tables.iter().find(|r| r.scenario == s).map(|r| r.summary.mean_us);
    let mut ratios = Vec::new();
    for (name, a, b) in [
        ("DDS/UDP", Scenario::Traditional, Scenario::Network),
        ("single partition/traditional", Scenario::SinglePartition, Scenario::Traditional),
        ("partitioned/traditional with routing", Scenario::PartitionedRouting, Scenario::TraditionalRouting),
        ("multicore partitioned/traditional with routing", Scenario::Multicore, Scenario::TraditionalRouting),
    ] {
        if let (Some(x), Some(y)) = (mean(a), mean(b)) {
            let paper = match (a.paper(), b.paper()) {
                (Some(pa), Some(pb)) => Some(pa.avg / pb.avg),
                _ => None,
            };
            ratios.push(Ratio { name, numerator: a.title(), denominator: b.title(), measured: x / y, paper });
        }
    }
    let row = |s: Scenario| tables.iter().find(|r| r.scenario == s);
    let prediction = match (row(Scenario::PartitionedRouting), row(Scenario::TraditionalRouting)) {
        (Some(p), Some(t)) => p.window_delay.map(|wd| {
            let bound = wd.max_us + t.summary.p99_us;
            Prediction {
                window_delay: wd,
                unpartitioned_p99_us: t.summary.p99_us,
                bound_us: bound,
                measured_p99_us: p.summary.p99_us,
                measured_max_us: p.summary.max_us,
                p99_within_bound: p.summary.p99_us <= bound,
            }
        }),
        _ => None,
    };
    let multicore_penalty_removed = match (row(Scenario::PartitionedRouting), row(Scenario::Multicore), row(Scenario::TraditionalRouting)) {
        (Some(p), Some(m), Some(t)) => {
            let share = |pv: f64, mv: f64, tv: f64| if pv > tv { (pv - mv) / (pv - tv) } else { f64::NAN };
            Some((share(p.summary.mean_us, m.summary.mean_us, t.summary.mean_us), share(p.summary.p99_us, m.summary.p99_us, t.summary.p99_us)))
        }
        _ => None,
    };
    Ok(Results {
        machine: machine(),
        table_size: cfg.table_size,
        count: cfg.count,
        warmup: cfg.warmup,
        tables,
        sweep,
        ratios,
        prediction,
        multicore_penalty_removed,
    })
}

/// CPU model, CPUs, kernel.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| t.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {n} CPUs, Linux {}", kernel.trim())
}
