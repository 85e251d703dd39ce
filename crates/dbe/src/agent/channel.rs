//! What an implementation provides to the benchmark's agents: the two topics of paper 002's benchmark,
//! `PubMessage { long seqnum; sequence<octet, 16384> data; }` and `AckMessage { long seqnum; }`, as the
//! endpoints one role needs, with the QoS the test asks for. The measuring loops (`ping`, `pong`, `pub`,
//! `sub`) are written once, over this trait, so every implementation is measured by the same code; only the
//! Fast DDS agent, a C++ program, repeats them (fastdds/agent.cpp).
use crate::agent::AgentError;
use std::time::Duration;

/// The largest `data` of a `PubMessage` (paper 002's `MAX_MSG_LENGTH`).
pub const MAX_DATA: usize = 16_384;
/// The sequence number of the end marker: a `PubMessage` with it tells pongs and subs that the test is over.
pub const END_SEQ: i32 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reliability {
    Reliable,
    BestEffort,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub enum History {
    KeepLast(u32),
    KeepAll,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    Volatile,
    TransientLocal,
}

/// The QoS of both topics' writers and readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QosChoice {
    pub reliability: Reliability,
    pub history: History,
    pub durability: Durability,
}

/// Which endpoints a role needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ends {
    pub pub_writer: bool,
    pub pub_reader: bool,
    pub ack_writer: bool,
    pub ack_reader: bool,
}

/// Where and how to open the endpoints.
#[derive(Debug, Clone)]
pub struct ChannelConfig {
    /// The DDS domain id.
    pub domain: u32,
    /// `PubMessage` travels on `{topic}_pub`, `AckMessage` on `{topic}_ack`.
    pub topic: String,
    pub qos: QosChoice,
    pub ends: Ends,
    /// Peer addresses given on the command line (`--peer`), for implementations that need them (UDP).
    pub peers: Vec<String>,
    /// An address to listen on (`--listen`), for implementations that need one (UDP).
    pub listen: Option<String>,
    /// How long a closing channel may wait for its reliable writers' samples to be acknowledged, for
    /// implementations that wait (RustDDS): three times `--idle-s`.
    pub linger: Duration,
}

impl ChannelConfig {
    pub fn pub_topic(&self) -> String {
        format!("{}_pub", self.topic)
    }
    pub fn ack_topic(&self) -> String {
        format!("{}_ack", self.topic)
    }
}

/// How many remote endpoints each local endpoint has matched (0 for an endpoint the role does not have).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Matched {
    /// Readers matched by the `PubMessage` writer.
    pub pub_readers: u32,
    /// Writers matched by the `PubMessage` reader.
    pub pub_writers: u32,
    /// Readers matched by the `AckMessage` writer.
    pub ack_readers: u32,
    /// Writers matched by the `AckMessage` reader.
    pub ack_writers: u32,
}

/// One implementation's endpoints. Every method may be called only for the ends that were asked for.
pub trait Channel: Send {
    /// Writes one `PubMessage`.
    fn write_pub(&mut self, seq: i32, data: &[u8]) -> Result<(), AgentError>;
    /// Waits at most `timeout` for `PubMessage`s, then calls `f(seqnum, data length)` for each one taken;
    /// returns how many were taken (0 when the wait ran out).
    fn take_pub(&mut self, timeout: Duration, f: &mut dyn FnMut(i32, usize)) -> Result<usize, AgentError>;
    /// Writes one `AckMessage`.
    fn write_ack(&mut self, seq: i32) -> Result<(), AgentError>;
    /// As [`Channel::take_pub`] for `AckMessage`s.
    fn take_ack(&mut self, timeout: Duration, f: &mut dyn FnMut(i32)) -> Result<usize, AgentError>;
    /// The remote endpoints matched so far.
    fn matched(&mut self) -> Result<Matched, AgentError>;
}
