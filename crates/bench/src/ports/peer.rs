//! The writing end of every row: `partita bench ports-peer`, a process of its own pinned to the writer's CPU.
//! It takes the channel ends `bench ports` created for it by their inherited descriptor numbers, writes each
//! message as its path's writer would, and waits for the echo before the next (a latency row), or floods the
//! channel for a time (a throughput row). It stops when its standard input closes (the benchmark went away).
use super::{iceoryx, make_message, Patience, Path, Scenario, Write, ECHO_BYTES, FUTEX_ECHO, FUTEX_FORWARD, FUTEX_MESSAGE, LATENCY_DEPTH, REFRESH};
use crate::error::BenchError;
use partita_os::clock::monotonic_ns;
use partita_os::shm::Mapping;
use partita_ports::{EndFds, PortError, QueuingDestination, QueuingSource, SamplingDestination, SamplingSource, Timeout};
use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The descriptor numbers of one port's end, as the writer's command line names them: `DATA,STATUS[,ACK]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndNumbers {
    pub data: RawFd,
    pub status: RawFd,
    pub ack: Option<RawFd>,
}

impl EndNumbers {
    pub fn of(end: &EndFds) -> EndNumbers {
        EndNumbers { data: end.data.as_raw_fd(), status: end.status.as_raw_fd(), ack: end.ack.as_ref().map(|a| a.as_raw_fd()) }
    }

    /// Takes the descriptors over (close-on-exec from here on).
    fn take(self, measurement: &str) -> Result<EndFds, BenchError> {
        let take = |fd| partita_os::fd::take_inherited(fd).map_err(|source| BenchError::SharedMemory { measurement: measurement.to_string(), what: "take an inherited descriptor", source });
        Ok(EndFds { data: take(self.data)?, status: take(self.status)?, ack: self.ack.map(take).transpose()? })
    }
}

impl std::fmt::Display for EndNumbers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.data, self.status)?;
        if let Some(a) = self.ack {
            write!(f, ",{a}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for EndNumbers {
    type Err = String;
    fn from_str(s: &str) -> Result<EndNumbers, String> {
        let n: Vec<RawFd> = s.split(',').map(|x| x.trim().parse()).collect::<Result<_, _>>().map_err(|_| format!("{s:?}: give descriptor numbers DATA,STATUS[,ACK]"))?;
        match n[..] {
            [data, status] => Ok(EndNumbers { data, status, ack: None }),
            [data, status, ack] => Ok(EndNumbers { data, status, ack: Some(ack) }),
            _ => Err(format!("{s:?}: give descriptor numbers DATA,STATUS[,ACK]")),
        }
    }
}

/// What the writer is told (the arguments of `partita bench ports-peer`).
#[derive(Debug, Clone)]
pub struct PeerConfig {
    pub scenario: Scenario,
    /// Messages to write: the warm-up and measured ones of a latency row; the warm-up before a throughput
    /// row's timed flood.
    pub total: u64,
    /// How long a throughput row floods after its warm-up.
    pub seconds: f64,
    /// The benchmark run's id: names its iceoryx2 services.
    pub run: String,
    /// The forward channel's source end.
    pub forward: Option<EndNumbers>,
    /// The echo channel's destination end.
    pub echo: Option<EndNumbers>,
    /// The futex row's memory.
    pub shared: Option<RawFd>,
    pub cpu: usize,
    /// The measured SCHED_FIFO priority, set by the writer itself: the thread that starts it runs one above
    /// (`Outrank` in the parent module), and the writer would inherit that.
    pub fifo: Option<u8>,
}

impl PeerConfig {
    /// The command line after `bench ports-peer`.
    pub fn args(&self) -> Vec<String> {
        let sc = &self.scenario;
        let mut a: Vec<String> = [
            ("--path", sc.path.name().to_string()),
            ("--write", sc.write.name().to_string()),
            ("--size", sc.size.to_string()),
            ("--channel-max", sc.channel_max.to_string()),
            ("--depth", sc.depth.to_string()),
            ("--total", self.total.to_string()),
            ("--seconds", self.seconds.to_string()),
            ("--run", self.run.clone()),
            ("--cpu", self.cpu.to_string()),
        ]
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
        for (flag, end) in [("--forward", self.forward), ("--echo", self.echo)] {
            if let Some(e) = end {
                a.extend([flag.to_string(), e.to_string()]);
            }
        }
        if let Some(fd) = self.shared {
            a.extend(["--shared".to_string(), fd.to_string()]);
        }
        if let Some(p) = self.fifo {
            a.extend(["--fifo".to_string(), p.to_string()]);
        }
        a
    }
}

/// The writer (`partita bench ports-peer`): runs its row until its last message is echoed, or its flood ends.
pub fn run(cfg: &PeerConfig, stop: &'static AtomicBool) -> Result<(), BenchError> {
    let sc = &cfg.scenario;
    let key = sc.key();
    if let Some(p) = cfg.fifo {
        partita_os::sched::set_current_thread_fifo(i32::from(p))
            .map_err(|e| BenchError::Peer { measurement: key.clone(), reason: format!("could not take SCHED_FIFO {p}: {e}") })?;
    }
    // Before pinning, so that this thread may run on any CPU: the benchmark's end closes its stdin.
    std::thread::spawn(move || {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stop.store(true, Ordering::Relaxed);
    });
    partita_os::sched::pin_current_thread(cfg.cpu).map_err(|source| BenchError::Pin { cpu: cfg.cpu, source })?;
    let port = |source| BenchError::Port { measurement: key.clone(), source };
    let missing = |what: &str| BenchError::Peer { measurement: key.clone(), reason: format!("was given no {what}") };
    let mut patience = Patience::new([stop, stop], None, &key);
    let max = sc.channel_max as u32;
    let mut buf = vec![0u8; sc.size];
    match sc.path {
        Path::SamplingPoll => {
            let mut forward = SamplingSource::open("forward", max, cfg.forward.ok_or_else(|| missing("--forward"))?.take(&key)?).map_err(port)?;
            let mut echo = SamplingDestination::open("echo", ECHO_BYTES as u32, REFRESH, cfg.echo.ok_or_else(|| missing("--echo"))?.take(&key)?).map_err(port)?;
            let mut echo_buf = [0u8; ECHO_BYTES];
            for seq in 0..cfg.total {
                let stamp = monotonic_ns();
                match sc.write {
                    Write::Copy => {
                        make_message(&mut buf, stamp, seq);
                        forward.write(&buf)
                    }
                    Write::InPlace => forward.write_with(sc.size, |b| make_message(b, stamp, seq)),
                }
                .map_err(port)?;
                // The echo channel's (seq + 1)-th write answers this message.
                loop {
                    match echo.read(&mut echo_buf) {
                        Ok(s) if s.sequence == seq + 1 => break,
                        Ok(_) | Err(PortError::Empty { .. }) => patience.spin()?,
                        Err(e) => return Err(port(e)),
                    }
                }
            }
        }
        Path::QueuingBlock => {
            let mut forward = QueuingSource::open("forward", max, sc.depth, cfg.forward.ok_or_else(|| missing("--forward"))?.take(&key)?).map_err(port)?;
            let mut echo = QueuingDestination::open("echo", ECHO_BYTES as u32, LATENCY_DEPTH, cfg.echo.ok_or_else(|| missing("--echo"))?.take(&key)?).map_err(port)?;
            let mut echo_buf = [0u8; ECHO_BYTES];
            for seq in 0..cfg.total {
                let stamp = monotonic_ns();
                send(&mut forward, sc, &mut buf, stamp, seq).map_err(port)?;
                echo.receive(&mut echo_buf, Timeout::Infinite).map_err(port)?;
            }
        }
        Path::QueuingFlood => {
            let mut forward = QueuingSource::open("forward", max, sc.depth, cfg.forward.ok_or_else(|| missing("--forward"))?.take(&key)?).map_err(port)?;
            for seq in 0..cfg.total {
                send(&mut forward, sc, &mut buf, 0, seq).map_err(port)?;
            }
            // The clock is read once per batch, not per message: at 64 bytes a read is a fair share of a send.
            const BATCH: u64 = 64;
            let end = monotonic_ns() + (cfg.seconds * 1e9) as u64;
            let mut seq = cfg.total;
            while monotonic_ns() < end && !stop.load(Ordering::Relaxed) {
                for _ in 0..BATCH {
                    send(&mut forward, sc, &mut buf, 0, seq).map_err(port)?;
                    seq += 1;
                }
            }
            // The end of the flood: a message of no bytes.
            forward.send(&[], Timeout::Infinite).map_err(port)?;
        }
        Path::Futex => {
            let fd = partita_os::fd::take_inherited(cfg.shared.ok_or_else(|| missing("--shared"))?)
                .map_err(|source| BenchError::SharedMemory { measurement: key.clone(), what: "take an inherited descriptor", source })?;
            let m = Mapping::map(&fd, true).map_err(|source| BenchError::SharedMemory { measurement: key.clone(), what: "map the futex's memory", source })?;
            let sys = |what| {
                let measurement = key.clone();
                move |source| BenchError::SharedMemory { measurement, what, source }
            };
            for seq in 0..cfg.total {
                let stamp = monotonic_ns();
                make_message(&mut buf, stamp, seq);
                m.write(FUTEX_MESSAGE, &buf);
                let n = (seq + 1) as u32;
                m.store32(FUTEX_FORWARD, n, Ordering::Release);
                m.wake(FUTEX_FORWARD).map_err(sys("wake the reader"))?;
                loop {
                    let echoed = m.load32(FUTEX_ECHO, Ordering::Acquire);
                    if echoed == n {
                        break;
                    }
                    m.wait(FUTEX_ECHO, echoed, None).map_err(sys("wait on the futex"))?;
                }
            }
        }
        Path::Iceoryx2Poll | Path::Iceoryx2Event => iceoryx::Writer::open(sc, &cfg.run)?.run(sc, cfg.total, &mut patience)?,
    }
    Ok(())
}

/// Sends message `seq` on a queuing port, made in the writer's buffer and copied, or made in place.
fn send(port: &mut QueuingSource, sc: &Scenario, buf: &mut [u8], stamp: u64, seq: u64) -> Result<(), PortError> {
    match sc.write {
        Write::Copy => {
            make_message(buf, stamp, seq);
            port.send(buf, Timeout::Infinite)
        }
        Write::InPlace => port.send_with(sc.size, Timeout::Infinite, |b| make_message(b, stamp, seq)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_numbers_read_back_from_the_command_line() {
        for text in ["5,6", "5,6,7"] {
            assert_eq!(text.parse::<EndNumbers>().unwrap().to_string(), text);
        }
        assert!("5".parse::<EndNumbers>().is_err());
        assert!("5,x".parse::<EndNumbers>().is_err());
    }
}
