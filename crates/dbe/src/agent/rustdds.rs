//! The benchmark's topics over RustDDS (crate `rustdds` 0.15, Atostek's native Rust DDS), as a [`Channel`].
//!
//! **Types.** `PubMessage { long seqnum; sequence<octet,16384> data; }` on `{topic}_pub` and
//! `AckMessage { long seqnum; }` on `{topic}_ack`, type names "PubMessage" and "AckMessage", NO_KEY topics,
//! serialized by RustDDS's `CDRSerializerAdapter` as plain XCDR1 little-endian CDR (encapsulation `CDR_LE`):
//! `seqnum` as an `i32`, `data` as a `u32` length and the bytes. Cyclone DDS and Fast DDS endpoints of the same
//! IDL read and write the same bytes.
//!
//! **QoS.** Writers and readers of both topics get the same policies (bar the resource limits below):
//! - `reliable` → `Reliability::Reliable { max_blocking_time: 1 s }`: a write blocks while RustDDS's reliable
//!   send window is full (back-pressure from unacknowledged samples) and fails after 1 s;
//!   `best-effort` → `Reliability::BestEffort` (a write never blocks).
//! - `keep-last:N` → `History::KeepLast { depth: N }`; `keep-all` → `History::KeepAll` with `ResourceLimits`
//!   unlimited (`i32::MAX`) on the topics and readers — without them a RustDDS reader keeps at most 64 samples
//!   not yet taken, whatever the history — and RustDDS's default 8192 on the writers (their `max_samples` is
//!   RustDDS's reliable send window).
//! - `volatile` → `Durability::Volatile`; `transient-local` → `Durability::TransientLocal` (the writer keeps its
//!   history for late-joining readers).
//!
//! Everything else is RustDDS's default. Readers are waited on with a mio 1 `Poll` (RustDDS's `mio1` re-export;
//! a reader is an `event::Source` that fires when samples arrive), so `take_*` sleeps in `epoll_wait` until data
//! or the timeout, never spins. Dropping the channel waits (at most three times `--idle-s`, 30 s by default,
//! per writer) until the matched reliable readers acknowledged everything written: RustDDS admits up to 8192
//! samples ahead of the network, and they, the end marker among them, would otherwise die with the participant.
//!
//! **Matching.** RustDDS 0.15 has no `get_publication_matched_status()` (it is commented out upstream).
//! [`Channel::matched`] counts, per local endpoint, the remote endpoints RustDDS reported matched, from its
//! status events: each writer's `DataWriterStatus::PublicationMatched` and each reader's
//! `DataReaderStatus::SubscriptionMatched` (`current.count_change` +1/−1 with the remote GUID), and, because a
//! RustDDS endpoint status queue holds only 4 events and drops newer ones when full, also the participant's
//! `RemoteReaderMatched` / `RemoteWriterMatched` / `ReaderLost` / `WriterLost` / `ParticipantLost` events
//! (a queue of 2048). The count is the size of the set of remote GUIDs so reported: exact as long as
//! `matched()` is called often enough that the participant queue (which also carries the other discovery
//! events) does not overflow.
//!
//! **Network.** One RustDDS participant per channel, domain `cfg.domain` (RTPS's port mapping caps it at 232):
//! - it binds its unicast discovery and user-traffic listeners on `0.0.0.0`, ports 7410+250·d+2·pid and
//!   7411+250·d+2·pid (pid: the first participant id of 0..119 whose port is free), and multicast listeners on
//!   `0.0.0.0`, ports 7400+250·d and 7401+250·d, that join 239.255.0.1 on every up IPv4 interface with the
//!   MULTICAST flag (none on a plain `lo`);
//! - it sends SPDP to 239.255.0.1:7400+250·d from one socket per such interface (IP_MULTICAST_IF set, so no
//!   multicast route is needed), and also unicast to `127.0.0.1` at the SPDP ports of participant ids 0..11
//!   (its "same-host loopback" discovery): participants in one network namespace find each other with only
//!   `lo` up, no multicast flag and no route;
//! - it advertises every IPv4 address as a unicast locator, talks to a peer seen coming from 127.0.0.1 over
//!   loopback only, and otherwise sends new samples to a reader that advertised 239.255.0.1 by multicast
//!   (239.255.0.1:7401+250·d, on the interface the peer was seen on; between two namespaces both
//!   `PubMessage`s and `AckMessage`s travel so), its heartbeats and ACKNACKs unicast.
//!
//! It has no list of unicast discovery peers, so between namespaces or hosts it discovers only by multicast:
//! the interface joining them needs the MULTICAST flag (a veth has it); `--peer` is unsupported.
//! `--listen ADDR` (an IPv4 address; a `:port` is ignored) restricts the participant with RustDDS's
//! `with_only_networks([ADDR])`: multicast is joined and sent only on the interface with that address, and only
//! that address is advertised (the sockets still bind `0.0.0.0`, and the 127.0.0.1 SPDP copies still go out).
use crate::agent::channel::{Channel, ChannelConfig, Durability, History, Matched, QosChoice, Reliability, MAX_DATA};
use crate::agent::AgentError;
use ::rustdds::mio1::{Events, Interest, Poll, Token};
use ::rustdds::no_key::{DataReader, DataWriter};
use ::rustdds::{
    policy, DataReaderStatus, DataWriterStatus, DomainParticipant, DomainParticipantBuilder,
    DomainParticipantStatusEvent, DomainParticipantStatusListener, QosPolicies, QosPolicyBuilder, RTPSEntity,
    ReadCondition, StatusEvented, Timestamp, TopicKind, GUID,
};
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

const IMPL: &str = "rustdds";
/// How long a reliable write may wait for room in RustDDS's send window.
const MAX_BLOCKING: Duration = Duration::from_secs(1);

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PubMessage {
    seqnum: i32,
    #[serde(with = "serde_bytes")]
    data: Vec<u8>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct AckMessage {
    seqnum: i32,
}

/// A reader with the mio poll that waits on it.
struct Waiting<T: 'static> {
    reader: DataReader<T>,
    poll: Poll,
    events: Events,
}

impl<T: serde::de::DeserializeOwned + 'static> Waiting<T> {
    fn new(mut reader: DataReader<T>, what: &str) -> Result<Self, AgentError> {
        let poll = Poll::new().map_err(|e| AgentError::middleware(IMPL, format!("mio poll for {what}"), e))?;
        poll.registry()
            .register(&mut reader, Token(0), Interest::READABLE)
            .map_err(|e| AgentError::middleware(IMPL, format!("register {what} with mio"), e))?;
        Ok(Waiting { reader, poll, events: Events::with_capacity(4) })
    }

    /// Takes what is there; if nothing, sleeps on the poll until the reader signals or `timeout` runs out.
    /// RustDDS's `take` first drains the reader's notification socket and then looks at the cache, so a sample
    /// arriving after an empty take always wakes the (edge-triggered) poll.
    fn take(&mut self, timeout: Duration, what: &str, mut each: impl FnMut(T)) -> Result<usize, AgentError> {
        let deadline = Instant::now() + timeout;
        loop {
            let samples = self
                .reader
                .take(usize::MAX, ReadCondition::any())
                .map_err(|e| AgentError::middleware(IMPL, format!("take {what}"), e))?;
            if !samples.is_empty() {
                let n = samples.len();
                for s in samples {
                    each(s.into_value());
                }
                return Ok(n);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(0);
            }
            match self.poll.poll(&mut self.events, Some(deadline - now)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(AgentError::middleware(IMPL, format!("wait for {what}"), e)),
            }
        }
    }
}

/// The remote endpoints one local endpoint has matched.
#[derive(Default)]
struct MatchSet {
    local: Option<GUID>,
    remote: HashSet<GUID>,
}

impl MatchSet {
    fn change(&mut self, remote: GUID, delta: i32) {
        if delta > 0 {
            self.remote.insert(remote);
        } else if delta < 0 {
            self.remote.remove(&remote);
        }
    }
    fn count(&self) -> u32 {
        self.remote.len() as u32
    }
}

struct RustddsChannel {
    // Endpoints first: they are dropped before the participant.
    pub_writer: Option<DataWriter<PubMessage>>,
    pub_reader: Option<Waiting<PubMessage>>,
    ack_writer: Option<DataWriter<AckMessage>>,
    ack_reader: Option<Waiting<AckMessage>>,
    pub_readers: MatchSet,
    pub_writers: MatchSet,
    ack_readers: MatchSet,
    ack_writers: MatchSet,
    status: DomainParticipantStatusListener,
    /// How long dropping waits for acknowledgements, per writer.
    linger: Duration,
    _participant: DomainParticipant,
}

/// RustDDS's own default for a writer's `max_samples` (its reliable send window and unsent backlog, and what a
/// keep-all writer retains), `DEFAULT_WRITER_MAX_SAMPLES`.
const WRITER_MAX_SAMPLES: i32 = 8192;

/// The QoS of the topics and readers, and of the writers.
fn qos_of(q: &QosChoice) -> Result<(QosPolicies, QosPolicies), AgentError> {
    let reliability = match q.reliability {
        Reliability::Reliable => {
            policy::Reliability::Reliable { max_blocking_time: ::rustdds::Duration::from_std(MAX_BLOCKING) }
        }
        Reliability::BestEffort => policy::Reliability::BestEffort,
    };
    let history = match q.history {
        History::KeepLast(n) => {
            let depth = i32::try_from(n).ok().filter(|d| *d >= 1).ok_or_else(|| AgentError::Unsupported {
                implementation: IMPL,
                what: format!("history keep-last:{n}"),
            })?;
            policy::History::KeepLast { depth }
        }
        History::KeepAll => policy::History::KeepAll,
    };
    let durability = match q.durability {
        Durability::Volatile => policy::Durability::Volatile,
        Durability::TransientLocal => policy::Durability::TransientLocal,
    };
    let base = QosPolicyBuilder::new().reliability(reliability).history(history).durability(durability);
    let limits = |n: i32| policy::ResourceLimits { max_samples: n, max_instances: 1, max_samples_per_instance: n };
    Ok(match q.history {
        History::KeepLast(_) => (base.clone().build(), base.build()),
        // A RustDDS participant keeps what it received of a topic in a cache bounded by the topic's RESOURCE_LIMITS,
        // 64 samples without them, and evicts what the reader has not taken yet beyond that, whatever the history:
        // keep-all would silently be keep-last 64, even for a reliable reader. So the topic (and reader) get
        // unlimited limits, as DDS's keep-all has by default. A writer's max_samples, though, is RustDDS's reliable
        // send window (and a best-effort keep-all writer's history), and a writer inherits the topic's: so it gets
        // RustDDS's default back.
        History::KeepAll => (
            base.clone().resource_limits(limits(i32::MAX)).build(),
            base.resource_limits(limits(WRITER_MAX_SAMPLES)).build(),
        ),
    })
}

/// Opens a RustDDS participant with the endpoints `cfg.ends` asks for.
pub fn open(cfg: &ChannelConfig) -> Result<Box<dyn Channel>, AgentError> {
    if !cfg.peers.is_empty() {
        return Err(AgentError::Unsupported {
            implementation: IMPL,
            what: "unicast discovery peers (--peer): it discovers remote participants only by SPDP multicast".into(),
        });
    }
    // RTPS's default port mapping (7400 + 250·domain + ...) leaves room for domains 0..=232.
    let domain = u16::try_from(cfg.domain).ok().filter(|d| *d <= 232).ok_or_else(|| AgentError::Unsupported {
        implementation: IMPL,
        what: format!("domain {} (the RTPS port mapping allows 0..=232)", cfg.domain),
    })?;
    let (qos, writer_qos) = qos_of(&cfg.qos)?;

    let mut builder = DomainParticipantBuilder::new(domain);
    if let Some(listen) = &cfg.listen {
        let ip: IpAddr = listen
            .parse::<IpAddr>()
            .or_else(|_| listen.parse::<SocketAddr>().map(|s| s.ip()))
            .map_err(|e| AgentError::Argument { flag: "--listen".into(), message: format!("{listen}: {e}") })?;
        builder = builder.with_only_networks([ip]);
    }
    let participant = builder.build().map_err(|e| AgentError::middleware(IMPL, "create participant", e))?;
    let status = participant.status_listener();

    let topic = |name: String, type_name: &str| {
        participant
            .create_topic(name.clone(), type_name.to_string(), &qos, TopicKind::NoKey)
            .map_err(|e| AgentError::middleware(IMPL, format!("create topic {name}"), e))
    };
    let ends = cfg.ends;
    let publisher = if ends.pub_writer || ends.ack_writer {
        Some(participant.create_publisher(&qos).map_err(|e| AgentError::middleware(IMPL, "create publisher", e))?)
    } else {
        None
    };
    let subscriber = if ends.pub_reader || ends.ack_reader {
        Some(participant.create_subscriber(&qos).map_err(|e| AgentError::middleware(IMPL, "create subscriber", e))?)
    } else {
        None
    };
    let pub_topic = if ends.pub_writer || ends.pub_reader { Some(topic(cfg.pub_topic(), "PubMessage")?) } else { None };
    let ack_topic = if ends.ack_writer || ends.ack_reader { Some(topic(cfg.ack_topic(), "AckMessage")?) } else { None };

    let mut ch = RustddsChannel {
        pub_writer: None,
        pub_reader: None,
        ack_writer: None,
        ack_reader: None,
        pub_readers: MatchSet::default(),
        pub_writers: MatchSet::default(),
        ack_readers: MatchSet::default(),
        ack_writers: MatchSet::default(),
        status,
        linger: cfg.linger,
        _participant: participant.clone(),
    };
    if let (true, Some(p), Some(t)) = (ends.pub_writer, &publisher, &pub_topic) {
        let w = p
            .create_datawriter_no_key_cdr::<PubMessage>(t, Some(writer_qos.clone()))
            .map_err(|e| AgentError::middleware(IMPL, "create PubMessage writer", e))?;
        ch.pub_readers.local = Some(w.guid());
        ch.pub_writer = Some(w);
    }
    if let (true, Some(s), Some(t)) = (ends.pub_reader, &subscriber, &pub_topic) {
        let r = s
            .create_datareader_no_key_cdr::<PubMessage>(t, Some(qos.clone()))
            .map_err(|e| AgentError::middleware(IMPL, "create PubMessage reader", e))?;
        ch.pub_writers.local = Some(r.guid());
        ch.pub_reader = Some(Waiting::new(r, "PubMessage reader")?);
    }
    if let (true, Some(p), Some(t)) = (ends.ack_writer, &publisher, &ack_topic) {
        let w = p
            .create_datawriter_no_key_cdr::<AckMessage>(t, Some(writer_qos.clone()))
            .map_err(|e| AgentError::middleware(IMPL, "create AckMessage writer", e))?;
        ch.ack_readers.local = Some(w.guid());
        ch.ack_writer = Some(w);
    }
    if let (true, Some(s), Some(t)) = (ends.ack_reader, &subscriber, &ack_topic) {
        let r = s
            .create_datareader_no_key_cdr::<AckMessage>(t, Some(qos.clone()))
            .map_err(|e| AgentError::middleware(IMPL, "create AckMessage reader", e))?;
        ch.ack_writers.local = Some(r.guid());
        ch.ack_reader = Some(Waiting::new(r, "AckMessage reader")?);
    }
    Ok(Box::new(ch))
}

fn not_opened(what: &str) -> AgentError {
    AgentError::middleware(IMPL, what, "this endpoint was not opened")
}

fn write_error<D>(what: &str, e: ::rustdds::dds::result::WriteError<D>) -> AgentError {
    use ::rustdds::dds::result::WriteError;
    match e {
        WriteError::WouldBlock { .. } => AgentError::middleware(
            IMPL,
            what,
            format!(
                "reliable send window still full after {} ms (readers not acknowledging)",
                MAX_BLOCKING.as_millis()
            ),
        ),
        other => AgentError::middleware(IMPL, what, other),
    }
}

impl RustddsChannel {
    /// Drains the endpoints' and the participant's status events into the match sets.
    fn drain_status(&mut self) {
        if let Some(w) = &self.pub_writer {
            while let Some(s) = w.try_recv_status() {
                if let DataWriterStatus::PublicationMatched { current, reader, .. } = s {
                    self.pub_readers.change(reader, current.count_change());
                }
            }
        }
        if let Some(w) = &self.ack_writer {
            while let Some(s) = w.try_recv_status() {
                if let DataWriterStatus::PublicationMatched { current, reader, .. } = s {
                    self.ack_readers.change(reader, current.count_change());
                }
            }
        }
        if let Some(r) = &self.pub_reader {
            while let Some(s) = r.reader.try_recv_status() {
                if let DataReaderStatus::SubscriptionMatched { current, writer, .. } = s {
                    self.pub_writers.change(writer, current.count_change());
                }
            }
        }
        if let Some(r) = &self.ack_reader {
            while let Some(s) = r.reader.try_recv_status() {
                if let DataReaderStatus::SubscriptionMatched { current, writer, .. } = s {
                    self.ack_writers.change(writer, current.count_change());
                }
            }
        }
        while let Some(ev) = self.status.try_recv_status() {
            match ev {
                DomainParticipantStatusEvent::RemoteReaderMatched { local_writer, remote_reader } => {
                    for m in [&mut self.pub_readers, &mut self.ack_readers] {
                        if m.local == Some(local_writer) {
                            m.change(remote_reader, 1);
                        }
                    }
                }
                DomainParticipantStatusEvent::RemoteWriterMatched { local_reader, remote_writer } => {
                    for m in [&mut self.pub_writers, &mut self.ack_writers] {
                        if m.local == Some(local_reader) {
                            m.change(remote_writer, 1);
                        }
                    }
                }
                DomainParticipantStatusEvent::ReaderLost { guid, .. } => {
                    self.pub_readers.change(guid, -1);
                    self.ack_readers.change(guid, -1);
                }
                DomainParticipantStatusEvent::WriterLost { guid, .. } => {
                    self.pub_writers.change(guid, -1);
                    self.ack_writers.change(guid, -1);
                }
                DomainParticipantStatusEvent::ParticipantLost { id, .. } => {
                    for m in
                        [&mut self.pub_readers, &mut self.pub_writers, &mut self.ack_readers, &mut self.ack_writers]
                    {
                        m.remote.retain(|g| g.prefix != id);
                    }
                }
                _ => {}
            }
        }
    }
}

impl Drop for RustddsChannel {
    /// A reliable RustDDS writer may have up to 8192 samples admitted but not yet sent or acknowledged when the
    /// agent ends (a pub writes faster than the network drains): they would die with the participant, the end
    /// marker among them. So wait, at most `linger` (three times `--idle-s`) per writer, until the matched
    /// readers acknowledged everything (at once when there are none, or for a best-effort writer).
    fn drop(&mut self) {
        if let Some(w) = &self.pub_writer {
            let _ = w.wait_for_acknowledgments(self.linger);
        }
        if let Some(w) = &self.ack_writer {
            let _ = w.wait_for_acknowledgments(self.linger);
        }
    }
}

impl Channel for RustddsChannel {
    fn write_pub(&mut self, seq: i32, data: &[u8]) -> Result<(), AgentError> {
        if data.len() > MAX_DATA {
            return Err(AgentError::Argument {
                flag: "--sizes".into(),
                message: format!("{} bytes is more than the {MAX_DATA} a PubMessage holds", data.len()),
            });
        }
        let w = self.pub_writer.as_ref().ok_or_else(|| not_opened("write PubMessage"))?;
        w.write(PubMessage { seqnum: seq, data: data.to_vec() }, Some(Timestamp::now()))
            .map_err(|e| write_error("write PubMessage", e))
    }

    fn take_pub(&mut self, timeout: Duration, f: &mut dyn FnMut(i32, usize)) -> Result<usize, AgentError> {
        let r = self.pub_reader.as_mut().ok_or_else(|| not_opened("take PubMessage"))?;
        r.take(timeout, "PubMessage", |m| f(m.seqnum, m.data.len()))
    }

    fn write_ack(&mut self, seq: i32) -> Result<(), AgentError> {
        let w = self.ack_writer.as_ref().ok_or_else(|| not_opened("write AckMessage"))?;
        w.write(AckMessage { seqnum: seq }, Some(Timestamp::now())).map_err(|e| write_error("write AckMessage", e))
    }

    fn take_ack(&mut self, timeout: Duration, f: &mut dyn FnMut(i32)) -> Result<usize, AgentError> {
        let r = self.ack_reader.as_mut().ok_or_else(|| not_opened("take AckMessage"))?;
        r.take(timeout, "AckMessage", |m| f(m.seqnum))
    }

    fn matched(&mut self) -> Result<Matched, AgentError> {
        self.drain_status();
        Ok(Matched {
            pub_readers: self.pub_readers.count(),
            pub_writers: self.pub_writers.count(),
            ack_readers: self.ack_readers.count(),
            ack_writers: self.ack_writers.count(),
        })
    }
}
