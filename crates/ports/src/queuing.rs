//! Queuing ports: a bounded FIFO from one source to one destination.
use crate::layout::{self, ACK_BYTES, A_HEAD, A_RECEIVER_WAITING, HEADER, Q_DATA, Q_LEN, Q_SENDER_WAITING, Q_TAIL, Q_WRITTEN};
use crate::memory::map_checked;
use crate::{EndFds, Fault, PortError, StatusReader, Timeout};
use partita_os::shm::{Mapping, Wake};
use std::sync::atomic::Ordering;

fn slot_at(n: u32, max_message: u32, depth: u64) -> usize {
    HEADER + (u64::from(n) % depth) as usize * layout::queuing_slot(max_message)
}

fn sys<'a>(name: &'a str, what: &'static str) -> impl FnOnce(std::io::Error) -> PortError + 'a {
    move |source| PortError::Sys { name: name.to_string(), what, source }
}

/// A received message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Its length: the first `len` bytes of the caller's buffer.
    pub len: usize,
    /// When the sender wrote it (CLOCK_MONOTONIC ns, as the sender says).
    pub written_ns: u64,
}

/// The sending end of a queuing channel.
#[derive(Debug)]
pub struct QueuingSource {
    name: String,
    max_message: u32,
    depth: u64,
    data: Mapping,
    ack: Mapping,
    status: StatusReader,
    tail: u32,
}

/// Maps a queuing port's memories: the messages (writable at the source), the acknowledgements (writable at the
/// destination) and its status.
fn map_queue(name: &str, max_message: u32, depth: u64, fds: &EndFds, source: bool) -> Result<(Mapping, Mapping, StatusReader), PortError> {
    let data = map_checked(name, &fds.data, source, layout::queuing_bytes(max_message, depth), "map the channel")?;
    let ack_fd = fds.ack.as_ref().ok_or_else(|| PortError::PeerFault { name: name.to_string(), what: "a queuing port without acknowledgement memory" })?;
    let ack = map_checked(name, ack_fd, !source, ACK_BYTES, "map the acknowledgements")?;
    let status = StatusReader::writable(&fds.status).map_err(sys(name, "map the status"))?;
    Ok((data, ack, status))
}

impl QueuingSource {
    pub fn open(name: &str, max_message: u32, depth: u64, fds: EndFds) -> Result<QueuingSource, PortError> {
        let (data, ack, status) = map_queue(name, max_message, depth, &fds, true)?;
        let tail = data.load32(Q_TAIL, Ordering::Acquire);
        Ok(QueuingSource { name: name.to_string(), max_message, depth, data, ack, status, tail })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_message(&self) -> u32 {
        self.max_message
    }

    pub fn depth(&self) -> u64 {
        self.depth
    }

    /// Sends a copy of `msg`.
    pub fn send(&mut self, msg: &[u8], timeout: Timeout) -> Result<(), PortError> {
        self.send_with(msg.len(), timeout, |buf| buf.copy_from_slice(msg))
    }

    /// Sends a message of `len` bytes that `fill` writes in place, in the channel's memory.
    pub fn send_with(&mut self, len: usize, timeout: Timeout, fill: impl FnOnce(&mut [u8])) -> Result<(), PortError> {
        if len > self.max_message as usize {
            self.status.count(Fault::TooLarge);
            return Err(PortError::TooLarge { name: self.name.clone(), len, max: self.max_message });
        }
        let deadline = timeout.deadline_ns();
        loop {
            let head = self.ack.load32(A_HEAD, Ordering::SeqCst);
            let used = u64::from(self.tail.wrapping_sub(head));
            if used > self.depth {
                self.status.count(Fault::PeerFault);
                return Err(PortError::PeerFault { name: self.name.clone(), what: "the receiver has taken more than was sent" });
            }
            if used < self.depth {
                break;
            }
            let Some(deadline) = deadline else {
                self.status.count(Fault::Overflow);
                return Err(PortError::Full { name: self.name.clone(), depth: self.depth });
            };
            self.data.store32(Q_SENDER_WAITING, 1, Ordering::SeqCst);
            if self.ack.load32(A_HEAD, Ordering::SeqCst) != head {
                continue;
            }
            if self.ack.wait(A_HEAD, head, deadline).map_err(sys(&self.name, "wait for room"))? == Wake::TimedOut {
                self.data.store32(Q_SENDER_WAITING, 0, Ordering::SeqCst);
                self.status.count(Fault::Overflow);
                return Err(PortError::TimedOut { name: self.name.clone() });
            }
        }
        self.data.store32(Q_SENDER_WAITING, 0, Ordering::Relaxed);
        let slot = slot_at(self.tail, self.max_message, self.depth);
        self.data.store32(slot + Q_LEN, len as u32, Ordering::Relaxed);
        self.data.store64(slot + Q_WRITTEN, partita_os::clock::monotonic_ns(), Ordering::Relaxed);
        self.data.fill_with(slot + Q_DATA, len, fill);
        self.tail = self.tail.wrapping_add(1);
        self.data.store32(Q_TAIL, self.tail, Ordering::SeqCst);
        if self.ack.load32(A_RECEIVER_WAITING, Ordering::SeqCst) != 0 {
            self.data.wake(Q_TAIL).map_err(sys(&self.name, "wake the receiver"))?;
        }
        self.status.moved();
        Ok(())
    }
}

/// The receiving end of a queuing channel.
#[derive(Debug)]
pub struct QueuingDestination {
    name: String,
    max_message: u32,
    depth: u64,
    data: Mapping,
    ack: Mapping,
    status: StatusReader,
    head: u32,
}

impl QueuingDestination {
    pub fn open(name: &str, max_message: u32, depth: u64, fds: EndFds) -> Result<QueuingDestination, PortError> {
        let (data, ack, status) = map_queue(name, max_message, depth, &fds, false)?;
        let head = ack.load32(A_HEAD, Ordering::Acquire);
        Ok(QueuingDestination { name: name.to_string(), max_message, depth, data, ack, status, head })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn max_message(&self) -> u32 {
        self.max_message
    }

    pub fn depth(&self) -> u64 {
        self.depth
    }

    fn available(&self) -> Result<u32, PortError> {
        let tail = self.data.load32(Q_TAIL, Ordering::SeqCst);
        let n = tail.wrapping_sub(self.head);
        if u64::from(n) > self.depth {
            self.status.count(Fault::PeerFault);
            return Err(PortError::PeerFault { name: self.name.clone(), what: "the sender claims more messages than the queue holds" });
        }
        Ok(n)
    }

    /// Messages waiting.
    pub fn pending(&self) -> Result<u64, PortError> {
        self.available().map(u64::from)
    }

    /// Takes the oldest message into `buf` (at least the message's length).
    pub fn receive(&mut self, buf: &mut [u8], timeout: Timeout) -> Result<Received, PortError> {
        let deadline = timeout.deadline_ns();
        loop {
            let tail = self.head.wrapping_add(self.available()?);
            if tail != self.head {
                break;
            }
            let Some(deadline) = deadline else {
                return Err(PortError::Empty { name: self.name.clone() });
            };
            self.ack.store32(A_RECEIVER_WAITING, 1, Ordering::SeqCst);
            if self.data.load32(Q_TAIL, Ordering::SeqCst) != tail {
                continue;
            }
            if self.data.wait(Q_TAIL, tail, deadline).map_err(sys(&self.name, "wait for a message"))? == Wake::TimedOut {
                self.ack.store32(A_RECEIVER_WAITING, 0, Ordering::SeqCst);
                return Err(PortError::TimedOut { name: self.name.clone() });
            }
        }
        self.ack.store32(A_RECEIVER_WAITING, 0, Ordering::Relaxed);
        let slot = slot_at(self.head, self.max_message, self.depth);
        let len = self.data.load32(slot + Q_LEN, Ordering::Acquire) as usize;
        let written_ns = self.data.load64(slot + Q_WRITTEN, Ordering::Relaxed);
        if len > self.max_message as usize {
            // A length no honest sender writes: the slot is dropped, so that one bad message does not block
            // the queue.
            self.consume()?;
            self.status.count(Fault::TooLarge);
            return Err(PortError::TooLarge { name: self.name.clone(), len, max: self.max_message });
        }
        if len > buf.len() {
            return Err(PortError::BufferTooSmall { name: self.name.clone(), len, buffer: buf.len() });
        }
        self.data.read(slot + Q_DATA, &mut buf[..len]);
        self.consume()?;
        self.status.moved();
        Ok(Received { len, written_ns })
    }

    fn consume(&mut self) -> Result<(), PortError> {
        self.head = self.head.wrapping_add(1);
        self.ack.store32(A_HEAD, self.head, Ordering::SeqCst);
        if self.data.load32(Q_SENDER_WAITING, Ordering::SeqCst) != 0 {
            self.ack.wake(A_HEAD).map_err(sys(&self.name, "wake the sender"))?;
        }
        Ok(())
    }
}
