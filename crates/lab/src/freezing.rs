//! Measurements of the temporal-isolation mechanisms on the machine at hand (timing goals live here, not in
//! tests): the cost and precision of each freezing backend, and the 1500 µs reference frame run by the plan
//! executor with a probe in each partition.
use partita_system::spec::{HealthSpec, ModuleSpec, PartitionSpec, PlanSpec, SystemSpec};
use partita_system::HostNames;
use partita_supervisor::cgroup::{Layout, Limits, PartitionCgroup};
use partita_supervisor::clock::monotonic_ns;
use partita_supervisor::executor::{Executor, ExecutorConfig, Schedule, Summary, Window};
use partita_supervisor::freeze::{FreezeBackend, Freezer};
use partita_supervisor::launch::{launch, try_wait, LaunchSpec};
use partita_supervisor::error::SupervisorError;

/// Why a freezing benchmark could not measure.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Supervisor(#[from] SupervisorError),
    /// The QEMU guest could not be made.
    #[error("the guest: {0}")]
    Guest(String),
    /// The spinner never said it was ready.
    #[error("{what} never became ready: see {log}")]
    NotReady { what: &'static str, log: std::path::PathBuf },
    /// The probe of the reference frame did not end.
    #[error("probe did not end")]
    ProbeDidNotEnd,
    /// The benchmark's own system did not validate.
    #[error("{0}")]
    System(partita_system::Errors),
    /// One of the benchmark's threads panicked.
    #[error("the benchmark's {0} thread panicked")]
    Panicked(&'static str),
}

type Result<T, E = BenchError> = std::result::Result<T, E>;
use partita_os::{process, sched};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Serialize)]
pub struct FreezeBenchResult {
    pub backend: &'static str,
    /// What was frozen: a shell loop, or a QEMU guest running one.
    pub spinning: &'static str,
    pub iterations: u32,
    /// Time to issue the freeze (the write, or the signals).
    pub freeze_call: Summary,
    /// From the start of the freeze call until every process of the partition is seen stopped.
    pub freeze_to_stopped: Summary,
    /// Time to issue the thaw.
    pub thaw_call: Summary,
}

/// Pins the measuring thread (a CPU that cannot be had is an error: the figures would mean something else)
/// and asks for SCHED_FIFO (without the privilege the benchmark runs under the normal policy, as before).
fn pin_and_fifo(cpu: usize, priority: i32) -> Result<()> {
    sched::pin_current_thread(cpu).map_err(|source| SupervisorError::Sched { context: "freezing benchmark", source })?;
    let _ = sched::set_current_thread_fifo(priority);
    Ok(())
}

fn spinner_spec(partition: &str, cg: &PartitionCgroup, program: &str, args: Vec<String>) -> LaunchSpec {
    LaunchSpec {
        partition: partition.into(),
        program: program.into(),
        args,
        env: vec![],
        cgroup_procs: cg.procs_files(),
        netns: None,
        environment: None,
        output: None,
        fifo_priority: None,
        confine: None,
        pass_fds: Vec::new(),
    }
}

/// Freezes and thaws a spinning process `iterations` times with each backend. The measuring thread runs at
/// SCHED_FIFO on `control_cpu`, the spinner on `partition_cpu` (another CPU, so "stopped" is observed, not
/// implied by preemption).
pub fn freeze_backends(iterations: u32, control_cpu: usize, partition_cpu: usize) -> Result<Vec<FreezeBenchResult>> {
    let spinner = Spinner { what: "a shell loop", program: "sh".into(), args: vec!["-c".into(), "while :; do :; done".into()], ready: None };
    freeze_spinning(iterations, control_cpu, partition_cpu, &FreezeBackend::ALL, spinner)
}

/// What spins in the partition a freezing benchmark freezes.
pub struct Spinner {
    pub what: &'static str,
    pub program: String,
    pub args: Vec<String>,
    /// Wait until this file holds this text (a guest's start marker) before measuring.
    pub ready: Option<(std::path::PathBuf, String)>,
}

/// [`freeze_backends`] for the cgroup v2 freezer with a QEMU guest (under `accel`) spinning a shell loop:
/// how long a VM partition's threads take to stop once frozen. `partita` is the binary whose runner starts QEMU.
pub fn freeze_vm(iterations: u32, control_cpu: usize, partition_cpu: usize, partita: &std::path::Path, accel: partita_vm::Accel, workdir: &std::path::Path) -> Result<Vec<FreezeBenchResult>> {
    let invalid = |e: &dyn std::fmt::Display| BenchError::Guest(e.to_string());
    let cache = partita_vm::image::cache_dir();
    let mut spec = partita_vm::BaseSpec::new(&cache).map_err(|e| invalid(&e))?;
    spec.partita = partita_env::programs::guest_binary(partita);
    let base = partita_vm::prepare_base(&spec).map_err(|e| invalid(&e))?;
    let env = partita_env::PartitionEnv { partition: "spin".into(), module: "bench".into(), domain: 0, external_domain: None, uplink_domain: None, router_file: None, cyclonedds_uri: String::new(), fastdds_profile: None, state_dir: None, ports: Vec::new() };
    let launch_spec = partita_vm::LaunchSpec { env, extra_env: Vec::new(), nics: Vec::new(), argv: vec!["sh".into(), "-c".into(), "while :; do :; done".into()], programs: Vec::new(), router_file: None };
    std::fs::create_dir_all(workdir).map_err(partita_supervisor::error::path_err("mkdir", workdir))?;
    let archive = workdir.join("spin.cpio");
    launch_spec.write_archive(&archive).map_err(|e| invalid(&e))?;
    let mut run = partita_vm::RunConfig::new(base.kernel.image.clone(), vec![base.path.clone(), archive]);
    run.hardware = partita_vm::Hardware { accel, memory_mib: 160, ..partita_vm::Hardware::default() };
    let console = workdir.join("spin.console");
    let _ = std::fs::remove_file(&console);
    let spinner = Spinner { what: "a QEMU guest", program: partita.display().to_string(), args: run.runner_args(), ready: Some((console, partita_vm::init::START_MARKER.into())) };
    freeze_spinning(iterations, control_cpu, partition_cpu, &[FreezeBackend::CgroupV2], spinner)
}

fn freeze_spinning(iterations: u32, control_cpu: usize, partition_cpu: usize, backends: &[FreezeBackend], spinner: Spinner) -> Result<Vec<FreezeBenchResult>> {
    let layout = Layout::detect()?;
    let system = format!("bench{}", std::process::id());
    let backends = backends.to_vec();
    let handle = std::thread::spawn(move || -> Result<Vec<FreezeBenchResult>> {
        let mut results = Vec::new();
        pin_and_fifo(control_cpu, 80)?;
        for backend in backends {
            let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup("spin"), &Limits { cpus: Some(partition_cpu.to_string()), ..Limits::default() })?;
            let freezer = match Freezer::new(&cg, backend) {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(target: "partita::supervisor::bench", "{}: unavailable ({e})", backend.name());
                    continue;
                }
            };
            let mut spec = spinner_spec("spin", &cg, &spinner.program, spinner.args.clone());
            spec.output = spinner.ready.as_ref().map(|(f, _)| partita_supervisor::partition_log::PartitionLog::new(f.clone(), 1 << 20));
            let pid = launch(&spec)?.pid;
            std::thread::sleep(Duration::from_millis(50));
            if let Some((file, text)) = &spinner.ready {
                let deadline = std::time::Instant::now() + Duration::from_secs(120);
                while !std::fs::read_to_string(file).unwrap_or_default().contains(text.as_str()) {
                    if std::time::Instant::now() > deadline || try_wait(pid)?.is_some() {
                        cg.kill_all()?;
                        return Err(BenchError::NotReady { what: spinner.what, log: file.clone() });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                // Let the guest settle into its loop.
                std::thread::sleep(Duration::from_millis(500));
            }
            let (mut call, mut stopped, mut thaw) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..iterations {
                let t0 = monotonic_ns();
                freezer.freeze()?;
                let t1 = monotonic_ns();
                freezer.wait_frozen(Duration::from_secs(1))?;
                let t2 = monotonic_ns();
                freezer.thaw()?;
                let t3 = monotonic_ns();
                call.push(t1 - t0);
                stopped.push(t2 - t0);
                thaw.push(t3 - t2);
                std::thread::sleep(Duration::from_micros(500));
            }
            cg.kill_all()?;
            let _ = partita_supervisor::launch::wait_blocking(pid);
            drop(cg);
            results.push(FreezeBenchResult {
                backend: backend.name(),
                spinning: spinner.what,
                iterations,
                freeze_call: Summary::of(&mut call),
                freeze_to_stopped: Summary::of(&mut stopped),
                thaw_call: Summary::of(&mut thaw),
            });
        }
        Ok(results)
    });
    handle.join().map_err(|_| BenchError::Panicked("measuring"))?
}

#[derive(Debug, Clone, Serialize)]
pub struct FrameBenchResult {
    pub backend: &'static str,
    pub frames: u64,
    pub cpu: usize,
    pub realtime: bool,
    pub window_start_lateness: Summary,
    pub switch_cost: Summary,
    /// Probe execution time inside the measured span, all partitions.
    pub probe_run_ns: u64,
    /// Of which outside the partition's planned windows.
    pub probe_outside_plan_ns: u64,
    /// Of which outside [thaw issued, next freeze issued + its cost] as the executor logged them.
    pub probe_outside_actual_ns: u64,
    pub switch_errors: u64,
    pub missed_boundaries: u64,
}

/// Runs the reference plan (windows of 800 and 700 µs in a 1500 µs frame) for `frames` frames, with
/// partitions and executor on `cpu`, a probe in each partition (`probe` is the program and the arguments
/// before `OUTPUT DURATION_MS`).
pub fn reference_frame(frames: u64, cpu: usize, backend: FreezeBackend, probe: (&str, &[String]), workdir: &std::path::Path) -> Result<FrameBenchResult> {
    let layout = Layout::detect()?;
    let system = format!("frame{}", std::process::id());
    let limits = Limits { cpus: Some(cpu.to_string()), ..Limits::default() };
    let names = ["routing", "recorder"];
    let durations = [800u64, 700];
    let mut cgs = Vec::new();
    let mut freezers = Vec::new();
    for n in names {
        let cg = PartitionCgroup::create(&layout, &HostNames::new(&system).cgroup(n), &limits)?;
        let f = Freezer::new(&cg, backend)?;
        f.freeze()?;
        freezers.push(f);
        cgs.push(cg);
    }
    let run_ms = frames * 1500 / 1000 + 1000;
    let mut pids = Vec::new();
    let mut outputs = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let out = workdir.join(format!("probe-{n}.txt"));
        let mut args: Vec<String> = probe.1.to_vec();
        args.push(out.display().to_string());
        args.push(run_ms.to_string());
        pids.push(launch(&spinner_spec(n, &cgs[i], probe.0, args))?.pid);
        outputs.push(out);
    }
    let schedule = Schedule::new(Duration::from_micros(1500), vec![
        Window { partition: 0, offset: Duration::ZERO, duration: Duration::from_micros(durations[0]) },
        Window { partition: 1, offset: Duration::from_micros(durations[0]), duration: Duration::from_micros(durations[1]) },
    ])?;
    let config = ExecutorConfig { cpu: Some(cpu), priority: Some(90), frames: Some(frames), log_capacity: (frames * 2) as usize, require_realtime: false };
    let log = Executor::start(schedule, freezers, config)?.join()?;
    // Let the probes finish (they stop by their own clock) and write their files.
    for cg in &cgs {
        if let Some(d) = cg.v2_dir() {
            let _ = std::fs::write(d.join("cgroup.freeze"), "0");
        }
        if let Some(d) = cg.v1_freezer_dir() {
            let _ = std::fs::write(d.join("freezer.state"), "THAWED");
        }
        for p in cg.pids()? {
            // A pid from the benchmark's own cgroup; one that has ended meanwhile needs no SIGCONT.
            let _ = process::send_signal(p, libc::SIGCONT);
        }
    }
    for pid in &pids {
        let deadline = std::time::Instant::now() + Duration::from_millis(run_ms + 10_000);
        while try_wait(*pid)?.is_none() {
            if std::time::Instant::now() > deadline {
                return Err(BenchError::ProbeDidNotEnd);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    drop(cgs);
    let starts: Vec<_> = log.starts.iter().copied().collect();
    let span_start = starts.first().map(|s| s.planned_ns).unwrap_or(0);
    let span_end = starts.last().map(|s| s.planned_ns + durations[s.partition] * 1000).unwrap_or(0);
    let (mut run, mut out_plan, mut out_actual) = (0u64, 0u64, 0u64);
    for (p, out) in outputs.iter().enumerate() {
        let runs: Vec<(u64, u64)> = crate::probe::read_intervals(out)?
            .into_iter()
            .filter_map(|(a, b)| {
                let (a, b) = (a.max(span_start), b.min(span_end));
                (a < b).then_some((a, b))
            })
            .collect();
        let planned: Vec<(u64, u64)> =
            starts.iter().filter(|s| s.partition == p).map(|s| (s.planned_ns, s.planned_ns + durations[p] * 1000)).collect();
        // Actual: from the start of the thaw call to the end of the next boundary's freeze call.
        let mut actual = Vec::new();
        for (k, s) in starts.iter().enumerate() {
            if s.partition == p {
                let end = starts.get(k + 1).map(|n| n.switched_ns).unwrap_or(span_end);
                actual.push((s.woke_ns, end));
            }
        }
        run += runs.iter().map(|(a, b)| b - a).sum::<u64>();
        out_plan += crate::probe::time_outside(&runs, &planned);
        out_actual += crate::probe::time_outside(&runs, &actual);
    }
    Ok(FrameBenchResult {
        backend: backend.name(),
        frames,
        cpu,
        realtime: log.realtime,
        window_start_lateness: log.lateness(),
        switch_cost: log.switch_cost(),
        probe_run_ns: run,
        probe_outside_plan_ns: out_plan,
        probe_outside_actual_ns: out_actual,
        switch_errors: log.switch_errors,
        missed_boundaries: log.missed_boundaries,
    })
}

/// Window-start lateness of a plan while a neighbour partition is idle and while it is in a crash loop.
#[derive(Debug, Clone, Serialize)]
pub struct CrashLoopResult {
    pub cpu: usize,
    /// Seconds per phase; the phases alternate idle, crashing, idle, crashing…
    pub phase_seconds: f64,
    pub rounds: u32,
    pub idle: Summary,
    pub crashing: Summary,
    /// Restarts of the neighbour in the crashing phases.
    pub restarts: u64,
    /// crashing p99 / idle p99.
    pub p99_ratio: f64,
}

/// Runs a 700 + 800 µs plan on `cpu`: a spinning partition, and a neighbour that sleeps in the idle phases and
/// exits as soon as it starts in the crashing ones (restart policy: 1000 restarts within 1 s, the shortest
/// back-off, 10 ms, so it restarts as often as `check` lets a system file ask). Phases of `phase_seconds`
/// alternate `rounds` times each; every window start of the plan is assigned to the phase it fell in.
pub fn crash_loop(cpu: usize, phase_seconds: f64, rounds: u32, backend: Option<FreezeBackend>, state_root: &std::path::Path) -> Result<CrashLoopResult> {
    let name = format!("crashloop{}", std::process::id() % 100_000);
    let us = partita_system::Duration::from_micros;
    let spec = SystemSpec::new(&name).module(
        ModuleSpec::new("m")
            .cpus([cpu])
            .partition(PartitionSpec::new("steady", ["sh", "-c", "while :; do :; done"]))
            .partition(
                PartitionSpec::new("neighbour", ["sh", "-c", "if [ -e \"$PARTITA_STATE_DIR/crash\" ]; then exit 1; fi; exec sleep 3600"])
                    .binds(["sleep"])
                    .health(HealthSpec::restart().max_restarts(1000).window(partita_system::Duration::from_millis(1000)).backoff(partita_system::Duration::from_millis(10))),
            )
            .plan(PlanSpec::new(cpu, us(1500)).window("neighbour", us(0), us(700)).window("steady", us(700), us(800))),
    );
    let system = spec.build(&partita_system::Host::this_machine(), "<crash-loop benchmark>").map_err(BenchError::System)?;
    let state = system.partitions().find(|(_, p)| p.name == "neighbour").and_then(|(_, p)| p.tree.confinement.clone()).map(|c| c.state_dir).expect("a partition is confined");
    let marker = state.join("crash");
    let sup = partita_supervisor::Supervisor::up(&system, &partita_supervisor::UpOptions { backend, ..partita_supervisor::UpOptions::new(state_root) })?;
    let events = sup.events().clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Phase boundaries in CLOCK_MONOTONIC ns: (start, end, crashing).
    let driver = {
        let (stop, events, marker) = (stop.clone(), events.clone(), marker.clone());
        std::thread::spawn(move || {
            let mut phases = Vec::new();
            std::thread::sleep(Duration::from_millis(500));
            for _ in 0..rounds {
                for crashing in [false, true] {
                    let start = monotonic_ns();
                    if crashing {
                        let _ = std::fs::write(&marker, b"");
                        // End the sleeping neighbour: every start from now on exits at once.
                        if let Some(pid) = events.events().iter().rev().find(|e| e.partition == "neighbour" && (e.event == "start" || e.event == "restart")).and_then(|e| e.pid) {
                            let _ = process::send_signal(pid, libc::SIGKILL);
                        }
                    }
                    std::thread::sleep(Duration::from_secs_f64(phase_seconds));
                    if crashing {
                        let _ = std::fs::remove_file(&marker);
                    }
                    phases.push((start, monotonic_ns(), crashing));
                }
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
            phases
        })
    };
    let logs = sup.run(None, Some(stop))?;
    let phases = driver.join().map_err(|_| BenchError::Panicked("driver"))?;
    let _ = std::fs::remove_dir(&state);
    let _ = state.parent().map(std::fs::remove_dir);
    let (mut idle, mut crashing) = (Vec::new(), Vec::new());
    for s in logs.iter().flat_map(|l| l.starts.iter()) {
        if let Some(&(_, _, c)) = phases.iter().find(|(a, b, _)| s.planned_ns >= *a && s.planned_ns < *b) {
            if c { crashing.push(s.lateness_ns()) } else { idle.push(s.lateness_ns()) }
        }
    }
    let restarts = events
        .events()
        .iter()
        .filter(|e| e.partition == "neighbour" && e.event == "restart")
        .filter(|e| phases.iter().any(|(a, b, c)| *c && e.monotonic_ns >= *a && e.monotonic_ns < *b))
        .count() as u64;
    let (idle, crashing) = (Summary::of(&mut idle), Summary::of(&mut crashing));
    let p99_ratio = crashing.p99_ns as f64 / idle.p99_ns.max(1) as f64;
    Ok(CrashLoopResult { cpu, phase_seconds, rounds, idle, crashing, restarts, p99_ratio })
}
