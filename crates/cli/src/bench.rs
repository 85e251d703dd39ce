//! `partita bench …`: the benchmark environment.
//!
//! `partita bench rr` is the request/response benchmark; it starts its server by re-executing this binary as
//! `partita bench rr-server --transport T --size N --server-work US --session S` (a hidden subcommand), reads
//! `READY <iterations-per-µs> <address>` from the server's stdout, and ends the server by pid when done.
//! `partita bench ports` starts its writer the same way, as `partita bench ports-peer …` with the channel ends
//! it inherits named by descriptor number.
use clap::{Args, Subcommand};
use partita_bench::report::{self, Report, Versions};
use partita_bench::rr::{self, RrConfig, ServerConfig, ServerLauncher};
use partita_bench::ports::{self, peer::EndNumbers, PeerLauncher, PortsConfig};
use partita_bench::{parse_size, BenchError, Setup};
use partita_lab::machine;
use partita_os::signal::{install_stop_signals, stop_flag};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    command: BenchCommand,
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Request/response round-trip time between two processes, per transport and payload size.
    Rr(RrArgs),
    /// Paper 001's experiments: Tables 1 and 2, the Fig. 5 sweep, the plan's prediction, the multicore variant.
    Paper(crate::paper::PaperArgs),
    /// The paper's recorder as a VM partition against a process partition and native: response times, window
    /// lateness, freeze/thaw cost, boot time.
    Vm(crate::paper::VmBenchArgs),
    /// Paper 001's NETWORK and PARTITIONED DDS WITH ROUTING rows with the monitor on one host and on another
    /// machine over an uplink (two network namespaces on a wire), in one run.
    Uplink(crate::paper::UplinkBenchArgs),
    /// Paper 003: a DDS client-server exchange with the server native, in a process partition and in a VM
    /// partition, alone and in a plan, against raw UDP; overhead split and deadline shares.
    Virt(crate::studies::VirtArgs),
    /// Paper 004: cyclictest beside stress-ng in the testing profiles TP1–TP6, native, in a process partition
    /// (with and without a plan) and in a VM partition; the paper's statistics, box plots, stability over
    /// time, and a verdict against its Table 1.
    Rt(crate::studies::RtArgs),
    /// Issue 31's fault suite: what a busy partition keeps of its planned time while its neighbour makes the
    /// kernel work (writes, fsync, O_DIRECT, mlock, huge pages, calls over many memory areas, timers, a UDP
    /// flood, fork storms, threads), quiet and fault cells interleaved, without and with the supervisor's
    /// protections, as a process partition and as a VM partition.
    Isolation(crate::studies::IsolationArgs),
    /// Paper 002's DDS Benchmark Environment: Cyclone DDS, Fast DDS, RustDDS, raw UDP and iceoryx2 side by side,
    /// decentralized, federated and centralized, on one node and two, from a test matrix; `dbe report` redraws
    /// Figs. 7–10 from stored results.
    Dbe(crate::dbe::DbeArgs),
    /// The server side of `bench rr` (started by `bench rr` itself).
    #[command(name = "rr-server", hide = true)]
    RrServer(RrServerArgs),
    /// Forwarding throughput and memory of `partita route` under a flood of one topic.
    #[command(name = "router-flood")]
    RouterFlood(RouterFloodArgs),
    /// Routed throughput against direct with Cyclone's ddsperf (reliable, keep-all), per sample size, interleaved
    /// in one run, with each process's CPU per sample, the router's threads and memory (issue 37).
    Router(RouterArgs),
    /// A minimal raw-UDP relay (started by `bench rr --transport udp-relay`).
    #[command(name = "udp-relay", hide = true)]
    UdpRelay(UdpRelayArgs),
    /// ARINC 653 sampling and queuing ports between two processes on two CPUs: one-way latency against iceoryx2
    /// and a bare futex, copy against in-place writes, and a queuing channel's throughput.
    Ports(PortsArgs),
    /// Plan switches (at frame ends and at once) and a partition setting itself idle, under load, checked from
    /// the executor's record and a kernel trace of the plan's CPU.
    Modes(crate::studies::ModesArgs),
    /// What watching costs: the executor's lateness with `partita web`'s page open in Chromium and reloaded
    /// every second, against the page closed, interleaved in one run; the supervisor's and the web server's CPU
    /// time and memory per hour (issue 36).
    Web(crate::studies::WebArgs),
    /// The program of `bench modes`' partitions (started by the supervisor for `bench modes`).
    #[command(name = "modes-peer", hide = true)]
    ModesPeer,
    /// The writing end of `bench ports` (started by `bench ports` itself).
    #[command(name = "ports-peer", hide = true)]
    PortsPeer(PortsPeerArgs),
}

/// How every benchmark measures: the setup of the measured processes and the number of runs per cell.
#[derive(Args)]
pub struct MeasureArgs {
    /// How the measured processes are scheduled.
    #[command(flatten)]
    pub setup: SetupArgs,
    /// Runs of every cell, the compared cells interleaved (A B C A B C …); tables give the medians, the
    /// min–max and the spread over the runs.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub repeat: u32,
}

impl MeasureArgs {
    pub fn setup(&self) -> Result<Setup, BenchError> {
        if self.repeat == 0 {
            return Err(BenchError::BadRepeat);
        }
        self.setup.setup()
    }
}

/// The measurement setup's flags, shared by the benchmarks and `partita soak`.
#[derive(Args)]
pub struct SetupArgs {
    /// Measure under normal scheduling (SCHED_OTHER, memory not locked, idle states as the machine sets them)
    /// instead of the real-time setup (SCHED_FIFO 50, memory locked, /dev/cpu_dma_latency held at 0 µs).
    #[arg(long)]
    pub normal_scheduling: bool,
    /// The real-time setup's SCHED_FIFO priority for the measured processes (1..=89, below the plan
    /// executors' 90) [default: 50].
    #[arg(long, value_name = "PRIO")]
    pub fifo: Option<u8>,
    /// The real-time setup's wake-up latency bound held through /dev/cpu_dma_latency, µs (0 keeps the CPUs out
    /// of idle states) [default: 0].
    #[arg(long, value_name = "US")]
    pub cpu_dma_latency: Option<u32>,
}

impl SetupArgs {
    pub fn setup(&self) -> Result<Setup, BenchError> {
        Ok(Setup::from_options(self.normal_scheduling, self.fifo, self.cpu_dma_latency)?)
    }

    /// Whether any of the flags was given.
    pub fn given(&self) -> bool {
        self.normal_scheduling || self.fifo.is_some() || self.cpu_dma_latency.is_some()
    }
}

#[derive(Args)]
struct RouterFloodArgs {
    /// Payload bytes per sample.
    #[arg(long, default_value = "64")]
    size: String,
    /// How long to flood, in seconds.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Best-effort samples: the writer outruns the router (drops and memory), instead of reliable ones that
    /// hold the writer back (throughput without loss).
    #[arg(long)]
    best_effort: bool,
    /// The router's batch_delay, one flood each, in this order: the default compares a router that sends every
    /// sample on its own ("0s") with its default batching ("100us") in one run.
    #[arg(long, default_value = "0s,100us", value_delimiter = ',')]
    batch_delay: Vec<String>,
    /// Write the results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Args)]
struct RouterArgs {
    /// Sample sizes, comma-separated.
    #[arg(long, default_value = "1KiB,64KiB", value_delimiter = ',')]
    size: Vec<String>,
    /// How long each flood lasts, in seconds (at least 4; the first and last second are left out).
    #[arg(long, default_value_t = 8)]
    seconds: u32,
    /// Floods of every cell, direct and routed interleaved.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// Write the report (report.md) and every run (runs.json) into this folder.
    #[arg(long, default_value = "results/router")]
    out: PathBuf,
    /// The partita binary whose `partita route` forwards (default: this one): to measure another build's router
    /// under the same floods, as docs/router.md's before/after table does.
    #[arg(long)]
    router_program: Option<PathBuf>,
}

#[derive(Args)]
struct UdpRelayArgs {
    #[arg(long)]
    to: String,
}

#[derive(Args)]
struct RrArgs {
    /// Transports, comma-separated: udp (raw UDP), dds (partita-dds, server replying from a listener),
    /// dds-waitset (partita-dds, server on a waitset), udp-relay (UDP through a minimal relay
    /// process), dds-routed (client and server on two domains, `partita route` between them), ddsperf and ddsperf-waitset (Cyclone's ddsperf in its
    /// listener and waitset modes, references). All on a private loopback.
    #[arg(long, value_delimiter = ',', default_value = "udp")]
    transport: Vec<String>,
    /// Payload sizes, comma-separated: 64, 1k, 1KiB, 16KiB, 1M.
    #[arg(long, value_delimiter = ',', default_value = "64")]
    size: Vec<String>,
    /// Measured operations per run of a scenario.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Warm-up operations per run of a scenario, discarded (and counted).
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// Open loop: send requests at this fixed rate (per second); latency counts from the scheduled send time.
    #[arg(long, allow_negative_numbers = true)]
    rate: Option<f64>,
    /// Busy work in the server before each reply, in µs (a calibrated loop).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    server_work: f64,
    /// Spin on non-blocking receives instead of blocking (keeps the CPU out of idle states); only with
    /// --normal-scheduling (a spinning SCHED_FIFO client would keep the run's other processes off its CPU).
    #[arg(long)]
    busy_poll: bool,
    /// Also write every sample of every run (raw-<scenario>-r<repeat>.csv and in results.json).
    #[arg(long)]
    raw: bool,
    /// Folder for the result files (default results/rr-<timestamp>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A reply later than this many milliseconds counts as lost.
    #[arg(long, default_value_t = 1_000)]
    timeout_ms: u64,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Args)]
struct PortsArgs {
    /// Measured messages per latency row.
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    /// Messages before the measured ones of each latency row, and before each throughput row's timed flood,
    /// discarded.
    #[arg(long, default_value_t = 1_000)]
    warmup: u64,
    /// How long each throughput row floods its channel, in seconds.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    seconds: f64,
    /// Message sizes of the throughput rows, comma-separated (64, 1KiB, 64KiB, 1M); the largest is the
    /// throughput channel's maximum message and the size copy and in-place writes are compared at.
    #[arg(long, value_delimiter = ',', default_value = "64,1KiB,64KiB")]
    sizes: Vec<String>,
    /// Message size of the latency rows compared with iceoryx2 and the futex.
    #[arg(long, default_value = "64")]
    latency_size: String,
    /// Depth of the throughput rows' queuing channel.
    #[arg(long, default_value_t = ports::DEFAULT_DEPTH)]
    depth: u64,
    /// Also write every latency sample (raw-<row>.csv and in results.json).
    #[arg(long)]
    raw: bool,
    /// Folder for the result files (default results/ports-<timestamp>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Messages the row under a plan measures (a writer and a reader partition brought up by the supervisor,
    /// the paper's window layout); 0 leaves the row out.
    #[arg(long, default_value_t = 2_000)]
    plan_count: u64,
    #[command(flatten)]
    measure: MeasureArgs,
}

#[derive(Args)]
struct PortsPeerArgs {
    #[arg(long)]
    path: ports::Path,
    #[arg(long)]
    write: ports::Write,
    #[arg(long)]
    size: usize,
    #[arg(long)]
    channel_max: usize,
    #[arg(long)]
    depth: u64,
    #[arg(long)]
    total: u64,
    #[arg(long)]
    seconds: f64,
    #[arg(long)]
    run: String,
    #[arg(long)]
    forward: Option<EndNumbers>,
    #[arg(long)]
    echo: Option<EndNumbers>,
    #[arg(long)]
    shared: Option<i32>,
    #[arg(long)]
    cpu: usize,
    /// The measured SCHED_FIFO priority, which the writer sets for itself.
    #[arg(long)]
    fifo: Option<u8>,
}

#[derive(Args)]
struct RrServerArgs {
    #[arg(long)]
    transport: String,
    #[arg(long)]
    size: usize,
    #[arg(long, default_value_t = 0.0)]
    server_work: f64,
    #[arg(long)]
    session: String,
}

fn fail(e: BenchError) -> ExitCode {
    eprintln!("error: {e}");
    ExitCode::from(if e.is_usage() { 2 } else { 1 })
}

pub fn run(args: BenchArgs) -> ExitCode {
    match args.command {
        BenchCommand::Rr(a) => match run_rr(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        BenchCommand::Paper(a) => crate::paper::paper(a),
        BenchCommand::Vm(a) => crate::paper::vm(a),
        BenchCommand::Uplink(a) => crate::paper::uplink(a),
        BenchCommand::Virt(a) => crate::studies::virt(a),
        BenchCommand::Dbe(a) => crate::dbe::run(a),
        BenchCommand::Rt(a) => crate::studies::rt(a),
        BenchCommand::Isolation(a) => crate::studies::isolation(a),
        BenchCommand::Modes(a) => crate::studies::modes(a),
        BenchCommand::Web(a) => crate::studies::web(a),
        BenchCommand::ModesPeer => crate::studies::modes_peer(),
        BenchCommand::RouterFlood(a) => match run_flood(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        BenchCommand::Router(a) => match run_router(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        BenchCommand::UdpRelay(a) => match partita_bench::hop::run_udp_relay(&a.to) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: udp relay: {e}");
                ExitCode::from(1)
            }
        },
        BenchCommand::Ports(a) => match run_ports(a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        },
        BenchCommand::PortsPeer(a) => {
            install_stop_signals();
            let cfg = ports::peer::PeerConfig {
                scenario: ports::Scenario { path: a.path, write: a.write, size: a.size, channel_max: a.channel_max, depth: a.depth },
                total: a.total,
                seconds: a.seconds,
                run: a.run,
                forward: a.forward,
                echo: a.echo,
                shared: a.shared,
                cpu: a.cpu,
                fifo: a.fifo,
            };
            match ports::peer::run(&cfg, stop_flag()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
        BenchCommand::RrServer(a) => {
            install_stop_signals();
            let cfg = ServerConfig {
                transport: a.transport,
                size: a.size,
                server_work_us: a.server_work,
                session: a.session,
            };
            match rr::run_server(&cfg, stop_flag()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(e),
            }
        }
    }
}

fn run_rr(a: RrArgs) -> Result<(), BenchError> {
    let sizes = a.size.iter().map(|s| parse_size(s)).collect::<Result<Vec<_>, _>>()?;
    let setup = a.measure.setup()?;
    let out = a.out.unwrap_or_else(|| PathBuf::from(format!("results/rr-{}", machine::compact_now())));
    let cfg = RrConfig {
        transports: a.transport.iter().map(|t| t.trim().to_string()).collect(),
        sizes,
        count: a.count,
        warmup: a.warmup,
        rate_hz: a.rate,
        server_work_us: a.server_work,
        busy_poll: a.busy_poll,
        raw: a.raw,
        out: out.clone(),
        timeout_ms: a.timeout_ms,
        setup,
        repeat: a.measure.repeat,
    };
    cfg.validate()?;
    report::prepare_dir(&out)?;
    // Client, server and ddsperf processes see only a loopback interface of their own: Cyclone binds its
    // receive sockets to the wildcard address, and nothing of the benchmark may touch the host's interfaces.
    // This must happen while the process is single-threaded (before the setup, whose latency hold may start
    // idle pollers); the servers inherit the namespace.
    partita_os::sandbox::enter_private_network().map_err(|e| BenchError::Sandbox(e.to_string()))?;
    // Before any other thread or process of the run exists, so that all of them inherit the scheduling class.
    let _setup = cfg.setup.enter()?;
    let program = std::env::current_exe()
        .map_err(|e| BenchError::Server { transport: "any".into(), reason: format!("finding this executable: {e}") })?;
    let launcher = ServerLauncher { program, args: vec!["bench".into(), "rr-server".into()] };
    install_stop_signals();
    let started = machine::now_rfc3339();
    let repeat = cfg.repeat;
    let scenarios = rr::run_all(&cfg, &launcher, stop_flag(), |r| {
        let figure = r
            .stats
            .as_ref()
            .map(|s| format!("p50 {:.3} µs, p99 {:.3} µs", s.p50_us, s.p99_us))
            .or(r.reference.as_ref().map(|s| format!("p50 {:.3} µs, p99 {:.3} µs (ddsperf ×2)", s.p50_us, s.p99_us)))
            .unwrap_or_else(|| "no reply".into());
        eprintln!("{}, run {} of {repeat}: {figure}, {} lost", r.scenario, r.repeat, r.lost);
    })?;
    let applied = if cfg.setup.is_realtime() {
        "entered by bench rr before it started any thread or process: client, servers and forwarders inherit \
         SCHED_FIFO, partita's processes lock their own memory (ddsperf does not), the latency bound is held for \
         the whole run"
    } else {
        "bench rr and every process it starts run under SCHED_OTHER without locking memory; no latency bound is held"
    };
    let report = Report {
        benchmark: "rr".into(),
        unit: "round-trip time, µs".into(),
        clock: "CLOCK_MONOTONIC (std::time::Instant) in the client process".into(),
        machine: machine::Machine::probe(),
        versions: Versions::new(env!("CARGO_PKG_VERSION")),
        setup: cfg.setup.record(applied),
        config: cfg,
        started,
        finished: machine::now_rfc3339(),
        scenarios,
    };
    let files = report::write_all(&out, &report)?;
    println!("{}", report::markdown(&report));
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}

fn run_ports(a: PortsArgs) -> Result<(), BenchError> {
    let sizes = a.sizes.iter().map(|s| parse_size(s)).collect::<Result<Vec<_>, _>>()?;
    let latency_size = parse_size(&a.latency_size)?;
    let setup = a.measure.setup()?;
    let out = a.out.unwrap_or_else(|| PathBuf::from(format!("results/ports-{}", machine::compact_now())));
    let cfg = PortsConfig {
        count: a.count,
        warmup: a.warmup,
        seconds: a.seconds,
        sizes,
        latency_size,
        depth: a.depth,
        raw: a.raw,
        out: out.clone(),
        setup,
        repeat: a.measure.repeat,
        writer_cpu: ports::WRITER_CPU,
        reader_cpu: ports::READER_CPU,
    };
    cfg.validate()?;
    report::prepare_dir(&out)?;
    // No private network namespace, unlike bench rr: the ports and iceoryx2 (its wake-ups are Unix sockets
    // under /tmp) use no network. Before any other thread or process of the run exists, so that the reader
    // thread and every writer inherit the scheduling class.
    let _setup = cfg.setup.enter()?;
    let program = std::env::current_exe()
        .map_err(|e| BenchError::Peer { measurement: "any".into(), reason: format!("cannot be started: finding this executable: {e}") })?;
    let launcher = PeerLauncher { program, args: vec!["bench".into(), "ports-peer".into()] };
    install_stop_signals();
    let started = machine::now_rfc3339();
    let (latency, throughput) = ports::run_all(&cfg, &launcher, stop_flag(), |line| eprintln!("{line}"))?;
    let applied = if cfg.setup.is_realtime() {
        "entered by bench ports before it started any thread or process: the reader thread and every writer process \
         inherit SCHED_FIFO, the writers lock their own memory, the latency bound is held for the whole run"
    } else {
        "the reader thread and every writer process run under SCHED_OTHER without locking memory; no latency bound is held"
    };
    let report = ports::report::PortsReport::new(
        machine::Machine::probe(),
        ports::report::Versions::new(env!("CARGO_PKG_VERSION")),
        cfg.setup.record(applied),
        cfg,
        started,
        machine::now_rfc3339(),
        latency,
        throughput,
    );
    let files = ports::report::write_all(&out, &report)?;
    println!("{}", ports::report::markdown(&report));
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    if a.plan_count > 0 {
        ports_under_plan(&out, a.plan_count)?;
    }
    Ok(())
}

/// The row under a plan: write in the writer partition's window → receive in the reader partition's next one.
fn ports_under_plan(out: &std::path::Path, count: u64) -> Result<(), BenchError> {
    let exe = std::env::current_exe().map_err(|e| BenchError::Peer { measurement: "plan".into(), reason: format!("finding this executable: {e}") })?;
    eprintln!("ports under a plan: a writer and a reader partition, {count} messages…");
    let row = partita_paper::ports_plan::measure(&exe, std::path::Path::new("/run/partita"), ports::READER_CPU, count)
        .map_err(|reason| BenchError::Peer { measurement: "plan".into(), reason })?;
    println!(
        "\nQueuing channel under a plan ({}): a message sent every 20 µs of the writer's window, received by the reader blocked on the channel; its age when the receive returns (CLOCK_MONOTONIC), µs. Both partitions have no network; SCHED_OTHER inside their windows. The bound: the plan's gap from the writer's window start to the reader's next window start, plus the executor's window-start lateness and thaw (p99 of each, this run).\n\n| messages | p50 | p99 | max | the plan's gap | + lateness p99 | + thaw p99 | bound | p99 within it |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|\n| {} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {} |",
        row.plan,
        row.seen,
        row.p50_us,
        row.p99_us,
        row.max_us,
        row.gap_us,
        row.lateness_p99_us,
        row.switch_p99_us,
        row.bound_us,
        if row.p99_us <= row.bound_us { "yes" } else { "no" }
    );
    let path = out.join("plan.json");
    let text = serde_json::to_string_pretty(&row).expect("plain figures");
    std::fs::write(&path, text).map_err(|e| BenchError::Write { path: path.clone(), source: e })?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn run_router(a: RouterArgs) -> Result<(), BenchError> {
    let sizes = a.size.iter().map(|s| parse_size(s)).collect::<Result<Vec<_>, _>>()?;
    if a.seconds < 4 {
        return Err(BenchError::BadSeconds(a.seconds as f64));
    }
    if a.repeat == 0 {
        return Err(BenchError::BadRepeat);
    }
    let program = match a.router_program {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| BenchError::Server { transport: "router".into(), reason: format!("finding this executable: {e}") })?,
    };
    std::fs::create_dir_all(&a.out).map_err(|e| BenchError::Write { path: a.out.clone(), source: e })?;
    partita_os::sandbox::enter_private_network().map_err(|e| BenchError::Sandbox(e.to_string()))?;
    install_stop_signals();
    let mut runs = Vec::new();
    let domain = partita_bench::ddsperf::domain_id();
    for (k, cell) in partita_lab::repeat::interleaved(sizes.len() * 2, a.repeat) {
        if stop_flag().load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let (size, routed) = (sizes[cell / 2], cell % 2 == 1);
        let r = partita_bench::router_throughput::flood(size, a.seconds, k, routed.then_some(program.as_path()), domain)?;
        eprintln!(
            "{} {} B, run {k} of {}: {:.0} samples/s ({:.0} Mb/s), {} received, {} lost; CPU per sample µs: pub {:.2}, sub {:.2}{}",
            r.mode,
            size,
            a.repeat,
            r.samples_per_s,
            r.megabits_per_s,
            r.received,
            r.lost,
            r.pub_cpu_us,
            r.sub_cpu_us,
            r.router_cpu_us.map_or(String::new(), |c| format!(", router {c:.2} ({} threads)", r.router_threads.unwrap_or(0)))
        );
        runs.push(r);
    }
    let report = partita_bench::router_throughput::markdown(&runs, a.seconds);
    print!("{report}");
    let md = a.out.join("report.md");
    std::fs::write(&md, &report).map_err(|e| BenchError::Write { path: md.clone(), source: e })?;
    let js = a.out.join("runs.json");
    std::fs::write(&js, serde_json::to_string_pretty(&runs).expect("plain data serializes")).map_err(|e| BenchError::Write { path: js.clone(), source: e })?;
    eprintln!("wrote {} and {}", md.display(), js.display());
    Ok(())
}

fn run_flood(a: RouterFloodArgs) -> Result<(), BenchError> {
    let size = parse_size(&a.size)?;
    if !(a.seconds > 0.0 && a.seconds.is_finite()) {
        return Err(BenchError::BadSeconds(a.seconds));
    }
    for d in &a.batch_delay {
        partita_bench::flood::check_batch_delay(d)?;
    }
    let setup = a.measure.setup()?;
    let program = std::env::current_exe()
        .map_err(|e| BenchError::Server { transport: "router-flood".into(), reason: format!("finding this executable: {e}") })?;
    // The private network while single-threaded (the setup's latency hold may start idle pollers); then the
    // setup, which writer and reader (this process) and the router inherit, before any of their threads exists.
    partita_os::sandbox::enter_private_network().map_err(|e| BenchError::Sandbox(e.to_string()))?;
    let _setup = setup.enter()?;
    install_stop_signals();
    let repeat = a.measure.repeat;
    let mut runs = Vec::new();
    for (k, i) in partita_lab::repeat::interleaved(a.batch_delay.len(), repeat) {
        let d = &a.batch_delay[i];
        let cfg = partita_bench::flood::FloodConfig { size, seconds: a.seconds, reliable: !a.best_effort, batch_delay: d.clone() };
        let r = partita_bench::flood::run(&cfg, k, &program, stop_flag())?;
        eprintln!(
            "router flood, batch_delay {d}, run {k} of {repeat}: written {:.0}/s, forwarded and received {:.0}/s \
             ({} of {}); {:.1} samples per router batch; router CPU {:.1} µs per sample; router RSS {} KiB at start, \
             {} KiB max, {} KiB at end ({} readings)",
            r.written_per_s,
            r.received_per_s,
            r.received,
            r.written,
            r.samples_per_batch,
            r.router_cpu_us_per_sample,
            r.router_rss_kib_start,
            r.router_rss_kib_max,
            r.router_rss_kib_end,
            r.router_rss_samples
        );
        runs.push(r);
    }
    let applied = if setup.is_realtime() {
        "entered by bench router-flood before it started any thread or process: writer, reader and router run under \
         SCHED_FIFO with their memory locked, the latency bound is held for the whole run"
    } else {
        "writer, reader and router run under SCHED_OTHER without locking memory; no latency bound is held"
    };
    let report = partita_bench::flood::FloodReport::new(setup.record(applied), repeat, &a.batch_delay, runs);
    print!("{}", report.markdown(size, a.seconds, !a.best_effort));
    if let Some(p) = a.json {
        let text = serde_json::to_string_pretty(&report).expect("plain data serializes");
        std::fs::write(&p, text).map_err(|e| BenchError::Write { path: p.clone(), source: e })?;
    }
    Ok(())
}
