//! Sampling ports: the latest message of a channel, with its age.
use crate::layout::{self, HEADER, S_DATA, S_LATEST, S_LEN, S_SEQ, S_WRITTEN};
use crate::memory::map_checked;
use crate::{EndFds, Fault, PortError, StatusReader};
use partita_os::shm::Mapping;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// How often a reader looks again at a message being overwritten before it reports the writer as faulty. An
/// honest writer writes the slot the latest message is not in, so a reader retries only when the writer has
/// written twice during one read.
const READ_TRIES: usize = 64;

/// Whether a sampling message is no older than the channel's refresh period (ARINC 653's VALIDITY_TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    Valid,
    Invalid,
}

/// What a sampling read found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// The message's length; its bytes are the first `len` of the caller's buffer.
    pub len: usize,
    /// How long ago it was written (CLOCK_MONOTONIC, shared by every partition of the machine).
    pub age: Duration,
    pub validity: Validity,
    /// Messages written to the channel so far, this one included.
    pub sequence: u64,
}

fn slot_at(n: u64, max_message: u32) -> usize {
    HEADER + (n % layout::SAMPLING_SLOTS as u64) as usize * layout::sampling_slot(max_message)
}

/// The writing end of a sampling channel.
#[derive(Debug)]
pub struct SamplingSource {
    name: String,
    max_message: u32,
    data: Mapping,
    status: StatusReader,
    written: u64,
}

impl SamplingSource {
    pub fn open(name: &str, max_message: u32, fds: EndFds) -> Result<SamplingSource, PortError> {
        let data = map_checked(name, &fds.data, true, layout::sampling_bytes(max_message), "map the channel")?;
        let status = StatusReader::writable(&fds.status).map_err(|source| PortError::Sys { name: name.to_string(), what: "map the status", source })?;
        // The writer's own memory: a restarted writer goes on from what it had written.
        let written = data.load64(S_LATEST, Ordering::Acquire);
        Ok(SamplingSource { name: name.to_string(), max_message, data, status, written })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_message(&self) -> u32 {
        self.max_message
    }

    /// Writes `msg` (a copy into the channel).
    pub fn write(&mut self, msg: &[u8]) -> Result<(), PortError> {
        self.write_with(msg.len(), |buf| buf.copy_from_slice(msg))
    }

    /// Writes a message of `len` bytes that `fill` writes in place, in the channel's memory (no copy).
    pub fn write_with(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Result<(), PortError> {
        if len > self.max_message as usize {
            self.status.count(Fault::TooLarge);
            return Err(PortError::TooLarge { name: self.name.clone(), len, max: self.max_message });
        }
        let n = self.written.wrapping_add(1).max(1);
        let slot = slot_at(n, self.max_message);
        // Even while stable; a writer that died in the middle of a write left it odd.
        let seq = self.data.load64(slot + S_SEQ, Ordering::Relaxed) | 1;
        self.data.store64(slot + S_SEQ, seq, Ordering::Relaxed);
        fence(Ordering::Release);
        self.data.store32(slot + S_LEN, len as u32, Ordering::Relaxed);
        self.data.store64(slot + S_WRITTEN, partita_os::clock::monotonic_ns(), Ordering::Relaxed);
        self.data.fill_with(slot + S_DATA, len, fill);
        self.data.store64(slot + S_SEQ, seq.wrapping_add(1), Ordering::Release);
        self.data.store64(S_LATEST, n, Ordering::Release);
        self.written = n;
        self.status.moved();
        Ok(())
    }
}

/// A reading end of a sampling channel.
#[derive(Debug)]
pub struct SamplingDestination {
    name: String,
    max_message: u32,
    refresh: Duration,
    data: Mapping,
    status: StatusReader,
}

impl SamplingDestination {
    pub fn open(name: &str, max_message: u32, refresh: Duration, fds: EndFds) -> Result<SamplingDestination, PortError> {
        let data = map_checked(name, &fds.data, false, layout::sampling_bytes(max_message), "map the channel")?;
        let status = StatusReader::writable(&fds.status).map_err(|source| PortError::Sys { name: name.to_string(), what: "map the status", source })?;
        Ok(SamplingDestination { name: name.to_string(), max_message, refresh, data, status })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_message(&self) -> u32 {
        self.max_message
    }

    pub fn refresh(&self) -> Duration {
        self.refresh
    }

    fn fault(&self, f: Fault, what: &'static str) -> PortError {
        self.status.count(f);
        PortError::PeerFault { name: self.name.clone(), what }
    }

    /// Copies the latest message into `buf` (at least the channel's maximum message size, or the message's).
    pub fn read(&mut self, buf: &mut [u8]) -> Result<Sample, PortError> {
        for _ in 0..READ_TRIES {
            let latest = self.data.load64(S_LATEST, Ordering::Acquire);
            if latest == 0 {
                return Err(PortError::Empty { name: self.name.clone() });
            }
            let slot = slot_at(latest, self.max_message);
            let s1 = self.data.load64(slot + S_SEQ, Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = self.data.load32(slot + S_LEN, Ordering::Relaxed) as usize;
            let written = self.data.load64(slot + S_WRITTEN, Ordering::Relaxed);
            let copied = len.min(self.max_message as usize).min(buf.len());
            self.data.read(slot + S_DATA, &mut buf[..copied]);
            fence(Ordering::Acquire);
            if self.data.load64(slot + S_SEQ, Ordering::Relaxed) != s1 {
                continue;
            }
            if len > self.max_message as usize {
                self.status.count(Fault::TooLarge);
                return Err(PortError::TooLarge { name: self.name.clone(), len, max: self.max_message });
            }
            if len > buf.len() {
                return Err(PortError::BufferTooSmall { name: self.name.clone(), len, buffer: buf.len() });
            }
            let now = partita_os::clock::monotonic_ns();
            if written > now {
                return Err(self.fault(Fault::PeerFault, "a message written in the future"));
            }
            let age = Duration::from_nanos(now - written);
            let validity = if age <= self.refresh { Validity::Valid } else { Validity::Invalid };
            if validity == Validity::Invalid {
                self.status.count(Fault::Stale);
            }
            self.status.moved();
            return Ok(Sample { len, age, validity, sequence: latest });
        }
        Err(self.fault(Fault::PeerFault, "a write that never ends"))
    }
}
