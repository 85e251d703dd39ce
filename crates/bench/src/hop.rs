//! One forwarding hop between client and server, for the routing service's benchmark: the same request/response
//! exchange as `udp` and `dds`, with a forwarder process in the middle.
//!
//! - `udp-relay`: a minimal raw-UDP relay (`partita bench udp-relay --to ADDR`), the floor for any forwarder:
//!   one socket towards the client, one towards the server, a thread per direction, no parsing.
//! - `dds-routed`: the client on one DDS domain, the server on another, and `partita route` between them
//!   (both ways, routes triggered by a writer on one side and a reader on the other).
//!
//! The added round-trip time of a hop is the difference to `udp` and `dds` measured in the same run.
use crate::driver::{ClientEndpoint, ServerEndpoint, Transport};
use crate::error::DriverError;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// A forwarder process started by a client; killed by pid and reaped when the client ends, its configuration
/// file (if any) removed then.
pub struct Forwarder(Child, Option<std::path::PathBuf>);

impl Drop for Forwarder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        if let Some(f) = &self.1 {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn spawn_self(args: &[String]) -> Result<(Forwarder, String), DriverError> {
    let exe = std::env::current_exe().map_err(|e| DriverError::io("finding this executable", e))?;
    let mut child = Command::new(&exe)
        .args(partita_lab::setup::child_args())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| DriverError::io(format!("starting {} {}", exe.display(), args.join(" ")), e))?;
    let out = child.stdout.take().expect("piped stdout");
    let fwd = Forwarder(child, None);
    let mut line = String::new();
    BufReader::new(out).read_line(&mut line).map_err(|e| DriverError::io("reading the forwarder's READY line", e))?;
    match line.trim().strip_prefix("READY") {
        Some(rest) => Ok((fwd, rest.trim().to_string())),
        None => Err(DriverError::Other(format!("forwarder {} did not start: {line:?}", args.join(" ")))),
    }
}

/// Keeps the forwarder alive as long as either half of the client.
struct WithForwarder<T> {
    inner: T,
    _fwd: Arc<Forwarder>,
}

impl<T: crate::driver::RequestSender> crate::driver::RequestSender for WithForwarder<T> {
    fn send(&mut self, seq: u64, payload: &[u8]) -> Result<(), DriverError> {
        self.inner.send(seq, payload)
    }
}

impl<T: crate::driver::ReplyReceiver> crate::driver::ReplyReceiver for WithForwarder<T> {
    fn recv(&mut self, wait: crate::driver::Wait) -> Result<Option<u64>, DriverError> {
        self.inner.recv(wait)
    }
}

fn wrap(c: ClientEndpoint, fwd: Forwarder) -> ClientEndpoint {
    let fwd = Arc::new(fwd);
    ClientEndpoint {
        sender: Box::new(WithForwarder { inner: c.sender, _fwd: fwd.clone() }),
        receiver: Box::new(WithForwarder { inner: c.receiver, _fwd: fwd }),
    }
}

impl crate::driver::RequestSender for Box<dyn crate::driver::RequestSender> {
    fn send(&mut self, seq: u64, payload: &[u8]) -> Result<(), DriverError> {
        (**self).send(seq, payload)
    }
}

impl crate::driver::ReplyReceiver for Box<dyn crate::driver::ReplyReceiver> {
    fn recv(&mut self, wait: crate::driver::Wait) -> Result<Option<u64>, DriverError> {
        (**self).recv(wait)
    }
}

pub struct UdpRelay;

impl Transport for UdpRelay {
    fn name(&self) -> &'static str {
        "udp-relay"
    }
    fn description(&self) -> &'static str {
        "raw UDP through a minimal relay process (the floor for a forwarding hop)"
    }
    fn max_payload(&self) -> usize {
        crate::udp::Udp.max_payload()
    }
    fn serve(&self, size: usize, session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError> {
        crate::udp::Udp.serve(size, session)
    }
    fn connect(&self, address: &str, size: usize, session: &str) -> Result<ClientEndpoint, DriverError> {
        let (fwd, relay) = spawn_self(&["bench".into(), "udp-relay".into(), "--to".into(), address.into()])?;
        let client = crate::udp::Udp.connect(&relay, size, session)?;
        Ok(wrap(client, fwd))
    }
}

/// The relay's main loop (`partita bench udp-relay --to ADDR`): prints `READY 127.0.0.1:PORT`, then forwards
/// client datagrams to `to` and the server's answers back to the client that sent last, until stdin closes.
pub fn run_udp_relay(to: &str) -> Result<(), DriverError> {
    let server: SocketAddr = to.parse().map_err(|_| DriverError::Other(format!("bad server address {to:?}")))?;
    if !server.ip().is_loopback() {
        return Err(DriverError::Other(format!("relay target {server} is not on loopback")));
    }
    let front = UdpSocket::bind("127.0.0.1:0").map_err(|e| DriverError::io("binding the relay's client socket", e))?;
    let back = UdpSocket::bind("127.0.0.1:0").map_err(|e| DriverError::io("binding the relay's server socket", e))?;
    back.connect(server).map_err(|e| DriverError::io(format!("connecting to {server}"), e))?;
    let port = front.local_addr().map_err(|e| DriverError::io("reading the relay address", e))?;
    println!("READY {port}");
    use std::io::Write as _;
    std::io::stdout().flush().ok();
    let client: Arc<std::sync::Mutex<Option<SocketAddr>>> = Arc::new(std::sync::Mutex::new(None));
    let (f2, b2, c2) = (
        front.try_clone().map_err(|e| DriverError::io("duplicating a socket", e))?,
        back.try_clone().map_err(|e| DriverError::io("duplicating a socket", e))?,
        client.clone(),
    );
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while let Ok(n) = b2.recv(&mut buf) {
            let to = *c2.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(to) = to {
                let _ = f2.send_to(&buf[..n], to);
            }
        }
    });
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
    let mut buf = vec![0u8; 65_536];
    loop {
        let (n, from) = front.recv_from(&mut buf).map_err(|e| DriverError::io("relay receive", e))?;
        *client.lock().unwrap_or_else(|p| p.into_inner()) = Some(from);
        back.send(&buf[..n]).map_err(|e| DriverError::io("relay send", e))?;
    }
}

pub struct DdsRouted;

impl Transport for DdsRouted {
    fn name(&self) -> &'static str {
        "dds-routed"
    }
    fn description(&self) -> &'static str {
        "partita-dds with the client and server on two domains and `partita route` between them"
    }
    fn max_payload(&self) -> usize {
        crate::dds::MAX_PAYLOAD
    }
    fn serve(&self, size: usize, session: &str) -> Result<(Box<dyn ServerEndpoint>, String), DriverError> {
        crate::dds::DdsWaitset.serve(size, session)
    }
    fn serve_inline(
        &self,
        size: usize,
        session: &str,
        work: Arc<dyn Fn() + Send + Sync>,
    ) -> Option<Result<crate::driver::InlineServer, DriverError>> {
        crate::dds::Dds.serve_inline(size, session, work)
    }
    fn connect(&self, address: &str, _size: usize, session: &str) -> Result<ClientEndpoint, DriverError> {
        let (fwd, client_address) = start_router(address, session)?;
        let client = crate::dds::connect(&client_address)?;
        settle();
        Ok(wrap(client, fwd))
    }
    /// In closed loop the client's reply listener sends the next request, exactly as with `dds`, so the two
    /// differ only by the router hop.
    fn closed_loop_inline(
        &self,
        address: &str,
        size: usize,
        session: &str,
        total: u64,
        timeout: Duration,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Option<Result<crate::driver::LoopSamples, DriverError>> {
        let (fwd, client_address) = match start_router(address, session) {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        let outcome = crate::dds::listening_closed_loop(&client_address, size, total, timeout, stop, settle);
        drop(fwd);
        Some(outcome)
    }
}

/// Starts `partita route` between the server's domain and a client domain of its own (both ways, every topic
/// under the server's prefix); returns the router with the address the client uses.
fn start_router(address: &str, session: &str) -> Result<(Forwarder, String), DriverError> {
    let (server_domain, prefix) = crate::dds::parse_address(address)?;
    let client_domain = (server_domain + 117) % 233;
    let cfg = std::env::temp_dir().join(format!("partita-bench-router-{session}.toml"));
    let text = format!(
        "name = \"bench\"\nstats_period = \"10s\"\n[[side]]\nname = \"client\"\ndomain = {client_domain}\n\
         [[side]]\nname = \"server\"\ndomain = {server_domain}\n[[route]]\nfrom = \"client\"\nto = \"server\"\n\
         both_ways = true\nallow = [\"{prefix}/*\"]\n"
    );
    std::fs::write(&cfg, text).map_err(|e| DriverError::io(format!("writing {}", cfg.display()), e))?;
    let exe = std::env::current_exe().map_err(|e| DriverError::io("finding this executable", e))?;
    let child = Command::new(&exe)
        .args(partita_lab::setup::child_args())
        .args(["route", &cfg.to_string_lossy()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn();
    match child {
        Ok(c) => Ok((Forwarder(c, Some(cfg)), format!("domain={client_domain} topic={prefix}"))),
        Err(e) => {
            let _ = std::fs::remove_file(&cfg);
            Err(DriverError::io("starting partita route", e))
        }
    }
}

/// Matching the router's endpoints on the client's side does not mean the far side is matched yet: the router
/// needs time to build both routes before measuring (volatile samples sent earlier are lost).
fn settle() {
    std::thread::sleep(Duration::from_millis(1500));
}
