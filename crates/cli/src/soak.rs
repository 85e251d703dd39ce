//! `partita soak [SYSTEM.toml] --duration D`: a system run for a long time, measured per interval
//! (`partita_paper::soak`; docs/soak.md).
use clap::Args;
use partita_paper::soak::{self, parse_duration, Limits, SoakConfig};
use partita_supervisor::supervisor::{install_stop_signals, STATE_DIR};
use partita_supervisor::UpOptions;
use partita_system::plan::WakeAheadRefused;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct SoakArgs {
    /// The system file; without it, the paper's system with its monitor asking open-loop at --rate.
    pub system: Option<PathBuf>,
    /// How long to run: 90s, 10m, 1h, 8h.
    #[arg(long, default_value = "10m")]
    duration: String,
    /// Length of each measured interval.
    #[arg(long, default_value = "60s")]
    interval: String,
    /// cyclictest on each plan's CPU before the system starts, for this long ("0": none).
    #[arg(long, default_value = "60s")]
    floor: String,
    /// The built-in system's monitor: requests per second, open loop.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// The built-in system's monitor: each gap between requests is the period ± a uniform draw from this
    /// (e.g. 1500us), so the requests meet every phase of the major frame; "0": a fixed period, which keeps
    /// them at the same few phases all run long.
    #[arg(long, default_value = "0")]
    jitter: String,
    /// The built-in system's plan: freeze the partition whose window another partition's follows this long
    /// before its window ends ([[module.plan]] freeze_ahead, e.g. 100us; "0" or left out: at the boundary).
    #[arg(long)]
    freeze_ahead: Option<String>,
    /// The built-in plan's executor wakes this long before a window start that follows time no partition runs
    /// in and waits for it on the clock ([[module.plan]] wake_ahead, e.g. 30us; needs a longer --freeze-ahead).
    #[arg(long)]
    wake_ahead: Option<String>,
    /// Verdict: an interval's executor lateness p99 may be at most this many times cyclictest's p99.
    #[arg(long, default_value_t = 1.5)]
    lateness_vs_floor: f64,
    /// Verdict: the monitors' p99 response time in an interval, µs (default: no limit); over all the interval's
    /// responses when a monitor prints them (`--live-samples`, as the built-in one does), else its worst second's.
    #[arg(long)]
    max_response_us: Option<f64>,
    /// Verdict, instead of --max-response-us: the response limit is the bound `partita bench paper` predicted in
    /// this results.json (`prediction.bound_us`, from its trad-routing and partitioned scenarios) plus the
    /// --freeze-ahead lead. The built-in system only.
    #[arg(long, conflicts_with = "max_response_us")]
    bound_from: Option<PathBuf>,
    /// Trace each plan's CPU with ftrace (an instance of partita's own) and explain every window start later
    /// than 1 ms: the vCPU not running, interrupts, another task, a page fault (stalls/ in the output folder).
    #[arg(long)]
    trace_stalls: bool,
    /// Output folder: report.md, soak.svg, soak.json, intervals.jsonl.
    #[arg(long, default_value = "results/soak")]
    out: PathBuf,
    /// How the built-in system's partitions and monitor are scheduled (default: the real-time setup, as
    /// every benchmark). A system file grants its own scheduling instead.
    #[command(flatten)]
    setup: crate::bench::SetupArgs,
}

/// The measurement setup granted to every partition and node of the built-in system, as `bench paper`'s
/// system files grant it: their scheduling class, the system's cpu_dma_latency (the supervisor holds it while
/// the system is up), and the native nodes' memory lock.
fn grant(s: &mut partita_system::System, setup: &partita_lab::setup::Setup) {
    let scheduling = match setup.fifo_priority() {
        Some(p) => partita_system::Scheduling::Fifo { priority: p },
        None => partita_system::Scheduling::Normal,
    };
    s.cpu_dma_latency = setup.cpu_dma_latency_us().map(|us| partita_system::Duration::from_micros(us as u64));
    for m in &mut s.modules {
        for p in &mut m.partitions {
            p.tree.scheduling = scheduling;
        }
    }
    for n in &mut s.nodes {
        n.tree.scheduling = scheduling;
        if setup.locks_memory() {
            n.tree.command.push(partita_lab::setup::LOCK_MEMORY_FLAG.into());
        }
    }
}

fn usage(m: String) -> ExitCode {
    eprintln!("error: {m}");
    ExitCode::from(2)
}

pub fn run(a: SoakArgs) -> ExitCode {
    let Some(duration) = parse_duration(&a.duration) else { return usage(format!("--duration {:?}: give a length such as 90s, 10m or 1h", a.duration)) };
    let Some(interval) = parse_duration(&a.interval) else { return usage(format!("--interval {:?}: give a length such as 60s", a.interval)) };
    if interval > duration {
        return usage(format!("--interval {:?} is longer than --duration {:?}", a.interval, a.duration));
    }
    let floor = match a.floor.as_str() {
        "0" | "0s" | "none" => None,
        f => match parse_duration(f) {
            Some(d) if d.as_secs() >= 1 => Some(d),
            _ => return usage(format!("--floor {f:?}: give at least 1s, or 0 for none")),
        },
    };
    if !(a.rate > 0.0 && a.rate.is_finite()) {
        return usage(format!("--rate {}: give a positive number of requests per second", a.rate));
    }
    let jitter = match a.jitter.as_str() {
        "0" => None,
        j => match partita_router_config::parse_duration(j) {
            Ok(d) if !d.is_zero() => Some(j.to_string()),
            Ok(_) => None,
            Err(e) => return usage(format!("--jitter {j:?}: {e}; give a length such as 1500us, or 0 for a fixed period")),
        },
    };
    let freeze_ahead = match a.freeze_ahead.as_deref() {
        None => None,
        Some("0") => Some(std::time::Duration::ZERO),
        Some(f) => match partita_router_config::parse_duration(f) {
            Ok(d) => Some(d),
            Err(e) => return usage(format!("--freeze-ahead {f:?}: {e}; give a length such as 30us, or 0")),
        },
    };
    let wake_ahead = match a.wake_ahead.as_deref() {
        None | Some("0") => None,
        Some(w) => match partita_router_config::parse_duration(w) {
            Ok(d) if d.is_zero() => None,
            Ok(d) => Some(d),
            Err(e) => return usage(format!("--wake-ahead {w:?}: {e}; give a length such as 30us, or 0")),
        },
    };
    if !(a.lateness_vs_floor >= 1.0 && a.lateness_vs_floor.is_finite()) {
        return usage(format!("--lateness-vs-floor {}: give a ratio of at least 1", a.lateness_vs_floor));
    }
    if a.max_response_us.is_some_and(|m| !(m > 0.0 && m.is_finite())) {
        return usage("--max-response-us: give a positive number of µs".into());
    }
    let builtin = a.system.is_none();
    if !builtin && a.setup.given() {
        return usage("--normal-scheduling, --fifo and --cpu-dma-latency set up the built-in system; a system file grants its own (`scheduling` of each partition and node, [system] cpu_dma_latency)".into());
    }
    if !builtin && a.bound_from.is_some() {
        return usage("--bound-from is the built-in system's (bench paper predicts the bound of the paper's plan); give a system file's limit with --max-response-us".into());
    }
    let (max_response_us, response_from) = match &a.bound_from {
        Some(f) => match soak::bound_from(f, freeze_ahead.unwrap_or_default()) {
            Ok((limit, from)) => (Some(limit), Some(from)),
            Err(e) => return usage(e),
        },
        None => (a.max_response_us, None),
    };
    if !builtin && (a.freeze_ahead.is_some() || a.wake_ahead.is_some() || jitter.is_some()) {
        return usage("--jitter, --freeze-ahead and --wake-ahead set up the built-in system; a system file sets its own (the monitor's `--jitter` in its command, `freeze_ahead` and `wake_ahead` in [[module.plan]])".into());
    }
    let setup = match a.setup.setup() {
        Ok(s) => s,
        Err(e) => return usage(e.to_string()),
    };
    let mut system = match &a.system {
        Some(p) => partita_system::load(p),
        None => partita_system::builtin_default(),
    }
    .map_err(|e| e.to_string());
    if let (Ok(s), true) = (&mut system, builtin) {
        // The paper's monitor asks open-loop for the whole soak (and a minute more, so the system ends first).
        let secs = (duration.as_secs_f64() + 60.0).to_string();
        for n in s.nodes.iter_mut().filter(|n| n.tree.command.iter().any(|c| c == "monitor")) {
            n.tree.command.extend(["--count", "0", "--rate", &a.rate.to_string(), "--duration", &secs, "--live-samples"].map(String::from));
            if let Some(j) = &jitter {
                n.tree.command.extend(["--jitter".to_string(), j.clone()]);
            }
        }
        grant(s, &setup);
        for (p, ahead) in s.modules.iter_mut().flat_map(|m| m.plans.iter_mut()).filter_map(|p| freeze_ahead.map(|d| (p, d))) {
            let ahead = partita_system::Duration::from_nanos(ahead.as_nanos() as u64);
            p.freeze_ahead = ahead;
            if let Some(k) = p.freeze_ahead_too_long() {
                return usage(format!("--freeze-ahead {:?} is more than a fifth of the built-in plan's window {k} ({}); give tens of µs", a.freeze_ahead.as_deref().unwrap_or_default(), p.windows[k].duration));
            }
        }
        for p in s.modules.iter_mut().flat_map(|m| m.plans.iter_mut()) {
            if let Some(w) = wake_ahead {
                p.wake_ahead = partita_system::Duration::from_nanos(w.as_nanos() as u64);
                let given = a.wake_ahead.as_deref().unwrap_or_default();
                match p.wake_ahead_refused() {
                    None => {}
                    Some(WakeAheadRefused::OverAMillisecond) => {
                        return usage(format!("--wake-ahead {given:?} is longer than 1ms (a timer's wake-up latency is tens of µs); give e.g. 30us"))
                    }
                    Some(WakeAheadRefused::NotShorterThanFreezeAhead | WakeAheadRefused::NoQuietTime) => {
                        return usage(format!("--wake-ahead {given:?} needs a longer --freeze-ahead (the executor waits in the time the partition frozen ahead leaves); give e.g. --freeze-ahead 100us --wake-ahead 30us"))
                    }
                }
            }
        }
    }
    let system = match system {
        Ok(s) => s,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(2);
        }
    };
    install_stop_signals();
    let cfg = SoakConfig {
        system,
        options: UpOptions::new(STATE_DIR),
        duration,
        interval,
        out: a.out.clone(),
        floor,
        limits: Limits { lateness_vs_floor: a.lateness_vs_floor, response_p99_us: max_response_us, response_from },
        setup: if builtin {
            let lock = if setup.locks_memory() { " (partitions do not lock their memory)" } else { "" };
            format!("{}, granted to the built-in system's partitions and monitor{lock}", setup.caption())
        } else {
            "as the system file grants".into()
        },
        trace_stalls: a.trace_stalls,
    };
    let report = match soak::run(&cfg, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("partita soak: {e}");
            return ExitCode::FAILURE;
        }
    };
    let command = crate::paper::command_line();
    if let Err(e) = soak::write_all(&report, &a.out, &command) {
        eprintln!("partita soak: writing {}: {e}", a.out.display());
        return ExitCode::FAILURE;
    }
    eprintln!("partita soak: wrote {}", a.out.join("report.md").display());
    ExitCode::SUCCESS
}
