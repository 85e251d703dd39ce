//! `partita bench paper`: every scenario in one run, the 1 KiB tables and the image-size sweep.
//!
//! Every row of Tables 1 and 2 is measured `repeat` times, the scenarios interleaved (A B C A B C …); a row
//! reports the median of its runs' figures, their min and max, and the spread of the p50 (flagged above 10 %).
//! The Fig. 5 sweep makes one run per point (its 1 KiB point is the table's row). The measurement setup is
//! granted by each scenario's system file ([`Params::setup`]); this process holds the setup's latency bound for
//! the whole run, between systems too.
use partita_schedule::optimise::{layouts, Objective, Search};
use partita_schedule::{predict, window_delay, Arrivals, Background, Model, PlanWindows, Predicted, WindowDelay};
use partita_lab::run::{measure_thaw_herd, run_until_monitor_exits, RunError};
use crate::scenario::{Params, Scenario, MONITOR, RECORDER_FPS};
use partita_apps::summary::Summary;
use partita_lab::machine::Disturbance;
use partita_lab::repeat::{interleaved, Spread};
use partita_lab::setup::{Setup, SetupRecord};
use partita_supervisor::executor::Summary as ExecutorSummary;
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
    /// The plan of the extra row [`Scenario::FilePlan`] (`--plan FILE`).
    pub plan: Option<PlanWindows>,
    /// The schedule model's cost of switching into a window, ns (docs/schedule.md); `None`: each window
    /// instance loses one of the window entries the executor measured under the paper's plan in this run (under
    /// the row's own plan when the paper's did not run).
    pub switch_ns: Option<u64>,
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
    /// How long after its planned start a window was open to its partition (executor lateness plus its freeze
    /// and thaw calls), over the executor's recorded window starts: p50, p99 and max, µs.
    pub window_entry_us: Option<[f64; 3]>,
    /// The window entries themselves, ns (also in `raw/<run>-windows.json`).
    #[serde(skip)]
    pub window_entries_ns: Vec<u64>,
    /// Where the raw samples are (relative to the output folder).
    pub raw: String,
    /// What the host did to the machine during the run (steal time, CPU frequency).
    pub disturbance: Disturbance,
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
    pub window_delay: Option<WindowDelay>,
    /// What the schedule model predicts for this row from TRADITIONAL DDS WITH ROUTING's raw samples (the
    /// windowed rows, when that row ran).
    pub predicted: Option<Predicted>,
    /// The row's plan (windowed rows): window switches per ms.
    pub switches_per_ms: Option<f64>,
    /// The most the host disturbed any of its runs ([`Disturbance::worst`]).
    pub disturbance: Option<Disturbance>,
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
            predicted: None,
            switches_per_ms: None,
            disturbance: Disturbance::worst(&runs.iter().map(|r| r.disturbance).collect::<Vec<_>>()),
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
    /// The p99 of the window entries the executor measured under the paper's plan (median over the runs), µs:
    /// the worst-case answer waits for the last routing window, which opens this much after its planned start.
    pub window_entry_p99_us: f64,
    /// The routing partition's thaw herd under the paper's plan: after the executor's thaw, how long until the
    /// last of the partition's threads has run (crates/supervisor/src/herd.rs), measured with the monitor asking
    /// once a second; `None` when it could not be traced (`thaw_herd_missing` says why).
    pub thaw_herd: Option<HerdFigures>,
    pub thaw_herd_missing: Option<String>,
    /// window_delay.max + window entry p99 + thaw herd p99 + unpartitioned p99: the bound the partitioned p99
    /// must stay under.
    pub bound_us: f64,
    /// The bound without the thaw herd (as `bench paper` gave it before it measured the herd).
    pub bound_without_herd_us: f64,
    /// The partitioned row's p99 and max (medians over its runs).
    pub measured_p99_us: f64,
    pub measured_max_us: f64,
    pub p99_within_bound: bool,
    /// How many of the partitioned row's runs had their p99 within the bound, of how many.
    pub runs_within_bound: usize,
    pub runs: usize,
}

/// The thaw herd of the routing partition, µs over the window starts traced.
#[derive(Debug, Clone, Serialize)]
pub struct HerdFigures {
    /// Threads of the partition; window starts traced whose herd every thread finished; those it did not.
    pub threads: usize,
    pub herds: usize,
    pub incomplete: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// How long the trace ran, s.
    pub traced_s: f64,
}

/// How long the herd's system runs before it is traced, and how long it is traced.
const HERD_SETTLE: Duration = Duration::from_millis(1500);
const HERD_TRACED: Duration = Duration::from_secs(1);

/// The routing partition's thaw herd under the partitioned scenario's plan, with its monitor asking once a
/// second (the freezer's cost, not the partition's work, which the unpartitioned response time counts).
fn thaw_herd(cfg: &BenchConfig) -> Result<HerdFigures, RunError> {
    let params = Params {
        reply_size: cfg.table_size,
        count: 0,
        warmup: 0,
        timeout_ms: 1000,
        monitor_json: cfg.out.join("raw").join("herd-monitor.json"),
        ring: cfg.out.join("rings").join("herd"),
        save_frame: None,
        recorder_cpu: cfg.recorder_cpu,
        routing_cpu: cfg.routing_cpu,
        memory_bytes: 512 << 20,
        monitor_extra: vec!["--rate".into(), "1".into()],
        setup: cfg.setup,
        plan: cfg.plan.clone(),
    };
    let s = Scenario::PartitionedRouting;
    let system = s.system(&params).map_err(|e| RunError::Supervisor { system: format!("paper-{}", s.key()), message: e.to_string() })?;
    let options = UpOptions { partita: Some(cfg.exe.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let measured = measure_thaw_herd(&system, &options, "routing", HERD_SETTLE, HERD_TRACED);
    if let Some(r) = s.ring(&system, &params) {
        remove_recording(&r);
    }
    let _ = std::fs::remove_file(&params.monitor_json);
    let m = measured?;
    let mut spans = m.herds.spans_ns.clone();
    if spans.is_empty() {
        return Err(RunError::Setup(format!(
            "the trace of the plan's CPU showed no complete herd of the routing partition's {} threads ({} window starts cut short)",
            m.threads, m.herds.incomplete
        )));
    }
    let e = ExecutorSummary::of(&mut spans);
    Ok(HerdFigures {
        threads: m.threads,
        herds: m.herds.spans_ns.len(),
        incomplete: m.herds.incomplete,
        p50_us: e.p50_ns as f64 / 1e3,
        p99_us: e.p99_ns as f64 / 1e3,
        max_us: e.max_ns as f64 / 1e3,
        traced_s: HERD_TRACED.as_secs_f64(),
    })
}

/// What the schedule model (crates/schedule, docs/schedule.md) predicts, from this run's unpartitioned samples.
#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    pub model: Model,
    /// Whether the model's switch costs are the measured window entries (else one given with --switch-cost).
    pub switch_measured: bool,
    /// How many measured window entries the switch costs were drawn from (under the paper's plan when it ran).
    pub switch_samples: usize,
    /// TRADITIONAL DDS WITH ROUTING's raw response times the model drew service times from.
    pub service_samples: usize,
    /// Layouts of the paper's plan with its shares (the optimiser's candidates): predicted, for the trade-off
    /// figure (schedule.svg).
    pub layouts: Vec<Layout>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Layout {
    pub major_frame_us: f64,
    pub windows_per_frame: usize,
    pub switches_per_ms: f64,
    pub predicted: Predicted,
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
    /// The schedule model's predictions beside the measured rows, and over layouts of the paper's plan.
    pub schedule: Option<Schedule>,
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

/// The recording is the measurement's own: it goes, with the recorder partition's state directory (the two
/// directories above it, when empty).
fn remove_recording(ring: &std::path::Path) {
    let _ = std::fs::remove_dir_all(ring);
    // The recorder partition's state directory is an image of its own, kept across runs: it goes too.
    if let Some(state) = ring.parent() {
        partita_supervisor::state_image::remove(state);
    }
    let _ = ring.parent().map(std::fs::remove_dir);
    let _ = ring.parent().and_then(|p| p.parent()).map(std::fs::remove_dir);
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
        plan: cfg.plan.clone(),
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
    if let Some(r) = &ring {
        remove_recording(r);
    }
    let done = done?;
    let window_lateness_max_us = done.window_lateness_max_us();
    let window_entries_ns = done.window_entries_ns();
    let e = ExecutorSummary::of(&mut window_entries_ns.clone());
    let window_entry_us = (e.count > 0).then(|| [e.p50_ns as f64 / 1e3, e.p99_ns as f64 / 1e3, e.max_ns as f64 / 1e3]);
    if e.count > 0 {
        let path = raw_dir.join(name.replace(".json", "-windows.json"));
        let json = serde_json::json!({ "window_entry_ns": window_entries_ns });
        std::fs::write(&path, json.to_string()).map_err(|e| RunError::File { path, message: e.to_string() })?;
    }
    let r = &done.report;
    let run = Run {
        repeat,
        reply_bytes: r.reply_bytes,
        requests: r.requests,
        answered: r.answered,
        timeouts: r.timeouts,
        summary: r.summary,
        window_lateness_max_us,
        window_entry_us,
        window_entries_ns,
        raw: format!("raw/{name}"),
        disturbance: done.disturbance,
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
    let machine = partita_lab::machine::describe();
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
    let mut tables: Vec<Row> =
        cfg.scenarios.iter().zip(runs).map(|(&s, (runs, wd))| Row::of_runs(s, cfg.table_size, wd, runs)).collect();
    let schedule = predict_rows(cfg, &mut tables);
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
        ("recorder behind ports/recorder on DDS, both partitioned", Scenario::PartitionedPorts, Scenario::PartitionedRouting),
        ("multicore partitioned/traditional with routing", Scenario::Multicore, Scenario::TraditionalRouting),
        ("the --plan plan/traditional with routing", Scenario::FilePlan, Scenario::TraditionalRouting),
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
    let herd = match (row(Scenario::PartitionedRouting), row(Scenario::TraditionalRouting)) {
        (Some(p), Some(_)) if p.window_delay.is_some() => {
            log("The routing partition's thaw herd: the partitioned system with its monitor asking once a second, its CPU traced for 1 s…");
            let h = thaw_herd(cfg);
            match &h {
                Ok(h) => log(&format!("  {} threads, {} window starts: p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs", h.threads, h.herds, h.p50_us, h.p99_us, h.max_us)),
                Err(RunError::Interrupted) => return Err(RunError::Interrupted),
                Err(e) => log(&format!("  not measured, the bound leaves it out: {e}")),
            }
            Some(h)
        }
        _ => None,
    };
    let prediction = match (row(Scenario::PartitionedRouting), row(Scenario::TraditionalRouting)) {
        (Some(p), Some(t)) => p.window_delay.map(|wd| {
            let entries: Vec<f64> = p.runs.iter().filter_map(|r| r.window_entry_us.map(|e| e[1])).collect();
            let entry_p99 = Spread::of(&entries).map_or(0.0, |s| s.median);
            let (thaw_herd, thaw_herd_missing) = match herd {
                Some(Ok(h)) => (Some(h), None),
                Some(Err(e)) => (None, Some(e.to_string())),
                None => (None, None),
            };
            let without = wd.max_us + entry_p99 + t.summary.p99_us;
            let bound = without + thaw_herd.as_ref().map_or(0.0, |h| h.p99_us);
            Prediction {
                window_delay: wd,
                unpartitioned_p99_us: t.summary.p99_us,
                window_entry_p99_us: entry_p99,
                thaw_herd,
                thaw_herd_missing,
                bound_us: bound,
                bound_without_herd_us: without,
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
        schedule,
        multicore_penalty_removed,
        elapsed_s: t0.elapsed().as_secs_f64(),
    })
}

/// The recorder's own periodic work: what one frame capture (render and PNG-encode a 320×240 frame, as
/// `partita app recorder` does 10 times a second) costs on this machine, measured here: the median of 21, ns.
pub fn capture_cost_ns() -> u64 {
    let mut v: Vec<u64> = (0..21u64)
        .map(|i| {
            let t = std::time::Instant::now();
            let img = partita_apps::pattern::render(0, i, 0, 320, 240);
            let _ = partita_apps::pattern::encode_png(&img);
            t.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2]
}

/// The plan a windowed scenario runs under (the multicore scenario's whole-frame windows are not predicted).
fn plan_of(cfg: &BenchConfig, s: Scenario) -> Option<PlanWindows> {
    match s {
        Scenario::PartitionedRouting | Scenario::PartitionedPorts => Some(crate::scenario::paper_plan()),
        Scenario::FilePlan => cfg.plan.clone(),
        _ => None,
    }
}

/// The raw response times (ns) of a row's runs, from their monitor reports.
fn samples(out: &std::path::Path, row: &Row) -> Vec<u64> {
    let mut v = Vec::new();
    for r in &row.runs {
        let Ok(text) = std::fs::read_to_string(out.join(&r.raw)) else { continue };
        let Ok(json) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
        v.extend(json["samples_ns"].as_array().into_iter().flatten().filter_map(|x| x.as_u64()));
    }
    v
}

/// The model's prediction for every windowed row and for layouts of the paper's plan, from TRADITIONAL DDS WITH
/// ROUTING's raw samples of this run; `None` when that row did not run.
fn predict_rows(cfg: &BenchConfig, tables: &mut [Row]) -> Option<Schedule> {
    if !tables.iter().any(|r| plan_of(cfg, r.scenario).is_some()) {
        return None;
    }
    let service = samples(&cfg.out, tables.iter().find(|r| r.scenario == Scenario::TraditionalRouting)?);
    if service.is_empty() {
        return None;
    }
    // The switch costs: given, or the window entries the executor measured under the paper's plan (a plan is
    // predicted from measurements made without it), else under the plan of --plan (the only other windowed row).
    let entries = |s: Scenario| -> Vec<u64> { tables.iter().filter(|r| r.scenario == s).flat_map(|r| r.runs.iter().flat_map(|x| x.window_entries_ns.iter().copied())).collect() };
    let measured = match entries(Scenario::PartitionedRouting) {
        paper if paper.is_empty() => entries(Scenario::FilePlan),
        paper => paper,
    };
    let (switch_ns, switch_samples) = match cfg.switch_ns {
        Some(ns) => (ns, Vec::new()),
        None => (ExecutorSummary::of(&mut measured.clone()).p50_ns, measured),
    };
    // bench paper's monitor asks the next question as soon as it has the answer.
    let capture = Background { partition: "recorder".into(), period_ns: 1_000_000_000 / RECORDER_FPS, cost_ns: capture_cost_ns() };
    let model = Model { chain: CHAIN.iter().map(|s| s.to_string()).collect(), switch_ns, switch_samples, arrivals: Arrivals::Closed { think_ns: 0 }, requests: 100_000, background: vec![capture] };
    for row in tables.iter_mut() {
        if let Some(plan) = plan_of(cfg, row.scenario) {
            row.predicted = predict(std::slice::from_ref(&plan), &model, &service).ok();
            row.switches_per_ms = Some(plan.switches_per_ms());
        }
    }
    let search = Search { min_window_ns: 50_000, min_frame_ns: 0, max_frame_ns: u64::MAX, max_overhead: 1.0, objective: Objective::Mean, search_requests: 0, final_requests: 0 };
    let quick = Model { requests: 5_000, ..model.clone() };
    let layouts = layouts(&crate::scenario::paper_plan(), &search)
        .into_iter()
        .filter_map(|(plan, _)| {
            let predicted = predict(std::slice::from_ref(&plan), &quick, &service).ok()?;
            Some(Layout {
                major_frame_us: plan.major_frame_ns as f64 / 1e3,
                windows_per_frame: plan.slots.len(),
                switches_per_ms: plan.switches_per_ms(),
                predicted,
            })
        })
        .collect();
    Some(Schedule { switch_measured: cfg.switch_ns.is_none(), switch_samples: model.switch_samples.len(), model, service_samples: service.len(), layouts })
}

fn row_of(rows: &[Row], s: Scenario) -> Option<&Row> {
    rows.iter().find(|r| r.scenario == s)
}

