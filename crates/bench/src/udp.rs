//! Raw UDP on 127.0.0.1: the floor every DDS figure is compared with.
//!
//! A message is an 8-byte little-endian sequence number followed by the payload. Both sockets bind to
//! 127.0.0.1 with a port the kernel picks; the server prints `127.0.0.1:PORT` as its address.
use crate::driver::{ClientEndpoint, ReplyReceiver, RequestSender, ServerEndpoint, Transport, Wait};
use crate::error::DriverError;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

/// The sequence number in front of every payload.
pub const HEADER: usize = 8;
/// The largest UDP payload over IPv4 (65,535 − 20 IP − 8 UDP).
pub const MAX_DATAGRAM: usize = 65_507;

pub struct Udp;

fn seq_of(buf: &[u8], n: usize) -> Result<u64, DriverError> {
    if n < HEADER {
        return Err(DriverError::Malformed(format!("{n}-byte datagram, shorter than the {HEADER}-byte header")));
    }
    Ok(u64::from_le_bytes(buf[..HEADER].try_into().expect("8 bytes")))
}

fn loopback_socket() -> Result<UdpSocket, DriverError> {
    UdpSocket::bind("127.0.0.1:0").map_err(|e| DriverError::io("binding a UDP socket to 127.0.0.1", e))
}

/// Blocking receive with a time-out, setting the socket option only when the wait changes.
struct Receiving {
    sock: UdpSocket,
    mode: Option<Wait>,
    buf: Vec<u8>,
}

impl Receiving {
    fn recv(&mut self, wait: Wait) -> Result<Option<(usize, SocketAddr)>, DriverError> {
        if self.mode != Some(wait) {
            match wait {
                Wait::Poll => self.sock.set_nonblocking(true),
                Wait::Block(d) => self
                    .sock
                    .set_nonblocking(false)
                    .and_then(|_| self.sock.set_read_timeout(Some(d.max(Duration::from_micros(1))))),
            }
            .map_err(|e| DriverError::io("setting the receive mode", e))?;
            self.mode = Some(wait);
        }
        match self.sock.recv_from(&mut self.buf) {
            Ok((n, from)) => Ok(Some((n, from))),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                Ok(None)
            }
            Err(e) => Err(DriverError::io("receiving", e)),
        }
    }
}

struct UdpSender {
    sock: UdpSocket,
    buf: Vec<u8>,
}

impl RequestSender for UdpSender {
    fn send(&mut self, seq: u64, payload: &[u8]) -> Result<(), DriverError> {
        self.buf.clear();
        self.buf.extend_from_slice(&seq.to_le_bytes());
        self.buf.extend_from_slice(payload);
        loop {
            match self.sock.send(&self.buf) {
                Ok(_) => return Ok(()),
                // The socket is shared with a busy-polling receiver, so it may be non-blocking.
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => std::hint::spin_loop(),
                Err(e) => return Err(DriverError::io("sending a request", e)),
            }
        }
    }
}

struct UdpReceiver(Receiving);

impl ReplyReceiver for UdpReceiver {
    fn recv(&mut self, wait: Wait) -> Result<Option<u64>, DriverError> {
        match self.0.recv(wait)? {
            Some((n, _)) => Ok(Some(seq_of(&self.0.buf, n)?)),
            None => Ok(None),
        }
    }
}

struct UdpServer {
    rx: Receiving,
    last: Option<(usize, SocketAddr)>,
}

impl ServerEndpoint for UdpServer {
    fn recv_request(&mut self, timeout: Duration) -> Result<Option<u64>, DriverError> {
        match self.rx.recv(Wait::Block(timeout))? {
            Some((n, from)) => {
                let seq = seq_of(&self.rx.buf, n)?;
                self.last = Some((n, from));
                Ok(Some(seq))
            }
            None => Ok(None),
        }
    }

    fn reply(&mut self, seq: u64) -> Result<(), DriverError> {
        let (n, to) = self.last.ok_or_else(|| DriverError::Other("reply without a request".into()))?;
        // The reply is the request's datagram with its sequence number: same size, same payload.
        self.rx.buf[..HEADER].copy_from_slice(&seq.to_le_bytes());
        self.rx.sock.send_to(&self.rx.buf[..n], to).map_err(|e| DriverError::io("sending a reply", e))?;
        Ok(())
    }
}

impl Transport for Udp {
    fn name(&self) -> &'static str {
        "udp"
    }
    fn description(&self) -> &'static str {
        "raw UDP datagrams on 127.0.0.1 (the floor for DDS)"
    }
    fn max_payload(&self) -> usize {
        MAX_DATAGRAM - HEADER
    }
    fn serve(&self, size: usize, _session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError> {
        let sock = loopback_socket()?;
        let addr = sock.local_addr().map_err(|e| DriverError::io("reading the server address", e))?;
        let rx = Receiving { sock, mode: None, buf: vec![0; (size + HEADER).max(MAX_DATAGRAM)] };
        Ok((Box::new(UdpServer { rx, last: None }), addr.to_string()))
    }
    fn connect(&self, address: &str, size: usize, _session: &str) -> Result<ClientEndpoint, DriverError> {
        let server: SocketAddr =
            address.parse().map_err(|_| DriverError::Other(format!("bad server address {address:?}")))?;
        if !server.ip().is_loopback() {
            return Err(DriverError::Other(format!("server address {server} is not on loopback")));
        }
        let sock = loopback_socket()?;
        sock.connect(server).map_err(|e| DriverError::io(format!("connecting to {server}"), e))?;
        let rx_sock = sock.try_clone().map_err(|e| DriverError::io("duplicating the socket", e))?;
        Ok(ClientEndpoint {
            sender: Box::new(UdpSender { sock, buf: Vec::with_capacity(size + HEADER) }),
            receiver: Box::new(UdpReceiver(Receiving { sock: rx_sock, mode: None, buf: vec![0; MAX_DATAGRAM] })),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_in_one_process() {
        let (mut server, addr) = Udp.serve(100, "t").unwrap();
        assert!(addr.starts_with("127.0.0.1:"), "{addr}");
        let mut client = Udp.connect(&addr, 100, "t").unwrap();
        client.sender.send(42, &[7u8; 100]).unwrap();
        assert_eq!(server.recv_request(Duration::from_secs(5)).unwrap(), Some(42));
        server.reply(42).unwrap();
        assert_eq!(client.receiver.recv(Wait::Block(Duration::from_secs(5))).unwrap(), Some(42));
        // Nothing more is coming: polling returns at once with nothing.
        assert_eq!(client.receiver.recv(Wait::Poll).unwrap(), None);
    }

    #[test]
    fn refuses_a_non_loopback_server() {
        assert!(Udp.connect("10.1.2.3:9", 8, "t").is_err());
    }
}
