//! The request/response benchmark: configuration, the client's closed and open loops, the server loop, and the
//! server process the client starts and ends.
use partita_lab::machine::{Disturbance, Watch};
use crate::driver::{self, ClientEndpoint, Entry, ServerEndpoint, Transport, Wait};
use crate::error::BenchError;
use partita_lab::repeat::{interleaved, Spread};
use partita_lab::setup::Setup;
use partita_lab::stats::Stats;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Everything `partita bench rr` was asked for.
#[derive(Debug, Clone, Serialize)]
pub struct RrConfig {
    pub transports: Vec<String>,
    pub sizes: Vec<usize>,
    pub count: u64,
    pub warmup: u64,
    /// Open loop at this many requests per second; closed loop when `None`.
    pub rate_hz: Option<f64>,
    /// Busy work in the server before each reply, in µs.
    pub server_work_us: f64,
    pub busy_poll: bool,
    pub raw: bool,
    pub out: PathBuf,
    /// A reply later than this is counted as lost.
    pub timeout_ms: u64,
    /// How the client, servers and forwarders are scheduled (recorded in the report's `setup`).
    #[serde(skip)]
    pub setup: Setup,
    /// Runs of every transport × size cell, the transports interleaved at each size.
    pub repeat: u32,
}

impl RrConfig {
    /// Checks the arguments against each other and against every transport's limits.
    pub fn validate(&self) -> Result<Vec<Entry>, BenchError> {
        if self.count == 0 {
            return Err(BenchError::ZeroCount);
        }
        if let Some(r) = self.rate_hz {
            if !(r > 0.0 && r.is_finite()) {
                return Err(BenchError::BadRate(r));
            }
        }
        if !(self.server_work_us >= 0.0 && self.server_work_us.is_finite()) {
            return Err(BenchError::BadServerWork(self.server_work_us));
        }
        if self.timeout_ms == 0 {
            return Err(BenchError::BadTimeout);
        }
        if self.repeat == 0 {
            return Err(BenchError::BadRepeat);
        }
        if let Some(p) = self.setup.fifo_priority() {
            if !(1..=partita_lab::setup::MAX_PRIORITY).contains(&p) {
                return Err(BenchError::BadPriority(p));
            }
            if self.busy_poll {
                return Err(BenchError::BusyPollUnderFifo);
            }
        }
        if self.transports.is_empty() {
            return Err(BenchError::NoTransport);
        }
        if self.sizes.is_empty() {
            return Err(BenchError::NoSize);
        }
        let mut entries = Vec::new();
        for name in &self.transports {
            let e = driver::lookup(name)
                .ok_or_else(|| BenchError::UnknownTransport { name: name.clone(), known: driver::known_names() })?;
            for &size in &self.sizes {
                if size == 0 {
                    return Err(BenchError::BadSize { text: "0".into(), reason: "the payload must be at least 1 byte".into() });
                }
                if size > e.max_payload() {
                    return Err(BenchError::SizeTooLarge { transport: name.clone(), size, max: e.max_payload() });
                }
            }
            entries.push(e);
        }
        Ok(entries)
    }

    pub fn mode(&self) -> &'static str {
        if self.rate_hz.is_some() {
            "open-loop"
        } else {
            "closed-loop"
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }
}

/// How to start the server: the `partita` executable and the arguments that lead to `bench rr-server`.
#[derive(Debug, Clone)]
pub struct ServerLauncher {
    pub program: PathBuf,
    pub args: Vec<String>,
}

/// What the server process is told (the arguments of `partita bench rr-server`).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub transport: String,
    pub size: usize,
    pub server_work_us: f64,
    pub session: String,
}

/// One run of one transport × size cell.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub scenario: String,
    pub transport: String,
    pub size: usize,
    /// Which of the cell's runs this is, from 1.
    pub repeat: u32,
    pub mode: String,
    pub warmup_requested: u64,
    /// Warm-up operations answered (and discarded).
    pub warmup_done: u64,
    pub warmup_lost: u64,
    pub count_requested: u64,
    /// Requests without a reply within the time-out.
    pub lost: u64,
    pub started: String,
    pub finished: String,
    /// Round-trip statistics, µs; `None` when no reply came back.
    pub stats: Option<Stats>,
    /// Figures of an external tool that measures itself (ddsperf).
    pub reference: Option<crate::ddsperf::DdsperfSummary>,
    /// Server busy-loop calibration, iterations per µs, as the server reported it.
    pub server_iterations_per_us: Option<f64>,
    /// Raw round trips in ns with their sequence numbers (only with `--raw`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_ns: Option<Vec<(u64, u64)>>,
    /// What the host did to the machine during the run (steal time, CPU frequency); `None` in results of
    /// versions that did not record it.
    pub disturbance: Option<Disturbance>,
}

pub use partita_os::busy::BusyWork;

/// The server loop (`partita bench rr-server`): prints `READY <iterations-per-µs> <address>` on stdout, then
/// answers requests until `stop` is set or stdin closes (the client went away).
pub fn run_server(cfg: &ServerConfig, stop: &'static AtomicBool) -> Result<(), BenchError> {
    let t = match driver::lookup(&cfg.transport) {
        Some(Entry::Driver(t)) => t,
        _ => {
            return Err(BenchError::UnknownTransport { name: cfg.transport.clone(), known: driver::known_names() })
        }
    };
    let derr = |source| BenchError::Driver { transport: cfg.transport.clone(), source };
    let work = if cfg.server_work_us > 0.0 { BusyWork::calibrate() } else { BusyWork { iterations_per_us: 0.0 } };
    let watch_stdin = move || {
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink);
            stop.store(true, Ordering::Relaxed);
        });
    };
    let work_us = cfg.server_work_us;
    // BusyWork is Copy: the closure gets its own.
    let inline_work = std::sync::Arc::new(move || work.run(work_us)) as std::sync::Arc<dyn Fn() + Send + Sync>;
    if let Some(inline) = t.serve_inline(cfg.size, &cfg.session, inline_work) {
        // The transport answers on its own thread; this one only waits for the end.
        let (_server, address) = inline.map_err(derr)?;
        println!("READY {} {}", work.iterations_per_us, address);
        std::io::stdout().flush().ok();
        watch_stdin();
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return Ok(());
    }
    let (mut server, address) = t.serve(cfg.size, &cfg.session).map_err(derr)?;
    println!("READY {} {}", work.iterations_per_us, address);
    std::io::stdout().flush().ok();
    watch_stdin();
    serve_loop(server.as_mut(), &work, cfg.server_work_us, stop).map_err(derr)
}

fn serve_loop(
    server: &mut dyn ServerEndpoint,
    work: &BusyWork,
    work_us: f64,
    stop: &AtomicBool,
) -> Result<(), crate::DriverError> {
    while !stop.load(Ordering::Relaxed) {
        if let Some(seq) = server.recv_request(Duration::from_millis(100))? {
            work.run(work_us);
            server.reply(seq)?;
        }
    }
    Ok(())
}

/// The server child process; killed (by pid, through `Child::kill`) and reaped when dropped, also on errors.
struct ServerProcess {
    child: Child,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_server(
    launcher: &ServerLauncher,
    cfg: &ServerConfig,
) -> Result<(ServerProcess, f64, String), BenchError> {
    let fail = |reason: String| BenchError::Server { transport: cfg.transport.clone(), reason };
    let child = Command::new(&launcher.program)
        .args(partita_lab::setup::child_args())
        .args(&launcher.args)
        .args(["--transport", &cfg.transport, "--size", &cfg.size.to_string()])
        .args(["--server-work", &cfg.server_work_us.to_string(), "--session", &cfg.session])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("starting {}: {e}", launcher.program.display())))?;
    let mut proc = ServerProcess { child };
    let stdout = proc.child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).map_err(|e| fail(format!("reading its address: {e}")))?;
    let mut parts = line.trim().splitn(3, ' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("READY"), Some(iters), Some(addr)) => {
            let iters = iters.parse().map_err(|_| fail(format!("bad READY line {line:?}")))?;
            Ok((proc, iters, addr.to_string()))
        }
        _ => {
            let status = proc.child.wait().ok().map(|s| s.to_string()).unwrap_or_default();
            Err(fail(format!("it did not report an address (said {:?}, {status})", line.trim())))
        }
    }
}

/// A progress bar that appears only once a run has lasted two seconds, and never when stderr is not a terminal.
struct Progress {
    bar: ProgressBar,
    start: Instant,
    shown: bool,
}

impl Progress {
    fn new(total: u64, label: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} ({eta})") {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        Progress { bar, start: Instant::now(), shown: false }
    }
    fn set(&mut self, done: u64) {
        if !done.is_multiple_of(256) {
            return;
        }
        if !self.shown && self.start.elapsed() > Duration::from_secs(2) {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.shown = true;
        }
        self.bar.set_position(done);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Raw outcome of the loops: (seq, rtt ns) of every answered operation, warm-up included, and the lost ones.
struct LoopOutcome {
    samples: Vec<(u64, u64)>,
    lost_seqs: Vec<u64>,
}

fn closed_loop(
    client: &mut ClientEndpoint,
    size: usize,
    cfg: &RrConfig,
    stop: &AtomicBool,
    progress: &mut Progress,
) -> Result<LoopOutcome, crate::DriverError> {
    let payload = vec![0xA5u8; size];
    let total = cfg.warmup + cfg.count;
    let timeout = cfg.timeout();
    let mut out = LoopOutcome { samples: Vec::with_capacity(total as usize), lost_seqs: Vec::new() };
    for seq in 0..total {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let t0 = Instant::now();
        let deadline = t0 + timeout;
        client.sender.send(seq, &payload)?;
        // The same `Wait` every time, so a driver need not change its socket options per operation; a stale
        // reply (to an operation already counted as lost) can stretch the wait a little past the deadline.
        let wait = if cfg.busy_poll { Wait::Poll } else { Wait::Block(timeout) };
        let answered = loop {
            match client.receiver.recv(wait)? {
                Some(s) if s == seq => break true,
                _ if Instant::now() >= deadline => break false,
                Some(_) => {}
                None => std::hint::spin_loop(),
            }
        };
        if answered {
            out.samples.push((seq, t0.elapsed().as_nanos() as u64));
        } else {
            out.lost_seqs.push(seq);
        }
        progress.set(seq + 1);
    }
    Ok(out)
}

fn open_loop(
    client: ClientEndpoint,
    size: usize,
    rate: f64,
    cfg: &RrConfig,
    stop: &AtomicBool,
    progress: &mut Progress,
) -> Result<LoopOutcome, crate::DriverError> {
    let ClientEndpoint { mut sender, mut receiver } = client;
    let total = cfg.warmup + cfg.count;
    let period_ns = 1e9 / rate;
    let timeout = cfg.timeout();
    let start = Instant::now() + Duration::from_millis(10);
    let scheduled = move |seq: u64| start + Duration::from_nanos((seq as f64 * period_ns) as u64);
    let sent = AtomicU64::new(0);
    let sender_done = AtomicBool::new(false);
    let busy = cfg.busy_poll;
    std::thread::scope(|s| {
        let sending = s.spawn(|| -> Result<(), crate::DriverError> {
            let payload = vec![0xA5u8; size];
            let result = (|| {
                for seq in 0..total {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let at = scheduled(seq);
                    // Sleep to just before the slot, then spin onto it; busy-polling spins all the way.
                    if !busy {
                        if let Some(d) = at.checked_duration_since(Instant::now()) {
                            if d > Duration::from_micros(100) {
                                std::thread::sleep(d - Duration::from_micros(80));
                            }
                        }
                    }
                    while Instant::now() < at {
                        std::hint::spin_loop();
                    }
                    sender.send(seq, &payload)?;
                    sent.store(seq + 1, Ordering::Release);
                }
                Ok(())
            })();
            sender_done.store(true, Ordering::Release);
            result
        });

        let mut answered = vec![false; total as usize];
        let mut samples = Vec::with_capacity(total as usize);
        let mut received = 0u64;
        let recv_result = (|| -> Result<(), crate::DriverError> {
            loop {
                if received == total || stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                if sender_done.load(Ordering::Acquire) {
                    let n = sent.load(Ordering::Acquire);
                    if n == 0 || Instant::now() > scheduled(n - 1) + timeout {
                        return Ok(());
                    }
                }
                let wait = if busy { Wait::Poll } else { Wait::Block(Duration::from_millis(20)) };
                if let Some(seq) = receiver.recv(wait)? {
                    let now = Instant::now();
                    if seq < total && !answered[seq as usize] {
                        let rtt = now.saturating_duration_since(scheduled(seq));
                        if rtt <= timeout {
                            answered[seq as usize] = true;
                            received += 1;
                            samples.push((seq, rtt.as_nanos() as u64));
                            progress.set(received);
                        }
                    }
                }
            }
        })();
        let send_result = sending.join().unwrap_or_else(|_| Err(crate::DriverError::Other("sender thread panicked".into())));
        recv_result?;
        send_result?;
        let n = sent.load(Ordering::Acquire);
        let lost_seqs = (0..n).filter(|&s| !answered[s as usize]).collect();
        samples.sort_unstable();
        Ok(LoopOutcome { samples, lost_seqs })
    })
}

/// Runs one transport × size scenario with a fresh server process; `repeat` counts the cell's runs from 1.
pub fn run_driver(
    t: &'static dyn Transport,
    size: usize,
    repeat: u32,
    cfg: &RrConfig,
    launcher: &ServerLauncher,
    stop: &AtomicBool,
) -> Result<ScenarioResult, BenchError> {
    let started = partita_lab::machine::now_rfc3339();
    let watch = Watch::start();
    // Unique per run: every repeat meets a fresh server on a domain and topics of its own.
    let session = format!("{}-{}-{}-r{repeat}", std::process::id(), t.name(), size);
    let scfg = ServerConfig {
        transport: t.name().to_string(),
        size,
        server_work_us: cfg.server_work_us,
        session: session.clone(),
    };
    let (server, iters, address) = start_server(launcher, &scfg)?;
    let derr = |source| BenchError::Driver { transport: t.name().to_string(), source };
    let scenario = format!("{} {}", t.name(), crate::size::format_size(size));
    let total = cfg.warmup + cfg.count;
    let timeout = Duration::from_millis(cfg.timeout_ms);
    let inline = if cfg.rate_hz.is_none() && !cfg.busy_poll {
        t.closed_loop_inline(&address, size, &session, total, timeout, stop)
    } else {
        None
    };
    let outcome = match inline {
        Some(r) => {
            let (samples, lost_seqs) = r.map_err(derr)?;
            LoopOutcome { samples, lost_seqs }
        }
        None => {
            let mut client = t.connect(&address, size, &session).map_err(derr)?;
            let mut progress = Progress::new(total, &scenario);
            let o = match cfg.rate_hz {
                None => closed_loop(&mut client, size, cfg, stop, &mut progress),
                Some(rate) => open_loop(client, size, rate, cfg, stop, &mut progress),
            }
            .map_err(derr)?;
            drop(progress);
            o
        }
    };
    drop(server);
    if stop.load(Ordering::Relaxed) {
        return Err(BenchError::Interrupted);
    }
    let measured: Vec<(u64, u64)> = outcome.samples.into_iter().filter(|&(s, _)| s >= cfg.warmup).collect();
    let rtts: Vec<u64> = measured.iter().map(|&(_, ns)| ns).collect();
    let warmup_lost = outcome.lost_seqs.iter().filter(|&&s| s < cfg.warmup).count() as u64;
    let lost = outcome.lost_seqs.len() as u64 - warmup_lost;
    Ok(ScenarioResult {
        scenario,
        transport: t.name().to_string(),
        size,
        repeat,
        mode: cfg.mode().to_string(),
        warmup_requested: cfg.warmup,
        warmup_done: cfg.warmup - warmup_lost,
        warmup_lost,
        count_requested: cfg.count,
        lost,
        started,
        finished: partita_lab::machine::now_rfc3339(),
        stats: Stats::from_ns(&rtts),
        reference: None,
        server_iterations_per_us: if cfg.server_work_us > 0.0 { Some(iters) } else { None },
        samples_ns: if cfg.raw { Some(measured) } else { None },
        disturbance: Some(watch.stop()),
    })
}

/// Every run of one transport × size cell, and its figures over the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub scenario: String,
    pub transport: String,
    pub size: usize,
    pub figures: CellFigures,
    /// The runs in the order they were made.
    pub runs: Vec<ScenarioResult>,
}

/// A cell's figures over its runs: for each, the median of the per-run values with their min and max (µs,
/// round trip). A figure a run lacks (σ and p99.9 of ddsperf) is `None`.
#[derive(Debug, Clone, Serialize)]
pub struct CellFigures {
    /// Runs that produced figures.
    pub runs: usize,
    /// Measured round trips over all runs.
    pub samples: u64,
    /// Lost requests over all runs.
    pub lost: u64,
    pub min_us: Option<Spread>,
    pub mean_us: Option<Spread>,
    pub max_us: Option<Spread>,
    pub std_us: Option<Spread>,
    pub p50_us: Option<Spread>,
    pub p90_us: Option<Spread>,
    pub p99_us: Option<Spread>,
    pub p99_9_us: Option<Spread>,
    /// (max − min) / median of the runs' p50s; `None` with one run.
    pub p50_spread: Option<f64>,
    /// Whether the p50 spread exceeds [`partita_lab::repeat::FLAG_SPREAD`].
    pub flagged: bool,
    /// The most the host disturbed any of the runs ([`Disturbance::worst`]).
    pub disturbance: Option<Disturbance>,
}

/// A run's figures, µs: min, mean, max, σ, p50, p90, p99, p99.9 (from its statistics, or a reference tool's).
fn run_figures(s: &ScenarioResult) -> Option<[Option<f64>; 8]> {
    if let Some(st) = &s.stats {
        return Some([st.min_us, st.mean_us, st.max_us, st.std_us, st.p50_us, st.p90_us, st.p99_us, st.p99_9_us].map(Some));
    }
    s.reference.as_ref().map(|r| [Some(r.min_us), Some(r.mean_us), Some(r.max_us), None, Some(r.p50_us), Some(r.p90_us), Some(r.p99_us), None])
}

impl Cell {
    /// The cell of `runs` (all of one transport and size).
    pub fn new(runs: Vec<ScenarioResult>) -> Cell {
        let figs: Vec<[Option<f64>; 8]> = runs.iter().filter_map(run_figures).collect();
        // A figure over the runs that have it.
        let fig = |i: usize| {
            let v: Vec<f64> = figs.iter().filter_map(|f| f[i]).collect();
            Spread::of(&v)
        };
        let samples = runs.iter().map(|r| r.stats.as_ref().map(|s| s.count).or(r.reference.as_ref().map(|x| x.count)).unwrap_or(0)).sum();
        let p50 = fig(4);
        let figures = CellFigures {
            runs: figs.len(),
            samples,
            lost: runs.iter().map(|r| r.lost).sum(),
            min_us: fig(0),
            mean_us: fig(1),
            max_us: fig(2),
            std_us: fig(3),
            p50_us: p50,
            p90_us: fig(5),
            p99_us: fig(6),
            p99_9_us: fig(7),
            p50_spread: p50.and_then(|s| s.spread),
            flagged: p50.is_some_and(|s| s.flagged()),
            disturbance: Disturbance::worst(&runs.iter().filter_map(|r| r.disturbance).collect::<Vec<_>>()),
        };
        let first = &runs[0];
        Cell { scenario: first.scenario.clone(), transport: first.transport.clone(), size: first.size, figures, runs }
    }

    /// Notes of reference tools (ddsperf's conversion), once per cell.
    pub fn note(&self) -> Option<&str> {
        self.runs.iter().find_map(|r| r.reference.as_ref().map(|x| x.note.as_str()))
    }
}

/// Runs every transport × size cell `cfg.repeat` times and returns the cells by transport, then size. They
/// run size by size (every transport at one size, then the next size), and at one size the transports are
/// interleaved (every transport once, then every transport again), so the cells compared with each other at one
/// size, such as the four paths of the hop table, are measured close together in time on a machine whose speed
/// drifts, and alike.
pub fn run_all(
    cfg: &RrConfig,
    launcher: &ServerLauncher,
    stop: &AtomicBool,
    mut on_result: impl FnMut(&ScenarioResult),
) -> Result<Vec<Cell>, BenchError> {
    let entries = cfg.validate()?;
    let mut results: Vec<(usize, usize, ScenarioResult)> = Vec::new();
    for (si, &size) in cfg.sizes.iter().enumerate() {
        for (repeat, ei) in interleaved(entries.len(), cfg.repeat) {
            let r = match entries[ei] {
                Entry::Driver(t) => run_driver(t, size, repeat, cfg, launcher, stop)?,
                Entry::Ddsperf(trigger) => crate::ddsperf::run(size, repeat, cfg, stop, trigger)?,
            };
            on_result(&r);
            results.push((ei, si, r));
        }
    }
    // Stable: each cell's runs stay in the order they were made.
    results.sort_by_key(|(ei, si, _)| (*ei, *si));
    let mut cells: Vec<Cell> = Vec::new();
    let mut runs: Vec<ScenarioResult> = Vec::new();
    let mut key = None;
    for (ei, si, r) in results {
        if key.is_some_and(|k| k != (ei, si)) {
            cells.push(Cell::new(std::mem::take(&mut runs)));
        }
        key = Some((ei, si));
        runs.push(r);
    }
    if !runs.is_empty() {
        cells.push(Cell::new(runs));
    }
    Ok(cells)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid configuration for tests here and in other modules: one UDP scenario of 10 operations.
    pub(crate) fn cfg() -> RrConfig {
        RrConfig {
            transports: vec!["udp".into()],
            sizes: vec![64],
            count: 10,
            warmup: 1,
            rate_hz: None,
            server_work_us: 0.0,
            busy_poll: false,
            raw: false,
            out: PathBuf::from("/tmp"),
            timeout_ms: 1000,
            setup: Setup::Normal,
            repeat: 1,
        }
    }

    #[test]
    fn argument_errors_are_usage_errors() {
        assert!(cfg().validate().is_ok());
        let cases: Vec<(RrConfig, fn(&BenchError) -> bool)> = vec![
            (RrConfig { count: 0, ..cfg() }, |e| matches!(e, BenchError::ZeroCount)),
            (RrConfig { transports: vec!["carrier-pigeon".into()], ..cfg() }, |e| {
                matches!(e, BenchError::UnknownTransport { .. })
            }),
            (RrConfig { sizes: vec![0], ..cfg() }, |e| matches!(e, BenchError::BadSize { .. })),
            (RrConfig { sizes: vec![65_500], ..cfg() }, |e| matches!(e, BenchError::SizeTooLarge { .. })),
            (RrConfig { rate_hz: Some(0.0), ..cfg() }, |e| matches!(e, BenchError::BadRate(_))),
            (RrConfig { rate_hz: Some(f64::NAN), ..cfg() }, |e| matches!(e, BenchError::BadRate(_))),
            (RrConfig { transports: vec![], ..cfg() }, |e| matches!(e, BenchError::NoTransport)),
            (RrConfig { timeout_ms: 0, ..cfg() }, |e| matches!(e, BenchError::BadTimeout)),
            (RrConfig { server_work_us: -1.0, ..cfg() }, |e| matches!(e, BenchError::BadServerWork(_))),
            (RrConfig { setup: Setup::Realtime { priority: 0, cpu_dma_latency_us: 0 }, ..cfg() }, |e| matches!(e, BenchError::BadPriority(0))),
            (RrConfig { setup: Setup::Realtime { priority: 90, cpu_dma_latency_us: 0 }, ..cfg() }, |e| matches!(e, BenchError::BadPriority(90))),
            (RrConfig { setup: Setup::default(), busy_poll: true, ..cfg() }, |e| matches!(e, BenchError::BusyPollUnderFifo)),
            (RrConfig { repeat: 0, ..cfg() }, |e| matches!(e, BenchError::BadRepeat)),
        ];
        for (c, want) in cases {
            let e = c.validate().unwrap_err();
            assert!(want(&e), "unexpected error {e}");
            assert!(e.is_usage(), "{e} should be a usage error");
        }
    }

    #[test]
    fn udp_limit_is_the_datagram_minus_the_header() {
        assert!(RrConfig { sizes: vec![65_499], ..cfg() }.validate().is_ok());
        let e = RrConfig { sizes: vec![65_500], ..cfg() }.validate().unwrap_err();
        assert!(e.to_string().contains("65499"), "{e}");
    }

    #[test]
    fn busy_work_calibrates_to_a_finite_positive_rate() {
        // No timing threshold: only that calibration produced a usable rate.
        let w = BusyWork::calibrate();
        assert!(w.iterations_per_us.is_finite() && w.iterations_per_us > 0.0, "{}", w.iterations_per_us);
    }

    #[test]
    fn closed_and_open_loops_over_udp_in_one_process() {
        let (mut server, addr) = crate::udp::Udp.serve(32, "t").unwrap();
        let stop: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
        let srv = std::thread::spawn(move || serve_loop(server.as_mut(), &BusyWork { iterations_per_us: 0.0 }, 0.0, stop));
        let c = cfg();
        let mut client = crate::udp::Udp.connect(&addr, 32, "t").unwrap();
        let mut p = Progress::new(11, "t");
        let out = closed_loop(&mut client, 32, &c, &AtomicBool::new(false), &mut p).unwrap();
        assert_eq!(out.samples.len() + out.lost_seqs.len(), 11);
        assert!(out.samples.iter().map(|s| s.0).eq((0..11).filter(|s| !out.lost_seqs.contains(s))));
        let c = RrConfig { rate_hz: Some(2000.0), ..cfg() };
        let client = crate::udp::Udp.connect(&addr, 32, "t").unwrap();
        let out = open_loop(client, 32, 2000.0, &c, &AtomicBool::new(false), &mut p).unwrap();
        assert_eq!(out.samples.len() + out.lost_seqs.len(), 11);
        stop.store(true, Ordering::Relaxed);
        srv.join().unwrap().unwrap();
    }
}
