//! Raw UDP, the floor of the network path: a `PubMessage` is one datagram `seqnum (i32 LE) ‖ data`, an
//! `AckMessage` one datagram `seqnum`. There is no discovery: a writer (`--peer`, one per reader) sends a probe
//! (`seqnum = -2`) until each reader answers it, and that is its "match". Readers listen on `--listen`; a writer
//! binds to `--listen` too when given, else to 127.0.0.1 (its peers must then be on loopback). Best-effort
//! only, as UDP is: reliable QoS is refused rather than pretended.
use crate::agent::channel::{Channel, ChannelConfig, Matched, Reliability, MAX_DATA};
use crate::agent::AgentError;
use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

const IMPL: &str = "udp";
const PROBE: i32 = -2;

struct Udp {
    socket: UdpSocket,
    peers: Vec<SocketAddr>,
    answered: BTreeSet<SocketAddr>,
    /// Readers: who sent the last `PubMessage` (the ack goes there), and whether anyone probed.
    last_sender: Option<SocketAddr>,
    probed: bool,
    writer: bool,
    buf: Vec<u8>,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> AgentError + '_ {
    move |e| AgentError::middleware(IMPL, what, e)
}

fn address(flag: &str, v: &str) -> Result<SocketAddr, AgentError> {
    v.parse().map_err(|_| AgentError::Argument { flag: flag.into(), message: format!("{v:?} is not IP:PORT") })
}

pub fn open(cfg: &ChannelConfig) -> Result<Box<dyn Channel>, AgentError> {
    if cfg.qos.reliability == Reliability::Reliable {
        return Err(AgentError::Unsupported { implementation: IMPL, what: "reliable delivery (raw UDP is best-effort; ask for --reliability best-effort)".into() });
    }
    let writer = cfg.ends.pub_writer;
    let peers = cfg.peers.iter().map(|p| address("--peer", p)).collect::<Result<Vec<_>, _>>()?;
    let bind = match (&cfg.listen, writer) {
        (Some(l), _) => address("--listen", l)?,
        (None, true) if !peers.is_empty() && peers.iter().all(|p| p.ip().is_loopback()) => "127.0.0.1:0".parse().unwrap(),
        (None, true) => return Err(AgentError::Argument { flag: "--listen".into(), message: "a writer with peers off loopback needs its own address (IP:0)".into() }),
        (None, false) => return Err(AgentError::Argument { flag: "--listen".into(), message: "a reader needs the address it listens on".into() }),
    };
    if writer && peers.is_empty() {
        return Err(AgentError::Argument { flag: "--peer".into(), message: "a writer needs the address of each reader".into() });
    }
    let socket = UdpSocket::bind(bind).map_err(io("bind"))?;
    Ok(Box::new(Udp { socket, peers, answered: BTreeSet::new(), last_sender: None, probed: false, writer, buf: vec![0; MAX_DATA + 64] }))
}

impl Udp {
    /// Receives one datagram within `timeout`: its sequence number, data length and sender.
    fn recv(&mut self, timeout: Duration) -> Result<Option<(i32, usize, SocketAddr)>, AgentError> {
        let t = timeout.max(Duration::from_micros(1));
        self.socket.set_read_timeout(Some(t)).map_err(io("receive timeout"))?;
        match self.socket.recv_from(&mut self.buf) {
            Ok((n, from)) if n >= 4 => {
                let seq = i32::from_le_bytes(self.buf[..4].try_into().unwrap());
                Ok(Some((seq, n - 4, from)))
            }
            Ok(_) => Ok(None),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Ok(None),
            Err(e) => Err(AgentError::middleware(IMPL, "receive", e)),
        }
    }
}

impl Channel for Udp {
    fn write_pub(&mut self, seq: i32, data: &[u8]) -> Result<(), AgentError> {
        let mut msg = Vec::with_capacity(4 + data.len());
        msg.extend_from_slice(&seq.to_le_bytes());
        msg.extend_from_slice(data);
        for p in &self.peers {
            self.socket.send_to(&msg, p).map_err(io("send"))?;
        }
        Ok(())
    }

    fn take_pub(&mut self, timeout: Duration, f: &mut dyn FnMut(i32, usize)) -> Result<usize, AgentError> {
        // One datagram per call: a socket's receive timeout counts in scheduler ticks (4 ms here), so a second,
        // "non-blocking" receive with a tiny timeout would cost a tick whenever nothing more is there.
        while let Some((seq, len, from)) = self.recv(timeout)? {
            if seq == PROBE {
                self.probed = true;
                self.socket.send_to(&PROBE.to_le_bytes(), from).map_err(io("probe answer"))?;
                continue;
            }
            self.last_sender = Some(from);
            f(seq, len);
            return Ok(1);
        }
        Ok(0)
    }

    fn write_ack(&mut self, seq: i32) -> Result<(), AgentError> {
        let to = self.last_sender.ok_or_else(|| AgentError::middleware(IMPL, "ack", "no request received yet"))?;
        self.socket.send_to(&seq.to_le_bytes(), to).map_err(io("send ack")).map(|_| ())
    }

    fn take_ack(&mut self, timeout: Duration, f: &mut dyn FnMut(i32)) -> Result<usize, AgentError> {
        while let Some((seq, _, from)) = self.recv(timeout)? {
            if seq == PROBE {
                self.answered.insert(from);
                continue;
            }
            f(seq);
            return Ok(1);
        }
        Ok(0)
    }

    fn matched(&mut self) -> Result<Matched, AgentError> {
        if self.writer {
            for p in self.peers.clone() {
                if !self.answered.contains(&p) {
                    self.socket.send_to(&PROBE.to_le_bytes(), p).map_err(io("probe"))?;
                }
            }
            // Answers arrive as datagrams on the same socket.
            while let Some((seq, _, from)) = self.recv(Duration::from_millis(1))? {
                if seq == PROBE {
                    self.answered.insert(from);
                }
            }
            let n = self.answered.len() as u32;
            Ok(Matched { pub_readers: n, ack_writers: n, ..Matched::default() })
        } else {
            if !self.probed {
                self.take_pub(Duration::from_millis(1), &mut |_, _| {})?;
            }
            let n = self.probed as u32;
            Ok(Matched { pub_writers: n, ack_readers: n, ..Matched::default() })
        }
    }
}
