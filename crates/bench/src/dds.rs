//! DDS through partita's own layer (`partita-dds`, Cyclone DDS 11.0.1): a request topic and a reply topic.
//!
//! Two transports differ only in how the server takes requests:
//! - `dds`: a listening reader; Cyclone delivers each request on its receive thread, where the server does its
//!   work and writes the reply at once (no hand-off to another thread — what ddsperf's default mode does);
//! - `dds-waitset`: the benchmark's server loop blocks on a waitset and takes requests on its own thread.
//!
//! The client differs the same way: with `dds`, in closed loop, its reply listener records each round trip and
//! sends the next request on the delivery thread (as ddsperf's ping does); with `dds-waitset`, with `--rate` or
//! with `--busy-poll`, the benchmark's loop sends and blocks on a waitset (or busy-polls) for replies.
//! Each side encodes its request or reply once and patches only the sequence number for every write, and reads
//! only the sequence number of what arrives (ddsperf, likewise, does not rebuild its payload per message).
//! Requests and replies are typed topics (`partita::bench::Request` / `Reply`: a sequence number and an octet
//! sequence), reliable, keep-last 1, volatile (as ddsperf's ping/pong), encoded as XCDR1. Both processes create their participant on
//! loopback only; the domain id and topic names come from the run's session string, so parallel runs do not
//! meet. The server's address line is `domain=N topic=PREFIX`.
use crate::driver::{ClientEndpoint, ReplyReceiver, RequestSender, ServerEndpoint, Transport, Wait};
use crate::error::DriverError;
use partita_dds::{DomainConfig, Participant, Qos, Reader, Topic, TopicType, Writer};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Request {
    pub seq: u64,
    /// Encoded as one block (sequence<octet>), not byte by byte.
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Reply {
    pub seq: u64,
    #[serde(with = "serde_bytes")]
    pub payload: Vec<u8>,
}

impl TopicType for Request {
    fn type_name() -> &'static str {
        "partita::bench::Request"
    }
}

impl TopicType for Reply {
    fn type_name() -> &'static str {
        "partita::bench::Reply"
    }
}

/// A request or reply encoded once; for each write only its sequence number is patched in place. Both types
/// start with `seq: u64`, which XCDR1 puts right after the 4-byte header (offset 0 of the body, aligned to 8).
struct Encoded(Vec<u8>);

impl Encoded {
    fn new<T: Serialize>(v: &T) -> Self {
        Encoded(partita_dds::cdr::to_vec(v).expect("a sequence number and a byte sequence always encode"))
    }
    fn with_seq(&mut self, seq: u64) -> &[u8] {
        self.0[4..12].copy_from_slice(&seq.to_le_bytes());
        &self.0
    }
}

/// The sequence number of a request or reply as it arrived (only what the benchmark needs is decoded, as
/// ddsperf reads its sequence number from its sample); `None` for anything not a little-endian XCDR1 sample.
fn seq_of(cdr: &[u8]) -> Option<u64> {
    if cdr.len() < 12 || cdr[..2] != [0, 1] {
        return None;
    }
    Some(u64::from_le_bytes(cdr[4..12].try_into().ok()?))
}

/// The largest payload accepted (Cyclone fragments large samples; 8 MiB keeps memory use sane).
pub const MAX_PAYLOAD: usize = 8 << 20;

/// How long both ends wait for each other to be discovered.
const MATCH_TIMEOUT: Duration = Duration::from_secs(20);

/// Listener server (see the module documentation).
pub struct Dds;

/// Waitset server (see the module documentation).
pub struct DdsWaitset;

fn err(what: &str) -> impl FnOnce(partita_dds::DdsError) -> DriverError + '_ {
    move |e| DriverError::Other(format!("{what}: {e}"))
}

/// A domain id in 0..=232 and a topic prefix derived from the session, identical in both processes.
fn session_domain(session: &str) -> u32 {
    let h = session.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    (h % 233) as u32
}

/// Reliable, keep-last 1, volatile: what ddsperf's ping/pong use, so the two compare like for like.
fn qos() -> Qos {
    Qos::reliable().keep_last(1)
}

struct Ends {
    // Kept so the participant outlives both endpoints explicitly (they also hold it).
    _participant: Participant,
    requests: Topic<Request>,
    replies: Topic<Reply>,
}

fn open(domain: u32, prefix: &str) -> Result<Ends, DriverError> {
    let participant = Participant::new(&DomainConfig::loopback(domain)).map_err(err("creating the participant"))?;
    let requests = Topic::<Request>::new(&participant, &format!("{prefix}/request"), &qos()).map_err(err("request topic"))?;
    let replies = Topic::<Reply>::new(&participant, &format!("{prefix}/reply"), &qos()).map_err(err("reply topic"))?;
    Ok(Ends { _participant: participant, requests, replies })
}

pub(crate) fn parse_address(address: &str) -> Result<(u32, String), DriverError> {
    let mut domain = None;
    let mut topic = None;
    for part in address.split_whitespace() {
        if let Some(d) = part.strip_prefix("domain=") {
            domain = d.parse::<u32>().ok();
        } else if let Some(t) = part.strip_prefix("topic=") {
            topic = Some(t.to_string());
        }
    }
    match (domain, topic) {
        (Some(d), Some(t)) if d <= 232 => Ok((d, t)),
        _ => Err(DriverError::Malformed(format!("DDS server address {address:?} (expected `domain=N topic=PREFIX`)"))),
    }
}

impl Transport for Dds {
    fn name(&self) -> &'static str {
        "dds"
    }
    fn description(&self) -> &'static str {
        "DDS through partita-dds (Cyclone DDS 11.0.1) on loopback, server replying from a listener on delivery"
    }
    fn max_payload(&self) -> usize {
        MAX_PAYLOAD
    }
    fn serve(&self, size: usize, session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError> {
        DdsWaitset.serve(size, session)
    }
    fn connect(&self, address: &str, _size: usize, _session: &str) -> Result<ClientEndpoint, DriverError> {
        connect(address)
    }
    fn serve_inline(
        &self,
        size: usize,
        session: &str,
        work: std::sync::Arc<dyn Fn() + Send + Sync>,
    ) -> Option<Result<crate::driver::InlineServer, DriverError>> {
        Some(serve_listening(size, session, work))
    }
    fn closed_loop_inline(
        &self,
        address: &str,
        size: usize,
        _session: &str,
        total: u64,
        timeout: Duration,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Option<Result<crate::driver::LoopSamples, DriverError>> {
        Some(listening_closed_loop(address, size, total, timeout, stop, || ()))
    }
}

/// The client's state while its listener drives the closed loop.
struct LoopState {
    /// Sequence number of the request in flight (== total when done).
    current: u64,
    sent: Instant,
    samples: Vec<(u64, u64)>,
    lost: Vec<u64>,
    request: Encoded,
}

/// Sends request `seq` (the caller holds the state lock).
fn send_next(writer: &Writer<Request>, st: &mut LoopState, seq: u64) -> Result<(), DriverError> {
    st.current = seq;
    st.sent = Instant::now();
    let bytes = st.request.with_seq(seq);
    writer.raw().write(bytes).map_err(err("writing a request"))
}

/// The closed loop as ddsperf's ping runs it: the reply listener, on Cyclone's delivery thread, records the
/// round trip and sends the next request at once. This thread only watches for a reply that never comes.
/// `settle` runs once both ends are matched, before the first request (a forwarder in the path may need time
/// to build its routes).
pub(crate) fn listening_closed_loop(
    address: &str,
    size: usize,
    total: u64,
    timeout: Duration,
    stop: &std::sync::atomic::AtomicBool,
    settle: fn(),
) -> Result<crate::driver::LoopSamples, DriverError> {
    use std::sync::{Arc, Mutex};
    let (domain, prefix) = parse_address(address)?;
    let ends = open(domain, &prefix)?;
    let writer = Arc::new(Writer::new(&ends.requests, &qos()).map_err(err("request writer"))?);
    let state = Arc::new(Mutex::new(LoopState {
        current: u64::MAX,
        sent: Instant::now(),
        samples: Vec::with_capacity(total as usize),
        lost: Vec::new(),
        request: Encoded::new(&Request { seq: 0, payload: vec![0xa5; size] }),
    }));
    let (w, st) = (writer.clone(), state.clone());
    let reader = partita_dds::ListeningReader::new(&ends.replies, &qos(), move |bytes, info| {
        let Some(seq) = seq_of(bytes).filter(|_| info.valid_data) else { return };
        let now = Instant::now();
        let mut st = st.lock().unwrap_or_else(|p| p.into_inner());
        if seq != st.current {
            return; // a late reply to a request already counted as lost
        }
        let rtt = now.duration_since(st.sent).as_nanos() as u64;
        st.samples.push((seq, rtt));
        let next = seq + 1;
        if next < total {
            if let Err(e) = send_next(&w, &mut st, next) {
                tracing::warn!(target: "partita::bench::dds", "client: {e}");
            }
        } else {
            st.current = total;
        }
    })
    .map_err(err("reply reader"))?;
    writer.wait_for_readers(1, MATCH_TIMEOUT).map_err(err("waiting for the server's request reader"))?;
    // The reply reader is matched by the server's writer shortly after; a first request lost to that race is
    // retried as a time-out would be.
    std::thread::sleep(Duration::from_millis(200));
    settle();
    send_next(&writer, &mut state.lock().unwrap_or_else(|p| p.into_inner()), 0)?;
    loop {
        std::thread::sleep(Duration::from_millis(5));
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        if st.current >= total {
            break;
        }
        if st.sent.elapsed() > timeout {
            let seq = st.current;
            st.lost.push(seq);
            if seq + 1 < total {
                send_next(&writer, &mut st, seq + 1)?;
            } else {
                st.current = total;
            }
        }
    }
    drop(reader);
    let st = std::mem::replace(
        &mut *state.lock().unwrap_or_else(|p| p.into_inner()),
        LoopState { current: 0, sent: Instant::now(), samples: Vec::new(), lost: Vec::new(), request: Encoded(Vec::new()) },
    );
    drop(ends);
    Ok((st.samples, st.lost))
}

/// What keeps a listening server alive: its topics and writer, then the reader whose callback answers.
struct ListeningServer {
    _reader: partita_dds::ListeningReader,
    _ends: Ends,
}

fn serve_listening(
    size: usize,
    session: &str,
    work: std::sync::Arc<dyn Fn() + Send + Sync>,
) -> Result<crate::driver::InlineServer, DriverError> {
    let domain = session_domain(session);
    let prefix = format!("partita/bench/{session}");
    let ends = open(domain, &prefix)?;
    let writer = Writer::new(&ends.replies, &qos()).map_err(err("reply writer"))?;
    let mut reply = Encoded::new(&Reply { seq: 0, payload: vec![0x5a; size] });
    let mut matched = false;
    let reader = partita_dds::ListeningReader::new(&ends.requests, &qos(), move |bytes, info| {
        let Some(seq) = seq_of(bytes).filter(|_| info.valid_data) else { return };
        if !matched {
            // The client waits for both matches before its first request; this only covers the reverse race.
            matched = writer.wait_for_readers(1, MATCH_TIMEOUT).is_ok();
        }
        work();
        if let Err(e) = writer.raw().write(reply.with_seq(seq)) {
            tracing::warn!(target: "partita::bench::dds", "server: writing a reply: {e}");
        }
    })
    .map_err(err("request reader"))?;
    Ok((Box::new(ListeningServer { _reader: reader, _ends: ends }), format!("domain={domain} topic={prefix}")))
}

impl Transport for DdsWaitset {
    fn name(&self) -> &'static str {
        "dds-waitset"
    }
    fn description(&self) -> &'static str {
        "DDS through partita-dds on loopback, server taking requests through a waitset on its own thread"
    }
    fn max_payload(&self) -> usize {
        MAX_PAYLOAD
    }
    fn serve(&self, size: usize, session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError> {
        let domain = session_domain(session);
        let prefix = format!("partita/bench/{session}");
        let ends = open(domain, &prefix)?;
        let reader = Reader::new(&ends.requests, &qos()).map_err(err("request reader"))?;
        let writer = Writer::new(&ends.replies, &qos()).map_err(err("reply writer"))?;
        let server = DdsServer { _ends: ends, reader, writer, reply: Encoded::new(&Reply { seq: 0, payload: vec![0x5a; size] }), pending: VecDeque::new(), matched: false };
        Ok((Box::new(server), format!("domain={domain} topic={prefix}")))
    }
    fn connect(&self, address: &str, _size: usize, _session: &str) -> Result<ClientEndpoint, DriverError> {
        connect(address)
    }
}

pub(crate) fn connect(address: &str) -> Result<ClientEndpoint, DriverError> {
    let (domain, prefix) = parse_address(address)?;
    let ends = open(domain, &prefix)?;
    let writer = Writer::new(&ends.requests, &qos()).map_err(err("request writer"))?;
    let reader = Reader::new(&ends.replies, &qos()).map_err(err("reply reader"))?;
    writer.wait_for_readers(1, MATCH_TIMEOUT).map_err(err("waiting for the server's request reader"))?;
    let end = Instant::now() + MATCH_TIMEOUT;
    while reader.matched_writers().map_err(err("reply reader"))? < 1 {
        if Instant::now() > end {
            return Err(DriverError::Other("the server's reply writer was not discovered within 20 s".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ends = std::sync::Arc::new(ends);
    Ok(ClientEndpoint {
        sender: Box::new(DdsSender { _ends: ends.clone(), writer, request: None }),
        receiver: Box::new(DdsReceiver { _ends: ends, reader, pending: VecDeque::new() }),
    })
}

struct DdsServer {
    _ends: Ends,
    reader: Reader<Request>,
    writer: Writer<Reply>,
    reply: Encoded,
    pending: VecDeque<u64>,
    matched: bool,
}

impl ServerEndpoint for DdsServer {
    fn recv_request(&mut self, timeout: Duration) -> Result<Option<u64>, DriverError> {
        if self.pending.is_empty() {
            if self.reader.wait(timeout).map_err(err("waiting for requests"))? {
                let pending = &mut self.pending;
                self.reader
                    .raw()
                    .take_batch(|bytes, info| pending.extend(seq_of(bytes).filter(|_| info.valid_data)))
                    .map_err(err("taking requests"))?;
            }
        }
        Ok(self.pending.pop_front())
    }
    fn reply(&mut self, seq: u64) -> Result<(), DriverError> {
        if !self.matched {
            // A reply written before the client's reader is matched would be lost (volatile).
            self.writer.wait_for_readers(1, MATCH_TIMEOUT).map_err(err("waiting for the client's reply reader"))?;
            self.matched = true;
        }
        self.writer.raw().write(self.reply.with_seq(seq)).map_err(err("writing a reply"))
    }
}

struct DdsSender {
    _ends: std::sync::Arc<Ends>,
    writer: Writer<Request>,
    /// Encoded on the first send (the payload's size is the run's), then only the sequence number changes.
    request: Option<Encoded>,
}

impl RequestSender for DdsSender {
    fn send(&mut self, seq: u64, payload: &[u8]) -> Result<(), DriverError> {
        let enc = self.request.get_or_insert_with(|| Encoded::new(&Request { seq, payload: payload.to_vec() }));
        self.writer.raw().write(enc.with_seq(seq)).map_err(err("writing a request"))
    }
}

struct DdsReceiver {
    _ends: std::sync::Arc<Ends>,
    reader: Reader<Reply>,
    pending: VecDeque<u64>,
}

impl ReplyReceiver for DdsReceiver {
    fn recv(&mut self, wait: Wait) -> Result<Option<u64>, DriverError> {
        if self.pending.is_empty() {
            if let Wait::Block(d) = wait {
                if !self.reader.wait(d).map_err(err("waiting for replies"))? {
                    return Ok(None);
                }
            }
            let pending = &mut self.pending;
            self.reader
                .raw()
                .take_batch(|bytes, info| pending.extend(seq_of(bytes).filter(|_| info.valid_data)))
                .map_err(err("taking replies"))?;
        }
        Ok(self.pending.pop_front())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_samples_carry_their_patched_sequence_number() {
        let mut e = Encoded::new(&Reply { seq: 0, payload: vec![1, 2, 3] });
        let bytes = e.with_seq(0x0102_0304_0506_0708).to_vec();
        assert_eq!(seq_of(&bytes), Some(0x0102_0304_0506_0708));
        let back: Reply = partita_dds::cdr::from_slice(&bytes).unwrap();
        assert_eq!((back.seq, back.payload), (0x0102_0304_0506_0708, vec![1, 2, 3]));
        assert_eq!(seq_of(&[0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]), None, "big-endian samples are not ours");
    }

    #[test]
    fn session_domain_is_stable_and_in_range() {
        assert_eq!(session_domain("abc"), session_domain("abc"));
        for s in ["", "a", "run-123", "x".repeat(100).as_str()] {
            assert!(session_domain(s) <= 232);
        }
    }

    #[test]
    fn address_round_trips_and_rejects_garbage() {
        assert_eq!(parse_address("domain=7 topic=partita/bench/s").unwrap(), (7, "partita/bench/s".to_string()));
        assert!(parse_address("domain=999 topic=x").is_err());
        assert!(parse_address("127.0.0.1:4000").is_err());
    }
}
