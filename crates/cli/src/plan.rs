//! `partita plan optimise [SYSTEM.toml]`: search window layouts of a plan that keep every partition's share for
//! the best predicted response time of a request path, and write the chosen plan as a system file
//! (docs/schedule.md).
use clap::{Args, Subcommand, ValueEnum};
use partita_schedule::optimise::{optimise, Candidate, Objective, Search};
use partita_schedule::svg::{tradeoff, Kind, Point};
use partita_schedule::system::{check_path, default_path, locate, written};
use partita_schedule::{Arrivals, Model, PlanWindows};
use partita_system::Duration;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct PlanArgs {
    #[command(subcommand)]
    command: PlanCommand,
}

#[derive(Subcommand)]
enum PlanCommand {
    /// Search layouts of a plan (more, shorter windows; orders; other frames) that keep every partition's share
    /// and print the trade-off between predicted response time and switching; write the chosen plan as a
    /// system file.
    Optimise(OptimiseArgs),
    /// Switch a running system's module to another of its named plans: at the end of the current major frame
    /// (each CPU's), or at once with --now; waits until every CPU of the module runs it and prints when each
    /// switched (planned and actual instants, and for --now what the cut lost).
    Switch(SwitchArgs),
}

#[derive(Args)]
struct SwitchArgs {
    /// The running system (its name in the system file).
    system: String,
    /// The plan to switch to (a `name` of the module's [[module.plan]] tables).
    plan: String,
    /// The module [default: the only module with more than one plan].
    #[arg(long)]
    module: Option<String>,
    /// Switch at the executor's next wake-up instead of the end of the major frame: the rest of the current
    /// frame is lost.
    #[arg(long)]
    now: bool,
}

fn switch_cmd(a: SwitchArgs) -> ExitCode {
    let request = partita_supervisor::control_socket::Request::SwitchPlan { module: a.module, plan: a.plan, now: a.now };
    crate::partition::ask("partita plan switch", &a.system, &request)
}

#[derive(Clone, Copy, ValueEnum)]
enum ObjectiveArg {
    Mean,
    P99,
}

#[derive(Clone, Copy, ValueEnum)]
enum ArrivalsArg {
    /// The next request leaves when the previous answer arrives (bench paper's monitor).
    Closed,
    /// Requests arrive at any instant (a monitor asking at a fixed rate).
    Open,
}

#[derive(Args)]
struct OptimiseArgs {
    /// The system file; without it, the built-in video-surveillance system of paper 001.
    file: Option<PathBuf>,
    /// The CPU whose plan is laid out [default: the first plan with windows of two or more partitions].
    #[arg(long)]
    cpu: Option<usize>,
    /// The partitions a request visits, in order [default: the module's first [[module.path]], else the I/O
    /// partition, the plan's first other partition, the I/O partition again].
    #[arg(long, value_delimiter = ',')]
    path: Vec<String>,
    /// Service times of the path measured without a plan: a monitor report with raw samples (e.g.
    /// results/paper/raw/trad-routing-1024-r1.json from `partita bench paper --scenarios trad-routing`).
    #[arg(long, conflicts_with = "service_time")]
    service: Option<PathBuf>,
    /// Or one service time for every request, e.g. 80us.
    #[arg(long)]
    service_time: Option<String>,
    /// CPU time lost on entering a window (the executor's lateness and its freeze and thaw calls): a duration
    /// such as 25us, or the window entries `partita bench paper` measured (raw/partitioned-1024-r1-windows.json),
    /// one of which each window instance loses.
    #[arg(long, default_value = "25us")]
    switch_cost: String,
    /// The shortest window a layout may have.
    #[arg(long, default_value = "50us")]
    min_window: String,
    /// Bounds of the major frame [default: 1/8 and 2 times the plan's].
    #[arg(long)]
    min_frame: Option<String>,
    #[arg(long)]
    max_frame: Option<String>,
    /// The largest share of the CPU the chosen plan's switches may cost, in percent.
    #[arg(long, default_value_t = 10.0)]
    max_overhead: f64,
    /// A partition's own periodic work, PARTITION:PERIOD:COST (repeatable), e.g. recorder:100ms:2ms for a
    /// recorder that captures 10 frames a second, 2 ms of CPU each (`partita bench paper` measures it).
    #[arg(long)]
    background: Vec<String>,
    #[arg(long, value_enum, default_value = "mean")]
    objective: ObjectiveArg,
    #[arg(long, value_enum, default_value = "closed")]
    arrivals: ArrivalsArg,
    /// Output folder: <system>-optimised.toml, candidates.csv, tradeoff.svg, plan.md.
    #[arg(long, default_value = "results/plan")]
    out: PathBuf,
}

pub fn run(a: PlanArgs) -> ExitCode {
    match a.command {
        PlanCommand::Switch(s) => switch_cmd(s),
        PlanCommand::Optimise(o) => match optimise_cmd(o) {
            Ok(()) => ExitCode::SUCCESS,
            Err(Failure::Usage(e)) => {
                eprintln!("error: {e}");
                ExitCode::from(2)
            }
            Err(Failure::Invalid(errors)) => {
                eprintln!("{errors}");
                eprintln!("{} error(s); the system is not valid", errors.0.len());
                ExitCode::from(2)
            }
            Err(Failure::Io(e)) => {
                eprintln!("partita plan optimise: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

enum Failure {
    Usage(String),
    /// The system file does not validate (printed as `partita check` prints it).
    Invalid(partita_system::Errors),
    Io(String),
}

fn duration(text: &str, flag: &str) -> Result<u64, Failure> {
    text.parse::<Duration>().map(|d| d.as_nanos()).map_err(|e| Failure::Usage(format!("{flag} {text:?}: {e}")))
}

/// The switch cost: one duration, or measured window entries from a file (`window_entry_ns`); (the fixed or
/// median cost, the samples, what to print).
fn switch_cost(text: &str) -> Result<(u64, Vec<u64>, String), Failure> {
    if let Ok(d) = text.parse::<Duration>() {
        return Ok((d.as_nanos(), Vec::new(), d.to_string()));
    }
    let path = Path::new(text);
    let body = std::fs::read_to_string(path)
        .map_err(|e| Failure::Usage(format!("--switch-cost {text:?}: neither a duration (25us) nor a readable file ({e})")))?;
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| Failure::Usage(format!("--switch-cost {text}: not JSON ({e})")))?;
    let v: Vec<u64> = json["window_entry_ns"].as_array().into_iter().flatten().filter_map(|x| x.as_u64()).collect();
    if v.is_empty() {
        return Err(Failure::Usage(format!(
            "--switch-cost {text}: no `window_entry_ns` in it; give a duration such as 25us or a raw/*-windows.json of `partita bench paper`"
        )));
    }
    let median = partita_supervisor::executor::Summary::of(&mut v.clone()).p50_ns;
    let text = format!("one of {} measured window entries of {text} (median {})", v.len(), Duration::from_nanos(median));
    Ok((median, v, text))
}

/// `PARTITION:PERIOD:COST` of `--background`.
fn background(text: &str, system: &partita_system::System) -> Result<partita_schedule::Background, Failure> {
    let bad = |why: String| Failure::Usage(format!("--background {text:?}: {why}; write PARTITION:PERIOD:COST, e.g. recorder:100ms:2ms"));
    let parts: Vec<&str> = text.split(':').collect();
    let [partition, period, cost] = parts[..] else { return Err(bad("three fields separated by `:` expected".into())) };
    if !system.partitions().any(|(_, p)| p.name == partition) {
        return Err(bad(format!("{} has no partition {partition:?}", system.source)));
    }
    let period = period.parse::<Duration>().map_err(|e| bad(e.to_string()))?.as_nanos();
    let cost = cost.parse::<Duration>().map_err(|e| bad(e.to_string()))?.as_nanos();
    if period == 0 || cost >= period {
        return Err(bad("the period must be longer than the cost".into()));
    }
    Ok(partita_schedule::Background { partition: partition.into(), period_ns: period, cost_ns: cost })
}

/// Raw response times (ns) from a monitor report.
fn service_samples(path: &Path) -> Result<Vec<u64>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| Failure::Usage(format!("--service {}: {e}", path.display())))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| Failure::Usage(format!("--service {}: not JSON ({e}); give a monitor report (`partita app monitor --json`)", path.display())))?;
    let v: Vec<u64> = json["samples_ns"].as_array().into_iter().flatten().filter_map(|x| x.as_u64()).collect();
    if v.is_empty() {
        return Err(Failure::Usage(format!(
            "--service {}: no `samples_ns` in it; give a monitor report with raw samples, such as results/paper/raw/trad-routing-1024-r1.json",
            path.display()
        )));
    }
    Ok(v)
}

fn optimise_cmd(a: OptimiseArgs) -> Result<(), Failure> {
    let (system, text) = match &a.file {
        Some(f) => {
            let system = partita_system::load(f).map_err(Failure::Invalid)?;
            let text = std::fs::read_to_string(f).map_err(|e| Failure::Usage(format!("{}: {e}", f.display())))?;
            (system, text)
        }
        None => (partita_system::builtin_default().map_err(Failure::Invalid)?, partita_system::BUILTIN_DEFAULT.to_string()),
    };
    let at = locate(&system, a.cpu).map_err(|e| Failure::Usage(e.to_string()))?;
    let path = if a.path.is_empty() { default_path(&system, at).map_err(|e| Failure::Usage(e.to_string()))? } else { a.path.clone() };
    check_path(&system, &path).map_err(|e| Failure::Usage(format!("--path: {e}")))?;
    let (service, service_text) = match (&a.service, &a.service_time) {
        (Some(p), _) => {
            let v = service_samples(p)?;
            let t = format!("{} raw samples of {}", v.len(), p.display());
            (v, t)
        }
        (None, Some(t)) => (vec![duration(t, "--service-time")?], format!("{t} for every request")),
        (None, None) => {
            return Err(Failure::Usage(
                "give the path's service time without a plan: --service results/paper/raw/trad-routing-1024-r1.json (from `partita bench paper --scenarios trad-routing`) or --service-time 80us".into(),
            ))
        }
    };
    let (switch_ns, switch_samples, switch_text) = switch_cost(&a.switch_cost)?;
    let background = a.background.iter().map(|b| background(b, &system)).collect::<Result<Vec<_>, _>>()?;
    let plans = PlanWindows::of_system(&system);
    let base = plans.iter().find(|p| p.cpu == at.cpu).expect("located").clone();
    let min_frame = a.min_frame.as_deref().map(|t| duration(t, "--min-frame")).transpose()?.unwrap_or(base.major_frame_ns / 8);
    let max_frame = a.max_frame.as_deref().map(|t| duration(t, "--max-frame")).transpose()?.unwrap_or(base.major_frame_ns * 2);
    if !(0.0..=100.0).contains(&a.max_overhead) {
        return Err(Failure::Usage(format!("--max-overhead {}: give a percentage between 0 and 100", a.max_overhead)));
    }
    // A plan with a freeze lead takes no window shorter than five times it (the rule `check` applies).
    let ahead_ns = system.modules[at.module].plans[at.plan].freeze_ahead.as_nanos();
    let search = Search {
        min_window_ns: duration(&a.min_window, "--min-window")?.max(ahead_ns.saturating_mul(5)),
        min_frame_ns: min_frame,
        max_frame_ns: max_frame,
        max_overhead: a.max_overhead / 100.0,
        objective: match a.objective {
            ObjectiveArg::Mean => Objective::Mean,
            ObjectiveArg::P99 => Objective::P99,
        },
        search_requests: 5_000,
        final_requests: 100_000,
    };
    let model = Model {
        chain: path.clone(),
        switch_ns,
        switch_samples,
        arrivals: match a.arrivals {
            ArrivalsArg::Closed => Arrivals::Closed { think_ns: 0 },
            ArrivalsArg::Open => Arrivals::Open,
        },
        requests: 100_000,
        background,
    };
    let out = optimise(&plans, at.cpu, &model, &service, &search).map_err(|e| Failure::Usage(e.to_string()))?;
    let chosen = &out.candidates[out.chosen];
    let host = partita_system::Host::this_machine();
    let (file_text, _) = written(&system, &text, &host, at, &chosen.plan).map_err(|e| Failure::Io(e.to_string()))?;

    std::fs::create_dir_all(&a.out).map_err(|e| Failure::Io(format!("{}: {e}", a.out.display())))?;
    let target = a.out.join(format!("{}-optimised.toml", system.name));
    let header = format!(
        "# Written by `partita plan optimise`: the plan of CPU {} laid out for the path {} (predicted mean {:.0} µs, p99 {:.0} µs, switches {:.1}% of the CPU); every partition keeps its share.\n",
        at.cpu,
        path.join(" → "),
        chosen.predicted.mean_us,
        chosen.predicted.p99_us,
        chosen.overhead * 100.0
    );
    let write = |p: &Path, t: &str| std::fs::write(p, t).map_err(|e| Failure::Io(format!("{}: {e}", p.display())));
    write(&target, &format!("{header}{file_text}"))?;
    write(&a.out.join("candidates.csv"), &csv(&out.candidates))?;
    let points: Vec<Point> = out
        .candidates
        .iter()
        .map(|c| Point {
            switches_per_ms: c.switches_per_ms,
            mean_us: c.predicted.mean_us,
            p99_us: c.predicted.p99_us,
            kind: if c.pareto { Kind::Front } else { Kind::Predicted },
            label: if c.original { Some("the file's plan".into()) } else if std::ptr::eq(c, chosen) { Some("chosen".into()) } else { None },
        })
        .collect();
    write(&a.out.join("tradeoff.svg"), &tradeoff(&format!("{}: layouts of CPU {}'s plan, path {}", system.name, at.cpu, path.join(" → ")), "on the front", &points))?;
    let report = report(&a, &system.name, at.cpu, &path, &service_text, &switch_text, &out.candidates, out.chosen, &target);
    write(&a.out.join("plan.md"), &report)?;
    print!("{report}");
    Ok(())
}

fn csv(c: &[Candidate]) -> String {
    let mut s = String::from("major_frame_us,windows_per_frame,switches_per_ms,overhead,order,mean_us,p50_us,p99_us,max_us,pareto,original\n");
    for c in c {
        let _ = writeln!(
            s,
            "{},{},{:.3},{:.4},{},{:.1},{:.1},{:.1},{:.1},{},{}",
            c.major_frame_ns as f64 / 1e3,
            c.windows_per_frame,
            c.switches_per_ms,
            c.overhead,
            c.order.join(" "),
            c.predicted.mean_us,
            c.predicted.p50_us,
            c.predicted.p99_us,
            c.predicted.max_us,
            c.pareto,
            c.original
        );
    }
    s
}

#[allow(clippy::too_many_arguments)]
fn report(a: &OptimiseArgs, name: &str, cpu: usize, path: &[String], service: &str, switch: &str, c: &[Candidate], chosen: usize, target: &Path) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "# Plan layouts of {name}, CPU {cpu}\n");
    let _ = writeln!(
        o,
        "Path {}; service times: {service}; switch cost per window entered: {switch}; background work: {}; {} arrivals; objective: predicted {}. \
         {} layouts keep every partition's share; the front (no layout better in both response time and switching; at most 15 of its rows, all in candidates.csv) and the file's plan:\n",
        path.join(" → "),
        if a.background.is_empty() { "none".to_string() } else { a.background.join(", ") },
        match a.arrivals {
            ArrivalsArg::Closed => "closed-loop",
            ArrivalsArg::Open => "open",
        },
        match a.objective {
            ObjectiveArg::Mean => "mean",
            ObjectiveArg::P99 => "p99",
        },
        c.len() - 1
    );
    o.push_str("| | frame µs | windows | switches per ms | switch cost | predicted mean / p50 / p99 / max µs |\n|---|---:|---:|---:|---:|---|\n");
    // The front, thinned to at most 15 rows, and always the chosen and the file's plan.
    let front: Vec<usize> = (0..c.len()).filter(|&i| c[i].pareto).collect();
    let step = front.len().div_ceil(15).max(1);
    let shown: Vec<usize> = (0..c.len()).filter(|&i| i == chosen || c[i].original || front.iter().position(|&f| f == i).is_some_and(|k| k % step == 0)).collect();
    for (i, x) in shown.into_iter().map(|i| (i, &c[i])) {
        let mark = if i == chosen { "chosen" } else if x.original { "the file's" } else { "front" };
        let _ = writeln!(
            o,
            "| {mark} | {:.1} | {} | {:.2} | {:.1}% | {:.0} / {:.0} / {:.0} / {:.0} |",
            x.major_frame_ns as f64 / 1e3,
            x.windows_per_frame,
            x.switches_per_ms,
            x.overhead * 100.0,
            x.predicted.mean_us,
            x.predicted.p50_us,
            x.predicted.p99_us,
            x.predicted.max_us
        );
    }
    let x = &c[chosen];
    let _ = writeln!(
        o,
        "\nChosen (best predicted {} within {}% switch cost): windows {}, frame {}.\nWritten: {} (check it with `partita check`, measure it with `partita bench paper --plan`), candidates.csv, tradeoff.svg, plan.md in {}.",
        match a.objective {
            ObjectiveArg::Mean => "mean",
            ObjectiveArg::P99 => "p99",
        },
        a.max_overhead,
        x.plan.slots.iter().map(|s| format!("{} {}", s.partition, Duration::from_nanos(s.duration))).take(4).collect::<Vec<_>>().join(", ") + if x.plan.slots.len() > 4 { ", …" } else { "" },
        Duration::from_nanos(x.major_frame_ns),
        target.display(),
        a.out.display()
    );
    o
}
