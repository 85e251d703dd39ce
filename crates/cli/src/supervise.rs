//! Supervisor commands: `partita down`, `partita status`, and the
//! hidden `partita isolation-bench` (freezing backends, the 1500 µs reference frame).
use clap::{Args, Subcommand};
use partita_lab::freezing;
use partita_supervisor::{cleanup, registry};
use partita_supervisor::freeze::FreezeBackend;
use partita_supervisor::supervisor::{read_states, STATE_DIR};
use partita_supervisor::UpOptions;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct DownArgs {
    /// Also remove the systems whose supervisor still runs (their partitions are killed).
    #[arg(long)]
    pub force: bool,
}

/// Removes what partita left on this machine: the partition processes (only those inside partita's cgroups),
/// network namespaces `partita-*`, partita's interfaces, cgroups under `partita/` and state files of every
/// system whose supervisor is gone. Systems that are up are left alone unless --force.
pub fn down(a: DownArgs) -> ExitCode {
    match cleanup::down(a.force) {
        Ok(d) => {
            println!(
                "removed {} network namespaces, {} links, {} cgroup directories",
                d.removed.netns.len(),
                d.removed.links.len(),
                d.removed.cgroups.len()
            );
            for o in &d.live {
                println!("left system {} alone: it is up (supervisor pid {}); stop it, or use --force", o.system, o.pid);
            }
            for u in &d.uplinks {
                println!("{u}");
            }
            for m in &d.state_mounts {
                println!("unmounted the state directory {} (its image is kept)", m.display());
            }
            if !d.host_settings.is_empty() {
                println!("gave the host back {} settings partita had changed (preemption, interrupts, kernel work)", d.host_settings.len());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("partita down: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Args)]
pub struct StatusArgs {
    /// Print each system's state file as one JSON array (what `partita web`'s API serves), nothing else.
    #[arg(long)]
    pub json: bool,
}

pub fn status(a: StatusArgs) -> ExitCode {
    let states = read_states(Path::new(STATE_DIR));
    if a.json {
        let all: Vec<&serde_json::Value> = states.iter().map(|(_, s)| s).collect();
        println!("{}", serde_json::to_string_pretty(&all).unwrap_or_else(|_| "[]".into()));
        return ExitCode::SUCCESS;
    }
    if states.is_empty() {
        println!("no system is up (no state under {STATE_DIR})");
    }
    for (path, state) in states {
        let pid = state["supervisor_pid"].as_i64().unwrap_or(0) as i32;
        let alive = partita_os::process::is_alive(pid);
        println!(
            "system {} ({}; {}): freezing by {}, frames run {}",
            state["system"].as_str().unwrap_or("?"),
            path.display(),
            if alive { "supervisor running" } else { "supervisor gone: run `partita down`" },
            state["freeze_backend"].as_str().unwrap_or("?"),
            state["frames"]
        );
        for m in state["plans"].as_array().into_iter().flatten() {
            let plans: Vec<&str> = m["plans"].as_array().into_iter().flatten().filter_map(|p| p.as_str()).collect();
            let next = m["next"].as_str().map_or(String::new(), |n| format!(", switching to {n}"));
            println!("  module {}: plan {} (of {}){next}, {} switches", m["module"].as_str().unwrap_or("?"), m["plan"].as_str().unwrap_or("?"), plans.join(", "), m["switches"]);
        }
        println!("  {:<24} {:>8}  {:<11} {:<34}", "partition", "pid", "mode", "windows: frozen inside / ran outside");
        for p in state["partitions"].as_array().into_iter().flatten() {
            let pid = p["pid"].as_i64().map_or("-".to_string(), |p| p.to_string());
            let mode = p["mode"].as_str().unwrap_or("-");
            let w = &p["windows"];
            let windows = if w.is_object() {
                format!("{} of {} samples / {} of {} spans ({} µs)", w["missed"], w["in_window"], w["ran_outside"], w["spans"], w["outside_us"])
            } else {
                "- (not planned)".to_string()
            };
            println!("  {:<24} {:>8}  {mode:<11} {windows}", p["partition"].as_str().unwrap_or("?"), pid);
        }
    }
    if let Some(r) = partita_supervisor::host_tuning::current() {
        let holders: Vec<String> = r.holders.iter().map(|h| format!("{} (pid {})", h.system, h.pid)).collect();
        println!("host settings changed by partita, held by {}: {}", holders.join(", "), if r.applied.is_empty() { "none".into() } else { r.applied.join("; ") });
    }
    for (_, o) in registry::owners() {
        let state = if o.alive() { "up" } else { "supervisor gone: run `partita down`" };
        println!("system {}: {state} (supervisor pid {}, state in {})", o.system, o.pid, o.state_dir.display());
    }
    match cleanup::find(None) {
        Ok(left) if !left.is_empty() => println!(
            "on this machine: {} partita network namespaces, {} links, {} cgroup directories",
            left.netns.len(),
            left.links.len(),
            left.cgroups.len()
        ),
        Ok(_) => {}
        Err(e) => eprintln!("partita status: {e}"),
    }
    ExitCode::SUCCESS
}


#[derive(Args)]
pub struct IsolationBenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand)]
enum BenchWhat {
    /// Freeze/thaw a spinning partition N times with each backend (controller on CPU 0, partition on CPU 1).
    Freeze {
        #[arg(default_value_t = 2000)]
        iterations: u32,
        /// Also freeze a VM partition: a QEMU guest (under this acceleration: tcg or kvm) running a shell loop,
        /// with the cgroup v2 freezer, after the process rows.
        #[arg(long, value_name = "ACCEL")]
        vm: Option<String>,
    },
    /// Window-start lateness while a neighbour partition is idle, and while it is in a crash loop (phases
    /// alternate); the ratio of the p99s.
    CrashLoop {
        #[arg(long, default_value_t = 1)]
        cpu: usize,
        /// Seconds per phase.
        #[arg(long, default_value_t = 5.0)]
        seconds: f64,
        /// Idle and crashing phases, each.
        #[arg(long, default_value_t = 2)]
        rounds: u32,
        /// Freezing backend (default: the best this machine has).
        #[arg(long)]
        backend: Option<String>,
    },
    /// The reference frame (800 + 700 µs windows, 1500 µs) with `partita app probe` in each partition.
    Frame {
        #[arg(default_value_t = 4000)]
        frames: u64,
        #[arg(long, default_value = "cgroup-v2")]
        backend: String,
        #[arg(long, default_value_t = 1)]
        cpu: usize,
    },
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

pub fn isolation_bench(a: IsolationBenchArgs) -> ExitCode {
    match a.what {
        BenchWhat::Freeze { iterations, vm } => {
            let accel = match vm.as_deref() {
                None => None,
                Some("tcg") => Some(partita_vm::Accel::Tcg),
                Some("kvm") => Some(partita_vm::Accel::Kvm),
                Some(other) => {
                    eprintln!("error: --vm {other:?}: give tcg or kvm");
                    return ExitCode::from(2);
                }
            };
            let mut results = freezing::freeze_backends(iterations, 0, 1);
            if let (Ok(r), Some(accel)) = (&mut results, accel) {
                let exe = std::env::current_exe().unwrap_or_else(|_| "partita".into());
                let work = std::path::Path::new(STATE_DIR).join(format!(".freeze-vm-{}", std::process::id()));
                let vm = freezing::freeze_vm(iterations, 0, 1, &exe, accel, &work);
                let _ = std::fs::remove_dir_all(&work);
                match vm {
                    Ok(v) => r.extend(v),
                    Err(e) => {
                        eprintln!("partita isolation-bench freeze --vm: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            match results {
                Ok(results) => {
                    for r in results {
                        println!(
                            "{:<11} {:<14} n={}  freeze call p50/p99/max {}/{}/{} µs  freeze→stopped {}/{}/{} µs  thaw call {}/{}/{} µs",
                            r.backend,
                            r.spinning,
                            r.iterations,
                            us(r.freeze_call.p50_ns),
                            us(r.freeze_call.p99_ns),
                            us(r.freeze_call.max_ns),
                            us(r.freeze_to_stopped.p50_ns),
                            us(r.freeze_to_stopped.p99_ns),
                            us(r.freeze_to_stopped.max_ns),
                            us(r.thaw_call.p50_ns),
                            us(r.thaw_call.p99_ns),
                            us(r.thaw_call.max_ns),
                        );
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("partita isolation-bench freeze: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        BenchWhat::CrashLoop { cpu, seconds, rounds, backend } => {
            if !(seconds > 0.0 && seconds.is_finite()) || rounds == 0 {
                eprintln!("error: --seconds must be a positive number and --rounds at least 1");
                return ExitCode::from(2);
            }
            let backend = match backend.as_deref().map(FreezeBackend::parse) {
                Some(None) => {
                    eprintln!("error: unknown backend; use cgroup-v2, v1-freezer or signals");
                    return ExitCode::from(2);
                }
                Some(b) => b,
                None => None,
            };
            partita_os::signal::install_stop_signals();
            match freezing::crash_loop(cpu, seconds, rounds, backend, Path::new(STATE_DIR)) {
                Ok(r) => {
                    println!("window-start lateness on CPU {}, a 700 + 800 µs plan, {} rounds of {} s per phase:", r.cpu, r.rounds, r.phase_seconds);
                    println!("| neighbour | window starts | p50 µs | p99 µs | max µs | restarts |");
                    println!("|---|---:|---:|---:|---:|---:|");
                    for (what, s, restarts) in [("idle", r.idle, 0), ("crash loop", r.crashing, r.restarts)] {
                        println!("| {what} | {} | {} | {} | {} | {restarts} |", s.count, us(s.p50_ns), us(s.p99_ns), us(s.max_ns));
                    }
                    println!("crash loop / idle, p99: {:.2}", r.p99_ratio);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("partita isolation-bench crash-loop: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        BenchWhat::Frame { frames, backend, cpu } => {
            let Some(backend) = FreezeBackend::parse(&backend) else {
                eprintln!("unknown backend {backend:?}: cgroup-v2, v1-freezer or signals");
                return ExitCode::from(2);
            };
            let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "partita".into());
            let dir = std::env::temp_dir().join(format!("partita-frame-{}", std::process::id()));
            if let Err(e) = std::fs::create_dir_all(&dir) {
                eprintln!("{}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
            let r = freezing::reference_frame(frames, cpu, backend, (&exe, &["app".to_string(), "probe".to_string()]), &dir);
            let _ = std::fs::remove_dir_all(&dir);
            match r {
                Ok(r) => {
                    println!(
                        "{} frames of 1500 µs (800+700) on CPU {}, backend {}, SCHED_FIFO {}: window-start lateness p50/p99/max {}/{}/{} µs, \
                         switch cost p50/p99/max {}/{}/{} µs, probe ran {:.1} ms, outside planned windows {:.4}% ({} µs), outside actual windows {:.4}%, missed boundaries {}",
                        r.frames,
                        r.cpu,
                        r.backend,
                        r.realtime,
                        us(r.window_start_lateness.p50_ns),
                        us(r.window_start_lateness.p99_ns),
                        us(r.window_start_lateness.max_ns),
                        us(r.switch_cost.p50_ns),
                        us(r.switch_cost.p99_ns),
                        us(r.switch_cost.max_ns),
                        r.probe_run_ns as f64 / 1e6,
                        100.0 * r.probe_outside_plan_ns as f64 / r.probe_run_ns.max(1) as f64,
                        us(r.probe_outside_plan_ns),
                        100.0 * r.probe_outside_actual_ns as f64 / r.probe_run_ns.max(1) as f64,
                        r.missed_boundaries,
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("partita isolation-bench frame: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

#[derive(Args)]
pub struct UpArgs {
    /// The system file (default: the built-in paper-001 system, examples/video-surveillance.toml).
    pub system: Option<PathBuf>,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Write every executed window start (planned vs actual, JSON lines) to this file, and a picture of six
    /// frames beside it (same name, .svg).
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Write the run as a trace that Perfetto (ui.perfetto.dev) and chrome://tracing open (Chrome trace-event
    /// JSON, streamed while the system runs): per CPU its executed windows (one slice per window, named by its
    /// partition, from its switch to the next) and its planned ones, window-start lateness as a counter, plan
    /// switches and the event log's events as instants. Times are CLOCK_MONOTONIC µs. About 0.7 MB per second
    /// per CPU of a 1500 µs two-window plan (docs/observability.md, "Traces").
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Trace each plan's CPU in the kernel (ftrace: scheduler, interrupts, wake-ups) and explain every window
    /// start later than 1 ms: a `stall` event in the event log, and with --trace the kernel's events around it
    /// on the CPU's kernel track.
    #[arg(long)]
    pub trace_stalls: bool,
    /// After the system is down, run cyclictest (SCHED_FIFO at the executors' priority, 1 ms interval) on each
    /// plan's CPU for as long as the run lasted (at most 60 s, at least 5 s), and print its wake-up latency
    /// beside the executor's window-start lateness: how far the executor is from the machine's own floor.
    #[arg(long)]
    pub compare_cyclictest: bool,
    /// Of a system spanning several hosts, bring up the part that runs on this one (system `<name>.<host>`).
    #[arg(long, value_name = "NAME")]
    pub host: Option<String>,
}

/// Builds the system, runs it until the duration, Ctrl-C or SIGTERM, then tears everything down.
pub fn up(a: UpArgs) -> ExitCode {
    if let Some(d) = a.duration {
        if !(d > 0.0 && d.is_finite()) {
            eprintln!("error: --duration {d}: give a positive number of seconds");
            return ExitCode::from(2);
        }
    }
    let system = match &a.system {
        Some(p) => partita_system::load(p),
        None => partita_system::builtin_default(),
    };
    let system = match system {
        Ok(s) => s,
        Err(errors) => {
            eprint!("{errors}");
            return ExitCode::from(2);
        }
    };
    let system = match partita_system::uplink::for_this_machine(system, a.host.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("partita up: {e}");
            return ExitCode::from(2);
        }
    };
    let held = partita_supervisor::uplink::held_by_others(&system);
    if !held.is_empty() {
        eprintln!("partita up: {}: {} (nothing was created)", system.source, held.join("; "));
        return ExitCode::from(2);
    }
    // The trace file is created before anything of the system is: a path that cannot be written builds nothing.
    let trace = match a.trace.as_deref().map(partita_supervisor::trace::TraceWriter::create).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("partita up: --trace: {e}; give a file in an existing directory this user can write (nothing was created)");
            return ExitCode::from(2);
        }
    };
    partita_supervisor::supervisor::install_stop_signals();
    let mut sup = match partita_supervisor::supervisor::Supervisor::up(&system, &UpOptions::new(STATE_DIR)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("partita up: {e} (nothing was left behind)");
            if let (Some(t), Some(path)) = (trace, &a.trace) {
                drop(t);
                let _ = std::fs::remove_file(path);
            }
            return ExitCode::FAILURE;
        }
    };
    let trace = trace.map(|t| {
        let outcome = t.outcome();
        sup.trace_to(t);
        outcome
    });
    if a.trace_stalls {
        if let Err(e) = sup.trace_stalls() {
            eprintln!("partita up: --trace-stalls: {e} (the system goes down again)");
            let _ = sup.run(Some(std::time::Duration::ZERO), None);
            return ExitCode::FAILURE;
        }
    }
    eprintln!(
        "partita up: system {} is up ({} modules, {} native nodes); Ctrl-C stops it",
        system.name,
        system.modules.len(),
        system.nodes.len()
    );
    let ran = std::time::Instant::now();
    let logs = sup.run(a.duration.map(std::time::Duration::from_secs_f64), None);
    // The trace was closed as the system went down, whether or not the teardown then failed.
    let mut trace_failed = false;
    if let Some(summary) = trace.and_then(|o| o.lock().ok().and_then(|s| s.clone())) {
        let seconds = summary.end_ns.saturating_sub(summary.start_ns) as f64 / 1e9;
        match &summary.error {
            Some(e) => {
                eprintln!("partita up: --trace: {e} (the trace is incomplete)");
                trace_failed = true;
            }
            None => eprintln!(
                "wrote {}: {} events, {} window slices, {} health events, {} window records lost, {} bytes ({:.0} bytes/s)",
                summary.path.display(),
                summary.events,
                summary.windows,
                summary.health_events,
                summary.lost_records,
                summary.bytes,
                summary.bytes as f64 / seconds.max(1e-9)
            ),
        }
    }
    let logs = match logs {
        Ok(l) => l,
        Err(e) => {
            eprintln!("partita up: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cpus: Vec<usize> = system.modules.iter().flat_map(|m| m.plans.iter().map(|p| p.cpu)).collect();
    for (i, log) in logs.iter().enumerate() {
        let mut late: Vec<u64> = log.starts.iter().map(|s| s.lateness_ns()).collect();
        late.sort_unstable();
        if let (Some(p50), Some(max)) = (late.get(late.len() / 2), late.last()) {
            let p99 = late[(late.len() * 99 / 100).min(late.len() - 1)];
            eprintln!(
                "plan {i}: {} window starts, lateness p50/p99/max {:.1}/{:.1}/{:.1} µs",
                late.len(),
                *p50 as f64 / 1e3,
                p99 as f64 / 1e3,
                *max as f64 / 1e3
            );
            let ahead = log.freezes_ahead_done + log.freezes_ahead_overran;
            if ahead > 0 {
                eprintln!(
                    "plan {i}: freeze_ahead: {} of {ahead} partitions frozen ahead had stopped when the next window started ({} still stopping)",
                    log.freezes_ahead_done, log.freezes_ahead_overran
                );
            }
            if a.compare_cyclictest && !partita_supervisor::supervisor::stop_requested() {
                let Some(&cpu) = cpus.get(i) else { continue };
                let cfg = partita_lab::cyclictest::CyclicConfig {
                    cpu,
                    priority: partita_system::EXECUTOR_PRIORITY,
                    interval_us: 1000,
                    duration: ran.elapsed().clamp(std::time::Duration::from_secs(5), std::time::Duration::from_secs(60)),
                };
                eprintln!("plan {i}: cyclictest on CPU {cpu} for {} s…", cfg.duration.as_secs());
                match partita_lab::cyclictest::run(&cfg) {
                    Ok(c) => eprintln!(
                        "plan {i}: cyclictest on CPU {cpu} (SCHED_FIFO {}, 1 ms interval, after the run): {} wake-ups, latency p50/p99/max {:.1}/{:.1}/{:.1} µs; executor p99 / cyclictest p99 = {:.2}",
                        cfg.priority,
                        c.samples,
                        c.p50_us,
                        c.p99_us,
                        c.max_us,
                        p99 as f64 / 1e3 / c.p99_us.max(1.0)
                    ),
                    Err(e) => {
                        eprintln!("partita up: --compare-cyclictest: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
        }
    }
    if let Some(t) = &a.timeline {
        if let Err(e) = partita_supervisor::supervisor::write_timeline(t, &logs) {
            eprintln!("partita up: {e}");
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", t.display());
        let svg = t.with_extension("svg");
        match partita_supervisor::supervisor::write_timeline_svg(&svg, &logs, 6) {
            Ok(()) => eprintln!("wrote {}", svg.display()),
            Err(e) => {
                eprintln!("partita up: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if trace_failed {
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
