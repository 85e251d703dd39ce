//! Forwarding throughput and memory of the routing service under a sustained flood (`partita bench
//! router-flood`): this process writes samples of one topic as fast as it can on one domain, a `partita route`
//! process forwards them to a second domain, and a listening reader here counts what arrives. The router's
//! resident memory is sampled from `/proc/PID/status` throughout, and its own statistics (topic
//! `partita/router/stats`) tell in how many batches it sent the forwarded samples.
use crate::error::BenchError;
use partita_lab::repeat::Spread;
use partita_lab::setup::SetupRecord;
use std::fmt::Write as _;
use partita_dds::{qos::Reliability, DomainConfig, ListeningReader, Participant, Qos, Reader, Topic, TopicType, Writer};
use partita_router::{RouteStats, RouterConfig};
use serde::{Deserialize, Serialize};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Flood {
    pub seq: u64,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

impl TopicType for Flood {
    fn type_name() -> &'static str {
        "partita::bench::Flood"
    }
}

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct FloodConfig {
    pub size: usize,
    pub seconds: f64,
    /// Reliable: the writer is held back by the router (throughput without loss). Best effort: the writer
    /// outruns the router (what it drops, and whether its memory stays bounded).
    pub reliable: bool,
    /// The router's `batch_delay` ("0s": every forwarded sample in a message of its own).
    pub batch_delay: String,
}

/// What was measured in one flood.
#[derive(Debug, Clone, Serialize)]
pub struct FloodResult {
    pub config: FloodConfig,
    /// Which run of its `batch_delay` this is, from 1.
    pub repeat: u32,
    pub written: u64,
    pub received: u64,
    pub seconds: f64,
    pub written_per_s: f64,
    pub received_per_s: f64,
    pub router_rss_kib_start: u64,
    pub router_rss_kib_max: u64,
    pub router_rss_kib_end: u64,
    pub router_rss_samples: usize,
    /// CPU time the router used (user + system) per sample received, from the flood's start until its last
    /// samples had arrived, in µs.
    pub router_cpu_us_per_sample: f64,
    /// From the router's statistics: samples it forwarded and batches it sent them in (warm-up included).
    pub router_forwarded: u64,
    pub router_batches: u64,
    pub samples_per_batch: f64,
}

/// CPU time (user + system) a process has used so far, s.
pub(crate) fn cpu_seconds(pid: u32) -> Option<f64> {
    let (user, system) = partita_os::process::cpu_times_ns(pid)?;
    Some((user + system) as f64 / 1e9)
}

pub(crate) fn rss_kib(pid: u32) -> Option<u64> {
    partita_os::process::rss_kib(i32::try_from(pid).ok()?)
}

fn fail(what: &str) -> impl FnOnce(partita_dds::DdsError) -> BenchError + '_ {
    move |e| BenchError::Driver { transport: "router-flood".into(), source: crate::DriverError::Other(format!("{what}: {e}")) }
}

const TOPIC: &str = "partita/bench/flood";

/// The router's configuration for a flood from domain `a` to domain `b`, validated as `partita route` will.
fn router_config(a: u32, b: u32, batch_delay: &str) -> Result<String, BenchError> {
    let text = format!(
        "name = \"flood\"\nstats_period = \"250ms\"\nbatch_delay = {batch_delay:?}\n[[side]]\nname = \"a\"\ndomain = {a}\n\
         [[side]]\nname = \"b\"\ndomain = {b}\n[[route]]\nfrom = \"a\"\nto = \"b\"\nallow = [\"{TOPIC}\"]\n"
    );
    RouterConfig::parse(&text, std::path::Path::new("--batch-delay")).map_err(|errors| BenchError::BadBatchDelay {
        text: batch_delay.into(),
        reason: errors.iter().map(|e| format!("{}; {}", e.problem, e.fix)).collect::<Vec<_>>().join("; "),
    })?;
    Ok(text)
}

/// Checks a `--batch-delay` value before anything starts.
pub fn check_batch_delay(batch_delay: &str) -> Result<(), BenchError> {
    router_config(1, 2, batch_delay).map(drop)
}

/// Runs the flood; `repeat` counts the runs of this configuration from 1. `program` is the `partita` binary
/// (for `partita route`).
pub fn run(cfg: &FloodConfig, repeat: u32, program: &std::path::Path, stop: &AtomicBool) -> Result<FloodResult, BenchError> {
    let a = 1 + std::process::id() % 100;
    let b = a + 100;
    let conf = std::env::temp_dir().join(format!("partita-flood-{}.toml", std::process::id()));
    let text = router_config(a, b, &cfg.batch_delay)?;
    std::fs::write(&conf, text).map_err(|e| BenchError::Write { path: conf.clone(), source: e })?;
    let result = flood(cfg, program, &conf, a, b, stop).map(|mut r| {
        r.repeat = repeat;
        r
    });
    let _ = std::fs::remove_file(&conf);
    result
}

fn flood(cfg: &FloodConfig, program: &std::path::Path, conf: &std::path::Path, a: u32, b: u32, stop: &AtomicBool) -> Result<FloodResult, BenchError> {
    let child = Command::new(program)
        .args(partita_lab::setup::child_args())
        .args(["route", &conf.to_string_lossy()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::Server { transport: "router-flood".into(), reason: format!("starting partita route: {e}") })?;
    let router = crate::ddsperf::Killed(child);
    let pid = router.0.id();

    let qos = if cfg.reliable {
        Qos::new().reliability(Reliability::Reliable { max_blocking: Duration::from_secs(1) }).keep_all()
    } else {
        Qos::best_effort().keep_last(256)
    };
    let pa = Participant::new(&DomainConfig::loopback(a)).map_err(fail("participant on the source domain"))?;
    let pb = Participant::new(&DomainConfig::loopback(b)).map_err(fail("participant on the destination domain"))?;
    let ta = Topic::<Flood>::new(&pa, TOPIC, &qos).map_err(fail("topic"))?;
    let tb = Topic::<Flood>::new(&pb, TOPIC, &qos).map_err(fail("topic"))?;
    let stats_qos = Qos::reliable().keep_last(1).transient_local();
    let stats_topic = Topic::<RouteStats>::new(&pa, "partita/router/stats", &stats_qos).map_err(fail("statistics topic"))?;
    let stats = Reader::new(&stats_topic, &stats_qos).map_err(fail("statistics reader"))?;
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let _reader = ListeningReader::new(&tb, &qos, move |_, info| {
        if info.valid_data {
            r.fetch_add(1, Ordering::Relaxed);
        }
    })
    .map_err(fail("reader"))?;
    let writer = Writer::new(&ta, &qos).map_err(fail("writer"))?;
    writer.wait_for_readers(1, Duration::from_secs(20)).map_err(fail("waiting for the router's reader"))?;
    // Let the router build its route to the destination before counting.
    let warm = Instant::now();
    let mut sample = Flood { seq: 0, payload: vec![0x42; cfg.size] };
    while received.load(Ordering::Relaxed) == 0 && warm.elapsed() < Duration::from_secs(20) {
        writer.write(&sample).map_err(fail("write"))?;
        std::thread::sleep(Duration::from_millis(10));
    }
    if received.load(Ordering::Relaxed) == 0 {
        return Err(BenchError::Server { transport: "router-flood".into(), reason: "nothing crossed the router within 20 s".into() });
    }
    std::thread::sleep(Duration::from_millis(200));
    let rss_start = rss_kib(pid).unwrap_or(0);
    let mut rss_max = rss_start;
    let mut rss_n = 1;
    let base = received.load(Ordering::Relaxed);
    let cpu_start = cpu_seconds(pid);
    let start = Instant::now();
    let mut next_rss = start + Duration::from_millis(100);
    let mut written = 0u64;
    let dur = Duration::from_secs_f64(cfg.seconds);
    while start.elapsed() < dur && !stop.load(Ordering::Relaxed) {
        sample.seq += 1;
        writer.write(&sample).map_err(fail("write"))?;
        written += 1;
        if written.is_multiple_of(256) && Instant::now() >= next_rss {
            if let Some(k) = rss_kib(pid) {
                rss_max = rss_max.max(k);
                rss_n += 1;
            }
            next_rss += Duration::from_millis(100);
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    // Samples still in flight arrive shortly; count them for a moment, not as throughput time.
    std::thread::sleep(Duration::from_millis(300));
    let got = received.load(Ordering::Relaxed) - base;
    let cpu = cpu_start.zip(cpu_seconds(pid)).map(|(a, b)| b - a);
    let rss_end = rss_kib(pid).unwrap_or(0);
    // The router's own count of what it forwarded and in how many batches, once it has published the flood's
    // last sample.
    let mut last: Option<RouteStats> = None;
    let settle = Instant::now();
    while last.as_ref().is_none_or(|r| r.forwarded < got) && settle.elapsed() < Duration::from_secs(3) {
        let rows = stats.take().map_err(fail("reading the router's statistics"))?;
        last = rows.into_iter().filter_map(|s| s.value).rfind(|r| r.topic == TOPIC).or(last);
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(router);
    if stop.load(Ordering::Relaxed) {
        return Err(BenchError::Interrupted);
    }
    Ok(FloodResult {
        config: cfg.clone(),
        repeat: 1,
        written,
        received: got,
        seconds: elapsed,
        written_per_s: written as f64 / elapsed,
        received_per_s: got as f64 / elapsed,
        router_rss_kib_start: rss_start,
        router_rss_kib_max: rss_max.max(rss_end),
        router_rss_kib_end: rss_end,
        router_rss_samples: rss_n,
        router_cpu_us_per_sample: cpu.map_or(0.0, |c| c * 1e6 / got.max(1) as f64),
        router_forwarded: last.as_ref().map_or(0, |r| r.forwarded),
        router_batches: last.as_ref().map_or(0, |r| r.batches),
        samples_per_batch: last.as_ref().map_or(0.0, |r| if r.batches == 0 { 0.0 } else { r.forwarded as f64 / r.batches as f64 }),
    })
}

/// The floods of one `batch_delay` over their runs: medians with min and max.
#[derive(Debug, Clone, Serialize)]
pub struct FloodCell {
    pub batch_delay: String,
    pub received_per_s: Spread,
    pub written_per_s: Spread,
    pub samples_per_batch: Spread,
    pub router_cpu_us_per_sample: Spread,
    pub router_rss_kib_max: Spread,
    /// Whether the spread of received/s exceeds [`partita_lab::repeat::FLAG_SPREAD`].
    pub flagged: bool,
}

/// `partita bench router-flood`'s result file.
#[derive(Debug, Clone, Serialize)]
pub struct FloodReport {
    pub setup: SetupRecord,
    pub repeat: u32,
    /// Every flood in the order it ran (the batch delays interleaved).
    pub runs: Vec<FloodResult>,
    /// One per batch delay, in the order given.
    pub cells: Vec<FloodCell>,
    /// received/s of the last batch delay against the first: of the medians, and the range of the
    /// per-repeat ratios.
    pub ratio: Option<Spread>,
}

impl FloodReport {
    /// Groups `runs` (each batch delay of `batch_delays` `repeat` times) into cells.
    pub fn new(setup: SetupRecord, repeat: u32, batch_delays: &[String], runs: Vec<FloodResult>) -> FloodReport {
        let cells: Vec<FloodCell> = batch_delays
            .iter()
            .filter_map(|d| {
                let of = |f: fn(&FloodResult) -> f64| {
                    let v: Vec<f64> = runs.iter().filter(|r| &r.config.batch_delay == d).map(f).collect();
                    Spread::of(&v)
                };
                let received_per_s = of(|r| r.received_per_s)?;
                Some(FloodCell {
                    batch_delay: d.clone(),
                    received_per_s,
                    written_per_s: of(|r| r.written_per_s)?,
                    samples_per_batch: of(|r| r.samples_per_batch)?,
                    router_cpu_us_per_sample: of(|r| r.router_cpu_us_per_sample)?,
                    router_rss_kib_max: of(|r| r.router_rss_kib_max as f64)?,
                    flagged: received_per_s.flagged(),
                })
            })
            .collect();
        let ratio = match (batch_delays.first(), batch_delays.last()) {
            (Some(a), Some(b)) if batch_delays.len() > 1 => {
                let per = |d: &String, k: u32| runs.iter().find(|r| &r.config.batch_delay == d && r.repeat == k).map(|r| r.received_per_s);
                let ratios: Vec<f64> = (1..=repeat).filter_map(|k| Some(per(b, k)? / per(a, k)?.max(1.0))).collect();
                let median = |d: &String| cells.iter().find(|c| &c.batch_delay == d).map(|c| c.received_per_s.median);
                Spread::of(&ratios).zip(median(a).zip(median(b))).map(|(mut s, (ma, mb))| {
                    s.median = mb / ma.max(1.0);
                    s
                })
            }
            _ => None,
        };
        FloodReport { setup, repeat, runs, cells, ratio }
    }

    /// The table of the cells, with its caption (the setup) and the flag's footnote.
    pub fn markdown(&self, size: usize, seconds: f64, reliable: bool) -> String {
        let mut t = format!(
            "Router flood: {size} B {} samples for {seconds} s per flood, {}; medians over the runs. {}.\n\n",
            if reliable { "reliable" } else { "best-effort" },
            if self.repeat > 1 { format!("{} runs per batch delay, the batch delays interleaved", self.repeat) } else { "one run per batch delay".into() },
            self.setup.caption
        );
        t.push_str("| batch_delay | received/s | min–max | spread | written/s | samples per router batch | router CPU µs per sample | router RSS max KiB |\n");
        t.push_str("|---|---:|---:|---:|---:|---:|---:|---:|\n");
        for c in &self.cells {
            let _ = writeln!(
                t,
                "| {} | {:.0} | {} | {} | {:.0} | {:.1} | {:.2} | {:.0} |",
                c.batch_delay,
                c.received_per_s.median,
                c.received_per_s.range_cell(0),
                c.received_per_s.spread_cell(),
                c.written_per_s.median,
                c.samples_per_batch.median,
                c.router_cpu_us_per_sample.median,
                c.router_rss_kib_max.median
            );
        }
        if self.cells.iter().any(|c| c.flagged) {
            let _ = writeln!(t, "\n{}", partita_lab::repeat::flag_note("The received/s of a row marked", "received/s"));
        }
        if let (Some(r), [first, .., last]) = (&self.ratio, self.cells.as_slice()) {
            let _ = write!(t, "\nreceived/s with batch_delay {} against {}: {:.2}x", last.batch_delay, first.batch_delay, r.median);
            if r.runs > 1 {
                let _ = write!(t, " (per repeat {:.2}–{:.2}x)", r.min, r.max);
            }
            t.push('\n');
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_lab::setup::Setup;

    fn run(batch_delay: &str, repeat: u32, received_per_s: f64) -> FloodResult {
        FloodResult {
            config: FloodConfig { size: 64, seconds: 1.0, reliable: true, batch_delay: batch_delay.into() },
            repeat,
            written: 0,
            received: 0,
            seconds: 1.0,
            written_per_s: received_per_s,
            received_per_s,
            router_rss_kib_start: 1,
            router_rss_kib_max: 2,
            router_rss_kib_end: 2,
            router_rss_samples: 1,
            router_cpu_us_per_sample: 1.0,
            router_forwarded: 0,
            router_batches: 0,
            samples_per_batch: 1.0,
        }
    }

    #[test]
    fn floods_are_grouped_by_batch_delay_with_medians_ratio_and_flag() {
        let delays = ["0s".to_string(), "100us".to_string()];
        // Interleaved as they run; 0s steady, 100us not (spread 100/250 = 40 %).
        let runs = vec![run("0s", 1, 100.0), run("100us", 1, 200.0), run("0s", 2, 102.0), run("100us", 2, 300.0), run("0s", 3, 101.0), run("100us", 3, 250.0)];
        let r = FloodReport::new(Setup::default().record("test"), 3, &delays, runs);
        assert_eq!(r.cells.len(), 2);
        assert_eq!((r.cells[0].received_per_s.median, r.cells[1].received_per_s.median), (101.0, 250.0));
        assert!(!r.cells[0].flagged && r.cells[1].flagged);
        let ratio = r.ratio.unwrap();
        assert!((ratio.median - 250.0 / 101.0).abs() < 1e-9);
        assert!((ratio.min - 2.0).abs() < 1e-9 && (ratio.max - 300.0 / 102.0).abs() < 1e-9, "{ratio:?}");
        let md = r.markdown(64, 1.0, true);
        assert!(md.contains("3 runs per batch delay, the batch delays interleaved"), "{md}");
        assert!(md.contains("real-time setup: SCHED_FIFO 50"), "{md}");
        assert!(md.contains("| 100us | 250 | 200–300 | 40.0 % ! |"), "{md}");
        assert!(md.contains("received/s with batch_delay 100us against 0s: 2.48x (per repeat 2.00–2.94x)"), "{md}");
    }
}
