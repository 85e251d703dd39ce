//! partita-ports: ARINC 653 sampling and queuing ports between the partitions of one module.
//!
//! A **channel** connects one source port to one destination port (queuing) or to one or more (sampling). The
//! supervisor creates each channel's memory before the partitions start ([`ChannelMemory`]: memory files with no
//! path, see `partita_os::shm`) and hands each partition only the descriptors of its own ports, the source's
//! writable, every other read-only, with their geometry in `PARTITA_PORTS`. A partition opens its ports by name
//! from [`Ports::from_env`].
//!
//! - [`SamplingSource`] / [`SamplingDestination`]: the latest message, overwritten by each write; a read
//!   returns it with its age and whether it is valid (no older than the channel's refresh period). Two slots
//!   with a sequence word each: a writer frozen in the middle of a write leaves the previous message readable.
//! - [`QueuingSource`] / [`QueuingDestination`]: a bounded FIFO, one message per slot; send and receive each
//!   non-blocking, with a timeout or without; a full queue is an overflow the sender counts. A waiting end sleeps
//!   on a futex with an absolute deadline, so time spent frozen outside its windows counts against the timeout.
//!
//! A planned process partition also gets its **control page** ([`control`]): its mode, start condition and
//! plan as the supervisor writes them, and the requests it posts (a mode change, an error it raises, a plan
//! switch), which the supervisor reads as hostile input and answers.
//!
//! **The other end is untrusted.** A reader validates every length, counter and sequence it reads from memory
//! the writer controls, bounds its retries, and reports what it found as a [`Fault`] in its port's status
//! memory, which the supervisor's health monitor reads. A hostile writer can fill or garble its own channel; it
//! cannot make a reader read outside its mapping, wait forever (timeouts), or loop without end.
#![forbid(unsafe_code)]

pub mod control;
pub mod dds_frame;
pub mod layout;
mod memory;
mod queuing;
mod sampling;
mod status;

pub use memory::{create_status, ChannelMemory, EndFds, PortEnd};
pub use partita_env::ports::{Direction, PortEntry, PortKind};
pub use queuing::{QueuingDestination, QueuingSource, Received};
pub use sampling::{Sample, SamplingDestination, SamplingSource, Validity};
pub use status::{Fault, PortStatus, StatusReader};

use std::os::fd::OwnedFd;
use std::time::Duration;

/// What a port operation failed with.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("no port {name:?} was given to this partition (its ports: {given}); add a channel with this port to the system file")]
    NoSuchPort { name: String, given: String },
    #[error("port {name:?} is a {is} port, opened as a {asked} one")]
    WrongPort { name: String, is: String, asked: String },
    #[error("port {name:?} is already open in this process")]
    AlreadyOpen { name: String },
    #[error("a message of {len} bytes does not fit port {name:?} (at most {max})")]
    TooLarge { name: String, len: usize, max: u32 },
    #[error("port {name:?}: a message of {len} bytes does not fit a buffer of {buffer}; give a buffer of the channel's maximum message size")]
    BufferTooSmall { name: String, len: usize, buffer: usize },
    #[error("port {name:?} holds no message yet")]
    Empty { name: String },
    #[error("port {name:?}: the queue is full ({depth} messages)")]
    Full { name: String, depth: u64 },
    #[error("port {name:?}: timed out")]
    TimedOut { name: String },
    #[error("port {name:?}: the other end's memory is not valid ({what}); the message is not taken")]
    PeerFault { name: String, what: &'static str },
    #[error("port {name:?}: {what}: {source}")]
    Sys { name: String, what: &'static str, source: std::io::Error },
    #[error(transparent)]
    Description(#[from] partita_env::ports::BadPorts),
}

impl PortError {
    /// The health-monitor event this error is, if it is one.
    pub fn fault(&self) -> Option<Fault> {
        match self {
            PortError::TooLarge { .. } => Some(Fault::TooLarge),
            PortError::Full { .. } => Some(Fault::Overflow),
            PortError::PeerFault { .. } => Some(Fault::PeerFault),
            PortError::NoSuchPort { .. } | PortError::WrongPort { .. } | PortError::AlreadyOpen { .. } => Some(Fault::IllegalOperation),
            _ => None,
        }
    }
}

/// How long an operation may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// Not at all: fail with `Empty` or `Full` at once.
    Immediate,
    /// At most this long, on the monotonic clock: time the partition spends frozen counts.
    After(Duration),
    /// Until the other end acts.
    Infinite,
}

impl Timeout {
    /// ARINC 653's time-out in nanoseconds, as the APEX services and the C API take it: 0 does not wait, a
    /// negative time (INFINITE_TIME_VALUE) waits without end, anything else waits at most that long.
    pub fn from_ns(ns: i64) -> Timeout {
        match u64::try_from(ns) {
            Ok(0) => Timeout::Immediate,
            Ok(ns) => Timeout::After(Duration::from_nanos(ns)),
            Err(_) => Timeout::Infinite,
        }
    }

    fn deadline_ns(self) -> Option<Option<u64>> {
        match self {
            Timeout::Immediate => None,
            Timeout::After(d) => Some(Some(partita_os::clock::monotonic_ns().saturating_add(d.as_nanos().min(u128::from(u64::MAX)) as u64))),
            Timeout::Infinite => Some(None),
        }
    }
}

/// The ports the supervisor gave this partition, opened by name.
#[derive(Debug, Default)]
pub struct Ports {
    entries: Vec<Given>,
    /// The first port's status: where an operation on no port at all (a name not given) is counted.
    partition_status: Option<StatusReader>,
}

#[derive(Debug)]
struct Given {
    entry: PortEntry,
    /// `None` once opened.
    fds: Option<EndFds>,
}

impl Ports {
    /// The ports of `PARTITA_PORTS`, their descriptors taken over (close-on-exec from here on); none outside a
    /// partition or when the system file gives it none.
    pub fn from_env() -> Result<Ports, PortError> {
        let entries = match partita_env::ports::ports() {
            None => return Ok(Ports::default()),
            Some(r) => r?,
        };
        let mut given = Vec::new();
        for entry in entries {
            let name = entry.name.clone();
            let take = |fd: i32, what| partita_os::fd::take_inherited(fd).map_err(|source| PortError::Sys { name: name.clone(), what, source });
            let fds = EndFds { data: take(entry.data_fd, "take the channel's descriptor")?, status: take(entry.status_fd, "take the status descriptor")?, ack: entry.ack_fd.map(|a| take(a, "take the acknowledgement descriptor")).transpose()? };
            given.push(Given { entry, fds: Some(fds) });
        }
        Ok(Ports::given(given))
    }

    /// Ports made in this process (tests and benchmarks): each entry with its descriptors.
    pub fn from_fds(ports: Vec<(PortEntry, EndFds)>) -> Ports {
        Ports::given(ports.into_iter().map(|(entry, fds)| Given { entry, fds: Some(fds) }).collect())
    }

    fn given(entries: Vec<Given>) -> Ports {
        let partition_status = entries.first().and_then(|g| g.fds.as_ref()).and_then(|f| f.status.try_clone().ok()).and_then(|fd| StatusReader::writable(&fd).ok());
        Ports { entries, partition_status }
    }

    /// The ports, with their kind and direction.
    pub fn list(&self) -> impl Iterator<Item = &PortEntry> {
        self.entries.iter().map(|g| &g.entry)
    }

    fn take(&mut self, name: &str, kind: PortKind, direction: Direction) -> Result<(PortEntry, EndFds), PortError> {
        let result = self.try_take(name, kind, direction);
        if let Err(e) = &result {
            if e.fault() == Some(Fault::IllegalOperation) {
                if let Some(s) = &self.partition_status {
                    s.count(Fault::IllegalOperation);
                }
            }
        }
        result
    }

    fn try_take(&mut self, name: &str, kind: PortKind, direction: Direction) -> Result<(PortEntry, EndFds), PortError> {
        let given = self.entries.iter().map(|g| g.entry.name.as_str()).collect::<Vec<_>>().join(", ");
        let Some(g) = self.entries.iter_mut().find(|g| g.entry.name == name) else {
            return Err(PortError::NoSuchPort { name: name.to_string(), given: if given.is_empty() { "none".into() } else { given } });
        };
        if g.entry.kind != kind || g.entry.direction != direction {
            return Err(PortError::WrongPort { name: name.to_string(), is: format!("{} {}", g.entry.kind.as_str(), g.entry.direction.as_str()), asked: format!("{} {}", kind.as_str(), direction.as_str()) });
        }
        match g.fds.take() {
            Some(fds) => Ok((g.entry.clone(), fds)),
            None => Err(PortError::AlreadyOpen { name: name.to_string() }),
        }
    }

    pub fn sampling_source(&mut self, name: &str) -> Result<SamplingSource, PortError> {
        let (e, fds) = self.take(name, PortKind::Sampling, Direction::Source)?;
        SamplingSource::open(&e.name, e.max_message, fds)
    }

    pub fn sampling_destination(&mut self, name: &str) -> Result<SamplingDestination, PortError> {
        let (e, fds) = self.take(name, PortKind::Sampling, Direction::Destination)?;
        SamplingDestination::open(&e.name, e.max_message, Duration::from_nanos(e.depth_or_refresh), fds)
    }

    pub fn queuing_source(&mut self, name: &str) -> Result<QueuingSource, PortError> {
        let (e, fds) = self.take(name, PortKind::Queuing, Direction::Source)?;
        QueuingSource::open(&e.name, e.max_message, e.depth_or_refresh, fds)
    }

    pub fn queuing_destination(&mut self, name: &str) -> Result<QueuingDestination, PortError> {
        let (e, fds) = self.take(name, PortKind::Queuing, Direction::Destination)?;
        QueuingDestination::open(&e.name, e.max_message, e.depth_or_refresh, fds)
    }
}

/// Maps one of a port's descriptors.
pub(crate) fn map(name: &str, fd: &OwnedFd, writable: bool, what: &'static str) -> Result<partita_os::shm::Mapping, PortError> {
    partita_os::shm::Mapping::map(fd, writable).map_err(|source| PortError::Sys { name: name.to_string(), what, source })
}
