//! The driver interface: how a transport plugs into the request/response benchmark.
//!
//! A transport is split the way a DDS pair of topics is: the client owns a [`RequestSender`] (the request
//! writer) and a [`ReplyReceiver`] (the reply reader), which can live on two threads for the open-loop mode;
//! the server owns a [`ServerEndpoint`] that takes one request and answers it. Server and client run in two OS
//! processes; the server's [`Transport::serve`] returns an *address* (a single line of text, e.g.
//! `127.0.0.1:40123` for UDP, or a domain id and topic names for DDS) that the client hands to
//! [`Transport::connect`]. The `session` string is unique per run, so drivers can derive distinct topic names
//! or domain ids and parallel runs do not cross.
//!
//! Every transport is listed in [`registry`]; add a new one there.
use crate::error::DriverError;
use std::time::Duration;

/// How a receive waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Block for at most this long.
    Block(Duration),
    /// Do not block: return `Ok(None)` at once when nothing is there (busy-polling).
    Poll,
}

/// The client's request side.
pub trait RequestSender: Send {
    /// Sends one request carrying `seq` and `payload` (the payload's length is the benchmark's size).
    fn send(&mut self, seq: u64, payload: &[u8]) -> Result<(), DriverError>;
}

/// The client's reply side.
pub trait ReplyReceiver: Send {
    /// Receives one reply and returns its sequence number, or `None` when `wait` ran out.
    fn recv(&mut self, wait: Wait) -> Result<Option<u64>, DriverError>;
}

/// The client end of a transport.
pub struct ClientEndpoint {
    pub sender: Box<dyn RequestSender>,
    pub receiver: Box<dyn ReplyReceiver>,
}

/// The server end: receive a request, let the benchmark do its work, answer with a reply of the same size
/// carrying the same sequence number.
pub trait ServerEndpoint: Send {
    /// Waits at most `timeout` for a request and returns its sequence number (`None` on time-out).
    fn recv_request(&mut self, timeout: Duration) -> Result<Option<u64>, DriverError>;
    /// Answers the request received last.
    fn reply(&mut self, seq: u64) -> Result<(), DriverError>;
}

/// A server answering on the transport's own thread: what keeps it alive, and its address.
pub type InlineServer = (Box<dyn std::any::Any>, String);

/// A closed loop's outcome: `(seq, round-trip ns)` of each answered request, and the sequence numbers lost.
pub type LoopSamples = (Vec<(u64, u64)>, Vec<u64>);

/// One transport: creates both ends.
pub trait Transport: Sync {
    /// The name used on the command line (`--transport NAME`).
    fn name(&self) -> &'static str;
    /// One line for `--help` and the docs.
    fn description(&self) -> &'static str;
    /// Largest payload in bytes (beside the driver's own header).
    fn max_payload(&self) -> usize;
    /// Creates the server end for payloads of `size` bytes; returns it with the address the client needs.
    fn serve(&self, size: usize, session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError>;
    /// Creates the client end from the address the server printed.
    fn connect(&self, address: &str, size: usize, session: &str) -> Result<ClientEndpoint, DriverError>;
    /// For a transport that answers requests on its own delivery thread (a DDS listener) instead of the
    /// benchmark's server loop: starts such a server, calling `work` before each reply, and returns what keeps
    /// it alive with its address. `None` (the default) means the transport uses [`Transport::serve`].
    fn serve_inline(
        &self,
        _size: usize,
        _session: &str,
        _work: std::sync::Arc<dyn Fn() + Send + Sync>,
    ) -> Option<Result<InlineServer, DriverError>> {
        None
    }
    /// For a transport whose client can run the closed loop on its own delivery thread (a DDS listener that
    /// sends the next request as soon as a reply arrives, as ddsperf's ping does): runs `total` operations and
    /// returns `(seq, round-trip ns)` for each answered one and the sequence numbers that timed out. `None`
    /// (the default) means the benchmark's own loop drives [`Transport::connect`]'s endpoints.
    fn closed_loop_inline(
        &self,
        _address: &str,
        _size: usize,
        _session: &str,
        _total: u64,
        _timeout: std::time::Duration,
        _stop: &std::sync::atomic::AtomicBool,
    ) -> Option<Result<LoopSamples, DriverError>> {
        None
    }
}

/// An entry of the registry: a driver measured by partita's own client and server, or an external reference
/// tool that measures itself.
#[derive(Clone, Copy)]
pub enum Entry {
    Driver(&'static dyn Transport),
    /// Cyclone's `ddsperf ping`/`ddsperf pong` (see [`crate::ddsperf`]).
    Ddsperf(crate::ddsperf::Trigger),
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Entry {
    pub fn name(&self) -> &'static str {
        match self {
            Entry::Driver(t) => t.name(),
            Entry::Ddsperf(t) => t.name(),
        }
    }
    pub fn max_payload(&self) -> usize {
        match self {
            Entry::Driver(t) => t.max_payload(),
            Entry::Ddsperf(_) => crate::ddsperf::MAX_SIZE,
        }
    }
    pub fn description(&self) -> &'static str {
        match self {
            Entry::Driver(t) => t.description(),
            Entry::Ddsperf(crate::ddsperf::Trigger::Listener) => {
                "Cyclone's own ddsperf ping/pong on loopback, listener mode (reference; it reports RTT/2, shown ×2)"
            }
            Entry::Ddsperf(crate::ddsperf::Trigger::Waitset) => {
                "Cyclone's own ddsperf ping/pong on loopback, waitset mode (reference; RTT/2 shown ×2)"
            }
        }
    }
}

static UDP: crate::udp::Udp = crate::udp::Udp;
static DDS: crate::dds::Dds = crate::dds::Dds;
static DDS_WAITSET: crate::dds::DdsWaitset = crate::dds::DdsWaitset;
static UDP_RELAY: crate::hop::UdpRelay = crate::hop::UdpRelay;
static DDS_ROUTED: crate::hop::DdsRouted = crate::hop::DdsRouted;

/// Every transport partita knows, in the order they are listed. Fast DDS and shared-memory drivers are added
/// here.
pub fn registry() -> Vec<Entry> {
    use crate::ddsperf::Trigger;
    vec![
        Entry::Driver(&UDP),
        Entry::Driver(&DDS),
        Entry::Driver(&DDS_WAITSET),
        Entry::Driver(&UDP_RELAY),
        Entry::Driver(&DDS_ROUTED),
        Entry::Ddsperf(Trigger::Listener),
        Entry::Ddsperf(Trigger::Waitset),
    ]
}

/// Looks a transport up by name.
pub fn lookup(name: &str) -> Option<Entry> {
    registry().into_iter().find(|e| e.name() == name)
}

/// The names, comma-separated, for error messages.
pub fn known_names() -> String {
    registry().iter().map(|e| e.name()).collect::<Vec<_>>().join(", ")
}
