//! A monitoring node: asks the recorder for frames, measures every response time, keeps the latest frame.
//!
//! The measuring loop ([`measure`]) is the same for DDS and for the raw-UDP baseline ([`crate::udp`]): one
//! request at a time (closed loop, "as fast as answered") or at a fixed rate (open loop: a late answer delays
//! the next request, it is never sent in a burst), a warm-up that is not measured, and a per-request timeout
//! after which the request counts as lost and the next one goes out. An open loop may jitter its gaps
//! ([`LoopConfig::jitter`]): a fixed period keeps every request at the same few phases of a partitioned
//! system's major frame, so its percentiles are those phases' and not the plan's.
use crate::pattern;
use crate::summary::Summary;
use crate::surveillance::*;
use partita_dds::{DomainConfig, Participant, Reader, Topic, Writer};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How many requests, how fast, for how long.
#[derive(Debug, Clone)]
pub struct LoopConfig {
    /// Requests measured after the warm-up (0: until `duration`).
    pub count: u64,
    pub warmup: u64,
    /// Requests per second; `None`: the next request as soon as the answer arrives.
    pub rate: Option<f64>,
    /// With `rate`: each gap between requests is the period plus a uniform draw from ±`jitter` (the mean rate
    /// stays `rate`; a jitter at least the period is cut to just under it). Zero: a fixed period.
    pub jitter: Duration,
    /// Stop after this long, whatever `count` says.
    pub duration: Option<Duration>,
    /// A request not answered within this is counted as timed out.
    pub timeout: Duration,
}

impl Default for LoopConfig {
    fn default() -> Self {
        LoopConfig { count: 1000, warmup: 100, rate: None, jitter: Duration::ZERO, duration: None, timeout: Duration::from_secs(1) }
    }
}

/// Live figures, handed to the progress callback about once a second.
#[derive(Debug, Clone)]
pub struct Progress {
    pub elapsed: Duration,
    pub measured: u64,
    pub timeouts: u64,
    /// Over the samples since the previous progress report.
    pub recent: Summary,
    /// Those samples, ns.
    pub recent_ns: Vec<u64>,
}

/// What a measuring run found.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Report {
    /// `dds` or `udp`.
    pub transport: String,
    pub name: String,
    pub requests: u64,
    pub answered: u64,
    pub timeouts: u64,
    /// Answers that said the request could not be served (no such camera, no frame yet).
    pub refused: u64,
    /// Serialized size of the last answer (DDS: the CDR sample; UDP: the payload), bytes; set by the caller of
    /// [`measure`].
    pub reply_bytes: u64,
    pub elapsed_s: f64,
    pub summary: Summary,
    /// The last frame received, when the answers carry frames.
    pub last_frame: Option<FrameInfo>,
    /// Raw response times of the measured requests, in order, ns.
    pub samples_ns: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameInfo {
    pub camera: u32,
    pub frame: u64,
    pub captured_ns: i64,
    pub width: u32,
    pub height: u32,
    /// Whether the decoded image is exactly the test pattern of that camera, frame and time; `None` when the
    /// answer carried no image (it did not fit the recorder's `--reply-size`).
    pub content_ok: Option<bool>,
}

/// The outcome of one request.
pub enum Outcome {
    /// Answered (the caller knows the answer and its size).
    Answered,
    /// Answered with a refusal (counted, not measured).
    Refused,
    TimedOut,
}

/// Runs the measuring loop; `op(seq, timeout)` sends request `seq` and waits for its answer.
pub fn measure(
    config: &LoopConfig,
    mut progress: impl FnMut(&Progress),
    mut op: impl FnMut(u64, Duration) -> std::io::Result<Outcome>,
) -> std::io::Result<Report> {
    let mut report = Report::default();
    let start = Instant::now();
    let period = config.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    let mut gaps = period.map(|p| Gaps::new(p, config.jitter));
    let mut next = Instant::now();
    let mut last_progress = Instant::now();
    let mut recent_from = 0usize;
    let total = if config.count == 0 { u64::MAX } else { config.warmup + config.count };
    let mut seq = 0u64;
    while seq < total {
        if config.duration.is_some_and(|d| start.elapsed() >= d) {
            break;
        }
        if let Some(g) = gaps.as_mut() {
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            }
            next = next.max(now) + g.next_gap();
        }
        let t0 = Instant::now();
        let outcome = op(seq, config.timeout)?;
        let dt = t0.elapsed();
        report.requests += 1;
        match outcome {
            Outcome::Answered => {
                report.answered += 1;
                if seq >= config.warmup {
                    report.samples_ns.push(dt.as_nanos() as u64);
                }
            }
            Outcome::Refused => report.refused += 1,
            Outcome::TimedOut => report.timeouts += 1,
        }
        seq += 1;
        if last_progress.elapsed() >= Duration::from_secs(1) {
            progress(&Progress {
                elapsed: start.elapsed(),
                measured: report.samples_ns.len() as u64,
                timeouts: report.timeouts,
                recent: Summary::of_ns(&report.samples_ns[recent_from..]),
                recent_ns: report.samples_ns[recent_from..].to_vec(),
            });
            recent_from = report.samples_ns.len();
            last_progress = Instant::now();
        }
    }
    report.elapsed_s = start.elapsed().as_secs_f64();
    report.summary = Summary::of_ns(&report.samples_ns);
    Ok(report)
}

/// The gaps of an open loop: the period, plus a uniform draw from ±jitter when there is one (a small seeded
/// generator, splitmix64: runs are repeatable, and no two gaps in a row are alike).
struct Gaps {
    period_ns: u64,
    jitter_ns: u64,
    state: u64,
}

impl Gaps {
    fn new(period: Duration, jitter: Duration) -> Gaps {
        let period_ns = period.as_nanos().min(u128::from(u64::MAX / 4)) as u64;
        let jitter_ns = (jitter.as_nanos().min(u128::from(u64::MAX / 4)) as u64).min(period_ns.saturating_sub(1));
        Gaps { period_ns, jitter_ns, state: 0x9E37_79B9_7F4A_7C15 ^ period_ns }
    }

    fn next_gap(&mut self) -> Duration {
        if self.jitter_ns == 0 {
            return Duration::from_nanos(self.period_ns);
        }
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let offset = z % (2 * self.jitter_ns + 1);
        Duration::from_nanos(self.period_ns - self.jitter_ns + offset)
    }
}

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The monitor's name: the key of its requests and of the answers meant for it.
    pub name: String,
    pub camera: u32,
    /// `None`: the live frame; `Some(t)`: the recorded frame nearest wall-clock time `t` (ns since the epoch).
    pub at_ns: Option<i64>,
    pub measure: LoopConfig,
    /// How long to wait for the first answer (discovery, routes being set up, the recorder's first frame).
    pub connect_timeout: Duration,
    /// Write the last frame received here (PNG).
    pub save_frame: Option<PathBuf>,
    /// Also save the last frame once a second while measuring (a live view of the camera: `partita web`).
    /// The copy is taken in the loop (a memcpy of the reply's image, once a second) and written between
    /// requests, in the progress callback: no request's time includes the write.
    pub save_frame_live: bool,
}

impl MonitorConfig {
    pub fn new(name: &str) -> Self {
        MonitorConfig {
            name: name.into(),
            camera: 0,
            at_ns: None,
            measure: LoopConfig::default(),
            connect_timeout: Duration::from_secs(30),
            save_frame: None,
            save_frame_live: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("DDS: {0}")]
    Dds(#[from] partita_dds::DdsError),
    #[error("no recorder answered within {0:?} (is it running, and is the routing partition forwarding {REQUEST_TOPIC} and {REPLY_TOPIC}?)")]
    NoRecorder(Duration),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("saving the frame to {path}: {source}")]
    Save { path: PathBuf, source: std::io::Error },
}

/// A monitor's DDS endpoints.
pub struct MonitorClient {
    name: String,
    requests: Writer<FrameRequest>,
    replies: Reader<FrameReply>,
    _topics: (Topic<FrameRequest>, Topic<FrameReply>),
    _participant: Participant,
    /// Request numbers go on across [`MonitorClient::connect`] and [`measure`] so that a late answer to an
    /// earlier request is never taken for the answer to a later one.
    next_seq: u64,
    last: Option<FrameReply>,
}

impl MonitorClient {
    pub fn new(name: &str, dds: &DomainConfig) -> Result<Self, MonitorError> {
        let participant = Participant::new(dds)?;
        let req_topic = Topic::<FrameRequest>::new(&participant, REQUEST_TOPIC, &request_qos())?;
        let rep_topic = Topic::<FrameReply>::new(&participant, REPLY_TOPIC, &reply_qos())?;
        let requests = Writer::new(&req_topic, &request_qos())?;
        let replies = Reader::new(&rep_topic, &reply_qos())?;
        Ok(MonitorClient {
            name: name.into(),
            requests,
            replies,
            _topics: (req_topic, rep_topic),
            _participant: participant,
            next_seq: 0,
            last: None,
        })
    }

    /// Sends one request and waits up to `timeout` for its answer.
    pub fn request(&mut self, camera: u32, at_ns: Option<i64>, timeout: Duration) -> Result<Option<FrameReply>, MonitorError> {
        let seq = self.next_seq;
        self.next_seq += 1;
        let req = FrameRequest {
            monitor: self.name.clone(),
            seq,
            camera,
            mode: if at_ns.is_some() { CaptureMode::AtTime } else { CaptureMode::Live },
            at_ns: at_ns.unwrap_or(0),
        };
        let deadline = Instant::now() + timeout;
        self.requests.write(&req)?;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            for s in self.replies.take_wait(deadline - now)? {
                if let Some(r) = s.value {
                    if r.monitor == self.name && r.seq == seq {
                        return Ok(Some(r));
                    }
                }
            }
        }
    }

    /// Repeats a request until the recorder answers with a frame (discovery, routes, first frame).
    pub fn connect(&mut self, camera: u32, within: Duration) -> Result<FrameReply, MonitorError> {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Some(r) = self.request(camera, None, Duration::from_millis(250))? {
                if r.status == ReplyStatus::Ok {
                    return Ok(r);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Err(MonitorError::NoRecorder(within))
    }

    /// Writes live-frame requests back to back for `duration`, without waiting for answers (taking and
    /// dropping whatever answers arrive): a flood that loads the routing and recorder partitions. Returns the
    /// number of requests written.
    /// `progress(written)` is called about once a second.
    pub fn flood(&mut self, camera: u32, duration: Duration, mut progress: impl FnMut(u64)) -> Result<u64, MonitorError> {
        let end = Instant::now() + duration;
        let mut written = 0u64;
        let mut report = Instant::now() + Duration::from_secs(1);
        while Instant::now() < end {
            if Instant::now() >= report {
                progress(written);
                report += Duration::from_secs(1);
            }
            let req = FrameRequest { monitor: self.name.clone(), seq: self.next_seq, camera, mode: CaptureMode::Live, at_ns: 0 };
            self.next_seq += 1;
            self.requests.write(&req)?;
            written += 1;
            if written.is_multiple_of(64) {
                let _ = self.replies.take()?;
            }
        }
        Ok(written)
    }

    /// The last answer that carried a frame.
    pub fn last_reply(&self) -> Option<&FrameReply> {
        self.last.as_ref()
    }
}

/// Checks a reply's image against the test pattern it claims to be.
pub fn frame_info(r: &FrameReply) -> Option<FrameInfo> {
    if r.status != ReplyStatus::Ok {
        return None;
    }
    let content_ok = (r.encoding == ImageEncoding::Png).then(|| {
        pattern::decode_png(&r.image)
            .map(|img| img == pattern::render(r.camera, r.frame, r.captured_ns, r.width, r.height))
            .unwrap_or(false)
    });
    Some(FrameInfo { camera: r.camera, frame: r.frame, captured_ns: r.captured_ns, width: r.width, height: r.height, content_ok })
}

/// Writes `bytes` to `path` through a temporary file, so a reader never sees half an image.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// Connects, measures, checks and saves the last frame.
pub fn run(config: &MonitorConfig, dds: &DomainConfig, mut progress: impl FnMut(&Progress)) -> Result<Report, MonitorError> {
    let mut client = MonitorClient::new(&config.name, dds)?;
    let first = client.connect(config.camera, config.connect_timeout)?;
    client.last = Some(first);
    let (camera, at_ns) = (config.camera, config.at_ns);
    let mut dds_error = None;
    // The live frame: asked for by the progress callback, copied by the next answered request, written by the
    // callback after it.
    let live = config.save_frame.as_ref().filter(|_| config.save_frame_live);
    let wanted = std::cell::Cell::new(live.is_some());
    let taken: std::cell::RefCell<Option<Vec<u8>>> = std::cell::RefCell::new(None);
    let progress = |p: &Progress| {
        progress(p);
        if let (Some(path), Some(image)) = (live, taken.borrow_mut().take()) {
            let _ = write_atomically(path, &image);
        }
        wanted.set(live.is_some());
    };
    let mut report = measure(&config.measure, progress, |_, timeout| {
        match client.request(camera, at_ns, timeout) {
            Ok(Some(r)) if r.status == ReplyStatus::Ok => {
                if wanted.get() && r.encoding == ImageEncoding::Png {
                    wanted.set(false);
                    *taken.borrow_mut() = Some(r.image.clone());
                }
                client.last = Some(r);
                Ok(Outcome::Answered)
            }
            Ok(Some(_)) => Ok(Outcome::Refused),
            Ok(None) => Ok(Outcome::TimedOut),
            Err(e) => {
                dds_error = Some(e.to_string());
                Err(std::io::Error::other("DDS error"))
            }
        }
    })
    .map_err(|e| match dds_error.take() {
        Some(d) => MonitorError::Io(std::io::Error::other(d)),
        None => MonitorError::Io(e),
    })?;
    report.transport = "dds".into();
    report.name = config.name.clone();
    if let Some(last) = client.last_reply() {
        // Outside the measuring loop: re-encoding a reply only to learn its size is not part of a request.
        report.reply_bytes = serialized_size(last) as u64;
        report.last_frame = frame_info(last);
        if let (Some(path), ImageEncoding::Png) = (&config.save_frame, last.encoding) {
            write_atomically(path, &last.image).map_err(|source| MonitorError::Save { path: path.clone(), source })?;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_period_gives_the_same_gap_every_time() {
        let mut g = Gaps::new(Duration::from_millis(5), Duration::ZERO);
        assert!((0..100).all(|_| g.next_gap() == Duration::from_millis(5)));
    }

    #[test]
    fn jittered_gaps_spread_over_the_whole_range_and_keep_the_mean_rate() {
        let (p, j) = (Duration::from_millis(5), Duration::from_micros(1500));
        let mut g = Gaps::new(p, j);
        let gaps: Vec<u64> = (0..20_000).map(|_| g.next_gap().as_nanos() as u64).collect();
        let (lo, hi) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
        assert!(lo >= 3_500_000 && hi <= 6_500_000, "{lo}..{hi}");
        // Both ends of the range are reached (within 1 % of the width), and the mean is the period.
        assert!(lo < 3_530_000 && hi > 6_470_000, "{lo}..{hi}");
        let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
        assert!((mean - 5e6).abs() < 30_000.0, "mean {mean}");
        // The phase against a 1.5 ms frame is spread, not stuck at a few values.
        let mut t = 0u64;
        let mut bins = [0u32; 15];
        for x in &gaps {
            t += x;
            bins[((t % 1_500_000) / 100_000) as usize] += 1;
        }
        assert!(bins.iter().all(|&b| b > 900), "{bins:?}");
    }

    #[test]
    fn a_jitter_of_the_period_or_more_never_gives_a_zero_gap() {
        let mut g = Gaps::new(Duration::from_millis(1), Duration::from_millis(3));
        assert!((0..10_000).all(|_| g.next_gap() > Duration::ZERO));
    }
}
