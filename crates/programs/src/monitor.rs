//! A monitoring node's program (`partita-monitor`, `partita app monitor`): requests frames, measures response
//! times, saves the latest frame; or floods, or measures raw UDP against `partita app udp-echo`.
use crate::dds_args::DdsArgs;
use crate::{fail, parse_size};
use clap::Args;
use partita_apps::monitor::{self, LoopConfig, MonitorConfig, Progress, Report};
use partita_apps::udp;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct MonitorArgs {
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
    /// With --save-frame: save it once a second while measuring too, not only at the end (a live camera view
    /// for `partita web`; the file is written between requests).
    #[arg(long)]
    live_frame: bool,
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

pub fn run(a: MonitorArgs) -> ExitCode {
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
            config.save_frame_live = a.live_frame;
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
