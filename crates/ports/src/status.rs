//! A port's status memory: the faults its partition met on it, counted where the supervisor's health monitor
//! reads them. The partition writes its own counters, so a hostile partition can only misreport its own port.
use partita_os::shm::Mapping;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

/// A health-monitor event of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// A send found the queue full.
    Overflow,
    /// A sampling read returned a message older than the channel's refresh period.
    Stale,
    /// A message longer than the channel's maximum: one a sender tried to send, or a length a reader found.
    TooLarge,
    /// An operation the port does not allow: a port not given, the wrong kind or direction, opened twice.
    IllegalOperation,
    /// The other end's memory held values no valid writer writes (counters out of range, a write that never
    /// ends): the message was not taken.
    PeerFault,
}

impl Fault {
    pub const ALL: [Fault; 5] = [Fault::Overflow, Fault::Stale, Fault::TooLarge, Fault::IllegalOperation, Fault::PeerFault];

    fn offset(self) -> usize {
        8 * self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Fault::Overflow => "overflow",
            Fault::Stale => "stale message",
            Fault::TooLarge => "message too large",
            Fault::IllegalOperation => "illegal port operation",
            Fault::PeerFault => "corrupt peer memory",
        }
    }
}

const MESSAGES: usize = 40;

/// A port's counters as the supervisor reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStatus {
    pub faults: [u64; 5],
    pub messages: u64,
}

impl PortStatus {
    pub fn count(&self, f: Fault) -> u64 {
        self.faults[f as usize]
    }
}

/// A mapping of a port's status memory.
#[derive(Debug)]
pub struct StatusReader(Mapping);

impl StatusReader {
    /// The partition's side: it counts.
    pub fn writable(fd: &OwnedFd) -> std::io::Result<StatusReader> {
        Ok(StatusReader(Mapping::map(fd, true)?))
    }

    /// The supervisor's side: it reads (its own descriptor is writable; it never writes).
    pub fn for_supervisor(fd: &OwnedFd) -> std::io::Result<StatusReader> {
        Ok(StatusReader(Mapping::map(fd, false)?))
    }

    pub fn count(&self, f: Fault) {
        let at = f.offset();
        self.0.store64(at, self.0.load64(at, Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    pub(crate) fn moved(&self) {
        self.0.store64(MESSAGES, self.0.load64(MESSAGES, Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    pub fn read(&self) -> PortStatus {
        let mut s = PortStatus::default();
        for f in Fault::ALL {
            s.faults[f as usize] = self.0.load64(f.offset(), Ordering::Relaxed);
        }
        s.messages = self.0.load64(MESSAGES, Ordering::Relaxed);
        s
    }
}
