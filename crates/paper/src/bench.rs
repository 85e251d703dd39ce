//! `partita bench paper`: every scenario in one run, the 1 KiB tables and the image-size sweep.
//!
//! Every row of Tables 1 and 2 is measured `repeat` times, the scenarios interleaved (A B C A B C …); a row
//! reports the median of its runs' figures, their min and max, and the spread of the p50 (flagged above 10 %).
//! The Fig. 5 sweep makes one run per point (its 1 KiB point is the table's row). The measurement setup is
//! granted by each scenario's system file ([`Params::setup`]); this process holds the setup's latency bound for
//! the whole run, between systems too.
use crate::prediction::{window_delay, PlanWindows, WindowDelay};
use crate::run::{run_until_monitor_exits, RunError};
use crate::scenario::{Params, Scenario, MONITOR};
use partita_apps::summary::Summary;
use partita_bench::repeat::{interleaved, Spread};
use partita_bench::setup::{Setup, SetupRecord};
use partita_supervisor::UpOptions;
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
    /// Runs of every table row, the scenarios interleaved.
    pub repeat: u32,
    /// Fig. 5: answer sizes (the table size is taken from the tables), requests and warm-up per point.
    pub sweep_sizes: Vec<usize>,
    pub sweep_count: u64,
    pub sweep_warmup: u64,
    pub recorder_cpu: usize,
    pub routing_cpu: usize,
    /// What the system files grant the measured partitions and nodes.
    pub setup: Setup,
}

/// One run of a scenario at one size.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Which run of its row, from 1.
    pub repeat: u32,
    pub reply_bytes: u64,
    pub requests: u64,
    pub answered: u64,
    pub timeouts: u64,
    pub summary: Summary,
    /// The plan executors' largest window-start lateness in this run (partitioned scenarios), µs.
    pub window_lateness_max_us: Option<f64>,
    /// Where the raw samples are (relative to the output folder).
    pub raw: String,
}

/// One scenario at one size: its runs and their figures.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub scenario: Scenario,
    pub key: &'static str,
    pub title: &'static str,
    pub reply_size: usize,
    pub reply_bytes: u64,
    /// Over all runs.
    pub requests: u64,
    pub answered: u64,
    pub timeouts: u64,
    /// Per figure, the median of the runs' values (`count`: measured responses per run).
    pub summary: Summary,
    /// Per figure, the smallest and the largest of the runs' values.
    pub low: Summary,
    pub high: Summary,
    /// (max − min) / median of the runs' p50s; `None` with one run.
    pub p50_spread: Option<f64>,
    /// Whether the p50 spread exceeds 10 %.
    pub flagged: bool,
    /// The largest window-start lateness of all runs, µs.
    pub window_lateness_max_us: Option<f64>,
    /// The delay the scenario's plans add to a request's path ([`CHAIN`]); `None` where the path is not
    /// windowed.
    #[serde(skip)]
    pub window_delay: Option<WindowDelay>,
    /// In the order they were made.
    pub runs: Vec<Run>,
}

impl Row {
    /// The row of `runs` (at least one) of scenario `s` at `size`.
    pub fn of_runs(s: Scenario, size: usize, window_delay: Option<WindowDelay>, runs: Vec<Run>) -> Row {
        let over = |f: fn(&Summary) -> f64| {
            let v: Vec<f64> = runs.iter().map(|r| f(&r.summary)).collect();
            Spread::of(&v).expect("a row has a run")
        };
        let figs = [
            over(|s| s.count as f64),
            over(|s| s.min_us),
            over(|s| s.mean_us),
            over(|s| s.std_us),
            over(|s| s.p50_us),
            over(|s| s.p90_us),
            over(|s| s.p99_us),
            over(|s| s.max_us),
        ];
        let pick = |g: fn(&Spread) -> f64| Summary {
            count: g(&figs[0]) as u64,
            min_us: g(&figs[1]),
            mean_us: g(&figs[2]),
            std_us: g(&figs[3]),
            p50_us: g(&figs[4]),
            p90_us: g(&figs[5]),
            p99_us: g(&figs[6]),
            max_us: g(&figs[7]),
        };
        let p50 = figs[4];
        Row {
            scenario: s,
            key: s.key(),
            title: s.title(),
            reply_size: size,
            reply_bytes: runs.last().map_or(0, |r| r.reply_bytes),
            requests: runs.iter().map(|r| r.requests).sum(),
            answered: runs.iter().map(|r| r.answered).sum(),
            timeouts: runs.iter().map(|r| r.timeouts).sum(),
            summary: pick(|s| s.median),
            low: pick(|s| s.min),
            high: pick(|s| s.max),
            p50_spread: p50.spread,
            flagged: p50.flagged(),
            window_lateness_max_us: runs.iter().filter_map(|r| r.window_lateness_max_us).reduce(f64::max),
            window_delay,
            runs,
        }
    }

    /// The p50 over the runs.
    pub fn p50(&self) -> Spread {
        let v: Vec<f64> = self.runs.iter().map(|r| r.summary.p50_us).collect();
        Spread::of(&v).expect("a row has a run")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The window delay of the request's path through the plan (routing, recorder, routing).
    pub window_delay: WindowDelay,
    /// Response time of the same path without windows (TRADITIONAL DDS WITH ROUTING), p99 (median over its
    /// runs), µs.
    pub unpartitioned_p99_us: f64,
    /// window_delay.max + unpartitioned p99: the bound the partitioned p99 must stay under.
    pub bound_us: f64,
    /// The partitioned row's p99 and max (medians over its runs).
    pub measured_p99_us: f64,
    pub measured_max_us: f64,
    pub p99_within_bound: bool,
    /// How many of the partitioned row's runs had their p99 within the bound, of how many.
    pub runs_within_bound: usize,
    pub runs: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ratio {
    pub name: &'static str,
    pub numerator: &'static str,
    pub denominator: &'static str,
    /// Of the mean response times (the medians over the runs).
    pub measured: f64,
    /// The ratio of each repeat's runs (run k against run k): median, min and max; `None` with one run.
    pub per_repeat: Option<Spread>,
    pub paper: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Results {
    pub machine: String,
    /// How the measured partitions and nodes were scheduled, and who granted it.
    pub setup: SetupRecord,
    pub table_size: usize,
    pub count: u64,
    pub warmup: u64,
    /// Runs per table row.
    pub repeat: u32,
    pub tables: Vec<Row>,
    pub sweep: Vec<Row>,
    pub ratios: Vec<Ratio>,
    pub prediction: Option<Prediction>,
    /// How much of the partitioning penalty (partitioned − traditional with routing, in mean and p99) the
    /// routing partition's own CPU removes.
    pub multicore_penalty_removed: Option<(f64, f64)>,
    /// Wall-clock time of the whole benchmark, s.
    pub elapsed_s: f64,
}

impl Results {
    pub fn table_row(&self, s: Scenario) -> Option<&Row> {
        self.tables.iter().find(|r| r.scenario == s)
    }
}

/// How the setup reached the measured processes, for the result files.
pub fn granted(setup: &Setup) -> String {
    match setup {
        Setup::Realtime { priority, cpu_dma_latency_us } => format!(
            "granted by each scenario's system file: every partition and node has scheduling = {{ policy = \"fifo\", \
             priority = {priority} }}, every native node runs with --lock-memory (a partition may lock no more than \
             RLIMIT_MEMLOCK, which the supervisor cannot raise without CAP_SYS_RESOURCE), and [system] \
             cpu_dma_latency = \"{cpu_dma_latency_us}us\" \
             (the supervisor holds it while the system is up); bench paper also holds /dev/cpu_dma_latency at \
             {cpu_dma_latency_us} µs for the whole run"
        ),
        Setup::Normal => "granted by each scenario's system file: every partition and node has scheduling = { policy = \
             \"normal\" } and no memory lock, and [system] cpu_dma_latency = \"off\""
            .into(),
    }
}

fn run_one(cfg: &BenchConfig, s: Scenario, size: usize, count: u64, warmup: u64, repeat: u32) -> Result<(Run, Option<WindowDelay>), RunError> {
    let raw_dir = cfg.out.join("raw");
    std::fs::create_dir_all(&raw_dir).map_err(|e| RunError::File { path: raw_dir.clone(), message: e.to_string() })?;
    let name = format!("{}-{}-r{repeat}.json", s.key(), size);
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
        setup: cfg.setup,
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
    let run = Run {
        repeat,
        reply_bytes: r.reply_bytes,
        requests: r.requests,
        answered: r.answered,
        timeouts: r.timeouts,
        summary: r.summary,
        window_lateness_max_us,
        raw: format!("raw/{name}"),
    };
    Ok((run, window_delay))
}

/// A request's path through the recorder node: into the module, to the recorder, and back out.
pub const CHAIN: [&str; 3] = ["routing", "recorder", "routing"];

/// Runs the tables (every row `cfg.repeat` times, the scenarios interleaved), then the sweep; `log` gets a
/// line per run.
pub fn run(cfg: &BenchConfig, mut log: impl FnMut(&str)) -> Result<Results, RunError> {
    let t0 = std::time::Instant::now();
    // Before any system is up: the supervisor keeps this thread off the plans' CPUs while one runs.
    let machine = machine();
    let _latency = cfg.setup.hold_cpu_latency().map_err(|e| RunError::Setup(e.to_string()))?;
    let mut runs: Vec<(Vec<Run>, Option<WindowDelay>)> = vec![(Vec::new(), None); cfg.scenarios.len()];
    for (k, i) in interleaved(cfg.scenarios.len(), cfg.repeat) {
        let s = cfg.scenarios[i];
        log(&format!(
            "{}, run {k} of {}: {} B answers, {} requests after {} warm-up…",
            s.title(),
            cfg.repeat,
            cfg.table_size,
            cfg.count,
            cfg.warmup
        ));
        let (run, wd) = run_one(cfg, s, cfg.table_size, cfg.count, cfg.warmup, k)?;
        log(&format!(
            "  p50 {:.1} µs, mean {:.1} µs, p99 {:.1} µs, max {:.1} µs, {} timed out",
            run.summary.p50_us, run.summary.mean_us, run.summary.p99_us, run.summary.max_us, run.timeouts
        ));
        runs[i].0.push(run);
        runs[i].1 = wd;
    }
    let tables: Vec<Row> =
        cfg.scenarios.iter().zip(runs).map(|(&s, (runs, wd))| Row::of_runs(s, cfg.table_size, wd, runs)).collect();
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
            let (run, wd) = run_one(cfg, s, size, cfg.sweep_count, cfg.sweep_warmup, 1)?;
            let row = Row::of_runs(s, size, wd, vec![run]);
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
            // Run k of one row against run k of the other: made in the same round of the interleaving.
            let per_repeat = match (row_of(&tables, a), row_of(&tables, b)) {
                (Some(ra), Some(rb)) if cfg.repeat > 1 => {
                    let v: Vec<f64> = ra.runs.iter().zip(&rb.runs).map(|(p, q)| p.summary.mean_us / q.summary.mean_us).collect();
                    Spread::of(&v)
                }
                _ => None,
            };
            ratios.push(Ratio { name, numerator: a.title(), denominator: b.title(), measured: x / y, per_repeat, paper });
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
                runs_within_bound: p.runs.iter().filter(|r| r.summary.p99_us <= bound).count(),
                runs: p.runs.len(),
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
        machine,
        setup: cfg.setup.record(granted(&cfg.setup)),
        table_size: cfg.table_size,
        count: cfg.count,
        warmup: cfg.warmup,
        repeat: cfg.repeat,
        tables,
        sweep,
        ratios,
        prediction,
        multicore_penalty_removed,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

fn row_of(rows: &[Row], s: Scenario) -> Option<&Row> {
    rows.iter().find(|r| r.scenario == s)
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
