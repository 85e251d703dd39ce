//! Runs a matrix: every planned group whose cells are not all in the results tree (or all of them, when
//! asked) becomes a system, runs until its leading agent exits, and leaves one result file per cell.
use crate::agent::output::{self, Line, ProcessFigures};
use crate::matrix::{Matrix, Metric, Planned};
use crate::store::{CellResult, Latency, Store, Throughput};
use crate::system::{self, Programs};
use partita_lab::setup::Setup;
use partita_lab::stats::Stats;
use partita_lab::run::{run_until_exit, RunError};
use partita_supervisor::UpOptions;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RunConfig {
    pub programs: Programs,
    pub state_root: PathBuf,
    pub setup: Setup,
    /// Measure cells that the tree has already.
    pub force: bool,
    /// Only the groups whose id contains one of these (all when empty).
    pub only: Vec<String>,
    pub machine: String,
    /// Where the logs of a failed group's run are kept (`<dir>/<group id>/`); `None`: not kept.
    pub failed_logs: Option<PathBuf>,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct RunSummary {
    pub measured: usize,
    pub skipped: usize,
    pub failed: Vec<(String, String)>,
}

/// The groups of `matrix` this run measures: selected by `only`, and not fully measured unless `force`.
pub fn to_measure<'a>(matrix: &'a Matrix, store: &Store, cfg: &RunConfig) -> (Vec<&'a Planned>, usize) {
    let mut skipped = 0;
    let mut v = Vec::new();
    for p in &matrix.planned {
        let id = p.group.id();
        if !cfg.only.is_empty() && !cfg.only.iter().any(|o| id.contains(o.as_str())) {
            continue;
        }
        if !cfg.force && p.sizes.iter().all(|&s| store.measured(&p.group.cell_id(s))) {
            skipped += p.sizes.len();
            continue;
        }
        v.push(p);
    }
    (v, skipped)
}

/// How long a group may take before it is stopped: discovery and start-up, then its work at a pessimistic
/// 5 ms a round trip (federated and 1-to-n are slower), or its seconds of writing.
fn limit(p: &Planned) -> Duration {
    let work = match p.group.metric {
        Metric::Latency => (p.count + p.warmup) as f64 * p.sizes.len() as f64 * 0.005,
        Metric::Throughput => p.seconds * p.sizes.len() as f64 * 2.0 + 15.0,
    };
    Duration::from_secs(90) + Duration::from_secs_f64(work)
}

/// The agent lines of one run, by log.
fn read_logs(dir: &std::path::Path, names: &[String]) -> Result<Vec<Line>, String> {
    let mut lines = Vec::new();
    for n in names {
        let path = dir.join(format!("{n}.log"));
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        lines.extend(output::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?);
    }
    Ok(lines)
}

fn tail(dir: &std::path::Path, names: &[String]) -> String {
    let mut s = String::new();
    for n in names {
        let text = std::fs::read_to_string(dir.join(format!("{n}.log"))).unwrap_or_default();
        let all: Vec<&str> = text.lines().filter(|l| !l.starts_with("DBE {\"kind\":\"rtt\"")).collect();
        s.push_str(&format!("--- {n}.log\n{}\n", all[all.len().saturating_sub(12)..].join("\n")));
    }
    s
}

/// Runs one group and returns its cells (with their raw round trips), or why it failed.
pub fn run_group(p: &Planned, cfg: &RunConfig, serial: usize) -> Result<Vec<(CellResult, Option<Vec<u64>>)>, String> {
    let name = format!("dbe-{}-{serial}", std::process::id());
    let topic = format!("dbe{}_{serial}", std::process::id());
    let layout = system::layout(p, &name, &topic, &cfg.programs, &cfg.setup);
    let system = layout.spec.build(&partita_system::Host::this_machine(), &format!("<bench dbe {}>", p.group.id())).map_err(|e| format!("the generated system does not validate: {e}"))?;
    let options = UpOptions { partita: Some(cfg.programs.partita.clone().into()), ..UpOptions::new(&cfg.state_root) };
    let state = cfg.state_root.join(&system.name);
    // Logs are appended: a state directory left by an earlier system of the same name would mix its lines in.
    let _ = std::fs::remove_dir_all(&state);
    let done = run_until_exit(&system, &options, &layout.wait_for, limit(p));
    let disturbance = done.as_ref().ok().map(|e| e.disturbance);
    let outcome = match done {
        Err(RunError::Interrupted) => Err("interrupted".to_string()),
        Err(e) => Err(e.to_string()),
        Ok(e) if e.timed_out => Err(format!("still running after {} s:\n{}", limit(p).as_secs(), tail(&state, &layout.logs))),
        Ok(_) => read_logs(&state, &layout.logs).and_then(|lines| cells(p, cfg, lines).map_err(|e| format!("{e}\n{}", tail(&state, &layout.logs)))),
    };
    let outcome = outcome.map(|mut cells| {
        for (c, _) in &mut cells {
            c.disturbance = disturbance;
        }
        cells
    });
    if outcome.is_err() {
        // Keep the failed run's logs (every partition's and node's, the router's too) for a look.
        if let Some(keep) = &cfg.failed_logs {
            let dir = keep.join(p.group.id());
            let _ = std::fs::remove_dir_all(&dir);
            if std::fs::create_dir_all(&dir).is_ok() {
                for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
                    if e.path().extension().is_some_and(|x| x == "log" || x == "jsonl") {
                        let _ = std::fs::copy(e.path(), dir.join(e.file_name()));
                    }
                }
                let _ = std::fs::write(dir.join("system.toml"), layout.spec.to_toml());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&state);
    if p.group.implementation == crate::matrix::Implementation::Iceoryx2 {
        crate::agent::iceoryx::remove_leftovers();
    }
    outcome
}

/// A cell of `p` at `size` with no figures yet.
fn empty_cell(p: &Planned, cfg: &RunConfig, size: usize, now: &str) -> CellResult {
    CellResult {
        id: p.group.cell_id(size),
        test: p.test.clone(),
        group: p.group.clone(),
        size,
        measured_at: now.into(),
        machine: cfg.machine.clone(),
        setup: cfg.setup.caption(),
        count: p.count,
        warmup: p.warmup,
        latency: None,
        throughput: None,
        processes: Vec::new(),
        error: None,
        disturbance: None,
    }
}

fn cells(p: &Planned, cfg: &RunConfig, lines: Vec<Line>) -> Result<Vec<(CellResult, Option<Vec<u64>>)>, String> {
    if let Some(Line::Error { message }) = lines.iter().find(|l| matches!(l, Line::Error { .. })) {
        return Err(format!("an agent failed: {message}"));
    }
    let processes: Vec<ProcessFigures> = lines.iter().filter_map(|l| if let Line::Process(f) = l { Some(f.clone()) } else { None }).collect();
    let mut rtt: BTreeMap<usize, (Vec<u64>, u64)> = BTreeMap::new();
    let mut sent: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    let mut received: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
    for l in lines {
        match l {
            Line::Rtt { size, rtt_ns, lost, .. } => {
                rtt.insert(size, (rtt_ns, lost));
            }
            Line::Sent { size, sent: n, elapsed_ns } => {
                sent.insert(size, (n, elapsed_ns));
            }
            Line::Received { size, received: n, .. } => received.entry(size).or_default().push(n),
            _ => {}
        }
    }
    let now = partita_lab::machine::now_rfc3339();
    let mut out = Vec::new();
    for &size in &p.sizes {
        let mut cell = empty_cell(p, cfg, size, &now);
        cell.processes = processes.clone();
        let mut raw = None;
        match p.group.metric {
            Metric::Latency => match rtt.remove(&size) {
                Some((samples, lost)) => {
                    cell.latency = Some(Latency { stats: Stats::from_ns(&samples), lost });
                    if samples.is_empty() {
                        cell.error = Some(format!("every one of the {lost} round trips was lost"));
                    }
                    raw = Some(samples);
                }
                None => cell.error = Some("the ping printed no round trips for this size".into()),
            },
            Metric::Throughput => match sent.get(&size) {
                Some(&(n, elapsed_ns)) => {
                    let mut got = received.get(&size).cloned().unwrap_or_default();
                    got.resize(p.group.subscribers as usize, 0);
                    let seconds = elapsed_ns as f64 / 1e9;
                    let mean = got.iter().sum::<u64>() as f64 / got.len().max(1) as f64;
                    let per_s = if seconds > 0.0 { mean / seconds } else { 0.0 };
                    cell.throughput = Some(Throughput {
                        sent: n,
                        received: got,
                        seconds,
                        samples_per_s: per_s,
                        mb_per_s: per_s * size as f64 / 1e6,
                        loss: if n > 0 { (1.0 - mean / n as f64).max(0.0) } else { 0.0 },
                    });
                }
                None => cell.error = Some("the writer printed nothing for this size".into()),
            },
        }
        out.push((cell, raw));
    }
    Ok(out)
}

/// Runs `groups` (what [`to_measure`] chose; `skipped` cells it left out), storing each cell as it comes; `log`
/// gets a line per group.
pub fn run(groups: &[&Planned], skipped: usize, store: &Store, cfg: &RunConfig, mut log: impl FnMut(&str)) -> Result<RunSummary, String> {
    let mut summary = RunSummary { skipped, ..RunSummary::default() };
    log(&format!("bench dbe: {} groups to measure, {} cells already measured ({})", groups.len(), skipped, store.dir().display()));
    for (i, p) in groups.iter().enumerate() {
        let t0 = std::time::Instant::now();
        let id = p.group.id();
        match run_group(p, cfg, i) {
            Ok(cells) => {
                let mut line = format!("[{}/{}] {id}: ", i + 1, groups.len());
                for (c, raw) in &cells {
                    store.put(c, raw.as_deref()).map_err(|e| e.to_string())?;
                    if let Some(s) = c.latency.as_ref().and_then(|l| l.stats.as_ref()) {
                        line.push_str(&format!("{} B {:.1}±{:.1} µs; ", c.size, s.mean_us, s.std_us));
                    }
                    if let Some(t) = &c.throughput {
                        line.push_str(&format!("{} B {:.0}/s loss {:.1} %; ", c.size, t.samples_per_s, t.loss * 100.0));
                    }
                    if c.error.is_some() {
                        summary.failed.push((c.id.clone(), c.error.clone().unwrap_or_default()));
                    } else {
                        summary.measured += 1;
                    }
                }
                log(&format!("{line}({:.0} s)", t0.elapsed().as_secs_f64()));
            }
            Err(e) if e == "interrupted" => return Err("interrupted (Ctrl-C or SIGTERM); the system was torn down".into()),
            Err(e) => {
                log(&format!("[{}/{}] {id}: failed: {e}", i + 1, groups.len()));
                for &size in &p.sizes {
                    let mut cell = empty_cell(p, cfg, size, &partita_lab::machine::now_rfc3339());
                    cell.error = Some(e.clone());
                    store.put(&cell, None).map_err(|e| e.to_string())?;
                    summary.failed.push((cell.id, e.clone()));
                }
            }
        }
    }
    Ok(summary)
}
