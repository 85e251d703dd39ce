//! The DDS routing service as a program (`partita-route`, `partita route CONFIG`): standalone, or inside an I/O partition.
use clap::Args;
use partita_router::{stats, Router, RouterConfig};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

#[derive(Args)]
pub struct RouteArgs {
    /// The router's TOML configuration (see docs/router.md). Inside an I/O partition it may be left out: the
    /// router then reads the router file the supervisor wrote from the system file (`PARTITA_ROUTER_FILE`).
    pub config: Option<PathBuf>,
    /// Print the statistics table every stats period.
    #[arg(long)]
    pub stats: bool,
    /// Stop after this many seconds (default: run until SIGINT or SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Only check the configuration and exit.
    #[arg(long)]
    pub check: bool,
    /// Watch the configuration file and take over a changed route table without a restart (checked every
    /// 500 ms): kept routes lose no sample, removed ones stop, new ones start; a file that does not validate, or
    /// that changes the sides, is refused and the running table stays. Always on for an I/O partition's router
    /// file (no CONFIG), which only the supervisor rewrites (`partita router reload`).
    #[arg(long)]
    pub watch: bool,
}

/// How often `--watch` looks at the file.
const WATCH_PERIOD: Duration = Duration::from_millis(500);

/// Notices when a file's content changed: its modification time and size first, then a hash of its content.
/// A change counts once the time and size have stayed the same for one look, so that a file being written is
/// read when its writer is done.
struct FileWatch {
    path: PathBuf,
    stat: Option<(SystemTime, u64)>,
    /// A new time and size seen once, not yet twice.
    changing: Option<(SystemTime, u64)>,
    hash: u64,
    next: Instant,
}

fn stat_of(path: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

fn hash_of(path: &Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Some(h.finish())
}

impl FileWatch {
    fn new(path: PathBuf) -> FileWatch {
        let (stat, hash) = (stat_of(&path), hash_of(&path).unwrap_or(0));
        FileWatch { path, stat, changing: None, hash, next: Instant::now() + WATCH_PERIOD }
    }

    /// Whether the file has new content (looked at once per [`WATCH_PERIOD`]). A file that cannot be read
    /// (being replaced) counts as unchanged until it can.
    fn changed(&mut self) -> bool {
        if Instant::now() < self.next {
            return false;
        }
        self.next = Instant::now() + WATCH_PERIOD;
        let now = stat_of(&self.path);
        if now.is_none() || now == self.stat {
            self.changing = None;
            return false;
        }
        if self.changing != now {
            self.changing = now;
            return false;
        }
        let Some(hash) = hash_of(&self.path) else { return false };
        self.stat = now;
        self.changing = None;
        std::mem::replace(&mut self.hash, hash) != hash
    }
}

/// Reads the configuration again as at start: the file given, or the router file of the I/O partition.
fn load_again(path: Option<&PathBuf>) -> Result<RouterConfig, Vec<String>> {
    match path {
        Some(p) => RouterConfig::load(p).map_err(|errors| errors.iter().map(|e| e.to_string()).collect()),
        None => match RouterConfig::for_io_partition() {
            Some(Ok(c)) => Ok(c),
            Some(Err(e)) => Err(e.lines().map(str::to_string).collect()),
            None => Err(vec!["PARTITA_ROUTER_FILE is no longer set".to_string()]),
        },
    }
}

/// Reads the watched file again and hands a valid table to the router; a bad one is refused with its errors and
/// the running table stays. The router takes the table over on its manager's next turn (this runs on that
/// thread, `Router::serve`): what it did arrives on the returned channel.
fn reload(router: &Router, path: Option<&PathBuf>, source: &str) -> Option<(std::sync::mpsc::Receiver<partita_router::ReloadSummary>, Duration)> {
    let refused = |lines: Vec<String>| {
        for l in lines {
            eprintln!("error: {l}");
        }
        eprintln!("error: {source}: not reloaded; keeping the running table");
        None
    };
    let config = match load_again(path) {
        Ok(c) => c,
        Err(lines) => return refused(lines),
    };
    let period = config.stats_period();
    match router.request_reload(config) {
        Ok(answer) => Some((answer, period)),
        Err(e) => refused(e.config_errors(source).iter().map(|e| e.to_string()).collect()),
    }
}

pub fn run(args: RouteArgs) -> ExitCode {
    let (config, source) = match &args.config {
        Some(path) => match RouterConfig::load(path) {
            Ok(c) => (c, path.display().to_string()),
            Err(errors) => {
                for e in errors {
                    eprintln!("error: {e}");
                }
                return ExitCode::from(2);
            }
        },
        None => match RouterConfig::for_io_partition() {
            Some(Ok(c)) => (c, partita_env::router_file().unwrap_or_default()),
            Some(Err(e)) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
            None => {
                eprintln!(
                    "error: partita route needs a CONFIG file (see docs/router.md and examples/router-loopback.toml); \
                     only inside an I/O partition, whose router file the supervisor names in PARTITA_ROUTER_FILE, can it be left out"
                );
                return ExitCode::from(2);
            }
        },
    };
    if args.check {
        println!("{source}: valid ({} sides, {} routes)", config.sides.len(), config.routes.len());
        return ExitCode::SUCCESS;
    }
    if let Some(d) = args.duration {
        if !(d > 0.0 && d.is_finite()) {
            eprintln!("error: --duration {d}: give a positive number of seconds");
            return ExitCode::from(2);
        }
    }
    partita_os::signal::install_stop_signals();
    let mut period = config.stats_period();
    // The partition's ARINC 653 ports, for the port routes (`[[port]]`): none outside a partition.
    let mut ports = match partita_ports::Ports::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    // With --watch, or in an I/O partition, a changed file is validated and taken over without a restart.
    let mut watch = (args.watch || args.config.is_none()).then(|| FileWatch::new(PathBuf::from(&source)));
    let mut answers = Vec::new();
    // The router's manager runs on this thread (`Router::serve`): a routing partition's threads all run at every
    // thaw, so the program adds none of its own (docs/router.md, "Threads").
    let start = Instant::now();
    let mut next = start + period;
    let mut last_rows = Vec::new();
    let served = Router::serve(config, &mut ports, |router| {
        let stop = partita_os::signal::stop_requested() || args.duration.is_some_and(|d| start.elapsed().as_secs_f64() >= d);
        if stop {
            last_rows = router.stats();
            return false;
        }
        if watch.as_mut().is_some_and(|w| w.changed()) {
            if let Some((answer, p)) = reload(router, args.config.as_ref(), &source) {
                answers.push(answer);
                period = p;
                next = next.min(Instant::now() + period);
            }
        }
        answers.retain(|answer| match answer.try_recv() {
            Ok(summary) => {
                println!("{source}: reloaded: {summary}");
                false
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => true,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => false,
        });
        if args.stats && Instant::now() >= next {
            next += period;
            print!("{}", stats::table(&router.stats()));
            let refused = router.refused_topics();
            if !refused.is_empty() {
                println!("refused (max_topics reached): {}", refused.join(", "));
            }
            for (side, present, gone, silent) in router.peers() {
                println!("side {side}: {present} application participants, {gone} gone (left or lost), {silent} without endpoints (refused by DDS Security, or idle)");
            }
            if router.reloads() > 0 {
                println!("route table reloaded {} time(s)", router.reloads());
            }
        }
        true
    });
    if let Err(e) = served {
        eprintln!("error: {e}");
        return ExitCode::from(1);
    }
    if args.stats {
        print!("{}", stats::table(&last_rows));
    }
    ExitCode::SUCCESS
}
