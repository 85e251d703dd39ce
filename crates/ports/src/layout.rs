//! Where things are in a channel's memory. Every offset is computed from the geometry the supervisor gave
//! (`PARTITA_PORTS`), never read from the memory itself.
//!
//! Sampling channel (written by its source, read by its destinations):
//!
//! | offset | what |
//! |---|---|
//! | 0 | `latest`, u64: messages written so far; the newest is in slot `latest % 2` (0: none yet) |
//! | 64 + i·slot | slot i (of 2): `seq` u64 (odd while written), `len` u32 at +8, `written_ns` u64 at +16, bytes at +24 |
//!
//! Queuing channel, message memory (written by its source):
//!
//! | offset | what |
//! |---|---|
//! | 0 | `tail`, u32: messages sent so far (wrapping); the futex a waiting receiver sleeps on |
//! | 4 | `sender_waiting`, u32: 1 while the sender sleeps on the receiver's `head` |
//! | 64 + i·slot | slot i (of depth): `len` u32, `written_ns` u64 at +8, bytes at +16 |
//!
//! and its acknowledgement memory (written by its destination):
//!
//! | offset | what |
//! |---|---|
//! | 0 | `head`, u32: messages received so far (wrapping); the futex a waiting sender sleeps on |
//! | 4 | `receiver_waiting`, u32: 1 while the receiver sleeps on `tail` |
//!
//! A port's status memory (written by its partition, read by the supervisor): the [`crate::Fault`] counters,
//! one u64 each, then the messages it moved.

/// The largest message a channel may carry.
pub const MAX_MESSAGE: u32 = 4 << 20;
/// The deepest queue.
pub const MAX_DEPTH: u64 = 4096;
/// The most memory one channel's messages may take.
pub const MAX_CHANNEL_BYTES: u64 = 64 << 20;

pub const HEADER: usize = 64;
pub const SAMPLING_SLOTS: usize = 2;

pub const S_LATEST: usize = 0;
pub const S_SEQ: usize = 0;
pub const S_LEN: usize = 8;
pub const S_WRITTEN: usize = 16;
pub const S_DATA: usize = 24;

pub const Q_TAIL: usize = 0;
pub const Q_SENDER_WAITING: usize = 4;
pub const Q_LEN: usize = 0;
pub const Q_WRITTEN: usize = 8;
pub const Q_DATA: usize = 16;

pub const A_HEAD: usize = 0;
pub const A_RECEIVER_WAITING: usize = 4;
pub const ACK_BYTES: usize = 64;

/// Counters of the status memory: one per [`crate::Fault`], then messages moved.
pub const STATUS_BYTES: usize = 64;

fn round64(n: usize) -> usize {
    n.div_ceil(64) * 64
}

/// One slot of a sampling channel carrying messages of up to `max_message` bytes.
pub fn sampling_slot(max_message: u32) -> usize {
    round64(S_DATA + max_message as usize)
}

/// The bytes of a sampling channel's memory.
pub fn sampling_bytes(max_message: u32) -> usize {
    HEADER + SAMPLING_SLOTS * sampling_slot(max_message)
}

/// One slot of a queuing channel.
pub fn queuing_slot(max_message: u32) -> usize {
    round64(Q_DATA + max_message as usize)
}

/// The bytes of a queuing channel's message memory.
pub fn queuing_bytes(max_message: u32, depth: u64) -> usize {
    HEADER + depth as usize * queuing_slot(max_message)
}
