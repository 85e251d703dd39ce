//! The recorder served over two ARINC 653 queuing ports, in a partition without a network (issue 34).
//!
//! The I/O partition's routing service takes the monitors' `FrameRequest` samples from DDS and sends each, as
//! a [`DdsFrame`], into a queuing channel whose destination is the recorder's request port; it takes the
//! `FrameReply` frames the recorder sends from its reply port and publishes them on DDS as they are (kind, key
//! hash, source timestamp and serialized bytes untouched). So the recorder itself produces what its DDS writer
//! would put on the wire: the reply as little-endian XCDR1 with its encapsulation header (the bytes
//! `partita_dds::cdr` gives a typed writer), and the key hash DDS computes for the reply's `monitor`.
//!
//! The request port's other end is untrusted: a message that is not a frame, not a data sample, or not a
//! `FrameRequest` is counted ([`RecorderStats::bad_requests`](crate::recorder::RecorderStats)) and skipped.
//!
//! Per request, the message is copied once out of the channel into a buffer kept for the port's life, decoded
//! from there, answered, encoded into one vector kept across requests, and written in place into the reply
//! channel.
use crate::recorder::{now_ns, Server, Shared};
use crate::surveillance::FrameRequest;
use partita_dds::cdr::{self, CdrError};
use partita_ports::dds_frame::{DdsFrame, FrameError, SampleKind};
use partita_ports::{PortError, Ports, QueuingDestination, QueuingSource, Timeout};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the port server waits for a request before it looks whether it is to stop: the longest a stop
/// waits for it.
pub const RECEIVE_WAIT: Duration = Duration::from_millis(50);

/// How long a reply waits for room in a full reply queue before it is dropped: as long as the DDS recorder's
/// reliable writer may block on a reply (`reply_qos`).
pub const REPLY_WAIT: Duration = Duration::from_millis(100);

/// The recorder's two ports: requests in, replies out.
#[derive(Debug)]
pub struct RecorderPorts {
    pub requests: QueuingDestination,
    pub replies: QueuingSource,
}

impl RecorderPorts {
    /// Opens the partition's queuing destination port `request` and queuing source port `reply`.
    pub fn open(ports: &mut Ports, request: &str, reply: &str) -> Result<RecorderPorts, PortError> {
        Ok(RecorderPorts { requests: ports.queuing_destination(request)?, replies: ports.queuing_source(reply)? })
    }
}

/// The key hash DDS gives the instance of a `FrameRequest` or `FrameReply` of monitor `monitor`.
///
/// Both types' key is the single unbounded string `monitor`. DDS (XTypes 1.3, 7.6.8; Cyclone's
/// `ddsi_serdata_default`) serializes the key fields as big-endian CDR (a string: its length counting the
/// terminating NUL as a 4-byte word, the bytes, the NUL; the same in XCDR1 and XCDR2) and, because an
/// unbounded string's key can be longer than 16 bytes, takes the MD5 digest of that as the key hash.
pub fn monitor_key_hash(monitor: &str) -> [u8; 16] {
    let mut md5 = md5::Context::new();
    md5.consume(((monitor.len() + 1) as u32).to_be_bytes());
    md5.consume(monitor.as_bytes());
    md5.consume([0u8]);
    md5.finalize().0
}

/// A request-port message that is not a request.
#[derive(Debug, thiserror::Error)]
pub enum BadRequest {
    #[error("not a DDS frame: {0}")]
    Frame(#[from] FrameError),
    #[error("a {0:?} frame, not a data sample")]
    NotData(SampleKind),
    #[error("not a FrameRequest: {0}")]
    Cdr(#[from] CdrError),
}

/// Decodes one request-port message (`bytes` as the port's buffer holds it).
pub fn decode_request(bytes: &[u8]) -> Result<FrameRequest, BadRequest> {
    let frame = DdsFrame::read(bytes)?;
    if frame.kind != SampleKind::Data {
        return Err(BadRequest::NotData(frame.kind));
    }
    Ok(cdr::from_slice(frame.cdr)?)
}

/// Starts the thread that serves `ports` with `server` until `shared.stop`.
pub(crate) fn spawn(ports: RecorderPorts, server: Server, shared: Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    let request_buffer = vec![0u8; ports.requests.max_message() as usize];
    let mut port_server = PortServer { ports, server, shared, request_buffer, encoded: Vec::new() };
    std::thread::Builder::new().name("port-server".into()).spawn(move || port_server.run())
}

struct PortServer {
    ports: RecorderPorts,
    server: Server,
    shared: Arc<Shared>,
    /// One message of the request port (its maximum size).
    request_buffer: Vec<u8>,
    /// The reply being sent, serialized; kept across requests so that its allocation is reused.
    encoded: Vec<u8>,
}

impl PortServer {
    fn run(&mut self) {
        while !self.shared.stop.load(Ordering::Relaxed) {
            match self.ports.requests.receive(&mut self.request_buffer, Timeout::After(RECEIVE_WAIT)) {
                Ok(received) => self.serve(received.len),
                Err(PortError::TimedOut { .. }) => {}
                // A message the sender garbled (a length beyond the channel's maximum): the port dropped it.
                Err(e @ PortError::TooLarge { .. }) => self.bad_request(&e.to_string()),
                Err(e @ PortError::PeerFault { .. }) => {
                    // The channel's counters are garbled and stay so until the sender repairs them: wait, so
                    // that a hostile sender cannot make this thread spin.
                    self.bad_request(&e.to_string());
                    std::thread::sleep(RECEIVE_WAIT);
                }
                Err(e) => {
                    // The port itself fails (the futex, the mapping): serving ends, and with it the recorder's
                    // `is_running`, so the partition's program stops with the error.
                    self.shared.note_error(format!("request port {}: {e}; no more requests are served", self.ports.requests.name()));
                    return;
                }
            }
        }
    }

    fn bad_request(&self, what: &str) {
        self.shared.counters.bad_requests.fetch_add(1, Ordering::Relaxed);
        self.shared.note_error(format!("request port {}: {what}; skipped", self.ports.requests.name()));
    }

    /// Answers the request of `len` bytes in the request buffer.
    fn serve(&mut self, len: usize) {
        let request = match decode_request(&self.request_buffer[..len]) {
            Ok(r) => r,
            Err(e) => return self.bad_request(&e.to_string()),
        };
        let reply = self.server.reply_to(&request);
        let c = &self.shared.counters;
        self.encoded.clear();
        if let Err(e) = cdr::to_writer(&mut self.encoded, &reply) {
            c.reply_errors.fetch_add(1, Ordering::Relaxed);
            self.shared.note_error(format!("encoding the reply to {} seq {}: {e}", reply.monitor, reply.seq));
            return;
        }
        let frame = DdsFrame { kind: SampleKind::Data, source_timestamp_ns: Some(now_ns()), key_hash: monitor_key_hash(&reply.monitor), cdr: &self.encoded };
        let replies = &mut self.ports.replies;
        match replies.send_with(frame.len(), Timeout::After(REPLY_WAIT), |out| frame.write_into(out)) {
            Ok(()) => {
                c.replies.fetch_add(1, Ordering::Relaxed);
            }
            Err(PortError::TooLarge { name, len, max }) => {
                c.too_large_replies.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error(format!(
                    "reply port {name}: a reply of {len} bytes ({} of serialized FrameReply and the {}-byte frame header) does not fit its channel's maximum message of {max} bytes; dropped. Make the channel's max_message in the system file at least the reply size (--reply-size plus {}, or the largest frame's reply)",
                    self.encoded.len(),
                    partita_ports::dds_frame::HEADER,
                    partita_ports::dds_frame::HEADER,
                ));
            }
            Err(PortError::TimedOut { name } | PortError::Full { name, .. }) => {
                c.dropped_replies.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error(format!("reply port {name}: the queue stayed full for {} ms; the reply to {} seq {} is dropped", REPLY_WAIT.as_millis(), reply.monitor, reply.seq));
            }
            Err(e) => {
                c.reply_errors.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error(format!("sending the reply to {} seq {}: {e}", reply.monitor, reply.seq));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The key hash against Cyclone's own: the test re-runs itself as a typed `FrameReply` writer, so that the
    //! samples cross the network with the key hash Cyclone computes for them in their inline QoS (within one
    //! process Cyclone hands samples over without one), and reads them as the routing service does, with a
    //! reader of the topic keyed by key hash.
    use super::*;
    use crate::surveillance::{reply_qos, FrameReply, ImageEncoding, ReplyStatus, REPLY_TOPIC};
    use partita_dds::{DomainConfig, ListeningReader, Participant, RawTopic, SampleInfo, Topic, TopicType, Writer};
    use std::sync::Mutex;
    use std::time::Instant;

    const CHILD: &str = "PARTITA_RECORDER_KEY_HASH_WRITER_DOMAIN";
    const TEST: &str = "recorder_ports::tests::the_key_hash_is_the_one_cyclone_sends_with_a_frame_reply";
    /// A key whose serialized form fits 16 bytes and one that does not: both are hashed, the key being an
    /// unbounded string.
    const MONITORS: [&str; 2] = ["m", "a-monitor-whose-name-is-longer-than-sixteen-bytes"];

    /// The samples the reader took, with their information.
    type Taken = Arc<Mutex<Vec<(Vec<u8>, SampleInfo)>>>;

    fn reply(monitor: &str) -> FrameReply {
        FrameReply {
            monitor: monitor.into(),
            seq: 1,
            camera: 0,
            status: ReplyStatus::NoFrame,
            frame: 0,
            captured_ns: 0,
            width: 0,
            height: 0,
            encoding: ImageEncoding::Omitted,
            image: Vec::new(),
            padding: Vec::new(),
        }
    }

    /// The writer, in the child process: waits for the parent's reader, writes one reply per monitor, and stays
    /// until the parent is done.
    fn write(domain: u32) {
        let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
        let t = Topic::<FrameReply>::new(&p, REPLY_TOPIC, &reply_qos()).unwrap();
        let w = Writer::new(&t, &reply_qos()).unwrap();
        w.wait_for_readers(1, Duration::from_secs(20)).unwrap();
        for m in MONITORS {
            w.write(&reply(m)).unwrap();
        }
        let end = Instant::now() + Duration::from_secs(20);
        while w.matched_readers().unwrap() > 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn the_key_hash_is_the_one_cyclone_sends_with_a_frame_reply() {
        if let Ok(d) = std::env::var(CHILD) {
            return write(d.parse().unwrap());
        }
        let domain = (std::process::id() % 50) * 4 + 32;
        let p = Participant::new(&DomainConfig::loopback(domain)).unwrap();
        let t = RawTopic::keyed_by_hash(&p, REPLY_TOPIC, FrameReply::type_name()).unwrap();
        let got: Taken = Arc::default();
        let sink = got.clone();
        let reader = ListeningReader::new(&t, &reply_qos(), move |bytes, info| sink.lock().unwrap().push((bytes.to_vec(), info))).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST, "--nocapture"])
            .env(CHILD, domain.to_string())
            .spawn()
            .unwrap();
        let end = Instant::now() + Duration::from_secs(30);
        while got.lock().unwrap().len() < MONITORS.len() && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(reader);
        let _ = child.wait();
        let got = got.lock().unwrap();
        assert_eq!(got.len(), MONITORS.len(), "one reply per monitor");
        for ((bytes, info), monitor) in got.iter().zip(MONITORS) {
            let decoded: FrameReply = cdr::from_slice(bytes).unwrap();
            assert_eq!(decoded, reply(monitor));
            assert_eq!(info.key_hash, Some(monitor_key_hash(monitor)), "monitor {monitor:?}");
        }
        assert_ne!(monitor_key_hash(MONITORS[0]), monitor_key_hash(MONITORS[1]));
    }
}
