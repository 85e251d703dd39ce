//! The Video_Recorder partition's application: synthetic cameras recorded into the ring, frames served over
//! DDS.
//!
//! The capture thread draws and encodes every camera's frame at the configured rate and hands it to the ring's
//! writer thread through a bounded queue; it never waits on DDS or on the disk. Requests are answered as Cyclone delivers them, in a listener on its receive thread (no hand-off to an
//! application thread), from the newest frame kept in memory (`Live`) or from the ring (`AtTime`). The two
//! share only the ring index and the newest frames, each behind a mutex held for a lookup or an insertion,
//! never for I/O or encoding: requests, however many, cannot stall recording, and a monitor that crashes or
//! restarts is just a reader that comes and goes.
use crate::pattern;
use crate::ring::{Entry, FrameMeta, OpenReport, RingConfig, RingError, RingIndex, RingReader, RingWriter, ENCODING_PNG};
use crate::surveillance::*;
use partita_dds::{DomainConfig, ListeningReader, Participant, Topic, Writer};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct RecorderConfig {
    pub ring: RingConfig,
    pub cameras: u32,
    pub width: u32,
    pub height: u32,
    /// Frames per second, per camera.
    pub fps: f64,
    /// Make every reply exactly this many serialized bytes ([`FrameReply::fit_to`]).
    pub reply_size: Option<usize>,
}

impl RecorderConfig {
    pub fn new(ring: RingConfig) -> Self {
        RecorderConfig { ring, cameras: 1, width: 320, height: 240, fps: 10.0, reply_size: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Ring(#[from] RingError),
    #[error("DDS: {0}")]
    Dds(#[from] partita_dds::DdsError),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Counters, readable while the recorder runs.
#[derive(Debug, Default)]
struct Counters {
    frames: AtomicU64,
    /// Frame slots skipped because drawing and writing fell behind the rate.
    late_ticks: AtomicU64,
    write_errors: AtomicU64,
    requests: AtomicU64,
    replies: AtomicU64,
    /// Replies that could not be brought down to `reply_size`.
    oversize_replies: AtomicU64,
    reply_errors: AtomicU64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct RecorderStats {
    pub frames: u64,
    pub late_ticks: u64,
    pub write_errors: u64,
    pub requests: u64,
    pub replies: u64,
    pub oversize_replies: u64,
    pub reply_errors: u64,
    pub ring_records: u64,
}

/// The newest frame of a camera, kept in memory so `Live` requests need no disk read.
#[derive(Clone)]
struct Latest {
    meta: FrameMeta,
    image: Arc<Vec<u8>>,
}

struct Shared {
    stop: AtomicBool,
    counters: Counters,
    latest: Mutex<Vec<Option<Latest>>>,
    index: Arc<Mutex<RingIndex>>,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    fn note_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

/// A running recorder. Dropping it stops both threads.
pub struct Recorder {
    shared: Arc<Shared>,
    capture: Option<JoinHandle<()>>,
    /// The request listener (dropped first), then the topics and participant it uses.
    serving: Option<(ListeningReader, Topic<FrameRequest>, Topic<FrameReply>, Participant)>,
    open_report: OpenReport,
    domain_id: u32,
}

/// Wall-clock ns since the Unix epoch, the clock of DDS source timestamps and of frame capture times.
pub use partita_os::clock::unix_ns as now_ns;

impl Recorder {
    /// Opens the ring (scanning what a previous run left), joins the domain and starts recording and serving.
    /// A ring another recorder is writing is refused ([`RingError::InUse`]) before anything else starts.
    pub fn start(config: RecorderConfig, dds: &DomainConfig) -> Result<Self, RecorderError> {
        if config.cameras == 0 || config.width == 0 || config.height == 0 {
            return Err(RecorderError::Config("cameras, width and height must be at least 1".into()));
        }
        if config.width > 8192 || config.height > 8192 {
            return Err(RecorderError::Config("width and height are at most 8192".into()));
        }
        if !(config.fps > 0.0 && config.fps <= 1000.0) {
            return Err(RecorderError::Config(format!("fps {} is not in (0, 1000]", config.fps)));
        }
        let (writer, open_report) = RingWriter::open(config.ring.clone())?;
        let participant = Participant::new(dds)?;
        let request_topic = Topic::<FrameRequest>::new(&participant, REQUEST_TOPIC, &request_qos())?;
        let reply_topic = Topic::<FrameReply>::new(&participant, REPLY_TOPIC, &reply_qos())?;
        let replies = Writer::new(&reply_topic, &reply_qos())?;

        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            latest: Mutex::new(vec![None; config.cameras as usize]),
            index: writer.index(),
            last_error: Mutex::new(None),
        });
        let mut server = Server {
            reader: RingReader::new(&config.ring.dir),
            cameras: config.cameras,
            reply_size: config.reply_size,
            shared: shared.clone(),
        };
        let listener = ListeningReader::typed(&request_topic, &request_qos(), move |sample| {
            if let Some(req) = sample.value {
                server.handle(&req, &replies);
            }
        })?;
        // Recording starts last, so that an error above leaves no thread running.
        let capture = {
            let (shared, config) = (shared.clone(), config.clone());
            std::thread::Builder::new()
                .name("capture".into())
                .spawn(move || capture_loop(writer, &config, &shared))
                .map_err(|e| RecorderError::Config(format!("cannot start the capture thread: {e}")))?
        };
        Ok(Recorder {
            shared,
            capture: Some(capture),
            serving: Some((listener, request_topic, reply_topic, participant)),
            open_report,
            domain_id: dds.domain_id,
        })
    }

    /// What opening the ring found (records kept, damaged stretches skipped, bytes cut).
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    pub fn domain_id(&self) -> u32 {
        self.domain_id
    }

    pub fn stats(&self) -> RecorderStats {
        let c = &self.shared.counters;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RecorderStats {
            frames: l(&c.frames),
            late_ticks: l(&c.late_ticks),
            write_errors: l(&c.write_errors),
            requests: l(&c.requests),
            replies: l(&c.replies),
            oversize_replies: l(&c.oversize_replies),
            reply_errors: l(&c.reply_errors),
            ring_records: self.shared.index.lock().unwrap_or_else(|p| p.into_inner()).len() as u64,
        }
    }

    /// The newest recorded frame of `camera`.
    pub fn latest(&self, camera: u32) -> Option<FrameMeta> {
        let latest = self.shared.latest.lock().unwrap_or_else(|p| p.into_inner());
        latest.get(camera as usize).and_then(|l| l.as_ref().map(|l| l.meta))
    }

    /// The ring's records, oldest first.
    pub fn ring_entries(&self) -> Vec<Entry> {
        self.shared.index.lock().unwrap_or_else(|p| p.into_inner()).entries().copied().collect()
    }

    /// The last write or serving error, if any.
    pub fn last_error(&self) -> Option<String> {
        self.shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// True while the capture thread runs and requests are served.
    pub fn is_running(&self) -> bool {
        self.serving.is_some() && self.capture.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops both threads and returns the final counters.
    pub fn stop(mut self) -> Result<RecorderStats, RecorderError> {
        self.shutdown()?;
        Ok(self.stats())
    }

    fn shutdown(&mut self) -> Result<(), RecorderError> {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Stop answering first (deleting the reader waits for a running callback), then stop recording.
        drop(self.serving.take());
        match self.capture.take().map(|t| t.join()) {
            Some(Err(_)) => Err(RecorderError::Panicked("capture")),
            _ => Ok(()),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// The nice value of the capture thread: recording is the partition's critical function, answering requests is
/// not, so inside the partition's CPU share the capture thread weighs about ten times a serving thread (CFS
/// weights nice -10 against 0 at 9548:1024) and a request flood cannot starve it.
pub const CAPTURE_NICE: i32 = -10;

/// Frames waiting for the disk: at 10 fps, 6.4 s of stalled writes before frames are dropped (and counted).
const WRITE_QUEUE: usize = 64;

fn capture_loop(ring: RingWriter, config: &RecorderConfig, shared: &Arc<Shared>) {
    // Failure (no CAP_SYS_NICE) leaves the default weight.
    if let Err(e) = partita_os::sched::set_current_thread_nice(CAPTURE_NICE) {
        shared.note_error(format!("could not raise the capture thread to nice {CAPTURE_NICE}: {e}"));
    }
    // Capture never waits for the disk: records go to a writer thread through a bounded queue; a disk that
    // stalls (writeback throttling, a slow device) delays records, it does not delay capture.
    let mut next_frame: Vec<u64> = (0..config.cameras).map(|c| ring.next_frame(c)).collect();
    let (queue, records) = std::sync::mpsc::sync_channel::<(FrameMeta, Arc<Vec<u8>>)>(WRITE_QUEUE);
    let writer = {
        let shared = shared.clone();
        std::thread::Builder::new().name("ring-writer".into()).spawn(move || {
            let mut ring = ring;
            for (meta, png) in records {
                if let Err(e) = ring.append(meta, &png) {
                    // Keep going: a full or failing disk must not stop live frames.
                    shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                    shared.note_error(e.to_string());
                }
            }
            if let Err(e) = ring.sync() {
                shared.note_error(e.to_string());
            }
        })
    };
    let writer = match writer {
        Ok(w) => w,
        Err(e) => {
            shared.note_error(format!("cannot start the ring writer thread: {e}"));
            return;
        }
    };
    let period = Duration::from_secs_f64(1.0 / config.fps);
    let mut next = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        for camera in 0..config.cameras {
            let captured_ns = now_ns();
            let frame = next_frame[camera as usize];
            next_frame[camera as usize] += 1;
            let img = pattern::render(camera, frame, captured_ns, config.width, config.height);
            let meta = FrameMeta { camera, frame, captured_ns, width: config.width, height: config.height, encoding: ENCODING_PNG };
            let png = match pattern::encode_png(&img) {
                Ok(p) => Arc::new(p),
                Err(e) => {
                    shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                    shared.note_error(e.to_string());
                    continue;
                }
            };
            if queue.try_send((meta, png.clone())).is_err() {
                shared.counters.write_errors.fetch_add(1, Ordering::Relaxed);
                shared.note_error(format!("the disk is {WRITE_QUEUE} frames behind: frame {frame} of camera {camera} not recorded"));
            }
            shared.latest.lock().unwrap_or_else(|p| p.into_inner())[camera as usize] = Some(Latest { meta, image: png });
            shared.counters.frames.fetch_add(1, Ordering::Relaxed);
        }
        next += period;
        let now = Instant::now();
        if next < now {
            // Behind: skip the slots already missed rather than bursting to catch up.
            let behind = (now - next).as_nanos() / period.as_nanos().max(1);
            shared.counters.late_ticks.fetch_add(behind as u64 + 1, Ordering::Relaxed);
            next = now;
            continue;
        }
        while !shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
        }
    }
    drop(queue);
    if writer.join().is_err() {
        shared.note_error("the ring writer thread panicked".into());
    }
}

struct Server {
    reader: RingReader,
    cameras: u32,
    reply_size: Option<usize>,
    shared: Arc<Shared>,
}

impl Server {
    /// Answers one request (on Cyclone's receive thread).
    fn handle(&mut self, req: &FrameRequest, replies: &Writer<FrameReply>) {
        let shared = self.shared.clone();
        let c = &shared.counters;
        c.requests.fetch_add(1, Ordering::Relaxed);
        let mut reply = self.answer(req);
        if let Some(size) = self.reply_size {
            if !reply.fit_to(size) {
                c.oversize_replies.fetch_add(1, Ordering::Relaxed);
            }
        }
        match replies.write(&reply) {
            Ok(()) => c.replies.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                self.shared.note_error(format!("writing a reply: {e}"));
                c.reply_errors.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// The reply to one request.
    pub(crate) fn answer(&mut self, req: &FrameRequest) -> FrameReply {
        let mut reply = FrameReply {
            monitor: req.monitor.clone(),
            seq: req.seq,
            camera: req.camera,
            status: ReplyStatus::NoFrame,
            frame: 0,
            captured_ns: 0,
            width: 0,
            height: 0,
            encoding: ImageEncoding::Omitted,
            image: Vec::new(),
            padding: Vec::new(),
        };
        if req.camera >= self.cameras {
            reply.status = ReplyStatus::NoSuchCamera;
            return reply;
        }
        let found = match req.mode {
            CaptureMode::Live => {
                let latest = self.shared.latest.lock().unwrap_or_else(|p| p.into_inner())[req.camera as usize].clone();
                latest.map(|l| (l.meta, l.image.to_vec()))
            }
            CaptureMode::AtTime => self.recorded(req.camera, req.at_ns),
        };
        if let Some((meta, image)) = found {
            reply.status = ReplyStatus::Ok;
            reply.frame = meta.frame;
            reply.captured_ns = meta.captured_ns;
            reply.width = meta.width;
            reply.height = meta.height;
            reply.encoding = ImageEncoding::Png;
            reply.image = image;
        }
        reply
    }

    /// The recorded frame nearest `at_ns`, read from the ring. The writer may reuse the record's segment between
    /// the lookup and the read; then the lookup is simply repeated.
    fn recorded(&mut self, camera: u32, at_ns: i64) -> Option<(FrameMeta, Vec<u8>)> {
        for _ in 0..3 {
            let entry = self.shared.index.lock().unwrap_or_else(|p| p.into_inner()).nearest(camera, at_ns)?;
            match self.reader.read(&entry) {
                Ok(image) => return Some((entry.meta, image)),
                Err(RingError::Stale { .. }) => continue,
                Err(e) => {
                    self.shared.note_error(e.to_string());
                    return None;
                }
            }
        }
        None
    }
}
