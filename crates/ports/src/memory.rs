//! A channel's memory as the supervisor creates it, and the descriptors each end gets.
use crate::layout;
use crate::{Direction, PortEntry, PortError, PortKind, StatusReader};
use partita_os::shm;
use std::io;
use std::os::fd::OwnedFd;

/// The descriptors of one port's end: its channel's message memory (writable at the source, read-only at a
/// destination), its own status memory, and a queuing channel's acknowledgement memory (writable at the
/// destination, read-only at the source).
#[derive(Debug)]
pub struct EndFds {
    pub data: OwnedFd,
    pub status: OwnedFd,
    pub ack: Option<OwnedFd>,
}

/// One channel's memory, created before its partitions start and kept by the supervisor for as long as the
/// system is up (a restarted partition finds its channel as it left it).
#[derive(Debug)]
pub struct ChannelMemory {
    pub kind: PortKind,
    pub max_message: u32,
    pub data: OwnedFd,
    pub ack: Option<OwnedFd>,
}

impl ChannelMemory {
    /// Creates the memory of a channel named `name` (the name shows in `/proc/<pid>/fd` as `memfd:<name>`).
    pub fn create(name: &str, kind: PortKind, max_message: u32, depth: u64) -> io::Result<ChannelMemory> {
        let (bytes, ack) = match kind {
            PortKind::Sampling => (layout::sampling_bytes(max_message), None),
            PortKind::Queuing => (layout::queuing_bytes(max_message, depth), Some(shm::create(&format!("partita-ack-{name}"), layout::ACK_BYTES)?)),
        };
        Ok(ChannelMemory { kind, max_message, data: shm::create(&format!("partita-channel-{name}"), bytes)?, ack })
    }

    /// The source's descriptors: the messages writable, the acknowledgements read-only.
    pub fn source(&self, status: OwnedFd) -> io::Result<EndFds> {
        Ok(EndFds { data: self.data.try_clone()?, status, ack: self.ack.as_ref().map(shm::read_only).transpose()? })
    }

    /// A destination's descriptors: the messages read-only, the acknowledgements writable.
    pub fn destination(&self, status: OwnedFd) -> io::Result<EndFds> {
        Ok(EndFds { data: shm::read_only(&self.data)?, status, ack: self.ack.as_ref().map(OwnedFd::try_clone).transpose()? })
    }
}

/// One end of a channel as the supervisor hands it out: the port's description, its descriptors, and the
/// supervisor's view of its status.
#[derive(Debug)]
pub struct PortEnd {
    /// The port, its descriptors numbered as this process holds them (see [`PortEnd::numbered_from`]).
    pub entry: PortEntry,
    pub fds: EndFds,
    pub status: StatusReader,
}

impl PortEnd {
    /// Numbers the descriptors from `first` in the order a child is given them (messages, status,
    /// acknowledgements); returns the next free number.
    pub fn numbered_from(&mut self, first: i32) -> i32 {
        self.entry.data_fd = first;
        self.entry.status_fd = first + 1;
        self.entry.ack_fd = self.fds.ack.as_ref().map(|_| first + 2);
        first + if self.fds.ack.is_some() { 3 } else { 2 }
    }

    /// Lets a child process started from here inherit this end's descriptors (at their numbers in
    /// [`PortEnd::entry`]), or stops it: what hands a port to a process started without the supervisor (tests,
    /// benchmarks). A process spawning other children meanwhile must keep them from inheriting it.
    pub fn set_inheritable(&self, inheritable: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        for fd in [Some(&self.fds.data), Some(&self.fds.status), self.fds.ack.as_ref()].into_iter().flatten() {
            partita_os::fd::set_inheritable(fd.as_raw_fd(), inheritable)?;
        }
        Ok(())
    }

    /// The description, the descriptors in the order [`PortEnd::numbered_from`] numbers them, and the status.
    pub fn into_parts(self) -> (PortEntry, Vec<OwnedFd>, StatusReader) {
        let EndFds { data, status, ack } = self.fds;
        (self.entry, std::iter::once(data).chain(std::iter::once(status)).chain(ack).collect(), self.status)
    }
}

impl ChannelMemory {
    /// The end of this channel named `port` at `direction`, with a status memory of its own. `depth_or_refresh`
    /// is the channel's depth (queuing) or refresh period in ns (sampling), as `PARTITA_PORTS` gives it.
    pub fn end(&self, port: &str, direction: Direction, depth_or_refresh: u64) -> io::Result<PortEnd> {
        let status_fd = create_status(port)?;
        let status = StatusReader::for_supervisor(&status_fd)?;
        let fds = match direction {
            Direction::Source => self.source(status_fd)?,
            Direction::Destination => self.destination(status_fd)?,
        };
        use std::os::fd::AsRawFd;
        let entry = PortEntry {
            name: port.to_string(),
            kind: self.kind,
            direction,
            max_message: self.max_message,
            depth_or_refresh,
            data_fd: fds.data.as_raw_fd(),
            status_fd: fds.status.as_raw_fd(),
            ack_fd: fds.ack.as_ref().map(AsRawFd::as_raw_fd),
        };
        Ok(PortEnd { entry, fds, status })
    }
}

/// A port's status memory (writable by its partition, read by the supervisor).
pub fn create_status(port: &str) -> io::Result<OwnedFd> {
    shm::create(&format!("partita-status-{port}"), layout::STATUS_BYTES)
}

/// Maps `fd` and checks that it is big enough for what the supervisor said it holds, and sealed so that the
/// other end cannot shrink it under this mapping.
pub(crate) fn map_checked(name: &str, fd: &OwnedFd, writable: bool, at_least: usize, what: &'static str) -> Result<shm::Mapping, PortError> {
    if !shm::is_size_sealed(fd) {
        return Err(PortError::PeerFault { name: name.to_string(), what: "its memory is not sealed against resizing" });
    }
    let m = crate::map(name, fd, writable, what)?;
    if m.len() < at_least {
        return Err(PortError::PeerFault { name: name.to_string(), what: "its memory is smaller than its geometry" });
    }
    Ok(m)
}
