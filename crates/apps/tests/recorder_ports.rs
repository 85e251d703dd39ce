//! The recorder served over two queuing ports made in this process, as the routing service's ends would use
//! them: requests go in as DDS frames of `FrameRequest`, replies come back as DDS frames of `FrameReply` with
//! DDS's key hash; garbage on the request port is counted and skipped, a reply that does not fit its port is
//! counted and dropped, and no DDS participant is made.
use partita_apps::recorder::{Recorder, RecorderConfig, RecorderError};
use partita_apps::recorder_ports::{monitor_key_hash, RecorderPorts, REPLY_WAIT};
use partita_apps::ring::RingConfig;
use partita_apps::surveillance::{CaptureMode, FrameReply, FrameRequest, ImageEncoding, ReplyStatus};
use partita_dds::cdr;
use partita_ports::dds_frame::{DdsFrame, SampleKind};
use partita_ports::{create_status, ChannelMemory, PortKind, QueuingDestination, QueuingSource, Timeout};
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct TempDir(PathBuf);
impl TempDir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("partita-recorder-ports-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        TempDir(p)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One queuing channel's two ends.
fn channel(name: &str, max_message: u32, depth: u64) -> (QueuingSource, QueuingDestination) {
    let c = ChannelMemory::create(name, PortKind::Queuing, max_message, depth).unwrap();
    let source = QueuingSource::open(name, max_message, depth, c.source(create_status(name).unwrap()).unwrap()).unwrap();
    let destination = QueuingDestination::open(name, max_message, depth, c.destination(create_status(name).unwrap()).unwrap()).unwrap();
    (source, destination)
}

/// The routing service's ends of the two channels.
struct Router {
    requests: QueuingSource,
    replies: QueuingDestination,
    buffer: Vec<u8>,
}

impl Router {
    fn send(&mut self, message: &[u8]) {
        self.requests.send(message, Timeout::Immediate).unwrap();
    }

    fn request(&mut self, monitor: &str, seq: u64, camera: u32) {
        let request = FrameRequest { monitor: monitor.into(), seq, camera, mode: CaptureMode::Live, at_ns: 0 };
        let cdr = cdr::to_vec(&request).unwrap();
        self.send(&DdsFrame { kind: SampleKind::Data, source_timestamp_ns: Some(1), key_hash: monitor_key_hash(monitor), cdr: &cdr }.to_vec());
    }

    /// The next reply frame's kind, timestamp, key hash and decoded reply.
    fn reply(&mut self) -> (SampleKind, Option<i64>, [u8; 16], FrameReply) {
        let r = self.replies.receive(&mut self.buffer, Timeout::After(Duration::from_secs(5))).expect("a reply within 5 s");
        let frame = DdsFrame::read(&self.buffer[..r.len]).unwrap();
        (frame.kind, frame.source_timestamp_ns, frame.key_hash, cdr::from_slice(frame.cdr).unwrap())
    }
}

fn config(dir: &TempDir) -> RecorderConfig {
    RecorderConfig { width: 64, height: 48, fps: 50.0, ..RecorderConfig::new(RingConfig::new(&dir.0, 4 << 20)) }
}

/// A recorder on ports with a request channel and a reply channel of `reply_max` bytes and `reply_depth`
/// messages, and the router's ends.
fn start(config: RecorderConfig, reply_max: u32, reply_depth: u64) -> Result<(Recorder, Router), RecorderError> {
    let (requests, recorder_requests) = channel("requests", 256, 8);
    let (recorder_replies, replies) = channel("replies", reply_max, reply_depth);
    let recorder = Recorder::start_on_ports(config, RecorderPorts { requests: recorder_requests, replies: recorder_replies })?;
    Ok((recorder, Router { requests, replies, buffer: vec![0; reply_max as usize] }))
}

fn wait_for_a_frame(recorder: &Recorder) {
    let end = Instant::now() + Duration::from_secs(10);
    while recorder.latest(0).is_none() {
        assert!(Instant::now() < end, "no frame recorded within 10 s: {:?}", recorder.last_error());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(Instant::now() < end, "{what}: not within 5 s");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Cyclone names its threads (`ddsi_init.c`); one of them in this process means a DDS domain was started.
fn cyclone_threads() -> Vec<String> {
    const CYCLONE: [&str; 11] = ["recv", "recvUC", "recvMC", "tev", "gc", "lease", "dq.builtins", "xmit.user", "dq.user", "debmon", "fsm"];
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .filter(|c| CYCLONE.contains(&c.as_str()))
        .collect()
}

#[test]
fn live_frames_and_a_missing_camera_are_answered_as_dds_would_publish_them_and_garbage_is_skipped() {
    let dir = TempDir::new("answers");
    let (recorder, mut router) = start(config(&dir), 64 << 10, 4).unwrap();
    assert_eq!(recorder.domain_id(), None);
    wait_for_a_frame(&recorder);

    // Garbage first: not a frame, a frame that is no data sample, a data frame that is no FrameRequest.
    router.send(b"not a frame at all");
    let request = cdr::to_vec(&FrameRequest { monitor: "m".into(), seq: 0, camera: 0, mode: CaptureMode::Live, at_ns: 0 }).unwrap();
    router.send(&DdsFrame { kind: SampleKind::Dispose, source_timestamp_ns: None, key_hash: monitor_key_hash("m"), cdr: &request }.to_vec());
    router.send(&DdsFrame { kind: SampleKind::Data, source_timestamp_ns: None, key_hash: [0; 16], cdr: &[0, 1, 0, 0, 0xff, 0xff, 0xff, 0xff] }.to_vec());
    wait_until("three bad requests counted", || recorder.stats().bad_requests == 3);
    assert!(recorder.is_running(), "garbage does not stop the recorder: {:?}", recorder.last_error());

    let before = partita_apps::recorder::now_ns();
    router.request("monitor-a", 1, 0);
    router.request("monitor-b", 2, 7);
    let (kind, timestamp, key_hash, live) = router.reply();
    assert_eq!((kind, live.monitor.as_str(), live.seq, live.camera), (SampleKind::Data, "monitor-a", 1, 0));
    assert_eq!((live.status, live.encoding, live.width, live.height), (ReplyStatus::Ok, ImageEncoding::Png, 64, 48));
    assert!(live.image.starts_with(b"\x89PNG"), "a PNG image");
    assert_eq!(key_hash, monitor_key_hash("monitor-a"));
    let timestamp = timestamp.expect("a source timestamp");
    assert!(timestamp >= before && timestamp <= partita_apps::recorder::now_ns(), "the source timestamp is the wall clock when sent");

    let (kind, _, key_hash, missing) = router.reply();
    assert_eq!((kind, missing.monitor.as_str(), missing.seq, missing.camera, missing.status), (SampleKind::Data, "monitor-b", 2, 7, ReplyStatus::NoSuchCamera));
    assert_eq!(key_hash, monitor_key_hash("monitor-b"));
    assert!(missing.image.is_empty());

    assert!(cyclone_threads().is_empty(), "the recorder on ports starts no DDS domain: {:?}", cyclone_threads());
    let stats = recorder.stop().unwrap();
    assert_eq!((stats.requests, stats.replies, stats.bad_requests), (2, 2, 3));
    assert_eq!((stats.dropped_replies, stats.too_large_replies, stats.reply_errors), (0, 0, 0));
    assert!(stats.frames > 0 && stats.ring_records > 0, "recording went on: {stats:?}");
}

#[test]
fn a_reply_larger_than_the_reply_port_is_dropped_with_the_size_the_channel_needs() {
    let dir = TempDir::new("too-large");
    let (recorder, mut router) = start(config(&dir), 256, 4).unwrap();
    wait_for_a_frame(&recorder);
    router.request("m", 1, 0);
    wait_until("the too large reply counted", || recorder.stats().too_large_replies == 1);
    let error = recorder.last_error().unwrap();
    assert!(error.contains("does not fit") && error.contains("max_message") && error.contains("system file"), "{error}");
    // A reply that fits still goes out.
    router.request("m", 2, 9);
    let (_, _, _, reply) = router.reply();
    assert_eq!((reply.seq, reply.status), (2, ReplyStatus::NoSuchCamera));
    let stats = recorder.stop().unwrap();
    assert_eq!((stats.requests, stats.replies, stats.too_large_replies), (2, 1, 1));
}

#[test]
fn a_reply_size_the_reply_port_cannot_carry_is_refused_at_start() {
    let dir = TempDir::new("reply-size");
    let config = RecorderConfig { reply_size: Some(1024), ..config(&dir) };
    let error = start(config, 1024, 4).err().expect("refused");
    assert!(matches!(error, RecorderError::ReplyPortTooSmall { max: 1024, reply_size: 1024, needed: 1056, .. }), "{error}");
    assert!(error.to_string().contains("max_message in the system file at least 1056"), "{error}");
    // With room for the frame header, every reply has exactly the size asked for.
    let config = RecorderConfig { reply_size: Some(1024), ..self::config(&dir) };
    let (recorder, mut router) = start(config, 1056, 4).unwrap();
    wait_for_a_frame(&recorder);
    router.request("m", 1, 0);
    let (_, _, _, reply) = router.reply();
    assert_eq!(cdr::to_vec(&reply).unwrap().len(), 1024);
    recorder.stop().unwrap();
}

#[test]
fn a_reply_queue_that_stays_full_drops_the_reply_after_a_bounded_wait() {
    let dir = TempDir::new("full");
    let (recorder, mut router) = start(config(&dir), 64 << 10, 1).unwrap();
    wait_for_a_frame(&recorder);
    router.request("m", 1, 9);
    router.request("m", 2, 9);
    let t = Instant::now();
    wait_until("the second reply dropped", || recorder.stats().dropped_replies == 1);
    assert!(t.elapsed() >= REPLY_WAIT - Duration::from_millis(20), "dropped only after waiting for room");
    assert!(recorder.last_error().unwrap().contains("stayed full"));
    let (_, _, _, reply) = router.reply();
    assert_eq!(reply.seq, 1);
    // Room again: the next reply goes out.
    router.request("m", 3, 9);
    assert_eq!(router.reply().3.seq, 3);
    let stats = recorder.stop().unwrap();
    assert_eq!((stats.requests, stats.replies, stats.dropped_replies), (3, 2, 1));
}
