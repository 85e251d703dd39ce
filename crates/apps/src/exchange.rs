//! Paper 003's client-server exchange: the client sends data to the server on a request topic, the server does
//! busy work of the length the request asks for and sends data of the same size back on a reply topic. The
//! same exchange over raw UDP is the paper's "ideal" baseline (no serialization, no topics).
//!
//! A request carries the client's name, its number, the work wanted (ns) and the data; a reply carries the
//! number, the CPU time the server's work took (its thread's CPU clock, so the check is not disturbed by the
//! server being preempted or frozen) and data of the request's size. Over UDP a request is `seq u64, work_ns
//! u64, data` and a reply `seq u64, cpu_ns u64, data`, little endian.
//!
//! The client ([`sweep`]) measures every (size, work) point of a sweep in one process, one point after the
//! other, with [`crate::monitor::measure`]'s loop (warm-up, count, time-out), and writes one JSON report.
use crate::monitor::{measure, LoopConfig, Outcome, Report};
use crate::surveillance::{reply_qos, request_qos};
use partita_dds::{DomainConfig, ListeningReader, Participant, Reader, Topic, TopicType, Writer};
use partita_os::busy::BusyWork;
use partita_os::clock::thread_cpu_ns;
use serde::{Deserialize, Serialize};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub const REQUEST_TOPIC: &str = "partita_exchange_request";
pub const REPLY_TOPIC: &str = "partita_exchange_reply";
/// The largest data of one exchange (UDP: one datagram with its 16-byte header).
pub const MAX_DATA: usize = 60_000;
/// The longest work a request may ask for.
pub const MAX_WORK_NS: u64 = 100_000_000;
const HEADER: usize = 16;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExchangeRequest {
    pub client: String,
    pub seq: u64,
    pub work_ns: u64,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExchangeReply {
    pub client: String,
    pub seq: u64,
    /// CPU time of the server's work for this request, ns.
    pub cpu_ns: u64,
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

impl TopicType for ExchangeRequest {
    fn type_name() -> &'static str {
        "partita::exchange::Request"
    }
}

impl TopicType for ExchangeReply {
    fn type_name() -> &'static str {
        "partita::exchange::Reply"
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    #[error("DDS: {0}")]
    Dds(#[from] partita_dds::DdsError),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("{0}")]
    Config(String),
    #[error("no server answered within {0:?}")]
    NoServer(Duration),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ExchangeError {
    let what = what.into();
    move |source| ExchangeError::Io { what, source }
}

/// The work a request asks for, run and timed on the calling thread's CPU clock.
fn work(busy: &BusyWork, work_ns: u64) -> u64 {
    let t = thread_cpu_ns();
    busy.run(work_ns.min(MAX_WORK_NS) as f64 / 1e3);
    thread_cpu_ns() - t
}

/// A DDS server: answers on Cyclone's receive thread (no hand-off) until dropped.
pub struct DdsServer {
    _listener: ListeningReader,
    _topics: (Topic<ExchangeRequest>, Topic<ExchangeReply>),
    _participant: Participant,
    pub calibration: BusyWork,
}

impl DdsServer {
    pub fn start(dds: &DomainConfig) -> Result<DdsServer, ExchangeError> {
        let busy = BusyWork::calibrate();
        let participant = Participant::new(dds)?;
        let req = Topic::<ExchangeRequest>::new(&participant, REQUEST_TOPIC, &request_qos())?;
        let rep = Topic::<ExchangeReply>::new(&participant, REPLY_TOPIC, &reply_qos())?;
        let replies = Writer::new(&rep, &reply_qos())?;
        let listener = ListeningReader::typed(&req, &request_qos(), move |sample| {
            if let Some(r) = sample.value {
                let cpu_ns = work(&busy, r.work_ns);
                let _ = replies.write(&ExchangeReply { client: r.client, seq: r.seq, cpu_ns, data: r.data });
            }
        })?;
        Ok(DdsServer { _listener: listener, _topics: (req, rep), _participant: participant, calibration: busy })
    }
}

/// The raw-UDP server: answers on `bind` until `stop` is set; returns the number answered.
pub fn serve_udp(bind: SocketAddr, stop: &AtomicBool) -> Result<u64, ExchangeError> {
    let busy = BusyWork::calibrate();
    let sock = UdpSocket::bind(bind).map_err(io(format!("binding {bind}")))?;
    sock.set_read_timeout(Some(Duration::from_millis(200))).map_err(io("setting a time-out"))?;
    let mut buf = vec![0u8; HEADER + MAX_DATA];
    let mut answered = 0;
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => continue,
            Err(e) => return Err(io("receiving")(e)),
        };
        if n < HEADER {
            continue;
        }
        let work_ns = u64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
        let cpu_ns = work(&busy, work_ns);
        buf[8..16].copy_from_slice(&cpu_ns.to_le_bytes());
        sock.send_to(&buf[..n], from).map_err(io(format!("answering {from}")))?;
        answered += 1;
    }
    Ok(answered)
}

/// One point of a sweep: the data size and the server's work.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Point {
    pub size: usize,
    pub work_us: f64,
    pub report: Report,
    /// Mean and largest CPU time of the server's work over the measured requests, µs: the check that the work
    /// asked for is the work done.
    pub server_cpu_mean_us: f64,
    pub server_cpu_max_us: f64,
}

/// What a client writes: every point of its sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    /// `dds` or `udp`.
    pub transport: String,
    pub points: Vec<Point>,
    /// From the client's start to the first answer, s (discovery, the server's start or boot).
    pub connect_s: f64,
}

/// Where a client sends: the DDS domain, or a UDP server's address.
pub enum Target {
    Dds(DomainConfig),
    Udp(SocketAddr),
}

trait Exchange {
    /// Sends request `seq` and waits up to `timeout` for its answer: the server's CPU time, or `None`.
    fn once(&mut self, seq: u64, work_ns: u64, data: &[u8], timeout: Duration) -> Result<Option<u64>, ExchangeError>;
}

struct DdsClient {
    name: String,
    requests: Writer<ExchangeRequest>,
    replies: Reader<ExchangeReply>,
    _topics: (Topic<ExchangeRequest>, Topic<ExchangeReply>),
    _participant: Participant,
}

impl Exchange for DdsClient {
    fn once(&mut self, seq: u64, work_ns: u64, data: &[u8], timeout: Duration) -> Result<Option<u64>, ExchangeError> {
        let deadline = Instant::now() + timeout;
        self.requests.write(&ExchangeRequest { client: self.name.clone(), seq, work_ns, data: data.to_vec() })?;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            for s in self.replies.take_wait(deadline - now)? {
                if let Some(r) = s.value {
                    if r.client == self.name && r.seq == seq {
                        return Ok(Some(r.cpu_ns));
                    }
                }
            }
        }
    }
}

struct UdpClient {
    sock: UdpSocket,
    buf: Vec<u8>,
    out: Vec<u8>,
}

impl Exchange for UdpClient {
    fn once(&mut self, seq: u64, work_ns: u64, data: &[u8], timeout: Duration) -> Result<Option<u64>, ExchangeError> {
        let deadline = Instant::now() + timeout;
        self.out.clear();
        self.out.extend_from_slice(&seq.to_le_bytes());
        self.out.extend_from_slice(&work_ns.to_le_bytes());
        self.out.extend_from_slice(data);
        self.sock.send(&self.out).map_err(io("sending"))?;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            self.sock.set_read_timeout(Some(deadline - now)).map_err(io("setting a time-out"))?;
            match self.sock.recv(&mut self.buf) {
                Ok(n) if n >= HEADER && self.buf[..8] == seq.to_le_bytes() => {
                    return Ok(Some(u64::from_le_bytes(self.buf[8..16].try_into().expect("8 bytes"))))
                }
                Ok(_) => continue,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut | std::io::ErrorKind::Interrupted) => continue,
                // The server not listening yet (ICMP port unreachable) is a lost request while connecting.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::thread::sleep((deadline - Instant::now().min(deadline)).min(Duration::from_millis(50)));
                    return Ok(None);
                }
                Err(e) => return Err(io("receiving")(e)),
            }
        }
    }
}

/// What a client measures.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    pub name: String,
    pub sizes: Vec<usize>,
    pub works_us: Vec<f64>,
    pub count: u64,
    pub warmup: u64,
    pub timeout: Duration,
    pub connect_timeout: Duration,
}

impl SweepConfig {
    pub fn check(&self) -> Result<(), ExchangeError> {
        if self.sizes.is_empty() || self.works_us.is_empty() || self.count == 0 {
            return Err(ExchangeError::Config("at least one size, one work and a count of at least 1".into()));
        }
        if let Some(s) = self.sizes.iter().find(|&&s| s == 0 || s > MAX_DATA) {
            return Err(ExchangeError::Config(format!("size {s}: it must be 1..={MAX_DATA} bytes")));
        }
        if let Some(w) = self.works_us.iter().find(|&&w| !(0.0..=MAX_WORK_NS as f64 / 1e3).contains(&w)) {
            return Err(ExchangeError::Config(format!("work {w} µs: it must be 0..={} µs", MAX_WORK_NS / 1000)));
        }
        Ok(())
    }
}

/// Measures every point of the sweep against `target`: sizes in the outer loop, works in the inner one.
pub fn sweep(cfg: &SweepConfig, target: Target, mut log: impl FnMut(&str)) -> Result<SweepReport, ExchangeError> {
    cfg.check()?;
    let t0 = Instant::now();
    let (transport, mut ex): (&str, Box<dyn Exchange>) = match target {
        Target::Dds(dds) => {
            let participant = Participant::new(&dds)?;
            let req = Topic::<ExchangeRequest>::new(&participant, REQUEST_TOPIC, &request_qos())?;
            let rep = Topic::<ExchangeReply>::new(&participant, REPLY_TOPIC, &reply_qos())?;
            let requests = Writer::new(&req, &request_qos())?;
            let replies = Reader::new(&rep, &reply_qos())?;
            ("dds", Box::new(DdsClient { name: cfg.name.clone(), requests, replies, _topics: (req, rep), _participant: participant }))
        }
        Target::Udp(addr) => {
            // Loopback for a loopback server; inside a node's namespace (partita's bridge) any local address.
            let bind: SocketAddr = match addr {
                SocketAddr::V4(a) if a.ip().is_loopback() => "127.0.0.1:0".parse().expect("an address"),
                SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("an address"),
                SocketAddr::V6(a) if a.ip().is_loopback() => "[::1]:0".parse().expect("an address"),
                SocketAddr::V6(_) => "[::]:0".parse().expect("an address"),
            };
            let sock = UdpSocket::bind(bind).map_err(io("binding the client's socket"))?;
            sock.connect(addr).map_err(io(format!("connecting to {addr}")))?;
            ("udp", Box::new(UdpClient { sock, buf: vec![0u8; HEADER + MAX_DATA], out: Vec::with_capacity(HEADER + MAX_DATA) }))
        }
    };
    // Connect: small requests until one is answered. Numbers from 2^40 up, never reused by the sweep.
    let mut seq = 1u64 << 40;
    loop {
        if ex.once(seq, 0, &[0u8; 8], Duration::from_millis(250))?.is_some() {
            break;
        }
        seq += 1;
        if t0.elapsed() >= cfg.connect_timeout {
            return Err(ExchangeError::NoServer(cfg.connect_timeout));
        }
    }
    let connect_s = t0.elapsed().as_secs_f64();
    log(&format!("exchange: connected over {transport} after {connect_s:.2} s"));
    let mut points = Vec::new();
    let mut next = 0u64;
    for &size in &cfg.sizes {
        let data = vec![0xA5u8; size];
        for &work_us in &cfg.works_us {
            let work_ns = (work_us * 1e3).round() as u64;
            let mut cpu: Vec<u64> = Vec::new();
            let loop_cfg = LoopConfig { count: cfg.count, warmup: cfg.warmup, rate: None, jitter: Duration::ZERO, duration: None, timeout: cfg.timeout };
            let mut failure = None;
            let report = measure(&loop_cfg, |_| {}, |i, timeout| {
                next += 1;
                match ex.once(next, work_ns, &data, timeout) {
                    Ok(Some(c)) => {
                        if i >= cfg.warmup {
                            cpu.push(c);
                        }
                        Ok(Outcome::Answered)
                    }
                    Ok(None) => Ok(Outcome::TimedOut),
                    Err(e) => {
                        failure = Some(e.to_string());
                        Err(std::io::Error::other("exchange failed"))
                    }
                }
            })
            .map_err(|e| ExchangeError::Config(failure.clone().unwrap_or_else(|| e.to_string())))?;
            let report = Report { transport: transport.into(), name: cfg.name.clone(), reply_bytes: size as u64, ..report };
            let n = cpu.len().max(1) as f64;
            let point = Point {
                size,
                work_us,
                server_cpu_mean_us: cpu.iter().sum::<u64>() as f64 / n / 1e3,
                server_cpu_max_us: cpu.iter().copied().max().unwrap_or(0) as f64 / 1e3,
                report,
            };
            log(&format!(
                "exchange: {size} B, work {work_us} µs: mean {:.1} µs, p99 {:.1} µs, {} timed out, server work {:.1} µs",
                point.report.summary.mean_us, point.report.summary.p99_us, point.report.timeouts, point.server_cpu_mean_us
            ));
            points.push(point);
        }
    }
    Ok(SweepReport { transport: transport.into(), points, connect_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> SweepConfig {
        SweepConfig {
            name: "t".into(),
            sizes: vec![64, 512],
            works_us: vec![0.0, 50.0],
            count: 30,
            warmup: 5,
            timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(20),
        }
    }

    #[test]
    fn bad_sweeps_are_refused_with_the_value() {
        let mut c = cfg();
        c.sizes = vec![0];
        assert!(c.check().unwrap_err().to_string().contains("size 0"));
        let mut c = cfg();
        c.works_us = vec![-1.0];
        assert!(c.check().unwrap_err().to_string().contains("work -1"));
        let mut c = cfg();
        c.count = 0;
        assert!(c.check().is_err());
    }

    #[test]
    fn the_udp_exchange_measures_every_point_and_the_server_does_the_work() {
        static STOP: AtomicBool = AtomicBool::new(false);
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        let server = std::thread::spawn(move || serve_udp(addr, &STOP));
        let r = sweep(&cfg(), Target::Udp(addr), |_| {}).unwrap();
        STOP.store(true, Ordering::Relaxed);
        assert!(server.join().unwrap().unwrap() >= 4 * 35);
        assert_eq!(r.points.len(), 4);
        for p in &r.points {
            assert_eq!(p.report.samples_ns.len(), 30, "{} B {} µs", p.size, p.work_us);
            assert_eq!(p.report.reply_bytes, p.size as u64);
        }
        // The server's thread spent CPU time on the 50 µs work and none worth speaking of on the empty one.
        assert!(r.points[1].server_cpu_mean_us > r.points[0].server_cpu_mean_us, "{:?}", r.points.iter().map(|p| p.server_cpu_mean_us).collect::<Vec<_>>());
    }

    #[test]
    fn the_dds_exchange_round_trips_on_loopback() {
        let dds = DomainConfig::loopback(57);
        let server = DdsServer::start(&dds).unwrap();
        assert!(server.calibration.iterations_per_us > 0.0);
        let mut c = cfg();
        c.sizes = vec![64];
        c.works_us = vec![10.0];
        let r = sweep(&c, Target::Dds(dds), |_| {}).unwrap();
        assert_eq!(r.transport, "dds");
        assert_eq!(r.points[0].report.samples_ns.len(), 30);
        assert_eq!(r.points[0].report.timeouts, 0);
        assert!(r.points[0].server_cpu_mean_us > 0.0);
    }
}
