//! Request/response over raw UDP: the NETWORK row of the paper's Table 1, the floor under any DDS figure.
//!
//! A request is 16 bytes: magic `PTUQ`, the reply size wanted (u32) and the request number (u64), little
//! endian. The answer is the reply size in bytes, cut into datagrams of at most [`CHUNK`] payload bytes, each
//! with a 16-byte header: request number (u64), chunk index (u32), chunk count (u32). The client has its
//! answer when every chunk of the current request is in; chunks of earlier requests are dropped. Both sides ask
//! for 8 MiB socket buffers so that a 1 MiB answer fits in flight.
use crate::monitor::{measure, LoopConfig, Outcome, Progress, Report};
use std::net::{SocketAddr, UdpSocket};
use partita_os::socket::{self, Buffer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const MAGIC: [u8; 4] = *b"PTUQ";
/// Payload bytes per datagram (fits the 65,507-byte UDP limit with the header).
pub const CHUNK: usize = 65_000;
const HEADER: usize = 16;
/// The largest answer the server sends.
pub const MAX_REPLY: usize = 64 << 20;

/// Without the privilege to force them, the buffers are as large as `net.core.rmem_max`/`wmem_max` allow;
/// smaller buffers only drop more of a large answer, which the client counts, so that is not an error.
fn set_buffers(sock: &UdpSocket) {
    for buffer in [Buffer::Receive, Buffer::Send] {
        let _ = socket::set_buffer_size(sock, buffer, 8 << 20);
    }
}

/// Answers requests on `bind` until `stop` is set; returns the number answered.
pub fn serve(bind: SocketAddr, stop: &AtomicBool) -> std::io::Result<u64> {
    let sock = UdpSocket::bind(bind)?;
    set_buffers(&sock);
    sock.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut buf = [0u8; 64];
    let mut out = vec![0u8; HEADER + CHUNK];
    let mut answered = 0;
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => continue,
            Err(e) => return Err(e),
        };
        if n < 16 || buf[0..4] != MAGIC {
            continue;
        }
        let size = (u32::from_le_bytes(buf[4..8].try_into().unwrap()) as usize).min(MAX_REPLY);
        let seq = &buf[8..16];
        let chunks = size.div_ceil(CHUNK).max(1);
        for i in 0..chunks {
            let len = CHUNK.min(size - i * CHUNK);
            out[0..8].copy_from_slice(seq);
            out[8..12].copy_from_slice(&(i as u32).to_le_bytes());
            out[12..16].copy_from_slice(&(chunks as u32).to_le_bytes());
            sock.send_to(&out[..HEADER + len], from)?;
        }
        answered += 1;
    }
    Ok(answered)
}

/// Measures request/response round trips against a [`serve`]r.
pub fn client(server: SocketAddr, reply_size: usize, config: &LoopConfig, progress: impl FnMut(&Progress)) -> std::io::Result<Report> {
    if reply_size > MAX_REPLY {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("reply size {reply_size} is over {MAX_REPLY}")));
    }
    let bind: SocketAddr = if server.is_ipv4() { "0.0.0.0:0".parse().unwrap() } else { "[::]:0".parse().unwrap() };
    let sock = UdpSocket::bind(bind)?;
    set_buffers(&sock);
    sock.connect(server)?;
    let mut buf = vec![0u8; HEADER + CHUNK + 16];
    // Wait for the server: a few short tries before measuring.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seq_base = 1u64 << 40;
    loop {
        if one(&sock, &mut buf, seq_base, 16, Duration::from_millis(200))?.is_some() {
            break;
        }
        seq_base += 1;
        if Instant::now() >= deadline {
            return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no UDP server answered at {server}")));
        }
    }
    let mut last_bytes = 0;
    let mut report = measure(config, progress, |seq, timeout| {
        Ok(match one(&sock, &mut buf, seq, reply_size, timeout)? {
            Some(n) => {
                last_bytes = n;
                Outcome::Answered
            }
            None => Outcome::TimedOut,
        })
    })?;
    report.reply_bytes = last_bytes as u64;
    report.transport = "udp".into();
    report.name = format!("udp {server}");
    Ok(report)
}

/// One request; `Some(bytes)` when every chunk of its answer arrived within `timeout`.
fn one(sock: &UdpSocket, buf: &mut [u8], seq: u64, size: usize, timeout: Duration) -> std::io::Result<Option<usize>> {
    let mut req = [0u8; 16];
    req[0..4].copy_from_slice(&MAGIC);
    req[4..8].copy_from_slice(&(size as u32).to_le_bytes());
    req[8..16].copy_from_slice(&seq.to_le_bytes());
    sock.send(&req)?;
    let deadline = Instant::now() + timeout;
    let mut got = 0usize;
    let mut bytes = 0usize;
    loop {
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        sock.set_read_timeout(Some(deadline - now))?;
        let n = match sock.recv(buf) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return Ok(None),
            // An ICMP port unreachable from an earlier send: the server is not there yet.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return Ok(None),
            Err(e) => return Err(e),
        };
        if n < HEADER || u64::from_le_bytes(buf[0..8].try_into().unwrap()) != seq {
            continue;
        }
        let chunks = u32::from_le_bytes(buf[12..16].try_into().unwrap()) as usize;
        got += 1;
        bytes += n - HEADER;
        if got >= chunks {
            return Ok(Some(bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn answers_of_every_size_arrive_whole() {
        let stop = Arc::new(AtomicBool::new(false));
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let s = stop.clone();
        let server = std::thread::spawn(move || serve(addr, &s));
        for size in [16usize, 1024, CHUNK, CHUNK + 1, 300_000] {
            let cfg = LoopConfig { count: 20, warmup: 2, ..LoopConfig::default() };
            let r = client(addr, size, &cfg, |_| {}).unwrap();
            assert_eq!(r.answered, 22, "size {size}: {} timeouts", r.timeouts);
            assert_eq!(r.reply_bytes as usize, size);
            assert_eq!(r.samples_ns.len(), 20);
        }
        stop.store(true, Ordering::Relaxed);
        assert!(server.join().unwrap().unwrap() >= 110);
    }
}
