//! Forwarding throughput and memory of the routing service under a sustained flood (`partita bench
//! router-flood`): this process writes samples of one topic as fast as it can on one domain, a `partita route`
//! process forwards them to a second domain, and a listening reader here counts what arrives. The router's
//! resident memory is sampled from `/proc/PID/status` throughout.
use crate::error::BenchError;
use partita_dds::{qos::Reliability, DomainConfig, ListeningReader, Participant, Qos, Topic, TopicType, Writer};
use serde::{Deserialize, Serialize};
use std::process::{Child, Command, Stdio};
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
}

/// What was measured.
#[derive(Debug, Clone, Serialize)]
pub struct FloodResult {
    pub config: FloodConfig,
    pub written: u64,
    pub received: u64,
    pub seconds: f64,
    pub written_per_s: f64,
    pub received_per_s: f64,
    pub router_rss_kib_start: u64,
    pub router_rss_kib_max: u64,
    pub router_rss_kib_end: u64,
    pub router_rss_samples: usize,
}

struct Router(Child);

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn fail(what: &str) -> impl FnOnce(partita_dds::DdsError) -> BenchError + '_ {
    move |e| BenchError::Driver { transport: "router-flood".into(), source: crate::DriverError::Other(format!("{what}: {e}")) }
}

/// Runs the flood. `program` is the `partita` binary (for `partita route`).
pub fn run(cfg: &FloodConfig, program: &std::path::Path, stop: &AtomicBool) -> Result<FloodResult, BenchError> {
    let a = 1 + std::process::id() % 100;
    let b = a + 100;
    let conf = std::env::temp_dir().join(format!("partita-flood-{}.toml", std::process::id()));
    let text = format!(
        "name = \"flood\"\nstats_period = \"10s\"\n[[side]]\nname = \"a\"\ndomain = {a}\n[[side]]\nname = \"b\"\ndomain = {b}\n\
         [[route]]\nfrom = \"a\"\nto = \"b\"\nallow = [\"partita/bench/flood\"]\n"
    );
    std::fs::write(&conf, text).map_err(|e| BenchError::Write { path: conf.clone(), source: e })?;
    let child = Command::new(program)
        .args(["route", &conf.to_string_lossy()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| BenchError::Server { transport: "router-flood".into(), reason: format!("starting partita route: {e}") })?;
    let router = Router(child);
    let pid = router.0.id();

    let qos = if cfg.reliable {
        Qos::new().reliability(Reliability::Reliable { max_blocking: Duration::from_secs(1) }).keep_all()
    } else {
        Qos::best_effort().keep_last(256)
    };
    let pa = Participant::new(&DomainConfig::loopback(a)).map_err(fail("participant on the source domain"))?;
    let pb = Participant::new(&DomainConfig::loopback(b)).map_err(fail("participant on the destination domain"))?;
    let ta = Topic::<Flood>::new(&pa, "partita/bench/flood", &qos).map_err(fail("topic"))?;
    let tb = Topic::<Flood>::new(&pb, "partita/bench/flood", &qos).map_err(fail("topic"))?;
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
    let rss_end = rss_kib(pid).unwrap_or(0);
    drop(router);
    let _ = std::fs::remove_file(&conf);
    if stop.load(Ordering::Relaxed) {
        return Err(BenchError::Interrupted);
    }
    Ok(FloodResult {
        config: cfg.clone(),
        written,
        received: got,
        seconds: elapsed,
        written_per_s: written as f64 / elapsed,
        received_per_s: got as f64 / elapsed,
        router_rss_kib_start: rss_start,
        router_rss_kib_max: rss_max.max(rss_end),
        router_rss_kib_end: rss_end,
        router_rss_samples: rss_n,
    })
}
