//! The reading end of every row, on this process's reader thread: it takes each message as its path's reader
//! would, notes when the read or receive returned it, and echoes its number back to pace the writer.
use super::{iceoryx, message_header, Measured, Patience, Path, ReaderEnds, Scenario, ECHO_BYTES, FUTEX_ECHO, FUTEX_FORWARD, FUTEX_MESSAGE, REFRESH};
use crate::error::BenchError;
use partita_os::clock::monotonic_ns;
use partita_os::shm::Mapping;
use partita_ports::{PortError, QueuingDestination, QueuingSource, SamplingDestination, SamplingSource, Timeout};
use std::sync::atomic::Ordering;

/// A row's reading end, opened.
pub(crate) enum Reader {
    Sampling { forward: SamplingDestination, echo: SamplingSource },
    Queuing { forward: QueuingDestination, echo: Option<QueuingSource> },
    Futex(Mapping),
    Iceoryx2(iceoryx::Reader),
}

impl Reader {
    pub(crate) fn open(sc: &Scenario, ends: ReaderEnds, run: &str) -> Result<Reader, BenchError> {
        let key = sc.key();
        let port = |source| BenchError::Port { measurement: key.clone(), source };
        let max = sc.channel_max as u32;
        Ok(match ends {
            ReaderEnds::Sampling { forward, echo } => Reader::Sampling {
                forward: SamplingDestination::open("forward", max, REFRESH, forward).map_err(port)?,
                echo: SamplingSource::open("echo", ECHO_BYTES as u32, echo).map_err(port)?,
            },
            ReaderEnds::Queuing { forward, echo } => Reader::Queuing {
                forward: QueuingDestination::open("forward", max, sc.depth, forward).map_err(port)?,
                echo: echo.map(|e| QueuingSource::open("echo", ECHO_BYTES as u32, super::LATENCY_DEPTH, e)).transpose().map_err(port)?,
            },
            ReaderEnds::Futex(fd) => Reader::Futex(
                Mapping::map(&fd, true).map_err(|source| BenchError::SharedMemory { measurement: key.clone(), what: "map the futex's memory", source })?,
            ),
            ReaderEnds::Iceoryx2 => Reader::Iceoryx2(iceoryx::Reader::open(sc, run)?),
        })
    }

    /// Takes `total` messages (a latency row) or what the writer floods until its end (a throughput row,
    /// timed after `warmup` messages).
    pub(crate) fn run(&mut self, sc: &Scenario, total: u64, warmup: u64, patience: &mut Patience) -> Result<Measured, BenchError> {
        let key = sc.key();
        let port = |source| BenchError::Port { measurement: key.clone(), source };
        let mut buf = vec![0u8; sc.channel_max];
        let mut samples = Vec::with_capacity(total as usize);
        match self {
            Reader::Sampling { forward, echo } => {
                let mut last = 0;
                for _ in 0..total {
                    let sequence = loop {
                        match forward.read(&mut buf) {
                            Ok(s) if s.sequence != last => break s.sequence,
                            Ok(_) | Err(PortError::Empty { .. }) => patience.spin()?,
                            Err(e) => return Err(port(e)),
                        }
                    };
                    let now = monotonic_ns();
                    last = sequence;
                    let (stamp, seq) = message_header(&buf);
                    samples.push((seq, now.saturating_sub(stamp)));
                    echo.write(&seq.to_le_bytes()).map_err(port)?;
                }
            }
            Reader::Queuing { forward, echo: Some(echo) } => {
                for _ in 0..total {
                    forward.receive(&mut buf, Timeout::Infinite).map_err(port)?;
                    let now = monotonic_ns();
                    let (stamp, seq) = message_header(&buf);
                    samples.push((seq, now.saturating_sub(stamp)));
                    echo.send(&seq.to_le_bytes(), Timeout::Infinite).map_err(port)?;
                }
            }
            Reader::Queuing { forward, echo: None } => {
                // No clock per message (a clock read is a fair share of a small message's cost): the clock
                // starts at the last warm-up message and stops at the writer's end, a message of no bytes.
                let mut received = 0u64;
                let mut bytes = 0u64;
                let mut start = None;
                loop {
                    let r = forward.receive(&mut buf, Timeout::Infinite).map_err(port)?;
                    if r.len == 0 {
                        let end = monotonic_ns();
                        let (messages, bytes, seconds) = match start {
                            Some((at, n, b)) => (received - n, bytes - b, (end - at) as f64 / 1e9),
                            None => (0, 0, 0.0),
                        };
                        return Ok(Measured::Throughput { messages, bytes, seconds });
                    }
                    received += 1;
                    bytes += r.len as u64;
                    if received == warmup.max(1) {
                        start = Some((monotonic_ns(), received, bytes));
                    }
                }
            }
            Reader::Futex(m) => {
                let mut seen = 0u32;
                for _ in 0..total {
                    loop {
                        let now = m.load32(FUTEX_FORWARD, Ordering::Acquire);
                        if now != seen {
                            seen = now;
                            break;
                        }
                        m.wait(FUTEX_FORWARD, seen, None).map_err(|source| BenchError::SharedMemory { measurement: key.clone(), what: "wait on the futex", source })?;
                    }
                    m.read(FUTEX_MESSAGE, &mut buf[..sc.size]);
                    let now = monotonic_ns();
                    let (stamp, seq) = message_header(&buf);
                    samples.push((seq, now.saturating_sub(stamp)));
                    m.store32(FUTEX_ECHO, seen, Ordering::Release);
                    m.wake(FUTEX_ECHO).map_err(|source| BenchError::SharedMemory { measurement: key.clone(), what: "wake the writer", source })?;
                }
            }
            Reader::Iceoryx2(r) => r.run(sc, total, &mut samples, patience)?,
        }
        debug_assert!(sc.path != Path::QueuingFlood);
        Ok(Measured::Latency(samples))
    }
}
