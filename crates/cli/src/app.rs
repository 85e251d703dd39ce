//! `partita app …`: the applications that run inside partitions (recorder, monitor, udp-echo, probe, vm, and the
//! hidden fault programs of `bench isolation`).
use clap::{Args, Subcommand, ValueEnum};
use partita_apps::monitor::{self, LoopConfig, MonitorConfig, Progress, Report};
use partita_apps::recorder::{Recorder, RecorderConfig};
use partita_apps::ring::{FsyncPolicy, RingConfig};
use partita_apps::udp;
use partita_dds::DomainConfig;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[derive(Args)]
pub struct AppArgs {
    #[command(subcommand)]
    app: App,
}

#[derive(Subcommand)]
enum App {
    /// The Video_Recorder partition: synthetic cameras recorded into an on-disk ring, frames served over DDS.
    Recorder(RecorderArgs),
    /// A monitoring node: requests frames, measures response times, saves the latest frame.
    Monitor(MonitorArgs),
    /// The raw-UDP answerer of `monitor --udp` (the NETWORK baseline).
    UdpEcho {
        /// Address to answer on (inside partita's namespaces: lo or a V-NIC address).
        #[arg(long, default_value = "127.0.0.1:9500")]
        bind: SocketAddr,
    },
    /// Paper 003's server: answers exchange requests after busy work of the length each asks for (DDS on the
    /// partition's network, or raw UDP with --udp), until SIGINT/SIGTERM.
    ExchangeServer(ExchangeServerArgs),
    /// Paper 003's client: measures the exchange at every size × server work, writes one JSON report.
    ExchangeClient(ExchangeClientArgs),
    /// Spins and records when it actually ran (CLOCK_MONOTONIC intervals, one `start end` line in ns each):
    /// a gap longer than --gap-us between two readings means it was frozen or preempted.
    Probe {
        output: PathBuf,
        duration_ms: u64,
        #[arg(long, default_value_t = 20)]
        gap_us: u64,
    },
    /// A VM partition's program: runs QEMU on inherited tap descriptors, copies the guest's console to stdout,
    /// exits with the guest command's status (193 kernel panic, 194 QEMU failed, 195 boot timeout, 196 guest
    /// set-up failed, 143 stopped by a signal).
    Vm(crate::vm::VmAppArgs),
    /// A fault program of `partita bench isolation` (issue 31): makes the kernel work on the partition's behalf
    /// until --seconds pass or a stop signal. Kinds: sleep (quiet), spin, threads, fork-storm, page-faults,
    /// vma-walk, smaps, big-write, fsync, o-direct, sync, aio, tmpfs-write, thp, mlock, timers, udp-flood
    /// (crates/apps/src/fault.rs says what each makes the kernel do).
    #[command(hide = true)]
    Fault(FaultArgs),
    /// A DDS Benchmark Environment agent of a built-in implementation (cyclone, rustdds, iceoryx2, udp):
    /// the arguments of crates/dbe/src/agent/PROTOCOL.md.
    #[command(name = "dbe-agent", hide = true)]
    DbeAgent {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
}

/// Which of a partition's domains an application joins.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Network {
    /// The inter-module network when the partition has a V-NIC on it (an I/O partition), else the module's.
    Auto,
    Module,
    External,
}

#[derive(Args)]
struct DdsArgs {
    /// Domain id when not under the supervisor (loopback only).
    #[arg(long, default_value_t = 0)]
    domain: u32,
    /// Under the supervisor: which of the partition's networks to join.
    #[arg(long, value_enum, default_value_t = Network::Auto)]
    network: Network,
}

impl DdsArgs {
    fn config(&self) -> Result<DomainConfig, String> {
        let external = || DomainConfig::from_environment_external();
        let module = || DomainConfig::from_environment();
        let chosen = match self.network {
            Network::Auto => external().or_else(module),
            Network::Module => module(),
            Network::External => match external() {
                Some(c) => Some(c),
                None if partita_env::supervised() => {
                    return Err("--network external: this partition has no V-NIC on the inter-module network (it is not the I/O partition)".into())
                }
                None => None,
            },
        };
        match chosen {
            Some(c) => c.map_err(|e| e.to_string()),
            None => Ok(DomainConfig::loopback(self.domain)),
        }
    }
}

#[derive(Args)]
struct RecorderArgs {
    /// Directory of the recording ring (default: `ring` in the partition's state directory,
    /// /var/lib/partita/<system>/<partition>, or ./recording outside the supervisor).
    #[arg(long)]
    ring: Option<PathBuf>,
    /// Bytes for the whole ring (oldest frames are overwritten): e.g. 64MiB.
    #[arg(long, default_value = "32MiB", value_parser = parse_size)]
    ring_size: usize,
    #[arg(long, default_value_t = 8)]
    segments: u32,
    /// When records are flushed to the disk: never, segment, record.
    #[arg(long, default_value = "segment")]
    fsync: FsyncPolicy,
    #[arg(long, default_value_t = 1)]
    cameras: u32,
    #[arg(long, default_value_t = 320)]
    width: u32,
    #[arg(long, default_value_t = 240)]
    height: u32,
    /// Frames per second per camera.
    #[arg(long, default_value_t = 10.0)]
    fps: f64,
    /// Make every reply exactly this many serialized bytes (e.g. 1KiB, 1MiB): the image when it fits,
    /// padding for the rest (the paper's image size).
    #[arg(long, value_parser = parse_size)]
    reply_size: Option<usize>,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    duration: Option<f64>,
    /// Print the counters every second.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    dds: DdsArgs,
}

#[derive(Args)]
struct MonitorArgs {
    /// The monitor's name (the key of its requests); default: the partition's name, or monitor-<pid>.
    #[arg(long)]
    name: Option<String>,
    #[arg(long, default_value_t = 0)]
    camera: u32,
    /// Ask for the recorded frame captured this many seconds ago instead of the live one.
    #[arg(long)]
    ago: Option<f64>,
    /// Measured requests after the warm-up (0: until --duration or Ctrl-C).
    #[arg(long, default_value_t = 1000)]
    count: u64,
    #[arg(long, default_value_t = 100)]
    warmup: u64,
    /// Requests per second (default: the next one as soon as the answer is in).
    #[arg(long)]
    rate: Option<f64>,
    /// With --rate: each gap is the period plus a uniform draw from ±this (e.g. 1500us), so the requests meet
    /// every phase of a partitioned system's major frame instead of the same few (default: a fixed period).
    #[arg(long, value_parser = parse_jitter)]
    jitter: Option<Duration>,
    /// Stop after this many seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// A request not answered within this many milliseconds counts as timed out.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Seconds to wait for the first answer (discovery, routes, the recorder's first frame).
    #[arg(long, default_value_t = 30.0)]
    connect_timeout: f64,
    /// Save the last frame received as a PNG file.
    #[arg(long)]
    save_frame: Option<PathBuf>,
    /// Write the report (summary and raw samples) as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No live line every second.
    #[arg(long)]
    quiet: bool,
    /// After each live line, one with every response time of that second (µs, rounded up), for a reader that
    /// wants percentiles over longer spans (`partita soak` does).
    #[arg(long)]
    live_samples: bool,
    /// Instead of measuring, write requests back to back for --duration seconds without waiting for answers
    /// (a flood that loads the routing and recorder partitions).
    #[arg(long)]
    flood: bool,
    /// Measure raw UDP round trips against `partita app udp-echo` at this address instead of DDS.
    #[arg(long)]
    udp: Option<SocketAddr>,
    /// With --udp: the answer's size (e.g. 1KiB).
    #[arg(long, default_value = "1KiB", value_parser = parse_size)]
    reply_size: usize,
    #[command(flatten)]
    dds: DdsArgs,
}

#[derive(Args)]
struct ExchangeServerArgs {
    /// Answer raw UDP on this address instead of DDS (the "ideal" baseline).
    #[arg(long)]
    udp: Option<SocketAddr>,
    #[command(flatten)]
    dds: DdsArgs,
}

#[derive(Args)]
struct ExchangeClientArgs {
    /// Data sizes, comma-separated (e.g. 64,512).
    #[arg(long, value_delimiter = ',', default_value = "64,512", value_parser = parse_size)]
    sizes: Vec<usize>,
    /// The server's work per request, µs, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0,10,25,50,75,100")]
    works: Vec<f64>,
    #[arg(long, default_value_t = 10_000)]
    count: u64,
    #[arg(long, default_value_t = 1000)]
    warmup: u64,
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Seconds to wait for the first answer (discovery, a VM partition's boot).
    #[arg(long, default_value_t = 120.0)]
    connect_timeout: f64,
    /// Where the report goes (JSON).
    #[arg(long)]
    json: PathBuf,
    /// Exchange raw UDP with `exchange-server --udp` at this address instead of DDS.
    #[arg(long)]
    udp: Option<SocketAddr>,
    #[command(flatten)]
    dds: DdsArgs,
}

#[derive(Args)]
struct FaultArgs {
    /// What to make the kernel do.
    #[arg(value_parser = parse_fault_kind)]
    kind: partita_apps::fault::Kind,
    /// Stop after this many seconds (default: until SIGINT/SIGTERM).
    #[arg(long)]
    seconds: Option<f64>,
    /// udp-flood: where to send (the victim's V-NIC address; 198.18.0.0/15 or loopback only).
    #[arg(long)]
    target: Option<SocketAddr>,
}

fn parse_fault_kind(s: &str) -> Result<partita_apps::fault::Kind, String> {
    use partita_apps::fault::Kind;
    Kind::from_key(s).ok_or_else(|| format!("{s:?} is not one of sleep, {}", Kind::fault_keys()))
}

/// `partita app fault`: its files go to the partition's state directory (the temporary directory outside one)
/// and `/tmp`.
fn fault(a: FaultArgs) -> ExitCode {
    use partita_apps::fault::{self, FaultConfig};
    if a.seconds.is_some_and(|s| !(s > 0.0 && s.is_finite())) {
        return fail("fault", "--seconds: give a positive number of seconds, or leave it out to run until stopped");
    }
    let state_dir = partita_env::state_dir().map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let mut cfg = FaultConfig::new(a.kind, state_dir);
    cfg.duration = a.seconds.map(Duration::from_secs_f64);
    cfg.target = a.target;
    partita_os::signal::install_stop_signals();
    let mut ready = || println!("{}", fault::ready_line(a.kind));
    match fault::run(&cfg, partita_os::signal::stop_flag(), &mut ready) {
        Ok(r) => {
            println!("partita app fault {}: {} rounds in {:.1} s", a.kind.key(), r.rounds, r.seconds);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("fault {}", a.kind.key()), &e.to_string()),
    }
}

fn exchange_server(a: ExchangeServerArgs) -> ExitCode {
    use partita_apps::exchange;
    partita_supervisor::supervisor::install_stop_signals();
    let stop = partita_supervisor::supervisor::stop_flag();
    if let Some(bind) = a.udp {
        println!("exchange-server: raw UDP on {bind}");
        return match exchange::serve_udp(bind, stop) {
            Ok(n) => {
                println!("exchange-server: answered {n} requests");
                ExitCode::SUCCESS
            }
            Err(e) => fail("exchange-server", &e.to_string()),
        };
    }
    let dds = match a.dds.config() {
        Ok(d) => d,
        Err(e) => return fail("exchange-server", &e),
    };
    let server = match exchange::DdsServer::start(&dds) {
        Ok(s) => s,
        Err(e) => return fail("exchange-server", &e.to_string()),
    };
    println!("exchange-server: DDS domain {}, busy work {:.1} iterations/µs", dds.domain_id, server.calibration.iterations_per_us);
    while !partita_supervisor::supervisor::stop_requested() {
        std::thread::sleep(Duration::from_millis(50));
    }
    ExitCode::SUCCESS
}

fn exchange_client(a: ExchangeClientArgs) -> ExitCode {
    use partita_apps::exchange;
    if !(a.connect_timeout > 0.0 && a.connect_timeout.is_finite()) || a.timeout_ms == 0 {
        return fail("exchange-client", "--connect-timeout and --timeout-ms must be positive");
    }
    let target = match a.udp {
        Some(addr) => exchange::Target::Udp(addr),
        None => match a.dds.config() {
            Ok(d) => exchange::Target::Dds(d),
            Err(e) => return fail("exchange-client", &e),
        },
    };
    let cfg = exchange::SweepConfig {
        name: format!("client-{}", std::process::id()),
        sizes: a.sizes,
        works_us: a.works,
        count: a.count,
        warmup: a.warmup,
        timeout: Duration::from_millis(a.timeout_ms),
        connect_timeout: Duration::from_secs_f64(a.connect_timeout),
    };
    partita_supervisor::supervisor::install_stop_signals();
    let report = match exchange::sweep(&cfg, target, |l| eprintln!("{l}")) {
        Ok(r) => r,
        Err(e) => return fail("exchange-client", &e.to_string()),
    };
    let text = serde_json::to_string(&report).expect("a report always serializes");
    match std::fs::write(&a.json, text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("exchange-client", &format!("{}: {e}", a.json.display())),
    }
}

fn parse_size(s: &str) -> Result<usize, String> {
    partita_bench::size::parse_size(s).map_err(|e| e.to_string())
}

pub fn run(a: AppArgs) -> ExitCode {
    match a.app {
        App::Recorder(r) => recorder(r),
        App::Monitor(m) => monitor(m),
        App::UdpEcho { bind } => {
            partita_supervisor::supervisor::install_stop_signals();
            match udp::serve(bind, partita_supervisor::supervisor::stop_flag()) {
                Ok(n) => {
                    println!("udp-echo: answered {n} requests");
                    ExitCode::SUCCESS
                }
                Err(e) => fail("udp-echo", &format!("{bind}: {e}")),
            }
        }
        App::Vm(v) => crate::vm::run_app(v),
        App::DbeAgent { args } => crate::dbe::agent(args),
        App::Fault(f) => fault(f),
        App::ExchangeServer(x) => exchange_server(x),
        App::ExchangeClient(x) => exchange_client(x),
        App::Probe { output, duration_ms, gap_us } => {
            let runs = partita_supervisor::probe::spin(duration_ms * 1_000_000, gap_us * 1000, 10_000_000);
            match partita_supervisor::probe::write_intervals(&output, &runs) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail("probe", &e.to_string()),
            }
        }
    }
}

fn fail(what: &str, msg: &str) -> ExitCode {
    eprintln!("partita app {what}: error: {msg}");
    ExitCode::FAILURE
}

/// The ring in the partition's private state directory (kept across runs), or `./recording` outside one.
fn default_ring_dir() -> PathBuf {
    match partita_env::state_dir() {
        Some(state) => Path::new(&state).join("ring"),
        None => PathBuf::from("recording"),
    }
}

fn recorder(a: RecorderArgs) -> ExitCode {
    let dds = match a.dds.config() {
        Ok(d) => d,
        Err(e) => return fail("recorder", &e),
    };
    let mut ring = RingConfig::new(a.ring.clone().unwrap_or_else(default_ring_dir), a.ring_size as u64);
    ring.segments = a.segments;
    ring.fsync = a.fsync;
    let dir = ring.dir.clone();
    let config = RecorderConfig { ring, cameras: a.cameras, width: a.width, height: a.height, fps: a.fps, reply_size: a.reply_size };
    partita_supervisor::supervisor::install_stop_signals();
    let rec = match Recorder::start(config, &dds) {
        Ok(r) => r,
        Err(e) => return fail("recorder", &e.to_string()),
    };
    let o = rec.open_report();
    println!(
        "recorder: ring {} opened: {} records kept, {} damaged stretches ({} bytes) skipped, {} bytes cut; domain {}",
        dir.display(),
        o.records,
        o.damaged,
        o.damaged_bytes,
        o.truncated_bytes,
        rec.domain_id()
    );
    let start = Instant::now();
    let mut next = start + Duration::from_secs(1);
    while !partita_supervisor::supervisor::stop_requested() && rec.is_running() {
        if a.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        if a.stats && Instant::now() >= next {
            next += Duration::from_secs(1);
            println!("recorder: {}", serde_json::to_string(&rec.stats()).unwrap_or_default());
        }
    }
    let error = rec.last_error();
    let running = rec.is_running();
    match rec.stop() {
        Ok(s) => {
            println!("recorder: stopped: {}", serde_json::to_string(&s).unwrap_or_default());
            if !running {
                return fail("recorder", &format!("a thread ended early: {}", error.unwrap_or_default()));
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("recorder", &e.to_string()),
    }
}

fn live_line(p: &Progress) {
    eprintln!(
        "monitor: {:>5.1} s  {:>7} answered  {:>4} timed out  last second p50 {:.1} µs  p99 {:.1} µs  max {:.1} µs",
        p.elapsed.as_secs_f64(),
        p.measured,
        p.timeouts,
        p.recent.p50_us,
        p.recent.p99_us,
        p.recent.max_us
    );
}

/// `monitor samples: 3 1921 1930 2488`: how many, then each response time of the last second, µs rounded up.
fn samples_line(p: &Progress) {
    let mut line = format!("monitor samples: {}", p.recent_ns.len());
    for ns in &p.recent_ns {
        line.push_str(&format!(" {}", ns.div_ceil(1000)));
    }
    eprintln!("{line}");
}

/// `--jitter`: a length with its unit (1500us, 1.5ms).
fn parse_jitter(s: &str) -> Result<Duration, String> {
    partita_router_config::parse_duration(s).map_err(|e| format!("{s:?} {e}: give a length such as 1500us"))
}

fn monitor(a: MonitorArgs) -> ExitCode {
    if a.rate.is_some_and(|r| !(r > 0.0 && r.is_finite())) {
        return fail("monitor", "--rate: give a positive number of requests per second");
    }
    if a.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) || !(a.connect_timeout > 0.0 && a.connect_timeout.is_finite()) {
        return fail("monitor", "--duration and --connect-timeout: give a positive number of seconds");
    }
    if a.jitter.is_some() && a.rate.is_none() {
        return fail("monitor", "--jitter spreads the gaps of an open loop: give --rate too");
    }
    let measure = LoopConfig {
        count: a.count,
        warmup: a.warmup,
        rate: a.rate,
        jitter: a.jitter.unwrap_or(Duration::ZERO),
        duration: a.duration.map(Duration::from_secs_f64),
        timeout: Duration::from_millis(a.timeout_ms.max(1)),
    };
    let progress = |p: &Progress| {
        if !a.quiet {
            live_line(p);
            if a.live_samples {
                samples_line(p);
            }
        }
    };
    if a.flood {
        let Some(seconds) = a.duration else {
            return fail("monitor", "--flood needs --duration SECONDS");
        };
        let dds = match a.dds.config() {
            Ok(d) => d,
            Err(e) => return fail("monitor", &e),
        };
        let name = a.name.clone().unwrap_or_else(|| format!("flood-{}", std::process::id()));
        let flooded = monitor::MonitorClient::new(&name, &dds).and_then(|mut c| {
            c.flood(a.camera, Duration::from_secs_f64(seconds), |n| println!("monitor {name}: flooded {n} requests so far"))
        });
        return match flooded {
            Ok(n) => {
                println!("monitor {name}: flooded {n} requests in {seconds} s ({:.0}/s)", n as f64 / seconds);
                ExitCode::SUCCESS
            }
            Err(e) => fail("monitor", &e.to_string()),
        };
    }
    let result: Result<Report, String> = match a.udp {
        Some(server) => udp::client(server, a.reply_size, &measure, progress).map_err(|e| format!("{server}: {e}")),
        None => {
            let dds = match a.dds.config() {
                Ok(d) => d,
                Err(e) => return fail("monitor", &e),
            };
            let name = a.name.clone().unwrap_or_else(|| {
                partita_env::partition().unwrap_or_else(|| format!("monitor-{}", std::process::id()))
            });
            let mut config = MonitorConfig::new(&name);
            config.camera = a.camera;
            config.at_ns = a.ago.map(|s| partita_apps::recorder::now_ns() - (s * 1e9) as i64);
            config.measure = measure;
            config.connect_timeout = Duration::from_secs_f64(a.connect_timeout);
            config.save_frame = a.save_frame.clone();
            monitor::run(&config, &dds, progress).map_err(|e| e.to_string())
        }
    };
    let report = match result {
        Ok(r) => r,
        Err(e) => return fail("monitor", &e),
    };
    print!("{}", table(&report));
    if let Some(path) = &a.json {
        let text = serde_json::to_string(&report).unwrap_or_default();
        if let Err(e) = monitor::write_atomically(path, text.as_bytes()) {
            return fail("monitor", &format!("writing {}: {e}", path.display()));
        }
    }
    if report.answered == 0 {
        return fail("monitor", "no request was answered");
    }
    ExitCode::SUCCESS
}

/// The response-time table a person reads.
pub fn table(r: &Report) -> String {
    let s = &r.summary;
    let mut out = format!(
        "| monitor | transport | requests | measured | timed out | reply bytes | min µs | mean µs | p50 µs | p90 µs | p99 µs | max µs |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n\
         | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
        r.name, r.transport, r.requests, s.count, r.timeouts, r.reply_bytes, s.min_us, s.mean_us, s.p50_us, s.p90_us, s.p99_us, s.max_us
    );
    if let Some(f) = &r.last_frame {
        out.push_str(&format!(
            "last frame: camera {} frame {} captured {} UTC, {}x{}, content {}\n",
            f.camera,
            f.frame,
            partita_apps::pattern::time_of_day(f.captured_ns),
            f.width,
            f.height,
            match f.content_ok {
                Some(true) => "matches the test pattern",
                Some(false) => "DOES NOT match the test pattern",
                None => "not sent (the image does not fit the recorder's --reply-size)",
            }
        ));
    }
    out
}
