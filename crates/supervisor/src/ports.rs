//! ARINC 653 channels: their memory, created before any partition starts, the descriptors each partition gets
//! for its own ports, and the health monitor's look at the ports' fault counters.
//!
//! Each channel's memory is made once, when the system comes up (`partita_ports::ChannelMemory`: memory files
//! without a path), and lives as long as the launch specifications that hold its descriptors: a restarted
//! partition gets the same descriptors and finds its channel as it left it. A partition is given only its own
//! ports' descriptors (the source's messages writable, every other end read-only), numbered from 3 in the
//! order of `PARTITA_PORTS`; nothing in its view of the file system leads to any channel.
//!
//! **Faults and who answers for them.** Each port counts its faults in status memory its partition writes and
//! the supervisor reads. The counts are the partition's own word, so they only ever act on the partition that
//! wrote them: a channel's `on_fault` action (restart or stop) applies to the reporting partition for its own
//! faults (an overflow, a stale read, a message too large to send, an illegal operation). A fault it reports of
//! the other end (corrupt peer memory, a received length out of range) is logged naming that end, and acts on
//! nobody: a hostile reader could otherwise have an honest writer restarted by claiming garbage.
use crate::error::{sys_failed, Result};
use partita_env::ports::{Direction, PortEntry, PortKind};
use partita_ports::{ChannelMemory, Fault, PortStatus, StatusReader};
use partita_system::{ChannelKind, FaultAction, Module};
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::sync::Arc;

/// The event a port fault is logged as.
pub const EVENT_PORT_FAULT: &str = "port_fault";

/// Channel memory made so far, by (module, channel).
#[derive(Default)]
pub struct Channels {
    made: BTreeMap<(String, String), ChannelMemory>,
}

/// One port of a running partition, as the health monitor watches it.
pub struct WatchedPort {
    pub partition: String,
    pub module: String,
    pub channel: String,
    pub port: String,
    pub direction: Direction,
    /// The partition at the channel's other end(s), named when this port reports a fault of theirs.
    pub peers: Vec<String>,
    pub on_fault: FaultAction,
    status: StatusReader,
    last: PortStatus,
}

/// What a partition gets for its ports: descriptors (its 3, 4, … in this order) and their description.
pub struct PartitionPorts {
    pub fds: Vec<Arc<OwnedFd>>,
    pub entries: Vec<PortEntry>,
    pub watched: Vec<WatchedPort>,
}

impl Channels {
    /// The ports of partition `partition` of module `m`. `first_fd` is the number its first descriptor gets
    /// (3 when it inherits nothing else).
    pub fn for_partition(&mut self, m: &Module, partition: &str, first_fd: i32) -> Result<PartitionPorts> {
        let mut out = PartitionPorts { fds: Vec::new(), entries: Vec::new(), watched: Vec::new() };
        for (c, port, is_source) in m.ports_of(partition) {
            let (kind, depth_or_refresh) = match c.kind {
                ChannelKind::Sampling { refresh } => (PortKind::Sampling, refresh.as_nanos()),
                ChannelKind::Queuing { depth } => (PortKind::Queuing, u64::from(depth)),
            };
            let key = (m.name.clone(), c.name.clone());
            if !self.made.contains_key(&key) {
                let mem = ChannelMemory::create(&c.name, kind, c.max_message, depth_or_refresh).map_err(sys_failed("memfd_create", format!("channel {} of module {}", c.name, m.name)))?;
                self.made.insert(key.clone(), mem);
            }
            let mem = &self.made[&key];
            let direction = if is_source { Direction::Source } else { Direction::Destination };
            let mut end = mem.end(&port.port, direction, depth_or_refresh).map_err(sys_failed("memfd_create", format!("the descriptors of port {port}")))?;
            end.numbered_from(first_fd + out.fds.len() as i32);
            let (entry, fds, reader) = end.into_parts();
            out.fds.extend(fds.into_iter().map(Arc::new));
            let peers = if is_source { c.destinations.iter().map(|d| d.partition.clone()).collect() } else { vec![c.source.partition.clone()] };
            out.watched.push(WatchedPort {
                partition: partition.to_string(),
                module: m.name.clone(),
                channel: c.name.clone(),
                port: port.port.clone(),
                direction: entry.direction,
                peers,
                on_fault: c.on_fault,
                status: reader,
                last: PortStatus::default(),
            });
            out.entries.push(entry);
        }
        Ok(out)
    }
}

/// A fault a port reported since the last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    pub partition: String,
    pub fault: Fault,
    pub new: u64,
    pub detail: String,
    /// What the supervisor does about it: only ever to `partition`, only for its own faults.
    pub action: FaultAction,
}

impl WatchedPort {
    /// Whether a fault counted at this port is the other end's doing (the reader found the writer's memory
    /// invalid, or the sender found the receiver's).
    fn blames_peer(&self, f: Fault) -> bool {
        matches!(f, Fault::PeerFault) || (f == Fault::TooLarge && self.direction == Direction::Destination)
    }

    /// The faults counted since the last look.
    pub fn read(&mut self) -> Vec<Reported> {
        let now = self.status.read();
        let mut out = Vec::new();
        for f in Fault::ALL {
            let new = now.count(f).wrapping_sub(self.last.count(f));
            if new == 0 {
                continue;
            }
            let blame = self.blames_peer(f);
            let whose = if blame { format!(" (of the other end: {})", self.peers.join(", ")) } else { String::new() };
            out.push(Reported {
                partition: self.partition.clone(),
                fault: f,
                new,
                detail: format!("port {} of channel {}: {} ×{new}{whose}; {} in all", self.port, self.channel, f.as_str(), now.count(f)),
                action: if blame { FaultAction::Ignore } else { self.on_fault },
            });
        }
        self.last = now;
        out
    }

    pub fn status(&self) -> PortStatus {
        self.status.read()
    }
}
