//! The Video_Recorder partition's application: synthetic cameras recorded into the ring, frames served over
//! DDS, or over two ARINC 653 queuing ports in a partition without a network ([`crate::recorder_ports`]).
//!
//! The capture thread draws and encodes every camera's frame at the configured rate and hands it to the ring's
//! writer thread through a bounded queue; it never waits on DDS or on the disk. Requests are answered as Cyclone delivers them, in a listener on its receive thread (no hand-off to an
//! application thread), from the newest frame kept in memory (`Live`) or from the ring (`AtTime`). The two
//! share only the ring index and the newest frames, each behind a mutex held for a lookup or an insertion,
//! never for I/O or encoding: requests, however many, cannot stall recording, and a monitor that crashes or
//! restarts is just a reader that comes and goes. Over ports, requests are answered the same way on a thread
//! of their own that takes them from the request port ([`Recorder::start_on_ports`]).
use crate::pattern;
use crate::recorder_ports::RecorderPorts;
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
    #[error("reply port {port:?} carries at most {max} bytes per message, but every reply is {needed} ({reply_size} of FrameReply, --reply-size, and the {header}-byte frame header): make the channel's max_message in the system file at least {needed}", header = partita_ports::dds_frame::HEADER)]
    ReplyPortTooSmall { port: String, max: u32, reply_size: usize, needed: usize },
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Counters, readable while the recorder runs.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) frames: AtomicU64,
    /// Frame slots skipped because drawing and writing fell behind the rate.
    pub(crate) late_ticks: AtomicU64,
    pub(crate) write_errors: AtomicU64,
    pub(crate) requests: AtomicU64,
    pub(crate) replies: AtomicU64,
    /// Replies that could not be brought down to `reply_size`.
    pub(crate) oversize_replies: AtomicU64,
    pub(crate) reply_errors: AtomicU64,
    /// Over ports: messages on the request port that are not a data sample of a `FrameRequest` (skipped).
    pub(crate) bad_requests: AtomicU64,
    /// Over ports: replies dropped because the reply port's queue stayed full.
    pub(crate) dropped_replies: AtomicU64,
    /// Over ports: replies dropped because they are larger than the reply port's maximum message.
    pub(crate) too_large_replies: AtomicU64,
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
    /// Over ports: messages on the request port that were not a data sample of a `FrameRequest` (skipped).
    pub bad_requests: u64,
    /// Over ports: replies dropped because the reply port's queue stayed full.
    pub dropped_replies: u64,
    /// Over ports: replies dropped because they are larger than the reply port's maximum message (the system
    /// file's channel is too small for the replies; [`Recorder::last_error`] says by how much).
    pub too_large_replies: u64,
    pub ring_records: u64,
}

/// The newest frame of a camera, kept in memory so `Live` requests need no disk read.
#[derive(Clone)]
struct Latest {
    meta: FrameMeta,
    image: Arc<Vec<u8>>,
}

pub(crate) struct Shared {
    pub(crate) stop: AtomicBool,
    pub(crate) counters: Counters,
    latest: Mutex<Vec<Option<Latest>>>,
    index: Arc<Mutex<RingIndex>>,
    last_error: Mutex<Option<String>>,
}

impl Shared {
    pub(crate) fn note_error(&self, e: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }
}

/// A running recorder. Dropping it stops recording and serving.
pub struct Recorder {
    shared: Arc<Shared>,
    capture: Option<JoinHandle<()>>,
    serving: Option<Serving>,
    open_report: OpenReport,
    domain_id: Option<u32>,
}

/// How requests reach the recorder.
enum Serving {
    /// The request listener (dropped first, as declared first), then the topics and participant it uses; held
    /// only to be dropped.
    Dds { _listener: ListeningReader, _request_topic: Topic<FrameRequest>, _reply_topic: Topic<FrameReply>, _participant: Participant },
    /// The thread that takes requests from the request port; it sees `stop` within one receive timeout.
    Ports(JoinHandle<()>),
}

impl Serving {
    fn is_running(&self) -> bool {
        match self {
            Serving::Dds { .. } => true,
            Serving::Ports(t) => !t.is_finished(),
        }
    }

    /// Stops serving (`stop` already set): deleting the DDS reader waits for a running callback; the port
    /// thread is joined.
    fn stop(self) -> Result<(), RecorderError> {
        match self {
            Serving::Dds { .. } => Ok(()),
            Serving::Ports(t) => t.join().map_err(|_| RecorderError::Panicked("port server")),
        }
    }
}

/// What both ways of serving start from: the checked configuration, the ring opened, the state the capture
/// and serving threads share.
struct Prepared {
    config: RecorderConfig,
    writer: RingWriter,
    open_report: OpenReport,
    shared: Arc<Shared>,
}

/// Wall-clock ns since the Unix epoch, the clock of DDS source timestamps and of frame capture times.
pub use partita_os::clock::unix_ns as now_ns;

impl Recorder {
    /// Opens the ring (scanning what a previous run left), joins the domain and starts recording and serving.
    /// A ring another recorder is writing is refused ([`RingError::InUse`]) before anything else starts.
    pub fn start(config: RecorderConfig, dds: &DomainConfig) -> Result<Self, RecorderError> {
        let prepared = Recorder::prepare(config)?;
        let participant = Participant::new(dds)?;
        let request_topic = Topic::<FrameRequest>::new(&participant, REQUEST_TOPIC, &request_qos())?;
        let reply_topic = Topic::<FrameReply>::new(&participant, REPLY_TOPIC, &reply_qos())?;
        let replies = Writer::new(&reply_topic, &reply_qos())?;
        let mut server = prepared.server();
        let listener = ListeningReader::typed(&request_topic, &request_qos(), move |sample| {
            if let Some(req) = sample.value {
                server.handle(&req, &replies);
            }
        })?;
        Recorder::record(prepared, Serving::Dds { _listener: listener, _request_topic: request_topic, _reply_topic: reply_topic, _participant: participant }, Some(dds.domain_id))
    }

    /// Opens the ring and starts recording and serving over two queuing ports instead of DDS, for a partition
    /// without a network: requests come from `ports.requests` and replies go to `ports.replies`, each sample a
    /// [`partita_ports::dds_frame::DdsFrame`] that the routing service exchanges with DDS. No DDS participant
    /// is made.
    ///
    /// With a `reply_size`, every reply has the same size, so a reply port too small for it is refused here
    /// ([`RecorderError::ReplyPortTooSmall`]) instead of dropping every reply.
    pub fn start_on_ports(config: RecorderConfig, ports: RecorderPorts) -> Result<Self, RecorderError> {
        if let Some(reply_size) = config.reply_size {
            let needed = reply_size + partita_ports::dds_frame::HEADER;
            let max = ports.replies.max_message();
            if needed > max as usize {
                return Err(RecorderError::ReplyPortTooSmall { port: ports.replies.name().to_string(), max, reply_size, needed });
            }
        }
        let prepared = Recorder::prepare(config)?;
        let serving = crate::recorder_ports::spawn(ports, prepared.server(), prepared.shared.clone())
            .map_err(|e| RecorderError::Config(format!("cannot start the port server thread: {e}")))?;
        Recorder::record(prepared, Serving::Ports(serving), None)
    }

    fn prepare(config: RecorderConfig) -> Result<Prepared, RecorderError> {
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
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            latest: Mutex::new(vec![None; config.cameras as usize]),
            index: writer.index(),
            last_error: Mutex::new(None),
        });
        Ok(Prepared { config, writer, open_report, shared })
    }

    /// Starts recording, last, so that an error before leaves no thread running; if even this fails, serving
    /// is stopped again.
    fn record(prepared: Prepared, serving: Serving, domain_id: Option<u32>) -> Result<Self, RecorderError> {
        let Prepared { config, writer, open_report, shared } = prepared;
        let capture = {
            let shared = shared.clone();
            std::thread::Builder::new().name("capture".into()).spawn(move || capture_loop(writer, &config, &shared))
        };
        let capture = match capture {
            Ok(c) => c,
            Err(e) => {
                shared.stop.store(true, Ordering::Relaxed);
                let _ = serving.stop();
                return Err(RecorderError::Config(format!("cannot start the capture thread: {e}")));
            }
        };
        Ok(Recorder { shared, capture: Some(capture), serving: Some(serving), open_report, domain_id })
    }

    /// What opening the ring found (records kept, damaged stretches skipped, bytes cut).
    pub fn open_report(&self) -> &OpenReport {
        &self.open_report
    }

    /// The DDS domain it serves on; `None` when it serves over ports.
    pub fn domain_id(&self) -> Option<u32> {
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
            bad_requests: l(&c.bad_requests),
            dropped_replies: l(&c.dropped_replies),
            too_large_replies: l(&c.too_large_replies),
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
        self.serving.as_ref().is_some_and(Serving::is_running) && self.capture.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops both threads and returns the final counters.
    pub fn stop(mut self) -> Result<RecorderStats, RecorderError> {
        self.shutdown()?;
        Ok(self.stats())
    }

    fn shutdown(&mut self) -> Result<(), RecorderError> {
        self.shared.stop.store(true, Ordering::Relaxed);
        // Stop answering first, then stop recording.
        let served = self.serving.take().map_or(Ok(()), Serving::stop);
        match self.capture.take().map(|t| t.join()) {
            Some(Err(_)) => Err(RecorderError::Panicked("capture")),
            _ => served,
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

impl Prepared {
    fn server(&self) -> Server {
        Server {
            reader: RingReader::new(&self.config.ring.dir),
            cameras: self.config.cameras,
            reply_size: self.config.reply_size,
            shared: self.shared.clone(),
        }
    }
}

pub(crate) struct Server {
    reader: RingReader,
    cameras: u32,
    reply_size: Option<usize>,
    shared: Arc<Shared>,
}

impl Server {
    /// Answers one request (on Cyclone's receive thread).
    fn handle(&mut self, req: &FrameRequest, replies: &Writer<FrameReply>) {
        let reply = self.reply_to(req);
        let c = &self.shared.counters;
        match replies.write(&reply) {
            Ok(()) => c.replies.fetch_add(1, Ordering::Relaxed),
            Err(e) => {
                self.shared.note_error(format!("writing a reply: {e}"));
                c.reply_errors.fetch_add(1, Ordering::Relaxed)
            }
        };
    }

    /// Counts one request and makes its reply, brought to `reply_size` when one is set: what is sent back,
    /// over DDS or a port.
    pub(crate) fn reply_to(&mut self, req: &FrameRequest) -> FrameReply {
        self.shared.counters.requests.fetch_add(1, Ordering::Relaxed);
        let mut reply = self.answer(req);
        if let Some(size) = self.reply_size {
            if !reply.fit_to(size) {
                self.shared.counters.oversize_replies.fetch_add(1, Ordering::Relaxed);
            }
        }
        reply
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
